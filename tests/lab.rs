//! The device lab: the .deb on a Debian VM under QEMU (scripts/lab/), with
//! systemd as PID 1, Debian's kernel and Docker Engine, each test on a
//! machine of its own (a copy-on-write overlay of the cached image). A step
//! runs inside at each boot and writes what it saw to the 9p share; the
//! assertions are here. These need dist/ and the lab (QEMU, the image), so
//! plain `cargo test` lists them as ignored; scripts/test.sh sets both up
//! and runs them. One VM at a time (the machine has 2 cores).

#[path = "common/bins.rs"]
mod bins;
#[path = "common/tls.rs"]
#[allow(dead_code)]
mod tls;

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

/// The agent the .deb holds (dist/stead-x86_64-unknown-linux-musl), its
/// version text changed to `version`: a release of "another version" that
/// costs no second release build. What an update checks of it (size,
/// SHA-256, the signature, `--version`) is what it checks of any.
fn release_as(version: &str) -> Vec<u8> {
    let dist = Path::new(env!("CARGO_MANIFEST_DIR")).join("dist/stead-x86_64-unknown-linux-musl");
    let mut bin = std::fs::read(&dist).unwrap_or_else(|e| panic!("{}: {e}", dist.display()));
    let from = format!("{} (commit ", env!("CARGO_PKG_VERSION")).into_bytes();
    let to = format!("{version} (commit ").into_bytes();
    assert_eq!(from.len(), to.len());
    let at: Vec<usize> = bin
        .windows(from.len())
        .enumerate()
        .filter(|(_, w)| *w == from.as_slice())
        .map(|(i, _)| i)
        .collect();
    assert!(!at.is_empty(), "the version text is in the binary");
    for i in at {
        bin[i..i + to.len()].copy_from_slice(&to);
    }
    bin
}

