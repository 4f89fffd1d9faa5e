//! One typed view per wire format, shared by the API, the CLI and the
//! plane report (as Bottlerocket's API and its client share `Settings`),
//! and depending only on the model, the store's types and the status, so
//! every side of the wire can reach them: the agent
//! serialises them (`GET /v1/status` and `/v1/modules/{name}`,
//! `GET /v1/plane`, `POST /v1/plane/sync`, the event log and the reload
//! requests, the report PUT to the plane),
//! and writes the text a person reads of them ([`text`], for the CLI and
//! `Accept: text/plain`), so a renamed field is a compile error, never a
//! `?` on the screen. The device's CLI reads back only the few fields it
//! acts on, from the JSON value (`cli::client::Fields`): a view read with
//! serde is code of its own in a binary whose size is budgeted. The
//! operator's tool reads the report's views whole. The report shares the views of the facts it carries
//! as the API does (quarantine, held document, refusal, conflicts).
//!
//! Fields are declared in alphabetical order: serialised directly, a view
//! gives the text a `serde_json::Value` of it gives (whose keys are
//! sorted), which is the text the agent always sent. A key absent from the
//! text is `skip_serializing_if`; one that reads `null` is a plain `Option`.

pub use stead_core::views::*;

/// The agent's own view (the core's), made here from what the launcher
/// and the store say.
pub mod agent {
    pub use stead_core::views::agent::*;

    /// This agent's view: `launched` as the launcher started it (`None`:
    /// it did not; its state file is read now), `updates` the store's.
    pub fn of(
        launched: Option<&crate::host::launch::Launched>,
        updates: &[crate::model::agent_update::AgentUpdate],
    ) -> AgentView {
        let state = launched.map_or(Ok(crate::model::launch::State::default()), |l| {
            l.read_state()
        });
        AgentView::new(
            crate::version_number(),
            crate::TARGET,
            launched.map(|l| &l.slot),
            state,
            updates,
        )
    }
}

pub mod text;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::model::names::Digest;
use crate::model::refusal::RefusalClass;
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
    /// The agent itself and its last update (absent from an agent before
    /// 0.6.0).
    #[serde(default)]
    pub agent: Option<agent::AgentStatusView>,
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
    /// This device's public key (`age1…`): what values for it are sealed
    /// to (absent from an agent before 0.6.0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_key: Option<String>,
    /// The filesystems that matter and how full they are (absent before
    /// the first pass measured them, and from an agent before 0.6.0).
    #[serde(default)]
    pub disk: Option<crate::model::disk::Disks>,
    /// Whether the engine answers.
    pub engine: EngineView,
    /// Since when passes fail, and the last error.
    pub failing: Option<FailingView>,
    /// What the device is, as a group's `when` judges it (absent from an
    /// agent before 0.7.0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub facts: Option<crate::model::facts::Facts>,
    /// The images the agent is fetching and how far each is (absent when
    /// none is, and from an agent before 0.7.0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fetching: Option<crate::model::fetch::Fetching>,
    /// What the last image the agent fetched itself brought, and from
    /// where (absent before one, and from an agent before 0.7.0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fetched: Option<crate::model::fetch::Brought>,
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
    /// This device's report key (Ed25519, the standard base64 of its 32
    /// bytes): what its reports are signed with, and `stead-plane enroll`
    /// takes (absent from an agent before 0.7.0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report_key: Option<String>,
    /// The agent's version.
    pub version: String,
}

