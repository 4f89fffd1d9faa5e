//! Desired state from a central plane, against the real parts: Debian's
//! nginx on loopback serving signed documents (ETag/304) and taking the
//! node's reports (DAV PUT), the real engine, the real store. Every case of
//! the judge is met as a device meets it: a stale CDN copy, an
//! equivocation, a clock in 1970 or in 2100, a plane away for the whole
//! test, a kill between fetch and adoption, a key rotation, a 429.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::agent::Agent;
use common::desired::*;
use common::plane::{Plane, faketime_env};
use common::*;
use serde_json::{Value as J, json};
use stead::model::time::format_rfc3339;
use stead::plane::envelope::SecretKey;

/// A node polling `plane` every second, trusting `keys`.
fn node(tag: &str, plane: &Plane, keys: &[&SecretKey]) -> Node {
    node_with(tag, plane, keys, "")
}

/// [`node`], its modules converged once up for a second (not the default
/// 30 s): for the tests that wait for converged.
fn settled_node(tag: &str, plane: &Plane, keys: &[&SecretKey]) -> Node {
    node_with(tag, plane, keys, "settle_window = \"1s\"\n")
}

/// [`node`] with top-level config `lines` (before its `[plane]` table).
fn node_with(tag: &str, plane: &Plane, keys: &[&SecretKey], lines: &str) -> Node {
    let keys: Vec<String> = keys
        .iter()
        .map(|k| format!("{:?}", k.public().to_base64()))
        .collect();
    Node::new(tag).with_config(&format!(
        "{lines}[plane]\nurl = {:?}\ntrusted_keys = [{}]\npoll_interval = \"1s\"",
        plane.base(),
        keys.join(", ")
    ))
}

fn held_revision(p: &J) -> Option<u64> {
    p["held"]["revision"].as_u64()
}

#[test]
fn a_new_revision_is_adopted_with_one_recreate_and_then_the_plane_answers_304() {
    let key = SecretKey::generate().unwrap();
    let plane = Plane::start();
    let n = node("plane-rev", &plane, &[&key]);
    let m = n.module("web");
    plane.publish(&n.id, &sign(&key, &payload(&n, 1, vec![module(&m, "one")])));
    let agent = Agent::start(&n);
    wait_v(&n, &m, "one");
    let p = wait_plane(&n, &agent, "revision 1", |p| held_revision(p) == Some(1));
    assert!(p["refusal"].is_null(), "{p:#}");
    // The plane answers 304 to every poll while nothing changes.
    let first = plane.count("GET", "desired.json", 304);
    plane.wait_count("GET", "desired.json", 304, first + 3, 30);
    assert_eq!(
        plane.count("GET", "desired.json", 200),
        1,
        "{:#?}",
        plane.requests()
    );

    let since = unix_now();
    let before = n.container_id(&m);
    plane.publish(&n.id, &sign(&key, &payload(&n, 2, vec![module(&m, "two")])));
    wait_v(&n, &m, "two");
    wait_plane(&n, &agent, "revision 2", |p| held_revision(p) == Some(2));
    // Several more polls: the change was acted on exactly once.
    let at = plane.count("GET", "desired.json", 304);
    plane.wait_count("GET", "desired.json", 304, at + 3, 30);
    assert_ne!(n.container_id(&m), before);
    assert_eq!(
        n.creates_since(&m, since),
        1,
        "{:?}",
        n.events_since(&m, since)
    );

    // The same bytes published again: a new ETag, the same revision. One
    // 200, nothing recreated, and 304s again with the new ETag.
    let since = unix_now();
    let gets = plane.count("GET", "desired.json", 200);
    let same = std::fs::read(plane.root().join(format!("nodes/{}/desired.json", n.id))).unwrap();
    plane.publish(&n.id, &same);
    plane.wait_count("GET", "desired.json", 200, gets + 1, 30);
    let at = plane.count("GET", "desired.json", 304);
    plane.wait_count("GET", "desired.json", 304, at + 2, 30);
    assert_eq!(plane.count("GET", "desired.json", 200), gets + 1);
    assert_eq!(n.creates_since(&m, since), 0);
    let p = plane_state(&agent);
    assert_eq!(held_revision(&p), Some(2));
    assert!(p["refusal"].is_null(), "{p:#}");

    let (_, metrics) = agent.get("/metrics");
    assert!(metrics.contains("stead_plane_revision 2\n"), "{metrics}");
    assert!(
        metrics.contains("stead_plane_polls_total{outcome=\"adopted\"} 2\n"),
        "{metrics}"
    );
    assert!(
        metrics.contains("stead_plane_polls_total{outcome=\"same\"} 1\n"),
        "{metrics}"
    );
    assert!(
        metrics.contains("stead_plane_polls_total{outcome=\"not-modified\"}"),
        "{metrics}"
    );

    // A module the document no longer names is removed.
    plane.publish(&n.id, &sign(&key, &payload(&n, 3, vec![])));
    n.wait_for(60, "the module to be removed", || n.container(&m).is_none());
}

