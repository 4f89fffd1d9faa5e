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
//! of the bound plaintext ([`bound`]), wrapped or not, or `age -a`'s
//! armor); `stead-plane seal` does it with the reference implementation
//! (the `age` crate). The device only opens: the writer here
//! ([`seal`]) is built for tests alone (feature `test-writer`).

use base64::Engine as _;

#[cfg(any(test, feature = "test-writer"))]
use crate::model::age::Recipient;
use crate::model::age::{self, AgeError, Identity};
use crate::model::names::{Digest, DigestKey};

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
    /// It opened, but cannot go where its field puts it (the value is in
    /// no message).
    #[error("the opened value cannot be used there: {0}")]
    Unfit(&'static str),
}

/// The text of a sealed value as a document carries it (base64 of an age
/// file), checked for its alphabet and size, never opened here.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SealedText(String);

impl SealedText {
    /// The text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Checks a document's text. The message names no part of it. Base64
    /// wrapped over lines (what `base64` prints: 76 columns) and age's
    /// ASCII armor (`-----BEGIN AGE ENCRYPTED FILE-----`, what `age -a`
    /// prints) are taken too, as the one line of base64 they stand for.
    pub fn new(text: String) -> Result<SealedText, String> {
        let base64 = |c: u8| c.is_ascii_alphanumeric() || matches!(c, b'+' | b'/' | b'=');
        // Line breaks and armor add a little: bounded before they go.
        if text.len() > MAX_TEXT + MAX_TEXT / 32 + 128 {
            return Err(format!(
                "a sealed value of {} bytes, over the limit of {MAX_TEXT}",
                text.len()
            ));
        }
        let text = unwrap_text(&text)?;
        if text.len() > MAX_TEXT {
            return Err(format!(
                "a sealed value of {} bytes, over the limit of {MAX_TEXT}",
                text.len()
            ));
        }
        if text.is_empty() || !text.bytes().all(base64) {
            return Err(
                "a sealed value is the base64 of an age file (what `stead plane seal` prints)"
                    .into(),
            );
        }
        Ok(SealedText(text))
    }

    /// The JSON form a document gives it: `{ "sealed": "…" }`.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({ SEALED: self.0 })
    }

    /// The text of `{ "sealed": "…" }`: `None` when `v` is not an object
    /// of that one key; an error when it is, with a text that is not one.
    pub fn from_json(v: &serde_json::Value) -> Option<Result<SealedText, String>> {
        let o = v.as_object().filter(|o| o.len() == 1)?;
        let text = o.get(SEALED)?;
        Some(match text.as_str() {
            Some(t) => SealedText::new(t.to_string()),
            None => Err("\"sealed\" is a string: the base64 of an age file".into()),
        })
    }
}

/// The armor age writes around a file (age-encryption.org/v1, "ASCII
/// armor"): base64 between these lines.
const ARMOR_BEGIN: &str = "-----BEGIN AGE ENCRYPTED FILE-----";
const ARMOR_END: &str = "-----END AGE ENCRYPTED FILE-----";

/// A sealed value's text as one line of base64: line breaks and blanks
/// (wrapped base64) dropped; age's armor taken off (its header and footer
/// lines, nothing outside them).
fn unwrap_text(text: &str) -> Result<String, String> {
    let t = text.trim();
    let body = match t.strip_prefix(ARMOR_BEGIN) {
        Some(rest) => rest.strip_suffix(ARMOR_END).ok_or(
            "a sealed value in age's armor ends with its END line (\"-----END AGE ENCRYPTED FILE-----\")",
        )?,
        None => t,
    };
    Ok(body.chars().filter(|c| !c.is_ascii_whitespace()).collect())
}

/// The key of the one-key object a document seals a value in.
pub const SEALED: &str = "sealed";
/// The longest sealed text: base64 of the largest value, its binding and
/// age's overhead.
pub const MAX_TEXT: usize = (MAX_VALUE + 4096) / 3 * 4;

/// A string a document gives in clear or sealed: an env value, a literal
/// file's content.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Text {
    /// In clear.
    Plain(String),
    /// Sealed to the device.
    Sealed(SealedText),
}

impl Text {
    /// A string, or `{ "sealed": "…" }`.
    pub fn from_json(v: serde_json::Value) -> Result<Text, String> {
        if let Some(s) = SealedText::from_json(&v) {
            return s.map(Text::Sealed);
        }
        match v {
            serde_json::Value::String(s) => Ok(Text::Plain(s)),
            _ => Err("a string, or { \"sealed\": \"…\" } (a value sealed to the device)".into()),
        }
    }

