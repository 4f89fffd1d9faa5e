//! Watching the intentions directory and every host file a module reads, so
//! a change triggers a pass within a second instead of at the next
//! heartbeat. Parent directories are watched, not the files: editors and
//! atomic writers replace a file by rename, and a watch on the file itself
//! goes silent after the first rename. The heartbeat stays the safety net
//! for anything a watch misses.

use crate::model::sort::Insert as _;
use std::collections::{BTreeSet, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use notify::{RecursiveMode, Watcher};
use tokio::sync::{Notify, watch};

/// How long events are gathered before one pass is asked for.
pub const DEBOUNCE: Duration = Duration::from_millis(200);

/// What to watch: directories whose entries matter, and single paths.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WatchSet {
    /// Directories every change in which matters (the intentions directory).
    pub dirs: BTreeSet<PathBuf>,
    /// Files or directories (read recursively) whose change matters.
    pub inputs: BTreeSet<PathBuf>,
}

impl WatchSet {
    /// Whether an event on `path` concerns this set.
    pub fn concerns(&self, path: &Path) -> bool {
        path.parent().is_some_and(|p| self.dirs.contains(p))
            || self.inputs.iter().any(|i| path.starts_with(i))
    }

    /// The directories to ask the OS to watch, with their mode.
    fn watches(&self) -> BTreeSet<(PathBuf, bool)> {
        let mut w: BTreeSet<(PathBuf, bool)> =
            self.dirs.iter().map(|d| (d.clone(), false)).into_set();
        for i in &self.inputs {
            if let Some(parent) = i.parent() {
                w.insert((parent.to_path_buf(), false));
            }
            if i.is_dir() {
                w.insert((i.clone(), true));
            }
        }
        w
    }
}

/// The most changed paths kept between two looks; past it, a change is
/// only "something changed" (and a pass is asked for).
pub const MAX_PENDING: usize = 1024;

/// Paths the OS said changed, not looked at yet: a bounded set, so a
/// directory churning faster than the agent looks costs no memory.
#[derive(Default)]
struct Pending {
    paths: HashSet<PathBuf>,
    overflowed: bool,
}

/// Runs until `set` closes: keeps OS watches on what `set` names and wakes
/// the agent (debounced) when something it names changes.
pub async fn run(mut set: watch::Receiver<WatchSet>, wake: Arc<Notify>) {
    let pending = Arc::new(Mutex::new(Pending::default()));
    let arrived = Arc::new(Notify::new());
    let handler = {
        let (pending, arrived) = (pending.clone(), arrived.clone());
        move |res: notify::Result<notify::Event>| match res {
            // Reads (ours included: hashing a file opens it) are not changes.
            Ok(ev) if ev.kind.is_access() => {}
            Ok(ev) => {
                {
                    let mut p = pending.lock().expect("pending lock");
                    for path in ev.paths {
                        if p.paths.len() < MAX_PENDING {
                            p.paths.insert(path);
                        } else {
                            p.overflowed = true;
                        }
                    }
                }
                arrived.notify_one();
            }
            Err(e) => tracing::debug!("watch error: {e}"),
        }
    };
    let mut watcher = match notify::recommended_watcher(handler) {
        Ok(w) => w,
        Err(e) => {
            tracing::warn!("cannot watch files ({e}); changes are seen at the next heartbeat");
            return;
        }
    };
    // The set the channel starts with counts as a change too.
    let mut current = set.borrow_and_update().clone();
    let mut active: BTreeSet<(PathBuf, bool)> = BTreeSet::new();
    if sync_watches(&mut watcher, &current, &mut active) {
        wake.notify_one();
    }
    let mut retry = tokio::time::interval(Duration::from_secs(5));
    loop {
        tokio::select! {
            changed = set.changed() => {
                if changed.is_err() {
                    return;
                }
                current = set.borrow_and_update().clone();
                if sync_watches(&mut watcher, &current, &mut active) {
                    // A change made before this watch existed was not seen.
                    wake.notify_one();
                }
            }
            _ = retry.tick() => {
                // Directories that did not exist yet may exist now.
                if sync_watches(&mut watcher, &current, &mut active) {
                    wake.notify_one();
                }
            }
            () = arrived.notified() => {
                // Gather for the debounce, then look once at what came.
                tokio::time::sleep(DEBOUNCE).await;
                let taken = std::mem::take(&mut *pending.lock().expect("pending lock"));
                let hit = taken.overflowed || taken.paths.iter().any(|p| current.concerns(p));
                if hit {
                    tracing::debug!("a watched input changed; pass requested");
                    wake.notify_one();
                }
            }
        }
    }
}

