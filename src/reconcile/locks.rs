//! The update locks in a pass: which still stand (each only for the life
//! of the container it was taken for: one inspect per lock held), the
//! recreates they hold off, and the locks asked through the API, taken
//! for the module's running container before the pass that might have
//! replaced it. The rules are `model::lock`'s; the locks are the store's.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::engine::{Engine, EngineError};
use crate::host::blocking::run as blocking;
use crate::model::lock::{self, Hold, Lock, Scope};
use crate::model::names::ModuleName;
use crate::store::Store;
use crate::store::locks::LockChange;

use super::{PassError, Reconciler, plan};

/// A lock asked through the API: the module, the reason (checked), what
/// it holds off, and what is told the lock taken, or why not.
pub type LockAsk = (
    ModuleName,
    String,
    Scope,
    Box<dyn FnOnce(Result<Lock, String>) + Send>,
);

impl Reconciler {
    /// Locks asked through the API, to be taken at the next pass, before
    /// it acts.
    pub fn ask_locks(&mut self, asks: Vec<LockAsk>) {
        self.lock_asks.extend(asks);
    }

    /// Takes the locks asked, each for its module's container as this
    /// pass lists it, if that runs: its life is what the lock stands for.
    pub(super) async fn take_locks<E: Engine>(
        &mut self,
        engine: &E,
        store: &Arc<Store>,
        observed: &[crate::engine::Observed],
    ) -> Result<(), PassError> {
        let mut changes = Vec::new();
        let mut answers = Vec::new();
        for (module, reason, scope, reply) in std::mem::take(&mut self.lock_asks) {
            let no = format!("{module} has no running container to hold a lock for");
            let Some(o) = observed.iter().find(|o| {
                super::observe::at_its_name(&self.node, o) == Some(module.as_str())
                    && o.state == crate::engine::ContainerState::Running
            }) else {
                answers.push((reply, Err(no)));
                continue;
            };
            let life = match engine.inspect(&o.id).await {
                Ok(life) => life,
                Err(EngineError::NotFound(_)) => {
                    answers.push((reply, Err(no)));
                    continue;
                }
                Err(e) => return Err(e.into()),
            };
            let taken = Lock {
                module: module.clone(),
                reason,
                scope,
                taken_at: crate::host::clock::now(),
                container: o.id.clone(),
                started_ns: life.started_ns,
                waited_since: None,
                file: false,
            };
            if !taken.stands(&o.id, life.started_ns, life.finished_ns, life.restarting) {
                answers.push((reply, Err(no)));
                continue;
            }
            changes.push(LockChange::Keep(taken.clone()));
            changes.push(LockChange::Say(module, format!("{} taken", taken.said())));
            answers.push((reply, Ok(taken)));
        }
        if !changes.is_empty() {
            store.blocking(move |s| s.change_locks(changes)).await?;
        }
        // Answered once stored.
        for (reply, out) in answers {
            reply(out);
        }
        Ok(())
    }

    /// The locks held that still stand. A module's lock file (its
    /// `update_lock` directory's `device.lock` or `updates.lock`, made
    /// in its running container's present life) is kept as a lock; one
    /// made before is stale and removed. Then every lock whose container
    /// stopped, started again or is gone is released (its file too),
    /// saying so; a lock file removed releases its lock.
    pub(super) async fn standing_locks<E: Engine>(
        &mut self,
        engine: &E,
        store: &Arc<Store>,
        wants: &[(ModuleName, String, i64)],
    ) -> Result<Vec<Lock>, PassError> {
        let mut held = store.blocking(|s| s.locks()).await?;
        let mut changes = Vec::new();
        let mut stale: Vec<PathBuf> = Vec::new();
        if !wants.is_empty() || held.iter().any(|l| l.file) {
            self.file_locks(engine, &mut held, wants, &mut changes, &mut stale)
                .await?;
        }
        let mut standing = Vec::new();
        for l in held {
            let ended = match engine.inspect(&l.container).await {
                Ok(life)
                    if l.stands(
                        &l.container,
                        life.started_ns,
                        life.finished_ns,
                        life.restarting,
                    ) =>
                {
                    None
                }
                Ok(life) if life.started_ns != l.started_ns => Some("was started again"),
                Ok(_) => Some("stopped"),
                Err(EngineError::NotFound(_)) => Some("is gone"),
                Err(e) => return Err(e.into()),
            };
            let Some(how) = ended else {
                standing.push(l);
                continue;
            };
            if l.file {
                stale.push(self.lock_dir(&l.module));
            }
            let said = format!(
                "{} released: the container it was taken for {how}",
                l.said()
            );
            changes.push(LockChange::Release(l.key()));
            changes.push(LockChange::Say(l.module, said));
        }
        if !stale.is_empty() {
            blocking(move || stale.iter().for_each(|d| remove_lock_files(d))).await;
        }
        if !changes.is_empty() {
            store.blocking(move |s| s.change_locks(changes)).await?;
        }
        Ok(standing)
    }

