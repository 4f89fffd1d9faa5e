//! Fuzz targets: arbitrary documents driven through the whole pure path a
//! document takes, where a panic anywhere is a failure. Intentions (TOML
//! and JSON, as files and API bodies are read), central-plane payloads
//! (signed here with a real key and judged by `plane::accept::judge`) and
//! Compose files (`stead import`, YAML) go parse → check → compose → spec,
//! digests and labels → the engine's create body, and each checked
//! intention must also come back whole from its JSON form, from its store
//! record and from its container's sealed label. The generators make
//! valid-looking documents with every field (the intention's own and each
//! of `runtime::FIELDS`: one without a generator of its own here takes its
//! row's examples, `runtime::EXAMPLES`), then mutate some of them, at any depth, into
//! noise; raw noise and damaged text are fed too.
//!
//! Since 0.6.0 the fleet's formats too: group documents (judged and
//! composed with a node document over them, at every moment of their
//! rollout), roots (read and taken as the next of a chain), release
//! statements (read and admitted), reports (read and rolled up) and the
//! listings reports are found through. A panic fails, and so does an
//! allocation beyond a bound ([`Bounded`]): an input that makes the code
//! ask for memory in proportion to a number it states.
//!
//! Bounded in `cargo test` (`STEAD_FUZZ_CASES` cases per target, 1000 by
//! default); `STEAD_FUZZ_SECS=<n>` runs each target for n seconds instead
//! (scripts/fuzz.sh). A failing case is shrunk and its seed kept in
//! tests/fuzz.proptest-regressions, replayed first on every run.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence, TestCaseError, TestRunner};
use serde_json::{Value as J, json};
use stead::engine::Flavour;
use stead::engine::docker::{create_body, podman_refuses};
use stead::host::digest::FileDigester;
use stead::intake::labels as stated;
use stead::model::intention::{Access, DocFormat, Intention};
use stead::model::labels::Labels;
use stead::model::names::{AbsPath, Digest, HostPath, NodeId};
use stead::model::runtime::NodeLogging;
use stead::model::seal::LocalKey;
use stead::model::spec;
use stead::plane::accept::{Clock, Floor, Verdict, judge, still_stands};
use stead::plane::document::{Desired, stamp};
use stead::plane::envelope::{Envelope, PAYLOAD_TYPE, SecretKey};
use stead::reconcile::resolve::resolve_inputs;
use stead::store::plane::Held;
use stead::store::{Entry, IntentionRecord, Source, records};
use stead_plane::import as compose_file;

// ---------------------------------------------------------------------
// Allocation is bounded: an input that makes the code under test ask for
// more than [`MAX_ONE`] bytes at once, or hold more than [`MAX_LIVE`] in
// all, aborts the run with a message (a failure, as a panic is): every
// format read here has a size limit, and nothing may allocate in
// proportion to a number an input states.

/// The largest single allocation allowed.
const MAX_ONE: usize = 256 << 20;
/// The most bytes held at once, over every target running in parallel.
const MAX_LIVE: usize = 3 << 30;

struct Bounded;

static LIVE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

impl Bounded {
    fn take(size: usize) {
        use std::sync::atomic::Ordering::Relaxed;
        let live = LIVE.fetch_add(size, Relaxed) + size;
        if size > MAX_ONE || live > MAX_LIVE {
            let msg: &[u8] =
                b"fuzz: an unbounded allocation (over the fuzz targets' bound); aborting\n";
            // SAFETY: a write of a static buffer to the standard error.
            unsafe { libc::write(2, msg.as_ptr().cast(), msg.len()) };
            std::process::abort();
        }
    }
}

// SAFETY: every call is passed on to the system allocator unchanged; the
// count beside it allocates nothing.
unsafe impl std::alloc::GlobalAlloc for Bounded {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        Bounded::take(layout.size());
        unsafe { std::alloc::System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        LIVE.fetch_sub(layout.size(), std::sync::atomic::Ordering::Relaxed);
        unsafe { std::alloc::System.dealloc(ptr, layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: std::alloc::Layout) -> *mut u8 {
        Bounded::take(layout.size());
        unsafe { std::alloc::System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, new: usize) -> *mut u8 {
        Bounded::take(new);
        LIVE.fetch_sub(layout.size(), std::sync::atomic::Ordering::Relaxed);
        unsafe { std::alloc::System.realloc(ptr, layout, new) }
    }
}

#[global_allocator]
static ALLOCATOR: Bounded = Bounded;

// ---------------------------------------------------------------------
// The runner: a bounded number of cases, or a time budget.

/// Where a failing case's seed is kept (relative to the package root,
/// where `cargo test` runs).
const REGRESSIONS: &str = "tests/fuzz.proptest-regressions";

/// Runs `test` over `strategy`: `STEAD_FUZZ_CASES` cases (1000 by
/// default), or batches of them for `STEAD_FUZZ_SECS` seconds. A failure
/// (a panic included) is shrunk, its seed kept, and fails the test.
fn fuzz<S>(name: &'static str, strategy: S, test: impl Fn(S::Value) -> Result<(), TestCaseError>)
where
    S: Strategy,
    S::Value: std::fmt::Debug,
{
    fuzz_share(name, 1, strategy, test)
}

/// [`fuzz`] with a `1/share` of the cases in each batch (for a target
/// whose cases are slow).
fn fuzz_share<S>(
    name: &'static str,
    share: u32,
    strategy: S,
    test: impl Fn(S::Value) -> Result<(), TestCaseError>,
) where
    S: Strategy,
    S::Value: std::fmt::Debug,
{
    let env = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<u64>().ok());
    let cases = env("STEAD_FUZZ_CASES")
        .unwrap_or(1000)
        .clamp(1, u64::from(u32::MAX)) as u32;
    let cases = (cases / share).max(1);
    let deadline = env("STEAD_FUZZ_SECS").map(|s| Instant::now() + Duration::from_secs(s));
    let started = Instant::now();
    let mut ran: u64 = 0;
    BODIES.with(|b| b.set(0));
    loop {
        let mut runner = TestRunner::new(Config {
            cases,
            failure_persistence: Some(Box::new(FileFailurePersistence::Direct(REGRESSIONS))),
            source_file: Some(file!()),
            test_name: Some(name),
            max_shrink_time: 60_000,
            ..Config::default()
        });
        if let Err(e) = runner.run(&strategy, &test) {
            panic!("{name}: {e}");
        }
        ran += u64::from(cases);
        if deadline.is_none_or(|d| Instant::now() >= d) {
            break;
        }
    }
    let bodies = BODIES.with(|b| b.get());
    eprintln!(
        "{name}: {ran} cases in {:.1?}, {bodies} create bodies made",
        started.elapsed()
    );
}

thread_local! {
    /// How many create bodies this thread's target made: how deep its
    /// cases reach.
    static BODIES: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

// ---------------------------------------------------------------------
// The host inputs the documents may name: a directory of fixtures, so no
// generated path reads the machine's own files.

/// The fixtures' directory, made once.
fn fixtures() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fuzz-inputs");
        std::fs::create_dir_all(dir.join("dir/sub")).unwrap();
        for (name, content) in [
            ("good.env", "A=1\n# c\n\nB = two words\r\nC=\n"),
            (
                "compose.env",
                "export A=\"x ${B:-y}\" # c\nB='lit'\nC=\"two\nlines\"\nD\n",
            ),
            ("bad.env", "A=1\nnot a line\n"),
            ("badkey.env", "1A=secret\n"),
            ("binary.env", "\u{0}\u{1}"),
            ("file", "content"),
            ("dir/a", "a"),
            ("dir/sub/b", "b"),
        ] {
            std::fs::write(dir.join(name), content).unwrap();
        }
        dir
    })
}

/// Host paths the generated documents name.
fn host_paths() -> Vec<String> {
    let root = fixtures().display().to_string();
    let mut v: Vec<String> = [
        "good.env",
        "compose.env",
        "bad.env",
        "badkey.env",
        "binary.env",
        "file",
        "dir",
        "missing",
    ]
    .iter()
    .map(|n| format!("{root}/{n}"))
    .collect();
    v.extend(["/", "/proc", "/run/docker.sock", "relative", ""].map(String::from));
    v
}

/// The intention with every host path it would read (env files, read-only
/// inputs) outside the fixtures replaced by a missing fixture: what is
/// checked is the same, and nothing of the machine is read.
fn confined(i: &Intention) -> Intention {
    let root = fixtures();
    let missing = root.join("missing").display().to_string();
    let mut i = i.clone();
    for p in &mut i.env_files {
        if !p.as_path().starts_with(root) {
            *p = AbsPath::try_from(missing.as_str()).unwrap();
        }
    }
    for m in &mut i.mounts {
        if m.access == Access::ReadOnly && !m.source.as_path().starts_with(root) {
            m.source = HostPath::try_from(missing.as_str()).unwrap();
        }
    }
    i
}

// ---------------------------------------------------------------------
// The path a checked intention takes, each step's promise checked.

fn node() -> NodeId {
    NodeId::try_from("fuzz-node").unwrap()
}

fn local_key() -> LocalKey {
    LocalKey::from_bytes([7; 32])
}

/// Drives a checked intention through everything that follows its check.
fn through(i: &Intention) -> Result<(), TestCaseError> {
    // Its JSON form (API answers, plane modules, the stated label) and
    // TOML (a file written from it) read back to the same intention.
    let doc = i.to_json();
    let back = Intention::parse_json(doc.to_string().as_bytes(), "back.json");
    prop_assert_eq!(back.as_ref(), Ok(i), "JSON form {}", doc);
    let back = Intention::from_value(&doc, "back");
    prop_assert_eq!(back.as_ref(), Ok(i), "JSON value {}", doc);
    if let Ok(text) = toml::to_string(&doc) {
        let back = Intention::parse(&text, DocFormat::Toml, "back.toml");
        prop_assert_eq!(back.as_ref(), Ok(i), "TOML form {}", text);
    }
    // Its store record, as the store writes and reads it.
    let record = IntentionRecord::new(Source::Api, 1, i.clone());
    let bytes = records::encode(records::INTENTIONS, &records::intention_record(&record));
    let read =
        records::decode(records::INTENTIONS, &bytes).and_then(records::from_intention_record);
    prop_assert_eq!(read.as_ref().map(|r| &*r.intention), Ok(i), "store record");
    // The sealed label its container carries, taken back.
    let entry = Entry {
        record: Some(record),
        overlay: Default::default(),
    };
    let key = local_key();
    if let Some(label) = stated::render(&i.name, &entry, &key) {
        match stated::parse(&i.name, &label, &key) {
            Ok((stead::store::Restated::Api(again), _)) => prop_assert_eq!(&*again, i),
            other => prop_assert!(false, "the stated label reads back as {:?}", other),
        }
    }
    // Inputs (host paths confined to the fixtures: they may be missing).
    // With a device: a sealed value the generator wrote does not open, and
    // is refused by name.
    let device = key.device("fuzz");
    let Ok(inputs) = resolve_inputs(&confined(i), &mut FileDigester::new(), Some(&device)) else {
        return Ok(());
    };
    let image = Digest::of(i.image.as_bytes());
    let desired = spec::desired(
        i,
        inputs,
        &image,
        &node(),
        Path::new("/var/lib/stead/files"),
        None,
    );
    // A checked intention makes a spec: a refusal here is one the check
    // missed (a document that would be held on every pass).
    let mut d = match desired {
        Ok(d) => d,
        Err(e) => {
            return Err(TestCaseError::fail(format!(
                "a checked intention makes no spec: {e}"
            )));
        }
    };
    let labels = Labels::parse(&d.spec.labels);
    prop_assert!(labels.managed_by(&node()));
    prop_assert_eq!(labels.module.as_deref(), Some(i.name.as_str()));
    prop_assert_eq!(labels.digest.as_ref(), Some(&d.digest));
    prop_assert_eq!(&labels.inputs, &d.inputs, "every input has its label");
    if d.spec.runtime.logging.is_none() {
        d.spec.runtime.logging = Some(Flavour::Docker.node_logging(&NodeLogging::Rotate {
            driver: None,
            max_size: "10m".into(),
            max_file: None,
        }));
    }
    d.spec.network_container = Some("0123456789ab".into());
    // On Podman, what it would drop is refused by name first.
    let _ = podman_refuses(&d.spec);
    let body = create_body(&d.spec);
    prop_assert!(
        serde_json::to_vec(&body).is_ok(),
        "the create body serialises"
    );
    BODIES.with(|b| b.set(b.get() + 1));
    Ok(())
}

/// Parses a document both ways it may come and drives what passes on.
fn intention_text(text: &str) -> Result<(), TestCaseError> {
    if let Ok(i) = Intention::parse(text, DocFormat::Toml, "f.toml") {
        through(&i)?;
    }
    if let Ok(i) = Intention::parse(text, DocFormat::Json, "f.json") {
        through(&i)?;
    }
    Ok(())
}

/// A JSON document as a file (JSON and TOML) and as an API body.
fn intention_doc(doc: &J) -> Result<(), TestCaseError> {
    let json = doc.to_string();
    if let Ok(i) = Intention::parse_json(json.as_bytes(), "PUT /v1/intentions/m") {
        through(&i)?;
    }
    intention_text(&json)?;
    if let Ok(text) = toml::to_string(doc) {
        intention_text(&text)?;
    }
    Ok(())
}

// ---------------------------------------------------------------------
// Generators.

/// Strings a field may meet: paths, words the schema knows, edges.
fn edgy_string() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(vec![
            "", "/", "//", "/a/../b", "/a/./b", "a", "-", ".", "..", "\u{0}", "/x\u{0}", " ", "\n",
            "signal:", "signal:SIGHUP", "signal:0", "container:", "container:web", "host", "none",
            "bridge", "host-gateway", "1", "0", "-1", "1e400", "NaN", "0x10", "tcp", "udp",
            "80/tcp", "0:80", "65536", "::", "[::1]:53:53/udp", "a=b", "=", "a:b:c:d", "ro", "rw",
            "stead.digest", "stead.input.env", "stead-x", "é", "\u{202e}", "ALL", "CAP_", "1m",
            "0s", "9999999999h", "1.5", ".5", "-0", "true", "null", "${X}", "$$",
        ])
        .prop_map(String::from),
        2 => "\\PC{0,24}",
        1 => "[ -~]{0,12}",
        1 => (0usize..300).prop_map(|n| "a/".repeat(n)),
        1 => (0usize..5000).prop_map(|n| "x".repeat(n)),
    ]
}

