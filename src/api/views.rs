//! The API's wire formats as types, shared by whoever writes or reads
//! them (as Bottlerocket's API and its client share `Settings`): the agent
//! serialises them (`GET /v1/status` and `/v1/modules/{name}`,
//! `GET /v1/plane`, `POST /v1/plane/sync`, the event log and the reload
//! requests, the report PUT to the plane),
//! the CLI deserialises them and prints from their fields, so a renamed
//! key is a compile error or a parse error naming the endpoint, never a
//! `?` on the screen. The report shares the views of the facts it carries
//! as the API does (quarantine, held document, refusal, conflicts).
//!
//! Fields are declared in alphabetical order: serialised directly, a view
//! gives the text a `serde_json::Value` of it gives (whose keys are
//! sorted), which is the text the agent always sent. A key absent from the
//! text is `skip_serializing_if`; one that reads `null` is a plain `Option`.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::model::guard::{Hold, Quarantine};
use crate::model::names::Digest;
use crate::plane::RefusalClass;
use crate::status::{EngineStatus, ModuleStatus, NodeStatus};

fn secs(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// `GET /v1/status`: the node, the plane, and every module (the API
/// writes the modules one at a time; a reader takes the whole).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StatusView {
    /// Every module's status, by name.
    pub modules: Vec<ModuleView>,
    /// The node.
    pub node: NodeView,
    /// The central plane.
    pub plane: PlaneView,
}

/// The node's part of the status.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NodeView {
    /// Whether the engine answers.
    pub engine: EngineView,
    /// Since when passes fail, and the last error.
    pub failing: Option<FailingView>,
    /// This node's id.
    pub id: String,
    /// When the last pass finished, and how long it took.
    pub last_pass: Option<LastPassView>,
    /// When the next pass is due, seconds since the epoch.
    pub next_pass_at: Option<u64>,
    /// Another agent that shares this node id.
    pub other_agent: Option<String>,
    /// Passes completed.
    pub passes: u64,
    /// Whether passes run and complete.
    pub passing: bool,
    /// What the crash guard holds.
    pub quarantine: Option<QuarantineView>,
    /// The agent's version.
    pub version: String,
}

impl NodeView {
    /// The node `id` as `node` says it, its next pass a `heartbeat` after its last.
    pub fn new(id: &str, node: &NodeStatus, heartbeat: Duration) -> NodeView {
        NodeView {
            engine: EngineView::from(&node.engine),
            failing: node.failing.as_ref().map(|(since, error)| FailingView {
                error: error.clone(),
                since: secs(*since),
            }),
            id: id.to_string(),
            last_pass: node.last_pass.map(|(at, took)| LastPassView {
                at: secs(at),
                duration_ms: took.as_secs_f64() * 1000.0,
            }),
            next_pass_at: node.last_pass.map(|(at, _)| secs(at + heartbeat)),
            other_agent: node.other_agent.clone(),
            passes: node.passes,
            passing: node.passing(),
            quarantine: QuarantineView::new(&node.quarantine),
            version: crate::VERSION.to_string(),
        }
    }
}

/// Whether the engine answers: `{"state": …}`, with `since` and `error`
/// while the agent waits for it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "lowercase")]
pub enum EngineView {
    /// Not tried yet.
    Unknown,
    /// Answering.
    Reachable,
    /// Away.
    Waiting {
        /// The last error.
        error: String,
        /// Since when, seconds since the epoch.
        since: u64,
    },
}

impl From<&EngineStatus> for EngineView {
    fn from(e: &EngineStatus) -> Self {
        match e {
            EngineStatus::Unknown => EngineView::Unknown,
            EngineStatus::Reachable => EngineView::Reachable,
            EngineStatus::Waiting { since, error } => EngineView::Waiting {
                error: error.clone(),
                since: secs(*since),
            },
        }
    }
}

impl EngineView {
    /// The engine's state in a word, as the report says it.
    pub fn as_str(&self) -> &'static str {
        match self {
            EngineView::Unknown => "unknown",
            EngineView::Reachable => "reachable",
            EngineView::Waiting { .. } => "waiting",
        }
    }
}

/// Passes fail.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailingView {
    /// The last error.
    pub error: String,
    /// Since when, seconds since the epoch.
    pub since: u64,
}

