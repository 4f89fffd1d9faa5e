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

/// Reads a file that holds a secret (a host's token or key, a client
/// certificate's key, the device-local key) of at most `max` bytes: the
/// file itself, never through a symlink (`O_NOFOLLOW`), a regular file
/// owned by the agent's user that no one else may read or write, all
/// judged on the file opened. The error names the file and what is wrong
/// with it, never its content.
pub fn read_secret(path: &Path, max: u64) -> Result<Vec<u8>, String> {
    use std::os::unix::fs::MetadataExt;
    let shown = path.display().to_string();
    let cannot = |e: std::io::Error| format!("cannot read {shown}: {e}");
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(O_NONBLOCK | O_NOCTTY | libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => secret_fault(&shown, Secret::Link),
            _ => cannot(e),
        })?;
    let meta = f.metadata().map_err(cannot)?;
    if !meta.file_type().is_file() {
        return Err(format!("{shown}: {}", not_regular(meta.file_type())));
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    let agent = unsafe { libc::geteuid() };
    let file = Secret::File {
        uid: meta.uid(),
        agent,
        mode: meta.mode(),
    };
    if file.fault() {
        return Err(secret_fault(&shown, file));
    }
    let mut out = Vec::with_capacity(meta.len().min(max) as usize);
    f.take(max + 1).read_to_end(&mut out).map_err(cannot)?;
    if out.len() as u64 > max {
        return Err(format!("{shown}: over the limit of {max} bytes"));
    }
    Ok(out)
}

/// A secret file as its open and its stat say it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Secret {
    /// A symbolic link.
    Link,
    /// A regular file: its owner, the agent's user, its mode.
    File { uid: u32, agent: u32, mode: u32 },
}

impl Secret {
    /// Whether it may not be read.
    fn fault(self) -> bool {
        match self {
            Secret::Link => true,
            Secret::File { uid, agent, mode } => uid != agent || mode & 0o077 != 0,
        }
    }
}

/// What is wrong with the secret file `file`: a symlink, another user's
/// file, one others may read or write (the first that holds).
fn secret_fault(file: &str, s: Secret) -> String {
    match s {
        Secret::Link => format!(
            "{file} is a symbolic link: name the file itself (a secret is never read through a link)"
        ),
        Secret::File { uid, agent, .. } if uid != agent => {
            format!("{file} is owned by uid {uid}, not by the agent's user (uid {agent}): chown it")
        }
        Secret::File { mode, .. } => format!(
            "{file} may be read by others (mode {:04o}): make it 0600",
            mode & 0o777
        ),
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
/// that change in place (the API token, the API address, an imported
/// intention).
pub fn replace_atomic(path: &Path, content: &[u8], mode: u32) -> std::io::Result<()> {
    let (dir, tmp) = write_temp(path, content, mode)?;
    if let Err(e) = std::fs::rename(&tmp, path) {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    std::fs::File::open(dir)?.sync_all()
}

/// Makes a file atomically with the given content and mode, unless one is
/// there already (then it is left as it is, and the error's kind is
/// `AlreadyExists`): for a file made once (a device key).
pub fn create_atomic(path: &Path, content: &[u8], mode: u32) -> std::io::Result<()> {
    let (dir, tmp) = write_temp(path, content, mode)?;
    // A link fails where a name exists, which a rename would replace.
    let linked = std::fs::hard_link(&tmp, path);
    let _ = std::fs::remove_file(&tmp);
    linked?;
    std::fs::File::open(dir)?.sync_all()
}

/// Writes `content` to a new file beside `path` under a random name that
/// nothing else may hold (`O_CREAT|O_EXCL|O_NOFOLLOW`: a symlink planted
/// there is not followed, a file there is not reused), fsynced. Returns the
/// directory and the temp file's path.
fn write_temp<'a>(
    path: &'a Path,
    content: &[u8],
    mode: u32,
) -> std::io::Result<(&'a Path, std::path::PathBuf)> {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{}: not a file's path", path.display()),
        ));
    };
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    std::fs::create_dir_all(dir)?;
    let name = name.to_string_lossy();
    let mut tries = 0;
    loop {
        let tmp = dir.join(format!(".{name}.{:016x}.tmp", crate::host::random_u64()));
        let opened = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&tmp);
        let mut f = match opened {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && tries < 8 => {
                tries += 1;
                continue;
            }
            Err(e) => return Err(e),
        };
        // The mode asked for, whatever the umask took from it.
        let written = f
            .set_permissions(std::os::unix::fs::PermissionsExt::from_mode(mode))
            .and_then(|()| f.write_all(content))
            .and_then(|()| f.sync_all());
        if let Err(e) = written {
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
        return Ok((dir, tmp));
    }
}

