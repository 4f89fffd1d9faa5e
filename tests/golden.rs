//! Golden files of the operator's tool: every document, statement, root,
//! sealed value, enrolment, report roll-up and fleet publication that
//! `stead plane` made at 0.6.0 (commit 0f6a9db), kept in
//! `tests/fixtures/golden/` by its `make.sh`, and made again here by the
//! tools of today from the same inputs, byte for byte.
//!
//! One table of steps ([`STEPS`]) drives both: run against a fixed work
//! directory (`inputs/` copied), each step under a clock that stands at
//! its time (libfaketime), its stdout, stderr, exit code and every file it
//! wrote or changed recorded under `steps/NN-name/`. Here each step's
//! outputs must be the recorded ones; the work directory then holds the
//! golden files, so every later step reads what the old tool wrote (a
//! document it signed, the site it published, the device keys it
//! enrolled, the sealed values in the fleet). Ed25519 signs
//! deterministically, so nearly every output is exact; the two that are
//! random are checked by what they are: a sealed value (age, randomized)
//! opens with its device's key to the value, and `keygen`'s key files are
//! keys, its words the same. Reports are fixed inputs (as agents of 0.5.0
//! and 0.6.0 send them), read in a directory order no tool defines: each
//! list a roll-up or an enrolment prints from several of them names one.
//!
//! `STEAD_GOLDEN_WRITE=1` writes the fixtures instead of checking them
//! (only `make.sh` should: the fixtures are what the old binary made).
//!
//! A step whose output changed on purpose since 0.6.0 is one of
//! [`CHANGED`], with why: it is checked against the record today's tool
//! made of it (`since-0.7.0/NN-name/`, written by
//! `STEAD_GOLDEN_WRITE=since`, which writes those alone), which must differ
//! from 0.6.0's; what follows still reads the files 0.6.0 wrote.

mod common;

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::plane::libfaketime;

/// The operator's tool, with `args` after its name: every run of it in
/// this file is made here.
///
/// The fixtures were made by 0.6.0's `stead plane X`; the tool is now a
/// binary of its own, `stead-plane X`, and the fixtures hold only the
/// arguments after the verb's prefix. `STEAD_GOLDEN_OPERATOR` gives
/// another command line for it, words split on blanks: `make.sh` ran the
/// binary the fixtures were made with as `"/path/to/stead plane"`.
fn operator(args: &[&str]) -> Command {
    let prefix: Vec<String> = match std::env::var("STEAD_GOLDEN_OPERATOR") {
        Ok(line) => line.split_whitespace().map(str::to_string).collect(),
        Err(_) => vec![common::workspace_bin("stead-plane").display().to_string()],
    };
    let (program, first) = prefix
        .split_first()
        .expect("STEAD_GOLDEN_OPERATOR names a program");
    let mut c = Command::new(program);
    c.args(first).args(args);
    c
}

/// A golden message as the tool says it now: its lines name the program
/// (`stead: …` in 0.6.0, `stead-plane: …` now) and the verbs by their
/// new command (`stead plane X` is `stead-plane X`). Nothing else of a
/// message may differ. With `STEAD_GOLDEN_OPERATOR` (the old binary) the
/// golden text is taken as it is.
fn renamed(golden: &[u8]) -> Vec<u8> {
    if std::env::var_os("STEAD_GOLDEN_OPERATOR").is_some() {
        return golden.to_vec();
    }
    let text = String::from_utf8_lossy(golden);
    let mut out = String::new();
    for line in text.split_inclusive('\n') {
        let line = match line.strip_prefix("stead: ") {
            Some(rest) => format!("stead-plane: {rest}"),
            None => line.to_string(),
        };
        out.push_str(&line.replace("stead plane ", "stead-plane "));
    }
    out.into_bytes()
}

