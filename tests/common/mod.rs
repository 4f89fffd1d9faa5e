//! Test harness for engine tests: a node (its own id, data and intentions
//! directories, config), the real `stead` binary, the real Docker Engine
//! through its CLI, and a counting forwarding proxy in front of the engine's
//! socket that can be started late and stopped mid-run.
#![allow(dead_code)]

pub mod agent;
pub mod bins;
pub mod cgroup;
pub mod desired;
pub mod faults;
pub mod intention;
pub mod own_engine;
pub mod plane;
pub mod pulls;
pub mod registry;
pub mod s3;
pub mod tls;

pub use bins::workspace_bin;

use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub const IMAGE_1: &str = "stead-test/busybox:1";
pub const IMAGE_2: &str = "stead-test/busybox:2";

/// Settling and crash loops judged quickly, and short crash back-offs (so
/// what is held back is acted on again within a test's bounds).
pub const QUICK_CRASH_LOOP: &str = "settle_window = \"3s\"\ncrash_loop_restarts = 3\ncrash_backoff_min = \"1s\"\ncrash_backoff_max = \"2s\"";

/// The engine's socket the tests run against: the Docker Engine's, or
/// another Docker-compatible one named by `STEAD_TEST_ENGINE_SOCKET` (the
/// test command runs the engine suites against Podman's that way). The
/// harness's own `docker` CLI calls go to the same socket.
pub fn engine_socket() -> String {
    std::env::var("STEAD_TEST_ENGINE_SOCKET").unwrap_or_else(|_| "/var/run/docker.sock".into())
}

/// Whether the tests run against Podman's socket (for the differences a
/// test names).
pub fn on_podman() -> bool {
    static PODMAN: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *PODMAN.get_or_init(|| {
        docker(&[
            "version",
            "--format",
            "{{range .Server.Components}}{{.Name}} {{end}}",
        ])
        .stdout
        .windows(6)
        .any(|w| w == b"Podman")
    })
}

/// Podman runs a container's health check from a systemd timer; where its
/// service runs without systemd (this test machine) no check ever runs.
/// While held, this plays the timer: every second, `podman healthcheck run`
/// for each running container of the node that has a check. Nothing on the
/// Docker Engine, or where systemd runs.
pub struct HealthTimer {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl HealthTimer {
    pub fn start(node: &str) -> HealthTimer {
        let stop = Arc::new(AtomicBool::new(false));
        let needed = on_podman() && !Path::new("/run/systemd/system").exists();
        let thread = needed.then(|| {
            let (stop, node) = (stop.clone(), node.to_string());
            std::thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    let ids = docker(&[
                        "ps",
                        "-q",
                        "--no-trunc",
                        "--filter",
                        &format!("label=stead.managed-by={node}"),
                    ]);
                    for id in String::from_utf8_lossy(&ids.stdout).split_whitespace() {
                        let _ = podman(&["healthcheck", "run", id]);
                    }
                    std::thread::sleep(Duration::from_secs(1));
                }
            })
        });
        HealthTimer { stop, thread }
    }
}

impl Drop for HealthTimer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Podman's CLI, with the containers.conf its service runs with
/// (scripts/podman.sh writes it beside the socket): with another, a
/// command's own events could rotate the events log under the service.
pub fn podman(args: &[&str]) -> Output {
    let mut c = Command::new("podman");
    let socket = engine_socket();
    let conf = Path::new(&socket).with_file_name("containers.conf");
    if conf.exists() {
        c.env("CONTAINERS_CONF", conf);
    }
    c.args(args).output().expect("podman runs")
}

/// Podman's own view of a container (what its Docker-compatible inspect
/// leaves out, such as the log file's size limit).
pub fn podman_inspect(id: &str) -> serde_json::Value {
    let o = podman(&["inspect", "--format", "{{json .}}", id]);
    assert!(o.status.success(), "podman inspect {id} failed");
    serde_json::from_slice(&o.stdout).unwrap()
}

