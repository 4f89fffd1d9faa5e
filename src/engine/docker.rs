//! The [`Engine`] on the Docker Engine API (Podman's compatible socket too)
//! over a unix socket: which calls the agent makes and what it makes of
//! their answers, parsed here, once, into typed observations. The calls'
//! bodies and answers are [`super::wire`]; how they travel,
//! [`super::socket`].

use crate::model::sort::Insert as _;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;

use base64::Engine as _;
use http::Method;

use super::socket;
use super::wire;
use crate::engine::{
    ContainerEvent, ContainerState, Engine, EngineError, EventAction, Flavour, Image, Life,
    Observed, PullAuth,
};
use crate::model::intention::RestartPolicy;
use crate::model::labels::Labels;
use crate::model::runtime::NetworkMode;
use crate::model::spec::ContainerSpec;
use crate::model::time::parse_engine_time_ns;

/// The newest Engine API version the agent speaks: it speaks the engine's
/// own when that is older, and this one to an engine that is newer (an
/// engine answers the versions before its own, down to its oldest:
/// Docker 29's is 1.44).
const NEWEST_API: (u32, u32) = (1, 53);

/// Reads one event of the engine's stream; `None` for one without a
/// container id.
fn container_event(msg: &wire::Event) -> Option<ContainerEvent> {
    let actor = msg.actor.as_ref()?;
    let id = actor.id.clone().filter(|i| !i.is_empty())?;
    let at_ns = msg
        .time_nano
        .or_else(|| msg.time.and_then(|t| t.checked_mul(1_000_000_000)))
        .unwrap_or(0);
    let action = match msg.action.as_deref() {
        Some("start") => EventAction::Start,
        Some("die") => EventAction::Die(
            actor
                .attributes
                .as_ref()
                // Podman's name for it.
                .and_then(|a| a.get("exitCode").or_else(|| a.get("containerExitCode")))
                .and_then(|c| c.parse().ok())
                .unwrap_or(0),
        ),
        // Podman's word for it.
        Some("destroy" | "remove") => EventAction::Destroy,
        Some(a) if a.starts_with("health_status") => EventAction::Health,
        _ => EventAction::Other,
    };
    Some(ContainerEvent { id, action, at_ns })
}

/// The Docker Engine API over a unix socket.
#[derive(Clone)]
pub struct DockerEngine {
    /// The engine's socket.
    socket: Arc<Path>,
    /// The API version spoken, `1.41`.
    version: Arc<str>,
    /// Held while a network is looked for and made: an engine before API
    /// 1.44 makes a second network of the same name when two creates race.
    networks: Arc<tokio::sync::Mutex<()>>,
    flavour: Flavour,
    /// The engine's own version, as it said when connecting (`28.5.1`).
    engine_version: Arc<str>,
    /// Its data root, as its info said when connecting.
    data_root: Option<Arc<Path>>,
}

/// How long each kind of call may take.
pub mod limits {
    use std::time::Duration;
    /// A ping, a list, an inspect.
    pub const QUICK: Duration = Duration::from_secs(30);
    /// A create, a start, a rename.
    pub const ACT: Duration = Duration::from_secs(60);
    /// A stop or a remove: an act and the longest grace a container may
    /// have to stop ([`crate::model::runtime::MAX_STOP_GRACE`]).
    pub const STOP: Duration =
        Duration::from_secs(60 + crate::model::runtime::MAX_STOP_GRACE.as_secs());
    /// A whole image pull.
    pub const PULL: Duration = Duration::from_secs(900);
}

/// Runs one engine call within its limit; past it, the engine counts as
/// away.
async fn within<T>(
    limit: std::time::Duration,
    op: &str,
    call: impl std::future::Future<Output = Result<T, EngineError>>,
) -> Result<T, EngineError> {
    tokio::time::timeout(limit, call)
        .await
        .unwrap_or_else(|_| Err(EngineError::no_answer(op, limit)))
}

/// Reads a streamed answer (a pull's, a load's) to its end, handing each
/// line's `stream` text to `said`: the engine says a failure inside its
/// answer, on a line of its own, which ends it as a refusal.
async fn streamed(
    answer: hyper::body::Incoming,
    what: &str,
    mut said: impl FnMut(&str),
) -> Result<(), EngineError> {
    let mut lines = socket::Lines::of(answer);
    while let Some(line) = lines.next().await {
        let line: wire::StreamLine = wire::read(what, &line?)?;
        if let Some(e) = line.error_detail.and_then(|d| d.message).or(line.error) {
            return Err(EngineError::Refused {
                status: 0,
                message: e,
            });
        }
        if let Some(s) = line.stream.as_deref() {
            said(s);
        }
    }
    Ok(())
}

impl DockerEngine {
    /// `path` in the API version spoken.
    fn versioned(&self, path: &str) -> String {
        format!("/v{}{path}", self.version)
    }

