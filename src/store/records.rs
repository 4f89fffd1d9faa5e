//! The store's own record types, apart from the domain types: what is on
//! disk is described here and only here. Each table has a record version;
//! a record is that version byte followed by the record in postcard (which
//! does not describe its fields, so a record type is never changed in place:
//! a new field is a new version, with a migration in `migrate.rs`).
//!
//! - `intentions`: version 7 ([`v9::IntentionRecord`], since schema 9:
//!   the intention as its canonical document, the intention-file schema's
//!   JSON, which the document's own parser reads back, so that a new field
//!   of an intention is a new key of the document, never a new record
//!   version); version 6 ([`v7::IntentionRecord`], since schema 7:
//!   version 5 with the read-only mounts that are not inputs, by index);
//!   version 5 ([`v6::IntentionRecord`], since schema 6: version 4 with the
//!   runtime fields, kept as the intention document's own JSON for them and
//!   checked again on the way out); version 4
//!   ([`v4::IntentionRecord`]) added the intention's `[update]` section,
//!   version 3 the update order, version 2 the revision a central plane
//!   stamps to version 1.
//! - `overlays`, `applied`, `observed`, `events`: version 1.
//! - `reloads` (reload requests) and `updates` (per module: the version a
//!   reload landed, digests the auto lane skips): version 2, since schema 8
//!   ([`v8::ReloadRecord`]: each item also says the image and range it was
//!   resolved against and the digest found; [`v8::UpdateRecord`]: the
//!   digests whose auto-update request failed, with what they failed
//!   under); version 1 since schema 4 ([`v4::ReloadRecord`],
//!   [`v4::UpdateRecord`]).
//! - `plane` (the central plane's held document: its record, key `held`,
//!   and its bytes, key `envelope`; the last contact, key `contact`):
//!   version 1, since schema 5
//!   ([`v5::PlaneRecord`]).
//!
//! - `guard` (the crash guard, key `guard`): version 1 ([`guard::GuardRecord`]),
//!   a table added without a schema change (an older agent never opens it).
//!
//! Converting a record to its domain type checks it again (names, digests,
//! paths): a record that does not check is reported as unreadable, never
//! taken on trust.

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::model::config::{ConfigFile, ConfigFormat};
use crate::model::intention::{
    Access, DriftPolicy, Intention, Lane, LiteralFile, Mount, PortSpec, Protocol, RestartPolicy,
    UpdateOrder, UpdatePolicy,
};
use crate::model::names::{AbsPath, Digest, EnvName, HostPath, InputName, ModuleName, SettingKey};
use crate::model::spec::{BindMount, ContainerSpec};
use crate::model::value::Value;
use crate::model::version::Range;
use crate::store::{
    AppliedRecord, ApplyState, Event, EventKind, IntentionRecord, ObservedRecord, Overlay, Source,
};

/// Record version of the `intentions` table.
pub const INTENTIONS: u8 = 7;
/// Record version of the `overlays` table.
pub const OVERLAYS: u8 = 1;
/// Record version of the `applied` table.
pub const APPLIED: u8 = 1;
/// Record version of the `observed` table.
pub const OBSERVED: u8 = 1;
/// Record version of the `events` table.
pub const EVENTS: u8 = 1;
/// Record version of the `reloads` table.
pub const RELOADS: u8 = 2;
/// Record version of the `updates` table.
pub const UPDATES: u8 = 2;
/// Record version of the `plane` table.
pub const PLANE: u8 = 1;
/// Record version of the `live` table.
pub const LIVE: u8 = 1;
/// Record version of the `guard` table.
pub const GUARD: u8 = 1;

/// Encodes a record behind its version byte.
pub fn encode<T: Serialize>(version: u8, v: &T) -> Vec<u8> {
    let mut out = vec![version];
    out.extend(postcard::to_allocvec(v).expect("records serialise"));
    out
}

/// Decodes a record of exactly this version.
pub fn decode<T: DeserializeOwned>(version: u8, bytes: &[u8]) -> Result<T, String> {
    match bytes.split_first() {
        Some((v, rest)) if *v == version => postcard::from_bytes(rest).map_err(|e| e.to_string()),
        Some((v, _)) => Err(format!("record version {v}, expected {version}")),
        None => Err("empty record".into()),
    }
}

/// The records of store schema 1, as 0.1.0 wrote them. Field order and
/// variant order are the encoding: never change them.
pub mod v1 {
    use super::*;

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
}