/// How a step's outputs are checked.
#[derive(Clone, Copy)]
enum Check {
    /// Byte for byte: stdout, stderr, exit code, every file written.
    Exact,
    /// `keygen`: the key is random; its words, its files' names and modes
    /// are the same, and each file is a key.
    Keygen,
    /// `seal`: the sealed text is random (age); it opens with the device's
    /// key (`devices/<node>.local.key`, as the device derives its age
    /// identity from it) to the value, where it was sealed for. The rest is
    /// exact.
    Sealed {
        node: &'static str,
        module: &'static str,
        field: &'static str,
        value: &'static str,
    },
}

/// One step of the fixture's run, in order.
enum Step {
    /// The operator's tool: `args` with the clock at `at` (UTC), stdin from
    /// the file `stdin` (or nothing), stdout kept also in `stdout_to`.
    Run {
        name: &'static str,
        at: &'static str,
        stdin: Option<&'static str>,
        stdout_to: Option<&'static str>,
        /// The words after the tool's name, split on blanks.
        args: &'static str,
        check: Check,
    },
    /// A file of the work directory copied over another (a fleet's
    /// description edited between two publishes).
    Copy(&'static str, &'static str),
    /// A file written from `from` with each `@path@` replaced by the
    /// trimmed text of that file (a sealed value put into a fleet's node).
    Fill(&'static str, &'static str),
}

/// A step checked byte for byte, with nothing on stdin.
const fn run(name: &'static str, at: &'static str, args: &'static str) -> Step {
    Step::Run {
        name,
        at,
        stdin: None,
        stdout_to: None,
        args,
        check: Check::Exact,
    }
}

/// The fixture's time: 2026-12-01T12:00:00Z is 1796126400, the first
/// publish's revisions.
const T0: &str = "2026-12-01 12:00:00";
/// An hour on: the rollout's publish (revision 1796130000).
const T1: &str = "2026-12-01 13:00:00";
/// The reports' time, and the watcher's (a halt at revision 1796133600).
const T2: &str = "2026-12-01 14:00:00";
/// The rotation to root 2 and the publish under it.
const T3: &str = "2026-12-01 15:00:00";

/// A publish of the fleet with the document key of root 1.
const PUBLISH: &str =
    "publish --key keys/online.key --trusted keys/plane.key.pub --fleet fleet --site site";

/// The same, with the document key of root 2.
const PUBLISH_ROTATED: &str =
    "publish --key keys/online2.key --trusted keys/plane.key.pub --fleet fleet --site site";

