//! Fixed inputs for the wire formats' golden tests: a node, a plane and a
//! board with every optional fact present, and bare ones.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::model::guard::{Hold, Quarantine};
use crate::model::names::{Digest, ModuleName};
use crate::model::reload::{Item, Landed, Request, Status, UpdateState};
use crate::model::spec::Moved;
use crate::plane::accept::ClockStatus;
use crate::plane::sync::{HeldSummary, PlaneStatus, ReportStatus};
use crate::status::{Board, EngineStatus, LastAction, ModuleState, ModuleStatus, NodeStatus};
use crate::store::plane::{Contact, Refusal};

fn at(s: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(s)
}

fn hold(crashes: u32) -> Hold {
    Hold {
        key: Digest::of(b"key"),
        crashes,
        since: 1_000 + u64::from(crashes),
        cause: format!("panicked at {crashes}"),
    }
}

/// A node with every fact, and a bare one.
pub fn nodes() -> [NodeStatus; 2] {
    let mut modules = BTreeMap::new();
    modules.insert(ModuleName::try_from("web").unwrap(), hold(3));
    let full = NodeStatus {
        engine: EngineStatus::Waiting {
            since: at(100),
            error: "gone".into(),
        },
        last_pass: Some((at(200), Duration::from_micros(1_500_250))),
        passes: 3,
        failing: Some((at(150), "refused".into())),
        other_agent: Some("another agent".into()),
        quarantine: Quarantine {
            modules,
            revision: Some((7, hold(4))),
            everything: Some(hold(5)),
            document: Some((Digest::of(b"doc"), hold(6))),
        },
    };
    let reachable = NodeStatus {
        engine: EngineStatus::Reachable,
        passes: 1,
        last_pass: Some((at(300), Duration::from_millis(2))),
        ..NodeStatus::default()
    };
    [full, reachable]
}

/// A plane with every fact, and a bare one.
pub fn planes() -> [PlaneStatus; 2] {
    let full = PlaneStatus {
        url: "http://plane/nodes/edge-1/desired.json".into(),
        held: Some(HeldSummary {
            revision: 9,
            issued_at: 1_700_000_000,
            expires: 1_700_086_400,
            accepted_at: 1_700_000_100,
            key_id: "ed25519:abc".into(),
            revoked: Some("no key trusted now signed it".into()),
        }),
        contact: Contact {
            at: Some(1_700_000_200),
            refusal: Some(Refusal {
                class: crate::plane::RefusalClass::Rollback,
                detail: "revision 8 is older".into(),
                revision: Some(8),
                at: 1_700_000_150,
            }),
            error: Some("HTTP 503".into()),
            plane_date: Some(1_700_000_201),
        },
        clock: Some(ClockStatus::Behind(30)),
        conflicts: vec![("db".into(), "a file owns it".into())],
        next_poll_at: Some(1_700_000_500),
        reports: ReportStatus {
            url: "http://plane/nodes/edge-1/status.json".into(),
            last_sent_at: Some(1_700_000_300),
            last_seq: Some(42),
            pending: true,
            error: Some("PUT: HTTP 500".into()),
        },
    };
    let bare = PlaneStatus {
        url: "http://plane/d.json".into(),
        ..PlaneStatus::default()
    };
    [full, bare]
}

/// A board of two modules: one with every fact, one pending.
pub fn board() -> Board {
    let web = ModuleStatus {
        name: "web".into(),
        state: ModuleState::CrashLooping,
        desired_digest: Some(Digest::of(b"desired")),
        running_digest: Some(Digest::of(b"running")),
        container_id: Some("c0ffee".into()),
        image_id: Some("sha256:1mage".into()),
        health: Some("unhealthy".into()),
        health_output: Some("probe said no".into()),
        restart_count: Some(4),
        inputs_differ: vec![Moved {
            input: "env".into(),
            running: Some(Digest::of(b"a")),
            desired: None,
        }],
        last_action: Some(LastAction {
            action: "recreated".into(),
            at: 1_700_000_050,
        }),
        last_error: Some("it keeps restarting".into()),
        next_attempt_at: Some(1_700_000_900),
        desired_image: Some("not shown".into()),
    };
    let mut b = Board::new();
    b.insert("web".into(), web);
    b.insert("db".into(), ModuleStatus::pending("db"));
    b
}

/// Update states and reload requests for [`board`]'s modules.
pub fn reloads() -> (BTreeMap<ModuleName, UpdateState>, Vec<Request>) {
    let mut updates = BTreeMap::new();
    updates.insert(
        ModuleName::try_from("web").unwrap(),
        UpdateState {
            landed: Some(Landed {
                version: "1.2.3".into(),
                digest: "sha256:landed".into(),
                image_id: "sha256:img".into(),
                reference: "r".into(),
                request: 5,
                from_image: "i".into(),
                from_range: "^1".into(),
                previous_image: None,
            }),
            ..UpdateState::default()
        },
    );
    let request = Request {
        id: 5,
        written_by: 1,
        module: Some("web".into()),
        reason: "why".into(),
        requested_by: "me".into(),
        requested_at: 1_700_000_010,
        status: Status::Failed,
        attempt: 1,
        faulted_at: None,
        not_before: None,
        items: vec![Item {
            module: "web".into(),
            ..Item::default()
        }],
        activation: None,
        activation_detail: None,
        restart_requested_at: None,
        failure: Some("it did not settle".into()),
        finished_at: None,
        log: vec![],
    };
    (updates, vec![request])
}
