//! stead updates itself, against the real parts: a release statement
//! signed with a key the node trusts and the new binary, both served by
//! nginx on loopback; the agent started by the launcher (`stead-launch`)
//! over the real engine. The new version is this build with its version
//! text changed (a test cannot afford a second release build): what the
//! update checks of it (size, SHA-256, the signature, `--version`) is
//! what it checks of any.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use common::intention::Module;
use common::plane::Plane;
use common::*;
use stead::plane::envelope::SecretKey;

const NEW: &str = "0.6.9";

fn target() -> String {
    let v = Command::new(env!("CARGO_BIN_EXE_stead"))
        .arg("--version")
        .output()
        .unwrap();
    let s = String::from_utf8_lossy(&v.stdout).to_string();
    s.rsplit("target ")
        .next()
        .unwrap()
        .trim()
        .trim_end_matches(')')
        .to_string()
}

/// This build, stripped (a debug build is far over the largest binary an
/// update takes), its version text changed to `version`.
fn build_as(version: &str) -> Vec<u8> {
    let d = tempfile::tempdir().unwrap();
    let stripped = d.path().join("stead");
    let o = Command::new("strip")
        .arg(env!("CARGO_BIN_EXE_stead"))
        .arg("-o")
        .arg(&stripped)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "strip: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let mut bin = std::fs::read(&stripped).unwrap();
    let from = format!("{} (commit ", env!("CARGO_PKG_VERSION")).into_bytes();
    let to = format!("{version} (commit ").into_bytes();
    assert_eq!(from.len(), to.len());
    let mut n = 0;
    let mut i = 0;
    while i + from.len() <= bin.len() {
        if bin[i..i + from.len()] == from[..] {
            bin[i..i + from.len()].copy_from_slice(&to);
            n += 1;
            i += from.len();
        } else {
            i += 1;
        }
    }
    assert!(n > 0, "the version text is in the binary");
    bin
}

fn sha256(b: &[u8]) -> String {
    stead::model::names::Digest::of(b).hex().to_string()
}

/// A release of `bytes` as `version`, published under `releases/<v>/`;
/// returns the statement's URL.
fn publish(
    plane: &Plane,
    key: &SecretKey,
    version: &str,
    bytes: &[u8],
    sha: Option<&str>,
) -> String {
    let t = target();
    plane.publish_raw_path(&format!("releases/{version}/stead-{t}"), bytes);
    let payload = format!(
        r#"{{"version":"{version}","schema":{},"binaries":{{"{t}":{{"url":"stead-{t}","sha256":"{}","size":{}}}}}}}"#,
        stead::store::SCHEMA_VERSION,
        sha.map_or_else(|| sha256(bytes), str::to_string),
        bytes.len()
    );
    let env = key.sign(stead::model::release::PAYLOAD_TYPE, payload.as_bytes());
    plane.publish_raw_path(&format!("releases/{version}/release.json"), &env.to_json());
    format!("{}/releases/{version}/release.json", plane.base())
}

struct Device {
    n: Node,
    agents: PathBuf,
    child: Option<Child>,
}

impl Device {
    fn new(tag: &str, key: &SecretKey, extra: &str) -> Device {
        Device::of(Node::new(tag).with_config(&format!(
            "[update]\ntrusted_keys = [\"{}\"]\n{extra}",
            key.public().to_base64()
        )))
    }

    /// A device whose only trusted keys are its plane's.
    fn with_plane(tag: &str, plane: &Plane, key: &SecretKey) -> Device {
        Device::of(Node::new(tag).with_config(&format!(
            "[plane]\nurl = {:?}\ntrusted_keys = [{:?}]\npoll_interval = \"1s\"",
            plane.base(),
            key.public().to_base64()
        )))
    }

    fn of(n: Node) -> Device {
        let agents = n.dir.path().join("agents");
        std::fs::create_dir_all(&agents).unwrap();
        Device {
            n,
            agents,
            child: None,
        }
    }

    /// Starts the launcher as the service would (without systemd: a
    /// restart is an exec of the launcher in the same process).
    fn start(&mut self) {
        self.start_env(&[]);
    }

