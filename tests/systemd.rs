//! The systemd notify protocol, with a NOTIFY_SOCKET this test listens on:
//! READY=1 once the store is open and the API listens (even with no engine),
//! WATCHDOG=1 pings for as long as the main loop makes progress (through a
//! pass that waits out long stop grace periods, against the real engine),
//! STOPPING=1 on SIGTERM.

mod common;

use std::os::unix::net::UnixDatagram;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::agent::Agent;
use common::*;

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

/// The datagrams a fake service manager receives, each with when.
fn listen(sock: UnixDatagram) -> Arc<Mutex<Vec<(Instant, String)>>> {
    let got = Arc::new(Mutex::new(Vec::new()));
    let g = got.clone();
    sock.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    std::thread::spawn(move || {
        let mut buf = [0u8; 512];
        loop {
            if let Ok(n) = sock.recv(&mut buf) {
                let msg = String::from_utf8_lossy(&buf[..n]).into_owned();
                g.lock().unwrap().push((Instant::now(), msg));
            }
            // Ends with the test's process.
        }
    });
    got
}

#[test]
fn the_watchdog_is_pinged_through_a_pass_that_waits_out_long_stop_grace_periods() {
    let n = Node::new("watchdog");
    let sock_path = n.dir.path().join("notify.sock");
    let got = listen(UnixDatagram::bind(&sock_path).unwrap());
    // Three containers that ignore SIGTERM: each stop waits out 60 s.
    let modules: Vec<String> = (0..3).map(|i| n.module(&format!("slow{i}"))).collect();
    for (i, m) in modules.iter().enumerate() {
        n.write_intention(
            &format!("slow{i}.toml"),
            &format!(
                "name = \"{m}\"\nimage = \"{IMAGE_1}\"\nstop_grace_period = \"60s\"\ncommand = [\"sh\", \"-c\", \"trap '' TERM; echo up; while true; do sleep 1; done\"]\n"
            ),
        );
    }
    // A 4 s watchdog: pings are due every 2 s at the latest.
    let watchdog = Duration::from_secs(4);
    let env = [
        ("NOTIFY_SOCKET".to_string(), sock_path.display().to_string()),
        (
            "WATCHDOG_USEC".to_string(),
            watchdog.as_micros().to_string(),
        ),
    ];
    let mut agent = Agent::start_env(&n, &env);
    for m in &modules {
        n.wait_logs(m, "up");
    }

    let began = Instant::now();
    for i in 0..3 {
        n.remove_intention(&format!("slow{i}.toml"));
    }
    n.wait_for(240, "the three modules removed", || {
        modules.iter().all(|m| n.container(m).is_none())
    });
    let ended = Instant::now();
    assert!(
        ended - began >= Duration::from_secs(55),
        "the stops waited out their grace: {:?}",
        ended - began
    );
    assert!(
        agent.child.try_wait().unwrap().is_none(),
        "the agent is still running"
    );
    // WATCHDOG=1 kept arriving throughout the pass, never a watchdog
    // interval apart.
    let mut at: Vec<Instant> = got
        .lock()
        .unwrap()
        .iter()
        .filter(|(t, m)| m == "WATCHDOG=1" && *t >= began && *t <= ended)
        .map(|(t, _)| *t)
        .collect();
    at.insert(0, began);
    at.push(ended);
    let widest = at.windows(2).map(|w| w[1] - w[0]).max().unwrap();
    assert!(
        widest < watchdog,
        "a gap of {widest:?} between pings ({} pings in {:?})",
        at.len() - 2,
        ended - began
    );
}