/// Any JSON value, up to a few levels deep.
fn noise() -> impl Strategy<Value = J> {
    let leaf = prop_oneof![
        Just(J::Null),
        any::<bool>().prop_map(J::from),
        any::<i64>().prop_map(J::from),
        any::<u64>().prop_map(J::from),
        prop::sample::select(vec![0.0, -0.0, 0.5, 1e300, -1e-300, 4294967296.5, f64::MAX])
            .prop_map(J::from),
        edgy_string().prop_map(J::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(J::Array),
            prop::collection::vec((field_name(), inner), 0..4)
                .prop_map(|kv| J::Object(kv.into_iter().collect())),
        ]
    })
}

/// Every field of an intention, and keys from neighbouring schemas.
const INTENTION_FIELDS: [&str; 16] = [
    "name",
    "image",
    "command",
    "env",
    "env_files",
    "env_file_format",
    "restart",
    "on_drift",
    "update_order",
    "update",
    "ports",
    "config",
    "settings",
    "files",
    "mounts",
    "unknown_field",
];

/// A key an object may have: a schema's field, or any word.
fn field_name() -> impl Strategy<Value = String> {
    let mut known: Vec<&'static str> = INTENTION_FIELDS.to_vec();
    known.extend(stead::model::runtime::FIELDS);
    known.extend([
        "path",
        "format",
        "defaults",
        "reload",
        "content",
        "source",
        "target",
        "read_only",
        "input",
        "lane",
        "range",
        "interval",
        "health_window",
        "test",
        "timeout",
        "retries",
        "start_period",
        "disable",
        "driver",
        "options",
        "soft",
        "hard",
        "name",
        "nofile",
    ]);
    prop_oneof![
        3 => prop::sample::select(known).prop_map(String::from),
        1 => "[a-z_.-]{0,8}",
    ]
}

/// A value given sealed (`{"sealed": …}`): base64 that is no age file, an
/// age file to a key this node does not hold, or text that is not base64;
/// none opens here, each is refused by its field.
fn sealed() -> impl Strategy<Value = J> {
    use stead::model::{age, sealed};
    prop_oneof![
        "[A-Za-z0-9+/]{0,64}={0,2}".prop_map(|t| json!({"sealed": t})),
        (any::<[u8; 32]>(), "[a-z.A-Z_]{1,12}", "[ -~]{0,16}").prop_map(|(seed, field, value)| {
            let to = age::Identity::from_bytes(seed).recipient();
            let b = sealed::Binding {
                node: "fuzz",
                module: "m",
                field: &field,
            };
            json!({"sealed": sealed::seal(&to, &b, value.as_bytes(), &[seed[0]; age::RANDOM_LEN]).unwrap()})
        }),
        edgy_string().prop_map(|t| json!({"sealed": t})),
        noise().prop_map(|n| json!({"sealed": n})),
    ]
}

/// A valid-looking absolute path in the container.
fn container_path() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "/[a-z]{1,4}(/[a-z.]{1,6}){0,2}",
        1 => prop::sample::select(vec!["/etc/app.conf", "/etc", "/dev/x", "/c.json", "/run", "/"])
            .prop_map(String::from),
    ]
}

fn s(v: &str) -> J {
    J::from(v)
}

