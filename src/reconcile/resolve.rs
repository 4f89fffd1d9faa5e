//! Resolving what each module wants now: its effective intention (stored
//! intention and settings overlay) composed once, its env files read and
//! its read-only mounts digested as they are on disk now (blocking I/O, run
//! off the async threads), then its image found among the engine's (pulled
//! when absent, with backoff). A module whose target cannot be computed is
//! held, naming the input at fault; it never stops the others. Every input
//! is read of the host at each pass; the target made of them is kept
//! ([`Made`]) and made again only when something it is made from differs,
//! compared whole.

use crate::model::sort::Insert as _;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures_util::FutureExt;
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::engine::image::Images;
use crate::engine::{Engine, EngineError};
use crate::host::digest::FileDigester;
use crate::model::config::RenderError;
use crate::model::env_file;
use crate::model::files;
use crate::model::intention::{Access, Intention};
use crate::model::names::{Digest, DigestKey, InputName, ModuleName, NodeId};
use crate::model::reload::UpdateState;
use crate::model::sealed::{Device, Opened, Text};
use crate::model::spec::{self, Desired, Inputs};
use crate::reconcile::gate::Admit;
use crate::reconcile::plan::Want;
use crate::reconcile::retry::{Retries, Tuning};
use crate::store::Entry;

/// Why a module's inputs could not be resolved. The module is held: its
/// container is left as it is until the input is back.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResolveError {
    /// Its files could not be composed (settings that no longer merge).
    #[error(transparent)]
    Compose(#[from] RenderError),
    /// A sealed value is not here to be used (no device key, or it did not
    /// open): the message names its field.
    #[error("{0}")]
    Sealed(String),
    /// A host input could not be read.
    #[error("{input}: {message}")]
    Input {
        /// The input at fault (`env_file:/srv/x.env`, `mount:/model`, …).
        input: String,
        /// What is wrong.
        message: String,
    },
}

/// The largest env file read.
pub const MAX_ENV_FILE_BYTES: u64 = 1 << 20;

/// Resolves every input of an intention but the image: composes its files
/// (rendering each once), reads its env files and digests its read-only
/// mounts.
pub fn resolve_inputs(
    i: &Intention,
    digester: &mut FileDigester,
    device: Option<&Device>,
) -> Result<Inputs, ResolveError> {
    let opened = open_sealed(i, device)?;
    assemble(i, &read_host(i, digester)?, &opened)
}

/// Opens an intention's sealed values with the device's key (none needed
/// when it has none).
pub fn open_sealed(i: &Intention, device: Option<&Device>) -> Result<Opened, ResolveError> {
    let sealed = i.sealed_fields();
    match (sealed.first(), device) {
        (None, _) => Ok(Opened::default()),
        (Some((field, _)), None) => Err(ResolveError::Sealed(format!(
            "{field}: a sealed value, opened only by the agent on its device"
        ))),
        (Some(_), Some(d)) => d
            .open_all(i.name.as_str(), sealed)
            .map_err(|e| ResolveError::Sealed(e.to_string())),
    }
}

/// What an intention's inputs are on the host now: each env file's bytes
/// (digested and read) and each mount's digest, in the intention's order.
#[derive(Debug, Clone, PartialEq)]
pub struct HostRead {
    /// Each env file: its input, its digest, its variables.
    env_files: Vec<EnvFileRead>,
    /// Each mount: its input and digest.
    mounts: Vec<(InputName, Digest)>,
}

impl HostRead {
    /// Each input read and its digest: the env files', then the mounts'.
    pub fn digests(&self) -> impl Iterator<Item = (&InputName, &Digest)> {
        self.env_files
            .iter()
            .map(|(n, d, _)| (n, d))
            .chain(self.mounts.iter().map(|(n, d)| (n, d)))
    }
}

/// An env file as read: its input, its digest, its variables.
type EnvFileRead = (InputName, Digest, Vec<(String, String)>);

/// Reads what an intention takes from the host: its env files and the
/// content of its read-only mounts (the digester reads a tree again only
/// where its stat moved).
pub fn read_host(i: &Intention, digester: &mut FileDigester) -> Result<HostRead, ResolveError> {
    let mut env_files = Vec::with_capacity(i.env_files.len());
    // By Compose's rules a file may refer to the module's env and to what
    // the files before it set; a sealed value is not read here (it is
    // opened only when the container is made).
    let own = |k: &str| {
        i.env
            .iter()
            .find(|(n, _)| n.as_str() == k)
            .and_then(|(_, v)| v.plain().map(str::to_string))
    };
    let mut earlier = env_file::Known::new();
    for path in &i.env_files {
        let name = spec::env_file_input(path);
        let input_err = |message: String| ResolveError::Input {
            input: name.to_string(),
            message,
        };
        let bytes = crate::host::files::read_regular(path.as_path(), MAX_ENV_FILE_BYTES)
            .map_err(|e| input_err(format!("cannot read {path}: {e}")))?;
        let vars = env_file::read(&bytes, i.env_file_format, &own, &earlier).map_err(input_err)?;
        if i.env_file_format == env_file::Format::Compose {
            earlier.extend(vars.iter().cloned());
        }
        env_files.push((name, spec::env_file_digest(&bytes, i.env_file_format), vars));
    }
    let mut mounts = Vec::with_capacity(i.mounts.len());
    for m in &i.mounts {
        let name = spec::mount_input(&m.target);
        let content =
            match m.access {
                Access::ReadOnly => {
                    Some(digester.digest_path(m.source.as_path()).map_err(|e| {
                        ResolveError::Input {
                            input: name.to_string(),
                            message: e.to_string(),
                        }
                    })?)
                }
                Access::ReadWrite | Access::ReadOnlyView => None,
            };
        let digest = spec::mount_digest(&m.source, m.access, content.as_ref());
        mounts.push((name, digest));
    }
    Ok(HostRead { env_files, mounts })
}

