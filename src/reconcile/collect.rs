//! Disk stewardship beside the pass ([`Steward`]): the images this node
//! pulled and each module's image history noted in the store, the node's
//! filesystems measured, and unused images collected when it is due: after
//! a change held (a module's new image converged), when the engine's data
//! root is at its high threshold, when a pull was refused for room, or
//! when asked (`POST /v1/images/prune`). The rules are
//! [`crate::model::disk::judge`]'s and [`crate::model::disk::choose`]'s;
//! this file gathers what they read, fresh, and acts.
//!
//! A quiet pass on a disk below its threshold costs no engine call here:
//! a collection lists the images and containers itself, only when due.

use crate::model::sort::Insert as _;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::engine::image::Images;
use crate::engine::{Engine, EngineError, Observed};
use crate::model::disk::{
    self, Disks, Filesystem, Held, ImageLine, Level, Needs, Policy, Pruned, Trigger,
};
use crate::model::names::ModuleName;
use crate::model::reference::Reference;
use crate::status::{Board, ModuleState};
use crate::store::images::{History, Pulled};
use crate::store::{EventKind, Store, StoreError};

use super::PassError;

/// Under pressure with nothing left to collect, look again at most this
/// often (a collection lists images and containers).
const PRESSURE_LOOK: Duration = Duration::from_secs(60);

/// What disk stewardship keeps between passes.
pub struct Steward {
    policy: Policy,
    /// stead's data directory (the store).
    data_dir: PathBuf,
    /// Where the host keeps its logs.
    log_dir: PathBuf,
    /// When this agent first saw each image not pulled here (its age for
    /// `collect = "all"`).
    first_seen: HashMap<String, u64>,
    /// Each module's image history, as stored (read at the first pass).
    history: Option<BTreeMap<String, History>>,
    /// Modules whose image changed, until they converge: then a change
    /// held.
    changed: BTreeSet<String>,
    /// When a collection under pressure last ran.
    last_pressure: Option<Instant>,
    /// The pull-room check the pulls share.
    room: Option<Arc<crate::registry::room::Room>>,
    /// The filesystems as last measured.
    disks: Disks,
    /// Images fetched ahead of a coming rollout turn (references): kept.
    pub ahead: BTreeSet<String>,
}

impl Steward {
    /// A steward with this policy, measuring these directories besides the
    /// engine's data root.
    pub fn new(policy: Policy, data_dir: PathBuf, log_dir: PathBuf) -> Steward {
        Steward {
            policy,
            data_dir,
            log_dir,
            first_seen: HashMap::new(),
            history: None,
            changed: BTreeSet::new(),
            last_pressure: None,
            room: None,
            disks: Disks::default(),
            ahead: BTreeSet::new(),
        }
    }

    /// The room check the pulls use.
    pub fn set_room(&mut self, room: Arc<crate::registry::room::Room>) {
        self.room = Some(room);
    }

    /// The filesystems, as the last pass measured them.
    pub fn disks(&self) -> &Disks {
        &self.disks
    }

    /// Measures the filesystems that matter: the engine's data root, the
    /// store's directory, the log directory, each filesystem once (its
    /// roles together). The store stops writing events below its reserve.
    pub fn measure(&mut self, data_root: Option<PathBuf>, store: &Store, logs: disk::Logs) {
        let mut filesystems: Vec<(Option<u64>, Filesystem)> = Vec::new();
        let paths = [
            (data_root, "images"),
            (Some(self.data_dir.clone()), "store"),
            (Some(self.log_dir.clone()), "logs"),
        ];
        let mut store_space = None;
        for (path, role) in paths {
            let Some(path) = path else { continue };
            let Ok(space) = crate::host::disk::space(&path) else {
                continue;
            };
            if role == "store" {
                store_space = Some(space);
            }
            let dev = crate::host::disk::device(&path);
            if let Some((_, f)) = filesystems
                .iter_mut()
                .find(|(d, _)| d.is_some() && *d == dev)
            {
                f.roles.push(role.to_string());
                continue;
            }
            filesystems.push((
                dev,
                Filesystem {
                    path: path.display().to_string(),
                    roles: vec![role.to_string()],
                    size_bytes: space.total,
                    free_bytes: space.free,
                    level: space.level(self.policy.high),
                },
            ));
        }
        let paused = store_space.is_some_and(|s| s.free < disk::store_reserve(s.total));
        if paused != store.events_paused() {
            if paused {
                tracing::warn!(
                    "the store's filesystem ({}) is below its reserve: events are not written (the last ones are kept) so that intentions still can be",
                    self.data_dir.display()
                );
            } else {
                tracing::info!("the store's filesystem has room again: events are written");
            }
            store.pause_events(paused);
        }
        let filesystems: Vec<Filesystem> = filesystems.into_iter().map(|(_, f)| f).collect();
        self.disks = Disks {
            level: filesystems
                .iter()
                .map(|f| f.level)
                .max()
                .unwrap_or(Level::Ok),
            filesystems,
            logs,
            events_paused: paused,
        };
    }

