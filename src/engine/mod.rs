//! The container engine: what the reconciler asks of one ([`Engine`]), the
//! typed observation of its containers ([`observed`]), finding images by
//! reference ([`image`]), the Docker Engine API implementation ([`docker`],
//! with what it says and reads typed in [`wire`] and carried over the unix
//! socket by [`socket`]) and, for unit tests, a fake engine ([`fake`])
//! beside the trait.

use std::future::Future;

pub mod docker;
#[cfg(test)]
pub mod fake;
pub mod image;
pub mod observed;
pub mod socket;
pub mod wire;

pub use image::Image;
pub use observed::{ContainerState, Observed};

use crate::model::spec::ContainerSpec;

/// An engine call that failed.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The engine did not answer: socket absent, connection refused or
    /// reset, timeout. The agent waits with backoff.
    #[error("engine not reachable: {0}")]
    Unreachable(String),
    /// The engine answered that the object does not exist.
    #[error("not found: {0}")]
    NotFound(String),
    /// The engine answered with a conflict (a name in use, a container
    /// being removed).
    #[error("conflict: {0}")]
    Conflict(String),
    /// A long call (an image pull) did not finish in its time; the engine
    /// itself answers.
    #[error("{0}")]
    TimedOut(String),
    /// The engine in use cannot do what a spec asks (a field, a log
    /// driver): refused before the engine is asked, so nothing is dropped
    /// silently.
    #[error("{engine} does not support {what}")]
    Unsupported {
        /// The engine, as `Podman 4.3.1`.
        engine: String,
        /// What it cannot do, naming the field.
        what: String,
    },
    /// The engine refused the request.
    #[error("engine refused ({status}): {message}")]
    Refused {
        /// The HTTP status.
        status: u16,
        /// The engine's message.
        message: String,
    },
}

impl EngineError {
    /// A call that took longer than it may: the engine accepted it and
    /// did not answer, so it counts as away.
    pub fn no_answer(op: &str, limit: std::time::Duration) -> EngineError {
        EngineError::Unreachable(format!("{op}: no answer within {}s", limit.as_secs()))
    }

    /// Whether the engine itself is away (as opposed to refusing one call).
    pub fn is_unreachable(&self) -> bool {
        matches!(self, EngineError::Unreachable(_))
    }
}

/// What an inspect says of a container's life, for settling and crash-loop
/// detection.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Life {
    /// How many times the engine restarted it.
    pub restart_count: u32,
    /// When it last started, nanoseconds since the epoch (0: never).
    pub started_ns: i64,
    /// When it last stopped, nanoseconds since the epoch (0: never).
    pub finished_ns: i64,
    /// Its last exit code.
    pub exit_code: i64,
    /// The engine is about to start it again (its restart count already
    /// says so).
    pub restarting: bool,
    /// What its health check's last probe printed, while it is unhealthy
    /// (clipped).
    pub health_output: Option<String>,
}

/// Which of a container's logs to read ([`Engine::logs`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LogRange {
    /// From then on, seconds since the epoch.
    pub since: Option<u64>,
    /// Up to then, seconds since the epoch.
    pub until: Option<u64>,
    /// Only the last this many lines.
    pub tail: Option<u32>,
}

/// A registry login for the engine's pull (its `X-Registry-Auth`).
#[derive(Clone, PartialEq, Eq)]
pub struct PullAuth {
    /// The user.
    pub username: String,
    /// The password or token.
    pub password: String,
    /// The registry.
    pub server: String,
}

impl std::fmt::Debug for PullAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PullAuth({:?} at {:?})", self.username, self.server)
    }
}

/// One event of a container this node manages, parsed once from the
/// engine's event stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContainerEvent {
    /// The container.
    pub id: String,
    /// What happened.
    pub action: EventAction,
    /// When, nanoseconds since the epoch.
    pub at_ns: i64,
}

/// What happened to a container, as far as its life is concerned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventAction {
    /// It started (created, restarted by its policy, or started by hand).
    Start,
    /// Its process ended with this exit code.
    Die(i64),
    /// It was removed.
    Destroy,
    /// Its health check ran (Podman says each run, the Docker Engine each
    /// change of its health).
    Health,
    /// Anything else (stopped, paused, out of memory): a reason to look
    /// again, nothing to count.
    Other,
}

/// Which engine answers on the socket. The Docker Engine API is the one
/// spoken; Podman's compatible service differs in ways this layer handles
/// (image names, log drivers, fields it does not take).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Flavour {
    /// The Docker Engine.
    #[default]
    Docker,
    /// Podman's Docker-compatible service, with its version.
    Podman(String),
}

/// The log files kept per container where stead.toml does not say.
pub const DOCKER_LOG_FILES: u32 = 3;

impl Flavour {
    /// Its name among a device's facts: `docker` or `podman`.
    pub fn kind(&self) -> &'static str {
        match self {
            Flavour::Docker => "docker",
            Flavour::Podman(_) => "podman",
        }
    }

    /// The node's logging on this engine, for modules without their own.
    /// Rotating files are the `local` driver on the Docker Engine, with 3
    /// files unless told; on Podman (which has no `local`) `json-file`, its
    /// own k8s-file format, which keeps one file per container: `max-file`
    /// is passed only when stead.toml names it (and Podman refuses it).
    pub fn node_logging(
        &self,
        l: &crate::model::runtime::NodeLogging,
    ) -> crate::model::runtime::Logging {
        use crate::model::runtime::NodeLogging;
        match l {
            NodeLogging::Rotate {
                driver,
                max_size,
                max_file,
            } => {
                let mut options = std::collections::BTreeMap::new();
                options.insert("max-size".to_string(), max_size.clone());
                let (own, files) = match self {
                    Flavour::Docker => ("local", Some(max_file.unwrap_or(DOCKER_LOG_FILES))),
                    Flavour::Podman(_) => ("json-file", *max_file),
                };
                if let Some(n) = files {
                    options.insert("max-file".to_string(), n.to_string());
                }
                crate::model::runtime::Logging {
                    driver: driver.clone().unwrap_or_else(|| own.to_string()),
                    options,
                }
            }
            NodeLogging::Driver(l) => l.clone(),
        }
    }
}