/// An intention's inputs from what was read of the host: its own fields'
/// digests, its files composed, its env (the files' first, its own over
/// them). Pure.
pub fn assemble(i: &Intention, read: &HostRead, opened: &Opened) -> Result<Inputs, ResolveError> {
    let mut digests = spec::own_input_digests(i, opened).map_err(ResolveError::Sealed)?;
    let files = files::compose(i, opened)?;
    for f in &files {
        digests.insert(f.input.clone(), f.digest.clone());
    }
    let mut env: BTreeMap<String, String> = BTreeMap::new();
    for (name, digest, vars) in &read.env_files {
        for (k, v) in vars {
            env.insert(k.clone(), v.clone());
        }
        digests.insert(name.clone(), digest.clone());
    }
    for (k, v) in &i.env {
        let v = match v {
            Text::Plain(v) => v.clone(),
            Text::Sealed(_) => opened
                .text(&format!("env.{k}"))
                .map_err(ResolveError::Sealed)?,
        };
        env.insert(k.to_string(), v);
    }
    for (name, digest) in &read.mounts {
        digests.insert(name.clone(), digest.clone());
    }
    Ok(Inputs {
        digests,
        env: env.into_iter().collect(),
        files,
    })
}

/// Everything a module's target is made from, beyond the agent's
/// constants (its node and files directory). A target is made again only
/// when one of these differs from what the last one was made from:
/// [`made`] gives the maker nothing else, so none can be left out.
#[derive(Debug)]
pub struct MadeFrom {
    /// The effective intention.
    pub intention: Arc<Intention>,
    /// Its inputs as read of the host.
    pub read: HostRead,
    /// Whether a settings overlay is layered over it (a compose error then
    /// says so).
    pub overlaid: bool,
    /// Its image's ID.
    pub image_id: Digest,
    /// The node's logging, for a module without its own.
    pub logging: Option<crate::model::runtime::Logging>,
    /// This agent's id.
    pub agent: String,
    /// What was stated for it beyond the files, sealed.
    pub stated: Option<String>,
}

/// [`MadeFrom`] as borrowed during a pass, to compare without copying.
pub struct MadeOf<'a> {
    /// See [`MadeFrom`].
    pub intention: &'a Arc<Intention>,
    /// See [`MadeFrom`].
    pub read: &'a HostRead,
    /// See [`MadeFrom`].
    pub overlaid: bool,
    /// See [`MadeFrom`].
    pub image_id: &'a Digest,
    /// See [`MadeFrom`].
    pub logging: Option<&'a crate::model::runtime::Logging>,
    /// See [`MadeFrom`].
    pub agent: &'a str,
    /// See [`MadeFrom`].
    pub stated: Option<&'a String>,
}

impl MadeOf<'_> {
    /// Whether `from` is this, field by field (an intention shared with
    /// the last pass is the same without reading it).
    fn is(&self, from: &MadeFrom) -> bool {
        let MadeFrom {
            intention,
            read,
            overlaid,
            image_id,
            logging,
            agent,
            stated,
        } = from;
        (Arc::ptr_eq(self.intention, intention) || **self.intention == **intention)
            && self.read == read
            && self.overlaid == *overlaid
            && self.image_id == image_id
            && self.logging == logging.as_ref()
            && self.agent == agent
            && self.stated == stated.as_ref()
    }

    fn owned(&self) -> MadeFrom {
        MadeFrom {
            intention: self.intention.clone(),
            read: self.read.clone(),
            overlaid: self.overlaid,
            image_id: self.image_id.clone(),
            logging: self.logging.cloned(),
            agent: self.agent.to_string(),
            stated: self.stated.cloned(),
        }
    }
}

/// Each module's last target (or why it could not be made), with what it
/// was made from.
#[derive(Default)]
pub struct Made {
    at: HashMap<ModuleName, (MadeFrom, Result<Arc<Desired>, String>)>,
    /// How many targets were made, ever.
    makes: u64,
}

impl Made {
    /// The module's target made of `of`: the last one when it was made of
    /// the same, else `make`'s, kept for the next pass.
    pub fn made(
        &mut self,
        name: &ModuleName,
        of: MadeOf<'_>,
        make: impl FnOnce(&MadeFrom) -> Result<Desired, String>,
    ) -> Result<Arc<Desired>, String> {
        if let Some((from, target)) = self.at.get_mut(name) {
            if of.is(from) {
                // The same intention, decoded again: one copy is kept.
                if !Arc::ptr_eq(&from.intention, of.intention) {
                    from.intention = of.intention.clone();
                }
                return target.clone();
            }
        }
        let from = of.owned();
        self.makes += 1;
        let target = make(&from).map(Arc::new);
        self.at.insert(name.clone(), (from, target.clone()));
        target
    }

    /// Forgets the modules `keep` does not name.
    pub fn keep(&mut self, keep: impl Fn(&ModuleName) -> bool) {
        self.at.retain(|n, _| keep(n));
    }

    /// How many targets were made since the agent started.
    pub fn makes(&self) -> u64 {
        self.makes
    }
}

/// One module's intention with its inputs resolved against the host.
pub struct HostResolved {
    /// The module.
    pub name: ModuleName,
    /// Its effective intention.
    pub intention: Arc<Intention>,
    /// Its inputs as read of the host, or why it is held.
    pub read: Result<HostRead, String>,
    /// Whether a settings overlay is layered over it.
    pub overlaid: bool,
    /// What was stated for it beyond the files, sealed, for its
    /// container's label.
    pub stated: Option<String>,
}

