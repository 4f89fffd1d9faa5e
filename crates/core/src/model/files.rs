//! The files composed into a module's container: its config file (settings
//! merged over defaults) and its literal files, each rendered once, with
//! the digest of its bytes and the content-addressed place it is written to
//! on the host. Pure: writing is the host's business.

use std::path::{Path, PathBuf};

use crate::model::config::{self, RenderError};
use std::collections::BTreeMap;

use crate::model::intention::{Intention, file_field};
use crate::model::names::{AbsPath, Digest, InputName};
use crate::model::sealed::{Opened, Text};
use crate::model::value::Value;

/// A composed file, rendered and not yet written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ComposedFile {
    /// The input it is (`config:<path>` or `file:<path>`).
    pub input: InputName,
    /// Where the container sees it.
    pub target: AbsPath,
    /// Its bytes.
    pub content: Vec<u8>,
    /// The digest of its bytes; keyed with the device's key when they
    /// hold a sealed value.
    pub digest: Digest,
}

impl ComposedFile {
    fn new(kind: &str, target: &AbsPath, content: Vec<u8>, keyed: Option<Digest>) -> ComposedFile {
        ComposedFile {
            input: InputName::try_from(format!("{kind}:{target}"))
                .expect("an absolute path makes an input name"),
            target: target.clone(),
            digest: keyed.unwrap_or_else(|| Digest::of(&content)),
            content,
        }
    }
}

/// Renders every composed file of a module, once: the config file, then the
/// literal files. Sealed values are taken from `opened`: the settings'
/// into the config file (whose digest is then keyed), a literal file's as
/// its content (its digest the value's keyed one).
pub fn compose(i: &Intention, opened: &Opened) -> Result<Vec<ComposedFile>, RenderError> {
    let mut out = Vec::with_capacity(i.files.len() + 1);
    match &i.config {
        Some(c) => {
            let mut sealed = false;
            let mut settings = BTreeMap::new();
            for (k, v) in &i.settings {
                let v = v.opened(&format!("settings.{k}"), &mut |at, _| {
                    sealed = true;
                    opened
                        .text(at)
                        .map(Value::String)
                        .map_err(|message| RenderError {
                            field: at.to_string(),
                            message,
                        })
                })?;
                settings.insert(k.clone(), v);
            }
            let content = c.render(&settings)?;
            let keyed = match sealed {
                false => None,
                true => Some(
                    opened
                        .keyed(&format!("config:{}", c.path), &content)
                        .ok_or_else(|| RenderError {
                            field: "settings".into(),
                            message: "sealed values are opened only by the agent on its device"
                                .into(),
                        })?,
                ),
            };
            out.push(ComposedFile::new("config", &c.path, content, keyed));
        }
        None => {
            if let Some(e) = config::settings_without_config(&i.settings) {
                return Err(e);
            }
        }
    }
    for f in &i.files {
        let (content, keyed) = match &f.content {
            Text::Plain(s) => (s.clone().into_bytes(), None),
            Text::Sealed(_) => {
                let field = file_field(&f.path);
                let not_here = || RenderError {
                    field: field.clone(),
                    message: "a sealed value, opened only by the agent on its device".into(),
                };
                let value = opened.value(&field).ok_or_else(not_here)?;
                let digest = opened.digest(&field).ok_or_else(not_here)?;
                (value.to_vec(), Some(digest.clone()))
            }
        };
        out.push(ComposedFile::new("file", &f.path, content, keyed));
    }
    config::check_composed_size(out.iter().map(|f| f.content.len()).sum())?;
    Ok(out)
}

/// Where a composed file lives on the host: `<files_dir>/<module>/<hex>`.
/// The path is named by content, so one path never changes content.
pub fn host_path(files_dir: &Path, module: &str, digest: &Digest) -> PathBuf {
    files_dir.join(module).join(digest.hex())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::intention::DocFormat;

    #[test]
    fn config_then_literal_files_each_with_its_digest() {
        let i = Intention::parse(
            "name = \"m\"\nimage = \"x\"\n[config]\npath = \"/c.json\"\nformat = \"json\"\ndefaults = { a = 1 }\n[settings]\na = 2\n[[files]]\npath = \"/b.txt\"\ncontent = \"hello\"",
            DocFormat::Toml,
            "t.toml",
        )
        .unwrap();
        let files = compose(&i, &Opened::default()).unwrap();
        let inputs: Vec<&str> = files.iter().map(|f| f.input.as_str()).collect();
        assert_eq!(inputs, ["config:/c.json", "file:/b.txt"]);
        assert_eq!(files[0].content, b"{\n  \"a\": 2\n}\n");
        assert_eq!(files[1].digest, Digest::of(b"hello"));
        assert_eq!(
            host_path(Path::new("/d/files"), "m", &files[1].digest),
            Path::new("/d/files/m").join(Digest::of(b"hello").hex())
        );
    }

    #[test]
    fn a_toml_setting_merges_the_same_dotted_quoted_or_nested() {
        let head = "name = \"m\"\nimage = \"x\"\n[config]\npath = \"/c.json\"\nformat = \"json\"\ndefaults = { db = { host = \"h\" } }\n";
        let rendered = |settings: &str| {
            let i =
                Intention::parse(&format!("{head}{settings}"), DocFormat::Toml, "t.toml").unwrap();
            compose(&i, &Opened::default()).unwrap()[0].content.clone()
        };
        let want = b"{\n  \"db\": {\n    \"host\": \"h\",\n    \"password\": \"p\"\n  }\n}\n";
        for settings in [
            "[settings]\n\"db.password\" = \"p\"",
            "[settings]\ndb.password = \"p\"",
            "[settings.db]\npassword = \"p\"",
            "[settings]\ndb = { password = \"p\" }",
        ] {
            assert_eq!(rendered(settings), want, "{settings}");
        }
    }
}
