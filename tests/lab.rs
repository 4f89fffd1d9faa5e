//! The device lab: the .deb on a Debian VM under QEMU (scripts/lab/), with
//! systemd as PID 1, Debian's kernel and Docker Engine, each test on a
//! machine of its own (a copy-on-write overlay of the cached image). A step
//! runs inside at each boot and writes what it saw to the 9p share; the
//! assertions are here. These need dist/ and the lab (QEMU, the image), so
//! plain `cargo test` lists them as ignored; scripts/test.sh sets both up
//! and runs them. One VM at a time (the machine has 2 cores).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::Instant;

/// One VM at a time in this binary (run.sh also locks across processes).
static ONE_VM: Mutex<()> = Mutex::new(());

/// A container command that prints, then idles and stops at once on
/// SIGTERM (a shell as PID 1 ignores it otherwise: every stop takes 10 s).
fn idle_after(print: &str) -> String {
    format!("{print}; trap 'exit 0' TERM; sleep 1000000 & wait")
}

/// A lab machine: its overlay disk and share in a directory of its own
/// (kept when `STEAD_LAB_KEEP=1`, for a look after a failure).
struct Machine {
    dir: Option<tempfile::TempDir>,
    path: PathBuf,
    began: Instant,
    name: String,
}

impl Machine {
    fn new(name: &str) -> Machine {
        let dir = tempfile::Builder::new()
            .prefix(&format!("stead-lab-{name}-"))
            // The overlay is written with O_DIRECT (cache=none): not tmpfs.
            .tempdir_in("/var/tmp")
            .unwrap();
        let path = dir.path().join("machine");
        lab(Command::new(script("run.sh")).arg("new").arg(&path));
        Machine {
            dir: Some(dir),
            path,
            began: Instant::now(),
            name: name.to_string(),
        }
    }

    /// Boots the machine, which runs `script` (bash, with the step library
    /// sourced) as step `step`, then shuts down as `args` say (`--then
    /// reboot`, `--cut-after MIN-MAX`; default a poweroff).
    fn boot(&self, step: &str, script: &str, args: &[&str]) {
        let steps = self.path.join("share/steps");
        std::fs::write(
            steps.join(format!("{step}.sh")),
            format!(". /lab/in/lib.sh\n{script}"),
        )
        .unwrap();
        lab(Command::new(self::script("run.sh"))
            .arg("boot")
            .arg(&self.path)
            .arg(step)
            .args(args));
    }

    /// A file the step `step` wrote in its directory.
    fn out(&self, step: &str, file: &str) -> String {
        let p = self.path.join("share/out").join(step).join(file);
        std::fs::read_to_string(&p).unwrap_or_else(|e| {
            panic!(
                "{}: {e}; the step's log:\n{}",
                p.display(),
                std::fs::read_to_string(self.path.join("share/out").join(step).join("log"))
                    .unwrap_or_default()
            )
        })
    }

    /// `KEY=VALUE` lines (systemctl show) as pairs.
    fn show(&self, step: &str, file: &str) -> std::collections::BTreeMap<String, String> {
        self.out(step, file)
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// A module as the agent's API said it.
    fn module(&self, step: &str, name: &str) -> serde_json::Value {
        let text = self.out(step, &format!("module-{name}.json"));
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("module {name}: {e}: {text:?}"))
    }
}

impl Drop for Machine {
    fn drop(&mut self) {
        eprintln!(
            "lab: machine {} done in {:.0} s",
            self.name,
            self.began.elapsed().as_secs_f64()
        );
        if std::env::var("STEAD_LAB_KEEP").as_deref() == Ok("1") {
            if let Some(d) = self.dir.take() {
                eprintln!("lab: kept {}", d.keep().display());
            }
        }
    }
}

fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scripts/lab")
        .join(name)
}

/// Runs a lab script, its messages passed on; a failure (a machine that
/// does not boot, a step that fails) fails the test with what it said.
fn lab(cmd: &mut Command) {
    let o = cmd.output().unwrap();
    let said = String::from_utf8_lossy(&o.stderr);
    eprint!("{said}");
    assert!(o.status.success(), "{cmd:?} failed:\n{said}");
}