/// Resolves every stored module but those in `skip` against the host
/// (blocking I/O): one
/// composition and one read of each input per module. Also says which host
/// paths the modules read, for the file watcher. What a container's label
/// carries for a store rebuild is sealed with `key` (none without one).
pub fn against_host(
    entries: &BTreeMap<ModuleName, Entry>,
    skip: &BTreeSet<ModuleName>,
    updates: &BTreeMap<ModuleName, UpdateState>,
    digester: &mut FileDigester,
    key: Option<&crate::model::seal::LocalKey>,
) -> (Vec<HostResolved>, BTreeSet<PathBuf>) {
    let mut out = Vec::with_capacity(entries.len());
    let mut watched = BTreeSet::new();
    for (name, entry) in entries.iter().filter(|(n, _)| !skip.contains(*n)) {
        // Noted, so that a panic here names the module to the crash guard.
        let _acting = crate::host::panic::Acting::new(name.as_str());
        if crate::host::crash_points_armed() {
            crate::host::panic_point(&format!("resolve:module:{name}"));
            if let Some(r) = entry.record.as_ref().and_then(|r| r.plane_revision) {
                crate::host::panic_point(&format!("resolve:plane-revision:{r}"));
            }
        }
        let Some(mut i) = entry.effective() else {
            continue;
        };
        if let (Some(u), Some(landed)) =
            (&i.update, updates.get(name).and_then(|s| s.landed.as_ref()))
        {
            if landed.stands_for(&i.image, u.range.as_str()) {
                Arc::make_mut(&mut i).image = landed.reference.clone();
            }
        }
        watched.extend(i.env_files.iter().map(|p| p.to_path_buf()));
        watched.extend(
            i.mounts
                .iter()
                .filter(|m| m.access == Access::ReadOnly)
                .map(|m| m.source.to_path_buf()),
        );
        let read = read_host(&i, digester).map_err(|e| e.to_string());
        out.push(HostResolved {
            name: name.clone(),
            intention: i,
            read,
            overlaid: !entry.overlay.is_empty(),
            stated: key.and_then(|k| crate::intake::labels::render(name, entry, k)),
        });
    }
    (out, watched)
}

/// How a pull ended (the image's layers, when its manifest said them),
/// and when.
type PullOutcome = (Result<Vec<crate::model::disk::Layer>, String>, Instant);

/// Image pulls under way, each a task of its own: a slow registry holds
/// only the modules that need its image, never the pass.
#[derive(Default)]
pub struct Pulls {
    in_flight: HashMap<String, JoinHandle<PullOutcome>>,
    /// Wait for each pull within the pass (`stead run --once`).
    pub wait: bool,
    /// Woken when a pull ends, for a pass to take its image.
    pub wake: Option<Arc<Notify>>,
    /// Registry logins, for the engine's pulls.
    pub credentials: Option<Arc<crate::registry::auth::Credentials>>,
    /// Whether a pull fits, checked before it starts.
    pub room: Option<Arc<crate::registry::room::Room>>,
    /// The images pulled since the last pass took them, with their layers.
    pub brought: Vec<(String, Vec<crate::model::disk::Layer>)>,
    /// The images to fetch ahead of a group's coming rollout turn, as the
    /// plane's documents compose them (set before each pass).
    pub ahead: BTreeSet<String>,
    /// The pulls started ahead (the references pulled: a signed image's
    /// pinned digest), each with the image ahead it is for, stopped once
    /// that image is no longer ahead nor wanted by a module.
    started_ahead: BTreeMap<String, String>,
    /// Of the images ahead, how many, and how many are here, as the last
    /// pass saw them.
    pub ahead_here: Option<crate::model::fetch::Ahead>,
}

impl Pulls {
    /// Takes the outcome of every pull that has ended, noting it in the
    /// retry policy. Says whether one brought an image.
    fn collect(&mut self, retries: &mut Retries, tuning: &Tuning) -> bool {
        let done: Vec<String> = self
            .in_flight
            .iter()
            .filter(|(_, t)| t.is_finished())
            .map(|(image, _)| image.clone())
            .collect();
        let mut brought = false;
        for image in done {
            let task = self.in_flight.remove(&image).expect("listed");
            if let Some(Ok(outcome)) = task.now_or_never() {
                brought |= settle(&image, outcome, retries, tuning, &mut self.brought);
            }
        }
        brought
    }

    /// Waits for every pull under way and takes its outcome.
    async fn join(&mut self, retries: &mut Retries, tuning: &Tuning) -> bool {
        let mut brought = false;
        for (image, task) in std::mem::take(&mut self.in_flight) {
            if let Ok(outcome) = task.await {
                brought |= settle(&image, outcome, retries, tuning, &mut self.brought);
            }
        }
        brought
    }

    /// Fetches the images ahead of a coming rollout turn that are not
    /// here, in the background, as the modules' pulls are (their room
    /// checked, the agent's own fetch resumed, their back-off), through
    /// the image policy (a signed image is pulled by its verified digest,
    /// once checked); a pull started ahead whose image is no longer ahead
    /// and that no module waits for (`missing`) is stopped (the spool
    /// keeps what it fetched, until it is swept). Returns the references
    /// pulled ahead, for the back-offs kept.
    fn fetch_ahead<E: Engine>(
        &mut self,
        engine: &E,
        images: &Images,
        missing: &BTreeSet<String>,
        retries: &Retries,
        gate: &mut crate::reconcile::gate::Gate,
        now: Instant,
    ) -> BTreeSet<String> {
        let mut pulling = BTreeSet::new();
        let mut here = 0;
        for image in self.ahead.clone() {
            let reference = match gate.admit(&image, images, now) {
                Admit::Free => image.clone(),
                Admit::Pull(pinned) => pinned,
                Admit::Run(_) => {
                    here += 1;
                    continue;
                }
                Admit::Check(_) | Admit::Hold(..) => continue,
            };
            if images.find(&reference).is_some() {
                here += 1;
                continue;
            }
            pulling.insert(reference.clone());
            if self.in_flight.contains_key(&reference)
                || retries.pull_held_back(&reference, now).is_some()
                || self.wait
            {
                continue;
            }
            tracing::info!(
                image = reference.as_str(),
                "fetching ahead of a rollout's coming turn"
            );
            self.start(engine, &reference);
            self.started_ahead.insert(reference, image);
        }
        for (reference, image) in std::mem::take(&mut self.started_ahead) {
            if pulling.contains(&reference) || missing.contains(&reference) {
                self.started_ahead.insert(reference, image);
            } else if !self.in_flight.contains_key(&reference) {
                // Ended, and taken by a pass.
            } else if self.ahead.contains(&image) {
                // Here already while its fetch ends (the engine loaded it;
                // the fetch tags it and says so): it is left to end, and
                // stopped only once its image is no longer ahead.
                self.started_ahead.insert(reference, image);
            } else if let Some(task) = self.in_flight.remove(&reference) {
                tracing::info!(
                    image = reference.as_str(),
                    "no longer ahead of a rollout turn: its fetch stops"
                );
                task.abort();
            }
        }
        self.ahead_here = (!self.ahead.is_empty()).then_some(crate::model::fetch::Ahead {
            images: self.ahead.len() as u64,
            here,
        });
        pulling
    }

