//! The launcher (`stead-launch`, installed as `/usr/bin/stead`) as a
//! process: it execs the binary its state file names with the same
//! arguments and tells it what it runs as, counts a candidate's agent
//! starts in the file (durably, before the exec), goes back to the
//! confirmed version after three, and gives up at once on a candidate it
//! cannot execute. The agents here are small scripts that print what they
//! were given, and the real `stead` as a candidate: it confirms itself once
//! a pass completed against the engine, and gives up when its window ends
//! without one, restarting into the version it replaced.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::Node;

struct Dir {
    _tmp: tempfile::TempDir,
    agents: PathBuf,
    package: PathBuf,
}

/// An agent that prints its slot, its version and its arguments, then
/// exits with `code`.
fn script(path: &Path, name: &str, code: i32) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(
        path,
        format!(
            "#!/bin/sh\necho \"{name} slot=$STEAD_LAUNCH_SLOT dir=$STEAD_AGENT_DIR launcher=${{STEAD_LAUNCHER##*/}} args=$*\"\nexit {code}\n"
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn dir() -> Dir {
    let tmp = tempfile::tempdir().unwrap();
    let agents = tmp.path().join("agent");
    std::fs::create_dir_all(&agents).unwrap();
    let package = tmp.path().join("usr-lib-stead/stead");
    script(&package, "package", 0);
    Dir {
        _tmp: tmp,
        agents,
        package,
    }
}

impl Dir {
    fn version(&self, v: &str, code: i32) {
        script(&self.agents.join(v).join("stead"), v, code);
    }

    fn state(&self, text: &str) {
        std::fs::write(self.agents.join("launch"), text).unwrap();
    }

    fn read_state(&self) -> String {
        std::fs::read_to_string(self.agents.join("launch")).unwrap_or_default()
    }

    /// Runs the launcher: (exit code, stdout, stderr).
    fn launch(&self, args: &[&str]) -> (i32, String, String) {
        let o = Command::new(common::workspace_bin("stead-launch"))
            .args(args)
            .env("STEAD_AGENT_DIR", &self.agents)
            .env("STEAD_PACKAGE_BINARY", &self.package)
            .env_remove("STEAD_LAUNCH_ATTEMPTS")
            .output()
            .unwrap();
        (
            o.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    }
}

#[test]
fn with_no_state_the_package_binary_runs_with_the_same_arguments() {
    let d = dir();
    let (code, out, _) = d.launch(&["run", "--config", "/etc/stead/stead.toml"]);
    assert_eq!(code, 0);
    assert!(
        out.starts_with("package slot=package"),
        "the package's binary, told so: {out}"
    );
    assert!(
        out.contains(&format!("dir={}", d.agents.display())),
        "{out}"
    );
    assert!(out.contains("launcher=stead-launch"), "{out}");
    assert!(
        out.trim_end()
            .ends_with("args=run --config /etc/stead/stead.toml"),
        "{out}"
    );
    assert_eq!(d.read_state(), "", "nothing to count, nothing written");
}

#[test]
fn the_exit_code_is_the_agents_own() {
    let d = dir();
    d.version("0.6.0", 75);
    d.state("current 0.6.0\n");
    let (code, out, _) = d.launch(&["run"]);
    assert_eq!(code, 75, "exec: the launcher is the agent ({out})");
    assert!(out.starts_with("0.6.0 slot=current"), "{out}");
}

#[test]
fn a_candidate_is_started_three_times_then_the_confirmed_version_runs_again() {
    let d = dir();
    d.version("0.6.0", 0);
    d.version("0.7.0", 1);
    d.state("current 0.6.0\nprevious 0.5.0\ncandidate 0.7.0 0\n");
    for n in 1..=3 {
        let (code, out, err) = d.launch(&["run"]);
        assert_eq!(code, 1);
        assert!(out.starts_with("0.7.0 slot=candidate"), "start {n}: {out}");
        assert!(err.contains(&format!("start {n} of 3")), "{err}");
        // Counted before the candidate ran: a power cut in its start is a
        // start.
        assert!(
            d.read_state().contains(&format!("candidate 0.7.0 {n}\n")),
            "{}",
            d.read_state()
        );
        // The CLI meanwhile talks through the candidate's binary, and
        // counts nothing.
        let (_, out, _) = d.launch(&["status"]);
        assert!(out.starts_with("0.7.0 slot=candidate"), "{out}");
        assert!(d.read_state().contains(&format!("candidate 0.7.0 {n}\n")));
    }
    let (code, out, err) = d.launch(&["run"]);
    assert_eq!(code, 0);
    assert!(out.starts_with("0.6.0 slot=current"), "gone back: {out}");
    assert!(err.contains("going back"), "{err}");
    let s = d.read_state();
    assert!(!s.contains("candidate"), "{s}");
    assert!(
        s.contains("current 0.6.0\n") && s.contains("previous 0.5.0\n"),
        "{s}"
    );
    assert!(
        s.contains("failed 0.7.0 started 3 times and never confirmed"),
        "{s}"
    );
}

#[test]
fn a_candidate_that_cannot_be_executed_is_given_up_at_once() {
    let d = dir();
    d.version("0.6.0", 0);
    let bad = d.agents.join("0.7.0/stead");
    std::fs::create_dir_all(bad.parent().unwrap()).unwrap();
    // There, but not executable (EACCES). (A file that is no binary is
    // handed to /bin/sh by execvp, as POSIX says: a landed candidate is
    // checked to run before it is ever the candidate.)
    std::fs::write(&bad, "#!/bin/sh\nexit 9\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&bad, std::fs::Permissions::from_mode(0o644)).unwrap();
    d.state("current 0.6.0\ncandidate 0.7.0 0\n");
    let (code, out, err) = d.launch(&["run"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("0.6.0 slot=current"), "{out}");
    let s = d.read_state();
    assert!(s.contains("failed 0.7.0 could not be executed"), "{s}");
    assert!(!s.contains("candidate"), "{s}");
}

/// The package's version (`package-version` beside its binary) is
/// recorded at a candidate's start; a package of another version
/// installed since (an operator's `dpkg -i`) runs instead of the version
/// stead updated itself to, which becomes `previous`.
#[test]
fn a_package_installed_since_takes_over_from_a_self_updated_version() {
    let d = dir();
    let package_version = d.package.with_file_name("package-version");
    std::fs::write(&package_version, "0.5.0-1\n").unwrap();
    d.version("0.6.0", 0);
    d.version("0.7.0", 0);
    d.state("current 0.6.0\ncandidate 0.7.0 0\n");
    let (_, out, _) = d.launch(&["run"]);
    assert!(out.starts_with("0.7.0 slot=candidate"), "{out}");
    let s = d.read_state();
    assert!(s.contains("package 0.5.0-1"), "{s}");
    // Confirmed (as the agent writes it), then started again under the
    // same package: it runs.
    d.state(
        &s.replace("current 0.6.0", "previous 0.6.0")
            .replace("candidate 0.7.0 1", "current 0.7.0"),
    );
    let (_, out, _) = d.launch(&["run"]);
    assert!(out.starts_with("0.7.0 slot=current"), "{out}");
    // A package of another version is installed: it runs, and says why.
    std::fs::write(&package_version, "0.8.0-1\n").unwrap();
    let (_, out, err) = d.launch(&["status"]);
    assert!(
        out.starts_with("package slot=package"),
        "the CLI too: {out}"
    );
    let (code, out, err2) = d.launch(&["run"]);
    assert_eq!(code, 0);
    assert!(out.starts_with("package slot=package"), "{out}");
    assert!(
        err2.contains("package 0.8.0-1 was installed over package 0.5.0-1: running the package's binary, not current 0.7.0"),
        "{err} {err2}"
    );
    let s = d.read_state();
    assert!(s.contains("previous 0.7.0"), "{s}");
    assert!(!s.contains("current"), "{s}");
    // A package-version that does not read takes nothing over.
    d.state("current 0.7.0\npackage 0.5.0-1\n");
    std::fs::write(&package_version, "../x\n").unwrap();
    let (_, out, err) = d.launch(&["run"]);
    assert!(out.starts_with("0.7.0 slot=current"), "{out}");
    assert!(err.contains("package-version"), "{err}");
}

#[test]
fn a_missing_or_damaged_state_runs_the_package_binary() {
    let d = dir();
    d.state("current ../../bin\n");
    let (code, out, err) = d.launch(&["run"]);
    assert_eq!(code, 0);
    assert!(out.starts_with("package slot=package"), "{out}");
    assert!(err.contains("line 1"), "the bad line is named: {err}");
    assert_eq!(
        d.read_state(),
        "current ../../bin\n",
        "left for the agent to see"
    );
    d.state("current 0.9.0\n");
    let (_, out, err) = d.launch(&["run"]);
    assert!(out.starts_with("package slot=package"), "{out}");
    assert!(err.contains("current 0.9.0 has no binary"), "{err}");
}

#[test]
fn a_start_that_cannot_be_counted_does_not_start_the_candidate() {
    let d = dir();
    d.version("0.6.0", 0);
    d.version("0.7.0", 0);
    d.state("current 0.6.0\ncandidate 0.7.0 0\n");
    // The agent directory read-only (a bind mount in a mount namespace of
    // the launcher's own; root ignores mode bits): the count cannot be
    // written.
    let o = Command::new("unshare")
        .args(["-m", "sh", "-c"])
        .arg(r#"mount --bind "$1" "$1" && mount -o remount,ro,bind "$1" "$1" && exec "$2" run"#)
        .arg("sh")
        .arg(&d.agents)
        .arg(common::workspace_bin("stead-launch"))
        .env("STEAD_AGENT_DIR", &d.agents)
        .env("STEAD_PACKAGE_BINARY", &d.package)
        .output()
        .unwrap();
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert!(out.starts_with("0.6.0 slot=current"), "{out} {err}");
    assert!(err.contains("not starting a candidate"), "{err}");
    assert_eq!(d.read_state(), "current 0.6.0\ncandidate 0.7.0 0\n");
}

#[test]
fn the_real_agent_runs_through_it() {
    let d = dir();
    let v = "0.6.0";
    let bin = d.agents.join(v).join("stead");
    std::fs::create_dir_all(bin.parent().unwrap()).unwrap();
    std::fs::copy(env!("CARGO_BIN_EXE_stead"), &bin).unwrap();
    d.state(&format!("current {v}\n"));
    let (code, out, err) = d.launch(&["--version"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("stead "), "{out}");
}

/// The real agent as candidate 0.7.0 beside a current 0.6.0 (a script),
/// in an agent directory of the node's.
fn real_candidate(n: &Node) -> Dir {
    let agents = n.data().parent().unwrap().join("agents");
    std::fs::create_dir_all(&agents).unwrap();
    let package = agents.join("package-stead");
    script(&package, "package", 0);
    let d = Dir {
        _tmp: tempfile::tempdir().unwrap(),
        agents,
        package,
    };
    d.version("0.6.0", 0);
    let bin = d.agents.join("0.7.0/stead");
    std::fs::create_dir_all(bin.parent().unwrap()).unwrap();
    std::fs::copy(env!("CARGO_BIN_EXE_stead"), &bin).unwrap();
    d.state("current 0.6.0\nprevious 0.5.0\ncandidate 0.7.0 0\n");
    d
}

fn launch_agent(d: &Dir, n: &Node, systemd: bool) -> std::process::Child {
    let mut c = Command::new(common::workspace_bin("stead-launch"));
    c.args(["run", "--config"])
        .arg(n.config())
        .env("STEAD_AGENT_DIR", &d.agents)
        .env("STEAD_PACKAGE_BINARY", &d.package)
        .env_remove("INVOCATION_ID")
        .env_remove("NOTIFY_SOCKET")
        .stdout(std::process::Stdio::piped())
        .stderr(std::fs::File::create(n.data().parent().unwrap().join("agent.log")).unwrap());
    if systemd {
        c.env("INVOCATION_ID", "0123456789abcdef");
    }
    c.spawn().unwrap()
}

fn wait_exit(c: &mut std::process::Child, secs: u64) -> std::process::ExitStatus {
    let until = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(st) = c.try_wait().unwrap() {
            return st;
        }
        if Instant::now() > until {
            let _ = c.kill();
            panic!("still running after {secs}s");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_candidate_that_never_reaches_the_engine_gives_up_and_the_replaced_version_runs() {
    let n = Node::new("cand-away")
        .with_socket("/nonexistent/engine.sock")
        .with_config("[update]\nconfirm_window = \"2s\"");
    let d = real_candidate(&n);
    let mut c = launch_agent(&d, &n, false);
    let st = wait_exit(&mut c, 60);
    let mut out = String::new();
    std::io::Read::read_to_string(c.stdout.as_mut().unwrap(), &mut out).unwrap();
    let log = std::fs::read_to_string(n.data().parent().unwrap().join("agent.log")).unwrap();
    // Without systemd the candidate execs the launcher, which runs 0.6.0
    // (the script) with the same arguments.
    assert!(st.success(), "{st:?}\n{log}");
    assert!(
        out.starts_with("0.6.0 slot=current") && out.contains("args=run --config"),
        "{out}\n{log}"
    );
    let s = d.read_state();
    assert!(!s.contains("candidate"), "{s}");
    assert!(s.contains("current 0.6.0\n"), "{s}");
    assert!(
        s.contains("failed 0.7.0 not confirmed within 2s: no pass completed (engine not reachable"),
        "{s}"
    );
    let words = std::fs::read_to_string(d.agents.join("0.7.0/last-words")).unwrap();
    assert!(words.starts_with("not confirmed within 2s"), "{words}");
    assert!(log.contains("going back"), "{log}");
}

#[test]
fn under_systemd_a_candidate_that_gives_up_exits_for_a_restart() {
    let n = Node::new("cand-sd")
        .with_socket("/nonexistent/engine.sock")
        .with_config("[update]\nconfirm_window = \"1s\"");
    let d = real_candidate(&n);
    let mut c = launch_agent(&d, &n, true);
    let st = wait_exit(&mut c, 60);
    assert_eq!(st.code(), Some(75), "the documented restart code");
    assert!(
        d.read_state()
            .contains("failed 0.7.0 not confirmed within 1s")
    );
    // systemd's Restart= starts the launcher again: the replaced version.
    let (_, out, _) = d.launch(&["run"]);
    assert!(out.starts_with("0.6.0 slot=current"), "{out}");
}

#[test]
fn a_candidate_confirms_itself_once_a_pass_completed_against_the_engine() {
    let n = Node::new("cand-ok");
    let d = real_candidate(&n);
    let mut c = launch_agent(&d, &n, false);
    let until = Instant::now() + Duration::from_secs(60);
    while !d.read_state().contains("current 0.7.0") {
        assert!(
            c.try_wait().unwrap().is_none(),
            "the candidate ended: {}",
            std::fs::read_to_string(n.data().parent().unwrap().join("agent.log")).unwrap()
        );
        assert!(Instant::now() < until, "not confirmed: {}", d.read_state());
        std::thread::sleep(Duration::from_millis(200));
    }
    let s = d.read_state();
    assert!(
        s.contains("previous 0.6.0\n") && !s.contains("candidate"),
        "{s}"
    );
    assert!(!d.agents.join("0.7.0/last-words").exists());
    // Confirmed, it goes on running as the agent.
    std::thread::sleep(Duration::from_secs(2));
    assert!(c.try_wait().unwrap().is_none());
    c.kill().unwrap();
    c.wait().unwrap();
    // The next start runs it as the current version.
    let o = Command::new(common::workspace_bin("stead-launch"))
        .arg("--version")
        .env("STEAD_AGENT_DIR", &d.agents)
        .env("STEAD_PACKAGE_BINARY", &d.package)
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&o.stdout).starts_with("stead "));
}
