//! A module's intention: what the node was asked to run. Owns the schema of
//! intention documents (TOML or JSON) and their validation into a checked
//! [`Intention`]; a bad document is an error naming its origin and the field.
//! Where documents come from is the intake's business.

use crate::model::sort::Insert as _;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::model::config::{self, ConfigFile, ConfigFormat};
use crate::model::env_file;
use crate::model::names::{
    AbsPath, EnvName, HostPath, ModuleName, SettingKey, trailing_slash_dropped,
};
use crate::model::reference::Reference;
use crate::model::runtime::{self, Runtime, RuntimeDoc};
use crate::model::sealed::{SealedText, Text};
use crate::model::time::{format_duration, parse_duration};
use crate::model::value::Value;
use crate::model::version::{Range, TagVersion};

/// The largest intention file taken.
pub const MAX_INTENTION_BYTES: u64 = 256 << 10;

/// The restart policy handed to the engine.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RestartPolicy {
    /// Never restart (the engine's default).
    #[default]
    No,
    /// Restart when the process exits non-zero.
    OnFailure,
    /// Always restart.
    Always,
    /// Restart unless an operator stopped it.
    UnlessStopped,
}

impl RestartPolicy {
    /// The engine's name for it.
    pub fn as_str(self) -> &'static str {
        match self {
            RestartPolicy::No => "no",
            RestartPolicy::OnFailure => "on-failure",
            RestartPolicy::Always => "always",
            RestartPolicy::UnlessStopped => "unless-stopped",
        }
    }
}

/// What to do when the running container no longer matches its inputs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DriftPolicy {
    /// Recreate the container, once per change.
    #[default]
    Recreate,
    /// Leave it running and report which inputs moved.
    Report,
}

/// In which order a recreate swaps the old container for the new one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum UpdateOrder {
    /// The old container stops, then the new one starts (one at a time:
    /// for modules holding a host port or a device).
    #[default]
    StopFirst,
    /// The new container starts while the old one still runs, then the old
    /// one stops: no gap, for modules that can run twice for a moment.
    StartFirst,
}

impl UpdateOrder {
    /// Its name in intention files.
    pub fn as_str(self) -> &'static str {
        match self {
            UpdateOrder::StopFirst => "stop-first",
            UpdateOrder::StartFirst => "start-first",
        }
    }
}

/// What a module waits for of a module it depends on, before it starts
/// (Compose's `depends_on` conditions).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Condition {
    /// Its container runs.
    #[default]
    Started,
    /// Its health check passes.
    Healthy,
    /// It exited 0.
    Completed,
}

impl Condition {
    /// Its name in intention files.
    pub fn as_str(self) -> &'static str {
        match self {
            Condition::Started => "started",
            Condition::Healthy => "healthy",
            Condition::Completed => "completed",
        }
    }
}

/// A module another depends on, and what it waits for of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dependency {
    /// The module depended on.
    pub module: ModuleName,
    /// What is waited for.
    pub condition: Condition,
    /// Whether the dependent is restarted, once, when this one has been
    /// replaced or restarted and meets the condition again.
    pub restart: bool,
}

/// One `depends_on` entry as written: a module's name, or a table.
enum DependencyDoc {
    Name(String),
    Full(DependencyTable),
}

// Read by its JSON type (not serde's `untagged`, which buffers the value
// and tries each form after the reader passed it): what is wrong in a
// table is named at its field, and a value of neither form says so.
impl<'de> Deserialize<'de> for DependencyDoc {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Either;
        impl<'de> serde::de::Visitor<'de> for Either {
            type Value = DependencyDoc;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a module's name or a table of module, condition and restart")
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<DependencyDoc, E> {
                Ok(DependencyDoc::Name(s.to_owned()))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<DependencyDoc, A::Error> {
                DependencyTable::deserialize(serde::de::value::MapAccessDeserializer::new(map))
                    .map(DependencyDoc::Full)
            }
        }
        d.deserialize_any(Either)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DependencyTable {
    module: String,
    #[serde(default)]
    condition: Condition,
    #[serde(default)]
    restart: bool,
}

/// Which lane updates a module's image from its registry.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Lane {
    /// Only a reload request updates it.
    #[default]
    Manual,
    /// The agent looks every `interval` and files a reload request when a
    /// newer compatible version is published.
    Auto,
    /// The auto lane declines it by name; an explicit request still lands.
    Pinned,
}

impl Lane {
    /// Its name in intention files.
    pub fn as_str(self) -> &'static str {
        match self {
            Lane::Manual => "manual",
            Lane::Auto => "auto",
            Lane::Pinned => "pinned",
        }
    }
}

/// How a module's image is updated from its registry (`[update]`). Not an
/// input of the container: changing it recreates nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UpdatePolicy {
    /// The lane.
    pub lane: Lane,
    /// The compatible versions.
    pub range: Range,
    /// How often the auto lane looks (jittered).
    pub interval: Duration,
    /// How long a new version must hold before its reload is done.
    pub health_window: Duration,
}

/// The auto lane's default interval.
pub const DEFAULT_UPDATE_INTERVAL: Duration = Duration::from_secs(6 * 3600);
/// The default health window.
pub const DEFAULT_HEALTH_WINDOW: Duration = Duration::from_secs(120);

/// A port protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// TCP, the default.
    Tcp,
    /// UDP.
    Udp,
    /// SCTP.
    Sctp,
}

/// A published (or only exposed) container port, normalised: an unset host
/// address is `0.0.0.0`, as the engine reads it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct PortSpec {
    /// The port inside the container.
    pub container_port: u16,
    /// tcp, udp or sctp.
    pub protocol: Protocol,
    /// Host address and port, when published.
    pub host: Option<(String, u16)>,
}

impl PortSpec {
    /// Parses `[host_ip:]host_port:container_port[/proto]` or
    /// `container_port[/proto]`.
    pub fn parse(s: &str) -> Result<PortSpec, String> {
        let bad = |why: &str| format!("invalid port {s:?}: {why}");
        let (rest, protocol) = match s.rsplit_once('/') {
            Some((r, "tcp")) => (r, Protocol::Tcp),
            Some((r, "udp")) => (r, Protocol::Udp),
            Some((r, "sctp")) => (r, Protocol::Sctp),
            Some(_) => return Err(bad("protocol must be tcp, udp or sctp")),
            None => (s, Protocol::Tcp),
        };
        let port = |p: &str| -> Result<u16, String> {
            match p.parse::<u16>() {
                Ok(n) if n > 0 => Ok(n),
                _ => Err(bad(&format!("{p:?} is not a port number 1-65535"))),
            }
        };
        let (host, container) = match rest.rsplit_once(':') {
            None => (None, port(rest)?),
            Some((h, c)) => {
                let c = port(c)?;
                let (ip, hp) = match h.rsplit_once(':') {
                    None => ("0.0.0.0".to_string(), port(h)?),
                    Some((ip, hp)) => {
                        let ip = ip.trim_start_matches('[').trim_end_matches(']');
                        if ip.parse::<std::net::IpAddr>().is_err() {
                            return Err(bad(&format!("{ip:?} is not an IP address")));
                        }
                        let ip = if ip.is_empty() { "0.0.0.0" } else { ip };
                        (ip.to_string(), port(hp)?)
                    }
                };
                (Some((ip, hp)), c)
            }
        };
        Ok(PortSpec {
            container_port: container,
            protocol,
            host,
        })
    }

    /// The engine's key for the container side, `80/tcp`.
    pub fn container_key(&self) -> String {
        let proto = match self.protocol {
            Protocol::Tcp => "tcp",
            Protocol::Udp => "udp",
            Protocol::Sctp => "sctp",
        };
        format!("{}/{proto}", self.container_port)
    }
}