    /// Whether `image` is being pulled.
    pub(super) fn pulling(&self, image: &str) -> bool {
        self.in_flight.contains_key(image)
    }

    /// Starts pulling `image` (with the login for its registry, when the
    /// credentials file has one), once it is known to fit.
    pub(super) fn start<E: Engine>(&mut self, engine: &E, image: &str) {
        let (engine, reference, wake) = (engine.clone(), image.to_string(), self.wake.clone());
        let auth = self.credentials.as_ref().and_then(|c| c.pull_auth(image));
        let room = self.room.clone();
        let task = tokio::spawn(async move {
            use crate::registry::room::{NotPulled, pull_checked};
            let outcome = pull_checked(room.as_deref(), &engine, &reference, auth)
                .await
                .map_err(|e: NotPulled| e.to_string());
            let at = Instant::now();
            if let Some(w) = wake {
                w.notify_one();
            }
            (outcome, at)
        });
        self.in_flight.insert(image.to_string(), task);
    }
}

/// Notes how a pull ended; says whether it brought the image.
fn settle(
    image: &str,
    (outcome, at): PullOutcome,
    retries: &mut Retries,
    tuning: &Tuning,
    brought: &mut Vec<(String, Vec<crate::model::disk::Layer>)>,
) -> bool {
    match outcome {
        Ok(layers) => {
            tracing::info!(image, "pulled");
            retries.pulled(tuning, image, None, at);
            brought.push((image.to_string(), layers));
            true
        }
        Err(e) => {
            tracing::warn!(image, "pull failed: {e}");
            retries.pulled(tuning, image, Some(e), at);
            false
        }
    }
}

/// What is desired of every module: a target to run, or a hold.
pub struct Resolved {
    /// What each module wants: its desired container, or a hold or a pull.
    pub wants: BTreeMap<ModuleName, Want<Arc<Desired>>>,
    /// When a held module's image pull is tried again, by module.
    pub retry_at: BTreeMap<ModuleName, Instant>,
    /// The engine's images as the pass last listed them (what each
    /// container runs is named in the status by its repository digests).
    pub images: Images,
}

impl Resolved {
    /// Holds a module (its container is left as it is), saying why,
    /// whatever it wanted before.
    pub fn hold(&mut self, name: &ModuleName, why: &str) {
        self.wants.insert(
            name.clone(),
            Want::Hold {
                name: name.clone(),
                reason: why.to_string(),
            },
        );
    }

    /// Whether a module is stated (to run, held or waiting).
    pub fn contains(&self, name: &ModuleName) -> bool {
        self.wants.contains_key(name)
    }

    /// Marks a module to run as waiting for what it depends on.
    pub fn wait(&mut self, name: &ModuleName, why: &str) {
        let engine_restarts = self.desired(name).is_some_and(|d| {
            matches!(
                d.restart,
                crate::model::intention::RestartPolicy::Always
                    | crate::model::intention::RestartPolicy::UnlessStopped
            )
        });
        self.wants.insert(
            name.clone(),
            Want::Wait {
                name: name.clone(),
                reason: why.to_string(),
                engine_restarts,
            },
        );
    }

    /// The desired container of a module to run.
    pub fn desired(&self, name: &ModuleName) -> Option<&Desired> {
        match self.wants.get(name) {
            Some(Want::Run(d)) => Some(&**d),
            _ => None,
        }
    }

    /// The desired container of each module to run, in module order.
    pub fn running(&self) -> impl Iterator<Item = &Desired> {
        self.wants.values().filter_map(|w| match w {
            Want::Run(d) => Some(&**d),
            _ => None,
        })
    }

    /// The same, shared (to carry into a blocking task).
    pub fn shared(&self) -> impl Iterator<Item = &Arc<Desired>> {
        self.wants.values().filter_map(|w| match w {
            Want::Run(d) => Some(d),
            _ => None,
        })
    }

    /// The same, to complete (`Arc::make_mut` copies only the one changed).
    pub fn running_mut(&mut self) -> impl Iterator<Item = &mut Arc<Desired>> {
        self.wants.values_mut().filter_map(|w| match w {
            Want::Run(d) => Some(d),
            _ => None,
        })
    }
}

/// The engine's part of resolving.
pub struct EngineSide<'a, E> {
    /// The engine.
    pub engine: &'a E,
    /// The retry policy's state.
    pub retries: &'a mut Retries,
    /// Pulls under way.
    pub pulls: &'a mut Pulls,
    /// The backoff windows.
    pub tuning: &'a Tuning,
    /// This agent's id, for the label its containers carry.
    pub agent: &'a str,
    /// Where the output of a module without its own `logging` goes (not an
    /// input: a change applies at each module's next create).
    pub default_logging: Option<&'a crate::model::runtime::Logging>,
    /// Each module's last target.
    pub made: &'a mut Made,
    /// What this device opens the values sealed to it with (a constant of
    /// the agent's, as its node is).
    pub device: Option<&'a Device>,
    /// The key every input's digest is keyed with, when they are
    /// (`keyed_digests = true`).
    pub keyed: Option<&'a DigestKey>,
    /// The image policy's checks.
    pub gate: &'a mut crate::reconcile::gate::Gate,
}