/// One plausible value of each intention field, by name.
fn field_value(field: &'static str) -> BoxedStrategy<J> {
    let words = |w: Vec<&'static str>| prop::sample::select(w).prop_map(s).boxed();
    // Mostly what the schema takes, sometimes what it does not.
    let mostly = |good: Vec<&'static str>, bad: Vec<&'static str>| {
        prop_oneof![16 => prop::sample::select(good).prop_map(s), 1 => prop::sample::select(bad).prop_map(s)].boxed()
    };
    let paths = host_paths();
    let root = fixtures().display().to_string();
    let host = prop_oneof![
        8 => prop::sample::select(vec![format!("{root}/file"), format!("{root}/dir"), format!("{root}/good.env")]).prop_map(J::from),
        1 => prop::sample::select(paths.clone()).prop_map(J::from),
    ];
    let env_file = prop_oneof![
        8 => Just(J::from(format!("{root}/good.env"))),
        1 => prop::sample::select(paths).prop_map(J::from),
    ];
    let duration =
        || prop::sample::select(vec!["1s", "30s", "5m", "1h", "1500ms", "2h30m"]).prop_map(s);
    match field {
        "name" => prop_oneof![12 => "[a-z][a-z0-9-]{0,10}".prop_map(J::from), 1 => edgy_string().prop_map(J::from)].boxed(),
        "image" => prop_oneof![
            4 => words(vec!["busybox:1.2.3", "stead-test/busybox:2.0.0", "localhost:5000/app:1.2.3", "app:0.1.0-rc.1"]),
            1 => words(vec!["busybox:1", "x", "busybox:latest"]),
            1 => "[0-9a-f]{64}".prop_map(|h| J::from(format!("reg.local/app@sha256:{h}"))),
        ]
        .boxed(),
        "command" => prop::collection::vec(edgy_string(), 0..4).prop_map(|v| json!(v)).boxed(),
        "entrypoint" => prop_oneof![
            prop::collection::vec(edgy_string(), 0..4).prop_map(|v| json!(v)),
            edgy_string().prop_map(J::from),
        ]
        .boxed(),
        "env" => prop::collection::btree_map(
            "[A-Za-z_.-][A-Za-z0-9_.-]{0,6}",
            prop_oneof![6 => edgy_string().prop_map(J::from), 1 => sealed()],
            0..4,
        )
        .prop_map(|m| json!(m))
        .boxed(),
        "env_files" => prop::collection::vec(env_file, 0..3).prop_map(J::Array).boxed(),
        "env_file_format" => mostly(vec!["raw", "compose"], vec![".env", "Compose"]),
        "restart" => mostly(vec!["no", "on-failure", "always", "unless-stopped"], vec!["sometimes"]),
        "on_drift" => mostly(vec!["recreate", "report"], vec!["ignore"]),
        "update_order" => mostly(vec!["stop-first", "start-first"], vec!["never"]),
        "update" => (
            words(vec!["manual", "auto", "pinned"]),
            mostly(vec!["^1.2", "~1", "*", ">=1, <2", "^0.1", "^2"], vec!["1.2.3", "", "^0.0.1-rc.1", "x"]),
            prop::option::of(mostly(vec!["1m", "6h", "1h30m"], vec!["0s", "1s"])),
            prop::option::of(duration()),
        )
            .prop_map(|(lane, range, interval, health)| {
                let mut u = json!({"lane": lane, "range": range});
                if let Some(d) = interval {
                    u["interval"] = d;
                }
                if let Some(d) = health {
                    u["health_window"] = d;
                }
                u
            })
            .boxed(),
        "ports" => prop::collection::vec(
            prop_oneof![
                "[0-9]{1,5}(/tcp|/udp|/sctp)?",
                "[0-9]{1,5}:[0-9]{1,5}(/tcp|/udp)?",
                prop::sample::select(vec!["127.0.0.1:8080:80", "[::1]:53:53/udp", "0.0.0.0:1:1/sctp", "127.0.0.1:8080:80", "[::1]:53:53/udp", "0.0.0.0:1:1/sctp", ":80:80"])
                    .prop_map(String::from),
            ]
            .prop_map(J::from),
            0..4,
        )
        .prop_map(J::Array)
        .boxed(),
        "config" => (
            container_path(),
            mostly(vec!["json", "toml", "env"], vec!["yaml"]),
            prop::collection::btree_map("[a-z]{1,4}(\\.[a-z]{1,3})?", setting_value(), 0..4),
            prop::option::of(mostly(vec!["signal:SIGHUP", "signal:HUP", "signal:1"], vec!["SIGHUP", "signal:SIGBOGUS"])),
        )
            .prop_map(|(path, format, defaults, reload)| {
                let mut c = json!({"path": path, "format": format, "defaults": defaults});
                if let Some(r) = reload {
                    c["reload"] = r;
                }
                c
            })
            .boxed(),
        "settings" => prop::collection::btree_map("[a-z]{1,4}(\\.[a-z]{1,3}){0,2}", setting_value(), 0..4)
            .prop_map(|m| json!(m))
            .boxed(),
        "files" => prop::collection::vec(
            (
                container_path(),
                prop_oneof![6 => edgy_string().prop_map(J::from), 1 => sealed()],
            )
                .prop_map(|(p, c)| json!({"path": p, "content": c})),
            0..3,
        )
        .prop_map(J::Array)
        .boxed(),
        "mounts" => prop::collection::vec(
            (host, container_path(), any::<bool>(), prop::option::of(any::<bool>())).prop_map(
                |(source, target, ro, input)| {
                    let mut m = json!({"source": source, "target": target, "read_only": ro});
                    // `input` is for read-only mounts (a mutation says it
                    // of the others).
                    if let (true, Some(i)) = (ro, input) {
                        m["input"] = J::Bool(i);
                    }
                    m
                },
            ),
            0..3,
        )
        .prop_map(J::Array)
        .boxed(),
        "working_dir" => container_path().prop_map(J::from).boxed(),
        "user" => mostly(vec!["1000", "1000:1000", "nobody", "app:app", "root", "0:0"], vec![":", "a b"]),
        "labels" => prop_oneof![
            prop::collection::btree_map("[a-z.]{1,12}", edgy_string(), 0..3).prop_map(|m| json!(m)),
            prop::collection::vec("[a-z.]{1,8}=[a-z]{0,4}", 0..3).prop_map(|v| json!(v)),
        ]
        .boxed(),
        "devices" => prop::collection::vec(
            mostly(vec!["/dev/ttyUSB0", "/dev/ttyUSB0:/dev/ttyS0", "/dev/null:/dev/null:rwm", "/dev/fuse:/dev/fuse:r"], vec!["/dev/x:/dev/y:q", "dev", "/dev/a:/dev/b:rwm:x"]),
            0..3,
        )
        .prop_map(J::Array)
        .boxed(),
        "device_cgroup_rules" => prop::collection::vec(mostly(vec!["c 188:* rwm", "b 8:0 r", "a *:* rwm"], vec!["x"]), 0..3)
            .prop_map(J::Array)
            .boxed(),
        "privileged" | "read_only" | "init" => any::<bool>().prop_map(J::Bool).boxed(),
        "cap_add" | "cap_drop" => prop::collection::vec(mostly(vec!["NET_ADMIN", "CAP_SYS_TIME", "ALL", "chown"], vec!["BOGUS"]), 0..3)
            .prop_map(J::Array)
            .boxed(),
        "network_mode" => mostly(vec!["host", "none", "bridge", "container:other"], vec!["container:", "service:x"]),
        "extra_hosts" => prop_oneof![
            prop::collection::vec(mostly(vec!["db:10.0.0.2", "gw:fe80::1", "host.docker.internal:host-gateway"], vec!["x", "a:b"]), 0..3)
                .prop_map(J::Array),
            prop::collection::btree_map("[a-z]{1,6}", mostly(vec!["10.0.0.2", "fe80:0::1", "host-gateway"], vec!["nope"]), 0..3)
                .prop_map(|m| json!(m)),
        ]
        .boxed(),
        "dns" => prop::collection::vec(mostly(vec!["1.1.1.1", "::1"], vec!["10.0.0.256", "x"]), 0..3)
            .prop_map(J::Array)
            .boxed(),
        "tmpfs" => prop_oneof![
            4 => prop::collection::vec(container_path().prop_map(J::from), 0..3).prop_map(J::Array),
            4 => mostly(vec!["/run:mode=1777,size=64m", "/tmp"], vec!["/run:"]),
            1 => prop::collection::btree_map(container_path(), words(vec!["size=1m", ""]), 0..2).prop_map(|m| json!(m)),
        ]
        .boxed(),
        "memswap_limit" => prop_oneof![
            16 => mostly(vec!["2g", "-1"], vec!["1", "0", "1e3"]).prop_map(|v| if v == "-1" { json!(-1) } else { v }),
            1 => any::<i64>().prop_map(J::from),
        ]
        .boxed(),
        "mem_limit" => prop_oneof![
            8 => mostly(vec!["512m", "512MiB", "0.5g", "1g", "64m", "8388608"], vec!["1", "0", "-1", "1e3", "4194304", "18446744073709551616"]),
            1 => any::<i64>().prop_map(J::from),
        ]
        .boxed(),
        "cpus" => prop_oneof![
            4 => prop::sample::select(vec![0.5, 1.5, 2.0, 0.01]).prop_map(J::from),
            1 => prop::sample::select(vec![0.0, -1.0, 1e-12, 1e18]).prop_map(J::from),
            4 => mostly(vec!["0.5", ".50", "2"], vec!["x"]),
        ]
        .boxed(),
        "pids_limit" => prop_oneof![1 => any::<i64>().prop_map(J::from), 4 => Just(json!(100)), 1 => Just(json!(-1))].boxed(),
        "ulimits" => prop_oneof![
            4 => Just(json!({"nofile": 1024})),
            4 => (0i64..5000, 0i64..5000).prop_map(|(a, b)| json!({"nofile": {"soft": a.min(b), "hard": a.max(b)}})),
            1 => (any::<i64>(), any::<i64>()).prop_map(|(a, b)| json!({"nofile": {"soft": a, "hard": b}})),
            1 => Just(json!({"nproc": {"soft": 1}})),
            1 => Just(json!({"bogus": 1})),
        ]
        .boxed(),
        "sysctls" => prop_oneof![
            Just(json!({"net.ipv4.ip_forward": "1"})),
            Just(json!(["net/ipv4/ip_forward=1"])),
            Just(json!({"net.ipv4.ip_forward": 1})),
            Just(json!({"net.core.somaxconn": "1024"})),
        ]
        .boxed(),
        "stop_signal" => mostly(vec!["SIGINT", "int", "2", "KILL", "SIGUSR1"], vec!["0", "65", "SIGRTMIN+3", ""]),
        "stop_grace_period" => mostly(vec!["1s", "30s", "5m", "2000ms"], vec!["301s", "1h", "-1s", "1500ms"]),
        "healthcheck" => (
            prop_oneof![
                words(vec!["true", "wget -q -O- localhost"]),
                Just(json!(["CMD", "true"])),
                Just(json!(["CMD-SHELL", "exit 0"])),
                Just(json!(["NONE"])),
                Just(J::Null),
                Just(J::Null),
            ],
            prop::option::of(duration()),
            prop::option::of(0u32..10),
            any::<bool>(),
        )
            .prop_map(|(test, interval, retries, disable)| {
                let mut h = json!({});
                if !test.is_null() {
                    h["test"] = test;
                }
                if let Some(i) = interval {
                    h["interval"] = i.clone();
                    h["timeout"] = i;
                }
                if let Some(r) = retries {
                    h["retries"] = json!(r);
                }
                if disable {
                    h["disable"] = J::Bool(true);
                }
                h
            })
            .boxed(),
        "logging" => (
            mostly(vec!["local", "json-file", " local", "journald", "none"], vec!["syslog", ""]),
            prop::collection::btree_map(mostly(vec!["max-size", "max-file", "tag"], vec!["x"]).prop_map(|k| k.as_str().unwrap().to_string()), mostly(vec!["10m", "3", "t"], vec![""]), 0..3),
        )
            .prop_map(|(d, o)| json!({"driver": d, "options": o}))
            .boxed(),
        "volumes" => prop::collection::vec(
            prop_oneof![
                ("[a-z]{1,5}", container_path(), mostly(vec!["", ":ro", ":rw"], vec![":z"])).prop_map(|(n, t, m)| J::from(format!("{n}:{t}{}", m.as_str().unwrap()))),
                ("[a-z]{1,5}", container_path(), any::<bool>()).prop_map(|(n, t, ro)| json!({"name": n, "target": t, "read_only": ro})),
            ],
            0..3,
        )
        .prop_map(J::Array)
        .boxed(),
        "networks" => prop::collection::vec(mostly(vec!["back", "front"], vec!["host", "bridge", "x y", ""]), 0..3)
            .prop_map(J::Array)
            .boxed(),
        // A runtime field without a generator above: its row's examples.
        f => examples(f).unwrap_or_else(|| noise().boxed()),
    }
}

/// A runtime field's examples (from its row of the field table), as JSON,
/// mostly, and sometimes noise; `None` for a name that is no runtime field.
fn examples(field: &str) -> Option<BoxedStrategy<J>> {
    let (_, examples) = stead::model::runtime::EXAMPLES
        .into_iter()
        .find(|(f, _)| *f == field)?;
    let values: Vec<J> = examples
        .iter()
        .map(|e| {
            let t: toml::Table = toml::from_str(&format!("v = {e}")).unwrap();
            serde_json::to_value(&t["v"]).unwrap()
        })
        .collect();
    Some(prop_oneof![8 => prop::sample::select(values), 1 => noise()].boxed())
}

