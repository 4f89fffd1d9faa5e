//! The executor: moves every open reload request one step at a time, each
//! step written to the request before it acts, so an agent killed anywhere
//! resumes where it was.
//!
//! - requested → landing: the attempt begins (only a request this agent
//!   wrote is acted on).
//! - landing: per module, the newest compatible version is resolved (tags,
//!   a HEAD for its digest, the image config for its floor, read before any
//!   layer), then pulled by digest. A floor above this agent declines.
//! - activating: `restart_requested_at` is stamped FIRST; then the landed
//!   version becomes the module's desired image and the standing comparison
//!   makes its one recreate. What runs is measured: done once the container
//!   runs the landed image ID and held for the health window; a new version
//!   that crash-loops or turns unhealthy is rolled back (its digest skipped
//!   by the auto lane from then on).
//! - faulted: re-armed when its backoff is due.
//!
//! Requests move in lanes, one per registry (a request of every module has
//! a lane of its own): a lane is a task that steps its requests in order,
//! so a slow registry holds only the requests for its own modules, and one
//! module's steps never interleave. A module's resolve has a time budget
//! of its own ([`RESOLVE_BUDGET`]); past it the request faults.
//!
//! Every failure is classified in one place ([`crate::reload::classify`]).

use crate::model::sort::Insert as _;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::{Notify, watch};

use crate::engine::Engine;
use crate::model::intention::Intention;
use crate::model::names::ModuleName;
use crate::model::reference::Reference;
use crate::model::reload::{
    Activation, Item, Landed, Request, Status, TransitionError, UpdateState,
};
use crate::model::version::TagVersion;
use crate::net::http::Http;
use crate::registry::auth::Credentials;
use crate::registry::client::{Platform, Registries};
use crate::reload::classify::{Failure, Verdict, classify};
use crate::status::{Board, ModuleState, ModuleStatus};
use crate::store::{Store, StoreError};

/// The label an image declares the oldest agent able to run it with.
pub const FLOOR_LABEL: &str = "io.stead.min-agent-version";

/// How long an activated module may take to run its landed image before
/// the attempt counts as faulted.
const ACTIVATION_LIMIT: Duration = Duration::from_secs(600);

/// How long one module's resolve (its tag list, the HEADs of its
/// candidates, the image config) may take at its registry before the
/// request faults and is tried again with backoff.
pub const RESOLVE_BUDGET: Duration = Duration::from_secs(300);

pub use crate::model::reload::{AGENT_VERSION, AUTO_UPDATE};

/// A failure point for tests (`STEAD_CRASH_AT=reload:<point>`).
fn crash_point(point: &str) {
    crate::host::crash_point(&format!("reload:{point}"));
}

/// What the executor needs that the config says.
#[derive(Clone, Debug)]
pub struct Settings {
    /// The registry credentials file.
    pub registry_auth: Option<std::path::PathBuf>,
    /// An extra CA bundle for registries.
    pub registry_ca: Option<std::path::PathBuf>,
    /// Registries that may be reached over plain HTTP.
    pub insecure_registries: Vec<String>,
    /// The base of a faulted request's backoff.
    pub retry_interval: Duration,
}

/// The executor.
pub struct Executor {
    store: Arc<Store>,
    board: Arc<Mutex<Board>>,
    /// Woken when a landed version is to be acted on by a pass.
    wake_pass: Arc<Notify>,
    settings: Settings,
    agent: u64,
    version: semver::Version,
    platform: Platform,
    /// Set to make the auto lane look now, whatever its intervals.
    pub look_now: Arc<std::sync::atomic::AtomicBool>,
    /// Where the requests by status are counted.
    metrics: Option<Arc<crate::status::metrics::Metrics>>,
    /// The lanes at work, by key, with the requests each moves.
    lanes: Mutex<BTreeMap<String, Lane>>,
    /// Notified when a lane has moved its requests (the run that follows
    /// sees what they became).
    pub lane_done: Arc<Notify>,
    /// Whether a pull fits, checked before it starts.
    room: Option<Arc<crate::registry::room::Room>>,
    /// The image policy in force, when a plane says one.
    image_policy: Option<watch::Receiver<crate::model::image_policy::Known>>,
}

/// Stops every lane when dropped (the engine was lost: what the lanes
/// did is in the store, and the next run resumes it).
pub struct LanesStop(Arc<Executor>);

impl Drop for LanesStop {
    fn drop(&mut self) {
        if let Ok(mut lanes) = self.0.lanes.lock() {
            for (_, lane) in std::mem::take(&mut *lanes) {
                lane.task.abort();
            }
        }
    }
}

/// A lane's task and the requests it was given.
struct Lane {
    task: tokio::task::JoinHandle<()>,
    requests: Vec<u64>,
}

/// The lane a request moves in (pure): the registry of the image its
/// module names; a request of every module moves in a lane of its own, as
/// does one whose module names no registry image (nothing to wait for).
fn lane_key(module: Option<&str>, registry: Option<&str>, id: u64) -> String {
    match (module, registry) {
        (None, _) => "*".into(),
        (Some(_), Some(registry)) => format!("registry {registry}"),
        (Some(_), None) => format!("request {id}"),
    }
}

impl Executor {
    /// An executor over this store, reading what runs from this board.
    pub fn new(
        store: Arc<Store>,
        board: Arc<Mutex<Board>>,
        wake_pass: Arc<Notify>,
        settings: Settings,
        agent: u64,
    ) -> Executor {
        Executor {
            store,
            board,
            wake_pass,
            settings,
            agent,
            version: semver::Version::parse(env!("CARGO_PKG_VERSION"))
                .expect("the package version is semver"),
            platform: Platform::this(),
            look_now: Arc::default(),
            metrics: None,
            lanes: Mutex::default(),
            lane_done: Arc::default(),
            room: None,
            image_policy: None,
        }
    }

