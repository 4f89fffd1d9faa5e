//! One reconcile pass: intentions → desired digests → plan → engine actions →
//! observations and events. A pass reads the whole world again every time;
//! it is never told why it runs, so a pass after a crash derives the same
//! plan as the one that was interrupted.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::StreamExt;

use crate::digest::FileDigester;
use crate::intention::RestartPolicy;
use crate::intention::{self, FileRejected};
use crate::metrics::{Counted, Metrics};
use crate::names::{Digest, ModuleName, NodeId};
use crate::plan::{self, ContainerState, Moved, Observed, Step, Target, Want};
use crate::render;
use crate::runtime::Life;
use crate::runtime::{Engine, EngineError, find_image};
use crate::spec::{self, Desired};
use crate::status::{self, Board, LastAction, Living, ModuleState, ModuleStatus, Settle};
use crate::store::{
    AppliedRecord, ApplyState, EventKind, IntentionRecord, ObservedRecord, Source, Store,
    StoreError, now,
};

/// How many modules are acted on at once.
const PARALLEL_ACTIONS: usize = 4;

/// Why a pass could not finish.
#[derive(Debug, thiserror::Error)]
pub enum PassError {
    /// The engine went away; the agent waits for it.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The intentions directory could not be listed.
    #[error("cannot read the intentions directory {path}: {source}")]
    Intentions {
        /// The directory.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// What a pass did for one module.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Nothing: the container matches.
    Unchanged,
    /// A container was created and started.
    Created,
    /// A stopped container was started.
    Started,
    /// The container was replaced because inputs moved.
    Recreated,
    /// An orphaned container was removed.
    Removed,
    /// Inputs moved; by policy only reported.
    Drifted,
    /// Its target cannot be computed now; the container is left alone.
    Held,
    /// A container not managed here holds its name.
    Conflict,
    /// The engine is busy with the container.
    Waiting,
    /// Acting again toward a target that keeps failing is held back.
    BackingOff,
    /// An engine action failed.
    Failed,
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Action::Unchanged => "unchanged",
            Action::Created => "created",
            Action::Started => "started",
            Action::Recreated => "recreated",
            Action::Removed => "removed",
            Action::Drifted => "drifted",
            Action::Held => "held",
            Action::Conflict => "conflict",
            Action::Waiting => "waiting",
            Action::BackingOff => "backing-off",
            Action::Failed => "failed",
        })
    }
}

/// What a pass did for one module.
#[derive(Clone, Debug)]
pub struct ModuleReport {
    /// The module (for a removed orphan, what its label said).
    pub module: String,
    /// What was done.
    pub action: Action,
    /// The desired spec digest, when known.
    pub digest: Option<Digest>,
    /// The container acted on or kept.
    pub container: Option<String>,
    /// For drift and recreation, the inputs that moved.
    pub moved: Vec<Moved>,
    /// Why it failed or is held.
    pub error: Option<String>,
}

impl fmt::Display for ModuleReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let digest = self.digest.as_ref().map_or("-", |d| d.as_str());
        write!(
            f,
            "{:<24} {:<10} {digest}",
            self.module,
            self.action.to_string()
        )?;
        for m in &self.moved {
            write!(f, "  [{m}]")?;
        }
        if let Some(e) = &self.error {
            write!(f, "  ({e})")?;
        }
        Ok(())
    }
}

/// What one pass did.
#[derive(Debug, Default)]
pub struct PassReport {
    /// One entry per module acted on or looked at, by module name.
    pub modules: Vec<ModuleReport>,
    /// Intention files that were refused.
    pub rejected: Vec<FileRejected>,
    /// How long the pass took.
    pub duration: Duration,
}

/// The reconciler: the state a pass carries from one to the next is only a
/// cache (file digests) and what was already said (so the event log is not
/// flooded), never a reason to act.
pub struct Reconciler {
    node: NodeId,
    intentions_dir: PathBuf,
    files_dir: PathBuf,
    tuning: Tuning,
    digester: FileDigester,
    said: BTreeMap<String, String>,
    lives: HashMap<String, (ContainerState, Life)>,
    baselines: HashMap<String, u32>,
    repairs: HashMap<ModuleName, Repair>,
    pulls: HashMap<String, Backoff>,
    board: Arc<Mutex<Board>>,
    metrics: Arc<Metrics>,
}

/// The windows of settling and of the crash-loop backoff.
#[derive(Clone, Copy, Debug)]
pub struct Tuning {
    /// What tells settling from crash-looping.
    pub settle: Settle,
    /// The first wait before acting again toward a target that failed.
    pub crash_backoff_min: Duration,
    /// The longest such wait.
    pub crash_backoff_max: Duration,
    /// Up this long: the backoff starts over.
    pub crash_backoff_reset: Duration,
}

impl Default for Tuning {
    fn default() -> Self {
        Tuning {
            settle: Settle {
                window: Duration::from_secs(30),
                crash_restarts: 5,
            },
            crash_backoff_min: Duration::from_secs(10),
            crash_backoff_max: Duration::from_secs(300),
            crash_backoff_reset: Duration::from_secs(600),
        }
    }
}

/// The wait after `attempts` earlier attempts: `crash_backoff_min`,
/// doubling, capped at `crash_backoff_max`.
fn backoff_delay(t: &Tuning, attempts: u32) -> Duration {
    t.crash_backoff_min
        .saturating_mul(1u32 << attempts.min(16))
        .min(t.crash_backoff_max)
}

/// Attempts at something that keeps failing (an image pull).
struct Backoff {
    attempts: u32,
    next_at: tokio::time::Instant,
    last_error: String,
}

/// Attempts toward one target of one module.
struct Repair {
    digest: Digest,
    attempts: u32,
    next_at: tokio::time::Instant,
}