impl fmt::Display for PortSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.host {
            Some((ip, port)) if ip.contains(':') => write!(f, "[{ip}]:{port}:")?,
            Some((ip, port)) => write!(f, "{ip}:{port}:")?,
            None => {}
        }
        f.write_str(&self.container_key())
    }
}

/// A literal file composed into the container.
#[derive(Clone, Debug, PartialEq)]
pub struct LiteralFile {
    /// Where the container sees it.
    pub path: AbsPath,
    /// Its content, in clear or sealed to the device.
    pub content: Text,
}

/// Whether a bind mount is an input (read-only) or state (read-write, or
/// a read-only view of the host's state).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Read-only: an input, hashed by content.
    ReadOnly,
    /// Read-write: state, identified by its path only.
    ReadWrite,
    /// Read-only and not an input (`input = false`): a view of the host's
    /// own state the module reads live (`/proc`, `/sys`, a socket), never
    /// read by the agent; identified by its path only.
    ReadOnlyView,
}

impl Access {
    /// Whether the container may not write it.
    pub fn read_only(self) -> bool {
        self != Access::ReadWrite
    }
}

/// A bind mount of a host path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mount {
    /// The host path (the root itself only as a view).
    pub source: HostPath,
    /// Where the container sees it.
    pub target: AbsPath,
    /// Read-only or read-write.
    pub access: Access,
}

/// A checked intention for one module.
#[derive(Clone, Debug, PartialEq)]
pub struct Intention {
    /// The module's name.
    pub name: ModuleName,
    /// An image reference: a tag, `name@sha256:…` or an image ID.
    pub image: String,
    /// The command; `None` runs the image's default.
    pub command: Option<Vec<String>>,
    /// Environment set directly, in clear or sealed to the device;
    /// overrides env files.
    pub env: BTreeMap<EnvName, Text>,
    /// Host files of variables, in order; later files override earlier.
    pub env_files: Vec<AbsPath>,
    /// How the env files are read.
    pub env_file_format: env_file::Format,
    /// The engine's restart policy.
    pub restart: RestartPolicy,
    /// What to do on drift.
    pub on_drift: DriftPolicy,
    /// In which order a recreate swaps the containers.
    pub update_order: UpdateOrder,
    /// The modules it waits for before it starts. Not an input.
    pub depends_on: Vec<Dependency>,
    /// How its image is updated from its registry, when it is.
    pub update: Option<UpdatePolicy>,
    /// Ports, sorted.
    pub ports: Vec<PortSpec>,
    /// The mergeable config file.
    pub config: Option<ConfigFile>,
    /// The assignment's settings, merged over the config defaults.
    pub settings: BTreeMap<SettingKey, Value>,
    /// Literal files.
    pub files: Vec<LiteralFile>,
    /// Host bind mounts.
    pub mounts: Vec<Mount>,
    /// Everything else the container is created with.
    pub runtime: runtime::Sparse,
}

/// An intention that was refused: which file (or request), which field, why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{origin}: {field}: {message}")]
pub struct IntentionError {
    /// The file or request it came from.
    pub origin: String,
    /// The field at fault (`name`, `config.format`, `mounts[1].source`, …), or
    /// `(file)` when the document itself is unreadable.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

/// The intention document: its own fields, then the runtime fields (one
/// per row of `runtime::runtime_fields!`), each read as a JSON value and
/// taken apart by `RuntimeDoc::check`.
macro_rules! intention_doc {
    ($($(#[$doc:meta])* $member:ident: $ty:ty = $name:tt $field:ident,)*) => {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct IntentionDoc {
            name: String,
            image: String,
            #[serde(default)]
            command: Option<Vec<String>>,
            #[serde(default)]
            env: BTreeMap<String, serde_json::Value>,
            #[serde(default)]
            env_files: Vec<String>,
            #[serde(default)]
            env_file_format: env_file::Format,
            #[serde(default)]
            restart: RestartPolicy,
            #[serde(default)]
            on_drift: DriftPolicy,
            #[serde(default)]
            update_order: UpdateOrder,
            #[serde(default)]
            depends_on: Vec<DependencyDoc>,
            #[serde(default)]
            update: Option<UpdateDoc>,
            #[serde(default)]
            ports: Vec<String>,
            #[serde(default)]
            config: Option<ConfigDoc>,
            #[serde(default)]
            settings: BTreeMap<String, serde_json::Value>,
            #[serde(default)]
            files: Vec<FileDoc>,
            #[serde(default)]
            mounts: Vec<MountDoc>,
            $(
                #[serde(default, rename = $name)]
                $member: Option<serde_json::Value>,
            )*
        }

        impl IntentionDoc {
            /// The runtime fields, taken out of the document.
            fn runtime_doc(&mut self) -> RuntimeDoc {
                RuntimeDoc {
                    $($member: self.$member.take(),)*
                }
            }
        }
    };
}
runtime::runtime_fields!(intention_doc);

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigDoc {
    path: String,
    format: ConfigFormat,
    #[serde(default)]
    defaults: serde_json::Map<String, serde_json::Value>,
    #[serde(default)]
    reload: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct UpdateDoc {
    #[serde(default)]
    lane: Lane,
    range: String,
    #[serde(default)]
    interval: Option<String>,
    #[serde(default)]
    health_window: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileDoc {
    path: String,
    content: serde_json::Value,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MountDoc {
    source: String,
    target: String,
    #[serde(default)]
    read_only: bool,
    input: Option<bool>,
}

/// The document format of an intention.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DocFormat {
    /// TOML (`*.toml`).
    Toml,
    /// JSON (`*.json`, and the HTTP API).
    Json,
}

impl Intention {
    /// Parses and checks one intention document. `origin` names the file or
    /// request in errors.
    pub fn parse(text: &str, format: DocFormat, origin: &str) -> Result<Intention, IntentionError> {
        let err = |field: String, message: String| IntentionError {
            origin: origin.to_string(),
            field,
            message,
        };
        match format {
            DocFormat::Toml => {
                // Never the offending line itself: it may hold a secret.
                let t: toml::Table = toml::from_str(text).map_err(|e| {
                    let at = e
                        .span()
                        .map(|s| position(text, s.start))
                        .unwrap_or_default();
                    err(
                        "(file)".into(),
                        format!("TOML parse error{at}: {}", without_values(e.message())),
                    )
                })?;
                // Through a JSON value: one reader of the document for
                // both formats (it is large, and a device carries one).
                let v = crate::model::json::from_toml(t).map_err(|(f, m)| err(f, m))?;
                Intention::from_value(&v, origin)
            }
            DocFormat::Json => Intention::parse_json(text.as_bytes(), origin),
        }
    }

    /// Parses and checks one JSON intention document straight from its
    /// bytes (an API request body).
    pub fn parse_json(bytes: &[u8], origin: &str) -> Result<Intention, IntentionError> {
        let err = |field: String, message: String| IntentionError {
            origin: origin.to_string(),
            field,
            message,
        };
        crate::model::json::no_repeated_keys(bytes).map_err(|r| {
            err(
                if r.path == "." {
                    "(file)".into()
                } else {
                    r.path
                },
                r.message,
            )
        })?;
        // Through a JSON value: one reader of the document for both (the
        // document's deserializer is large, and a device carries one).
        let v: serde_json::Value = serde_json::from_slice(bytes)
            .map_err(|e| err("(file)".into(), without_values(&e.to_string())))?;
        Intention::from_value(&v, origin)
    }

    /// Checks one intention document already parsed as JSON (a module of
    /// a central-plane document, whose keys were checked for repeats with
    /// the whole document).
    pub fn from_value(v: &serde_json::Value, origin: &str) -> Result<Intention, IntentionError> {
        let err = |field: String, message: String| IntentionError {
            origin: origin.to_string(),
            field,
            message,
        };
        let doc: IntentionDoc = crate::model::json::read_value(v)
            .map_err(|e| err(path_or_file(&e.path), without_values(&e.message())))?;
        doc.check().map_err(|(field, message)| err(field, message))
    }
}

impl Intention {
    /// The intention as a JSON document of the intention-file schema; it
    /// parses back to the same intention.
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::{Value as J, json};
        let mut doc = serde_json::Map::new();
        doc.insert("name".into(), J::from(self.name.as_str()));
        doc.insert("image".into(), J::from(self.image.as_str()));
        if let Some(c) = &self.command {
            doc.insert("command".into(), json!(c));
        }
        if !self.env.is_empty() {
            doc.insert(
                "env".into(),
                J::Object(
                    self.env
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_json()))
                        .into_object(),
                ),
            );
        }
        if !self.env_files.is_empty() {
            doc.insert(
                "env_files".into(),
                J::Array(self.env_files.iter().map(|p| J::from(p.as_str())).collect()),
            );
        }
        if self.env_file_format != env_file::Format::default() {
            doc.insert(
                "env_file_format".into(),
                J::from(self.env_file_format.as_str()),
            );
        }
        doc.insert("restart".into(), J::from(self.restart.as_str()));
        doc.insert(
            "on_drift".into(),
            J::from(match self.on_drift {
                DriftPolicy::Recreate => "recreate",
                DriftPolicy::Report => "report",
            }),
        );
        if !self.depends_on.is_empty() {
            doc.insert(
                "depends_on".into(),
                J::Array(
                    self.depends_on
                        .iter()
                        .map(|d| {
                            let mut t = serde_json::Map::new();
                            t.insert("module".into(), J::from(d.module.as_str()));
                            t.insert("condition".into(), J::from(d.condition.as_str()));
                            if d.restart {
                                t.insert("restart".into(), J::Bool(true));
                            }
                            J::Object(t)
                        })
                        .collect(),
                ),
            );
        }
        if self.update_order != UpdateOrder::default() {
            doc.insert("update_order".into(), J::from(self.update_order.as_str()));
        }
        if let Some(u) = &self.update {
            doc.insert(
                "update".into(),
                json!({
                    "lane": u.lane.as_str(),
                    "range": u.range.as_str(),
                    "interval": format_duration(u.interval),
                    "health_window": format_duration(u.health_window),
                }),
            );
        }
        if !self.ports.is_empty() {
            doc.insert(
                "ports".into(),
                J::Array(self.ports.iter().map(|p| J::from(p.to_string())).collect()),
            );
        }
        if let Some(c) = &self.config {
            let format = c.format.as_str();
            let defaults: serde_json::Map<String, J> = c
                .defaults
                .iter()
                .map(|(k, v)| (k.clone(), v.to_json()))
                .into_object();
            let mut cfg =
                json!({ "path": c.path.as_str(), "format": format, "defaults": defaults });
            if let Some(r) = &c.reload {
                cfg["reload"] = json!(format!("signal:{r}"));
            }
            doc.insert("config".into(), cfg);
        }
        if !self.settings.is_empty() {
            doc.insert(
                "settings".into(),
                J::Object(
                    self.settings
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_json()))
                        .into_object(),
                ),
            );
        }
        if !self.files.is_empty() {
            doc.insert(
                "files".into(),
                J::Array(
                    self.files
                        .iter()
                        .map(|f| json!({ "path": f.path.as_str(), "content": f.content.to_json() }))
                        .collect(),
                ),
            );
        }
        if !self.mounts.is_empty() {
            doc.insert(
                "mounts".into(),
                J::Array(
                    self.mounts
                        .iter()
                        .map(|m| {
                            let mut o = json!({ "source": m.source.as_str(), "target": m.target.as_str(), "read_only": m.access.read_only() });
                            if m.access == Access::ReadOnlyView {
                                o["input"] = J::Bool(false);
                            }
                            o
                        })
                        .collect(),
                ),
            );
        }
        self.runtime.write_json(&mut doc);
        J::Object(doc)
    }
}