    /// One call of the API version spoken; its whole answer.
    async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<Vec<u8>>,
    ) -> Result<bytes::Bytes, EngineError> {
        socket::call(&self.socket, method, &self.versioned(path), body).await
    }

    /// `GET /containers/{id}/json`.
    async fn inspect_container(&self, id: &str) -> Result<wire::Inspected, EngineError> {
        let path = format!("/containers/{}/json", socket::path(id));
        wire::read(
            "the container's inspect",
            &self.call(Method::GET, &path, None).await?,
        )
    }

    /// `GET /networks/{name}`.
    async fn inspect_network(&self, name: &str) -> Result<wire::Network, EngineError> {
        let path = format!("/networks/{}", socket::path(name));
        wire::read(
            "the network's inspect",
            &self.call(Method::GET, &path, None).await?,
        )
    }

    /// Makes a user-defined network, labelled as this node's, unless it
    /// exists.
    async fn ensure_network(
        &self,
        name: &str,
        labels: &BTreeMap<String, String>,
    ) -> Result<(), EngineError> {
        let _one_at_a_time = self.networks.lock().await;
        match self.inspect_network(name).await {
            Ok(_) => return Ok(()),
            Err(EngineError::NotFound(_)) => {}
            Err(e) => return Err(e),
        }
        let body = wire::body(
            "the network",
            &wire::NetworkCreate {
                name,
                driver: "bridge",
                labels,
            },
        )?;
        match self.call(Method::POST, "/networks/create", body).await {
            // Made by someone else meanwhile.
            Ok(_) | Err(EngineError::Conflict(_)) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// On Podman, refuses a user network whose containers cannot resolve
    /// each other's names (CNI without its dnsname plugin), naming the
    /// network backend and what to install: a module would otherwise wait
    /// for a peer it never finds. One of this node's that no container is
    /// in yet is removed, so that it is made again, with DNS, once the
    /// plugin is there.
    async fn check_network_names(&self, name: &str, node: &str) -> Result<(), EngineError> {
        let Flavour::Podman(version) = &self.flavour else {
            return Ok(());
        };
        let libpod = |path: String| {
            let path = format!("/v{}/libpod{path}", socket::query(version));
            async move { socket::call(&self.socket, Method::GET, &path, None).await }
        };
        // Only a network that says it has no DNS is refused: an answer
        // that does not say (before Podman 4) or does not come is no reason
        // to hold a module back.
        let said = match libpod(format!("/networks/{}/json", socket::query(name))).await {
            Ok(body) => {
                wire::read::<wire::LibpodNetwork>(&format!("Podman's network {name}"), &body)
            }
            Err(e) => Err(e),
        };
        match said {
            Ok(n) if n.dns_enabled == Some(false) => {}
            Ok(_) => return Ok(()),
            Err(e) if e.is_unreachable() => return Err(e),
            Err(e) => {
                tracing::warn!("network {name}: whether it resolves names is not known: {e}");
                return Ok(());
            }
        }
        let backend = match libpod("/info".into()).await {
            Ok(body) => wire::read::<wire::LibpodInfo>("Podman's info", &body)
                .map(|i| i.host.network_backend)
                .unwrap_or_default(),
            Err(_) => String::new(),
        };
        let Some(what) = podman_network_without_names(name, &backend, false) else {
            return Ok(());
        };
        self.remove_network_if_unused(name, node).await;
        Err(EngineError::Unsupported {
            engine: self.flavour.to_string(),
            what,
        })
    }

    /// Removes a network this node made once no container is in it; any
    /// failure leaves it for the next removal.
    async fn remove_network_if_unused(&self, name: &str, node: &str) {
        let Ok(n) = self.inspect_network(name).await else {
            return;
        };
        let ours = n
            .labels
            .as_ref()
            .and_then(|l| l.get(crate::model::labels::MANAGED_BY))
            .is_some_and(|m| m == node);
        if ours && n.containers.as_ref().is_none_or(BTreeMap::is_empty) {
            let path = format!("/networks/{}", socket::path(name));
            if let Err(e) = self.call(Method::DELETE, &path, None).await {
                tracing::debug!("network {name} not removed: {e}");
            } else {
                tracing::info!("network {name} removed: no container of this node is in it");
            }
        }
    }

    /// Stops (with its grace) and removes a container; one already gone is
    /// not an error.
    async fn remove_container(&self, id: &str) -> Result<(), EngineError> {
        within(limits::STOP, "remove", async {
            if let Err(e) = self.stop_now(id).await
                && e.is_unreachable()
            {
                return Err(e);
            }
            let rm = || {
                let path = format!("/containers/{}?force=true&v=false", socket::path(id));
                async move { self.call(Method::DELETE, &path, None).await }
            };
            match rm().await {
                Ok(_) | Err(EngineError::NotFound(_)) => Ok(()),
                // Podman keeps a container while another is in its network
                // stack (the Docker Engine removes it and the other's stack
                // dies with it): the other goes first when it is this
                // node's, and its module makes it again against the new
                // container.
                Err(EngineError::Refused { message, .. })
                    if message.contains("dependent containers") =>
                {
                    for dependent in self.sharing_the_stack_of(id).await? {
                        Box::pin(self.remove_container(&dependent)).await?;
                    }
                    match rm().await {
                        Ok(_) | Err(EngineError::NotFound(_)) => Ok(()),
                        Err(e) => Err(e),
                    }
                }
                Err(e) => Err(e),
            }
        })
        .await
    }

    /// `POST /containers/{id}/stop` without a `t`: the engine gives the
    /// container the grace it was created with (`stop_grace_period`, or
    /// its default 10 s). Already stopped is done (the engine's 304).
    async fn stop_now(&self, id: &str) -> Result<(), EngineError> {
        let path = format!("/containers/{}/stop", socket::path(id));
        self.call(Method::POST, &path, None).await.map(drop)
    }

    /// Every container, with the engine's list filters when given.
    async fn list(&self, filters: Option<&str>) -> Result<Vec<wire::Listed>, EngineError> {
        let query = match filters {
            Some(f) => format!("all=1&filters={}", socket::query(f)),
            None => "all=1".to_string(),
        };
        let body = self
            .call(Method::GET, &format!("/containers/json?{query}"), None)
            .await?;
        wire::read("the container list", &body)
    }

    /// Each container's health in the words of the Docker Engine's status
    /// line (`(healthy)`), which Podman's list leaves out: one filtered list
    /// per health state. A container whose health moved between two of
    /// those lists is in none of them, which would read as "no health
    /// check": the containers with one are listed first, and those the
    /// states missed are asked again (twice at most; then `starting`,
    /// which judges nothing).
    async fn podman_health(&self) -> Result<HashMap<String, &'static str>, EngineError> {
        const STATES: [(&str, &str); 3] = [
            ("starting", "(health: starting)"),
            ("healthy", "(healthy)"),
            ("unhealthy", "(unhealthy)"),
        ];
        let checked: Vec<String> = self
            .list(Some(r#"{"health":["starting","healthy","unhealthy"]}"#))
            .await?
            .into_iter()
            .map(|c| c.id)
            .collect();
        let mut health = HashMap::new();
        for _ in 0..3 {
            if checked.iter().all(|id| health.contains_key(id)) {
                break;
            }
            for (state, words) in STATES {
                let filter = format!("{{\"health\":[\"{state}\"]}}");
                for c in self.list(Some(&filter)).await? {
                    health.insert(c.id, words);
                }
            }
        }
        for id in checked {
            health.entry(id).or_insert(STATES[0].1);
        }
        Ok(health)
    }

    /// The containers in `id`'s network stack, when all of them are the
    /// same node's as `id`; else which one is not.
    async fn sharing_the_stack_of(&self, id: &str) -> Result<Vec<String>, EngineError> {
        let owner = |labels: Option<BTreeMap<String, String>>| {
            labels.and_then(|mut l| l.remove(crate::model::labels::MANAGED_BY))
        };
        let c = self.inspect_container(id).await?;
        let node = owner(c.config.labels);
        let joins = [
            format!("container:{}", c.id),
            format!("container:{}", c.name.trim_start_matches('/')),
        ];
        // The list does not say (on Podman) what stack a container is in:
        // each is looked at.
        let mut ids = Vec::new();
        for other in self.list(None).await? {
            let other_id = other.id;
            let Ok(o) = self.inspect_container(&other_id).await else {
                continue;
            };
            if !o
                .host_config
                .network_mode
                .is_some_and(|m| joins.contains(&m))
            {
                continue;
            }
            if node.is_none() || owner(o.config.labels) != node {
                return Err(EngineError::Conflict(format!(
                    "container {other_id} is in the network stack of {id} and is not this node's: remove it first"
                )));
            }
            ids.push(other_id);
        }
        Ok(ids)
    }

    /// Connects to the engine at a unix socket path (with or without
    /// `unix://`) and agrees on an API version with it.
    pub async fn connect(socket: &str) -> Result<DockerEngine, EngineError> {
        let path = socket.trim_start_matches("unix://");
        let socket: Arc<Path> = Path::new(path).into();
        if !socket.exists() {
            return Err(EngineError::Unreachable(format!(
                "socket {path} does not exist"
            )));
        }
        // One call (unversioned: it says which versions there are) says
        // both the API version to speak and which engine this is.
        let body = socket::call(&socket, Method::GET, "/version", None).await?;
        let version: wire::Version = wire::read("the engine's version", &body)?;
        let speak = speak(&version.api_version);
        let flavour = version
            .components
            .unwrap_or_default()
            .into_iter()
            .find(|c| c.name.starts_with("Podman"))
            .map_or(Flavour::Docker, |c| Flavour::Podman(c.version));
        let engine_version = match &flavour {
            Flavour::Podman(v) => v.clone(),
            Flavour::Docker => version.version.unwrap_or_default(),
        };
        let engine = DockerEngine {
            socket,
            version: speak.into(),
            networks: Default::default(),
            flavour,
            engine_version: engine_version.into(),
            data_root: None,
        };
        // Where its images are, for the disk's free space: an engine that
        // does not say is still an engine.
        let info = match engine.call(Method::GET, "/info", None).await {
            Ok(body) => wire::read::<wire::Info>("the engine's info", &body),
            Err(e) => Err(e),
        };
        let data_root = match info {
            Ok(i) => i
                .docker_root_dir
                .filter(|d| d.starts_with('/'))
                .map(|d| Path::new(&d).into()),
            Err(e) => {
                tracing::warn!("the engine's info does not say its data root: {e}");
                None
            }
        };
        Ok(DockerEngine {
            data_root,
            ..engine
        })
    }
}

/// The API version to speak to an engine whose newest is `theirs`
/// (`1.41`): theirs when it is older than [`NEWEST_API`], else that one.
fn speak(theirs: &str) -> String {
    let parsed = theirs
        .split_once('.')
        .and_then(|(a, b)| Some((a.parse::<u32>().ok()?, b.parse::<u32>().ok()?)));
    let (major, minor) = match parsed {
        Some(t) if t < NEWEST_API => t,
        _ => NEWEST_API,
    };
    format!("{major}.{minor}")
}

/// The log drivers Podman has.
const PODMAN_LOG_DRIVERS: [&str; 5] = ["json-file", "k8s-file", "journald", "none", "passthrough"];

/// What of a spec Podman's Docker-compatible service (4.x) would accept and
/// not apply, named: refused before the call rather than dropped.
/// The names a container answers to on each network it joins: its
/// module's, its aliases and its host name, each once.
fn network_aliases(spec: &ContainerSpec) -> Vec<String> {
    let r = &spec.runtime;
    let mut names: Vec<String> = spec
        .labels
        .get(crate::model::labels::MODULE)
        .into_iter()
        .chain(&r.aliases)
        .chain(&r.hostname)
        .cloned()
        .collect();
    crate::model::sort::sort(&mut names);
    names.dedup();
    names
}

pub fn podman_refuses(spec: &ContainerSpec) -> Option<String> {
    let r = &spec.runtime;
    if !r.device_cgroup_rules.is_empty() {
        return Some(
            "device_cgroup_rules (its Docker-compatible API drops them): name the devices in `devices`"
                .into(),
        );
    }
    if let Some(host) = r.extra_hosts.iter().find_map(|(h, a)| {
        a.iter()
            .any(|a| a == crate::model::runtime::HOST_GATEWAY)
            .then_some(h)
    }) {
        return Some(format!(
            "extra_hosts.{host} = \"host-gateway\" (it writes the words into /etc/hosts): name the address"
        ));
    }
    if r.healthcheck.as_ref().is_some_and(|h| h.test.is_empty()) {
        return Some(
            "a health check without a test (healthcheck.test: it keeps the image's check whole, without these timings): write the test"
                .into(),
        );
    }
    let l = r.logging.as_ref()?;
    if !PODMAN_LOG_DRIVERS.contains(&l.driver.as_str()) {
        return Some(format!(
            "the log driver {:?} (logging.driver: it has {})",
            l.driver,
            PODMAN_LOG_DRIVERS.join(", ")
        ));
    }
    l.options
        .keys()
        .find(|k| !matches!(k.as_str(), "max-size" | "tag" | "path"))
        .map(|k| {
            format!(
                "the log option {k:?} (logging.options: it takes max-size, tag and path, and keeps one file per container)"
            )
        })
}

/// Why the modules on a Podman user network could not reach each other by
/// name, from its network backend (libpod's `host.networkBackend`) and the
/// network's `dns_enabled`; `None` when they can.
fn podman_network_without_names(network: &str, backend: &str, dns_enabled: bool) -> Option<String> {
    if dns_enabled {
        return None;
    }
    Some(match backend {
        "cni" => format!(
            "module names on the user network {network:?}: its network backend is CNI, without the dnsname plugin; install netavark and aardvark-dns and set network_backend = \"netavark\" in [network] of the service's containers.conf (or install the CNI dnsname plugin, Debian's golang-github-containernetworking-plugin-dnsname)"
        ),
        "netavark" => format!(
            "module names on the user network {network:?}: it was made with DNS disabled; remove it and it is made again with DNS"
        ),
        other => format!(
            "module names on the user network {network:?}: it has no DNS (network backend {other:?})"
        ),
    })
}

/// Podman names an image it loaded or built without a registry
/// `localhost/<name>`, where the Docker Engine names it `<name>`: on
/// Podman such an image also answers to `<name>`, so an intention names it
/// as it would on Docker.
fn podman_names(podman: bool, names: Vec<String>) -> Vec<String> {
    if !podman {
        return names;
    }
    let short: Vec<String> = names
        .iter()
        .filter_map(|n| n.strip_prefix("localhost/"))
        .map(str::to_string)
        .collect();
    names.into_iter().chain(short).collect()
}

/// The engine's name for a restart policy.
fn restart_policy(p: RestartPolicy) -> &'static str {
    match p {
        RestartPolicy::No => "no",
        RestartPolicy::OnFailure => "on-failure",
        RestartPolicy::Always => "always",
        RestartPolicy::UnlessStopped => "unless-stopped",
    }
}

/// The engine's create body for a spec.
pub fn create_body(spec: &ContainerSpec) -> wire::CreateBody {
    let mut bindings: BTreeMap<String, Vec<wire::PortBinding>> = BTreeMap::new();
    let mut exposed = BTreeMap::new();
    for p in &spec.ports {
        let key = p.container_key();
        exposed.insert(key.clone(), wire::Empty {});
        if let Some((ip, port)) = &p.host {
            bindings.entry(key).or_default().push(wire::PortBinding {
                host_ip: ip.clone(),
                host_port: port.to_string(),
            });
        }
    }
    // Every field of the runtime, by name and without `..`: a field added
    // to the table (`model::runtime`) does not compile until it is mapped
    // here, or said to be mapped elsewhere.
    let crate::model::runtime::Runtime {
        entrypoint,
        working_dir,
        user,
        // The user's labels are in `spec.labels`, beside the agent's
        // (`model::spec`).
        labels: _,
        devices,
        device_cgroup_rules,
        privileged,
        cap_add,
        cap_drop,
        network_mode,
        extra_hosts,
        dns,
        tmpfs,
        read_only,
        mem_limit,
        memswap_limit,
        nano_cpus,
        pids_limit,
        ulimits,
        sysctls,
        init,
        stop_signal,
        stop_grace_period,
        healthcheck,
        logging,
        volumes,
        // The first here; the others joined before the container starts
        // (`create`).
        networks,
        shm_size,
        hostname,
        // With the module's name and the host name, in each network's
        // endpoint (`network_aliases`).
        aliases: _,
        // Mounted by its bind mount (the pass adds it to the spec).
        update_lock: _,
    } = &*spec.runtime;
    let mounts = spec
        .mounts
        .iter()
        .map(|m| wire::Mount {
            target: m.target.clone(),
            source: m.source.clone(),
            kind: "bind",
            read_only: m.read_only,
        })
        .chain(volumes.iter().map(|v| wire::Mount {
            target: v.target.to_string(),
            source: v.name.clone(),
            kind: "volume",
            read_only: v.read_only,
        }))
        .collect();
    // The first network at create (the engine takes one there); the others
    // are joined before the container starts. In each, the module's name
    // resolves to it, and its aliases and host name.
    let first_network = networks.iter().next();
    let ns = |d: std::time::Duration| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX);
    let big = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    let some_vec = |v: Vec<String>| (!v.is_empty()).then_some(v);
    let some_map = |m: BTreeMap<String, String>| (!m.is_empty()).then_some(m);
    let pairs = |m: &BTreeMap<String, String>| m.clone();
    wire::CreateBody {
        networking_config: first_network.map(|n| wire::NetworkingConfig {
            endpoints_config: [(
                n.clone(),
                wire::Endpoint {
                    aliases: network_aliases(spec),
                },
            )]
            .into_iter()
            .into_map(),
        }),
        image: Some(spec.image_id.clone()),
        cmd: spec.command.clone(),
        // An empty entrypoint clears the image's: the engine's spelling.
        entrypoint: entrypoint.as_ref().map(|e| {
            if e.is_empty() {
                vec![String::new()]
            } else {
                e.clone()
            }
        }),
        working_dir: working_dir.as_ref().map(ToString::to_string),
        hostname: hostname.clone(),
        user: user.clone(),
        stop_signal: stop_signal.clone(),
        stop_timeout: stop_grace_period.map(|d| big(d.as_secs())),
        healthcheck: healthcheck.as_ref().map(|h| wire::HealthConfig {
            // Empty: the image's own test (the engine keeps it).
            test: (!h.test.is_empty()).then(|| h.test.clone()),
            interval: h.interval.map(ns),
            timeout: h.timeout.map(ns),
            retries: h.retries.map(i64::from),
            start_period: h.start_period.map(ns),
        }),
        env: Some(spec.env.iter().map(|(k, v)| format!("{k}={v}")).collect()),
        labels: Some(pairs(&spec.labels)),
        exposed_ports: (!exposed.is_empty()).then_some(exposed),
        host_config: Some(wire::HostConfig {
            mounts,
            port_bindings: (!bindings.is_empty()).then_some(bindings),
            restart_policy: wire::RestartPolicy {
                name: restart_policy(spec.restart),
            },
            devices: (!devices.is_empty()).then(|| {
                devices
                    .iter()
                    .map(|d| wire::DeviceMapping {
                        path_on_host: d.host.to_string(),
                        path_in_container: d.container.to_string(),
                        cgroup_permissions: d.permissions.clone(),
                    })
                    .collect()
            }),
            device_cgroup_rules: some_vec(device_cgroup_rules.clone()),
            privileged: privileged.then_some(true),
            cap_add: some_vec(cap_add.iter().cloned().collect()),
            cap_drop: some_vec(cap_drop.iter().cloned().collect()),
            network_mode: first_network.cloned().or_else(|| match network_mode {
                NetworkMode::Bridge => None,
                // The container it joins, by ID: found running by the pass.
                NetworkMode::Container(_) => spec
                    .network_container
                    .as_ref()
                    .map(|id| format!("container:{id}")),
                other => Some(other.spelled()),
            }),
            extra_hosts: some_vec(
                extra_hosts
                    .iter()
                    .flat_map(|(h, ips)| ips.iter().map(move |ip| format!("{h}:{ip}")))
                    .collect(),
            ),
            dns: some_vec(dns.iter().map(ToString::to_string).collect()),
            tmpfs: some_map(
                tmpfs
                    .iter()
                    .map(|(p, o)| (p.to_string(), o.clone()))
                    .into_map(),
            ),
            readonly_rootfs: read_only.then_some(true),
            memory: mem_limit.map(big),
            memory_swap: *memswap_limit,
            nano_cpus: nano_cpus.map(big),
            pids_limit: *pids_limit,
            shm_size: shm_size.map(big),
            ulimits: (!ulimits.is_empty()).then(|| {
                ulimits
                    .iter()
                    .map(|(name, u)| wire::Ulimit {
                        name: name.clone(),
                        soft: u.soft,
                        hard: u.hard,
                    })
                    .collect()
            }),
            sysctls: some_map(pairs(sysctls)),
            init: init.then_some(true),
            log_config: logging.as_ref().map(|l| wire::LogConfig {
                driver: l.driver.clone(),
                config: pairs(&l.options),
            }),
        }),
    }
}