/// The last pass.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LastPassView {
    /// When it finished, seconds since the epoch.
    pub at: u64,
    /// How long it took.
    pub duration_ms: f64,
}

/// What the crash guard holds (the API and the report say it alike).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuarantineView {
    /// A plane document never judged again (its `digest`).
    pub document: Option<HoldView>,
    /// Everything: no pass runs.
    pub everything: Option<HoldView>,
    /// Modules held (each its `module`).
    pub modules: Vec<HoldView>,
    /// A plane revision held (its `revision`).
    pub revision: Option<HoldView>,
    /// All of it in a line.
    pub summary: String,
}

impl QuarantineView {
    /// What `q` holds; `None` when nothing is.
    pub fn new(q: &Quarantine) -> Option<QuarantineView> {
        if q.is_empty() {
            return None;
        }
        Some(QuarantineView {
            document: q.document.as_ref().map(|(d, h)| HoldView {
                digest: Some(d.as_str().to_string()),
                ..HoldView::new(h)
            }),
            everything: q.everything.as_ref().map(HoldView::new),
            modules: q
                .modules
                .iter()
                .map(|(m, h)| HoldView {
                    module: Some(m.to_string()),
                    ..HoldView::new(h)
                })
                .collect(),
            revision: q.revision.as_ref().map(|(r, h)| HoldView {
                revision: Some(*r),
                ..HoldView::new(h)
            }),
            summary: q.summary(),
        })
    }
}

/// One thing the crash guard holds, and why; what it is (`digest`,
/// `module`, `revision`) is there only where it says which.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HoldView {
    /// The last death's cause.
    pub cause: String,
    /// Deaths in a row.
    pub crashes: u32,
    /// The document held.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    /// The module held.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub module: Option<String>,
    /// The plane revision held.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<u64>,
    /// Since when, seconds since the epoch.
    pub since: u64,
}

impl HoldView {
    fn new(h: &Hold) -> HoldView {
        HoldView {
            cause: h.cause.clone(),
            crashes: h.crashes,
            digest: None,
            module: None,
            revision: None,
            since: h.since,
        }
    }
}

/// One module's status.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModuleView {
    /// Its container.
    pub container_id: Option<String>,
    /// The digest its inputs give now.
    pub desired_digest: Option<Digest>,
    /// Its container's health, when it has a health check.
    pub health: Option<String>,
    /// What the last probe printed, while it is unhealthy.
    pub health_output: Option<String>,
    /// The image ID its container runs.
    pub image_id: Option<String>,
    /// The inputs that differ between the container and what they say now.
    pub inputs_differ: Vec<MovedView>,
    /// The last action taken.
    pub last_action: Option<LastActionView>,
    /// The last error, while it holds.
    pub last_error: Option<String>,
    /// The module.
    pub name: String,
    /// When the agent acts on it again, while it waits out a back-off.
    pub next_attempt_at: Option<u64>,
    /// How many times the engine restarted the container.
    pub restart_count: Option<u32>,
    /// The digest its container carries.
    pub running_digest: Option<Digest>,
    /// Its state (`converged`, `crash-looping`, …).
    pub state: String,
}

impl From<&ModuleStatus> for ModuleView {
    fn from(m: &ModuleStatus) -> Self {
        ModuleView {
            container_id: m.container_id.clone(),
            desired_digest: m.desired_digest.clone(),
            health: m.health.clone(),
            health_output: m.health_output.clone(),
            image_id: m.image_id.clone(),
            inputs_differ: m
                .inputs_differ
                .iter()
                .map(|d| MovedView {
                    desired: d.desired.clone(),
                    input: d.input.clone(),
                    running: d.running.clone(),
                })
                .collect(),
            last_action: m.last_action.as_ref().map(|a| LastActionView {
                action: a.action.clone(),
                at: a.at,
            }),
            last_error: m.last_error.clone(),
            name: m.name.clone(),
            next_attempt_at: m.next_attempt_at,
            restart_count: m.restart_count,
            running_digest: m.running_digest.clone(),
            state: m.state.as_str().to_string(),
        }
    }
}

/// An input that moved.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MovedView {
    /// What the target says now (`null`: the input is gone).
    pub desired: Option<Digest>,
    /// The input.
    pub input: String,
    /// What the container was created from (`null`: it had no such input).
    pub running: Option<Digest>,
}

