//! A value sealed to one device for one field of one module, written by
//! the reference age implementation (the `age` crate, rage's library):
//! the core says what the age file holds ([`sealed::bound`]: the value
//! bound to its node, module and field) and how a document carries it
//! ([`sealed::text_of`]); the `age` crate encrypts it to the device's
//! X25519 recipient. So every value a device opens was written by the
//! reference, and the device's own reader (the core's
//! [`crate::model::age::decrypt`]) is held to it by the tests here and
//! in tests/age.rs. The randomness is the `age` crate's own (the
//! operating system's); nothing else here does I/O.

use std::str::FromStr as _;

use crate::model::age::Recipient;
use crate::model::sealed::{self, Binding};

/// Seals `value` for `to`, bound to `b`: the text a document carries
/// (base64 of an age file). `to` is one the core read, so never a key of
/// low order; the error is the `age` crate's, should it refuse.
pub fn seal(to: &Recipient, b: &Binding, value: &[u8]) -> Result<String, String> {
    let recipient = age::x25519::Recipient::from_str(&to.encode())
        .map_err(|e| format!("{to}: not a recipient the age library takes: {e}"))?;
    let file = age::encrypt(&recipient, &sealed::bound(b, value))
        .map_err(|e| format!("{to}: the age library did not encrypt: {e}"))?;
    Ok(sealed::text_of(&file))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::age::Identity;
    use crate::model::names::DigestKey;
    use crate::model::sealed::{Device, SealedError, SealedText, fits, open};

    /// Every field kind with every kind of value: sealed by the reference,
    /// opened by the device's reader, where it fits.
    #[test]
    fn what_the_reference_seals_opens_on_the_device_s_reader() {
        let id = Identity::from_bytes([11; 32]);
        let device = Device::new("edge-1".into(), id.clone(), DigestKey([2; 32]));
        let binary: Vec<u8> = (0..=255u8).rev().collect();
        let big_text: Vec<u8> = (0..64 * 1024).map(|i| b'a' + (i % 26) as u8).collect();
        let big_binary: Vec<u8> = (0..64 * 1024 + 1).map(|i| (i % 251) as u8).collect();
        // (field, value, opens where it is used?)
        #[rustfmt::skip]
        let cases: [(&str, &[u8], bool); 15] = [
            ("env.A", b"", true),
            ("env.A", b"x", true),
            ("env.A", b"hunter2\nline two \"q\"", true),
            ("env.A", &big_text, true),
            ("env.A", &binary, false), // not UTF-8: sealed, opened, refused there
            ("settings.db.password", b"", true),
            ("settings.db.password", b"\x01", true),
            ("settings.db.password", &big_text, true),
            ("settings.db.password", &binary, false),
            ("files./etc/app/key.pem", b"", true),
            ("files./etc/app/key.pem", b"\0", true),
            ("files./etc/app/key.pem", &binary, true),
            ("files./etc/app/key.pem", &big_text, true),
            ("files./etc/app/key.pem", &big_binary, true),
            ("files./etc/app/key.pem", &[0xff], true),
        ];
        for (field, value, usable) in cases {
            let b = Binding {
                node: "edge-1",
                module: "db",
                field,
            };
            let what = format!("{field}, {} bytes", value.len());
            let text = seal(&id.recipient(), &b, value).unwrap_or_else(|e| panic!("{what}: {e}"));
            // The reader opens it, whole, where it was sealed for.
            assert_eq!(open(&id, &b, &text).as_deref(), Ok(value), "{what}");
            // The document's form of it, and the device's whole path.
            let t = SealedText::new(text.clone()).unwrap_or_else(|e| panic!("{what}: {e}"));
            let opened = device.open_all("db", [(field.to_string(), &t)]);
            assert_eq!(opened.is_ok(), usable, "{what}");
            assert_eq!(fits(field, value).is_ok(), usable, "{what}");
            if let Ok(o) = opened {
                assert_eq!(o.value(field), Some(value), "{what}");
            }
            // Elsewhere, or with another key: refused.
            let other = Binding {
                node: "edge-2",
                ..b.clone()
            };
            assert!(
                matches!(open(&id, &other, &text), Err(SealedError::Elsewhere { .. })),
                "{what}"
            );
            let stranger = Identity::from_bytes([12; 32]);
            assert!(open(&stranger, &b, &text).is_err(), "{what}");
            // age's randomness: the same value seals to another text.
            assert_ne!(seal(&id.recipient(), &b, value).unwrap(), text, "{what}");
        }
    }

    /// The reference opens what it sealed, and its plaintext is the
    /// core's binding byte for byte: the format stays the one the core's
    /// own writer made.
    #[test]
    fn the_reference_s_file_holds_the_core_s_bound_plaintext() {
        let id = Identity::from_bytes([13; 32]);
        let b = Binding {
            node: "edge-1",
            module: "db",
            field: "env.A",
        };
        let text = seal(&id.recipient(), &b, b"hunter2").unwrap();
        let file = base64_decode(&text);
        let theirs = age::x25519::Identity::from_str(&id.encode()).unwrap();
        assert_eq!(
            age::decrypt(&theirs, &file).unwrap(),
            b"stead-sealed/v1\nedge-1\ndb\nenv.A\nhunter2"
        );
        assert_eq!(
            sealed::bound(&b, b"hunter2"),
            b"stead-sealed/v1\nedge-1\ndb\nenv.A\nhunter2"
        );
    }

    fn base64_decode(s: &str) -> Vec<u8> {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.decode(s).unwrap()
    }
}