impl Intention {
    /// Checks that the settings merge over the config's defaults and render
    /// in its format; the rendered bytes are not kept.
    pub fn check_settings(&self) -> Result<(), config::RenderError> {
        // A sealed value is checked where it is, as a string: it is
        // opened on its device alone.
        let settings = self
            .settings
            .iter()
            .map(|(k, v)| {
                let v = v.opened(k.as_str(), &mut |_, s| {
                    Ok::<_, std::convert::Infallible>(Value::String(s.as_str().into()))
                });
                let Ok(v) = v;
                (k.clone(), v)
            })
            .into_map();
        let rendered = match &self.config {
            Some(c) => c.render(&settings)?.len(),
            None => match config::settings_without_config(&self.settings) {
                Some(e) => return Err(e),
                None => 0,
            },
        };
        config::check_composed_size(
            rendered + self.files.iter().map(|f| f.content.len()).sum::<usize>(),
        )
    }
}

impl Intention {
    /// Every value sealed in it, with its field: `env.<NAME>`,
    /// `settings.<key>[.<sub>…]`, `files.<path>`; what each is bound to.
    pub fn sealed_fields(&self) -> Vec<(String, &SealedText)> {
        let mut out = Vec::new();
        for (k, v) in &self.env {
            if let Text::Sealed(s) = v {
                out.push((format!("env.{k}"), s));
            }
        }
        for (k, v) in &self.settings {
            v.sealed(&format!("settings.{k}"), &mut out);
        }
        for f in &self.files {
            if let Text::Sealed(s) = &f.content {
                out.push((file_field(&f.path), s));
            }
        }
        out
    }
}

/// The field a literal file's sealed content is bound to.
pub fn file_field(path: &AbsPath) -> String {
    format!("files.{path}")
}

fn path_or_file(p: &str) -> String {
    if p == "." || p.is_empty() {
        "(file)".into()
    } else {
        p.to_string()
    }
}

/// ` (line L, column C)` of a byte offset.
fn position(text: &str, offset: usize) -> String {
    let before = &text.as_bytes()[..offset.min(text.len())];
    let line = before.iter().filter(|b| **b == b'\n').count() + 1;
    let column = before.iter().rev().take_while(|b| **b != b'\n').count() + 1;
    format!(" (line {line}, column {column})")
}

/// A parser's message with the values it quotes taken out: errors name the
/// file, the place and the field, never what was written there (it may be
/// a password). `invalid type: string "hunter2", expected a map` becomes
/// `invalid type: string, expected a map`.
pub fn without_values(message: &str) -> String {
    // The parsers quote the value only in these; elsewhere they quote keys
    // (already named by the field) and the schema's own words.
    for prefix in ["invalid type: ", "invalid value: ", "unknown variant "] {
        let Some(rest) = message.strip_prefix(prefix) else {
            continue;
        };
        let Some(open) = rest.find(['"', '`', '\'']) else {
            break;
        };
        let quote = rest.as_bytes()[open] as char;
        let close = rest[open + 1..].find(quote).map(|j| open + 1 + j + 1);
        let head = rest[..open].trim_end();
        let tail = close.map_or("", |c| &rest[c..]);
        let prefix = if head.is_empty() {
            prefix.trim_end()
        } else {
            prefix
        };
        return format!("{prefix}{head}{tail}");
    }
    message.to_string()
}

