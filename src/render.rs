//! Composing a module's files: the config file (defaults with the settings
//! merged over them, rendered as JSON, TOML or env lines) and its literal
//! files. Rendering is pure and happens for every file before any is written;
//! writing is atomic and content-addressed, so a running container never sees
//! a file change under it and never reads half a file.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::intention::{ConfigFormat, Intention};
use crate::names::{AbsPath, Digest, InputName};
use crate::value::Value;

/// Why a config could not be composed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct RenderError {
    /// The field at fault.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

/// A composed file, rendered and not yet written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenderedFile {
    /// The input it is (`config:<path>` or `file:<path>`).
    pub input: InputName,
    /// Where the container sees it.
    pub target: AbsPath,
    /// Its bytes.
    pub content: Vec<u8>,
    /// The digest of its bytes.
    pub digest: Digest,
}

/// Merges the settings over the defaults. A dotted key descends into tables,
/// creating them; it may not descend through a value that is not a table.
pub fn merge(
    defaults: &BTreeMap<String, Value>,
    settings: &BTreeMap<crate::names::SettingKey, Value>,
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
        table.insert((*last).to_string(), value.clone());
    }
    Ok(root)
}

/// Renders the module's config file, if it has one.
pub fn render_config(i: &Intention) -> Result<Option<RenderedFile>, RenderError> {
    let Some(cfg) = &i.config else {
        if let Some(k) = i.settings.keys().next() {
            return Err(RenderError {
                field: "settings".into(),
                message: format!(
                    "setting {:?} given, but the module has no [config] file to merge it into",
                    k.as_str()
                ),
            });
        }
        return Ok(None);
    };
    let merged = merge(&cfg.defaults, &i.settings)?;
    let field = |m: String| RenderError {
        field: "config".into(),
        message: m,
    };
    let content = match cfg.format {
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
    };
    let input =
        InputName::try_from(format!("config:{}", cfg.path)).expect("config path is absolute");
    let digest = Digest::of(&content);
    Ok(Some(RenderedFile {
        input,
        target: cfg.path.clone(),
        content,
        digest,
    }))
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

/// Renders every composed file of a module: the config file, then the
/// literal files.
pub fn render_all(i: &Intention) -> Result<Vec<RenderedFile>, RenderError> {
    let mut out: Vec<RenderedFile> = render_config(i)?.into_iter().collect();
    for f in &i.files {
        let content = f.content.clone().into_bytes();
        out.push(RenderedFile {
            input: InputName::try_from(format!("file:{}", f.path)).expect("file path is absolute"),
            target: f.path.clone(),
            digest: Digest::of(&content),
            content,
        });
    }
    Ok(out)
}

/// Where a composed file lives on the host: `<files_dir>/<module>/<hex>`.
/// The path is named by content, so one path never changes content.
pub fn host_path(files_dir: &Path, module: &str, digest: &Digest) -> PathBuf {
    files_dir.join(module).join(digest.hex())
}

/// Writes a composed file at its content-addressed path, atomically (temp
/// file, fsync, rename, fsync of the directory). A file already there is
/// left alone.
pub fn write_atomic(path: &Path, content: &[u8]) -> std::io::Result<()> {
    if path.exists() {
        return Ok(());
    }
    replace_atomic(path, content, 0o644)
}

/// Replaces a file atomically with the given content and mode (temp file,
/// fsync, rename, fsync of the directory), for files that change in place
/// (the API token, the API address).
pub fn replace_atomic(path: &Path, content: &[u8], mode: u32) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let dir = path.parent().expect("a file has a directory");
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(
        ".tmp-{}-{}",
        std::process::id(),
        path.file_name().and_then(|n| n.to_str()).unwrap_or("f")
    ));
    {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(mode)
            .open(&tmp)?;
        f.write_all(content)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)?;
    std::fs::File::open(dir)?.sync_all()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::intention::{DocFormat, Intention};

    fn intention(extra: &str) -> Intention {
        let t = format!("name = \"m\"\nimage = \"x\"\n{extra}");
        Intention::parse(&t, DocFormat::Toml, "t.toml").unwrap()
    }

    #[test]
    fn settings_merge_over_defaults_as_json() {
        let i = intention(
            "[config]\npath = \"/c.json\"\nformat = \"json\"\ndefaults = { poll_ms = 1000, database = { url = \"\" } }\n[settings]\n\"database.url\" = \"pg://x\"\n\"new.deep.key\" = true",
        );
        let f = render_config(&i).unwrap().unwrap();
        let v: serde_json::Value = serde_json::from_slice(&f.content).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"poll_ms": 1000, "database": {"url": "pg://x"}, "new": {"deep": {"key": true}}})
        );
        assert_eq!(f.input.as_str(), "config:/c.json");
        assert_eq!(f.digest, Digest::of(&f.content));
    }

    #[test]
    fn toml_and_env_formats() {
        let i = intention(
            "[config]\npath = \"/c.toml\"\nformat = \"toml\"\ndefaults = { a = 1, db = { url = \"u\" } }",
        );
        let f = render_config(&i).unwrap().unwrap();
        let back: toml::Table = toml::from_str(std::str::from_utf8(&f.content).unwrap()).unwrap();
        assert_eq!(back["db"]["url"].as_str(), Some("u"));
        let i = intention(
            "[config]\npath = \"/c.env\"\nformat = \"env\"\ndefaults = { a = 1, db = { url = \"u\" } }",
        );
        let f = render_config(&i).unwrap().unwrap();
        assert_eq!(std::str::from_utf8(&f.content).unwrap(), "A=1\nDB_URL=u\n");
    }

    #[test]
    fn a_setting_through_a_scalar_is_refused() {
        let e = Intention::parse(
            "name = \"m\"\nimage = \"x\"\n[config]\npath = \"/c\"\nformat = \"json\"\ndefaults = { a = 1 }\n[settings]\n\"a.b\" = 2",
            DocFormat::Toml,
            "t.toml",
        )
        .unwrap_err();
        assert_eq!(e.field, "settings.\"a.b\"");
        assert!(e.message.contains("a is an integer"), "{e}");
        let e = Intention::parse(
            "name = \"m\"\nimage = \"x\"\n[config]\npath = \"/c\"\nformat = \"env\"\ndefaults = { a = [1] }",
            DocFormat::Toml,
            "t.toml",
        )
        .unwrap_err();
        assert_eq!(e.field, "config");
    }

    #[test]
    fn write_is_atomic_and_content_addressed() {
        let d = tempfile::tempdir().unwrap();
        let digest = Digest::of(b"abc");
        let p = host_path(d.path(), "m", &digest);
        write_atomic(&p, b"abc").unwrap();
        write_atomic(&p, b"abc").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"abc");
        let names: Vec<_> = std::fs::read_dir(p.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 1, "no temp file left behind: {names:?}");
    }
}
