//! A signing key's file: the standard base64 of its 32-byte seed and a
//! newline, mode 0600, written atomically (a reader sees the old file or
//! the whole new one). The key itself is the core's
//! ([`SecretKey`]); this module only moves it to and from its file.

use std::io;
use std::path::Path;

use stead_core::plane::envelope::{KeyError, SecretKey};

/// Reads a key file (a line: a larger file is not one).
pub fn read(path: &Path) -> Result<SecretKey, KeyError> {
    let shown = path.display().to_string();
    let bytes = crate::host::files::read_regular(path, 4096).map_err(|source| KeyError::Read {
        path: shown.clone(),
        source,
    })?;
    SecretKey::from_text(&String::from_utf8_lossy(&bytes)).map_err(|e| KeyError::File {
        path: shown,
        source: Box::new(e),
    })
}

/// Writes the key file, mode 0600, atomically.
pub fn write(path: &Path, key: &SecretKey) -> io::Result<()> {
    // Absolute: a bare file name has an empty parent directory.
    crate::host::files::replace_atomic(&std::path::absolute(path)?, key.to_text().as_bytes(), 0o600)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_key_file_is_private_and_reads_back() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("plane.key");
        let k = SecretKey::generate().unwrap();
        write(&path, &k).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.ends_with('\n') && text.len() == 45, "{text:?}");
        assert_eq!(read(&path).unwrap().public(), k.public());
        std::fs::write(&path, "short\n").unwrap();
        let e = read(&path).unwrap_err();
        assert!(
            e.to_string().contains("plane.key") && e.to_string().contains("secret key"),
            "{e}"
        );
        let e = read(&d.path().join("none")).unwrap_err();
        assert!(matches!(e, KeyError::Read { .. }), "{e}");
    }
}
