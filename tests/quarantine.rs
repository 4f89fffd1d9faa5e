//! The crash guard against the real parts: an agent that panics on every
//! start while acting on one input (a plane revision, a local module) holds
//! that input after three deaths in a row, keeps running everything else,
//! stays reachable, says so in its status, readiness and report, and acts
//! on the input again once it changes; a plane document the agent died
//! judging three times is not judged again. The deaths are real: the agent
//! panics (or aborts) at a named point and a new process starts, as systemd
//! restarts it.

mod common;

use std::time::{Duration, Instant};

use common::agent::Agent;
use common::desired::{group_payload, module, payload, publish_group, sign, wait_plane, wait_v};
use common::plane::Plane;
use common::*;
use serde_json::Value as J;
use stead::plane::envelope::SecretKey;

fn node(tag: &str, plane: &Plane, key: &SecretKey) -> Node {
    // A short settle window: what reads converged is not what is tested,
    // and the default 30 s is about the wait for it on a loaded machine.
    Node::new(tag).with_config(&format!(
        "settle_window = \"1s\"\n[plane]\nurl = {:?}\ntrusted_keys = [{:?}]\npoll_interval = \"1s\"",
        plane.base(),
        key.public().to_base64()
    ))
}

fn signed(key: &SecretKey, n: &Node, revision: u64, modules: Vec<J>) -> Vec<u8> {
    sign(key, &payload(n, revision, modules))
}

fn status(agent: &Agent) -> J {
    let (code, body) = agent.get("/v1/status");
    assert_eq!(code, 200, "{body}");
    serde_json::from_str(&body).unwrap()
}

