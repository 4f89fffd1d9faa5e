//! Authenticating to a host that is not public (the central plane's): a
//! bearer token, an S3 access key (AWS Signature Version 4,
//! [`crate::net::sigv4`]) or a client certificate (mutual TLS). Each is
//! read from its file when it is used (a token or a key at each request,
//! a certificate when it changed), so a file replaced in place rotates it
//! without a restart. A file that holds a secret must be the owner's alone
//! (mode 0600, or 0400): one others may read is refused, naming the file
//! and its mode, never its content.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use http::{HeaderName, HeaderValue, Method, Uri};

use crate::net::sigv4::{self, Credentials};

/// The largest secret file read.
const MAX_SECRET_FILE: u64 = 64 * 1024;

/// Reads a secret file as text: the agent's own file alone
/// ([`crate::host::files::read_secret`]), at most 64 KiB.
pub fn read_secret(path: &Path) -> Result<String, String> {
    let bytes = crate::host::files::read_secret(path, MAX_SECRET_FILE)?;
    String::from_utf8(bytes).map_err(|_| format!("{}: not UTF-8 text", path.display()))
}

/// How each request to a host is authenticated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HostAuth {
    /// `Authorization: Bearer <the file's first line>`.
    Bearer { token_file: PathBuf },
    /// AWS Signature Version 4 for S3, with a key from an AWS credentials
    /// file (its `[default]` profile).
    S3 {
        credentials: PathBuf,
        region: String,
    },
}

impl HostAuth {
    /// The headers that authenticate one request of `method` to `uri`
    /// with `body`, at `now`, read from the file as it is now.
    pub fn headers(
        &self,
        method: &Method,
        uri: &Uri,
        body: &[u8],
        now: u64,
    ) -> Result<Vec<(HeaderName, HeaderValue)>, String> {
        let value = |v: String, what: &str| {
            HeaderValue::from_str(&v).map_err(|_| format!("{what} cannot be sent as a header"))
        };
        match self {
            HostAuth::Bearer { token_file } => {
                let text = read_secret(token_file)?;
                let token = text.lines().next().unwrap_or("").trim();
                if token.is_empty() {
                    return Err(format!("{}: no token in it", token_file.display()));
                }
                Ok(vec![(
                    http::header::AUTHORIZATION,
                    value(format!("Bearer {token}"), "the token")?,
                )])
            }
            HostAuth::S3 {
                credentials,
                region,
            } => {
                let c = Credentials::parse(&read_secret(credentials)?, "default")
                    .map_err(|e| format!("{}: {e}", credentials.display()))?;
                let host = uri
                    .authority()
                    .map(|a| {
                        a.as_str()
                            .rsplit('@')
                            .next()
                            .unwrap_or(a.as_str())
                            .to_string()
                    })
                    .ok_or_else(|| format!("{uri}: no host"))?;
                let date = sigv4::amz_date(now);
                let hash = sigv4::hex_sha256(body);
                let mut signed: Vec<(&str, &str)> = vec![
                    ("host", &host),
                    ("x-amz-content-sha256", &hash),
                    ("x-amz-date", &date),
                ];
                if let Some(t) = &c.session_token {
                    signed.push(("x-amz-security-token", t));
                }
                let r = sigv4::Request {
                    method: method.as_str(),
                    path: uri.path(),
                    query: uri.query().unwrap_or(""),
                    headers: &signed,
                    payload_hash: &hash,
                };
                let authorization = sigv4::authorization(&c, region, "s3", &date, &r);
                let mut out = vec![(
                    http::header::AUTHORIZATION,
                    value(authorization, "the signature")?,
                )];
                for (k, v) in signed {
                    let name = HeaderName::from_static(match k {
                        "host" => "host",
                        "x-amz-content-sha256" => "x-amz-content-sha256",
                        "x-amz-date" => "x-amz-date",
                        _ => "x-amz-security-token",
                    });
                    out.push((name, value(v.to_string(), k)?));
                }
                Ok(out)
            }
        }
    }
}

/// A client certificate and its key (PEM files), read again when either
/// file changed: replacing them rotates the certificate for the next
/// connection.
#[derive(Debug)]
pub struct ClientCert {
    cert: PathBuf,
    key: PathBuf,
    provider: Arc<rustls::crypto::CryptoProvider>,
    loaded: Mutex<Option<(Stamp, Arc<rustls::sign::CertifiedKey>)>>,
}

/// When the files were last modified, and their sizes.
type Stamp = [(Option<SystemTime>, u64); 2];

impl ClientCert {
    /// The certificate in `cert` with the key in `key`, read when first
    /// used ([`ClientCert::check`]).
    pub fn new(
        cert: &Path,
        key: &Path,
        provider: Arc<rustls::crypto::CryptoProvider>,
    ) -> ClientCert {
        ClientCert {
            cert: cert.to_path_buf(),
            key: key.to_path_buf(),
            provider,
            loaded: Mutex::new(None),
        }
    }