impl IntentionDoc {
    fn check(mut self) -> Result<Intention, (String, String)> {
        // Checked below, after the intention's own fields.
        let runtime_doc = self.runtime_doc();
        fn f(
            field: &str,
        ) -> impl FnOnce(crate::model::names::InvalidName) -> (String, String) + '_ {
            move |m| (field.to_string(), m.0)
        }
        let name = ModuleName::try_from(self.name).map_err(f("name"))?;
        let image = self.image;
        if image.is_empty() || image.contains(char::is_whitespace) {
            return Err(("image".into(), format!("invalid image reference {image:?}")));
        }
        let command = match self.command {
            Some(c) if c.is_empty() => None,
            c => c,
        };
        if let Some(i) = command.iter().flatten().position(|a| a.contains('\0')) {
            return Err((format!("command[{i}]"), "contains a NUL byte".into()));
        }
        let mut env = BTreeMap::new();
        for (k, v) in self.env {
            let key = EnvName::try_from(k.as_str()).map_err(f(&format!("env.{k}")))?;
            let v = Text::from_json(v).map_err(|m| (format!("env.{k}"), m))?;
            if v.plain().is_some_and(|v| v.contains('\0')) {
                return Err((format!("env.{k}"), "value contains a NUL byte".into()));
            }
            env.insert(key, v);
        }
        let env_files = self
            .env_files
            .into_iter()
            .enumerate()
            .map(|(i, p)| AbsPath::try_from(p).map_err(f(&format!("env_files[{i}]"))))
            .collect::<Result<Vec<_>, _>>()?;
        let mut ports = Vec::new();
        let mut seen_ports: BTreeSet<(String, u16, Protocol)> = BTreeSet::new();
        for (i, p) in self.ports.iter().enumerate() {
            let spec = PortSpec::parse(p).map_err(|m| (format!("ports[{i}]"), m))?;
            if let Some((ip, port)) = &spec.host {
                // One host port is taken once per protocol: an address
                // that listens everywhere overlaps every other.
                let wildcard = |a: &str| a == "0.0.0.0" || a == "::";
                let clash = seen_ports.iter().find(|(other_ip, other_port, proto)| {
                    other_port == port
                        && *proto == spec.protocol
                        && (other_ip == ip || wildcard(other_ip) || wildcard(ip))
                });
                if let Some((other_ip, _, _)) = clash {
                    return Err((
                        format!("ports[{i}]"),
                        format!("host port {port} on {ip} is already published on {other_ip}"),
                    ));
                }
                seen_ports.insert((ip.clone(), *port, spec.protocol));
            }
            ports.push(spec);
        }
        super::sort::sort(&mut ports);
        if self.update_order == UpdateOrder::StartFirst {
            if let Some((i, p)) = ports.iter().enumerate().find(|(_, p)| p.host.is_some()) {
                return Err((
                    "update_order".into(),
                    format!(
                        "start-first runs the old and the new container together for a moment, and ports[{i}] ({p}) publishes a host port only one of them can hold; use stop-first"
                    ),
                ));
            }
        }

        // Every path the container sees is claimed once.
        let mut targets: BTreeMap<AbsPath, String> = BTreeMap::new();
        let mut claim = |t: &AbsPath, field: String| -> Result<(), (String, String)> {
            if let Some(prev) = targets.insert(t.clone(), field.clone()) {
                return Err((field, format!("path {t} is already used by {prev}")));
            }
            Ok(())
        };

        let config = match self.config {
            None => None,
            Some(c) => {
                let path = AbsPath::try_from(c.path).map_err(f("config.path"))?;
                claim(&path, "config.path".into())?;
                let defaults = match Value::from_json(
                    serde_json::Value::Object(c.defaults),
                    "config.defaults",
                ) {
                    Ok(Value::Table(t)) => t,
                    Ok(_) => {
                        return Err((
                            "config.defaults".into(),
                            "a table of the module's defaults".into(),
                        ));
                    }
                    Err(m) => return Err(("config.defaults".into(), m)),
                };
                let mut sealed = Vec::new();
                for (k, v) in &defaults {
                    v.sealed(&format!("config.defaults.{k}"), &mut sealed);
                }
                if let Some((at, _)) = sealed.first() {
                    return Err((
                        at.clone(),
                        "a default is the module's, the same on every device: seal the setting instead".into(),
                    ));
                }
                let reload = match c.reload {
                    None => None,
                    Some(r) => match r.strip_prefix("signal:") {
                        Some(sig) => Some(
                            runtime::signal_name(sig)
                                .map_err(|m| ("config.reload".to_string(), m))?,
                        ),
                        None => {
                            return Err((
                                "config.reload".into(),
                                format!(
                                    "{r:?}: the module's way to reload, \"signal:<SIGNAL>\" (such as \"signal:SIGHUP\")"
                                ),
                            ));
                        }
                    },
                };
                Some(ConfigFile {
                    path,
                    format: c.format,
                    defaults,
                    reload,
                })
            }
        };
        let mut settings = BTreeMap::new();
        for (k, v) in self.settings {
            let field = crate::model::names::setting_field(&k);
            let key = SettingKey::try_from(k.as_str()).map_err(f(&field))?;
            let v = Value::from_json(v, &field).map_err(|m| (field.clone(), m))?;
            settings.insert(key, v);
        }
        let mut files = Vec::new();
        for (i, fd) in self.files.into_iter().enumerate() {
            let path = AbsPath::try_from(fd.path).map_err(f(&format!("files[{i}].path")))?;
            claim(&path, format!("files[{i}].path"))?;
            let content =
                Text::from_json(fd.content).map_err(|m| (format!("files[{i}].content"), m))?;
            files.push(LiteralFile { path, content });
        }
        let mut mounts = Vec::new();
        for (i, m) in self.mounts.into_iter().enumerate() {
            let source = HostPath::try_from(trailing_slash_dropped(&m.source))
                .map_err(f(&format!("mounts[{i}].source")))?;
            let target = AbsPath::try_from(trailing_slash_dropped(&m.target))
                .map_err(f(&format!("mounts[{i}].target")))?;
            claim(&target, format!("mounts[{i}].target"))?;
            let access = match (m.read_only, m.input) {
                (true, None | Some(true)) => Access::ReadOnly,
                (true, Some(false)) => Access::ReadOnlyView,
                (false, None) => Access::ReadWrite,
                (false, Some(_)) => {
                    return Err((
                        format!("mounts[{i}].input"),
                        "only a read-only mount is an input (a read-write one is state): input is for read_only = true".into(),
                    ));
                }
            };
            if source.as_str() == "/" && access != Access::ReadOnlyView {
                return Err((
                    format!("mounts[{i}].source"),
                    "the host's root is mounted only as a view: read_only = true and input = false (as an input it would be read whole on every pass)".into(),
                ));
            }
            mounts.push(Mount {
                source,
                target,
                access,
            });
        }
        // A composed file is bind-mounted over its path: inside a mounted
        // directory, the engine would make that path in the host directory
        // (or fail, when the mount is read-only).
        let composed = config
            .iter()
            .map(|c| ("config.path".to_string(), &c.path))
            .chain(
                files
                    .iter()
                    .enumerate()
                    .map(|(i, f)| (format!("files[{i}].path"), &f.path)),
            );
        for (field, path) in composed {
            if let Some((j, m)) = mounts
                .iter()
                .enumerate()
                .find(|(_, m)| path.as_path().starts_with(m.target.as_path()))
            {
                return Err((
                    field,
                    format!(
                        "{path} is inside mounts[{j}].target {}: the engine would make it in the host directory {}",
                        m.target, m.source
                    ),
                ));
            }
        }
        let update = match self.update {
            None => None,
            Some(u) => Some(check_update(&image, u)?),
        };
        let runtime = runtime_doc.check()?;
        for (i, t) in runtime.tmpfs.keys().enumerate() {
            claim(t, format!("tmpfs[{i}]"))?;
        }
        for (i, v) in runtime.volumes.iter().enumerate() {
            claim(&v.target, format!("volumes[{i}]"))?;
        }
        if let Some(t) = &runtime.update_lock {
            claim(t, "update_lock".into())?;
        }
        if runtime.network_mode != runtime::NetworkMode::Bridge && !ports.is_empty() {
            return Err((
                "ports".into(),
                format!(
                    "a container with network_mode = {:?} publishes no ports (with host, it listens on the host's own; in another's, that one publishes them)",
                    runtime.network_mode.spelled()
                ),
            ));
        }
        if runtime.network_mode == runtime::NetworkMode::Container(name.clone()) {
            return Err((
                "network_mode".into(),
                "a module cannot join its own network stack".into(),
            ));
        }
        if config.as_ref().is_some_and(|c| c.reload.is_some()) {
            check_live_layout(config.as_ref(), &files, &mounts, &runtime)?;
        }
        let mut depends_on: Vec<Dependency> = Vec::new();
        for (i, d) in self.depends_on.into_iter().enumerate() {
            let field = format!("depends_on[{i}]");
            let (module, condition, restart) = match d {
                DependencyDoc::Name(m) => (m, Condition::Started, false),
                DependencyDoc::Full(t) => (t.module, t.condition, t.restart),
            };
            let module = ModuleName::try_from(module.as_str())
                .map_err(|e| (format!("{field}.module"), e.to_string()))?;
            if module == name {
                return Err((field, "a module cannot depend on itself".into()));
            }
            if depends_on.iter().any(|d| d.module == module) {
                return Err((field, format!("module {module} is given twice")));
            }
            depends_on.push(Dependency {
                module,
                condition,
                restart,
            });
        }
        let intention = Intention {
            name,
            image,
            command,
            env,
            env_files,
            env_file_format: self.env_file_format,
            restart: self.restart,
            on_drift: self.on_drift,
            update_order: self.update_order,
            depends_on,
            update,
            ports,
            config,
            settings,
            files,
            mounts,
            runtime: runtime.into(),
        };
        // A setting that cannot be merged or rendered is bad input now, not a
        // failure at the next pass.
        intention
            .check_settings()
            .map_err(|e| (e.field, e.message))?;
        Ok(intention)
    }
}

