//! A module's mergeable config file: its schema (path, format, defaults),
//! merging settings over the defaults, and rendering the result as JSON,
//! TOML or env lines. Pure: nothing here reads or writes a file.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::model::names::{AbsPath, SettingKey};
use crate::model::value::Value;

/// The format of a module's mergeable config file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ConfigFormat {
    /// Pretty-printed JSON with sorted keys.
    Json,
    /// TOML.
    Toml,
    /// `KEY=value` lines; nested keys joined with `_` and upper-cased.
    Env,
}

impl ConfigFormat {
    /// Its name in intention files.
    pub fn as_str(self) -> &'static str {
        match self {
            ConfigFormat::Json => "json",
            ConfigFormat::Toml => "toml",
            ConfigFormat::Env => "env",
        }
    }
}

/// The module's mergeable config file.
#[derive(Clone, Debug, PartialEq)]
pub struct ConfigFile {
    /// Where the container sees it.
    pub path: AbsPath,
    /// How it is rendered.
    pub format: ConfigFormat,
    /// The module's defaults, a table.
    pub defaults: BTreeMap<String, Value>,
    /// The signal that makes the module read its config and literal files
    /// again (`SIGHUP`): a change of only those is swapped in place and
    /// signalled, not a recreate.
    pub reload: Option<String>,
}

/// Why a config could not be composed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct RenderError {
    /// The field at fault.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

/// Merges the settings over the defaults. A dotted key descends into tables,
/// creating them; it may not descend through a value that is not a table.
pub fn merge(
    defaults: &BTreeMap<String, Value>,
    settings: &BTreeMap<SettingKey, Value>,
) -> Result<BTreeMap<String, Value>, RenderError> {
    let mut root = defaults.clone();
    for (key, value) in settings {
        let segs: Vec<&str> = key.segments().collect();
        let (last, parents) = segs.split_last().expect("a setting key has a segment");
        let mut table = &mut root;
        for (depth, seg) in parents.iter().enumerate() {
            let entry = table
                .entry((*seg).to_string())
                .or_insert_with(|| Value::Table(BTreeMap::new()));
            match entry {
                Value::Table(t) => table = t,
                other => {
                    return Err(RenderError {
                        field: format!("settings.{:?}", key.as_str()),
                        message: format!(
                            "{} is {} in the config, not a table",
                            segs[..=depth].join("."),
                            other.kind()
                        ),
                    });
                }
            }
        }
        set(table, last, value);
    }
    Ok(root)
}

/// Sets `key` of `table` to `value`, a table over a table merged key by
/// key: TOML's nested form (`db.password = …` unquoted, or `[settings.db]`)
/// and JSON's nested objects merge into the defaults as the quoted
/// `"db.password"` does, rather than replacing the whole table.
fn set(table: &mut BTreeMap<String, Value>, key: &str, value: &Value) {
    match (table.get_mut(key), value) {
        (Some(Value::Table(have)), Value::Table(over)) => {
            for (k, v) in over {
                set(have, k, v);
            }
        }
        _ => {
            table.insert(key.to_string(), value.clone());
        }
    }
}

impl ConfigFile {
    /// The file's bytes: the settings merged over the defaults, rendered in
    /// the file's format.
    pub fn render(&self, settings: &BTreeMap<SettingKey, Value>) -> Result<Vec<u8>, RenderError> {
        let merged = merge(&self.defaults, settings)?;
        let field = |m: String| RenderError {
            field: "config".into(),
            message: m,
        };
        // Opened before they are rendered (`files::compose`); never the
        // sealed text in a file.
        let mut sealed = Vec::new();
        for (k, v) in &merged {
            v.sealed(k, &mut sealed);
        }
        if let Some((at, _)) = sealed.first() {
            return Err(RenderError {
                field: format!("settings.{at}"),
                message: NOT_OPENED.into(),
            });
        }
        Ok(match self.format {
            ConfigFormat::Json => {
                let mut s = serde_json::to_string_pretty(&Value::Table(merged).to_json())
                    .map_err(|e| field(e.to_string()))?;
                s.push('\n');
                s.into_bytes()
            }
            ConfigFormat::Toml => toml::to_string(&Value::Table(merged).to_json())
                .map_err(|e| field(format!("cannot render as TOML: {e}")))?
                .into_bytes(),
            ConfigFormat::Env => render_env(&merged).map_err(field)?.into_bytes(),
        })
    }
}

const NOT_OPENED: &str = "a sealed value, opened only by the agent on its device";

/// The most bytes a module's composed files (its config and literal files)
/// may hold together: they are rendered in memory every pass.
pub const MAX_COMPOSED_BYTES: usize = 1 << 20;

/// Refuses composed files over [`MAX_COMPOSED_BYTES`] together.
pub fn check_composed_size(total: usize) -> Result<(), RenderError> {
    if total > MAX_COMPOSED_BYTES {
        return Err(RenderError {
            field: "config".into(),
            message: format!(
                "the composed files come to {total} bytes, over the limit of {MAX_COMPOSED_BYTES}"
            ),
        });
    }
    Ok(())
}

/// Settings given to a module without a config file to merge them into.
pub fn settings_without_config(settings: &BTreeMap<SettingKey, Value>) -> Option<RenderError> {
    settings.keys().next().map(|k| RenderError {
        field: "settings".into(),
        message: format!(
            "setting {:?} given, but the module has no [config] file to merge it into",
            k.as_str()
        ),
    })
}

