//! The wire formats both sides of the plane read: the report a device
//! PUTs (its whole status) and the views of the facts it shares with the
//! device's API (quarantine, the held document, its groups and rollout,
//! the root, a refusal, conflicts) and the agent's own view
//! ([`agent`]). The device writes them, the report signed
//! ([`signed`]); the operator's tool rolls them up. The device's API views are `stead::views`, which re-exports these.
//!
//! Fields are declared in alphabetical order: serialised directly, a view
//! gives the text a `serde_json::Value` of it gives (whose keys are
//! sorted), which is the text the agent always sent. A key absent from the
//! text is `skip_serializing_if`; one that reads `null` is a plain `Option`.

pub mod agent;
pub mod signed;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::model::guard::{Hold, Quarantine};
use crate::model::names::Digest;
use crate::model::refusal::RefusalClass;

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

/// The root of trust a node holds, when one was taken from the plane or
/// the last look at the plane's said something (absent while the config's
/// `trusted_keys` are the root and nothing is wrong); times are `T` as in
/// [`HeldView`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RootView<T> {
    /// The keys documents are signed by (their ids).
    pub document_keys: Vec<String>,
    /// Why the plane's newer root was not taken, or that the root held has
    /// expired, while so.
    pub error: Option<String>,
    /// When the root held expires (`null`: the config's, never).
    pub expires: Option<T>,
    /// The keys that sign the next root (their ids).
    pub root_keys: Vec<String>,
    /// How many of them must.
    pub threshold: usize,
    /// Its version: 0 for the config's keys.
    pub version: u64,
    /// The names of its delegations, in its order (absent: none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub delegations: Vec<String>,
    /// The allow-list of image digests it asks for (absent: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_list: Option<AllowListView<T>>,
}

/// The allow-list a root asks for, and the one held; times are `T` as in
/// [`HeldView`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllowListView<T> {
    /// How many of the allow-list role's keys must sign it.
    pub threshold: usize,
    /// The version held (`null`: none yet; every document naming an
    /// image is refused until one is).
    pub version: Option<u64>,
    /// When the list held expires.
    pub expires: Option<T>,
    /// How many images it lists.
    pub images: usize,
}

/// One of the node's groups; `until` is `T` as in [`HeldView`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupView<T> {
    /// Why the last look at its document brought nothing, while so (what
    /// is held keeps running).
    pub error: Option<String>,
    /// The group.
    pub group: String,
    /// Why the group is not for this device (its `when` judged the
    /// device's facts), while so: it gives the device no modules (absent
    /// otherwise, and from an agent before 0.7.0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_for: Option<String>,
    /// The revision of its document held.
    pub revision: Option<u64>,
    /// Why the revision held is no longer its floor (no key in force
    /// signed it), while so; absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revoked: Option<String>,
    /// Its rollout here, when the held revision has one.
    pub rollout: Option<RolloutView<T>>,
    /// The revision whose modules the node runs (the held one, or the
    /// previous one until the rollout reaches it).
    pub running: Option<u64>,
}

/// A group rollout's decision for this node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RolloutView<T> {
    /// Whether the node runs the new revision.
    pub taken: bool,
    /// When its turn comes, while it waits for it.
    pub until: Option<T>,
    /// Why (`its turn`, `canary`, `taken before`, `not started`,
    /// `halted`, `reverted`).
    pub why: String,
}

impl<T> GroupView<T> {
    /// The same, its time written by `f`.
    pub fn with_times<U>(&self, f: impl Fn(&T) -> U) -> GroupView<U> {
        GroupView {
            error: self.error.clone(),
            group: self.group.clone(),
            not_for: self.not_for.clone(),
            revision: self.revision,
            revoked: self.revoked.clone(),
            rollout: self.rollout.as_ref().map(|r| RolloutView {
                taken: r.taken,
                until: r.until.as_ref().map(&f),
                why: r.why.clone(),
            }),
            running: self.running,
        }
    }
}