    fn start_env(&mut self, env: &[(&str, &str)]) {
        let _ = std::fs::remove_file(self.n.data().join("api-addr"));
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.n.dir.path().join("agent.log"))
            .unwrap();
        self.child = Some(
            Command::new(common::workspace_bin("stead-launch"))
                .args(["run", "--config"])
                .arg(self.n.config())
                .env("STEAD_AGENT_DIR", &self.agents)
                .env("STEAD_PACKAGE_BINARY", env!("CARGO_BIN_EXE_stead"))
                .env("STEAD_LOG", "info")
                .envs(env.iter().copied())
                .env_remove("INVOCATION_ID")
                .env_remove("NOTIFY_SOCKET")
                .stdout(std::process::Stdio::null())
                .stderr(log)
                .spawn()
                .unwrap(),
        );
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.n.dir.path().join("agent.log")).unwrap_or_default()
    }

    fn addr(&self) -> Option<String> {
        std::fs::read_to_string(self.n.data().join("api-addr"))
            .ok()
            .map(|s| s.trim().to_string())
    }

    /// GET /v1/agent, once an agent answers.
    fn agent(&self) -> Option<serde_json::Value> {
        let addr = self.addr()?;
        let (code, body) = common::agent::try_http_get(&addr, "/v1/agent")?;
        (code == 200).then(|| serde_json::from_str(&body).unwrap())
    }

    fn post(&self, path: &str, body: &str) -> (u16, String) {
        let addr = self.wait(30, "the API", |d| {
            d.addr().filter(|a| std::net::TcpStream::connect(a).is_ok())
        });
        let token = std::fs::read_to_string(self.n.data().join("api-token")).unwrap();
        common::agent::http_send(&addr, "POST", path, Some(token.trim()), body)
    }

    fn wait<T>(&self, secs: u64, what: &str, mut f: impl FnMut(&Device) -> Option<T>) -> T {
        let until = Instant::now() + Duration::from_secs(secs);
        loop {
            if let Some(t) = f(self) {
                return t;
            }
            assert!(
                Instant::now() < until,
                "{what}: not within {secs}s\nagent: {:?}\nlog:\n{}",
                self.agent(),
                self.log()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn state(&self) -> String {
        std::fs::read_to_string(self.agents.join("launch")).unwrap_or_default()
    }

    fn last_update(&self) -> Option<serde_json::Value> {
        self.agent()?["updates"].as_array()?.last().cloned()
    }
}

impl Drop for Device {
    fn drop(&mut self) {
        if let Some(c) = self.child.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn starts(log: &str) -> usize {
    log.matches("stead starting").count()
}

fn binary(p: &Path) -> Vec<u8> {
    std::fs::read(p).unwrap()
}

#[test]
fn an_update_lands_switches_once_and_confirms_without_recreating_a_module() {
    let plane = Plane::start();
    let key = SecretKey::generate().unwrap();
    let mut d = Device::new("upd-ok", &key, "confirm_window = \"60s\"");
    let m = d.n.module("web");
    d.n.write_intention("web.toml", Module::new(&m, IMAGE_1).idle("up"));
    d.start();
    d.wait(60, "the module running", |d| {
        d.n.container(&m).filter(|c| c.1 == "running")
    });
    let before = d.n.container_id(&m);
    let since = unix_now();
    let url = publish(&plane, &key, NEW, &build_as(NEW), None);
    let (code, body) = d.post("/v1/agent/update", &format!(r#"{{"url":"{url}"}}"#));
    assert_eq!(code, 202, "{body}");
    let done = d.wait(90, "the update done", |d| {
        d.last_update()
            .filter(|u| u["state"] == "done" || u["state"] == "failed")
    });
    assert_eq!(done["state"], "done", "{done:#}");
    let a = d.agent().unwrap();
    assert_eq!(a["running"]["version"], NEW, "{a:#}");
    assert_eq!(a["running"]["slot"], "current", "{a:#}");
    assert_eq!(a["current"], NEW);
    assert!(a["candidate"].is_null() && a["failed"].is_null(), "{a:#}");
    let st = d.state();
    assert!(
        st.contains(&format!("current {NEW}\n")) && !st.contains("candidate"),
        "{st}"
    );
    // The landed binary is the published one.
    assert_eq!(binary(&d.agents.join(NEW).join("stead")), build_as(NEW));
    // Exactly one restart: the package's agent, then the new one.
    assert_eq!(starts(&d.log()), 2, "{}", d.log());
    let lines: Vec<String> = done["log"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["line"].as_str().unwrap().to_string())
        .collect();
    for said in [
        "requested by the API",
        "landing",
        "landed and checked: stead 0.6.9",
        "switching to 0.6.9",
        "candidate 0.6.9 started",
        "0.6.9 confirmed",
    ] {
        assert!(lines.iter().any(|l| l.contains(said)), "{said}: {lines:#?}");
    }
    let (_, metrics) = common::agent::http_get(&d.addr().unwrap(), "/metrics");
    for line in [
        format!(
            "stead_agent_info{{version=\"{NEW}\",slot=\"current\",current=\"{NEW}\",previous=\"\",candidate=\"\"}} 1"
        ),
        "stead_agent_updates{state=\"done\"} 1".to_string(),
        "stead_agent_candidate_starts 0".to_string(),
        "stead_agent_candidate_failed{version=\"\"} 0".to_string(),
    ] {
        assert!(metrics.lines().any(|l| l == line), "{line} in:\n{metrics}");
    }
    // The module's container was not touched.
    assert_eq!(d.n.container_id(&m), before);
    assert_eq!(d.n.creates_since(&m, since), 0);
    // Asked again, it is the version running: nothing to do.
    let (code, body) = d.post("/v1/agent/update", &format!(r#"{{"url":"{url}"}}"#));
    assert_eq!((code, body.contains(NEW)), (200, true), "{body}");
}

#[test]
fn a_binary_that_is_not_the_signed_one_fails_and_nothing_switches() {
    let plane = Plane::start();
    let key = SecretKey::generate().unwrap();
    let mut d = Device::new("upd-bad", &key, "");
    d.start();
    let url = publish(&plane, &key, NEW, &build_as(NEW), Some(&"0".repeat(64)));
    let (code, body) = d.post("/v1/agent/update", &format!(r#"{{"url":"{url}"}}"#));
    assert_eq!(code, 202, "{body}");
    let u = d.wait(60, "the update ended", |d| {
        d.last_update().filter(|u| u["state"] == "failed")
    });
    assert!(
        u["failure"]
            .as_str()
            .unwrap()
            .contains("the statement says 0000"),
        "{u:#}"
    );
    assert!(
        !d.agents.join(NEW).join("stead").exists(),
        "never put in place"
    );
    assert!(!d.agents.join(NEW).join("stead.part").exists());
    assert_eq!(d.state(), "", "the launcher was never told");
    assert_eq!(starts(&d.log()), 1);
    // Signed by another key: refused before anything is filed.
    let other = SecretKey::generate().unwrap();
    let url = publish(&plane, &other, "0.6.8", &build_as("0.6.8"), None);
    let (code, body) = d.post("/v1/agent/update", &format!(r#"{{"url":"{url}"}}"#));
    assert_eq!(code, 422, "{body}");
    assert!(body.contains("does not trust"), "{body}");
    // A lower version without downgrade: refused, naming both.
    let url = publish(&plane, &key, "0.4.9", &build_as("0.4.9"), None);
    let (code, body) = d.post("/v1/agent/update", &format!(r#"{{"url":"{url}"}}"#));
    assert_eq!(code, 422, "{body}");
    assert!(body.contains("0.4.9 is below the running"), "{body}");
}

#[test]
fn a_candidate_that_dies_at_every_start_is_given_up_after_three_and_the_old_version_reports_it() {
    let plane = Plane::start();
    let key = SecretKey::generate().unwrap();
    let mut d = Device::new("upd-dies", &key, "");
    // The candidate aborts as it starts (a crash point only a candidate
    // reaches; the package's agent passes it by); the service manager's
    // restarts are played by hand.
    let dies = [("STEAD_CRASH_AT", "candidate:start")];
    d.start_env(&dies);
    let url = publish(&plane, &key, NEW, &build_as(NEW), None);
    let (code, body) = d.post("/v1/agent/update", &format!(r#"{{"url":"{url}"}}"#));
    assert_eq!(code, 202, "{body}");
    for n in 1..=3 {
        if n > 1 {
            d.start_env(&dies);
        }
        let st = d.child.as_mut().unwrap().wait().unwrap();
        assert!(!st.success(), "start {n} of the candidate died: {st:?}");
        assert!(
            d.state().contains(&format!("candidate {NEW} {n}")),
            "{}\n{}",
            d.state(),
            d.log()
        );
    }
    d.start();
    let u = d.wait(60, "the old version reports the failure", |d| {
        d.last_update().filter(|u| u["state"] == "failed")
    });
    assert!(
        u["failure"]
            .as_str()
            .unwrap()
            .contains("candidate 0.6.9: started 3 times and never confirmed"),
        "{u:#}"
    );
    // Its history names each start that ended without confirming.
    let said = u["log"].to_string();
    for start in [
        "started (start 1 of the launcher's)".to_string(),
        format!(
            "{NEW} started again (start 2 of the launcher's): the start before ended without confirming"
        ),
        "started again (start 3 of the launcher's)".to_string(),
    ] {
        assert!(said.contains(&start), "{start}: {u:#}");
    }
    let a = d.agent().unwrap();
    assert_eq!(a["running"]["slot"], "package", "{a:#}");
    assert_eq!(a["running"]["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(a["failed"]["version"], NEW, "{a:#}");
    assert!(a["candidate"].is_null());
    let (_, metrics) = common::agent::http_get(&d.addr().unwrap(), "/metrics");
    assert!(
        metrics.contains(&format!(
            "stead_agent_candidate_failed{{version=\"{NEW}\"}} 1"
        )),
        "{metrics}"
    );
    assert!(
        metrics.contains("stead_agent_updates{state=\"failed\"} 1"),
        "{metrics}"
    );
}

#[test]
fn a_plane_document_naming_a_version_updates_the_node_and_the_report_says_so() {
    let plane = Plane::start();
    let key = SecretKey::generate().unwrap();
    // The plane's keys alone: no [update] keys of its own.
    let mut d = Device::with_plane("upd-plane", &plane, &key);
    let m = d.n.module("web");
    let release = publish(&plane, &key, NEW, &build_as(NEW), None);
    let mut p = common::desired::payload(&d.n, 1, vec![common::desired::module(&m, "1")]);
    plane.publish(&d.n.id, &common::desired::sign(&key, &p));
    d.start();
    d.wait(60, "the plane's module running", |d| {
        d.n.container(&m).filter(|c| c.1 == "running")
    });
    let before = d.n.container_id(&m);
    let since = unix_now();
    // Revision 2 asks for the new version.
    p["revision"] = 2.into();
    p["agent"] = serde_json::json!({"version": NEW, "release": release});
    plane.publish(&d.n.id, &common::desired::sign(&key, &p));
    let done = d.wait(120, "the update done", |d| {
        d.last_update()
            .filter(|u| u["state"] == "done" || u["state"] == "failed")
    });
    assert_eq!(done["state"], "done", "{done:#}");
    assert_eq!(done["requested_by"], "plane revision 2", "{done:#}");
    // Confirmed only once the plane answered the candidate.
    assert!(
        d.log().contains(&format!("candidate {NEW}: confirmed")),
        "{}",
        d.log()
    );
    let report = d.wait(60, "the report of the new version", |_| {
        plane
            .report_json(&d.n.id)
            .filter(|r| r["agent"]["current"] == NEW)
    });
    assert_eq!(report["agent"]["running"]["version"], NEW, "{report:#}");
    assert_eq!(report["agent"]["updates"][0]["state"], "done");
    assert_eq!(d.n.container_id(&m), before, "the module was not recreated");
    assert_eq!(d.n.creates_since(&m, since), 0);
    assert_eq!(starts(&d.log()), 2, "one restart");
    // The same document again changes nothing: the version asked for runs.
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(starts(&d.log()), 2);
    assert_eq!(d.agent().unwrap()["updates"].as_array().unwrap().len(), 1);
}

#[test]
fn a_plane_release_not_signed_by_its_keys_is_refused_once_and_reported() {
    let plane = Plane::start();
    let key = SecretKey::generate().unwrap();
    let mut d = Device::with_plane("upd-plane-bad", &plane, &key);
    let stranger = SecretKey::generate().unwrap();
    let release = publish(&plane, &stranger, NEW, &build_as(NEW), None);
    let mut p = common::desired::payload(&d.n, 1, vec![]);
    p["agent"] = serde_json::json!({"version": NEW, "release": release});
    plane.publish(&d.n.id, &common::desired::sign(&key, &p));
    d.start();
    let u = d.wait(60, "the refusal recorded", |d| {
        d.last_update().filter(|u| u["state"] == "failed")
    });
    assert!(
        u["failure"].as_str().unwrap().contains("does not trust"),
        "{u:#}"
    );
    assert_eq!(u["requested_by"], "plane revision 1");
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(
        d.agent().unwrap()["updates"].as_array().unwrap().len(),
        1,
        "asked once"
    );
    assert_eq!(d.state(), "");
    assert_eq!(starts(&d.log()), 1);
}

#[test]
fn the_cli_signs_a_release_and_self_update_waits_through_the_restart() {
    let plane = Plane::start();
    let dir = tempfile::tempdir().unwrap();
    let stead = |args: &[&str]| {
        let o = common::bins::stead_cmd(args).output().unwrap();
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    let key = dir.path().join("release.key");
    let (code, _, err) = stead(&["plane", "keygen", "--out", key.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{err}");
    let public = std::fs::read_to_string(key.with_extension("key.pub")).unwrap();
    let t = target();
    let bin = dir.path().join(format!("stead-{t}"));
    std::fs::write(&bin, build_as(NEW)).unwrap();
    let statement = dir.path().join("release.json");
    let base = format!("{}/rel", plane.base());
    let (code, _, err) = stead(&[
        "plane",
        "release",
        "--key",
        key.to_str().unwrap(),
        "--version",
        NEW,
        "--binary",
        &format!("{t}={}", bin.display()),
        "--url-base",
        &base,
        "--out",
        statement.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        err.contains(&format!("signed release {NEW} ({t})")),
        "{err}"
    );
    plane.publish_raw_path(&format!("rel/stead-{t}"), &std::fs::read(&bin).unwrap());
    let mut d = Device::new("upd-cli", &SecretKey::generate().unwrap(), "");
    // Trust the CLI's key.
    let cfg = std::fs::read_to_string(d.n.config()).unwrap();
    let cfg = cfg.replace(
        "trusted_keys = [\"",
        &format!("trusted_keys = [\"{}\", \"", public.trim()),
    );
    std::fs::write(d.n.config(), cfg).unwrap();
    d.start();
    d.wait(30, "the API", |d| d.agent());
    let o = Command::new(env!("CARGO_BIN_EXE_stead"))
        .args(["self-update", "--wait", "--config"])
        .arg(d.n.config())
        .arg(&statement)
        .output()
        .unwrap();
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}\n{}", d.log());
    assert!(
        out.contains(&format!("update 1 to {NEW} requested")),
        "{out}"
    );
    assert!(
        out.contains(&format!("{NEW} confirmed")),
        "the log followed to the end: {out}"
    );
    let o = Command::new(env!("CARGO_BIN_EXE_stead"))
        .args(["agent", "--config"])
        .arg(d.n.config())
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&o.stdout);
    assert!(
        shown.starts_with(&format!("running    {NEW} (current, {t})")),
        "{shown}"
    );
    assert!(
        shown.contains(&format!(
            "update 1   {} -> {NEW}  done",
            env!("CARGO_PKG_VERSION")
        )),
        "{shown}"
    );
    // `stead status` says it in a line, from GET /v1/status's `agent`.
    let (code, status) = d.n.cli(&["status"]);
    assert_eq!(code, Some(0), "{status}");
    assert!(
        status.contains(&format!("stead {NEW} (current)  update 1 to {NEW}: done\n")),
        "{status}"
    );
}

#[test]
fn a_crash_in_the_switch_ends_with_the_update_done_and_one_restart_per_attempt() {
    let plane = Plane::start();
    let key = SecretKey::generate().unwrap();
    for (point, attempt, said) in [
        // Stamped, the launcher not told yet: the next start finds the
        // switch cut short, faults it, and tries again after the backoff.
        ("update:after-switch-stamp", 1, "the switch was cut short"),
        // The launcher told: the next start is the candidate's.
        ("update:after-launch-state", 0, "candidate 0.6.9 started"),
    ] {
        let mut d = Device::new("upd-crash", &key, "confirm_window = \"60s\"");
        let cfg = std::fs::read_to_string(d.n.config()).unwrap();
        std::fs::write(
            d.n.config(),
            format!("reload_retry_interval = \"1s\"\n{cfg}"),
        )
        .unwrap();
        d.start_env(&[("STEAD_CRASH_AT", point)]);
        let url = publish(&plane, &key, NEW, &build_as(NEW), None);
        let (code, body) = d.post("/v1/agent/update", &format!(r#"{{"url":"{url}"}}"#));
        assert_eq!(code, 202, "{body}");
        let st = d.child.as_mut().unwrap().wait().unwrap();
        assert!(!st.success(), "{point}: the agent died there: {st:?}");
        // The service manager's restart, without the crash point.
        d.start();
        let u = d.wait(90, "the update ended", |d| {
            d.last_update()
                .filter(|u| u["state"] == "done" || u["state"] == "failed")
        });
        assert_eq!(u["state"], "done", "{point}: {u:#}");
        assert_eq!(u["attempt"], attempt, "{point}: {u:#}");
        let lines: Vec<&str> = u["log"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["line"].as_str().unwrap())
            .collect();
        assert!(
            lines.iter().any(|l| l.contains(said)),
            "{point}: {lines:#?}"
        );
        assert_eq!(d.agent().unwrap()["running"]["version"], NEW);
    }
}

#[test]
fn a_candidate_that_corrupts_the_store_is_given_up_and_the_old_version_puts_the_snapshot_back() {
    let plane = Plane::start();
    let key = SecretKey::generate().unwrap();
    let mut d = Device::new("upd-corrupt", &key, "");
    // The candidate writes garbage over the store once it is open, then
    // aborts; its later starts cannot open the store.
    let corrupts = [("STEAD_CRASH_AT", "candidate:corrupt-store")];
    d.start_env(&corrupts);
    let url = publish(&plane, &key, NEW, &build_as(NEW), None);
    let (code, body) = d.post("/v1/agent/update", &format!(r#"{{"url":"{url}"}}"#));
    assert_eq!(code, 202, "{body}");
    let store = d.n.data().join("stead.redb");
    let snapshot = d.n.data().join("stead.redb.before-update");
    for n in 1..=3 {
        if n > 1 {
            d.start_env(&corrupts);
        }
        let st = d.child.as_mut().unwrap().wait().unwrap();
        assert!(!st.success(), "start {n} of the candidate failed: {st:?}");
        assert!(d.state().contains(&format!("candidate {NEW} {n}")));
        // Taken by the running version before it named the candidate.
        assert!(snapshot.is_file(), "start {n}: the snapshot is there");
    }
    assert!(d.log().contains("damaged, aborting"), "{}", d.log());
    let damaged = std::fs::read(&store).unwrap();
    assert!(damaged.starts_with(&[0xa5; 64]));
    // The version it replaced: the store does not open, the snapshot is
    // put back, the damaged store kept aside, the update failed.
    d.start();
    let u = d.wait(60, "the old version reports the failure", |d| {
        d.last_update().filter(|u| u["state"] == "failed")
    });
    assert!(
        u["failure"]
            .as_str()
            .unwrap()
            .contains("started 3 times and never confirmed"),
        "{u:#}"
    );
    assert!(
        d.log()
            .contains("the snapshot taken before the switch is the store again"),
        "{}",
        d.log()
    );
    assert_eq!(
        std::fs::read(d.n.data().join("stead.redb.from-candidate")).unwrap(),
        damaged
    );
    assert!(!snapshot.exists(), "the snapshot is the store now");
    let a = d.agent().unwrap();
    assert_eq!(a["running"]["slot"], "package", "{a:#}");
    assert_eq!(a["failed"]["version"], NEW, "{a:#}");
}

#[test]
fn a_candidate_whose_plane_fetches_are_all_refused_is_not_confirmed_by_the_old_versions_contact() {
    let mut plane = Plane::start();
    let key = SecretKey::generate().unwrap();
    let mut d = Device::of(Node::new("upd-refused").with_config(&format!(
        "[plane]\nurl = {:?}\ntrusted_keys = [{:?}]\npoll_interval = \"1s\"\n[update]\nconfirm_window = \"6s\"",
        plane.base(),
        key.public().to_base64()
    )));
    let p = common::desired::payload(&d.n, 1, vec![]);
    plane.publish(&d.n.id, &common::desired::sign(&key, &p));
    d.start();
    d.wait(60, "the old version took the plane's document", |d| {
        d.log().contains("adopted revision 1").then_some(())
    });
    // From now on the plane refuses every fetch of the document; the
    // release is still served.
    plane.set_fault(Some((403, None)));
    let url = publish(&plane, &key, NEW, &build_as(NEW), None);
    let (code, body) = d.post("/v1/agent/update", &format!(r#"{{"url":"{url}"}}"#));
    assert_eq!(code, 202, "{body}");
    let u = d.wait(120, "the update decided", |d| {
        d.last_update()
            .filter(|u| u["state"] == "failed" || u["state"] == "done")
    });
    assert_eq!(u["state"], "failed", "{u:#}");
    let failure = u["failure"].as_str().unwrap();
    assert!(
        failure.contains("the plane never answered") && failure.contains("403"),
        "{u:#}"
    );
    assert!(
        d.log().contains(&format!("candidate {NEW}: confirming")),
        "the candidate ran: {}",
        d.log()
    );
    assert!(!d.log().contains(&format!("candidate {NEW}: confirmed")));
    assert_eq!(d.agent().unwrap()["running"]["slot"], "package");
}