/// A setting's value: scalars, lists, tables.
fn setting_value() -> impl Strategy<Value = J> {
    let leaf = prop_oneof![
        any::<bool>().prop_map(J::from),
        any::<i64>().prop_map(J::from),
        prop::sample::select(vec![0.5, -2.25, 1e300]).prop_map(J::from),
        edgy_string().prop_map(J::from),
        Just(J::Null),
        sealed(),
    ];
    leaf.prop_recursive(2, 12, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(J::Array),
            prop::collection::btree_map("[a-z]{1,3}", inner, 0..3).prop_map(|m| json!(m)),
        ]
    })
}

/// A valid-looking intention: a name and an image, and each other field
/// (every one of the intention's own and of `runtime::FIELDS`) present or
/// not.
fn intention() -> impl Strategy<Value = J> {
    // Each field in about one document of four: deep enough that most
    // documents still pass the check.
    intention_with(0.25)
}

/// [`intention`], each field present with probability `p`.
fn intention_with(p: f64) -> impl Strategy<Value = J> {
    let mut fields: Vec<&'static str> = INTENTION_FIELDS[2..14].to_vec();
    fields.extend(stead::model::runtime::FIELDS);
    let parts: Vec<BoxedStrategy<Option<(&'static str, J)>>> = fields
        .into_iter()
        .map(|f| prop::option::weighted(p, field_value(f).prop_map(move |v| (f, v))).boxed())
        .collect();
    (field_value("name"), field_value("image"), parts).prop_map(|(name, image, parts)| {
        let mut doc = serde_json::Map::new();
        doc.insert("name".into(), name);
        doc.insert("image".into(), image);
        doc.extend(parts.into_iter().flatten().map(|(k, v)| (k.to_string(), v)));
        // What the check asks of fields together, most of the time given.
        if doc.contains_key("memswap_limit") {
            doc.entry("mem_limit").or_insert(s("64m"));
        }
        if doc.contains_key("update") {
            doc.insert("image".into(), s("localhost:5000/app:1.2.3"));
        }
        J::Object(doc)
    })
}

/// One change to a document: where (a child index at each level, taken
/// modulo the number of children) and what.
#[derive(Clone, Debug)]
enum Change {
    /// Replaced by another value.
    Set(Vec<usize>, J),
    /// Removed.
    Remove(Vec<usize>),
    /// A key added to the object there.
    Add(Vec<usize>, String, J),
}

fn change() -> impl Strategy<Value = Change> {
    let at = prop::collection::vec(any::<usize>(), 1..5);
    prop_oneof![
        3 => (at.clone(), noise()).prop_map(|(a, v)| Change::Set(a, v)),
        1 => at.clone().prop_map(Change::Remove),
        1 => (at, field_name(), noise()).prop_map(|(a, k, v)| Change::Add(a, k, v)),
    ]
}

/// Applies a change: descends by the indices while there are children.
fn apply(doc: &mut J, c: &Change) {
    let (at, what) = match c {
        Change::Set(a, _) | Change::Remove(a) | Change::Add(a, _, _) => (a, c),
    };
    let mut here = doc;
    for (depth, i) in at.iter().enumerate() {
        let last = depth + 1 == at.len();
        let n = match here {
            J::Object(m) => m.len(),
            J::Array(v) => v.len(),
            _ => 0,
        };
        if n == 0 {
            break;
        }
        let k = i % n;
        if last {
            match (here, what) {
                (J::Object(m), Change::Set(_, v)) => {
                    if let Some(slot) = m.values_mut().nth(k) {
                        *slot = v.clone();
                    }
                }
                (J::Array(a), Change::Set(_, v)) => a[k] = v.clone(),
                (J::Object(m), Change::Remove(_)) => {
                    let key = m.keys().nth(k).cloned().unwrap_or_default();
                    m.remove(&key);
                }
                (J::Array(a), Change::Remove(_)) => {
                    a.remove(k);
                }
                (J::Object(m), Change::Add(_, key, v)) => {
                    m.insert(key.clone(), v.clone());
                }
                _ => {}
            }
            return;
        }
        here = match here {
            J::Object(m) => m.values_mut().nth(k).unwrap(),
            J::Array(v) => &mut v[k],
            _ => unreachable!(),
        };
    }
}

/// A document with up to three changes (one, most often).
fn mutated(doc: impl Strategy<Value = J>) -> impl Strategy<Value = J> {
    let changes = prop_oneof![
        1 => prop::collection::vec(change(), 0..1),
        2 => prop::collection::vec(change(), 1..2),
        1 => prop::collection::vec(change(), 2..4),
    ];
    (doc, changes).prop_map(|(mut d, changes)| {
        for c in &changes {
            apply(&mut d, c);
        }
        d
    })
}

/// Text with a piece of it cut out and junk put in.
fn damaged(text: String, cut: usize, len: usize, junk: &str) -> String {
    let at = |i: usize| {
        (0..=i.min(text.len()))
            .rev()
            .find(|j| text.is_char_boundary(*j))
            .unwrap_or(0)
    };
    let (a, b) = (at(cut), at(cut.saturating_add(len)));
    format!("{}{junk}{}", &text[..a], &text[b.max(a)..])
}

// ---------------------------------------------------------------------
// Intentions.

#[test]
fn intentions_with_every_field_mutated_never_panic_and_what_passes_makes_a_create_body() {
    fixtures();
    fuzz("intentions", mutated(intention()), |doc| {
        intention_doc(&doc)
    });
}

#[test]
fn intention_text_damaged_or_raw_never_panics() {
    fixtures();
    let text = prop_oneof![
        2 => (intention(), any::<bool>(), any::<usize>(), 0usize..8, "[\\[\\]{}\"'=,.:\\n\\\\ a-z0-9]{0,8}")
            .prop_map(|(doc, as_toml, cut, len, junk)| {
                let text = if as_toml {
                    toml::to_string(&doc).unwrap_or_default()
                } else {
                    serde_json::to_string_pretty(&doc).unwrap_or_default()
                };
                let cut = if text.is_empty() { 0 } else { cut % text.len() };
                damaged(text, cut, len, &junk)
            }),
        1 => "\\PC{0,300}",
    ];
    fuzz("intention-text", text, |t| {
        intention_text(&t)?;
        let _ = Intention::parse_json(t.as_bytes(), "PUT /v1/intentions/m");
        Ok(())
    });
}

/// Env files of any text, in either format, read or are refused naming a
/// line, never echoing what the file holds past its first character.
#[test]
fn env_files_of_any_text_never_panic_and_errors_name_a_line() {
    use stead::model::env_file::{self, Format, Known};
    let text = prop_oneof![
        3 => "[A-Za-z_.=:#'\"\\${}\\- \t\r\n0-9]{0,60}",
        1 => "\\PC{0,80}",
        1 => prop::collection::vec(any::<u8>(), 0..40)
            .prop_map(|b| String::from_utf8_lossy(&b).into_owned()),
    ];
    let known: Known = [("K", "v")].map(|(k, v)| (k.into(), v.into())).into();
    fuzz("env-files", text, |t| {
        let lookup = |k: &str| (k == "L").then(|| "w".to_string());
        for f in [Format::Raw, Format::Compose] {
            match env_file::read(t.as_bytes(), f, &lookup, &known) {
                Ok(vars) => {
                    for (k, v) in vars {
                        prop_assert!(!k.is_empty() && !k.contains('=') && !v.contains('\0'));
                    }
                }
                Err(e) => prop_assert!(e.starts_with("line ") || e == "not UTF-8 text", "{e}"),
            }
        }
        Ok(())
    });
}

#[test]
fn api_bodies_of_any_bytes_never_panic() {
    fuzz(
        "api-bytes",
        prop::collection::vec(any::<u8>(), 0..200),
        |bytes| {
            if let Ok(i) = Intention::parse_json(&bytes, "PUT /v1/intentions/m") {
                through(&i)?;
            }
            Ok(())
        },
    );
}

// ---------------------------------------------------------------------
// Central-plane documents, signed here and judged whole.

/// The clock the documents are judged at (2026-12-01).
const NOW: u64 = 1_796_083_200;

fn rfc3339(t: i64) -> J {
    J::from(stead::model::time::format_rfc3339(t.max(0) as u64))
}

/// A valid-looking desired-state payload for the node.
fn plane_payload() -> impl Strategy<Value = J> {
    (
        prop_oneof![16 => Just(s("fuzz-node")), 1 => edgy_string().prop_map(J::from)],
        prop_oneof![16 => (1u64..1000).prop_map(J::from), 1 => any::<u64>().prop_map(J::from), 1 => Just(json!(1u64 << 53))],
        prop_oneof![8 => -100_000i64..50_000, 1 => -200_000i64..200_000],
        prop_oneof![8 => 200_000i64..10_000_000, 1 => -100_000i64..200_000],
        prop::option::of((
            prop_oneof![8 => Just("15m"), 8 => Just("24h"), 1 => Just("1s"), 1 => Just("25h"), 1 => Just("0s")],
            prop::option::of(prop_oneof![8 => Just("1s"), 8 => Just("1m"), 1 => Just("0s"), 1 => Just("25h")]),
        )),
        prop::option::of(prop_oneof![
            8 => Just("https://plane.example/nodes/fuzz-node/status.json"),
            8 => Just("http://127.0.0.1:9/r"),
            1 => Just("https://user:pw@plane.example/r"),
            1 => Just("ftp://x/y"),
            1 => Just("/relative"),
        ]),
        // Some changed (the whole document may be changed too, at any
        // depth).
        // (A document is taken all or nothing: fewer fields per module.)
        prop::collection::vec(prop_oneof![3 => intention_with(0.1).boxed(), 1 => mutated(intention()).boxed()], 0..4),
        prop::option::of(image_rules()),
    )
        .prop_map(|(node, revision, issued, lasts, poll, report, modules, images)| {
            let issued_at = NOW as i64 + issued;
            let mut d = json!({
                "node": node,
                "revision": revision,
                "issued_at": rfc3339(issued_at),
                "expires": rfc3339(issued_at + lasts),
                "modules": modules,
            });
            if let Some((interval, jitter)) = poll {
                d["poll"] = json!({"interval": interval});
                if let Some(j) = jitter {
                    d["poll"]["jitter"] = s(j);
                }
            }
            if let Some(r) = report {
                d["report"] = s(r);
            }
            if let Some(i) = images {
                d["images"] = i;
            }
            d
        })
}

/// A public key as a policy names it: a real one, or text that is not.
fn policy_key() -> impl Strategy<Value = J> {
    const P256: &str = "-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEOIpEfiF1+GiWbFSpXcB6b8/AZ/r8\nAWJNVD+AgHiZsx4yQRvovQL8lgzdHrKcSi0qdPYK95bUpUZpJl/csNh6cQ==\n-----END PUBLIC KEY-----\n";
    prop_oneof![
        8 => Just(s(P256)),
        1 => edgy_string().prop_map(|e| s(&format!("-----BEGIN PUBLIC KEY-----\n{e}\n-----END PUBLIC KEY-----"))),
        1 => edgy_string().prop_map(J::from),
        1 => noise(),
    ]
}

/// A document's image policy: rules of every kind, some wrong.
fn image_rules() -> impl Strategy<Value = J> {
    let rule = (
        prop_oneof![
            4 => Just(s("*")),
            4 => Just(s("registry.example/acme")),
            4 => Just(s("127.0.0.1:5000")),
            1 => edgy_string().prop_map(J::from),
        ],
        prop_oneof![6 => Just(s("sigstore")), 2 => Just(s("none")), 1 => edgy_string().prop_map(J::from)],
        prop::collection::vec(policy_key(), 0..3),
        prop::option::of((
            prop_oneof![4 => Just(s("https://slsa.dev/provenance/v1")), 1 => edgy_string().prop_map(J::from)],
            prop::collection::vec(policy_key(), 0..3),
        )),
    )
        .prop_map(|(scope, require, keys, attestation)| {
            let mut r = json!({"scope": scope, "require": require, "keys": keys});
            if let Some((predicate, keys)) = attestation {
                r["attestation"] = json!({"predicate_type": predicate, "keys": keys});
            }
            r
        });
    prop_oneof![
        8 => prop::collection::vec(rule, 0..4).prop_map(J::from),
        1 => noise(),
    ]
}

/// How a payload reaches the node.
#[derive(Clone, Debug)]
enum Wrapping {
    /// Signed by the trusted key.
    Signed,
    /// Signed, the signature without a key id.
    Keyless,
    /// Signed by a key the node does not trust.
    Stranger,
    /// Signed, under another payload type.
    OtherType,
    /// Signed, then the envelope's text damaged.
    Damaged(usize, usize, String),
}

fn wrapping() -> impl Strategy<Value = Wrapping> {
    prop_oneof![
        12 => Just(Wrapping::Signed),
        1 => Just(Wrapping::Keyless),
        1 => Just(Wrapping::Stranger),
        1 => Just(Wrapping::OtherType),
        2 => (any::<usize>(), 0usize..6, "[{}\\[\\]\",:a-zA-Z0-9+/=]{0,6}").prop_map(|(c, l, j)| Wrapping::Damaged(c, l, j)),
    ]
}

/// What the node holds before the document comes.
fn held_before() -> impl Strategy<Value = Option<(u64, u64)>> {
    prop::option::weighted(
        0.3,
        (
            0u64..1000,
            prop_oneof![8 => (NOW - 100_000)..NOW, 1 => 0u64..(2 * NOW)],
        ),
    )
}

struct Keys {
    trusted: SecretKey,
    stranger: SecretKey,
}

fn keys() -> &'static Keys {
    static KEYS: OnceLock<Keys> = OnceLock::new();
    KEYS.get_or_init(|| Keys {
        trusted: SecretKey::generate().unwrap(),
        stranger: SecretKey::generate().unwrap(),
    })
}