/// Publishes `body`, waits until the agent says it refused it with
/// `class`, and checks nothing changed.
fn refused(plane: &Plane, n: &Node, agent: &Agent, m: &str, body: &[u8], class: &str) {
    let id = n.container_id(m);
    let before = plane_state(agent)["refusal"]["at"].as_u64().unwrap_or(0);
    // A refusal of the same class a moment ago would read as this one.
    std::thread::sleep(Duration::from_millis(1100));
    plane.publish(&n.id, body);
    let p = wait_plane(n, agent, &format!("a refusal: {class}"), |p| {
        p["refusal"]["class"] == class && p["refusal"]["at"].as_u64().unwrap_or(0) > before
    });
    assert_eq!(held_revision(&p), Some(2), "{class}: {p:#}");
    assert_eq!(n.container_id(m), id, "{class}: the container was touched");
    assert!(n.logs(m).contains("V=two"), "{class}");
}

#[test]
fn documents_that_fail_a_check_change_nothing_and_are_reported_by_class() {
    let key = SecretKey::generate().unwrap();
    let stranger = SecretKey::generate().unwrap();
    let plane = Plane::start();
    let n = settled_node("plane-refuse", &plane, &[&key]);
    let m = n.module("web");
    let r1 = sign(&key, &payload(&n, 1, vec![module(&m, "one")]));
    plane.publish(&n.id, &r1);
    let agent = Agent::start(&n);
    wait_plane(&n, &agent, "revision 1", |p| held_revision(p) == Some(1));
    let r2_payload = payload(&n, 2, vec![module(&m, "two")]);
    plane.publish(&n.id, &sign(&key, &r2_payload));
    wait_v(&n, &m, "two");
    wait_plane(&n, &agent, "revision 2", |p| held_revision(p) == Some(2));
    let since = unix_now();

    let mut tampered = sign(&key, &payload(&n, 3, vec![module(&m, "three")]));
    let at = tampered
        .windows(10)
        .position(|w| w == b"\"payload\":")
        .unwrap()
        + 20;
    tampered[at] = if tampered[at] == b'A' { b'B' } else { b'A' };
    refused(&plane, &n, &agent, &m, &tampered, "bad-signature");
    refused(
        &plane,
        &n,
        &agent,
        &m,
        &sign(&stranger, &payload(&n, 3, vec![module(&m, "three")])),
        "unknown-key",
    );
    let mut other = payload(&n, 3, vec![module(&m, "three")]);
    other["node"] = json!("some-other-node");
    refused(&plane, &n, &agent, &m, &sign(&key, &other), "other-node");
    // A stale CDN copy: revision 1, as it was served before.
    refused(&plane, &n, &agent, &m, &r1, "rollback");
    let mut equivocal = r2_payload.clone();
    equivocal["modules"] = json!([module(&m, "not-two")]);
    refused(
        &plane,
        &n,
        &agent,
        &m,
        &sign(&key, &equivocal),
        "equivocation",
    );
    let mut expired = payload(&n, 3, vec![module(&m, "three")]);
    expired["issued_at"] = json!(format_rfc3339(now() - 10 * DAY));
    expired["expires"] = json!(format_rfc3339(now() - DAY));
    refused(
        &plane,
        &n,
        &agent,
        &m,
        &sign(&key, &expired),
        "stale-or-clock",
    );
    let whole = sign(&key, &payload(&n, 3, vec![module(&m, "three")]));
    refused(
        &plane,
        &n,
        &agent,
        &m,
        &whole[..whole.len() / 2],
        "malformed",
    );
    let mut huge = whole.clone();
    huge.truncate(whole.len() - 2);
    huge.extend(std::iter::repeat_n(b' ', 1 << 20));
    huge.extend_from_slice(b"}\n");
    refused(&plane, &n, &agent, &m, &huge, "too-large");
    let mut invalid = payload(&n, 3, vec![module(&m, "three")]);
    invalid["modules"][0]["restart"] = json!("sometimes");
    refused(&plane, &n, &agent, &m, &sign(&key, &invalid), "invalid");
    assert_eq!(n.creates_since(&m, since), 0);

    // The refusal reaches the plane in a report.
    // The refusal reaches the plane in a report, with the module as it
    // runs (converged once up for the settle window).
    n.wait_for(90, "a report naming the refusal", || {
        plane.report_json(&n.id).is_some_and(|r| {
            r["plane"]["refusal"]["class"] == "invalid" && r["modules"][&m]["state"] == "converged"
        })
    });
    let r = plane.report_json(&n.id).unwrap();
    assert_eq!(r["plane"]["held"]["revision"], 2, "{r:#}");

    // And a good revision 3 is still taken after all that.
    plane.publish(&n.id, &whole);
    wait_v(&n, &m, "three");
}

#[test]
fn a_plane_away_for_the_whole_test_harms_nothing_even_across_a_restart() {
    let key = SecretKey::generate().unwrap();
    let mut plane = Plane::start();
    let n = node("plane-away", &plane, &[&key]);
    let m = n.module("web");
    plane.publish(&n.id, &sign(&key, &payload(&n, 1, vec![module(&m, "one")])));
    let mut agent = Agent::start(&n);
    wait_v(&n, &m, "one");
    wait_plane(&n, &agent, "revision 1", |p| held_revision(p) == Some(1));
    plane.stop();
    let since = unix_now();
    let id = n.container_id(&m);
    wait_plane(&n, &agent, "the plane's absence", |p| {
        p["error"].is_string()
    });
    // The agent is killed and started again while the plane is away: it
    // runs what it holds.
    agent.child.kill().unwrap();
    agent.child.wait().unwrap();
    let agent = Agent::start(&n);
    let p = wait_plane(&n, &agent, "the plane's absence after a restart", |p| {
        p["error"].is_string()
    });
    assert_eq!(held_revision(&p), Some(1), "{p:#}");
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(n.container_id(&m), id);
    assert_eq!(n.creates_since(&m, since), 0);
    // A container lost while the plane is away comes back from the store.
    docker_ok(&["rm", "-f", &id]);
    wait_v(&n, &m, "one");
    let (_, status) = agent.get("/v1/status");
    assert!(status.contains("\"configured\": true"), "{status}");
    // The plane comes back: 304, no recreate.
    let since = unix_now();
    plane.restart();
    wait_plane(&n, &agent, "the plane back", |p| {
        p["error"].is_null() && p["last_contact"].is_u64()
    });
    plane.wait_count("GET", "desired.json", 304, 1, 30);
    assert_eq!(n.creates_since(&m, since), 0);
}