/// The records of store schema 2: the intention record gains the revision
/// a central plane stamps; every other record is as in version 1.
pub mod v2 {
    use super::*;

    #[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
    pub struct IntentionRecord {
        pub source: v1::Source,
        pub revision: u64,
        pub intention: v1::Intention,
        /// The revision of the plane's document that stated it (plane
        /// modules only).
        pub plane_revision: Option<u64>,
    }

    impl From<v1::IntentionRecord> for IntentionRecord {
        fn from(r: v1::IntentionRecord) -> Self {
            IntentionRecord {
                source: r.source,
                revision: r.revision,
                intention: r.intention,
                plane_revision: None,
            }
        }
    }
}

/// The records of store schema 3: the intention gains its update order.
pub mod v3 {
    use super::*;

    #[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq)]
    pub enum UpdateOrder {
        StopFirst,
        StartFirst,
    }

    /// Version 1's intention, then the new field: in postcard, the same
    /// bytes as the fields written one after the other.
    #[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
    pub struct Intention {
        pub base: v1::Intention,
        pub update_order: UpdateOrder,
    }

    #[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
    pub struct IntentionRecord {
        pub source: v1::Source,
        pub revision: u64,
        pub intention: Intention,
        pub plane_revision: Option<u64>,
    }

    impl From<v2::IntentionRecord> for IntentionRecord {
        fn from(r: v2::IntentionRecord) -> Self {
            IntentionRecord {
                source: r.source,
                revision: r.revision,
                intention: Intention {
                    base: r.intention,
                    // Every module before there was a choice.
                    update_order: UpdateOrder::StopFirst,
                },
                plane_revision: r.plane_revision,
            }
        }
    }
}

/// The records of store schema 4: the intention gains its `[update]`
/// section (how its image is updated from its registry).
pub mod v4 {
    use super::*;

    #[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq)]
    pub enum Lane {
        Manual,
        Auto,
        Pinned,
    }

    #[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
    pub struct Update {
        pub lane: Lane,
        pub range: String,
        pub interval_ms: u64,
        pub health_window_ms: u64,
    }

    /// Version 3's intention, then the new field.
    #[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
    pub struct Intention {
        pub base: v3::Intention,
        pub update: Option<Update>,
    }

    #[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
    pub struct IntentionRecord {
        pub source: v1::Source,
        pub revision: u64,
        pub intention: Intention,
        pub plane_revision: Option<u64>,
    }

    impl From<v3::IntentionRecord> for IntentionRecord {
        fn from(r: v3::IntentionRecord) -> Self {
            IntentionRecord {
                source: r.source,
                revision: r.revision,
                intention: Intention {
                    base: r.intention,
                    // No module was updated from a registry before.
                    update: None,
                },
                plane_revision: r.plane_revision,
            }
        }
    }

    #[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq)]
    pub enum ReloadStatus {
        Requested,
        Landing,
        Activating,
        Done,
        Failed,
        Faulted,
    }

    #[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq)]
    pub enum Activation {
        Restart,
        NotNeeded,
    }

    #[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
    pub struct ItemRecord {
        pub module: String,
        pub running_version: Option<String>,
        pub running_image: Option<String>,
        pub found_version: Option<String>,
        pub found_floor: Option<String>,
        pub registry: Option<String>,
        pub target_version: Option<String>,
        pub target_digest: Option<String>,
        pub target_image: Option<String>,
        pub healthcheck: bool,
        pub landed: bool,
        pub decision: String,
        pub failure: Option<String>,
        pub transient: bool,
        pub running_target_since: Option<u64>,
        pub restarts_at_start: Option<u32>,
    }

    #[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
    pub struct LogRecord {
        pub at: u64,
        pub attempt: u32,
        pub text: String,
    }

    #[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
    pub struct ReloadRecord {
        pub id: u64,
        pub written_by: u64,
        pub module: Option<String>,
        pub reason: String,
        pub requested_by: String,
        pub requested_at: u64,
        pub status: ReloadStatus,
        pub attempt: u32,
        pub faulted_at: Option<u64>,
        pub not_before: Option<u64>,
        pub items: Vec<ItemRecord>,
        pub activation: Option<Activation>,
        pub activation_detail: Option<String>,
        pub restart_requested_at: Option<u64>,
        pub failure: Option<String>,
        pub finished_at: Option<u64>,
        pub log: Vec<LogRecord>,
    }