/// The fixture's run, in order (each `Run` is `steps/NN-name/`).
const STEPS: &[Step] = &[
    Step::Run {
        name: "keygen",
        at: T0,
        stdin: None,
        stdout_to: None,
        args: "keygen --out scratch/new.key",
        check: Check::Keygen,
    },
    run("keygen-exists", T0, "keygen --out keys/plane.key"),
    run(
        "sign",
        T0,
        "sign --key keys/plane.key --node edge-01 --revision 17 --in payloads/edge-01.json --out signed/edge-01.json",
    ),
    Step::Run {
        name: "sign-two-keys-stdin",
        at: T0,
        stdin: Some("payloads/edge-02.json"),
        stdout_to: None,
        args: "sign --key keys/plane.key --key keys/online.key --node edge-02 --expires-in 12h",
        check: Check::Exact,
    },
    run(
        "sign-expires-in",
        T0,
        "sign --key keys/plane.key --node edge-03 --expires-in 12h --in payloads/edge-03.json --out signed/edge-03.json",
    ),
    run(
        "sign-refused",
        T0,
        "sign --key keys/plane.key --node edge-01 --in payloads/bad.json",
    ),
    run(
        "verify",
        T0,
        "verify --key keys/plane.key.pub --node edge-01 --in signed/edge-01.json",
    ),
    run(
        "verify-unknown-key",
        T0,
        "verify --key keys/online.key.pub --in signed/edge-01.json",
    ),
    run(
        "verify-other-node",
        T0,
        "verify --key keys/plane.key.pub --node edge-02 --in signed/edge-01.json",
    ),
    run(
        "verify-expired",
        "2026-12-02 00:00:00",
        "verify --key keys/plane.key.pub --in signed/edge-03.json",
    ),
    run(
        "release",
        T0,
        "release --key keys/plane.key --version 0.7.0 --binary x86_64-unknown-linux-musl=bin/stead-x86_64 --binary aarch64-unknown-linux-musl=bin/stead-aarch64 --url-base https://plane.example/releases/0.7.0/ --out signed/release-0.7.0.json",
    ),
    run(
        "release-default-url",
        T0,
        "release --key keys/online.key --version 0.7.1 --binary x86_64-unknown-linux-musl=bin/stead-x86_64 --schema 10 --reads-from 3",
    ),
    run(
        "root-init",
        T0,
        "root init --root-key keys/root-a.key.pub --root-key keys/root-b.key.pub --root-key keys/root-c.key.pub --threshold 2 --documents-key keys/online.key.pub --out roots/1.payload",
    ),
    run(
        "root-sign",
        T0,
        "root sign --key keys/plane.key --key keys/root-a.key --key keys/root-b.key --in roots/1.payload --out roots/1.json",
    ),
    run(
        "root-verify-publish",
        T0,
        "root verify --trusted keys/plane.key.pub --site site --in roots/1.json --publish",
    ),
    run(
        "enroll-edge-01",
        T0,
        "enroll --fleet fleet --reports reports/nodes/edge-01",
    ),
    run(
        "enroll-edge-02",
        T0,
        "enroll --fleet fleet --reports reports/nodes/edge-02",
    ),
    run(
        "enroll-edge-03",
        T0,
        "enroll --fleet fleet --reports reports/nodes/edge-03",
    ),
    run(
        "enroll-all",
        T0,
        "enroll --fleet fleet --reports reports/nodes",
    ),
    run(
        "enroll-misplaced",
        T0,
        "enroll --fleet fleet --reports reports-extra/nodes/edge-06",
    ),
    Step::Run {
        name: "seal-fleet",
        at: T0,
        stdin: Some("values/pg-password"),
        stdout_to: Some("sealed/edge-01.db.txt"),
        args: "seal --node edge-01 --module db --field env.POSTGRES_PASSWORD --fleet fleet",
        check: Check::Sealed {
            node: "edge-01",
            module: "db",
            field: "env.POSTGRES_PASSWORD",
            value: "s3cr3t-pg-password",
        },
    },
    Step::Run {
        name: "seal-to",
        at: T0,
        stdin: Some("values/sensor-key.pem"),
        stdout_to: Some("sealed/edge-02.sensor.txt"),
        // edge-02's device key, as its report says it.
        args: "seal --node edge-02 --module sensor --field files./etc/sensor/key.pem \
               --to age1lsndsqz7j9rvp6wvtrcs00s4fptaxzve6w06yze5ydtqf2myaffsq4mqsr",
        check: Check::Sealed {
            node: "edge-02",
            module: "sensor",
            field: "files./etc/sensor/key.pem",
            value: "-----BEGIN PRIVATE KEY-----\n\
                    MC4CAQAwBQYDK2VwBCIEIGoldenGoldenGoldenGoldenGoldenGoldenGolde\n\
                    -----END PRIVATE KEY-----\n",
        },
    },
    Step::Fill(
        "fleet-sealed/nodes/edge-01.json",
        "fleet/nodes/edge-01.json",
    ),
    Step::Fill(
        "fleet-sealed/nodes/edge-02.json",
        "fleet/nodes/edge-02.json",
    ),
    Step::Run {
        name: "publish-dry-run",
        at: T0,
        stdin: None,
        stdout_to: None,
        args: "publish --key keys/online.key --trusted keys/plane.key.pub --fleet fleet --site site --dry-run",
        check: Check::Exact,
    },
    run("publish", T0, PUBLISH),
    run("publish-unchanged", "2026-12-01 12:10:00", PUBLISH),
    run(
        "verify-published",
        "2026-12-01 12:10:00",
        "verify --key keys/online.key.pub --node edge-01 --in site/nodes/edge-01/desired.json",
    ),
    Step::Copy(
        "fleet-next/groups/edge-eu.json",
        "fleet/groups/edge-eu.json",
    ),
    run("publish-rollout", T1, PUBLISH),
    run("status-json", T2, "status --reports reports/nodes --json"),
    run(
        "status-site",
        T2,
        "status --reports reports/nodes --site site",
    ),
    run(
        "status-silent",
        T2,
        "status --reports reports/nodes --site site --silent-after 1h --json",
    ),
    run(
        "status-extra",
        T2,
        "status --reports reports-extra/nodes --site site",
    ),
    run(
        "status-extra-json",
        T2,
        "status --reports reports-extra/nodes --site site --json",
    ),
    run(
        "watch-below",
        T2,
        "rollout watch --key keys/online.key --trusted keys/plane.key.pub --reports reports/nodes --site site",
    ),
    run(
        "watch-dry-run",
        T2,
        "rollout watch --key keys/online.key --trusted keys/plane.key.pub --reports reports/nodes --site site --min-reports 2 --rate 25% --dry-run",
    ),
    run(
        "watch",
        T2,
        "rollout watch --key keys/online.key --trusted keys/plane.key.pub --reports reports/nodes --site site --min-reports 2",
    ),
    run("publish-halted", T2, PUBLISH),
    run(
        "status-halted",
        T2,
        "status --reports reports/nodes --site site",
    ),
    run(
        "root-init-rotated",
        T3,
        "root init --after roots/1.json --root-key keys/root-a.key.pub --root-key keys/root-b.key.pub --root-key keys/root-c.key.pub --threshold 2 --documents-key keys/online2.key.pub --expires-in 90d --out roots/2.payload",
    ),
    run(
        "root-sign-rotated-a",
        T3,
        "root sign --key keys/root-a.key --in roots/2.payload --out roots/2.partial.json",
    ),
    run(
        "root-verify-short",
        T3,
        "root verify --trusted keys/plane.key.pub --site site --in roots/2.partial.json",
    ),
    run(
        "root-sign-rotated-b",
        T3,
        "root sign --key keys/root-b.key --in roots/2.partial.json --out roots/2.json",
    ),
    run(
        "root-verify-rotated-publish",
        T3,
        "root verify --trusted keys/plane.key.pub --site site --in roots/2.json --publish",
    ),
    run(
        "root-verify-walk",
        T3,
        "root verify --trusted keys/plane.key.pub --site site",
    ),
    run("publish-dropped-key", T3, PUBLISH),
    run("publish-rotated", T3, PUBLISH_ROTATED),
    Step::Copy(
        "fleet-rotated/groups/edge-eu.json",
        "fleet/groups/edge-eu.json",
    ),
    run("publish-rotated-no-rollout", T3, PUBLISH_ROTATED),
    run(
        "verify-rotated",
        T3,
        "verify --key keys/online2.key.pub --node edge-03 --in site/nodes/edge-03/desired.json",
    ),
    run(
        "status-rotated",
        T3,
        "status --reports reports/nodes --site site --json",
    ),
];