    /// After a pass: the images pulled since noted, each module's image
    /// history brought up to date, and a collection when one is due.
    pub async fn after_pass<E: Engine>(
        &mut self,
        engine: &E,
        store: &Arc<Store>,
        brought: Vec<(String, Vec<disk::Layer>)>,
        running: Vec<(String, String)>,
        modules: &BTreeSet<ModuleName>,
        board: &std::sync::Mutex<Board>,
    ) -> Result<Option<Pruned>, PassError> {
        let first = self.history.is_none();
        if !brought.is_empty() {
            let images = Images::new(engine.list_images().await?);
            let at = crate::host::clock::now();
            let found: Vec<(String, Pulled)> = brought
                .into_iter()
                .filter_map(|(reference, layers)| {
                    let id = images.find(&reference)?.id.clone();
                    Some((
                        id,
                        Pulled {
                            reference,
                            at,
                            layers,
                        },
                    ))
                })
                .collect();
            store.blocking(move |s| s.note_pulled(&found)).await?;
            self.refresh_present(store).await?;
        } else if first {
            self.refresh_present(store).await?;
        }
        self.note_history(store, running, modules).await?;
        let Some(trigger) = self.due(engine, board) else {
            return Ok(None);
        };
        self.collect(engine, store, trigger, false).await.map(Some)
    }

    /// Each module's image history: a module whose container (at its
    /// name; `running` is (module, image ID)) runs another image than the
    /// one recorded ran the recorded one before; a module gone is
    /// forgotten. Written only on a change.
    async fn note_history(
        &mut self,
        store: &Arc<Store>,
        running: Vec<(String, String)>,
        modules: &BTreeSet<ModuleName>,
    ) -> Result<(), StoreError> {
        if self.history.is_none() {
            self.history = Some(store.blocking(|s| s.image_history()).await?);
        }
        let history = self.history.as_mut().expect("read above");
        let now = crate::host::clock::now();
        let mut changes = Vec::new();
        for (module, image_id) in running {
            let module = module.as_str();
            if image_id.is_empty()
                || !ModuleName::try_from(module).is_ok_and(|m| modules.contains(&m))
            {
                continue;
            }
            let h = match history.get(module) {
                Some(h) if h.current == image_id => continue,
                Some(h) => History {
                    current: image_id.clone(),
                    previous: Some(h.current.clone()),
                    since: now,
                },
                None => History {
                    current: image_id.clone(),
                    previous: None,
                    since: now,
                },
            };
            if h.previous.is_some() {
                tracing::info!(
                    module,
                    "now runs image {}, kept {} for a rollback",
                    short(&h.current),
                    short(h.previous.as_deref().unwrap_or_default())
                );
                self.changed.insert(module.to_string());
            }
            history.insert(module.to_string(), h.clone());
            changes.push((module.to_string(), Some(h)));
        }
        let gone: Vec<String> = history
            .keys()
            .filter(|m| !ModuleName::try_from(m.as_str()).is_ok_and(|m| modules.contains(&m)))
            .cloned()
            .collect();
        for m in gone {
            history.remove(&m);
            self.changed.remove(&m);
            changes.push((m, None));
        }
        if !changes.is_empty() {
            store.blocking(move |s| s.note_history(&changes)).await?;
        }
        Ok(())
    }

    /// Whether a collection is due, and why: a pull refused for room, a
    /// module's new image converged, or the data root at its threshold.
    fn due<E: Engine>(&mut self, engine: &E, board: &std::sync::Mutex<Board>) -> Option<Trigger> {
        if let Some(need) = self
            .room
            .as_ref()
            .and_then(|r| r.wanted.lock().expect("room lock").take())
        {
            return Some(Trigger::Room(need));
        }
        // The board is read only while a module's image change waits to
        // hold (an idle pass copies nothing).
        let held: Vec<String> = if self.changed.is_empty() {
            Vec::new()
        } else {
            let board = board.lock().expect("board lock");
            self.changed
                .iter()
                .filter(|m| {
                    board
                        .get(m.as_str())
                        .is_some_and(|s| s.state == ModuleState::Converged)
                })
                .cloned()
                .collect()
        };
        if !held.is_empty() {
            for m in &held {
                self.changed.remove(m);
            }
            return Some(Trigger::Changed);
        }
        let root = engine.data_root()?;
        let space = crate::host::disk::space(&root).ok()?;
        if space.used_percent() < u64::from(self.policy.high) {
            return None;
        }
        if self
            .last_pressure
            .is_some_and(|t| t.elapsed() < PRESSURE_LOOK)
        {
            return None;
        }
        self.last_pressure = Some(Instant::now());
        Some(Trigger::Pressure)
    }