/// Brings the OS watches in line with the set; says whether one was added.
fn sync_watches(
    w: &mut notify::RecommendedWatcher,
    set: &WatchSet,
    active: &mut BTreeSet<(PathBuf, bool)>,
) -> bool {
    let mut added = false;
    let want = set.watches();
    for (p, r) in active.difference(&want).cloned().collect::<Vec<_>>() {
        let _ = w.unwatch(&p);
        active.remove(&(p, r));
    }
    for (p, recursive) in want {
        if active.contains(&(p.clone(), recursive)) || !p.is_dir() {
            continue;
        }
        let mode = if recursive {
            RecursiveMode::Recursive
        } else {
            RecursiveMode::NonRecursive
        };
        match w.watch(&p, mode) {
            Ok(()) => {
                active.insert((p, recursive));
                added = true;
            }
            Err(e) => tracing::debug!("cannot watch {}: {e}", p.display()),
        }
    }
    added
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn concerns_only_named_paths() {
        let mut s = WatchSet::default();
        s.dirs.insert("/etc/stead/intentions.d".into());
        s.inputs.insert("/srv/a/secrets.env".into());
        s.inputs.insert("/srv/models".into());
        assert!(s.concerns(Path::new("/etc/stead/intentions.d/x.toml")));
        assert!(s.concerns(Path::new("/srv/a/secrets.env")));
        assert!(s.concerns(Path::new("/srv/models/v1/weights.bin")));
        assert!(!s.concerns(Path::new("/srv/a/other.txt")));
        assert!(!s.concerns(Path::new("/etc/passwd")));
    }

    #[tokio::test]
    async fn the_set_it_starts_with_is_watched() {
        let d = tempfile::tempdir().unwrap();
        let mut set = WatchSet::default();
        set.dirs.insert(d.path().to_path_buf());
        let (_tx, rx) = watch::channel(set);
        let wake = Arc::new(Notify::new());
        let task = tokio::spawn(run(rx, wake.clone()));
        tokio::time::timeout(Duration::from_secs(2), wake.notified())
            .await
            .expect("the first watches ask for a pass");
        std::fs::write(d.path().join("m.toml"), "x").unwrap();
        tokio::time::timeout(Duration::from_secs(2), wake.notified())
            .await
            .expect("a new file in a watched directory wakes");
        task.abort();
    }

    #[tokio::test]
    async fn a_rewrite_by_rename_wakes_within_the_debounce() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("secrets.env");
        std::fs::write(&f, "A=1").unwrap();
        let (tx, rx) = watch::channel(WatchSet::default());
        let wake = Arc::new(Notify::new());
        let task = tokio::spawn(run(rx, wake.clone()));
        let mut set = WatchSet::default();
        set.inputs.insert(f.clone());
        tx.send(set).unwrap();
        // New watches ask for a pass: a change made before them was missed.
        tokio::time::timeout(Duration::from_secs(2), wake.notified())
            .await
            .expect("woken by the new watch");
        for round in 0..3 {
            // Reading the file, as hashing it does: no wake.
            std::fs::read(&f).unwrap();
            assert!(
                tokio::time::timeout(Duration::from_millis(500), wake.notified())
                    .await
                    .is_err(),
                "woken by a read"
            );
            // An unrelated file: no wake.
            std::fs::write(d.path().join("noise"), format!("{round}")).unwrap();
            assert!(
                tokio::time::timeout(Duration::from_millis(500), wake.notified())
                    .await
                    .is_err(),
                "woken by noise"
            );
            // Replaced by rename, as editors do: wakes, every time.
            let tmp = d.path().join(".tmp");
            std::fs::write(&tmp, format!("A={round}")).unwrap();
            std::fs::rename(&tmp, &f).unwrap();
            tokio::time::timeout(Duration::from_secs(2), wake.notified())
                .await
                .expect("woken by the rewrite");
        }
        drop(tx);
        task.await.unwrap();
    }
}