impl std::fmt::Display for Flavour {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Flavour::Docker => f.write_str("the Docker Engine"),
            Flavour::Podman(v) => write!(f, "Podman {v}"),
        }
    }
}

/// What the reconciler asks of a container engine. A handle is cheap to
/// clone, so a long call (a pull) can run apart from the pass.
pub trait Engine: Clone + Send + Sync + 'static {
    /// Which engine this is (learnt when connecting).
    fn flavour(&self) -> Flavour;
    /// The engine's own version, as it said when connecting.
    fn engine_version(&self) -> String;
    /// Where the engine keeps its images and containers (its data root,
    /// learnt when connecting), when it says.
    fn data_root(&self) -> Option<std::path::PathBuf>;
    /// Checks the engine answers.
    fn ping(&self) -> impl Future<Output = Result<(), EngineError>> + Send;
    /// Every container, running or not, managed or not: one call.
    fn list_containers(&self) -> impl Future<Output = Result<Vec<Observed>, EngineError>> + Send;
    /// Every image: one call.
    fn list_images(&self) -> impl Future<Output = Result<Vec<Image>, EngineError>> + Send;
    /// Reads a container's restart count and start and stop times.
    fn inspect(&self, id: &str) -> impl Future<Output = Result<Life, EngineError>> + Send;
    /// Pulls an image reference from its registry, with a login for it
    /// when there is one.
    fn pull(
        &self,
        reference: &str,
        auth: Option<PullAuth>,
    ) -> impl Future<Output = Result<(), EngineError>> + Send;
    /// An image's ID and its layers by diff ID, base first (its
    /// `RootFS`), by any of its names or its ID.
    fn image_root(
        &self,
        name: &str,
    ) -> impl Future<Output = Result<(String, Vec<String>), EngineError>> + Send;
    /// Loads an image archive ([`crate::model::archive`]) as it streams
    /// from `archive`; says what the engine says it loaded (IDs or names).
    fn load(
        &self,
        archive: socket::Channel,
    ) -> impl Future<Output = Result<Vec<String>, EngineError>> + Send;
    /// An image as an archive (`GET /images/{id}/get`), its body still
    /// to be read: the layers of an image held here, which a layer
    /// rebuilt from chunks reuses ([`crate::registry::chunks`]).
    fn export(
        &self,
        id: &str,
    ) -> impl Future<Output = Result<hyper::body::Incoming, EngineError>> + Send;
    /// Names the image `id` `repo:tag`.
    fn tag(
        &self,
        id: &str,
        repo: &str,
        tag: &str,
    ) -> impl Future<Output = Result<(), EngineError>> + Send;
    /// Creates a container; returns its ID.
    fn create(
        &self,
        spec: &ContainerSpec,
    ) -> impl Future<Output = Result<String, EngineError>> + Send;
    /// Starts a container (starting a running one is not an error).
    fn start(&self, id: &str) -> impl Future<Output = Result<(), EngineError>> + Send;
    /// Follows the engine's events for the containers `node` manages (a
    /// container started, stopped, died, removed, ran out of memory, or
    /// changed health) from `since_ns` on (the engine replays what happened
    /// since, so subscribing leaves no gap), calling `on_event` for each,
    /// until the stream ends; returns why it ended.
    fn watch(
        &self,
        node: &str,
        since_ns: i64,
        on_event: impl Fn(ContainerEvent) + Send + Sync + 'static,
    ) -> impl Future<Output = EngineError> + Send;
    /// Stops a container (with a grace period); one already stopped is not
    /// an error.
    fn stop(&self, id: &str) -> impl Future<Output = Result<(), EngineError>> + Send;
    /// Gives a container a new name.
    fn rename(&self, id: &str, name: &str) -> impl Future<Output = Result<(), EngineError>> + Send;
    /// A container's logs (stdout and stderr, each line stamped with its
    /// time), from `since` to `until` (seconds since the epoch; unset:
    /// from the start, to now), or only its last `tail` lines: at most
    /// [`crate::model::logs::MAX_LOG_BYTES`], then [`crate::model::logs::CUT`].
    fn logs(
        &self,
        id: &str,
        range: LogRange,
    ) -> impl Future<Output = Result<Vec<u8>, EngineError>> + Send;
    /// Sends a running container's process a signal (`SIGHUP`).
    fn signal(
        &self,
        id: &str,
        signal: &str,
    ) -> impl Future<Output = Result<(), EngineError>> + Send;
    /// Stops (with a grace period) and removes a container; one already gone
    /// is not an error.
    fn remove(&self, id: &str) -> impl Future<Output = Result<(), EngineError>> + Send;
    /// Removes an image by one of its names or its ID, never forced: the
    /// engine refuses (a conflict) while a container uses it. A name
    /// removes that name; the image goes with its last name.
    fn remove_image(&self, name: &str) -> impl Future<Output = Result<(), EngineError>> + Send;
}