    /// Counts the requests by status into these metrics after each run.
    pub fn with_metrics(mut self, metrics: Arc<crate::status::metrics::Metrics>) -> Executor {
        self.metrics = Some(metrics);
        self
    }

    /// Checks each landing's pull for room with this first.
    pub fn with_room(mut self, room: Option<Arc<crate::registry::room::Room>>) -> Executor {
        self.room = room;
        self
    }

    /// Lands only versions signed as the image policy `policy` says.
    pub fn with_image_policy(
        mut self,
        policy: Option<watch::Receiver<crate::model::image_policy::Known>>,
    ) -> Executor {
        self.image_policy = policy;
        self
    }

    /// Sets every open request moving, each in its registry's lane (a
    /// lane still at work keeps its requests). Says when to look again:
    /// soon while one is open and not faulted, when the first faulted one
    /// is due, or `None` when none is open.
    pub async fn run<E: Engine>(
        self: &Arc<Self>,
        engine: &E,
        now: u64,
    ) -> Result<Option<Duration>, StoreError> {
        let requests = self.blocking(|s| s.reloads()).await?;
        if let Some(m) = &self.metrics {
            m.reloads(requests.iter().map(|r| r.status()));
        }
        let interval = self.settings.retry_interval.as_secs().max(1);
        let mut next: Option<Duration> = None;
        let mut sooner = |d: Duration| next = Some(next.map_or(d, |n| n.min(d)));
        let mut open = Vec::new();
        for r in requests {
            if r.status().is_final() {
                continue;
            }
            if let Err(e) = r.check_ours(self.agent) {
                tracing::warn!("{e}");
                continue;
            }
            match r.due_at(interval) {
                Some(due) => sooner(Duration::from_secs(due.saturating_sub(now).max(1))),
                None => sooner(Duration::from_secs(2)),
            }
            open.push(r);
        }
        if open.is_empty() {
            return Ok(next);
        }
        let (entries, _) = self.modules().await?;
        let registry_of = |m: &str| {
            let i = entries.get(&ModuleName::try_from(m).ok()?)?;
            Reference::parse(&i.image).ok().map(|r| r.registry)
        };
        // In id order: a lane moves its requests as they were filed.
        let mut by_lane: BTreeMap<String, Vec<u64>> = BTreeMap::new();
        for r in &open {
            let registry = r.module.as_deref().and_then(registry_of);
            let key = lane_key(r.module.as_deref(), registry.as_deref(), r.id);
            by_lane.entry(key).or_default().push(r.id);
        }
        let mut lanes = self.lanes.lock().unwrap_or_else(PoisonError::into_inner);
        lanes.retain(|_, l| !l.task.is_finished());
        // A request a lane still moves is left to it (even if its module
        // now names another registry).
        let busy: BTreeSet<u64> = lanes.values().flat_map(|l| l.requests.clone()).into_set();
        for (key, ids) in by_lane {
            if lanes.contains_key(&key) {
                continue;
            }
            let ids: Vec<u64> = ids.into_iter().filter(|id| !busy.contains(id)).collect();
            if ids.is_empty() {
                continue;
            }
            let (me, engine, given) = (self.clone(), engine.clone(), ids.clone());
            let task = tokio::spawn(async move { me.move_lane(&engine, &given, now).await });
            lanes.insert(
                key,
                Lane {
                    task,
                    requests: ids,
                },
            );
        }
        Ok(next)
    }

    /// A guard that stops every lane when it is dropped.
    pub fn lanes_stop(self: &Arc<Self>) -> LanesStop {
        LanesStop(self.clone())
    }

    /// One lane's work: each of its requests stepped until it rests, in
    /// order, each read afresh from the store first.
    async fn move_lane<E: Engine>(&self, engine: &E, ids: &[u64], now: u64) {
        let started = Instant::now();
        for &id in ids {
            let now = now.saturating_add(started.elapsed().as_secs());
            let mut r = match self.blocking(move |s| s.reload(id)).await {
                Ok(Some(r)) if !r.status().is_final() => r,
                Ok(_) => continue,
                Err(e) => {
                    tracing::warn!("reloads: {e}");
                    break;
                }
            };
            for _ in 0..8 {
                let before = r.clone();
                match self.step(engine, &mut r, now).await {
                    Ok(()) => {}
                    Err(StepError::Store(e)) => {
                        tracing::warn!("reload {id}: {e}");
                        break;
                    }
                    // Left as stored: see [`StepError::Breach`].
                    Err(e @ StepError::Breach(_)) => {
                        tracing::error!("reload {id}: {e}");
                        break;
                    }
                }
                if r == before {
                    break;
                }
            }
        }
        self.lane_done.notify_one();
    }

    async fn step<E: Engine>(
        &self,
        engine: &E,
        r: &mut Request,
        now: u64,
    ) -> Result<(), StepError> {
        if matches!(
            r.status(),
            Status::Landing | Status::Activating | Status::Faulted
        ) {
            let (entries, _) = self.modules().await?;
            let current = |m: &str| {
                let i = entries.get(&ModuleName::try_from(m).ok()?)?;
                let u = i.update.as_ref()?;
                Some((i.image.clone(), u.range.as_str().to_string()))
            };
            if r.supersede(current, now) {
                if r.status() == Status::Faulted {
                    // Not re-armed against an intention edited since.
                    r.fail(r.failures(), now)?;
                }
                self.put(r).await?;
            }
        }
        match r.status() {
            Status::Requested => {
                r.begin_landing(now)?;
                self.put(r).await?;
                crash_point("after-landing-begins");
            }
            Status::Landing => self.land(engine, r, now).await?,
            Status::Activating => self.activate(r, now).await?,
            Status::Faulted => {
                let interval = self.settings.retry_interval.as_secs().max(1);
                if r.due_at(interval).is_some_and(|due| due <= now) {
                    r.rearm(now)?;
                    self.put(r).await?;
                }
            }
            Status::Done | Status::Failed => {}
        }
        Ok(())
    }

