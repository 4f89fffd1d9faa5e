//! The space of the filesystems that matter to the node (the engine's data
//! root, stead's data directory, the log directory), as `statvfs` says it.

use std::path::Path;

use crate::model::disk::Space;

/// The size of the filesystem `path` is on and what is free on it, as `df`
/// counts them: free is what an unprivileged writer may still use
/// (`f_bavail`), and the size is what is used and that (blocks kept for
/// root, or held back by the filesystem, are neither).
pub fn space(path: &Path) -> std::io::Result<Space> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "a NUL in the path"))?;
    // SAFETY: `c` is a NUL-terminated path; `st` is written by statvfs
    // before it is read, and only read when it returned 0.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let unit = st.f_frsize as u64;
    let used = (st.f_blocks as u64).saturating_sub(st.f_bfree as u64);
    let free = st.f_bavail as u64;
    Ok(Space {
        total: used.saturating_add(free).saturating_mul(unit),
        free: free.saturating_mul(unit),
    })
}

/// The filesystem `path` is on, to name each filesystem once.
pub fn device(path: &Path) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| m.dev())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_space_of_a_real_filesystem_reads() {
        let dir = tempfile::tempdir().unwrap();
        let s = space(dir.path()).unwrap();
        assert!(s.total > 0 && s.free <= s.total, "{s:?}");
        assert!(space(Path::new("/no/such/dir/here")).is_err());
        assert_eq!(device(dir.path()), device(&dir.path().join(".")));
    }
}