/// The last action taken on a module.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LastActionView {
    /// created, started, recreated, removed, drift-reported, reloaded-live.
    pub action: String,
    /// When, seconds since the epoch.
    pub at: u64,
}

/// `GET /v1/plane`: `{"configured": false}`, or the plane's state.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlaneView {
    /// Whether a plane is configured.
    pub configured: bool,
    /// What the node holds and heard of it, when one is.
    #[serde(flatten)]
    pub plane: Option<PlaneDetail>,
}

/// The plane's state (times in seconds since the epoch, `null` where
/// nothing is known).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlaneDetail {
    /// The clock as judged at the last poll (`ok`, `behind`, `ahead`).
    pub clock: Option<String>,
    /// Modules the held document names that another source owns.
    pub conflicts: Vec<ConflictView>,
    /// The last failure to get an answer, while it holds.
    pub error: Option<String>,
    /// The document held.
    pub held: Option<HeldView<u64>>,
    /// When the plane last answered.
    pub last_contact: Option<u64>,
    /// When the next poll is due.
    pub next_poll_at: Option<u64>,
    /// The plane's clock at the last answer.
    pub plane_date: Option<u64>,
    /// The last document not adopted.
    pub refusal: Option<RefusalView<u64>>,
    /// Where reports go, and how the last went.
    pub reports: ReportsView,
    /// The document's URL.
    pub url: String,
}

/// The document held; its times are `T` (seconds since the epoch in the
/// API, RFC 3339 text in the report).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeldView<T> {
    /// When this node adopted it.
    pub accepted_at: T,
    /// Past its `expires` (the API says it; the report does not).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expired: Option<bool>,
    /// When it expires.
    pub expires: T,
    /// Whether it still stands as the revision floor.
    pub floor: bool,
    /// When the plane issued it.
    pub issued_at: T,
    /// The key that signed it.
    pub key_id: String,
    /// Its revision.
    pub revision: u64,
    /// Why it no longer stands as the floor.
    pub revoked: Option<String>,
}

/// The last document not adopted; `at` is `T` as in [`HeldView`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefusalView<T> {
    /// When.
    pub at: T,
    /// Its class.
    pub class: RefusalClass,
    /// What was wrong.
    pub detail: String,
    /// The revision it said, when it could be read.
    pub revision: Option<u64>,
}

/// A module the held document names that another source owns.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConflictView {
    /// What owns it.
    pub error: String,
    /// The module.
    pub module: String,
}

/// Where reports go, and how the last went.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReportsView {
    /// The last delivery's failure, while one waits.
    pub error: Option<String>,
    /// The sequence number of the last delivered.
    pub last_seq: Option<u64>,
    /// When the last was delivered.
    pub last_sent_at: Option<u64>,
    /// Whether one waits to be delivered.
    pub pending: bool,
    /// Where reports are PUT.
    pub url: String,
}

/// `POST /v1/plane/sync`: what the poll did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "kebab-case")]
pub enum OutcomeView {
    /// 304: the document held is the plane's.
    NotModified,
    /// A new revision adopted.
    Adopted {
        /// It.
        revision: u64,
    },
    /// The held document served again.
    Same {
        /// Its revision.
        revision: u64,
    },
    /// Not adopted.
    Refused {
        /// Why, in a class.
        class: RefusalClass,
        /// What was wrong.
        detail: String,
        /// The revision it said.
        revision: Option<u64>,
    },
    /// No answer, or an error.
    Failed {
        /// What happened.
        error: String,
        /// When the plane asked to be polled again, in seconds.
        retry_after_secs: Option<u64>,
    },
    /// Past a minute: the poll goes on.
    UnderWay,
}

/// The report PUT to the plane: the node's whole status.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReportView {
    /// The agent's version.
    pub agent_version: String,
    /// The clocks.
    pub clock: ReportClock,
    /// The engine in a word (`unknown`, `reachable`, `waiting`).
    pub engine: String,
    /// Every module, by name.
    pub modules: BTreeMap<String, ReportModule>,
    /// This node.
    pub node: String,
    /// Whether passes run and complete.
    pub passing: bool,
    /// The plane as the node holds it.
    pub plane: ReportPlane,
    /// What the crash guard holds.
    pub quarantine: Option<QuarantineView>,
    /// When sent (RFC 3339).
    pub sent_at: String,
    /// Grows with every report, across restarts.
    pub seq: u64,
    /// Failed attempts since the last delivered report.
    pub undelivered: u32,
}

