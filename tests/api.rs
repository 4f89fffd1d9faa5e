//! The HTTP API, the CLI client, file watching and crash-loop status, with
//! the real agent process, its real HTTP server on 127.0.0.1:0 and the real
//! Docker Engine.

mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::agent::Agent;
use common::intention::Module;
use common::*;
use hyper::Method;
use serde_json::{Value as J, json};
use stead::cli::client::{Answer, Client};

/// A running agent and a client of its API.
/// The agent is dropped (killed) before the node removes its containers.
struct Running {
    _agent: Agent,
    node: Node,
    addr: SocketAddr,
    token: String,
    rt: tokio::runtime::Runtime,
}

impl Running {
    fn start(node: Node) -> Running {
        let agent = Agent::start(&node);
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let mut r = Running {
            addr: agent.addr.parse().unwrap(),
            _agent: agent,
            node,
            token: String::new(),
            rt,
        };
        r.token = std::fs::read_to_string(r.node.data().join("api-token"))
            .unwrap()
            .trim()
            .to_string();
        r
    }

    fn client(&self) -> Client {
        Client::new(self.addr, Some(self.token.clone()))
    }

    fn call(&self, method: Method, path: &str, body: Option<J>) -> Answer {
        self.rt
            .block_on(self.client().request(method, path, body.as_ref()))
            .unwrap()
    }

    fn module(&self, m: &str) -> J {
        let a = self.call(Method::GET, &format!("/v1/modules/{m}"), None);
        assert_eq!(a.status, 200, "{:?}", a.body);
        a.body
    }

    fn wait_state(&self, m: &str, state: &str) -> J {
        self.wait_module(m, state, |j| j["state"] == state)
    }