impl Reconciler {
    /// A reconciler for this node.
    pub fn new(
        node: NodeId,
        intentions_dir: PathBuf,
        files_dir: PathBuf,
        tuning: Tuning,
    ) -> Reconciler {
        Reconciler {
            node,
            intentions_dir,
            files_dir,
            tuning,
            digester: FileDigester::new(),
            said: BTreeMap::new(),
            lives: HashMap::new(),
            baselines: HashMap::new(),
            repairs: HashMap::new(),
            pulls: HashMap::new(),
            board: Arc::new(Mutex::new(Board::new())),
            metrics: Arc::new(Metrics::default()),
        }
    }

    /// Every module's status, as of the last pass.
    pub fn board(&self) -> Arc<Mutex<Board>> {
        self.board.clone()
    }

    /// The counters.
    pub fn metrics(&self) -> Arc<Metrics> {
        self.metrics.clone()
    }

    /// The host paths whose change should trigger a pass: every env file and
    /// read-only mount source of the stored intentions.
    pub fn watched_inputs(store: &Store) -> Result<BTreeSet<PathBuf>, StoreError> {
        let mut out = BTreeSet::new();
        for e in store.entries()?.values() {
            if let Some(i) = e.effective() {
                out.extend(i.env_files.iter().map(|p| p.to_path_buf()));
                out.extend(
                    i.mounts
                        .iter()
                        .filter(|m| m.access == crate::intention::Access::ReadOnly)
                        .map(|m| m.source.to_path_buf()),
                );
            }
        }
        Ok(out)
    }

    /// Appends an event unless the same thing was already said for `key`.
    fn say_once(
        &mut self,
        store: &Store,
        key: &str,
        module: Option<&str>,
        kind: EventKind,
        detail: String,
    ) -> Result<(), StoreError> {
        if self.said.get(key) == Some(&detail) {
            return Ok(());
        }
        match kind {
            EventKind::Rejected | EventKind::Error | EventKind::Conflict => {
                tracing::warn!(module, "{detail}")
            }
            _ => tracing::info!(module, "{detail}"),
        }
        store.append_event(module, kind, detail.clone())?;
        self.said.insert(key.to_string(), detail);
        Ok(())
    }

    /// Brings the stored intentions in line with the intentions directory.
    /// A refused file changes nothing: the module it named keeps its stored
    /// intention (and so its container). A file never takes over a module
    /// stated through the API, nor is an API module removed for want of a
    /// file: two sources never silently fight over one module.
    fn sync_intentions(&mut self, store: &Store) -> Result<Vec<FileRejected>, PassError> {
        let mut loaded =
            intention::load_dir(&self.intentions_dir).map_err(|source| PassError::Intentions {
                path: self.intentions_dir.display().to_string(),
                source,
            })?;
        let stored = store.intentions()?;
        let rejected_paths: BTreeSet<String> = loaded
            .rejected
            .iter()
            .map(|r| r.path.display().to_string())
            .collect();
        let mut protected: BTreeSet<ModuleName> = loaded
            .rejected
            .iter()
            .filter_map(|r| r.module.clone())
            .collect();
        for (name, r) in &stored {
            if let Source::File(p) = &r.source {
                if rejected_paths.contains(p) {
                    protected.insert(name.clone());
                }
            }
        }
        let taken: BTreeSet<ModuleName> = loaded.intentions.keys().cloned().collect();
        for (name, (path, i)) in std::mem::take(&mut loaded.intentions) {
            let source = Source::File(path.display().to_string());
            // The usual case, read without a write transaction.
            if stored
                .get(&name)
                .is_some_and(|r| r.intention == i && r.source == source)
            {
                continue;
            }
            let outcome = store.modify(&name, |e| match &e.record {
                Some(r) if r.source == Source::Api => Err(format!(
                    "module {:?} is stated through the API; delete it there (stead rm {}) before defining it in a file",
                    name.as_str(),
                    name.as_str()
                )),
                Some(r) if r.intention == i && r.source == source => Ok(None),
                prev => {
                    let revision = prev.as_ref().map_or(1, |p| p.revision + 1);
                    e.record = Some(IntentionRecord { source: source.clone(), revision, intention: i.clone() });
                    Ok(Some(revision))
                }
            })?;
            match outcome {
                Ok(None) => {}
                Ok(Some(revision)) => {
                    let detail = format!(
                        "intention taken from {} (revision {revision})",
                        path.display()
                    );
                    tracing::info!(module = name.as_str(), "{detail}");
                    store.append_event(Some(name.as_str()), EventKind::Intention, detail)?;
                }
                Err(message) => loaded.rejected.push(FileRejected {
                    error: intention::IntentionError {
                        origin: path.display().to_string(),
                        field: "name".into(),
                        message,
                    },
                    path,
                    module: Some(name),
                }),
            }
        }
        for (name, r) in &stored {
            let Source::File(p) = &r.source else { continue };
            if protected.contains(name) || taken.contains(name) {
                continue;
            }
            let gone = store.modify(name, |e| -> Result<bool, ()> {
                // Only if it is still the same file's: a concurrent API write wins.
                if e.record
                    .as_ref()
                    .is_some_and(|r| r.source == Source::File(p.clone()))
                {
                    e.record = None;
                    Ok(true)
                } else {
                    Ok(false)
                }
            })?;
            if gone == Ok(true) {
                let detail = format!("intention removed: {p} no longer defines it");
                tracing::info!(module = name.as_str(), "{detail}");
                store.append_event(Some(name.as_str()), EventKind::Intention, detail)?;
            }
        }
        let mut still_bad = BTreeSet::new();
        for r in &loaded.rejected {
            let key = format!("rejected:{}", r.path.display());
            self.say_once(
                store,
                &key,
                r.module.as_ref().map(|m| m.as_str()),
                EventKind::Rejected,
                r.error.to_string(),
            )?;
            still_bad.insert(key);
        }
        self.said
            .retain(|k, _| !k.starts_with("rejected:") || still_bad.contains(k));
        Ok(loaded.rejected)
    }