    /// Its JSON form.
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            Text::Plain(s) => serde_json::Value::from(s.as_str()),
            Text::Sealed(s) => s.to_json(),
        }
    }

    /// The text in clear, when it is.
    pub fn plain(&self) -> Option<&str> {
        match self {
            Text::Plain(s) => Some(s),
            Text::Sealed(_) => None,
        }
    }

    /// Its length as a document gives it (the sealed text's, sealed).
    pub fn len(&self) -> usize {
        match self {
            Text::Plain(s) => s.len(),
            Text::Sealed(s) => s.as_str().len(),
        }
    }

    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// What a device opens its sealed values with: its node id, its
/// identity, and the key its digests of them are keyed with. Never
/// printed.
pub struct Device {
    /// The node id values are bound to.
    pub node: String,
    identity: Identity,
    digest_key: DigestKey,
}

impl std::fmt::Debug for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Device({}, ..)", self.node)
    }
}

impl Device {
    /// The device `node` with these keys.
    pub fn new(node: String, identity: Identity, digest_key: DigestKey) -> Device {
        Device {
            node,
            identity,
            digest_key,
        }
    }

    /// The key its digests are keyed with.
    pub fn digest_key(&self) -> &DigestKey {
        &self.digest_key
    }

    /// Opens every value in `sealed` (field and text) of `module`, with
    /// its keyed digest.
    pub fn open_all<'a>(
        &self,
        module: &str,
        sealed: impl IntoIterator<Item = (String, &'a SealedText)>,
    ) -> Result<Opened, FieldError> {
        let mut values = std::collections::BTreeMap::new();
        for (field, text) in sealed {
            let b = Binding {
                node: &self.node,
                module,
                field: &field,
            };
            let value = open(&self.identity, &b, text.as_str())
                .and_then(|v| fits(&field, &v).map(|()| v).map_err(SealedError::Unfit))
                .map_err(|error| FieldError {
                    field: field.clone(),
                    error,
                })?;
            let digest = Digest::keyed(&self.digest_key, &format!("sealed:{field}"), &value);
            values.insert(field, (value, digest));
        }
        Ok(Opened {
            values,
            key: Some(self.digest_key),
        })
    }
}

/// A sealed value that did not open, by field.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {error}")]
pub struct FieldError {
    /// `env.DB_PASSWORD`, `settings.db.password`, `files./etc/key.pem`.
    pub field: String,
    /// Why.
    pub error: SealedError,
}

/// One module's sealed values, opened on its device: each value with its
/// keyed digest, by field. Never printed.
#[derive(Clone, Default)]
pub struct Opened {
    values: std::collections::BTreeMap<String, (Vec<u8>, Digest)>,
    key: Option<DigestKey>,
}

impl std::fmt::Debug for Opened {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.values.keys()).finish()
    }
}

impl Opened {
    /// The value of `field`, when it was sealed and opened.
    pub fn value(&self, field: &str) -> Option<&[u8]> {
        self.values.get(field).map(|(v, _)| v.as_slice())
    }

    /// The keyed digest of `field`'s value.
    pub fn digest(&self, field: &str) -> Option<&Digest> {
        self.values.get(field).map(|(_, d)| d)
    }

    /// The value of `field` as text, or why it is not here to be used.
    pub fn text(&self, field: &str) -> Result<String, String> {
        let v = self.value(field).ok_or_else(|| {
            format!("{field}: a sealed value, opened only by the agent on its device")
        })?;
        String::from_utf8(v.to_vec())
            .map_err(|_| format!("{field}: the sealed value is not UTF-8 text"))
    }

    /// Every opened value, to mask in what an engine says of the module.
    pub fn secrets(&self) -> Secrets {
        Secrets::of(self.values.values().map(|(v, _)| v.as_slice()))
    }

    /// A digest of `bytes` keyed with the device's key: for what holds a
    /// sealed value (a config file rendered with one). `None` without the
    /// device.
    pub fn keyed(&self, domain: &str, bytes: &[u8]) -> Option<Digest> {
        self.key.map(|k| Digest::keyed(&k, domain, bytes))
    }
}

/// Whether an opened `value` can go where `field` puts it: an env value
/// or a setting is UTF-8 text without a NUL byte (the engine refuses a
/// NUL in the env, quoting it; a config file's reader would cut the value
/// there); a literal file takes any bytes. The reason names no part of
/// the value.
pub fn fits(field: &str, value: &[u8]) -> Result<(), &'static str> {
    let text = field.starts_with("env.") || field.starts_with("settings.");
    match std::str::from_utf8(value) {
        _ if !text => Ok(()),
        Err(_) => Err("it is not UTF-8 text"),
        Ok(v) if v.contains('\0') => Err("it holds a NUL byte"),
        Ok(_) => Ok(()),
    }
}

/// The opened values of one module, in every form an engine's error may
/// quote them: what [`Secrets::mask`] hides. Never printed.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Secrets(Vec<String>);

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Secrets({})", self.0.len())
    }
}