impl Engine for DockerEngine {
    fn flavour(&self) -> Flavour {
        self.flavour.clone()
    }

    fn engine_version(&self) -> String {
        self.engine_version.to_string()
    }

    fn data_root(&self) -> Option<std::path::PathBuf> {
        self.data_root.as_deref().map(Path::to_path_buf)
    }

    async fn ping(&self) -> Result<(), EngineError> {
        within(limits::QUICK, "ping", async {
            self.call(Method::GET, "/_ping", None).await.map(drop)
        })
        .await
    }

    async fn list_containers(&self) -> Result<Vec<Observed>, EngineError> {
        within(limits::QUICK, "list containers", async {
            let list = self.list(None).await?;
            let health = match self.flavour {
                Flavour::Docker => HashMap::new(),
                Flavour::Podman(_) => self.podman_health().await?,
            };
            Ok(list
                .into_iter()
                .map(|c| Observed {
                    status: {
                        let status = c.status.unwrap_or_default();
                        match health.get(&c.id) {
                            Some(h) => format!("{status} {h}"),
                            None => status,
                        }
                    },
                    id: c.id,
                    names: c
                        .names
                        .unwrap_or_default()
                        .into_iter()
                        .map(|n| n.trim_start_matches('/').to_string())
                        .collect(),
                    labels: Labels::parse(&c.labels.unwrap_or_default()),
                    state: ContainerState::parse(c.state.as_deref().unwrap_or_default()),
                    image_id: c.image_id.unwrap_or_default(),
                    created: c.created.unwrap_or_default(),
                    mount_sources: c
                        .mounts
                        .unwrap_or_default()
                        .into_iter()
                        .filter_map(|m| m.source)
                        .collect(),
                })
                .collect())
        })
        .await
    }

