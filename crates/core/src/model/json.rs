//! One rule for every JSON document the agent reads (intention files, API
//! bodies, the plane's documents): no object names a key twice. JSON
//! readers differ on a repeated key (serde keeps the last one, others the
//! first), so a document that says two things is refused, naming where,
//! instead of being read as one of them. TOML refuses it by itself.
//!
//! And a TOML document as a JSON value ([`from_toml`]): the agent's
//! documents are read into their types from JSON values only, one reader
//! per type on a device that carries each reader's code.
//!
//! And where a read failed ([`read`], [`read_value`]): serde_json places
//! its error at a line and column, and [`path_at`] reads the path of the
//! field there (`modules[0].env`) back off the text. One small function
//! for every type, where a path-tracking deserializer (serde_path_to_error)
//! doubled each document type's reading code on the device.

use std::collections::BTreeSet;
use std::fmt;

use serde::de::{self, Deserialize, DeserializeOwned, Deserializer, MapAccess, SeqAccess, Visitor};

/// The longest a repeated key is shown.
const SHOWN: usize = 64;

/// A key named twice: the object it is in (`modules[0].env`, `.` for the
/// whole document) and the key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Repeated {
    /// The path of the object, as serde_path_to_error writes it.
    pub path: String,
    /// What is wrong, naming the key (cut to 64 characters).
    pub message: String,
}

/// Checks that no object in `json` names a key twice. Text that is not
/// JSON passes: the parse that follows says what is wrong with it. Depth is
/// bounded by serde_json's recursion limit (128), so nothing here walks an
/// input-controlled depth unbounded.
pub fn no_repeated_keys(json: &[u8]) -> Result<(), Repeated> {
    match read::<Unique>(json) {
        Ok(Unique) => Ok(()),
        Err(e) => {
            let message = e.message();
            match message.strip_prefix(MARK) {
                // Placed just after the key named twice: the object it is
                // in is named, not the key.
                Some(rest) => Err(Repeated {
                    path: place(json, e.error.line(), e.error.column(), false),
                    message: rest.to_string(),
                }),
                None => Ok(()),
            }
        }
    }
}

/// A JSON read that failed: the path of the field it failed at (as
/// `modules[0].env`, `.` for the whole document) and serde_json's error.
#[derive(Debug)]
pub struct Misread {
    /// Where: keys joined by `.`, array indexes in brackets.
    pub path: String,
    /// What, as serde_json says it (with its line and column).
    pub error: serde_json::Error,
    /// The byte serde_json last looked at, if any.
    found: Option<u8>,
}

impl Misread {
    /// What is wrong, without the line and column.
    pub fn message(&self) -> String {
        let text = self.error.to_string();
        let at = format!(
            " at line {} column {}",
            self.error.line(),
            self.error.column()
        );
        let said = text.strip_suffix(&at).unwrap_or(&text);
        // serde_json reads an enum's name by its first byte, and says of
        // any other than a string's or an object's "expected value": say
        // what was there.
        let was = match self.found {
            Some(b'0'..=b'9' | b'-') => "number",
            Some(b't' | b'f') => "boolean",
            Some(b'n') => "null",
            Some(b'[') => "sequence",
            _ => return said.to_string(),
        };
        if said == "expected value" {
            format!("invalid type: {was}, expected a name (a string)")
        } else {
            said.to_string()
        }
    }

    /// [`Misread::message`] and where it is in the text read (` at line
    /// L column C`), if anywhere.
    pub fn placed(&self) -> String {
        match self.error.line() {
            0 => self.message(),
            line => format!(
                "{} at line {line} column {}",
                self.message(),
                self.error.column()
            ),
        }
    }
}