/// The shortest piece of a value (between control characters) masked on
/// its own: shorter ones would mask ordinary words of an error.
const MIN_PIECE: usize = 4;

impl Secrets {
    /// The forms of `values` to mask: each as text, JSON-escaped and
    /// quoted as Go quotes (the engine's language), and each piece of it
    /// between control characters (what a reader that stops at a NUL or a
    /// line break quotes) of [`MIN_PIECE`] bytes or more; longest first.
    pub fn of<'a>(values: impl IntoIterator<Item = &'a [u8]>) -> Secrets {
        let mut forms = Vec::new();
        for v in values {
            let text = String::from_utf8_lossy(v).into_owned();
            let json = serde_json::to_string(&text).unwrap_or_default();
            let json = json.strip_prefix('"').and_then(|j| j.strip_suffix('"'));
            forms.push(json.unwrap_or_default().to_string());
            forms.push(go_quoted(&text));
            forms.extend(
                text.split(char::is_control)
                    .filter(|p| p.len() >= MIN_PIECE)
                    .map(str::to_string),
            );
            forms.push(text);
        }
        forms.retain(|f| !f.is_empty());
        super::sort::sort_by(&mut forms, |a, b| b.len().cmp(&a.len()).then(a.cmp(b)));
        forms.dedup();
        Secrets(forms)
    }

    /// `text` with every form of every value replaced by `(sealed)`.
    pub fn mask(&self, text: &str) -> String {
        let mut out = text.to_string();
        for f in &self.0 {
            if out.contains(f.as_str()) {
                out = out.replace(f.as_str(), crate::model::spec::SEALED_SHOWN);
            }
        }
        out
    }
}

/// `s` inside Go's `%q` quotes, without them.
fn go_quoted(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{b}' => out.push_str("\\v"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            c => out.push(c),
        }
    }
    out
}

/// Checks that `field` names a place a value may be sealed for:
/// `env.<NAME>`, `settings.<key>[.<sub>…]` or `files.<absolute path>`.
pub fn check_field(field: &str) -> Result<(), String> {
    use crate::model::names::{AbsPath, EnvName};
    let said = || {
        format!(
            "{field:?}: a sealed value is for env.<NAME>, settings.<key> or files.<absolute path>"
        )
    };
    let (kind, rest) = field.split_once('.').ok_or_else(said)?;
    match kind {
        "env" => EnvName::try_from(rest).map(drop).map_err(|e| e.0),
        "settings" if !rest.is_empty() && !rest.split('.').any(str::is_empty) => Ok(()),
        "files" => AbsPath::try_from(rest).map(drop).map_err(|e| e.0),
        _ => Err(said()),
    }
}

/// The plaintext a sealed value's age file holds: `value` bound to `b`
/// (`stead-sealed/v1 LF node LF module LF field LF value`). The operator's
/// tool encrypts it with the reference age implementation; the device
/// only opens ([`open`]).
pub fn bound(b: &Binding, value: &[u8]) -> Vec<u8> {
    let mut plain = format!("{MAGIC}\n{}\n{}\n{}\n", b.node, b.module, b.field).into_bytes();
    plain.extend_from_slice(value);
    plain
}

/// The text a document carries for an age file: its standard base64.
pub fn text_of(file: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(file)
}

/// Seals `value` for `to`, bound to `b`, with `random` from a CSPRNG: the
/// text a document carries (refused for a key of low order). Tests only
/// (see [`age::encrypt`]): values a device opens are sealed by
/// `stead-plane seal`, with the reference age implementation.
#[cfg(any(test, feature = "test-writer"))]
pub fn seal(
    to: &Recipient,
    b: &Binding,
    value: &[u8],
    random: &[u8; age::RANDOM_LEN],
) -> Result<String, age::AgeError> {
    age::encrypt(to, &bound(b, value), random).map(|f| text_of(&f))
}