/// Directories the engine itself mounts into (`/etc/hosts`, `/dev/shm`,
/// `/proc`, ...): a read-only directory mounted over one of them fails the
/// container's start.
const ENGINE_DIRS: [&str; 4] = ["/etc", "/dev", "/proc", "/sys"];

/// A module that reloads live gets its config and literal files through
/// their directories, each mounted whole and read-only (so one rename
/// swaps them): every such directory must be one the engine can mount and
/// that nothing else mounts into. Each layout refused here would pass as a
/// document and then fail at create, on every pass.
fn check_live_layout(
    config: Option<&ConfigFile>,
    files: &[LiteralFile],
    mounts: &[Mount],
    runtime: &Runtime,
) -> Result<(), (String, String)> {
    let live = config
        .map(|c| ("config.path".to_string(), &c.path))
        .into_iter()
        .chain(
            files
                .iter()
                .enumerate()
                .map(|(i, f)| (format!("files[{i}].path"), &f.path)),
        );
    let mut dirs: Vec<(String, AbsPath)> = Vec::new();
    for (field, path) in live {
        let Some((dir, _)) = path.split_parent() else {
            return Err((
                field,
                format!(
                    "{path} is directly under /: a live file's directory is mounted whole, and / cannot be; put it in a directory of its own (such as /config{path})"
                ),
            ));
        };
        if ENGINE_DIRS.contains(&dir.as_str()) {
            return Err((
                field,
                format!(
                    "{path} is directly in {dir}: a live file's directory is mounted whole, and the engine mounts its own files into {dir}; put it in a directory of its own (such as {dir}/app)"
                ),
            ));
        }
        if !dirs.iter().any(|(_, d)| *d == dir) {
            dirs.push((field, dir));
        }
    }
    let inside = |t: &AbsPath, d: &AbsPath| t.as_path().starts_with(d.as_path());
    for (field, dir) in &dirs {
        if let Some((other, d)) = dirs.iter().find(|(_, d)| d != dir && inside(dir, d)) {
            return Err((
                field.clone(),
                format!(
                    "its directory {dir} is inside {d}, the live directory of {other}: a live directory is mounted read-only, so nothing can be mounted inside it"
                ),
            ));
        }
    }
    let others = mounts
        .iter()
        .enumerate()
        .map(|(j, m)| (format!("mounts[{j}].target"), &m.target))
        .chain(
            runtime
                .tmpfs
                .keys()
                .enumerate()
                .map(|(j, t)| (format!("tmpfs[{j}]"), t)),
        )
        .chain(
            runtime
                .volumes
                .iter()
                .enumerate()
                .map(|(j, v)| (format!("volumes[{j}]"), &v.target)),
        );
    for (field, target) in others {
        if let Some((live, dir)) = dirs.iter().find(|(_, d)| inside(target, d)) {
            return Err((
                field,
                format!(
                    "{target} is inside {dir}, the live directory of {live}: a live directory is mounted read-only, so nothing can be mounted inside it"
                ),
            ));
        }
    }
    Ok(())
}

/// Checks an `[update]` section against the intention's image: the image
/// must name a registry repository at a tag that is a version.
fn check_update(image: &str, u: UpdateDoc) -> Result<UpdatePolicy, (String, String)> {
    let r = Reference::parse(image).map_err(|m| ("image".to_string(), m))?;
    let tag = r.tag.as_deref().unwrap_or("");
    if r.digest.is_some() || TagVersion::parse(tag).is_none() {
        return Err((
            "update".into(),
            format!(
                "a module updated from its registry names its image at a version tag ([v]MAJOR.MINOR.PATCH[-suffix]); {tag:?} is not one"
            ),
        ));
    }
    let range = Range::parse(&u.range).map_err(|m| ("update.range".to_string(), m))?;
    let duration = |field: &str, v: Option<String>, default: Duration, min: Duration| {
        let d = match v {
            None => default,
            Some(s) => parse_duration(&s).map_err(|m| (field.to_string(), m))?,
        };
        if d < min {
            return Err((
                field.to_string(),
                format!("at least {}", format_duration(min)),
            ));
        }
        Ok(d)
    };
    Ok(UpdatePolicy {
        lane: u.lane,
        range,
        interval: duration(
            "update.interval",
            u.interval,
            DEFAULT_UPDATE_INTERVAL,
            Duration::from_secs(60),
        )?,
        health_window: duration(
            "update.health_window",
            u.health_window,
            DEFAULT_HEALTH_WINDOW,
            Duration::from_secs(1),
        )?,
    })
}
#[cfg(test)]
mod tests {
    use super::*;

    const EXAMPLE: &str = r#"
name = "sensor"
image = "stead-test/busybox:1"
command = ["sh", "-c", "cat /etc/sensor/config.json; exec sleep 1000000"]
env = { MODE = "prod" }
env_files = ["/srv/sensor/secrets.env"]
restart = "unless-stopped"
on_drift = "recreate"
ports = ["127.0.0.1:18080:80/tcp"]

[config]
path = "/etc/sensor/config.json"
format = "json"
defaults = { poll_ms = 1000, database = { url = "" } }

[settings]
"database.url" = "postgresql://db:5432/x"

[[files]]
path = "/etc/sensor/banner.txt"
content = "hello"

[[mounts]]
source = "/srv/sensor/model.bin"
target = "/model.bin"
read_only = true
"#;

    fn parse(t: &str) -> Result<Intention, IntentionError> {
        Intention::parse(t, DocFormat::Toml, "x.toml")
    }