    #[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
    pub struct LandedRecord {
        pub version: String,
        pub digest: String,
        pub image_id: String,
        pub reference: String,
        pub request: u64,
        pub from_image: String,
        pub from_range: String,
        pub previous_image: Option<String>,
    }

    #[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
    pub struct UpdateRecord {
        pub landed: Option<LandedRecord>,
        pub skipped: Vec<String>,
        pub last_look: u64,
    }
}

/// Records new in schema 5.
pub mod v5 {
    use serde::{Deserialize, Serialize};

    #[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
    pub enum PlaneRecord {
        Held(HeldRecord),
        Contact(ContactRecord),
        Envelope(Vec<u8>),
    }

    #[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
    pub struct HeldRecord {
        pub url: String,
        pub revision: u64,
        pub payload_digest: String,
        pub etag: Option<String>,
        pub issued_at: u64,
        pub expires: u64,
        pub newest_issued_at: u64,
        pub accepted_at: u64,
        pub key_id: String,
    }

    #[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
    pub struct RefusalRecord {
        pub class: String,
        pub detail: String,
        pub revision: Option<u64>,
        pub at: u64,
    }

    #[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
    pub struct ContactRecord {
        pub at: Option<u64>,
        pub refusal: Option<RefusalRecord>,
        pub error: Option<String>,
        pub plane_date: Option<u64>,
    }
}

/// Records new in schema 6.
pub mod v6 {
    use serde::{Deserialize, Serialize};

    use super::v4;

    /// An intention with what its container needs beyond version 4's
    /// fields: the runtime fields as a JSON object in the intention
    /// document's own form (`None`: every one unset).
    #[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
    pub struct IntentionRecord {
        pub base: v4::IntentionRecord,
        pub runtime: Option<String>,
        /// The config's reload signal (`SIGHUP`).
        pub config_reload: Option<String>,
    }

    /// The container a module's live files were last delivered to.
    #[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
    pub struct LiveRecord {
        pub container: String,
        pub digest: String,
    }

    impl From<v4::IntentionRecord> for IntentionRecord {
        fn from(base: v4::IntentionRecord) -> Self {
            // Nothing beyond version 4's fields was asked of a container.
            IntentionRecord {
                base,
                runtime: None,
                config_reload: None,
            }
        }
    }
}

pub mod v7 {
    use serde::{Deserialize, Serialize};

    use super::v6;

    /// An intention with its read-only mounts that are not inputs
    /// (`input = false`): their indices in `mounts`, which version 6 keeps
    /// as read-only.
    #[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
    pub struct IntentionRecord {
        pub base: v6::IntentionRecord,
        pub views: Vec<u32>,
    }

    impl From<v6::IntentionRecord> for IntentionRecord {
        fn from(base: v6::IntentionRecord) -> Self {
            // Every read-only mount was an input.
            IntentionRecord {
                base,
                views: Vec::new(),
            }
        }
    }
}

/// Records new in schema 8.
pub mod v8 {
    use serde::{Deserialize, Serialize};

    use super::v4;

    /// What an item adds to version 1's: the intention's `image` and
    /// `update.range` it was resolved against (empty: not known, a request
    /// from before schema 8), and the digest of the version found.
    #[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
    pub struct ItemExtra {
        pub image: String,
        pub range: String,
        pub found_digest: Option<String>,
    }

    /// A request: version 1's, and each item's extra fields, by index (an
    /// item without one reads as not known).
    #[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
    pub struct ReloadRecord {
        pub base: v4::ReloadRecord,
        pub items: Vec<ItemExtra>,
    }

    impl From<v4::ReloadRecord> for ReloadRecord {
        fn from(base: v4::ReloadRecord) -> Self {
            ReloadRecord {
                base,
                items: Vec::new(),
            }
        }
    }

    /// A digest whose auto-update request failed, and what it failed under.
    #[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
    pub struct FailedRecord {
        pub digest: String,
        pub version: String,
        pub image: String,
        pub range: String,
        pub agent: String,
        pub request: u64,
    }

    /// A module's update state: version 1's and the failed digests.
    #[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
    pub struct UpdateRecord {
        pub base: v4::UpdateRecord,
        pub failed: Vec<FailedRecord>,
    }

    impl From<v4::UpdateRecord> for UpdateRecord {
        fn from(base: v4::UpdateRecord) -> Self {
            UpdateRecord {
                base,
                failed: Vec::new(),
            }
        }
    }
}

/// Records new in schema 9.
pub mod v9 {
    use serde::{Deserialize, Serialize};

    use super::v1;