    /// Runs one pass against the engine.
    pub async fn pass<E: Engine>(
        &mut self,
        engine: &E,
        store: &Store,
    ) -> Result<PassReport, PassError> {
        let metrics = self.metrics.clone();
        let counted = Counted {
            engine,
            metrics: &metrics,
        };
        let engine = &counted;
        let started = Instant::now();
        let now = tokio::time::Instant::now();
        let rejected = self.sync_intentions(store)?;
        let entries = store.entries()?;

        let mut images = engine.list_images().await?;
        let mut pulled = BTreeSet::new();
        let mut wants = Vec::new();
        let mut desired: BTreeMap<ModuleName, Desired> = BTreeMap::new();
        let mut restart_policy = BTreeMap::new();
        for (name, entry) in &entries {
            let hold = |reason: String| Want::Hold {
                name: name.clone(),
                reason,
            };
            let Some(i) = entry.effective() else { continue };
            restart_policy.insert(name.clone(), i.restart);
            // The overlay was checked when it was written; a file changed
            // since may no longer take it.
            if let Err(e) = render::render_config(&i) {
                wants.push(hold(format!("settings overlay no longer applies: {e}")));
                continue;
            }
            let inputs = match spec::resolve_inputs(&i, &mut self.digester) {
                Ok(inputs) => inputs,
                Err(e) => {
                    wants.push(hold(e.to_string()));
                    continue;
                }
            };
            if find_image(&images, &i.image).is_none() && pulled.insert(i.image.clone()) {
                match self.pulls.get(&i.image) {
                    // A pull that failed is tried again with backoff, not every pass.
                    Some(p) if now < p.next_at => {}
                    _ => {
                        tracing::info!(
                            module = name.as_str(),
                            image = i.image,
                            "image not present; pulling"
                        );
                        match engine.pull(&i.image).await {
                            Ok(()) => {
                                self.pulls.remove(&i.image);
                                images = engine.list_images().await?;
                            }
                            Err(e) if e.is_unreachable() => return Err(e.into()),
                            Err(e) => {
                                tracing::warn!(
                                    module = name.as_str(),
                                    image = i.image,
                                    "pull failed: {e}"
                                );
                                let attempts = self.pulls.get(&i.image).map_or(0, |p| p.attempts);
                                let delay = backoff_delay(&self.tuning, attempts);
                                self.pulls.insert(
                                    i.image.clone(),
                                    Backoff {
                                        attempts: attempts + 1,
                                        next_at: now + delay,
                                        last_error: e.to_string(),
                                    },
                                );
                            }
                        }
                    }
                }
            }
            let image_id =
                match find_image(&images, &i.image).map(|img| spec::image_digest(&img.id)) {
                    Some(Ok(id)) => id,
                    Some(Err(e)) => {
                        wants.push(hold(e.to_string()));
                        continue;
                    }
                    None => {
                        let why = match self.pulls.get(&i.image) {
                            Some(p) => format!(
                                "the pull failed ({}); next attempt in {}s",
                                p.last_error,
                                p.next_at.saturating_duration_since(now).as_secs() + 1
                            ),
                            None => "the pull brought no such image".to_string(),
                        };
                        wants.push(hold(format!("image: {} is not present: {why}", i.image)));
                        continue;
                    }
                };
            let d = spec::desired(&i, inputs, &image_id, &self.node, &self.files_dir);
            wants.push(Want::Run(Target {
                name: name.clone(),
                digest: d.digest.clone(),
                inputs: d.inputs.clone(),
                on_drift: d.on_drift,
                restart: i.restart,
            }));
            desired.insert(name.clone(), d);
        }

        // Backoffs of images that are no longer missing, or no longer named.
        self.pulls.retain(|r, _| pulled.contains(r));
        let observed = engine.list_containers().await?;
        let livings = self.observe_lives(engine, &observed).await?;
        let mut steps = plan::plan(&self.node, &wants, &observed);

        // Every file was rendered above, before any is written here.
        for d in desired.values() {
            for (host, f) in &d.files {
                if let Err(e) = render::write_atomic(host, &f.content) {
                    tracing::error!(
                        module = d.name.as_str(),
                        "cannot write {}: {e}",
                        host.display()
                    );
                }
            }
        }

        // Acting again toward a target already tried is held back (crash-
        // loop backoff); a new target is acted on at once.
        let mut held_back = Vec::new();
        steps.retain(|step| {
            let (module, container) = match step {
                Step::Create { module } => (module, None),
                Step::Start { module, container }
                | Step::Recreate {
                    module, container, ..
                } => (module, Some(container)),
                _ => return true,
            };
            let Some(d) = desired.get(module) else {
                return true;
            };
            match self.repairs.get(module) {
                Some(r) if r.digest == d.digest && now < r.next_at => {
                    held_back.push(ModuleReport {
                        module: module.to_string(),
                        action: Action::BackingOff,
                        digest: Some(d.digest.clone()),
                        container: container.cloned(),
                        moved: vec![],
                        error: Some(format!(
                            "keeps failing; next attempt in {}s",
                            (r.next_at - now).as_secs() + 1
                        )),
                    });
                    false
                }
                _ => true,
            }
        });
        {
            let mut board = self.board.lock().expect("board lock");
            for step in &steps {
                if let Step::Recreate { module, .. } = step {
                    board
                        .entry(module.to_string())
                        .or_insert_with(|| ModuleStatus::pending(module.as_str()))
                        .state = ModuleState::Recreating;
                }
            }
        }

        let results: Vec<Result<ModuleReport, EngineError>> = futures_util::stream::iter(steps)
            .map(|step| execute(engine, store, &desired, step))
            .buffer_unordered(PARALLEL_ACTIONS)
            .collect()
            .await;
        let mut modules = held_back;
        for r in results {
            modules.push(r?);
        }
        modules.sort_by(|a, b| a.module.cmp(&b.module));

        for m in &modules {
            // A failed attempt counts too: a create the engine refuses is
            // not retried every pass. (A failed orphan removal has no target.)
            if matches!(
                m.action,
                Action::Created | Action::Started | Action::Recreated | Action::Failed
            ) {
                if let (Ok(name), Some(digest)) =
                    (ModuleName::try_from(m.module.as_str()), &m.digest)
                {
                    self.attempted(&name, digest, now);
                }
            }
            if m.action == Action::Recreated {
                self.metrics.recreated(&m.moved);
            }
            let (kind, detail) = match m.action {
                Action::Drifted => (
                    EventKind::Drift,
                    format!("drift reported: {}", join_moved(&m.moved)),
                ),
                Action::Conflict => (
                    EventKind::Conflict,
                    format!(
                        "container {} holds the name stead-{} but is not managed by this node; left alone",
                        short_id(m.container.as_deref()),
                        m.module
                    ),
                ),
                Action::Held | Action::Failed | Action::BackingOff => {
                    (EventKind::Error, m.error.clone().unwrap_or_default())
                }
                _ => {
                    self.said.remove(&format!("module:{}", m.module));
                    continue;
                }
            };
            // Waiting out a back-off is not news: the failure it waits on
            // was said. A countdown changes every pass; it is not said.
            if m.action == Action::BackingOff {
                continue;
            }
            let detail = detail
                .split("; next attempt")
                .next()
                .unwrap_or(&detail)
                .to_string();
            self.say_once(
                store,
                &format!("module:{}", m.module),
                Some(&m.module),
                kind,
                detail,
            )?;
        }

        self.update_board(
            &entries,
            &modules,
            &observed,
            &livings,
            &restart_policy,
            &rejected,
        );
        self.record_observed(store, &observed, &desired)?;
        self.collect_garbage(&desired, &observed);
        let duration = started.elapsed();
        self.metrics.pass_done(duration);
        Ok(PassReport {
            modules,
            rejected,
            duration,
        })
    }

