//! How a module is living, as `GET /v1/status` and `stead status` say it,
//! with the real agent process and the real Docker Engine: a container
//! that keeps exiting reads crash-looping with its restart count, and its
//! module recovers once its intention is fixed.

mod common;

use common::agent::Agent;
use common::intention::Module;
use common::*;
use serde_json::Value as J;

/// The module's entry in `GET /v1/status`.
fn status_of(agent: &Agent, module: &str) -> J {
    let (code, body) = agent.get("/v1/status");
    assert_eq!(code, 200, "{body}");
    let s: J = serde_json::from_str(&body).unwrap();
    s["modules"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|m| m["name"] == module)
        .cloned()
        .unwrap_or(J::Null)
}

/// The module's line in `stead status`.
fn cli_line(n: &Node, module: &str) -> String {
    let (code, out) = n.cli(&["status"]);
    assert_eq!(code, Some(0), "{out}");
    out.lines()
        .find(|l| l.split_whitespace().next() == Some(module))
        .unwrap_or_else(|| panic!("no line for {module}:\n{out}"))
        .to_string()
}

fn intention(module: &str, command: &str) -> Module {
    Module::new(module, IMAGE_1)
        .set("restart", "\"always\"")
        .sh(command)
}

#[test]
fn a_crash_loop_is_said_with_its_restarts_and_recovers_once_fixed() {
    let n = Node::new("status-crash")
        .with_heartbeat("300ms")
        .with_config(QUICK_CRASH_LOOP);
    let m = n.module("crash");
    n.write_intention("m.toml", intention(&m, "echo boom; exit 3"));
    let agent = Agent::start(&n);

    // Always exiting non-zero: crash-looping, with the engine's restarts.
    n.wait_for(60, "crash-looping", || {
        status_of(&agent, &m)["state"] == "crash-looping"
    });
    let s = status_of(&agent, &m);
    let restarts = s["restart_count"].as_u64().unwrap_or(0);
    assert!(restarts >= 3, "{s:#}");
    assert!(s["container_id"].is_string(), "{s:#}");
    // The CLI says the same: its state and a restart count at least as
    // high (the engine keeps restarting it meanwhile).
    let line = cli_line(&n, &m);
    let cols: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(cols.get(1), Some(&"crash-looping"), "{line}");
    let shown: u64 = cols.get(2).and_then(|c| c.parse().ok()).unwrap_or(0);
    assert!(shown >= restarts, "{line} (API said {restarts})");

    // Fixed: a new target, acted on at once (no back-off), and converged
    // once up for the settle window.
    n.write_intention("m.toml", intention(&m, &idle_after("echo up")));
    n.wait_for(60, "converged", || {
        status_of(&agent, &m)["state"] == "converged"
    });
    let s = status_of(&agent, &m);
    assert_eq!(s["restart_count"], 0, "{s:#}");
    assert_eq!(s["last_action"]["action"], "recreated", "{s:#}");
    assert!(s["last_error"].is_null(), "{s:#}");
    let (_, state, _) = n.container(&m).expect("its container");
    assert_eq!(state, "running");
    let line = cli_line(&n, &m);
    assert_eq!(line.split_whitespace().nth(1), Some("converged"), "{line}");
}