impl NodeView {
    /// The node `id` as `node` says it, its next pass a `heartbeat` after its last.
    pub fn new(id: &str, node: &NodeStatus, heartbeat: Duration) -> NodeView {
        NodeView {
            device_key: node.device_key.clone(),
            disk: (!node.disk.filesystems.is_empty()).then(|| node.disk.clone()),
            engine: EngineView::from(&node.engine),
            failing: node.failing.as_ref().map(|(since, error)| FailingView {
                error: error.clone(),
                since: secs(*since),
            }),
            facts: (!node.facts.arch.is_empty()).then(|| node.facts.clone()),
            fetching: (!node.fetching.is_empty()).then(|| node.fetching.clone()),
            fetched: node.fetched.clone(),
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
            report_key: node.report_key.clone(),
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
    /// The image reference its intention names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// The manifest digests the engine knows for the image its container
    /// runs (`repo@sha256:…`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub image_digests: Vec<String>,
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
            image: m.image.clone(),
            image_digests: m.image_digests.clone(),
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
                action: a.action,
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
    /// What.
    pub action: crate::status::Act,
    /// When, seconds since the epoch.
    pub at: u64,
}

/// `GET /v1/plane`: `{"configured": false}`, or the plane's state.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PlaneView {
    /// Whether a plane is configured.
    pub configured: bool,
    /// What the node holds and heard of it, when one is.
    #[serde(flatten)]
    pub plane: Option<PlaneDetail>,
}

/// Read as a JSON value, then the detail from it when a plane is
/// configured: serde's `flatten` would buffer it through a copy of every
/// deserializer of the detail's fields, which the device's binary (its
/// CLI reads this view) has no room for.
impl<'de> Deserialize<'de> for PlaneView {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<PlaneView, D::Error> {
        use serde::de::Error as _;
        let v = serde_json::Value::deserialize(d)?;
        let Some(configured) = v.get("configured").and_then(serde_json::Value::as_bool) else {
            return Err(D::Error::custom("the plane's view has no `configured`"));
        };
        let plane = match configured {
            true => Some(PlaneDetail::deserialize(&v).map_err(D::Error::custom)?),
            false => None,
        };
        Ok(PlaneView { configured, plane })
    }
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
    /// The groups the held document lists (absent without any).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<GroupView<u64>>,
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
    /// The root of trust (absent while the config's keys are it and all
    /// is well).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root: Option<RootView<u64>>,
    /// The document's URL.
    pub url: String,
    /// The nudge's broker, when one is configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nudge: Option<NudgeView>,
}

/// The nudge's subscription (`[plane.nudge]`): hints that start a poll
/// sooner, never a source of truth.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NudgeView {
    /// The broker (its URL, no credential).
    pub broker: String,
    pub topic: String,
    /// Whether it is subscribed now.
    pub connected: bool,
    /// Why it is not, while so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Hints heard since the agent started, and the polls they started.
    pub hints: u64,
    pub polls: u64,
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

/// `PUT /v1/intentions/{name}` and `PATCH /v1/intentions/{name}/settings`:
/// the intention written.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WrittenView {
    /// Whether it changed (writing what it was already changes nothing).
    pub changed: bool,
    /// The module.
    pub name: String,
    /// Its revision now.
    pub revision: u64,
    /// Its settings after the write (a PATCH's answer; absent from a PUT's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settings: Option<serde_json::Map<String, serde_json::Value>>,
}

/// Every error the API answers: `{"error": {…}}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorView {
    /// The error.
    pub error: ErrorDetail,
}

/// An error of the API.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorDetail {
    /// The field at fault, when one is (an intention refused).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// What is wrong.
    pub message: String,
    /// The HTTP status, again.
    #[serde(default)]
    pub status: u16,
}

#[cfg(test)]
pub(crate) mod fixtures;

#[cfg(test)]
mod tests {
    use super::fixtures::{self, MODULES, NODES, PLANES, golden, same_text};
    use std::time::Duration;

    fn node_text(n: &crate::status::NodeStatus) -> String {
        same_text(&super::NodeView::new("edge-1", n, Duration::from_secs(30)))
    }

    fn module_text(m: &crate::status::ModuleStatus) -> String {
        same_text(&super::ModuleView::from(m))
    }

