//! The value of a setting or of a config default: a JSON-like tree without
//! null. Its natural JSON form (for files, the API and rendering) goes through
//! [`Value::from_json`] and [`Value::to_json`].

use crate::model::sort::Insert as _;
use std::collections::BTreeMap;

use crate::model::sealed::SealedText;

/// A setting or default value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// `true` or `false`.
    Bool(bool),
    /// A whole number.
    Int(i64),
    /// A number with a fraction.
    Float(f64),
    /// A string.
    String(String),
    /// A list.
    Array(Vec<Value>),
    /// A table (object) with sorted keys.
    Table(BTreeMap<String, Value>),
    /// A string sealed to the device (`{ "sealed": "…" }`): a setting's
    /// value, opened only when the module's files are composed.
    Sealed(SealedText),
}

/// How deeply values may nest (tables and arrays): a config is a few
/// levels deep, and nothing here recurses deeper than this.
pub const MAX_DEPTH: usize = 32;

impl Value {
    /// Converts from natural JSON. `null` has no meaning in a stored value
    /// and is refused, naming where it was found below `at`; so is nesting
    /// deeper than [`MAX_DEPTH`].
    pub fn from_json(v: serde_json::Value, at: &str) -> Result<Value, String> {
        Value::from_json_at(v, at, 0)
    }

    fn from_json_at(v: serde_json::Value, at: &str, depth: usize) -> Result<Value, String> {
        if depth >= MAX_DEPTH
            && matches!(
                v,
                serde_json::Value::Array(_) | serde_json::Value::Object(_)
            )
        {
            return Err(format!("{at}: nested deeper than {MAX_DEPTH} levels"));
        }
        Ok(match v {
            serde_json::Value::Null => return Err(format!("{at}: null is not a value here")),
            serde_json::Value::Bool(b) => Value::Bool(b),
            serde_json::Value::Number(n) => {
                if let Some(i) = n.as_i64() {
                    Value::Int(i)
                } else if let Some(f) = n.as_f64() {
                    Value::Float(f)
                } else {
                    return Err(format!("{at}: number {n} is out of range"));
                }
            }
            serde_json::Value::String(s) => Value::String(s),
            serde_json::Value::Array(a) => Value::Array(
                a.into_iter()
                    .enumerate()
                    .map(|(i, v)| Value::from_json_at(v, &format!("{at}[{i}]"), depth + 1))
                    .collect::<Result<_, _>>()?,
            ),
            serde_json::Value::Object(m) => {
                if let Some(s) = SealedText::from_json(&serde_json::Value::Object(m.clone())) {
                    return s.map(Value::Sealed).map_err(|e| format!("{at}: {e}"));
                }
                let mut t = BTreeMap::new();
                for (k, v) in m {
                    if k.starts_with("$__toml") {
                        return Err(format!(
                            "{at}: TOML dates and times are not supported; quote them as strings"
                        ));
                    }
                    let v = Value::from_json_at(v, &format!("{at}.{k}"), depth + 1)?;
                    t.insert(k, v);
                }
                Value::Table(t)
            }
        })
    }

    /// The natural JSON form.
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            Value::Bool(b) => serde_json::Value::Bool(*b),
            Value::Int(i) => serde_json::Value::from(*i),
            Value::Float(f) => serde_json::Number::from_f64(*f)
                .map(serde_json::Value::Number)
                .unwrap_or(serde_json::Value::Null),
            Value::String(s) => serde_json::Value::String(s.clone()),
            Value::Array(a) => serde_json::Value::Array(a.iter().map(Value::to_json).collect()),
            Value::Table(t) => serde_json::Value::Object(
                t.iter()
                    .map(|(k, v)| (k.clone(), v.to_json()))
                    .into_object(),
            ),
            Value::Sealed(s) => s.to_json(),
        }
    }

    /// Every sealed value in it, with its place below `at`
    /// (`settings.db.password`, `settings.hosts[1]`).
    pub fn sealed<'a>(&'a self, at: &str, out: &mut Vec<(String, &'a SealedText)>) {
        match self {
            Value::Sealed(s) => out.push((at.to_string(), s)),
            Value::Array(a) => {
                for (i, v) in a.iter().enumerate() {
                    v.sealed(&format!("{at}[{i}]"), out);
                }
            }
            Value::Table(t) => {
                for (k, v) in t {
                    v.sealed(&format!("{at}.{k}"), out);
                }
            }
            _ => {}
        }
    }

    /// The value with each sealed value below `at` replaced by what
    /// `open` makes of it (its place, then its text).
    pub fn opened<E>(
        &self,
        at: &str,
        open: &mut impl FnMut(&str, &SealedText) -> Result<Value, E>,
    ) -> Result<Value, E> {
        Ok(match self {
            Value::Sealed(s) => open(at, s)?,
            Value::Array(a) => Value::Array(
                a.iter()
                    .enumerate()
                    .map(|(i, v)| v.opened(&format!("{at}[{i}]"), open))
                    .collect::<Result<_, _>>()?,
            ),
            Value::Table(t) => Value::Table(
                t.iter()
                    .map(|(k, v)| Ok((k.clone(), v.opened(&format!("{at}.{k}"), open)?)))
                    .try_into_map::<_, _, E>()?,
            ),
            v => v.clone(),
        })
    }

    /// A short name of the kind, for error messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Value::Bool(_) => "a boolean",
            Value::Int(_) => "an integer",
            Value::Float(_) => "a float",
            Value::String(_) => "a string",
            Value::Array(_) => "an array",
            Value::Table(_) => "a table",
            Value::Sealed(_) => "a sealed value",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_round_trip() {
        let j = serde_json::json!({"a": 1, "b": {"c": "x", "d": [true, 1.5]}});
        let v = Value::from_json(j.clone(), "defaults").unwrap();
        assert_eq!(v.to_json(), j);
    }

    #[test]
    fn floats_read_back_from_their_json_text_exactly() {
        // Found by tests/fuzz.rs: serde_json's default float parser is
        // off by one unit in the last place for some numbers (an integer
        // over i64::MAX, read as a float), so a setting written out (the
        // store, the stated label, the API) read back as another value.
        for text in [
            "17323556150928753665",
            "1.7323556150928755e19",
            "0.1",
            "2.2250738585072014e-308",
            "1e300",
        ] {
            let v = Value::from_json(serde_json::from_str(text).unwrap(), "s").unwrap();
            let again = serde_json::from_str(&v.to_json().to_string()).unwrap();
            assert_eq!(Value::from_json(again, "s").unwrap(), v, "{text}");
        }
    }

    #[test]
    fn nesting_is_bounded() {
        let mut j = serde_json::json!(1);
        for _ in 0..MAX_DEPTH {
            j = serde_json::json!([j]);
        }
        assert!(Value::from_json(j.clone(), "d").is_ok());
        let e = Value::from_json(serde_json::json!({ "x": j }), "d").unwrap_err();
        assert!(e.contains("nested deeper than 32 levels"), "{e}");
    }

    #[test]
    fn null_is_refused_with_its_place() {
        let err = Value::from_json(serde_json::json!({"a": {"b": null}}), "defaults").unwrap_err();
        assert_eq!(err, "defaults.a.b: null is not a value here");
    }
}