/// What a node holds of `url`: (revision, newest issued_at), signed by
/// the trusted key.
fn held_at(url: &str, (revision, newest): (u64, u64)) -> Held {
    Held {
        url: url.into(),
        revision,
        payload_digest: Digest::of(b"held"),
        etag: None,
        issued_at: newest,
        expires: newest + 86_400,
        newest_issued_at: newest,
        accepted_at: newest,
        key_id: keys().trusted.public().id().to_string(),
    }
}

/// Judges a payload as the node would fetch it, and drives every module
/// of an adopted document on.
fn plane_case(payload: &[u8], w: &Wrapping, held: Option<(u64, u64)>) -> Result<(), TestCaseError> {
    let k = keys();
    let env = match w {
        Wrapping::Stranger => k.stranger.sign(PAYLOAD_TYPE, payload),
        Wrapping::OtherType => k.trusted.sign("application/json", payload),
        _ => k.trusted.sign(PAYLOAD_TYPE, payload),
    };
    let mut env = env;
    if let Wrapping::Keyless = w {
        for sig in &mut env.signatures {
            sig.keyid.clear();
        }
    }
    let mut body = env.to_json();
    if let Wrapping::Damaged(cut, len, junk) = w {
        let text = String::from_utf8(body).unwrap();
        let cut = cut % text.len();
        body = damaged(text, cut, *len, junk).into_bytes();
    }
    let trusted = [k.trusted.public()];
    let held = held.map(|h| held_at("http://127.0.0.1/desired.json", h));
    let clock = Clock {
        system: NOW,
        build: NOW - 86_400,
        counted: 0,
    };
    let verdict = judge(&body, &node(), &trusted, held.as_ref(), clock);
    if let Some(h) = &held {
        let floor = Floor::held(&body, stead::plane::envelope::PAYLOAD_TYPE, h);
        let _ = still_stands(floor, &trusted);
    }
    if let Verdict::Adopt(a) = verdict {
        prop_assert!(matches!(
            w,
            Wrapping::Signed | Wrapping::Keyless | Wrapping::Damaged(..)
        ));
        prop_assert_eq!(a.desired.node.as_str(), "fuzz-node");
        for i in a.desired.modules.values() {
            through(i)?;
        }
        // The document's modules, as JSON, read back whole.
        let again = Desired::parse(payload);
        prop_assert_eq!(again.as_ref().ok(), Some(&a.desired));
    }
    // Whatever the signature, the payload's own checks and `stead plane
    // sign`'s stamping never panic.
    let _ = Desired::parse(payload);
    let _ = stamp(payload, &node(), 2, NOW, NOW + 86_400);
    Ok(())
}

#[test]
fn plane_documents_mutated_and_signed_never_panic_and_what_is_adopted_makes_create_bodies() {
    fixtures();
    keys();
    let payload = prop_oneof![2 => plane_payload().boxed(), 1 => mutated(plane_payload()).boxed()];
    let cases = (payload, wrapping(), held_before());
    fuzz("plane", cases, |(payload, w, held)| {
        plane_case(payload.to_string().as_bytes(), &w, held)
    });
}

/// Signatures and attestations of any payload, signed by the key a rule
/// names (so that what is inside is read), are judged without a panic;
/// none is let through.
#[test]
fn image_signatures_and_attestations_of_any_payload_never_panic() {
    use base64::Engine as _;
    use ring::signature::{ECDSA_P256_SHA256_ASN1_SIGNING, EcdsaKeyPair, KeyPair as _};
    use stead::model::image_policy::{Attestation, PublicKey, Require, Rule, Scope, Signature};
    let rng = ring::rand::SystemRandom::new();
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, &rng).unwrap();
    let pair =
        EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, pkcs8.as_ref(), &rng).unwrap();
    let key = PublicKey::P256(pair.public_key().as_ref().to_vec());
    let rule = Rule {
        scope: Scope::parse("registry.example").unwrap(),
        require: Require::Sigstore(vec![key.clone()]),
        attestation: Some(Attestation {
            predicate_type: "https://slsa.dev/provenance/v1".into(),
            keys: vec![key],
        }),
    };
    let image = stead::model::reference::Reference::parse("registry.example/app:1").unwrap();
    let digest = format!("sha256:{}", "ab".repeat(32));
    let bytes = prop_oneof![
        noise().prop_map(|j| j.to_string().into_bytes()),
        noise().prop_map(|j| json!({"critical": j}).to_string().into_bytes()),
        noise().prop_map(|j| json!({"critical": {"identity": {"docker-reference": j}, "image": {"docker-manifest-digest": "sha256:ab"}, "type": "cosign container image signature"}}).to_string().into_bytes()),
        noise().prop_map(|j| json!({"_type": "https://in-toto.io/Statement/v1", "subject": j, "predicateType": "https://slsa.dev/provenance/v1"}).to_string().into_bytes()),
        prop::collection::vec(any::<u8>(), 0..200),
    ];
    fuzz(
        "image-signatures",
        (bytes, any::<bool>()),
        |(payload, in_toto)| {
            let sig = pair.sign(&rng, &payload).unwrap();
            let b64 = base64::engine::general_purpose::STANDARD;
            let signatures = [Signature {
                payload: payload.clone(),
                signature: b64.encode(sig.as_ref()),
            }];
            let payload_type = if in_toto {
                "application/vnd.in-toto+json"
            } else {
                "text/plain"
            };
            let env_sig = pair
                .sign(&rng, &stead::model::dsse::pae(payload_type, &payload))
                .unwrap();
            let envelope = json!({
                "payloadType": payload_type,
                "payload": b64.encode(&payload),
                "signatures": [{"sig": b64.encode(env_sig.as_ref())}],
            })
            .to_string()
            .into_bytes();
            let bundle = format!(
                r#"{{"mediaType": "{}", "dsseEnvelope": {}}}"#,
                stead::model::image_policy::BUNDLE_TYPES[0],
                String::from_utf8_lossy(&envelope)
            )
            .into_bytes();
            let verdict = stead::model::image_policy::judge(
                &[("node", &rule)],
                &image,
                &digest,
                &signatures,
                &[envelope, payload.clone()],
                &[bundle, payload.clone()],
            );
            prop_assert!(verdict.is_err(), "{:?}", String::from_utf8_lossy(&payload));
            Ok(())
        },
    );
}

#[test]
fn plane_payloads_and_envelopes_of_noise_never_panic() {
    keys();
    let bytes = prop_oneof![
        noise().prop_map(|j| j.to_string().into_bytes()),
        prop::collection::vec(any::<u8>(), 0..200),
        "\\PC{0,200}".prop_map(String::into_bytes),
    ];
    fuzz(
        "plane-noise",
        (bytes, wrapping(), held_before()),
        |(payload, w, held)| {
            plane_case(&payload, &w, held)?;
            // Noise as the envelope itself.
            let _ = Envelope::parse(&payload);
            let clock = Clock {
                system: NOW,
                build: 0,
                counted: 0,
            };
            let _ = judge(&payload, &node(), &[keys().trusted.public()], None, clock);
            Ok(())
        },
    );
}

// ---------------------------------------------------------------------
// Compose files (`stead import`).

/// The Compose file's directory.
const BASE: &str = "/srv/app";