    /// The module's view once `ready` holds of it (40 s at most).
    fn wait_module(&self, m: &str, what: &str, ready: impl Fn(&J) -> bool) -> J {
        let end = Instant::now() + Duration::from_secs(40);
        let mut last = J::Null;
        while Instant::now() < end {
            // Unknown (404) until the first pass has read its intention.
            let a = self.call(Method::GET, &format!("/v1/modules/{m}"), None);
            assert!(matches!(a.status, 200 | 404), "{:?}", a.body);
            last = a.body;
            if ready(&last) {
                return last;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("{m} never reached {what}: last {last:#}");
    }

    /// Raw bytes to the API, for what the client would never send.
    fn raw(&self, request: &[u8]) -> String {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(self.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        // The server may answer and close before reading all of a body it
        // refuses; what it answered is still there to read.
        let _ = s.write_all(request);
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        out
    }
}

fn module_text(name: &str, policy: &str, extra: &str) -> Module {
    Module::new(name, IMAGE_1)
        .idle("cat /etc/m/config.json")
        .set("on_drift", &format!("{policy:?}"))
        .set("restart", "\"unless-stopped\"")
        .raw(extra)
        .json_config(
            "/etc/m/config.json",
            "{ level = \"info\", database = { url = \"\" } }",
        )
}

fn fast(node: Node) -> Node {
    node.with_heartbeat("500ms")
        .with_config("settle_window = \"1s\"")
}

#[test]
fn a_settings_patch_recreates_once_and_reports_converged() {
    let n = fast(Node::new("patch"));
    let m = n.module("p");
    n.write_intention("p.toml", module_text(&m, "recreate", ""));
    let r = Running::start(n);
    let first = r.wait_state(&m, "converged");
    let since = unix_now();
    let a = r.call(
        Method::PATCH,
        &format!("/v1/intentions/{m}/settings"),
        Some(json!({"database.url": "pg://patched"})),
    );
    assert_eq!(a.status, 200, "{:?}", a.body);
    r.node.wait_logs(&m, "pg://patched");
    let after = r.wait_state(&m, "converged");
    assert_ne!(after["running_digest"], first["running_digest"]);
    assert_eq!(after["running_digest"], after["desired_digest"]);
    assert_eq!(after["last_action"]["action"], "recreated");
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(r.node.creates_since(&m, since), 1, "exactly one recreate");

    // The intention shows the layered setting and where the module came from.
    let i = r.call(Method::GET, &format!("/v1/intentions/{m}"), None);
    assert_eq!(i.body["source"]["kind"], "file");
    assert_eq!(i.body["settings_overlay"]["database.url"], "pg://patched");
    assert_eq!(
        i.body["effective"]["settings"]["database.url"],
        "pg://patched"
    );

    // A null removes the key: back to the file's (absent) setting.
    let a = r.call(
        Method::PATCH,
        &format!("/v1/intentions/{m}/settings"),
        Some(json!({"database.url": null})),
    );
    assert_eq!(a.status, 200, "{:?}", a.body);
    r.node.wait_logs(&m, "\"url\": \"\"");

    // A patch that changes nothing is a no-op: same revision, no event.
    let rev = r
        .call(Method::GET, &format!("/v1/intentions/{m}"), None)
        .body["revision"]
        .clone();
    // Intention events (a recreate of the last change may still be said).
    let events = |r: &Running| {
        r.call(Method::GET, "/v1/events?limit=1000", None).body["events"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["kind"] == "intention")
            .count()
    };
    let before = events(&r);
    for body in [json!({}), json!({"database.url": null})] {
        let a = r.call(
            Method::PATCH,
            &format!("/v1/intentions/{m}/settings"),
            Some(body),
        );
        assert_eq!(a.status, 200, "{:?}", a.body);
        assert_eq!(a.body["changed"], false, "{:?}", a.body);
        assert_eq!(a.body["revision"], rev);
    }
    assert_eq!(events(&r), before);
}

#[test]
fn an_update_lock_holds_off_a_recreate_until_released_or_its_container_dies() {
    let n = fast(Node::new("lock"));
    let (m, other) = (n.module("l"), n.module("o"));
    n.write_intention("l.toml", module_text(&m, "recreate", ""));
    n.write_intention("o.toml", module_text(&other, "recreate", ""));
    let r = Running::start(n);
    let first = r.wait_state(&m, "converged");
    r.wait_state(&other, "converged");
    let lock = |module: &str, body: J| {
        r.call(
            Method::POST,
            &format!("/v1/modules/{module}/lock"),
            Some(body),
        )
    };
    let locks = || r.call(Method::GET, "/v1/locks", None).body["locks"].clone();
    let patch = |module: &str, url: &str| {
        let a = r.call(
            Method::PATCH,
            &format!("/v1/intentions/{module}/settings"),
            Some(json!({ "database.url": url })),
        );
        assert_eq!(a.status, 200, "{:?}", a.body);
    };

    // Bad asks are refused naming what is wrong, and take nothing.
    for (body, status, field) in [
        (json!({}), 422, "reason"),
        (json!({"reason": "  "}), 422, "reason"),
        (json!({"reason": "a\nb"}), 422, "reason"),
        (json!({"reason": "x", "scope": "site"}), 422, "scope"),
        (json!({"reason": "x", "until": 1}), 422, "(body)"),
        (json!([1]), 422, "(body)"),
    ] {
        let a = lock(&m, body.clone());
        assert_eq!(a.status, status, "{body}: {:?}", a.body);
        assert_eq!(a.body["error"]["field"], field, "{body}: {:?}", a.body);
    }
    let a = lock("nothing-runs", json!({"reason": "x"}));
    assert_eq!(a.status, 409, "{:?}", a.body);
    assert!(
        a.body.to_string().contains("no running container"),
        "{:?}",
        a.body
    );
    let anonymous = Client::new(r.addr, None);
    let a =
        r.rt.block_on(anonymous.request(
            Method::POST,
            &format!("/v1/modules/{m}/lock"),
            Some(&json!({"reason": "x"})),
        ))
        .unwrap();
    assert_eq!(a.status, 401, "{:?}", a.body);
    assert_eq!(locks(), json!([]));

    // Held by the module: its own recreate waits, with the same container,
    // saying for what; another module's goes on.
    let a = lock(&m, json!({"reason": "taking a payment"}));
    assert_eq!(a.status, 200, "{:?}", a.body);
    assert_eq!(a.body["container_id"], first["container_id"]);
    assert_eq!(a.body["scope"], "module");
    assert_eq!(locks().as_array().unwrap().len(), 1);
    let since = unix_now();
    patch(&m, "pg://locked");
    patch(&other, "pg://free");
    r.node.wait_logs(&other, "pg://free");
    let held = r.wait_state(&m, "deferred");
    assert_eq!(held["container_id"], first["container_id"]);
    let why = held["last_error"].as_str().unwrap_or_default();
    assert!(
        why.contains(&format!("the update lock of {m} (\"taking a payment\"")),
        "{held:#}"
    );
    std::thread::sleep(Duration::from_secs(3));
    let still = r.module(&m);
    assert_eq!(still["state"], "deferred", "{still:#}");
    assert_eq!(still["container_id"], first["container_id"]);
    assert_eq!(r.node.creates_since(&m, since), 0);

    // Its container started again (as a crash the engine restarts would):
    // the lock is gone with that life, and the recreate is made, once.
    restart_by_hand(first["container_id"].as_str().unwrap());
    r.node.wait_logs(&m, "pg://locked");
    let after = r.wait_state(&m, "converged");
    assert_ne!(after["container_id"], first["container_id"]);
    assert_eq!(locks(), json!([]));
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(r.node.creates_since(&m, since), 1, "exactly one recreate");
    let events = r.call(Method::GET, "/v1/events?limit=1000", None).body["events"].to_string();
    assert!(
        // "stopped" or "was started again", as the pass saw it.
        events.contains("released: the container it was taken for"),
        "{events}"
    );

    // A device lock, held by the other module, holds off every recreate
    // until it is released.
    let a = lock(
        &other,
        json!({"reason": "firmware flash", "scope": "device"}),
    );
    assert_eq!(a.status, 200, "{:?}", a.body);
    let since = unix_now();
    patch(&m, "pg://device");
    let held = r.wait_state(&m, "deferred");
    assert!(
        held["last_error"]
            .as_str()
            .unwrap_or_default()
            .contains(&format!("the device's update lock, held by {other}")),
        "{held:#}"
    );
    assert_eq!(held["container_id"], after["container_id"]);
    let a = r.call(Method::DELETE, &format!("/v1/modules/{other}/lock"), None);
    assert_eq!(
        (a.status, &a.body["released"]),
        (200, &json!(true)),
        "{:?}",
        a.body
    );
    r.node.wait_logs(&m, "pg://device");
    r.wait_state(&m, "converged");
    assert_eq!(r.node.creates_since(&m, since), 1, "exactly one recreate");
    let a = r.call(Method::DELETE, &format!("/v1/modules/{other}/lock"), None);
    assert_eq!(
        (a.status, &a.body["released"]),
        (200, &json!(false)),
        "{:?}",
        a.body
    );
}

#[test]
fn a_lock_file_in_the_modules_lock_directory_holds_off_its_recreate_for_its_life() {
    let n = fast(Node::new("lockfile"));
    let m = n.module("f");
    n.write_intention(
        "f.toml",
        module_text(&m, "recreate", "update_lock = \"/run/lock/stead\""),
    );
    let r = Running::start(n);
    let first = r.wait_state(&m, "converged");
    let id = first["container_id"].as_str().unwrap().to_string();
    let locks = || r.call(Method::GET, "/v1/locks", None).body["locks"].clone();
    let patch = |url: &str| {
        let a = r.call(
            Method::PATCH,
            &format!("/v1/intentions/{m}/settings"),
            Some(json!({ "database.url": url })),
        );
        assert_eq!(a.status, 200, "{:?}", a.body);
    };
    let in_container = |id: &str, script: &str| docker_ok(&["exec", id, "sh", "-c", script]);

    // The module makes the file, as balena's modules do: its recreate
    // waits, naming it and the reason on its first line.
    in_container(
        &id,
        "echo 'taking a payment' > /run/lock/stead/updates.lock",
    );
    let since = unix_now();
    patch("pg://file");
    let held = r.wait_state(&m, "deferred");
    let why = held["last_error"].as_str().unwrap_or_default();
    assert!(
        why.contains(&format!(
            "the update lock of {m} (its lock file) (\"taking a payment\""
        )),
        "{held:#}"
    );
    assert_eq!(locks()[0]["by"], "file", "{}", locks());
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(r.node.container_id(&m), id);
    assert_eq!(r.node.creates_since(&m, since), 0);

    // It removes the file: the lock goes, the recreate is made, once.
    in_container(&id, "rm /run/lock/stead/updates.lock");
    r.node.wait_logs(&m, "pg://file");
    let after = r.wait_state(&m, "converged");
    let id = after["container_id"].as_str().unwrap().to_string();
    assert_eq!(locks(), json!([]));
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(r.node.creates_since(&m, since), 1, "exactly one recreate");

    // Held by a container that then dies: released with that life, and
    // the file is gone from the directory its next life sees.
    in_container(&id, "echo 'device flash' > /run/lock/stead/device.lock");
    r.wait_module(&m, "the lock taken", |_| {
        locks().as_array().is_some_and(|l| l.len() == 1)
    });
    assert_eq!(locks()[0]["scope"], "device");
    restart_by_hand(&id);
    r.wait_module(&m, "the lock released", |_| locks() == json!([]));
    let left = in_container(&id, "ls /run/lock/stead");
    assert_eq!(left, "", "the lock file outlived its container's life");
    let events = r.call(Method::GET, "/v1/events?limit=1000", None).body["events"].to_string();
    assert!(
        events.contains("(its lock file) (\\\"device flash\\\"")
            && events.contains("released: the container it was taken for"),
        "{events}"
    );

    // A file older than the container's start (left from a life before)
    // is removed, and holds nothing.
    let since = unix_now();
    in_container(
        &id,
        "echo stale > /run/lock/stead/updates.lock && touch -d '2000-01-01 00:00:00' /run/lock/stead/updates.lock",
    );
    patch("pg://after-stale");
    r.node.wait_logs(&m, "pg://after-stale");
    r.wait_state(&m, "converged");
    assert_eq!(r.node.creates_since(&m, since), 1);
    let events = r.call(Method::GET, "/v1/events?limit=1000", None).body["events"].to_string();
    assert!(
        events.contains("made before its container's present life removed"),
        "{events}"
    );
}

#[test]
fn a_report_module_shows_drifted_naming_the_config_file() {
    let n = fast(Node::new("drift"));
    let m = n.module("d");
    n.write_intention("d.toml", module_text(&m, "report", ""));
    let r = Running::start(n);
    let first = r.wait_state(&m, "converged");
    let a = r.call(
        Method::PATCH,
        &format!("/v1/intentions/{m}/settings"),
        Some(json!({"level": "debug"})),
    );
    assert_eq!(a.status, 200);
    let d = r.wait_state(&m, "drifted");
    assert_eq!(d["container_id"], first["container_id"], "left running");
    let differ = d["inputs_differ"].as_array().unwrap();
    assert_eq!(differ.len(), 1, "{d:#}");
    assert_eq!(differ[0]["input"], "config:/etc/m/config.json");
    assert_ne!(differ[0]["running"], differ[0]["desired"]);
    assert_ne!(d["running_digest"], d["desired_digest"]);
}

#[test]
fn a_mounted_file_rewrite_is_acted_on_without_the_heartbeat() {
    let n = Node::new("watch")
        .with_heartbeat("10m")
        .with_config("settle_window = \"1s\"");
    let m = n.module("w");
    let f = n.write_host("model.bin", "v1");
    let text = format!(
        "name = \"{m}\"\nimage = \"{IMAGE_1}\"\ncommand = [\"sh\", \"-c\", {:?}]\n[[mounts]]\nsource = {f:?}\ntarget = \"/model.bin\"\nread_only = true\n",
        idle_after("cat /model.bin; echo")
    );
    n.write_intention("w.toml", &text);
    let r = Running::start(n);
    r.node.wait_logs(&m, "v1");
    for v in ["v2", "v3"] {
        // Replaced by rename, as editors and atomic writers do.
        let tmp = f.with_extension("tmp");
        std::fs::write(&tmp, v).unwrap();
        std::fs::rename(&tmp, &f).unwrap();
        // The heartbeat is ten minutes: only the watch can have triggered this.
        r.node.wait_logs(&m, v);
    }
    // A new intention file is picked up the same way.
    let m2 = r.node.module("w2");
    r.node
        .write_intention("w2.toml", module_text(&m2, "recreate", ""));
    r.node.wait_for(20, "the new module's container", || {
        r.node.container(&m2).is_some()
    });
}

#[test]
fn bad_requests_get_their_status_and_change_nothing() {
    let n = fast(Node::new("badreq"));
    let m = n.module("b");
    n.write_intention("b.toml", module_text(&m, "recreate", ""));
    let r = Running::start(n);
    r.wait_state(&m, "converged");
    // A module of the API's own, to try writes on.
    let api_mod = r.node.module("api");
    let good = json!({"name": api_mod, "image": IMAGE_1, "command": ["sh", "-c", idle_after("true")],
        "config": {"path": "/etc/a.json", "format": "json", "defaults": {"x": 1}}});
    let a = r.call(
        Method::PUT,
        &format!("/v1/intentions/{api_mod}"),
        Some(good.clone()),
    );
    assert_eq!(a.status, 201, "{:?}", a.body);
    r.wait_state(&api_mod, "converged");
    let snapshot = || {
        let i = r.call(Method::GET, "/v1/intentions", None).body;
        let ids = (r.node.container_id(&m), r.node.container_id(&api_mod));
        (i, ids)
    };
    let before = snapshot();
    let path = format!("/v1/intentions/{api_mod}");

    // (what, token, method, path, body, status, text in the answer)
    type Case<'a> = (
        &'a str,
        Option<&'a str>,
        Method,
        String,
        Vec<u8>,
        u16,
        &'a str,
    );
    let cases: Vec<Case> = vec![
        (
            "malformed JSON",
            Some(&r.token),
            Method::PUT,
            path.clone(),
            b"{\"name\": ".to_vec(),
            400,
            "malformed JSON",
        ),
        (
            "unknown field",
            Some(&r.token),
            Method::PUT,
            path.clone(),
            {
                let mut g = good.clone();
                g["colour"] = json!("red");
                g.to_string().into_bytes()
            },
            422,
            "colour",
        ),
        (
            "a live file the engine cannot mount",
            Some(&r.token),
            Method::PUT,
            path.clone(),
            {
                let mut g = good.clone();
                g["config"] =
                    json!({"path": "/app.json", "format": "json", "reload": "signal:SIGHUP"});
                g.to_string().into_bytes()
            },
            422,
            "/app.json is directly under /",
        ),
        (
            "path traversal in a file path",
            Some(&r.token),
            Method::PUT,
            path.clone(),
            {
                let mut g = good.clone();
                g["files"] = json!([{"path": "/etc/../../root/x", "content": "x"}]);
                g.to_string().into_bytes()
            },
            422,
            "files[0].path",
        ),
        (
            "name differs from the path",
            Some(&r.token),
            Method::PUT,
            path.clone(),
            {
                let mut g = good.clone();
                g["name"] = json!("other");
                g.to_string().into_bytes()
            },
            422,
            "name",
        ),
        (
            "wrong token",
            Some("not-the-token"),
            Method::PUT,
            path.clone(),
            good.to_string().into_bytes(),
            401,
            "wrong bearer token",
        ),
        (
            "missing token",
            None,
            Method::DELETE,
            path.clone(),
            vec![],
            401,
            "missing Authorization",
        ),
        (
            "oversized body",
            Some(&r.token),
            Method::PUT,
            path.clone(),
            vec![b' '; 2 * 1024 * 1024],
            413,
            "over",
        ),
        (
            "unknown module",
            Some(&r.token),
            Method::PATCH,
            "/v1/intentions/nosuchmodule/settings".into(),
            b"{\"a\": 1}".to_vec(),
            404,
            "no module",
        ),
        (
            "invalid module name",
            Some(&r.token),
            Method::DELETE,
            "/v1/intentions/..%2Fetc".into(),
            vec![],
            400,
            "invalid module name",
        ),
        (
            "a setting through a scalar",
            Some(&r.token),
            Method::PATCH,
            format!("{path}/settings"),
            b"{\"x.y\": 2}".to_vec(),
            422,
            "x is an integer",
        ),
        (
            "a bad setting key",
            Some(&r.token),
            Method::PATCH,
            format!("{path}/settings"),
            b"{\"a..b\": 2}".to_vec(),
            422,
            "invalid setting key",
        ),
        (
            "settings not an object",
            Some(&r.token),
            Method::PATCH,
            format!("{path}/settings"),
            b"[1]".to_vec(),
            422,
            "object",
        ),
        (
            "replacing a file's module",
            Some(&r.token),
            Method::PUT,
            format!("/v1/intentions/{m}"),
            {
                let mut g = good.clone();
                g["name"] = json!(m);
                g.to_string().into_bytes()
            },
            409,
            "defined by the file",
        ),
        (
            "deleting a file's module",
            Some(&r.token),
            Method::DELETE,
            format!("/v1/intentions/{m}"),
            vec![],
            409,
            "defined by the file",
        ),
        (
            "unknown route",
            None,
            Method::GET,
            "/v2/nothing".into(),
            vec![],
            404,
            "no such route",
        ),
        (
            "wrong method",
            None,
            Method::POST,
            "/v1/status".into(),
            vec![],
            405,
            "not allowed",
        ),
        (
            "bad events cursor",
            None,
            Method::GET,
            "/v1/events?since=soon".into(),
            vec![],
            400,
            "since",
        ),
    ];
    for (what, token, method, path, body, status, text) in cases {
        let mut req = format!(
            "{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: {}\r\n",
            body.len()
        );
        if let Some(t) = token {
            req.push_str(&format!("Authorization: Bearer {t}\r\n"));
        }
        req.push_str("\r\n");
        let mut bytes = req.into_bytes();
        bytes.extend(&body);
        let out = r.raw(&bytes);
        let head = out.lines().next().unwrap_or("");
        assert!(
            head.contains(&format!(" {status} ")),
            "{what}: {head}\n{out}"
        );
        assert!(out.contains(text), "{what}: {out}");
        assert!(out.contains("\"error\""), "{what}: a JSON error: {out}");
    }
    // Oversized: declared (refused from the header, before any body is
    // read), and streamed without a length (refused once past 1 MiB).
    let declared = format!(
        "PUT {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\nContent-Length: 2097152\r\n\r\n",
        r.token
    );
    let out = r.raw(declared.as_bytes());
    assert!(out.starts_with("HTTP/1.1 413 "), "{out}");
    let mut chunked = format!("PUT {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n", r.token, 1024 * 1024 + 1).into_bytes();
    chunked.extend(vec![b' '; 1024 * 1024 + 1]);
    chunked.extend(b"\r\n");
    let out = r.raw(&chunked);
    assert!(out.starts_with("HTTP/1.1 413 "), "{out}");

    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(snapshot(), before, "a refused request changed something");

    // A file naming the API's module is refused; the API's module stays.
    r.node
        .write_intention("clash.toml", module_text(&api_mod, "recreate", ""));
    r.node.wait_for(20, "the clash to be reported", || {
        r.module(&api_mod)["last_error"]
            .as_str()
            .is_some_and(|e| e.contains("stated through the API"))
    });
    let i = r.call(Method::GET, &path, None);
    assert_eq!(i.body["source"]["kind"], "api");
}

#[test]
fn settling_then_converged_and_crash_looping_with_bounded_actions() {
    let n = Node::new("crashloop")
        .with_heartbeat("300ms")
        .with_config("settle_window = \"3s\"\ncrash_loop_restarts = 5");
    let settle = n.module("settle");
    let looping = n.module("loop");
    let counter = n.dir.path().join("host").join("counter");
    std::fs::create_dir_all(&counter).unwrap();
    // Exits 3 times, then stays up.
    let settle_cmd = "n=$(cat /state/n 2>/dev/null || echo 0); n=$((n+1)); echo $n > /state/n; [ $n -le 3 ] && exit 1; echo up; trap 'exit 0' TERM; while :; do sleep 0.2; done";
    n.write_intention(
        "s.toml",
        format!("name = \"{settle}\"\nimage = \"{IMAGE_1}\"\ncommand = [\"sh\", \"-c\", {settle_cmd:?}]\nrestart = \"always\"\n[[mounts]]\nsource = {counter:?}\ntarget = \"/state\"\n"),
    );
    n.write_intention(
        "l.toml",
        format!("name = \"{looping}\"\nimage = \"{IMAGE_1}\"\ncommand = [\"sh\", \"-c\", \"echo boom; exit 3\"]\nrestart = \"always\"\n"),
    );
    let start = unix_now();
    let r = Running::start(n);
    // Settling once the engine has restarted it; the count comes from the
    // engine's events, which may trail the state "restarting" on a loaded
    // machine (CI saw settling with a count of 0).
    r.wait_module(&settle, "settling with a restart counted", |s| {
        s["state"] == "settling" && s["restart_count"].as_u64() >= Some(1)
    });
    let c = r.wait_state(&settle, "converged");
    assert_eq!(c["restart_count"], 3, "{c:#}");

    r.wait_state(&looping, "crash-looping");
    // The restarts are counted from the engine's events, which may trail
    // the back-off that first says crash-looping on a loaded machine.
    let end = Instant::now() + Duration::from_secs(40);
    let l = loop {
        let l = r.module(&looping);
        if l["state"] == "crash-looping" && l["restart_count"].as_u64() >= Some(5) {
            break l;
        }
        assert!(
            Instant::now() < end,
            "never crash-looping with 5 restarts: {l:#}"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(l["state"], "crash-looping", "{l:#}");
    // It stays crash-looping, and the agent does not fight the engine: its
    // own creates and starts of the module are bounded (one create, and at
    // most a backed-off start or two), however often the engine restarts it.
    std::thread::sleep(Duration::from_secs(8));
    let l = r.module(&looping);
    assert_eq!(l["state"], "crash-looping", "{l:#}");
    let events = r.call(Method::GET, "/v1/events?limit=1000", None);
    let acts = events.body["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| {
            e["module"] == looping.as_str()
                && ["created", "started", "recreated"].contains(&e["kind"].as_str().unwrap())
        })
        .count();
    assert!(
        (1..=3).contains(&acts),
        "the agent acted {acts} times on a crash-looping module"
    );
    assert_eq!(r.node.creates_since(&looping, start), 1);
    // The other module was never held up by it.
    assert_eq!(r.module(&settle)["state"], "converged");
}

#[test]
fn concurrent_clients_are_all_answered_and_no_write_is_lost() {
    let n = Node::new("concurrent").with_heartbeat("1s");
    let m = n.module("c");
    n.write_intention("c.toml", module_text(&m, "report", ""));
    let r = Running::start(n);
    r.wait_state(&m, "starting");
    let clients = 64;
    let writes_each = 5;
    let client = r.client();
    let module = m.clone();
    let (answered, statuses) = r.rt.block_on(async move {
        let client = std::sync::Arc::new(client);
        let mut tasks = Vec::new();
        for k in 0..clients {
            let c = client.clone();
            let module = module.clone();
            tasks.push(tokio::spawn(async move {
                let mut codes = Vec::new();
                for w in 0..writes_each {
                    let a = c
                        .request(
                            Method::PATCH,
                            &format!("/v1/intentions/{module}/settings"),
                            Some(&json!({ format!("c{k}"): w })),
                        )
                        .await
                        .unwrap();
                    codes.push(a.status);
                    let s = c.request(Method::GET, "/v1/status", None).await.unwrap();
                    codes.push(s.status);
                }
                codes
            }));
        }
        let mut all = Vec::new();
        for t in tasks {
            all.extend(t.await.unwrap());
        }
        (all.len(), all)
    });
    assert_eq!(answered, clients * writes_each * 2);
    assert!(statuses.iter().all(|s| *s == 200), "{statuses:?}");
    let i = r.call(Method::GET, &format!("/v1/intentions/{m}"), None);
    for k in 0..clients {
        assert_eq!(
            i.body["settings_overlay"][format!("c{k}")],
            writes_each - 1,
            "client {k}'s last write"
        );
    }
    // Every write bumped the revision exactly once.
    assert_eq!(i.body["revision"], 1 + clients * writes_each);
}

#[test]
fn health_readiness_metrics_events_and_the_cli() {
    let n = fast(Node::new("misc"));
    let m = n.module("x");
    n.write_intention("x.toml", module_text(&m, "recreate", ""));
    let r = Running::start(n);
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(r.node.data().join("api-token"))
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600, "the generated token is private");
    let dir_mode = std::fs::metadata(r.node.data())
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(dir_mode, 0o700, "the data directory is the agent's alone");
    assert_eq!(r.token.len(), 64);
    assert_eq!(r.call(Method::GET, "/healthz", None).status, 200);
    r.node.wait_for(20, "readiness", || {
        r.call(Method::GET, "/readyz", None).status == 200
    });
    r.wait_state(&m, "converged");
    let s = r.call(Method::GET, "/v1/status", None).body;
    assert_eq!(s["node"]["engine"]["state"], "reachable");
    assert!(s["node"]["passes"].as_u64().unwrap() >= 1);
    let metrics = r.call(Method::GET, "/metrics", None).text;
    let text = metrics.as_deref().expect("the metrics are text");
    for needle in [
        "stead_passes_total ",
        "stead_modules{state=\"converged\"} 1",
        "stead_engine_reachable 1",
        "stead_engine_api_calls_total{op=\"list_containers\"}",
    ] {
        assert!(text.contains(needle), "{needle} missing:\n{text}");
    }
    // The log so far (the engine reached, the intention taken, the
    // container created), read whole and then in two pages.
    let all = r
        .call(Method::GET, "/v1/events?since=0&limit=1000", None)
        .body;
    let all: Vec<u64> = all["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    assert!(all.len() >= 3, "{all:?}");
    let ev = r.call(Method::GET, "/v1/events?since=0&limit=2", None).body;
    assert_eq!(ev["events"].as_array().unwrap().len(), 2);
    let next = ev["next"].as_u64().unwrap();
    assert_eq!(next, all[1]);
    let ev2 = r
        .call(Method::GET, &format!("/v1/events?since={next}"), None)
        .body;
    let rest: Vec<u64> = ev2["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    assert!(!rest.is_empty());
    assert_eq!(
        rest[..],
        all[2..rest.len() + 2],
        "the second page follows the first"
    );

    // The CLI, with the agent's config.
    let cli = |args: &[&str]| {
        let o = r
            .node
            .stead()
            .args(args)
            .arg("--config")
            .arg(r.node.config())
            .output()
            .unwrap();
        (
            o.status.code().unwrap(),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    let (code, out, _) = cli(&["status"]);
    assert_eq!(code, 0);
    assert!(
        out.lines()
            .any(|l| l.starts_with(&m) && l.contains("converged")),
        "{out}"
    );
    let (code, out, _) = cli(&["status", "--json"]);
    assert_eq!(code, 0);
    assert!(serde_json::from_str::<J>(&out).is_ok());
    let (code, out, err) = cli(&["set", &m, "database.url=pg://cli", "level=\"warn\""]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.starts_with(&format!("{m}: revision ")), "{out}");
    r.node.wait_logs(&m, "pg://cli");
    let (code, _, err) = cli(&["set", &m, "level.deeper=1"]);
    assert_eq!(code, 1, "refused: {err}");
    assert!(err.contains("level is a string"), "{err}");
    let (code, _, _) = cli(&["unset", &m, "level"]);
    assert_eq!(code, 0);
    let (code, _, err) = cli(&["rm", &m]);
    assert_eq!(code, 1);
    assert!(err.contains("defined by the file"), "{err}");
    // apply and rm of a module of the API's own.
    let file = r.node.dir.path().join("apply.toml");
    let api_mod = r.node.module("viaapi");
    std::fs::write(&file, module_text(&api_mod, "recreate", "").toml()).unwrap();
    let (code, out, err) = cli(&["apply", file.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.starts_with(&format!("{api_mod}: revision ")) && out.ends_with("(applied)\n"),
        "{out}"
    );
    r.node.wait_for(20, "the applied module's container", || {
        r.node.container(&api_mod).is_some()
    });
    let (code, _, _) = cli(&["rm", &api_mod]);
    assert_eq!(code, 0);
    r.node
        .wait_for(20, "the removed module's container to go", || {
            r.node.container(&api_mod).is_none()
        });
    std::fs::write(&file, "name = \"Bad Name\"\nimage = \"x\"\n").unwrap();
    let (code, _, err) = cli(&["apply", file.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(err.contains("name") && err.contains("apply.toml"), "{err}");
    let (code, out, _) = cli(&["events"]);
    assert_eq!(code, 0);
    assert!(out.contains("created"), "{out}");
    // The views a person reads are the agent's text when asked for
    // text/plain, and what the CLI prints is that text as it came.
    let text = |path: &str| r.rt.block_on(r.client().text(path)).unwrap();
    let status = text("/v1/status");
    let status = status.text.expect("status as text");
    assert!(status.starts_with("node "), "{status}");
    // (Its state may be any: `unset` above had it made again.)
    assert!(
        status
            .lines()
            .any(|l| l.starts_with(&format!("{m} ")) && l.contains("sha256:")),
        "{status}"
    );
    assert!(status.lines().any(|l| l.starts_with("MODULE ")), "{status}");
    // Asked for JSON, the same endpoint answers JSON.
    assert_eq!(r.call(Method::GET, "/v1/status", None).text, None);
    for (path, args) in [
        ("/v1/agent", &["agent"][..]),
        ("/v1/reloads", &["reloads"][..]),
    ] {
        let a = text(path);
        assert_eq!(a.status, 200);
        let want = a.text.unwrap_or_else(|| panic!("{path} as text"));
        let (code, out, err) = cli(args);
        assert_eq!(code, 0, "{err}");
        assert_eq!(out, want, "{path}");
    }
    let (_, out, _) = cli(&["agent"]);
    assert!(out.starts_with("running    "), "{out}");
}

#[test]
fn the_api_answers_while_a_pass_hashes_a_large_mount() {
    let n = Node::new("busy");
    let m = n.module("big");
    // 512 MiB, sparse: reading it costs the hash, not the disk.
    let big = n.host("big.bin");
    std::fs::File::create(&big)
        .unwrap()
        .set_len(512 * 1024 * 1024)
        .unwrap();
    let text = format!(
        "name = \"{m}\"\nimage = \"{IMAGE_1}\"\ncommand = [\"sh\", \"-c\", {:?}]\n[[mounts]]\nsource = {big:?}\ntarget = \"/big.bin\"\nread_only = true\n",
        idle_after("true")
    );
    n.write_intention("big.toml", &text);
    let r = Running::start(n);
    // From the moment the API listens until the container exists, the first
    // pass reads and hashes the whole file; /healthz is asked all along.
    let mut took = Vec::new();
    while r.node.container(&m).is_none() {
        let t = Instant::now();
        let answer = r.raw(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        took.push(t.elapsed());
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        assert!(took.len() < 10_000, "the module never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        took.len() >= 3,
        "the pass was over before it could be watched: {took:?}"
    );
    // An API held up by the pass would wait out the hash (seconds, in a
    // debug build); an answer on a loaded 2-core machine can take a few
    // hundred milliseconds.
    let slowest = took.iter().max().unwrap();
    assert!(
        *slowest < Duration::from_millis(1000),
        "/healthz took {slowest:?} while the pass hashed ({} asks)",
        took.len()
    );
}

#[test]
fn the_cli_says_when_no_agent_answers() {
    let n = Node::new("noagent").with_config("");
    // The config names port 0 and no agent ever wrote its address.
    let o = n
        .stead()
        .args(["status", "--config"])
        .arg(n.config())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no agent answers"));
}