/// Opens what [`seal`] sealed, where `b` says it is.
pub fn open(id: &Identity, b: &Binding, sealed: &str) -> Result<Vec<u8>, SealedError> {
    if sealed.len() > MAX_TEXT {
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
    use crate::model::age::RANDOM_LEN;

    #[test]
    fn a_field_is_one_a_document_can_seal() {
        for ok in [
            "env.DB_PASSWORD",
            "settings.db.password",
            "settings.x",
            "files./etc/k.pem",
        ] {
            assert_eq!(check_field(ok), Ok(()), "{ok}");
        }
        for bad in [
            "DB_PASSWORD",
            "env.",
            "env.A B",
            "settings.",
            "settings.a..b",
            "files.etc/k",
            "image.x",
        ] {
            assert!(check_field(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn an_opened_value_goes_only_where_it_can_be_used() {
        // (field, value, refused because)
        #[rustfmt::skip]
        let cases: [(&str, &[u8], Option<&str>); 9] = [
            ("env.A", b"hunter2", None),
            ("env.A", b"two\nlines", None),
            ("env.A", b"hun\0ter2", Some("it holds a NUL byte")),
            ("env.A", b"\xff\xfe", Some("it is not UTF-8 text")),
            ("settings.db.password", b"hunter2", None),
            ("settings.db.password", b"\0", Some("it holds a NUL byte")),
            ("settings.db.password", b"\xc3", Some("it is not UTF-8 text")),
            ("files./etc/k.bin", b"\0\xff any bytes", None),
            ("files./etc/k.pem", b"", None),
        ];
        for (field, value, want) in cases {
            assert_eq!(fits(field, value).err(), want, "{field}");
        }
        // Refused when opened, naming the field alone.
        let device = Device::new(
            "edge-1".into(),
            Identity::from_bytes([3; 32]),
            DigestKey([1; 32]),
        );
        let b = Binding {
            node: "edge-1",
            module: "db",
            field: "env.A",
        };
        let text = SealedText::new(
            seal(
                &device.identity.recipient(),
                &b,
                b"hun\0ter2",
                &[5; RANDOM_LEN],
            )
            .unwrap(),
        )
        .unwrap();
        let e = device
            .open_all("db", [("env.A".to_string(), &text)])
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "env.A: the opened value cannot be used there: it holds a NUL byte"
        );
    }

    #[test]
    fn whatever_an_engine_says_of_a_module_is_masked_of_its_opened_values() {
        let s = Secrets::of([
            b"secr\0etvalue\nline2 \"q\"".as_slice(),
            b"hunter2",
            b"ab\0cd",
        ]);
        // (what the engine said, shown)
        #[rustfmt::skip]
        let cases = [
            // Docker's runc, quoting the env entry as Go does.
            (r#"environment variable value can't contain null(\x00): "A=secr\x00etvalue\nline2 \"q\"": unknown"#,
             r#"environment variable value can't contain null(\x00): "A=(sealed)": unknown"#),
            ("as it is: secr\0etvalue\nline2 \"q\"", "as it is: (sealed)"),
            (r#"in JSON: "secr\u0000etvalue\nline2 \"q\"""#, r#"in JSON: "(sealed)""#),
            // Cut at the NUL, or at the line break, by a reader in C.
            ("cut: secr.", "cut: (sealed)."),
            ("after: etvalue", "after: (sealed)"),
            ("twice: hunter2 hunter2", "twice: (sealed) (sealed)"),
            // Pieces too short to mask alone; the whole value is.
            ("ab cd ab\0cd", "ab cd (sealed)"),
            ("nothing of it", "nothing of it"),
        ];
        for (said, shown) in cases {
            assert_eq!(s.mask(said), shown, "{said}");
        }
        assert_eq!(format!("{s:?}"), format!("Secrets({})", s.0.len()));
        assert_eq!(Secrets::default().mask("hunter2"), "hunter2");
    }

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
        )
        .unwrap();
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
        let plain_age = base64::engine::general_purpose::STANDARD
            .encode(age::encrypt(&device.recipient(), b"hunter2", &[6; RANDOM_LEN]).unwrap());
        assert_eq!(open(&device, &here, &plain_age), Err(SealedError::Format));
    }

    #[test]
    fn wrapped_base64_and_age_s_armor_read_as_the_one_line_they_stand_for() {
        let device = Identity::from_bytes([3; 32]);
        let here = Binding {
            node: "edge-1",
            module: "db",
            field: "env.A",
        };
        let line = seal(&device.recipient(), &here, b"hunter2", &[5; RANDOM_LEN]).unwrap();
        let wrap = |n: usize, nl: &str| {
            line.as_bytes()
                .chunks(n)
                .map(|c| std::str::from_utf8(c).unwrap())
                .collect::<Vec<_>>()
                .join(nl)
        };
        let armored = format!("{ARMOR_BEGIN}\n{}\n{ARMOR_END}\n", wrap(64, "\n"));
        // (the text a document gives, read as the line)
        for text in [
            line.clone(),
            wrap(76, "\n") + "\n", // `| base64`
            wrap(64, "\r\n"),
            format!("  {line}\n"),
            armored.clone(),
        ] {
            let t = SealedText::new(text.clone()).unwrap_or_else(|e| panic!("{text:?}: {e}"));
            assert_eq!(t.as_str(), line, "{text:?}");
            assert_eq!(open(&device, &here, t.as_str()).unwrap(), b"hunter2");
        }
        // Armor cut short, or base64 with other characters: refused.
        let cut = armored
            .trim_end()
            .strip_suffix(ARMOR_END)
            .unwrap()
            .to_string();
        assert!(SealedText::new(cut).unwrap_err().contains("END line"));
        assert!(SealedText::new(format!("{line}!")).is_err());
        assert!(SealedText::new("\n \n".into()).is_err());
    }
}