/// The clocks, in a report.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReportClock {
    /// The plane's `Date` at the last answer.
    pub plane_date: Option<String>,
    /// `ok`, `behind`, `ahead` or `unknown`.
    pub status: String,
    /// The system clock when sent.
    pub system: String,
}

/// The plane, in a report.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReportPlane {
    /// Modules the held document names that another source owns.
    pub conflicts: Vec<ConflictView>,
    /// The last failure to reach it, while it holds.
    pub error: Option<String>,
    /// The document held.
    pub held: Option<HeldView<String>>,
    /// When it last answered.
    pub last_contact: Option<String>,
    /// The last document not adopted.
    pub refusal: Option<RefusalView<String>>,
    /// The document's URL.
    pub url: String,
}

/// A module, in a report.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReportModule {
    /// The digest its inputs give now.
    pub desired_digest: Option<Digest>,
    /// Its container's health.
    pub health: Option<String>,
    /// The image ID its container runs.
    pub image_id: Option<String>,
    /// The last error, with the state it left the module in as its class.
    pub last_error: Option<ReportError>,
    /// What reloads did for it, when any did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reload: Option<ReportReload>,
    /// How many times the engine restarted its container.
    pub restart_count: Option<u32>,
    /// The digest its container carries.
    pub running_digest: Option<Digest>,
    /// Its state.
    pub state: String,
}

/// A module's last error, in a report.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReportError {
    /// The module's state.
    pub class: String,
    /// The error.
    pub message: String,
}

/// What reloads did for a module, in a report.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReportReload {
    /// The version landed.
    pub landed: Option<ReportLanded>,
    /// The newest request naming it.
    pub request: Option<ReportRequest>,
}

/// A landed version, in a report.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReportLanded {
    /// Its digest.
    pub digest: String,
    /// Its version.
    pub version: String,
}

/// A reload request, in a report.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReportRequest {
    /// Why it failed, when it did.
    pub failure: Option<String>,
    /// Its id.
    pub id: u64,
    /// Its status.
    pub status: String,
}

/// `GET /v1/events`: a page of the event log (the API writes the events
/// one at a time).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventsView {
    /// The events, oldest first.
    pub events: Vec<crate::store::Event>,
    /// The sequence number to ask after next.
    pub next: u64,
}

/// `GET /v1/reloads`: every reload request kept.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReloadsView {
    /// The requests, oldest first.
    pub reloads: Vec<crate::model::reload::Request>,
}

/// `POST /v1/reloads`: the request filed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FiledView {
    /// Its id.
    pub id: u64,
    /// Its status.
    pub status: crate::model::reload::Status,
    /// Where to follow it.
    pub url: String,
}

#[cfg(test)]
pub(crate) mod fixtures;

#[cfg(test)]
mod tests {
    use super::fixtures;
    use crate::plane::sync::Outcome;
    use crate::store::plane::Refusal;
    use serde_json::Value as J;
    use std::time::Duration;

