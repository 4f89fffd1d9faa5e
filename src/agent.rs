//! The agent's loop: reach the engine (waiting with capped, jittered
//! exponential backoff while it is away, never exiting for it), run a pass on
//! every heartbeat or wake-up, and stop when the shutdown future resolves.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};
use tokio::sync::Notify;

use crate::api::{self, ApiState};
use crate::config::Config;
use crate::engine::docker::DockerEngine;
use crate::engine::{Engine, EngineError};
use crate::host::systemd::Notifier;
use crate::host::watch::WatchSet;
use crate::reconcile::{PassError, PassReport, Reconciler};
use crate::reload::executor::Executor;
use crate::status::lives::LifeBook;
use crate::status::{EngineStatus, NodeStatus};
use crate::store::{EventKind, Store, StoreError};

/// Why the agent stopped on its own.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The data directory could not be made.
    #[error("cannot create the data directory {path}: {source}")]
    DataDir {
        /// The directory.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The store could not be opened.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A single pass was asked for and the engine is not there.
    #[error("engine at {socket} not reachable: {source}")]
    EngineUnreachable {
        /// Where it was looked for.
        socket: String,
        /// Why.
        #[source]
        source: EngineError,
    },
    /// A candidate could not keep the store safe before migrating it.
    #[error("the store cannot be kept from before the update: {0}")]
    Snapshot(String),
    /// The API could not listen.
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        /// The address.
        addr: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A single pass was asked for and it failed.
    #[error(transparent)]
    Pass(#[from] PassError),
}

/// How long the plane's poller waits for the first pass before it polls
/// anyway (the engine may be away for long; the plane is still heard).
const FIRST_PASS_LIMIT: Duration = Duration::from_secs(30);

/// The longest an attempt to reach the engine may take (its version and a
/// ping).
const CONNECT_LIMIT: Duration = Duration::from_secs(60);

/// How an idle wait ended.
enum Idle {
    /// Its time came.
    Elapsed,
    /// The loop was woken.
    Woken,
    /// The agent is stopping.
    Shutdown,
}

/// Aborts a task when dropped, so the agent's helpers end with it.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The API token: the configured one, or the one generated into the data
/// directory on first start (32 random bytes, hex, mode 0600).
pub fn ensure_token(config: &Config) -> Result<String, RunError> {
    if let Some(t) = &config.api_token {
        return Ok(t.clone());
    }
    let path = config.token_path();
    let err = |source| RunError::DataDir {
        path: path.display().to_string(),
        source,
    };
    // Read as every secret file is (the agent's own file alone); one that
    // is not (a link, another user's, others may read it) is replaced by a
    // new token, never followed.
    match path.symlink_metadata() {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(err(e)),
        Ok(_) => match crate::host::files::read_secret(&path, 4096) {
            Ok(t) => {
                let t = String::from_utf8_lossy(&t);
                if t.trim().len() >= 32 {
                    return Ok(t.trim().to_string());
                }
            }
            Err(why) => tracing::warn!("{why}; a new API token replaces it"),
        },
    }
    let bytes = crate::host::random::secret::<32>().map_err(err)?;
    let token: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    crate::host::files::replace_atomic(&path, token.as_bytes(), 0o600).map_err(err)?;
    tracing::info!("generated an API token in {}", path.display());
    Ok(token)
}

/// Reaches an engine.
pub trait Connect: Send + Sync {
    /// The engine reached.
    type Engine: Engine;
    /// Tries to reach the engine once.
    fn connect(&self) -> impl Future<Output = Result<Self::Engine, EngineError>> + Send;
    /// Where the engine is looked for, for messages.
    fn describe(&self) -> String;
}

/// Reaches the Docker Engine at a unix socket.
pub struct DockerSocket(pub String);

impl Connect for DockerSocket {
    type Engine = DockerEngine;
    async fn connect(&self) -> Result<DockerEngine, EngineError> {
        let engine = DockerEngine::connect(&self.0).await?;
        engine.ping().await?;
        Ok(engine)
    }
    fn describe(&self) -> String {
        self.0.clone()
    }
}

/// Follows the engine's events for this node's containers for as long as
/// the task lives, waking the loop for each (a container removed or stopped
/// by hand, one that died or changed health is seen at once, whatever the
/// heartbeat). A stream that ends is opened again with backoff, and the
/// loop woken: what happened meanwhile is seen by the pass's list.
async fn follow_events<E: Engine>(
    engine: E,
    node: String,
    book: Arc<Mutex<LifeBook>>,
    wake: Arc<Notify>,
) {
    /// Stopped (the engine was lost) or not, what the book holds stands
    /// only as inspects give it again.
    struct Closes(Arc<Mutex<LifeBook>>);
    impl Drop for Closes {
        fn drop(&mut self) {
            if let Ok(mut b) = self.0.lock() {
                b.closed();
            }
        }
    }
    let _closes = Closes(book.clone());
    let mut backoff = engine_backoff(Duration::from_secs(1), Duration::from_secs(30));
    loop {
        let since_ns = crate::host::clock::now_ns();
        book.lock().expect("life book lock").opened(since_ns);
        let (b, w) = (book.clone(), wake.clone());
        let ended = engine
            .watch(&node, since_ns, move |ev| {
                b.lock().expect("life book lock").apply(ev);
                w.notify_one();
            })
            .await;
        book.lock().expect("life book lock").closed();
        tracing::debug!("engine events: {ended}; following them again");
        tokio::time::sleep(backoff.next().unwrap_or(Duration::from_secs(30))).await;
        wake.notify_one();
    }
}

/// Moves reload requests on: at once when woken (a request filed, a pass
/// done), every two seconds while one lands or activates, when a faulted
/// one is due, and at least every minute (for the auto lane).
/// Each registry's requests move in a lane of their own (a task), so a slow
/// registry holds only its own. Stopped, lanes and all (between any two
/// steps), when the engine is lost: every step is in the store, so the
/// next run resumes it.
async fn run_reloads<E: Engine>(
    engine: E,
    executor: Arc<Executor>,
    filed: Arc<Notify>,
    passed: Arc<Notify>,
) {
    // The lanes stop with this task (the engine lost).
    let _lanes = executor.lanes_stop();
    // Whether a request may be open: the store is read only then (and at
    // start), not on every pass of an idle node.
    let mut open = true;
    // The auto lane's first look waits for the first pass to have taken the
    // intentions in.
    let mut passed_once = false;
    loop {
        let now = crate::host::clock::now();
        match executor.auto_lane(now).await {
            Ok(looked) => {
                open |= looked
                    .iter()
                    .any(|(_, l)| matches!(l, crate::reload::lane::Looked::Filed(..)));
            }
            Err(e) => tracing::warn!("auto-update: {e}"),
        }
        let next = if open {
            match executor.run(&engine, now).await {
                Ok(next) => next,
                Err(e) => {
                    tracing::warn!("reloads: {e}");
                    Some(Duration::from_secs(2))
                }
            }
        } else {
            None
        };
        open = next.is_some();
        // The auto lane looks at least once a minute.
        let wait = next.map_or(Duration::from_secs(60), |n| n.min(Duration::from_secs(60)));
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = filed.notified() => open = true,
            // A lane moved its requests: what they became is looked at.
            () = executor.lane_done.notified() => {}
            // What a pass saw is what an activation measures.
            () = passed.notified(), if open || !passed_once => passed_once = true,
        }
    }
}

