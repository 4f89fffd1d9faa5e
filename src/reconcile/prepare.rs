//! The pass's write phase: every composed file and every live directory of
//! the modules to run is written (all rendered before any is written),
//! off the async threads; a module whose files cannot be written (a full
//! disk) is held before anything touches its container.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::host::blocking::run as blocking;
use crate::model::names::ModuleName;
use crate::model::spec::LiveDir;
use crate::reconcile::resolve::Resolved;

/// Writes every module's composed files (their bytes moved out, not
/// copied: from here on only the paths are needed), then swaps its live
/// files in place (a running container sees the new set at once; it is
/// told after the steps). Each module a write failed for is held, with the
/// first failure.
pub async fn write_files(resolved: &mut Resolved) {
    let files: Vec<(ModuleName, PathBuf, Vec<u8>)> = resolved
        .running_mut()
        .flat_map(|d| {
            let name = d.name.clone();
            d.files
                .iter_mut()
                .map(move |(p, f)| (name.clone(), p.clone(), std::mem::take(&mut f.content)))
        })
        .collect();
    let mut unwritten: BTreeMap<ModuleName, String> = blocking(move || {
        let mut failed = BTreeMap::new();
        for (module, host, content) in files {
            if let Err(e) = crate::host::files::write_once(&host, &content) {
                failed
                    .entry(module)
                    .or_insert_with(|| format!("cannot write {}: {e}", host.display()));
            }
        }
        failed
    })
    .await;
    let live: Vec<(ModuleName, Vec<LiveDir>, String)> = resolved
        .running()
        .filter_map(|d| {
            d.live
                .as_ref()
                .map(|l| (d.name.clone(), l.dirs.clone(), l.digest.hex().to_string()))
        })
        .collect();
    if !live.is_empty() {
        let failed: Vec<(ModuleName, String)> = blocking(move || {
            let mut failed = Vec::new();
            for (module, dirs, hex) in live {
                for d in dirs {
                    if let Err(e) = crate::host::live::write(&d.host, &d.files, &hex) {
                        failed.push((
                            module.clone(),
                            format!("cannot write {}: {e}", d.host.display()),
                        ));
                    }
                }
            }
            failed
        })
        .await;
        for (m, why) in failed {
            unwritten.entry(m).or_insert(why);
        }
    }
    for (module, why) in unwritten {
        resolved.hold(&module, &why);
    }
}