    #[test]
    fn a_write_s_and_an_update_s_answers_are_the_texts_0_6_0_wrote() {
        let written = |settings| super::WrittenView {
            changed: true,
            name: "web".into(),
            revision: 3,
            settings,
        };
        let settings = serde_json::json!({"log": {"level": "debug"}});
        let settings = settings.as_object().cloned();
        // (the view, its text as 0.6.0's json! wrote it)
        #[rustfmt::skip]
        let cases = [
            (same_text(&written(None)), r#"{"changed":true,"name":"web","revision":3}"#),
            (same_text(&written(settings)), r#"{"changed":true,"name":"web","revision":3,"settings":{"log":{"level":"debug"}}}"#),
            (same_text(&super::agent::AlreadyRunningView { running: "0.6.0".into() }), r#"{"running":"0.6.0"}"#),
        ];
        for (got, want) in cases {
            assert_eq!(got, want);
        }
    }

    #[test]
    fn what_the_last_image_brought_is_said_by_source() {
        let mut n = fixtures::nodes()[1].clone();
        assert!(!node_text(&n).contains("fetched"));
        n.fetched = Some(crate::model::fetch::Brought {
            image: "reg/app:2".into(),
            at: 5,
            registry: 1,
            chunks: 2,
            local: 3,
            peers: 7,
            layers: 4,
            present: 2,
            rebuilt: 1,
        });
        assert!(
            node_text(&n).contains(
                r#""fetched":{"at":5,"chunks":2,"image":"reg/app:2","layers":4,"local":3,"peers":7,"present":2,"rebuilt":1,"registry":1}"#
            ),
            "{}",
            node_text(&n)
        );
        assert_eq!(
            n.fetched.unwrap().line(),
            "reg/app:2: 3 B over the wire (1 B from the registry, 2 B of chunks), 7 B from the site's peers, 3 B from layers here; 1 of 4 layers rebuilt, 2 were here"
        );
    }

    #[test]
    fn the_images_under_way_are_in_the_node_s_text_only_while_there_are_some() {
        let mut n = fixtures::nodes()[1].clone();
        assert!(!node_text(&n).contains("fetching"));
        n.fetching.images.insert(
            "registry.example/app@sha256:ab".into(),
            crate::model::fetch::Progress { bytes: 41, of: 96 },
        );
        assert!(
            node_text(&n).contains(
                r#""fetching":{"images":{"registry.example/app@sha256:ab":{"bytes":41,"of":96}}}"#
            ),
            "{}",
            node_text(&n)
        );
    }

    // The plane's view, the sync outcome and the report are built by the
    // API and the plane, and checked against their texts there.
    #[test]
    fn the_wire_formats_are_as_they_were() {
        for (n, want) in fixtures::nodes().iter().zip(NODES) {
            assert_eq!(node_text(n), golden(want));
        }
        for (m, want) in fixtures::board().values().zip(MODULES) {
            assert_eq!(module_text(m), golden(want));
        }
        // Each plane text reads as a view that gives it back.
        for want in PLANES {
            let v: super::PlaneView = serde_json::from_str(want).unwrap();
            assert_eq!(same_text(&v), want);
        }
    }

    #[test]
    fn a_plane_view_reads_its_detail_only_when_configured_and_says_what_does_not_read() {
        let off: super::PlaneView = serde_json::from_str(r#"{"configured": false}"#).unwrap();
        assert_eq!(off.plane, None);
        let e = serde_json::from_str::<super::PlaneView>(r#"{"clock": "ok"}"#).unwrap_err();
        assert!(e.to_string().contains("no `configured`"), "{e}");
        // A configured plane whose detail does not read is an error, not
        // a plane shown as absent.
        let e = serde_json::from_str::<super::PlaneView>(r#"{"configured": true, "url": 7}"#)
            .unwrap_err();
        assert!(!e.to_string().is_empty());
    }

    #[test]
    fn a_status_reads_back_whole() {
        let [n, _] = fixtures::nodes();
        let view = super::StatusView {
            agent: Some(fixtures::agent_status()),
            modules: fixtures::board()
                .values()
                .map(super::ModuleView::from)
                .collect(),
            node: super::NodeView::new("edge-1", &n, Duration::from_secs(30)),
            plane: serde_json::from_str(PLANES[0]).unwrap(),
        };
        same_text(&view);
    }
}
