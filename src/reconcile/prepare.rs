//! The pass's write phase: every composed file and every live directory of
//! the modules to run is written (all rendered before any is written),
//! off the async threads; a module whose files cannot be written (a full
//! disk) is held before anything touches its container.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::host::blocking::run as blocking;
use crate::model::names::ModuleName;
use crate::model::spec::Desired;
use crate::reconcile::resolve::Resolved;

/// Writes every module's composed files (a file already there is not
/// written again: its path is named by its content), then swaps its live
/// files in place (a running container sees the new set at once; it is
/// told after the steps). Each module a write failed for is held, with the
/// first failure.
pub async fn write_files(resolved: &mut Resolved) {
    let targets: Vec<Arc<Desired>> = resolved.shared().cloned().collect();
    let mut unwritten: BTreeMap<ModuleName, String> = blocking(move || {
        let mut failed = BTreeMap::new();
        for d in &targets {
            for (host, f) in &d.files {
                if let Err(e) = crate::host::files::write_once(host, &f.content) {
                    failed
                        .entry(d.name.clone())
                        .or_insert_with(|| format!("cannot write {}: {e}", host.display()));
                }
            }
        }
        failed
    })
    .await;
    let live: Vec<Arc<Desired>> = resolved
        .shared()
        .filter(|d| d.live.is_some())
        .cloned()
        .collect();
    if !live.is_empty() {
        let failed: Vec<(ModuleName, String)> = blocking(move || {
            let mut failed = Vec::new();
            for t in &live {
                let Some(l) = &t.live else { continue };
                let hex = l.digest.hex();
                for d in &l.dirs {
                    if let Err(e) = crate::host::live::write(&d.host, &d.files, hex) {
                        failed.push((
                            t.name.clone(),
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