#[test]
fn a_kill_between_fetch_and_adoption_adopts_once_after_the_restart() {
    let key = SecretKey::generate().unwrap();
    let plane = Plane::start();
    let n = node("plane-kill", &plane, &[&key]);
    let m = n.module("web");
    plane.publish(&n.id, &sign(&key, &payload(&n, 1, vec![module(&m, "one")])));
    let agent = Agent::start(&n);
    wait_v(&n, &m, "one");
    wait_plane(&n, &agent, "revision 1", |p| held_revision(p) == Some(1));
    drop(agent);
    let since = unix_now();
    plane.publish(&n.id, &sign(&key, &payload(&n, 2, vec![module(&m, "two")])));
    for point in ["plane:after-verify", "plane:before-commit"] {
        let mut child = Agent::spawn_with(&n, &[], &[("STEAD_CRASH_AT".into(), point.into())]);
        let status = child.wait().unwrap();
        assert!(!status.success(), "{point}: the agent did not stop there");
        assert!(Agent::log(&n).contains(&format!("STEAD_CRASH_AT={point}")));
        // Nothing of revision 2 was adopted.
        assert!(n.logs(&m).contains("V=one") && !n.logs(&m).contains("V=two"));
    }
    let agent = Agent::start(&n);
    wait_v(&n, &m, "two");
    wait_plane(&n, &agent, "revision 2", |p| held_revision(p) == Some(2));
    let at = plane.count("GET", "desired.json", 304);
    plane.wait_count("GET", "desired.json", 304, at + 3, 30);
    assert_eq!(
        n.creates_since(&m, since),
        1,
        "{:?}",
        n.events_since(&m, since)
    );
}

#[test]
fn keys_rotate_with_an_overlap_and_the_old_key_is_then_refused() {
    let old = SecretKey::generate().unwrap();
    let new = SecretKey::generate().unwrap();
    let plane = Plane::start();
    let mut n = node("plane-keys", &plane, &[&old, &new]);
    let m = n.module("web");
    plane.publish(&n.id, &sign(&old, &payload(&n, 1, vec![module(&m, "one")])));
    let agent = Agent::start(&n);
    wait_v(&n, &m, "one");
    plane.publish(&n.id, &sign(&new, &payload(&n, 2, vec![module(&m, "two")])));
    wait_v(&n, &m, "two");
    let p = wait_plane(&n, &agent, "revision 2", |p| held_revision(p) == Some(2));
    assert_eq!(p["held"]["key_id"], new.public().id().to_string());
    drop(agent);
    // The old key is removed from the device.
    n.extra = String::new();
    let n = {
        n.write_config();
        n.with_config(&format!(
            "[plane]\nurl = {:?}\ntrusted_keys = [{:?}]\npoll_interval = \"1s\"",
            plane.base(),
            new.public().to_base64()
        ))
    };
    let agent = Agent::start(&n);
    plane.publish(
        &n.id,
        &sign(&old, &payload(&n, 3, vec![module(&m, "three")])),
    );
    wait_plane(&n, &agent, "the old key refused", |p| {
        p["refusal"]["class"] == "unknown-key"
    });
    assert!(n.logs(&m).contains("V=two") && !n.logs(&m).contains("V=three"));
    plane.publish(
        &n.id,
        &sign(&new, &payload(&n, 3, vec![module(&m, "three")])),
    );
    wait_v(&n, &m, "three");
}

#[test]
fn a_429_with_retry_after_is_honoured() {
    let key = SecretKey::generate().unwrap();
    let mut plane = Plane::start();
    let n = node("plane-429", &plane, &[&key]);
    let m = n.module("web");
    plane.publish(&n.id, &sign(&key, &payload(&n, 1, vec![module(&m, "one")])));
    let agent = Agent::start(&n);
    wait_plane(&n, &agent, "revision 1", |p| held_revision(p) == Some(1));
    plane.set_fault(Some((429, Some(4))));
    plane.wait_count("GET", "desired.json", 429, 2, 30);
    let p = wait_plane(&n, &agent, "the 429 seen", |p| {
        p["error"].as_str().is_some_and(|e| e.contains("429"))
    });
    assert_eq!(held_revision(&p), Some(1));
    // The first poll after the fault is the one after the last 429: a 304
    // more than the host gave before it (every answer during the fault is
    // a 429), so the last 429 has its next request in the log.
    let before = plane.count("GET", "desired.json", 304);
    plane.set_fault(None);
    plane.wait_count("GET", "desired.json", 304, before + 1, 30);
    // Polls are a second apart, but after each 429 the next waited for
    // what Retry-After asked (4 s; nginx logs whole milliseconds).
    let gets: Vec<_> = plane
        .requests()
        .into_iter()
        .filter(|r| r.method == "GET" && r.path.contains("desired.json"))
        .collect();
    let mut after_429 = 0;
    for w in gets.windows(2) {
        if w[0].status == 429 {
            after_429 += 1;
            assert!(w[1].at - w[0].at >= 3.9, "{:#?}", gets);
        }
    }
    assert!(after_429 >= 2, "{gets:#?}");
}

