//! The agent never exits for a missing engine, and a steady pass costs a
//! constant number of engine calls. Both go through a forwarding proxy in
//! front of the real engine's socket.

mod common;

use std::time::Duration;

use common::agent::Agent;
use common::intention::Module;
use common::*;

fn simple(name: &str, say: &str) -> Module {
    Module::new(name, IMAGE_1).idle(&format!("echo {say}"))
}

#[test]
fn the_agent_waits_for_an_engine_that_is_absent_then_goes_away() {
    let n0 = Node::new("waits");
    let sock = n0.dir.path().join("engine.sock");
    let n = n0
        .with_socket(&sock.display().to_string())
        .with_heartbeat("500ms");
    let m = n.module("w");
    n.write_intention("w.toml", simple(&m, "up"));

    // The engine's socket does not exist when the agent starts.
    let mut agent = Agent::spawn_with(&n, &[], &[]);
    std::thread::sleep(Duration::from_secs(3));
    assert!(
        agent.try_wait().unwrap().is_none(),
        "the agent exited while the engine was absent"
    );
    assert!(n.container(&m).is_none());

    // It appears: the same process converges.
    let mut proxy = Proxy::start(&sock);
    n.wait_for(
        30,
        "the module to be created once the engine appears",
        || n.container(&m).is_some(),
    );
    assert!(agent.try_wait().unwrap().is_none());

    // It goes away mid-run, and a change is made meanwhile.
    let first = n.container_id(&m);
    proxy.stop();
    let since = unix_now();
    n.write_intention("w.toml", simple(&m, "again"));
    std::thread::sleep(Duration::from_secs(3));
    assert!(
        agent.try_wait().unwrap().is_none(),
        "the agent exited when the engine went away"
    );
    let _proxy = Proxy::start(&sock);
    // The creates of containers other than the first: Podman stamps an
    // event when it writes it, which may be after the container shows in
    // a listing (the first's create was once counted as the change's).
    let creates = || {
        n.events_of_containers_since(&m, since)
            .into_iter()
            .filter(|(a, id)| a == "create" && *id != first)
            .count()
    };
    n.wait_for(30, "the change to land once the engine is back", || {
        creates() == 1
    });
    n.wait_logs(&m, "again");
    assert!(agent.try_wait().unwrap().is_none());

    agent.kill().unwrap();
    agent.wait().unwrap();
    let log = Agent::log(&n);
    // Each change of state is logged once, however many retries it took.
    let away = log
        .lines()
        .filter(|l| l.contains("waiting for it with backoff"))
        .count();
    let back = log
        .lines()
        .filter(|l| l.contains("reachable") && !l.contains("not reachable"))
        .count();
    assert_eq!(away, 2, "{log}");
    assert_eq!(back, 2, "{log}");
    // Twice 2 creates under load in clean-checkout runs, the second time
    // on Podman with the first container's create among them: say
    // everything the engine and the agent said if it happens again.
    let events = n.events_of_containers_since(&m, since);
    assert_eq!(
        creates(),
        1,
        "engine events since the change (the first container {first}): {events:?}\nagent log:\n{log}"
    );
}

/// Runs a quiet pass with `count` modules and returns the engine requests it made.
fn quiet_pass_requests(tag: &str, count: usize) -> Vec<String> {
    let n0 = Node::new(tag);
    let sock = n0.dir.path().join("engine.sock");
    // A quiet pass is one on a disk below its threshold: this machine's
    // engine shares a disk with every build, which may be fuller.
    let n = n0
        .with_socket(&sock.display().to_string())
        .with_config("settle_window = \"1s\"\n[images]\nhigh = 99\nlow = 98");
    let proxy = Proxy::start(&sock);
    for k in 0..count {
        let m = n.module(&format!("m{k}"));
        n.write_intention(&format!("{m}.toml"), simple(&m, "up"));
    }
    let out = n.once_ok();
    assert_eq!(out.matches("created").count(), count, "{out}");
    // Containers up for the settle window are judged from the list alone.
    std::thread::sleep(Duration::from_millis(2500));
    proxy.take();
    let out = n.once_ok();
    assert_eq!(out.matches("unchanged").count(), count, "{out}");
    proxy.take()
}

#[test]
fn a_quiet_pass_makes_a_constant_number_of_engine_calls() {
    let one = quiet_pass_requests("calls1", 1);
    let twenty = quiet_pass_requests("calls20", 20);
    let paths = |r: &[String]| -> Vec<String> {
        r.iter()
            .map(|l| {
                let l = l.rsplit(['}', ']']).next().unwrap_or(l);
                let mut parts = l.split_whitespace();
                let method = parts.next().unwrap_or("").to_string();
                let path = parts
                    .next()
                    .unwrap_or("")
                    .split('?')
                    .next()
                    .unwrap_or("")
                    .to_string();
                // Drop the API version prefix.
                let path = match path.strip_prefix("/v1.") {
                    Some(rest) => rest
                        .split_once('/')
                        .map_or(path.clone(), |(_, p)| format!("/{p}")),
                    None => path,
                };
                format!("{method} {path}")
            })
            .collect()
    };
    let (p1, p20) = (paths(&one), paths(&twenty));
    assert_eq!(p1.len(), p20.len(), "N=1: {p1:?}\nN=20: {p20:?}");
    assert_eq!(p1, p20);
    // A quiet pass lists containers once and images once; no per-container
    // inspect, no write. On Podman, whose list leaves out health, one
    // more list (the containers with a health check: none here, so no list
    // per health state) is the constant.
    assert_eq!(
        p20.iter().filter(|p| *p == "GET /containers/json").count(),
        if on_podman() { 2 } else { 1 },
        "{p20:?}"
    );
    assert_eq!(
        p20.iter().filter(|p| *p == "GET /images/json").count(),
        1,
        "{p20:?}"
    );
    assert!(
        p20.iter()
            .all(|p| p.starts_with("GET ") || p.starts_with("HEAD ")),
        "{p20:?}"
    );
    assert!(
        p20.len() <= if on_podman() { 6 } else { 5 },
        "connect (version, info for the data root, ping) and two lists (three on Podman): {p20:?}"
    );
}