    /// Resolves and pulls every module of the request, one write per step.
    async fn land<E: Engine>(
        &self,
        engine: &E,
        r: &mut Request,
        now: u64,
    ) -> Result<(), StepError> {
        let (entries, updates) = self.modules().await?;
        if r.items.is_empty() {
            r.items = self.items_for(r, &entries, &updates);
            if r.items.is_empty() {
                r.finish(Some("no module has an [update] section".into()), now)?;
                return Ok(self.put(r).await?);
            }
            r.note(now, format!("{} module(s) to look at", r.items.len()));
            self.put(r).await?;
        }
        // The longest delay a registry asked for in this run.
        let mut asked: Option<Duration> = None;
        let registries = match self.registries() {
            Ok(c) => Some(c),
            Err(e) => {
                for item in r
                    .items
                    .iter_mut()
                    .filter(|i| i.failure.is_none() && !i.landed)
                {
                    fail(item, &Failure::Internal(e.clone()));
                }
                None
            }
        };
        if let Some(registries) = registries {
            for k in 0..r.items.len() {
                let item = &r.items[k];
                if item.failure.is_some() || item.landed {
                    continue;
                }
                let Some(i) = ModuleName::try_from(item.module.as_str())
                    .ok()
                    .and_then(|m| entries.get(&m))
                else {
                    let item = &mut r.items[k];
                    item.failure = Some(format!("no module {:?} any more", item.module));
                    continue;
                };
                let i = i.clone();
                if r.items[k].target_digest.is_none() {
                    let range = i.update.as_ref().map(|u| u.range.as_str().to_string());
                    let skipped: Vec<String> = updates
                        .get(&i.name)
                        .map(|u| {
                            let failed = u.failed.iter().filter(|f| {
                                u.failed_under(
                                    &f.digest,
                                    &i.image,
                                    range.as_deref().unwrap_or(""),
                                    AGENT_VERSION,
                                )
                            });
                            let failed = failed.map(|f| f.digest.clone());
                            u.skipped.iter().cloned().chain(failed).collect()
                        })
                        .unwrap_or_default();
                    let auto = r.requested_by == AUTO_UPDATE;
                    let registry = r.items[k].registry.clone().unwrap_or_default();
                    let resolved = tokio::time::timeout(
                        RESOLVE_BUDGET,
                        self.resolve(&registries, &i, &mut r.items[k], auto, &skipped),
                    )
                    .await
                    .unwrap_or_else(|_| {
                        Err(Failure::Registry(
                            crate::registry::error::RegistryError::Timeout {
                                registry,
                                what: format!("resolving {}", i.name),
                                limit: RESOLVE_BUDGET,
                            },
                        ))
                    });
                    if let Err(f) = resolved {
                        asked = asked.max(fail(&mut r.items[k], &f));
                    }
                    let line = format!("{}: {}", r.items[k].module, r.items[k].decision);
                    r.note(now, line);
                    self.put(r).await?;
                    crash_point("after-resolve");
                    continue;
                }
                // Pull by digest.
                let reference = Reference::parse(&i.image)
                    .map(|rf| {
                        rf.with_digest(r.items[k].target_digest.as_deref().unwrap_or(""))
                            .to_string()
                    })
                    .unwrap_or_default();
                let auth = registries.credentials().pull_auth(&reference);
                // Refused before a layer is fetched when it would not fit.
                use crate::registry::room::{NotPulled, pull_checked};
                let pulled = pull_checked(self.room.as_deref(), engine, &reference, auth)
                    .await
                    .map_err(|e| match e {
                        NotPulled::NoRoom(n) => Failure::NoRoom(n.to_string()),
                        NotPulled::Engine(e) => Failure::engine(&e),
                        NotPulled::Link(crate::registry::fetch::FetchError::Registry(e)) => {
                            Failure::Registry(e)
                        }
                        NotPulled::Link(e) => Failure::Internal(e.to_string()),
                    });
                match pulled {
                    Ok(layers) => {
                        self.note_pulled(engine, &reference, layers).await;
                        let item = &mut r.items[k];
                        item.landed = true;
                        let line = format!("{}: landed {reference}", item.module);
                        r.note(now, line);
                    }
                    Err(f) => asked = asked.max(fail(&mut r.items[k], &f)),
                }
                self.put(r).await?;
                crash_point("after-pull");
            }
        }
        if r.items.iter().any(|i| i.failure.is_none() && !i.landed) {
            return Ok(());
        }
        if let Some(status) = r.outcome_of_failures() {
            let not_before = asked.map(|d| now + d.as_secs());
            let failures = r.failures();
            end_with(r, status, failures, not_before, now)?;
            return Ok(self.put(r).await?);
        }
        if r.items.iter().all(|i| !needs_activation(i)) {
            r.finish(
                Some("every module already runs its newest compatible version".into()),
                now,
            )?;
        } else {
            r.begin_activating(
                Activation::Restart,
                "one restart per module: its container is recreated from the landed image".into(),
                now,
            )?;
        }
        Ok(self.put(r).await?)
    }

