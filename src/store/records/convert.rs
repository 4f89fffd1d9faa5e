//! The domain types to their records and back. A record read back is
//! checked again (names, digests, paths): one that does not check is
//! reported as unreadable, never taken on trust.

use crate::model::sort::Insert as _;
use std::sync::Arc;

use crate::model::config::{ConfigFile, ConfigFormat};
use crate::model::intention::{
    Access, DriftPolicy, Intention, Lane, LiteralFile, Mount, PortSpec, Protocol, RestartPolicy,
    UpdateOrder, UpdatePolicy,
};
use crate::model::names::{AbsPath, Digest, EnvName, HostPath, InputName, ModuleName, SettingKey};
use crate::model::sealed::Text;
use crate::model::spec::{BindMount, ContainerSpec};
use crate::model::value::Value;
use crate::model::version::Range;
use crate::store::{
    AppliedRecord, ApplyState, Event, EventKind, IntentionRecord, ObservedRecord, Overlay, Source,
};

use super::{v1, v3, v4, v6, v7, v9};

// Domain → record.

fn value(v: &Value) -> v1::Value {
    match v {
        Value::Bool(b) => v1::Value::Bool(*b),
        Value::Int(i) => v1::Value::Int(*i),
        Value::Float(f) => v1::Value::Float(*f),
        Value::String(s) => v1::Value::String(s.clone()),
        Value::Array(a) => v1::Value::Array(a.iter().map(value).collect()),
        Value::Table(t) => {
            v1::Value::Table(t.iter().map(|(k, v)| (k.clone(), value(v))).into_map())
        }
        // Its document form: a version before sealed values reads it as a
        // table, never the value.
        Value::Sealed(s) => v1::Value::Table(
            [(
                crate::model::sealed::SEALED.to_string(),
                v1::Value::String(s.as_str().to_string()),
            )]
            .into(),
        ),
    }
}

/// A text as a record before sealed values holds it: a sealed value as
/// its sealed text (an older version cannot open it, nor show the value).
fn older(t: &Text) -> String {
    match t {
        Text::Plain(s) => s.clone(),
        Text::Sealed(s) => s.as_str().to_string(),
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
            .map(|(k, v)| (k.to_string(), older(v)))
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
                content: older(&f.content),
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
    o.iter().map(|(k, v)| (k.to_string(), value(v))).into_map()
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
            .into_map(),
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

pub(super) fn checked<T: TryFrom<String, Error = crate::model::names::InvalidName>>(
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
        v1::Value::Table(t) => match sealed_table(&t) {
            Some(s) => Value::Sealed(s),
            None => Value::Table(t.into_iter().map(|(k, v)| (k, from_value(v))).into_map()),
        },
    }
}

/// A table of the one key `sealed` with a sealed text is a sealed value,
/// as in a document.
fn sealed_table(
    t: &std::collections::BTreeMap<String, v1::Value>,
) -> Option<crate::model::sealed::SealedText> {
    match (t.len(), t.get(crate::model::sealed::SEALED)) {
        (1, Some(v1::Value::String(s))) => crate::model::sealed::SealedText::new(s.clone()).ok(),
        _ => None,
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
        // Read as 0.5.0 read every env file.
        env_file_format: Default::default(),
        depends_on: Vec::new(),
        // Laid on by the version 5 record, when it has any.
        runtime: Default::default(),
        name: checked::<ModuleName>(i.name)?,
        image: i.image,
        command: i.command,
        env: i
            .env
            .into_iter()
            .map(|(k, v)| Ok((checked::<EnvName>(k)?, Text::Plain(v))))
            .try_into_map::<_, _, String>()?,
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
                    .into_map(),
            }),
        },
        settings: from_overlay(i.settings)?,
        files: i
            .files
            .into_iter()
            .map(|f| {
                Ok(LiteralFile {
                    path: checked::<AbsPath>(f.path)?,
                    content: Text::Plain(f.content),
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
            .map_err(|e| e.to_string())?
            .into(),
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
        match Arc::make_mut(&mut rec.intention).mounts.get_mut(i as usize) {
            Some(m) if m.access == Access::ReadOnly => m.access = Access::ReadOnlyView,
            _ => return Err(format!("mounts[{i}] is not a read-only mount")),
        }
    }
    if let Some(sig) = r.config_reload {
        let sig = crate::model::runtime::signal_name(&sig)?;
        match Arc::make_mut(&mut rec.intention).config.as_mut() {
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
        .map_err(|e| e.to_string())?
        .into();
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
        intention: from_intention(r.intention)?.into(),
    })
}

/// An overlay from its record.
pub fn from_overlay(o: v1::Overlay) -> Result<Overlay, String> {
    o.into_iter()
        .map(|(k, v)| Ok((checked::<SettingKey>(k)?, from_value(v))))
        .try_into_map()
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
            .try_into_map::<_, _, String>()?,
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
