//! A value sealed to one device for one field of one module: an age file
//! ([`crate::model::age`]) to the device's recipient, base64 in a
//! document, whose plaintext binds where it belongs before the value:
//!
//! ```text
//! stead-sealed/v1 LF node LF module LF field LF value
//! ```
//!
//! It opens only with the device's identity, and only where node, module
//! and field are the ones it was sealed for: a sealed value copied into
//! another module's field, or another device's document, is refused,
//! naming where it belongs (names are not secret; the value is never in
//! an error). Any age implementation can seal one (`age -r age1… | base64`
//! of the bound plaintext); `stead plane seal` does it.

use base64::Engine as _;

use crate::model::age::{self, AgeError, Identity, RANDOM_LEN, Recipient};

const MAGIC: &str = "stead-sealed/v1";
/// The largest value sealed (what a document may carry anyway).
pub const MAX_VALUE: usize = 256 * 1024;

/// Where a sealed value belongs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Binding<'a> {
    /// The node id.
    pub node: &'a str,
    /// The module.
    pub module: &'a str,
    /// The field: `env.DB_PASSWORD`, `settings.db.password`, `files./etc/app/key.pem`.
    pub field: &'a str,
}

/// Why a sealed value does not open.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SealedError {
    /// Not base64.
    #[error("a sealed value is base64 of an age file: {0}")]
    NotBase64(String),
    /// The age file does not open with this device's key.
    #[error("a sealed value does not open: {0}")]
    Age(#[from] AgeError),
    /// It opened, but is not a sealed value of this format.
    #[error("a sealed value opened, but is not stead-sealed/v1 (node, module, field, value)")]
    Format,
    /// It belongs elsewhere.
    #[error("a value sealed for node {node}, module {module}, field {field}, not here")]
    Elsewhere {
        node: String,
        module: String,
        field: String,
    },
    /// Over [`MAX_VALUE`].
    #[error("a sealed value over {MAX_VALUE} bytes")]
    TooLarge,
}

/// Seals `value` for `to`, bound to `b`, with `random` from a CSPRNG: the
/// text a document carries.
pub fn seal(to: &Recipient, b: &Binding, value: &[u8], random: &[u8; RANDOM_LEN]) -> String {
    let mut plain = format!("{MAGIC}\n{}\n{}\n{}\n", b.node, b.module, b.field).into_bytes();
    plain.extend_from_slice(value);
    base64::engine::general_purpose::STANDARD.encode(age::encrypt(to, &plain, random))
}

/// Opens what [`seal`] sealed, where `b` says it is.
pub fn open(id: &Identity, b: &Binding, sealed: &str) -> Result<Vec<u8>, SealedError> {
    // base64 of the largest value, its binding and age's overhead.
    if sealed.len() > (MAX_VALUE + 4096) / 3 * 4 {
        return Err(SealedError::TooLarge);
    }
    let file = base64::engine::general_purpose::STANDARD
        .decode(sealed.trim())
        .map_err(|e| SealedError::NotBase64(e.to_string()))?;
    let plain = age::decrypt(id, &file)?;
    let mut parts = plain.splitn(5, |&c| c == b'\n');
    let mut text = || {
        parts
            .next()
            .and_then(|p| std::str::from_utf8(p).ok())
            .map(str::to_string)
    };
    let (Some(magic), Some(node), Some(module), Some(field)) = (text(), text(), text(), text())
    else {
        return Err(SealedError::Format);
    };
    if magic != MAGIC {
        return Err(SealedError::Format);
    }
    if (node.as_str(), module.as_str(), field.as_str()) != (b.node, b.module, b.field) {
        return Err(SealedError::Elsewhere {
            node,
            module,
            field,
        });
    }
    let value = parts.next().unwrap_or_default().to_vec();
    if value.len() > MAX_VALUE {
        return Err(SealedError::TooLarge);
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_value_opens_only_on_its_device_in_its_place() {
        let device = Identity::from_bytes([3; 32]);
        let other = Identity::from_bytes([4; 32]);
        let here = Binding {
            node: "edge-1",
            module: "db",
            field: "env.DB_PASSWORD",
        };
        let sealed = seal(
            &device.recipient(),
            &here,
            b"hunter2\nwith a line",
            &[5; RANDOM_LEN],
        );
        assert_eq!(
            open(&device, &here, &sealed).unwrap(),
            b"hunter2\nwith a line"
        );
        let at = |node, module, field| Binding {
            node,
            module,
            field,
        };
        let elsewhere = |node: &str, module: &str, field: &str| SealedError::Elsewhere {
            node: node.into(),
            module: module.into(),
            field: field.into(),
        };
        // (opened with, where, what)
        #[rustfmt::skip]
        let cases = [
            (&other, at("edge-1", "db", "env.DB_PASSWORD"), SealedError::Age(AgeError::NoMatch)),
            (&device, at("edge-2", "db", "env.DB_PASSWORD"), elsewhere("edge-1", "db", "env.DB_PASSWORD")),
            (&device, at("edge-1", "web", "env.DB_PASSWORD"), elsewhere("edge-1", "db", "env.DB_PASSWORD")),
            (&device, at("edge-1", "db", "env.OTHER"), elsewhere("edge-1", "db", "env.DB_PASSWORD")),
        ];
        for (id, b, want) in cases {
            assert_eq!(open(id, &b, &sealed), Err(want), "{b:?}");
        }
        // Not base64, cut short, not of this format: refused, the value in
        // no error.
        assert!(matches!(
            open(&device, &here, "%%%"),
            Err(SealedError::NotBase64(_))
        ));
        let cut = &sealed[..sealed.len() - 8];
        let e = open(&device, &here, cut).unwrap_err().to_string();
        assert!(!e.contains("hunter2"), "{e}");
        let plain_age = base64::engine::general_purpose::STANDARD.encode(age::encrypt(
            &device.recipient(),
            b"hunter2",
            &[6; RANDOM_LEN],
        ));
        assert_eq!(open(&device, &here, &plain_age), Err(SealedError::Format));
    }
}