    #[test]
    fn the_documented_example_parses() {
        let i = parse(EXAMPLE).unwrap();
        assert_eq!(i.name.as_str(), "sensor");
        assert_eq!(i.restart, RestartPolicy::UnlessStopped);
        assert_eq!(i.ports[0].host, Some(("127.0.0.1".into(), 18080)));
        assert_eq!(i.mounts[0].access, Access::ReadOnly);
        assert_eq!(i.settings.len(), 1);
    }

    #[test]
    fn sealed_values_are_read_where_a_device_may_open_them_and_refused_elsewhere() {
        let doc = r#"
name = "db"
image = "x"
env = { MODE = "prod", DB_PASSWORD = { sealed = "YWdl" } }
[config]
path = "/etc/app.json"
format = "json"
defaults = { db = { host = "h" } }
[settings]
"db.password" = { sealed = "YWdl+/==" }
hosts = ["a", { sealed = "Yg==" }]
[[files]]
path = "/etc/key.pem"
content = { sealed = "Yw==" }
"#;
        let i = parse(doc).unwrap();
        let fields: Vec<(String, &str)> = i
            .sealed_fields()
            .into_iter()
            .map(|(f, s)| (f, s.as_str()))
            .collect();
        assert_eq!(
            fields,
            [
                ("env.DB_PASSWORD".to_string(), "YWdl"),
                ("settings.db.password".into(), "YWdl+/=="),
                ("settings.hosts[1]".into(), "Yg=="),
                ("files./etc/key.pem".into(), "Yw=="),
            ]
        );
        // The sealed text is what is kept and shown, as it was given.
        let back = Intention::from_value(&i.to_json(), "t").unwrap();
        assert_eq!(back, i);
        assert_eq!(
            i.to_json()["env"]["DB_PASSWORD"],
            serde_json::json!({"sealed": "YWdl"})
        );
        // (what is added to `name = "m"` and `image = "x"`, the field, what is said)
        #[rustfmt::skip]
        let refused = [
            ("env = { A = { sealed = 1 } }", "env.A", "is a string"),
            ("env = { A = { sealed = \"not base64!\" } }", "env.A", "base64 of an age file"),
            ("env = { A = { sealed = \"\" } }", "env.A", "base64 of an age file"),
            ("env = { A = { other = \"YQ==\" } }", "env.A", "a string, or"),
            ("env = { A = 1 }", "env.A", "a string, or"),
            ("[[files]]\npath = \"/f\"\ncontent = { sealed = \"?\" }", "files[0].content", "base64"),
            ("[config]\npath = \"/c\"\nformat = \"json\"\ndefaults = { a = { b = { sealed = \"YQ==\" } } }", "config.defaults.a.b", "seal the setting"),
            ("[config]\npath = \"/c\"\nformat = \"json\"\n[settings]\na = { sealed = \"%\" }", "settings.\"a\"", "base64"),
        ];
        for (extra, field, says) in refused {
            let e = parse(&format!("name = \"m\"\nimage = \"x\"\n{extra}")).unwrap_err();
            assert_eq!(e.field, field, "{extra}: {e}");
            assert!(e.message.contains(says), "{extra}: {e}");
        }
    }

    #[test]
    fn a_key_given_twice_is_refused_in_json_as_toml_refuses_it() {
        for (json, toml, field) in [
            (
                r#"{"name": "m", "image": "a:1", "image": "b:1"}"#,
                "name = \"m\"\nimage = \"a:1\"\nimage = \"b:1\"\n",
                "(file)",
            ),
            (
                r#"{"name": "m", "image": "a:1", "env": {"A": "1", "A": "2"}}"#,
                "name = \"m\"\nimage = \"a:1\"\n[env]\nA = \"1\"\nA = \"2\"\n",
                "env",
            ),
            (
                r#"{"name": "m", "image": "a:1", "settings": {"k": {"x": 1, "x": 2}}}"#,
                "name = \"m\"\nimage = \"a:1\"\n[settings.k]\nx = 1\nx = 2\n",
                "settings.k",
            ),
        ] {
            let e = Intention::parse(json, DocFormat::Json, "m.json").unwrap_err();
            assert_eq!(e.field, field, "{json}: {e}");
            assert!(e.message.contains("is given twice"), "{json}: {e}");
            assert!(
                Intention::parse(toml, DocFormat::Toml, "m.toml").is_err(),
                "{toml}"
            );
        }
    }

    #[test]
    fn depends_on_names_modules_and_conditions_and_is_no_input() {
        let base = "name = \"app\"\nimage = \"a:1\"\n";
        let i = parse(&format!(
            "{base}depends_on = [\"db\", {{ module = \"broker\", condition = \"healthy\", restart = true }}, {{ module = \"init\", condition = \"completed\" }}]"
        ))
        .unwrap();
        let got: Vec<(&str, Condition, bool)> = i
            .depends_on
            .iter()
            .map(|d| (d.module.as_str(), d.condition, d.restart))
            .collect();
        assert_eq!(
            got,
            [
                ("db", Condition::Started, false),
                ("broker", Condition::Healthy, true),
                ("init", Condition::Completed, false)
            ]
        );
        // Written back, it reads the same; and it is no input.
        let back = Intention::parse_json(i.to_json().to_string().as_bytes(), "back").unwrap();
        assert_eq!(back, i);
        let plain = parse(base).unwrap();
        assert_eq!(
            crate::model::spec::own_input_digests(&plain, &Default::default()),
            crate::model::spec::own_input_digests(&i, &Default::default())
        );
        for (text, field, says) in [
            ("depends_on = [\"app\"]", "depends_on[0]", "itself"),
            (
                "depends_on = [\"db\", { module = \"db\" }]",
                "depends_on[1]",
                "given twice",
            ),
            ("depends_on = [\"Not A Name\"]", "depends_on[0].module", ""),
            (
                "depends_on = [{ module = \"db\", condition = \"ready\" }]",
                "depends_on[0].condition",
                "unknown variant",
            ),
            (
                "depends_on = [{ module = \"db\", when = 1 }]",
                "depends_on[0].when",
                "unknown field",
            ),
            (
                "depends_on = [1]",
                "depends_on[0]",
                "expected a module's name or a table",
            ),
        ] {
            let e = parse(&format!("{base}{text}")).unwrap_err();
            assert_eq!(e.field, field, "{text}: {e}");
            assert!(e.message.contains(says), "{text}: {e}");
        }
    }

    #[test]
    fn toml_values_json_has_no_place_for_are_refused_by_name() {
        for (text, field, says) in [
            ("cpus = nan", "cpus", "not a finite number"),
            (
                "[settings]\nx = [1.0, inf]",
                "settings.x[1]",
                "not a finite number",
            ),
            ("[env]\nWHEN = 1979-05-27", "env.WHEN", "date-time"),
        ] {
            let e = Intention::parse(
                &format!("name = \"m\"\nimage = \"a:1\"\n{text}\n"),
                DocFormat::Toml,
                "m.toml",
            )
            .unwrap_err();
            assert_eq!(
                (e.field.as_str(), e.message.contains(says)),
                (field, true),
                "{text}: {e}"
            );
        }
    }

    #[test]
    fn a_json_value_is_checked_as_its_text_is() {
        for doc in [
            r#"{"name": "m"}"#,
            r#"{"name": "m", "image": 3}"#,
            r#"{"name": "m", "image": "a:1", "ports": "80"}"#,
            r#"{"name": "m", "image": "a:1", "nope": 1}"#,
            r#"{"name": "m", "image": "a:1", "env": {"A": 1}}"#,
            r#"{"name": "M!", "image": "a:1"}"#,
            r#"{"name": "m", "image": "a:1", "shm_size": "lots"}"#,
            r#"[1]"#,
        ] {
            let text = Intention::parse_json(doc.as_bytes(), "t").unwrap_err();
            let v: serde_json::Value = serde_json::from_str(doc).unwrap();
            let value = Intention::from_value(&v, "t").unwrap_err();
            assert_eq!(value.field, text.field, "{doc}");
            assert!(
                text.message.starts_with(&value.message),
                "{doc}: {} / {}",
                value.message,
                text.message
            );
        }
    }

