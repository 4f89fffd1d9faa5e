//! What the agent says to the engine and reads from it, typed once: the
//! Docker Engine API's request bodies it writes and the parts of the
//! answers it reads (Podman's Docker-compatible API and, where that does
//! not say, two of libpod's answers). Only what the agent reads is taken,
//! and words stay words: the container list, the one answer every pass
//! depends on, must not fail as a whole for one word the Docker Engine's
//! types do not know (Podman lists a container waiting for its restart as
//! `stopped`); states are read by [`crate::engine::ContainerState::parse`].
//! How the calls travel is [`super::socket`].

use std::collections::BTreeMap;

use serde::de::{DeserializeOwned, IgnoredAny};
use serde::{Deserialize, Serialize};

use crate::engine::EngineError;

/// Reads an answer's body as `T`; `what` names the answer in the error.
pub fn read<T: DeserializeOwned>(what: &str, body: &[u8]) -> Result<T, EngineError> {
    serde_json::from_slice(body).map_err(|e| EngineError::Refused {
        status: 0,
        message: format!("{what} does not read: {e}"),
    })
}

/// Writes a request's body.
pub fn body<T: Serialize>(what: &str, value: &T) -> Result<Option<Vec<u8>>, EngineError> {
    serde_json::to_vec(value)
        .map(Some)
        .map_err(|e| EngineError::Refused {
            status: 0,
            message: format!("{what} does not write: {e}"),
        })
}

/// One container of the list, as the engine says it.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct Listed {
    /// Its ID.
    pub id: String,
    /// Its names, with the engine's leading `/`.
    #[serde(default)]
    pub names: Option<Vec<String>>,
    /// Its labels.
    #[serde(default)]
    pub labels: Option<BTreeMap<String, String>>,
    /// Its state word.
    #[serde(default)]
    pub state: Option<String>,
    /// Its status line.
    #[serde(default)]
    pub status: Option<String>,
    /// The image ID it runs.
    #[serde(rename = "ImageID", default)]
    pub image_id: Option<String>,
    /// When it was created, seconds since the epoch.
    #[serde(default)]
    pub created: Option<i64>,
    /// Its mounts.
    #[serde(default)]
    pub mounts: Option<Vec<ListedMount>>,
}

/// A mount of a listed container.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct ListedMount {
    /// Its host source.
    #[serde(default)]
    pub source: Option<String>,
}

/// What `GET /version` says that the agent reads.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct Version {
    /// The newest API version the engine speaks (`1.41`).
    pub api_version: String,
    /// The engine's own version (`28.5.1`).
    #[serde(default)]
    pub version: Option<String>,
    /// Its parts (`Podman Engine`, …).
    #[serde(default)]
    pub components: Option<Vec<Component>>,
}

/// A part of the engine, as its version names it.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct Component {
    /// Its name.
    pub name: String,
    /// Its version.
    #[serde(default)]
    pub version: String,
}

/// What `GET /info` says that the agent reads.
#[derive(Debug, Deserialize)]
pub struct Info {
    /// Where the engine keeps its images and containers (Podman: its
    /// graph root).
    #[serde(rename = "DockerRootDir", default)]
    pub docker_root_dir: Option<String>,
}

/// What libpod's `GET /libpod/networks/{name}/json` says that the agent
/// reads (Podman only).
#[derive(Debug, Deserialize)]
pub struct LibpodNetwork {
    /// Whether the network's containers resolve each other's names (CNI's
    /// dnsname plugin, or netavark's aardvark-dns); absent before Podman 4.
    #[serde(default)]
    pub dns_enabled: Option<bool>,
}

/// What libpod's `GET /libpod/info` says that the agent reads (Podman only).
#[derive(Debug, Deserialize)]
pub struct LibpodInfo {
    /// The host's part.
    pub host: LibpodHost,
}

/// The host's part of libpod's info.
#[derive(Debug, Deserialize)]
pub struct LibpodHost {
    /// `cni` or `netavark`.
    #[serde(rename = "networkBackend", default)]
    pub network_backend: String,
}

/// `POST /containers/create`'s body: what a container is made of.
#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct CreateBody {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// The ports it exposes, `80/tcp`, each to an empty object.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exposed_ports: Option<BTreeMap<String, Empty>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub env: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cmd: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub healthcheck: Option<HealthConfig>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub working_dir: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub entrypoint: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stop_signal: Option<String>,
    /// Seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stop_timeout: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_config: Option<HostConfig>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub networking_config: Option<NetworkingConfig>,
}