#[test]
fn a_nudge_fetches_at_once() {
    let key = SecretKey::generate().unwrap();
    let plane = Plane::start();
    let n = Node::new("plane-nudge").with_config(&format!(
        "[plane]\nurl = {:?}\ntrusted_keys = [{:?}]\npoll_interval = \"1h\"",
        plane.base(),
        key.public().to_base64()
    ));
    let m = n.module("web");
    let mut p1 = payload(&n, 1, vec![module(&m, "one")]);
    p1["poll"] = json!({"interval": "1h", "jitter": "1s"});
    plane.publish(&n.id, &sign(&key, &p1));
    let agent = Agent::start(&n);
    wait_v(&n, &m, "one");
    wait_plane(&n, &agent, "revision 1", |p| held_revision(p) == Some(1));
    let mut p2 = payload(&n, 2, vec![module(&m, "two")]);
    p2["poll"] = json!({"interval": "1h", "jitter": "1s"});
    plane.publish(&n.id, &sign(&key, &p2));
    let out = n
        .stead()
        .args(["sync", "--config"])
        .arg(n.config())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(stdout.trim(), "adopted revision 2");
    wait_v(&n, &m, "two");
    // Again: nothing new.
    let out = n
        .stead()
        .args(["sync", "--config"])
        .arg(n.config())
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "not modified: the document held is the plane's"
    );
    // A nudge needs the token.
    let (code, _) = common::agent::http_send(&agent.addr, "POST", "/v1/plane/sync", None, "");
    assert_eq!(code, 401);
    assert_eq!(
        plane.count("GET", "desired.json", 200),
        2,
        "{:#?}",
        plane.requests()
    );
}

#[test]
fn a_clock_far_in_the_past_or_the_future_stops_nothing_and_is_reported() {
    let key = SecretKey::generate().unwrap();
    let plane = Plane::start();
    let n = node("plane-clock", &plane, &[&key]);
    let m = n.module("web");
    plane.publish(&n.id, &sign(&key, &payload(&n, 1, vec![module(&m, "one")])));
    // A device that boots with its clock in 1970: the document is taken
    // (now is at least the binary's build), and the clock is said behind.
    let agent = Agent::start_env(&n, &faketime_env("1970-01-02 00:00:00"));
    wait_v(&n, &m, "one");
    let p = wait_plane(&n, &agent, "revision 1 under a 1970 clock", |p| {
        held_revision(p) == Some(1) && p["clock"] == "behind"
    });
    assert!(p["refusal"].is_null(), "{p:#}");
    n.wait_for(60, "a report saying the clock is behind", || {
        plane
            .report_json(&n.id)
            .is_some_and(|r| r["clock"]["status"] == "behind")
    });
    // It cannot tell a document ahead from its clock: it takes documents
    // issued 10 and 20 days ahead, but its "now" does not move with them
    // (0.5.0 moved it a day on each): an honest document that expires in
    // two days is still taken.
    for (r, ahead) in [(2, 10), (3, 20)] {
        let mut p = payload(&n, r, vec![module(&m, "one")]);
        p["issued_at"] = json!(format_rfc3339(now() + ahead * DAY));
        p["expires"] = json!(format_rfc3339(now() + 40 * DAY));
        plane.publish(&n.id, &sign(&key, &p));
        wait_plane(&n, &agent, &format!("revision {r}"), |p| {
            held_revision(p) == Some(r)
        });
    }
    let mut honest = payload(&n, 4, vec![module(&m, "one")]);
    honest["expires"] = json!(format_rfc3339(now() + 2 * DAY));
    plane.publish(&n.id, &sign(&key, &honest));
    let p = wait_plane(&n, &agent, "revision 4 under a 1970 clock", |p| {
        held_revision(p) == Some(4)
    });
    assert!(p["refusal"].is_null(), "{p:#}");
    drop(agent);
    // The same device with its clock in 2100: every document reads
    // expired. Nothing is adopted, nothing stops, and the report says why.
    let since = unix_now();
    let id = n.container_id(&m);
    plane.publish(&n.id, &sign(&key, &payload(&n, 5, vec![module(&m, "two")])));
    let agent = Agent::start_env(&n, &faketime_env("2100-01-01 00:00:00"));
    let p = wait_plane(&n, &agent, "stale-or-clock under a 2100 clock", |p| {
        p["refusal"]["class"] == "stale-or-clock"
    });
    assert_eq!(held_revision(&p), Some(4));
    assert_eq!(p["clock"], "ahead", "{p:#}");
    n.wait_for(60, "a report saying the clock is ahead", || {
        plane.report_json(&n.id).is_some_and(|r| {
            r["clock"]["status"] == "ahead" && r["plane"]["refusal"]["class"] == "stale-or-clock"
        })
    });
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(n.container_id(&m), id);
    assert!(n.logs(&m).contains("V=one") && !n.logs(&m).contains("V=two"));
    assert_eq!(n.creates_since(&m, since), 0);
}

