//! The central-plane harness itself (tests/common/plane.rs), no Docker
//! needed: nginx serves desired.json with an ETag and 304s, takes a node's
//! report by PUT and only there, goes down and comes back on its port,
//! answers faults (itself, or through the FaultProxy in front); and
//! libfaketime moves a child's wall clock to 1970 or 2100 while its
//! monotonic waits (tokio, std) still return.

mod common;

use std::process::Command;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::faults::{Fault, FaultProxy};
use common::plane::{Plane, faketime_env, http};

const NODE: &str = "n-1";
const DESIRED: &str = "/nodes/n-1/desired.json";
const STATUS: &str = "/nodes/n-1/status.json";

fn get(plane: &Plane, path: &str, headers: &[(&str, &str)]) -> common::plane::Response {
    http(&plane.addr(), "GET", path, headers, b"").unwrap()
}

fn put(plane: &Plane, path: &str, body: &[u8]) -> common::plane::Response {
    http(
        &plane.addr(),
        "PUT",
        path,
        &[("Content-Type", "application/json")],
        body,
    )
    .unwrap()
}

#[test]
fn desired_state_is_served_with_an_etag_and_a_conditional_get_is_304() {
    let plane = Plane::start();
    assert!(plane.base().starts_with("http://127.0.0.1:"));
    assert_eq!(get(&plane, DESIRED, &[]).status, 404);

    plane.publish(NODE, br#"{"revision":1}"#);
    let r = get(&plane, DESIRED, &[]);
    assert_eq!(r.status, 200);
    assert_eq!(r.body, br#"{"revision":1}"#);
    assert_eq!(r.header("content-type"), Some("application/json"));
    let etag = r.header("etag").expect("an ETag").to_string();
    assert_eq!(Some(etag.clone()), plane.etag("nodes/n-1/desired.json"));

    let r = get(&plane, DESIRED, &[("If-None-Match", &etag)]);
    assert_eq!(r.status, 304);
    assert!(r.body.is_empty());
    assert_eq!(r.header("etag"), Some(etag.as_str()));

    // The same bytes again: a new mtime, so a new ETag and a full answer
    // (the revision inside did not change).
    plane.publish(NODE, br#"{"revision":1}"#);
    let r = get(&plane, DESIRED, &[("If-None-Match", &etag)]);
    assert_eq!(r.status, 200);
    assert_eq!(r.body, br#"{"revision":1}"#);
    let etag2 = r.header("etag").unwrap().to_string();
    assert_ne!(etag2, etag);

    plane.publish(NODE, br#"{"revision":2}"#);
    let r = get(&plane, DESIRED, &[("If-None-Match", &etag2)]);
    assert_eq!(r.status, 200);
    assert_eq!(r.body, br#"{"revision":2}"#);

    // The access log: the conditional request, what it sent, what it got.
    plane.wait_count("GET", DESIRED, 304, 1, 5);
    plane.wait_count("GET", DESIRED, 200, 3, 5);
    let reqs = plane.requests();
    let cond = reqs.iter().find(|r| r.status == 304).unwrap();
    assert_eq!(cond.if_none_match.as_deref(), Some(etag.as_str()));
    assert_eq!(cond.etag.as_deref(), Some(etag.as_str()));
    assert_eq!(cond.bytes, 0);
    let first = reqs.iter().find(|r| r.status == 200).unwrap();
    assert_eq!((first.bytes, first.if_none_match.as_deref()), (14, None));
    assert!(first.request_time >= 0.0 && first.at > 1e9);
}

#[test]
fn nginx_etag_is_only_mtime_and_size() {
    // Why `publish` moves the mtime on: other bytes of the same size with
    // the same mtime keep the ETag, and nginx answers 304 for a changed
    // file.
    let plane = Plane::start();
    plane.publish(NODE, b"aaaa");
    let path = plane.root().join("nodes/n-1/desired.json");
    let mtime = std::fs::metadata(&path).unwrap().modified().unwrap();
    let etag = get(&plane, DESIRED, &[])
        .header("etag")
        .unwrap()
        .to_string();
    std::fs::write(&path, b"bbbb").unwrap();
    let f = std::fs::File::options().write(true).open(&path).unwrap();
    f.set_modified(mtime).unwrap();
    drop(f);
    let r = get(&plane, DESIRED, &[("If-None-Match", &etag)]);
    assert_eq!(r.status, 304, "nginx saw the change: {r:?}");
    assert_eq!(get(&plane, DESIRED, &[]).body, b"bbbb");
}

#[test]
fn a_report_put_is_created_then_replaced_and_readable() {
    let plane = Plane::start();
    assert_eq!(plane.report(NODE), None);
    // No directory for the node yet: nginx makes it.
    let r = put(&plane, STATUS, br#"{"pass":1}"#);
    assert_eq!(r.status, 201, "{r:?}");
    assert_eq!(plane.report(NODE).as_deref(), Some(&br#"{"pass":1}"#[..]));
    let r = put(&plane, STATUS, br#"{"pass":2,"ok":true}"#);
    assert_eq!(r.status, 204, "{r:?}");
    // What nginx keeps is the body as PUT (the harness's, not a report).
    assert_eq!(
        plane
            .report(NODE)
            .map(|b| serde_json::from_slice::<serde_json::Value>(&b).unwrap()),
        Some(serde_json::json!({"pass": 2, "ok": true}))
    );
    let r = get(&plane, STATUS, &[]);
    assert_eq!(
        (r.status, r.body.as_slice()),
        (200, &br#"{"pass":2,"ok":true}"#[..])
    );
    plane.wait_count("PUT", STATUS, 201, 1, 5);
    plane.wait_count("PUT", STATUS, 204, 1, 5);

    // A Date header becomes the file's mtime.
    let r = http(
        &plane.addr(),
        "PUT",
        STATUS,
        &[("Date", "Fri, 01 Jan 2100 00:00:00 GMT")],
        b"{}",
    )
    .unwrap();
    assert_eq!(r.status, 204);
    let mtime = std::fs::metadata(plane.root().join("nodes/n-1/status.json"))
        .unwrap()
        .modified()
        .unwrap();
    assert_eq!(mtime, UNIX_EPOCH + Duration::from_secs(4_102_444_800));
}

#[test]
fn a_node_cannot_write_anything_but_its_report() {
    let plane = Plane::start();
    plane.publish(NODE, br#"{"revision":1}"#);
    for (method, path) in [
        ("PUT", DESIRED),
        ("POST", DESIRED),
        ("DELETE", DESIRED),
        ("DELETE", STATUS),
        ("MKCOL", "/nodes/n-2/"),
        ("PUT", "/nodes/n-1/other.json"),
        ("PUT", "/nodes/n-1/x/status.json"),
        ("PUT", "/status.json"),
    ] {
        let r = http(&plane.addr(), method, path, &[], br#"{"revision":9}"#).unwrap();
        assert_eq!(r.status, 403, "{method} {path}: {r:?}");
    }
    assert_eq!(get(&plane, DESIRED, &[]).body, br#"{"revision":1}"#);
    for rel in [
        "nodes/n-1/other.json",
        "nodes/n-1/x/status.json",
        "status.json",
        "nodes/n-2",
    ] {
        assert!(!plane.root().join(rel).exists(), "{rel} was written");
    }
}

#[test]
fn a_stopped_plane_refuses_connections_and_a_restarted_one_serves_again() {
    let mut plane = Plane::start();
    let base = plane.base();
    plane.publish(NODE, br#"{"revision":1}"#);
    assert_eq!(get(&plane, DESIRED, &[]).status, 200);

    plane.stop();
    let e = http(&plane.addr(), "GET", DESIRED, &[], b"").unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::ConnectionRefused, "{e}");
    // Published while down: served once it is back.
    plane.publish(NODE, br#"{"revision":2}"#);

    plane.restart();
    assert_eq!(plane.base(), base);
    let r = get(&plane, DESIRED, &[]);
    assert_eq!(
        (r.status, r.body.as_slice()),
        (200, &br#"{"revision":2}"#[..])
    );
    assert_eq!(put(&plane, STATUS, b"{}").status, 201);
    // The log spans both runs.
    plane.wait_count("GET", DESIRED, 200, 2, 5);
}

#[test]
fn a_restart_waits_for_its_port_while_someone_else_holds_it() {
    let mut plane = Plane::start();
    plane.publish(NODE, b"{}");
    plane.stop();
    // Held longer than nginx's own retries (5 × 500 ms) before it gives up.
    let holder = std::net::TcpListener::bind(plane.addr()).unwrap();
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(3500));
        drop(holder);
    });
    let started = Instant::now();
    plane.restart();
    assert!(started.elapsed() >= Duration::from_millis(3000));
    t.join().unwrap();
    assert_eq!(get(&plane, DESIRED, &[]).status, 200);
}

#[test]
fn a_fault_answers_every_request_with_its_status_until_cleared() {
    let mut plane = Plane::start();
    plane.publish(NODE, br#"{"revision":1}"#);
    let etag = get(&plane, DESIRED, &[])
        .header("etag")
        .unwrap()
        .to_string();

    plane.set_fault(Some((429, Some(5))));
    for headers in [&[][..], &[("If-None-Match", etag.as_str())][..]] {
        let r = get(&plane, DESIRED, headers);
        assert_eq!(r.status, 429, "{r:?}");
        assert_eq!(r.header("retry-after"), Some("5"));
    }
    // Reports still go through.
    assert_eq!(put(&plane, STATUS, b"{}").status, 201);
    plane.wait_count("GET", DESIRED, 429, 2, 5);

    plane.set_fault(None);
    let r = get(&plane, DESIRED, &[("If-None-Match", &etag)]);
    assert_eq!(r.status, 304);
    assert_eq!(r.header("retry-after"), None);

    plane.set_report_fault(Some((503, None)));
    let r = put(&plane, STATUS, br#"{"lost":true}"#);
    assert_eq!(r.status, 503);
    assert_eq!(r.header("retry-after"), None);
    assert_eq!(plane.report(NODE).as_deref(), Some(&b"{}"[..]));
    assert_eq!(get(&plane, DESIRED, &[]).status, 200);

    // A fault set while down holds after the restart.
    plane.stop();
    plane.set_report_fault(None);
    plane.set_fault(Some((503, Some(1))));
    plane.restart();
    assert_eq!(get(&plane, DESIRED, &[]).status, 503);
    assert_eq!(put(&plane, STATUS, b"[]").status, 204);
}

#[test]
fn the_fault_proxy_in_front_of_nginx_injects_counted_faults() {
    let plane = Plane::start();
    plane.publish(NODE, br#"{"revision":1}"#);
    let proxy = FaultProxy::start(&plane.addr());
    proxy.inject("GET", "desired.json", Fault::Status(429, Some(3)), 1);

    let r = http(&proxy.addr, "GET", DESIRED, &[], b"").unwrap();
    assert_eq!((r.status, r.header("retry-after")), (429, Some("3")));
    let r = http(&proxy.addr, "GET", DESIRED, &[], b"").unwrap();
    assert_eq!(
        (r.status, r.body.as_slice()),
        (200, &br#"{"revision":1}"#[..])
    );
    let etag = r.header("etag").unwrap().to_string();
    let r = http(
        &proxy.addr,
        "GET",
        DESIRED,
        &[("If-None-Match", &etag)],
        b"",
    )
    .unwrap();
    assert_eq!(r.status, 304);
    let r = http(&proxy.addr, "PUT", STATUS, &[], br#"{"via":"proxy"}"#).unwrap();
    assert_eq!(r.status, 201);
    assert_eq!(
        plane.report(NODE).as_deref(),
        Some(&br#"{"via":"proxy"}"#[..])
    );

    // The injected answer never reached nginx.
    plane.wait_count("PUT", STATUS, 201, 1, 5);
    assert_eq!(plane.count("GET", DESIRED, 429), 0);
    assert_eq!(plane.count("GET", DESIRED, 200), 1);
    assert_eq!(plane.count("GET", DESIRED, 304), 1);
    assert_eq!(proxy.seen.lock().unwrap().len(), 4);
}

/// Waits with tokio (multi-thread runtime) and std (a futex with a
/// deadline), and prints the wall clock around them; run as a child under
/// faketime by the test below, and on its own as a check that these waits
/// take their time.
#[test]
fn faketime_probe() {
    let wall = || match SystemTime::now().duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_secs() as i64,
        Err(e) => -(e.duration().as_secs() as i64),
    };
    let before = wall();
    let t = Instant::now();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let v =
            tokio::time::timeout(Duration::from_secs(5), tokio::task::spawn_blocking(|| 7)).await;
        assert_eq!(v.unwrap().unwrap(), 7);
    });
    let (_tx, rx) = std::sync::mpsc::channel::<()>();
    assert!(rx.recv_timeout(Duration::from_millis(100)).is_err());
    let waited = t.elapsed();
    assert!(waited >= Duration::from_millis(300), "{waited:?}");
    println!(
        "probe: before={before} after={} waited_ms={}",
        wall(),
        waited.as_millis()
    );
}

#[test]
fn faketime_env_fakes_the_wall_clock_and_keeps_monotonic_waits() {
    for (at, secs) in [
        ("2100-01-01 00:00:00", 4_102_444_800_i64),
        ("1970-01-01 00:00:00", 0),
    ] {
        // A shell: `date` twice around a sleep (DONT_RESET: the second
        // `date` continues the clock of the first).
        let t = Instant::now();
        let o = Command::new("sh")
            .args(["-c", "date +%s; sleep 1.1; date +%s; date -u +%Y"])
            .envs(faketime_env(at))
            .output()
            .unwrap();
        assert!(o.status.success(), "{o:?}");
        assert!(t.elapsed() >= Duration::from_millis(1100));
        let out = String::from_utf8_lossy(&o.stdout).into_owned();
        let v: Vec<i64> = out.lines().map(|l| l.trim().parse().unwrap()).collect();
        assert!(v[0] >= secs && v[0] < secs + 5, "{at}: {out}");
        assert!(v[1] > v[0] && v[1] < v[0] + 5, "{at}: {out}");
        assert_eq!(v[2], at[..4].parse::<i64>().unwrap(), "{at}: {out}");

        // Rust std and tokio: this test binary's probe.
        let t = Instant::now();
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "faketime_probe",
                "--nocapture",
                "--test-threads=1",
            ])
            .envs(faketime_env(at))
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        while child.try_wait().unwrap().is_none() {
            if t.elapsed() > Duration::from_secs(30) {
                let _ = child.kill();
                panic!("the probe under faketime {at} hangs");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let o = child.wait_with_output().unwrap();
        let out = String::from_utf8_lossy(&o.stdout).into_owned();
        assert!(
            o.status.success(),
            "{out}{}",
            String::from_utf8_lossy(&o.stderr)
        );
        let line = out
            .lines()
            .find_map(|l| l.split_once("probe: ").map(|(_, rest)| rest))
            .unwrap_or_else(|| panic!("no probe line: {out}"));
        let field = |k: &str| -> i64 {
            line.split_whitespace()
                .find_map(|f| f.strip_prefix(&format!("{k}=")))
                .unwrap()
                .parse()
                .unwrap()
        };
        assert!(
            field("before") >= secs && field("before") < secs + 5,
            "{at}: {line}"
        );
        assert!(field("after") >= field("before"), "{at}: {line}");
        assert!(field("waited_ms") >= 300, "{at}: {line}");
    }
}

#[test]
fn without_etags_nginx_answers_if_modified_since_and_redirects_are_answered_as_set() {
    let mut plane = Plane::start();
    plane.publish(NODE, br#"{"revision":1}"#);
    plane.set_etags(false);
    let r = get(&plane, DESIRED, &[]);
    assert_eq!(r.status, 200);
    assert_eq!(r.header("etag"), None);
    let since = r.header("last-modified").unwrap().to_string();
    let r = get(&plane, DESIRED, &[("If-Modified-Since", &since)]);
    assert_eq!((r.status, r.body.len()), (304, 0));
    // A publish moves the mtime on: a new Last-Modified, a 200.
    plane.publish(NODE, br#"{"revision":2}"#);
    let r = get(&plane, DESIRED, &[("If-Modified-Since", &since)]);
    assert_eq!(r.status, 200);
    assert_ne!(r.header("last-modified"), Some(since.as_str()));
    plane.wait_count("GET", DESIRED, 304, 1, 5);
    let cond = plane
        .requests()
        .into_iter()
        .find(|r| r.status == 304)
        .unwrap();
    assert_eq!(cond.if_modified_since.as_deref(), Some(since.as_str()));
    assert_eq!(cond.if_none_match, None);

    plane.set_redirect(Some((302, "http://127.0.0.1:1/elsewhere.json".into())));
    let r = get(&plane, DESIRED, &[]);
    assert_eq!(r.status, 302);
    assert_eq!(
        r.header("location"),
        Some("http://127.0.0.1:1/elsewhere.json")
    );
    plane.set_report_redirect(Some((307, "http://127.0.0.1:1/s.json".into())));
    let r = http(&plane.addr(), "PUT", STATUS, &[], b"{}").unwrap();
    assert_eq!(r.status, 307);
    assert!(plane.report(NODE).is_none());
    plane.set_redirect(None);
    plane.set_report_redirect(None);
    assert_eq!(get(&plane, DESIRED, &[]).status, 200);
}
