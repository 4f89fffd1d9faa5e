//! Sealing to this device: what a container's label must carry but nobody
//! else may read (the statement a lost store is rebuilt from) is encrypted
//! and authenticated with a key that lives only in the agent's data
//! directory ([`LocalKey`]; `host::keys` keeps the file).
//!
//! ChaCha20-Poly1305, with the nonce derived from the message (an HMAC of
//! it under a key of its own, SIV's way): the same statement seals to the
//! same text, so a pass that renders it again changes nothing, and a nonce
//! repeats only for the same message. The associated data binds a sealed
//! text to its purpose and its module: one container's label does not open
//! as another's.

use ring::aead::{Aad, CHACHA20_POLY1305, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use ring::hmac;

/// The length of a device-local key file.
pub const KEY_LEN: usize = 32;

/// A device-local key. Never printed.
#[derive(Clone)]
pub struct LocalKey([u8; KEY_LEN]);

impl std::fmt::Debug for LocalKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LocalKey(..)")
    }
}

/// Why a sealed text does not open.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SealError {
    /// Too short to be a sealed text.
    #[error("too short to be sealed")]
    Short,
    /// Sealed with another key, for another module, or changed since.
    #[error(
        "does not open with this device's key: sealed with another key (a data directory lost takes its key with it), for another module, or altered"
    )]
    Forged,
}

impl LocalKey {
    /// The key of these bytes.
    pub fn from_bytes(bytes: [u8; KEY_LEN]) -> LocalKey {
        LocalKey(bytes)
    }

    /// A key for one use, derived from this one.
    fn derive(&self, purpose: &[u8]) -> [u8; 32] {
        let tag = hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, &self.0), purpose);
        let mut out = [0u8; 32];
        out.copy_from_slice(tag.as_ref());
        out
    }

    fn aead(&self) -> LessSafeKey {
        let k = self.derive(b"stead seal: chacha20-poly1305");
        // The algorithm's key length is 32 bytes, as `derive` makes it.
        LessSafeKey::new(UnboundKey::new(&CHACHA20_POLY1305, &k).expect("a 32-byte key"))
    }

    /// Seals `plain` for `context` (what it is, and for whom): the nonce,
    /// then the ciphertext with its tag. `None` only past 2^38 bytes.
    pub fn seal(&self, context: &[u8], plain: &[u8]) -> Option<Vec<u8>> {
        let nk = self.derive(b"stead seal: nonce");
        let mut m = hmac::Context::with_key(&hmac::Key::new(hmac::HMAC_SHA256, &nk));
        m.update(&(context.len() as u64).to_le_bytes());
        m.update(context);
        m.update(plain);
        let mut nonce = [0u8; NONCE_LEN];
        nonce.copy_from_slice(&m.sign().as_ref()[..NONCE_LEN]);
        let mut out = plain.to_vec();
        self.aead()
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(context),
                &mut out,
            )
            .ok()?;
        let mut sealed = nonce.to_vec();
        sealed.extend_from_slice(&out);
        Some(sealed)
    }

    /// This device's age identity (X25519), derived from this key for
    /// that one use: values sealed to the device's public key
    /// ([`crate::model::age::Identity::recipient`]) open with it, and it
    /// lives and goes with the key file.
    pub fn identity(&self) -> crate::model::age::Identity {
        crate::model::age::Identity::from_bytes(self.derive(b"stead device identity: age x25519"))
    }

    /// The key this device's digests of its sealed values are keyed with
    /// (HMAC-SHA256), derived from this key for that one use.
    pub fn digest_key(&self) -> crate::model::names::DigestKey {
        crate::model::names::DigestKey(self.derive(b"stead keyed digests: hmac-sha256"))
    }

    /// The seed of this device's report key (Ed25519, the key its reports
    /// are signed with), derived from this key for that one use: it lives
    /// and goes with the key file, as the age identity does, so nothing
    /// more is kept, and it is never the age key nor the sealing key.
    pub fn report_seed(&self) -> [u8; 32] {
        self.derive(b"stead report signing: ed25519")
    }

    /// What node `node` opens the values sealed to it with.
    pub fn device(&self, node: &str) -> crate::model::sealed::Device {
        crate::model::sealed::Device::new(node.to_string(), self.identity(), self.digest_key())
    }

    /// Opens what [`LocalKey::seal`] sealed for the same `context`.
    pub fn open(&self, context: &[u8], sealed: &[u8]) -> Result<Vec<u8>, SealError> {
        let Some((nonce, body)) = sealed.split_first_chunk::<NONCE_LEN>() else {
            return Err(SealError::Short);
        };
        if body.len() < CHACHA20_POLY1305.tag_len() {
            return Err(SealError::Short);
        }
        let mut body = body.to_vec();
        let plain = self
            .aead()
            .open_in_place(
                Nonce::assume_unique_for_key(*nonce),
                Aad::from(context),
                &mut body,
            )
            .map_err(|_| SealError::Forged)?;
        Ok(plain.to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_device_identity_is_the_key_s_and_no_other_s() {
        let a = LocalKey::from_bytes([1; KEY_LEN]);
        let b = LocalKey::from_bytes([2; KEY_LEN]);
        assert_eq!(a.identity().recipient(), a.clone().identity().recipient());
        assert_ne!(a.identity().recipient(), b.identity().recipient());
        // Not the key itself, nor what it seals with.
        assert_ne!(
            a.identity().encode(),
            crate::model::age::Identity::from_bytes([1; KEY_LEN]).encode()
        );
        // The report key's seed: the key's own, stable, and none of the
        // others derived from it.
        assert_eq!(a.report_seed(), a.clone().report_seed());
        assert_ne!(a.report_seed(), b.report_seed());
        assert_ne!(a.report_seed(), [1; KEY_LEN]);
        assert_ne!(
            a.report_seed(),
            a.derive(b"stead device identity: age x25519")
        );
        assert_ne!(a.report_seed(), a.digest_key().0);
    }

    #[test]
    fn what_is_sealed_opens_only_with_its_key_and_context() {
        let k = LocalKey::from_bytes([7; KEY_LEN]);
        let other = LocalKey::from_bytes([8; KEY_LEN]);
        let s = k.seal(b"m", b"secret value").unwrap();
        assert_eq!(k.open(b"m", &s).as_deref(), Ok(&b"secret value"[..]));
        assert_eq!(k.seal(b"m", b"secret value").unwrap(), s, "deterministic");
        assert_ne!(k.seal(b"n", b"secret value").unwrap()[..12], s[..12]);
        assert!(!s.windows(6).any(|w| w == b"secret"), "not in clear");
        let mut flipped = s.clone();
        let last = flipped.len() - 1;
        flipped[last] ^= 1;
        let cases: [(&LocalKey, &[u8], &[u8], SealError); 4] = [
            (&other, b"m", &s, SealError::Forged),
            (&k, b"n", &s, SealError::Forged),
            (&k, b"m", &flipped, SealError::Forged),
            (&k, b"m", &s[..20], SealError::Short),
        ];
        for (key, cx, text, want) in cases {
            assert_eq!(key.open(cx, text), Err(want));
        }
        assert_eq!(format!("{k:?}"), "LocalKey(..)");
    }
}