    /// A stored intention: where it came from, its revisions, and the
    /// intention as its canonical JSON document ([`Intention::to_json`]),
    /// checked by [`Intention::parse_json`] on the way out.
    ///
    /// [`Intention::to_json`]: crate::model::intention::Intention::to_json
    /// [`Intention::parse_json`]: crate::model::intention::Intention::parse_json
    #[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
    pub struct IntentionRecord {
        pub source: v1::Source,
        pub revision: u64,
        pub plane_revision: Option<u64>,
        pub document: String,
    }
}

// Domain → record.

fn value(v: &Value) -> v1::Value {
    match v {
        Value::Bool(b) => v1::Value::Bool(*b),
        Value::Int(i) => v1::Value::Int(*i),
        Value::Float(f) => v1::Value::Float(*f),
        Value::String(s) => v1::Value::String(s.clone()),
        Value::Array(a) => v1::Value::Array(a.iter().map(value).collect()),
        Value::Table(t) => v1::Value::Table(t.iter().map(|(k, v)| (k.clone(), value(v))).collect()),
    }
}

fn restart(r: RestartPolicy) -> v1::RestartPolicy {
    match r {
        RestartPolicy::No => v1::RestartPolicy::No,
        RestartPolicy::OnFailure => v1::RestartPolicy::OnFailure,
        RestartPolicy::Always => v1::RestartPolicy::Always,
        RestartPolicy::UnlessStopped => v1::RestartPolicy::UnlessStopped,
    }
}

fn port(p: &PortSpec) -> v1::PortSpec {
    v1::PortSpec {
        container_port: p.container_port,
        protocol: match p.protocol {
            Protocol::Tcp => v1::Protocol::Tcp,
            Protocol::Udp => v1::Protocol::Udp,
            Protocol::Sctp => v1::Protocol::Sctp,
        },
        host: p.host.clone(),
    }
}

fn intention(i: &Intention) -> v1::Intention {
    v1::Intention {
        name: i.name.to_string(),
        image: i.image.clone(),
        command: i.command.clone(),
        env: i
            .env
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect(),
        env_files: i.env_files.iter().map(ToString::to_string).collect(),
        restart: restart(i.restart),
        on_drift: match i.on_drift {
            DriftPolicy::Recreate => v1::DriftPolicy::Recreate,
            DriftPolicy::Report => v1::DriftPolicy::Report,
        },
        ports: i.ports.iter().map(port).collect(),
        config: i.config.as_ref().map(|c| v1::ConfigFile {
            path: c.path.to_string(),
            format: match c.format {
                ConfigFormat::Json => v1::ConfigFormat::Json,
                ConfigFormat::Toml => v1::ConfigFormat::Toml,
                ConfigFormat::Env => v1::ConfigFormat::Env,
            },
            defaults: c
                .defaults
                .iter()
                .map(|(k, v)| (k.clone(), value(v)))
                .collect(),
        }),
        settings: i
            .settings
            .iter()
            .map(|(k, v)| (k.to_string(), value(v)))
            .collect(),
        files: i
            .files
            .iter()
            .map(|f| v1::LiteralFile {
                path: f.path.to_string(),
                content: f.content.clone(),
            })
            .collect(),
        mounts: i
            .mounts
            .iter()
            .map(|m| v1::Mount {
                source: m.source.to_string(),
                target: m.target.to_string(),
                // A view is read-only here; version 7 names it.
                access: match m.access {
                    Access::ReadOnly | Access::ReadOnlyView => v1::Access::ReadOnly,
                    Access::ReadWrite => v1::Access::ReadWrite,
                },
            })
            .collect(),
    }
}

fn source(s: &Source) -> v1::Source {
    match s {
        Source::File(p) => v1::Source::File(p.clone()),
        Source::Api => v1::Source::Api,
        Source::Plane => v1::Source::Plane,
    }
}

/// The record of a stored intention.
pub fn intention_record(r: &IntentionRecord) -> v9::IntentionRecord {
    v9::IntentionRecord {
        source: source(&r.source),
        revision: r.revision,
        plane_revision: r.plane_revision,
        document: r.intention.to_json().to_string(),
    }
}

/// The version 6 record of a stored intention (schema 7 and 8).
pub fn intention_record_v7(r: &IntentionRecord) -> v7::IntentionRecord {
    v7::IntentionRecord {
        base: intention_record_v6(r),
        views: r
            .intention
            .mounts
            .iter()
            .enumerate()
            .filter(|(_, m)| m.access == Access::ReadOnlyView)
            .map(|(i, _)| i as u32)
            .collect(),
    }
}