fn render_env(merged: &BTreeMap<String, Value>) -> Result<String, String> {
    fn walk(
        prefix: &str,
        t: &BTreeMap<String, Value>,
        out: &mut BTreeMap<String, String>,
    ) -> Result<(), String> {
        for (k, v) in t {
            let key = if prefix.is_empty() {
                k.to_uppercase()
            } else {
                format!("{prefix}_{}", k.to_uppercase())
            }
            .replace('-', "_");
            let text = match v {
                Value::Table(inner) => {
                    walk(&key, inner, out)?;
                    continue;
                }
                Value::String(s) => s.clone(),
                Value::Bool(b) => b.to_string(),
                Value::Int(i) => i.to_string(),
                Value::Float(f) => f.to_string(),
                Value::Array(_) => {
                    return Err(format!("{key}: an array cannot be written to an env file"));
                }
                Value::Sealed(_) => return Err(format!("{key}: {NOT_OPENED}")),
            };
            if text.contains(['\n', '\r', '\0']) {
                return Err(format!(
                    "{key}: a value in an env file cannot contain a line break"
                ));
            }
            if out.insert(key.clone(), text).is_some() {
                return Err(format!("{key}: two settings map to the same variable"));
            }
        }
        Ok(())
    }
    let mut out = BTreeMap::new();
    walk("", merged, &mut out)?;
    Ok(out.into_iter().map(|(k, v)| format!("{k}={v}\n")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(format: ConfigFormat, defaults: serde_json::Value) -> ConfigFile {
        let Ok(Value::Table(defaults)) = Value::from_json(defaults, "defaults") else {
            panic!("a table")
        };
        ConfigFile {
            path: AbsPath::try_from("/c").unwrap(),
            format,
            defaults,
            reload: None,
        }
    }

    fn settings(pairs: &[(&str, Value)]) -> BTreeMap<SettingKey, Value> {
        pairs
            .iter()
            .map(|(k, v)| (SettingKey::try_from(*k).unwrap(), v.clone()))
            .collect()
    }

    #[test]
    fn settings_merge_over_defaults_as_json() {
        let c = config(
            ConfigFormat::Json,
            serde_json::json!({"poll_ms": 1000, "database": {"url": ""}}),
        );
        let s = settings(&[
            ("database.url", Value::String("pg://x".into())),
            ("new.deep.key", Value::Bool(true)),
        ]);
        let v: serde_json::Value = serde_json::from_slice(&c.render(&s).unwrap()).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"poll_ms": 1000, "database": {"url": "pg://x"}, "new": {"deep": {"key": true}}})
        );
    }

    #[test]
    fn a_setting_merges_into_the_defaults_whether_its_key_is_dotted_or_nested() {
        let d =
            serde_json::json!({"db": {"host": "h", "port": 5432, "tls": {"on": false}}, "x": 1});
        let table = |j: serde_json::Value| Value::from_json(j, "s").unwrap();
        // (settings, the file's db table)
        #[rustfmt::skip]
        let cases = [
            // `"db.password" = "p"`: quoted, dotted.
            (settings(&[("db.password", Value::String("p".into()))]),
             serde_json::json!({"host": "h", "port": 5432, "password": "p", "tls": {"on": false}})),
            // `db.password = "p"` or `[settings.db]`: TOML's nested form.
            (settings(&[("db", table(serde_json::json!({"password": "p"})))]),
             serde_json::json!({"host": "h", "port": 5432, "password": "p", "tls": {"on": false}})),
            // Deeper, and over a default: merged at every level.
            (settings(&[("db", table(serde_json::json!({"port": 1, "tls": {"ca": "c"}})))]),
             serde_json::json!({"host": "h", "port": 1, "tls": {"on": false, "ca": "c"}})),
            (settings(&[("db.tls", table(serde_json::json!({"on": true})))]),
             serde_json::json!({"host": "h", "port": 5432, "tls": {"on": true}})),
            // A scalar over a table replaces it, as a dotted key would.
            (settings(&[("db", Value::String("off".into()))]), serde_json::json!("off")),
        ];
        for (s, want) in cases {
            let c = config(ConfigFormat::Json, d.clone());
            let v: serde_json::Value = serde_json::from_slice(&c.render(&s).unwrap()).unwrap();
            assert_eq!(v["db"], want, "{s:?}");
            assert_eq!(v["x"], 1);
        }
    }

    #[test]
    fn toml_and_env_formats() {
        let d = serde_json::json!({"a": 1, "db": {"url": "u"}});
        let out = config(ConfigFormat::Toml, d.clone())
            .render(&BTreeMap::new())
            .unwrap();
        let back: toml::Table = toml::from_str(std::str::from_utf8(&out).unwrap()).unwrap();
        assert_eq!(back["db"]["url"].as_str(), Some("u"));
        let out = config(ConfigFormat::Env, d)
            .render(&BTreeMap::new())
            .unwrap();
        assert_eq!(std::str::from_utf8(&out).unwrap(), "A=1\nDB_URL=u\n");
    }

    #[test]
    fn a_setting_through_a_scalar_or_an_array_in_env_is_refused() {
        let c = config(ConfigFormat::Json, serde_json::json!({"a": 1}));
        let e = c.render(&settings(&[("a.b", Value::Int(2))])).unwrap_err();
        assert_eq!(e.field, "settings.\"a.b\"");
        assert!(e.message.contains("a is an integer"), "{e}");
        let c = config(ConfigFormat::Env, serde_json::json!({"a": [1]}));
        assert_eq!(c.render(&BTreeMap::new()).unwrap_err().field, "config");
    }
}