    #[test]
    fn a_read_only_mount_that_is_not_an_input() {
        let base = "name = \"m\"\nimage = \"busybox:1\"\n[[mounts]]\nsource = \"/proc\"\ntarget = \"/host/proc\"\n";
        let p =
            |extra: &str| Intention::parse(&format!("{base}{extra}"), DocFormat::Toml, "t.toml");
        assert_eq!(
            p("read_only = true\ninput = false\n").unwrap().mounts[0].access,
            Access::ReadOnlyView
        );
        assert_eq!(
            p("read_only = true\ninput = true\n").unwrap().mounts[0].access,
            Access::ReadOnly
        );
        let e = p("input = false\n").unwrap_err().to_string();
        assert!(e.contains("mounts[0].input"), "{e}");
        // The host's root: only as a view.
        let root = |extra: &str| {
            Intention::parse(
                &format!(
                    "name = \"m\"\nimage = \"busybox:1\"\n[[mounts]]\nsource = \"/\"\ntarget = \"/host\"\n{extra}"
                ),
                DocFormat::Toml,
                "t.toml",
            )
        };
        assert_eq!(
            root("read_only = true\ninput = false\n").unwrap().mounts[0]
                .source
                .as_str(),
            "/"
        );
        for refused in ["read_only = true\n", ""] {
            let e = root(refused).unwrap_err().to_string();
            assert!(
                e.contains("mounts[0].source") && e.contains("view"),
                "{refused}: {e}"
            );
        }
        assert!(p("").is_ok());
        // Written out and read back, the same.
        let i = p("read_only = true\ninput = false\n").unwrap();
        let back = Intention::parse_json(i.to_json().to_string().as_bytes(), "t").unwrap();
        assert_eq!(back, i);
    }

    #[test]
    fn bad_input_names_the_field() {
        let cases: &[(&str, &str, &str)] = &[
            (
                "name = \"Bad\"\nimage = \"x\"",
                "name",
                "invalid module name",
            ),
            (
                "name = \"a\"\nimage = \"x\"\nbogus = 1",
                "bogus",
                "unknown field `bogus`",
            ),
            (
                "name = \"a\"\nimage = \"x\"\nrestart = \"sometimes\"",
                "restart",
                "unknown variant",
            ),
            (
                "name = \"a\"\nimage = \"r.io/x\"\n[update]\nrange = \"^1\"",
                "update",
                "\"latest\" is not one",
            ),
            (
                "name = \"a\"\nimage = \"r.io/x:20240101\"\n[update]\nrange = \"^1\"",
                "update",
                "version tag",
            ),
            (
                "name = \"a\"\nimage = \"r.io/x:1.2.0\"\n[update]\nrange = \"one\"",
                "update.range",
                "invalid range",
            ),
            (
                "name = \"a\"\nimage = \"r.io/x:1.2.0\"\n[update]\nrange = \"^1\"\ninterval = \"10s\"",
                "update.interval",
                "at least 1m",
            ),
            (
                "name = \"a\"\nimage = \"r.io/x:1.2.0\"\n[update]\nrange = \"^1\"\nlane = \"sometimes\"",
                "update.lane",
                "unknown variant",
            ),
            (
                "name = \"a\"\nimage = \"r.io/x:1.2.0\"\n[update]\nlane = \"auto\"",
                "update",
                "missing field `range`",
            ),
            (
                "name = \"a\"\nimage = \"x\"\n[config]\npath = \"/a\"\nformat = \"yaml\"",
                "config.format",
                "unknown variant",
            ),
            (
                "name = \"a\"\nimage = \"x\"\n[[files]]\npath = \"../etc/x\"\ncontent = \"\"",
                "files[0].path",
                "absolute",
            ),
            (
                "name = \"a\"\nimage = \"x\"\n[[files]]\npath = \"/etc/../x\"\ncontent = \"\"",
                "files[0].path",
                "`..`",
            ),
            (
                "name = \"a\"\nimage = \"x\"\n[[mounts]]\nsource = \"rel\"\ntarget = \"/x\"",
                "mounts[0].source",
                "absolute",
            ),
            (
                "name = \"a\"\nimage = \"x\"\nports = [\"99999:80\"]",
                "ports[0]",
                "not a port",
            ),
            (
                "name = \"a\"\nimage = \"x\"\n[settings]\n\"a.b\" = 1",
                "settings",
                "no [config]",
            ),
            (
                "name = \"a\"\nimage = \"x\"\nenv = { \"1 X\" = \"v\" }",
                "env.1 X",
                "invalid environment",
            ),
            (
                "name = \"a\"\nimage = \"x\"\n[config]\npath = \"/c\"\nformat = \"json\"\n[[files]]\npath = \"/c\"\ncontent = \"\"",
                "files[0].path",
                "already used",
            ),
            ("name = [", "(file)", "TOML parse error"),
            (
                "name = \"a\"\nimage = \"x\"\nupdate_order = \"start-first\"\nports = [\"8080:80\"]",
                "update_order",
                "publishes a host port",
            ),
            (
                "name = \"a\"\nimage = \"x\"\ncommand = [\"sh\", \"a\\u0000b\"]",
                "command[1]",
                "NUL",
            ),
            (
                "name = \"a\"\nimage = \"x\"\nports = [\"8080:80\", \"127.0.0.1:8080:81\"]",
                "ports[1]",
                "already published on 0.0.0.0",
            ),
            (
                "name = \"a\"\nimage = \"x\"\n[config]\npath = \"/data/c.json\"\nformat = \"json\"\n[[mounts]]\nsource = \"/srv/a\"\ntarget = \"/data\"",
                "config.path",
                "inside mounts[0].target /data",
            ),
        ];
        for (text, field, msg) in cases {
            let e = parse(text).unwrap_err();
            assert_eq!(e.field, *field, "{text}: {e}");
            assert!(e.message.contains(msg), "{text}: {e}");
            assert!(e.to_string().starts_with("x.toml: "), "{e}");
        }
    }

