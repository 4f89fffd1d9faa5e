//! Writing files atomically: a temp file beside the target, fsync, rename,
//! fsync of the directory. A reader (a running container, the CLI) never
//! sees half a file, and a crash leaves the old file or the new one.

use std::io::{Read, Write};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// `O_NONBLOCK` on Linux (every architecture stead is built for): opening a
/// FIFO for reading does not wait for a writer.
const O_NONBLOCK: i32 = 0o4000;
/// `O_NOCTTY`: a terminal named as an input does not become ours.
const O_NOCTTY: i32 = 0o400;

/// Reads a whole regular file of at most `max` bytes. Anything else (a
/// FIFO, a device, a socket, a directory) is refused without blocking and
/// without reading: an input is never `/dev/zero` or a pipe.
pub fn read_regular(path: &Path, max: u64) -> std::io::Result<Vec<u8>> {
    let f = open_regular(path)?;
    let len = f.metadata()?.len();
    if len > max {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("{len} bytes, over the limit of {max}"),
        ));
    }
    let mut out = Vec::with_capacity(len as usize);
    // A file that grows while read is read to the limit and refused.
    f.take(max + 1).read_to_end(&mut out)?;
    if out.len() as u64 > max {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("over the limit of {max} bytes"),
        ));
    }
    Ok(out)
}

/// Opens a path for reading only if it is a regular file (following
/// symlinks), never blocking on what it turns out to be.
pub fn open_regular(path: &Path) -> std::io::Result<std::fs::File> {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(O_NONBLOCK | O_NOCTTY)
        .open(path)?;
    let kind = f.metadata()?.file_type();
    if kind.is_file() {
        Ok(f)
    } else {
        Err(not_regular(kind))
    }
}

/// The error for an input that is not a regular file or a directory.
pub fn not_regular(kind: std::fs::FileType) -> std::io::Error {
    let what = if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_char_device() {
        "a character device"
    } else if kind.is_block_device() {
        "a block device"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_dir() {
        "a directory"
    } else {
        "not a regular file"
    };
    std::io::Error::new(
        std::io::ErrorKind::InvalidInput,
        format!("{what}: only regular files (and directories of them) are inputs"),
    )
}

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

/// Makes a FIFO, for tests of inputs that are not regular files.
#[cfg(test)]
pub fn mkfifo(path: &Path) {
    assert!(
        std::process::Command::new("mkfifo")
            .arg(path)
            .status()
            .unwrap()
            .success()
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_regular_files_are_read_and_never_past_the_limit() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("f");
        std::fs::write(&f, "12345").unwrap();
        assert_eq!(read_regular(&f, 5).unwrap(), b"12345");
        let e = read_regular(&f, 4).unwrap_err();
        assert!(e.to_string().contains("over the limit of 4"), "{e}");
        let e = read_regular(Path::new("/dev/zero"), 1 << 20).unwrap_err();
        assert!(e.to_string().contains("a character device"), "{e}");
        let fifo = d.path().join("p");
        mkfifo(&fifo);
        // No writer: a blocking open would wait for ever.
        let e = read_regular(&fifo, 1 << 20).unwrap_err();
        assert!(e.to_string().contains("a FIFO"), "{e}");
        let e = read_regular(d.path(), 1 << 20).unwrap_err();
        assert!(e.to_string().contains("a directory"), "{e}");
    }

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