/// The steps whose outputs changed on purpose since 0.6.0, and why: each
/// checked against `since-0.7.0/NN-name/`, today's record of it.
const CHANGED: &[(&str, &str)] = &[
    (
        "enroll-edge-01",
        "0.7.0: enroll says how many reports were unsigned (their nodes get no report key)",
    ),
    ("enroll-edge-02", "the same"),
    ("enroll-edge-03", "the same"),
    ("enroll-all", "the same"),
    (
        "status-json",
        "0.7.0: a report counts only signed by its node's enrolled report key; without --fleet none is checked, all are listed unverified",
    ),
    ("status-site", "the same"),
    ("status-silent", "the same"),
    ("status-extra", "the same"),
    ("status-extra-json", "the same"),
    (
        "watch-below",
        "0.7.0: rollout watch needs the enrolled keys (--fleet)",
    ),
    ("watch-dry-run", "the same"),
    ("watch", "the same"),
    ("status-halted", "as status-json"),
    ("status-rotated", "as status-json"),
];

/// Where the records of [`CHANGED`] steps are, under the fixtures.
const SINCE: &str = "since-0.7.0";

/// The fixtures' directory.
fn golden() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/golden")
}

/// A file of a tree: its bytes and its mode's permission bits.
type Tree = BTreeMap<String, (Vec<u8>, u32)>;