fn one_vm() -> std::sync::MutexGuard<'static, ()> {
    ONE_VM.lock().unwrap_or_else(|e| e.into_inner())
}

/// The modules of the install test: one plain, one with a read-write mount
/// whose source under /srv does not exist yet, one reading an env file
/// under /home.
fn modules() -> String {
    let module = |name: &str, print: &str, extra: &str| {
        format!(
            "cat >/etc/stead/intentions.d/{name}.toml <<'EOF'\nname = \"{name}\"\nimage = \"stead-lab/busybox:1\"\ncommand = [\"sh\", \"-c\", {:?}]\n{extra}EOF\n",
            idle_after(print)
        )
    };
    [
        module("web", "echo up", ""),
        module(
            "data",
            "echo written >/data/hello; echo up",
            "[[mounts]]\nsource = \"/srv/lab/data\"\ntarget = \"/data\"\n",
        ),
        module(
            "homeenv",
            "echo FROM_HOME=$FROM_HOME",
            "env_files = [\"/home/lab/app.env\"]\n",
        ),
    ]
    .concat()
}

#[test]
#[ignore = "needs dist/ and the lab (scripts/test.sh sets both up)"]
fn the_deb_on_a_fresh_system_is_ready_converges_within_the_unit_s_paths_and_a_reboot_recreates_nothing()
 {
    let _one = one_vm();
    let m = Machine::new("install");
    m.boot(
        "install",
        &format!(
            r#"
install_stead
# What systemd says of the unit dpkg started: READY=1 reached it.
wait_until 60 systemctl is-active stead
unit_show >unit
stead status >status 2>&1 && echo 0 >status.rc || echo $? >status.rc
busybox_image
mkdir -p /home/lab
echo FROM_HOME=read-from-home >/home/lab/app.env
# Settled sooner than the default 30 s: an operator's edit of the conffile.
echo 'settle_window = "3s"' >>/etc/stead/stead.toml
{modules}
systemctl restart stead
wait_until 180 all_converged web data homeenv || true
for m in web data homeenv; do curl -fsS "http://127.0.0.1:7411/v1/modules/$m" >"module-$m.json"; done
if [ -d /srv/lab/data ]; then echo made; else echo missing; fi >srv
cat /srv/lab/data/hello >hello 2>&1 || true
docker logs stead-homeenv >homeenv.log 2>&1
containers >containers
creates | sort >creates
"#,
            modules = modules()
        ),
        &["--then", "reboot", "--timeout", "420"],
    );
    // The unit started by dpkg: active and running means READY=1 arrived
    // (Type=notify); the agent says it is running.
    let unit = m.show("install", "unit");
    assert_eq!(unit["ActiveState"], "active", "{unit:?}");
    assert_eq!(unit["SubState"], "running", "{unit:?}");
    assert_eq!(unit["NRestarts"], "0", "{unit:?}");
    // READY=1 came with STATUS=running; each pass since says how it went.
    let said = &unit["StatusText"];
    assert!(
        said == "running" || (said.contains(" modules; last pass ") && said.ends_with(" ms")),
        "{unit:?}"
    );
    assert_eq!(m.out("install", "status.rc").trim(), "0");
    let status = m.out("install", "status");
    assert!(status.contains("engine reachable"), "{status}");
    // Each module converged under the unit's hardening.
    for name in ["web", "data", "homeenv"] {
        let module = m.module("install", name);
        assert_eq!(module["state"], "converged", "{name}: {module}");
    }
    // A read-write mount's missing source under /srv was made, and the
    // container wrote through it.
    assert_eq!(m.out("install", "srv").trim(), "made");
    assert_eq!(m.out("install", "hello").trim(), "written");
    // An env file under /home (ProtectHome=read-only) was read.
    let log = m.out("install", "homeenv.log");
    assert!(log.contains("FROM_HOME=read-from-home"), "{log}");
    let before = m.out("install", "containers");
    assert_eq!(before.lines().count(), 3, "{before}");
    assert_eq!(
        m.out("install", "creates").lines().collect::<Vec<_>>(),
        ["stead-data", "stead-homeenv", "stead-web"],
        "one create per module"
    );

    // After `systemctl reboot`: every module runs again, with the same
    // containers, and the engine saw no create this boot.
    m.boot(
        "rebooted",
        r#"
wait_until 60 systemctl is-active stead
unit_show >unit
wait_until 120 all_converged web data homeenv || true
for m in web data homeenv; do curl -fsS "http://127.0.0.1:7411/v1/modules/$m" >"module-$m.json"; done
containers >containers
creates >creates
[ "$(cat /proc/sys/kernel/random/boot_id)" != "$(cat ../install/boot)" ] && echo new >boot-new
"#,
        &["--timeout", "300"],
    );
    assert_eq!(m.out("rebooted", "boot-new").trim(), "new", "a new boot");
    let unit = m.show("rebooted", "unit");
    assert_eq!(
        (unit["ActiveState"].as_str(), unit["SubState"].as_str()),
        ("active", "running"),
        "{unit:?}"
    );
    for name in ["web", "data", "homeenv"] {
        let module = m.module("rebooted", name);
        assert_eq!(module["state"], "converged", "{name}: {module}");
    }
    let ids = |s: &str| -> Vec<String> {
        s.lines()
            .map(|l| l.split_whitespace().take(2).collect::<Vec<_>>().join(" "))
            .collect()
    };
    assert_eq!(
        ids(&m.out("rebooted", "containers")),
        ids(&before),
        "the same containers"
    );
    assert_eq!(
        m.out("rebooted", "creates"),
        "",
        "no create after the reboot"
    );
}