/// An empty JSON object.
#[derive(Debug, Default, Serialize)]
pub struct Empty {}

/// A container's health check; durations in nanoseconds.
#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct HealthConfig {
    /// Absent: the image's own test.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub test: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interval: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retries: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start_period: Option<i64>,
}

/// The host's side of a container.
#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct HostConfig {
    pub mounts: Vec<Mount>,
    /// Per exposed port, the host's addresses and ports bound to it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port_bindings: Option<BTreeMap<String, Vec<PortBinding>>>,
    pub restart_policy: RestartPolicy,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub devices: Option<Vec<DeviceMapping>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device_cgroup_rules: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub privileged: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cap_add: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cap_drop: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network_mode: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extra_hosts: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dns: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tmpfs: Option<BTreeMap<String, String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub readonly_rootfs: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_swap: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nano_cpus: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pids_limit: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shm_size: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ulimits: Option<Vec<Ulimit>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sysctls: Option<BTreeMap<String, String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub init: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log_config: Option<LogConfig>,
}

/// A bind mount or a named volume.
#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct Mount {
    pub target: String,
    pub source: String,
    /// `bind` or `volume`.
    #[serde(rename = "Type")]
    pub kind: &'static str,
    pub read_only: bool,
}

/// A host address and port bound to a container's port.
#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct PortBinding {
    pub host_ip: String,
    pub host_port: String,
}

/// The engine's restart policy, by its name (`unless-stopped`, …).
#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct RestartPolicy {
    pub name: &'static str,
}

/// A host device given to a container.
#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct DeviceMapping {
    pub path_on_host: String,
    pub path_in_container: String,
    pub cgroup_permissions: String,
}

/// A resource limit.
#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct Ulimit {
    pub name: String,
    pub soft: i64,
    pub hard: i64,
}

/// A log driver and its options.
#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct LogConfig {
    #[serde(rename = "Type")]
    pub driver: String,
    pub config: BTreeMap<String, String>,
}

/// The network a container is made in, with the names it answers to there.
#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct NetworkingConfig {
    pub endpoints_config: BTreeMap<String, Endpoint>,
}

/// A container's place in a network: the names it answers to.
#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct Endpoint {
    pub aliases: Vec<String>,
}

/// `POST /networks/{name}/connect`'s body.
#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct Connect<'a> {
    pub container: &'a str,
    pub endpoint_config: Endpoint,
}

/// `POST /networks/create`'s body.
#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct NetworkCreate<'a> {
    pub name: &'a str,
    pub driver: &'a str,
    pub labels: &'a BTreeMap<String, String>,
}

/// `POST /volumes/create`'s body.
#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct VolumeCreate<'a> {
    pub name: &'a str,
    pub labels: &'a BTreeMap<String, String>,
}

/// A pull's `X-Registry-Auth`, before its base64.
#[derive(Serialize)]
pub struct RegistryAuth<'a> {
    pub username: &'a str,
    pub password: &'a str,
    pub serveraddress: &'a str,
}

/// What a create answers: the new object's ID.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct Created {
    pub id: String,
}

/// What `GET /containers/{id}/json` says that the agent reads.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct Inspected {
    pub id: String,
    /// With the engine's leading `/`.
    pub name: String,
    pub restart_count: i64,
    pub state: InspectedState,
    pub config: InspectedConfig,
    pub host_config: InspectedHost,
    pub network_settings: InspectedNetworks,
}

/// An inspected container's state.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct InspectedState {
    /// RFC 3339 with nanoseconds; the zero time when never.
    pub started_at: Option<String>,
    pub finished_at: Option<String>,
    pub exit_code: i64,
    pub restarting: bool,
    pub health: Option<Health>,
}

/// An inspected container's health.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct Health {
    /// `starting`, `healthy`, `unhealthy`.
    pub status: String,
    /// Its last probes, oldest first.
    pub log: Option<Vec<Probe>>,
}

/// One probe of a health check.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct Probe {
    pub output: Option<String>,
}

/// An inspected container's labels.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct InspectedConfig {
    pub labels: Option<BTreeMap<String, String>>,
}

/// An inspected container's network mode.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct InspectedHost {
    pub network_mode: Option<String>,
}

/// The networks an inspected container is in, by name.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct InspectedNetworks {
    pub networks: Option<BTreeMap<String, IgnoredAny>>,
}

