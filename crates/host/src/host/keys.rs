//! The device-local key, in the agent's data directory: 32 random bytes,
//! mode 0600, made once on the first start and never rewritten. What a
//! container's label carries for a store rebuild is sealed with it
//! ([`crate::model::seal`]), so whoever reads labels reads no value.

use std::path::Path;

use crate::model::seal::{KEY_LEN, LocalKey};

/// Reads the key at `path`, making it when there is none. A file that is
/// not exactly a key (truncated, or another file), or that is not the
/// agent's own (a symlink, another user's file) is refused naming it, and
/// left as it is (`InvalidData`: the agent moves it aside and makes a new
/// key, so that a device is never kept down by its key file). The agent's
/// own key file that others may read is made 0600 and used, with a
/// warning: refusing it would keep the node down for a mode.
pub fn local_key(path: &Path) -> std::io::Result<LocalKey> {
    match read(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        other => return other,
    }
    let bytes = super::random::secret::<KEY_LEN>()?;
    match crate::host::files::create_atomic(path, &bytes, 0o600) {
        Ok(()) => Ok(LocalKey::from_bytes(bytes)),
        // Another process made it first: that one is the key.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => read(path),
        Err(e) => Err(e),
    }
}

fn read(path: &Path) -> std::io::Result<LocalKey> {
    // None there (not even a link): made by the caller.
    path.symlink_metadata()?;
    tighten(path)?;
    // A link or another user's file is not this agent's key: never
    // followed nor read (its caller makes a new one beside it).
    let bytes = crate::host::files::read_secret(path, 64 * 1024)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
    let bytes: [u8; KEY_LEN] = bytes.try_into().map_err(|b: Vec<u8>| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "{} is {} bytes, not a key of {KEY_LEN}; move it aside to make a new one (what containers' labels carry for a store rebuild is then lost)",
                path.display(),
                b.len()
            ),
        )
    })?;
    Ok(LocalKey::from_bytes(bytes))
}

/// The agent's own key file (a regular file, not a link, of the agent's
/// user) that others may read or write is made 0600, said in the log.
fn tighten(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
    let Ok(f) = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
    else {
        return Ok(());
    };
    let meta = f.metadata()?;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    if meta.file_type().is_file() && meta.uid() == me && meta.mode() & 0o077 != 0 {
        f.set_permissions(std::fs::Permissions::from_mode(0o600))?;
        tracing::warn!(
            "{} could be read by others (mode {:04o}): made 0600; if anyone did, what \
             is sealed to this device (its age key comes from this file) is theirs to read",
            path.display(),
            meta.mode() & 0o777
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn the_key_is_made_once_private_and_a_wrong_file_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("local.key");
        let k = local_key(&p).unwrap();
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let again = local_key(&p).unwrap();
        let sealed = k.seal(b"c", b"v").unwrap();
        assert_eq!(again.open(b"c", &sealed).unwrap(), b"v");
        std::fs::write(&p, b"short").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        let e = local_key(&p).unwrap_err();
        assert!(e.to_string().contains("is 5 bytes, not a key"), "{e}");
        assert_eq!(std::fs::read(&p).unwrap(), b"short", "left as it is");
        // Through a link, or readable by others: refused, naming the file.
        let link = d.path().join("link.key");
        std::os::unix::fs::symlink(&p, &link).unwrap();
        let e = local_key(&link).unwrap_err().to_string();
        assert!(e.contains("link.key is a symbolic link"), "{e}");
        assert_eq!(
            local_key(&link).unwrap_err().kind(),
            std::io::ErrorKind::InvalidData,
            "moved aside by the agent, never followed"
        );
        // The agent's own key others may read: made 0600 and used.
        std::fs::write(&p, [9u8; KEY_LEN]).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        let k = local_key(&p).unwrap();
        assert_eq!(
            k.open(
                b"c",
                &LocalKey::from_bytes([9; KEY_LEN]).seal(b"c", b"v").unwrap()
            )
            .unwrap(),
            b"v"
        );
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
}