/// The check that a pull fits, with the registries' CA and logins.
fn room(
    config: &Config,
    metrics: Arc<crate::status::metrics::Metrics>,
) -> Result<Arc<crate::registry::room::Room>, String> {
    let spool = match config.fetch {
        crate::model::fetch::Puller::Agent => {
            match crate::registry::fetch::Spool::new(&config.data_dir.join("spool")) {
                // A device that serves its site keeps what it fetched.
                Ok(s) => match config.site.as_ref().filter(|s| s.listen.is_some()) {
                    Some(site) => Some(s.keeping(site.keep, config.images.high, config.images.low)),
                    None => Some(s),
                },
                Err(e) => {
                    tracing::error!("the engine pulls every image: {e}");
                    None
                }
            }
        }
        crate::model::fetch::Puller::Engine => None,
    };
    // Layers' chunks are looked for beside the plane's documents.
    let chunks = match &config.plane {
        Some(p) => Some(crate::registry::chunks::ChunkSource::new(p.http()?, &p.url)),
        None => None,
    };
    // The site's peers: the config's, and those the group documents name.
    let peers = match spool {
        Some(_) => Some(crate::registry::peers::Peers::new(
            config.node_id.as_str(),
            config
                .site
                .as_ref()
                .map(|s| s.peers.clone())
                .unwrap_or_default(),
        )?),
        None => None,
    };
    Ok(crate::registry::room::Room::new(
        registries(config)?,
        spool,
        chunks,
        peers,
        metrics,
    ))
}

/// A registry client with the registries' CA and logins.
fn registries(config: &Config) -> Result<crate::registry::client::Registries, String> {
    let credentials = match &config.registry_auth {
        Some(p) => crate::registry::auth::Credentials::load(p)?,
        None => Default::default(),
    };
    let http = crate::net::http::Http::at_floor(
        config.registry_ca.as_deref(),
        None,
        crate::host::clock::process_floor(),
    )?;
    Ok(crate::registry::client::Registries::new(
        http,
        credentials,
        config.insecure_registries.clone(),
    ))
}

/// The backoff between attempts to reach the engine: exponential from
/// `min`, jittered, and capped at `max` (the jitter stays within the cap).
pub fn engine_backoff(min: Duration, max: Duration) -> impl Iterator<Item = Duration> {
    // The jitter adds up to the delay again, so the base is capped at half.
    let base_max = (max / 2).max(min);
    ExponentialBuilder::default()
        .with_min_delay(min)
        .with_max_delay(base_max)
        .with_factor(2.0)
        .with_jitter()
        .without_max_times()
        .build()
        .map(move |d| d.min(max))
}

/// The agent.
pub struct Agent<C: Connect> {
    config: Config,
    store: Arc<Store>,
    connector: C,
    reconciler: Reconciler,
    /// Notified to run a pass now rather than at the next heartbeat.
    pub wake: Arc<Notify>,
    /// The node's status.
    pub status: Arc<Mutex<NodeStatus>>,
    /// Wakes the reload executor: a request was filed.
    pub reload_wake: Arc<Notify>,
    /// Wakes the reload executor: a pass is done.
    pass_done: Arc<Notify>,
    /// Wakes the plane's reporter: the status changed without a pass.
    report_wake: Arc<Notify>,
    /// How many passes completed: the plane's poller waits for the first,
    /// the reporter looks again after each.
    passes: tokio::sync::watch::Sender<u64>,
    /// The reload executor, once the store has said this agent's id.
    executor: Option<Arc<Executor>>,
    /// Asks to collect images, answered after a pass.
    prune: api::PruneAsks,
    /// Update locks asked through the API, taken before the next pass.
    lock_asks: api::LockAsks,
    /// How the launcher started this agent, when it did.
    launched: Option<crate::host::launch::Launched>,
    /// Ends the run for a restart through the launcher (a candidate that
    /// gave up); `restart_asked` says so after `run` returns.
    restart: Arc<Notify>,
    restart_asked: Arc<std::sync::atomic::AtomicBool>,
    /// The key this device's reports are signed with.
    report_key: Arc<crate::plane::envelope::SecretKey>,
    /// What the device is (its facts), said after each pass: the plane's
    /// poller judges the groups' `when` by it.
    facts: tokio::sync::watch::Sender<crate::model::facts::Facts>,
}