#[test]
fn reports_kept_while_the_endpoint_is_down_arrive_later_and_stay_spaced() {
    let key = SecretKey::generate().unwrap();
    let mut plane = Plane::start();
    let n = settled_node("plane-report", &plane, &[&key]);
    let m = n.module("web");
    // A host that answers the PUT with 200 and stores nothing (caddy's
    // file server serves the file there): read back, not delivered.
    plane.set_report_fault(Some((200, None)));
    plane.publish(&n.id, &sign(&key, &payload(&n, 1, vec![module(&m, "one")])));
    let agent = Agent::start(&n);
    wait_v(&n, &m, "one");
    let p = wait_plane(&n, &agent, "a report answered 200 but not stored", |p| {
        p["reports"]["pending"] == true
    });
    let error = p["reports"]["error"].as_str().unwrap();
    assert!(error.contains("HTTP 200, but a GET of it"), "{p:#}");
    assert!(error.contains("did not store it"), "{p:#}");
    plane.set_report_fault(Some((503, None)));
    // Churn while reports fail: new revisions every two seconds.
    for r in 2..=6 {
        plane.publish(
            &n.id,
            &sign(&key, &payload(&n, r, vec![module(&m, &format!("v{r}"))])),
        );
        std::thread::sleep(Duration::from_secs(2));
    }
    wait_v(&n, &m, "v6");
    plane.wait_count("PUT", "status.json", 503, 1, 30);
    let p = wait_plane(&n, &agent, "a report pending", |p| {
        p["reports"]["pending"] == true
            && p["reports"]["error"]
                .as_str()
                .is_some_and(|e| e.contains("503"))
    });
    assert!(
        p["reports"]["error"].as_str().unwrap().contains("503"),
        "{p:#}"
    );
    assert!(plane.report(&n.id).is_none());
    plane.set_report_fault(None);
    n.wait_for(120, "the kept report to arrive", || {
        plane.report_json(&n.id).is_some_and(|r| {
            r["plane"]["held"]["revision"] == 6 && r["modules"][&m]["state"] == "converged"
        })
    });
    let r = plane.report_json(&n.id).unwrap();
    assert!(
        r["undelivered"].as_u64().unwrap() >= 1 || r["seq"].as_u64().unwrap() > 1,
        "{r:#}"
    );
    assert_eq!(r["node"], n.id.as_str());
    assert!(r["modules"][&m]["desired_digest"].is_string(), "{r:#}");
    assert!(r["modules"][&m]["image_id"].is_string(), "{r:#}");
    // Every attempt, failed or not, at least 10 s after the one before.
    let puts: Vec<_> = plane
        .requests()
        .into_iter()
        .filter(|r| r.method == "PUT")
        .collect();
    for w in puts.windows(2) {
        assert!(w[1].at - w[0].at >= 9.9, "{puts:#?}");
    }
    // Sequence numbers grow, across a restart too.
    let seq = r["seq"].as_u64().unwrap();
    drop(agent);
    let _agent = Agent::start(&n);
    n.wait_for(60, "a report after the restart", || {
        plane
            .report_json(&n.id)
            .is_some_and(|r| r["seq"].as_u64().unwrap() > seq)
    });
}

#[test]
fn one_owner_per_module_and_the_plane_takes_a_module_once_it_is_let_go() {
    let key = SecretKey::generate().unwrap();
    let plane = Plane::start();
    let n = node("plane-owner", &plane, &[&key]);
    let (api_m, file_m, plane_m) = (n.module("api"), n.module("file"), n.module("plane"));
    let agent = Agent::start(&n);
    let (code, body) = agent.send(
        &n,
        "PUT",
        &format!("/v1/intentions/{api_m}"),
        &module(&api_m, "local").to_string(),
    );
    assert_eq!(code, 201, "{body}");
    wait_v(&n, &api_m, "local");
    plane.publish(
        &n.id,
        &sign(
            &key,
            &payload(&n, 1, vec![module(&api_m, "plane"), module(&plane_m, "p")]),
        ),
    );
    let p = wait_plane(&n, &agent, "revision 1 with a conflict", |p| {
        held_revision(p) == Some(1) && p["conflicts"][0]["module"] == api_m.as_str()
    });
    assert!(
        p["conflicts"][0]["error"]
            .as_str()
            .unwrap()
            .contains("stated through the API"),
        "{p:#}"
    );
    wait_v(&n, &plane_m, "p");
    assert!(n.logs(&api_m).contains("V=local"));
    // Neither the API nor a file may take a plane module.
    let (code, body) = agent.send(&n, "DELETE", &format!("/v1/intentions/{plane_m}"), "");
    assert_eq!(code, 409, "{body}");
    assert!(body.contains("central plane"), "{body}");
    n.write_intention(
        "f.toml",
        format!("name = \"{plane_m}\"\nimage = \"{IMAGE_1}\"\n"),
    );
    n.write_intention(
        "g.toml",
        format!(
            "name = \"{file_m}\"\nimage = \"{IMAGE_1}\"\ncommand = [\"sh\", \"-c\", {:?}]\n",
            idle_after("echo V=file")
        ),
    );
    n.wait_for(60, "the file naming a plane module refused", || {
        let (_, events) = agent.get("/v1/events?limit=1000");
        events.contains("f.toml") && events.contains("stated by the central plane")
    });
    wait_v(&n, &file_m, "file");
    assert!(n.logs(&plane_m).contains("V=p"));
    // The API lets go of its module: the plane takes it at the next poll.
    let (code, body) = agent.send(&n, "DELETE", &format!("/v1/intentions/{api_m}"), "");
    assert_eq!(code, 200, "{body}");
    wait_v(&n, &api_m, "plane");
    wait_plane(&n, &agent, "no conflict left", |p| {
        p["conflicts"] == json!([])
    });
}

