//! The records of store schema 1, as 0.1.0 wrote them: version 1 of
//! every table. Field order and variant order are the encoding, here and
//! in every version after: never change them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub enum Value {
    Bool(bool),
    Int(i64),
    Float(f64),
    String(String),
    Array(Vec<Value>),
    Table(BTreeMap<String, Value>),
}

#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq)]
pub enum RestartPolicy {
    No,
    OnFailure,
    Always,
    UnlessStopped,
}

#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq)]
pub enum DriftPolicy {
    Recreate,
    Report,
}

#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq)]
pub enum Protocol {
    Tcp,
    Udp,
    Sctp,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct PortSpec {
    pub container_port: u16,
    pub protocol: Protocol,
    pub host: Option<(String, u16)>,
}

#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq)]
pub enum ConfigFormat {
    Json,
    Toml,
    Env,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct ConfigFile {
    pub path: String,
    pub format: ConfigFormat,
    pub defaults: BTreeMap<String, Value>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct LiteralFile {
    pub path: String,
    pub content: String,
}

#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq)]
pub enum Access {
    ReadOnly,
    ReadWrite,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Mount {
    pub source: String,
    pub target: String,
    pub access: Access,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Intention {
    pub name: String,
    pub image: String,
    pub command: Option<Vec<String>>,
    pub env: BTreeMap<String, String>,
    pub env_files: Vec<String>,
    pub restart: RestartPolicy,
    pub on_drift: DriftPolicy,
    pub ports: Vec<PortSpec>,
    pub config: Option<ConfigFile>,
    pub settings: BTreeMap<String, Value>,
    pub files: Vec<LiteralFile>,
    pub mounts: Vec<Mount>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub enum Source {
    File(String),
    Api,
    Plane,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct IntentionRecord {
    pub source: Source,
    pub revision: u64,
    pub intention: Intention,
}

pub type Overlay = BTreeMap<String, Value>;

#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq)]
pub enum ApplyState {
    Pending,
    Applied,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct BindMount {
    pub source: String,
    pub target: String,
    pub read_only: bool,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct ContainerSpec {
    pub name: String,
    pub image_id: String,
    pub command: Option<Vec<String>>,
    pub env: Vec<(String, String)>,
    pub ports: Vec<PortSpec>,
    pub mounts: Vec<BindMount>,
    pub restart: RestartPolicy,
    pub labels: BTreeMap<String, String>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct AppliedRecord {
    pub state: ApplyState,
    pub digest: String,
    pub inputs: BTreeMap<String, String>,
    pub spec: ContainerSpec,
    pub container_id: Option<String>,
    pub at: u64,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct ObservedRecord {
    pub container_id: String,
    pub digest: Option<String>,
    pub state: String,
    pub image_id: String,
    pub created: i64,
}

#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq)]
pub enum EventKind {
    Created,
    Recreated,
    Started,
    Removed,
    Drift,
    Conflict,
    Rejected,
    Intention,
    Error,
    Engine,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Event {
    pub seq: u64,
    pub at: u64,
    pub module: Option<String>,
    pub kind: EventKind,
    pub detail: String,
}