    async fn list_images(&self) -> Result<Vec<Image>, EngineError> {
        within(limits::QUICK, "list images", async {
            let body = self
                .call(Method::GET, "/images/json?all=false", None)
                .await?;
            let list: Vec<wire::ImageSummary> = wire::read("the image list", &body)?;
            let podman = matches!(self.flavour, Flavour::Podman(_));
            Ok(list
                .into_iter()
                .map(|i| Image {
                    id: i.id,
                    tags: podman_names(podman, i.repo_tags.unwrap_or_default()),
                    digests: podman_names(podman, i.repo_digests.unwrap_or_default()),
                    size: u64::try_from(i.size).unwrap_or(0),
                    created: i.created,
                })
                .collect())
        })
        .await
    }

    async fn inspect(&self, id: &str) -> Result<Life, EngineError> {
        within(limits::QUICK, "inspect", async {
            let c = self.inspect_container(id).await?;
            let state = c.state;
            Ok(Life {
                restart_count: c.restart_count.clamp(0, i64::from(u32::MAX)) as u32,
                started_ns: state.started_at.as_deref().map_or(0, parse_engine_time_ns),
                finished_ns: state.finished_at.as_deref().map_or(0, parse_engine_time_ns),
                exit_code: state.exit_code,
                restarting: state.restarting,
                health_output: state
                    .health
                    .filter(|h| h.status == "unhealthy")
                    .and_then(|h| h.log)
                    .and_then(|log| log.into_iter().last())
                    .and_then(|probe| probe.output)
                    .map(|o| crate::model::text::clip(o.trim(), 512).into_owned()),
            })
        })
        .await
    }

