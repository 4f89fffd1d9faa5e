//! What a pass learns and keeps: how each managed container is living
//! (settled, settling, crash-looping; inspected only while that can change),
//! every module's status on the board, the observed and applied records in
//! the store (written only when they changed), and composed files no longer
//! used, removed.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::engine::{ContainerState, Engine, EngineError, Observed};
use crate::host::clock::now;
use crate::intake::dir::FileRejected;
use crate::model::names::{ModuleName, NodeId};
use crate::reconcile::Reconciler;
use crate::reconcile::execute::applied_record;
use crate::reconcile::report::{Action, ModuleReport};
use crate::reconcile::resolve::Resolved;
use crate::status::judge::{self, Living};
use crate::status::lives::Answer;
use crate::status::{Act, LastAction, ModuleState, ModuleStatus};
use crate::store::{AppliedRecord, ApplyState, Entry, ObservedRecord};

/// How a module's container is living, as judged this pass.
#[derive(Clone, Debug)]
pub struct Lived {
    /// The judgement.
    pub living: Living,
    /// What the last probe printed, when its health check fails.
    pub probe: Option<String>,
    /// Its restart count, when an inspect said.
    pub restarts: Option<u32>,
    /// How long it has been up, when known.
    pub up_for: Option<Duration>,
}

impl Reconciler {
    /// Judges how each managed container is living. A container running for
    /// the settle window is judged from the list alone; others from the
    /// engine's events while they are followed (an inspect only for a
    /// container older than the stream), or else inspected (once per state
    /// for a stopped one). A quiet pass makes no inspect.
    pub(super) async fn observe_lives<E: Engine>(
        &mut self,
        engine: &E,
        observed: &[Observed],
    ) -> Result<BTreeMap<String, Lived>, EngineError> {
        let now = now() as i64;
        let mut out = BTreeMap::new();
        let mut seen = BTreeSet::new();
        for o in observed {
            let Some(module) = at_its_name(&self.node, o) else {
                continue;
            };
            seen.insert(o.id.clone());
            let up = if o.state == ContainerState::Running {
                judge::up_for(&o.status)
            } else {
                None
            };
            let young = up.is_none_or(|u| u < self.tuning.settle.window);
            let answer = self
                .lives
                .lock()
                .expect("life book lock")
                .answer(&o.id, o.state, o.created, young);
            let life = match answer {
                Answer::Life(l) => Some(l),
                Answer::Unknown => None,
                Answer::Inspect => match engine.inspect(&o.id).await {
                    Ok(l) => Some(
                        self.lives
                            .lock()
                            .expect("life book lock")
                            .seed(&o.id, o.state, l),
                    ),
                    Err(e) if e.is_unreachable() => return Err(e),
                    // Gone since the list: judged from the list alone.
                    Err(_) => None,
                },
            };
            let life = life.as_ref();
            let baseline = self.baselines.get(&o.id).copied().unwrap_or(0);
            let living = judge::judge(o.state, up, life, baseline, now, self.tuning.settle);
            let up_for = judge::up_time(o.state, up, life, now);
            let reset = judge::settled(
                living,
                life.map(|l| l.restart_count),
                up_for,
                self.tuning.crash_backoff_reset,
            );
            if let Some(b) = reset.baseline {
                self.baselines.insert(o.id.clone(), b);
            }
            if reset.forgive {
                if let Ok(m) = ModuleName::try_from(module) {
                    self.retries.forgive(&m);
                }
            }
            // Unhealthy: what the probe says is read (one inspect a pass,
            // while it lasts).
            let probe = if o.health() == Some("unhealthy") {
                match life.and_then(|l| l.health_output.clone()) {
                    Some(p) => Some(p),
                    None => match engine.inspect(&o.id).await {
                        Ok(l) => l.health_output,
                        Err(e) if e.is_unreachable() => return Err(e),
                        Err(_) => None,
                    },
                }
            } else {
                None
            };
            out.insert(
                module.to_string(),
                Lived {
                    probe,
                    living,
                    restarts: life.map(|l| l.restart_count),
                    up_for,
                },
            );
        }
        self.lives
            .lock()
            .expect("life book lock")
            .retain(|id| seen.contains(id));
        self.baselines.retain(|id, _| seen.contains(id));
        Ok(out)
    }