/// Takes an exclusive advisory lock (`flock`) on directory `dir`, without
/// waiting: `None` when another process holds it. Held until the file
/// returned is dropped (or the process ends, however it ends).
pub fn try_lock_dir(dir: &Path) -> std::io::Result<Option<std::fs::File>> {
    use std::os::fd::AsRawFd as _;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC)
        .open(dir)?;
    // SAFETY: flock on a descriptor this function owns; no memory passed.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
        return Ok(Some(f));
    }
    let e = std::io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
        return Ok(None);
    }
    Err(e)
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
    fn a_secret_file_is_the_agents_own_file_alone() {
        let file = |uid, mode: u32| Secret::File {
            uid,
            agent: 0,
            mode: 0o100000 | mode,
        };
        // (the file, what is said of it)
        #[rustfmt::skip]
        let cases = [
            (file(0, 0o600), None),
            (file(0, 0o400), None),
            (file(0, 0o700), None),
            (Secret::Link, Some("/k is a symbolic link: name the file itself (a secret is never read through a link)")),
            (file(1000, 0o600), Some("/k is owned by uid 1000, not by the agent's user (uid 0): chown it")),
            (file(1000, 0o644), Some("/k is owned by uid 1000, not by the agent's user (uid 0): chown it")),
            (file(0, 0o640), Some("/k may be read by others (mode 0640): make it 0600")),
            (file(0, 0o604), Some("/k may be read by others (mode 0604): make it 0600")),
            (file(0, 0o620), Some("/k may be read by others (mode 0620): make it 0600")),
        ];
        for (s, want) in cases {
            let said = s.fault().then(|| secret_fault("/k", s));
            assert_eq!(said.as_deref(), want, "{s:?}");
        }
        // On the file itself: a link to a good file is refused, and so is
        // a FIFO, without blocking; the content is never in an error.
        let d = tempfile::tempdir().unwrap();
        let k = d.path().join("k");
        replace_atomic(&k, b"hunter2", 0o600).unwrap();
        assert_eq!(read_secret(&k, 64).unwrap(), b"hunter2");
        let e = read_secret(&k, 4).unwrap_err();
        assert!(
            e.contains("over the limit of 4") && !e.contains("hunter2"),
            "{e}"
        );
        let link = d.path().join("link");
        std::os::unix::fs::symlink(&k, &link).unwrap();
        let e = read_secret(&link, 64).unwrap_err();
        assert!(e.contains("link is a symbolic link"), "{e}");
        let fifo = d.path().join("p");
        mkfifo(&fifo);
        let e = read_secret(&fifo, 64).unwrap_err();
        assert!(e.contains("a FIFO"), "{e}");
        replace_atomic(&k, b"hunter2", 0o644).unwrap();
        let e = read_secret(&k, 64).unwrap_err();
        assert!(
            e.ends_with("k may be read by others (mode 0644): make it 0600"),
            "{e}"
        );
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

    #[test]
    fn an_atomic_write_never_follows_a_planted_link_and_keeps_its_mode() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let victim = d.path().join("victim");
        std::fs::write(&victim, "keep").unwrap();
        let p = d.path().join("out.toml");
        // Links planted at every name the old code would have used.
        for n in [
            format!(".tmp-{}-out.toml", std::process::id()),
            ".out.toml.stead-import".to_string(),
        ] {
            std::os::unix::fs::symlink(&victim, d.path().join(n)).unwrap();
        }
        replace_atomic(&p, b"secret", 0o600).unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
        assert_eq!(std::fs::read(&p).unwrap(), b"secret");
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let left = std::fs::read_dir(d.path()).unwrap().count();
        assert_eq!(left, 4, "victim, two links, the file: no temp file left");
        // Made once: a file there is left as it is.
        let e = create_atomic(&p, b"other", 0o600).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::AlreadyExists);
        assert_eq!(std::fs::read(&p).unwrap(), b"secret");
        let q = d.path().join("key");
        create_atomic(&q, b"k", 0o600).unwrap();
        assert_eq!(std::fs::read(&q).unwrap(), b"k");
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 5);
        // A path with no file name is refused, not a panic.
        let e = replace_atomic(Path::new("/"), b"x", 0o600).unwrap_err();
        assert!(e.to_string().contains("not a file's path"), "{e}");
    }
}
