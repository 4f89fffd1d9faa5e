//! Content digests of the host files and directories a container reads, with
//! a stat cache.
//!
//! A file's digest is cached by (device, inode, size, mtime, ctime). A file
//! whose mtime is not older than the second it was hashed in may still be
//! written within that second without changing its stat, so it is hashed
//! again on the next look (git's racy-clean rule).

use std::collections::HashMap;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::model::names::Hasher;

use crate::model::names::Digest;

/// Why a host input could not be digested.
#[derive(Debug, thiserror::Error)]
#[error("cannot read {path}: {source}")]
pub struct DigestError {
    /// The path.
    pub path: PathBuf,
    /// The I/O error.
    #[source]
    pub source: std::io::Error,
}

/// What a file's stat says of its identity and content: equal stats, of a
/// file read when it was [settled](Stat::settled), mean the same bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stat {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
    mode: u32,
}

impl Stat {
    /// The stat of `m`.
    pub fn of(m: &std::fs::Metadata) -> Stat {
        Stat {
            dev: m.dev(),
            ino: m.ino(),
            size: m.size(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
            mode: m.mode(),
        }
    }

    /// Whether a read between this stat and `after` can be trusted for as
    /// long as the stat stays the same: the file did not change during the
    /// read, and was last changed before the current second (a write later
    /// in that second may leave its stat as it is).
    pub fn settled(&self, after: Option<&Stat>) -> bool {
        let now = i64::try_from(crate::host::clock::now()).unwrap_or(i64::MAX);
        after == Some(self) && self.mtime.0 < now && self.ctime.0 < now
    }
}

struct Cached {
    stat: Stat,
    digest: Digest,
    /// The file could still change within its stat's second.
    racy: bool,
}

/// The most bytes one read-only mount (a file, or a whole directory) may
/// hold: a bound on the time and I/O of hashing it.
pub const MAX_INPUT_BYTES: u64 = 16 << 30;
/// The most entries one read-only mount directory may hold, all levels.
pub const MAX_INPUT_ENTRIES: u64 = 100_000;

/// What is left to read of one input.
#[derive(Default)]
struct Budget {
    bytes: u64,
    entries: u64,
}

fn over(what: String) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        format!("{what}: too large to be an input"),
    )
}

/// Digests host files and directories, caching file digests by stat.
#[derive(Default)]
pub struct FileDigester {
    budget: Budget,
    cache: HashMap<PathBuf, Cached>,
    seen: std::collections::HashSet<PathBuf>,
    /// How many files were actually read (for tests and metrics).
    pub reads: u64,
}

impl FileDigester {
    /// A digester with an empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// The digest of a host file, or of a directory tree (paths, kinds,
    /// permission bits, file contents and symlink targets, in sorted order).
    /// Symlinks at `path` itself are followed, as the engine's bind mount does.
    pub fn digest_path(&mut self, path: &Path) -> Result<Digest, DigestError> {
        let err = |source| DigestError {
            path: path.to_path_buf(),
            source,
        };
        let meta = std::fs::metadata(path).map_err(err)?;
        self.budget = Budget {
            bytes: MAX_INPUT_BYTES,
            entries: MAX_INPUT_ENTRIES,
        };
        if meta.is_dir() {
            let mut h = Hasher::new();
            h.update(b"stead-dir-v1\n");
            self.walk(path, Path::new(""), &mut h)?;
            Ok(Digest::from_hasher(h))
        } else if meta.is_file() {
            self.digest_file(path, &meta)
        } else {
            Err(err(crate::host::files::not_regular(meta.file_type())))
        }
    }

    fn walk(&mut self, root: &Path, rel: &Path, h: &mut Hasher) -> Result<(), DigestError> {
        let dir = root.join(rel);
        let err = |p: &Path| {
            let p = p.to_path_buf();
            move |source| DigestError { path: p, source }
        };
        let mut names: Vec<_> = std::fs::read_dir(&dir)
            .map_err(err(&dir))?
            .map(|e| e.map(|e| e.file_name()))
            .collect::<Result<_, _>>()
            .map_err(err(&dir))?;
        crate::model::sort::sort(&mut names);
        if names.len() as u64 > self.budget.entries {
            return Err(err(&dir)(over(format!(
                "more than {MAX_INPUT_ENTRIES} entries"
            ))));
        }
        self.budget.entries -= names.len() as u64;
        for name in names {
            let rel_child = rel.join(&name);
            let full = root.join(&rel_child);
            let meta = std::fs::symlink_metadata(&full).map_err(err(&full))?;
            let perm = meta.mode() & 0o7777;
            let ft = meta.file_type();
            let rel_s = rel_child.to_string_lossy();
            if ft.is_dir() {
                h.update(format!("d {perm:o} {rel_s:?}\n").as_bytes());
                self.walk(root, &rel_child, h)?;
            } else if ft.is_symlink() {
                let target = std::fs::read_link(&full).map_err(err(&full))?;
                h.update(format!("l {rel_s:?} {:?}\n", target.to_string_lossy()).as_bytes());
            } else if ft.is_file() {
                let d = self.digest_file(&full, &meta)?;
                h.update(format!("f {perm:o} {rel_s:?} {d}\n").as_bytes());
            } else {
                h.update(format!("o {perm:o} {rel_s:?}\n").as_bytes());
            }
        }
        Ok(())
    }