    /// Writes every module's status for this pass.
    pub(super) fn update_board(
        &self,
        entries: &BTreeMap<ModuleName, Entry>,
        reports: &[ModuleReport],
        (observed, looked_at): (&[Observed], u64),
        livings: &BTreeMap<String, Lived>,
        rejected: &[FileRejected],
        images: &crate::engine::image::Images,
    ) {
        let mut board = self.board.lock().expect("board lock");
        let previous = std::mem::take(&mut *board);
        let at = now();
        for (name, entry) in entries {
            let n = name.as_str();
            let mut st = ModuleStatus::pending(n);
            st.observed_at = Some(looked_at);
            st.last_action = previous.get(n).and_then(|p| p.last_action.clone());
            let running = observed.iter().find(|o| {
                o.module_of(&self.node) == Some(n) && o.names.contains(&name.container_name())
            });
            st.running_digest = running.and_then(|o| o.labels.digest.clone());
            st.container_id = running.map(|o| o.id.clone());
            st.image_id = running.map(|o| o.image_id.clone());
            st.image_digests = running
                .and_then(|o| images.find(&o.image_id))
                .map(|i| i.digests.clone())
                .unwrap_or_default();
            st.image = entry.record.as_ref().map(|r| r.intention.image.clone());
            st.health = running.and_then(|o| o.health()).map(str::to_string);
            let living = livings.get(n);
            st.restart_count = living.and_then(|l| l.restarts);
            if let Some(r) = reports.iter().find(|r| r.module == n) {
                st.desired_digest = r.digest.clone();
                if r.container.is_some() {
                    st.container_id = r.container.clone();
                }
                st.last_error = r.error.clone();
                st.next_attempt_at = r.retry_in.map(|d| at + d.as_secs() + 1);
                let act = |action: Act| Some(LastAction { action, at });
                st.state = match r.action {
                    Action::Created => {
                        st.last_action = act(Act::Created);
                        st.running_digest = r.digest.clone();
                        st.restart_count = Some(0);
                        ModuleState::Starting
                    }
                    Action::Recreated => {
                        st.last_action = act(Act::Recreated);
                        st.running_digest = r.digest.clone();
                        st.restart_count = Some(0);
                        ModuleState::Starting
                    }
                    Action::Started => {
                        st.last_action = act(Act::Started);
                        // Podman restarts at once and is seen exited between
                        // two restarts, where the agent starts it too: a
                        // container that keeps dying is crash-looping still.
                        if living.is_some_and(|l| l.living == Living::CrashLooping) {
                            ModuleState::CrashLooping
                        } else {
                            ModuleState::Starting
                        }
                    }
                    Action::Drifted => {
                        if previous
                            .get(n)
                            .is_none_or(|p| p.state != ModuleState::Drifted)
                        {
                            st.last_action = act(Act::DriftReported);
                        }
                        st.inputs_differ = r.moved.clone();
                        ModuleState::Drifted
                    }
                    Action::Deferred => {
                        st.inputs_differ = r.moved.clone();
                        ModuleState::Deferred
                    }
                    Action::Conflict => ModuleState::Conflict,
                    Action::BackingOff => judge::backing_off(st.container_id.is_some(), r.refused),
                    Action::Held | Action::Failed => ModuleState::Failed,
                    Action::Quarantined => ModuleState::Quarantined,
                    Action::Depending => ModuleState::Waiting,
                    // Not acted on until its image is there.
                    Action::Pulling => ModuleState::Pending,
                    Action::Removed => continue,
                    Action::Unchanged | Action::Waiting => {
                        let policy = entry
                            .record
                            .as_ref()
                            .map(|r| r.intention.restart)
                            .unwrap_or_default();
                        let probe = living.and_then(|l| l.probe.as_deref());
                        let (state, error) = judge::standing(
                            living.map(|l| l.living),
                            st.health.as_deref(),
                            probe,
                            policy.as_str(),
                        );
                        if state == ModuleState::Unhealthy {
                            st.health_output = probe.map(str::to_string);
                        }
                        if error.is_some() {
                            st.last_error = error;
                        }
                        state
                    }
                };
            }
            if let Some(rej) = rejected.iter().find(|r| r.module.as_ref() == Some(name)) {
                st.last_error = Some(format!(
                    "intention not taken, the stored one still applies: {}",
                    rej.error
                ));
            }
            board.insert(n.to_string(), st);
        }
    }
}