/// Reads a `T` from JSON text (nothing after it), naming the field an
/// error is at.
pub fn read<'de, T: Deserialize<'de>>(json: &'de [u8]) -> Result<T, Misread> {
    serde_json::from_slice(json).map_err(|error| Misread {
        path: path_at(json, error.line(), error.column()),
        found: offset(json, error.line(), error.column())
            .and_then(|o| o.checked_sub(1))
            .and_then(|o| json.get(o).copied()),
        error,
    })
}

/// Reads a `T` from a JSON value, naming the field an error is at: the
/// value is written out and read back ([`read`]), so the line and column
/// of [`Misread::error`] are of that text, not of any the user wrote.
pub fn read_value<T: DeserializeOwned>(v: &serde_json::Value) -> Result<T, Misread> {
    // A Value's keys are strings and its numbers finite: writing it out
    // does not fail; were it to, the read of the empty text says so.
    let text = serde_json::to_vec(v).unwrap_or_default();
    read(&text)
}

/// The path of the field at `line`:`column` of `json` (serde_json's
/// place of an error: the bytes before it are read), `.` for the whole
/// document or no place. An object's key is in the path once it is read
/// (an unknown field is named), an array's index once its element began;
/// a value read whole (a number out of range, a string its type refuses,
/// a struct missing a field) names its own field.
pub fn path_at(json: &[u8], line: usize, column: usize) -> String {
    place(json, line, column, true)
}

/// The byte offset of serde_json's `line`:`column` in `json` (within
/// it), None for no place (line 0).
fn offset(json: &[u8], line: usize, column: usize) -> Option<usize> {
    if line == 0 {
        return None;
    }
    let mut start = 0;
    let mut l = 1;
    for (i, b) in json.iter().enumerate() {
        if l == line {
            break;
        }
        if *b == b'\n' {
            l += 1;
            start = i + 1;
        }
    }
    Some((start + column).min(json.len()))
}

/// [`path_at`]; a key read but not yet its `:` is in the path only if
/// `key_read` (else the object it is in is named).
fn place(json: &[u8], line: usize, column: usize, key_read: bool) -> String {
    enum Frame {
        /// `key` once read; `value` once its `:` is.
        Object { key: Option<String>, value: bool },
        /// The element's index; `element` once it began.
        Array { index: usize, element: bool },
    }
    let Some(end) = offset(json, line, column) else {
        return ".".into();
    };
    let text = &json[..end];
    let mut stack: Vec<Frame> = Vec::new();
    let mut i = 0;
    while i < text.len() {
        let b = text[i];
        // A value begins: its array's element has.
        let begins = |stack: &mut Vec<Frame>| {
            if let Some(Frame::Array { element, .. }) = stack.last_mut() {
                *element = true;
            }
        };
        match b {
            b'"' => {
                // The string's end: its closing quote, or the text's.
                let mut j = i + 1;
                while j < text.len() && text[j] != b'"' {
                    j += if text[j] == b'\\' { 2 } else { 1 };
                }
                let end = (j + 1).min(text.len());
                match stack.last_mut() {
                    Some(Frame::Object { key, value: false }) => {
                        *key = serde_json::from_slice::<String>(&text[i..end]).ok();
                    }
                    _ => begins(&mut stack),
                }
                i = end;
                continue;
            }
            b'{' | b'[' => {
                begins(&mut stack);
                stack.push(if b == b'{' {
                    Frame::Object {
                        key: None,
                        value: false,
                    }
                } else {
                    Frame::Array {
                        index: 0,
                        element: false,
                    }
                });
            }
            b'}' | b']' => {
                stack.pop();
            }
            b':' => {
                if let Some(Frame::Object { value, .. }) = stack.last_mut() {
                    *value = true;
                }
            }
            b',' => match stack.last_mut() {
                Some(Frame::Object { key, value }) => {
                    *key = None;
                    *value = false;
                }
                Some(Frame::Array { index, element }) => {
                    if *element {
                        *index += 1;
                    }
                    *element = false;
                }
                None => {}
            },
            b' ' | b'\t' | b'\n' | b'\r' => {}
            _ => begins(&mut stack),
        }
        i += 1;
    }
    let mut path = String::new();
    for frame in &stack {
        match frame {
            Frame::Object {
                key: Some(k),
                value,
            } if *value || key_read => {
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(k);
            }
            Frame::Array {
                index,
                element: true,
            } => path.push_str(&format!("[{index}]")),
            _ => {}
        }
    }
    if path.is_empty() { ".".into() } else { path }
}