    /// Finds what `item` is to run: the newest compatible tag, its digest
    /// and its config (floor, health check, image ID), without a layer.
    async fn resolve(
        &self,
        registries: &Registries,
        i: &Intention,
        item: &mut Item,
        auto: bool,
        skipped: &[String],
    ) -> Result<(), Failure> {
        let Some(u) = &i.update else {
            return Err(Failure::Internal(format!(
                "{} has no [update] section",
                i.name
            )));
        };
        let base = Reference::parse(&i.image)
            .map_err(|m| Failure::Registry(crate::registry::error::RegistryError::Reference(m)))?;
        let running = item
            .running_version
            .as_deref()
            .and_then(TagVersion::parse)
            .or_else(|| base.tag.as_deref().and_then(TagVersion::parse))
            .ok_or_else(|| Failure::Internal(format!("{} runs no version tag", i.name)))?;
        let found = registries.newest(&base, &u.range, &running, 8).await?;
        // The newest not skipped (a digest is known only by asking).
        let mut picked = None;
        for c in found.iter().take(8) {
            let head = registries.head(&base.with_tag(&c.tag)).await?;
            // The auto lane never picks again what was rolled back or
            // declined; an explicit request is attended.
            if auto && skipped.contains(&head.digest) {
                continue;
            }
            picked = Some((c.clone(), head));
            break;
        }
        let Some((version, head)) = picked else {
            item.decision = format!("nothing within {} is published", u.range);
            item.landed = true;
            item.target_image = item.running_image.clone();
            return Ok(());
        };
        // Asked as the candidate's tag, so that what fails (no image for
        // this platform) names the version, not the one that runs.
        let config = registries
            .config(&base.with_tag(&version.tag), &head.digest, &self.platform)
            .await?;
        item.found_version = Some(version.tag.clone());
        item.found_digest = Some(head.digest.clone());
        self.signed(registries, &base.with_tag(&version.tag), &head.digest, item)
            .await?;
        // A registry's text: clipped before it reaches the store.
        item.found_floor = config
            .labels
            .get(FLOOR_LABEL)
            .map(|f| crate::model::text::clip(f, MAX_FLOOR).into_owned());
        item.healthcheck = config.healthcheck;
        if let Some(floor) = item.found_floor.clone() {
            let verdict = floor_verdict(&floor, &self.version);
            if verdict == FloorVerdict::Empty {
                item.found_floor = None;
                let (m, text) = (
                    i.name.to_string(),
                    format!(
                        "{}: {} declares an empty {FLOOR_LABEL}; ignored",
                        i.name, version.tag
                    ),
                );
                self.blocking(move |s| {
                    s.append_event(Some(&m), crate::store::EventKind::Intention, text)
                })
                .await
                .map_err(|e| Failure::Internal(e.to_string()))?;
            }
            if verdict == FloorVerdict::Above {
                // Declined once is declined for this agent: the failed
                // request keeps the lane from asking again until the
                // agent, the image or the range changes.
                item.decision = format!(
                    "declined — {} needs stead >= {floor}; running {}",
                    version.tag, self.version
                );
                return Err(Failure::Floor {
                    version: version.tag,
                    floor: floor.clone(),
                    running: self.version.to_string(),
                });
            }
        }
        item.target_version = Some(version.tag.clone());
        item.target_digest = Some(head.digest.clone());
        item.target_image = Some(config.id.clone());
        if item.running_image.as_deref() == Some(config.id.as_str()) {
            item.decision = format!("up to date: runs {}", version.tag);
            item.landed = true;
        } else {
            item.decision = format!(
                "update {} → {}",
                item.running_version.as_deref().unwrap_or("?"),
                version.tag
            );
        }
        Ok(())
    }

    /// Whether the version found (`candidate`, its manifest `digest`) is
    /// signed as the image policy asks: a refusal is decided, and says
    /// why; a registry that does not answer is not.
    async fn signed(
        &self,
        registries: &Registries,
        candidate: &Reference,
        digest: &str,
        item: &mut Item,
    ) -> Result<(), Failure> {
        use crate::model::image_policy::Known;
        use crate::registry::signed::{Unchecked, check_at};
        let policy = match self.image_policy.as_ref().map(|p| p.borrow().clone()) {
            None => return Ok(()),
            Some(Known::NotYet) => {
                return Err(Failure::Internal(
                    "the image policy is not known yet (the plane's documents are being read)"
                        .into(),
                ));
            }
            Some(Known::Is(p)) => p,
        };
        if !policy.covers(candidate) {
            return Ok(());
        }
        match check_at(registries, &self.platform, &policy, candidate, digest).await {
            Ok(_) => Ok(()),
            Err(Unchecked::Unreachable(e)) => Err(Failure::Registry(e)),
            Err(Unchecked::Refused { digest, why }) => {
                let said = format!("image {candidate} ({digest}): {why}");
                item.decision = format!("refused — {said}");
                Err(Failure::Unsigned(said))
            }
        }
    }

