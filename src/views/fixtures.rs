//! The wire formats' golden tests: the texts 0.5.0 wrote, and fixed
//! inputs for them (a node and a board with every optional fact present,
//! and bare ones). The plane's inputs are its own, beside its status in
//! the plane module; the API's plane view, its sync outcome and the report
//! are checked against these texts where they are built.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::model::guard::{Hold, Quarantine};
use crate::model::names::{Digest, ModuleName};
use crate::model::reload::{Flat, Item, Landed, Request, Status, UpdateState};
use crate::model::spec::Moved;
use crate::status::{Board, EngineStatus, LastAction, ModuleState, ModuleStatus, NodeStatus};

// The wire formats as 0.5.0 (a6753d2) wrote them for the fixtures,
// compact and with the version as `@VERSION@`: not one byte may move.

/// `GET /v1/status`'s node, for [`nodes`].
pub const NODES: [&str; 2] = [
    r#"{"disk":{"events_paused":false,"filesystems":[{"free_bytes":2147483648,"level":"pressure","path":"/var/lib/docker","roles":["images","store"],"size_bytes":17179869184}],"level":"pressure","logs":{"bound_bytes":31457280,"unbounded":["db"]}},"engine":{"error":"gone","since":100,"state":"waiting"},"failing":{"error":"refused","since":150},"id":"edge-1","last_pass":{"at":200,"duration_ms":1500.2499999999998},"next_pass_at":230,"other_agent":"another agent","passes":3,"passing":false,"quarantine":{"document":{"cause":"panicked at 6","crashes":6,"digest":"sha256:139d544b821b13ebea14f1b0fe18577222e415c2966e3a3511c4196055232202","since":1006},"everything":{"cause":"panicked at 5","crashes":5,"since":1005},"modules":[{"cause":"panicked at 3","crashes":3,"module":"web","since":1003}],"revision":{"cause":"panicked at 4","crashes":4,"revision":7,"since":1004},"summary":"every module (no pass runs), plane revision 7, module web, plane document sha256:139d544b821b"},"version":"@VERSION@"}"#,
    r#"{"disk":null,"engine":{"state":"reachable"},"failing":null,"id":"edge-1","last_pass":{"at":300,"duration_ms":2.0},"next_pass_at":330,"other_agent":null,"passes":1,"passing":true,"quarantine":null,"version":"@VERSION@"}"#,
];
/// A module's status, for [`board`]'s modules in order.
pub const MODULES: [&str; 2] = [
    r#"{"container_id":null,"desired_digest":null,"health":null,"health_output":null,"image_id":null,"inputs_differ":[],"last_action":null,"last_error":null,"name":"db","next_attempt_at":null,"restart_count":null,"running_digest":null,"state":"pending"}"#,
    r#"{"container_id":"c0ffee","desired_digest":"sha256:b60b935389f7cf68e7877a80a4ded0dfc93e248b8807932536e1de0f771d259b","health":"unhealthy","health_output":"probe said no","image":"registry.example/web:1.2","image_digests":["registry.example/web@sha256:7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e"],"image_id":"sha256:1mage","inputs_differ":[{"desired":null,"input":"env","running":"sha256:ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb"}],"last_action":{"action":"recreated","at":1700000050},"last_error":"it keeps restarting","name":"web","next_attempt_at":1700000900,"restart_count":4,"running_digest":"sha256:c071cf5f5ed6f884cc70155b6f05f755fd46a302d05e4261b7e92ce878bbfed8","state":"crash-looping"}"#,
];
/// `GET /v1/plane`, for the plane's two fixtures and no plane.
pub const PLANES: [&str; 3] = [
    r#"{"clock":"behind","configured":true,"conflicts":[{"error":"a file owns it","module":"db"}],"error":"HTTP 503","groups":[{"error":null,"group":"eu","revision":4,"rollout":{"taken":false,"until":1700003600,"why":"its turn"},"running":3},{"error":"group cameras: no document at http://plane/groups/cameras/desired.json (HTTP 404)","group":"cameras","revision":2,"rollout":{"taken":true,"until":null,"why":"canary"},"running":2}],"held":{"accepted_at":1700000100,"expired":true,"expires":1700086400,"floor":false,"issued_at":1700000000,"key_id":"ed25519:abc","revision":9,"revoked":"no key trusted now signed it"},"last_contact":1700000200,"next_poll_at":1700000500,"plane_date":1700000201,"refusal":{"at":1700000150,"class":"rollback","detail":"revision 8 is older","revision":8},"reports":{"error":"PUT: HTTP 500","last_sent_at":1700000300,"last_seq":42,"pending":true,"url":"http://plane/nodes/edge-1/status.json"},"root":{"document_keys":["648aa5c579fb30f3"],"error":"root version 3 is signed by 1 of the root keys of version 2, which needs 2","expires":1731000000,"root_keys":["72cd6e8422c407fb","75877bb41d393b5f"],"threshold":2,"version":2},"url":"http://plane/nodes/edge-1/desired.json"}"#,
    r#"{"clock":null,"configured":true,"conflicts":[],"error":null,"held":null,"last_contact":null,"next_poll_at":null,"plane_date":null,"refusal":null,"reports":{"error":null,"last_sent_at":null,"last_seq":null,"pending":false,"url":""},"url":"http://plane/d.json"}"#,
    r#"{"configured":false}"#,
];
/// The report, for [`nodes`] each with the plane's fixture in turn.
pub const REPORTS: [&str; 2] = [
    r#"{"agent_version":"@VERSION@","clock":{"plane_date":"2023-11-14T22:16:41Z","skew":-1,"status":"behind","system":"2023-11-14T22:29:59Z"},"disk":{"events_paused":false,"filesystems":[{"free_bytes":2147483648,"level":"pressure","path":"/var/lib/docker","roles":["images","store"],"size_bytes":17179869184}],"level":"pressure","logs":{"bound_bytes":31457280,"unbounded":["db"]}},"engine":"waiting","modules":{"db":{"desired_digest":null,"health":null,"image_id":null,"last_error":null,"restart_count":null,"running_digest":null,"state":"pending"},"web":{"desired_digest":"sha256:b60b935389f7cf68e7877a80a4ded0dfc93e248b8807932536e1de0f771d259b","health":"unhealthy","image":"registry.example/web:1.2","image_digests":["registry.example/web@sha256:7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e"],"image_id":"sha256:1mage","last_error":{"class":"crash-looping","message":"it keeps restarting"},"reload":{"landed":{"digest":"sha256:landed","version":"1.2.3"},"request":{"failure":"it did not settle","id":5,"status":"failed"}},"restart_count":4,"running_digest":"sha256:c071cf5f5ed6f884cc70155b6f05f755fd46a302d05e4261b7e92ce878bbfed8","state":"crash-looping"}},"node":"edge-1","passing":false,"plane":{"conflicts":[{"error":"a file owns it","module":"db"}],"error":"HTTP 503","groups":[{"error":null,"group":"eu","revision":4,"rollout":{"taken":false,"until":"2023-11-14T23:13:20Z","why":"its turn"},"running":3},{"error":"group cameras: no document at http://plane/groups/cameras/desired.json (HTTP 404)","group":"cameras","revision":2,"rollout":{"taken":true,"until":null,"why":"canary"},"running":2}],"held":{"accepted_at":"2023-11-14T22:15:00Z","expires":"2023-11-15T22:13:20Z","floor":false,"issued_at":"2023-11-14T22:13:20Z","key_id":"ed25519:abc","revision":9,"revoked":"no key trusted now signed it"},"last_contact":"2023-11-14T22:16:40Z","refusal":{"at":"2023-11-14T22:15:50Z","class":"rollback","detail":"revision 8 is older","revision":8},"root":{"document_keys":["648aa5c579fb30f3"],"error":"root version 3 is signed by 1 of the root keys of version 2, which needs 2","expires":"2024-11-07T17:20:00Z","root_keys":["72cd6e8422c407fb","75877bb41d393b5f"],"threshold":2,"version":2},"url":"http://plane/nodes/edge-1/desired.json"},"quarantine":{"document":{"cause":"panicked at 6","crashes":6,"digest":"sha256:139d544b821b13ebea14f1b0fe18577222e415c2966e3a3511c4196055232202","since":1006},"everything":{"cause":"panicked at 5","crashes":5,"since":1005},"modules":[{"cause":"panicked at 3","crashes":3,"module":"web","since":1003}],"revision":{"cause":"panicked at 4","crashes":4,"revision":7,"since":1004},"summary":"every module (no pass runs), plane revision 7, module web, plane document sha256:139d544b821b"},"sent_at":"2023-11-14T22:29:59Z","seq":77,"undelivered":2}"#,
    r#"{"agent_version":"@VERSION@","clock":{"plane_date":null,"status":"unknown","system":"2023-11-14T22:29:59Z"},"disk":null,"engine":"reachable","modules":{"db":{"desired_digest":null,"health":null,"image_id":null,"last_error":null,"restart_count":null,"running_digest":null,"state":"pending"},"web":{"desired_digest":"sha256:b60b935389f7cf68e7877a80a4ded0dfc93e248b8807932536e1de0f771d259b","health":"unhealthy","image":"registry.example/web:1.2","image_digests":["registry.example/web@sha256:7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e"],"image_id":"sha256:1mage","last_error":{"class":"crash-looping","message":"it keeps restarting"},"reload":{"landed":{"digest":"sha256:landed","version":"1.2.3"},"request":{"failure":"it did not settle","id":5,"status":"failed"}},"restart_count":4,"running_digest":"sha256:c071cf5f5ed6f884cc70155b6f05f755fd46a302d05e4261b7e92ce878bbfed8","state":"crash-looping"}},"node":"edge-1","passing":true,"plane":{"conflicts":[],"error":null,"held":null,"last_contact":null,"refusal":null,"url":"http://plane/d.json"},"quarantine":null,"sent_at":"2023-11-14T22:29:59Z","seq":77,"undelivered":2}"#,
];
/// `POST /v1/plane/sync`, for each outcome a poll has.
pub const OUTCOMES: [&str; 7] = [
    r#"{"outcome":"not-modified"}"#,
    r#"{"outcome":"adopted","revision":3}"#,
    r#"{"outcome":"same","revision":3}"#,
    r#"{"class":"rollback","detail":"revision 2 is older","outcome":"refused","revision":2}"#,
    r#"{"class":"too-large","detail":"too large","outcome":"refused","revision":null}"#,
    r#"{"error":"HTTP 503","outcome":"failed","retry_after_secs":60}"#,
    r#"{"error":"gone","outcome":"failed","retry_after_secs":null}"#,
];