    /// Notes an attempt toward a target, scheduling when the next attempt
    /// toward the same target may be made: `min`, doubling, capped at `max`.
    fn attempted(&mut self, name: &ModuleName, digest: &Digest, now: tokio::time::Instant) {
        let r = self.repairs.entry(name.clone()).or_insert_with(|| Repair {
            digest: digest.clone(),
            attempts: 0,
            next_at: now,
        });
        if r.digest != *digest {
            *r = Repair {
                digest: digest.clone(),
                attempts: 0,
                next_at: now,
            };
        }
        let delay = backoff_delay(&self.tuning, r.attempts);
        r.attempts += 1;
        r.next_at = now + delay;
    }

    /// Judges how each managed container is living. A container running for
    /// the settle window is judged from the list alone; others are inspected
    /// (once per state for a stopped one), so a quiet pass makes no inspect.
    async fn observe_lives<E: Engine>(
        &mut self,
        engine: &E,
        observed: &[Observed],
    ) -> Result<BTreeMap<String, (Living, Option<u32>, Option<Duration>)>, EngineError> {
        let now = now() as i64;
        let mut out = BTreeMap::new();
        let mut seen = BTreeSet::new();
        for o in observed {
            if o.labels.get(spec::LABEL_MANAGED_BY).map(String::as_str) != Some(self.node.as_str())
            {
                continue;
            }
            let Some(module) = o.labels.get(spec::LABEL_MODULE) else {
                continue;
            };
            seen.insert(o.id.clone());
            let up = if o.state == ContainerState::Running {
                status::up_for(&o.status)
            } else {
                None
            };
            let need = match o.state {
                ContainerState::Running => up.is_none_or(|u| u < self.tuning.settle.window),
                ContainerState::Created => false,
                // Being restarted by the engine: its count moves while its
                // state reads the same.
                ContainerState::Restarting => true,
                // Stopped: nothing moves until its state does.
                state => self.lives.get(&o.id).is_none_or(|(s, _)| *s != state),
            };
            if need {
                match engine.inspect(&o.id).await {
                    Ok(life) => {
                        self.lives.insert(o.id.clone(), (o.state, life));
                    }
                    Err(e) if e.is_unreachable() => return Err(e),
                    // Gone since the list: judged from the list alone.
                    Err(_) => {}
                }
            }
            let life = self.lives.get(&o.id).map(|(_, l)| l);
            let baseline = self.baselines.get(&o.id).copied().unwrap_or(0);
            let living = status::judge(o.state, up, life, baseline, now, self.tuning.settle);
            let up_for = up.or_else(|| {
                life.filter(|_| o.state == ContainerState::Running)
                    .map(|l| Duration::from_secs((now - l.started_at).max(0) as u64))
            });
            if living == Living::Settled {
                if let Some(l) = life {
                    self.baselines.insert(o.id.clone(), l.restart_count);
                }
                // Up long enough: past failures are forgiven.
                if up_for.is_some_and(|u| u >= self.tuning.crash_backoff_reset) {
                    if let Ok(m) = ModuleName::try_from(module.as_str()) {
                        self.repairs.remove(&m);
                    }
                }
            }
            out.insert(
                module.clone(),
                (living, life.map(|l| l.restart_count), up_for),
            );
        }
        self.lives.retain(|id, _| seen.contains(id));
        self.baselines.retain(|id, _| seen.contains(id));
        Ok(out)
    }