/// One plausible value of each Compose service key.
fn compose_value(key: &'static str) -> BoxedStrategy<J> {
    let words = |w: Vec<&'static str>| prop::sample::select(w).prop_map(s).boxed();
    let list = |w: Vec<&'static str>| {
        prop::collection::vec(prop::sample::select(w).prop_map(s), 0..3)
            .prop_map(J::Array)
            .boxed()
    };
    match key {
        "image" => words(vec!["busybox:1", "${IMAGE:-app:1}", "reg.local/x@sha256:0", "$$x", "${NOPE:?unset}"]),
        "build" => words(vec![".", "./ctx"]),
        "command" => prop::collection::vec(edgy_string(), 0..4).prop_map(|v| json!(v)).boxed(),
        "entrypoint" => prop_oneof![
            words(vec!["echo hi", "sh -c 'echo \"a b\"; exit 1'", "'unclosed", "", "a\\ b"]),
            prop::collection::vec(edgy_string().prop_map(J::from), 0..3).prop_map(J::Array),
        ]
        .boxed(),
        "environment" => prop_oneof![
            list(vec!["A=1", "B=x=y", "C=", "HOME", "1BAD=x", "=x"]),
            prop::collection::btree_map("[A-Z]{1,4}", prop_oneof![edgy_string().prop_map(J::from), Just(J::Null), any::<i64>().prop_map(J::from), any::<bool>().prop_map(J::from)], 0..3).prop_map(|m| json!(m)),
        ]
        .boxed(),
        "env_file" => prop_oneof![
            words(vec!["./app.env", "missing.env", "/etc/y.env", "../up.env"]),
            Just(json!([{"path": "./app.env", "required": false}, "app.env"])),
        ]
        .boxed(),
        "ports" => prop::collection::vec(
            prop_oneof![
                words(vec!["8080:80", "127.0.0.1:8080:80/udp", "[::1]:53:53/udp", "9000-9001:9000-9001", "9000-9002:9000-9001", "${PORT}:80", "80", "1-65535", "x:y"]),
                (0u32..70000, 0u32..70000).prop_map(|(t, p)| json!({"target": t, "published": p.to_string(), "protocol": "tcp", "mode": "host"})),
            ],
            0..3,
        )
        .prop_map(J::Array)
        .boxed(),
        "expose" => list(vec!["80", "90/udp", "8000-8001", "x"]),
        "restart" => words(vec!["no", "always", "on-failure", "on-failure:5", "unless-stopped", "sometimes"]),
        "volumes" => prop::collection::vec(
            prop_oneof![
                words(vec!["./html:/usr/share/nginx/html:ro", "../data:/data", "~/x:/x:rw", "/etc/ssl:/ssl:ro,z", ".:/src", "/proc:/host/proc:ro", "/:/host:ro,rslave", "data:/var/lib/x", "named:/n:ro", "/anon", "a:b:c:d", ":"]),
                Just(json!({"type": "bind", "source": "./x", "target": "/x", "read_only": true})),
                Just(json!({"type": "volume", "source": "data", "target": "/d"})),
                Just(json!({"type": "tmpfs", "target": "/t", "tmpfs": {"size": 1000}})),
            ],
            0..3,
        )
        .prop_map(J::Array)
        .boxed(),
        "configs" | "secrets" => prop_oneof![
            list(vec!["conf", "secret", "missing"]),
            Just(json!([{"source": "conf", "target": "/etc/app.conf", "mode": 288}])),
        ]
        .boxed(),
        "depends_on" => prop_oneof![list(vec!["db", "web", "self"]), Just(json!({"db": {"condition": "service_healthy"}}))].boxed(),
        "deploy" => Just(json!({"replicas": 2, "resources": {"limits": {"memory": "64m", "cpus": "0.5"}}})).boxed(),
        "networks" => prop_oneof![list(vec!["front", "back", "default"]), Just(json!({"front": {"aliases": ["a"]}, "back": null}))].boxed(),
        "network_mode" => words(vec!["host", "none", "service:db", "container:x", "bridge"]),
        "healthcheck" => Just(json!({"test": ["CMD-SHELL", "true"], "interval": "5s", "timeout": "1s", "retries": 3, "start_period": "1m"})).boxed(),
        "logging" => Just(json!({"driver": "local", "options": {"max-size": "10m"}})).boxed(),
        "ulimits" => prop_oneof![Just(json!({"nofile": {"soft": 1024, "hard": 2048}})), Just(json!({"nproc": 65535}))].boxed(),
        "sysctls" => prop_oneof![Just(json!({"net.core.somaxconn": 1024})), Just(json!(["net.ipv4.ip_forward=1"]))].boxed(),
        "extra_hosts" => prop_oneof![list(vec!["db:10.0.0.2", "host.docker.internal:host-gateway", "x"]), Just(json!({"db": "10.0.0.2"}))].boxed(),
        "labels" => prop_oneof![list(vec!["a=b", "c"]), Just(json!({"a": "b", "n": 1}))].boxed(),
        "tmpfs" => prop_oneof![words(vec!["/run", "/run:size=1m"]), list(vec!["/tmp", "x"])].boxed(),
        _ => field_value(compose_to_intention(key)),
    }
}

/// The intention field a Compose key of the same meaning maps to.
fn compose_to_intention(key: &'static str) -> &'static str {
    stead::model::runtime::FIELDS
        .into_iter()
        .find(|f| *f == key)
        .unwrap_or("unknown_field")
}

/// The service keys generated.
const SERVICE_KEYS: [&str; 41] = [
    "build",
    "command",
    "entrypoint",
    "environment",
    "env_file",
    "ports",
    "expose",
    "restart",
    "volumes",
    "configs",
    "secrets",
    "depends_on",
    "deploy",
    "networks",
    "network_mode",
    "healthcheck",
    "logging",
    "ulimits",
    "sysctls",
    "extra_hosts",
    "labels",
    "tmpfs",
    "user",
    "working_dir",
    "devices",
    "device_cgroup_rules",
    "privileged",
    "cap_add",
    "cap_drop",
    "dns",
    "read_only",
    "mem_limit",
    "memswap_limit",
    "shm_size",
    "cpus",
    "pids_limit",
    "init",
    "stop_signal",
    "stop_grace_period",
    "container_name",
    "profiles",
];

/// A valid-looking Compose file: services with any of the keys, and the
/// top-level declarations they name.
fn compose_file() -> impl Strategy<Value = J> {
    let service = {
        let parts: Vec<BoxedStrategy<Option<(&'static str, J)>>> = SERVICE_KEYS
            .into_iter()
            .map(|k| {
                prop::option::weighted(0.15, compose_value(k).prop_map(move |v| (k, v))).boxed()
            })
            .collect();
        (compose_value("image"), parts).prop_map(|(image, parts)| {
            let mut m = serde_json::Map::new();
            m.insert("image".into(), image);
            m.extend(parts.into_iter().flatten().map(|(k, v)| (k.to_string(), v)));
            J::Object(m)
        })
    };
    (
        prop::collection::btree_map(prop_oneof![4 => "[a-z][a-z0-9_]{0,6}", 1 => edgy_string()], service, 1..4),
        any::<bool>(),
    )
        .prop_map(|(services, top)| {
            let mut doc = json!({"services": services});
            if top {
                doc["volumes"] = json!({"data": {}, "named": {"name": "real-name"}, "ext": {"external": true}});
                doc["networks"] = json!({"front": {}, "back": {"external": true}});
                doc["configs"] = json!({"conf": {"file": "./conf.txt"}, "env": {"environment": "SECRET"}, "far": {"file": "/etc/shadow"}});
                doc["secrets"] = json!({"secret": {"file": "./secret"}});
                doc["x-common"] = json!({"restart": "always"});
            }
            doc
        })
}

/// YAML text for a value, in block style, scalars in double quotes (JSON's
/// escapes are YAML's) or plain when they read back as the same string.
fn yaml(v: &J, indent: usize, out: &mut String) {
    let pad = " ".repeat(indent);
    let scalar = |v: &J| match v {
        J::String(s)
            if !s.is_empty()
                && s.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"/._-".contains(&b)) =>
        {
            s.clone()
        }
        other => other.to_string(),
    };
    match v {
        J::Object(m) if !m.is_empty() => {
            for (k, v) in m {
                out.push_str(&format!("{pad}{}:", J::from(k.as_str())));
                match v {
                    J::Object(c) if !c.is_empty() => {
                        out.push('\n');
                        yaml(v, indent + 2, out);
                    }
                    J::Array(c) if !c.is_empty() => {
                        out.push('\n');
                        yaml(v, indent, out);
                    }
                    _ => out.push_str(&format!(" {}\n", scalar(v))),
                }
            }
        }
        J::Array(a) if !a.is_empty() => {
            for v in a {
                match v {
                    J::Object(c) if !c.is_empty() => {
                        out.push_str(&format!("{pad}-\n"));
                        yaml(v, indent + 2, out);
                    }
                    J::Array(c) if !c.is_empty() => {
                        out.push_str(&format!("{pad}-\n"));
                        yaml(v, indent + 2, out);
                    }
                    _ => out.push_str(&format!("{pad}- {}\n", scalar(v))),
                }
            }
        }
        other => out.push_str(&format!("{pad}{}\n", scalar(other))),
    }
}

/// The files the Compose file may name, and the importer's environment.
fn import(text: &str, dotenv: &str) -> Result<(), TestCaseError> {
    let files: BTreeMap<PathBuf, Vec<u8>> = [
        (".env", dotenv.as_bytes().to_vec()),
        ("app.env", b"A=1\nB=2\n".to_vec()),
        ("conf.txt", b"key = value\n".to_vec()),
        ("secret", vec![0xff, 0xfe, b'x']),
    ]
    .into_iter()
    .map(|(n, c)| (Path::new(BASE).join(n), c))
    .collect();
    let read = |p: &Path| -> std::io::Result<Vec<u8>> {
        files
            .get(p)
            .cloned()
            .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::NotFound))
    };
    let env: BTreeMap<String, String> =
        [("PORT", "8080"), ("SECRET", "s3cret"), ("HOME", "/home/u")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
    for allow_outside in [false, true] {
        let opts = compose_file::Options {
            allow_outside,
            plain_volume_names: allow_outside,
            ..Default::default()
        };
        let Ok(imported) = compose_file::import(text, Path::new(BASE), &env, &read, &opts) else {
            continue;
        };
        for f in &imported.files {
            // The importer promises every file it writes parses back.
            let i = Intention::parse(&f.toml, DocFormat::Toml, &f.file_name);
            prop_assert!(
                i.is_ok(),
                "an imported file does not parse: {:?}\n{}",
                i,
                f.toml
            );
            if let Ok(i) = i {
                through(&i)?;
            }
        }
    }
    Ok(())
}

