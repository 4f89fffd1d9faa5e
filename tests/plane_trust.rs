//! Trust and time from the central plane, against the real parts (Debian's
//! nginx on loopback, the real agent, engine and store): a key removed from
//! the config stops its document and its group's being the floor,
//! revisions are bounded, a document issued in the future is blamed (not
//! the clock) and documents ahead move "now" a day in all, a key given
//! twice is refused, a signature without a key id verifies, redirects go
//! only where they may, a host without ETags is polled with
//! `If-Modified-Since`, a changed plane URL is asked conditionally again,
//! and a 403 for the root is no root.

mod common;

use std::time::Duration;

use common::agent::Agent;
use common::desired::*;
use common::plane::{Plane, plane_cli};
use common::*;
use serde_json::{Value as J, json};
use stead::model::time::format_rfc3339;
use stead::plane::envelope::SecretKey;

const MAX_REVISION: u64 = 1 << 53;

fn config(plane: &Plane, keys: &[&SecretKey]) -> String {
    let keys: Vec<String> = keys
        .iter()
        .map(|k| format!("{:?}", k.public().to_base64()))
        .collect();
    format!(
        "[plane]\nurl = {:?}\ntrusted_keys = [{}]\npoll_interval = \"1s\"",
        plane.base(),
        keys.join(", ")
    )
}

/// Publishes `body`; waits for the agent to refuse it as `class`.
fn refused(plane: &Plane, n: &Node, agent: &Agent, body: &[u8], class: &str) -> J {
    let before = wait_plane(n, agent, "a status", |_| true)["refusal"]["at"]
        .as_u64()
        .unwrap_or(0);
    // A refusal of the same class a moment ago would read as this one.
    std::thread::sleep(Duration::from_millis(1100));
    plane.publish(&n.id, body);
    wait_plane(n, agent, &format!("a refusal: {class}"), |p| {
        p["refusal"]["class"] == class && p["refusal"]["at"].as_u64().unwrap_or(0) > before
    })
}