/// Completes each module's target with its image ID. An image the engine
/// does not have is pulled in the background (at most one pull per image,
/// and with backoff after a failure); its modules wait for it, no one else
/// does. Only an engine that went away fails this.
pub async fn against_engine<E: Engine>(
    side: EngineSide<'_, E>,
    host: Vec<HostResolved>,
    node: &NodeId,
    files_dir: &Path,
    now: Instant,
) -> Result<Resolved, EngineError> {
    let EngineSide {
        engine,
        retries,
        pulls,
        tuning,
        agent,
        default_logging,
        made,
        device,
        keyed,
        gate,
    } = side;
    pulls.collect(retries, tuning);
    gate.collect(now);
    let mut images = Images::new(engine.list_images().await?);
    // `stead run --once`: every image checked, then every missing one
    // pulled now, together.
    if pulls.wait {
        for h in host.iter().filter(|h| h.read.is_ok()) {
            gate.admit(&h.intention.image, &images, now);
        }
        gate.join().await;
        let missing: BTreeSet<String> = host
            .iter()
            .filter(|h| h.read.is_ok())
            .filter_map(|h| match gate.admit(&h.intention.image, &images, now) {
                Admit::Free => images
                    .find(&h.intention.image)
                    .is_none()
                    .then(|| h.intention.image.clone()),
                Admit::Pull(pinned) => Some(pinned),
                _ => None,
            })
            .into_set();
        for image in &missing {
            if retries.pull_held_back(image, now).is_none() {
                pulls.start(engine, image);
            }
        }
        if pulls.join(retries, tuning).await {
            images = Images::new(engine.list_images().await?);
        }
    }
    // The targets of modules gone (or held before resolving) are forgotten.
    let named: BTreeSet<&ModuleName> = host.iter().map(|h| &h.name).into_set();
    // The image references named, whose checks are kept.
    let references: BTreeSet<String> = host.iter().map(|h| h.intention.image.clone()).into_set();
    made.keep(|n| named.contains(n));
    let mut missing = BTreeSet::new();
    let mut out = Resolved {
        wants: BTreeMap::new(),
        retry_at: BTreeMap::new(),
        images: Images::default(),
    };
    for HostResolved {
        name,
        intention: i,
        read,
        overlaid,
        stated,
    } in host
    {
        let _acting = crate::host::panic::Acting::new(name.as_str());
        let read = match read {
            Ok(read) => read,
            Err(reason) => {
                out.hold(&name, &reason);
                continue;
            }
        };
        // What the image policy lets through: the reference as named, the
        // verified image, or its verified digest to pull.
        let image = match gate.admit(&i.image, &images, now) {
            Admit::Free => i.image.clone(),
            Admit::Run(id) => id,
            Admit::Pull(pinned) => pinned,
            Admit::Check(doing) => {
                out.wants.insert(name.clone(), Want::Pull { name, doing });
                continue;
            }
            Admit::Hold(why, at) => {
                if let Some(at) = at {
                    out.retry_at.insert(name.clone(), at);
                }
                out.hold(&name, &why);
                continue;
            }
        };
        let image_id = match images.find(&image).map(|img| spec::image_digest(&img.id)) {
            Some(Ok(id)) => id,
            Some(Err(e)) => {
                out.hold(&name, &format!("image: {e}"));
                continue;
            }
            None => {
                missing.insert(image.clone());
                if let Some(h) = retries.pull_held_back(&image, now) {
                    out.retry_at.insert(name.clone(), h.next_at);
                    out.hold(
                        &name,
                        &format!(
                            "image: {} is not present: the pull failed ({})",
                            image,
                            h.last_error.as_deref().unwrap_or("no reason given")
                        ),
                    );
                    continue;
                }
                if pulls.wait {
                    out.hold(
                        &name,
                        &format!(
                            "image: {} is not present: the pull brought no such image",
                            image
                        ),
                    );
                    continue;
                }
                if !pulls.in_flight.contains_key(&image) {
                    tracing::info!(
                        module = name.as_str(),
                        image = image.as_str(),
                        "image not present; pulling"
                    );
                    pulls.start(engine, &image);
                }
                let doing = format!("image {image} is being pulled");
                out.wants.insert(name.clone(), Want::Pull { name, doing });
                continue;
            }
        };
        let of = MadeOf {
            intention: &i,
            read: &read,
            overlaid,
            image_id: &image_id,
            logging: default_logging,
            agent,
            stated: stated.as_ref(),
        };
        match made.made(&name, of, |from| make(from, node, files_dir, device, keyed)) {
            Ok(d) => {
                out.wants.insert(name, Want::Run(d));
            }
            Err(reason) => out.hold(&name, &reason),
        }
    }
    // Images fetched ahead of a rollout's coming turn, behind the modules'.
    let ahead = pulls.fetch_ahead(engine, &images, &missing, retries, gate, now);
    // Backoffs of images that are no longer missing, or no longer named.
    retries.keep_pulls(&missing.iter().chain(&ahead).cloned().collect());
    let ahead_named = pulls.ahead.clone();
    gate.keep(
        &references
            .iter()
            .chain(&ahead_named)
            .map(String::as_str)
            .into_set(),
    );
    out.images = images;
    Ok(out)
}