/// `.env` files: lines Compose reads, and some it does not.
fn dotenv() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            prop::sample::select(vec![
                "IMAGE=app:2",
                "export B = two words ",
                "C='single ${A} $x'",
                "D=\"dq \\\"x\\\" \\n ${A}\"",
                "E=x #c",
                "F=${A}-${NOPE:-d}",
                "# c",
                "",
                "bad line",
                "G=\"unclosed",
                "${"
            ])
            .prop_map(String::from),
            "[A-Z]{1,3}=[ -~]{0,8}",
        ],
        0..5,
    )
    .prop_map(|l| l.join("\n"))
}

#[test]
fn compose_files_mutated_never_panic_and_what_is_imported_makes_create_bodies() {
    fixtures();
    let cases = (mutated(compose_file()), any::<bool>(), dotenv());
    fuzz("import", cases, |(doc, as_json, dotenv)| {
        let mut text = String::new();
        if as_json {
            // JSON is YAML too.
            text = doc.to_string();
        } else {
            yaml(&doc, 0, &mut text);
        }
        import(&text, &dotenv)
    });
}

#[test]
fn compose_text_damaged_or_raw_never_panics() {
    fixtures();
    let text = prop_oneof![
        3 => (compose_file(), any::<usize>(), 0usize..8, "[-:&*<>!|{}\\[\\]\"'#$ \\n a-z0-9]{0,8}").prop_map(|(doc, cut, len, junk)| {
            let mut text = String::new();
            yaml(&doc, 0, &mut text);
            let cut = cut % text.len().max(1);
            damaged(text, cut, len, &junk)
        }),
        1 => prop::sample::select(vec![
            "a: &x [1, *x]",
            "services:\n  s: &s\n    image: x\n  t:\n    <<: *s\n    <<: *s\n",
            "services:\n  s:\n    image: ${A:-${B:-${C}}}\n",
            "services: !!binary x",
            "--- a\n--- b",
            "services:\n  s:\n    image: x\n    ports: [\"${PORT:?}:80\"]\n",
            "x: *unknown",
        ]).prop_map(String::from),
        2 => "\\PC{0,200}",
    ];
    fuzz("import-text", (text, dotenv()), |(text, dotenv)| {
        import(&text, &dotenv)
    });
}

// ---------------------------------------------------------------------
// Depth: a document nested deep must be refused, not overflow the stack
// (which no panic hook sees). Test threads have the 2 MiB stack the
// agent's worker threads have.

/// A value nested `depth` levels deep, in a field, in each format.
fn deep(field: &str, depth: usize, tables: bool) -> [String; 3] {
    let (open, close) = if tables { ("{a = ", "}") } else { ("[", "]") };
    let toml = format!(
        "name = \"m\"\nimage = \"x:1\"\n{field} = {}1{}\n",
        open.repeat(depth),
        close.repeat(depth)
    );
    let (open, close) = if tables {
        ("{\"a\": ", "}")
    } else {
        ("[", "]")
    };
    let json = format!(
        "{{\"name\": \"m\", \"image\": \"x:1\", \"{field}\": {}1{}}}",
        open.repeat(depth),
        close.repeat(depth)
    );
    let yaml = format!(
        "services:\n  s:\n    image: x\n    {field}: {}1{}\n",
        open.repeat(depth).replace(" =", ":"),
        close.repeat(depth)
    );
    [toml, json, yaml]
}

#[test]
fn documents_nested_deep_are_refused_without_overflowing_the_stack() {
    let fields = prop::sample::select(vec![
        "settings",
        "labels",
        "command",
        "healthcheck",
        "env",
        "x",
        "config",
    ]);
    let depth = prop_oneof![8 => 0usize..300, 2 => 300usize..3000, 1 => Just(50_000)];
    fuzz_share(
        "deep",
        20,
        (fields, depth, any::<bool>()),
        |(field, depth, tables)| {
            let [toml, json, yaml] = deep(field, depth, tables);
            intention_text(&toml)?;
            intention_text(&json)?;
            if let Ok(i) = Intention::parse_json(json.as_bytes(), "PUT /v1/intentions/m") {
                through(&i)?;
            }
            let payload = format!(
                "{{\"node\": \"fuzz-node\", \"revision\": 1, \"issued_at\": \"2026-12-01T00:00:00Z\", \"expires\": \"2027-01-01T00:00:00Z\", \"modules\": [{json}]}}"
            );
            plane_case(payload.as_bytes(), &Wrapping::Signed, None)?;
            import(&yaml, "")
        },
    );
}

// ---------------------------------------------------------------------
// Settings patches (`PATCH /v1/intentions/{name}/settings`): set or
// removed in an API module's intention, layered over a file module's.

#[test]
fn settings_patches_never_panic_and_what_they_leave_makes_a_create_body() {
    fixtures();
    let patch = prop::collection::btree_map(
        prop_oneof![4 => "[a-z]{1,4}(\\.[a-z]{1,3}){0,2}", 1 => edgy_string()],
        setting_value(),
        0..4,
    );
    fuzz(
        "settings-patch",
        (intention(), patch, any::<bool>()),
        |(doc, patch, api)| {
            let Ok(mut i) = Intention::parse_json(doc.to_string().as_bytes(), "PUT") else {
                return Ok(());
            };
            for (k, v) in patch {
                let field = stead::model::names::setting_field(&k);
                let Ok(key) = stead::model::names::SettingKey::try_from(k.as_str()) else {
                    continue;
                };
                if v.is_null() {
                    if api {
                        i.settings.remove(&key);
                    }
                    continue;
                }
                let Ok(v) = stead::model::value::Value::from_json(v, &field) else {
                    continue;
                };
                // An overlay merges over the file's settings as the API's own
                // change does; only who owns them differs.
                i.settings.insert(key, v);
            }
            if i.check_settings().is_ok() {
                through(&i)?;
            }
            Ok(())
        },
    );
}

// ---------------------------------------------------------------------
// A container made differently is a container with another digest: two
// documents that differ in one field (the intention's own or any of
// `runtime::FIELDS`), each checked, whose create bodies differ (labels
// aside) have different spec digests, so the change is one recreate and
// never missed (tests/properties.rs has the order rules).

/// The spec digest of a checked intention and its create body without
/// labels, when its inputs resolve.
fn made(i: &Intention) -> Option<(Digest, J)> {
    let inputs = resolve_inputs(&confined(i), &mut FileDigester::new(), None).ok()?;
    let image = Digest::of(i.image.as_bytes());
    let mut d = spec::desired(
        i,
        inputs,
        &image,
        &node(),
        Path::new("/var/lib/stead/files"),
        None,
    )
    .ok()?;
    d.spec.network_container = Some("0123456789ab".into());
    let mut body = serde_json::to_value(create_body(&d.spec)).ok()?;
    body.as_object_mut()?.remove("Labels");
    Some((d.digest, body))
}

#[test]
fn a_change_of_the_container_made_changes_the_spec_digest() {
    fixtures();
    let mut fields: Vec<&'static str> = INTENTION_FIELDS[1..14].to_vec();
    fields.extend(stead::model::runtime::FIELDS);
    let field = prop::sample::select(fields);
    let cases = (intention(), field).prop_flat_map(|(doc, f)| (Just(doc), Just(f), field_value(f)));
    fuzz("digest", cases, |(doc, field, other)| {
        let mut changed = doc.clone();
        changed[field] = other;
        if field == "update" {
            changed["image"] = s("localhost:5000/app:1.2.3");
        }
        let parse = |d: &J| Intention::parse_json(d.to_string().as_bytes(), "d");
        let (Ok(a), Ok(b)) = (parse(&doc), parse(&changed)) else {
            return Ok(());
        };
        let (Some((da, ba)), Some((db, bb))) = (made(&a), made(&b)) else {
            return Ok(());
        };
        if ba != bb {
            prop_assert_ne!(da, db, "{} changed the container and not its digest", field);
            BODIES.with(|n| n.set(n.get() + 2));
        }
        Ok(())
    });
}

// ---------------------------------------------------------------------
// The fleet's formats: group documents (judged, then composed with a node
// document that lists the group), roots (read, and taken as the next of a
// chain), release statements (read and admitted), reports (read and rolled
// up) and the listings reports are found through.

/// A valid-looking group document's payload, for group `fuzz-group`.
fn group_payload() -> impl Strategy<Value = J> {
    let modules = || {
        prop::collection::vec(
            prop_oneof![3 => intention_with(0.1).boxed(), 1 => mutated(intention()).boxed()],
            0..3,
        )
    };
    (
        prop_oneof![16 => Just(s("fuzz-group")), 1 => edgy_string().prop_map(J::from)],
        prop_oneof![16 => (1u64..1000).prop_map(J::from), 1 => any::<u64>().prop_map(J::from)],
        prop_oneof![8 => -100_000i64..50_000, 1 => -200_000i64..200_000],
        prop::option::of((
            prop_oneof![8 => -100_000i64..100_000, 1 => any::<i32>().prop_map(i64::from)],
            prop_oneof![8 => Just("1h"), 4 => Just("0s"), 1 => Just("91d"), 1 => Just("x")],
            prop_oneof![
                8 => Just("r1".to_string()),
                1 => edgy_string().prop_map(|s| s.chars().take(200).collect::<String>()),
            ],
            prop::collection::vec(prop_oneof![Just("fuzz-node"), Just("other")], 0..3),
            any::<bool>(),
            any::<bool>(),
        )),
        prop::option::of(((1u64..1000), modules())),
        modules(),
    )
        .prop_map(|(group, revision, issued, rollout, previous, modules)| {
            let issued_at = NOW as i64 + issued;
            let mut d = json!({
                "group": group,
                "revision": revision,
                "issued_at": rfc3339(issued_at),
                "expires": rfc3339(issued_at + 1_000_000),
                "modules": modules,
            });
            if let Some((start, duration, salt, canaries, halt, revert)) = rollout {
                d["rollout"] = json!({
                    "start": rfc3339(NOW as i64 + start),
                    "duration": duration, "salt": salt, "canaries": canaries,
                    "halt": halt, "revert": revert,
                });
            }
            if let Some((r, m)) = previous {
                d["previous"] = json!({"revision": r, "modules": m});
            }
            d
        })
}