impl<T: std::fmt::Display> GroupView<T> {
    /// The group in a line of `stead status`.
    pub fn line(&self) -> String {
        let held = match (self.revision, &self.revoked) {
            (None, _) => "no document yet".to_string(),
            (Some(r), None) => format!("revision {r}"),
            (Some(r), Some(why)) => {
                format!("revision {r} (still run, but no longer the floor: {why})")
            }
        };
        let rollout = match &self.rollout {
            None => String::new(),
            Some(r) if r.taken => format!("; rollout taken ({})", r.why),
            Some(r) => match &r.until {
                Some(t) => format!(
                    "; rollout waiting until {t} ({}), running revision {}",
                    r.why,
                    self.running.map_or("-".into(), |r| r.to_string())
                ),
                None => format!(
                    "; rollout {}, running revision {}",
                    r.why,
                    self.running.map_or("-".into(), |r| r.to_string())
                ),
            },
        };
        let error = self
            .error
            .as_ref()
            .map_or(String::new(), |e| format!("; {e}"));
        let not_for = self
            .not_for
            .as_ref()
            .map_or(String::new(), |w| format!("; not for this device: {w}"));
        format!("group {} {held}{rollout}{not_for}{error}", self.group)
    }
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

/// The modules the held document names that another source owns, each
/// `(module, what owns it)`, as the API and the report say them.
pub fn conflicts(c: &[(String, String)]) -> Vec<ConflictView> {
    c.iter()
        .map(|(m, e)| ConflictView {
            error: e.clone(),
            module: m.clone(),
        })
        .collect()
}

/// How many of the device's latest action records a report carries.
pub const REPORTED_ACTIONS: usize = 32;

/// A one-shot action's record, as a report carries it (and
/// `GET /v1/actions` shows it): no upload's URL past its path.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActionView {
    /// When it got where it is, seconds since the epoch.
    pub at: u64,
    /// Its id.
    pub id: String,
    /// Its kind.
    pub kind: String,
    /// Its module.
    pub module: Option<String>,
    /// What it did, or why it failed or expired.
    pub result: Option<String>,
    /// `begun`, `done`, `failed` or `expired`.
    pub status: String,
}

impl ActionView {
    /// The latest `REPORTED_ACTIONS` of `records` (by when they got where
    /// they are), in the order of their ids.
    pub fn latest(records: &[crate::model::action::Record]) -> Vec<ActionView> {
        let mut r: Vec<&crate::model::action::Record> = records.iter().collect();
        crate::model::sort::sort_by(&mut r, |a, b| b.at.cmp(&a.at).then(a.id.cmp(&b.id)));
        r.truncate(REPORTED_ACTIONS);
        let mut out: Vec<ActionView> = r.into_iter().map(ActionView::from).collect();
        crate::model::sort::sort_by(&mut out, |a, b| a.id.cmp(&b.id));
        out
    }
}

impl From<&crate::model::action::Record> for ActionView {
    fn from(r: &crate::model::action::Record) -> ActionView {
        ActionView {
            at: r.at,
            id: r.id.clone(),
            kind: r.kind.as_str().to_string(),
            module: r.module.as_ref().map(|m| m.as_str().to_string()),
            result: r.result.clone(),
            status: r.status.as_str().to_string(),
        }
    }
}

/// The report PUT to the plane: the node's whole status.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReportView {
    /// The one-shot actions the device keeps a record of, its latest
    /// [`REPORTED_ACTIONS`] (absent when none; and in reports of agents
    /// before 0.7.0).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub actions: Vec<ActionView>,
    /// The agent: what runs, the launcher's state, its updates (absent in
    /// reports of agents before 0.6.0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<agent::AgentView>,
    /// The agent's version.
    pub agent_version: String,
    /// The clocks.
    pub clock: ReportClock,
    /// This device's public key (`age1…`), what values for it are sealed
    /// to (absent from an agent before 0.6.0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_key: Option<String>,
    /// The filesystems that matter and how full they are.
    #[serde(default)]
    pub disk: Option<crate::model::disk::Disks>,
    /// The engine in a word (`unknown`, `reachable`, `waiting`).
    pub engine: String,
    /// The images the agent is fetching, how far each is, and those ahead
    /// of a coming rollout turn (absent when none, and from an agent
    /// before 0.7.0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fetching: Option<crate::model::fetch::Fetching>,
    /// What the last image the agent fetched itself brought, and from
    /// where (absent before one, and from an agent before 0.7.0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fetched: Option<crate::model::fetch::Brought>,
    /// What the device is: its architecture, system, engine and version,
    /// labels, memory and free disk, as a group's `when` judges them
    /// (absent from an agent before 0.7.0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub facts: Option<crate::model::facts::Facts>,
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
    /// This device's report key: the public half of the Ed25519 key its
    /// report is signed with ([`signed`]), the standard base64 of its 32
    /// bytes (absent from an agent before 0.7.0, whose report is not
    /// signed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report_key: Option<String>,
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
    /// The device's clock less the plane host's `Date` at the last answer
    /// that had one, in seconds (positive: the device is ahead); absent
    /// before such an answer, and in reports of agents before it was added.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skew: Option<i64>,
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
    /// The groups the held document lists (absent without any).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<GroupView<String>>,
    /// The document held.
    pub held: Option<HeldView<String>>,
    /// When it last answered.
    pub last_contact: Option<String>,
    /// The last document not adopted.
    pub refusal: Option<RefusalView<String>>,
    /// The root of trust (absent while the config's keys are it and all
    /// is well).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root: Option<RootView<String>>,
    /// The document's URL.
    pub url: String,
}

