//! Fleets against the real parts: Debian's nginx on loopback serving a
//! node's signed document and its groups' (`groups/<name>/desired.json`,
//! ETag/304), the real engine, the real store. A device in a group takes
//! the group's change; its own override and removal win; a staged rollout
//! holds it past the start until its own turn; a halt stops the rollout, a
//! revert brings it back; a group document that fails a check changes
//! nothing.

mod common;

use std::time::Duration;

use common::agent::Agent;
use common::desired::*;
use common::plane::{Plane, plane_cli, plane_cli_with};
use common::*;
use serde_json::{Value as J, json};
use stead::model::fleet::{fraction, position};
use stead::model::names::NodeId;
use stead::model::time::format_rfc3339;
use stead::plane::envelope::{PAYLOAD_TYPE, SecretKey};
use stead::plane::group::GROUP_PAYLOAD_TYPE;

fn group_state(agent: &Agent, group: &str) -> J {
    group_in(&plane_state(agent), group)
}

/// Waits until `group`'s state in `/v1/plane` satisfies `f`; returns it.
fn wait_group(agent: &Agent, group: &str, what: &str, f: impl Fn(&J) -> bool) -> J {
    let end = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let st = group_state(agent, group);
        if f(&st) {
            return st;
        }
        assert!(std::time::Instant::now() < end, "{what}: {st:#}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The image ID module `m`'s container runs.
fn image_of(n: &Node, m: &str) -> String {
    docker_ok(&["inspect", "--format", "{{.Image}}", &n.container_id(m)])
}

fn image_id(reference: &str) -> String {
    docker_ok(&["image", "inspect", "--format", "{{.Id}}", reference])
}

#[test]
fn a_device_in_a_group_takes_the_group_s_change_and_its_own_override_and_removal_win() {
    require_engine();
    let key = SecretKey::generate().unwrap();
    let plane = Plane::start();
    let n = plane_node("fleet-group", &plane, &key);
    let g = format!("g-{}", n.id);
    let (a, b, own) = (n.module("a"), n.module("b"), n.module("own"));
    publish_group(
        &plane,
        &key,
        &g,
        &group_payload(&g, 1, vec![module(&a, "g1"), module(&b, "b1")], json!({})),
    );
    let overrides = json!({"overrides": {b.clone(): {"image": IMAGE_2}}});
    plane.publish(
        &n.id,
        &sign(
            &key,
            &node_payload(&n, 1, &[&g], vec![module(&own, "n1")], overrides.clone()),
        ),
    );
    let agent = Agent::start(&n);
    wait_v(&n, &a, "g1");
    wait_v(&n, &b, "b1");
    wait_v(&n, &own, "n1");
    // The override pinned the image of the group's module.
    assert_eq!(image_of(&n, &b), image_id(IMAGE_2));
    assert_eq!(image_of(&n, &a), image_id(IMAGE_1));
    let st = wait_plane(&n, &agent, "group revision 1", |p| {
        p["groups"][0]["revision"] == 1
    });
    assert_eq!(st["groups"][0]["running"], 1, "{st:#}");
    assert!(st["groups"][0]["rollout"].is_null(), "{st:#}");

    // The group's change: taken, its module made again once, the others
    // left alone.
    let since = unix_now();
    publish_group(
        &plane,
        &key,
        &g,
        &group_payload(&g, 2, vec![module(&a, "g2"), module(&b, "b1")], json!({})),
    );
    wait_v(&n, &a, "g2");
    wait_plane(&n, &agent, "group revision 2", |p| {
        p["groups"][0]["revision"] == 2
    });
    // Several polls more: the group document is asked for conditionally.
    let path = format!("groups/{g}/desired.json");
    let at = plane.count("GET", &path, 304);
    plane.wait_count("GET", &path, 304, at + 3, 30);
    assert_eq!(
        n.creates_since(&a, since),
        1,
        "{:?}",
        n.events_since(&a, since)
    );
    assert_eq!(n.creates_since(&b, since), 0);
    assert_eq!(n.creates_since(&own, since), 0);
    assert_eq!(plane.count("GET", &path, 200), 2, "{:#?}", plane.requests());

    // The node's own document removes a group module: gone; the rest stays.
    let since = unix_now();
    let mut extra = overrides;
    extra["remove"] = json!([a.clone()]);
    plane.publish(
        &n.id,
        &sign(
            &key,
            &node_payload(&n, 2, &[&g], vec![module(&own, "n1")], extra),
        ),
    );
    n.wait_for(60, "the removed group module to go", || {
        n.container(&a).is_none()
    });
    assert_eq!(n.creates_since(&b, since), 0);
    assert_eq!(n.creates_since(&own, since), 0);

    // A node document that names a group module as its own: refused as a
    // conflict naming both; what runs stays.
    let doc = node_payload(
        &n,
        3,
        &[&g],
        vec![module(&own, "n1"), module(&b, "mine")],
        json!({}),
    );
    plane.publish(&n.id, &sign(&key, &doc));
    let p = wait_plane(&n, &agent, "the conflict", |p| {
        p["refusal"]["class"] == "conflict"
    });
    let detail = p["refusal"]["detail"].as_str().unwrap();
    assert!(
        detail.contains(&format!(
            "module {b} is in group {g} and in the node document"
        )),
        "{p:#}"
    );
    assert_eq!(p["held"]["revision"], 2, "{p:#}");
    assert_eq!(n.creates_since(&b, since), 0);

    // A host that sends no ETag: the group document is asked for with the
    // Last-Modified it came with, and answered 304.
    let mut plane = plane;
    plane.set_etags(false);
    publish_group(
        &plane,
        &key,
        &g,
        &group_payload(&g, 3, vec![module(&a, "g2"), module(&b, "b1")], json!({})),
    );
    wait_group(&agent, &g, "revision 3 from a host without ETags", |st| {
        st["revision"] == 3
    });
    let from = plane.requests().len();
    let at = plane.count("GET", &path, 304);
    plane.wait_count("GET", &path, 304, at + 2, 30);
    let conditional = plane.requests()[from..]
        .iter()
        .filter(|r| r.path.contains(&path) && r.status == 304)
        .all(|r| r.if_modified_since.is_some() && r.if_none_match.is_none());
    assert!(conditional, "{:#?}", &plane.requests()[from..]);

    // Leaving the group: its modules go, the node's own stay.
    plane.publish(
        &n.id,
        &sign(
            &key,
            &node_payload(&n, 4, &[], vec![module(&own, "n1")], json!({})),
        ),
    );
    n.wait_for(60, "the group's modules to go", || {
        n.container(&b).is_none()
    });
    assert!(n.container(&own).is_some());
    let p = wait_plane(&n, &agent, "no groups", |p| held_revision(p) == Some(4));
    assert!(p.get("groups").is_none(), "{p:#}");
}

fn held_revision(p: &J) -> Option<u64> {
    p["held"]["revision"].as_u64()
}

/// A salt that puts `node` between 40 % and 60 % of a rollout.
fn salt_near_the_middle(node: &str) -> String {
    let id = NodeId::try_from(node).unwrap();
    (0..1000)
        .map(|i| format!("s{i}"))
        .find(|s| (0.4..0.6).contains(&fraction(position(&id, s))))
        .unwrap()
}

#[test]
fn a_rollout_holds_a_device_until_its_turn_a_halt_stops_it_and_a_revert_brings_it_back() {
    require_engine();
    let key = SecretKey::generate().unwrap();
    let plane = Plane::start();
    let n = plane_node("fleet-roll", &plane, &key);
    let g = format!("g-{}", n.id);
    let w = n.module("w");
    let salt = salt_near_the_middle(&n.id);
    publish_group(
        &plane,
        &key,
        &g,
        &group_payload(&g, 1, vec![module(&w, "one")], json!({})),
    );
    plane.publish(
        &n.id,
        &sign(&key, &node_payload(&n, 1, &[&g], vec![], json!({}))),
    );
    let agent = Agent::start(&n);
    wait_v(&n, &w, "one");

    // Revision 2 rolls out over 30 s from now: this node's turn is 12 to
    // 18 s in. Until then it keeps revision 1 and says until when.
    let start = now();
    let previous = json!({"revision": 1, "modules": [module(&w, "one")]});
    let rollout = |halt: bool, revert: bool, start: u64, duration: &str| {
        json!({
            "rollout": {"start": format_rfc3339(start), "duration": duration, "salt": salt,
                        "halt": halt, "revert": revert},
            "previous": previous,
        })
    };
    let since = unix_now();
    publish_group(
        &plane,
        &key,
        &g,
        &group_payload(
            &g,
            2,
            vec![module(&w, "two")],
            rollout(false, false, start, "30s"),
        ),
    );
    let st = wait_group(&agent, &g, "revision 2", |st| st["revision"] == 2);
    let until = st["rollout"]["until"].as_u64().unwrap();
    assert_eq!(st["rollout"]["taken"], false, "{st:#}");
    assert_eq!(st["rollout"]["why"], "its turn", "{st:#}");
    assert_eq!(st["running"], 1, "{st:#}");
    let id = NodeId::try_from(n.id.as_str()).unwrap();
    let expected = start + (fraction(position(&id, &salt)) * 30.0).ceil() as u64;
    assert!(
        until.abs_diff(expected) <= 1,
        "until {until}, expected {expected}"
    );
    assert!(n.logs(&w).contains("V=one") && !n.logs(&w).contains("V=two"));
    let (_, status) = agent.get("/v1/status");
    assert!(status.contains("\"until\""), "{status}");
    // Its turn: taken, never before it (how soon after is the simulated
    // fleet's figure, not a check: a loaded machine makes any take late).
    wait_v(&n, &w, "two");
    let took_at = now();
    assert!(
        took_at + 1 >= until,
        "taken at {took_at}, its turn at {until}"
    );
    let st = group_state(&agent, &g);
    assert_eq!(st["rollout"]["taken"], true, "{st:#}");
    assert_eq!(st["running"], 2, "{st:#}");
    assert_eq!(n.creates_since(&w, since), 1);

    // A halt (revision 3, the same modules): a device that took them keeps
    // them.
    let since = unix_now();
    publish_group(
        &plane,
        &key,
        &g,
        &group_payload(
            &g,
            3,
            vec![module(&w, "two")],
            rollout(true, false, start, "30s"),
        ),
    );
    let st = wait_group(&agent, &g, "revision 3", |st| st["revision"] == 3);
    assert_eq!(st["rollout"]["why"], "taken before", "{st:#}");
    assert_eq!(st["running"], 3, "{st:#}");
    assert_eq!(n.creates_since(&w, since), 0);

    // A revert (revision 4): back to revision 1's modules, once.
    publish_group(
        &plane,
        &key,
        &g,
        &group_payload(
            &g,
            4,
            vec![module(&w, "two")],
            rollout(true, true, start, "30s"),
        ),
    );
    n.wait_for(60, "the revert", || {
        n.logs(&w).contains("V=one") && !n.logs(&w).contains("V=two")
    });
    let st = group_state(&agent, &g);
    assert_eq!(st["rollout"]["why"], "reverted", "{st:#}");
    assert_eq!(st["running"], 1, "{st:#}");
    assert_eq!(n.creates_since(&w, since), 1);

    // The same modules rolled out again (revision 5), starting in an hour:
    // the revert made the node forget it took them, so it waits for its
    // turn (it was "taken before" at once).
    let since = unix_now();
    publish_group(
        &plane,
        &key,
        &g,
        &group_payload(
            &g,
            5,
            vec![module(&w, "two")],
            rollout(false, false, now() + 3600, "30s"),
        ),
    );
    let st = wait_group(&agent, &g, "revision 5", |st| st["revision"] == 5);
    assert_eq!(st["rollout"]["why"], "not started", "{st:#}");
    assert_eq!(st["running"], 1, "{st:#}");
    assert_eq!(n.creates_since(&w, since), 0);

    // A new revision halted before this node's turn (the turn long past
    // by the clock): it keeps what it runs.
    let since = unix_now();
    publish_group(
        &plane,
        &key,
        &g,
        &group_payload(
            &g,
            6,
            vec![module(&w, "five")],
            rollout(true, false, start - 3600, "30s"),
        ),
    );
    let st = wait_group(&agent, &g, "revision 6", |st| st["revision"] == 6);
    assert_eq!(st["rollout"]["why"], "halted", "{st:#}");
    let at = plane.count("GET", &format!("groups/{g}/desired.json"), 304);
    plane.wait_count("GET", &format!("groups/{g}/desired.json"), 304, at + 3, 30);
    assert!(!n.logs(&w).contains("V=five"));
    assert_eq!(n.creates_since(&w, since), 0);
}

#[test]
fn a_group_document_that_fails_a_check_changes_nothing() {
    require_engine();
    let key = SecretKey::generate().unwrap();
    let stranger = SecretKey::generate().unwrap();
    let plane = Plane::start();
    let n = plane_node("fleet-refuse", &plane, &key);
    let g = format!("g-{}", n.id);
    let w = n.module("w");
    // Signed by a key the node does not trust: the node document that
    // lists the group is not adopted either, and the refusal names both.
    publish_group(
        &plane,
        &stranger,
        &g,
        &group_payload(&g, 1, vec![module(&w, "one")], json!({})),
    );
    plane.publish(
        &n.id,
        &sign(&key, &node_payload(&n, 1, &[&g], vec![], json!({}))),
    );
    let agent = Agent::start(&n);
    let p = wait_plane(&n, &agent, "the refusal", |p| {
        p["refusal"]["class"] == "unknown-key"
    });
    assert!(
        p["refusal"]["detail"]
            .as_str()
            .unwrap()
            .contains(&format!("group {g}")),
        "{p:#}"
    );
    assert!(p["held"].is_null(), "{p:#}");
    assert!(n.container(&w).is_none());

    // A good one: adopted.
    publish_group(
        &plane,
        &key,
        &g,
        &group_payload(&g, 2, vec![module(&w, "two")], json!({})),
    );
    wait_v(&n, &w, "two");
    let since = unix_now();
    // Each refused while held: what runs stays, the group says why.
    let node_typed = key
        .sign(
            PAYLOAD_TYPE,
            &serde_json::to_vec(&group_payload(&g, 3, vec![module(&w, "x")], json!({}))).unwrap(),
        )
        .to_json();
    let other_group = group_payload("other", 3, vec![module(&w, "x")], json!({}));
    for (what, bytes, says) in [
        (
            "an older revision",
            key.sign(
                GROUP_PAYLOAD_TYPE,
                &serde_json::to_vec(&group_payload(&g, 1, vec![module(&w, "x")], json!({})))
                    .unwrap(),
            )
            .to_json(),
            "older",
        ),
        (
            "the same revision, another payload",
            key.sign(
                GROUP_PAYLOAD_TYPE,
                &serde_json::to_vec(&group_payload(&g, 2, vec![module(&w, "x")], json!({})))
                    .unwrap(),
            )
            .to_json(),
            "held with another payload",
        ),
        ("a node document's payload type", node_typed, "payload"),
        (
            "another group's",
            key.sign(GROUP_PAYLOAD_TYPE, &serde_json::to_vec(&other_group).unwrap())
                .to_json(),
            "the document is for group",
        ),
        (
            "a rollout without the previous revision",
            key.sign(
                GROUP_PAYLOAD_TYPE,
                &serde_json::to_vec(&group_payload(
                    &g,
                    3,
                    vec![module(&w, "x")],
                    json!({"rollout": {"start": format_rfc3339(now()), "duration": "1h", "salt": "s"}}),
                ))
                .unwrap(),
            )
            .to_json(),
            "previous",
        ),
    ] {
        plane.publish_raw_path(&format!("groups/{g}/desired.json"), &bytes);
        let st = wait_group(&agent, &g, what, |st| {
            st["error"].as_str().is_some_and(|e| e.contains(says))
        });
        assert_eq!(st["revision"], 2, "{what}: {st:#}");
        assert_eq!(n.creates_since(&w, since), 0, "{what}");
    }
    assert!(n.logs(&w).contains("V=two") && !n.logs(&w).contains("V=x"));
}

fn write_raw(path: &std::path::Path, bytes: &[u8]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
}

fn write_json(path: &std::path::Path, v: &J) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, serde_json::to_vec_pretty(v).unwrap()).unwrap();
}