/// The version 6 record of a stored intention (every read-only mount an
/// input).
pub fn intention_record_v6(r: &IntentionRecord) -> v6::IntentionRecord {
    let runtime = (*r.intention.runtime != crate::model::runtime::Runtime::default()).then(|| {
        let mut m = serde_json::Map::new();
        r.intention.runtime.write_json(&mut m);
        serde_json::Value::Object(m).to_string()
    });
    v6::IntentionRecord {
        base: intention_record_v4(r),
        runtime,
        config_reload: r.intention.config.as_ref().and_then(|c| c.reload.clone()),
    }
}

/// The version 4 record of a stored intention (without its runtime fields).
pub fn intention_record_v4(r: &IntentionRecord) -> v4::IntentionRecord {
    v4::IntentionRecord {
        source: source(&r.source),
        revision: r.revision,
        intention: v4::Intention {
            base: v3::Intention {
                base: intention(&r.intention),
                update_order: match r.intention.update_order {
                    UpdateOrder::StopFirst => v3::UpdateOrder::StopFirst,
                    UpdateOrder::StartFirst => v3::UpdateOrder::StartFirst,
                },
            },
            update: r.intention.update.as_ref().map(|u| v4::Update {
                lane: match u.lane {
                    Lane::Manual => v4::Lane::Manual,
                    Lane::Auto => v4::Lane::Auto,
                    Lane::Pinned => v4::Lane::Pinned,
                },
                range: u.range.as_str().to_string(),
                interval_ms: u.interval.as_millis() as u64,
                health_window_ms: u.health_window.as_millis() as u64,
            }),
        },
        plane_revision: r.plane_revision,
    }
}

/// The record of an overlay.
pub fn overlay(o: &Overlay) -> v1::Overlay {
    o.iter().map(|(k, v)| (k.to_string(), value(v))).collect()
}

/// The record of an applied spec.
pub fn applied(a: &AppliedRecord) -> v1::AppliedRecord {
    v1::AppliedRecord {
        state: match a.state {
            ApplyState::Pending => v1::ApplyState::Pending,
            ApplyState::Applied => v1::ApplyState::Applied,
        },
        digest: a.digest.to_string(),
        inputs: a
            .inputs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        spec: v1::ContainerSpec {
            name: a.spec.name.clone(),
            image_id: a.spec.image_id.clone(),
            command: a.spec.command.clone(),
            env: a.spec.env.clone(),
            ports: a.spec.ports.iter().map(port).collect(),
            mounts: a
                .spec
                .mounts
                .iter()
                .map(|m| v1::BindMount {
                    source: m.source.clone(),
                    target: m.target.clone(),
                    read_only: m.read_only,
                })
                .collect(),
            restart: restart(a.spec.restart),
            labels: a.spec.labels.clone(),
        },
        container_id: a.container_id.clone(),
        at: a.at,
    }
}

/// The record of an observation.
pub fn observed(o: &ObservedRecord) -> v1::ObservedRecord {
    v1::ObservedRecord {
        container_id: o.container_id.clone(),
        digest: o.digest.as_ref().map(ToString::to_string),
        state: o.state.clone(),
        image_id: o.image_id.clone(),
        created: o.created,
    }
}

/// The record of an event.
pub fn event(e: &Event) -> v1::Event {
    v1::Event {
        seq: e.seq,
        at: e.at,
        module: e.module.clone(),
        kind: match e.kind {
            EventKind::Created => v1::EventKind::Created,
            EventKind::Recreated => v1::EventKind::Recreated,
            EventKind::Started => v1::EventKind::Started,
            EventKind::Removed => v1::EventKind::Removed,
            EventKind::Drift => v1::EventKind::Drift,
            EventKind::Conflict => v1::EventKind::Conflict,
            EventKind::Rejected => v1::EventKind::Rejected,
            EventKind::Intention => v1::EventKind::Intention,
            EventKind::Error => v1::EventKind::Error,
            EventKind::Engine => v1::EventKind::Engine,
        },
        detail: e.detail.clone(),
    }
}

// Record → domain, checked.

fn checked<T: TryFrom<String, Error = crate::model::names::InvalidName>>(
    s: String,
) -> Result<T, String> {
    T::try_from(s).map_err(|e| e.0)
}