    #[test]
    fn errors_never_quote_what_was_written() {
        let secret = "hunter2-s3cret";
        for (text, format) in [
            (
                format!("name = \"a\"\nimage = \"x\"\nenv = {{ DB_PASSWORD = \"{secret}\" "),
                DocFormat::Toml,
            ),
            (
                format!("name = \"a\"\nimage = \"x\"\nenv = \"{secret}\""),
                DocFormat::Toml,
            ),
            (
                format!("name = \"a\"\nimage = \"x\"\nrestart = \"{secret}\""),
                DocFormat::Toml,
            ),
            (
                format!("name = \"a\"\nimage = \"x\"\nports = [\"{secret}\"]\nbad = 1"),
                DocFormat::Toml,
            ),
            (
                format!(r#"{{"name":"a","image":"x","env":"{secret}"}}"#),
                DocFormat::Json,
            ),
            (
                format!(r#"{{"name":"a","image":"x","env":{{"A":"{secret}""#),
                DocFormat::Json,
            ),
        ] {
            let e = Intention::parse(&text, format, "x").unwrap_err();
            assert!(!e.to_string().contains(secret), "{e}");
            assert!(!e.to_string().contains("hunter"), "{e}");
        }
        let e = parse(&format!(
            "name = \"a\"\nimage = \"x\"\nenv = {{ DB_PASSWORD = \"{secret}\" "
        ))
        .unwrap_err();
        assert!(e.message.contains("line 3"), "{e}");
        assert_eq!(
            without_values("invalid type: string \"pw\", expected a map"),
            "invalid type: string, expected a map"
        );
    }

    #[test]
    fn json_intentions_parse_and_name_fields() {
        let ok =
            r#"{"name":"a","image":"x","settings":{},"config":{"path":"/c.json","format":"json"}}"#;
        assert!(Intention::parse(ok, DocFormat::Json, "api").is_ok());
        let bad = r#"{"name":"a","image":"x","mounts":[{"source":"/a","target":"/b","rw":true}]}"#;
        let e = Intention::parse(bad, DocFormat::Json, "api").unwrap_err();
        assert_eq!(e.field, "mounts[0].rw");
        assert!(e.message.contains("unknown field `rw`"), "{e}");
    }

    #[test]
    fn json_form_round_trips() {
        let i = parse(EXAMPLE).unwrap();
        let j = i.to_json().to_string();
        assert_eq!(Intention::parse(&j, DocFormat::Json, "api").unwrap(), i);
        let u = parse(
            "name = \"a\"\nimage = \"r.io/acme/x:v1.2.0-alpine\"\n[update]\nlane = \"pinned\"\nrange = \">=1.2, <2\"\n",
        )
        .unwrap();
        let p = u.update.as_ref().unwrap();
        assert_eq!(
            (p.lane, p.interval, p.health_window),
            (Lane::Pinned, DEFAULT_UPDATE_INTERVAL, DEFAULT_HEALTH_WINDOW)
        );
        let j = u.to_json().to_string();
        assert_eq!(Intention::parse(&j, DocFormat::Json, "api").unwrap(), u);
    }

    #[test]
    fn ports_normalise() {
        let p = PortSpec::parse("8080:80").unwrap();
        assert_eq!(p, PortSpec::parse("0.0.0.0:8080:80/tcp").unwrap());
        assert_eq!(PortSpec::parse("80").unwrap().host, None);
        assert_eq!(
            PortSpec::parse("[::1]:53:53/udp").unwrap().to_string(),
            "[::1]:53:53/udp"
        );
        assert!(PortSpec::parse("80/icmp").is_err());
        assert!(PortSpec::parse("foo:1:2").is_err());
    }

    #[test]
    fn a_mount_path_with_a_trailing_slash_is_the_path_without_it() {
        let i = |mount: &str, volume: &str, tmpfs: &str| {
            Intention::parse(
                &format!(
                    "name = \"m\"\nimage = \"x\"\nvolumes = [\"data:{volume}\"]\ntmpfs = [\"{tmpfs}\"]\n[[mounts]]\nsource = \"{mount}\"\ntarget = \"{mount}\"\nread_only = true\ninput = false\n"
                ),
                DocFormat::Toml,
                "t.toml",
            )
        };
        let plain = i("/srv/prometheus", "/data", "/run").unwrap();
        for (what, spelled) in [
            ("a mount", i("/srv/prometheus/", "/data", "/run")),
            ("a volume", i("/srv/prometheus", "/data/", "/run")),
            ("a tmpfs", i("/srv/prometheus", "/data", "/run/")),
        ] {
            let spelled = spelled.unwrap_or_else(|e| panic!("{what}: {e}"));
            // The same intention, so the same digests: an intention written
            // either way runs the same container.
            assert_eq!(spelled, plain, "{what}");
            assert_eq!(spelled.to_json(), plain.to_json(), "{what}");
        }
        assert_eq!(plain.mounts[0].target.as_str(), "/srv/prometheus");
        // Only one slash is taken: a double one is still refused, by field.
        let e = i("/srv/prometheus//", "/data", "/run").unwrap_err();
        assert_eq!(e.field, "mounts[0].source", "{e}");
    }

    #[test]
    fn a_config_reload_is_a_signal_and_reads_back() {
        let base = "name = \"m\"\nimage = \"x:1\"\n[config]\npath = \"/etc/m/c.json\"\nformat = \"json\"\n";
        let i = Intention::parse(
            &format!("{base}reload = \"signal:hup\"\n"),
            DocFormat::Toml,
            "t",
        )
        .unwrap();
        assert_eq!(i.config.as_ref().unwrap().reload.as_deref(), Some("SIGHUP"));
        let back = Intention::parse_json(i.to_json().to_string().as_bytes(), "back").unwrap();
        assert_eq!(back, i);
        let e = Intention::parse(
            &format!("{base}reload = \"exec:nginx -s reload\"\n"),
            DocFormat::Toml,
            "t",
        )
        .unwrap_err();
        assert_eq!(e.field, "config.reload");
        let e = Intention::parse(
            &format!("{base}reload = \"signal:NOPE\"\n"),
            DocFormat::Toml,
            "t",
        )
        .unwrap_err();
        assert!(e.message.contains("not a signal"), "{e}");
    }

    #[test]
    fn a_live_layout_the_engine_cannot_mount_is_refused_naming_the_field() {
        let live = |config: &str, rest: &str| {
            let text = format!(
                "name = \"m\"\nimage = \"x:1\"\ntmpfs = [\"/run/t\"]\n{rest}[config]\npath = \"{config}\"\nformat = \"json\"\nreload = \"signal:SIGHUP\"\n"
            );
            Intention::parse(&text, DocFormat::Toml, "t").map(|_| ())
        };
        let file = |p: &str| format!("[[files]]\npath = \"{p}\"\ncontent = \"x\"\n");
        let mount = |t: &str| format!("[[mounts]]\nsource = \"/srv/d\"\ntarget = \"{t}\"\n");
        for (config, rest, field, says) in [
            (
                "/app.json",
                String::new(),
                "config.path",
                "directly under /",
            ),
            (
                "/etc/app.json",
                String::new(),
                "config.path",
                "directly in /etc",
            ),
            (
                "/dev/app.json",
                String::new(),
                "config.path",
                "directly in /dev",
            ),
            (
                "/app/c.json",
                file("/banner.txt"),
                "files[0].path",
                "directly under /",
            ),
            (
                "/srv/app/c.json",
                file("/srv/app"),
                "config.path",
                "inside /srv, the live",
            ),
            (
                "/app/c.json",
                file("/app/sub/b.txt"),
                "files[0].path",
                "inside /app, the live",
            ),
            (
                "/app/c.json",
                mount("/app/data"),
                "mounts[0].target",
                "inside /app, the live",
            ),
            (
                "/run/t/c.json",
                String::new(),
                "tmpfs[0]",
                "inside /run/t, the live",
            ),
            (
                "/app/c.json",
                "volumes = [\"v:/app/v\"]\n".into(),
                "volumes[0]",
                "inside /app",
            ),
        ] {
            let e = live(config, &rest).unwrap_err();
            assert_eq!(e.field, field, "{config} {rest}: {e}");
            assert!(e.message.contains(says), "{config} {rest}: {e}");
        }
        // What the engine can mount: a directory of its own, files beside
        // each other, mounts elsewhere, the same layout without a reload.
        for (config, rest) in [
            ("/etc/app/c.json", file("/etc/app/banner.txt")),
            ("/app/c.json", file("/srv/b.txt") + &mount("/data")),
            ("/app/c.json", mount("/application")),
        ] {
            assert!(live(config, &rest).is_ok(), "{config} {rest}");
        }
        let plain =
            "name = \"m\"\nimage = \"x:1\"\n[config]\npath = \"/app.json\"\nformat = \"json\"\n";
        assert!(Intention::parse(plain, DocFormat::Toml, "t").is_ok());
    }
}