    async fn pull(&self, reference: &str, auth: Option<PullAuth>) -> Result<(), EngineError> {
        let pull = async {
            let auth = match &auth {
                Some(a) => {
                    let said = wire::RegistryAuth {
                        username: &a.username,
                        password: &a.password,
                        serveraddress: &a.server,
                    };
                    let json = wire::body("the registry login", &said)?.unwrap_or_default();
                    Some(base64::engine::general_purpose::URL_SAFE.encode(json))
                }
                None => None,
            };
            let path = self.versioned(&format!(
                "/images/create?fromImage={}",
                socket::query(reference)
            ));
            let answer = socket::send(&self.socket, Method::POST, &path, None, auth).await?;
            streamed(answer, "the pull's progress", |_| ()).await
        };
        tokio::time::timeout(limits::PULL, pull)
            .await
            .unwrap_or_else(|_| {
                Err(EngineError::TimedOut(format!(
                    "the pull of {reference} did not finish within {}s",
                    limits::PULL.as_secs()
                )))
            })
    }

    async fn image_root(&self, name: &str) -> Result<(String, Vec<String>), EngineError> {
        within(limits::QUICK, "inspect an image", async {
            let path = format!("/images/{}/json", socket::path(name));
            let body = self.call(Method::GET, &path, None).await?;
            let i: wire::ImageInspect = wire::read("the image", &body)?;
            Ok((i.id, i.root_fs.and_then(|r| r.layers).unwrap_or_default()))
        })
        .await
    }