fn state_of(s: &J, module: &str) -> String {
    s["modules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == module)
        .map_or("absent".into(), |m| {
            m["state"].as_str().unwrap().to_string()
        })
}

/// Starts the agent with `STEAD_CRASH_AT=point` as systemd would restart
/// it: again after each death, until a start's status says it holds
/// something. Returns that agent and how many starts died.
fn start_until_it_holds(n: &Node, point: &str) -> (Agent, usize) {
    let env = [("STEAD_CRASH_AT".to_string(), point.to_string())];
    for died in 0..8 {
        let mut child = Agent::spawn_with(n, &[], &env);
        let end = Instant::now() + Duration::from_secs(60);
        loop {
            if child.try_wait().unwrap().is_some() {
                break;
            }
            let addr = std::fs::read_to_string(n.data().join("api-addr")).unwrap_or_default();
            // The address may be a dead start's, or this one's as it dies:
            // nothing answering is not up yet.
            let answer = (!addr.is_empty())
                .then(|| common::agent::try_http_get(addr.trim(), "/v1/status"))
                .flatten();
            if let Some((code, body)) = answer {
                let holds = serde_json::from_str::<J>(&body)
                    .is_ok_and(|s| !s["node"]["quarantine"].is_null());
                if code == 200 && holds {
                    return (
                        Agent {
                            child,
                            addr: addr.trim().to_string(),
                        },
                        died,
                    );
                }
            }
            assert!(
                Instant::now() < end,
                "start {died} neither died nor stayed up:\n{}",
                Agent::log(n)
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    panic!("the agent kept dying:\n{}", Agent::log(n));
}

#[test]
fn a_plane_revision_the_agent_dies_on_is_held_and_the_next_one_is_taken() {
    let key = SecretKey::generate().unwrap();
    let plane = Plane::start();
    let n = node("guard-rev", &plane, &key);
    let (web, extra, local) = (n.module("web"), n.module("extra"), n.module("local"));
    n.write_intention(
        "local.toml",
        format!(
            "name = {local:?}\nimage = {IMAGE_1:?}\ncommand = [\"sh\", \"-c\", {:?}]\n",
            idle_after("echo up")
        ),
    );
    plane.publish(&n.id, &signed(&key, &n, 1, vec![module(&web, "one")]));
    let agent = Agent::start(&n);
    wait_v(&n, &web, "one");
    n.wait_for(60, "the local module", || {
        n.container(&local).is_some_and(|(_, s, _)| s == "running")
    });
    let web_before = n.container_id(&web);
    drop(agent);

    // Revision 2 makes every pass that acts on it panic.
    plane.publish(
        &n.id,
        &signed(&key, &n, 2, vec![module(&web, "two"), module(&extra, "x")]),
    );
    let since = unix_now();
    let (agent, died) = start_until_it_holds(&n, "resolve:plane-revision:2");
    // The first start dies in the pass after it adopted revision 2; the
    // next three die in their first pass, which the guard counts.
    assert_eq!(died, 4, "{}", Agent::log(&n));
    assert!(Agent::log(&n).contains("STEAD_CRASH_AT=resolve:plane-revision:2: panicking"));

    n.wait_for(30, "a pass", || {
        status(&agent)["node"]["passes"].as_u64() >= Some(1)
    });
    let s = status(&agent);
    let q = &s["node"]["quarantine"];
    assert_eq!(q["revision"]["revision"], 2, "{s:#}");
    assert_eq!(q["revision"]["crashes"], 3, "{s:#}");
    assert!(
        q["revision"]["cause"]
            .as_str()
            .unwrap()
            .contains("a panic at crates/host/src/host/mod.rs"),
        "{s:#}"
    );
    assert_eq!(state_of(&s, &web), "quarantined", "{s:#}");
    assert_eq!(state_of(&s, &extra), "quarantined", "{s:#}");
    // Held, not removed: the old container of revision 1 still runs; the
    // new module was not made; the local module runs on.
    assert_eq!(n.container_id(&web), web_before);
    assert!(n.container(&extra).is_none());
    n.wait_for(30, "the local module converged", || {
        state_of(&status(&agent), &local) == "converged"
    });
    let (code, body) = agent.get("/readyz");
    assert_eq!(code, 503, "{body}");
    assert!(
        body.contains("quarantined by the crash guard: plane revision 2"),
        "{body}"
    );
    n.wait_for(30, "a report saying quarantined", || {
        plane
            .report_json(&n.id)
            .is_some_and(|r| r["quarantine"]["revision"]["revision"] == 2)
    });
    assert_eq!(n.creates_since(&web, since), 0);

    // The next revision is taken as any other: the hold is lifted. (It
    // states both modules anew: one it kept as revision 2 stated it would
    // still be what the agent died on.)
    plane.publish(
        &n.id,
        &signed(
            &key,
            &n,
            3,
            vec![module(&web, "three"), module(&extra, "y")],
        ),
    );
    wait_v(&n, &web, "three");
    wait_v(&n, &extra, "y");
    n.wait_for(30, "the quarantine lifted", || {
        let s = status(&agent);
        s["node"]["quarantine"].is_null() && state_of(&s, &web) != "quarantined"
    });
    assert_eq!(
        n.creates_since(&web, since),
        1,
        "{:?}",
        n.events_since(&web, since)
    );
    let (code, body) = agent.get("/readyz");
    assert_eq!(code, 200, "{body}");
}

#[test]
fn a_local_module_the_agent_dies_on_is_held_across_restarts_until_it_is_edited() {
    let n = Node::new("guard-mod");
    let (bad, good) = (n.module("bad"), n.module("good"));
    let text = |m: &str, v: &str| {
        format!(
            "name = {m:?}\nimage = {IMAGE_1:?}\ncommand = [\"sh\", \"-c\", {:?}]\nenv = {{ V = {v:?} }}\n",
            idle_after("echo V=$V")
        )
    };
    n.write_intention("bad.toml", text(&bad, "one"));
    n.write_intention("good.toml", text(&good, "one"));
    let (agent, died) = start_until_it_holds(&n, &format!("resolve:module:{bad}"));
    assert_eq!(died, 3, "{}", Agent::log(&n));
    n.wait_for(30, "a pass", || {
        status(&agent)["node"]["passes"].as_u64() >= Some(1)
    });
    let s = status(&agent);
    assert_eq!(
        s["node"]["quarantine"]["modules"][0]["module"],
        bad.as_str(),
        "{s:#}"
    );
    assert_eq!(state_of(&s, &bad), "quarantined", "{s:#}");
    assert!(s["node"]["quarantine"]["revision"].is_null(), "{s:#}");
    wait_v(&n, &good, "one");
    assert!(n.container(&bad).is_none());
    drop(agent);

    // The hold is kept in the store: a start without the fault still
    // holds it, until its intention changes.
    let agent = Agent::start(&n);
    n.wait_for(30, "a pass", || {
        status(&agent)["node"]["passes"].as_u64() >= Some(1)
    });
    assert_eq!(state_of(&status(&agent), &bad), "quarantined");
    assert!(n.container(&bad).is_none());
    n.write_intention("bad.toml", text(&bad, "two"));
    wait_v(&n, &bad, "two");
    n.wait_for(30, "the quarantine lifted", || {
        status(&agent)["node"]["quarantine"].is_null()
    });
}

#[test]
fn a_document_the_agent_dies_judging_three_times_is_not_judged_again() {
    let key = SecretKey::generate().unwrap();
    let plane = Plane::start();
    let n = node("guard-doc", &plane, &key);
    let web = n.module("web");
    plane.publish(&n.id, &signed(&key, &n, 1, vec![module(&web, "one")]));
    let agent = Agent::start(&n);
    wait_v(&n, &web, "one");
    drop(agent);
    plane.publish(&n.id, &signed(&key, &n, 2, vec![module(&web, "two")]));
    for _ in 0..3 {
        let mut child = Agent::spawn_with(
            &n,
            &[],
            &[("STEAD_CRASH_AT".into(), "plane:after-verify".into())],
        );
        assert!(!child.wait().unwrap().success());
    }
    let agent = Agent::start(&n);
    n.wait_for(60, "the document refused as quarantined", || {
        let (_, body) = agent.get("/v1/plane");
        serde_json::from_str::<J>(&body).is_ok_and(|p| p["refusal"]["class"] == "quarantined")
    });
    assert!(n.logs(&web).contains("V=one") && !n.logs(&web).contains("V=two"));
    let s = status(&agent);
    assert!(
        s["node"]["quarantine"]["document"]["digest"].is_string(),
        "{s:#}"
    );
    // Another document is judged as ever.
    plane.publish(&n.id, &signed(&key, &n, 3, vec![module(&web, "three")]));
    wait_v(&n, &web, "three");
}

#[test]
fn a_composition_the_agent_dies_in_three_times_is_not_tried_again_until_a_document_changes() {
    // Every start dies composing (as an out-of-memory kill would: an abort,
    // no panic hook): the note stored before the step counts each death.
    let key = SecretKey::generate().unwrap();
    let plane = Plane::start();
    let n = node("guard-compose", &plane, &key);
    let web = n.module("web");
    let g = format!("{}-g", n.id);
    let group =
        |revision, v| group_payload(&g, revision, vec![module(&web, v)], serde_json::json!({}));
    publish_group(&plane, &key, &g, &group(1, "one"));
    let mut doc = payload(&n, 1, vec![]);
    doc["groups"] = serde_json::json!([g]);
    plane.publish(&n.id, &sign(&key, &doc));
    for _ in 0..3 {
        let mut child = Agent::spawn_with(
            &n,
            &[],
            &[("STEAD_CRASH_AT".into(), "plane:composing".into())],
        );
        assert!(!child.wait().unwrap().success());
    }
    assert!(Agent::log(&n).contains("STEAD_CRASH_AT=plane:composing: aborting"));
    let agent = Agent::start(&n);
    let p = wait_plane(&n, &agent, "the composition refused as quarantined", |p| {
        p["refusal"]["class"] == "quarantined"
    });
    let detail = p["refusal"]["detail"].as_str().unwrap();
    assert!(
        detail.contains("died 3 times in a row composing node document revision 1"),
        "{detail}"
    );
    let s = status(&agent);
    let q = &s["node"]["quarantine"]["document"];
    assert_eq!(q["crashes"], 3, "{s:#}");
    assert_eq!(q["cause"], "killed, no panic recorded", "{s:#}");
    assert_eq!(agent.get("/healthz").0, 200, "reachable");
    n.wait_for(30, "the report says it", || {
        plane
            .report_json(&n.id)
            .is_some_and(|r| r["quarantine"]["document"]["crashes"] == 3)
    });
    assert!(n.container(&web).is_none(), "nothing of it ran");
    // A new revision of the group is a new composition: tried anew.
    publish_group(&plane, &key, &g, &group(2, "two"));
    wait_v(&n, &web, "two");
}