    /// Activates the landed versions (the one restart) and measures them.
    async fn activate(&self, r: &mut Request, now: u64) -> Result<(), StepError> {
        // The stamp first: a resumed executor does not ask again.
        if r.stamp_restart(now)? {
            r.note(
                now,
                "restart requested: the landed versions become the desired images",
            );
            self.put(r).await?;
            crash_point("after-restart-stamp");
        }
        let (entries, _) = self.modules().await?;
        // Idempotent: the landed record says the target; the standing
        // comparison recreates once, whoever asks how often.
        for item in r.items.iter().filter(|i| needs_activation(i)) {
            let Ok(m) = ModuleName::try_from(item.module.as_str()) else {
                continue;
            };
            let Some(i) = entries.get(&m) else { continue };
            let landed = Landed {
                version: item.target_version.clone().unwrap_or_default(),
                digest: item.target_digest.clone().unwrap_or_default(),
                image_id: item.target_image.clone().unwrap_or_default(),
                reference: Reference::parse(&i.image)
                    .map(|rf| {
                        rf.with_digest(item.target_digest.as_deref().unwrap_or(""))
                            .to_string()
                    })
                    .unwrap_or_default(),
                request: r.id,
                // What the item was resolved against, not what the
                // intention says now: an edit made since (seen here before
                // the next step supersedes the request) must not be
                // stamped as what this version stands for.
                // (An item of a request filed before it said so, from an
                // older store, is resolved against the intention as it is.)
                from_image: if item.image.is_empty() {
                    i.image.clone()
                } else {
                    item.image.clone()
                },
                from_range: if item.image.is_empty() {
                    i.update
                        .as_ref()
                        .map(|u| u.range.as_str().to_string())
                        .unwrap_or_default()
                } else {
                    item.range.clone()
                },
                previous_image: item.running_image.clone(),
            };
            let id = r.id;
            let changed = self.blocking(move |s| s.land_for(id, &m, landed)).await?;
            if changed {
                self.wake_pass.notify_one();
            }
        }
        crash_point("after-landed-written");
        // Measure what runs.
        let board = self
            .board
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let mut changed = false;
        let mut rolled_back = Vec::new();
        let mut stalled = Vec::new();
        let mut deferred = false;
        let asked_at = r.restart_requested_at().unwrap_or(now);
        for item in r.items.iter_mut().filter(|i| needs_activation(i)) {
            let known = ModuleName::try_from(item.module.as_str())
                .ok()
                .is_some_and(|m| entries.contains_key(&m));
            if !known {
                item.failure = Some("the module was removed while it was activated".into());
                item.transient = false;
                changed = true;
                continue;
            }
            let st = match measure(item, board.get(&item.module), now, asked_at) {
                Measure::Runs(st) => st,
                Measure::Wait => continue,
                Measure::Deferred => {
                    deferred = true;
                    continue;
                }
                Measure::Stalled => {
                    stalled.push(item.module.clone());
                    continue;
                }
                Measure::NeverRan(why) => {
                    // A decided answer: the engine was asked for the new
                    // version and it does not run. Asking again stops the
                    // running service again for nothing.
                    rolled_back.push(rolls_back(item, &why));
                    changed = true;
                    continue;
                }
            };
            let window = ModuleName::try_from(item.module.as_str())
                .ok()
                .and_then(|m| entries.get(&m))
                .and_then(|i| i.update.as_ref())
                .map_or(Duration::from_secs(120), |u| u.health_window);
            if st.image_id != item.target_image {
                continue;
            }
            match settle(item, st, now, window) {
                Settle::Unstable(why) => {
                    rolled_back.push(rolls_back(item, why));
                    changed = true;
                }
                Settle::Changed => changed = true,
                Settle::Same => {}
            }
        }
        // A recreate waiting for a maintenance window: the limit on
        // running the landed version counts from when it may.
        if deferred && r.restart_waits(now) {
            changed = true;
        }
        for item in &rolled_back {
            if let Err(e) = self.roll_back(item).await {
                let why = format!("the rollback of {} failed: {e}", item.module);
                r.fault_with(why, None, now)?;
                return Ok(self.put(r).await?);
            }
            self.wake_pass.notify_one();
        }
        if !stalled.is_empty() && rolled_back.is_empty() {
            // Not running what was landed, long after it was asked: tried
            // again as a new attempt (with its own one restart).
            let why = format!(
                "{} not running the landed image {} min after the restart was asked",
                stalled.join(", "),
                ACTIVATION_LIMIT.as_secs() / 60
            );
            r.fault_with(why, None, now)?;
            return Ok(self.put(r).await?);
        }
        if rolled_back.is_empty() && r.items.iter().any(|i| i.failure.is_some()) {
            if let Some(status) = r.outcome_of_failures() {
                let failures = r.failures();
                end_with(r, status, failures, None, now)?;
                return Ok(self.put(r).await?);
            }
        }
        if !rolled_back.is_empty() {
            let names: Vec<String> = rolled_back
                .iter()
                .filter_map(|i| i.failure.clone().map(|f| format!("{}: {f}", i.module)))
                .collect();
            r.fail(names.join("; "), now)?;
            return Ok(self.put(r).await?);
        }
        if r.items
            .iter()
            .filter(|i| needs_activation(i))
            .all(|i| i.decision == "held")
        {
            r.finish(None, now)?;
            changed = true;
        }
        if changed {
            self.put(r).await?;
        }
        Ok(())
    }

    /// Puts the module back on the image it ran before, and skips the
    /// digest that failed from then on (for the auto lane).
    async fn roll_back(&self, item: &Item) -> Result<(), StoreError> {
        let m = ModuleName::try_from(item.module.as_str()).map_err(|e| StoreError::Corrupt {
            table: "reloads",
            key: item.module.clone(),
            message: e.0,
        })?;
        let item = item.clone();
        self.blocking(move |s| {
            s.modify_update(&m, |u| {
                if let Some(d) = &item.target_digest {
                    if !u.skipped.contains(d) {
                        u.skipped.push(d.clone());
                    }
                }
                let Some(landed) = u.landed.as_mut() else {
                    return;
                };
                match &item.running_image {
                    Some(previous) => {
                        landed.version = item.running_version.clone().unwrap_or_default();
                        landed.digest = String::new();
                        landed.image_id = previous.clone();
                        landed.reference = previous.clone();
                        landed.previous_image = None;
                    }
                    None => u.landed = None,
                }
            })
        })
        .await
    }