#[test]
fn a_key_removed_from_the_config_stops_its_document_being_the_floor_and_what_runs_keeps_running() {
    let leaked = SecretKey::generate().unwrap();
    let good = SecretKey::generate().unwrap();
    let plane = Plane::start();
    let n = Node::new("trust-revoke").with_config(&config(&plane, &[&leaked, &good]));
    let m = n.module("web");
    let gm = n.module("gweb");
    const G: &str = "trust-revoke";
    // A leaked key signs the highest revision there is, of the node's
    // document and of its group's: with 0.5.0 the node took nothing else
    // ever again (with 0.6.0's first cut, nothing else of the group).
    let leaked_doc = sign(
        &leaked,
        &node_payload(
            &n,
            MAX_REVISION,
            &[G],
            vec![module(&m, "leaked")],
            json!({}),
        ),
    );
    let leaked_group = group_payload(G, MAX_REVISION, vec![module(&gm, "g-leaked")], json!({}));
    publish_group(&plane, &leaked, G, &leaked_group);
    plane.publish(&n.id, &leaked_doc);
    let agent = Agent::start(&n);
    wait_v(&n, &m, "leaked");
    wait_v(&n, &gm, "g-leaked");
    wait_plane(&n, &agent, "the top revision", |p| {
        p["held"]["revision"] == MAX_REVISION && p["held"]["floor"] == true
    });
    // Over the bound: refused, named.
    let p = refused(
        &plane,
        &n,
        &agent,
        &sign(&good, &payload(&n, MAX_REVISION + 1, vec![module(&m, "x")])),
        "revision-too-large",
    );
    assert!(
        p["refusal"]["detail"]
            .as_str()
            .unwrap()
            .contains("2^53 = 9007199254740992"),
        "{p:#}"
    );
    let (_, metrics) = agent.get("/metrics");
    assert!(
        metrics.contains(&format!(
            "stead_build_info{{version=\"{}\",commit=\"",
            env!("CARGO_PKG_VERSION")
        )),
        "{metrics}"
    );
    drop(agent);

    // The leaked key is removed from the device; the plane still serves
    // the leaked document.
    plane.publish(&n.id, &leaked_doc);
    let id = n.container_id(&m);
    let since = unix_now();
    let mut n = n;
    n.extra = String::new();
    let n = n.with_config(&config(&plane, &[&good]));
    let agent = Agent::start(&n);
    let p = wait_plane(&n, &agent, "the held document revoked", |p| {
        p["held"]["floor"] == false
    });
    assert_eq!(p["held"]["revision"], MAX_REVISION, "{p:#}");
    assert_eq!(p["held"]["key_id"], leaked.public().id().to_string());
    let why = p["held"]["revoked"].as_str().unwrap();
    assert!(why.contains("no key trusted now signed it"), "{p:#}");
    // The group's document too: no floor, what it states still runs.
    let p = wait_plane(&n, &agent, "the group's document revoked", |p| {
        p["groups"][0]["revoked"].is_string()
    });
    assert_eq!(p["groups"][0]["revision"], MAX_REVISION, "{p:#}");
    let why = p["groups"][0]["revoked"].as_str().unwrap();
    assert!(why.contains("no key trusted now signed it"), "{p:#}");
    // The leaked document is refused, not answered 304.
    wait_plane(&n, &agent, "the leaked document refused", |p| {
        p["refusal"]["class"] == "unknown-key"
    });
    n.wait_for(60, "a report saying the floor is gone", || {
        plane.report_json(&n.id).is_some_and(|r| {
            r["plane"]["held"]["floor"] == false
                && r["plane"]["held"]["revoked"]
                    .as_str()
                    .is_some_and(|w| w.contains("no key trusted now"))
        })
    });
    let o = n
        .stead()
        .args(["status", "--config"])
        .arg(n.config())
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains(&format!(
            "plane revision {MAX_REVISION} (still run, but no longer the floor: no key trusted now"
        )),
        "{out}"
    );
    // What runs keeps running.
    assert_eq!(n.container_id(&m), id);
    assert_eq!(n.creates_since(&m, since), 0);
    assert!(Agent::log(&n).contains("is no longer the floor"));

    // A document the trusted key signed, at a low revision, is taken, and
    // so is its group's, at a lower revision still.
    let group = group_payload(G, 3, vec![module(&gm, "g-three")], json!({}));
    publish_group(&plane, &good, G, &group);
    plane.publish(
        &n.id,
        &sign(
            &good,
            &node_payload(&n, 5, &[G], vec![module(&m, "five")], json!({})),
        ),
    );
    wait_v(&n, &m, "five");
    wait_v(&n, &gm, "g-three");
    let p = wait_plane(&n, &agent, "revision 5 as the floor", |p| {
        p["held"]["revision"] == 5 && p["held"]["floor"] == true
    });
    assert!(p["held"]["revoked"].is_null(), "{p:#}");
    assert_eq!(p["groups"][0]["revision"], 3, "{p:#}");
    assert!(p["groups"][0].get("revoked").is_none(), "{p:#}");
    assert_eq!(n.creates_since(&m, since), 1);
    // And it is the floor now, across a restart too.
    drop(agent);
    let agent = Agent::start(&n);
    wait_plane(&n, &agent, "revision 5 after a restart", |p| {
        p["held"]["revision"] == 5 && p["held"]["floor"] == true
    });
    refused(
        &plane,
        &n,
        &agent,
        &sign(&good, &payload(&n, 4, vec![module(&m, "four")])),
        "rollback",
    );
}

