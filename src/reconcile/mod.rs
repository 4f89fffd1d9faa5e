//! One reconcile pass, as a short sequence of phases:
//!
//! 1. **intake**: bring the intentions directory into the store and read
//!    every module's entry, once ([`crate::intake::dir`]);
//! 2. **resolve**: compose each module's files and digest its host inputs
//!    (off the async threads), then find or pull its image ([`resolve`]);
//! 3. **prepare**: write every composed and live file; a module whose
//!    files cannot be written is held ([`prepare::write_files`]);
//! 4. **observe**: list the containers once and judge how each is living
//!    ([`observe`]);
//! 5. **plan**: the pure standing comparison ([`plan`]) over one want per
//!    module ([`resolve::Resolved`]);
//! 6. **retry policy**: hold back what keeps failing
//!    ([`retry::hold_back`]);
//! 7. **execute**: only the engine steps ([`execute`]);
//! 8. **record**: events said once, the board, the store's records, unused
//!    composed files removed (`Reconciler::record`).
//!
//! A pass reads the whole world again every time; it is never told why it
//! runs, so a pass after a crash derives the same plan as the one that was
//! interrupted. What it carries from one pass to the next is only caches
//! (file digests, parsed intention files), what was already said, and the
//! retry policy's clock: never a reason to act.

use crate::model::sort::Insert as _;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::StreamExt;

use crate::engine::{Engine, EngineError};
use crate::host::blocking::run as blocking;
use crate::host::digest::FileDigester;
use crate::intake::dir::{FileRejected, IntentionsDir, SyncError};
use crate::model::names::{ModuleName, NodeId};
use crate::status::Board;
use crate::status::counted::Counted;
use crate::status::judge::Living;
use crate::status::lives::LifeBook;
use crate::status::metrics::Metrics;
use crate::store::{EventKind, Store, StoreError};

pub mod actions;
pub mod budget;
pub mod check;
pub mod collect;
pub mod execute;
pub mod gate;
pub mod locks;
pub mod observe;
pub mod plan;
pub mod prepare;
pub mod report;
pub mod resolve;
pub mod retry;
pub mod watched;

pub use report::{Action, ModuleReport, PassReport, Subject};
pub use retry::Tuning;

use plan::Step;

/// Every module's entry that reads, the modules whose stored intention
/// does not (with why), and the intention files refused.
type Intaken = (
    BTreeMap<ModuleName, crate::store::Entry>,
    Vec<(ModuleName, String)>,
    Vec<FileRejected>,
);

/// What the resolve phase hands on: the entries it was given back, each
/// module's target, the host paths they read and this agent's id.
struct Targets {
    entries: BTreeMap<ModuleName, crate::store::Entry>,
    resolved: resolve::Resolved,
    watched_inputs: BTreeSet<PathBuf>,
    agent: String,
}

/// What a pass did and saw, for its record phase.
struct Outcome<'a> {
    entries: &'a BTreeMap<ModuleName, crate::store::Entry>,
    rejected: &'a [FileRejected],
    observed: Vec<crate::engine::Observed>,
    /// When the engine was looked at, seconds since the epoch.
    looked_at: u64,
    livings: &'a BTreeMap<String, observe::Lived>,
    modules: &'a [ModuleReport],
    reloaded: Vec<ModuleName>,
    resolved: resolve::Resolved,
}

/// How many modules are acted on at once.
const PARALLEL_ACTIONS: usize = 4;

/// Where the host keeps its logs, measured with the other filesystems.
const LOG_DIR: &str = "/var/log";

/// The data directory the composed files are kept in.
fn files_dir_parent(files_dir: &std::path::Path) -> PathBuf {
    files_dir
        .parent()
        .map_or_else(|| files_dir.to_path_buf(), std::path::Path::to_path_buf)
}