    /// The items of a request: the module it names, or every module with an
    /// `[update]` section.
    fn items_for(
        &self,
        r: &Request,
        entries: &BTreeMap<ModuleName, Intention>,
        updates: &BTreeMap<ModuleName, UpdateState>,
    ) -> Vec<Item> {
        let board = self
            .board
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let mut out = Vec::new();
        for (name, i) in entries {
            if r.module.as_deref().is_some_and(|m| m != name.as_str()) {
                continue;
            }
            let mut item = Item {
                module: name.to_string(),
                ..Item::default()
            };
            let Some(u) = &i.update else {
                if r.module.is_some() {
                    item.failure = Some(format!("{name} has no [update] section"));
                    out.push(item);
                }
                continue;
            };
            let landed = updates
                .get(name)
                .and_then(|s| s.landed.as_ref())
                .filter(|l| l.stands_for(&i.image, u.range.as_str()));
            item.running_version = match landed {
                Some(l) => Some(l.version.clone()),
                None => Reference::parse(&i.image).ok().and_then(|r| r.tag),
            };
            item.image = i.image.clone();
            item.range = u.range.as_str().to_string();
            item.running_image = board.get(name.as_str()).and_then(|s| s.image_id.clone());
            item.registry = Reference::parse(&i.image).ok().map(|r| r.registry);
            item.decision = "looking".into();
            out.push(item);
        }
        if out.is_empty() {
            if let Some(m) = &r.module {
                out.push(Item {
                    module: m.clone(),
                    failure: Some(format!("no module {m:?}")),
                    ..Item::default()
                });
            }
        }
        out
    }

    /// The store.
    pub(super) fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// This agent's id.
    pub(super) fn agent(&self) -> u64 {
        self.agent
    }

    /// Every module's effective intention, and every update state.
    pub(super) async fn modules(
        &self,
    ) -> Result<
        (
            BTreeMap<ModuleName, Intention>,
            BTreeMap<ModuleName, UpdateState>,
        ),
        StoreError,
    > {
        self.blocking(|s| {
            // Collected, not built by insertion (model::sort): a tree built
            // in bulk has full nodes, and this one holds every module's
            // intention.
            let entries = s
                .entries()?
                .into_iter()
                .filter_map(|(k, e)| e.effective().map(|i| (k, Arc::unwrap_or_clone(i))))
                .collect();
            Ok((entries, s.updates()?))
        })
        .await
    }

    /// Notes an image this node pulled (only those are collected), with
    /// its layers for the next pull's room. What cannot be noted is said
    /// and left: the image then counts as not pulled here, and stays.
    async fn note_pulled<E: Engine>(
        &self,
        engine: &E,
        reference: &str,
        layers: Vec<crate::model::disk::Layer>,
    ) {
        let id = match engine.list_images().await {
            Ok(list) => crate::engine::image::Images::new(list)
                .find(reference)
                .map(|i| i.id.clone()),
            Err(e) => {
                tracing::warn!("the image {reference} pulled is not noted: {e}");
                return;
            }
        };
        let Some(id) = id else { return };
        if let Some(room) = &self.room {
            room.present
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .extend(layers.iter().map(|(d, _)| d.clone()));
        }
        let p = crate::store::images::Pulled {
            reference: reference.to_string(),
            at: crate::host::clock::now(),
            layers,
        };
        if let Err(e) = self.blocking(move |s| s.note_pulled(&[(id, p)])).await {
            tracing::warn!("the image {reference} pulled is not noted: {e}");
        }
    }

    /// The registry client for one attempt: the credentials file is read
    /// fresh (it may have been rotated).
    pub(super) fn registries(&self) -> Result<Registries, String> {
        let credentials = match &self.settings.registry_auth {
            Some(p) => Credentials::load(p)?,
            None => Credentials::default(),
        };
        let http = Http::at_floor(
            self.settings.registry_ca.as_deref(),
            None,
            crate::host::clock::process_floor(),
        )?;
        Ok(Registries::new(
            http,
            credentials,
            self.settings.insecure_registries.clone(),
        ))
    }

    /// Writes the request; when it was ended meanwhile (cancelled through
    /// the API), takes what is stored instead, so nothing more is done.
    async fn put(&self, r: &mut Request) -> Result<(), StoreError> {
        let mine = r.clone();
        if let Some(stored) = self.blocking(move |s| s.put_reload(&mine)).await? {
            *r = stored;
        }
        Ok(())
    }

    async fn blocking<T: Send + 'static>(&self, f: impl FnOnce(&Store) -> T + Send + 'static) -> T {
        self.store.blocking(f).await
    }
}

/// Why a step stopped.
#[derive(Debug, thiserror::Error)]
enum StepError {
    /// The store failed: the step is tried again on the next run.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A guard refused a move the executor asked for: the executor's
    /// rule and the request's guards disagree. The move is not made and
    /// nothing of this step is written: the request stays as stored, to
    /// be read afresh on the next run. Safer than marking it faulted: a
    /// fault is a move too (refused from a final state, which must never
    /// reopen), and a re-arm would begin an attempt with its own restart.
    #[error("invariant breach, the request is left as stored: {0}")]
    Breach(#[from] TransitionError),
}

/// Ends `r` as `status` says (from [`Request::outcome_of_failures`]):
/// faulted (not re-armed before `not_before`) or failed.
fn end_with(
    r: &mut Request,
    status: Status,
    failure: String,
    not_before: Option<u64>,
    now: u64,
) -> Result<(), TransitionError> {
    match status {
        Status::Faulted => r.fault_with(failure, not_before, now),
        _ => r.fail(failure, now),
    }
}

/// Marks an item failed as rolled back, naming both versions (a decided
/// answer); returns it for the rollback.
fn rolls_back(item: &mut Item, why: &str) -> Item {
    item.failure = Some(format!(
        "{} {why}; rolled back to {}",
        item.target_version.as_deref().unwrap_or("?"),
        item.running_version
            .as_deref()
            .unwrap_or("the previous image")
    ));
    item.transient = false;
    item.clone()
}

/// The longest floor label kept (a version is far shorter; a longer one
/// is unreadable, and said clipped).
const MAX_FLOOR: usize = 128;

/// What an image's floor label says for this agent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum FloorVerdict {
    /// Met: not above this agent.
    Met,
    /// Above this agent, or unreadable (a floor it cannot know it meets).
    Above,
    /// Empty: no floor (ignored, with an event).
    Empty,
}

