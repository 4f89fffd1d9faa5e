//! The device-local key, in the agent's data directory: 32 random bytes,
//! mode 0600, made once on the first start and never rewritten. What a
//! container's label carries for a store rebuild is sealed with it
//! ([`crate::model::seal`]), so whoever reads labels reads no value.

use std::path::Path;

use crate::model::seal::{KEY_LEN, LocalKey};

/// Reads the key at `path`, making it when there is none. A file that is
/// not exactly a key (truncated, or another file) is refused naming it,
/// and left as it is (`InvalidData`); so is one that is not the agent's
/// own file alone (a symlink, another user's, others may read it:
/// `PermissionDenied`).
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
    // A link, another user's file or one others may read is refused as it
    // is (never moved aside for a new key: the device's sealed values are
    // sealed to this one); a file that is not a key is damaged.
    let bytes = crate::host::files::read_secret(path, 64 * 1024)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::PermissionDenied, e))?;
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
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = local_key(&p).unwrap_err().to_string();
        assert!(
            e.contains("local.key may be read by others (mode 0644)"),
            "{e}"
        );
    }
}