/// Why a pass could not finish.
#[derive(Debug, thiserror::Error)]
pub enum PassError {
    /// The engine went away; the agent waits for it.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The reconciler.
pub struct Reconciler {
    node: NodeId,
    intentions: Arc<Mutex<IntentionsDir>>,
    files_dir: PathBuf,
    tuning: Tuning,
    digester: Arc<Mutex<FileDigester>>,
    said: BTreeMap<String, String>,
    /// What is known of each container's life, fed by the engine's events
    /// while the agent follows them.
    lives: Arc<Mutex<LifeBook>>,
    baselines: HashMap<String, u32>,
    retries: retry::Retries,
    pulls: resolve::Pulls,
    /// The image policy's checks, and where the policy in force is said.
    gate: gate::Gate,
    image_policy: Option<tokio::sync::watch::Receiver<crate::model::image_policy::Known>>,
    /// The images to fetch ahead of a coming rollout turn (the plane's
    /// documents say them).
    ahead: Option<tokio::sync::watch::Receiver<BTreeSet<String>>>,
    /// The maintenance windows the plane's documents set; without a plane,
    /// none.
    maintenance: Option<tokio::sync::watch::Receiver<crate::model::maintenance::InForce>>,
    /// When a recreate this pass deferred may go by itself (a window
    /// opens, a lock's max passes), seconds since the epoch: the next pass
    /// is then, not a heartbeat later.
    wake: Option<u64>,
    /// Update locks asked through the API, taken at the next pass.
    lock_asks: Vec<locks::LockAsk>,
    /// The plane's lease keeper, for the site's disruption budgets.
    budget: Option<budget::Link>,
    /// Whether this pass asked for the site's lease.
    budget_asked: bool,
    /// Whether a document may reboot this device (`[actions] reboot`).
    reboot_allowed: bool,
    /// What each action in force and not over waits for.
    actions_waiting: actions::Waiting,
    /// Where the uploads actions ask are handed (with a plane).
    uploads: Option<actions::Uploads>,
    /// The `repull` actions whose pull this agent started, by id, with
    /// the reference pulled.
    repulls: BTreeMap<String, String>,
    /// The device's time zone (`/etc/localtime`), for windows in local
    /// time: read again a minute after it was.
    zone: Option<(Instant, Arc<crate::model::maintenance::Zone>)>,
    /// Each module's last target, made again only when what it is made
    /// from moves.
    made: resolve::Made,
    /// (dependent, dependency) with `restart = true`: the dependency was
    /// seen not meeting its condition while the dependent ran, so the
    /// dependent is restarted once it does again. In memory: an agent
    /// restart forgets it.
    lost: BTreeSet<(ModuleName, ModuleName)>,
    /// This agent's id (from its store), read at the first pass.
    agent: Option<String>,
    /// Whether a new store was rebuilt from the containers' labels (or was
    /// found not to need it).
    rebuilt: bool,
    /// When this agent started, seconds since the epoch.
    started_at: i64,
    /// When another agent with this node id was last seen, and what.
    other_seen: Option<(tokio::time::Instant, String)>,
    board: Arc<Mutex<Board>>,
    metrics: Arc<Metrics>,
    /// Where the output of a module without its own `logging` goes.
    default_logging: Option<crate::model::runtime::NodeLogging>,
    /// What the crash guard holds (the store keeps it; lifted here).
    quarantine: crate::model::guard::Quarantine,
    /// The device-local key that seals the `stead.stated` label; without
    /// one, no container carries a statement.
    stated_key: Option<crate::model::seal::LocalKey>,
    /// What this device opens the values sealed to it with.
    device: Option<crate::model::sealed::Device>,
    /// With `keyed_digests = true`: the key every input's digest is keyed
    /// with.
    keyed: Option<crate::model::names::DigestKey>,
    /// The loop's progress, which each engine call of a pass marks (the
    /// watchdog is pinged while it moves).
    progress: Arc<crate::host::systemd::Progress>,
    /// Disk stewardship: images noted and collected, the disks measured.
    steward: collect::Steward,
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
            intentions: Arc::new(Mutex::new(IntentionsDir::new(intentions_dir))),
            tuning,
            digester: Arc::new(Mutex::new(FileDigester::new())),
            said: BTreeMap::new(),
            lives: Arc::default(),
            baselines: HashMap::new(),
            retries: retry::Retries::default(),
            pulls: resolve::Pulls::default(),
            gate: gate::Gate::default(),
            image_policy: None,
            ahead: None,
            maintenance: None,
            wake: None,
            lock_asks: Vec::new(),
            budget: None,
            budget_asked: false,
            reboot_allowed: false,
            actions_waiting: Default::default(),
            uploads: None,
            repulls: BTreeMap::new(),
            zone: None,
            made: resolve::Made::default(),
            lost: BTreeSet::new(),
            agent: None,
            rebuilt: false,
            started_at: crate::host::clock::now() as i64,
            other_seen: None,
            board: Arc::new(Mutex::new(Board::new())),
            metrics: Arc::new(Metrics::default()),
            default_logging: None,
            quarantine: Default::default(),
            stated_key: None,
            device: None,
            keyed: None,
            progress: crate::host::systemd::Progress::new(),
            steward: collect::Steward::new(
                crate::model::disk::Policy::default(),
                files_dir_parent(&files_dir),
                PathBuf::from(LOG_DIR),
            ),
            files_dir,
        }
    }

    /// How images are collected, and where the store is (its filesystem
    /// is measured, and the store keeps a reserve on it).
    pub fn set_disk(&mut self, policy: crate::model::disk::Policy, data_dir: PathBuf) {
        self.steward = collect::Steward::new(policy, data_dir, PathBuf::from(LOG_DIR));
    }

    /// Images are let through as the policy `policy` says (the plane's
    /// documents compose it), checked with `registries`.
    pub fn set_image_policy(
        &mut self,
        policy: tokio::sync::watch::Receiver<crate::model::image_policy::Known>,
        registries: Result<Arc<crate::registry::client::Registries>, String>,
    ) {
        self.gate.set_registries(registries);
        self.image_policy = Some(policy);
    }

    /// Images are fetched ahead of a coming rollout turn as `ahead` says.
    pub fn set_ahead(&mut self, ahead: tokio::sync::watch::Receiver<BTreeSet<String>>) {
        self.ahead = Some(ahead);
    }

    /// Recreates wait for the maintenance windows `windows` says.
    pub fn set_maintenance(
        &mut self,
        windows: tokio::sync::watch::Receiver<crate::model::maintenance::InForce>,
    ) {
        self.maintenance = Some(windows);
    }

    /// A deferred recreate may go at `at` (seconds since the epoch): the
    /// pass's next is then at the latest.
    fn wake_at(&mut self, at: Option<u64>) {
        self.wake = match (self.wake, at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }

    /// How long a recreate waits for an update lock, and then what (who
    /// set it, and it): the documents' strictest; none, no limit.
    fn lock_policy(&self) -> Option<(String, crate::model::lock::Policy)> {
        let said = self.maintenance.as_ref()?.borrow().clone()?;
        crate::model::lock::strictest(&said.locks).cloned()
    }

    /// Whether what runs may be disrupted now: `Err` says what it waits
    /// for and until when.
    fn door(&mut self) -> Result<(), String> {
        use crate::model::maintenance::{Zone, door};
        let Some(rx) = &self.maintenance else {
            return Ok(());
        };
        let Some(said) = rx.borrow().clone() else {
            return Err(
                "waits for the maintenance windows: the plane's documents are not read yet".into(),
            );
        };
        let sets = &said.windows;
        if sets.is_empty() {
            return Ok(());
        }
        let zone = match &self.zone {
            // Windows all in UTC: the device's zone is not read.
            _ if sets.iter().all(|(_, w)| !w.local) => Arc::new(Zone::utc()),
            Some((at, z)) if at.elapsed() < Duration::from_secs(60) => z.clone(),
            _ => {
                let z = Arc::new(local_zone().unwrap_or_else(|e| {
                    tracing::warn!("maintenance windows in local time are read in UTC: {e}");
                    Zone::utc()
                }));
                self.zone = Some((Instant::now(), z.clone()));
                z
            }
        };
        let now = crate::host::clock::now() as i64;
        let judged = door(sets, now, &zone);
        if let Err((Some(until), _)) = &judged {
            self.wake_at(Some((*until).max(0) as u64));
        }
        judged.map(drop).map_err(|(until, who)| {
            let windows = sets
                .iter()
                .find(|(w, _)| *w == who)
                .map(|(_, w)| {
                    let spans: Vec<String> = w.spans.iter().map(ToString::to_string).collect();
                    format!("{} {}", spans.join(", "), if w.local { "local time" } else { "UTC" })
                })
                .unwrap_or_default();
            match until {
                Some(t) => format!(
                    "waits for the maintenance window ({who}: {windows}) until {}",
                    crate::model::time::format_rfc3339(t.max(0) as u64)
                ),
                None => format!(
                    "waits for the maintenance window ({who}: {windows}), which opens not within 8 days together with the others"
                ),
            }
        })
    }

    /// Of the images fetched ahead of a coming rollout turn, how many, and
    /// how many are here, as the last pass saw them.
    pub fn ahead(&self) -> Option<crate::model::fetch::Ahead> {
        self.pulls.ahead_here
    }

    /// Pulls are checked for room first with this.
    pub fn set_room(&mut self, room: Arc<crate::registry::room::Room>) {
        self.pulls.room = Some(room.clone());
        self.steward.set_room(room);
    }

    /// The check that a pull fits, when there is one.
    pub fn room(&self) -> Option<Arc<crate::registry::room::Room>> {
        self.pulls.room.clone()
    }

    /// The node's filesystems, as the last pass measured them.
    pub fn disks(&self) -> crate::model::disk::Disks {
        self.steward.disks().clone()
    }

    /// Collects unused images now (`POST /v1/images/prune`), or says what
    /// it would collect.
    pub async fn prune<E: Engine>(
        &mut self,
        engine: &E,
        store: &Arc<Store>,
        dry_run: bool,
    ) -> Result<crate::model::disk::Pruned, PassError> {
        let engine = &Counted {
            engine: watched::Watched {
                engine: engine.clone(),
                progress: self.progress.clone(),
            },
            metrics: self.metrics.clone(),
        };
        let out = self
            .steward
            .collect(engine, store, crate::model::disk::Trigger::Asked, dry_run)
            .await?;
        self.metrics
            .images_removed(out.removed.len(), out.reclaimed_bytes, dry_run);
        Ok(out)
    }

    /// The loop's progress, as the passes mark it.
    pub fn progress(&self) -> Arc<crate::host::systemd::Progress> {
        self.progress.clone()
    }

    /// Seals what containers carry for a store rebuild with this key.
    /// Opens the values sealed to this device with it, too.
    pub fn seal_stated_with(&mut self, key: crate::model::seal::LocalKey) {
        self.device = Some(key.device(self.node.as_str()));
        self.stated_key = Some(key);
    }

    /// Keys the digest of every input of every container made from now on
    /// (`keyed_digests = true`), with the key of the device set by
    /// [`Reconciler::seal_stated_with`]; running containers are compared
    /// in keyed terms, and none is made again for it.
    pub fn key_digests(&mut self) {
        self.keyed = self.device.as_ref().map(|d| *d.digest_key());
    }

    /// What the crash guard holds, as the agent read it at start.
    pub fn set_quarantine(&mut self, q: crate::model::guard::Quarantine) {
        self.quarantine = q;
    }

    /// What the crash guard holds now.
    pub fn quarantine(&self) -> &crate::model::guard::Quarantine {
        &self.quarantine
    }

    /// Lets go of what changed since the crash guard held it (said, and
    /// kept), and says why each module it still holds is held.
    async fn quarantined(
        &mut self,
        store: &Arc<Store>,
        entries: &BTreeMap<ModuleName, crate::store::Entry>,
    ) -> Result<BTreeMap<ModuleName, String>, StoreError> {
        use crate::store::guard::{all_key, entry_key, from_plane};
        if self.quarantine.is_empty() {
            return Ok(BTreeMap::new());
        }
        let plane = match &self.quarantine.revision {
            Some(_) => store.blocking(|s| s.plane()).await?.0.map(|h| h.revision),
            None => None,
        };
        let all = all_key(entries);
        let lifted =
            self.quarantine
                .lift(plane, &|m: &ModuleName| entries.get(m).map(entry_key), &all);
        if !lifted.is_empty() {
            let q = self.quarantine.clone();
            store
                .blocking(move |s| s.change_guard(|g| g.quarantine = q))
                .await?;
            let detail = format!(
                "quarantine lifted: {} changed; acting on it again",
                lifted.join(", ")
            );
            tracing::warn!("{detail}");
            store
                .blocking(move |s| s.append_event(None, EventKind::Intention, detail))
                .await?;
        }
        Ok(entries
            .iter()
            .filter_map(|(n, e)| {
                self.quarantine
                    .holds(n, from_plane(e))
                    .map(|r| (n.clone(), r))
            })
            .into_map())
    }

    /// While everything is held no pass runs: lifts the hold once any
    /// intention changed, else shows every module as held. Returns whether
    /// everything is still held.
    pub async fn hold_everything(&mut self, store: &Arc<Store>) -> Result<bool, StoreError> {
        if self.quarantine.everything.is_none() {
            return Ok(false);
        }
        let entries = store.blocking(|s| s.entries()).await?;
        let held = self.quarantined(store, &entries).await?;
        if self.quarantine.everything.is_none() {
            return Ok(false);
        }
        crate::status::judge::all_held(&mut self.board.lock().expect("board lock"), held);
        Ok(true)
    }

    /// Where the output of a module without its own `logging` goes.
    pub fn set_default_logging(&mut self, logging: crate::model::runtime::NodeLogging) {
        self.default_logging = Some(logging);
    }

    /// Tells each running container with live files that their set
    /// changed: the signal once per new set, recorded after it was sent (a
    /// crash in between sends it again: a second reload, never a missed
    /// one). A container made this pass read the set it was made with.
    async fn deliver_live<E: Engine>(
        &mut self,
        engine: &E,
        store: &Arc<Store>,
        resolved: &resolve::Resolved,
        observed: &[crate::engine::Observed],
        modules: &[ModuleReport],
    ) -> Result<Vec<ModuleName>, PassError> {
        let mut reloaded = Vec::new();
        for d in resolved.running() {
            let name = &d.name;
            let Some(live) = &d.live else { continue };
            let report = modules.iter().find(|r| r.module == name.as_str());
            let made = report.filter(|r| matches!(r.action, Action::Created | Action::Recreated));
            let container = match made.and_then(|r| r.container.clone()) {
                Some(c) => c,
                None => {
                    let running = observed.iter().find(|o| {
                        observe::at_its_name(&self.node, o) == Some(name.as_str())
                            && o.state == crate::engine::ContainerState::Running
                            && o.labels.digest.as_ref() == Some(&d.digest)
                    });
                    match running {
                        Some(o) => o.id.clone(),
                        None => continue,
                    }
                }
            };
            let n = name.clone();
            let held = store.blocking(move |s| s.live(&n)).await?;
            if held.as_ref() == Some(&(container.clone(), live.digest.clone())) {
                continue;
            }
            if made.is_none() {
                crate::host::crash_point("live:before-signal");
                if let Err(e) = engine.signal(&container, &live.signal).await {
                    if e.is_unreachable() {
                        return Err(e.into());
                    }
                    tracing::warn!(
                        module = name.as_str(),
                        "cannot signal the new live files: {e}"
                    );
                    continue;
                }
                let detail = format!(
                    "config reloaded live: {} sent for live files {}",
                    live.signal,
                    live.digest.short()
                );
                tracing::info!(module = name.as_str(), "{detail}");
                let m = name.to_string();
                store
                    .blocking(move |s| s.append_event(Some(&m), EventKind::Intention, detail))
                    .await?;
                reloaded.push(name.clone());
            }
            let (n, c, dg) = (name.clone(), container, live.digest.clone());
            store.blocking(move |s| s.put_live(&n, &c, &dg)).await?;
        }
        Ok(reloaded)
    }

    /// Completes each module in another's network stack with that module's
    /// container, as the engine lists it: its ID is an input (the stack
    /// goes with the container, so a replaced one means this one is made
    /// again, once), and until it runs the module waits.
    fn join_network_stacks(
        &self,
        resolved: &mut resolve::Resolved,
        observed: &[crate::engine::Observed],
    ) {
        use crate::model::runtime::NetworkMode;
        let mut waits = Vec::new();
        for shared in resolved.running_mut() {
            let NetworkMode::Container(target) = &shared.spec.runtime.network_mode else {
                continue;
            };
            let running = observed.iter().find(|o| {
                observe::at_its_name(&self.node, o) == Some(target.as_str())
                    && o.state == crate::engine::ContainerState::Running
            });
            let Some(o) = running else {
                waits.push((
                    shared.name.clone(),
                    format!(
                        "waits for module {target}'s container to run (network_mode = \"container:{target}\")"
                    ),
                ));
                continue;
            };
            let d = Arc::make_mut(shared);
            d.spec.network_container = Some(o.id.clone());
            d.set_input(
                crate::model::spec::input("network_mode".into()),
                crate::model::names::Digest::canonical(
                    "network_mode",
                    &(d.spec.runtime.network_mode.spelled(), &o.id),
                ),
            );
        }
        for (name, reason) in waits {
            resolved.hold(&name, &reason);
        }
    }

    /// A module whose `depends_on` is not met waits: not created or
    /// started until it is (`status::depends`). A dependency on a module
    /// no intention states is waited for; one on a module of another
    /// source (a file, the API, the plane), or one that leads back to the
    /// module, holds it, naming the modules. Says which running modules
    /// are restarted, once, for a dependency with `restart = true` that was
    /// replaced or restarted since they started.
    fn gate_dependencies(
        &mut self,
        resolved: &mut resolve::Resolved,
        observed: &[crate::engine::Observed],
        entries: &BTreeMap<ModuleName, crate::store::Entry>,
    ) -> BTreeMap<ModuleName, String> {
        use crate::store::Source;
        let kind = |m: &ModuleName| {
            entries
                .get(m)
                .and_then(|e| e.record.as_ref())
                .map(|r| match r.source {
                    Source::File(_) => "intentions directory",
                    Source::Api => "API",
                    Source::Plane => "central plane",
                })
        };
        let graph: BTreeMap<String, Vec<String>> = resolved
            .running()
            .filter(|d| !d.depends_on.is_empty())
            .map(|d| {
                (
                    d.name.to_string(),
                    d.depends_on.iter().map(|x| x.module.to_string()).collect(),
                )
            })
            .into_map();
        self.lost.retain(|(d, _)| graph.contains_key(d.as_str()));
        if graph.is_empty() {
            return BTreeMap::new();
        }
        let node = self.node.clone();
        let at_name = |m: &str| {
            observed
                .iter()
                .find(|o| observe::at_its_name(&node, o) == Some(m))
        };
        let up = |o: Option<&crate::engine::Observed>| {
            o.filter(|o| o.state == crate::engine::ContainerState::Running)
                .and_then(|o| crate::status::judge::up_for(&o.status))
        };
        let mut restarts = BTreeMap::new();
        let lives = self.lives.clone();
        let book = lives.lock().expect("life book lock");
        let cycles = crate::status::depends::cycles(&graph);
        let mut holds = Vec::new();
        let mut waits = Vec::new();
        for d in resolved.running().filter(|d| !d.depends_on.is_empty()) {
            if let Some(c) = cycles.get(d.name.as_str()) {
                holds.push((d.name.clone(), format!("its depends_on makes a cycle: {c}")));
                continue;
            }
            let mut why = None;
            let mut unmet = None;
            for dep in &d.depends_on {
                if !resolved.contains(&dep.module) {
                    why = Some(format!(
                        "waits for module {}, which no intention states",
                        dep.module
                    ));
                    break;
                }
                if let (Some(a), Some(b)) = (kind(&d.name), kind(&dep.module))
                    && a != b
                {
                    holds.push((
                        d.name.clone(),
                        format!(
                            "depends on module {}, which the {b} states (this one: the {a}): a module depends only on modules of its own source",
                            dep.module
                        ),
                    ));
                    why = None;
                    break;
                }
                // A health listed for a container seen starting, with no
                // check run since, is its last life's (Podman 4.3 keeps it
                // across a restart): starting, until a check says.
                let seen = at_name(dep.module.as_str()).map(|o| crate::status::depends::Seen {
                    state: o.state,
                    health: match o.health() {
                        Some("healthy") if book.health_unchecked(&o.id) => Some("starting"),
                        h => h,
                    },
                    exit_code: o.exit_code(),
                });
                if let Some(w) =
                    crate::status::depends::unmet(dep.module.as_str(), dep.condition, seen)
                {
                    why = Some(w);
                    unmet = Some(dep);
                    break;
                }
            }
            let own = up(at_name(d.name.as_str()));
            if let Some(w) = why {
                // A dependency lost while this one runs: with `restart =
                // true`, it is restarted once that one is back.
                if let Some(dep) = unmet.filter(|x| x.restart && own.is_some()) {
                    self.lost.insert((d.name.clone(), dep.module.clone()));
                }
                waits.push((d.name.clone(), w));
                continue;
            }
            let lost = d
                .depends_on
                .iter()
                .find(|dep| self.lost.contains(&(d.name.clone(), dep.module.clone())));
            let younger = d.depends_on.iter().find(|dep| {
                dep.restart
                    && crate::status::depends::restart_after(own, up(at_name(dep.module.as_str())))
            });
            if let Some(dep) = younger.or(lost) {
                restarts.insert(
                    d.name.clone(),
                    format!(
                        "module {} was made again, restarted or not ready since this one started (restart = true)",
                        dep.module
                    ),
                );
            }
            self.lost.retain(|(m, _)| *m != d.name);
        }
        for (name, why) in holds {
            resolved.hold(&name, &why);
        }
        for (name, why) in waits {
            resolved.wait(&name, &why);
        }
        restarts
    }

    /// Image pulls run in the background and wake `wake` when they end.
    pub fn wake_on_pulls(&mut self, wake: Arc<tokio::sync::Notify>) {
        self.pulls.wake = Some(wake.clone());
        self.gate.wake = Some(wake);
    }

    /// Image pulls are waited for within the pass (for one pass alone).
    pub fn wait_for_pulls(&mut self) {
        self.pulls.wait = true;
    }

    /// Every module's status, as of the last pass.
    pub fn board(&self) -> Arc<Mutex<Board>> {
        self.board.clone()
    }

    /// Registry logins for the engine's pulls (the credentials file).
    pub fn set_credentials(&mut self, c: Arc<crate::registry::auth::Credentials>) {
        self.pulls.credentials = Some(c);
    }

    /// What it knows of each container's life, for the event follower to
    /// keep up to date.
    pub fn life_book(&self) -> Arc<Mutex<LifeBook>> {
        self.lives.clone()
    }

    /// The counters.
    pub fn metrics(&self) -> Arc<Metrics> {
        self.metrics.clone()
    }

    /// Appends an event unless the same thing was already said for `key`.
    async fn say_once(
        &mut self,
        store: &Arc<Store>,
        key: &str,
        module: Option<&str>,
        kind: EventKind,
        detail: String,
    ) -> Result<(), StoreError> {
        if self.said.get(key) == Some(&detail) {
            return Ok(());
        }
        let said = crate::model::text::clip(&detail, crate::store::MAX_EVENT_DETAIL);
        match kind {
            EventKind::Rejected | EventKind::Error | EventKind::Conflict => {
                tracing::warn!(module, "{said}")
            }
            _ => tracing::info!(module, "{said}"),
        }
        let (m, d) = (module.map(str::to_string), detail.clone());
        store
            .blocking(move |s| s.append_event(m.as_deref(), kind, d))
            .await?;
        self.said.insert(key.to_string(), detail);
        Ok(())
    }

    /// On a new store, takes back what the containers' labels say was
    /// stated through the API, before anything is judged: a store discarded
    /// on purpose (or lost) restarts no container that still matches.
    /// Returns the entries as they are after it, when it took any back.
    async fn rebuild<E: Engine>(
        &mut self,
        engine: &E,
        store: &Arc<Store>,
    ) -> Result<Option<BTreeMap<ModuleName, crate::store::Entry>>, PassError> {
        if !store.blocking(|s| s.rebuild_pending()).await? {
            return Ok(None);
        }
        // Without a key, sealed labels cannot be read: the mark stays.
        let Some(key) = self.stated_key.clone() else {
            return Ok(None);
        };
        let observed = engine.list_containers().await?;
        let found: Vec<(ModuleName, String, String)> = observed
            .iter()
            .filter_map(|o| {
                let module = ModuleName::try_from(observe::at_its_name(&self.node, o)?).ok()?;
                Some((module, o.id.clone(), o.labels.stated.clone()?))
            })
            .collect();
        let taken = store
            .blocking(move |s| crate::intake::labels::rebuild(s, &found, &key))
            .await?;
        tracing::info!(
            "the store is new: {} modules taken back from their containers' labels",
            taken.len()
        );
        if taken.is_empty() {
            return Ok(None);
        }
        Ok(Some(store.blocking(|s| s.entries()).await?))
    }

    /// Intake: the directory into the store, every entry read once; the
    /// files refused are said once each.
    async fn intake(&mut self, store: &Arc<Store>) -> Result<Intaken, PassError> {
        let (entries, unreadable, intake) = {
            let (dir, s) = (self.intentions.clone(), store.clone());
            blocking(move || -> Result<_, StoreError> {
                let (mut entries, unreadable) = s.entries_readable()?;
                let intake = dir.lock().expect("intentions lock").sync(&s, &mut entries);
                Ok((entries, unreadable, intake))
            })
            .await?
        };
        let rejected = match intake {
            Ok(rejected) => {
                self.said.remove("intake");
                self.say_rejected(store, &rejected).await?;
                rejected
            }
            // A directory gone (a late mount, a rename-swap) or unreadable
            // holds: the stored intentions stay as they are until it is
            // back. Only an empty directory removes modules.
            Err(SyncError::Read { path, source }) => {
                let detail = format!(
                    "cannot read the intentions directory {path} ({source}); the modules it defined are held as stored until it is back"
                );
                self.say_once(store, "intake", None, EventKind::Error, detail)
                    .await?;
                Vec::new()
            }
            Err(SyncError::Store(e)) => return Err(e.into()),
        };
        Ok((entries, unreadable, rejected))
    }

    /// While no pass can run (the engine is away, the last pass failed):
    /// takes the intentions directory in and shows every module the node
    /// holds as pending with `reason` (or quarantined, when the crash guard
    /// holds it), keeping what is known of its container. A store that
    /// cannot be read leaves the modules already shown, each pending.
    pub async fn no_pass(&mut self, store: &Arc<Store>, reason: &str) {
        let entries = match self.intake(store).await {
            Ok((entries, _, _)) => Some(entries),
            Err(e) => {
                tracing::debug!("the modules held cannot be read: {e}");
                None
            }
        };
        // What the guard holds, by name; `None` while the store is unread.
        let held: Option<BTreeMap<String, Option<String>>> = entries.map(|es| {
            es.iter()
                .map(|(n, e)| {
                    let why = self.quarantine.holds(n, crate::store::guard::from_plane(e));
                    (n.to_string(), why)
                })
                .into_map()
        });
        crate::status::judge::all_pending(
            &mut self.board.lock().expect("board lock"),
            held.as_ref(),
            reason,
        );
    }

    /// Runs one pass against the engine. A pass that fails (the store's
    /// filesystem full, say) still measures the disks, so the node and the
    /// metrics say how full they are now, not how they were before.
    pub async fn pass<E: Engine>(
        &mut self,
        engine: &E,
        store: &Arc<Store>,
    ) -> Result<PassReport, PassError> {
        let out = self.whole_pass(engine, store).await;
        if out.is_err() {
            let logs = self.steward.disks().logs.clone();
            self.steward.measure(engine.data_root(), store, logs);
            self.metrics.disks(self.steward.disks());
        }
        out
    }

    async fn whole_pass<E: Engine>(
        &mut self,
        engine: &E,
        store: &Arc<Store>,
    ) -> Result<PassReport, PassError> {
        let engine = &Counted {
            engine: watched::Watched {
                engine: engine.clone(),
                progress: self.progress.clone(),
            },
            metrics: self.metrics.clone(),
        };
        let started = Instant::now();
        let now = tokio::time::Instant::now();
        self.wake = None;

        // Intake: the directory into the store, every entry read once.
        let (mut entries, unreadable, rejected) = self.intake(store).await?;

        if !self.rebuilt {
            if let Some(e) = self.rebuild(engine, store).await? {
                entries = e;
            }
            self.rebuilt = true;
        }

        // What the crash guard holds is not resolved: that may be where
        // the agent died.
        let held = self.quarantined(store, &entries).await?;

        // Resolve: every module's target, against the host and the engine.
        let Targets {
            entries,
            mut resolved,
            watched_inputs,
            agent,
        } = self
            .resolve(engine, store, entries, &held, unreadable, now)
            .await?;

        // Prepare: every composed and live file is written; a module whose
        // files cannot be written is held.
        prepare::write_files(&mut resolved).await;

        // Observe and plan.
        let looked_at = crate::host::clock::now();
        let mut observed = engine.list_containers().await?;
        // In the terms the targets are made in: a container made before
        // keyed digests were turned on is compared as if made with them.
        if let Some(k) = &self.keyed {
            for o in &mut observed {
                o.labels = std::mem::take(&mut o.labels).keyed_with(k);
            }
        }
        // Locks asked are taken before this pass acts.
        if !self.lock_asks.is_empty() {
            self.take_locks(engine, store, &observed).await?;
        }
        self.join_network_stacks(&mut resolved, &observed);
        let restarts = self.gate_dependencies(&mut resolved, &observed, &entries);
        let other_agent = self.other_agent(store, &agent, &observed).await?;
        let livings = self.observe_lives(engine, &observed).await?;
        // Restarts while a module waits for what it depends on are the
        // ordering's, not a crash loop's: its restart baseline follows
        // them (the engine may restart it faster than it can be stopped).
        for want in resolved.wants.values() {
            let plan::Want::Wait { name, .. } = want else {
                continue;
            };
            let at = observed
                .iter()
                .find(|o| observe::at_its_name(&self.node, o) == Some(name.as_str()));
            if let (Some(o), Some(r)) = (at, livings.get(name.as_str()).and_then(|l| l.restarts)) {
                self.baselines.insert(o.id.clone(), r);
            }
        }
        let mut steps = plan::plan(&self.node, resolved.wants.values(), &observed);
        // A dependent whose dependency was replaced since it started, with
        // `restart = true`: restarted, once.
        for step in &mut steps {
            if let plan::Step::Keep { module, container } = step
                && let Some(reason) = restarts.get(module)
            {
                *step = plan::Step::Restart {
                    module: module.clone(),
                    container: container.clone(),
                    reason: reason.clone(),
                };
            }
        }

        // One-shot actions: a restart or a recreate the documents ask is
        // its module's step, and waits as any other.
        let asked = self
            .ask_actions(engine, store, &mut steps, &entries)
            .await?;

        // Maintenance windows: outside them no container is recreated or
        // restarted. Judged only when there is one to hold (a quiet pass
        // reads no zone and computes no window).
        if steps.iter().any(plan::Step::disrupts)
            && let Err(why) = self.door()
        {
            plan::defer(&mut steps, |_| Some(why.clone()));
        }

        // Update locks: a recreate waits for the lock its module holds,
        // and for a lock of the device's, up to the documents' max.
        let lock_dirs: Vec<(ModuleName, PathBuf)> = resolved
            .wants
            .values()
            .filter_map(|w| match w {
                plan::Want::Run(d) if d.spec.runtime.update_lock.is_some() => {
                    Some((d.name.clone(), self.lock_dir(&d.name)))
                }
                _ => None,
            })
            .collect();
        let lock_wants: Vec<(ModuleName, String, i64)> = lock_dirs
            .iter()
            .filter_map(|(m, _)| {
                observed
                    .iter()
                    .find(|o| {
                        observe::at_its_name(&self.node, o) == Some(m.as_str())
                            && o.state == crate::engine::ContainerState::Running
                    })
                    .map(|o| (m.clone(), o.id.clone(), o.created))
            })
            .collect();
        if !lock_dirs.is_empty() {
            // The directories are mounted: they are there before a create.
            blocking(move || {
                for (_, dir) in lock_dirs {
                    if let Err(e) = locks::make_lock_dir(&dir) {
                        tracing::warn!("update lock: cannot make {}: {e}", dir.display());
                    }
                }
            })
            .await;
        }
        let locks = self.standing_locks(engine, store, &lock_wants).await?;
        if !locks.is_empty() && steps.iter().any(plan::Step::disrupts) {
            self.hold_for_locks(store, &locks, &mut steps).await?;
        }
        // The site's budget: what still disrupts waits for this device's
        // place among its site's (asked of the plane's host).
        if steps.iter().any(plan::Step::disrupts)
            && let Err(why) = self.budget_door()
        {
            plan::defer(&mut steps, |_| Some(why.clone()));
        }
        // The actions whose steps go on are stored begun before they act.
        let begun = if asked.is_empty() {
            Vec::new()
        } else {
            self.begin_actions(store, &steps, asked).await?
        };

        // Retry policy: acting again toward a target already tried is held
        // back; a new target is acted on at once.
        let mut modules = retry::hold_back(&self.retries, &mut steps, &resolved, now);

        // Execute: the engine steps.
        modules.extend(
            self.execute(engine, store, steps, &resolved, &held, now)
                .await?,
        );
        crate::model::sort::sort_by(&mut modules, |a, b| a.module.cmp(&b.module));
        if !begun.is_empty() {
            self.end_actions(store, begun, &modules).await?;
        }
        self.collect_uploads(engine, store, &observed, &resolved)
            .await?;
        let reloaded = self
            .deliver_live(engine, store, &resolved, &observed, &modules)
            .await?;

        // What disk stewardship reads of the pass: the image each module's
        // container runs, the bound of the modules' logs.
        let running: Vec<(String, String)> = observed
            .iter()
            .filter_map(|o| {
                observe::at_its_name(&self.node, o).map(|m| (m.to_string(), o.image_id.clone()))
            })
            .collect();
        let logs = logs_bound(&resolved);
        let modules_stated: BTreeSet<ModuleName> = entries.keys().cloned().into_set();

        // Record.
        self.record(
            store,
            Outcome {
                entries: &entries,
                rejected: &rejected,
                observed,
                looked_at,
                livings: &livings,
                modules: &modules,
                reloaded,
                resolved,
            },
            now,
        )
        .await?;

        // Disk stewardship: the disks measured, pulled images and image
        // history noted, unused images collected when due.
        self.steward.measure(engine.data_root(), store, logs);
        let brought = std::mem::take(&mut self.pulls.brought);
        if let Some(out) = self
            .steward
            .after_pass(
                engine,
                store,
                brought,
                running,
                &modules_stated,
                &self.board,
            )
            .await?
        {
            self.metrics
                .images_removed(out.removed.len(), out.reclaimed_bytes, false);
        }
        self.metrics.disks(self.steward.disks());
        // A reboot the documents ask, once all else of the pass is done.
        self.reboot_if_asked(store, &locks).await?;
        // The site's lease is held while what was disrupted settles.
        self.budget_after(
            livings
                .values()
                .any(|l| matches!(l.living, Living::Starting | Living::Settling)),
        );
        let duration = started.elapsed();
        self.metrics.pass_done(duration);
        // Up-times are read to the second: a little past the window, and
        // never sooner than a fifth of a second.
        let settle_in = livings
            .values()
            .filter(|l| matches!(l.living, Living::Starting | Living::Settling))
            .filter_map(|l| l.up_for)
            .map(|up| self.tuning.settle.window.saturating_sub(up) + Duration::from_millis(500));
        let retry_in = modules.iter().filter_map(|m| m.retry_in);
        // A second past when a deferred recreate may go.
        let wake_in = self
            .wake
            .map(|at| Duration::from_secs(at.saturating_sub(crate::host::clock::now()) + 1));
        let next_in = settle_in
            .chain(retry_in)
            .chain(wake_in)
            .min()
            .map(|d| d.max(Duration::from_millis(200)));
        Ok(PassReport {
            modules,
            rejected,
            watched_inputs,
            duration,
            next_in,
            other_agent,
        })
    }

    /// The resolve phase: each module's target against the host (its
    /// files composed, its inputs read; blocking) and then the engine (its
    /// image found or pulled). What the crash guard holds is not resolved,
    /// nor a module whose stored intention does not read: both are held.
    /// Also says which host paths the modules read, and this agent's id.
    async fn resolve<E: Engine>(
        &mut self,
        engine: &E,
        store: &Arc<Store>,
        entries: BTreeMap<ModuleName, crate::store::Entry>,
        held: &BTreeMap<ModuleName, String>,
        unreadable: Vec<(ModuleName, String)>,
        now: tokio::time::Instant,
    ) -> Result<Targets, PassError> {
        // What reloads landed: a module's desired image until the next
        // reload or an edit of its image or range.
        let updates = store.blocking(|s| s.updates()).await?;
        let (entries, (host, watched_inputs)) = {
            let digester = self.digester.clone();
            let key = self.stated_key.clone();
            let skip: BTreeSet<ModuleName> = held.keys().cloned().into_set();
            blocking(move || {
                let mut digester = digester.lock().expect("digester lock");
                let r =
                    resolve::against_host(&entries, &skip, &updates, &mut digester, key.as_ref());
                (entries, r)
            })
            .await
        };
        let agent = match &self.agent {
            Some(a) => a.clone(),
            None => {
                let id = store.blocking(|s| s.agent_id()).await?;
                let a = format!("{id:016x}");
                self.agent = Some(a.clone());
                a
            }
        };
        // The node's logging in this engine's words.
        let default_logging = self
            .default_logging
            .as_ref()
            .map(|l| engine.flavour().node_logging(l));
        if let Some(p) = &self.image_policy {
            let known = p.borrow().clone();
            self.gate.set_policy(known);
        }
        if let Some(a) = &self.ahead {
            self.pulls.ahead = a.borrow().clone();
            self.steward.ahead = self.pulls.ahead.clone();
        }
        if self.gate.wants_stored() {
            match store.blocking(|s| s.image_checks()).await {
                Ok(stored) => self.gate.take_stored(stored),
                Err(e) => tracing::error!("the image checks kept cannot be read: {e}"),
            }
        }
        let mut resolved = resolve::against_engine(
            resolve::EngineSide {
                engine,
                retries: &mut self.retries,
                pulls: &mut self.pulls,
                tuning: &self.tuning,
                agent: &agent,
                default_logging: default_logging.as_ref(),
                made: &mut self.made,
                device: self.device.as_ref(),
                keyed: self.keyed.as_ref(),
                gate: &mut self.gate,
            },
            host,
            &self.node,
            &self.files_dir,
            now,
        )
        .await?;
        let writes = self.gate.take_writes();
        if !writes.is_empty() {
            if let Err(e) = store.blocking(move |s| s.note_image_checks(&writes)).await {
                tracing::error!("the image checks are not kept: {e}");
            }
        }
        for (name, reason) in held {
            resolved.hold(name, reason);
        }
        // A module whose stored intention does not read is held as it is.
        for (name, why) in unreadable {
            if !entries.contains_key(&name) {
                resolved.hold(&name, &format!(
                    "its stored intention does not read ({why}); its container is left as it is until the module is stated again"
                ));
            }
        }
        Ok(Targets {
            entries,
            resolved,
            watched_inputs,
            agent,
        })
    }

    /// The execute phase: modules about to be replaced read recreating;
    /// the steps are carried out against the engine, a few modules at
    /// once; each report says what the crash guard holds, and when a held
    /// module's pull is tried again.
    async fn execute<E: Engine>(
        &self,
        engine: &E,
        store: &Arc<Store>,
        steps: Vec<Step>,
        resolved: &resolve::Resolved,
        held: &BTreeMap<ModuleName, String>,
        now: tokio::time::Instant,
    ) -> Result<Vec<ModuleReport>, EngineError> {
        {
            let mut board = self.board.lock().expect("board lock");
            for step in &steps {
                if let Step::Recreate { module, .. } | Step::Promote { module, .. } = step {
                    board
                        .entry(module.to_string())
                        .or_insert_with(|| crate::status::ModuleStatus::pending(module.as_str()))
                        .state = crate::status::ModuleState::Recreating;
                }
            }
        }

        // What needs no engine is reported at once; only the steps that act
        // become tasks.
        let mut results: Vec<Result<ModuleReport, EngineError>> = Vec::with_capacity(steps.len());
        let mut acting = Vec::new();
        for step in steps {
            match execute::at_once(resolved, step) {
                Ok(r) => results.push(Ok(r)),
                Err(step) => acting.push(step),
            }
        }
        let acted: Vec<Result<ModuleReport, EngineError>> = futures_util::stream::iter(acting)
            .map(|step| {
                // Noted, so that a panic here names the module to the crash
                // guard.
                let module = step.module().unwrap_or_default().to_string();
                crate::host::panic::acting_on_async(
                    module,
                    execute::execute(engine, store, resolved, step),
                )
            })
            .buffer_unordered(PARALLEL_ACTIONS)
            .collect()
            .await;
        results.extend(acted);
        let mut modules = Vec::new();
        for r in results {
            let mut r = r?;
            if r.module.module().is_some_and(|m| held.contains_key(m)) {
                r.action = Action::Quarantined;
            }
            if r.action == Action::Held {
                if let Some(m) = r.module.module() {
                    r.retry_in = resolved
                        .retry_at
                        .get(m)
                        .map(|t| t.saturating_duration_since(now));
                }
            }
            modules.push(r);
        }
        Ok(modules)
    }

    /// The record phase: the attempts counted by the retry policy, the
    /// outcomes said once, the board, the store's observed and applied
    /// records, and the composed and live files no longer used removed.
    async fn record(
        &mut self,
        store: &Arc<Store>,
        o: Outcome<'_>,
        now: tokio::time::Instant,
    ) -> Result<(), PassError> {
        let Outcome {
            entries,
            rejected,
            observed,
            looked_at,
            livings,
            modules,
            reloaded,
            resolved,
        } = o;
        for m in modules {
            if m.action.is_attempt() {
                if let (Some(name), Some(digest)) = (m.module.module(), &m.digest) {
                    self.retries
                        .attempted(&self.tuning, name, digest, m.error.clone(), now);
                }
            }
            if m.action == Action::Recreated {
                self.metrics.recreated(&m.moved);
            }
        }
        self.say_outcomes(store, modules).await?;
        self.update_board(
            entries,
            modules,
            (&observed, looked_at),
            livings,
            rejected,
            &resolved.images,
        );
        {
            // What each module was to run, for the reload executor's measure.
            let mut board = self.board.lock().expect("board lock");
            for d in resolved.running() {
                if let Some(st) = board.get_mut(d.name.as_str()) {
                    st.desired_image = Some(d.spec.image_id.clone());
                }
            }
        }
        if !reloaded.is_empty() {
            let mut board = self.board.lock().expect("board lock");
            for m in &reloaded {
                if let Some(st) = board.get_mut(m.as_str()) {
                    st.last_action = Some(crate::status::LastAction {
                        action: crate::status::Act::ReloadedLive,
                        at: crate::host::clock::now(),
                    });
                }
            }
        }
        let node = self.node.clone();
        let (files_dir, digester) = (self.files_dir.clone(), self.digester.clone());
        let mut keep: BTreeSet<PathBuf> = observed
            .iter()
            .flat_map(|o| o.mount_sources.iter().map(PathBuf::from))
            .into_set();
        for d in resolved.running() {
            keep.extend(d.files.iter().map(|(p, _)| p.clone()));
        }
        let wanted: BTreeSet<String> = resolved.running().map(|d| d.name.to_string()).into_set();
        store
            .blocking(move |s| -> Result<(), StoreError> {
                let (obs, applied) = observe::records_to_write(
                    &node,
                    &observed,
                    &resolved,
                    &s.all_observed()?,
                    &s.all_applied()?,
                );
                s.put_observed(&obs)?;
                for (name, rec) in &applied {
                    s.put_applied(name, rec)?;
                }
                observe::collect_garbage(&files_dir, &keep);
                observe::collect_live(&files_dir, &wanted, &keep);
                digester.lock().expect("digester lock").forget_unseen();
                Ok(())
            })
            .await?;
        Ok(())
    }

    /// Another agent with this node id, seen by a container of ours it
    /// created since this one started: said once, and reported for ten
    /// minutes after it was last seen (each undoes the other's work, so a
    /// sighting lasts a pass or two).
    async fn other_agent(
        &mut self,
        store: &Arc<Store>,
        ours: &str,
        observed: &[crate::engine::Observed],
    ) -> Result<Option<String>, StoreError> {
        let other = observed.iter().find_map(|o| {
            let agent = o.labels.agent.as_deref()?;
            (o.labels.managed_by(&self.node) && agent != ours && o.created >= self.started_at)
                .then(|| (agent.to_string(), o.id.clone()))
        });
        let Some((agent, container)) = other else {
            let recent = self
                .other_seen
                .as_ref()
                .filter(|(at, _)| at.elapsed() < Duration::from_secs(600));
            return Ok(recent.map(|(_, d)| d.clone()));
        };
        let detail = format!(
            "another agent ({agent}) with this node id ({}) created container {} since this one ({ours}) started: two agents must not share a node id; they undo each other's work",
            self.node,
            execute::short_id(Some(&container))
        );
        self.say_once(
            store,
            "other-agent",
            None,
            EventKind::Conflict,
            detail.clone(),
        )
        .await?;
        self.other_seen = Some((tokio::time::Instant::now(), detail.clone()));
        Ok(Some(detail))
    }

    /// Says each refused intention file once (and again if it changes).
    async fn say_rejected(
        &mut self,
        store: &Arc<Store>,
        rejected: &[FileRejected],
    ) -> Result<(), StoreError> {
        let mut still_bad = BTreeSet::new();
        for r in rejected {
            let key = format!("rejected:{}", r.path.display());
            self.say_once(
                store,
                &key,
                r.module.as_ref().map(|m| m.as_str()),
                EventKind::Rejected,
                r.error.to_string(),
            )
            .await?;
            still_bad.insert(key);
        }
        self.said
            .retain(|k, _| !k.starts_with("rejected:") || still_bad.contains(k));
        Ok(())
    }

    /// Says each module's drift, conflict or failure once; a module back in
    /// order may say its next one again.
    async fn say_outcomes(
        &mut self,
        store: &Arc<Store>,
        modules: &[ModuleReport],
    ) -> Result<(), StoreError> {
        for m in modules {
            let key = format!("module:{}", m.module);
            let (kind, detail) = match m.action {
                Action::Drifted => (
                    EventKind::Drift,
                    format!("drift reported: {}", execute::join_moved(&m.moved)),
                ),
                Action::Deferred => (
                    EventKind::Drift,
                    format!(
                        "recreate deferred ({}): {}",
                        execute::join_moved(&m.moved),
                        m.error.as_deref().unwrap_or_default()
                    ),
                ),
                Action::Conflict => (
                    EventKind::Conflict,
                    format!(
                        "container {} holds the name stead-{} but is not managed by this node; left alone",
                        execute::short_id(m.container.as_deref()),
                        m.module
                    ),
                ),
                Action::Held | Action::Failed | Action::Quarantined => {
                    (EventKind::Error, m.error.clone().unwrap_or_default())
                }
                // Waiting out a back-off is not news: the failure it waits
                // on was said; nor is a pull under way (it is logged).
                Action::BackingOff | Action::Pulling => continue,
                _ => {
                    self.said.remove(&key);
                    continue;
                }
            };
            self.say_once(store, &key, Some(m.module.as_str()), kind, detail)
                .await?;
        }
        Ok(())
    }
}

/// The device's time zone, from `/etc/localtime` (UTC when it has none).
fn local_zone() -> Result<crate::model::maintenance::Zone, String> {
    match std::fs::read("/etc/localtime") {
        Ok(b) => crate::model::maintenance::Zone::parse_tzif(&b)
            .map_err(|e| format!("/etc/localtime: {e}")),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Ok(crate::model::maintenance::Zone::utc())
        }
        Err(e) => Err(format!("cannot read /etc/localtime: {e}")),
    }
}

/// What the modules' logs may take together, from what each container is
/// made with.
fn logs_bound(resolved: &resolve::Resolved) -> crate::model::disk::Logs {
    let mut logs = crate::model::disk::Logs::default();
    for d in resolved.running() {
        let bound = d
            .spec
            .runtime
            .logging
            .as_ref()
            .and_then(|l| crate::model::disk::log_bound(&l.driver, &l.options));
        match bound {
            Some(b) => logs.bound_bytes += b,
            None => logs.unbounded.push(d.name.to_string()),
        }
    }
    logs
}

#[cfg(test)]
mod tests;