    async fn load(&self, archive: socket::Channel) -> Result<Vec<String>, EngineError> {
        let load = async {
            let path = self.versioned("/images/load?quiet=1");
            let answer = socket::send_body(
                &self.socket,
                Method::POST,
                &path,
                archive,
                Some("application/x-tar"),
                None,
            )
            .await?;
            let mut loaded = Vec::new();
            streamed(answer, "the load's answer", |said| {
                loaded.extend(wire::loaded(said));
            })
            .await?;
            Ok(loaded)
        };
        tokio::time::timeout(limits::PULL, load)
            .await
            .unwrap_or_else(|_| {
                Err(EngineError::TimedOut(format!(
                    "the load of an image did not finish within {}s",
                    limits::PULL.as_secs()
                )))
            })
    }

    async fn export(&self, id: &str) -> Result<hyper::body::Incoming, EngineError> {
        within(limits::QUICK, "export an image", async {
            let path = self.versioned(&format!("/images/{}/get", socket::path(id)));
            socket::send(&self.socket, Method::GET, &path, None, None).await
        })
        .await
    }

    async fn tag(&self, id: &str, repo: &str, tag: &str) -> Result<(), EngineError> {
        within(limits::QUICK, "tag an image", async {
            let path = format!(
                "/images/{}/tag?repo={}&tag={}",
                socket::path(id),
                socket::query(repo),
                socket::query(tag)
            );
            self.call(Method::POST, &path, None).await.map(|_| ())
        })
        .await
    }

    async fn create(&self, spec: &ContainerSpec) -> Result<String, EngineError> {
        if let Flavour::Podman(_) = &self.flavour
            && let Some(what) = podman_refuses(spec)
        {
            return Err(EngineError::Unsupported {
                engine: self.flavour.to_string(),
                what,
            });
        }
        within(limits::ACT, "create", async {
            let ours: BTreeMap<String, String> = spec
                .labels
                .get(crate::model::labels::MANAGED_BY)
                .map(|n| (crate::model::labels::MANAGED_BY.to_string(), n.clone()))
                .into_iter()
                .into_map();
            for v in &spec.runtime.volumes {
                // Idempotent: a volume that exists (its content is state)
                // is used as it is.
                let body = wire::body(
                    "the volume",
                    &wire::VolumeCreate {
                        name: &v.name,
                        labels: &ours,
                    },
                )?;
                self.call(Method::POST, "/volumes/create", body).await?;
            }
            for n in &spec.runtime.networks {
                self.ensure_network(n, &ours).await?;
                if let Some(node) = ours.get(crate::model::labels::MANAGED_BY) {
                    self.check_network_names(n, node).await?;
                }
            }
            let path = format!("/containers/create?name={}", socket::query(&spec.name));
            let body = wire::body("the container", &create_body(spec))?;
            let made = self.call(Method::POST, &path, body).await?;
            let id = wire::read::<wire::Created>("the create's answer", &made)?.id;
            let aliases = network_aliases(spec);
            for n in spec.runtime.networks.iter().skip(1) {
                let joined = async {
                    let connect = wire::Connect {
                        container: &id,
                        endpoint_config: wire::Endpoint {
                            aliases: aliases.clone(),
                        },
                    };
                    let path = format!("/networks/{}/connect", socket::path(n));
                    let body = wire::body("the network's join", &connect)?;
                    self.call(Method::POST, &path, body).await
                };
                if let Err(e) = joined.await {
                    // Not left half made.
                    let _ = self.remove(&id).await;
                    return Err(e);
                }
            }
            Ok(id)
        })
        .await
    }

    async fn start(&self, id: &str) -> Result<(), EngineError> {
        within(limits::ACT, "start", async {
            // Already started is done (the engine's 304).
            let path = format!("/containers/{}/start", socket::path(id));
            self.call(Method::POST, &path, None).await.map(drop)
        })
        .await
    }

    async fn watch(
        &self,
        node: &str,
        since_ns: i64,
        on_event: impl Fn(ContainerEvent) + Send + Sync + 'static,
    ) -> EngineError {
        // Podman filters by its own names for two of them (and says
        // `die` and `remove` in the events).
        let (die, destroy) = match self.flavour {
            Flavour::Docker => ("die", "destroy"),
            Flavour::Podman(_) => ("died", "remove"),
        };
        let label = format!("stead.managed-by={node}");
        let filters: BTreeMap<&str, Vec<&str>> = crate::model::sort::map([
            ("type", vec!["container"]),
            ("label", vec![label.as_str()]),
            (
                "event",
                vec![
                    "start",
                    die,
                    "stop",
                    destroy,
                    "oom",
                    "health_status",
                    "pause",
                    "unpause",
                ],
            ),
        ]);
        let filters = match serde_json::to_string(&filters) {
            Ok(f) => f,
            Err(e) => return EngineError::Unreachable(e.to_string()),
        };
        let since = format!(
            "{}.{:09}",
            since_ns.div_euclid(1_000_000_000),
            since_ns.rem_euclid(1_000_000_000)
        );
        let path = self.versioned(&format!(
            "/events?since={}&filters={}",
            socket::query(&since),
            socket::query(&filters)
        ));
        let answer = match socket::send(&self.socket, Method::GET, &path, None, None).await {
            Ok(a) => a,
            Err(e) => return e,
        };
        let mut lines = socket::Lines::of(answer);
        while let Some(line) = lines.next().await {
            match line.and_then(|l| wire::read::<wire::Event>("an event", &l)) {
                Ok(msg) => {
                    if let Some(ev) = container_event(&msg) {
                        on_event(ev);
                    }
                }
                Err(e) => return e,
            }
        }
        EngineError::Unreachable("the engine's event stream ended".into())
    }