    // The wire formats as 0.5.0 (a6753d2) wrote them for the fixtures,
    // compact and with the version as `@VERSION@`: not one byte may move.
    const NODES: [&str; 2] = [
        r#"{"engine":{"error":"gone","since":100,"state":"waiting"},"failing":{"error":"refused","since":150},"id":"edge-1","last_pass":{"at":200,"duration_ms":1500.2499999999998},"next_pass_at":230,"other_agent":"another agent","passes":3,"passing":false,"quarantine":{"document":{"cause":"panicked at 6","crashes":6,"digest":"sha256:139d544b821b13ebea14f1b0fe18577222e415c2966e3a3511c4196055232202","since":1006},"everything":{"cause":"panicked at 5","crashes":5,"since":1005},"modules":[{"cause":"panicked at 3","crashes":3,"module":"web","since":1003}],"revision":{"cause":"panicked at 4","crashes":4,"revision":7,"since":1004},"summary":"every module (no pass runs), plane revision 7, module web, plane document sha256:139d544b821b"},"version":"@VERSION@"}"#,
        r#"{"engine":{"state":"reachable"},"failing":null,"id":"edge-1","last_pass":{"at":300,"duration_ms":2.0},"next_pass_at":330,"other_agent":null,"passes":1,"passing":true,"quarantine":null,"version":"@VERSION@"}"#,
    ];
    const MODULES: [&str; 2] = [
        r#"{"container_id":null,"desired_digest":null,"health":null,"health_output":null,"image_id":null,"inputs_differ":[],"last_action":null,"last_error":null,"name":"db","next_attempt_at":null,"restart_count":null,"running_digest":null,"state":"pending"}"#,
        r#"{"container_id":"c0ffee","desired_digest":"sha256:b60b935389f7cf68e7877a80a4ded0dfc93e248b8807932536e1de0f771d259b","health":"unhealthy","health_output":"probe said no","image_id":"sha256:1mage","inputs_differ":[{"desired":null,"input":"env","running":"sha256:ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb"}],"last_action":{"action":"recreated","at":1700000050},"last_error":"it keeps restarting","name":"web","next_attempt_at":1700000900,"restart_count":4,"running_digest":"sha256:c071cf5f5ed6f884cc70155b6f05f755fd46a302d05e4261b7e92ce878bbfed8","state":"crash-looping"}"#,
    ];
    const PLANES: [&str; 3] = [
        r#"{"clock":"behind","configured":true,"conflicts":[{"error":"a file owns it","module":"db"}],"error":"HTTP 503","held":{"accepted_at":1700000100,"expired":true,"expires":1700086400,"floor":false,"issued_at":1700000000,"key_id":"ed25519:abc","revision":9,"revoked":"no key trusted now signed it"},"last_contact":1700000200,"next_poll_at":1700000500,"plane_date":1700000201,"refusal":{"at":1700000150,"class":"rollback","detail":"revision 8 is older","revision":8},"reports":{"error":"PUT: HTTP 500","last_sent_at":1700000300,"last_seq":42,"pending":true,"url":"http://plane/nodes/edge-1/status.json"},"url":"http://plane/nodes/edge-1/desired.json"}"#,
        r#"{"clock":null,"configured":true,"conflicts":[],"error":null,"held":null,"last_contact":null,"next_poll_at":null,"plane_date":null,"refusal":null,"reports":{"error":null,"last_sent_at":null,"last_seq":null,"pending":false,"url":""},"url":"http://plane/d.json"}"#,
        r#"{"configured":false}"#,
    ];
    const REPORTS: [&str; 2] = [
        r#"{"agent_version":"@VERSION@","clock":{"plane_date":"2023-11-14T22:16:41Z","status":"behind","system":"2023-11-14T22:29:59Z"},"engine":"waiting","modules":{"db":{"desired_digest":null,"health":null,"image_id":null,"last_error":null,"restart_count":null,"running_digest":null,"state":"pending"},"web":{"desired_digest":"sha256:b60b935389f7cf68e7877a80a4ded0dfc93e248b8807932536e1de0f771d259b","health":"unhealthy","image_id":"sha256:1mage","last_error":{"class":"crash-looping","message":"it keeps restarting"},"reload":{"landed":{"digest":"sha256:landed","version":"1.2.3"},"request":{"failure":"it did not settle","id":5,"status":"failed"}},"restart_count":4,"running_digest":"sha256:c071cf5f5ed6f884cc70155b6f05f755fd46a302d05e4261b7e92ce878bbfed8","state":"crash-looping"}},"node":"edge-1","passing":false,"plane":{"conflicts":[{"error":"a file owns it","module":"db"}],"error":"HTTP 503","held":{"accepted_at":"2023-11-14T22:15:00Z","expires":"2023-11-15T22:13:20Z","floor":false,"issued_at":"2023-11-14T22:13:20Z","key_id":"ed25519:abc","revision":9,"revoked":"no key trusted now signed it"},"last_contact":"2023-11-14T22:16:40Z","refusal":{"at":"2023-11-14T22:15:50Z","class":"rollback","detail":"revision 8 is older","revision":8},"url":"http://plane/nodes/edge-1/desired.json"},"quarantine":{"document":{"cause":"panicked at 6","crashes":6,"digest":"sha256:139d544b821b13ebea14f1b0fe18577222e415c2966e3a3511c4196055232202","since":1006},"everything":{"cause":"panicked at 5","crashes":5,"since":1005},"modules":[{"cause":"panicked at 3","crashes":3,"module":"web","since":1003}],"revision":{"cause":"panicked at 4","crashes":4,"revision":7,"since":1004},"summary":"every module (no pass runs), plane revision 7, module web, plane document sha256:139d544b821b"},"sent_at":"2023-11-14T22:29:59Z","seq":77,"undelivered":2}"#,
        r#"{"agent_version":"@VERSION@","clock":{"plane_date":null,"status":"unknown","system":"2023-11-14T22:29:59Z"},"engine":"reachable","modules":{"db":{"desired_digest":null,"health":null,"image_id":null,"last_error":null,"restart_count":null,"running_digest":null,"state":"pending"},"web":{"desired_digest":"sha256:b60b935389f7cf68e7877a80a4ded0dfc93e248b8807932536e1de0f771d259b","health":"unhealthy","image_id":"sha256:1mage","last_error":{"class":"crash-looping","message":"it keeps restarting"},"reload":{"landed":{"digest":"sha256:landed","version":"1.2.3"},"request":{"failure":"it did not settle","id":5,"status":"failed"}},"restart_count":4,"running_digest":"sha256:c071cf5f5ed6f884cc70155b6f05f755fd46a302d05e4261b7e92ce878bbfed8","state":"crash-looping"}},"node":"edge-1","passing":true,"plane":{"conflicts":[],"error":null,"held":null,"last_contact":null,"refusal":null,"url":"http://plane/d.json"},"quarantine":null,"sent_at":"2023-11-14T22:29:59Z","seq":77,"undelivered":2}"#,
    ];
    const OUTCOMES: [&str; 7] = [
        r#"{"outcome":"not-modified"}"#,
        r#"{"outcome":"adopted","revision":3}"#,
        r#"{"outcome":"same","revision":3}"#,
        r#"{"class":"rollback","detail":"revision 2 is older","outcome":"refused","revision":2}"#,
        r#"{"class":"too-large","detail":"too large","outcome":"refused","revision":null}"#,
        r#"{"error":"HTTP 503","outcome":"failed","retry_after_secs":60}"#,
        r#"{"error":"gone","outcome":"failed","retry_after_secs":null}"#,
    ];