/// The node's document over `fuzz-group`: removals and overrides of
/// names a group may or may not have, and a module of its own.
fn node_over_group() -> impl Strategy<Value = J> {
    (
        prop::collection::vec(prop_oneof![Just("web"), Just("db"), Just("m0")], 0..2),
        prop::option::of((
            prop_oneof![Just("web"), Just("db"), Just("m0")],
            prop::option::of(prop_oneof![Just("registry.example/web:2"), Just("")]),
            prop::option::of(setting_value()),
        )),
        prop::collection::vec(intention_with(0.1), 0..2),
    )
        .prop_map(|(remove, over, modules)| {
            let mut d = json!({
                "node": "fuzz-node", "revision": 1,
                "issued_at": rfc3339(NOW as i64), "expires": rfc3339(NOW as i64 + 86_400),
                "groups": ["fuzz-group"], "modules": modules,
            });
            if !remove.is_empty() {
                d["remove"] = json!(remove);
            }
            if let Some((name, image, setting)) = over {
                let mut o = json!({});
                if let Some(i) = image {
                    o["image"] = s(i);
                }
                if let Some(v) = setting {
                    o["settings"] = json!({ "key": v });
                }
                d["overrides"] = json!({ name: o });
            }
            d
        })
}

#[test]
fn group_documents_mutated_and_signed_never_panic_and_what_composes_makes_create_bodies() {
    use stead::plane::accept::judge_group;
    use stead::plane::group::{GROUP_PAYLOAD_TYPE, GroupDesired, HeldGroup, compose, stamp_group};
    fixtures();
    keys();
    let payload = prop_oneof![2 => group_payload().boxed(), 1 => mutated(group_payload()).boxed()];
    let node_doc =
        prop_oneof![3 => node_over_group().boxed(), 1 => mutated(node_over_group()).boxed()];
    let cases = (
        payload,
        node_doc,
        held_before(),
        any::<bool>(),
        0i64..200_000,
    );
    fuzz("group", cases, |(payload, node_doc, held, took, later)| {
        let k = keys();
        let bytes = payload.to_string().into_bytes();
        let body = k.trusted.sign(GROUP_PAYLOAD_TYPE, &bytes).to_json();
        let group = NodeId::try_from("fuzz-group").unwrap();
        let held = held.map(|h| held_at("http://127.0.0.1/groups/fuzz-group/desired.json", h));
        let clock = Clock {
            system: NOW,
            build: NOW - 86_400,
            counted: 0,
        };
        let trusted = [k.trusted.public()];
        // A group's payload is never a node's document, nor the other way.
        let as_node = judge(&body, &node(), &trusted, None, clock);
        prop_assert!(!matches!(as_node, Verdict::Adopt(_)));
        let _ = stamp_group(&bytes, &group, 2, NOW, NOW + 86_400);
        let Verdict::Adopt(a) = judge_group(&body, &group, &trusted, held.as_ref(), clock) else {
            return Ok(());
        };
        let again = GroupDesired::parse(&bytes).ok();
        prop_assert_eq!(again.as_ref(), Some(&a.desired));
        let Ok(node_desired) = Desired::parse(node_doc.to_string().as_bytes()) else {
            return Ok(());
        };
        let groups = BTreeMap::from([(
            group.clone(),
            HeldGroup {
                desired: a.desired,
                took,
                was_in: took,
            },
        )]);
        // Composed at the rollout's every moment: before, within, after.
        for now in [NOW, NOW + later as u64, NOW + 100 * 86_400] {
            if let Ok(c) = compose(node_desired.clone(), &groups, &node(), now, None) {
                prop_assert_eq!(c.groups.len(), node_desired.groups.len());
                for i in c.modules.values() {
                    through(i)?;
                }
            }
        }
        Ok(())
    });
}

/// A root's payload, valid-looking: keys from a small pool (the trusted
/// key among them), a threshold, a version, an expiry.
fn root_payload() -> impl Strategy<Value = J> {
    let key = || {
        prop_oneof![
            4 => Just(keys().trusted.public().to_base64()),
            2 => Just(keys().stranger.public().to_base64()),
            1 => edgy_string(),
            1 => Just("A".repeat(44)),
        ]
    };
    (
        prop_oneof![8 => Just(1u64), 1 => any::<u64>(), 1 => Just(1u64 << 53)],
        prop_oneof![8 => NOW as i64 - 100..NOW as i64 + 10_000_000, 1 => Just(0i64)],
        prop::collection::vec(key(), 0..10),
        prop_oneof![8 => 1u64..3, 1 => any::<u64>()],
        prop::collection::vec(key(), 0..10),
    )
        .prop_map(|(version, expires, root_keys, threshold, docs)| {
            json!({
                "version": version,
                "expires": rfc3339(expires),
                "root": {"keys": root_keys, "threshold": threshold},
                "documents": {"keys": docs},
            })
        })
}

#[test]
fn roots_mutated_and_signed_never_panic_and_what_is_taken_is_the_next_version() {
    use stead::plane::root::{self, PAYLOAD_TYPE as ROOT_TYPE, Root};
    keys();
    let payload = prop_oneof![
        4 => root_payload().prop_map(|j| j.to_string().into_bytes()).boxed(),
        2 => mutated(root_payload()).prop_map(|j| j.to_string().into_bytes()).boxed(),
        1 => prop::collection::vec(any::<u8>(), 0..300).boxed(),
    ];
    let signers = prop::collection::vec(any::<bool>(), 0..3);
    fuzz("root", (payload, signers), |(payload, signers)| {
        let k = keys();
        let held = Root::initial(&[k.trusted.public()]);
        let _ = Root::parse(&payload);
        let _ = root::version_said(&payload);
        let mut env = k.trusted.sign(ROOT_TYPE, &payload);
        for trusted in signers {
            let other = if trusted { &k.trusted } else { &k.stranger };
            env.signatures
                .extend(other.sign(ROOT_TYPE, &payload).signatures);
        }
        if let Ok(next) = root::next(&held, &env.to_json()) {
            prop_assert_eq!(next.version, 1);
            prop_assert_eq!(Root::parse(&next.to_payload()).ok(), Some(next));
        }
        Ok(())
    });
}

#[test]
fn release_statements_and_reports_and_listings_of_any_bytes_never_panic() {
    use stead::model::release::{Release, Running, admit};
    use stead::views::{ReportView, signed};
    use stead_plane::plane::index;
    use stead_plane::plane::rollup::Rollup;
    let golden_release = json!({
        "version": "0.7.0", "schema": 9, "reads_from": 1,
        "binaries": {"x86_64-unknown-linux-musl": {
            "url": "stead", "sha256": "ab".repeat(32), "size": 4_190_000}},
    });
    // A report as 0.6.0 writes one (views' goldens, shortened).
    let golden_report = json!({
        "agent_version": "0.6.0",
        "clock": {"plane_date": null, "status": "ok", "system": "2026-12-01T00:00:00Z"},
        "device_key": "age1qyqszqgpqyqszqgpqyqszqgpqyqszqgpqyqszqgpqyqszqgpqyqs3290gq",
        "engine": "reachable",
        "modules": {"web": {"desired_digest": null, "health": null, "image_id": null,
            "last_error": {"class": "crash-looping", "message": "it keeps restarting"},
            "restart_count": 4, "running_digest": null, "state": "crash-looping"}},
        "node": "edge-1",
        "passing": true,
        "plane": {"conflicts": [], "error": null,
            "groups": [{"error": null, "group": "eu", "revision": 4,
                "rollout": {"taken": true, "until": null, "why": "its turn"}, "running": 4}],
            "held": {"accepted_at": "2026-12-01T00:00:00Z", "expires": "2026-12-02T00:00:00Z",
                "floor": true, "issued_at": "2026-12-01T00:00:00Z", "key_id": "ed25519:abc",
                "revision": 9},
            "last_contact": null, "refusal": null, "root": null, "url": "http://plane/nodes/edge-1/desired.json"},
        "quarantine": null,
        "sent_at": "2026-12-01T00:00:00Z",
        "seq": 7,
        "undelivered": 0,
    });
    // The same, signed as a 0.7.0 agent PUTs it (an envelope, as JSON).
    let report_key = stead::plane::envelope::SecretKey::from_seed([5; 32]);
    let enrolled = report_key.public();
    let mut carrying = golden_report.clone();
    carrying["report_key"] = enrolled.to_base64().into();
    let golden_signed: J = serde_json::from_slice(&stead::views::signed::sign(
        carrying.to_string().as_bytes(),
        &report_key,
    ))
    .unwrap();
    let listing = prop_oneof![
        "\\PC{0,400}",
        prop::collection::vec(
            prop_oneof![
                Just("<a href=\"edge-1/\">edge-1/</a>".to_string()),
                Just("<a href=\"status.json\">x</a>".to_string()),
                Just("<a href=\"../\">..</a>".to_string()),
                Just("<a href='//evil/x/'>".to_string()),
                Just("<a href=\"%2e%2e/\">".to_string()),
                Just("href".to_string()),
                Just("<a href=\"&amp;&#x2F;&lt;\">".to_string()),
                edgy_string(),
            ],
            0..20,
        )
        .prop_map(|v| v.concat()),
    ];
    let cases = (
        prop_oneof![
            Just(golden_release.clone()).boxed(),
            mutated(Just(golden_release)).boxed(),
            noise().boxed()
        ],
        prop_oneof![
            Just(golden_report.clone()).boxed(),
            mutated(Just(golden_report)).boxed(),
            Just(golden_signed.clone()).boxed(),
            mutated(Just(golden_signed)).boxed(),
            noise().boxed()
        ],
        listing,
    );
    let version = semver::Version::new(0, 6, 0);
    let dir: http::Uri = "http://127.0.0.1/nodes/".parse().unwrap();
    fuzz("fleet-formats", cases, |(release, report, html)| {
        if let Ok(r) = Release::parse(release.to_string().as_bytes()) {
            let me = Running {
                version: &version,
                target: "x86_64-unknown-linux-musl",
                store_schema: 9,
            };
            let _ = admit(&r, &me, false);
            let _ = admit(&r, &me, true);
        }
        let mut rollup = Rollup::default();
        let bytes = report.to_string();
        if let Ok(r) = serde_json::from_str::<ReportView>(&bytes) {
            rollup.add(&r, NOW, 3600);
        }
        // Read as the roll-up and enroll read a report: signed or plain.
        if let Ok(read) = signed::Read::parse(bytes.as_bytes()) {
            let _ = signed::claim(read.clone(), Some("edge-1"));
            for e in [signed::Enrolled::Key(&enrolled), signed::Enrolled::NoKeys] {
                let verdict = signed::verify(read.clone(), Some("edge-1"), e);
                rollup.take("nodes/edge-1/status.json", verdict, NOW, 3600);
            }
        }
        let _ = rollup.text(3600);
        let _ = index::entries(&html, &dir);
        Ok(())
    });
}