/// What of a report says which images its node runs: the same JSON as
/// [`ReportView`], read for only these fields (every other one skipped,
/// none kept), for a reader of a fleet's reports that asks only that
/// (`stead-plane exposure`). [`ReportRuns::from`] a [`ReportView`] is
/// what reading its JSON this way gives (a test holds the two together).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct ReportRuns {
    /// [`ReportView::node`].
    pub node: String,
    /// [`ReportView::report_key`].
    #[serde(default)]
    pub report_key: Option<String>,
    /// [`ReportView::modules`], each as [`ModuleRuns`].
    pub modules: BTreeMap<String, ModuleRuns>,
    /// Of [`ReportView::plane`].
    pub plane: PlaneRuns,
}

/// Of a [`ReportModule`]: what it runs and its state.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct ModuleRuns {
    /// [`ReportModule::image`].
    #[serde(default)]
    pub image: Option<String>,
    /// [`ReportModule::image_digests`].
    #[serde(default)]
    pub image_digests: Vec<String>,
    /// [`ReportModule::image_id`].
    pub image_id: Option<String>,
    /// [`ReportModule::state`].
    pub state: String,
}

/// Of a [`ReportPlane`]: its groups and the revision it holds.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct PlaneRuns {
    /// Of [`ReportPlane::groups`].
    #[serde(default)]
    pub groups: Vec<GroupRuns>,
    /// Of [`ReportPlane::held`].
    pub held: Option<HeldRuns>,
}

/// Of a [`GroupView`]: the group and the revision it runs.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct GroupRuns {
    /// [`GroupView::group`].
    pub group: String,
    /// [`GroupView::running`].
    pub running: Option<u64>,
}

/// Of a [`HeldView`]: its revision.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct HeldRuns {
    /// [`HeldView::revision`].
    pub revision: u64,
}

impl From<ReportView> for ReportRuns {
    fn from(r: ReportView) -> ReportRuns {
        ReportRuns {
            node: r.node,
            report_key: r.report_key,
            modules: r
                .modules
                .into_iter()
                .map(|(name, m)| {
                    let m = ModuleRuns {
                        image: m.image,
                        image_digests: m.image_digests,
                        image_id: m.image_id,
                        state: m.state,
                    };
                    (name, m)
                })
                .collect(),
            plane: PlaneRuns {
                groups: r
                    .plane
                    .groups
                    .into_iter()
                    .map(|g| GroupRuns {
                        group: g.group,
                        running: g.running,
                    })
                    .collect(),
                held: r.plane.held.map(|h| HeldRuns {
                    revision: h.revision,
                }),
            },
        }
    }
}