#[test]
#[ignore = "needs dist/ and the lab (scripts/test.sh sets both up)"]
fn systemd_s_watchdog_kills_and_restarts_an_agent_whose_main_loop_hangs() {
    let _one = one_vm();
    let m = Machine::new("watchdog");
    m.boot(
        "hang",
        r#"
# A short watchdog, and the main loop made to hang (STEAD_CRASH_AT=loop:hang),
# in a drop-in made before dpkg starts the unit.
mkdir -p /etc/systemd/system/stead.service.d
printf '[Service]\nWatchdogSec=10s\nEnvironment=STEAD_CRASH_AT=loop:hang\n' \
    >/etc/systemd/system/stead.service.d/lab.conf
install_stead
wait_until 60 systemctl is-active stead
systemctl show -p MainPID --value stead >first-pid
# The API still answers while the loop hangs.
sleep 2
stead status >status 2>&1 && echo 0 >status.rc || echo $? >status.rc
wait_until 90 sh -c '[ "$(systemctl show -p NRestarts --value stead)" -ge 1 ]' || true
wait_until 30 systemctl is-active stead || true
unit_show >unit
journalctl -b -u stead --no-pager -o cat >journal
"#,
        &["--timeout", "300"],
    );
    let journal = m.out("hang", "journal");
    let unit = m.show("hang", "unit");
    assert_eq!(m.out("hang", "status.rc").trim(), "0", "the API answers");
    assert!(
        journal.contains("STEAD_CRASH_AT=loop:hang: the main loop hangs"),
        "{journal}"
    );
    // The agent's pinger saw no progress and stopped; systemd's watchdog
    // fired and restarted the unit.
    assert!(
        journal.contains("no longer pinging the watchdog"),
        "{journal}"
    );
    assert!(journal.contains("Watchdog timeout"), "{journal}");
    assert!(
        unit["NRestarts"].parse::<u32>().unwrap() >= 1,
        "{unit:?}\n{journal}"
    );
    // Started again: a new process, READY again.
    assert_eq!(unit["ActiveState"], "active", "{unit:?}");
    assert_ne!(
        unit["MainPID"],
        m.out("hang", "first-pid").trim(),
        "{unit:?}"
    );
}