/// What `GET /networks/{name}` says that the agent reads.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct Network {
    pub labels: Option<BTreeMap<String, String>>,
    /// The containers in it, by ID.
    pub containers: Option<BTreeMap<String, IgnoredAny>>,
}

/// One image of `GET /images/json`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct ImageSummary {
    pub id: String,
    #[serde(default)]
    pub repo_tags: Option<Vec<String>>,
    #[serde(default)]
    pub repo_digests: Option<Vec<String>>,
    #[serde(default)]
    pub size: i64,
    /// Seconds since the epoch.
    #[serde(default)]
    pub created: i64,
}

/// One line of a streamed answer (a pull's progress, a load's answer):
/// an error, or what it says (a load: what it loaded; a pull's progress
/// the agent skips).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct StreamLine {
    pub error: Option<String>,
    #[serde(rename = "errorDetail")]
    pub error_detail: Option<ErrorDetail>,
    pub stream: Option<String>,
}

/// What a load's line says it loaded: Docker's `Loaded image ID: <id>`
/// or `Loaded image: <name>`, Podman's `Loaded image: <id or name>`
/// (more than one, comma-separated).
pub fn loaded(line: &str) -> Vec<String> {
    let line = line.trim();
    let rest = line
        .strip_prefix("Loaded image ID: ")
        .or_else(|| line.strip_prefix("Loaded image(s): "))
        .or_else(|| line.strip_prefix("Loaded image: "));
    rest.map(|r| {
        r.split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect()
    })
    .unwrap_or_default()
}

/// What `GET /images/{name}/json` says that a load needs.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct ImageInspect {
    #[serde(rename = "Id")]
    pub id: String,
    #[serde(rename = "RootFS")]
    pub root_fs: Option<RootFs>,
}

/// An image's layers.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct RootFs {
    #[serde(rename = "Layers")]
    pub layers: Option<Vec<String>>,
}

/// A pull error's detail.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct ErrorDetail {
    pub message: Option<String>,
}

/// One event of `GET /events`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct Event {
    #[serde(rename = "Action")]
    pub action: Option<String>,
    #[serde(rename = "Actor")]
    pub actor: Option<Actor>,
    /// Seconds since the epoch.
    pub time: Option<i64>,
    /// Nanoseconds since the epoch.
    #[serde(rename = "timeNano")]
    pub time_nano: Option<i64>,
}

/// What an event is about.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct Actor {
    #[serde(rename = "ID")]
    pub id: Option<String>,
    #[serde(rename = "Attributes")]
    pub attributes: Option<BTreeMap<String, String>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_state_docker_does_not_have_does_not_fail_the_list() {
        // Podman's words, with what the agent reads (and fields it does not).
        let body = br#"[
          {"Id":"aa","Names":["/stead-m"],"Image":"x","ImageID":"sha256:11","Command":"sh","Created":1796024394,
           "Ports":[],"Labels":{"stead.module":"m"},"State":"stopped","Status":"Exited (3) 1 second ago",
           "HostConfig":{"NetworkMode":"bridge"},"NetworkSettings":{"Networks":{}},"Mounts":[{"Type":"bind","Source":"/srv/a","Destination":"/a"}]},
          {"Id":"bb","Names":null,"Labels":null,"State":"running","Status":"Up 2 seconds","Created":1,"Mounts":null}
        ]"#;
        let list: Vec<Listed> = read("the container list", body).unwrap();
        assert_eq!(list.len(), 2);
        assert_eq!(list[0].state.as_deref(), Some("stopped"));
        assert_eq!(list[0].image_id.as_deref(), Some("sha256:11"));
        assert_eq!(
            list[0].mounts.as_ref().unwrap()[0].source.as_deref(),
            Some("/srv/a")
        );
        assert_eq!(list[1].id, "bb");
        assert!(list[1].names.is_none());
        let e = read::<Vec<Listed>>("the container list", b"{\"message\":\"no\"}").unwrap_err();
        assert!(
            e.to_string().contains("the container list does not read"),
            "{e}"
        );
        let v: Version = serde_json::from_slice(
            br#"{"Platform":{"Name":"linux/amd64/debian-12"},"Components":[{"Name":"Podman Engine","Version":"4.3.1","Details":{"APIVersion":"4.3.1"}}],"Version":"4.3.1","ApiVersion":"1.41","MinAPIVersion":"1.24"}"#,
        )
        .unwrap();
        assert_eq!(v.api_version, "1.41");
        assert_eq!(v.components.unwrap()[0].name, "Podman Engine");
    }
}