/// Compares a floor with this agent's version as SemVer says: a leading
/// `v` is allowed, build metadata is ignored (pure).
fn floor_verdict(floor: &str, running: &semver::Version) -> FloorVerdict {
    let floor = floor.trim();
    if floor.is_empty() {
        return FloorVerdict::Empty;
    }
    match semver::Version::parse(floor.strip_prefix('v').unwrap_or(floor)) {
        // Precedence, as SemVer orders versions: build metadata ignored
        // (`Version`'s own `Ord` counts it).
        Ok(f) if f.cmp_precedence(running) == std::cmp::Ordering::Greater => FloorVerdict::Above,
        Ok(_) => FloorVerdict::Met,
        Err(_) => FloorVerdict::Above,
    }
}

/// What the board says of a module being activated.
#[derive(Debug, PartialEq)]
enum Measure<'a> {
    /// Its container runs the target: judged on how it lives.
    Runs(&'a ModuleStatus),
    /// Not yet: no pass has acted on the target.
    Wait,
    /// Its recreate waits for a maintenance window.
    Deferred,
    /// Not running the target long after the restart was asked, and no
    /// pass wanted it (the engine away, its inputs failing): may clear.
    Stalled,
    /// A pass wanted the target and the engine did not make it run (a
    /// refused create or start, or never running within the limit): why.
    NeverRan(String),
}

/// Measures one item against its module's status (pure).
fn measure<'a>(item: &Item, st: Option<&'a ModuleStatus>, now: u64, asked_at: u64) -> Measure<'a> {
    let late = now > asked_at.saturating_add(ACTIVATION_LIMIT.as_secs());
    let Some(st) = st else {
        return if late {
            Measure::Stalled
        } else {
            Measure::Wait
        };
    };
    if st.image_id.is_some() && st.image_id == item.target_image {
        return Measure::Runs(st);
    }
    let wanted = st.desired_image.is_some() && st.desired_image == item.target_image;
    if wanted && st.state == ModuleState::Deferred {
        return Measure::Deferred;
    }
    if wanted && st.state == ModuleState::Failed {
        let why = st.last_error.as_deref().unwrap_or("the engine refused it");
        return Measure::NeverRan(format!(
            "could not start: {}",
            crate::model::text::clip(why, 400)
        ));
    }
    match (late, wanted) {
        (false, _) => Measure::Wait,
        (true, true) => Measure::NeverRan(format!(
            "never ran in the {} min after the restart was asked",
            ACTIVATION_LIMIT.as_secs() / 60
        )),
        (true, false) => Measure::Stalled,
    }
}