fn from_value(v: v1::Value) -> Value {
    match v {
        v1::Value::Bool(b) => Value::Bool(b),
        v1::Value::Int(i) => Value::Int(i),
        v1::Value::Float(f) => Value::Float(f),
        v1::Value::String(s) => Value::String(s),
        v1::Value::Array(a) => Value::Array(a.into_iter().map(from_value).collect()),
        v1::Value::Table(t) => {
            Value::Table(t.into_iter().map(|(k, v)| (k, from_value(v))).collect())
        }
    }
}

fn from_restart(r: v1::RestartPolicy) -> RestartPolicy {
    match r {
        v1::RestartPolicy::No => RestartPolicy::No,
        v1::RestartPolicy::OnFailure => RestartPolicy::OnFailure,
        v1::RestartPolicy::Always => RestartPolicy::Always,
        v1::RestartPolicy::UnlessStopped => RestartPolicy::UnlessStopped,
    }
}

fn from_port(p: v1::PortSpec) -> PortSpec {
    PortSpec {
        container_port: p.container_port,
        protocol: match p.protocol {
            v1::Protocol::Tcp => Protocol::Tcp,
            v1::Protocol::Udp => Protocol::Udp,
            v1::Protocol::Sctp => Protocol::Sctp,
        },
        host: p.host,
    }
}

fn from_intention(i: v4::Intention) -> Result<Intention, String> {
    let update = match i.update {
        None => None,
        Some(u) => Some(UpdatePolicy {
            lane: match u.lane {
                v4::Lane::Manual => Lane::Manual,
                v4::Lane::Auto => Lane::Auto,
                v4::Lane::Pinned => Lane::Pinned,
            },
            range: Range::parse(&u.range)?,
            interval: std::time::Duration::from_millis(u.interval_ms),
            health_window: std::time::Duration::from_millis(u.health_window_ms),
        }),
    };
    let i = i.base;
    let update_order = match i.update_order {
        v3::UpdateOrder::StopFirst => UpdateOrder::StopFirst,
        v3::UpdateOrder::StartFirst => UpdateOrder::StartFirst,
    };
    let i = i.base;
    Ok(Intention {
        update_order,
        update,
        // Laid on by the version 5 record, when it has any.
        runtime: Default::default(),
        name: checked::<ModuleName>(i.name)?,
        image: i.image,
        command: i.command,
        env: i
            .env
            .into_iter()
            .map(|(k, v)| Ok((checked::<EnvName>(k)?, v)))
            .collect::<Result<_, String>>()?,
        env_files: i
            .env_files
            .into_iter()
            .map(checked::<AbsPath>)
            .collect::<Result<_, _>>()?,
        restart: from_restart(i.restart),
        on_drift: match i.on_drift {
            v1::DriftPolicy::Recreate => DriftPolicy::Recreate,
            v1::DriftPolicy::Report => DriftPolicy::Report,
        },
        ports: i.ports.into_iter().map(from_port).collect(),
        config: match i.config {
            None => None,
            Some(c) => Some(ConfigFile {
                path: checked::<AbsPath>(c.path)?,
                reload: None,
                format: match c.format {
                    v1::ConfigFormat::Json => ConfigFormat::Json,
                    v1::ConfigFormat::Toml => ConfigFormat::Toml,
                    v1::ConfigFormat::Env => ConfigFormat::Env,
                },
                defaults: c
                    .defaults
                    .into_iter()
                    .map(|(k, v)| (k, from_value(v)))
                    .collect(),
            }),
        },
        settings: from_overlay(i.settings)?,
        files: i
            .files
            .into_iter()
            .map(|f| {
                Ok(LiteralFile {
                    path: checked::<AbsPath>(f.path)?,
                    content: f.content,
                })
            })
            .collect::<Result<_, String>>()?,
        mounts: i
            .mounts
            .into_iter()
            .map(|m| {
                Ok(Mount {
                    source: checked::<HostPath>(m.source)?,
                    target: checked::<AbsPath>(m.target)?,
                    access: match m.access {
                        v1::Access::ReadOnly => Access::ReadOnly,
                        v1::Access::ReadWrite => Access::ReadWrite,
                    },
                })
            })
            .collect::<Result<_, String>>()?,
    })
}

/// A stored intention from its record: its document parsed and checked as
/// every intention document is.
pub fn from_intention_record(r: v9::IntentionRecord) -> Result<IntentionRecord, String> {
    Ok(IntentionRecord {
        source: from_source(r.source),
        revision: r.revision,
        plane_revision: r.plane_revision,
        intention: Intention::parse_json(r.document.as_bytes(), "stored intention")
            .map_err(|e| e.to_string())?,
    })
}