    fn golden(want: &str) -> String {
        want.replace("@VERSION@", crate::VERSION)
    }

    /// The exact text a value is sent as (compact; the API pretty-prints
    /// the same value, key for key).
    fn text(v: &J) -> String {
        serde_json::to_string(v).unwrap()
    }

    fn node_id() -> crate::model::names::NodeId {
        crate::model::names::NodeId::try_from("edge-1").unwrap()
    }

    fn outcomes() -> Vec<Outcome> {
        let refusal = |class: &str, detail: &str, revision| Refusal {
            class: crate::plane::RefusalClass::parse(class).unwrap(),
            detail: detail.into(),
            revision,
            at: 9,
        };
        vec![
            Outcome::NotModified,
            Outcome::Adopted { revision: 3 },
            Outcome::Same { revision: 3 },
            Outcome::Refused(refusal("rollback", "revision 2 is older", Some(2))),
            Outcome::Refused(refusal("too-large", "too large", None)),
            Outcome::Failed {
                error: "HTTP 503".into(),
                retry_after: Some(Duration::from_secs(60)),
            },
            Outcome::Failed {
                error: "gone".into(),
                retry_after: None,
            },
        ]
    }

    fn node_text(n: &crate::status::NodeStatus) -> String {
        same_text(&super::NodeView::new("edge-1", n, Duration::from_secs(30)))
    }

    fn module_text(m: &crate::status::ModuleStatus) -> String {
        same_text(&super::ModuleView::from(m))
    }

    fn plane_text(p: Option<crate::plane::sync::PlaneStatus>) -> String {
        let h = p.map(|p| crate::api::PlaneHandle {
            status: std::sync::Arc::new(std::sync::Mutex::new(p)),
            nudge: tokio::sync::mpsc::channel(1).0,
        });
        same_text(&crate::api::plane::plane_view(h.as_ref()))
    }

    fn outcome_text(o: &Outcome) -> String {
        same_text(&crate::api::plane::outcome_view(o))
    }