/// Every file under `dir`, by its path relative to it.
fn tree(dir: &Path) -> Tree {
    let mut out = Tree::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let path = e.path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            if meta.is_dir() {
                stack.push(path);
            } else {
                let rel = path
                    .strip_prefix(dir)
                    .unwrap()
                    .to_str()
                    .unwrap()
                    .to_string();
                out.insert(
                    rel,
                    (
                        std::fs::read(&path).unwrap(),
                        meta.permissions().mode() & 0o7777,
                    ),
                );
            }
        }
    }
    out
}

/// What a step wrote: the files new or changed (bytes or mode), and those
/// it removed.
fn changes(before: &Tree, after: &Tree) -> (Tree, Vec<String>) {
    let changed = after
        .iter()
        .filter(|(p, f)| before.get(*p) != Some(f))
        .map(|(p, f)| (p.clone(), f.clone()))
        .collect();
    let removed = before
        .keys()
        .filter(|p| !after.contains_key(*p))
        .cloned()
        .collect();
    (changed, removed)
}

/// A copy of `from`, a secret key file (`*.key`) private as `keygen`
/// made it (git keeps no mode but the executable bit).
fn copy_tree(from: &Path, to: &Path) {
    for (rel, (bytes, mode)) in tree(from) {
        let mode = if rel.ends_with(".key") { 0o600 } else { mode };
        write(&to.join(rel), &bytes, mode);
    }
}

fn write(path: &Path, bytes: &[u8], mode: u32) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// A step's record, as kept under `steps/NN-name/`.
#[derive(Debug, PartialEq)]
struct Record {
    /// The step: its time, stdin and arguments.
    command: String,
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    code: String,
    /// `MODE PATH` of each file written, and `removed PATH`.
    modes: String,
    /// Each file written, by its path in the work directory.
    files: BTreeMap<String, Vec<u8>>,
}

impl Record {
    fn write(&self, dir: &Path) {
        let _ = std::fs::remove_dir_all(dir);
        for (name, bytes) in [
            ("command", self.command.as_bytes()),
            ("stdout", &self.stdout),
            ("stderr", &self.stderr),
            ("code", self.code.as_bytes()),
            ("modes", self.modes.as_bytes()),
        ] {
            write(&dir.join(name), bytes, 0o644);
        }
        for (path, bytes) in &self.files {
            write(&dir.join("files").join(path), bytes, 0o644);
        }
    }

    fn read(dir: &Path) -> Record {
        let file = |name: &str| {
            std::fs::read(dir.join(name))
                .unwrap_or_else(|e| panic!("{}: {e} (make.sh writes it)", dir.join(name).display()))
        };
        let text = |name: &str| String::from_utf8(file(name)).unwrap();
        let files_dir = dir.join("files");
        let files = if files_dir.exists() {
            tree(&files_dir)
                .into_iter()
                .map(|(p, (b, _))| (p, b))
                .collect()
        } else {
            BTreeMap::new()
        };
        Record {
            command: text("command"),
            stdout: file("stdout"),
            stderr: file("stderr"),
            code: text("code"),
            modes: text("modes"),
            files,
        }
    }
}