#[test]
fn with_the_engine_away_every_module_held_reads_pending_and_nothing_reads_passing() {
    let key = SecretKey::generate().unwrap();
    let plane = Plane::start();
    let n = settled_node("plane-away", &plane, &[&key]);
    let (web, local, late, api) = (
        n.module("web"),
        n.module("local"),
        n.module("late"),
        n.module("api"),
    );
    plane.publish(
        &n.id,
        &sign(&key, &payload(&n, 1, vec![module(&web, "one")])),
    );
    let file = |name: &str| {
        format!(
            "name = \"{name}\"\nimage = \"{IMAGE_1}\"\ncommand = [\"sh\", \"-c\", {:?}]\n",
            idle_after("true")
        )
    };
    n.write_intention("local.toml", file(&local));
    let agent = Agent::start(&n);
    n.wait_for(60, "a report of both modules converged, passing", || {
        plane.report_json(&n.id).is_some_and(|r| {
            r["passing"] == true
                && r["modules"][&web]["state"] == "converged"
                && r["modules"][&local]["state"] == "converged"
        })
    });
    drop(agent);

    // The engine away for the whole run: its socket points nowhere.
    let nowhere = n.dir.path().join("no-engine.sock");
    let n = n.with_socket(nowhere.to_str().unwrap());
    let agent = Agent::start(&n);
    // Stated while it waits: a file and the API.
    n.write_intention("late.toml", file(&late));
    let body = json!({"name": api, "image": IMAGE_1}).to_string();
    let (code, answer) = agent.send(&n, "PUT", &format!("/v1/intentions/{api}"), &body);
    assert!(code == 200 || code == 201, "{code} {answer}");

    let all = [&web, &local, &late, &api];
    n.wait_for(30, "every module listed pending in the status", || {
        let (_, s) = agent.get("/v1/status");
        let s: J = serde_json::from_str(&s).unwrap();
        let modules = s["modules"].as_array().unwrap();
        modules.len() == all.len()
            && all.iter().all(|m| {
                modules.iter().any(|x| {
                    x["name"] == m.as_str()
                        && x["state"] == "pending"
                        && x["last_error"]
                            .as_str()
                            .is_some_and(|e| e.contains("engine not reachable"))
                })
            })
    });
    let (_, s) = agent.get("/v1/status");
    let s: J = serde_json::from_str(&s).unwrap();
    assert_eq!(s["node"]["passing"], false, "{s:#}");
    assert_eq!(s["node"]["engine"]["state"], "waiting", "{s:#}");
    assert_eq!(agent.get("/readyz").0, 503);

    n.wait_for(60, "a report of every module pending, not passing", || {
        plane.report_json(&n.id).is_some_and(|r| {
            r["engine"] == "waiting"
                && r["passing"] == false
                && r["modules"].as_object().unwrap().len() == all.len()
                && all
                    .iter()
                    .all(|m| r["modules"][m.as_str()]["state"] == "pending")
        })
    });
    let r = plane.report_json(&n.id).unwrap();
    assert!(
        r["modules"][&web]["last_error"]["message"]
            .as_str()
            .unwrap()
            .contains("engine not reachable"),
        "{r:#}"
    );
    // What the engine last ran is left as it was.
    assert!(n.container(&web).is_some() && n.container(&local).is_some());
}

/// A window of the day in UTC, `from` and `to` seconds from now (whole
/// minutes, wrapping past midnight).
fn utc_window(from: i64, to: i64) -> String {
    let now = unix_now() as i64;
    let hm = |d: i64| {
        let s = (now + d).rem_euclid(86_400) / 60 * 60;
        format!("{:02}:{:02}", s / 3600, s % 3600 / 60)
    };
    format!("daily {}-{}", hm(from), hm(to))
}