    /// Writes every module's status for this pass.
    #[allow(clippy::too_many_arguments)]
    fn update_board(
        &self,
        entries: &BTreeMap<ModuleName, crate::store::Entry>,
        reports: &[ModuleReport],
        observed: &[Observed],
        livings: &BTreeMap<String, (Living, Option<u32>, Option<Duration>)>,
        restart_policy: &BTreeMap<ModuleName, RestartPolicy>,
        rejected: &[FileRejected],
    ) {
        let mut board = self.board.lock().expect("board lock");
        let previous = std::mem::take(&mut *board);
        let at = now();
        for name in entries.keys() {
            let n = name.as_str();
            let mut st = ModuleStatus::pending(n);
            st.last_action = previous.get(n).and_then(|p| p.last_action.clone());
            let running = observed.iter().find(|o| {
                o.labels.get(spec::LABEL_MANAGED_BY).map(String::as_str) == Some(self.node.as_str())
                    && o.labels.get(spec::LABEL_MODULE).map(String::as_str) == Some(n)
                    && o.names.contains(&name.container_name())
            });
            st.running_digest = running.and_then(Observed::digest);
            st.container_id = running.map(|o| o.id.clone());
            let living = livings.get(n);
            st.restart_count = living.and_then(|l| l.1);
            if let Some(r) = reports.iter().find(|r| r.module == n) {
                st.desired_digest = r.digest.clone();
                if r.container.is_some() {
                    st.container_id = r.container.clone();
                }
                let act = |a: &str| {
                    Some(LastAction {
                        action: a.to_string(),
                        at,
                    })
                };
                st.state = match r.action {
                    Action::Created => {
                        st.last_action = act("created");
                        st.running_digest = r.digest.clone();
                        st.restart_count = Some(0);
                        ModuleState::Starting
                    }
                    Action::Recreated => {
                        st.last_action = act("recreated");
                        st.running_digest = r.digest.clone();
                        st.restart_count = Some(0);
                        ModuleState::Starting
                    }
                    Action::Started => {
                        st.last_action = act("started");
                        ModuleState::Starting
                    }
                    Action::Drifted => {
                        if previous
                            .get(n)
                            .is_none_or(|p| p.state != ModuleState::Drifted)
                        {
                            st.last_action = act("drift-reported");
                        }
                        st.inputs_differ = r.moved.clone();
                        ModuleState::Drifted
                    }
                    Action::Conflict => ModuleState::Conflict,
                    Action::BackingOff => {
                        // Say what keeps failing, not only when it is tried next.
                        let before = previous
                            .get(n)
                            .and_then(|p| p.last_error.as_deref())
                            .map(|e| e.split("; next attempt").next().unwrap_or(e));
                        let next = r
                            .error
                            .as_deref()
                            .and_then(|e| e.split_once("next attempt"))
                            .map_or(String::new(), |(_, t)| format!("next attempt{t}"));
                        st.last_error = Some(match before {
                            Some(b) if !b.starts_with("keeps failing") => format!("{b}; {next}"),
                            _ => r.error.clone().unwrap_or_default(),
                        });
                        // A container that keeps dying is crash-looping; a
                        // container that cannot even be created has failed.
                        if st.container_id.is_some() {
                            ModuleState::CrashLooping
                        } else {
                            ModuleState::Failed
                        }
                    }
                    Action::Held | Action::Failed => ModuleState::Failed,
                    Action::Removed => continue,
                    Action::Unchanged | Action::Waiting => match living.map(|l| l.0) {
                        Some(Living::Settled) => ModuleState::Converged,
                        Some(Living::Starting) | None => ModuleState::Starting,
                        Some(Living::Settling) => ModuleState::Settling,
                        Some(Living::CrashLooping) => ModuleState::CrashLooping,
                        Some(Living::Exited(0)) => ModuleState::Converged,
                        Some(Living::Exited(code)) => {
                            let policy = restart_policy.get(name).copied().unwrap_or_default();
                            st.last_error = Some(format!(
                                "exited with code {code} (restart policy {})",
                                policy.as_str()
                            ));
                            ModuleState::Failed
                        }
                    },
                };
                if r.error.is_some() && r.action != Action::BackingOff {
                    st.last_error = r.error.clone();
                }
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

    /// Keeps the observed records (and the applied record of a container
    /// found already matching) in the store, writing only what changed.
    fn record_observed(
        &mut self,
        store: &Store,
        observed: &[Observed],
        desired: &BTreeMap<ModuleName, Desired>,
    ) -> Result<(), StoreError> {
        let stored = store.all_observed()?;
        let applied_all = store.all_applied()?;
        for o in observed {
            if o.labels.get(spec::LABEL_MANAGED_BY).map(String::as_str) != Some(self.node.as_str())
            {
                continue;
            }
            let Some(module) = o.labels.get(spec::LABEL_MODULE) else {
                continue;
            };
            let rec = ObservedRecord {
                container_id: o.id.clone(),
                digest: o.digest(),
                state: o.state.as_str().to_string(),
                image_id: o.image_id.clone(),
                created: o.created,
            };
            if stored.get(module) != Some(&rec) {
                store.put_observed(module, &rec)?;
            }
            if let Some(d) = ModuleName::try_from(module.as_str())
                .ok()
                .and_then(|m| desired.get(&m))
            {
                if o.digest().as_ref() == Some(&d.digest) {
                    let applied = applied_all.get(d.name.as_str());
                    let current = applied.is_some_and(|a| {
                        a.state == ApplyState::Applied
                            && a.digest == d.digest
                            && a.container_id.as_deref() == Some(o.id.as_str())
                    });
                    if !current {
                        store.put_applied(
                            &d.name,
                            &applied_record(d, ApplyState::Applied, Some(o.id.clone())),
                        )?;
                    }
                }
            }
        }
        Ok(())
    }

    /// Removes composed files that neither a desired module nor any listed
    /// container uses.
    fn collect_garbage(&mut self, desired: &BTreeMap<ModuleName, Desired>, observed: &[Observed]) {
        let mut keep: BTreeSet<PathBuf> = observed
            .iter()
            .flat_map(|o| o.mount_sources.iter().map(PathBuf::from))
            .collect();
        for d in desired.values() {
            keep.extend(d.files.iter().map(|(p, _)| p.clone()));
        }
        let Ok(modules) = std::fs::read_dir(&self.files_dir) else {
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
        self.digester.forget_unseen();
    }
}

fn join_moved(moved: &[Moved]) -> String {
    moved
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

fn short_id(id: Option<&str>) -> &str {
    id.map_or("-", |i| &i[..i.len().min(12)])
}

fn applied_record(d: &Desired, state: ApplyState, container_id: Option<String>) -> AppliedRecord {
    AppliedRecord {
        state,
        digest: d.digest.clone(),
        inputs: d.inputs.clone(),
        spec: d.spec.clone(),
        container_id,
        at: now(),
    }
}

/// Executes one step. An engine refusal is this module's failure and is
/// reported; only an engine that went away fails the pass.
async fn execute<E: Engine>(
    engine: &E,
    store: &Store,
    desired: &BTreeMap<ModuleName, Desired>,
    step: Step,
) -> Result<ModuleReport, EngineError> {
    let report = |module: &str, action: Action, container: Option<String>| ModuleReport {
        module: module.to_string(),
        digest: ModuleName::try_from(module)
            .ok()
            .and_then(|m| desired.get(&m))
            .map(|d| d.digest.clone()),
        action,
        container,
        moved: vec![],
        error: None,
    };
    let failed = |mut r: ModuleReport, e: String| {
        r.action = Action::Failed;
        r.error = Some(e);
        r
    };
    match step {
        Step::Keep { module, container } => {
            Ok(report(module.as_str(), Action::Unchanged, Some(container)))
        }
        Step::Wait {
            module,
            container,
            state,
        } => {
            let mut r = report(module.as_str(), Action::Waiting, Some(container));
            r.error = Some(format!("container is {}", state.as_str()));
            Ok(r)
        }
        Step::Hold {
            module,
            container,
            reason,
        } => {
            let mut r = report(module.as_str(), Action::Held, container);
            r.error = Some(reason);
            Ok(r)
        }
        Step::Conflict { module, container } => {
            Ok(report(module.as_str(), Action::Conflict, Some(container)))
        }
        Step::ReportDrift {
            module,
            container,
            moved,
        } => {
            let mut r = report(module.as_str(), Action::Drifted, Some(container));
            r.moved = moved;
            Ok(r)
        }
        Step::Start { module, container } => {
            let r = report(module.as_str(), Action::Started, Some(container.clone()));
            match engine.start(&container).await {
                Ok(()) => {
                    log_event(
                        store,
                        module.as_str(),
                        EventKind::Started,
                        format!("started container {}", short_id(Some(&container))),
                    );
                    Ok(r)
                }
                Err(e) if e.is_unreachable() => Err(e),
                Err(e) => Ok(failed(r, format!("start failed: {e}"))),
            }
        }
        Step::Create { module } => {
            let d = &desired[&module];
            let r = report(module.as_str(), Action::Created, None);
            match create_and_start(engine, store, d).await {
                Ok(id) => {
                    log_event(
                        store,
                        module.as_str(),
                        EventKind::Created,
                        format!(
                            "created container {} from {}",
                            short_id(Some(&id)),
                            d.digest
                        ),
                    );
                    Ok(ModuleReport {
                        container: Some(id),
                        ..r
                    })
                }
                Err(e) if e.is_unreachable() => Err(e),
                Err(e) => Ok(failed(r, format!("create failed: {e}"))),
            }
        }
        Step::Recreate {
            module,
            container,
            moved,
        } => {
            let d = &desired[&module];
            let mut r = report(module.as_str(), Action::Recreated, Some(container.clone()));
            r.moved = moved;
            // The target is recorded before the old container goes, so a
            // crash anywhere below leaves a record of what was under way;
            // the next pass finds the new container carrying the target
            // digest and does not replace it again.
            if let Err(e) =
                store.put_applied(&d.name, &applied_record(d, ApplyState::Pending, None))
            {
                return Ok(failed(r, format!("cannot record the target: {e}")));
            }
            crash_point("recreate:before-remove");
            if let Err(e) = engine.remove(&container).await {
                return if e.is_unreachable() {
                    Err(e)
                } else {
                    Ok(failed(r, format!("removing the old container failed: {e}")))
                };
            }
            crash_point("recreate:after-remove");
            match create_and_start(engine, store, d).await {
                Ok(id) => {
                    log_event(
                        store,
                        module.as_str(),
                        EventKind::Recreated,
                        format!(
                            "recreated container {} → {}: {}",
                            short_id(Some(&container)),
                            short_id(Some(&id)),
                            join_moved(&r.moved)
                        ),
                    );
                    r.container = Some(id);
                    Ok(r)
                }
                Err(e) if e.is_unreachable() => Err(e),
                Err(e) => Ok(failed(r, format!("create failed: {e}"))),
            }
        }
        Step::Remove { module, container } => {
            let name = module.clone().unwrap_or_else(|| "(unlabelled)".into());
            let r = report(&name, Action::Removed, Some(container.clone()));
            match engine.remove(&container).await {
                Ok(()) => {
                    if let Some(m) = module.as_deref().and_then(|m| ModuleName::try_from(m).ok()) {
                        if !desired.contains_key(&m) {
                            if let Err(e) = store.forget(m.as_str()) {
                                tracing::error!(module = m.as_str(), "cannot forget records: {e}");
                            }
                        }
                    }
                    log_event(
                        store,
                        &name,
                        EventKind::Removed,
                        format!(
                            "removed container {}: no intention names it",
                            short_id(Some(&container))
                        ),
                    );
                    Ok(r)
                }
                Err(e) if e.is_unreachable() => Err(e),
                Err(e) => Ok(failed(r, format!("remove failed: {e}"))),
            }
        }
    }
}

async fn create_and_start<E: Engine>(
    engine: &E,
    store: &Store,
    d: &Desired,
) -> Result<String, EngineError> {
    if let Err(e) = store.put_applied(&d.name, &applied_record(d, ApplyState::Pending, None)) {
        tracing::error!(module = d.name.as_str(), "cannot record the target: {e}");
    }
    for (host, _) in &d.files {
        if !host.exists() {
            return Err(EngineError::Refused {
                status: 0,
                message: format!("composed file {} is missing", host.display()),
            });
        }
    }
    let id = engine.create(&d.spec).await?;
    crash_point("create:after-create");
    engine.start(&id).await?;
    crash_point("create:after-start");
    if let Err(e) = store.put_applied(
        &d.name,
        &applied_record(d, ApplyState::Applied, Some(id.clone())),
    ) {
        tracing::error!(
            module = d.name.as_str(),
            "cannot record the applied spec: {e}"
        );
    }
    Ok(id)
}

/// Dies on the spot, as a kill -9 would, when `STEAD_CRASH_AT` names this
/// point: lets the crash-safety tests stop the agent between two engine
/// calls of a recreate, deterministically, against the real engine.
fn crash_point(point: &str) {
    static AT: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    if AT
        .get_or_init(|| std::env::var("STEAD_CRASH_AT").ok())
        .as_deref()
        == Some(point)
    {
        eprintln!("STEAD_CRASH_AT={point}: aborting");
        std::process::abort();
    }
}

fn log_event(store: &Store, module: &str, kind: EventKind, detail: String) {
    tracing::info!(module, "{detail}");
    if let Err(e) = store.append_event(Some(module), kind, detail) {
        tracing::error!(module, "cannot append to the event log: {e}");
    }
}

/// What `stead check` says of one module without touching the engine.
pub struct CheckLine {
    /// The module.
    pub module: ModuleName,
    /// The image reference, which the engine resolves at run time.
    pub image: String,
    /// The digest over every input but the image, or why it could not be computed.
    pub result: Result<(Digest, BTreeMap<String, Digest>), String>,
}

/// Validates the intentions directory and computes each module's inputs.
pub fn check(intentions_dir: &Path) -> Result<(Vec<CheckLine>, Vec<FileRejected>), std::io::Error> {
    let loaded = intention::load_dir(intentions_dir)?;
    let mut digester = FileDigester::new();
    let lines = loaded
        .intentions
        .into_iter()
        .map(|(module, (_, i))| CheckLine {
            module,
            image: i.image.clone(),
            result: spec::resolve_inputs(&i, &mut digester)
                .map(|inp| {
                    let each = inp
                        .digests
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.clone()))
                        .collect();
                    (inp.digest_without_image(), each)
                })
                .map_err(|e| e.to_string()),
        })
        .collect();
    Ok((lines, loaded.rejected))
}

#[cfg(test)]
mod tests {
    //! The crash-loop backoff against a fake engine whose containers exit as
    //! soon as they start, on a paused clock.
    use super::*;
    use crate::runtime::Image;
    use crate::spec::ContainerSpec;

    #[derive(Default)]
    struct Fake {
        containers: Mutex<Vec<Observed>>,
        actions: Mutex<Vec<(String, tokio::time::Instant)>>,
        /// Containers stay up instead of dying at once.
        healthy: bool,
        /// The engine refuses every create.
        refuse_create: bool,
    }

    impl Engine for Fake {
        async fn ping(&self) -> Result<(), EngineError> {
            Ok(())
        }
        async fn list_containers(&self) -> Result<Vec<Observed>, EngineError> {
            Ok(self.containers.lock().unwrap().clone())
        }
        async fn list_images(&self) -> Result<Vec<Image>, EngineError> {
            Ok(vec![Image {
                id: Digest::of(b"img").to_string(),
                tags: vec!["img:1".into()],
                digests: vec![],
            }])
        }
        async fn inspect(&self, _: &str) -> Result<Life, EngineError> {
            Ok(Life {
                restart_count: 0,
                started_at: 0,
                finished_at: 0,
                exit_code: 1,
            })
        }
        async fn pull(&self, _: &str) -> Result<(), EngineError> {
            self.actions
                .lock()
                .unwrap()
                .push(("pull".into(), tokio::time::Instant::now()));
            Err(EngineError::NotFound(
                "no such image in any registry".into(),
            ))
        }
        async fn create(&self, spec: &ContainerSpec) -> Result<String, EngineError> {
            if self.refuse_create {
                self.actions
                    .lock()
                    .unwrap()
                    .push(("refused".into(), tokio::time::Instant::now()));
                return Err(EngineError::Refused {
                    status: 400,
                    message: "port is already allocated".into(),
                });
            }
            self.actions
                .lock()
                .unwrap()
                .push(("create".into(), tokio::time::Instant::now()));
            let id = format!("c{}", self.actions.lock().unwrap().len());
            self.containers.lock().unwrap().push(Observed {
                id: id.clone(),
                names: vec![spec.name.clone()],
                labels: spec.labels.clone(),
                state: ContainerState::Created,
                status: "Created".into(),
                image_id: spec.image_id.clone(),
                created: 0,
                mount_sources: vec![],
            });
            Ok(id)
        }
        async fn start(&self, id: &str) -> Result<(), EngineError> {
            self.actions
                .lock()
                .unwrap()
                .push(("start".into(), tokio::time::Instant::now()));
            // Unless healthy, it dies at once, though its policy would have
            // it running.
            for c in self
                .containers
                .lock()
                .unwrap()
                .iter_mut()
                .filter(|c| c.id == id)
            {
                if self.healthy {
                    c.state = ContainerState::Running;
                    c.status = "Up About an hour".into();
                } else {
                    c.state = ContainerState::Exited;
                    c.status = "Exited (1) Less than a second ago".into();
                }
            }
            Ok(())
        }
        async fn remove(&self, id: &str) -> Result<(), EngineError> {
            self.containers.lock().unwrap().retain(|c| c.id != id);
            Ok(())
        }
    }

    /// A node directory with these intention files, its store and a reconciler.
    fn node(files: &[(&str, &str)]) -> (tempfile::TempDir, Store, Reconciler) {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("i");
        std::fs::create_dir(&dir).unwrap();
        for (name, text) in files {
            std::fs::write(dir.join(name), text).unwrap();
        }
        let store = Store::open(&d.path().join("s.redb")).unwrap();
        let r = Reconciler::new(
            NodeId::try_from("n").unwrap(),
            dir,
            d.path().join("files"),
            Tuning::default(),
        );
        (d, store, r)
    }

    #[tokio::test(start_paused = true)]
    async fn a_target_that_keeps_failing_is_retried_with_doubling_capped_waits() {
        let (d, store, mut r) = node(&[(
            "m.toml",
            "name = \"m\"\nimage = \"img:1\"\nrestart = \"always\"\n",
        )]);
        let dir = d.path().join("i");
        let engine = Fake::default();
        let t0 = tokio::time::Instant::now();
        // Twenty minutes of one-second heartbeats.
        for _ in 0..1200 {
            r.pass(&engine, &store).await.unwrap();
            tokio::time::advance(Duration::from_secs(1)).await;
        }
        let at: Vec<u64> = engine
            .actions
            .lock()
            .unwrap()
            .iter()
            .filter(|(a, _)| a == "start")
            .map(|(_, t)| (*t - t0).as_secs())
            .collect();
        // Created and started at 0; then started again after 10, 20, 40,
        // 80, 160 s, then every 300 s (the cap), never giving up.
        assert_eq!(at, [0, 10, 30, 70, 150, 310, 610, 910], "{at:?}");
        assert_eq!(
            r.board.lock().unwrap()["m"].state,
            ModuleState::CrashLooping
        );

        // A new target (the intention changed) is acted on at once.
        std::fs::write(
            dir.join("m.toml"),
            "name = \"m\"\nimage = \"img:1\"\nrestart = \"always\"\ncommand = [\"x\"]\n",
        )
        .unwrap();
        let before = engine.actions.lock().unwrap().len();
        r.pass(&engine, &store).await.unwrap();
        let acts = engine.actions.lock().unwrap();
        assert_eq!(
            acts[before..]
                .iter()
                .map(|(a, _)| a.as_str())
                .collect::<Vec<_>>(),
            ["create", "start"]
        );
    }

    #[tokio::test]
    async fn a_quiet_pass_writes_nothing_to_the_store() {
        let files: Vec<(String, String)> = ["a", "b", "c"]
            .iter()
            .map(|m| (format!("{m}.toml"), format!("name = \"{m}\"\nimage = \"img:1\"\n[config]\npath = \"/c\"\nformat = \"json\"\n")))
            .collect();
        let refs: Vec<(&str, &str)> = files
            .iter()
            .map(|(a, b)| (a.as_str(), b.as_str()))
            .collect();
        let (d, store, mut r) = node(&refs);
        let db = d.path().join("s.redb");
        let engine = Fake {
            healthy: true,
            ..Fake::default()
        };
        r.pass(&engine, &store).await.unwrap();
        r.pass(&engine, &store).await.unwrap();
        let before = std::fs::metadata(&db).unwrap().modified().unwrap();
        std::thread::sleep(Duration::from_millis(20));
        for _ in 0..3 {
            let report = r.pass(&engine, &store).await.unwrap();
            assert!(
                report.modules.iter().all(|m| m.action == Action::Unchanged),
                "{:?}",
                report.modules
            );
        }
        assert_eq!(
            std::fs::metadata(&db).unwrap().modified().unwrap(),
            before,
            "a quiet pass committed to the store"
        );
        assert_eq!(
            engine.actions.lock().unwrap().len(),
            6,
            "three creates and three starts, then nothing"
        );
    }

    /// When each action of `kind` happened, in seconds from `t0`.
    fn times(engine: &Fake, kind: &str, t0: tokio::time::Instant) -> Vec<u64> {
        engine
            .actions
            .lock()
            .unwrap()
            .iter()
            .filter(|(a, _)| a == kind)
            .map(|(_, t)| (*t - t0).as_secs())
            .collect()
    }

    #[tokio::test(start_paused = true)]
    async fn refused_creates_and_failed_pulls_are_retried_with_backoff() {
        let (_d, store, mut r) = node(&[
            ("a.toml", "name = \"a\"\nimage = \"img:1\"\n"),
            ("b.toml", "name = \"b\"\nimage = \"missing:1\"\n"),
        ]);
        let engine = Fake {
            refuse_create: true,
            ..Fake::default()
        };
        let t0 = tokio::time::Instant::now();
        for _ in 0..200 {
            r.pass(&engine, &store).await.unwrap();
            tokio::time::advance(Duration::from_secs(1)).await;
        }
        assert_eq!(
            times(&engine, "refused", t0),
            [0, 10, 30, 70, 150],
            "creates"
        );
        assert_eq!(times(&engine, "pull", t0), [0, 10, 30, 70, 150], "pulls");
        // Said once each, not once a pass with a new countdown.
        let events = store.events_since(0, 1000).unwrap();
        let errors = |m: &str| {
            events
                .iter()
                .filter(|e| e.module.as_deref() == Some(m) && e.kind == EventKind::Error)
                .count()
        };
        assert_eq!(errors("a"), 1, "{events:?}");
        assert_eq!(errors("b"), 1, "{events:?}");
        let board = r.board.lock().unwrap();
        assert_eq!(board["a"].state, ModuleState::Failed, "{:?}", board["a"]);
        let why = board["a"].last_error.as_deref().unwrap();
        assert!(
            why.starts_with(
                "create failed: engine refused (400): port is already allocated; next attempt in "
            ),
            "{why}"
        );
        assert_eq!(board["b"].state, ModuleState::Failed);
        let why = board["b"].last_error.as_deref().unwrap();
        assert!(
            why.contains("missing:1") && why.contains("next attempt in"),
            "{why}"
        );
    }
}