#[test]
fn a_document_issued_in_the_future_is_blamed_keys_given_twice_are_refused_and_a_keyless_signature_verifies()
 {
    let key = SecretKey::generate().unwrap();
    let plane = Plane::start();
    let n = Node::new("trust-time").with_config(&config(&plane, &[&key]));
    let m = n.module("web");
    plane.publish(&n.id, &sign(&key, &payload(&n, 1, vec![module(&m, "one")])));
    let agent = Agent::start(&n);
    wait_v(&n, &m, "one");
    wait_plane(&n, &agent, "revision 1", |p| p["held"]["revision"] == 1);
    let id = n.container_id(&m);

    // A trusted key's document issued in 2100: refused as wrong, the clock
    // not blamed, and "now" not moved (an honest document is taken next).
    let mut future = payload(&n, 2, vec![module(&m, "future")]);
    future["issued_at"] = json!("2100-01-01T00:00:00Z");
    future["expires"] = json!("2100-02-01T00:00:00Z");
    let p = refused(&plane, &n, &agent, &sign(&key, &future), "issued-in-future");
    assert_eq!(p["clock"], "ok", "{p:#}");
    assert!(
        p["refusal"]["detail"]
            .as_str()
            .unwrap()
            .contains("the document is wrong, not the clock"),
        "{p:#}"
    );

    // A key given twice inside a module: refused, naming where.
    let text = serde_json::to_string(&payload(&n, 3, vec![module(&m, "first")])).unwrap();
    let twice = text.replace("\"V\":\"first\"", "\"V\":\"first\",\"V\":\"second\"");
    assert_ne!(text, twice);
    let p = refused(
        &plane,
        &n,
        &agent,
        &sign_bytes(&key, twice.as_bytes()),
        "invalid",
    );
    let detail = p["refusal"]["detail"].as_str().unwrap();
    assert!(
        detail.contains("modules[0].env") && detail.contains("\"V\" is given twice"),
        "{p:#}"
    );
    assert_eq!(n.container_id(&m), id);

    // The same for what the API is given.
    let api = n.module("api");
    let body = format!(r#"{{"name": "{api}", "image": "{IMAGE_1}", "image": "{IMAGE_2}"}}"#);
    let (code, answer) = agent.send(&n, "PUT", &format!("/v1/intentions/{api}"), &body);
    assert_eq!(code, 422, "{answer}");
    assert!(answer.contains("\\\"image\\\" is given twice"), "{answer}");
    let (code, answer) = agent.patch(
        &n,
        &format!("/v1/intentions/{m}/settings"),
        r#"{"a": 1, "a": 2}"#,
    );
    assert_eq!(code, 422, "{answer}");
    assert!(answer.contains("\\\"a\\\" is given twice"), "{answer}");

    // A signature without a key id (DSSE makes it optional) verifies, and
    // the honest document is taken: "now" did not move to 2100.
    let mut doc: J =
        serde_json::from_slice(&sign(&key, &payload(&n, 4, vec![module(&m, "four")]))).unwrap();
    doc["signatures"][0]
        .as_object_mut()
        .unwrap()
        .remove("keyid");
    plane.publish(&n.id, doc.to_string().as_bytes());
    wait_v(&n, &m, "four");
    let p = wait_plane(&n, &agent, "revision 4", |p| p["held"]["revision"] == 4);
    assert_eq!(p["held"]["key_id"], key.public().id().to_string());
    assert!(p["refusal"].is_null(), "{p:#}");

    // Time moves at most a day in all: a document 23 h ahead, then one 46 h
    // ahead (within a day of the first: 0.5.0 moved "now" on each), then an
    // honest one issued now that expires in 30 h, which is still taken.
    for (r, ahead) in [(5, 23), (6, 46)] {
        let mut p = payload(&n, r, vec![module(&m, "four")]);
        p["issued_at"] = json!(format_rfc3339(now() + ahead * 3600));
        p["expires"] = json!(format_rfc3339(now() + 40 * DAY));
        plane.publish(&n.id, &sign(&key, &p));
        wait_plane(&n, &agent, &format!("revision {r}"), |p| {
            p["held"]["revision"] == r
        });
    }
    let mut honest = payload(&n, 7, vec![module(&m, "seven")]);
    honest["expires"] = json!(format_rfc3339(now() + 30 * 3600));
    plane.publish(&n.id, &sign(&key, &honest));
    wait_v(&n, &m, "seven");
    let p = wait_plane(&n, &agent, "revision 7", |p| p["held"]["revision"] == 7);
    assert!(p["refusal"].is_null(), "{p:#}");
}

#[test]
fn redirects_go_only_to_the_same_origin_and_a_host_without_etags_is_asked_if_modified_since() {
    let key = SecretKey::generate().unwrap();
    let mut plane = Plane::start();
    let elsewhere = Plane::start();
    let n = Node::new("trust-redirect").with_config(&config(&plane, &[&key]));
    plane.publish(&n.id, &sign(&key, &payload(&n, 1, vec![])));
    let agent = Agent::start(&n);
    wait_plane(&n, &agent, "revision 1", |p| p["held"]["revision"] == 1);
    n.wait_for(60, "a first report", || plane.report(&n.id).is_some());

    // The plane redirects to another port: not followed, said, and the
    // other host is never asked.
    elsewhere.publish(&n.id, &sign(&key, &payload(&n, 2, vec![])));
    plane.set_redirect(Some((302, elsewhere.desired_url(&n.id))));
    let p = wait_plane(&n, &agent, "the redirect refused", |p| {
        p["error"]
            .as_str()
            .is_some_and(|e| e.contains("302") && e.contains("not followed"))
    });
    assert_eq!(p["held"]["revision"], 1, "{p:#}");
    assert_eq!(elsewhere.count("GET", "desired.json", 200), 0);
    // A redirect on the same origin is followed.
    plane.publish_raw_path(
        &format!("mirror/{}.json", n.id),
        &sign(&key, &payload(&n, 3, vec![])),
    );
    plane.set_redirect(Some((
        302,
        format!("{}/mirror/{}.json", plane.base(), n.id),
    )));
    wait_plane(
        &n,
        &agent,
        "revision 3 through a same-origin redirect",
        |p| p["held"]["revision"] == 3 && p["error"].is_null(),
    );
    plane.set_redirect(None);

    // A report redirected (307, with its body) anywhere is not followed.
    plane.set_report_redirect(Some((307, elsewhere.status_url(&n.id))));
    plane.publish(&n.id, &sign(&key, &payload(&n, 4, vec![])));
    let p = wait_plane(&n, &agent, "the report redirect refused", |p| {
        p["reports"]["error"]
            .as_str()
            .is_some_and(|e| e.contains("307") && e.contains("not followed"))
    });
    assert_eq!(p["reports"]["pending"], true, "{p:#}");
    assert_eq!(
        elsewhere
            .requests()
            .iter()
            .filter(|r| r.method == "PUT")
            .count(),
        0
    );
    plane.set_report_redirect(None);

    // A host that sends no ETag: polled with If-Modified-Since, answered
    // 304 with no body.
    plane.set_etags(false);
    plane.publish(&n.id, &sign(&key, &payload(&n, 5, vec![])));
    wait_plane(&n, &agent, "revision 5 from a host without ETags", |p| {
        p["held"]["revision"] == 5
    });
    let from = plane.requests().len();
    let at = plane.count("GET", "desired.json", 304);
    plane.wait_count("GET", "desired.json", 304, at + 3, 30);
    let polls: Vec<_> = plane.requests()[from..]
        .iter()
        .filter(|r| r.method == "GET" && r.path.contains("desired.json"))
        .cloned()
        .collect();
    assert!(
        polls.iter().all(|r| r.status == 304
            && r.bytes == 0
            && r.etag.is_none()
            && r.if_none_match.is_none()
            && r.if_modified_since.is_some()),
        "{polls:#?}"
    );
    // A new document there is still seen.
    plane.publish(&n.id, &sign(&key, &payload(&n, 6, vec![])));
    wait_plane(&n, &agent, "revision 6", |p| p["held"]["revision"] == 6);

    // The plane's URL changes (the same host by another path): the
    // document served the same is asked for conditionally again from its
    // new URL, not fetched whole at every poll.
    plane.set_etags(true);
    drop(agent);
    let mut n = n;
    n.extra = String::new();
    let moved = config(&plane, &[&key]).replace(
        &format!("url = {:?}", plane.base()),
        &format!("url = {:?}", format!("{}/moved/..", plane.base())),
    );
    let n = n.with_config(&moved);
    let agent = Agent::start(&n);
    let at = plane.count("GET", "moved/../nodes", 304);
    plane.wait_count("GET", "moved/../nodes", 304, at + 3, 30);
    let p = plane_state(&agent);
    assert_eq!(p["held"]["revision"], 6, "{p:#}");
}

/// A signed root of `version`: root keys `root` (threshold `t`), document
/// keys `docs`, signed by `by`.
fn signed_root(
    version: u64,
    root: &[&SecretKey],
    t: usize,
    docs: &[&SecretKey],
    by: &[&SecretKey],
) -> Vec<u8> {
    let r = stead::plane::root::Root {
        version,
        expires: now() + 365 * DAY,
        root: stead::plane::root::Role {
            keys: root.iter().map(|k| k.public()).collect(),
            threshold: t,
        },
        documents: docs.iter().map(|k| k.public()).collect(),
        delegations: Vec::new(),
        allow_list: None,
    };
    let (first, rest) = by.split_first().unwrap();
    let mut env = first.sign(stead::plane::root::PAYLOAD_TYPE, &r.to_payload());
    for k in rest {
        env.countersign(k);
    }
    env.to_json()
}

#[test]
fn trust_moves_from_the_plane_by_a_root_chain_and_a_key_it_drops_signs_nothing_more() {
    let [first, r1, r2, r3, online, online2] =
        std::array::from_fn(|_| SecretKey::generate().unwrap());
    let plane = Plane::start();
    let n = Node::new("trust-root").with_config(&config(&plane, &[&first]));
    let m = n.module("web");
    plane.publish(
        &n.id,
        &sign(&first, &payload(&n, 1, vec![module(&m, "one")])),
    );
    let agent = Agent::start(&n);
    wait_v(&n, &m, "one");
    assert!(plane_state(&agent).get("root").is_none(), "no root yet");

    // Root version 1, made and published with the CLI: two root keys of
    // which both must sign the next, one online key for documents; signed
    // by the devices' first key and by both of its own.
    let d = tempfile::tempdir().unwrap();
    let file = |name: &str| d.path().join(name).to_str().unwrap().to_string();
    for (k, name) in [(&first, "first"), (&r1, "r1"), (&r2, "r2")] {
        stead::host::keyfile::write(std::path::Path::new(&file(name)), k).unwrap();
    }
    let b64 = |k: &SecretKey| k.public().to_base64();
    plane_cli(&[
        "root",
        "init",
        "--root-key",
        &b64(&r1),
        "--root-key",
        &b64(&r2),
        "--threshold",
        "2",
        "--documents-key",
        &b64(&online),
        "--out",
        &file("1.payload"),
    ]);
    plane_cli(&[
        "root",
        "sign",
        "--key",
        &file("first"),
        "--in",
        &file("1.payload"),
        "--out",
        &file("1.json"),
    ]);
    plane_cli(&[
        "root",
        "sign",
        "--key",
        &file("r1"),
        "--key",
        &file("r2"),
        "--in",
        &file("1.json"),
        "--out",
        &file("1.json"),
    ]);
    let site = plane.root();
    let said = plane_cli(&[
        "root",
        "verify",
        "--trusted",
        &b64(&first),
        "--site",
        site.to_str().unwrap(),
        "--in",
        &file("1.json"),
        "--publish",
    ]);
    assert!(
        said.contains("version 1: root keys") && said.contains("published"),
        "{said}"
    );

    // The online key's document is taken once the device walked to root 1,
    // with its group's at the highest revision there is; the first key
    // signs nothing more.
    let gm = n.module("gweb");
    const G: &str = "trust-root";
    let huge = group_payload(G, MAX_REVISION, vec![module(&gm, "g-online")], json!({}));
    publish_group(&plane, &online, G, &huge);
    plane.publish(
        &n.id,
        &sign(
            &online,
            &node_payload(&n, 2, &[G], vec![module(&m, "two")], json!({})),
        ),
    );
    wait_v(&n, &m, "two");
    wait_v(&n, &gm, "g-online");
    let p = plane_state(&agent);
    assert_eq!(p["root"]["version"], 1, "{p:#}");
    assert_eq!(p["root"]["threshold"], 2, "{p:#}");
    assert_eq!(
        p["root"]["document_keys"][0],
        online.public().id().as_str(),
        "{p:#}"
    );
    refused(
        &plane,
        &n,
        &agent,
        &sign(&first, &payload(&n, 3, vec![module(&m, "x")])),
        "unknown-key",
    );

    // Root version 2 drops r1 and the online key (leaked): signed by both
    // keys of version 1 and two of its own. A device holding version 1
    // walks to it; what the dropped key signed is no floor any more, and
    // a document by the new online key is taken whatever its revision.
    let v2 = signed_root(2, &[&r2, &r3], 2, &[&online2], &[&r1, &r2, &r3]);
    plane.publish_raw_path("roots/2.json", &v2);
    plane.publish_raw_path("root.json", &v2);
    wait_plane(&n, &agent, "root version 2", |p| p["root"]["version"] == 2);
    let p = wait_plane(&n, &agent, "the held document no floor", |p| {
        p["held"]["floor"] == false
    });
    assert!(
        p["held"]["revoked"]
            .as_str()
            .unwrap()
            .contains("no key trusted now signed it"),
        "{p:#}"
    );
    let p = wait_plane(&n, &agent, "the group's document no floor", |p| {
        p["groups"][0]["revoked"].is_string()
    });
    assert_eq!(p["groups"][0]["revision"], MAX_REVISION, "{p:#}");
    refused(
        &plane,
        &n,
        &agent,
        &sign(&online, &payload(&n, 5, vec![module(&m, "x")])),
        "unknown-key",
    );
    let low = group_payload(G, 2, vec![module(&gm, "g-two")], json!({}));
    publish_group(&plane, &online2, G, &low);
    plane.publish(
        &n.id,
        &sign(
            &online2,
            &node_payload(&n, 1, &[G], vec![module(&m, "three")], json!({})),
        ),
    );
    wait_v(&n, &m, "three");
    wait_v(&n, &gm, "g-two");
    let p = plane_state(&agent);
    assert_eq!(p["groups"][0]["revision"], 2, "{p:#}");

    // A root short of its threshold, or skipping a version, is not taken:
    // said, and version 2 stays.
    let short = signed_root(3, &[&r3], 1, &[&online2], &[&r3]);
    // The publisher's check says the same before anything is published.
    std::fs::write(file("short.json"), &short).unwrap();
    let out = std::process::Command::new(common::workspace_bin("stead-plane"))
        .args(["root", "verify", "--trusted", &b64(&first), "--site"])
        .arg(&site)
        .args(["--in", &file("short.json"), "--publish"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains("which needs 2"), "{said}");
    assert!(
        !site.join("roots/3.json").exists(),
        "a root refused is not published"
    );
    plane.publish_raw_path("root.json", &short);
    let p = wait_plane(&n, &agent, "a root refused", |p| {
        p["root"]["error"].is_string()
    });
    assert!(
        p["root"]["error"]
            .as_str()
            .unwrap()
            .contains("root version 3 is signed by 1 of the root keys of version 2, which needs 2"),
        "{p:#}"
    );
    let skipping = signed_root(4, &[&r3], 1, &[&online2], &[&r2, &r3]);
    plane.publish_raw_path("root.json", &skipping);
    let p = wait_plane(&n, &agent, "a skip refused", |p| {
        p["root"]["error"]
            .as_str()
            .is_some_and(|e| e.contains("roots/3.json is not there"))
    });
    assert_eq!(p["root"]["version"], 2);

    // Taken roots are kept: a restart holds version 2 before it asks.
    drop(agent);
    plane.remove_path("root.json");
    let agent = Agent::start(&n);
    let p = wait_plane(&n, &agent, "root 2 after a restart", |p| {
        p["root"]["version"] == 2
    });
    assert_eq!(
        p["root"]["document_keys"][0],
        online2.public().id().as_str(),
        "{p:#}"
    );
    refused(
        &plane,
        &n,
        &agent,
        &sign(&online, &payload(&n, 9, vec![module(&m, "x")])),
        "unknown-key",
    );
    // The report says it too.
    n.wait_for(30, "a report with the root", || {
        plane
            .report_json(&n.id)
            .is_some_and(|r| r["plane"]["root"]["version"] == 2)
    });
}

/// S3 answers 403 for a file that is not there to a key that may not
/// list the bucket (the policy docs/fleet.md recommends): `root.json`
/// answered so is no root published, asked again hourly rather than at
/// every poll, and said in the root's status.
#[test]
fn a_403_for_the_root_is_no_root_published_asked_hourly_and_said() {
    use common::faults::{Fault, FaultProxy};
    let key = SecretKey::generate().unwrap();
    let plane = Plane::start();
    let proxy = FaultProxy::start(&plane.addr());
    proxy.inject("GET", "root.json", Fault::Status(403, None), 1000);
    let n = Node::new("trust-403").with_config(&format!(
        "[plane]\nurl = {:?}\ntrusted_keys = [{:?}]\npoll_interval = \"1s\"",
        format!("http://{}", proxy.addr),
        key.public().to_base64()
    ));
    plane.publish(&n.id, &sign(&key, &payload(&n, 1, vec![])));
    let agent = Agent::start(&n);
    // The root is asked before the document in a poll: both are waited
    // for (the first poll's document may come a moment after the root's
    // answer is said).
    let p = wait_plane(&n, &agent, "the root said absent, the document held", |p| {
        p["root"]["error"]
            .as_str()
            .is_some_and(|e| e.contains("HTTP 403, taken as no root published"))
            && p["held"]["revision"] == 1
    });
    assert_eq!(p["root"]["version"], 0, "{p:#}");
    // Three polls more: the root was asked for once.
    let at = plane.count("GET", "desired.json", 304);
    plane.wait_count("GET", "desired.json", 304, at + 3, 30);
    let asked = proxy.seen.lock().unwrap().clone();
    let roots = asked.iter().filter(|r| r.contains("root.json")).count();
    assert_eq!(roots, 1, "{asked:#?}");
}