/// A stored intention from its version 6 record (schema 7 and 8).
pub fn from_intention_record_v7(r: v7::IntentionRecord) -> Result<IntentionRecord, String> {
    from_intention_record_v6(r.base, &r.views)
}

/// A version 6 record, with the read-only mounts at `views` made views
/// first (the runtime fields check the whole intention again).
fn from_intention_record_v6(
    r: v6::IntentionRecord,
    views: &[u32],
) -> Result<IntentionRecord, String> {
    let mut rec = from_intention_record_v4(r.base)?;
    for &i in views {
        match rec.intention.mounts.get_mut(i as usize) {
            Some(m) if m.access == Access::ReadOnly => m.access = Access::ReadOnlyView,
            _ => return Err(format!("mounts[{i}] is not a read-only mount")),
        }
    }
    if let Some(sig) = r.config_reload {
        let sig = crate::model::runtime::signal_name(&sig)?;
        match rec.intention.config.as_mut() {
            Some(c) => c.reload = Some(sig),
            None => return Err("a reload signal without a config".into()),
        }
    }
    if let Some(fields) = r.runtime {
        // The runtime fields are checked as a document's are: laid over
        // the rest of the intention written out, and parsed whole.
        let serde_json::Value::Object(more) =
            serde_json::from_str(&fields).map_err(|e| format!("runtime fields: {e}"))?
        else {
            return Err("runtime fields: not a JSON object".into());
        };
        let mut doc = match rec.intention.to_json() {
            serde_json::Value::Object(d) => d,
            _ => unreachable!("an intention writes an object"),
        };
        doc.extend(more);
        rec.intention = Intention::parse_json(
            serde_json::Value::Object(doc).to_string().as_bytes(),
            "stored intention",
        )
        .map_err(|e| e.to_string())?;
    }
    Ok(rec)
}

fn from_source(s: v1::Source) -> Source {
    match s {
        v1::Source::File(p) => Source::File(p),
        v1::Source::Api => Source::Api,
        v1::Source::Plane => Source::Plane,
    }
}

fn from_intention_record_v4(r: v4::IntentionRecord) -> Result<IntentionRecord, String> {
    Ok(IntentionRecord {
        source: from_source(r.source),
        revision: r.revision,
        plane_revision: r.plane_revision,
        intention: from_intention(r.intention)?,
    })
}

/// An overlay from its record.
pub fn from_overlay(o: v1::Overlay) -> Result<Overlay, String> {
    o.into_iter()
        .map(|(k, v)| Ok((checked::<SettingKey>(k)?, from_value(v))))
        .collect()
}

/// An applied spec from its record.
pub fn from_applied(a: v1::AppliedRecord) -> Result<AppliedRecord, String> {
    Ok(AppliedRecord {
        state: match a.state {
            v1::ApplyState::Pending => ApplyState::Pending,
            v1::ApplyState::Applied => ApplyState::Applied,
        },
        digest: checked::<Digest>(a.digest)?,
        inputs: a
            .inputs
            .into_iter()
            .map(|(k, v)| Ok((checked::<InputName>(k)?, checked::<Digest>(v)?)))
            .collect::<Result<_, String>>()?,
        spec: ContainerSpec {
            name: a.spec.name,
            image_id: a.spec.image_id,
            command: a.spec.command,
            env: a.spec.env,
            ports: a.spec.ports.into_iter().map(from_port).collect(),
            mounts: a
                .spec
                .mounts
                .into_iter()
                .map(|m| BindMount {
                    source: m.source,
                    target: m.target,
                    read_only: m.read_only,
                })
                .collect(),
            restart: from_restart(a.spec.restart),
            labels: a.spec.labels,
            // The applied record keeps the digest of every runtime field
            // in its inputs, not the fields themselves.
            runtime: Default::default(),
            network_container: None,
        },
        container_id: a.container_id,
        at: a.at,
    })
}

/// An observation from its record.
pub fn from_observed(o: v1::ObservedRecord) -> Result<ObservedRecord, String> {
    Ok(ObservedRecord {
        container_id: o.container_id,
        digest: o.digest.map(checked::<Digest>).transpose()?,
        state: o.state,
        image_id: o.image_id,
        created: o.created,
    })
}