impl<C: Connect> Agent<C> {
    /// Opens the store and prepares the agent; touches no engine yet.
    pub fn open(config: Config, connector: C) -> Result<Agent<C>, RunError> {
        let data_err = |source| RunError::DataDir {
            path: config.data_dir.display().to_string(),
            source,
        };
        std::fs::create_dir_all(&config.data_dir).map_err(data_err)?;
        // The store and the API token are the agent's alone, under systemd
        // (StateDirectoryMode) or not.
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&config.data_dir)
                .map_err(data_err)?
                .permissions()
                .mode();
            if mode & 0o077 != 0 {
                std::fs::set_permissions(&config.data_dir, std::fs::Permissions::from_mode(0o700))
                    .map_err(data_err)?;
            }
        }
        let launched = crate::host::launch::Launched::from_env();
        // Across an update of itself: a candidate's snapshot before it
        // migrates the store; the previous version's return to the
        // snapshot is in the open below.
        match crate::update::snapshot::before_open(&config.store_path(), launched.as_ref()) {
            Ok(Some(said)) => tracing::warn!("{said}"),
            Ok(None) => {}
            Err(e)
                if matches!(
                    launched.as_ref().map(|l| &l.slot),
                    Some(crate::model::launch::Slot::Candidate(_))
                ) =>
            {
                return Err(RunError::Snapshot(e));
            }
            Err(e) => tracing::error!("the store across an update: {e}"),
        }
        let (store, said) = crate::update::snapshot::open(&config.store_path(), launched.as_ref())?;
        if let Some(said) = said {
            tracing::error!("{said}");
        }
        if let Some(crate::model::launch::Slot::Candidate(_)) = launched.as_ref().map(|l| &l.slot) {
            crate::host::candidate_damage(&config.store_path(), &config.data_dir);
        }
        let store = Arc::new(store);
        // The time floor, before any network access: every TLS client
        // checks certificates at the later of it and the clock.
        crate::plane::clock::start(&store, config.clock_step);
        let mut reconciler = Reconciler::new(
            config.node_id.clone(),
            config.intentions_dir.clone(),
            config.files_dir(),
            config.tuning,
        );
        let wake = Arc::new(Notify::new());
        reconciler.wake_on_pulls(wake.clone());
        reconciler.set_default_logging(config.logging.clone());
        reconciler.set_disk(config.images, config.data_dir.clone());
        match room(&config, reconciler.metrics()) {
            Ok(r) => reconciler.set_room(r),
            Err(e) => tracing::error!("pulls are not checked for room: {e}"),
        }
        let key_path = config.local_key_path();
        let key = match crate::host::keys::local_key(&key_path) {
            // A damaged key must not keep the node down: it is moved aside
            // and a new one made (what older containers' labels carry for a
            // store rebuild can then no longer be read).
            Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
                let aside =
                    key_path.with_extension(format!("key.bad-{}", crate::host::clock::now()));
                tracing::error!("{e}; moved to {} and made anew", aside.display());
                std::fs::rename(&key_path, &aside)
                    .and_then(|()| crate::host::keys::local_key(&key_path))
            }
            other => other,
        }
        .map_err(|source| RunError::DataDir {
            path: key_path.display().to_string(),
            source,
        })?;
        let device_key = key.identity().recipient().encode();
        // The key its reports are signed with: derived from the same local
        // key, for that one use (nothing more is kept).
        let report_key = Arc::new(crate::plane::envelope::SecretKey::from_seed(
            key.report_seed(),
        ));
        reconciler.seal_stated_with(key);
        if config.keyed_digests {
            reconciler.key_digests();
        }
        // What the device is, before the engine answered: its
        // architecture, system, labels and memory, and the engine and
        // free disk it had when last known (a restart judges the groups'
        // `when` as before it).
        let kept = store.facts().unwrap_or_else(|e| {
            tracing::warn!("{e}; the device's facts are learnt again");
            None
        });
        let facts = crate::model::facts::Facts {
            arch: std::env::consts::ARCH.to_string(),
            os: std::env::consts::OS.to_string(),
            labels: config.labels.clone(),
            memory: crate::host::memory_total(),
            engine: kept.as_ref().and_then(|k| k.engine.clone()),
            engine_version: kept.as_ref().and_then(|k| k.engine_version.clone()),
            disk_free: kept.as_ref().and_then(|k| k.disk_free),
        };
        Ok(Agent {
            config,
            store,
            connector,
            reconciler,
            wake,
            status: Arc::new(Mutex::new(NodeStatus {
                device_key: Some(device_key),
                report_key: Some(report_key.public().to_base64()),
                facts: facts.clone(),
                ..NodeStatus::default()
            })),
            reload_wake: Arc::new(Notify::new()),
            pass_done: Arc::new(Notify::new()),
            report_wake: Arc::new(Notify::new()),
            passes: tokio::sync::watch::Sender::new(0),
            executor: None,
            prune: Default::default(),
            lock_asks: Default::default(),
            launched,
            restart: Arc::new(Notify::new()),
            restart_asked: Default::default(),
            report_key,
            facts: tokio::sync::watch::Sender::new(facts),
        })
    }

    /// Whether the run ended to restart through the launcher.
    pub fn restart_asked(&self) -> bool {
        self.restart_asked.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The updater of stead itself: trusts the plane's keys and those of
    /// `[update] trusted_keys` (the trusted set `asks` says, with what the
    /// plane asks); fetches through the plane's CA when it has one; a
    /// faulted request is retried on the reloads' backoff.
    fn updater(
        &self,
        asks: tokio::sync::watch::Receiver<crate::plane::sync::PlaneAsk>,
    ) -> Arc<crate::update::executor::Updater> {
        // A CA file that does not read leaves updates failing, saying so,
        // never the agent down. The plane's host is asked as the plane is
        // (its certificate, its credentials), and no other with them.
        let http = match &self.config.plane {
            Some(p) => p.http(),
            None => {
                crate::net::http::Http::at_floor(None, None, crate::host::clock::process_floor())
            }
        };
        if let Err(e) = &http {
            tracing::error!("agent updates: {e}; no release can be fetched until it is fixed");
        }
        Arc::new(crate::update::executor::Updater {
            store: self.store.clone(),
            store_path: self.config.store_path(),
            launched: self.launched.clone(),
            http,
            retry_interval: self.config.reload_retry_interval,
            restart: self.restart.clone(),
            restart_asked: self.restart_asked.clone(),
            wake: Default::default(),
            asks,
            plane_tried: Default::default(),
        })
    }

    /// How the launcher started this agent, when it did.
    pub fn launched(&self) -> Option<&crate::host::launch::Launched> {
        self.launched.as_ref()
    }

    /// A candidate's watch: confirmed by a completed pass and (with a
    /// plane) an answer from the plane within its window, or given up,
    /// which ends the run for a restart into the version it replaced.
    fn watch_candidate(
        &self,
        plane: Option<Arc<Mutex<crate::plane::sync::PlaneStatus>>>,
        updater: Arc<crate::update::executor::Updater>,
    ) -> Option<AbortOnDrop> {
        use crate::model::launch::Slot;
        use crate::update::confirm::{Ended, Proof};
        let l = self.launched.clone()?;
        let Slot::Candidate(me) = l.slot.clone() else {
            return None;
        };
        crate::host::panic_point("candidate:start");
        let status = self.status.clone();
        let proof = move || {
            let s = status.lock().expect("status lock");
            let mut p = Proof {
                passed: s.passes > 0,
                pass_missing: match (&s.engine, &s.failing) {
                    (_, Some((_, e))) => Some(format!("passes fail: {e}")),
                    // Its own words start "engine not reachable".
                    (EngineStatus::Waiting { error, .. }, _) => Some(error.clone()),
                    _ => None,
                },
                ..Default::default()
            };
            drop(s);
            if let Some(ps) = &plane {
                let ps = ps.lock().expect("plane status lock");
                let (taken, missing) =
                    crate::update::confirm::plane_proof(ps.taken_here, &ps.contact);
                p.plane = Some(taken);
                p.plane_missing = missing;
            }
            p
        };
        let window = self.config.confirm_window;
        let restart = self.restart.clone();
        let asked = self.restart_asked.clone();
        let report = self.report_wake.clone();
        let store_path = self.config.store_path();
        Some(AbortOnDrop(tokio::spawn(async move {
            match crate::update::confirm::watch(l, me, window, proof).await {
                Ended::Confirmed => {
                    updater.candidate_ended(Ok(())).await;
                    crate::update::snapshot::forget(&store_path);
                    // The plane hears of it now, not at the next pass.
                    report.notify_one();
                }
                Ended::GaveUp(why) => {
                    updater.candidate_ended(Err(why)).await;
                    asked.store(true, std::sync::atomic::Ordering::SeqCst);
                    restart.notify_one();
                }
            }
        })))
    }

    /// This node's id.
    pub fn node_id(&self) -> &crate::model::names::NodeId {
        &self.config.node_id
    }

    /// The store.
    pub fn store(&self) -> Arc<Store> {
        self.store.clone()
    }

    /// One pass; the engine must answer now.
    pub async fn once(&mut self) -> Result<PassReport, RunError> {
        let engine =
            self.connector
                .connect()
                .await
                .map_err(|source| RunError::EngineUnreachable {
                    socket: self.connector.describe(),
                    source,
                })?;
        self.reconciler.wait_for_pulls();
        Ok(self.reconciler.pass(&engine, &self.store).await?)
    }

    /// What the file watcher should watch: the intentions directory and
    /// the host inputs the last pass read.
    fn watch_set(&self, inputs: std::collections::BTreeSet<std::path::PathBuf>) -> WatchSet {
        let mut set = WatchSet::default();
        set.dirs.insert(self.config.intentions_dir.clone());
        set.inputs = inputs;
        set
    }

    /// A pass that could not complete (the engine answering errors, the
    /// store failing) is said once per distinct error, counted, and shown:
    /// readiness turns false and every module reads pending with the
    /// reason, rather than the last good pass's states.
    async fn pass_failed(&mut self, error: &str) {
        self.reconciler.metrics().pass_outcome(false);
        self.reconciler
            .no_pass(&self.store, &format!("the last pass failed: {error}"))
            .await;
        self.report_wake.notify_one();
        let mut s = self.status.lock().expect("status lock");
        let new = s.failing.as_ref().is_none_or(|(_, e)| e != error);
        let since = s
            .failing
            .as_ref()
            .map_or_else(crate::host::clock::now_system, |(t, _)| *t);
        s.failing = Some((since, error.to_string()));
        drop(s);
        if new {
            let msg = format!("pass failed: {error}; retrying at the next heartbeat");
            tracing::error!("{msg}");
            self.say_engine(msg);
        }
    }

    /// Logs the engine's coming or going, off the async threads.
    fn say_engine(&self, msg: String) {
        let store = self.store.clone();
        crate::host::blocking::detach(move || {
            if let Err(e) = store.append_event(None, EventKind::Engine, msg) {
                tracing::error!("cannot append to the event log: {e}");
            }
        });
    }

    fn set_engine(&self, engine: EngineStatus) {
        self.reconciler
            .metrics()
            .engine_reachable(engine == EngineStatus::Reachable);
        let mut s = self.status.lock().expect("status lock");
        let was_waiting = matches!(s.engine, EngineStatus::Waiting { .. });
        match &engine {
            EngineStatus::Waiting { error, .. } if !was_waiting => {
                let msg = format!(
                    "engine at {} not reachable ({error}); waiting for it with backoff",
                    self.connector.describe()
                );
                tracing::warn!("{msg}");
                self.say_engine(msg);
            }
            EngineStatus::Reachable if s.engine != EngineStatus::Reachable => {
                let msg = format!("engine at {} reachable", self.connector.describe());
                tracing::info!("{msg}");
                self.say_engine(msg);
            }
            _ => {}
        }
        if !(was_waiting && matches!(engine, EngineStatus::Waiting { .. })) {
            s.engine = engine;
        }
    }

    /// The listener the site's peers are served on, when `[site] listen`
    /// says so and the agent spools its own pulls. One that cannot be
    /// bound leaves the agent running, saying so: the peers then go to
    /// the WAN.
    async fn serve_site(&self) -> Option<(AbortOnDrop, std::net::SocketAddr)> {
        let site = self.config.site.as_ref()?;
        let listen = site.listen?;
        let room = self.reconciler.room()?;
        let Some(spool) = room.spool().cloned() else {
            tracing::warn!(
                "site.listen is set, but the engine pulls images ([images] fetch = \"engine\"): nothing is served to the site's peers"
            );
            return None;
        };
        let listener = match tokio::net::TcpListener::bind(listen).await {
            Ok(l) => l,
            Err(e) => {
                tracing::error!("the site's peers are not served: {listen}: {e}");
                return None;
            }
        };
        let at = listener.local_addr().unwrap_or(listen);
        tracing::info!(
            "serving the site's peers on http://{at} (to {}; at most {} a second)",
            site.allow
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", "),
            crate::model::disk::human(site.rate)
        );
        let served = Arc::new(
            crate::site::Served::new(
                spool,
                site.allow.clone(),
                site.rate,
                self.config.node_id.as_str(),
                self.reconciler.metrics(),
            )
            .with_store(self.store.clone()),
        );
        Some((
            AbortOnDrop(tokio::spawn(crate::site::serve(listener, served))),
            at,
        ))
    }

    /// The task that finds the site's peers by mDNS, and answers for
    /// the listener `at` when there is one, when `[site] mdns` names an
    /// interface and the agent spools its own pulls.
    fn find_peers(&self, at: Option<std::net::SocketAddr>) -> Option<AbortOnDrop> {
        let interface = self.config.site.as_ref()?.mdns.clone()?;
        let Some(peers) = self.reconciler.room().and_then(|r| r.peers().cloned()) else {
            tracing::warn!(
                "site.mdns is set, but the engine pulls images ([images] fetch = \"engine\"): no peers are asked"
            );
            return None;
        };
        let address = match at.map(|a| a.ip()) {
            Some(std::net::IpAddr::V4(ip)) if !ip.is_unspecified() => Some(ip),
            _ => None,
        };
        Some(AbortOnDrop(tokio::spawn(crate::site::mdns::run(
            crate::site::mdns::Mdns {
                interface,
                node: self.config.node_id.to_string(),
                port: at.map(|a| a.port()),
                address,
                peers,
                metrics: self.reconciler.metrics(),
            },
        ))))
    }

    /// Runs until `shutdown` resolves. Never returns because the engine is
    /// away: it waits for it.
    pub async fn run(&mut self, shutdown: impl Future<Output = ()>) -> Result<(), RunError> {
        // A restart asked for (a candidate that gave up) ends the run as a
        // shutdown does.
        let restart = self.restart.clone();
        let shutdown = async move {
            tokio::select! {
                () = shutdown => {}
                () = restart.notified() => tracing::info!("restarting through the launcher"),
            }
        };
        tokio::pin!(shutdown);
        let listener = tokio::net::TcpListener::bind(self.config.api_listen)
            .await
            .map_err(|source| RunError::Listen {
                addr: self.config.api_listen.to_string(),
                source,
            })?;
        let addr = listener.local_addr().map_err(|source| RunError::Listen {
            addr: self.config.api_listen.to_string(),
            source,
        })?;
        // The token first: a client that finds the address finds the token.
        let token = ensure_token(&self.config)?;
        // Where the CLI finds the API when the port was chosen by the OS:
        // written when it changed; one that cannot be written (a full
        // disk) leaves the agent running, saying so.
        let addr_path = self.config.api_addr_path();
        let said = addr.to_string();
        if std::fs::read(&addr_path).ok().as_deref() != Some(said.as_bytes()) {
            if let Err(e) = crate::host::files::replace_atomic(&addr_path, said.as_bytes(), 0o644) {
                tracing::error!(
                    "{}: {e}; the CLI finds the API at the configured address only",
                    addr_path.display()
                );
            }
        }
        self.start_guard().await;
        let agent = self
            .store
            .blocking(|s| s.agent_id())
            .await
            .map_err(RunError::Store)?;
        if let Some(path) = &self.config.registry_auth {
            // Read again at every reload attempt; a bad file is said now.
            match crate::registry::auth::Credentials::load(path) {
                Ok(c) => self.reconciler.set_credentials(Arc::new(c)),
                Err(e) => tracing::error!("registry credentials: {e}"),
            }
        }
        // The image policy the plane's documents compose (with the
        // config's rules): not known until the poller has read what the
        // store holds (nothing covered runs meanwhile); without a plane,
        // the config's rules alone, or none.
        let (images, images_rx) = match &self.config.plane {
            Some(_) => {
                let (tx, rx) =
                    tokio::sync::watch::channel(crate::model::image_policy::Known::NotYet);
                let registries = registries(&self.config).map(Arc::new);
                self.reconciler.set_image_policy(rx.clone(), registries);
                (Some(tx), Some(rx))
            }
            None if !self.config.image_policy.0.is_empty() => {
                let policy = crate::model::image_policy::Policy::default()
                    .with_config(&self.config.image_policy);
                let (_, rx) = tokio::sync::watch::channel(crate::model::image_policy::Known::Is(
                    Arc::new(policy),
                ));
                let registries = registries(&self.config).map(Arc::new);
                self.reconciler.set_image_policy(rx.clone(), registries);
                (None, Some(rx))
            }
            None => (None, None),
        };
        let executor = Arc::new(
            Executor::new(
                self.store.clone(),
                self.reconciler.board(),
                self.wake.clone(),
                crate::reload::executor::Settings {
                    registry_auth: self.config.registry_auth.clone(),
                    registry_ca: self.config.registry_ca.clone(),
                    insecure_registries: self.config.insecure_registries.clone(),
                    retry_interval: self.config.reload_retry_interval,
                },
                agent,
            )
            .with_metrics(self.reconciler.metrics())
            .with_room(self.reconciler.room())
            .with_image_policy(images_rx),
        );
        let look_now = executor.look_now.clone();
        self.executor = Some(executor);
        // What the node trusts, and what the plane asks of the updater: the
        // keys of `[update] trusted_keys` alone until the plane's poller
        // starts with its own (and the roots it takes).
        let trusted = crate::plane::trusted::TrustedSet::new(&[])
            .with_release_keys(self.config.update_keys.clone());
        let (asks, asked) = tokio::sync::watch::channel(crate::plane::sync::PlaneAsk {
            trusted,
            agent: None,
        });
        // The images the plane's documents say to fetch ahead of a group's
        // coming rollout turn, for the pass.
        let ahead = self.config.plane.as_ref().map(|_| {
            let (tx, rx) = tokio::sync::watch::channel(std::collections::BTreeSet::new());
            self.reconciler.set_ahead(rx);
            tx
        });
        // The maintenance windows the plane's documents set: none known
        // until they are read (recreates wait meanwhile).
        let maintenance = self.config.plane.as_ref().map(|_| {
            let (tx, rx) = tokio::sync::watch::channel(None);
            self.reconciler.set_maintenance(rx);
            tx
        });
        // The site's disruption budgets: the pass asks the plane's lease
        // keeper before it disrupts.
        let budget = self.config.plane.as_ref().map(|_| {
            let (link, want, standing) = crate::reconcile::budget::link();
            self.reconciler.set_budget(link);
            (want, standing)
        });
        self.reconciler.allow_reboots(self.config.reboot_allowed);
        // The uploads actions ask: collected by the pass, sent by the
        // plane's uploader.
        let uploads = self.config.plane.as_ref().map(|pc| {
            let (tx, rx) = tokio::sync::mpsc::channel(4);
            let in_flight: crate::plane::uploads::InFlight = Default::default();
            self.reconciler
                .set_uploads(crate::reconcile::actions::Uploads {
                    tx,
                    in_flight: in_flight.clone(),
                    base: pc.uploads_base(&self.config.node_id),
                });
            (rx, in_flight)
        });
        let (plane, _plane_tasks) = self
            .start_plane(asks, images, ahead, maintenance, uploads, budget)
            .await;
        let updater = self.updater(asked);
        // What became of a switch begun before this start, before anything
        // else of the update is done.
        updater.resume().await;
        let _candidate =
            self.watch_candidate(plane.as_ref().map(|p| p.status.clone()), updater.clone());
        let _updates = AbortOnDrop(tokio::spawn(updater.clone().run()));
        let api = Arc::new(ApiState {
            node_id: self.config.node_id.clone(),
            store: self.store.clone(),
            board: self.reconciler.board(),
            node: self.status.clone(),
            metrics: self.reconciler.metrics(),
            wake: self.wake.clone(),
            token,
            heartbeat: self.config.heartbeat,
            heavy_reads: Arc::new(tokio::sync::Semaphore::new(api::HEAVY_READS)),
            agent,
            reload_wake: self.reload_wake.clone(),
            look_now,
            plane,
            prune: self.prune.clone(),
            lock_asks: self.lock_asks.clone(),
            actions_waiting: self.reconciler.actions_waiting(),
            updater,
        });
        let _server = AbortOnDrop(tokio::spawn(api::serve(listener, api)));
        tracing::info!("API listening on http://{addr}");
        let site = self.serve_site().await;
        let _mdns = self.find_peers(site.as_ref().map(|(_, at)| *at));
        let (watch_tx, watch_rx) = tokio::sync::watch::channel(self.watch_set(Default::default()));
        let _watcher = AbortOnDrop(tokio::spawn(crate::host::watch::run(
            watch_rx,
            self.wake.clone(),
        )));
        // Ready means the store is open and the API answers; waiting for
        // the engine is a normal state, reported in the status.
        let notifier = Notifier::from_env();
        notifier.ready();
        // The watchdog is pinged from a task of its own, for as long as the
        // loop makes progress: a pass waiting out long stop grace periods
        // is not killed, a stuck loop is.
        let _pinger = AbortOnDrop(tokio::spawn(crate::host::systemd::keep_alive(
            notifier.clone(),
            self.reconciler.progress(),
        )));
        let result = self.main_loop(&notifier, &watch_tx, &mut shutdown).await;
        notifier.stopping();
        // A stop during the first pass is no death.
        if let Err(e) = self
            .store
            .blocking(|s| s.change_guard(|g| g.open = None))
            .await
        {
            tracing::warn!("crash guard: {e}");
        }
        result
    }

    /// Folds in a death the last run left (counted by the crash guard), and
    /// takes what the guard holds: what the agent died on a few times in a
    /// row is neither run nor removed until it changes.
    async fn start_guard(&mut self) {
        use crate::model::guard::Start;
        use crate::store::guard::{all_key, entry_key, from_plane};
        let note = crate::host::panic::take_note(&self.config.panic_path());
        let boot = crate::host::boot_id();
        let now = crate::host::clock::now();
        let folded = self
            .store
            .blocking(move |s| -> Result<_, StoreError> {
                let entries = s.entries()?;
                let start = Start {
                    boot: &boot,
                    now,
                    panic: note.map(|(m, at)| {
                        (
                            m.and_then(|m| crate::model::names::ModuleName::try_from(m).ok()),
                            at,
                        )
                    }),
                    from_plane: &|m| entries.get(m).is_some_and(from_plane),
                    module_key: &|m| entries.get(m).map(entry_key),
                    all_key: all_key(&entries),
                };
                s.change_guard(|g| (g.on_start(&start), g.clone()))
            })
            .await;
        match folded {
            Ok((held, guard)) => {
                if guard.crashes > 0 {
                    tracing::warn!(
                        "crash guard: the last {} starts died before their first pass completed",
                        guard.crashes
                    );
                }
                for what in held {
                    let msg = format!(
                        "quarantined {what}: the agent died {} times in a row acting on it; held, neither run nor removed, until it changes",
                        crate::model::guard::CRASHES
                    );
                    tracing::error!("{msg}");
                    self.say_engine(msg);
                }
                self.status.lock().expect("status lock").quarantine = guard.quarantine.clone();
                self.reconciler.set_quarantine(guard.quarantine);
            }
            Err(e) => tracing::error!("crash guard: {e}; nothing is held"),
        }
    }

    /// Starts polling the central plane and reporting to it, when one is
    /// configured. A plane that cannot be set up (its CA file) is said and
    /// left: the node runs what it holds.
    async fn start_plane(
        &self,
        asks: tokio::sync::watch::Sender<crate::plane::sync::PlaneAsk>,
        images: Option<tokio::sync::watch::Sender<crate::model::image_policy::Known>>,
        ahead: Option<tokio::sync::watch::Sender<std::collections::BTreeSet<String>>>,
        maintenance: Option<tokio::sync::watch::Sender<crate::model::maintenance::InForce>>,
        uploads: Option<(
            tokio::sync::mpsc::Receiver<crate::model::action::Upload>,
            crate::plane::uploads::InFlight,
        )>,
        budget: Option<(
            tokio::sync::watch::Receiver<bool>,
            tokio::sync::watch::Sender<crate::model::budget::Standing>,
        )>,
    ) -> (Option<api::PlaneHandle>, Vec<AbortOnDrop>) {
        let (Some(pc), Some(images)) = (self.config.plane.clone(), images) else {
            return (None, vec![]);
        };
        let report_wake = self.report_wake.clone();
        let syncer = match crate::plane::sync::Syncer::new(
            self.config.node_id.clone(),
            pc,
            self.store.clone(),
            self.wake.clone(),
            report_wake.clone(),
            self.reconciler.metrics(),
            asks,
        ) {
            Ok(s) => {
                let s = s
                    .with_image_policy(images, self.config.image_policy.clone())
                    .with_facts(self.facts.subscribe())
                    .with_peers(self.reconciler.room().and_then(|r| r.peers().cloned()));
                let s = match maintenance.clone() {
                    Some(m) => s.with_maintenance(m),
                    None => s,
                };
                Arc::new(match ahead {
                    Some(a) => s.with_ahead(a),
                    None => s,
                })
            }
            Err(e) => {
                tracing::error!("central plane: {e}; not polled");
                // The policy of documents held stays unknown (what they
                // cover is not created); with none held, there is none.
                if let Ok(None) = self.store.blocking(|s| s.plane_envelope()).await {
                    let config = crate::model::image_policy::Policy::default()
                        .with_config(&self.config.image_policy);
                    images.send_replace(crate::model::image_policy::Known::Is(Arc::new(config)));
                    if let Some(m) = &maintenance {
                        m.send_replace(Some(Arc::default()));
                    }
                }
                return (None, vec![]);
            }
        };
        let epoch = match self.store.blocking(|s| s.next_report_epoch()).await {
            Ok(e) => e,
            Err(e) => {
                tracing::error!("central plane: {e}; reports start their count again");
                0
            }
        };
        // Before the API answers: what is held, as the store keeps it.
        if let Err(e) = syncer.show_stored().await {
            tracing::error!("plane: cannot read what the store holds: {e}");
        }
        let (nudge, nudges) = tokio::sync::mpsc::channel(16);
        let poll = AbortOnDrop(tokio::spawn(crate::plane::sync::run(
            syncer.clone(),
            nudges,
            self.passes.subscribe(),
            FIRST_PASS_LIMIT,
        )));
        let reporter = crate::plane::report::Reporter {
            node: self.config.node_id.clone(),
            store: self.store.clone(),
            board: self.reconciler.board(),
            status: self.status.clone(),
            http: syncer.http(),
            syncer: syncer.clone(),
            epoch,
            launched: self.launched.clone(),
            key: self.report_key.clone(),
        };
        let mut tasks = vec![poll];
        if let Some((rx, in_flight)) = uploads {
            tasks.push(AbortOnDrop(tokio::spawn(crate::plane::uploads::run(
                rx,
                reporter.clone(),
                in_flight,
            ))));
        }
        if let (Some((want, standing)), Some(m), Some(pc)) =
            (budget, &maintenance, self.config.plane.as_ref())
        {
            let keeper = crate::plane::lease::Keeper {
                node: self.config.node_id.clone(),
                base: pc.url.to_string(),
                http: syncer.http(),
                labels: self.config.labels.clone(),
                in_force: m.subscribe(),
                want,
                standing,
                wake: self.wake.clone(),
            };
            tasks.push(AbortOnDrop(tokio::spawn(keeper.run())));
        }
        tasks.push(AbortOnDrop(tokio::spawn(crate::plane::report::run(
            reporter,
            self.passes.subscribe(),
            report_wake,
        ))));
        if let Some(n) = self.config.plane.as_ref().and_then(|p| p.nudge.clone()) {
            tasks.push(AbortOnDrop(tokio::spawn(crate::plane::broker::run(
                n,
                format!("stead-{}", self.config.node_id.as_str()),
                syncer.clone(),
                nudge.clone(),
            ))));
        }
        let handle = api::PlaneHandle {
            status: syncer.status.clone(),
            nudge,
        };
        (Some(handle), tasks)
    }

    /// Sleeps up to `d`, waking early for `wake` (when `wakeable`) or
    /// shutdown, and saying the loop is alive on the way. Returns false on
    /// shutdown.
    async fn idle(
        &self,
        d: Duration,
        wakeable: bool,
        notifier: &Notifier,
        shutdown: &mut std::pin::Pin<&mut impl Future<Output = ()>>,
    ) -> bool {
        let until = tokio::time::Instant::now() + d;
        !matches!(
            self.idle_until(until, wakeable, notifier, shutdown).await,
            Idle::Shutdown
        )
    }

    /// Sleeps until `until`, waking early for `wake` (when `wakeable`) or
    /// shutdown, and saying the loop is alive (for the watchdog's pinger)
    /// on the way.
    async fn idle_until(
        &self,
        until: tokio::time::Instant,
        wakeable: bool,
        notifier: &Notifier,
        shutdown: &mut std::pin::Pin<&mut impl Future<Output = ()>>,
    ) -> Idle {
        let progress = self.reconciler.progress();
        loop {
            progress.beat();
            let chunk = notifier
                .ping_interval()
                .map_or(until, |p| until.min(tokio::time::Instant::now() + p));
            tokio::select! {
                () = tokio::time::sleep_until(chunk) => {
                    if chunk >= until {
                        return Idle::Elapsed;
                    }
                }
                () = self.wake.notified(), if wakeable => return Idle::Woken,
                () = shutdown.as_mut() => return Idle::Shutdown,
            }
        }
    }

    /// Stores what this start is about to act on (the plane revision
    /// held, the boot), for the crash guard: before the first pass, and
    /// before the intentions are first taken in while no pass can run.
    async fn begin_guard(&self) {
        let boot = crate::host::boot_id();
        let begun = self
            .store
            .blocking(move |s| -> Result<(), StoreError> {
                let plane = s.plane()?.0.map(|h| h.revision);
                s.change_guard(|g| g.begin(&boot, plane))
            })
            .await;
        if let Err(e) = begun {
            tracing::warn!("crash guard: {e}");
        }
    }

    async fn main_loop(
        &mut self,
        notifier: &Notifier,
        watch_tx: &tokio::sync::watch::Sender<WatchSet>,
        shutdown: &mut std::pin::Pin<&mut impl Future<Output = ()>>,
    ) -> Result<(), RunError> {
        let mut engine: Option<C::Engine> = None;
        // Follows the engine's events while it is reachable.
        let mut _events: Option<AbortOnDrop> = None;
        // Moves reload requests on while the engine is reachable.
        let mut _reloads: Option<AbortOnDrop> = None;
        let mut next_in: Option<Duration> = None;
        let mut backoff = engine_backoff(self.config.backoff_min, self.config.backoff_max);
        let mut first_pass = true;
        // Whether the crash guard's mark for this start is stored: the
        // intake while no pass can run acts on input too.
        let mut marked = false;
        let candidate = matches!(
            self.launched.as_ref().map(|l| &l.slot),
            Some(crate::model::launch::Slot::Candidate(_))
        );
        loop {
            crate::host::hang_point("loop:hang").await;
            if candidate {
                // A new version whose loop hangs: only a candidate reaches it.
                crate::host::hang_point("candidate:hang").await;
            }
            let Some(e) = &engine else {
                // Within a limit of its own: an engine whose socket takes
                // the connection and never answers is away, not a loop
                // stuck for the watchdog.
                let attempt = {
                    let _call = self.reconciler.progress().call(CONNECT_LIMIT);
                    tokio::select! {
                        r = tokio::time::timeout(CONNECT_LIMIT, self.connector.connect()) => {
                            r.unwrap_or_else(|_| Err(EngineError::no_answer("connect", CONNECT_LIMIT)))
                        }
                        () = shutdown.as_mut() => return Ok(()),
                    }
                };
                match attempt {
                    Ok(e) => {
                        _events = Some(AbortOnDrop(tokio::spawn(follow_events(
                            e.clone(),
                            self.config.node_id.to_string(),
                            self.reconciler.life_book(),
                            self.wake.clone(),
                        ))));
                        if let Some(x) = &self.executor {
                            _reloads = Some(AbortOnDrop(tokio::spawn(run_reloads(
                                e.clone(),
                                x.clone(),
                                self.reload_wake.clone(),
                                self.pass_done.clone(),
                            ))));
                        }
                        engine = Some(e);
                        backoff = engine_backoff(self.config.backoff_min, self.config.backoff_max);
                        self.set_engine(EngineStatus::Reachable);
                    }
                    Err(err) => {
                        let reason = format!("engine not reachable: {err}");
                        self.set_engine(EngineStatus::Waiting {
                            since: crate::host::clock::now_system(),
                            error: err.to_string(),
                        });
                        let delay = backoff.next().unwrap_or(self.config.backoff_max);
                        tracing::debug!("next attempt to reach the engine in {delay:?}");
                        notifier.status("waiting for the container engine");
                        // Every module the node holds reads pending, those
                        // stated while it waits too (a wake-up takes them
                        // in; the engine is tried again at the backoff's
                        // time, not sooner).
                        let until = tokio::time::Instant::now() + delay;
                        if first_pass && !marked {
                            self.begin_guard().await;
                            marked = true;
                        }
                        loop {
                            let asks = std::mem::take(&mut *self.prune.lock().expect("prune lock"));
                            for (_, reply) in asks {
                                let _ = reply.send(Err(reason.clone()));
                            }
                            let asks =
                                std::mem::take(&mut *self.lock_asks.lock().expect("lock asks"));
                            for (.., reply) in asks {
                                let _ = reply.send(Err(reason.clone()));
                            }
                            self.reconciler.no_pass(&self.store, &reason).await;
                            self.report_wake.notify_one();
                            match self.idle_until(until, true, notifier, shutdown).await {
                                Idle::Elapsed => break,
                                Idle::Woken => {}
                                Idle::Shutdown => return Ok(()),
                            }
                        }
                    }
                }
                continue;
            };
            // Everything held by the crash guard: no pass runs (the API
            // and the plane's poller still do) until an intention changes.
            match self.reconciler.hold_everything(&self.store).await {
                Ok(true) => {
                    self.status.lock().expect("status lock").quarantine =
                        self.reconciler.quarantine().clone();
                    if !self
                        .idle(self.config.heartbeat, true, notifier, shutdown)
                        .await
                    {
                        return Ok(());
                    }
                    continue;
                }
                Ok(false) => {}
                Err(e) => {
                    if first_pass && !marked {
                        self.begin_guard().await;
                        marked = true;
                    }
                    self.pass_failed(&e.to_string()).await
                }
            }
            // The first pass of a start is what the crash guard watches:
            // what it acts on is stored before it acts.
            if first_pass {
                self.begin_guard().await;
            }
            // Locks asked are taken before the pass that might replace
            // what they are for.
            let asks = std::mem::take(&mut *self.lock_asks.lock().expect("lock asks"));
            if !asks.is_empty() {
                let asks = asks
                    .into_iter()
                    .map(|(module, reason, scope, tx)| {
                        let reply: Box<dyn FnOnce(_) + Send> = Box::new(move |out| {
                            let _ = tx.send(out);
                        });
                        (module, reason, scope, reply)
                    })
                    .collect();
                self.reconciler.ask_locks(asks);
            }
            let result = tokio::select! {
                r = self.reconciler.pass(e, &self.store) => r,
                () = shutdown.as_mut() => return Ok(()),
            };
            if first_pass {
                first_pass = false;
                if let Err(e) = self
                    .store
                    .blocking(|s| s.change_guard(|g| g.passed()))
                    .await
                {
                    tracing::warn!("crash guard: {e}");
                }
            }
            let facts = {
                let mut s = self.status.lock().expect("status lock");
                s.quarantine = self.reconciler.quarantine().clone();
                s.disk = self.reconciler.disks();
                s.fetching = self
                    .reconciler
                    .room()
                    .map(|r| r.fetching())
                    .unwrap_or_default();
                s.fetching.ahead = self.reconciler.ahead();
                s.fetched = self.reconciler.room().and_then(|r| r.last());
                // The engine, and the free disk where an update lands (the
                // engine's images, else the agent's data).
                let mut facts = s.facts.clone();
                facts.engine = Some(e.flavour().kind().to_string());
                facts.engine_version = Some(e.engine_version()).filter(|v| !v.is_empty());
                facts.disk_free = ["images", "store"].iter().find_map(|role| {
                    s.disk
                        .filesystems
                        .iter()
                        .find(|f| f.roles.iter().any(|r| r == role))
                        .map(|f| f.free_bytes)
                });
                s.facts = facts.clone();
                facts
            };
            // Kept when the engine or its version moved (not for the free
            // disk of every pass).
            let class_moved = {
                let was = self.facts.borrow();
                was.engine != facts.engine || was.engine_version != facts.engine_version
            };
            self.facts.send_if_modified(|f| {
                let moved = *f != facts;
                *f = facts.clone();
                moved
            });
            if class_moved {
                if let Err(e) = self.store.blocking(move |s| s.keep_facts(&facts)).await {
                    tracing::warn!("cannot keep the device's facts: {e}");
                }
            }
            match result {
                Ok(report) => {
                    let recovered = {
                        let mut s = self.status.lock().expect("status lock");
                        s.last_pass = Some((crate::host::clock::now_system(), report.duration));
                        s.passes += 1;
                        s.other_agent = report.other_agent.clone();
                        s.failing.take()
                    };
                    self.reconciler.metrics().pass_outcome(true);
                    if let Some((since, _)) = recovered {
                        let secs = since.elapsed().map_or(0, |d| d.as_secs());
                        let msg = format!("passes complete again, after failing for {secs}s");
                        tracing::info!("{msg}");
                        self.say_engine(msg);
                    }
                    tracing::debug!(modules = report.modules.len(), duration = ?report.duration, "pass done");
                    notifier.status(&format!(
                        "{} modules; last pass {} ms",
                        report.modules.len(),
                        report.duration.as_millis()
                    ));
                    next_in = report.next_in;
                    let set = self.watch_set(report.watched_inputs);
                    watch_tx.send_if_modified(|w| {
                        let changed = *w != set;
                        *w = set;
                        changed
                    });
                }
                Err(PassError::Engine(err)) if err.is_unreachable() => {
                    engine = None;
                    _events = None;
                    _reloads = None;
                    // What the last pass saw is no longer known: every
                    // module reads pending now (before the node says the
                    // engine waits), not once the engine is tried again
                    // (an engine that takes the connection and answers
                    // nothing takes the connect's whole limit).
                    self.reconciler.metrics().pass_outcome(false);
                    self.reconciler
                        .no_pass(&self.store, &format!("engine not reachable: {err}"))
                        .await;
                    self.report_wake.notify_one();
                    self.set_engine(EngineStatus::Waiting {
                        since: crate::host::clock::now_system(),
                        error: err.to_string(),
                    });
                    continue;
                }
                Err(err) => self.pass_failed(&err.to_string()).await,
            }
            // Asks to prune are answered after a pass.
            let asks = std::mem::take(&mut *self.prune.lock().expect("prune lock"));
            for (dry_run, reply) in asks {
                let out = self.reconciler.prune(e, &self.store, dry_run).await;
                let _ = reply.send(out.map_err(|e| e.to_string()));
            }
            // What the pass saw is what a reload measures.
            self.pass_done.notify_one();
            self.passes.send_modify(|n| *n += 1);
            // The heartbeat, or sooner when a container's settle window ends
            // (so it reads converged when it is) or a back-off does.
            let next = next_in.map_or(self.config.heartbeat, |s| s.min(self.config.heartbeat));
            if !self.idle(next, true, notifier, shutdown).await {
                return Ok(());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_is_capped_and_never_ends() {
        let min = Duration::from_millis(100);
        let max = Duration::from_secs(5);
        let delays: Vec<Duration> = engine_backoff(min, max).take(200).collect();
        assert_eq!(delays.len(), 200, "never gives up");
        assert!(delays.iter().all(|d| *d >= min && *d <= max), "{delays:?}");
        assert!(delays[0] < Duration::from_millis(201));
        assert!(delays[150] >= max / 2, "reaches the cap: {:?}", delays[150]);
        let distinct: std::collections::BTreeSet<_> = delays[100..].iter().collect();
        assert!(distinct.len() > 10, "jittered");
    }
}