/// What one look at a module running its landed version says.
#[derive(Debug, PartialEq)]
enum Settle {
    /// It is unstable, and why: it is rolled back.
    Unstable(&'static str),
    /// The item changed: the look started its window, or held it.
    Changed,
    /// Nothing new.
    Same,
}

/// Measures a module running its item's landed version: the first look
/// starts the window and the restart baseline; a version is held once a
/// look taken a whole window after the first finds it stable (and
/// healthy, with a health check). Times are the looks' own: a status no
/// pass has renewed since (a slow pass on a busy device) holds nothing.
fn settle(item: &mut Item, st: &ModuleStatus, now: u64, window: Duration) -> Settle {
    let looked_at = st.observed_at.unwrap_or(now);
    let mut changed = false;
    if item.running_target_since.is_none() {
        item.running_target_since = Some(looked_at);
        item.restarts_at_start = st.restart_count;
        changed = true;
    }
    if let Some(why) = crate::status::judge::unstable(st, item.restarts_at_start) {
        return Settle::Unstable(why);
    }
    let held = looked_at.saturating_sub(item.running_target_since.unwrap_or(looked_at))
        >= window.as_secs();
    let healthy = !item.healthcheck || st.health.as_deref() == Some("healthy");
    if held && healthy && item.decision != "held" {
        item.decision = "held".into();
        changed = true;
    }
    if changed {
        Settle::Changed
    } else {
        Settle::Same
    }
}

/// Whether an item's module is to be recreated from its landed image.
fn needs_activation(i: &Item) -> bool {
    i.failure.is_none() && i.landed && i.target_image.is_some() && i.target_image != i.running_image
}

/// Marks an item failed, classified; returns the delay a registry asked
/// for, if it did.
fn fail(item: &mut Item, f: &Failure) -> Option<Duration> {
    let verdict = classify(f);
    item.transient = matches!(verdict, Verdict::Transient { .. });
    // A registry's words (platforms listed, labels): clipped as events are.
    item.failure =
        Some(crate::model::text::clip(&f.to_string(), crate::store::MAX_EVENT_DETAIL).into_owned());
    match verdict {
        Verdict::Transient { retry_after } => retry_after,
        Verdict::Decided => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn st(state: ModuleState, image: &str, desired: &str) -> ModuleStatus {
        let some = |s: &str| (!s.is_empty()).then(|| s.to_string());
        ModuleStatus {
            state,
            image_id: some(image),
            desired_image: some(desired),
            last_error: Some("start failed: unable to find user nobody2".into()),
            ..ModuleStatus::pending("m")
        }
    }

    #[test]
    fn requests_move_in_one_lane_per_registry() {
        for (module, registry, id, lane) in [
            (
                Some("a"),
                Some("r1.example:5000"),
                1,
                "registry r1.example:5000",
            ),
            (
                Some("b"),
                Some("r1.example:5000"),
                2,
                "registry r1.example:5000",
            ),
            (Some("c"), Some("docker.io"), 3, "registry docker.io"),
            (None, Some("r1.example:5000"), 4, "*"),
            (None, None, 5, "*"),
            (Some("gone"), None, 6, "request 6"),
        ] {
            assert_eq!(lane_key(module, registry, id), lane, "{module:?}");
        }
    }

    #[test]
    fn floors_compare_as_semver_says() {
        let running = semver::Version::parse("0.5.0").unwrap();
        use FloorVerdict::*;
        for (floor, want) in [
            ("0.5.0", Met),
            ("0.4.9", Met),
            ("v0.5.0", Met),
            ("0.5.0+build.7", Met),
            ("0.5.0-rc.1", Met),
            ("0.5.1", Above),
            ("0.6.0+build", Above),
            ("1.0.0", Above),
            ("", Empty),
            ("  ", Empty),
            ("not a version", Above),
            ("0.5", Above),
        ] {
            assert_eq!(floor_verdict(floor, &running), want, "{floor:?}");
        }
    }

    #[test]
    fn a_target_that_was_wanted_and_does_not_run_is_a_decided_answer() {
        use ModuleState::*;
        let item = Item {
            target_image: Some("new".into()),
            ..Item::default()
        };
        let late = 1000 + ACTIVATION_LIMIT.as_secs() + 1;
        let runs = st(Starting, "new", "new");
        let cases: Vec<(&str, Option<ModuleStatus>, u64, &str)> = vec![
            ("runs the target", Some(runs.clone()), 1001, "runs"),
            ("no status yet", None, 1001, "wait"),
            ("no status, late", None, late, "stalled"),
            (
                "a pass before the target",
                Some(st(Failed, "old", "old")),
                1001,
                "wait",
            ),
            (
                "the target refused",
                Some(st(Failed, "old", "new")),
                1001,
                "never ran",
            ),
            (
                "recreating",
                Some(st(Recreating, "old", "new")),
                1001,
                "wait",
            ),
            (
                "wanted, late",
                Some(st(Converged, "old", "new")),
                late,
                "never ran",
            ),
            (
                "not wanted, late",
                Some(st(Pending, "old", "")),
                late,
                "stalled",
            ),
            (
                "no container, refused",
                Some(st(Failed, "", "new")),
                1001,
                "never ran",
            ),
            (
                "its recreate waits for a maintenance window, however long",
                Some(st(Deferred, "old", "new")),
                late,
                "deferred",
            ),
        ];
        for (case, status, now, want) in cases {
            let got = match measure(&item, status.as_ref(), now, 1000) {
                Measure::Runs(_) => "runs",
                Measure::Wait => "wait",
                Measure::Stalled => "stalled",
                Measure::Deferred => "deferred",
                Measure::NeverRan(_) => "never ran",
            };
            assert_eq!(got, want, "{case}");
        }
        match measure(&item, Some(&st(Failed, "old", "new")), 1001, 1000) {
            Measure::NeverRan(why) => assert!(why.contains("unable to find user"), "{why}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_version_is_held_only_on_a_look_a_whole_window_after_the_first() {
        use ModuleState::*;
        let window = Duration::from_secs(2);
        let look = |state, restarts: u32, at: Option<u64>| ModuleStatus {
            restart_count: Some(restarts),
            observed_at: at,
            ..st(state, "new", "new")
        };
        // Each case: the looks in order (status, the executor's clock), and
        // what the last one says.
        type Case = (&'static str, Vec<(ModuleStatus, u64)>, Settle);
        let cases: Vec<Case> = vec![
            (
                "a first look starts the window",
                vec![(look(Starting, 1, Some(100)), 100)],
                Settle::Changed,
            ),
            (
                "a stable look a window later holds",
                vec![
                    (look(Starting, 1, Some(100)), 100),
                    (look(Converged, 1, Some(102)), 102),
                ],
                Settle::Changed,
            ),
            (
                "a look not renewed since holds nothing",
                vec![
                    (look(Starting, 1, Some(100)), 100),
                    (look(Starting, 1, Some(100)), 103),
                ],
                Settle::Same,
            ),
            (
                "a look in the window holds nothing",
                vec![
                    (look(Starting, 1, Some(100)), 100),
                    (look(Converged, 1, Some(101)), 103),
                ],
                Settle::Same,
            ),
            (
                "a restart since the first look is unstable",
                vec![
                    (look(Starting, 1, Some(100)), 100),
                    (look(Starting, 2, Some(101)), 101),
                ],
                Settle::Unstable("kept restarting"),
            ),
            (
                "a crash loop is unstable",
                vec![(look(CrashLooping, 3, Some(100)), 100)],
                Settle::Unstable("kept restarting"),
            ),
            (
                "without a look's time, the clock's",
                vec![
                    (look(Starting, 0, None), 100),
                    (look(Converged, 0, None), 102),
                ],
                Settle::Changed,
            ),
        ];
        for (what, looks, want) in cases {
            let mut item = Item {
                target_image: Some("new".into()),
                ..Item::default()
            };
            let mut last = Settle::Same;
            for (st, now) in &looks {
                last = settle(&mut item, st, *now, window);
            }
            assert_eq!(last, want, "{what}");
            let held = item.decision == "held";
            assert_eq!(
                held,
                what.ends_with("holds") || what.contains("clock's"),
                "{what}"
            );
        }
    }
}