    async fn stop(&self, id: &str) -> Result<(), EngineError> {
        within(limits::STOP, "stop", self.stop_now(id)).await
    }

    async fn logs(&self, id: &str, range: super::LogRange) -> Result<Vec<u8>, EngineError> {
        use crate::model::logs::{CUT, MAX_LOG_BYTES, demux};
        use http_body_util::BodyExt as _;
        within(limits::ACT, "read a container's logs", async {
            let mut path = format!(
                "/containers/{}/logs?stdout=1&stderr=1&timestamps=1",
                socket::path(id)
            );
            if let Some(t) = range.since {
                path.push_str(&format!("&since={t}"));
            }
            if let Some(t) = range.until {
                path.push_str(&format!("&until={t}"));
            }
            if let Some(n) = range.tail {
                path.push_str(&format!("&tail={n}"));
            }
            let mut body = socket::send(
                &self.socket,
                Method::GET,
                &self.versioned(&path),
                None,
                None,
            )
            .await?;
            // Framed: a frame's header counts, so the raw bytes may be a
            // little more than what is kept.
            let mut raw = Vec::new();
            let mut cut = false;
            while let Some(frame) = body.frame().await {
                let frame = frame.map_err(|e| EngineError::Unreachable(e.to_string()))?;
                if let Ok(data) = frame.into_data() {
                    raw.extend_from_slice(&data);
                    if raw.len() > MAX_LOG_BYTES {
                        cut = true;
                        break;
                    }
                }
            }
            let mut text = demux(&raw);
            if cut {
                text.truncate(MAX_LOG_BYTES);
                text.extend_from_slice(CUT.as_bytes());
            }
            Ok(text)
        })
        .await
    }

    async fn signal(&self, id: &str, signal: &str) -> Result<(), EngineError> {
        within(limits::ACT, "signal", async {
            let path = format!(
                "/containers/{}/kill?signal={}",
                socket::path(id),
                socket::query(signal)
            );
            self.call(Method::POST, &path, None).await.map(drop)
        })
        .await
    }

    async fn rename(&self, id: &str, name: &str) -> Result<(), EngineError> {
        let once = || {
            within(limits::ACT, "rename", async {
                let path = format!(
                    "/containers/{}/rename?name={}",
                    socket::path(id),
                    socket::query(name)
                );
                self.call(Method::POST, &path, None).await.map(drop)
            })
        };
        match once().await {
            // Between two runs of a container its restart policy restarts,
            // it has no network sandbox and the engine cannot rename it:
            // stopped, renamed, and started again (it keeps failing the same
            // way, and is judged by that).
            Err(EngineError::NotFound(m)) if m.contains("sandbox") => {
                self.stop(id).await?;
                once().await?;
                self.start(id).await
            }
            other => other,
        }
    }

    async fn remove(&self, id: &str) -> Result<(), EngineError> {
        // The networks it joined, to remove those of this node's that no
        // container uses any more.
        let look = within(limits::QUICK, "inspect", self.inspect_container(id));
        let joined: Vec<(String, String)> = match look.await {
            Ok(c) => {
                let node = c
                    .config
                    .labels
                    .and_then(|l| l.get(crate::model::labels::MANAGED_BY).cloned());
                let nets = c
                    .network_settings
                    .networks
                    .map(|n| n.into_keys().collect::<Vec<_>>())
                    .unwrap_or_default();
                match node {
                    Some(node) => nets
                        .into_iter()
                        .filter(|n| !matches!(n.as_str(), "bridge" | "host" | "none"))
                        .map(|n| (n, node.clone()))
                        .collect(),
                    None => vec![],
                }
            }
            Err(_) => vec![],
        };
        self.remove_container(id).await?;
        for (net, node) in joined {
            self.remove_network_if_unused(&net, &node).await;
        }
        Ok(())
    }

