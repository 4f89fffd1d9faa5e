//! Writing files atomically: a temp file beside the target, fsync, rename,
//! fsync of the directory. A reader (a running container, the CLI) never
//! sees half a file, and a crash leaves the old file or the new one.

use std::io::Write;
use std::path::Path;

/// Writes a content-addressed file (its path names its content): a file
/// already there is left alone.
pub fn write_once(path: &Path, content: &[u8]) -> std::io::Result<()> {
    if path.exists() {
        return Ok(());
    }
    replace_atomic(path, content, 0o644)
}

/// Replaces a file atomically with the given content and mode, for files
/// that change in place (the API token, the API address).
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

    #[test]
    fn a_content_addressed_write_is_atomic_and_leaves_no_temp_file() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("m").join("abc");
        write_once(&p, b"abc").unwrap();
        write_once(&p, b"abc").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"abc");
        let names: Vec<_> = std::fs::read_dir(p.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 1, "no temp file left behind: {names:?}");
        replace_atomic(&p, b"new", 0o600).unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"new");
    }
}