/// A TOML document's value as JSON, or the path of a value JSON has no
/// place for (a float that is not finite, a date-time) and why. A float
/// that is not finite is refused here, not read as null (unset).
pub fn from_toml(t: toml::Table) -> Result<serde_json::Value, (String, String)> {
    fn value(v: toml::Value, at: &str) -> Result<serde_json::Value, (String, String)> {
        use serde_json::Value as J;
        Ok(match v {
            toml::Value::String(s) => J::String(s),
            toml::Value::Integer(i) => J::from(i),
            toml::Value::Boolean(b) => J::Bool(b),
            toml::Value::Float(f) => J::Number(
                serde_json::Number::from_f64(f)
                    .ok_or_else(|| (at.to_string(), "not a finite number".to_string()))?,
            ),
            toml::Value::Datetime(_) => {
                return Err((
                    at.to_string(),
                    "a TOML date-time has no place here (write a string)".into(),
                ));
            }
            toml::Value::Array(a) => J::Array(
                a.into_iter()
                    .enumerate()
                    .map(|(i, v)| value(v, &format!("{at}[{i}]")))
                    .collect::<Result<_, _>>()?,
            ),
            toml::Value::Table(t) => table(t, at)?,
        })
    }
    fn table(t: toml::Table, at: &str) -> Result<serde_json::Value, (String, String)> {
        let mut m = serde_json::Map::new();
        for (k, v) in t {
            let here = if at.is_empty() {
                k.clone()
            } else {
                format!("{at}.{k}")
            };
            m.insert(k, value(v, &here)?);
        }
        Ok(serde_json::Value::Object(m))
    }
    table(t, "")
}

/// Marks the error this check makes among serde_json's own.
const MARK: &str = "\u{1}repeated:";

/// Any JSON value, read only to see its keys.
struct Unique;

impl<'de> Deserialize<'de> for Unique {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Unique, D::Error> {
        d.deserialize_any(UniqueVisitor)
    }
}

struct UniqueVisitor;

