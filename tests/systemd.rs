//! The systemd notify protocol, with a NOTIFY_SOCKET this test listens on:
//! READY=1 once the store is open and the API listens (even with no engine),
//! WATCHDOG=1 pings for as long as the main loop makes progress (through a
//! pass that waits out long stop grace periods, against the real engine),
//! STOPPING=1 on SIGTERM; and what the shipped unit lets the agent read and
//! write, in a mount namespace made as the unit's settings say.

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
            format!(
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

/// What the shipped unit says of the file system, read from the unit file:
/// `ProtectSystem=`, `ReadWritePaths=` (without the `-` of optional ones)
/// and `ProtectHome=`.
fn unit_file_system() -> (String, Vec<String>, String) {
    let unit = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("systemd/stead.service"),
    )
    .unwrap();
    let value = |key: &str| -> Vec<String> {
        unit.lines()
            .filter_map(|l| l.strip_prefix(key))
            .flat_map(|v| v.split_whitespace().map(str::to_string).collect::<Vec<_>>())
            .collect()
    };
    let rw = value("ReadWritePaths=")
        .into_iter()
        .map(|p| p.trim_start_matches('-').to_string())
        .collect();
    (
        value("ProtectSystem=").join(" "),
        rw,
        value("ProtectHome=").join(" "),
    )
}

/// A wrapper that runs the agent in a mount namespace of its own made as the
/// unit's settings make it: every path read-only (`ProtectSystem=strict`)
/// but the `ReadWritePaths=` and the node's directory (the unit's state
/// directory), and `/home`, `/root` read-only (`ProtectHome=read-only`) or
/// hidden (`yes`).
fn as_the_unit(state: &std::path::Path) -> Vec<String> {
    let (system, rw, home) = unit_file_system();
    assert_eq!(system, "strict", "the test mimics ProtectSystem=strict");
    let mut script = String::from("set -e\n");
    for p in rw
        .iter()
        .map(String::as_str)
        .chain([state.to_str().unwrap()])
    {
        script.push_str(&format!(
            "if [ -e {p:?} ]; then mount --bind {p:?} {p:?}; fi\n"
        ));
    }
    script.push_str("mount -o remount,bind,ro /\n");
    match home.as_str() {
        "read-only" => {}
        "yes" | "tmpfs" => script
            .push_str("for h in /home /root; do mount -t tmpfs -o ro,mode=000 none $h; done\n"),
        other => panic!("ProtectHome={other} is not mimicked here"),
    }
    script.push_str("exec \"$@\"\n");
    [
        "unshare",
        "-m",
        "--propagation",
        "private",
        "sh",
        "-c",
        &script,
        "sh",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// A directory removed when the test ends.
struct Gone(std::path::PathBuf);

impl Drop for Gone {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn under_the_unit_s_file_system_home_inputs_are_read_and_missing_sources_are_made_or_refused_by_name()
 {
    let n = Node::new("unitfs");
    let tag = format!("stead-unitfs-{}", std::process::id());
    let srv = Gone(std::path::Path::new("/srv").join(&tag));
    let opt = Gone(std::path::Path::new("/opt").join(&tag));
    let root = Gone(std::path::Path::new("/root").join(&tag));
    std::fs::create_dir_all(&root.0).unwrap();
    let env_file = root.0.join("app.env");
    std::fs::write(&env_file, "FROM_HOME=read-from-root\n").unwrap();

    let (made, refused, home) = (n.module("made"), n.module("refused"), n.module("home"));
    let idle = idle_after("echo FROM_HOME=$FROM_HOME");
    let module = |name: &str, extra: &str| {
        format!(
            "name = \"{name}\"\nimage = \"{IMAGE_1}\"\ncommand = [\"sh\", \"-c\", {idle:?}]\n{extra}\n"
        )
    };
    let mount = |source: &std::path::Path| {
        format!(
            "[[mounts]]\nsource = {:?}\ntarget = \"/data\"\n",
            source.join("data").display()
        )
    };
    n.write_intention("made.toml", module(&made, &mount(&srv.0)));
    n.write_intention("refused.toml", module(&refused, &mount(&opt.0)));
    n.write_intention(
        "home.toml",
        module(&home, &format!("env_files = [{:?}]", env_file.display())),
    );

    let wrapper = as_the_unit(n.dir.path());
    let wrapper: Vec<&str> = wrapper.iter().map(String::as_str).collect();
    let agent = Agent::start_under(&n, &wrapper);
    let state = |m: &str| -> serde_json::Value {
        serde_json::from_str(&agent.get(&format!("/v1/modules/{m}")).1).unwrap()
    };

    // Under /srv (ReadWritePaths=): made, and the container runs.
    n.wait_logs(&made, "FROM_HOME=");
    assert!(srv.0.join("data").is_dir(), "made on the host");
    // An input under /root (ProtectHome=read-only): read.
    n.wait_logs(&home, "FROM_HOME=read-from-root");
    // Elsewhere: refused, naming the unit's setting, nothing made.
    n.wait_for(30, "the module outside the unit's paths to fail", || {
        state(&refused)["state"] == "failed"
    });
    let said = state(&refused)["last_error"].as_str().unwrap().to_string();
    for part in [
        "Read-only file system",
        "ProtectSystem=strict",
        "ReadWritePaths=",
        "/srv",
    ] {
        assert!(said.contains(part), "{part:?} not in {said:?}");
    }
    assert!(n.container(&refused).is_none(), "nothing made for it");
    assert!(!opt.0.exists(), "nothing made on the host");
}