/// A step's line in its record: what it ran, so that a step table changed
/// since the fixtures were made is seen.
fn command_line(at: &str, stdin: Option<&str>, stdout_to: Option<&str>, args: &[&str]) -> String {
    format!(
        "at: {at} UTC\nstdin: {}\nstdout: {}\nargs: {}\n",
        stdin.unwrap_or("(none)"),
        stdout_to.unwrap_or("(kept)"),
        args.join(" ")
    )
}

/// Runs one step of the operator's tool in `work`, its clock standing at
/// `at`.
fn run_step(
    work: &Path,
    at: &str,
    stdin: Option<&str>,
    stdout_to: Option<&str>,
    args: &[&str],
) -> Record {
    let before = tree(work);
    let mut c = operator(args);
    c.current_dir(work)
        .env("LD_PRELOAD", libfaketime())
        // No `@`: the clock stands at `at` for the whole run.
        .env("FAKETIME", at)
        .env("FAKETIME_DONT_FAKE_MONOTONIC", "1")
        .env("FAKETIME_DONT_RESET", "1")
        .env("TZ", "UTC")
        .env_remove("RUST_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    match stdin {
        Some(f) => c.stdin(std::fs::File::open(work.join(f)).unwrap()),
        None => c.stdin(Stdio::null()),
    };
    let out = c.output().unwrap();
    if let Some(to) = stdout_to {
        write(&work.join(to), &out.stdout, 0o644);
    }
    let (changed, removed) = changes(&before, &tree(work));
    let mut modes = String::new();
    for (p, (_, mode)) in &changed {
        modes.push_str(&format!("{mode:04o} {p}\n"));
    }
    for p in &removed {
        modes.push_str(&format!("removed {p}\n"));
    }
    Record {
        command: command_line(at, stdin, stdout_to, args),
        stdout: out.stdout,
        stderr: out.stderr,
        code: format!(
            "{}\n",
            out.status
                .code()
                .map_or_else(|| format!("{:?}", out.status), |c| c.to_string())
        ),
        modes,
        files: changed.into_iter().map(|(p, (b, _))| (p, b)).collect(),
    }
}

/// `from`'s text with each `@path@` replaced by the trimmed text of the
/// work directory's file at that path.
fn fill(work: &Path, from: &str) -> String {
    let text = std::fs::read_to_string(work.join(from)).unwrap();
    let mut out = String::new();
    let mut rest = text.as_str();
    while let Some((before, after)) = rest.split_once('@') {
        let (path, tail) = after
            .split_once('@')
            .unwrap_or_else(|| panic!("{from}: an @ without its closing @"));
        out.push_str(before);
        out.push_str(std::fs::read_to_string(work.join(path)).unwrap().trim());
        rest = tail;
    }
    out.push_str(rest);
    out
}

/// The age identity of a fixture's device, as the device derives it from
/// its `local.key`.
fn device_identity(node: &str) -> stead::model::age::Identity {
    let bytes = std::fs::read(golden().join(format!("inputs/devices/{node}.local.key"))).unwrap();
    stead::model::seal::LocalKey::from_bytes(bytes.try_into().unwrap()).identity()
}

/// Opens a sealed text with its device's key, where it was sealed for.
fn open_sealed(text: &[u8], node: &str, module: &str, field: &str) -> Result<Vec<u8>, String> {
    let text = std::str::from_utf8(text).map_err(|e| e.to_string())?;
    stead::model::sealed::open(
        &device_identity(node),
        &stead::model::sealed::Binding {
            node,
            module,
            field,
        },
        text.trim(),
    )
    .map_err(|e| e.to_string())
}