/// A module's target made of what [`MadeFrom`] holds alone (and the agent's
/// constants).
fn make(
    from: &MadeFrom,
    node: &NodeId,
    files_dir: &Path,
    device: Option<&Device>,
    keyed: Option<&DigestKey>,
) -> Result<Desired, String> {
    let opened = open_sealed(&from.intention, device).map_err(|e| e.to_string())?;
    let inputs = assemble(&from.intention, &from.read, &opened).map_err(|e| match e {
        // The intention was checked when it was taken; an overlay layered
        // since may no longer merge into a changed file's config.
        ResolveError::Compose(e) if from.overlaid => {
            format!("settings overlay no longer applies: {e}")
        }
        e => e.to_string(),
    })?;
    let mut d = spec::desired(
        &from.intention,
        inputs,
        &from.image_id,
        node,
        files_dir,
        keyed,
    )?;
    d.secrets = opened.secrets();
    // Its lock directory, mounted read-write where it says (the path is
    // an input through the field; what is in the directory never is).
    if let Some(target) = &from.intention.runtime.update_lock {
        d.spec.mounts.push(crate::model::spec::BindMount {
            source: super::locks::lock_dir(files_dir, &from.intention.name)
                .to_string_lossy()
                .into_owned(),
            target: target.to_string(),
            read_only: false,
        });
    }
    // Written only when there is one: an unset runtime takes no memory.
    if d.spec.runtime.logging.is_none() && from.logging.is_some() {
        d.spec.runtime.logging = from.logging.clone();
    }
    d.spec
        .labels
        .insert(crate::model::labels::AGENT.to_string(), from.agent.clone());
    if let Some(stated) = &from.stated {
        d.spec
            .labels
            .insert(crate::model::labels::STATED.to_string(), stated.clone());
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::intention::DocFormat;
    use crate::model::names::Digest;

    fn intention(text: &str) -> Intention {
        Intention::parse(text, DocFormat::Toml, "t.toml").unwrap()
    }

    fn resolve(i: &Intention) -> Desired {
        let inputs = resolve_inputs(i, &mut FileDigester::new(), None).unwrap();
        spec::desired(
            i,
            inputs,
            &Digest::of(b"image"),
            &NodeId::try_from("n1").unwrap(),
            Path::new("/data/files"),
            None,
        )
        .unwrap()
    }

    /// A module of three values sealed to `to`'s device as node `node`:
    /// an env value, a setting in its config, a literal file.
    fn sealed_module(to: &crate::model::seal::LocalKey, node: &str, random: u8) -> Intention {
        use crate::model::sealed::{Binding, seal};
        let r = to.identity().recipient();
        let s = |field: &str, value: &[u8], n: u8| {
            let b = Binding {
                node,
                module: "db",
                field,
            };
            seal(
                &r,
                &b,
                value,
                &[random.wrapping_add(n); crate::model::age::RANDOM_LEN],
            )
            .unwrap()
        };
        let doc = serde_json::json!({
            "name": "db",
            "image": "x",
            "env": {"MODE": "prod", "DB_PASSWORD": {"sealed": s("env.DB_PASSWORD", b"hunter2-env", 1)}},
            "config": {"path": "/etc/app.json", "format": "json", "defaults": {"db": {"host": "h"}}},
            "settings": {"db.password": {"sealed": s("settings.db.password", b"hunter2-setting", 2)}},
            "files": [{"path": "/etc/key.pem", "content": {"sealed": s("files./etc/key.pem", b"hunter2-file", 3)}}],
        });
        Intention::from_value(&doc, "t").unwrap()
    }

    /// A fetch ahead whose image the engine holds already (it loaded it;
    /// the fetch is tagging it and counting it) is left to end; one whose
    /// image is no longer ahead is stopped. Found under load: the pass the
    /// load woke stopped the fetch before it said it brought the image.
    #[tokio::test]
    async fn a_fetch_ahead_is_left_to_end_once_its_image_is_here_and_stopped_once_not_ahead() {
        let engine = crate::engine::fake::Fake::default();
        let image = "registry.example/app:2".to_string();
        let here = Images::new(vec![crate::engine::image::Image {
            id: "sha256:aa".into(),
            tags: vec![image.clone()],
            digests: vec![],
            size: 1,
            created: 0,
        }]);
        let mut pulls = Pulls {
            ahead: [image.clone()].into(),
            ..Pulls::default()
        };
        // A fetch under way.
        let task = tokio::spawn(async {
            std::future::pending::<()>().await;
            (Ok(Vec::new()), Instant::now())
        });
        pulls.in_flight.insert(image.clone(), task);
        pulls.started_ahead.insert(image.clone(), image.clone());
        let (retries, mut gate, now) = (
            Retries::default(),
            crate::reconcile::gate::Gate::default(),
            Instant::now(),
        );
        let missing = BTreeSet::new();
        let pulling = pulls.fetch_ahead(&engine, &here, &missing, &retries, &mut gate, now);
        assert!(pulling.is_empty());
        assert_eq!(
            pulls.ahead_here,
            Some(crate::model::fetch::Ahead { images: 1, here: 1 })
        );
        assert!(pulls.in_flight.contains_key(&image), "left to end");
        // The image leaves the set: its fetch stops.
        pulls.ahead.clear();
        pulls.fetch_ahead(&engine, &here, &missing, &retries, &mut gate, now);
        assert!(!pulls.in_flight.contains_key(&image), "stopped");
        assert!(pulls.started_ahead.is_empty());
    }

    #[test]
    fn sealed_values_open_into_the_container_alone_with_digests_keyed_by_the_device() {
        use crate::model::seal::LocalKey;
        let key = LocalKey::from_bytes([1; 32]);
        let device = key.device("edge-1");
        let i = sealed_module(&key, "edge-1", 10);
        let inputs = resolve_inputs(&i, &mut FileDigester::new(), Some(&device)).unwrap();
        // In the env and the files, opened.
        assert!(
            inputs
                .env
                .contains(&("DB_PASSWORD".into(), "hunter2-env".into()))
        );
        assert!(inputs.env.contains(&("MODE".into(), "prod".into())));
        let config = String::from_utf8(inputs.files[0].content.clone()).unwrap();
        assert!(
            config.contains("\"password\": \"hunter2-setting\""),
            "{config}"
        );
        assert_eq!(inputs.files[1].content, b"hunter2-file");
        // No digest is one a guess could be checked against off the device.
        let guessable = [
            Digest::of(&inputs.files[0].content),
            Digest::of(b"hunter2-file"),
            Digest::canonical(
                "env",
                &BTreeMap::from([("DB_PASSWORD", "hunter2-env"), ("MODE", "prod")]),
            ),
        ];
        for d in inputs.digests.values() {
            assert!(!guessable.contains(d), "{d}");
        }
        // Sealed again (other randomness), the same values: the same
        // digests, so nothing is made again.
        let again = sealed_module(&key, "edge-1", 20);
        assert_ne!(again, i);
        let inputs_again = resolve_inputs(&again, &mut FileDigester::new(), Some(&device)).unwrap();
        assert_eq!(inputs_again.digests, inputs.digests);
        // The recorded spec says `(sealed)` for the env value.
        let d = spec::desired(
            &i,
            inputs,
            &Digest::of(b"image"),
            &NodeId::try_from("edge-1").unwrap(),
            Path::new("/data/files"),
            None,
        )
        .unwrap();
        let recorded = d.spec_recorded();
        assert!(
            recorded
                .env
                .contains(&("DB_PASSWORD".into(), "(sealed)".into()))
        );
        assert!(recorded.env.contains(&("MODE".into(), "prod".into())));
        assert!(!format!("{:?}", d.spec.labels).contains("hunter2"));
        // Another device's key, another node, no key: refused, naming the
        // field and never the value.
        let other = LocalKey::from_bytes([2; 32]);
        #[rustfmt::skip]
        let cases = [
            (Some(other.device("edge-1")), "env.DB_PASSWORD: a sealed value does not open: not sealed to this device's key"),
            (Some(key.device("edge-2")), "env.DB_PASSWORD: a value sealed for node edge-1, module db, field env.DB_PASSWORD, not here"),
            (None, "env.DB_PASSWORD: a sealed value, opened only by the agent on its device"),
        ];
        for (device, says) in cases {
            let e = resolve_inputs(&i, &mut FileDigester::new(), device.as_ref())
                .unwrap_err()
                .to_string();
            assert!(e.starts_with(says), "{e}");
            assert!(!e.contains("hunter2"), "{e}");
        }
    }

    #[test]
    fn keyed_digests_are_made_from_the_plain_ones_so_a_running_container_is_compared_in_their_terms()
     {
        use crate::model::labels::Labels;
        use crate::model::names::DigestKey;
        let i = intention(
            "name = \"m\"\nimage = \"x\"\nenv = { A = \"1\" }\n[[files]]\npath = \"/f\"\ncontent = \"pw\"\n",
        );
        let make = |keyed: Option<&DigestKey>| {
            let inputs = resolve_inputs(&i, &mut FileDigester::new(), None).unwrap();
            let node = NodeId::try_from("n1").unwrap();
            spec::desired(
                &i,
                inputs,
                &Digest::of(b"image"),
                &node,
                Path::new("/f"),
                keyed,
            )
            .unwrap()
        };
        let (k, other) = (DigestKey([7; 32]), DigestKey([8; 32]));
        let (plain, keyed) = (make(None), make(Some(&k)));
        // Every input's label is another digest, and none is the plain one.
        assert_eq!(keyed.inputs.len(), plain.inputs.len());
        for (name, d) in &keyed.inputs {
            assert_ne!(Some(d), plain.inputs.get(name), "{name}");
        }
        assert_eq!(keyed.spec.labels["stead.digests"], "keyed");
        assert!(!plain.spec.labels.contains_key("stead.digests"));
        assert_ne!(make(Some(&other)).digest, keyed.digest);
        // A container made plain, read in keyed terms, is the keyed target:
        // turning keyed digests on makes nothing again.
        let running = Labels::parse(&plain.spec.labels).keyed_with(&k);
        assert_eq!(running.digest.as_ref(), Some(&keyed.digest));
        assert_eq!(running.inputs, keyed.inputs);
        assert!(running.keyed);
        // One made keyed is read as it is; one whose spec digest is not the
        // one over its inputs still matches nothing.
        let again = Labels::parse(&keyed.spec.labels).keyed_with(&k);
        assert_eq!(again.digest.as_ref(), Some(&keyed.digest));
        let mut odd = plain.spec.labels.clone();
        odd.insert("stead.digest".into(), Digest::of(b"other").to_string());
        let odd = Labels::parse(&odd).keyed_with(&k);
        assert_eq!(odd.digest, Some(Digest::of(b"other")));
        // Turned off again, a keyed container is another digest: it is
        // made again once, with plain digests (docs/intentions.md).
        assert_ne!(
            Labels::parse(&keyed.spec.labels).digest.as_ref(),
            Some(&plain.digest)
        );
    }

    #[test]
    fn every_input_moves_the_digest_and_only_its_own_label() {
        let d = tempfile::tempdir().unwrap();
        let env = d.path().join("s.env");
        std::fs::write(&env, "A=1\n").unwrap();
        let model = d.path().join("model.bin");
        std::fs::write(&model, "m1").unwrap();
        let base = format!(
            "name = \"m\"\nimage = \"x\"\nenv_files = [{env:?}]\n[config]\npath = \"/c.json\"\nformat = \"json\"\ndefaults = {{ a = 1 }}\n[[mounts]]\nsource = {model:?}\ntarget = \"/model.bin\"\nread_only = true\n"
        );
        let one = resolve(&intention(&base));
        assert_eq!(
            one.digest,
            resolve(&intention(&base)).digest,
            "deterministic"
        );

        let changed = |a: &Desired, b: &Desired| -> Vec<String> {
            spec::moved(&a.inputs, &b.inputs)
                .into_iter()
                .map(|m| m.input)
                .collect()
        };

        std::fs::write(&env, "A=2\n").unwrap();
        let two = resolve(&intention(&base));
        assert_ne!(one.digest, two.digest);
        assert_eq!(changed(&one, &two), [format!("env_file:{}", env.display())]);
        assert!(two.spec.env.contains(&("A".into(), "2".into())));

        std::fs::write(&model, "m2").unwrap();
        let three = resolve(&intention(&base));
        assert_eq!(changed(&two, &three), ["mount:/model.bin"]);

        let four = resolve(&intention(&format!("{base}[settings]\na = 2\n")));
        assert_eq!(changed(&three, &four), ["config:/c.json"]);

        let five = resolve(&intention(
            &base.replace("image = \"x\"", "image = \"x\"\ncommand = [\"sh\"]"),
        ));
        assert_eq!(changed(&three, &five), ["command"]);
        let labels = crate::model::labels::Labels::parse(&five.spec.labels);
        assert_eq!(labels.inputs, five.inputs);
        assert_eq!(labels.digest, Some(five.digest.clone()));
    }

    #[test]
    fn unset_and_default_encode_the_same() {
        let a = resolve(&intention("name = \"m\"\nimage = \"x\""));
        let b = resolve(&intention(
            "name = \"m\"\nimage = \"x\"\ncommand = []\nrestart = \"no\"\non_drift = \"recreate\"\nenv = {}",
        ));
        assert_eq!(a.digest, b.digest);
        let c = resolve(&intention(
            "name = \"m\"\nimage = \"x\"\nports = [\"8080:80\"]",
        ));
        let d = resolve(&intention(
            "name = \"m\"\nimage = \"x\"\nports = [\"0.0.0.0:8080:80/tcp\"]",
        ));
        assert_eq!(c.digest, d.digest);
    }

    #[test]
    fn rw_mounts_are_state_not_inputs() {
        let d = tempfile::tempdir().unwrap();
        let t = format!(
            "name = \"m\"\nimage = \"x\"\n[[mounts]]\nsource = {:?}\ntarget = \"/data\"\n",
            d.path()
        );
        let a = resolve(&intention(&t));
        std::fs::write(d.path().join("state"), "x").unwrap();
        assert_eq!(a.digest, resolve(&intention(&t)).digest);
    }

    #[test]
    fn a_target_is_made_again_exactly_when_what_it_is_made_from_moves() {
        let name = ModuleName::try_from("m").unwrap();
        let i = Arc::new(intention("name = \"m\"\nimage = \"x\""));
        let other = Arc::new(intention("name = \"m\"\nimage = \"x\"\ncommand = [\"sh\"]"));
        let read = HostRead {
            env_files: Vec::new(),
            mounts: Vec::new(),
        };
        let moved_read = HostRead {
            env_files: Vec::new(),
            mounts: vec![(
                spec::mount_input(&crate::model::names::AbsPath::try_from("/m").unwrap()),
                Digest::of(b"m"),
            )],
        };
        let (id, id2) = (Digest::of(b"image"), Digest::of(b"image2"));
        let logging = crate::model::runtime::Logging {
            driver: "local".into(),
            options: BTreeMap::new(),
        };
        let stated = "sealed".to_string();
        let base = || MadeOf {
            intention: &i,
            read: &read,
            overlaid: false,
            image_id: &id,
            logging: None,
            agent: "a1",
            stated: None,
        };
        let node = NodeId::try_from("n1").unwrap();
        let mut made = Made::default();
        let target = |made: &mut Made, of: MadeOf<'_>| {
            made.made(&name, of, |from| {
                make(from, &node, Path::new("/f"), None, None)
            })
            .unwrap()
        };
        let first = target(&mut made, base());
        let cases: Vec<(&str, MadeOf<'_>)> = vec![
            (
                "the intention",
                MadeOf {
                    intention: &other,
                    ..base()
                },
            ),
            (
                "what was read of the host",
                MadeOf {
                    read: &moved_read,
                    ..base()
                },
            ),
            (
                "an overlay",
                MadeOf {
                    overlaid: true,
                    ..base()
                },
            ),
            (
                "the image",
                MadeOf {
                    image_id: &id2,
                    ..base()
                },
            ),
            (
                "the node's logging",
                MadeOf {
                    logging: Some(&logging),
                    ..base()
                },
            ),
            (
                "the agent",
                MadeOf {
                    agent: "a2",
                    ..base()
                },
            ),
            (
                "the statement",
                MadeOf {
                    stated: Some(&stated),
                    ..base()
                },
            ),
        ];
        for (what, of) in cases {
            let before = made.makes();
            let again = target(&mut made, of);
            assert_eq!(made.makes(), before + 1, "{what} moved: made again");
            assert!(!Arc::ptr_eq(&again, &first), "{what}");
            let kept = target(&mut made, base());
            assert_eq!(kept.digest, first.digest, "{what}: back as it was");
        }
        // The same intention, parsed again (not the same allocation), is
        // the same.
        let before = made.makes();
        let same = Arc::new((*i).clone());
        let kept = target(
            &mut made,
            MadeOf {
                intention: &same,
                ..base()
            },
        );
        assert_eq!(made.makes(), before, "nothing moved: nothing made");
        assert_eq!(kept.digest, first.digest);
    }

    #[test]
    fn a_missing_env_file_holds_the_module_naming_it() {
        let i = intention("name = \"m\"\nimage = \"x\"\nenv_files = [\"/nonexistent/stead.env\"]");
        let e = resolve_inputs(&i, &mut FileDigester::new(), None).unwrap_err();
        assert!(
            matches!(&e, ResolveError::Input { input, .. } if input == "env_file:/nonexistent/stead.env"),
            "{e:?}"
        );
    }
}
