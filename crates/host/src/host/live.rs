//! Live files: a directory a container mounts whose content is swapped
//! whole, atomically. The files are written into a new directory named by
//! their digest (`..<hex>`), then one symlink (`..data`) is renamed to point
//! at it; each file is a symlink `name -> ..data/name`. A reader inside the
//! container sees the old set or the new one, never half of either.

use std::io::Write;
use std::os::unix::fs::symlink;
use std::path::Path;

const DATA: &str = "..data";

/// Makes `dir` hold exactly `files` under the digest `hex`. Returns whether
/// anything changed (the directory already held that digest: nothing).
pub fn write(dir: &Path, files: &[(String, Vec<u8>)], hex: &str) -> std::io::Result<bool> {
    let want = format!("..{hex}");
    if std::fs::read_link(dir.join(DATA)).is_ok_and(|t| t.as_os_str() == want.as_str()) {
        return Ok(false);
    }
    std::fs::create_dir_all(dir)?;
    let staging = dir.join(format!("{want}.tmp"));
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir(&staging)?;
    for (name, content) in files {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(staging.join(name))?;
        f.write_all(content)?;
        f.sync_all()?;
        use std::os::unix::fs::PermissionsExt;
        f.set_permissions(std::fs::Permissions::from_mode(0o644))?;
    }
    let version = dir.join(&want);
    let _ = std::fs::remove_dir_all(&version);
    std::fs::rename(&staging, &version)?;
    // The switch: one rename of a symlink.
    let link_tmp = dir.join(format!("{DATA}.tmp"));
    let _ = std::fs::remove_file(&link_tmp);
    symlink(&want, &link_tmp)?;
    std::fs::rename(&link_tmp, dir.join(DATA))?;
    for (name, _) in files {
        let link = dir.join(name);
        if std::fs::symlink_metadata(&link).is_err() {
            symlink(format!("{DATA}/{name}"), &link)?;
        }
    }
    // What the old set held goes: its versions and names no longer in it.
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        let n = e.file_name().to_string_lossy().into_owned();
        let stale_version = n.starts_with("..") && n != DATA && n != want;
        let stale_name = !n.starts_with("..") && !files.iter().any(|(f, _)| *f == n);
        if stale_version {
            let _ = std::fs::remove_dir_all(e.path());
        } else if stale_name {
            let _ = std::fs::remove_file(e.path());
        }
    }
    std::fs::File::open(dir)?.sync_all()?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_set_is_swapped_whole_and_the_old_one_goes() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("live");
        let one = vec![
            ("a.json".to_string(), b"1".to_vec()),
            ("b".to_string(), b"x".to_vec()),
        ];
        assert!(write(&dir, &one, "aaa").unwrap());
        assert!(
            !write(&dir, &one, "aaa").unwrap(),
            "the same digest changes nothing"
        );
        assert_eq!(std::fs::read(dir.join("a.json")).unwrap(), b"1");
        let two = vec![("a.json".to_string(), b"2".to_vec())];
        assert!(write(&dir, &two, "bbb").unwrap());
        assert_eq!(std::fs::read(dir.join("a.json")).unwrap(), b"2");
        assert!(
            std::fs::symlink_metadata(dir.join("b")).is_err(),
            "a name no longer in the set goes"
        );
        let left: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(!left.iter().any(|n| n == "..aaa"), "{left:?}");
        assert_eq!(
            std::fs::read_link(dir.join(DATA)).unwrap().to_str(),
            Some("..bbb")
        );
    }
}
