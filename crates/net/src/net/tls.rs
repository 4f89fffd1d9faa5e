//! A server's certificate checked at the time the device knows has
//! passed: rustls' own WebPKI verifier, handed max(clock, floor) as "now"
//! ([`FloorVerifier`]; the core's `model::clock::verify_at`), so a device
//! whose clock reads 1970 still verifies a certificate issued before its
//! floor, and a certificate that expired before the floor stays refused.
//! Signatures are checked by the inner verifier as they are.

use std::sync::Arc;
use std::time::Duration;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, DistinguishedName, SignatureScheme};

use crate::host::clock::Floor;

/// rustls' WebPKI verifier, checking certificates at max(clock, floor).
#[derive(Debug)]
pub struct FloorVerifier {
    inner: Arc<WebPkiServerVerifier>,
    floor: Floor,
}

impl FloorVerifier {
    /// `inner`, checking at max(the time it is given, `floor`).
    pub fn new(inner: Arc<WebPkiServerVerifier>, floor: Floor) -> FloorVerifier {
        FloorVerifier { inner, floor }
    }
}

/// The time a certificate is checked at: `now`, or the floor when later.
fn at(now: UnixTime, floor: u64) -> UnixTime {
    let secs = crate::model::clock::verify_at(now.as_secs(), floor);
    if secs == now.as_secs() {
        now
    } else {
        UnixTime::since_unix_epoch(Duration::from_secs(secs))
    }
}

impl ServerCertVerifier for FloorVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        self.inner.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            at(now, self.floor.get()),
        )
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }

    fn requires_raw_public_keys(&self) -> bool {
        self.inner.requires_raw_public_keys()
    }

    fn root_hint_subjects(&self) -> Option<&[DistinguishedName]> {
        self.inner.root_hint_subjects()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_certificate_is_checked_at_the_clock_or_the_floor() {
        let t = |s| UnixTime::since_unix_epoch(Duration::from_secs(s));
        for (now, floor, want) in [
            (0, 0, 0),
            (0, 1_700_000_000, 1_700_000_000),
            (1_800_000_000, 1_700_000_000, 1_800_000_000),
            (1_700_000_000, 1_700_000_000, 1_700_000_000),
        ] {
            assert_eq!(at(t(now), floor).as_secs(), want, "{now} {floor}");
        }
    }
}