    async fn remove_image(&self, name: &str) -> Result<(), EngineError> {
        within(limits::ACT, "remove image", async {
            let path = format!("/images/{}?force=false&noprune=false", socket::path(name));
            self.call(Method::DELETE, &path, None).await.map(drop)
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn on_podman_an_image_without_a_registry_answers_to_its_docker_name() {
        let names = vec![
            "localhost/stead-test/busybox:1".to_string(),
            "registry.example:5000/app:2".to_string(),
        ];
        assert_eq!(podman_names(false, names.clone()), names);
        let images = crate::engine::image::Images::new(vec![Image {
            id: "sha256:aa".into(),
            tags: podman_names(true, names),
            digests: podman_names(true, vec!["localhost/app@sha256:dd".into()]),
            size: 0,
            created: 0,
        }]);
        for r in [
            "stead-test/busybox:1",
            "localhost/stead-test/busybox:1",
            "registry.example:5000/app:2",
            "app@sha256:dd",
        ] {
            assert!(images.find(r).is_some(), "{r}");
        }
        assert!(images.find("app:2").is_none());
    }

    #[test]
    fn a_podman_user_network_without_dns_is_named_with_its_backend() {
        let cni = "its network backend is CNI, without the dnsname plugin; install netavark and aardvark-dns";
        let netavark = "made with DNS disabled";
        for (backend, dns_enabled, says) in [
            ("cni", true, None),
            ("netavark", true, None),
            ("cni", false, Some(cni)),
            ("netavark", false, Some(netavark)),
            ("", false, Some("it has no DNS (network backend \"\")")),
        ] {
            let got = podman_network_without_names("n", backend, dns_enabled);
            match says {
                None => assert_eq!(got, None, "{backend} {dns_enabled}"),
                Some(s) => {
                    let got = got.unwrap_or_default();
                    assert!(got.contains(s) && got.contains("\"n\""), "{backend}: {got}");
                }
            }
        }
    }

    /// libpod's answers captured from Podman 4.3.1 with CNI and no dnsname
    /// plugin, and with netavark and aardvark-dns (how:
    /// tests/fixtures/podman-dns/README.md), read and judged.
    #[test]
    fn podman_s_real_answers_are_judged() {
        for (info, network, refused) in [
            (
                include_str!("../../tests/fixtures/podman-dns/cni/info.json"),
                include_str!("../../tests/fixtures/podman-dns/cni/network.json"),
                true,
            ),
            (
                include_str!("../../tests/fixtures/podman-dns/netavark/info.json"),
                include_str!("../../tests/fixtures/podman-dns/netavark/network.json"),
                false,
            ),
        ] {
            let info: wire::LibpodInfo = serde_json::from_str(info).unwrap();
            let net: wire::LibpodNetwork = serde_json::from_str(network).unwrap();
            assert!(net.dns_enabled.is_some());
            let dns = net.dns_enabled.unwrap_or(true);
            let got = podman_network_without_names("n", &info.host.network_backend, dns);
            assert_eq!(got.is_some(), refused, "{got:?}");
            assert_eq!(
                got.is_some_and(|w| w.contains("network backend is CNI")),
                refused
            );
        }
    }

    /// Before Podman 4 a network reads as a CNI conflist, which does not
    /// say: not judged.
    #[test]
    fn a_network_that_does_not_say_whether_it_has_dns_reads_as_unknown() {
        let old: wire::LibpodNetwork = serde_json::from_str(
            r#"{"cniVersion":"0.4.0","name":"n","plugins":[{"type":"bridge"}]}"#,
        )
        .unwrap();
        assert_eq!(old.dns_enabled, None);
    }

    #[test]
    fn what_podman_would_drop_is_named() {
        let spec = |rt: crate::model::runtime::Runtime| ContainerSpec {
            name: "stead-m".into(),
            image_id: "sha256:aa".into(),
            command: None,
            env: vec![],
            ports: vec![],
            mounts: vec![],
            restart: RestartPolicy::No,
            labels: BTreeMap::new(),
            runtime: rt.into(),
            network_container: None,
        };
        let logging = |driver: &str, options: &[(&str, &str)]| crate::model::runtime::Runtime {
            logging: Some(crate::model::runtime::Logging {
                driver: driver.into(),
                options: options
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            }),
            ..Default::default()
        };
        assert_eq!(podman_refuses(&spec(Default::default())), None);
        for ok in [
            logging("json-file", &[("max-size", "10m")]),
            logging("journald", &[("tag", "m")]),
            logging("none", &[]),
        ] {
            assert_eq!(podman_refuses(&spec(ok.clone())), None, "{ok:?}");
        }
        let rules = crate::model::runtime::Runtime {
            device_cgroup_rules: vec!["c 188:* rwm".into()],
            ..Default::default()
        };
        let gateway = crate::model::runtime::Runtime {
            extra_hosts: [(
                "gw".to_string(),
                ["10.0.0.1".to_string(), "host-gateway".to_string()]
                    .into_iter()
                    .collect(),
            )]
            .into_iter()
            .collect(),
            ..Default::default()
        };
        let image_s_check = crate::model::runtime::Runtime {
            healthcheck: Some(crate::model::runtime::Healthcheck {
                test: vec![],
                interval: Some(std::time::Duration::from_secs(5)),
                timeout: None,
                retries: None,
                start_period: None,
            }),
            ..Default::default()
        };
        for (rt, needle) in [
            (image_s_check, "healthcheck.test"),
            (gateway, "extra_hosts.gw"),
            (rules, "device_cgroup_rules"),
            (logging("local", &[]), "\"local\""),
            (logging("json-file", &[("max-file", "3")]), "\"max-file\""),
        ] {
            let what = podman_refuses(&spec(rt)).unwrap();
            assert!(what.contains(needle), "{what}");
        }
        let e = EngineError::Unsupported {
            engine: Flavour::Podman("4.3.1".into()).to_string(),
            what: "the log driver \"local\"".into(),
        };
        assert_eq!(
            e.to_string(),
            "Podman 4.3.1 does not support the log driver \"local\""
        );
    }

    #[test]
    fn events_parse_once() {
        let msg: wire::Event = serde_json::from_str(
            r#"{"Type":"container","Action":"die","Actor":{"ID":"abc","Attributes":{"exitCode":"3","stead.module":"m"}},"time":1795968438,"timeNano":1795968438013585123}"#,
        )
        .unwrap();
        assert_eq!(
            container_event(&msg),
            Some(ContainerEvent {
                id: "abc".into(),
                action: EventAction::Die(3),
                at_ns: 1_795_968_438_013_585_123
            })
        );
        let msg: wire::Event = serde_json::from_str(
            r#"{"Type":"container","Action":"health_status: healthy","Actor":{"ID":"abc"},"time":10}"#,
        )
        .unwrap();
        let ev = container_event(&msg).unwrap();
        assert_eq!((ev.action, ev.at_ns), (EventAction::Health, 10_000_000_000));
        // Podman's says the health in an attribute.
        let msg: wire::Event = serde_json::from_str(
            r#"{"Type":"container","Action":"health_status","Actor":{"ID":"abc","Attributes":{"health_status":"healthy"}},"time":10}"#,
        )
        .unwrap();
        assert_eq!(container_event(&msg).unwrap().action, EventAction::Health);
        // Podman's die event names the code otherwise.
        let msg: wire::Event = serde_json::from_str(
            r#"{"Type":"container","Action":"die","Actor":{"ID":"abc","Attributes":{"containerExitCode":"3"}},"time":1,"timeNano":1000000001}"#,
        )
        .unwrap();
        assert_eq!(container_event(&msg).unwrap().action, EventAction::Die(3));
        let msg: wire::Event =
            serde_json::from_str(r#"{"Action":"start","Actor":{"ID":""}}"#).unwrap();
        assert_eq!(container_event(&msg), None);
    }
}