    /// Collects (or, as a dry run, says what it would collect): lists the
    /// images and containers, reads what the store says every module needs,
    /// judges each image and removes those chosen, each removal an event.
    pub async fn collect<E: Engine>(
        &mut self,
        engine: &E,
        store: &Arc<Store>,
        trigger: Trigger,
        dry_run: bool,
    ) -> Result<Pruned, PassError> {
        let images = Images::new(engine.list_images().await?);
        let containers = engine.list_containers().await?;
        let facts = store.blocking(gather).await?;
        let now = crate::host::clock::now();
        let listed: BTreeSet<&str> = images.all().iter().map(|i| i.id.as_str()).into_set();
        self.first_seen.retain(|id, _| listed.contains(id.as_str()));
        for i in images.all() {
            self.first_seen.entry(i.id.clone()).or_insert(now);
        }
        let mut needs = needs(&images, &containers, &facts);
        for reference in &self.ahead {
            if let Some(i) = images.find(reference) {
                needs.ahead.insert(i.id.clone(), reference.clone());
            }
        }
        let held: Vec<Held> = images
            .all()
            .iter()
            .map(|i| Held {
                id: i.id.clone(),
                names: i.tags.iter().chain(&i.digests).cloned().collect(),
                size: i.size,
                since: disk::since(
                    facts.pulled.get(&i.id).map(|p| p.at),
                    self.first_seen.get(&i.id).copied().unwrap_or(now),
                    now,
                ),
            })
            .collect();
        let mut out = Pruned {
            dry_run,
            trigger: trigger.why(&self.policy),
            ..Pruned::default()
        };
        let mut removable = Vec::new();
        for h in &held {
            match disk::judge(h, &needs, &self.policy, now) {
                Some(kept) => out.kept.push(line(h, kept.to_string())),
                None => removable.push(h),
            }
        }
        let space = engine
            .data_root()
            .and_then(|r| crate::host::disk::space(&r).ok())
            .unwrap_or_default();
        let chosen = disk::choose(&removable, trigger, space, &self.policy);
        let why = format!(
            "no container uses it, no intention names it, no module ran it last ({})",
            out.trigger
        );
        for h in &removable {
            if !chosen.iter().any(|c| c.id == h.id) {
                out.kept.push(line(
                    h,
                    "not needed, but the disk is below its threshold without it going".into(),
                ));
            }
        }
        let mut gone = Vec::new();
        for h in chosen {
            if dry_run {
                out.removed.push(line(h, why.clone()));
                continue;
            }
            match remove(engine, h).await {
                Ok(()) => {
                    out.reclaimed_bytes += h.size;
                    out.removed.push(line(h, why.clone()));
                    gone.push(h.id.clone());
                }
                Err(e) if e.is_unreachable() => return Err(e.into()),
                Err(e) => out.failed.push(line(h, e.to_string())),
            }
        }
        if !dry_run {
            self.said(store, &out, gone).await?;
        }
        Ok(out)
    }

    /// Each removal said as an event, the metrics counted, the store's
    /// records of the images gone forgotten.
    async fn said(
        &self,
        store: &Arc<Store>,
        out: &Pruned,
        gone: Vec<String>,
    ) -> Result<(), StoreError> {
        for r in &out.removed {
            let detail = format!(
                "image {} ({}, {}) removed: {}",
                r.names.first().map_or("<none>", String::as_str),
                short(&r.id),
                disk::human(r.size_bytes),
                r.why
            );
            tracing::info!("{detail}");
            store
                .blocking(move |s| s.append_event(None, EventKind::Removed, detail))
                .await?;
        }
        for f in &out.failed {
            tracing::warn!("image {} not removed: {}", short(&f.id), f.why);
        }
        if !gone.is_empty() {
            store.blocking(move |s| s.forget_pulled(&gone)).await?;
        }
        self.refresh_present(store).await
    }

    /// The layers of the images this node pulled, for the room check (at
    /// the first pass, and after each pull).
    pub async fn refresh_present(&self, store: &Arc<Store>) -> Result<(), StoreError> {
        let Some(room) = &self.room else {
            return Ok(());
        };
        let present: BTreeSet<String> = store
            .blocking(|s| s.pulled_images())
            .await?
            .into_values()
            .flat_map(|p| p.layers.into_iter().map(|(d, _)| d))
            .into_set();
        *room.present.lock().expect("room lock") = present;
        Ok(())
    }
}