/// An event from its record.
pub fn from_event(e: v1::Event) -> Event {
    Event {
        seq: e.seq,
        at: e.at,
        module: e.module,
        kind: match e.kind {
            v1::EventKind::Created => EventKind::Created,
            v1::EventKind::Recreated => EventKind::Recreated,
            v1::EventKind::Started => EventKind::Started,
            v1::EventKind::Removed => EventKind::Removed,
            v1::EventKind::Drift => EventKind::Drift,
            v1::EventKind::Conflict => EventKind::Conflict,
            v1::EventKind::Rejected => EventKind::Rejected,
            v1::EventKind::Intention => EventKind::Intention,
            v1::EventKind::Error => EventKind::Error,
            v1::EventKind::Engine => EventKind::Engine,
        },
        detail: e.detail,
    }
}

/// The crash guard's record, version 1. Field order and variant order are
/// the encoding: never change them.
pub mod guard {
    use super::*;
    use crate::model::guard as g;

    #[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
    pub struct Attempt {
        pub boot: String,
        pub plane: Option<u64>,
        pub module: Option<String>,
    }

    #[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
    pub struct Hold {
        pub key: String,
        pub crashes: u32,
        pub since: u64,
        pub cause: String,
    }

    #[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
    pub struct GuardRecord {
        pub open: Option<Attempt>,
        pub crashes: u32,
        pub last: Option<Attempt>,
        pub judging: Option<(String, String)>,
        pub document_crashes: Option<(String, u32)>,
        pub modules: Vec<(String, Hold)>,
        pub revision: Option<(u64, Hold)>,
        pub everything: Option<Hold>,
        pub document: Option<(String, Hold)>,
    }

    fn attempt(a: &g::Attempt) -> Attempt {
        Attempt {
            boot: a.boot.clone(),
            plane: a.plane,
            module: a.module.as_ref().map(|m| m.to_string()),
        }
    }

    fn hold(h: &g::Hold) -> Hold {
        Hold {
            key: h.key.to_string(),
            crashes: h.crashes,
            since: h.since,
            cause: h.cause.clone(),
        }
    }

    /// The record of a guard.
    pub fn record(x: &g::Guard) -> GuardRecord {
        let q = &x.quarantine;
        GuardRecord {
            open: x.open.as_ref().map(attempt),
            crashes: x.crashes,
            last: x.last.as_ref().map(attempt),
            judging: x.judging.as_ref().map(|(d, b)| (d.to_string(), b.clone())),
            document_crashes: x
                .document_crashes
                .as_ref()
                .map(|(d, n)| (d.to_string(), *n)),
            modules: q
                .modules
                .iter()
                .map(|(m, h)| (m.to_string(), hold(h)))
                .collect(),
            revision: q.revision.as_ref().map(|(r, h)| (*r, hold(h))),
            everything: q.everything.as_ref().map(hold),
            document: q.document.as_ref().map(|(d, h)| (d.to_string(), hold(h))),
        }
    }

    fn from_attempt(a: Attempt) -> Result<g::Attempt, String> {
        Ok(g::Attempt {
            boot: a.boot,
            plane: a.plane,
            module: a.module.map(checked::<ModuleName>).transpose()?,
        })
    }

    fn from_hold(h: Hold) -> Result<g::Hold, String> {
        Ok(g::Hold {
            key: checked::<Digest>(h.key)?,
            crashes: h.crashes,
            since: h.since,
            cause: h.cause,
        })
    }

    /// A guard from its record.
    pub fn from_record(r: GuardRecord) -> Result<g::Guard, String> {
        Ok(g::Guard {
            open: r.open.map(from_attempt).transpose()?,
            crashes: r.crashes,
            last: r.last.map(from_attempt).transpose()?,
            judging: r
                .judging
                .map(|(d, b)| checked::<Digest>(d).map(|d| (d, b)))
                .transpose()?,
            document_crashes: r
                .document_crashes
                .map(|(d, n)| checked::<Digest>(d).map(|d| (d, n)))
                .transpose()?,
            quarantine: g::Quarantine {
                modules: r
                    .modules
                    .into_iter()
                    .map(|(m, h)| Ok((checked::<ModuleName>(m)?, from_hold(h)?)))
                    .collect::<Result<_, String>>()?,
                revision: r
                    .revision
                    .map(|(n, h)| from_hold(h).map(|h| (n, h)))
                    .transpose()?,
                everything: r.everything.map(from_hold).transpose()?,
                document: r
                    .document
                    .map(|(d, h)| Ok::<_, String>((checked::<Digest>(d)?, from_hold(h)?)))
                    .transpose()?,
            },
        })
    }
}