    /// Whether the certificate and its key can be used as they are now:
    /// the error names the file at fault (a key others may read, with its
    /// mode), as a token file's does, until it is put right.
    pub fn check(&self) -> Result<(), String> {
        self.load().map(drop)
    }

    fn stamp(&self) -> Stamp {
        let s = |p: &Path| std::fs::metadata(p).map_or((None, 0), |m| (m.modified().ok(), m.len()));
        [s(&self.cert), s(&self.key)]
    }

    fn load(&self) -> Result<Arc<rustls::sign::CertifiedKey>, String> {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer};
        let stamp = self.stamp();
        let mut loaded = self.loaded.lock().expect("client certificate lock");
        if let Some((s, k)) = loaded.as_ref().filter(|(s, _)| *s == stamp) {
            let _ = s;
            return Ok(k.clone());
        }
        let bytes = std::fs::read(&self.cert)
            .map_err(|e| format!("cannot read {}: {e}", self.cert.display()))?;
        let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&bytes)
            .collect::<Result<_, _>>()
            .map_err(|e| format!("{}: not PEM certificates: {e}", self.cert.display()))?;
        if chain.is_empty() {
            return Err(format!("{}: no certificate", self.cert.display()));
        }
        let key_text = read_secret(&self.key)?;
        let key = PrivateKeyDer::from_pem_slice(key_text.as_bytes())
            .map_err(|e| format!("{}: not a PEM private key: {e}", self.key.display()))?;
        let k = rustls::sign::CertifiedKey::from_der(chain, key, &self.provider)
            .map_err(|e| format!("{} with {}: {e}", self.cert.display(), self.key.display()))?;
        let k = Arc::new(k);
        *loaded = Some((stamp, k.clone()));
        Ok(k)
    }
}

impl rustls::client::ResolvesClientCert for ClientCert {
    fn resolve(
        &self,
        _hints: &[&[u8]],
        _schemes: &[rustls::SignatureScheme],
    ) -> Option<Arc<rustls::sign::CertifiedKey>> {
        match self.load() {
            Ok(k) => Some(k),
            Err(e) => {
                tracing::warn!("client certificate: {e}");
                // The one read before, while the new one does not read.
                self.loaded
                    .lock()
                    .expect("client certificate lock")
                    .as_ref()
                    .map(|(_, k)| k.clone())
            }
        }
    }

    fn has_certs(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_secret_file_others_may_read_is_refused_and_a_token_is_read_at_each_request() {
        let d = tempfile::tempdir().unwrap();
        let token = d.path().join("token");
        std::fs::write(&token, "t0ken-1\n").unwrap();
        std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o644)).unwrap();
        let auth = HostAuth::Bearer {
            token_file: token.clone(),
        };
        let uri: Uri = "https://plane.example/fleet/nodes/a/desired.json"
            .parse()
            .unwrap();
        let e = auth.headers(&Method::GET, &uri, b"", 0).unwrap_err();
        assert!(
            e.contains("may be read by others (mode 0644): make it 0600"),
            "{e}"
        );
        assert!(!e.contains("t0ken"), "{e}");
        std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).unwrap();
        let h = auth.headers(&Method::GET, &uri, b"", 0).unwrap();
        assert_eq!(h[0].1, "Bearer t0ken-1");
        std::fs::write(&token, "t0ken-2\n").unwrap();
        let h = auth.headers(&Method::GET, &uri, b"", 0).unwrap();
        assert_eq!(h[0].1, "Bearer t0ken-2", "rotated by replacing the file");
    }

    #[test]
    fn an_s3_request_carries_its_signature_and_what_it_signed() {
        let d = tempfile::tempdir().unwrap();
        let creds = d.path().join("credentials");
        std::fs::write(
            &creds,
            "[default]\naws_access_key_id = AKIAIOSFODNN7EXAMPLE\naws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\naws_session_token = tok\n",
        )
        .unwrap();
        std::fs::set_permissions(&creds, std::fs::Permissions::from_mode(0o600)).unwrap();
        let auth = HostAuth::S3 {
            credentials: creds,
            region: "eu-west-1".into(),
        };
        let uri: Uri = "http://127.0.0.1:9000/fleet/nodes/a/status.json"
            .parse()
            .unwrap();
        let h = auth
            .headers(&Method::PUT, &uri, b"{}", 1_369_353_600)
            .unwrap();
        let get = |n: &str| {
            h.iter()
                .find(|(k, _)| k.as_str() == n)
                .map(|(_, v)| v.to_str().unwrap().to_string())
                .unwrap()
        };
        assert_eq!(get("host"), "127.0.0.1:9000");
        assert_eq!(get("x-amz-date"), "20130524T000000Z");
        assert_eq!(get("x-amz-content-sha256"), sigv4::hex_sha256(b"{}"));
        assert_eq!(get("x-amz-security-token"), "tok");
        let a = get("authorization");
        assert!(
            a.starts_with("AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/eu-west-1/s3/aws4_request, SignedHeaders=host;x-amz-content-sha256;x-amz-date;x-amz-security-token, Signature="),
            "{a}"
        );
        assert!(!a.contains("wJalr"), "{a}");
    }
}