    /// The lock directory of a module (`update_lock`): under the data
    /// directory, mounted read-write where the module says.
    pub(super) fn lock_dir(&self, module: &ModuleName) -> PathBuf {
        lock_dir(&self.files_dir, module)
    }

    /// Reads the lock files of the modules that have a lock directory
    /// (`wants`: each with its running container and when that was
    /// created, seconds since the epoch), into `held`; what is to be
    /// stored goes to `changes`, the directories whose files are stale to
    /// `stale`.
    async fn file_locks<E: Engine>(
        &mut self,
        engine: &E,
        held: &mut Vec<Lock>,
        wants: &[(ModuleName, String, i64)],
        changes: &mut Vec<LockChange>,
        stale: &mut Vec<PathBuf>,
    ) -> Result<(), PassError> {
        let dirs: Vec<PathBuf> = wants.iter().map(|(m, ..)| self.lock_dir(m)).collect();
        let found =
            blocking(move || dirs.iter().map(|d| read_lock_file(d)).collect::<Vec<_>>()).await;
        for ((module, container, created), file) in wants.iter().zip(found) {
            let at = held.iter().position(|l| l.file && l.module == *module);
            let Some(file) = file else {
                if let Some(at) = at {
                    let l = held.remove(at);
                    let said = format!("{} released: its lock file was removed", l.said());
                    changes.push(LockChange::Release(l.key()));
                    changes.push(LockChange::Say(l.module, said));
                }
                continue;
            };
            let was = at.map(|at| held[at].clone());
            if was.as_ref().is_some_and(|l| {
                l.container == *container && l.scope == file.scope && l.reason == file.reason
            }) {
                continue;
            }
            let life = match engine.inspect(container).await {
                Ok(life) => life,
                Err(EngineError::NotFound(_)) => continue,
                Err(e) => return Err(e.into()),
            };
            let running = life.finished_ns < life.started_ns && !life.restarting;
            if !running {
                continue;
            }
            // Made before this container was created (by the one it
            // replaced), or before it last stopped (in an earlier life,
            // which crashed holding it): the module holds nothing. (Not
            // "before it last started": the engine stamps a start after
            // the process began, which may take its lock at once.)
            if file.modified_ns <= life.finished_ns
                || file.modified_ns < created.saturating_mul(1_000_000_000)
            {
                stale.push(self.lock_dir(module));
                if let Some(at) = at {
                    let l = held.remove(at);
                    changes.push(LockChange::Release(l.key()));
                }
                let said = format!(
                    "a lock file ({}) made before its container's present life removed: a lock stands for the life that made it",
                    file.name
                );
                changes.push(LockChange::Say(module.clone(), said));
                continue;
            }
            let lock = Lock {
                module: module.clone(),
                reason: file.reason,
                scope: file.scope,
                taken_at: was
                    .as_ref()
                    .filter(|l| l.container == *container)
                    .map_or_else(crate::host::clock::now, |l| l.taken_at),
                container: container.clone(),
                started_ns: life.started_ns,
                waited_since: was
                    .as_ref()
                    .filter(|l| l.scope == file.scope)
                    .and_then(|l| l.waited_since),
                file: true,
            };
            changes.push(LockChange::Keep(lock.clone()));
            if was.is_none() {
                changes.push(LockChange::Say(
                    module.clone(),
                    format!("{} taken", lock.said()),
                ));
            }
            match at {
                Some(at) => held[at] = lock,
                None => held.push(lock),
            }
        }
        Ok(())
    }