/// A golden text with this build's version in it.
pub fn golden(want: &str) -> String {
    want.replace("@VERSION@", crate::VERSION)
}

/// The text of a view, as the API sends it (through a JSON value,
/// compact; the API pretty-prints the same value, key for key) and read
/// back; the view read back is the view.
pub fn same_text<V>(v: &V) -> String
where
    V: serde::Serialize + serde::de::DeserializeOwned + PartialEq + std::fmt::Debug,
{
    let value = serde_json::to_value(v).unwrap();
    let back: V = serde_json::from_value(value.clone()).unwrap();
    assert_eq!(&back, v, "a view reads back as itself");
    serde_json::to_string(&value).unwrap()
}

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
        disk: crate::model::disk::Disks {
            level: crate::model::disk::Level::Pressure,
            filesystems: vec![crate::model::disk::Filesystem {
                path: "/var/lib/docker".into(),
                roles: vec!["images".into(), "store".into()],
                size_bytes: 16 << 30,
                free_bytes: 2 << 30,
                level: crate::model::disk::Level::Pressure,
            }],
            logs: crate::model::disk::Logs {
                bound_bytes: 30 << 20,
                unbounded: vec!["db".into()],
            },
            events_paused: false,
        },
        // None under way: absent from the text, as before 0.7.0.
        fetching: Default::default(),
        // None brought yet: absent, as before 0.7.0.
        fetched: None,
        // Absent, as from an agent before 0.6.0: the texts are 0.5.0's.
        device_key: None,
        report_key: None,
        // Absent, as from an agent before 0.7.0.
        facts: Default::default(),
    };
    let reachable = NodeStatus {
        engine: EngineStatus::Reachable,
        passes: 1,
        last_pass: Some((at(300), Duration::from_millis(2))),
        ..NodeStatus::default()
    };
    [full, reachable]
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
        image: Some("registry.example/web:1.2".into()),
        image_digests: vec!["registry.example/web@sha256:7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e".into()],
        health: Some("unhealthy".into()),
        health_output: Some("probe said no".into()),
        restart_count: Some(4),
        inputs_differ: vec![Moved {
            input: "env".into(),
            running: Some(Digest::of(b"a")),
            desired: None,
        }],
        last_action: Some(LastAction {
            action: crate::status::Act::Recreated,
            at: 1_700_000_050,
        }),
        last_error: Some("it keeps restarting".into()),
        next_attempt_at: Some(1_700_000_900),
        desired_image: Some("not shown".into()),
        observed_at: Some(1_700_000_100),
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
    let request = Request::from(Flat {
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
    });
    (updates, vec![request])
}