#[test]
fn publish_signs_only_what_changed_and_watch_halts_a_rollout_whose_devices_fail() {
    require_engine();
    let key = SecretKey::generate().unwrap();
    let plane = Plane::start();
    let n = plane_node("fleet-pub", &plane, &key);
    let g = format!("g-{}", n.id);
    let w = n.module("w");
    let work = tempfile::tempdir().unwrap();
    let key_file = work.path().join("plane.key");
    stead::host::keyfile::write(&key_file, &key).unwrap();
    let fleet = work.path().join("fleet");
    let site = plane.root();
    let (k, f, s) = (
        key_file.to_str().unwrap(),
        fleet.to_str().unwrap(),
        site.to_str().unwrap(),
    );
    write_json(
        &fleet.join(format!("groups/{g}.json")),
        &json!({"modules": [module(&w, "one")]}),
    );
    std::fs::write(
        fleet.join("nodes.csv"),
        format!("node,groups\n{},{g}\n", n.id),
    )
    .unwrap();
    write_json(
        &fleet.join("node-defaults.json"),
        &json!({"poll": {"interval": "1s", "jitter": "100ms"}}),
    );
    let publish = |more: &[&str]| {
        let mut args = vec!["publish", "--key", k, "--fleet", f, "--site", s];
        args.extend_from_slice(more);
        plane_cli(&args)
    };
    // A dry run writes nothing.
    let out = publish(&["--dry-run"]);
    assert!(out.contains("2 of 2 documents would be signed"), "{out}");
    assert!(!site.join(format!("nodes/{}/desired.json", n.id)).exists());
    let out = publish(&[]);
    assert!(
        out.contains("2 of 2 documents signed; 0 unchanged"),
        "{out}"
    );
    let agent = Agent::start(&n);
    wait_v(&n, &w, "one");
    // Nothing changed: nothing signed.
    let out = publish(&[]);
    assert!(
        out.contains("0 of 2 documents signed; 2 unchanged"),
        "{out}"
    );

    // A bad revision, rolled out over a second: the device takes it, and
    // its module crash-loops.
    let crashing = json!({
        "name": w, "image": IMAGE_1, "command": ["sh", "-c", "echo V=bad; exit 3"],
        "restart": "always",
    });
    write_json(
        &fleet.join(format!("groups/{g}.json")),
        &json!({"modules": [crashing], "rollout": {"duration": "1s"}}),
    );
    let out = publish(&[]);
    assert!(
        out.contains(&format!("signed groups/{g}/desired.json")) && out.contains("1 of 2"),
        "{out}"
    );
    n.wait_for(90, "a report of the crash loop", || {
        plane.report_json(&n.id).is_some_and(|r| {
            r["modules"][w.as_str()]["state"] == "crash-looping"
                && r["plane"]["groups"][0]["running"] == r["plane"]["groups"][0]["revision"]
        })
    });
    // The report and the status say the device's public key, the same.
    let report = plane.report_json(&n.id).unwrap();
    let key = report["device_key"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(key.starts_with("age1"), "{report:#}");
    let (_, body) = agent.get("/v1/status");
    let status: J = serde_json::from_str(&body).unwrap();
    assert_eq!(status["node"]["device_key"], key.as_str());
    assert!(stead::model::age::Recipient::parse(&key).is_ok());
    // The report is signed by the device's report key, which the status
    // says; enrolled by the CLI from it.
    let report_key = status["node"]["report_key"].as_str().unwrap().to_string();
    assert_eq!(report["report_key"], report_key.as_str(), "{report:#}");
    let out = plane_cli(&["enroll", "--fleet", f, "--reports", s]);
    assert!(out.contains(&format!("enrolled {}", n.id)), "{out}");
    let enrolled = std::fs::read_to_string(fleet.join("device-keys.csv")).unwrap();
    assert!(
        enrolled.contains(&format!("{},{key},{report_key}\n", n.id)),
        "{enrolled}"
    );
    // Without the enrolled keys nothing is checked, and nothing counted:
    // the report is listed.
    let (ok, out, err) = plane_cli_with(&["status", "--reports", s, "--json"], "");
    let st: J = serde_json::from_str(&out).unwrap();
    assert!(ok && err.contains("no --fleet"), "{err}");
    assert_eq!(
        (st["devices"].as_u64(), st["failing"].as_u64()),
        (Some(0), Some(0)),
        "{st:#}"
    );
    assert_eq!(st["unverified_by"], json!({"not-checked": 1}), "{st:#}");
    // With them, the roll-up names the failing device and the group's
    // progress.
    let status = plane_cli(&["status", "--reports", s, "--fleet", f, "--json"]);
    let st: J = serde_json::from_str(&status).unwrap();
    assert_eq!(st["devices"], 1, "{st:#}");
    assert_eq!(st["unverified"], 0, "{st:#}");
    assert_eq!(st["failing"], 1, "{st:#}");
    assert_eq!(st["failing_listed"][0]["node"], n.id.as_str(), "{st:#}");
    assert_eq!(st["groups"][&g]["on_newest"], 1, "{st:#}");
    let text = plane_cli(&["status", "--reports", s, "--fleet", f]);
    assert!(text.contains("failing 1"), "{text}");
    // The same reports through the host's listings (nginx's autoindex).
    let index = format!("{}/nodes/", plane.base());
    let over_http: J = serde_json::from_str(&plane_cli(&[
        "status",
        "--reports",
        &index,
        "--fleet",
        f,
        "--json",
    ]))
    .unwrap();
    assert_eq!(over_http["devices"], 1, "{over_http:#}");
    assert_eq!(over_http["unreadable"], 0, "{over_http:#}");
    assert_eq!(over_http["unverified"], 0, "{over_http:#}");
    assert_eq!(over_http["failing_listed"][0]["node"], n.id.as_str());
    assert_eq!(over_http["groups"][&g]["on_newest"], 1, "{over_http:#}");
    // A listing that is not there is an error, and nothing is rolled up.
    let out = std::process::Command::new(common::workspace_bin("stead-plane"))
        .args(["status", "--reports"])
        .arg(format!("{}/nowhere/", plane.base()))
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("404"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // nginx's autoindex in its json and xml formats is not a listing stead
    // reads: an error naming the URL, never an empty fleet.
    for format in ["json", "xml"] {
        let url = format!("{}/{format}/nodes/", plane.base());
        let (ok, out, err) = plane_cli_with(&["status", "--reports", &url], "");
        assert!(
            !ok && out.is_empty()
                && err.contains(&url)
                && err.contains("not a listing stead reads"),
            "{out}{err}"
        );
    }

    // Reports that do not count, each listed by class, none hiding the
    // device's own: its signed report copied to another node's path
    // (moved); one naming it, signed by another key, beside its own
    // (other-key); and 30 unsigned ones (as an agent before 0.7.0 sends)
    // of nodes on the served revision, converged, which would dilute its
    // failure below the watcher's 5 % if they counted.
    let signed = plane.report(&n.id).unwrap();
    let moved_to = format!("moved-{}", n.id);
    write_raw(&site.join(format!("nodes/{moved_to}/status.json")), &signed);
    let stranger = SecretKey::generate().unwrap();
    let mut other = report.clone();
    other["report_key"] = stranger.public().to_base64().into();
    write_raw(
        &site.join(format!("nodes/x/{}/status.json", n.id)),
        &stead::views::signed::sign(&serde_json::to_vec(&other).unwrap(), &stranger),
    );
    for i in 0..30u8 {
        let mut quiet = report.clone();
        let id = format!("old-{i}-{}", n.id);
        quiet["node"] = id.as_str().into();
        quiet["device_key"] = stead::model::age::Identity::from_bytes([100 + i; 32])
            .recipient()
            .encode()
            .into();
        quiet.as_object_mut().unwrap().remove("report_key");
        quiet["modules"][w.as_str()]["state"] = "converged".into();
        quiet["modules"][w.as_str()]["last_error"] = J::Null;
        write_json(&site.join(format!("nodes/{id}/status.json")), &quiet);
    }
    // A device that lies (enrolled on trust from its own signed report):
    // it claims the group at a revision never published, named and not
    // counted, and it does not hide the device on the served one.
    let liar_id = format!("liar-{}", n.id);
    let liar_key =
        SecretKey::from_seed(stead::model::seal::LocalKey::from_bytes([7; 32]).report_seed());
    let mut liar = report.clone();
    liar["node"] = liar_id.as_str().into();
    liar["device_key"] = stead::model::age::Identity::from_bytes([7; 32])
        .recipient()
        .encode()
        .into();
    liar["report_key"] = liar_key.public().to_base64().into();
    liar["plane"]["groups"][0]["revision"] = u64::MAX.into();
    liar["plane"]["groups"][0]["running"] = u64::MAX.into();
    write_raw(
        &site.join(format!("nodes/{liar_id}/status.json")),
        &stead::views::signed::sign(&serde_json::to_vec(&liar).unwrap(), &liar_key),
    );
    // Enrolment refuses the moved report by name and takes the liar (its
    // first key, on trust); the unsigned ones, their age keys alone.
    let (ok, out, err) = plane_cli_with(&["enroll", "--fleet", f, "--reports", s], "");
    assert!(
        !ok && out.contains(&format!("enrolled {liar_id}"))
            && err.contains(&format!(
                "it names node {} but is in the directory of node {moved_to}: refused",
                n.id
            ))
            && out.contains("30 report(s) unsigned"),
        "{out}{err}"
    );
    let st: J = serde_json::from_str(&plane_cli(&[
        "status",
        "--reports",
        s,
        "--fleet",
        f,
        "--site",
        s,
        "--json",
    ]))
    .unwrap();
    assert_eq!(
        st["unverified_by"],
        json!({"moved": 1, "other-key": 1, "unsigned": 30}),
        "{st:#}"
    );
    assert_eq!(st["devices"], 2, "{st:#}");
    // The 30 enrolled on trust from their unsigned reports: no report
    // counted, named.
    assert_eq!(st["missing"], 30, "{st:#}");
    assert_eq!(st["not_counted"], 1, "{st:#}");
    assert_eq!(st["not_counted_listed"][0]["node"], liar_id.as_str());
    assert_eq!(st["groups"][&g]["on_newest"], 1, "{st:#}");
    assert_eq!(st["groups"][&g]["failing_on_newest"], 1, "{st:#}");
    assert_eq!(st["groups"][&g]["newest"], st["groups"][&g]["served"]);
    // The watcher needs the enrolled keys.
    let empty = work.path().join("no-fleet");
    std::fs::create_dir_all(&empty).unwrap();
    let (ok, _, err) = plane_cli_with(
        &[
            "rollout",
            "watch",
            "--key",
            k,
            "--reports",
            s,
            "--fleet",
            empty.to_str().unwrap(),
            "--site",
            s,
        ],
        "",
    );
    assert!(!ok && err.contains("device-keys.csv is not there"), "{err}");

    // Below its minimum of reports the watcher waits; at it, it halts.
    let watch = |more: &[&str]| {
        let mut args = vec![
            "rollout",
            "watch",
            "--key",
            k,
            "--reports",
            s,
            "--fleet",
            f,
            "--site",
            s,
        ];
        args.extend_from_slice(more);
        plane_cli(&args)
    };
    let out = watch(&[]);
    assert!(out.contains("below the threshold"), "{out}");
    let out = watch(&["--min-reports", "1", "--dry-run"]);
    assert!(out.contains(&format!("would halt group {g}")), "{out}");
    assert!(
        out.contains(
            "0 report(s) unreadable, 32 unverified and not counted, 1 group claim(s) not counted"
        ),
        "{out}"
    );
    // The watcher reads the reports through the listings as well.
    let out = plane_cli(&[
        "rollout",
        "watch",
        "--key",
        k,
        "--reports",
        &index,
        "--fleet",
        f,
        "--site",
        s,
        "--min-reports",
        "1",
        "--dry-run",
    ]);
    assert!(out.contains(&format!("would halt group {g}")), "{out}");
    let out = watch(&["--min-reports", "1"]);
    assert!(
        out.contains(&format!("halted group {g}")) && out.contains("1 of 1 devices"),
        "{out}"
    );
    let halted = std::fs::read(site.join(format!("groups/{g}/desired.json"))).unwrap();
    let payload: J = serde_json::from_slice(
        &stead::plane::envelope::Envelope::parse(&halted)
            .unwrap()
            .payload,
    )
    .unwrap();
    assert_eq!(payload["rollout"]["halt"], true, "{payload:#}");
    assert!(
        payload["rollout"]["reason"]
            .as_str()
            .unwrap()
            .contains("failing")
    );
    // The device takes the halting revision (the same modules: nothing made
    // again) and says so.
    wait_group(&agent, &g, "the halt", |st| {
        st["revision"] == payload["revision"] && st["rollout"]["why"] == "taken before"
    });
    // Watched again: halted already. Published again: the halt stays.
    assert!(watch(&["--min-reports", "1"]).contains("halted"));
    let out = publish(&[]);
    assert!(out.contains("0 of 2 documents signed"), "{out}");
}

/// Runs `stead plane ARGS`: its exit code, stdout and stderr.
fn plane_run(args: &[&str]) -> (Option<i32>, String, String) {
    let o = std::process::Command::new(common::workspace_bin("stead-plane"))
        .args(args)
        .output()
        .unwrap();
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn publish_and_watch_sign_nothing_over_what_they_cannot_verify_nor_twice_at_once() {
    let key = SecretKey::generate().unwrap();
    let other = SecretKey::generate().unwrap();
    let plane = Plane::start();
    let site = plane.root();
    let work = tempfile::tempdir().unwrap();
    let key_file = work.path().join("plane.key");
    stead::host::keyfile::write(&key_file, &key).unwrap();
    let (k, s) = (key_file.to_str().unwrap(), site.to_str().unwrap());
    let g = "g-verify";
    let served = format!("groups/{g}/desired.json");
    // A fleet of one group and one node, its group's image `image`.
    let fleet = |name: &str, image: &str| {
        let dir = work.path().join(name);
        write_json(
            &dir.join(format!("groups/{g}.json")),
            &json!({"modules": [{"name": "w", "image": image}]}),
        );
        std::fs::write(
            dir.join("nodes.csv"),
            format!("node,groups\nn-verify,{g}\n"),
        )
        .unwrap();
        dir.to_str().unwrap().to_string()
    };
    let publish = |f: &str| plane_run(&["publish", "--key", k, "--fleet", f, "--site", s]);
    // No device enrolled yet: the watcher reads the site all the same.
    let keys = work.path().join("keys");
    std::fs::create_dir_all(&keys).unwrap();
    std::fs::write(keys.join("device-keys.csv"), "# none yet\n").unwrap();
    let watch = || {
        plane_run(&[
            "rollout",
            "watch",
            "--key",
            k,
            "--reports",
            s,
            "--fleet",
            keys.to_str().unwrap(),
            "--site",
            s,
            "--min-reports",
            "1",
        ])
    };
    let (code, out, err) = publish(&fleet("one", "x:1"));
    assert_eq!(code, Some(0), "{out}{err}");
    // What devices read: through nginx.
    let get = |rel: &str| {
        common::plane::http(&plane.addr(), "GET", &format!("/{rel}"), &[], b"")
            .unwrap()
            .body
    };
    let node_doc = get("nodes/n-verify/desired.json");

    // A planted group document with a rollout whose previous modules are
    // another's, at a huge revision: unsigned, by a key not trusted, or
    // a bare payload. Neither publish nor watch signs on top of it.
    let planted = group_payload(
        g,
        1 << 50,
        vec![json!({"name": "w", "image": "x:2"})],
        json!({"previous": {"revision": 1, "modules": [{"name": "w", "image": "evil:1"}]},
               "rollout": {"start": format_rfc3339(now()), "duration": "1h", "salt": "s"}}),
    );
    let bytes = serde_json::to_vec(&planted).unwrap();
    let mut unsigned = key.sign(GROUP_PAYLOAD_TYPE, &bytes);
    unsigned.signatures.clear();
    let two = fleet("two", "x:2");
    for (what, doc, says) in [
        (
            "signed by a key not trusted",
            other.sign(GROUP_PAYLOAD_TYPE, &bytes).to_json(),
            "signed only by keys",
        ),
        ("unsigned", unsigned.to_json(), "carries no signature"),
        ("a bare payload", bytes.clone(), "not a signed document"),
    ] {
        plane.publish_raw_path(&served, &doc);
        let (code, out, err) = publish(&two);
        assert_eq!(code, Some(1), "{what}: {out}{err}");
        assert!(
            err.contains(&format!("nothing published: {served}")) && err.contains(says),
            "{what}: {err}"
        );
        let (code, out, err) = watch();
        assert_eq!(code, Some(1), "{what}: {out}{err}");
        assert!(
            err.contains(&served) && err.contains(says) && !out.contains("halted group"),
            "{what}: {out}{err}"
        );
        assert_eq!(get(&served), doc, "{what}: nothing signed over it");
        assert_eq!(get("nodes/n-verify/desired.json"), node_doc, "{what}");
    }
    // A root.json that does not walk from the keys given: nothing signed.
    std::fs::remove_file(site.join(&served)).unwrap();
    std::fs::write(site.join("root.json"), b"{}").unwrap();
    let (code, _, err) = publish(&two);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("root.json says version none"), "{err}");
    assert!(!site.join(&served).exists());
    std::fs::remove_file(site.join("root.json")).unwrap();

    // A run holding the site's lock: the second signs nothing and says so.
    let (code, out, err) = publish(&two);
    assert_eq!(code, Some(0), "{out}{err}");
    let before = get(&served);
    let lock = stead::host::files::try_lock_dir(&site).unwrap().unwrap();
    let (code, _, err) = publish(&fleet("three", "x:3"));
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("holds the directory's lock"), "{err}");
    let (code, _, err) = watch();
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("holds the directory's lock"), "{err}");
    assert_eq!(get(&served), before);
    drop(lock);

    // Two publishes at once, of different payloads, again and again: never
    // one revision signed twice.
    let mut signed: std::collections::BTreeMap<u64, String> = Default::default();
    for round in 0..6 {
        let images = [format!("x:a{round}"), format!("x:b{round}")];
        let fleets: Vec<String> = images
            .iter()
            .enumerate()
            .map(|(i, im)| fleet(&format!("r{round}-{i}"), im))
            .collect();
        let runs: Vec<_> = fleets
            .iter()
            .map(|f| {
                std::process::Command::new(common::workspace_bin("stead-plane"))
                    .args(["publish", "--key", k, "--fleet", f, "--site", s])
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for (run, image) in runs.into_iter().zip(&images) {
            let o = run.wait_with_output().unwrap();
            let (out, err) = (
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr),
            );
            if !o.status.success() {
                assert!(err.contains("holds the directory's lock"), "{out}{err}");
                continue;
            }
            let revision: u64 = out
                .lines()
                .find_map(|l| l.strip_prefix(&format!("signed {served} revision ")))
                .and_then(|l| l.split(' ').next())
                .and_then(|r| r.parse().ok())
                .unwrap_or_else(|| panic!("{out}"));
            if let Some(first) = signed.insert(revision, image.clone()) {
                panic!("revision {revision} signed twice: {first} and {image}");
            }
        }
    }
    // What is served verifies, and is the last one signed.
    let env = stead::plane::envelope::Envelope::parse(&get(&served)).unwrap();
    stead::plane::envelope::verify_as(&env, &[key.public()], GROUP_PAYLOAD_TYPE, "group").unwrap();
    let p: J = serde_json::from_slice(&env.payload).unwrap();
    let (last, image) = signed.last_key_value().unwrap();
    assert_eq!(p["revision"], *last);
    assert_eq!(p["modules"][0]["image"], image.as_str());

    // A root moves document signing to a new key: the served documents are
    // verified against its document keys, walked from --trusted.
    use stead::plane::root::{PAYLOAD_TYPE as ROOT, Role, Root};
    let new = SecretKey::generate().unwrap();
    let new_file = work.path().join("new.key");
    stead::host::keyfile::write(&new_file, &new).unwrap();
    let root = Root {
        version: 1,
        expires: now() + 365 * DAY,
        root: Role {
            keys: vec![key.public()],
            threshold: 1,
        },
        documents: vec![new.public()],
        delegations: Vec::new(),
        allow_list: None,
    };
    let signed_root = key.sign(ROOT, &root.to_payload()).to_json();
    std::fs::create_dir_all(site.join("roots")).unwrap();
    std::fs::write(site.join("roots/1.json"), &signed_root).unwrap();
    std::fs::write(site.join("root.json"), &signed_root).unwrap();
    let n = new_file.to_str().unwrap();
    let trusted = key.public().to_base64();
    let four = fleet("four", "x:4");
    let with = |more: &[&str]| {
        let mut args = vec!["publish", "--fleet", &four, "--site", s];
        args.extend_from_slice(more);
        plane_run(&args)
    };
    // The chain does not start at the new key; the old key signs no document.
    let (code, _, err) = with(&["--key", n]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("the site's root does not check"), "{err}");
    let (code, _, err) = with(&["--key", k]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("no --key is a document key of root version 1"),
        "{err}"
    );
    // From the devices' key: what the old key signed is signed anew.
    let (code, out, err) = with(&["--key", n, "--trusted", &trusted]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(
        out.contains(&format!("{served}: signed by a key root version 1 dropped")),
        "{out}"
    );
    let env = stead::plane::envelope::Envelope::parse(&get(&served)).unwrap();
    stead::plane::envelope::verify_as(&env, &[new.public()], GROUP_PAYLOAD_TYPE, "group").unwrap();
    // A document planted under the root, by a key it does not list: refused.
    plane.publish_raw_path(&served, &other.sign(GROUP_PAYLOAD_TYPE, &bytes).to_json());
    let (code, _, err) = with(&["--key", n, "--trusted", &trusted]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains(&served) && err.contains("signed only by keys"),
        "{err}"
    );
}

/// A group with a `when` is for the devices whose facts it names: on the
/// real engine, a device takes the group for its engine, architecture and
/// label and not the others (two of which give the same module, which
/// would conflict were both for it), says why of each, reports its facts;
/// a restart recreates nothing; a revision whose `when` no longer names
/// the device takes its module away, and says why.
#[test]
fn a_group_is_only_for_the_devices_its_when_names() {
    require_engine();
    let key = SecretKey::generate().unwrap();
    let plane = Plane::start();
    let n = Node::new("fleet-when")
        .with_config("labels = { board = \"rev-b\", site = \"shop-12\" }")
        .with_config(&format!(
            "[plane]\nurl = {:?}\ntrusted_keys = [{:?}]\npoll_interval = \"1s\"",
            plane.base(),
            key.public().to_base64()
        ));
    let (engine, other_engine) = if on_podman() {
        ("podman", "docker")
    } else {
        ("docker", "podman")
    };
    let arch = std::env::consts::ARCH;
    let other_arch = if arch == "aarch64" { "amd64" } else { "arm64" };
    let (app, tool, big) = (n.module("app"), n.module("tool"), n.module("big"));
    let g = |name: &str| format!("{name}-{}", n.id);
    let (mine, other, engine_g, big_g) = (g("mine"), g("other-arch"), g("other-engine"), g("big"));
    let when = |revision: u64, name: &str, modules: Vec<J>, when: J| {
        publish_group(
            &plane,
            &key,
            name,
            &group_payload(name, revision, modules, json!({ "when": when })),
        );
    };
    when(
        1,
        &mine,
        vec![module(&app, "mine")],
        json!({"arch": arch, "engine": engine, "engine_version": ">=1", "labels": {"board": "rev-b"}}),
    );
    when(
        1,
        &other,
        vec![module(&app, "other")],
        json!({"arch": other_arch}),
    );
    when(
        1,
        &engine_g,
        vec![module(&tool, "t1")],
        json!({"engine": other_engine}),
    );
    when(
        1,
        &big_g,
        vec![module(&big, "b1")],
        json!({"memory_min": "1000TiB"}),
    );
    plane.publish(
        &n.id,
        &sign(
            &key,
            &node_payload(
                &n,
                1,
                &[&mine, &other, &engine_g, &big_g],
                vec![],
                json!({}),
            ),
        ),
    );
    let agent = Agent::start(&n);
    wait_v(&n, &app, "mine");
    let p = wait_plane(&n, &agent, "each group judged", |p| {
        p["groups"]
            .as_array()
            .is_some_and(|gs| gs.len() == 4 && gs.iter().all(|g| g["revision"] == 1))
    });
    let not_for = |p: &J, group: &str| group_in(p, group)["not_for"].clone();
    assert_eq!(not_for(&p, &mine), J::Null, "{p:#}");
    assert_eq!(group_in(&p, &mine)["running"], 1, "{p:#}");
    assert_eq!(
        not_for(&p, &other),
        format!(
            "its arch is {arch}; the group is for {}",
            stead::model::facts::arch_name(other_arch).unwrap()
        ),
        "{p:#}"
    );
    assert_eq!(
        not_for(&p, &engine_g),
        format!("its engine is {engine}; the group is for {other_engine}"),
        "{p:#}"
    );
    assert!(
        not_for(&p, &big_g)
            .as_str()
            .is_some_and(|w| w.contains("of memory; the group needs 1000.0")
                || w.contains("of memory; the group needs 1024000.0")),
        "{p:#}"
    );
    assert!(group_in(&p, &other)["running"].is_null(), "{p:#}");
    // Nothing of the groups not for it runs.
    assert!(n.container(&tool).is_none());
    assert!(n.container(&big).is_none());
    // Its facts, in its status and in its report.
    let (_, body) = agent.get("/v1/status");
    let status: J = serde_json::from_str(&body).unwrap();
    let facts = &status["node"]["facts"];
    assert_eq!(facts["arch"], arch, "{facts:#}");
    assert_eq!(facts["os"], "linux", "{facts:#}");
    assert_eq!(facts["engine"], engine, "{facts:#}");
    assert!(
        facts["engine_version"]
            .as_str()
            .is_some_and(|v| !v.is_empty()),
        "{facts:#}"
    );
    assert_eq!(
        facts["labels"],
        json!({"board": "rev-b", "site": "shop-12"}),
        "{facts:#}"
    );
    assert!(facts["memory"].as_u64().is_some_and(|m| m > 0), "{facts:#}");
    n.wait_for(30, "a report with the device's facts", || {
        plane
            .report(&n.id)
            .map(|b| common::plane::open_report(&n.id, &b))
            .is_some_and(|r| r["facts"]["engine"] == engine && r["facts"]["arch"] == arch)
    });

    // A restart: the facts kept judge as before; nothing is recreated.
    let since = unix_now();
    drop(agent);
    let agent = Agent::start(&n);
    wait_plane(&n, &agent, "the groups again after the restart", |p| {
        p["groups"].as_array().is_some_and(|gs| gs.len() == 4)
            && not_for(p, &mine).is_null()
            && !not_for(p, &other).is_null()
    });
    // Several polls and passes.
    let path = format!("nodes/{}/desired.json", n.id);
    let at = plane.count("GET", &path, 304);
    plane.wait_count("GET", &path, 304, at + 3, 30);
    assert_eq!(
        n.creates_since(&app, since),
        0,
        "{:?}",
        n.events_since(&app, since)
    );
    assert!(n.container(&app).is_some());

    // A revision for another board: the device leaves the group, its
    // module goes, and it says why.
    when(
        2,
        &mine,
        vec![module(&app, "mine")],
        json!({"labels": {"board": "rev-a"}}),
    );
    n.wait_for(60, "the module of a group no longer for it to go", || {
        n.container(&app).is_none()
    });
    let p = wait_plane(&n, &agent, "revision 2 not for it", |p| {
        group_in(p, &mine)["revision"] == 2
    });
    assert_eq!(
        not_for(&p, &mine),
        "its label board is rev-b; the group is for board=rev-a",
        "{p:#}"
    );
    let out = n
        .stead()
        .args(["status", "--config"])
        .arg(n.config())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        text.contains(
            "not for this device: its label board is rev-b; the group is for board=rev-a"
        ),
        "{text}"
    );
    assert!(
        text.contains(&format!("facts {arch} linux, {engine} ")),
        "{text}"
    );
}

fn group_in(p: &J, group: &str) -> J {
    p["groups"]
        .as_array()
        .and_then(|gs| gs.iter().find(|g| g["group"] == group).cloned())
        .unwrap_or(J::Null)
}