    /// Holds off each recreate a lock holds (under the documents' policy),
    /// and stores when a recreate first waited for each lock, so the max
    /// counts across restarts of the agent.
    pub(super) async fn hold_for_locks(
        &mut self,
        store: &Arc<Store>,
        locks: &[Lock],
        steps: &mut plan::Plan,
    ) -> Result<(), PassError> {
        let now = crate::host::clock::now();
        let policy = self.lock_policy();
        let mut waited: Vec<String> = Vec::new();
        let mut changes = Vec::new();
        let mut wake_at: Option<u64> = None;
        plan::defer(steps, |module| {
            let hold = lock::hold(locks, module, policy.as_ref(), now);
            if hold != Hold::Free {
                waited.extend(
                    locks
                        .iter()
                        .filter(|l| l.scope == Scope::Device || &l.module == module)
                        .filter(|l| l.waited_since.is_none())
                        .map(Lock::key),
                );
            }
            match hold {
                Hold::Free => None,
                Hold::Waits(why, until) => {
                    wake_at = match (wake_at, until) {
                        (Some(a), Some(b)) => Some(a.min(b)),
                        (a, b) => a.or(b),
                    };
                    Some(why)
                }
                Hold::Takes(why) => {
                    changes.push(LockChange::Say(
                        module.clone(),
                        format!("recreated though locked: {why}"),
                    ));
                    None
                }
            }
        });
        self.wake_at(wake_at);
        for l in locks.iter().filter(|l| waited.contains(&l.key())) {
            let mut l = l.clone();
            l.waited_since = Some(now);
            changes.push(LockChange::Keep(l));
        }
        if !changes.is_empty() {
            store.blocking(move |s| s.change_locks(changes)).await?;
        }
        Ok(())
    }
}

/// The lock directory of `module`, beside the composed files' (`files_dir`)
/// in the data directory.
pub(super) fn lock_dir(files_dir: &Path, module: &ModuleName) -> PathBuf {
    super::files_dir_parent(files_dir)
        .join("locks")
        .join(module.as_str())
}

/// A lock file found in a module's lock directory.
struct LockFile {
    /// Its name.
    name: &'static str,
    /// What it holds off.
    scope: Scope,
    /// When it was last written, nanoseconds since the epoch.
    modified_ns: i64,
    /// Its first line, if it is a reason; else what says it is a file.
    reason: String,
}

/// The longest a lock file is read for its reason.
const REASON_BYTES: u64 = 512;

/// The lock file in `dir` that holds most (`device.lock` before
/// `updates.lock`), if any. Its first line is its reason (checked as the
/// API's; one that is not reads as `a lock file`).
fn read_lock_file(dir: &Path) -> Option<LockFile> {
    use std::io::Read as _;
    for (name, scope) in crate::model::lock::LOCK_FILES {
        let path = dir.join(name);
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if !meta.is_file() {
            continue;
        }
        let modified_ns = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX));
        let mut text = String::new();
        if let Ok(f) = std::fs::File::open(&path) {
            let _ = f.take(REASON_BYTES).read_to_string(&mut text);
        }
        let reason = text
            .lines()
            .next()
            .and_then(|l| crate::model::lock::check_reason(l).ok())
            .unwrap_or_else(|| format!("a lock file, {name}"));
        return Some(LockFile {
            name,
            scope,
            modified_ns,
            reason,
        });
    }
    None
}

/// Makes a module's lock directory, writable by whatever user its
/// processes run as (the data directory above it is the agent's alone).
pub(super) fn make_lock_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::create_dir_all(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o777))
}

/// Removes a lock directory's lock files (a lock that ended with its
/// container): the module's next life finds none to wait on.
fn remove_lock_files(dir: &Path) {
    for (name, _) in crate::model::lock::LOCK_FILES {
        match std::fs::remove_file(dir.join(name)) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => tracing::warn!(
                "update lock: cannot remove {}: {e}",
                dir.join(name).display()
            ),
        }
    }
}