impl<'de> Visitor<'de> for UniqueVisitor {
    type Value = Unique;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<Unique, E> {
        Ok(Unique)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Unique, E> {
        Ok(Unique)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Unique, E> {
        Ok(Unique)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Unique, E> {
        Ok(Unique)
    }
    fn visit_str<E>(self, _: &str) -> Result<Unique, E> {
        Ok(Unique)
    }
    fn visit_unit<E>(self) -> Result<Unique, E> {
        Ok(Unique)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Unique, A::Error> {
        while seq.next_element::<Unique>()?.is_some() {}
        Ok(Unique)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Unique, A::Error> {
        let mut seen = BTreeSet::new();
        while let Some(key) = map.next_key::<String>()? {
            if seen.contains(&key) {
                let shown: String = key.chars().take(SHOWN).collect();
                let more = if key.chars().count() > SHOWN {
                    "…"
                } else {
                    ""
                };
                return Err(de::Error::custom(format!(
                    "{MARK}the key {shown:?}{more} is given twice (a JSON reader would keep one of them silently)"
                )));
            }
            map.next_value::<Unique>()?;
            seen.insert(key);
        }
        Ok(Unique)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_given_twice_is_named_with_its_object() {
        let long = format!(r#"{{"{k}": 1, "{k}": 2}}"#, k = "k".repeat(100));
        for (json, want) in [
            (r#"{"a": 1, "b": 2}"#, None),
            (r#"{"a": {"x": 1}, "b": {"x": 1}}"#, None),
            (r#"[{"a": 1}, {"a": 1}]"#, None),
            ("not json", None),
            (r#"{"a": 1, "a": 1"#, Some((".", "\"a\" is given twice"))),
            (r#"{"a": 1, "a": 2}"#, Some((".", "\"a\" is given twice"))),
            (
                r#"{"env": {"A": "1", "A": "2"}}"#,
                Some(("env", "\"A\" is given twice")),
            ),
            (
                r#"{"modules": [{"name": "w"}, {"name": "w", "image": "a", "image": "b"}]}"#,
                Some(("modules[1]", "\"image\" is given twice")),
            ),
            (
                r#"{"a": [[{"b": {"c": 1, "c": 1}}]]}"#,
                Some(("a[0][0].b", "\"c\" is given twice")),
            ),
            (
                r#"{"\u0041": 1, "A": 2}"#,
                Some((".", "\"A\" is given twice")),
            ),
            (&long, Some((".", "kkkk\"… is given twice"))),
        ] {
            let got = no_repeated_keys(json.as_bytes());
            match want {
                None => assert_eq!(got, Ok(()), "{json}"),
                Some((path, says)) => {
                    let e = got.unwrap_err();
                    assert_eq!(e.path, path, "{json}: {e:?}");
                    assert!(e.message.contains(says), "{json}: {e:?}");
                    assert!(!e.message.contains("line"), "{json}: {e:?}");
                    assert!(e.message.len() < 200, "{json}: {e:?}");
                }
            }
        }
    }

    /// A document of the shapes the agent reads: nested structs, a map,
    /// lists, an enum, a refused string, unknown fields refused.
    #[derive(serde::Deserialize, Debug)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Doc {
        name: String,
        #[serde(default)]
        modules: Vec<Module>,
        #[serde(default)]
        env: std::collections::BTreeMap<String, String>,
        #[serde(default)]
        grid: Vec<Vec<u8>>,
    }

    #[derive(serde::Deserialize, Debug)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Module {
        name: String,
        #[serde(default)]
        restart: Option<Restart>,
        #[serde(default)]
        port: Option<Port>,
        #[serde(default)]
        when: Option<When>,
        #[serde(default)]
        after: Option<crate::model::names::ModuleName>,
    }

    #[derive(serde::Deserialize, Debug)]
    #[serde(rename_all = "lowercase")]
    enum Restart {
        Always,
        Never,
    }

    /// Read through serde's `try_from`: checked after its string is read,
    /// so the reader places a refusal at the end of the object it is in.
    #[derive(serde::Deserialize, Debug)]
    #[serde(try_from = "String")]
    struct Port(#[allow(dead_code)] u16);

    impl TryFrom<String> for Port {
        type Error = String;
        fn try_from(s: String) -> Result<Port, String> {
            s.parse().map(Port).map_err(|_| "not a port".to_string())
        }
    }

    #[derive(serde::Deserialize, Debug)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct When {
        arch: String,
    }

    #[test]
    fn an_error_names_the_field_it_is_at_as_the_reference_does() {
        for (json, want) in [
            (r#"{"name": "a"}"#, None),
            (r#"{"name": 1}"#, Some("name")),
            (r#"{"nam": "a"}"#, Some("nam")),
            (r#"{}"#, Some(".")),
            (
                r#"{"name": "a", "modules": [{"name": "w"}, {"nme": "v"}]}"#,
                Some("modules[1].nme"),
            ),
            (
                r#"{"name": "a", "modules": [{"name": "w"}, {"name": 2}]}"#,
                Some("modules[1].name"),
            ),
            (
                r#"{"name": "a", "modules": [{"name": "w"}, {}]}"#,
                Some("modules[1]"),
            ),
            (
                r#"{"name": "a", "modules": [{"name": "w", "restart": "sometimes"}]}"#,
                Some("modules[0].restart"),
            ),
            (
                r#"{"name": "a", "modules": [{"name": "w", "after": "Web"}]}"#,
                Some("modules[0].after"),
            ),
            (
                r#"{"name": "a", "modules": [{"name": "w", "port": "80"}, {"name": "x", "when": {"arch": 1}}]}"#,
                Some("modules[1].when.arch"),
            ),
            (
                r#"{"name": "a", "modules": [{"name": "w", "when": {"os": "linux"}}]}"#,
                Some("modules[0].when.os"),
            ),
            (
                r#"{"name": "a", "modules": [{"name": "w", "when": {}}]}"#,
                Some("modules[0].when"),
            ),
            (r#"{"name": "a", "env": {"A": "1", "B": 2}}"#, Some("env.B")),
            (
                r#"{"name": "a", "env": {"a.b": "1", "x\"y": 2}}"#,
                Some("env.x\"y"),
            ),
            (r#"{"name": "a", "env": {"\u0041": true}}"#, Some("env.A")),
            (
                r#"{"name": "a", "grid": [[1, 2], [3, 300]]}"#,
                Some("grid[1][1]"),
            ),
            (r#"{"name": "a", "grid": [[1, 2], "x"]}"#, Some("grid[1]")),
            (r#"{"name": "a", "modules": "none"}"#, Some("modules")),
            (r#"{"name": "a", "modules": [1]}"#, Some("modules[0]")),
            (
                "{\n  \"name\": \"a\",\n  \"modules\": [\n    {\"name\": \"w\",\n     \"restart\": 5}\n  ]\n}",
                Some("modules[0].restart"),
            ),
            ("{\"name\": \"a\"} x", Some(".")),
            ("[]", Some(".")),
        ] {
            let got = read::<Doc>(json.as_bytes());
            let reference = serde_path_to_error::deserialize::<_, Doc>(
                &mut serde_json::Deserializer::from_slice(json.as_bytes()),
            );
            match want {
                None => {
                    assert!(got.is_ok(), "{json}: {got:?}");
                    assert!(reference.is_ok(), "{json}");
                }
                Some(path) => {
                    let e = got.unwrap_err();
                    assert_eq!(e.path, path, "{json}: {}", e.error);
                    // Trailing text is the one place the reference has no
                    // path of its own (it reads no further than the value).
                    if let Err(r) = reference {
                        assert_eq!(r.path().to_string(), path, "{json}: {}", r.inner());
                    }
                    assert!(
                        !e.message().contains(" at line "),
                        "{json}: {}",
                        e.message()
                    );
                }
            }
        }
    }

    #[test]
    fn a_check_made_after_the_reader_is_placed_at_its_object() {
        // Why the checked names check inside the reader: the reference
        // names the field, the place serde_json gives only its object.
        let json = br#"{"name": "a", "modules": [{"name": "w", "port": "http"}]}"#;
        let e = read::<Doc>(json).unwrap_err();
        assert_eq!(
            (e.path.as_str(), e.message().as_str()),
            ("modules[0]", "not a port")
        );
    }

    #[test]
    fn a_value_read_names_the_field_and_no_place_in_text_nobody_wrote() {
        let v = serde_json::json!({"name": "a", "modules": [{"name": "w", "restart": 1}]});
        let e = read_value::<Doc>(&v).unwrap_err();
        assert_eq!(e.path, "modules[0].restart");
        assert_eq!(
            e.message(),
            "invalid type: number, expected a name (a string)"
        );
        assert_eq!(path_at(b"{}", 0, 0), ".");
        // A place past the text's end is read to the end.
        assert_eq!(path_at(br#"{"a": [1, {"b": 2"#, 1, 999), "a[1].b");
    }

    #[test]
    fn depth_is_bounded_by_the_parser_not_the_stack() {
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert_eq!(no_repeated_keys(deep.as_bytes()), Ok(()));
    }
}
