//! The value of a setting or of a config default: a JSON-like tree without
//! null. Its natural JSON form (for files, the API and rendering) goes through
//! [`Value::from_json`] and [`Value::to_json`].

use std::collections::BTreeMap;

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
}

impl Value {
    /// Converts from natural JSON. `null` has no meaning in a stored value
    /// and is refused, naming where it was found below `at`.
    pub fn from_json(v: serde_json::Value, at: &str) -> Result<Value, String> {
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
                    .map(|(i, v)| Value::from_json(v, &format!("{at}[{i}]")))
                    .collect::<Result<_, _>>()?,
            ),
            serde_json::Value::Object(m) => {
                let mut t = BTreeMap::new();
                for (k, v) in m {
                    if k.starts_with("$__toml") {
                        return Err(format!(
                            "{at}: TOML dates and times are not supported; quote them as strings"
                        ));
                    }
                    let v = Value::from_json(v, &format!("{at}.{k}"))?;
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
            Value::Table(t) => {
                serde_json::Value::Object(t.iter().map(|(k, v)| (k.clone(), v.to_json())).collect())
            }
        }
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
    fn null_is_refused_with_its_place() {
        let err = Value::from_json(serde_json::json!({"a": {"b": null}}), "defaults").unwrap_err();
        assert_eq!(err, "defaults.a.b: null is not a value here");
    }
}
