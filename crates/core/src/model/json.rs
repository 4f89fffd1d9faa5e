//! One rule for every JSON document the agent reads (intention files, API
//! bodies, the plane's documents): no object names a key twice. JSON
//! readers differ on a repeated key (serde keeps the last one, others the
//! first), so a document that says two things is refused, naming where,
//! instead of being read as one of them. TOML refuses it by itself.
//!
//! And a TOML document as a JSON value ([`from_toml`]): the agent's
//! documents are read into their types from JSON values only, one reader
//! per type on a device that carries each reader's code.

use std::collections::BTreeSet;
use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

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
    let mut de = serde_json::Deserializer::from_slice(json);
    match serde_path_to_error::deserialize::<_, Unique>(&mut de) {
        Ok(Unique) => Ok(()),
        Err(e) => {
            let message = e.inner().to_string();
            match message.strip_prefix(MARK) {
                Some(rest) => Err(Repeated {
                    path: e.path().to_string(),
                    message: rest
                        .rsplit_once(" at line ")
                        .map_or(rest, |(m, _)| m)
                        .to_string(),
                }),
                None => Ok(()),
            }
        }
    }
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

    #[test]
    fn depth_is_bounded_by_the_parser_not_the_stack() {
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert_eq!(no_repeated_keys(deep.as_bytes()), Ok(()));
    }
}