/// Fails (never skips) when no engine answers.
pub fn require_engine() {
    let socket = engine_socket();
    let ok = docker(&["info", "--format", "{{.ServerVersion}}"])
        .status
        .success();
    assert!(
        ok,
        "no engine answers on {socket}: engine tests need one (scripts/engine.sh starts the Docker Engine, scripts/podman.sh Podman's service)"
    );
    let img = docker(&["image", "inspect", "--format", "{{.Id}}", IMAGE_1]);
    assert!(
        img.status.success(),
        "test image {IMAGE_1} missing: scripts/test-images.sh builds it"
    );
}

pub fn docker(args: &[&str]) -> Output {
    Command::new("docker")
        .env("DOCKER_HOST", format!("unix://{}", engine_socket()))
        .args(args)
        .output()
        .expect("docker CLI runs")
}

pub fn docker_ok(args: &[&str]) -> String {
    let o = docker(args);
    assert!(
        o.status.success(),
        "docker {args:?} failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// Restarts a container as a person would, asking again after a failure:
/// Podman's `runc start` has failed once here while the test's own health
/// timer was running a check in the same container. The restart is a
/// test's stimulus, not what it tests.
pub fn restart_by_hand(id: &str) {
    let mut last = String::new();
    for _ in 0..3 {
        let o = docker(&["restart", "-t", "1", id]);
        if o.status.success() {
            return;
        }
        last = String::from_utf8_lossy(&o.stderr).to_string();
        std::thread::sleep(Duration::from_secs(1));
    }
    panic!("docker restart {id} failed three times: {last}");
}

pub fn image_id(reference: &str) -> String {
    docker_ok(&["image", "inspect", "--format", "{{.Id}}", reference])
}

/// Seconds since the epoch, as the engine's event filters take them.
pub fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// A command that prints a file and then idles, and stops promptly on
/// SIGTERM (a shell as PID 1 ignores it otherwise).
pub fn idle_after(print: &str) -> String {
    format!("{print}; trap 'exit 0' TERM; sleep 1000000 & wait")
}

pub struct Node {
    pub id: String,
    pub dir: tempfile::TempDir,
    pub socket: String,
    pub heartbeat: String,
    pub extra: String,
    events: EventLog,
}

/// The engine's container events from a node's start on, streamed as they
/// happen. `docker events --since` replays only what the engine still
/// keeps (the Docker Engine keeps its last 256 events), which a crash loop
/// among a suite's parallel tests outruns within a minute; CI once counted
/// no create of a module the engine had created.
struct EventLog {
    child: Option<std::process::Child>,
    /// What was seen; `None` once the stream has ended.
    seen: Arc<Mutex<Option<Vec<Seen>>>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

/// (time in nanoseconds, the stead.module label, the action, the
/// container's ID, the stead.managed-by label)
type Seen = (i128, String, String, String, String);

impl EventLog {
    fn start() -> EventLog {
        // From a second back, replayed from what the engine keeps, so that
        // nothing falls between this start and the stream's subscription.
        let child = Command::new("docker")
            .env("DOCKER_HOST", format!("unix://{}", engine_socket()))
            .args([
                "events",
                "--since",
                &format!("{:.3}", unix_now() - 1.0),
                "--filter",
                "type=container",
                "--format",
                "{{.TimeNano}}\t{{index .Actor.Attributes \"stead.module\"}}\t{{.Action}}\t{{.Actor.ID}}\t{{index .Actor.Attributes \"stead.managed-by\"}}",
            ])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn();
        let seen = Arc::new(Mutex::new(Some(Vec::new())));
        let Ok(mut child) = child else {
            *seen.lock().unwrap() = None;
            return EventLog {
                child: None,
                seen,
                reader: None,
            };
        };
        let stdout = child.stdout.take().expect("piped stdout");
        let into = seen.clone();
        let reader = std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let mut f = line.split('\t');
                let (Some(t), Some(m), Some(a), Some(id)) =
                    (f.next(), f.next(), f.next(), f.next())
                else {
                    continue;
                };
                let owner = f.next().unwrap_or_default();
                let Ok(t) = t.parse::<i128>() else { continue };
                if let Some(v) = into.lock().unwrap().as_mut() {
                    v.push((
                        t,
                        m.to_string(),
                        a.to_string(),
                        id.to_string(),
                        owner.to_string(),
                    ));
                }
            }
            *into.lock().unwrap() = None;
        });
        EventLog {
            child: Some(child),
            seen,
            reader: Some(reader),
        }
    }

    /// The module's actions and their containers' IDs from `since` up to
    /// now; `None` if the stream has ended. "Now" is a barrier, not a
    /// grace period: a sentinel container is made, and everything the
    /// stream carried up to its create is what happened before this call,
    /// however far the stream lags under load (the engine's stream is in
    /// order). Waiting a fixed half second lost a Podman start event under
    /// load once.
    fn since(&self, module: &str, since: f64) -> Option<Vec<(String, String)>> {
        self.seen_of(None, module, since)
            .map(|v| v.into_iter().map(|(_, a, id)| (a, id)).collect())
    }

    /// [`EventLog::since`] of the containers `owner` manages alone, each
    /// with its time (seconds since the epoch): a group's module has one
    /// name on every device.
    fn timed(&self, owner: &str, module: &str, since: f64) -> Option<Vec<(f64, String, String)>> {
        self.seen_of(Some(owner), module, since)
    }

    /// (time in seconds, action, container ID) of the module's containers
    /// (of `owner`'s alone, when given) from `since` up to the barrier.
    fn seen_of(
        &self,
        owner: Option<&str>,
        module: &str,
        since: f64,
    ) -> Option<Vec<(f64, String, String)>> {
        let until = self.barrier()?;
        let from = (since * 1e9) as i128;
        let seen = self.seen.lock().unwrap();
        Some(
            seen.as_ref()?
                .iter()
                .filter(|(t, m, _, _, o)| {
                    *t >= from && *t <= until && m == module && owner.is_none_or(|w| w == o)
                })
                .map(|(t, _, a, id, _)| (*t as f64 / 1e9, a.clone(), id.clone()))
                .collect(),
        )
    }

    /// Makes a sentinel container (a module name of its own) and waits for
    /// the stream to carry its create: the time of that event, `None` if
    /// the stream ended or no sentinel could be made.
    fn barrier(&self) -> Option<i128> {
        static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let name = format!(
            "t-barrier-{}-{}",
            std::process::id(),
            N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        );
        let made = docker(&[
            "create",
            "--label",
            &format!("stead.module={name}"),
            "--name",
            &name,
            IMAGE_1,
            "true",
        ]);
        if !made.status.success() {
            return None;
        }
        let end = std::time::Instant::now() + Duration::from_secs(120);
        let at = loop {
            let found = {
                let seen = self.seen.lock().unwrap();
                let Some(v) = seen.as_ref() else {
                    break None;
                };
                v.iter().find(|(_, m, ..)| *m == name).map(|(t, ..)| *t)
            };
            if found.is_some() || std::time::Instant::now() > end {
                break found;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let _ = docker(&["rm", "-f", &name]);
        at
    }
}

impl Drop for EventLog {
    fn drop(&mut self) {
        if let Some(c) = self.child.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
    }
}

impl Node {
    pub fn new(tag: &str) -> Node {
        require_engine();
        let id = format!("t-{tag}-{}", std::process::id());
        let dir = tempfile::Builder::new()
            .prefix(&format!("stead-{tag}-"))
            .tempdir()
            .unwrap();
        std::fs::create_dir_all(dir.path().join("intentions")).unwrap();
        std::fs::create_dir_all(dir.path().join("host")).unwrap();
        let n = Node {
            events: EventLog::start(),
            id,
            dir,
            socket: engine_socket(),
            heartbeat: "1h".into(),
            extra: String::new(),
        };
        n.write_config();
        n
    }

    pub fn write_config(&self) {
        let cfg = format!(
            "node_id = {:?}\ndata_dir = \"data\"\nintentions_dir = \"intentions\"\ndocker_socket = {:?}\nheartbeat = {:?}\nbackoff_min = \"100ms\"\nbackoff_max = \"1s\"\napi_listen = \"127.0.0.1:0\"\n{}",
            self.id, self.socket, self.heartbeat, self.extra
        );
        std::fs::write(self.config(), cfg).unwrap();
    }

    pub fn with_socket(mut self, socket: &str) -> Node {
        self.socket = socket.into();
        self.write_config();
        self
    }

    /// Adds lines to the agent's config.
    pub fn with_config(mut self, lines: &str) -> Node {
        self.extra.push_str(lines);
        self.extra.push('\n');
        self.write_config();
        self
    }

    pub fn with_heartbeat(mut self, hb: &str) -> Node {
        self.heartbeat = hb.into();
        self.write_config();
        self
    }

    pub fn config(&self) -> PathBuf {
        self.dir.path().join("stead.toml")
    }

    pub fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// A host file a module can read.
    pub fn host(&self, name: &str) -> PathBuf {
        self.dir.path().join("host").join(name)
    }

    pub fn write_host(&self, name: &str, content: &str) -> PathBuf {
        let p = self.host(name);
        std::fs::write(&p, content).unwrap();
        p
    }

    /// A module name unique to this node.
    pub fn module(&self, short: &str) -> String {
        let h = self
            .id
            .replace(|c: char| !c.is_ascii_alphanumeric(), "")
            .to_lowercase();
        format!("{short}-{h}")
    }

    pub fn intention_path(&self, file: &str) -> PathBuf {
        self.dir.path().join("intentions").join(file)
    }

    /// Writes an intention file atomically: a text, or an
    /// [`intention::Module`] being built.
    pub fn write_intention(&self, file: &str, text: impl std::fmt::Display) {
        let p = self.intention_path(file);
        let tmp = p.with_extension("tmp");
        std::fs::write(&tmp, text.to_string()).unwrap();
        std::fs::rename(&tmp, &p).unwrap();
    }

    pub fn remove_intention(&self, file: &str) {
        std::fs::remove_file(self.intention_path(file)).unwrap();
    }

    pub fn stead(&self) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_stead"));
        c.env("STEAD_LOG", "info");
        c
    }

    /// A CLI command against this node's agent (its config): (exit code,
    /// stdout).
    pub fn cli(&self, args: &[&str]) -> (Option<i32>, String) {
        let o = self
            .stead()
            .args(args)
            .arg("--config")
            .arg(self.config())
            .output()
            .unwrap();
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stdout).into_owned(),
        )
    }

    /// One pass; returns (exit ok, stdout, stderr).
    pub fn once(&self) -> (bool, String, String) {
        let o = self
            .stead()
            .args(["run", "--once", "--config"])
            .arg(self.config())
            .output()
            .unwrap();
        (
            o.status.success(),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    }

    /// One pass that must succeed; returns stdout.
    pub fn once_ok(&self) -> String {
        let (ok, out, err) = self.once();
        assert!(ok, "stead run --once failed:\n{out}\n{err}");
        out
    }

    /// (id, state, digest label) of the module's container, if any.
    pub fn container(&self, module: &str) -> Option<(String, String, String)> {
        let out = docker_ok(&[
            "ps",
            "-a",
            "--no-trunc",
            "--filter",
            &format!("label=stead.managed-by={}", self.id),
            "--filter",
            &format!("label=stead.module={module}"),
            "--format",
            "{{.ID}}\t{{.State}}\t{{.Label \"stead.digest\"}}",
        ]);
        let line = out.lines().next()?;
        let mut f = line.split('\t');
        Some((f.next()?.into(), f.next()?.into(), f.next()?.into()))
    }

    pub fn container_id(&self, module: &str) -> String {
        self.container(module)
            .unwrap_or_else(|| panic!("module {module} has no container"))
            .0
    }

    /// How many containers of this module the engine created since `since`.
    pub fn creates_since(&self, module: &str, since: f64) -> usize {
        self.events_since(module, since)
            .iter()
            .filter(|a| *a == "create")
            .count()
    }

    /// Every engine event (its action) for this node's containers of this
    /// module since `since`, as far as half a second from now (what the
    /// engine has yet to deliver of what was done).
    pub fn events_since(&self, module: &str, since: f64) -> Vec<String> {
        self.events_of_containers_since(module, since)
            .into_iter()
            .map(|(a, _)| a)
            .collect()
    }

    /// Every engine event of this module's containers since `since`, as
    /// far as half a second from now: (action, container ID).
    pub fn events_of_containers_since(&self, module: &str, since: f64) -> Vec<(String, String)> {
        if let Some(seen) = self.events.since(module, since) {
            return seen;
        }
        let until = unix_now() + 0.5;
        // The stream ended (the engine went away under it): what the
        // engine still keeps of its events.
        let out = docker_ok(&[
            "events",
            "--since",
            &format!("{since:.3}"),
            "--until",
            &format!("{until:.3}"),
            "--filter",
            "type=container",
            // One label: Podman takes several as either, the Docker Engine
            // as both (a module's name is this node's alone).
            "--filter",
            &format!("label=stead.module={module}"),
            "--format",
            "{{.Action}}\t{{.Actor.ID}}",
        ]);
        out.lines()
            .filter_map(|l| l.split_once('\t'))
            .map(|(a, id)| (a.to_string(), id.to_string()))
            .collect()
    }

    /// This node's containers' engine events of `module` since `since`:
    /// (time in seconds since the epoch, action, container ID).
    pub fn timed_events_since(&self, module: &str, since: f64) -> Vec<(f64, String, String)> {
        self.events
            .timed(&self.id, module, since)
            .expect("the engine's event stream ended")
    }

    /// The module's container's output; empty while it has none.
    pub fn logs(&self, module: &str) -> String {
        let Some((id, _, _)) = self.container(module) else {
            return String::new();
        };
        let o = docker(&["logs", &id]);
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    }

    /// Waits until `f` holds, up to `secs`.
    pub fn wait_for(&self, secs: u64, what: &str, mut f: impl FnMut() -> bool) {
        let end = Instant::now() + Duration::from_secs(secs);
        while Instant::now() < end {
            if f() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!(
            "timed out after {secs}s waiting for {what}\n{}",
            self.agent_log_tail(60)
        );
    }

    /// The last `lines` lines of the agent's log (what a timeout says
    /// about why), or a note that no agent ran.
    pub fn agent_log_tail(&self, lines: usize) -> String {
        let log = std::fs::read_to_string(self.dir.path().join("agent.log")).unwrap_or_default();
        if log.is_empty() {
            return "(no agent log)".into();
        }
        let all: Vec<&str> = log.lines().collect();
        let from = all.len().saturating_sub(lines);
        format!(
            "--- the agent's log, last {} lines ---\n{}",
            all.len() - from,
            all[from..].join("\n")
        )
    }

    /// Waits until the module's container has printed `text`.
    pub fn wait_logs(&self, module: &str, text: &str) {
        self.wait_for(20, &format!("{module} to print {text:?}"), || {
            self.logs(module).contains(text)
        });
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let ids = docker(&[
            "ps",
            "-aq",
            "--filter",
            &format!("label=stead.managed-by={}", self.id),
        ]);
        for id in String::from_utf8_lossy(&ids.stdout).split_whitespace() {
            let _ = docker(&["rm", "-f", id]);
        }
        // And the networks its agent made, which it would remove once
        // unused, had it run on.
        let nets = docker(&[
            "network",
            "ls",
            "-q",
            "--filter",
            &format!("label=stead.managed-by={}", self.id),
        ]);
        for id in String::from_utf8_lossy(&nets.stdout).split_whitespace() {
            let _ = docker(&["network", "rm", id]);
        }
    }
}

/// A forwarding proxy from a unix socket of its own to the engine's socket,
/// counting the HTTP requests that pass through it.
pub struct Proxy {
    pub path: PathBuf,
    stop: Arc<AtomicBool>,
    pub requests: Arc<Mutex<Vec<String>>>,
    conns: Arc<Mutex<Vec<UnixStream>>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Proxy {
    pub fn start(path: &Path) -> Proxy {
        let _ = std::fs::remove_file(path);
        let listener = UnixListener::bind(path).unwrap();
        listener.set_nonblocking(true).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let conns = Arc::new(Mutex::new(Vec::new()));
        let (s, r, c) = (stop.clone(), requests.clone(), conns.clone());
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((client, _)) => {
                        client.set_nonblocking(false).unwrap();
                        let upstream = UnixStream::connect(engine_socket()).unwrap();
                        c.lock().unwrap().push(client.try_clone().unwrap());
                        c.lock().unwrap().push(upstream.try_clone().unwrap());
                        let (mut cr, mut uw) =
                            (client.try_clone().unwrap(), upstream.try_clone().unwrap());
                        let r = r.clone();
                        std::thread::spawn(move || {
                            let mut buf = [0u8; 16384];
                            let mut line: Vec<u8> = Vec::new();
                            loop {
                                let n = match cr.read(&mut buf) {
                                    Ok(0) | Err(_) => break,
                                    Ok(n) => n,
                                };
                                for &b in &buf[..n] {
                                    line.push(b);
                                    if b == b'\n' {
                                        if line.ends_with(b" HTTP/1.1\r\n") {
                                            let l =
                                                String::from_utf8_lossy(&line).trim().to_string();
                                            r.lock().unwrap().push(l);
                                        }
                                        line.clear();
                                    }
                                }
                                if uw.write_all(&buf[..n]).is_err() {
                                    break;
                                }
                            }
                            let _ = uw.shutdown(std::net::Shutdown::Write);
                        });
                        let (mut ur, mut cw) = (upstream, client);
                        std::thread::spawn(move || {
                            let _ = std::io::copy(&mut ur, &mut cw);
                            let _ = cw.shutdown(std::net::Shutdown::Write);
                        });
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        std::thread::sleep(Duration::from_millis(5))
                    }
                    Err(_) => break,
                }
            }
        });
        Proxy {
            path: path.to_path_buf(),
            stop,
            requests,
            conns,
            thread: Some(thread),
        }
    }

    pub fn count(&self) -> usize {
        self.requests.lock().unwrap().len()
    }

    pub fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.requests.lock().unwrap())
    }

    /// Stops listening, removes the socket and cuts every open connection:
    /// to the agent, the engine has gone away.
    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let _ = std::fs::remove_file(&self.path);
        for c in self.conns.lock().unwrap().drain(..) {
            let _ = c.shutdown(std::net::Shutdown::Both);
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A tmpfs mounted at a directory, unmounted when dropped.
pub struct Tmpfs(std::path::PathBuf);

impl Tmpfs {
    pub fn mount(at: &std::path::Path, size: &str) -> Tmpfs {
        std::fs::create_dir_all(at).unwrap();
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(at)
            .status()
            .unwrap()
            .success();
        assert!(
            ok,
            "mounting a tmpfs needs root (the engine tests run as root)"
        );
        Tmpfs(at.to_path_buf())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}
