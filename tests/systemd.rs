//! The systemd notify protocol, with a NOTIFY_SOCKET this test listens on:
//! READY=1 once the store is open and the API listens (even with no engine),
//! WATCHDOG=1 pings from the main loop, STOPPING=1 on SIGTERM.

use std::os::unix::net::UnixDatagram;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn ready_watchdog_and_stopping_reach_the_service_manager() {
    let d = tempfile::tempdir().unwrap();
    let sock_path = d.path().join("notify.sock");
    let sock = UnixDatagram::bind(&sock_path).unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    std::fs::write(
        d.path().join("c.toml"),
        "node_id = \"sd\"\ndata_dir = \"data\"\nintentions_dir = \"i\"\ndocker_socket = \"/nonexistent/engine.sock\"\napi_listen = \"127.0.0.1:0\"\n",
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_stead"))
        .args(["run", "--config"])
        .arg(d.path().join("c.toml"))
        .env("NOTIFY_SOCKET", &sock_path)
        .env("WATCHDOG_USEC", "400000")
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut got: Vec<(Instant, String)> = Vec::new();
    let start = Instant::now();
    let mut buf = [0u8; 512];
    let mut ready_at = None;
    while start.elapsed() < Duration::from_secs(4) {
        if let Ok(n) = sock.recv(&mut buf) {
            let msg = String::from_utf8_lossy(&buf[..n]).into_owned();
            if msg.contains("READY=1") && ready_at.is_none() {
                ready_at = Some(Instant::now());
                // Ready means the API answers already.
                let addr = std::fs::read_to_string(d.path().join("data/api-addr"))
                    .expect("the API address is written before READY");
                std::net::TcpStream::connect(addr.trim()).expect("the API listens at READY");
            }
            got.push((Instant::now(), msg));
        }
    }
    let ready = ready_at.expect("READY=1 was sent, though the engine is absent");
    let pings: Vec<Instant> = got
        .iter()
        .filter(|(_, m)| m == "WATCHDOG=1")
        .map(|(t, _)| *t)
        .filter(|t| *t > ready)
        .collect();
    // Half of 400 ms is 200 ms: in ~3.5 s there are many; require a steady stream.
    assert!(pings.len() >= 8, "watchdog pings: {}", pings.len());
    assert!(
        got.iter()
            .any(|(_, m)| m.contains("STATUS=waiting for the container engine")),
        "{got:?}"
    );

    // SIGTERM: STOPPING=1, and a clean exit.
    unsafe_kill(child.id());
    let end = Instant::now() + Duration::from_secs(5);
    let mut stopping = false;
    while Instant::now() < end && !stopping {
        if let Ok(n) = sock.recv(&mut buf) {
            stopping = String::from_utf8_lossy(&buf[..n]).contains("STOPPING=1");
        }
    }
    assert!(stopping, "STOPPING=1 on SIGTERM");
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
}

fn unsafe_kill(pid: u32) {
    let ok = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok);
}