    /// The text of a view, as the API sends it (through a JSON value)
    /// and read back; the view read back is the view.
    fn same_text<V>(v: &V) -> String
    where
        V: serde::Serialize + serde::de::DeserializeOwned + PartialEq + std::fmt::Debug,
    {
        let value = serde_json::to_value(v).unwrap();
        let back: V = serde_json::from_value(value.clone()).unwrap();
        assert_eq!(&back, v, "a view reads back as itself");
        text(&value)
    }

    type Reloads = (
        std::collections::BTreeMap<
            crate::model::names::ModuleName,
            crate::model::reload::UpdateState,
        >,
        Vec<crate::model::reload::Request>,
    );

    fn parts<'a>(
        n: &'a crate::status::NodeStatus,
        p: &'a crate::plane::sync::PlaneStatus,
        board: &'a crate::status::Board,
        reloads: &'a Reloads,
        node: &'a crate::model::names::NodeId,
    ) -> crate::plane::report::Parts<'a> {
        crate::plane::report::Parts {
            node,
            plane: p,
            status: n,
            board,
            updates: &reloads.0,
            reloads: &reloads.1,
        }
    }

    /// A report's bytes as they are PUT (the view serialised directly).
    fn report(n: &crate::status::NodeStatus, p: &crate::plane::sync::PlaneStatus) -> String {
        let (board, reloads, node) = (fixtures::board(), fixtures::reloads(), node_id());
        let s = crate::plane::report::stable(&parts(n, p, &board, &reloads, &node));
        let f = crate::plane::report::full(s, 77, 1_700_000_999, p, 2);
        let bytes = String::from_utf8(serde_json::to_vec(&f).unwrap()).unwrap();
        // Its fields are in the order a JSON value has them (sorted).
        assert_eq!(bytes, same_text(&f));
        bytes
    }

    #[test]
    fn the_wire_formats_are_as_they_were() {
        for (n, want) in fixtures::nodes().iter().zip(NODES) {
            assert_eq!(node_text(n), golden(want));
        }
        for (m, want) in fixtures::board().values().zip(MODULES) {
            assert_eq!(module_text(m), golden(want));
        }
        let planes = fixtures::planes().map(Some);
        for (p, want) in planes.into_iter().chain([None]).zip(PLANES) {
            assert_eq!(plane_text(p), golden(want));
        }
        for (o, want) in outcomes().iter().zip(OUTCOMES) {
            assert_eq!(outcome_text(o), golden(want));
        }
        let cases = fixtures::nodes().into_iter().zip(fixtures::planes());
        for ((n, p), want) in cases.zip(REPORTS) {
            assert_eq!(report(&n, &p), golden(want));
        }
    }

    #[test]
    fn a_report_changes_with_its_facts_not_with_its_times() {
        let [n, _] = fixtures::nodes();
        let [p, _] = fixtures::planes();
        let (board, reloads, node) = (fixtures::board(), fixtures::reloads(), node_id());
        let digest = |p: &crate::plane::sync::PlaneStatus, board: &crate::status::Board| {
            let s = crate::plane::report::stable(&parts(&n, p, board, &reloads, &node));
            crate::model::names::Digest::canonical("stead.report", &s)
        };
        let first = digest(&p, &board);
        let mut later = p.clone();
        later.contact.at = Some(1_800_000_000);
        later.contact.plane_date = Some(1_800_000_001);
        later.next_poll_at = Some(1_800_000_100);
        assert_eq!(digest(&later, &board), first);
        let mut moved = board.clone();
        moved.get_mut("db").unwrap().state = crate::status::ModuleState::Converged;
        assert_ne!(digest(&p, &moved), first);
    }

    #[test]
    fn a_status_reads_back_whole() {
        let [n, _] = fixtures::nodes();
        let [p, _] = fixtures::planes();
        let h = crate::api::PlaneHandle {
            status: std::sync::Arc::new(std::sync::Mutex::new(p)),
            nudge: tokio::sync::mpsc::channel(1).0,
        };
        let view = super::StatusView {
            modules: fixtures::board()
                .values()
                .map(super::ModuleView::from)
                .collect(),
            node: super::NodeView::new("edge-1", &n, Duration::from_secs(30)),
            plane: crate::api::plane::plane_view(Some(&h)),
        };
        same_text(&view);
    }
}