/// Signs releases of `versions` with a key of its own, into the machine's
/// share (`/lab/in/rel/<version>/`: the statement and the binary, the
/// binary's URL on the VM's own loopback, where the step serves
/// `/srv/rel`: port 8088, or 8089 for those in `slow`, `serve_slowly`'s);
/// returns the public key.
fn releases(m: &Machine, versions: &[&str], slow: &[&str]) -> String {
    let stead = |args: &[&str]| {
        let o = bins::stead_cmd(args).output().unwrap();
        assert!(
            o.status.success(),
            "stead {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    };
    let rel = m.path.join("share/in/rel");
    std::fs::create_dir_all(&rel).unwrap();
    let key = rel.join("release.key");
    stead(&["plane", "keygen", "--out", key.to_str().unwrap()]);
    for v in versions {
        let dir = rel.join(v);
        std::fs::create_dir_all(&dir).unwrap();
        let bin = dir.join("stead-x86_64-unknown-linux-musl");
        std::fs::write(&bin, release_as(v)).unwrap();
        stead(&[
            "plane",
            "release",
            "--key",
            key.to_str().unwrap(),
            "--version",
            v,
            "--binary",
            &format!("x86_64-unknown-linux-musl={}", bin.display()),
            "--url-base",
            &format!(
                "http://127.0.0.1:{}/{v}",
                if slow.contains(v) { 8089 } else { 8088 }
            ),
            "--out",
            dir.join("release.json").to_str().unwrap(),
        ]);
    }
    std::fs::read_to_string(key.with_extension("key.pub"))
        .unwrap()
        .trim()
        .to_string()
}

/// The machine's .deb made again as package `version`-1 (`/lab/in/
/// stead-<version>.deb`), its agent `release_as(version)`: an operator's
/// newer package, without a second release build.
fn deb_as(m: &Machine, version: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    let run = |cmd: &mut Command| {
        let o = cmd.output().unwrap();
        assert!(
            o.status.success(),
            "{cmd:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    };
    run(Command::new("dpkg-deb")
        .arg("-R")
        .arg(m.path.join("share/in/stead.deb"))
        .arg(&root));
    std::fs::write(root.join("usr/lib/stead/stead"), release_as(version)).unwrap();
    std::fs::write(
        root.join("usr/lib/stead/package-version"),
        format!("{version}-1\n"),
    )
    .unwrap();
    let control = root.join("DEBIAN/control");
    let text = std::fs::read_to_string(&control).unwrap();
    let text: String = text
        .lines()
        .map(|l| {
            if l.starts_with("Version: ") {
                format!("Version: {version}-1\n")
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    std::fs::write(&control, text).unwrap();
    // The sums of the files changed would be wrong; they are optional.
    let _ = std::fs::remove_file(root.join("DEBIAN/md5sums"));
    run(Command::new("dpkg-deb")
        .args(["--root-owner-group", "-b"])
        .arg(&root)
        .arg(m.path.join(format!("share/in/stead-{version}.deb"))));
}

/// Signs the plane's documents for the VM (node `lab`) with the releases'
/// key, into the share (`/lab/in/plane/r<revision>.json`): no module of
/// the plane's, polled every 2 s, reported to `serve_slowly`'s PUT on port
/// 8089, and, where given, the agent's version and release.
fn plane_documents(m: &Machine, revisions: &[(u64, Option<(&str, &str)>)]) {
    let dir = m.path.join("share/in/plane");
    std::fs::create_dir_all(&dir).unwrap();
    let key = m.path.join("share/in/rel/release.key");
    for (revision, agent) in revisions {
        let mut payload = serde_json::json!({
            "modules": [],
            "poll": {"interval": "2s"},
            "report": "http://127.0.0.1:8089/report/lab.json",
        });
        if let Some((version, release)) = agent {
            payload["agent"] = serde_json::json!({"version": version, "release": release});
        }
        let input = dir.join(format!("r{revision}.payload.json"));
        std::fs::write(&input, payload.to_string()).unwrap();
        let o = std::process::Command::new(bins::workspace_bin("stead-plane"))
            .args(["sign", "--key"])
            .arg(&key)
            .args(["--node", "lab", "--revision", &revision.to_string(), "--in"])
            .arg(&input)
            .arg("--out")
            .arg(dir.join(format!("r{revision}.json")))
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
}

/// The broker's and the dependent's shared directory (a read-write mount:
/// not an input, so what the broker writes recreates nothing).
const SHARED: &str = "[[mounts]]\nsource = \"/srv/lab/shared\"\ntarget = \"/s\"\n";

/// Whether the broker is ready this boot (it wrote this boot's ID).
const READY: &str =
    r#"[ "$(cat /s/ready 2>/dev/null)" = "$(cat /proc/sys/kernel/random/boot_id)" ]"#;

/// Every module of the install test.
const MODULES: &str = "web data homeenv broker dependent";

fn one_vm() -> std::sync::MutexGuard<'static, ()> {
    ONE_VM.lock().unwrap_or_else(|e| e.into_inner())
}

/// The modules of the install test: one plain, one with a read-write mount
/// whose source under /srv does not exist yet, one reading an env file
/// under /home, and seed 004's pair: a broker ready 15 s after it starts
/// (its health check passes once it has written this boot's ID) and a
/// dependent that exits at once while the broker is not ready.
fn modules() -> String {
    let module = |name: &str, print: &str, extra: &str| {
        format!(
            "cat >/etc/stead/intentions.d/{name}.toml <<'EOF'\nname = \"{name}\"\nimage = \"stead-lab/busybox:1\"\nrestart = \"always\"\ncommand = [\"sh\", \"-c\", {:?}]\n{extra}EOF\n",
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
        // A trap first: a stop during the 15 s ends it at once.
        format!(
            "cat >/etc/stead/intentions.d/broker.toml <<'EOF'\nname = \"broker\"\nimage = \"stead-lab/busybox:1\"\nrestart = \"always\"\ncommand = [\"sh\", \"-c\", {:?}]\n{SHARED}[healthcheck]\ntest = {READY:?}\ninterval = \"5s\"\nretries = 1\nEOF\n",
            "trap 'exit 0' TERM; sleep 15 & wait; cat /proc/sys/kernel/random/boot_id >/s/ready; echo ready; sleep 1000000 & wait"
        ),
        module(
            "dependent",
            &format!("{READY} || {{ echo broker not ready; exit 1; }}; echo up"),
            &format!(
                "depends_on = [{{ module = \"broker\", condition = \"healthy\" }}]\n{SHARED}"
            ),
        ),
    ]
    .concat()
}

#[test]
#[ignore = "needs dist/ and the lab (scripts/test.sh sets both up)"]
fn lab_the_deb_on_a_fresh_system_is_ready_converges_within_the_unit_s_paths_a_reboot_recreates_nothing_and_the_watchdog_restarts_a_hung_loop()
 {
    let _one = one_vm();
    let m = Machine::new("install");
    m.boot(
        "install",
        &format!(
            r#"
follow_events
install_stead
# What systemd says of the unit dpkg started: READY=1 reached it.
wait_until 60 systemctl is-active stead
unit_show >unit
# READY=1 comes before the first attempt to reach the engine.
wait_until 60 sh -c 'stead status | grep -q "engine reachable"' || true
stead status >status 2>&1 && echo 0 >status.rc || echo $? >status.rc
busybox_image
mkdir -p /home/lab
echo FROM_HOME=read-from-home >/home/lab/app.env
# Settled sooner than the default 30 s: an operator's edit of the conffile.
echo 'settle_window = "3s"' >>/etc/stead/stead.toml
{modules}
systemctl restart stead
wait_until 180 all_converged {all} || true
for m in {all}; do curl -fsS "http://127.0.0.1:7411/v1/modules/$m" >"module-$m.json"; done
if [ -d /srv/lab/data ]; then echo made; else echo missing; fi >srv
cat /srv/lab/data/hello >hello 2>&1 || true
docker logs stead-homeenv >homeenv.log 2>&1
containers >containers
creates | sort >creates
"#,
            modules = modules(),
            all = MODULES,
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
    for name in MODULES.split(' ') {
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
    assert_eq!(before.lines().count(), 5, "{before}");
    assert!(before.lines().all(|l| l.ends_with(" running")), "{before}");
    assert_eq!(
        m.out("install", "creates").lines().collect::<Vec<_>>(),
        [
            "stead-broker",
            "stead-data",
            "stead-dependent",
            "stead-homeenv",
            "stead-web"
        ],
        "one create per module"
    );

    // After `systemctl reboot`: every module runs again, with the same
    // containers, and the engine saw no create this boot.
    let public = releases(&m, &["0.6.8", "0.6.9"], &[]);
    deb_as(&m, "0.7.0");
    plane_documents(
        &m,
        &[
            (1, None),
            (
                2,
                Some(("0.6.8", "http://127.0.0.1:8088/0.6.8/release.json")),
            ),
        ],
    );
    m.boot(
        "rebooted",
        &(r#"
follow_events
# When the engine came up, in microseconds since boot; the wall clock and
# the time since boot at one moment; the dependent's state each second.
systemctl show -p ActiveEnterTimestampMonotonic --value docker >engine-up
echo "$(date +%s.%N) $(cut -d' ' -f1 /proc/uptime)" >clock
( while :; do echo "$(cut -d' ' -f1 /proc/uptime) $(module_state dependent 2>/dev/null || echo none)"; sleep 1; done >>dependent-states ) &
watcher=$!
wait_until 60 systemctl is-active stead
unit_show >unit
wait_until 180 all_converged web data homeenv broker dependent || true
cut -d' ' -f1 /proc/uptime >converged-at
kill "$watcher"
for m in web data homeenv broker dependent; do curl -fsS "http://127.0.0.1:7411/v1/modules/$m" >"module-$m.json"; done
containers >containers
creates >creates
docker logs --since "$(( $(date +%s) - $(cut -d. -f1 /proc/uptime) ))" stead-dependent >dependent.log 2>&1
[ "$(cat /proc/sys/kernel/random/boot_id)" != "$(cat ../install/boot)" ] && echo new >boot-new
# Then the main loop hangs (STEAD_CRASH_AT=loop:hang), under a short
# watchdog: a drop-in, as an operator would add one.
mkdir -p /etc/systemd/system/stead.service.d
printf '[Service]\nWatchdogSec=10s\nEnvironment=STEAD_CRASH_AT=loop:hang\n' \
    >/etc/systemd/system/stead.service.d/lab.conf
systemctl daemon-reload
since="$(date +%s)"
systemctl restart stead
wait_until 60 systemctl is-active stead
systemctl show -p MainPID,NRestarts stead >hang-first
# The API still answers while the loop hangs.
sleep 2
stead status >hang-status 2>&1 && echo 0 >hang-status.rc || echo $? >hang-status.rc
first_restarts="$(systemctl show -p NRestarts --value stead)"
wait_until 90 sh -c "[ \$(systemctl show -p NRestarts --value stead) -gt $first_restarts ]" || true
wait_until 30 systemctl is-active stead || true
unit_show >hang-unit
journalctl -u stead --since "@$since" --no-pager -o cat >hang-journal
"#
        .to_string()
            + &format!(
                r#"
# stead updates itself as its plane says: the watchdog's drop-in gone, a
# plane on the VM's loopback (its documents and the releases served by
# busybox's httpd, reports taken by serve_slowly's PUT), its key trusted.
rm -f /etc/systemd/system/stead.service.d/lab.conf
systemctl daemon-reload
mkdir -p /srv/rel/plane/nodes/lab && cp -r /lab/in/rel/0.6.8 /lab/in/rel/0.6.9 /srv/rel/
cp /lab/in/plane/r1.json /srv/rel/plane/nodes/lab/desired.json
/lab/in/busybox httpd -p 127.0.0.1:8088 -h /srv/rel
serve_slowly 8089 /srv/rel
# (A short poll_interval: the first report waits a tenth of it, jittered.)
printf '[update]\nconfirm_window = "120s"\n[plane]\nurl = "http://127.0.0.1:8088/plane"\ntrusted_keys = ["%s"]\npoll_interval = "20s"\n' "{public}" >>/etc/stead/stead.toml
systemctl restart stead
wait_until 60 sh -c 'stead status | grep -q "engine reachable"' || true
plane_at() {{ says "curl -fsS http://127.0.0.1:7411/v1/plane" ".held.revision == $1"; }}
wait_until 60 plane_at 1 || true
up_since="$(date +%s)"
systemctl show -p NRestarts --value stead >update-restarts-before
# Revision 2 names 0.6.8.
cp /lab/in/plane/r2.json /srv/rel/plane/nodes/lab/desired.json.new
mv /srv/rel/plane/nodes/lab/desired.json.new /srv/rel/plane/nodes/lab/desired.json
wait_until 300 says "stead agent --json" '.updates[-1].version == "0.6.8" and (.updates[-1].state == "done" or .updates[-1].state == "failed")' || true
systemctl show -p NRestarts --value stead >update-restarts-after
reported() {{ says "cat put-lab.json" '.payload | @base64d | fromjson | .agent.running.version == "0.6.8"'; }}
wait_until 60 reported || true
cp put-lab.json update-report.json || true
stead agent --json >agent.json
containers >update-containers
creates >update-creates
# A candidate that dies as it starts (a panic only a candidate reaches).
mkdir -p /etc/systemd/system/stead.service.d
printf '[Service]\nEnvironment=STEAD_CRASH_AT=candidate:start\n' >/etc/systemd/system/stead.service.d/lab.conf
systemctl daemon-reload
stead self-update --wait /srv/rel/0.6.9/release.json >bad.out 2>&1 && echo 0 >bad.rc || echo $? >bad.rc
stead agent --json >bad-agent.json
systemctl show -p NRestarts --value stead >bad-restarts
unit_show >bad-unit
containers >bad-containers
creates >bad-creates
journalctl -u stead --since "@$up_since" --no-pager -o cat >update-journal
# An operator installs a newer package by hand over the version stead
# updated itself to: the package's agent runs.
rm -f /etc/systemd/system/stead.service.d/lab.conf
systemctl daemon-reload
hand_since="$(date +%s)"
DEBIAN_FRONTEND=noninteractive dpkg -i --force-confold /lab/in/stead-0.7.0.deb >hand-dpkg.out 2>&1 && echo 0 >hand-dpkg.rc || echo $? >hand-dpkg.rc
wait_until 60 says "stead agent --json" '.running.version == "0.7.0"' || true
wait_until 60 all_converged web data homeenv broker dependent || true
stead agent --json >hand-agent.json
cat /var/lib/stead/agent/launch >hand-launch
unit_show >hand-unit
containers >hand-containers
creates >hand-creates
journalctl -u stead --since "@$hand_since" --no-pager -o cat >hand-journal
"#
            )),
        &["--timeout", "600"],
    );
    assert_eq!(m.out("rebooted", "boot-new").trim(), "new", "a new boot");
    let unit = m.show("rebooted", "unit");
    assert_eq!(
        (unit["ActiveState"].as_str(), unit["SubState"].as_str()),
        ("active", "running"),
        "{unit:?}"
    );
    for name in MODULES.split(' ') {
        let module = m.module("rebooted", name);
        assert_eq!(module["state"], "converged", "{name}: {module}");
    }
    // The same containers, running again.
    assert_eq!(m.out("rebooted", "containers"), before);
    reboot_in_order(&m);

    // systemd's watchdog killed the agent whose main loop hung, and
    // restarted it.
    let journal = m.out("rebooted", "hang-journal");
    let first = m.show("rebooted", "hang-first");
    let unit = m.show("rebooted", "hang-unit");
    assert_eq!(
        m.out("rebooted", "hang-status.rc").trim(),
        "0",
        "the API answers"
    );
    assert!(
        journal.contains("STEAD_CRASH_AT=loop:hang: the main loop hangs"),
        "{journal}"
    );
    // The agent's pinger saw no progress and stopped; systemd's watchdog
    // fired and restarted the unit: a new process, READY again.
    assert!(
        journal.contains("no longer pinging the watchdog"),
        "{journal}"
    );
    assert!(journal.contains("Watchdog timeout"), "{journal}");
    let restarts =
        |u: &std::collections::BTreeMap<String, String>| -> u32 { u["NRestarts"].parse().unwrap() };
    assert!(
        restarts(&unit) > restarts(&first),
        "{first:?} {unit:?}\n{journal}"
    );
    assert_eq!(unit["ActiveState"], "active", "{unit:?}");
    assert_ne!(unit["MainPID"], first["MainPID"], "{unit:?}");
    assert_eq!(
        m.out("rebooted", "creates"),
        "",
        "no create after the reboot"
    );

    // stead updated itself under systemd: one restart, the module
    // containers untouched, the new version confirmed and current.
    let journal = m.out("rebooted", "update-journal");
    let n = |f: &str| -> u32 { m.out("rebooted", f).trim().parse().unwrap() };
    let agent: serde_json::Value = serde_json::from_str(&m.out("rebooted", "agent.json")).unwrap();
    assert_eq!(
        agent["updates"][0]["requested_by"], "plane revision 2",
        "{agent:#}\n{journal}"
    );
    assert_eq!(agent["running"]["version"], "0.6.8", "{agent:#}");
    assert_eq!(agent["running"]["slot"], "current", "{agent:#}");
    assert_eq!(agent["current"], "0.6.8", "{agent:#}");
    assert_eq!(agent["updates"][0]["state"], "done", "{agent:#}");
    assert_eq!(
        n("update-restarts-after") - n("update-restarts-before"),
        1,
        "exactly one restart\n{journal}"
    );
    assert_eq!(
        m.out("rebooted", "update-containers"),
        before,
        "not recreated"
    );
    assert_eq!(m.out("rebooted", "update-creates"), "");
    // The plane's report says so, signed by the device's report key.
    let report = m.out("rebooted", "update-report.json");
    let read = stead::views::signed::Read::parse(report.as_bytes())
        .unwrap_or_else(|e| panic!("the report does not read ({e}): {report}"));
    let stead::views::signed::Read::Signed(envelope) = &read else {
        panic!("the report is not signed: {report}")
    };
    let payload = envelope.payload.clone();
    stead::views::signed::claim(read, Some("lab"))
        .unwrap_or_else(|e| panic!("the report does not verify: {e}: {report}"));
    let report: serde_json::Value = serde_json::from_slice(&payload).unwrap();
    assert_eq!(report["agent"]["running"]["version"], "0.6.8", "{report:#}");
    assert_eq!(report["plane"]["held"]["revision"], 2, "{report:#}");
    // A candidate that dies at every start: the launcher gives it three,
    // then runs 0.6.8 again, which reports why; the modules never stop.
    assert_eq!(
        m.out("rebooted", "bad.rc").trim(),
        "1",
        "{}",
        m.out("rebooted", "bad.out")
    );
    let bad: serde_json::Value =
        serde_json::from_str(&m.out("rebooted", "bad-agent.json")).unwrap();
    assert_eq!(bad["running"]["version"], "0.6.8", "{bad:#}");
    assert_eq!(bad["failed"]["version"], "0.6.9", "{bad:#}");
    let last = &bad["updates"][1];
    assert_eq!(last["state"], "failed", "{bad:#}");
    let failure = last["failure"].as_str().unwrap();
    assert!(
        failure.contains("started 3 times and never confirmed"),
        "{failure}"
    );
    assert!(failure.contains("its last words: panicked at"), "{failure}");
    assert_eq!(
        n("bad-restarts") - n("update-restarts-after"),
        4,
        "the switch, three starts of the candidate\n{journal}"
    );
    let unit = m.show("rebooted", "bad-unit");
    assert_eq!(unit["ActiveState"], "active", "{unit:?}");
    assert_eq!(m.out("rebooted", "bad-containers"), before, "not recreated");
    assert_eq!(m.out("rebooted", "bad-creates"), "");

    // A newer package installed by hand: its agent runs, the version stead
    // had updated itself to is set aside as previous, the modules stay.
    let journal = m.out("rebooted", "hand-journal");
    assert_eq!(
        m.out("rebooted", "hand-dpkg.rc").trim(),
        "0",
        "{}",
        m.out("rebooted", "hand-dpkg.out")
    );
    let hand: serde_json::Value =
        serde_json::from_str(&m.out("rebooted", "hand-agent.json")).unwrap();
    assert_eq!(hand["running"]["version"], "0.7.0", "{hand:#}\n{journal}");
    assert_eq!(hand["running"]["slot"], "package", "{hand:#}");
    let launch = m.out("rebooted", "hand-launch");
    assert!(launch.contains("previous 0.6.8"), "{launch}");
    assert!(!launch.contains("\ncurrent "), "{launch}");
    assert!(
        journal.contains(
            "package 0.7.0-1 was installed over package 0.6.0-1: running the package's binary, not current 0.6.8"
        ),
        "{journal}"
    );
    let unit = m.show("rebooted", "hand-unit");
    assert_eq!(unit["ActiveState"], "active", "{unit:?}");
    assert_eq!(
        m.out("rebooted", "hand-containers"),
        before,
        "not recreated"
    );
    assert_eq!(m.out("rebooted", "hand-creates"), "");
}

/// After the reboot: the engine started every container at once; the
/// dependent, which exits without its broker, was held (never
/// crash-looping) and runs since the broker was ready. Says how long after
/// the engine came up the broker was healthy, the dependent last started
/// and every module read converged.
fn reboot_in_order(m: &Machine) {
    let num = |s: &str| -> f64 { s.trim().parse().unwrap_or_else(|e| panic!("{s:?}: {e}")) };
    let engine_up = num(&m.out("rebooted", "engine-up")) / 1e6;
    let clock = m.out("rebooted", "clock");
    let (wall, uptime) = clock.trim().split_once(' ').unwrap();
    let booted = num(wall) - num(uptime);
    let converged = num(&m.out("rebooted", "converged-at")) - engine_up;
    let states = m.out("rebooted", "dependent-states");
    assert!(
        !states.contains("crash-looping"),
        "the dependent was held, not crash-looping:\n{states}"
    );
    // Engine events of this boot: `TIME NAME ACTION`, TIME in ns.
    let events = m.out("rebooted", "events");
    let at = |name: &str, action: &str| -> Vec<f64> {
        events
            .lines()
            .filter_map(|l| {
                let mut w = l.splitn(3, ' ');
                let (t, n, a) = (w.next()?, w.next()?, w.next()?);
                (n == name && a == action).then(|| num(t) / 1e9 - booted)
            })
            .collect()
    };
    let healthy = at("stead-broker", "health_status: healthy");
    let starts = at("stead-dependent", "start");
    let (Some(healthy), Some(last_start)) = (healthy.first(), starts.last()) else {
        panic!("the broker healthy and the dependent started this boot:\n{events}");
    };
    // The engine starts the dependent at boot and again as it exits; it
    // fails while the broker is not ready and runs once it is. Once it ran,
    // it never failed again: held, not restarted into a crash loop.
    let log = m.out("rebooted", "dependent.log");
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(
        lines.last(),
        Some(&"up"),
        "the dependent found its broker ready:\n{log}"
    );
    let first_up = lines.iter().position(|l| *l == "up").unwrap();
    assert!(
        lines[first_up..].iter().all(|l| *l == "up"),
        "the dependent failed after it had run:\n{log}"
    );
    eprintln!(
        "lab: after the reboot: the broker healthy {:.1} s after the engine was up, the dependent last started {:.1} s after it (after {} failed start(s) by the engine, then held by the agent), every module converged within {converged:.1} s of it",
        healthy - engine_up,
        last_start - engine_up,
        lines.len() - lines.iter().filter(|l| **l == "up").count()
    );
}

/// What every boot of the power-cut test does first: follows the engine's
/// creates (replayed from its start, so none made before the step is
/// missed; each line reaches the host as it is written), and the helpers.
const CUT_COMMON: &str = r#"
docker events --since 0 --filter type=container --filter event=create \
    --format '{{.Actor.Attributes.name}} {{.ID}}' >>creates &
events=$!
token="$(cat /var/lib/stead/api-token 2>/dev/null || true)"
# The value module $1's container runs: a's from its composed config file
# (the settings PATCHed), b's from its env file (rewritten).
value() {
    case "$1" in
        a) docker exec stead-a cat /etc/a.json | jq -r .n ;;
        b) docker exec stead-b sh -c 'echo $N' ;;
    esac
}
value_is() { [ "$(value "$1")" = "$2" ]; }
# Change $1 to $2: noted as attempted before, as acknowledged after (a 200
# for the PATCH; the file written, synced and renamed, its directory synced).
change() {
    echo "$1 $2" >>attempts
    case "$1" in
        a) curl -fsS -X PATCH -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
            -d "{\"n\": $2}" http://127.0.0.1:7411/v1/intentions/a/settings >/dev/null ;;
        b) printf 'N=%s\n' "$2" >/srv/lab/b.env.new && sync /srv/lab/b.env.new \
            && mv /srv/lab/b.env.new /srv/lab/b.env && sync /srv/lab ;;
    esac
    echo "$1 $2" >>acked
}
# One change after another, each applied before the next, until the power
# is cut.
changes() {
    touch cut-window
    while :; do
        for m in a b; do
            v="$(value "$m" || true)"
            [ -n "$v" ] || { sleep 1; continue; }
            change "$m" $((v + 1))
            wait_until 90 value_is "$m" $((v + 1))
        done
    done
}
# What holds after a boot: the store opens, the modules converge, one
# container each, the values they run.
facts() {
    wait_until 90 systemctl is-active stead || true
    stead status >status 2>&1 && echo 0 >status.rc || echo $? >status.rc
    wait_until 180 all_converged a b || true
    for m in a b; do curl -fsS "http://127.0.0.1:7411/v1/modules/$m" >"module-$m.json"; done
    containers >containers
    for m in a b; do value "$m" >"value-$m"; done
}
"#;

/// The first boot of the power-cut test: the .deb, the test image, module
/// a (its settings composed into a config file) and b (an env file).
fn cut_setup() -> String {
    let module = |name: &str, print: &str, extra: &str| {
        format!(
            "cat >/etc/stead/intentions.d/{name}.toml <<'EOF'\nname = \"{name}\"\nimage = \"stead-lab/busybox:1\"\nrestart = \"always\"\ncommand = [\"sh\", \"-c\", {:?}]\n{extra}EOF\n",
            idle_after(print)
        )
    };
    format!(
        r#"
install_stead
busybox_image
echo 'settle_window = "3s"' >>/etc/stead/stead.toml
mkdir -p /srv/lab
echo N=0 >/srv/lab/b.env
{a}{b}
systemctl restart stead
token="$(cat /var/lib/stead/api-token)"
"#,
        a = module(
            "a",
            "cat /etc/a.json",
            "[config]\npath = \"/etc/a.json\"\nformat = \"json\"\ndefaults = { n = 0 }\n"
        ),
        b = module("b", "echo N=$N", "env_files = [\"/srv/lab/b.env\"]\n"),
    )
}

/// The number of power cuts: `STEAD_LAB_CUTS` (scripts/lab/all.sh runs 20),
/// 1 in the test command.
fn cuts() -> usize {
    match std::env::var("STEAD_LAB_CUTS") {
        Ok(n) => n
            .parse()
            .unwrap_or_else(|_| panic!("STEAD_LAB_CUTS must be a whole number, not {n:?}")),
        Err(_) => 1,
    }
}

#[test]
#[ignore = "needs dist/ and the lab (scripts/test.sh sets both up)"]
fn lab_power_cuts_lose_no_acknowledged_change_and_make_one_create_per_change() {
    let _one = one_vm();
    let cuts = cuts();
    assert!(cuts >= 1, "STEAD_LAB_CUTS must be at least 1");
    let m = Machine::new("cuts");
    for k in 0..=cuts {
        let step = format!("boot-{k}");
        let first = if k == 0 {
            format!("{}facts\n", cut_setup())
        } else {
            "facts\n".to_string()
        };
        let then = if k < cuts {
            "changes\n"
        } else {
            "sleep 1\nkill \"$events\"\n"
        };
        let args: &[&str] = if k < cuts {
            &["--cut-after", "6-20", "--timeout", "420"]
        } else {
            &["--timeout", "300"]
        };
        m.boot(&step, &format!("{CUT_COMMON}{first}{then}"), args);
    }

    // Per module: the values acknowledged and attempted before each boot.
    let lines = |step: &str, file: &str| -> Vec<(String, u64)> {
        let p = m.path.join("share/out").join(step).join(file);
        std::fs::read_to_string(p)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.split_once(' '))
            .map(|(a, b)| (a.to_string(), b.parse().unwrap()))
            .collect()
    };
    let mut acked = std::collections::BTreeMap::<String, u64>::new();
    let mut attempted = acked.clone();
    let mut changes = 0;
    // Every container each module ever had: the creates the engine
    // reported (64-hex IDs) and the containers seen (12).
    let mut ids = std::collections::BTreeMap::<String, std::collections::BTreeSet<String>>::new();
    for k in 0..=cuts {
        let step = format!("boot-{k}");
        if k > 0 {
            assert_eq!(
                m.out(&step, "status.rc").trim(),
                "0",
                "boot {k}: the store opens"
            );
            let containers = m.out(&step, "containers");
            let names: Vec<&str> = containers
                .lines()
                .map(|l| l.split(' ').next().unwrap())
                .collect();
            assert_eq!(
                names,
                ["stead-a", "stead-b"],
                "boot {k}: one container per module:\n{containers}"
            );
            assert!(
                containers.lines().all(|l| l.ends_with(" running")),
                "boot {k}:\n{containers}"
            );
            for l in containers.lines() {
                let mut w = l.split(' ');
                let (name, id) = (w.next().unwrap(), w.next().unwrap());
                ids.entry(name.trim_start_matches("stead-").to_string())
                    .or_default()
                    .insert(id[..12].to_string());
            }
            for name in ["a", "b"] {
                let module = m.module(&step, name);
                assert_eq!(
                    module["state"], "converged",
                    "boot {k}: {name}: nothing pending: {module}"
                );
                let value: u64 = m
                    .out(&step, &format!("value-{name}"))
                    .trim()
                    .parse()
                    .unwrap_or_else(|e| panic!("boot {k}: the value {name} runs: {e}"));
                let (was_acked, was_tried) = (
                    acked.get(name).copied().unwrap_or(0),
                    attempted.get(name).copied().unwrap_or(0),
                );
                assert!(
                    was_acked <= value && value <= was_tried.max(was_acked),
                    "boot {k}: {name} runs {value}; acknowledged before the cut: {was_acked}, attempted: {was_tried}"
                );
            }
        }
        for (name, v) in lines(&step, "acked") {
            acked.insert(name, v);
            changes += 1;
        }
        for (name, v) in lines(&step, "attempts") {
            attempted.insert(name, v);
        }
        for (name, id) in lines_raw(&m.path.join("share/out").join(&step).join("creates")) {
            let module = name.trim_start_matches("stead-").trim_end_matches(".next");
            ids.entry(module.to_string())
                .or_default()
                .insert(id[..12].to_string());
        }
    }
    assert!(changes >= 1, "no change was acknowledged before the cuts");
    // Values move by one per applied change (a change not applied is tried
    // again with the same value), so each module had exactly 1 + its final
    // value containers: one create per change, none lost, none doubled.
    let last = format!("boot-{cuts}");
    for name in ["a", "b"] {
        let value: u64 = m
            .out(&last, &format!("value-{name}"))
            .trim()
            .parse()
            .unwrap();
        let made = ids.get(name).map_or(0, |s| s.len()) as u64;
        assert_eq!(
            made,
            1 + value,
            "{name}: {made} containers for {value} changes applied: {:?}",
            ids.get(name)
        );
    }
    eprintln!(
        "lab: {cuts} power cuts, {changes} changes acknowledged, final values a={} b={}",
        m.out(&last, "value-a").trim(),
        m.out(&last, "value-b").trim()
    );
}

/// `NAME ID` lines of a file (empty when there is none).
fn lines_raw(path: &Path) -> Vec<(String, String)> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

/// The self-update's harder cases, in `scripts/lab/all.sh` only (the test
/// command skips tests named `lab_all_only_`: they take about ten minutes
/// under TCG). On one machine, under real systemd: a candidate whose main
/// loop hangs (the watchdog kills it three times), one that never reaches
/// the engine (it gives up when its window ends), then a power cut in each
/// part of an update, each seen to land there: in the landing (a slow
/// release host; the cut comes once more than 1.5 MiB of the binary is
/// here), in the switch (the agent stopped between storing its stamp and
/// telling the launcher), and in the confirmation (the engine away, the
/// candidate started); and one at a random moment. Each ends on a working
/// version, the update done, one agent running, the module never
/// recreated.
#[test]
#[ignore = "needs dist/ and the lab; scripts/lab/all.sh runs it"]
fn lab_all_only_self_update_failures_and_power_cuts_end_on_a_working_version() {
    let _one = one_vm();
    let m = Machine::new("update");
    let versions = ["0.6.5", "0.6.6", "0.6.7", "0.6.8", "0.6.9", "0.7.0"];
    let public = releases(&m, &versions, &["0.6.7"]);
    let module = format!(
        "cat >/etc/stead/intentions.d/web.toml <<'EOF'\nname = \"web\"\nimage = \"stead-lab/busybox:1\"\nrestart = \"always\"\ncommand = [\"sh\", \"-c\", {:?}]\nEOF\n",
        idle_after("echo up")
    );
    // Shared by every boot: the releases served (0.6.7 slowly), how to ask
    // for one and what to collect.
    let common = r#"
mkdir -p /srv/rel && cp -r /lab/in/rel/0.* /srv/rel/
/lab/in/busybox httpd -p 127.0.0.1:8088 -h /srv/rel
serve_slowly 8089 /srv/rel
agents() { pgrep -c -x stead || true; }
collect() {
    stead agent --json >"agent-$1.json" 2>&1 || true
    containers >"containers-$1" || true
    agents >"agents-$1"
    systemctl is-active stead >"active-$1" || true
}
done_with() {
    says "stead agent --json" ".updates[-1].version == \"$1\" and .updates[-1].state == \"done\""
}
# Opens the power cut's window (run.sh cuts) and waits for it.
cut_here() {
    touch cut-window
    sleep 600
}
"#;
    let bin = "stead-x86_64-unknown-linux-musl";
    let size = std::fs::metadata(m.path.join("share/in/rel/0.6.7").join(bin))
        .unwrap()
        .len();
    m.boot(
        "hang",
        &format!(
            r#"{common}
install_stead
busybox_image
echo 'settle_window = "3s"' >>/etc/stead/stead.toml
printf 'reload_retry_interval = "5s"\n[update]\ntrusted_keys = ["{public}"]\nconfirm_window = "45s"\n' >>/etc/stead/stead.toml
{module}
mkdir -p /etc/systemd/system/stead.service.d
printf '[Service]\nWatchdogSec=15s\nEnvironment=STEAD_CRASH_AT=candidate:hang\n' >/etc/systemd/system/stead.service.d/lab.conf
systemctl daemon-reload
systemctl restart stead
wait_until 180 all_converged web || true
containers >containers-before
# A candidate whose main loop hangs: killed by the watchdog at each start.
stead self-update --wait /srv/rel/0.6.5/release.json >hang.out 2>&1 && echo 0 >hang.rc || echo $? >hang.rc
collect hang
# A candidate that never reaches the engine: the engine stopped after the
# landing's check, for the candidate's whole window.
rm /etc/systemd/system/stead.service.d/lab.conf
systemctl daemon-reload
# Masked: the unit's Wants= would start it again with the restart.
systemctl mask --runtime --now docker.socket docker.service
stead self-update --wait /srv/rel/0.6.6/release.json >away.out 2>&1 && echo 0 >away.rc || echo $? >away.rc
systemctl unmask --runtime docker.socket docker.service
systemctl start docker.service
wait_until 120 all_converged web || true
collect away
# The power goes in the middle of a landing: 0.6.7 comes from the slow
# host, and the cut once more than 1.5 MiB of it is here.
stead self-update /srv/rel/0.6.7/release.json >cut.out 2>&1
part=/var/lib/stead/agent/0.6.7/stead.part
wait_until 120 sh -c "[ \$(stat -c %s $part 2>/dev/null || echo 0) -gt 1572864 ]"
stat -c %s $part >part-at-cut
cut_here
"#
        ),
        &["--cut-after", "0-0", "--timeout", "900"],
    );
    let agent = |step: &str, name: &str| -> serde_json::Value {
        let text = m.out(step, &format!("agent-{name}.json"));
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}: {text}"))
    };
    let before = m.out("hang", "containers-before");
    assert_eq!(before.lines().count(), 1, "{before}");
    // What came of a candidate that failed: `self-update --wait` says
    // failed (exit 1), the package's agent runs again, the update's
    // failure says why, one agent runs, the module was not recreated.
    let gave_up = |name: &str, i: usize, why: &str| {
        let rc = m.out("hang", &format!("{name}.rc"));
        assert_eq!(rc.trim(), "1", "{}", m.out("hang", &format!("{name}.out")));
        let a = agent("hang", name);
        assert_eq!(a["running"]["slot"], "package", "{a:#}");
        let failure = a["updates"][i]["failure"].as_str().unwrap_or_default();
        assert!(failure.contains(why), "{a:#}");
        assert_eq!(
            m.out("hang", &format!("agents-{name}")).trim(),
            "1",
            "one agent"
        );
        assert_eq!(
            m.out("hang", &format!("containers-{name}")),
            before,
            "not recreated"
        );
        a
    };
    // The hanging candidate: given up after three starts.
    let a = gave_up("hang", 0, "started 3 times and never confirmed");
    assert_eq!(a["failed"]["version"], "0.6.5", "{a:#}");
    assert_eq!(m.out("hang", "active-hang").trim(), "active");
    // The candidate without an engine: it gave up itself when its window
    // ended, naming what was missing.
    gave_up(
        "away",
        1,
        "not confirmed within 45s: no pass completed (engine not reachable",
    );
    // The cut came in the landing.
    let at_cut: u64 = m.out("hang", "part-at-cut").trim().parse().unwrap();
    assert!(
        at_cut > 1_572_864 && at_cut < size,
        "{at_cut} of {size} bytes"
    );
    let path = format!("/0.6.7/{bin}");
    assert!(
        m.out("hang", "requests-8089")
            .lines()
            .any(|l| l == format!("GET {path} 0")),
        "{}",
        m.out("hang", "requests-8089")
    );
    // Each boot after a cut ends on the version the cut update asked for,
    // done; then the next cut is set up.
    let step = |version: &str, next: &str| {
        format!(
            r#"{common}
wait_until 90 systemctl is-active stead || true
wait_until 300 done_with {version} || true
collect after
{next}
"#
        )
    };
    let boot_cut = |name: &str, script: &str, cut: &str| {
        m.boot(name, script, &["--cut-after", cut, "--timeout", "900"]);
    };
    let ended_on = |step: &str, version: &str| -> Vec<String> {
        let a = agent(step, "after");
        let last = a["updates"].as_array().unwrap().last().unwrap().clone();
        assert_eq!(last["version"], version, "{a:#}");
        assert_eq!(last["state"], "done", "{a:#}");
        assert_eq!(a["running"]["version"], version, "{a:#}");
        assert_eq!(m.out(step, "agents-after").trim(), "1", "one agent");
        assert_eq!(m.out(step, "active-after").trim(), "active");
        assert_eq!(
            m.out(step, "containers-after"),
            before,
            "{step}: not recreated"
        );
        last["log"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["line"].as_str().unwrap_or_default().to_string())
            .collect()
    };
    // The power goes in the switch: the agent stopped after storing the
    // switch's stamp, before the launcher is told (a runtime drop-in: gone
    // at the next boot).
    let switch_cut = r#"
mkdir -p /run/systemd/system/stead.service.d
printf '[Service]\nEnvironment=STEAD_CRASH_AT=pause:update:after-switch-stamp\n' >/run/systemd/system/stead.service.d/pause.conf
systemctl daemon-reload
systemctl restart stead
wait_until 90 stead agent
stead self-update /srv/rel/0.6.8/release.json >cut.out 2>&1
wait_until 120 sh -c 'journalctl -b -u stead | grep -q "STEAD_CRASH_AT=pause:update:after-switch-stamp: stopped here"'
journalctl -b -u stead | grep "stopped here" >paused
cut_here
"#;
    boot_cut("cut1", &step("0.6.7", switch_cut), "0-0");
    ended_on("cut1", "0.6.7");
    // The landing resumed from what the cut left (synced as it came).
    let resumed: Vec<u64> = m
        .out("cut1", "requests-8089")
        .lines()
        .filter_map(|l| l.strip_prefix(&format!("GET {path} ")))
        .filter_map(|from| from.parse().ok())
        .collect();
    assert!(
        resumed
            .first()
            .is_some_and(|&from| from >= 1 << 20 && from < size),
        "the landing resumed from what was here: {resumed:?}"
    );
    assert!(m.out("cut1", "paused").contains("stopped here"));
    // The power goes in the confirmation: the engine away, the candidate
    // started once.
    let confirm_cut = r#"
systemctl mask --runtime --now docker.socket docker.service
stead self-update /srv/rel/0.6.9/release.json >cut.out 2>&1
wait_until 120 grep -q '^candidate 0.6.9 1$' /var/lib/stead/agent/launch
sleep 3
cp /var/lib/stead/agent/launch launch-at-cut
cut_here
"#;
    boot_cut("cut2", &step("0.6.8", confirm_cut), "0-0");
    let log = ended_on("cut2", "0.6.8");
    assert!(
        log.iter()
            .any(|l| l.contains("the switch was cut short before the candidate started")),
        "{log:#?}"
    );
    // And one at a random moment of the next.
    let random_cut = r#"
stead self-update /srv/rel/0.7.0/release.json >cut.out 2>&1
cut_here
"#;
    boot_cut("cut3", &step("0.6.9", random_cut), "1-3");
    assert!(m.out("cut2", "launch-at-cut").contains("candidate 0.6.9 1"));
    let log = ended_on("cut3", "0.6.9");
    assert!(
        log.iter().any(|l| l.contains(
            "candidate 0.6.9 started again (start 2 of the launcher's): the start before ended without confirming"
        )),
        "{log:#?}"
    );
    m.boot("end", &step("0.7.0", ""), &["--timeout", "600"]);
    ended_on("end", "0.7.0");
}

/// A bad candidate never leaves a node that cannot start, in
/// `scripts/lab/all.sh` only (about three minutes under TCG). The data
/// directory is a 128 MiB filesystem of its own. A candidate that writes
/// garbage over the store and aborts (`candidate:corrupt-store`) is given
/// up after three starts, and the version it replaced puts back the
/// snapshot it took before the switch. A candidate that fills the data
/// directory's filesystem and aborts (`candidate:fill-disk`) leaves a
/// disk on which the version before runs, its store opens and it
/// answers: the launcher gave the candidate up after three starts, or
/// could not count the next one (then, once room is made, the candidate,
/// no longer bad, gets its next start and is confirmed). The module is
/// never recreated.
#[test]
#[ignore = "needs dist/ and the lab; scripts/lab/all.sh runs it"]
fn lab_all_only_a_candidate_that_corrupts_the_store_or_fills_the_disk_leaves_a_node_that_starts() {
    let _one = one_vm();
    let m = Machine::new("bad-candidate");
    let public = releases(&m, &["0.6.5", "0.6.6"], &[]);
    let module = format!(
        "cat >/etc/stead/intentions.d/web.toml <<'EOF'\nname = \"web\"\nimage = \"stead-lab/busybox:1\"\nrestart = \"always\"\ncommand = [\"sh\", \"-c\", {:?}]\nEOF\n",
        idle_after("echo up")
    );
    m.boot(
        "bad",
        &format!(
            r#"
mkdir -p /srv/rel && cp -r /lab/in/rel/0.* /srv/rel/
/lab/in/busybox httpd -p 127.0.0.1:8088 -h /srv/rel
collect() {{
    stead agent --json >"agent-$1.json" 2>&1 || true
    containers >"containers-$1" || true
    pgrep -c -x stead >"agents-$1" || true
    systemctl is-active stead >"active-$1" || true
    ls /var/lib/stead >"files-$1"
}}
truncate -s 128M /var/lib/stead.img
mkfs.ext4 -q -F -m 0 /var/lib/stead.img
mkdir -p /var/lib/stead
mount -o loop /var/lib/stead.img /var/lib/stead
install_stead
busybox_image
echo 'settle_window = "3s"' >>/etc/stead/stead.toml
printf 'reload_retry_interval = "5s"\n[update]\ntrusted_keys = ["{public}"]\nconfirm_window = "60s"\n' >>/etc/stead/stead.toml
{module}
mkdir -p /run/systemd/system/stead.service.d
printf '[Service]\nEnvironment=STEAD_CRASH_AT=candidate:corrupt-store\n' >/run/systemd/system/stead.service.d/lab.conf
systemctl daemon-reload
systemctl restart stead
wait_until 180 all_converged web || true
containers >containers-before
stead self-update --wait /srv/rel/0.6.5/release.json >corrupt.out 2>&1 && echo 0 >corrupt.rc || echo $? >corrupt.rc
wait_until 60 all_converged web || true
collect corrupt
cmp -s -n 4096 /var/lib/stead/stead.redb.from-candidate /dev/zero && echo zero >aside-head || od -An -tx1 -N4 /var/lib/stead/stead.redb.from-candidate | tr -d ' ' >aside-head
# The next candidate fills the disk.
printf '[Service]\nEnvironment=STEAD_CRASH_AT=candidate:fill-disk\n' >/run/systemd/system/stead.service.d/lab.conf
systemctl daemon-reload
stead self-update /srv/rel/0.6.6/release.json >fill.out 2>&1
wait_until 300 test -f /var/lib/stead/candidate-fill || true
wait_until 180 says "stead agent --json" '.running.slot == "package"' || true
df -B1 --output=avail /var/lib/stead | tail -1 | tr -d ' ' >avail-full
cp /var/lib/stead/agent/launch launch-full || true
collect full
# Room again, the candidate as built: its next start confirms it.
rm /var/lib/stead/candidate-fill
rm /run/systemd/system/stead.service.d/lab.conf
systemctl daemon-reload
systemctl restart stead
wait_until 300 says "stead agent --json" '.updates[-1].state == "done" or .updates[-1].state == "failed"' || true
wait_until 60 all_converged web || true
collect after
"#
        ),
        &["--timeout", "1200"],
    );
    let agent = |name: &str| -> serde_json::Value {
        let text = m.out("bad", &format!("agent-{name}.json"));
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}: {text}"))
    };
    let before = m.out("bad", "containers-before");
    assert_eq!(before.lines().count(), 1, "{before}");
    let working = |name: &str| {
        assert_eq!(
            m.out("bad", &format!("agents-{name}")).trim(),
            "1",
            "{name}: one agent"
        );
        assert_eq!(
            m.out("bad", &format!("active-{name}")).trim(),
            "active",
            "{name}"
        );
        assert_eq!(
            m.out("bad", &format!("containers-{name}")),
            before,
            "{name}: not recreated"
        );
    };
    // The store corrupted: given up after three starts, the snapshot put
    // back (the damaged store set aside, garbage at its head), the update
    // failed and said so by `self-update --wait` (exit 1).
    assert_eq!(
        m.out("bad", "corrupt.rc").trim(),
        "1",
        "{}",
        m.out("bad", "corrupt.out")
    );
    let a = agent("corrupt");
    assert_eq!(a["running"]["slot"], "package", "{a:#}");
    assert_eq!(a["failed"]["version"], "0.6.5", "{a:#}");
    let failure = a["updates"][0]["failure"].as_str().unwrap_or_default();
    assert!(
        failure.contains("started 3 times and never confirmed"),
        "{a:#}"
    );
    assert_eq!(m.out("bad", "aside-head").trim(), "a5a5a5a5");
    let files = m.out("bad", "files-corrupt");
    assert!(!files.contains("stead.redb.before-update"), "{files}");
    working("corrupt");
    // The disk filled: the version before runs and answers on it. The
    // launcher either counted the candidate's three starts (a few bytes
    // were still free for its state) and gave it up, or could not count
    // the next and ran the version before, keeping the candidate on trial
    // and the snapshot with it.
    let avail: u64 = m.out("bad", "avail-full").trim().parse().unwrap();
    assert!(avail < 1 << 20, "{avail} bytes free");
    let a = agent("full");
    assert_eq!(a["running"]["slot"], "package", "{a:#}");
    let launch = m.out("bad", "launch-full");
    let on_trial = launch.contains("candidate 0.6.6 ");
    assert!(
        on_trial || launch.contains("failed 0.6.6 started 3 times"),
        "{launch}"
    );
    assert_eq!(
        m.out("bad", "files-full")
            .contains("stead.redb.before-update"),
        on_trial,
        "the snapshot is kept while the candidate is on trial, and only then: {launch}"
    );
    working("full");
    // Room made: a candidate on trial gets its next start and is
    // confirmed; one given up stays given up.
    let a = agent("after");
    let last = a["updates"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["version"], "0.6.6", "{a:#}");
    if on_trial {
        assert_eq!(last["state"], "done", "{a:#}");
        assert_eq!(a["running"]["version"], "0.6.6", "{a:#}");
    } else {
        assert_eq!(last["state"], "failed", "{a:#}");
        assert_eq!(a["running"]["slot"], "package", "{a:#}");
    }
    assert!(
        !m.out("bad", "files-after")
            .contains("stead.redb.before-update")
    );
    working("after");
}

/// A device with no clock to speak of, in `scripts/lab/all.sh` only: its
/// real-time clock starts at 1970-01-01 (QEMU's `-rtc`), nothing sets it
/// (the image has no NTP client; systemd raises it at boot to its own
/// build's time at most, which the step records), and its plane is nginx
/// on this machine over HTTPS (QEMU's user network: the host's loopback at
/// 10.0.2.2, no route beyond), with a certificate that began an hour
/// before the agent's build: after the device's clock, before its floor.
/// With the unit as packaged the agent converges to the plane's revision,
/// its clock still before the certificate; with `[clock] step = true` and
/// the capability given by a drop-in, it steps the clock forward to its
/// floor and then to the host's `Date`.
#[test]
#[ignore = "needs dist/ and the lab; scripts/lab/all.sh runs it"]
fn lab_all_only_a_device_booted_in_1970_without_ntp_converges_to_its_plane_over_https() {
    let _one = one_vm();
    // The floor the .deb's agent starts from is its build's time: the
    // commit this test is built at, so dist/ must be of it.
    let dist = Path::new(env!("CARGO_MANIFEST_DIR")).join("dist/stead-x86_64-unknown-linux-musl");
    let o = Command::new(&dist).arg("--version").output().unwrap();
    let version = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(
        version.contains(stead::COMMIT),
        "dist/ is of another commit ({version:?}, this is {}): scripts/release.sh \
         x86_64-unknown-linux-musl && scripts/package.sh",
        stead::COMMIT
    );
    let build = stead::BUILD_TIME;
    let not_before = build - 3600;
    let certs = tls::Certs::made_at(not_before, 365, "10.0.2.2");
    let host = tls::Tls::start(&certs);
    let m = Machine::new("clock");
    let dir = m.path.join("share/in/clock");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(&certs.ca, dir.join("ca.pem")).unwrap();
    // The document: one module, issued a minute after the build (by the
    // operator's tool with libfaketime's clock there), polled every 2 s.
    let key = dir.join("online.key");
    let plane = |args: &[&str], env: &[(String, String)]| {
        let o = Command::new(bins::workspace_bin("stead-plane"))
            .args(args)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    };
    plane(&["keygen", "--out", key.to_str().unwrap()], &[]);
    let payload = dir.join("payload.json");
    std::fs::write(
        &payload,
        serde_json::json!({
            "modules": [{
                "name": "web",
                "image": "stead-lab/busybox:1",
                "restart": "always",
                "command": ["sh", "-c", idle_after("echo up")],
            }],
            "poll": {"interval": "2s"},
        })
        .to_string(),
    )
    .unwrap();
    let doc = host.root.join("nodes/lab/desired.json");
    std::fs::create_dir_all(doc.parent().unwrap()).unwrap();
    plane(
        &[
            "sign",
            "--key",
            key.to_str().unwrap(),
            "--node",
            "lab",
            "--revision",
            "1",
            "--in",
            payload.to_str().unwrap(),
            "--out",
            doc.to_str().unwrap(),
        ],
        &tls::faketime_env(&tls::civil(build + 60)),
    );
    let public = std::fs::read_to_string(key.with_extension("key.pub")).unwrap();
    let config = format!(
        "node_id = \"lab\"\nsettle_window = \"3s\"\n[plane]\nurl = \"https://10.0.2.2:{}\"\ntrusted_keys = [{:?}]\nca = \"/etc/stead/plane-ca.pem\"\npoll_interval = \"2s\"\n",
        host.port,
        public.trim()
    );
    m.boot(
        "clock",
        &format!(
            r#"
date -u +%s >clock-at-boot
iface=""
# The NIC QEMU gives (a device of its own: not lo, not the engine's bridge).
for i in /sys/class/net/*; do [ -e "$i/device" ] && {{ iface="${{i##*/}}"; break; }}; done
[ -n "$iface" ] || {{ echo "no network interface"; exit 1; }}
/lab/in/busybox ip link set "$iface" up
/lab/in/busybox ip addr add 10.0.2.15/24 dev "$iface"
install_stead
busybox_image
cp /lab/in/clock/ca.pem /etc/stead/plane-ca.pem
cat >/etc/stead/stead.toml <<'CONFIG'
{config}CONFIG
systemctl restart stead
wait_until 300 sh -c 'curl -fsS http://127.0.0.1:7411/v1/plane | jq -e ".held.revision == 1"' || true
wait_until 180 all_converged web || true
curl -fsS http://127.0.0.1:7411/v1/plane >plane.json || true
curl -fsS http://127.0.0.1:7411/v1/modules/web >module-web.json || true
date -u +%s >clock-converged
journalctl -u stead -o cat >journal-converged
# The clock stepped: the capability and the syscalls, by a drop-in.
mkdir -p /etc/systemd/system/stead.service.d
cat >/etc/systemd/system/stead.service.d/clock.conf <<'DROPIN'
[Service]
CapabilityBoundingSet=CAP_SYS_TIME
ProtectClock=no
SystemCallFilter=@clock
DROPIN
printf '[clock]\nstep = true\n' >>/etc/stead/stead.toml
systemctl daemon-reload
systemctl restart stead
wait_until 120 sh -c 'journalctl -u stead -o cat | grep -q "Date over verified TLS"' || true
date -u +%s >clock-stepped
journalctl -u stead -o cat >journal-stepped
"#
        ),
        &["--rtc", "1970-01-01", "--host-net", "--timeout", "900"],
    );
    let secs = |file: &str| -> u64 { m.out("clock", file).trim().parse().unwrap() };
    // The device's clock was before the certificate began, at boot and
    // still once it had converged: TLS was checked at its floor.
    assert!(
        secs("clock-at-boot") < not_before,
        "the clock at boot {} is not before the certificate ({not_before})",
        secs("clock-at-boot")
    );
    assert!(
        secs("clock-converged") < not_before,
        "the clock once converged {} is not before the certificate ({not_before})",
        secs("clock-converged")
    );
    let held: serde_json::Value = serde_json::from_str(&m.out("clock", "plane.json")).unwrap();
    assert_eq!(held["held"]["revision"], 1, "{held}");
    assert_eq!(m.module("clock", "web")["state"], "converged");
    let journal = m.out("clock", "journal-converged");
    assert!(
        journal.contains(&format!(
            "clock: time floor {}",
            stead::model::time::format_rfc3339(build)
        )),
        "{journal}"
    );
    // With the capability: stepped to the floor (the document's issue,
    // kept in the store), then to the host's Date, forward each time.
    let journal = m.out("clock", "journal-stepped");
    assert!(
        journal.contains("stepped the system clock forward")
            && journal.contains("(the time floor)"),
        "{journal}"
    );
    assert!(journal.contains("Date over verified TLS"), "{journal}");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let stepped = secs("clock-stepped");
    assert!(
        stepped + 900 > now && stepped <= now + 5,
        "the clock stepped to {stepped}, the host's is {now}"
    );
}