/// The module of a container this node manages at the module's own name
/// (not a successor under way, not one renamed by hand).
pub(super) fn at_its_name<'a>(node: &NodeId, o: &'a Observed) -> Option<&'a str> {
    let module = o.module_of(node)?;
    let name = ModuleName::try_from(module).ok()?;
    o.names.contains(&name.container_name()).then_some(module)
}

/// Records for the store: observed records by module, applied records.
pub type ToWrite = (
    Vec<(String, ObservedRecord)>,
    Vec<(ModuleName, AppliedRecord)>,
);

/// The observed records that changed, and the applied records of
/// containers found already carrying their target (created by a pass that
/// was interrupted before it could say so).
pub fn records_to_write(
    node: &NodeId,
    observed: &[Observed],
    resolved: &Resolved,
    stored_observed: &BTreeMap<String, ObservedRecord>,
    stored_applied: &BTreeMap<String, AppliedRecord>,
) -> ToWrite {
    let mut obs = Vec::new();
    let mut applied = Vec::new();
    for o in observed {
        let Some(module) = at_its_name(node, o) else {
            continue;
        };
        let rec = ObservedRecord {
            container_id: o.id.clone(),
            digest: o.labels.digest.clone(),
            state: o.state.as_str().to_string(),
            image_id: o.image_id.clone(),
            created: o.created,
        };
        if stored_observed.get(module) != Some(&rec) {
            obs.push((module.to_string(), rec));
        }
        let Some(d) = ModuleName::try_from(module)
            .ok()
            .and_then(|m| resolved.desired(&m))
        else {
            continue;
        };
        if o.labels.digest.as_ref() == Some(&d.digest) {
            let current = stored_applied.get(d.name.as_str()).is_some_and(|a| {
                a.state == ApplyState::Applied
                    && a.digest == d.digest
                    && a.container_id.as_deref() == Some(o.id.as_str())
            });
            if !current {
                applied.push((
                    d.name.clone(),
                    applied_record(d, ApplyState::Applied, Some(o.id.clone())),
                ));
            }
        }
    }
    (obs, applied)
}

/// Removes the live directories (`<data_dir>/live/<module>`, beside
/// `files_dir`) of modules that are not desired and that no listed
/// container mounts from.
pub fn collect_live(files_dir: &Path, wanted: &BTreeSet<String>, keep: &BTreeSet<PathBuf>) {
    let Some(root) = files_dir.parent().map(|d| d.join("live")) else {
        return;
    };
    let Ok(modules) = std::fs::read_dir(&root) else {
        return;
    };
    for m in modules.flatten() {
        let dir = m.path();
        let name = m.file_name().to_string_lossy().into_owned();
        if wanted.contains(&name) || keep.iter().any(|k| k.starts_with(&dir)) {
            continue;
        }
        match std::fs::remove_dir_all(&dir) {
            Ok(()) => tracing::info!("removed the live files of module {name}, gone"),
            Err(e) => tracing::warn!("cannot remove the live files {}: {e}", dir.display()),
        }
    }
}

/// Removes composed files that neither a desired module nor any listed
/// container uses.
pub fn collect_garbage(files_dir: &Path, keep: &BTreeSet<PathBuf>) {
    let Ok(modules) = std::fs::read_dir(files_dir) else {
        return;
    };
    for m in modules.flatten() {
        let dir = m.path();
        let Ok(files) = std::fs::read_dir(&dir) else {
            continue;
        };
        for f in files.flatten() {
            let p = f.path();
            if !keep.contains(&p) {
                if let Err(e) = std::fs::remove_file(&p) {
                    tracing::warn!("cannot remove unused composed file {}: {e}", p.display());
                }
            }
        }
        // Fails while the directory still holds files; that is fine.
        let _ = std::fs::remove_dir(&dir);
    }
}