#[test]
fn outside_its_maintenance_window_a_change_waits_and_inside_it_is_made_once() {
    let key = SecretKey::generate().unwrap();
    let plane = Plane::start();
    let n = settled_node("plane-window", &plane, &[&key]);
    let m = n.module("till");
    let with_window = |revision: u64, v: &str, window: &str| {
        let mut p = payload(&n, revision, vec![module(&m, v)]);
        p["maintenance"] = json!({"windows": [window], "zone": "UTC"});
        sign(&key, &p)
    };
    // A module new to the device is made at any time: nothing ran.
    let closed = utc_window(2 * 3600, 3 * 3600);
    plane.publish(&n.id, &with_window(1, "one", &closed));
    let agent = Agent::start(&n);
    wait_v(&n, &m, "one");
    let first = n.container_id(&m);

    // A change outside the window: the container runs on as it was, the
    // module reads deferred, saying for what and until when.
    let since = unix_now();
    plane.publish(&n.id, &with_window(2, "two", &closed));
    wait_plane(&n, &agent, "revision 2", |p| held_revision(p) == Some(2));
    let view = || -> J { serde_json::from_str(&agent.get(&format!("/v1/modules/{m}")).1).unwrap() };
    n.wait_for(60, "the recreate to wait", || view()["state"] == "deferred");
    let v = view();
    let why = v["last_error"].as_str().unwrap_or_default();
    assert!(
        why.contains(&format!(
            "waits for the maintenance window (node: {closed} UTC) until "
        )),
        "{v:#}"
    );
    assert_eq!(v["inputs_differ"][0]["input"], "env", "{v:#}");
    // Several passes later: still the same container, never recreated.
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(view()["state"], "deferred");
    assert_eq!(n.container_id(&m), first);
    assert_eq!(
        n.creates_since(&m, since),
        0,
        "{:?}",
        n.events_since(&m, since)
    );
    let (_, events) = agent.get("/v1/events");
    assert!(events.contains("recreate deferred (env: "), "{events}");

    // The window open: the change is made, once.
    let open = utc_window(-3600, 3600);
    plane.publish(&n.id, &with_window(3, "two", &open));
    wait_v(&n, &m, "two");
    n.wait_for(60, "converged", || view()["state"] == "converged");
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(
        n.creates_since(&m, since),
        1,
        "{:?}",
        n.events_since(&m, since)
    );
    assert_ne!(n.container_id(&m), first);

    // A bad window refuses the whole document, naming the field.
    let mut bad = payload(&n, 4, vec![module(&m, "three")]);
    bad["maintenance"] = json!({"windows": ["Mon-Fri 9-17"]});
    plane.publish(&n.id, &sign(&key, &bad));
    let p = wait_plane(&n, &agent, "the bad window refused", |p| {
        p["refusal"]["revision"] == 4
    });
    assert!(
        p["refusal"]["detail"]
            .as_str()
            .unwrap_or_default()
            .contains("maintenance.windows[0]"),
        "{p:#}"
    );
    assert_eq!(held_revision(&plane_state(&agent)), Some(3));
}

