//! `stead-plane import`: a Compose file made into intention files, one per
//! service, written into a directory or printed, with every key that is
//! not carried listed on stderr. Every intention is written readable by its
//! owner only (a value interpolated from `.env` or the environment may be a
//! secret, and nothing tells which); content copied from outside the
//! Compose file (a config's file or variable) is noted; a config's file
//! outside the Compose file's directory (by its path, or by a symlink) is
//! refused unless `--allow-outside`. The mapping is
//! [`crate::import`]; this reads the Compose file, the files
//! it names and the environment, and writes. docs/import.md is the user's
//! page.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::import::{self as compose_file, Copied, ImportError, Imported};
use crate::model::intention::MAX_INTENTION_BYTES;

/// Exit code: written, but some keys were not carried.
pub const EXIT_UNMAPPED: u8 = 3;
/// Exit code: refused (a bad Compose file or field, a file in the way);
/// nothing written.
pub const EXIT_IMPORT_REFUSED: u8 = 2;

/// The largest Compose file read.
const MAX_COMPOSE_BYTES: u64 = 4 << 20;
/// The largest file a Compose file names that is read (a config's file,
/// an env file, `.env`): composed files and env files are held to 1 MiB.
const MAX_NAMED_BYTES: u64 = 1 << 20;

/// The mode of every intention written: its values may have been
/// interpolated from a private `.env` or the environment.
const PRIVATE: u32 = 0o600;

/// Runs `stead-plane import [--out DIR] [--force] [--allow-outside] FILE`.
pub fn run(file: &Path, out: Option<&Path>, force: bool, opts: &compose_file::Options) -> ExitCode {
    let refuse = |what: String| {
        eprintln!("stead-plane: import refused, nothing written: {what}");
        ExitCode::from(EXIT_IMPORT_REFUSED)
    };
    let imported = match import_file(file, opts) {
        Ok(i) => i,
        Err(e) => return refuse(e),
    };
    if let Some(f) = imported
        .files
        .iter()
        .find(|f| f.toml.len() as u64 > MAX_INTENTION_BYTES)
    {
        return refuse(format!(
            "{}: the intention is {} bytes, over the agent's limit of {MAX_INTENTION_BYTES} (a config's content is written into it: mount a large file instead)",
            f.service,
            f.toml.len()
        ));
    }
    let written = match out {
        None => {
            let mut stdout = std::io::stdout().lock();
            for (i, f) in imported.files.iter().enumerate() {
                let sep = if i == 0 { "" } else { "\n" };
                if write!(stdout, "{sep}# {}\n{}", f.file_name, f.toml).is_err() {
                    return ExitCode::from(1);
                }
            }
            None
        }
        Some(dir) => {
            let paths: Vec<PathBuf> = imported
                .files
                .iter()
                .map(|f| dir.join(&f.file_name))
                .collect();
            if !force {
                let existing: Vec<String> = paths
                    .iter()
                    .filter(|p| p.symlink_metadata().is_ok())
                    .map(|p| p.display().to_string())
                    .collect();
                if !existing.is_empty() {
                    return refuse(format!(
                        "{} exist (--force overwrites)",
                        existing.join(", ")
                    ));
                }
            }
            if let Err(e) = write_all(dir, &imported, &paths) {
                eprintln!("stead-plane: {e}");
                return ExitCode::from(1);
            }
            Some(dir)
        }
    };
    for r in &imported.unmapped {
        eprintln!("{r}");
    }
    for r in &imported.notes {
        eprintln!("note: {r}");
    }
    let n = imported.files.len();
    let mut summary = match written {
        Some(dir) => format!(
            "stead-plane: wrote {n} intention files to {}, each 0600",
            dir.display()
        ),
        None => format!("stead-plane: printed {n} intention files"),
    };
    let private: Vec<&str> = imported
        .files
        .iter()
        .filter(|f| !f.copied.is_empty())
        .map(|f| f.file_name.as_str())
        .collect();
    if !private.is_empty() {
        let how = if written.is_some() {
            "written 0600"
        } else {
            "keep them private"
        };
        summary.push_str(&format!(
            " ({} with content copied from files or variables, {how}: {})",
            private.len(),
            private.join(", ")
        ));
    }
    if imported.unmapped.is_empty() {
        eprintln!("{summary}; every key was carried");
        ExitCode::SUCCESS
    } else {
        let k = imported.unmapped.len();
        let keys = if k == 1 { "key was" } else { "keys were" };
        summary.push_str(&format!("; {k} {keys} not carried (listed above)"));
        eprintln!("{summary}");
        ExitCode::from(EXIT_UNMAPPED)
    }
}

/// Reads and maps the Compose file; the error is said whole.
fn import_file(file: &Path, opts: &compose_file::Options) -> Result<Imported, String> {
    let bytes = crate::host::files::read_regular(file, MAX_COMPOSE_BYTES)
        .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
    let text =
        String::from_utf8(bytes).map_err(|_| format!("{} is not UTF-8 text", file.display()))?;
    let abs = std::path::absolute(file).map_err(|e| format!("{}: {e}", file.display()))?;
    let base_dir = abs.parent().unwrap_or(Path::new("/"));
    let env: BTreeMap<String, String> = std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect();
    let read = |p: &Path| crate::host::files::read_regular(p, MAX_NAMED_BYTES);
    let imported = compose_file::import(&text, base_dir, &env, &read, opts)
        .map_err(|e: ImportError| format!("{}: {e}", file.display()))?;
    if !opts.allow_outside {
        // The path is inside (the mapping checked); its target must be too.
        let real_base =
            std::fs::canonicalize(base_dir).map_err(|e| format!("{}: {e}", base_dir.display()))?;
        for f in &imported.files {
            for c in &f.copied {
                let Copied::File(p) = c else { continue };
                let real = std::fs::canonicalize(p).map_err(|e| format!("{}: {e}", p.display()))?;
                if !real.starts_with(&real_base) {
                    return Err(format!(
                        "{}: {}: {} leads outside the Compose file's directory ({}), to {}: its content would be copied into the intention; --allow-outside copies it anyway",
                        file.display(),
                        f.service,
                        p.display(),
                        real_base.display(),
                        real.display()
                    ));
                }
            }
        }
    }
    Ok(imported)
}

/// Writes every file atomically (a temp file of a random name that no
/// link can stand in for, fsync, rename: an agent watching the directory
/// never reads half a file), 0600: readable by its owner only.
fn write_all(dir: &Path, imported: &Imported, paths: &[PathBuf]) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
    for (f, path) in imported.files.iter().zip(paths) {
        crate::host::files::replace_atomic(path, f.toml.as_bytes(), PRIVATE)
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    Ok(())
}