/// A module, in a report.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReportModule {
    /// The digest its inputs give now.
    pub desired_digest: Option<Digest>,
    /// Its container's health.
    pub health: Option<String>,
    /// The image reference its intention names (absent from an agent
    /// before 0.7.0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// The manifest digests the engine knows for the image its container
    /// runs, `repo@sha256:…` (the engine's `RepoDigests`; none for an
    /// image built on the device, or from an agent before 0.7.0): what
    /// `stead-plane exposure` finds devices by.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub image_digests: Vec<String>,
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A report's JSON read as [`ReportRuns`] says what [`ReportRuns::from`]
    /// its [`ReportView`] does: the narrow view reads the same fields, by
    /// the same names and defaults.
    #[test]
    fn a_report_read_for_what_it_runs_says_what_its_whole_view_does() {
        let module = |image: Option<&str>, digests: &[&str], state: &str| {
            let mut m = serde_json::json!({
                "desired_digest": null, "health": "healthy", "image_id": "sha256:11",
                "last_error": {"class": "failed", "message": "m"}, "restart_count": 2,
                "running_digest": null, "state": state,
                "reload": {"landed": null, "request": null}
            });
            if let Some(i) = image {
                m["image"] = i.into();
            }
            if !digests.is_empty() {
                m["image_digests"] = digests.into();
            }
            m
        };
        let report = |groups: serde_json::Value, held: serde_json::Value| {
            serde_json::json!({
                "agent_version": "0.7.0",
                "clock": {"plane_date": null, "skew": -3, "status": "ok", "system": "x"},
                "device_key": "age1x", "disk": null, "engine": "reachable",
                "modules": {
                    "app": module(Some("reg:5000/app:1"), &["reg:5000/app@sha256:aa", "other/app@sha256:bb"], "converged"),
                    "old": module(None, &[], "failed"),
                },
                "node": "edge-a", "passing": true,
                "plane": {"conflicts": [], "error": null, "groups": groups, "held": held,
                          "last_contact": null, "refusal": null, "url": "u"},
                "quarantine": null, "report_key": "k", "sent_at": "t", "seq": 4, "undelivered": 0
            })
        };
        let held = serde_json::json!({
            "accepted_at": "a", "expires": "e", "floor": true, "issued_at": "i",
            "key_id": "ed25519:00", "revision": 17, "revoked": null
        });
        let group = |g: &str, running: Option<u64>| {
            serde_json::json!({"error": null, "group": g, "revision": 9, "rollout":
                {"taken": false, "until": "u", "why": "w"}, "running": running})
        };
        let cases = [
            report(
                serde_json::json!([group("eu", Some(8)), group("lab", None)]),
                held,
            ),
            report(serde_json::json!([]), serde_json::Value::Null),
        ];
        for json in cases {
            let whole: ReportView = serde_json::from_value(json.clone()).unwrap();
            let text = serde_json::to_vec(&whole).unwrap();
            let narrow: ReportRuns = serde_json::from_slice(&text).unwrap();
            assert_eq!(narrow, ReportRuns::from(whole), "{json}");
        }
        // Without the optional fields (an agent before 0.7.0's modules,
        // no groups, no report key).
        let mut old = report(serde_json::json!([]), serde_json::Value::Null);
        old.as_object_mut().unwrap().remove("report_key");
        old["plane"].as_object_mut().unwrap().remove("groups");
        let whole: ReportView = serde_json::from_value(old.clone()).unwrap();
        let narrow: ReportRuns = serde_json::from_value(old).unwrap();
        assert_eq!(narrow, ReportRuns::from(whole));
        assert_eq!(narrow.modules["old"].image, None);
        assert!(narrow.report_key.is_none() && narrow.plane.groups.is_empty());
    }

    #[test]
    fn a_report_carries_the_latest_actions_in_the_order_of_their_ids() {
        use crate::model::action::{Action, Kind, Record};
        let record = |id: String, at: u64| {
            let a = Action {
                id,
                kind: Kind::Reboot,
                module: None,
                not_before: None,
                expires: 10_000,
                upload_to: None,
                since: None,
                until: None,
            };
            let mut r = Record::begin(&a, "boot=b".into(), at);
            r.finish("rebooted".into(), at).unwrap();
            r
        };
        let records: Vec<Record> = (0..40)
            .map(|i| record(format!("a{i:02}"), 1_000 - i))
            .collect();
        let got = ActionView::latest(&records);
        assert_eq!(got.len(), REPORTED_ACTIONS);
        // The 32 latest are a00..a31 (the later the id, the earlier it got there).
        let ids: Vec<&str> = got.iter().map(|a| a.id.as_str()).collect();
        let want: Vec<String> = (0..32).map(|i| format!("a{i:02}")).collect();
        assert_eq!(ids, want);
        assert_eq!(
            serde_json::to_value(&got[0]).unwrap(),
            serde_json::json!({"at": 1000, "id": "a00", "kind": "reboot", "module": null, "result": "rebooted", "status": "done"})
        );
        assert!(ActionView::latest(&[]).is_empty());
    }
}