/// `GET /v1/status`'s agent with every optional fact: a candidate on
/// trial, one given up before it, and the open update.
pub fn agent_status() -> crate::views::agent::AgentStatusView {
    use crate::model::agent_update::{AgentUpdate, FlatState, Stage};
    use crate::model::launch::{AgentVersion, Candidate, Failed, Slot, State};
    let v = |s: &str| AgentVersion::parse(s).unwrap();
    let state = State {
        current: Some(v("0.6.1")),
        previous: Some(v("0.6.0")),
        candidate: Some(Candidate {
            version: v("0.7.1"),
            attempts: 2,
        }),
        failed: Some(Failed {
            version: v("0.7.0"),
            why: "started 3 times and never confirmed".into(),
        }),
        package: None,
        other: vec![],
    };
    // Confirming as a record holds it (what the moves before wrote aside).
    let mut open = AgentUpdate::new(4, v("0.7.1"), "0.6.1", (vec![], None), "the API", 100)
        .restored(FlatState {
            stage: Stage::Confirming,
            restart_requested_at: None,
            finished_at: None,
            failure: None,
            faulted_at: None,
        });
    open.say(110, "candidate 0.7.1 started");
    let a = crate::views::agent::AgentView::new(
        "0.7.1",
        "aarch64-unknown-linux-musl",
        Some(&Slot::Candidate(v("0.7.1"))),
        Ok(state),
        &[open],
    );
    crate::views::agent::AgentStatusView::from(&a)
}