#[test]
fn a_locked_module_waits_the_documents_max_and_then_as_it_says() {
    let key = SecretKey::generate().unwrap();
    let plane = Plane::start();
    let n = settled_node("plane-locks", &plane, &[&key]);
    let m = n.module("till");
    let with_locks = |revision: u64, v: &str, then: &str| {
        let mut p = payload(&n, revision, vec![module(&m, v)]);
        p["locks"] = json!({"max": "4s", "then": then});
        sign(&key, &p)
    };
    plane.publish(&n.id, &with_locks(1, "one", "wait"));
    let agent = Agent::start(&n);
    wait_v(&n, &m, "one");
    let first = n.container_id(&m);
    let (status, body) = agent.send(
        &n,
        "POST",
        &format!("/v1/modules/{m}/lock"),
        r#"{"reason": "taking a payment"}"#,
    );
    assert_eq!(status, 200, "{body}");

    // `then = "wait"`: the recreate waits the max, and past it waits on,
    // saying so.
    let since = unix_now();
    plane.publish(&n.id, &with_locks(2, "two", "wait"));
    wait_plane(&n, &agent, "revision 2", |p| held_revision(p) == Some(2));
    let view = || -> J { serde_json::from_str(&agent.get(&format!("/v1/modules/{m}")).1).unwrap() };
    let why = || {
        view()["last_error"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    n.wait_for(60, "the recreate to wait", || view()["state"] == "deferred");
    assert!(
        why().contains("until at most") || why().contains("over node's max"),
        "{}",
        why()
    );
    n.wait_for(60, "the max to pass", || {
        why().contains("over node's max of 4s (then wait)")
    });
    assert_eq!(view()["state"], "deferred");
    assert_eq!(n.container_id(&m), first);
    assert_eq!(
        n.creates_since(&m, since),
        0,
        "{:?}",
        n.events_since(&m, since)
    );

    // `then = "take"`: the time waited counts from the first wait, so the
    // lock is taken at once and the change made, once.
    plane.publish(&n.id, &with_locks(3, "two", "take"));
    wait_v(&n, &m, "two");
    n.wait_for(60, "converged", || view()["state"] == "converged");
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(
        n.creates_since(&m, since),
        1,
        "{:?}",
        n.events_since(&m, since)
    );
    let (_, events) = agent.get("/v1/events");
    assert!(
        events.contains("recreated though locked: the update lock of")
            && events.contains("taken after 4s (node's locks: then take)"),
        "{events}"
    );
    let (_, locks) = agent.get("/v1/locks");
    assert_eq!(
        serde_json::from_str::<J>(&locks).unwrap()["locks"],
        json!([])
    );
}

/// `GET /v1/actions`, by id.
fn actions_by_id(agent: &Agent) -> BTreeMap<String, J> {
    let (code, body) = agent.get("/v1/actions");
    assert_eq!(code, 200, "{body}");
    let v: J = serde_json::from_str(&body).unwrap();
    v["actions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| (a["id"].as_str().unwrap().to_string(), a.clone()))
        .collect()
}

#[test]
fn signed_one_shot_actions_run_once_each_and_say_what_became_of_them() {
    let key = SecretKey::generate().unwrap();
    let plane = Plane::start();
    let n = settled_node("plane-acts", &plane, &[&key]);
    let m = n.module("web");
    let in_an_hour = format_rfc3339(now() + 3600);
    let act = |id: &str, kind: &str, module: Option<&str>| {
        let mut a = json!({"id": id, "kind": kind, "expires": in_an_hour});
        if let Some(m) = module {
            a["module"] = json!(m);
        }
        a
    };
    let with_actions = |revision: u64, actions: Vec<J>, window: Option<&str>| {
        let mut p = payload(&n, revision, vec![module(&m, "one")]);
        p["actions"] = J::Array(actions);
        if let Some(w) = window {
            p["maintenance"] = json!({"windows": [w], "zone": "UTC"});
        }
        sign(&key, &p)
    };
    plane.publish(&n.id, &with_actions(1, vec![], None));
    let agent = Agent::start(&n);
    wait_v(&n, &m, "one");
    let first = n.container_id(&m);
    let view = |agent: &Agent| -> J {
        serde_json::from_str(&agent.get(&format!("/v1/modules/{m}")).1).unwrap()
    };
    n.wait_for(60, "converged", || view(&agent)["state"] == "converged");

    // A restart: the same container, started once more; an action for a
    // module the device does not run fails; one past its expiry expires;
    // a reboot this device's config does not allow fails, saying so.
    let since = unix_now();
    let mut expired = act("late", "restart", Some(&m));
    expired["expires"] = json!(format_rfc3339(now() - 10));
    let ghost = n.module("ghost");
    let first_four = vec![
        act("restart-1", "restart", Some(&m)),
        act("ghost-1", "restart", Some(&ghost)),
        expired,
        act("boot-1", "reboot", None),
    ];
    plane.publish(&n.id, &with_actions(2, first_four.clone(), None));
    n.wait_for(60, "the four actions to end", || {
        let a = actions_by_id(&agent);
        ["restart-1", "ghost-1", "late", "boot-1"].iter().all(|id| {
            a.get(*id)
                .is_some_and(|x| x["status"] != "begun" && x["status"] != "waiting")
        })
    });
    let a = actions_by_id(&agent);
    assert_eq!(a["restart-1"]["status"], "done", "{a:#?}");
    assert!(
        a["restart-1"]["result"]
            .as_str()
            .unwrap()
            .starts_with("restarted container "),
        "{a:#?}"
    );
    assert_eq!(a["ghost-1"]["status"], "failed", "{a:#?}");
    assert_eq!(
        a["ghost-1"]["result"],
        format!("this device runs no module {ghost}")
    );
    assert_eq!(a["late"]["status"], "expired", "{a:#?}");
    assert_eq!(a["boot-1"]["status"], "failed", "{a:#?}");
    assert!(
        a["boot-1"]["result"]
            .as_str()
            .unwrap()
            .contains("[actions] reboot = true"),
        "{a:#?}"
    );
    assert_eq!(n.container_id(&m), first, "a restart keeps its container");
    // The report says what became of each.
    n.wait_for(30, "the actions in the report", || {
        plane.report_json(&n.id).is_some_and(|r| {
            r["actions"].as_array().is_some_and(|a| {
                a.iter()
                    .any(|x| x["id"] == "restart-1" && x["status"] == "done")
                    && a.iter()
                        .any(|x| x["id"] == "ghost-1" && x["status"] == "failed")
            })
        })
    });
    let starts = |since: f64| {
        n.events_since(&m, since)
            .iter()
            .filter(|e| *e == "start")
            .count()
    };
    n.wait_for(10, "the restart's start event", || starts(since) == 1);
    assert_eq!(n.creates_since(&m, since), 0);

    // A recreate: a new container, once. The ids already run are carried
    // on in the next revision and do not run again, nor after the agent
    // restarts (their records are the store's).
    let since = unix_now();
    let mut five = first_four.clone();
    five.push(act("recreate-1", "recreate", Some(&m)));
    plane.publish(&n.id, &with_actions(3, five.clone(), None));
    n.wait_for(60, "the recreate", || {
        actions_by_id(&agent)
            .get("recreate-1")
            .is_some_and(|x| x["status"] == "done")
    });
    let second = n.container_id(&m);
    assert_ne!(second, first);
    drop(agent);
    let agent = Agent::start(&n);
    n.wait_for(60, "converged again", || {
        view(&agent)["state"] == "converged"
    });
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(n.container_id(&m), second);
    assert_eq!(
        n.creates_since(&m, since),
        1,
        "{:?}",
        n.events_since(&m, since)
    );
    assert_eq!(starts(since), 1, "{:?}", n.events_since(&m, since));

    // Outside the maintenance window a restart waits, and says for what.
    let since = unix_now();
    let closed = utc_window(2 * 3600, 3 * 3600);
    let mut six = five;
    six.push(act("restart-2", "restart", Some(&m)));
    plane.publish(&n.id, &with_actions(4, six, Some(&closed)));
    n.wait_for(60, "the restart to wait", || {
        actions_by_id(&agent).get("restart-2").is_some_and(|x| {
            x["status"] == "waiting"
                && x["waiting"]
                    .as_str()
                    .is_some_and(|w| w.contains("waits for the maintenance window"))
        })
    });
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(starts(since), 0, "{:?}", n.events_since(&m, since));
    let (_, events) = agent.get("/v1/events?limit=1000");
    assert!(
        events.contains("action restart-1 (restart): done"),
        "{events}"
    );
}