/// What the store says the modules need.
struct Facts {
    /// Every module's image reference (its intention's, a held or waiting
    /// one's too), with the module.
    named: Vec<(String, String)>,
    /// Image IDs modules need besides: the one each applied spec was made
    /// with, what a reload landed, what an open reload lands.
    ids: Vec<(String, String)>,
    /// Each module's previous image: its history's, and the one a landed
    /// reload replaced.
    previous: Vec<(String, String)>,
    pulled: BTreeMap<String, Pulled>,
}

fn gather(s: &Store) -> Result<Facts, StoreError> {
    let (entries, _) = s.entries_readable()?;
    let updates = s.updates()?;
    let mut named = Vec::new();
    let mut ids = Vec::new();
    let mut previous = Vec::new();
    for (m, e) in &entries {
        let Some(r) = &e.record else { continue };
        let i = &r.intention;
        // A version a reload landed stands in for the intention's image
        // (until the image or the range is edited): that one is not
        // needed then, unless a rule below keeps it.
        let range = i.update.as_ref().map_or("", |u| u.range.as_str());
        let landed = updates
            .get(m)
            .and_then(|u| u.landed.as_ref())
            .filter(|l| l.stands_for(&i.image, range));
        match landed {
            Some(l) => {
                ids.push((l.image_id.clone(), m.to_string()));
                named.push((l.reference.clone(), m.to_string()));
                if let Some(p) = &l.previous_image {
                    previous.push((p.clone(), m.to_string()));
                }
            }
            None => named.push((i.image.clone(), m.to_string())),
        }
    }
    // What each module's container was made with (a module whose stored
    // intention does not read too).
    for (m, a) in s.all_applied()? {
        ids.push((a.spec.image_id.clone(), m));
    }
    for r in s.reloads()? {
        if matches!(
            r.status(),
            crate::model::reload::Status::Done | crate::model::reload::Status::Failed
        ) {
            continue;
        }
        for item in &r.items {
            if let Some(id) = &item.target_image {
                ids.push((id.clone(), item.module.clone()));
            }
            if let (Some(d), Ok(base)) = (&item.target_digest, Reference::parse(&item.image)) {
                named.push((base.with_digest(d).to_string(), item.module.clone()));
            }
        }
    }
    for (m, h) in s.image_history()? {
        if let Some(p) = h.previous {
            previous.push((p, m));
        }
    }
    Ok(Facts {
        named,
        ids,
        previous,
        pulled: s.pulled_images()?,
    })
}

/// What every rule reads, by image ID.
fn needs(images: &Images, containers: &[Observed], f: &Facts) -> Needs {
    let mut n = Needs::default();
    for c in containers {
        let name = c
            .names
            .first()
            .cloned()
            .unwrap_or_else(|| short(&c.id).to_string());
        n.used.entry(c.image_id.clone()).or_insert(name);
    }
    for (reference, module) in &f.named {
        if let Some(i) = images.find(reference) {
            n.named
                .entry(i.id.clone())
                .or_insert_with(|| module.clone());
        }
    }
    for (id, module) in &f.ids {
        n.named.entry(id.clone()).or_insert_with(|| module.clone());
    }
    for (id, module) in &f.previous {
        n.previous
            .entry(id.clone())
            .or_insert_with(|| module.clone());
    }
    n.pulled = f
        .pulled
        .iter()
        .map(|(id, p)| (id.clone(), p.reference.clone()))
        .into_map();
    n
}

/// Removes an image: by its ID, or, when the engine will not remove an ID
/// with several names unforced, name by name (the image goes with its last
/// name). Never forced: an image a container uses is refused by the engine.
async fn remove<E: Engine>(engine: &E, h: &Held) -> Result<(), EngineError> {
    // The Docker Engine's conflict (409), Podman's error (500).
    let several = |m: &str| m.contains("multiple repositories") || m.contains("more than one tag");
    match engine.remove_image(&h.id).await {
        Ok(()) | Err(EngineError::NotFound(_)) => return Ok(()),
        Err(EngineError::Conflict(m) | EngineError::Refused { message: m, .. }) if several(&m) => {}
        Err(e) => return Err(e),
    }
    for name in &h.names {
        match engine.remove_image(name).await {
            Ok(()) | Err(EngineError::NotFound(_)) => {}
            Err(e) => return Err(e),
        }
    }
    match engine.remove_image(&h.id).await {
        Ok(()) | Err(EngineError::NotFound(_)) => Ok(()),
        Err(e) => Err(e),
    }
}

fn line(h: &Held, why: String) -> ImageLine {
    ImageLine {
        id: h.id.clone(),
        names: h.names.clone(),
        size_bytes: h.size,
        why,
    }
}

/// An image ID's first 12 hex digits.
fn short(id: &str) -> &str {
    let hex = id.strip_prefix("sha256:").unwrap_or(id);
    hex.get(..12).unwrap_or(hex)
}
