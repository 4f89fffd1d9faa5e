//! Signed desired-state documents for the plane tests (tests/plane.rs,
//! tests/plane_trust.rs): a module that prints `V`, a payload for a node,
//! its signature, and waits on what the agent says of the plane.

use std::time::{Duration, Instant};

use serde_json::{Value as J, json};
use stead::model::time::format_rfc3339;
use stead::plane::envelope::{PAYLOAD_TYPE, SecretKey};
use stead::plane::group::GROUP_PAYLOAD_TYPE;

use super::agent::Agent;
use super::plane::Plane;
use super::{IMAGE_1, Node, idle_after, unix_now};

pub const DAY: u64 = 86_400;

pub fn now() -> u64 {
    unix_now() as u64
}

/// A module that prints `V` and idles.
pub fn module(name: &str, v: &str) -> J {
    json!({
        "name": name,
        "image": IMAGE_1,
        "command": ["sh", "-c", idle_after("echo V=$V")],
        "env": {"V": v},
        "restart": "always",
    })
}

/// A payload for `n` at `revision`, issued now, expiring in 30 days,
/// polled every second.
pub fn payload(n: &Node, revision: u64, modules: Vec<J>) -> J {
    json!({
        "node": n.id,
        "revision": revision,
        "issued_at": format_rfc3339(now()),
        "expires": format_rfc3339(now() + 30 * DAY),
        "poll": {"interval": "1s", "jitter": "100ms"},
        "modules": modules,
    })
}

pub fn sign(key: &SecretKey, payload: &J) -> Vec<u8> {
    key.sign(PAYLOAD_TYPE, &serde_json::to_vec(payload).unwrap())
        .to_json()
}

pub fn plane_state(agent: &Agent) -> J {
    let (code, body) = agent.get("/v1/plane");
    assert_eq!(code, 200, "{body}");
    serde_json::from_str(&body).unwrap()
}

/// Waits until `/v1/plane` satisfies `f`; returns it.
pub fn wait_plane(n: &Node, agent: &Agent, what: &str, f: impl Fn(&J) -> bool) -> J {
    let end = Instant::now() + Duration::from_secs(60);
    loop {
        let p = plane_state(agent);
        if f(&p) {
            return p;
        }
        assert!(
            Instant::now() < end,
            "timed out waiting for {what}; the plane status: {p:#}\nagent log:\n{}",
            Agent::log(n)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Waits until the module's container runs and printed `V=<v>`.
pub fn wait_v(n: &Node, m: &str, v: &str) {
    n.wait_for(60, &format!("{m} to print V={v}"), || {
        n.container(m).is_some_and(|(_, s, _)| s == "running")
            && n.logs(m).contains(&format!("V={v}"))
    });
}

/// The payload's signature by `key`, over its bytes as given.
pub fn sign_bytes(key: &SecretKey, payload: &[u8]) -> Vec<u8> {
    key.sign(PAYLOAD_TYPE, payload).to_json()
}

/// A group document of `group` at `revision` with `modules`, and `extra`
/// fields (a rollout, the previous revision).
pub fn group_payload(group: &str, revision: u64, modules: Vec<J>, extra: J) -> J {
    let mut v = json!({
        "group": group,
        "revision": revision,
        "issued_at": format_rfc3339(now()),
        "expires": format_rfc3339(now() + 30 * DAY),
        "modules": modules,
    });
    for (k, x) in extra.as_object().unwrap() {
        v[k] = x.clone();
    }
    v
}

pub fn publish_group(plane: &Plane, key: &SecretKey, group: &str, payload: &J) {
    let bytes = key
        .sign(GROUP_PAYLOAD_TYPE, &serde_json::to_vec(payload).unwrap())
        .to_json();
    plane.publish_raw_path(&format!("groups/{group}/desired.json"), &bytes);
}

/// A node document listing `groups`, with its own `modules` and `extra`
/// fields (removals, overrides).
pub fn node_payload(n: &Node, revision: u64, groups: &[&str], modules: Vec<J>, extra: J) -> J {
    let mut v = payload(n, revision, modules);
    v["groups"] = json!(groups);
    for (k, x) in extra.as_object().unwrap() {
        v[k] = x.clone();
    }
    v
}

/// A node polling `plane` every second, trusting `key`.
pub fn plane_node(tag: &str, plane: &Plane, key: &SecretKey) -> Node {
    Node::new(tag).with_config(&format!(
        "[plane]\nurl = {:?}\ntrusted_keys = [{:?}]\npoll_interval = \"1s\"",
        plane.base(),
        key.public().to_base64()
    ))
}

/// Publishes group `g` at revision 1 with `modules`, and `n`'s document
/// at revision 1 listing it and nothing else, both signed by `key`.
pub fn publish_in_group(plane: &Plane, key: &SecretKey, n: &Node, g: &str, modules: Vec<J>) {
    publish_group(plane, key, g, &group_payload(g, 1, modules, json!({})));
    plane.publish(
        &n.id,
        &sign(key, &node_payload(n, 1, &[g], vec![], json!({}))),
    );
}