/// `keygen`'s words with its key's id and public key said by name.
fn keygen_words(stdout: &[u8], public: &[u8]) -> String {
    let public = String::from_utf8_lossy(public).trim().to_string();
    String::from_utf8_lossy(stdout)
        .lines()
        .map(|l| match l.strip_prefix("key id ") {
            Some(id) if id.len() == 16 && id.bytes().all(|b| b.is_ascii_hexdigit()) => {
                "key id <ID>".to_string()
            }
            _ => l.replace(&public, "<PUBLIC>"),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Whether `bytes` is a key file: the base64 of 32 bytes and a newline.
fn is_key_file(bytes: &[u8]) -> bool {
    bytes.len() == 45
        && bytes.ends_with(b"=\n")
        && bytes[..43]
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || *b == b'+' || *b == b'/')
}

/// Where `got` differs from `want`, by what the step's check asks.
fn differences(check: Check, got: &Record, want: &Record) -> Vec<String> {
    let mut d = Vec::new();
    let mut same = |what: &str, g: &[u8], w: &[u8]| {
        if g != w {
            d.push(format!(
                "{what}:\n--- golden\n{}\n--- now\n{}",
                String::from_utf8_lossy(w),
                String::from_utf8_lossy(g)
            ));
        }
    };
    same("command", got.command.as_bytes(), want.command.as_bytes());
    same("exit code", got.code.as_bytes(), want.code.as_bytes());
    same("stderr", &got.stderr, &renamed(&want.stderr));
    same(
        "files written (modes)",
        got.modes.as_bytes(),
        want.modes.as_bytes(),
    );
    match check {
        Check::Exact => {
            same("stdout", &got.stdout, &want.stdout);
            for (p, w) in &want.files {
                same(p, got.files.get(p).map_or(&b"(none)"[..], |g| g), w);
            }
        }
        Check::Keygen => {
            let public = |r: &Record| {
                r.files
                    .iter()
                    .find(|(p, _)| p.ends_with(".pub"))
                    .map(|(_, b)| b.clone())
                    .unwrap_or_default()
            };
            same(
                "stdout (key id and public key aside)",
                keygen_words(&got.stdout, &public(got)).as_bytes(),
                keygen_words(&want.stdout, &public(want)).as_bytes(),
            );
            for (p, g) in &got.files {
                if !is_key_file(g) {
                    d.push(format!("{p}: not a key file: {g:?}"));
                }
            }
        }
        Check::Sealed {
            node,
            module,
            field,
            value,
        } => {
            for (whose, r) in [("golden", want), ("now", got)] {
                match open_sealed(&r.stdout, node, module, field) {
                    Ok(v) if v == value.as_bytes() => {}
                    Ok(v) => d.push(format!(
                        "the {whose} sealed value opens to {:?}, not {value:?}",
                        String::from_utf8_lossy(&v)
                    )),
                    Err(e) => d.push(format!("the {whose} sealed value does not open: {e}")),
                }
                for (p, b) in &r.files {
                    if *b != r.stdout {
                        d.push(format!("{p} ({whose}) is not what stdout said"));
                    }
                }
            }
            if got.stdout == want.stdout {
                d.push("sealed twice to the same text: age's randomness is gone".into());
            }
        }
    }
    d
}

#[test]
fn the_operator_s_tools_make_and_read_what_0_6_0_made() {
    let writing = std::env::var_os("STEAD_GOLDEN_WRITE").is_some();
    let writing_since = std::env::var("STEAD_GOLDEN_WRITE").as_deref() == Ok("since");
    // The old binary (make.sh) is checked against its own records alone.
    let old_tool = std::env::var_os("STEAD_GOLDEN_OPERATOR").is_some();
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    copy_tree(&golden().join("inputs"), &work);
    let steps_dir = golden().join("steps");
    if writing && !writing_since {
        let _ = std::fs::remove_dir_all(&steps_dir);
    }
    let mut failures = Vec::new();
    let mut n = 0;
    for step in STEPS {
        let (name, at, stdin, stdout_to, args, check) = match step {
            Step::Copy(from, to) => {
                let (bytes, mode) = tree(&work).remove(*from).unwrap();
                write(&work.join(to), &bytes, mode);
                continue;
            }
            Step::Fill(from, to) => {
                write(&work.join(to), fill(&work, from).as_bytes(), 0o644);
                continue;
            }
            Step::Run {
                name,
                at,
                stdin,
                stdout_to,
                args,
                check,
            } => (name, at, *stdin, *stdout_to, *args, *check),
        };
        n += 1;
        let record_dir = steps_dir.join(format!("{n:02}-{name}"));
        let args: Vec<&str> = args.split_whitespace().collect();
        let got = run_step(&work, at, stdin, stdout_to, &args);
        if writing && !writing_since {
            got.write(&record_dir);
            continue;
        }
        let want = Record::read(&record_dir);
        let changed = CHANGED
            .iter()
            .find(|(c, _)| c == name)
            .filter(|_| !old_tool);
        let d = match changed {
            Some((_, why)) => {
                let since_dir = golden().join(SINCE).join(format!("{n:02}-{name}"));
                if writing_since {
                    got.write(&since_dir);
                }
                let now = Record::read(&since_dir);
                if differences(Check::Exact, &now, &want).is_empty() {
                    failures.push(format!(
                        "step {n:02}-{name} is listed as changed since 0.6.0 ({why}), but its \
                         record is 0.6.0's: take it off CHANGED"
                    ));
                }
                differences(check, &got, &now)
            }
            None => differences(check, &got, &want),
        };
        if !d.is_empty() {
            failures.push(format!("step {n:02}-{name}:\n{}", d.join("\n")));
        }
        // What follows reads the golden files, as the old tool wrote them.
        let modes: BTreeMap<&str, u32> = want
            .modes
            .lines()
            .filter_map(|l| l.split_once(' '))
            .filter_map(|(m, p)| Some((p, u32::from_str_radix(m, 8).ok()?)))
            .collect();
        for (p, b) in &want.files {
            write(
                &work.join(p),
                b,
                modes.get(p.as_str()).copied().unwrap_or(0o644),
            );
        }
    }
    if !writing {
        let recorded = std::fs::read_dir(&steps_dir).unwrap().count();
        assert_eq!(recorded, n, "steps recorded under {}", steps_dir.display());
        let since = std::fs::read_dir(golden().join(SINCE)).unwrap().count();
        assert_eq!(since, CHANGED.len(), "steps recorded under {SINCE}");
        for (c, _) in CHANGED {
            assert!(
                STEPS
                    .iter()
                    .any(|s| matches!(s, Step::Run { name, .. } if name == c)),
                "{c} in CHANGED is no step"
            );
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {n} steps differ from the golden files:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

/// Every report's `device_key` is what its device derives from its
/// `local.key` (the key its sealed values open with), and the one the
/// table seals to by hand is edge-02's.
#[test]
fn the_reports_device_keys_are_their_local_keys() {
    let reports = golden().join("inputs/reports/nodes");
    let mut seen = 0;
    for e in std::fs::read_dir(&reports).unwrap() {
        let node = e.unwrap().file_name().to_string_lossy().into_owned();
        let report: serde_json::Value = serde_json::from_slice(
            &std::fs::read(reports.join(&node).join("status.json")).unwrap(),
        )
        .unwrap();
        let Some(key) = report["device_key"].as_str() else {
            continue;
        };
        assert_eq!(
            key,
            device_identity(&node).recipient().encode(),
            "the device key of {node}'s report"
        );
        seen += 1;
    }
    assert_eq!(seen, 4, "reports with a device key");
    // The value sealed by hand (--to) is sealed to edge-02's key.
    let to = STEPS
        .iter()
        .find_map(|s| match s {
            Step::Run {
                name: "seal-to",
                args,
                ..
            } => args.split_whitespace().skip_while(|a| *a != "--to").nth(1),
            _ => None,
        })
        .unwrap();
    assert_eq!(to, device_identity("edge-02").recipient().encode());
}
