//! The intentions directory: reading its files (each read again only when
//! its stat moves, by git's racy-clean rule, and parsed once per
//! content), and bringing the stored intentions in line
//! with it. A bad file is an error naming the file and the field; it never
//! stops the others and never changes the module it names.

use crate::model::sort::Insert as _;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;

use crate::host::digest::Stat;
use crate::intake::{NotYours, may_write};
use crate::model::intention::{DocFormat, Intention, IntentionError};
use crate::model::names::{Digest, ModuleName};
use crate::store::{Entry, EventKind, IntentionRecord, Source, Store, StoreError};

/// One file in the intentions directory that could not be taken.
#[derive(Debug, Clone)]
pub struct FileRejected {
    /// The file.
    pub path: PathBuf,
    /// The module it names, when its name could be read.
    pub module: Option<ModuleName>,
    /// Why.
    pub error: IntentionError,
}

/// What a directory of intention files says.
#[derive(Debug, Default)]
pub struct Loaded {
    /// The intentions that were taken, by module, with the file each came from.
    pub intentions: BTreeMap<ModuleName, (PathBuf, Arc<Intention>)>,
    /// The files that were refused.
    pub rejected: Vec<FileRejected>,
}

/// Why the directory could not be brought into the store.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    /// The directory could not be listed.
    #[error("cannot read the intentions directory {path}: {source}")]
    Read {
        /// The directory.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A file's parse, kept while its bytes stay the same.
struct Parsed {
    digest: Digest,
    /// The file's stat when it was read settled (a regular file, not a
    /// symlink): while it stays the same, the file is not read again.
    stat: Option<Stat>,
    result: Result<Arc<Intention>, IntentionError>,
    /// For a refused file, the module it names when that can be read.
    module: Option<ModuleName>,
}

/// The intentions directory, with each file's last parse.
pub struct IntentionsDir {
    path: PathBuf,
    parsed: HashMap<PathBuf, Parsed>,
    /// How many times a file's bytes were parsed, ever.
    parses: u64,
    /// How many times a file was read, ever.
    reads: u64,
}

impl IntentionsDir {
    /// The directory at `path` (which need not exist yet).
    pub fn new(path: PathBuf) -> IntentionsDir {
        IntentionsDir {
            path,
            parsed: HashMap::new(),
            parses: 0,
            reads: 0,
        }
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reads every `*.toml` and `*.json` file (not recursively; hidden files
    /// are skipped). A file whose bytes did not change since the last read
    /// is not parsed again. A missing directory holds nothing.
    pub fn load(&mut self) -> Result<Loaded, std::io::Error> {
        let mut paths = Vec::new();
        // A missing or unreadable directory is an error, not an empty one:
        // the caller holds what it stored until the directory is back.
        for entry in std::fs::read_dir(&self.path)? {
            let p = entry?.path();
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if name.starts_with('.') {
                continue;
            }
            if p.extension().is_some_and(|e| e == "toml" || e == "json") && p.is_file() {
                paths.push(p);
            }
        }
        let inside = std::fs::canonicalize(&self.path)?;
        crate::model::sort::sort(&mut paths);
        self.parsed.retain(|p, _| paths.binary_search(p).is_ok());
        let mut out = Loaded::default();
        let mut claimed: BTreeMap<ModuleName, PathBuf> = BTreeMap::new();
        let mut duplicated: BTreeSet<ModuleName> = BTreeSet::new();
        for p in paths {
            let origin = p.display().to_string();
            let stat = std::fs::symlink_metadata(&p)
                .ok()
                .filter(|m| m.file_type().is_file())
                .map(|m| Stat::of(&m));
            let parsed = match self.parsed.remove(&p) {
                Some(prev) if stat.is_some() && prev.stat == stat => prev,
                prev => self.read(&p, &inside, stat, prev),
            };
            match &parsed.result {
                Ok(i) => {
                    if let Some(first) = claimed.get(&i.name) {
                        duplicated.insert(i.name.clone());
                        out.rejected.push(FileRejected {
                            path: p.clone(),
                            module: Some(i.name.clone()),
                            error: IntentionError {
                                origin,
                                field: "name".into(),
                                message: format!(
                                    "module {:?} is also defined by {}",
                                    i.name.as_str(),
                                    first.display()
                                ),
                            },
                        });
                    } else {
                        claimed.insert(i.name.clone(), p.clone());
                        out.intentions
                            .insert(i.name.clone(), (p.clone(), i.clone()));
                    }
                }
                Err(error) => out.rejected.push(FileRejected {
                    path: p.clone(),
                    module: parsed.module.clone(),
                    error: error.clone(),
                }),
            }
            self.parsed.insert(p, parsed);
        }
        // Two files naming one module: neither wins, so nothing changes until
        // the operator settles it.
        for name in duplicated {
            if let Some((p, _)) = out.intentions.remove(&name) {
                out.rejected.push(FileRejected {
                    error: IntentionError {
                        origin: p.display().to_string(),
                        field: "name".into(),
                        message: format!(
                            "module {:?} is defined by more than one file",
                            name.as_str()
                        ),
                    },
                    path: p,
                    module: Some(name),
                });
            }
        }
        Ok(out)
    }

    /// Reads and parses the file; `stat` is its stat before the read,
    /// `prev` its last parse.
    fn read(
        &mut self,
        p: &Path,
        inside: &Path,
        stat: Option<Stat>,
        prev: Option<Parsed>,
    ) -> Parsed {
        self.reads += 1;
        match read_intention_file(p, inside) {
            Ok(bytes) => {
                let mut parsed = self.parse(p, bytes, prev);
                let after = std::fs::symlink_metadata(p).ok().map(|m| Stat::of(&m));
                parsed.stat = stat.filter(|s| s.settled(after.as_ref()));
                parsed
            }
            Err(e) => Parsed {
                digest: Digest::of(b""),
                stat: None,
                result: Err(IntentionError {
                    origin: p.display().to_string(),
                    field: "(file)".into(),
                    message: e.to_string(),
                }),
                module: None,
            },
        }
    }

    /// The file's parse: the last one when its bytes are the same.
    fn parse(&mut self, p: &Path, bytes: Vec<u8>, prev: Option<Parsed>) -> Parsed {
        let digest = Digest::of(&bytes);
        if let Some(prev) = prev {
            if prev.digest == digest {
                return prev;
            }
        }
        self.parses += 1;
        let origin = p.display().to_string();
        let format = if p.extension().is_some_and(|e| e == "toml") {
            DocFormat::Toml
        } else {
            DocFormat::Json
        };
        let result = match String::from_utf8(bytes) {
            Ok(text) => Intention::parse(&text, format, &origin).map(Arc::new),
            Err(_) => Err(IntentionError {
                origin,
                field: "(file)".into(),
                message: "not UTF-8 text".into(),
            }),
        };
        let module = match &result {
            Ok(_) => None,
            Err(_) => sniff_name(p, format),
        };
        Parsed {
            digest,
            stat: None,
            result,
            module,
        }
    }

    /// Brings the stored intentions in line with the directory. `entries`
    /// is what the store held at the start of the pass; it is kept in step
    /// with every write made here, so the pass reads the store once.
    ///
    /// A refused file changes nothing: the module it named keeps its stored
    /// intention (and so its container). A file never takes over a module
    /// another source owns, nor is such a module removed for want of a file.
    pub fn sync(
        &mut self,
        store: &Store,
        entries: &mut BTreeMap<ModuleName, Entry>,
    ) -> Result<Vec<FileRejected>, SyncError> {
        let mut loaded = self.load().map_err(|source| SyncError::Read {
            path: self.path.display().to_string(),
            source,
        })?;
        let rejected_paths: BTreeSet<String> = loaded
            .rejected
            .iter()
            .map(|r| r.path.display().to_string())
            .into_set();
        let mut protected: BTreeSet<ModuleName> = loaded
            .rejected
            .iter()
            .filter_map(|r| r.module.clone())
            .into_set();
        for (name, e) in entries.iter() {
            if let Some(Source::File(p)) = e.record.as_ref().map(|r| &r.source) {
                if rejected_paths.contains(p) {
                    protected.insert(name.clone());
                }
            }
        }
        let taken: BTreeSet<ModuleName> = loaded.intentions.keys().cloned().into_set();
        for (name, (path, i)) in std::mem::take(&mut loaded.intentions) {
            let source = Source::File(path.display().to_string());
            // The usual case, decided without a write transaction.
            if let Some(r) = entries
                .get(&name)
                .and_then(|e| e.record.as_ref())
                .filter(|r| r.intention == i && r.source == source)
            {
                // One copy of it is kept, the store's, not one each.
                if !Arc::ptr_eq(&r.intention, &i) {
                    if let Some(parsed) = self.parsed.get_mut(&path) {
                        parsed.result = Ok(r.intention.clone());
                    }
                }
                continue;
            }
            let outcome = store.modify(&name, |e| {
                may_write(&name, e.record.as_ref().map(|r| &r.source), &source)?;
                let revision = match &e.record {
                    Some(r) if r.intention == i && r.source == source => return Ok(None),
                    Some(r) => r.revision + 1,
                    None => 1,
                };
                e.record = Some(IntentionRecord::new(source.clone(), revision, i.clone()));
                Ok::<_, NotYours>(Some((revision, e.clone())))
            })?;
            match outcome {
                Ok(None) => {}
                Ok(Some((revision, entry))) => {
                    entries.insert(name.clone(), entry);
                    let detail = format!(
                        "intention taken from {} (revision {revision})",
                        path.display()
                    );
                    tracing::info!(module = name.as_str(), "{detail}");
                    store.append_event(Some(name.as_str()), EventKind::Intention, detail)?;
                }
                Err(refused) => loaded.rejected.push(FileRejected {
                    error: IntentionError {
                        origin: path.display().to_string(),
                        field: "name".into(),
                        message: refused.0,
                    },
                    path,
                    module: Some(name),
                }),
            }
        }
        let files: Vec<(ModuleName, String)> = entries
            .iter()
            .filter_map(|(name, e)| match e.record.as_ref().map(|r| &r.source) {
                Some(Source::File(p)) => Some((name.clone(), p.clone())),
                _ => None,
            })
            .collect();
        for (name, p) in files {
            if protected.contains(&name) || taken.contains(&name) {
                continue;
            }
            let gone = store.modify(&name, |e| -> Result<bool, ()> {
                // Only if it is still the same file's: a concurrent API write wins.
                if e.record
                    .as_ref()
                    .is_some_and(|r| r.source == Source::File(p.clone()))
                {
                    e.record = None;
                    Ok(true)
                } else {
                    Ok(false)
                }
            })?;
            if gone == Ok(true) {
                entries.remove(&name);
                let detail = format!("intention removed: {p} no longer defines it");
                tracing::info!(module = name.as_str(), "{detail}");
                store.append_event(Some(name.as_str()), EventKind::Intention, detail)?;
            }
        }
        Ok(loaded.rejected)
    }
}

pub use crate::model::intention::MAX_INTENTION_BYTES;

/// Reads an intention file: a regular file of at most
/// [`MAX_INTENTION_BYTES`], or a symlink to one inside the directory (a
/// symlink out of it could publish any file's first line in an error).
fn read_intention_file(p: &Path, inside: &Path) -> std::io::Result<Vec<u8>> {
    if std::fs::symlink_metadata(p)?.file_type().is_symlink()
        && !std::fs::canonicalize(p)?.starts_with(inside)
    {
        return Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            "a symlink to a file outside the intentions directory; not read",
        ));
    }
    crate::host::files::read_regular(p, MAX_INTENTION_BYTES)
}

/// The module name of a file that failed its checks, when it can be read.
fn sniff_name(p: &Path, format: DocFormat) -> Option<ModuleName> {
    #[derive(Deserialize)]
    struct NameOnly {
        name: String,
    }
    let bytes = crate::host::files::read_regular(p, MAX_INTENTION_BYTES).ok()?;
    let text = String::from_utf8(bytes).ok()?;
    let n: NameOnly = match format {
        DocFormat::Toml => toml::from_str::<toml::Table>(&text).ok().and_then(|t| {
            t.get("name").and_then(|v| v.as_str()).map(|s| NameOnly {
                name: s.to_string(),
            })
        })?,
        DocFormat::Json => serde_json::from_str(&text).ok()?,
    };
    ModuleName::try_from(n.name).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn load_rejects_duplicates_and_keeps_the_rest() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("a.toml"), "name = \"dup\"\nimage = \"x\"").unwrap();
        std::fs::write(d.path().join("b.json"), r#"{"name":"dup","image":"x"}"#).unwrap();
        std::fs::write(d.path().join("c.toml"), "name = \"ok\"\nimage = \"x\"").unwrap();
        std::fs::write(
            d.path().join("d.toml"),
            "name = \"broken\"\nimage = \"x\"\nnope = 1",
        )
        .unwrap();
        std::fs::write(d.path().join("notes.txt"), "ignored").unwrap();
        let l = IntentionsDir::new(d.path().to_path_buf()).load().unwrap();
        assert_eq!(
            l.intentions.keys().map(|k| k.as_str()).collect::<Vec<_>>(),
            ["ok"]
        );
        assert_eq!(l.rejected.len(), 3);
        let broken = l
            .rejected
            .iter()
            .find(|r| r.path.ends_with("d.toml"))
            .unwrap();
        assert_eq!(broken.module.as_ref().map(|m| m.as_str()), Some("broken"));
        assert_eq!(
            l.rejected
                .iter()
                .filter(|r| r.module.as_ref().is_some_and(|m| m.as_str() == "dup"))
                .count(),
            2
        );
    }

    #[test]
    fn a_file_is_parsed_again_only_when_its_bytes_change() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("m.toml");
        let m = ModuleName::try_from("m").unwrap();
        std::fs::write(&f, "name = \"m\"\nimage = \"x:1\"").unwrap();
        let mut dir = IntentionsDir::new(d.path().to_path_buf());
        assert_eq!(dir.load().unwrap().intentions[&m].1.image, "x:1");
        assert_eq!(dir.parses, 1);
        // Same bytes, even rewritten: the kept parse is reused.
        dir.load().unwrap();
        std::fs::write(&f, "name = \"m\"\nimage = \"x:1\"").unwrap();
        assert_eq!(dir.load().unwrap().intentions[&m].1.image, "x:1");
        assert_eq!(dir.parses, 1, "unchanged bytes are not parsed again");
        std::fs::write(&f, "name = \"m\"\nimage = \"x:2\"").unwrap();
        assert_eq!(dir.load().unwrap().intentions[&m].1.image, "x:2");
        assert_eq!(dir.parses, 2, "changed bytes are");
        std::fs::remove_file(&f).unwrap();
        assert!(dir.load().unwrap().intentions.is_empty());
        assert!(dir.parsed.is_empty(), "a removed file's parse is forgotten");
    }

    #[test]
    fn a_settled_file_is_read_again_only_when_its_stat_changes() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("m.toml");
        let m = ModuleName::try_from("m").unwrap();
        std::fs::write(&f, "name = \"m\"\nimage = \"x:1\"").unwrap();
        let mut dir = IntentionsDir::new(d.path().to_path_buf());
        // Changed within the second it is read in: read again next time.
        dir.load().unwrap();
        dir.load().unwrap();
        assert_eq!(dir.reads, 2);
        // Once the clock has left the second of its last change, a read is
        // trusted for as long as the stat stays.
        std::thread::sleep(std::time::Duration::from_millis(1100));
        dir.load().unwrap();
        let reads = dir.reads;
        for _ in 0..3 {
            assert_eq!(dir.load().unwrap().intentions[&m].1.image, "x:1");
        }
        assert_eq!(dir.reads, reads, "a settled file is not read again");
        // The same size, rewritten: its stat moves, and it is read.
        std::fs::write(&f, "name = \"m\"\nimage = \"x:2\"").unwrap();
        assert_eq!(dir.load().unwrap().intentions[&m].1.image, "x:2");
        assert_eq!(dir.reads, reads + 1);
        // A symlink is read every time: its target may change under it.
        let target = d.path().join("t.json");
        std::fs::write(&target, r#"{"name": "n", "image": "x:1"}"#).unwrap();
        std::os::unix::fs::symlink(&target, d.path().join("n.json")).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(1100));
        dir.load().unwrap();
        let reads = dir.reads;
        dir.load().unwrap();
        assert!(dir.reads > reads, "the symlink was read again");
    }
}