    fn digest_file(
        &mut self,
        path: &Path,
        meta: &std::fs::Metadata,
    ) -> Result<Digest, DigestError> {
        self.seen.insert(path.to_path_buf());
        let err = |source| DigestError {
            path: path.to_path_buf(),
            source,
        };
        if meta.len() > self.budget.bytes {
            return Err(err(over(format!(
                "more than {MAX_INPUT_BYTES} bytes in one input"
            ))));
        }
        self.budget.bytes -= meta.len();
        let stat = Stat::of(meta);
        if let Some(c) = self.cache.get(path) {
            if c.stat == stat && !c.racy {
                return Ok(c.digest.clone());
            }
        }
        let f = crate::host::files::open_regular(path).map_err(err)?;
        let mut h = Hasher::new();
        let mut buf = vec![0u8; 64 * 1024];
        // Read no more than the stat said: a file growing under the read is
        // seen as changed by the stat after it.
        let mut f = f.take(meta.len());
        loop {
            let n = f.read(&mut buf).map_err(err)?;
            if n == 0 {
                break;
            }
            h.update(&buf[..n]);
        }
        self.reads += 1;
        let digest = Digest::from_hasher(h);
        // Re-stat after reading: a write during the read shows up as a
        // changed stat and is not trusted.
        let after = std::fs::metadata(path).map(|m| Stat::of(&m)).ok();
        let racy = !stat.settled(after.as_ref());
        self.cache.insert(
            path.to_path_buf(),
            Cached {
                stat,
                digest: digest.clone(),
                racy,
            },
        );
        Ok(digest)
    }

    /// Forgets every file not looked at since the last call, so files that
    /// came and went (a rotating model directory) do not stay cached for
    /// ever. Called once per pass.
    pub fn forget_unseen(&mut self) {
        let seen = std::mem::take(&mut self.seen);
        self.cache.retain(|p, _| seen.contains(p));
    }

    /// How many files are cached.
    pub fn cached(&self) -> usize {
        self.cache.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_digest_is_cached_and_sees_changes() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f");
        std::fs::write(&p, "one").unwrap();
        let mut fd = FileDigester::new();
        let a = fd.digest_path(&p).unwrap();
        assert_eq!(a, Digest::of(b"one"));
        // Same size, rewritten within the same second: the racy rule must
        // re-read it rather than trust the stat.
        std::fs::write(&p, "two").unwrap();
        let b = fd.digest_path(&p).unwrap();
        assert_eq!(b, Digest::of(b"two"));
    }

    #[test]
    fn an_old_file_is_read_once() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f");
        std::fs::write(&p, "x").unwrap();
        let old = std::fs::FileTimes::new()
            .set_modified(std::time::SystemTime::now() - std::time::Duration::from_secs(10));
        std::fs::File::options()
            .write(true)
            .open(&p)
            .unwrap()
            .set_times(old)
            .unwrap();
        // ctime is now; wait until the clock has left its second.
        std::thread::sleep(std::time::Duration::from_millis(1100));
        let mut fd = FileDigester::new();
        fd.digest_path(&p).unwrap();
        fd.digest_path(&p).unwrap();
        fd.digest_path(&p).unwrap();
        assert_eq!(fd.reads, 1);
    }

    #[test]
    fn directory_digest_covers_content_names_and_modes() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("sub")).unwrap();
        std::fs::write(d.path().join("sub/a"), "a").unwrap();
        std::fs::write(d.path().join("b"), "b").unwrap();
        let mut fd = FileDigester::new();
        let one = fd.digest_path(d.path()).unwrap();
        assert_eq!(one, fd.digest_path(d.path()).unwrap());
        std::fs::write(d.path().join("sub/a"), "A").unwrap();
        let two = fd.digest_path(d.path()).unwrap();
        assert_ne!(one, two);
        std::fs::rename(d.path().join("b"), d.path().join("c")).unwrap();
        let three = fd.digest_path(d.path()).unwrap();
        assert_ne!(two, three);
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(d.path().join("c"), std::fs::Permissions::from_mode(0o755))
            .unwrap();
        assert_ne!(three, fd.digest_path(d.path()).unwrap());
    }

    #[test]
    fn files_no_longer_looked_at_are_forgotten() {
        let d = tempfile::tempdir().unwrap();
        for n in 0..5 {
            std::fs::write(d.path().join(format!("f{n}")), "x").unwrap();
        }
        let mut fd = FileDigester::new();
        fd.digest_path(d.path()).unwrap();
        fd.forget_unseen();
        assert_eq!(fd.cached(), 5);
        for n in 0..3 {
            std::fs::remove_file(d.path().join(format!("f{n}"))).unwrap();
        }
        fd.digest_path(d.path()).unwrap();
        fd.forget_unseen();
        assert_eq!(fd.cached(), 2);
    }

    #[test]
    fn only_regular_files_and_directories_are_hashed() {
        let mut fd = FileDigester::new();
        let e = fd.digest_path(Path::new("/dev/zero")).unwrap_err();
        assert!(e.to_string().contains("a character device"), "{e}");
        let d = tempfile::tempdir().unwrap();
        let fifo = d.path().join("p");
        crate::host::files::mkfifo(&fifo);
        let e = fd.digest_path(&fifo).unwrap_err();
        assert!(e.to_string().contains("a FIFO"), "{e}");
        // Inside a directory, a FIFO is hashed by its name and mode only.
        std::fs::write(d.path().join("f"), "x").unwrap();
        assert!(fd.digest_path(d.path()).is_ok());
    }

    #[test]
    fn missing_file_names_the_path() {
        let mut fd = FileDigester::new();
        let e = fd
            .digest_path(Path::new("/nonexistent/stead/x"))
            .unwrap_err();
        assert!(e.to_string().contains("/nonexistent/stead/x"));
    }
}
