//! `stead plane keygen | sign | verify` through the real binary: a key pair,
//! a signed document, and every refusal a publisher meets. No engine needed.

#[path = "common/bins.rs"]
mod bins;

use std::io::Write as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::process::{Output, Stdio};

use serde_json::{Value as J, json};

/// Runs `stead` in `dir` with `args`, `stdin` on its standard input.
fn stead(dir: &Path, args: &[&str], stdin: &[u8]) -> Output {
    let mut child = bins::stead_cmd(args)
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // A command reading a file (`--in`) may exit before its standard input
    // is written: a closed pipe is not the test's failure.
    match child.stdin.take().unwrap().write_all(stdin) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
        Err(e) => panic!("cannot write stead's standard input: {e}"),
    }
    child.wait_with_output().unwrap()
}

fn ok(o: &Output) -> String {
    assert!(
        o.status.success(),
        "exit {:?}\nstdout: {}\nstderr: {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout.clone()).unwrap()
}

/// Asserts a refusal (exit 1) whose message says `says`.
fn refused(o: &Output, says: &str) {
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "stderr: {err}");
    assert!(err.contains(says), "expected {says:?} in: {err}");
}

fn payload() -> Vec<u8> {
    json!({
        "poll": {"interval": "5m"},
        "report": "https://plane.example/nodes/edge-0042/status.json",
        "modules": [
            {"name": "web", "image": "nginx:1.27", "ports": ["8080:80"]},
            {"name": "sensor", "image": "stead-test/busybox:1"}
        ]
    })
    .to_string()
    .into_bytes()
}

/// The payload, changed by `f`.
fn payload_with(f: impl FnOnce(&mut J)) -> Vec<u8> {
    let mut p: J = serde_json::from_slice(&payload()).unwrap();
    f(&mut p);
    p.to_string().into_bytes()
}

/// A key pair `name` and `name.pub` in `dir`.
fn keygen(dir: &Path, name: &str) -> String {
    let out = ok(&stead(dir, &["plane", "keygen", "--out", name], b""));
    assert!(out.contains("trusted_keys = [\""), "{out}");
    out
}

#[test]
fn keygen_sign_verify_and_every_refusal() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();

    // keygen: a bare file name works; the secret key is private; the
    // printed line carries the public key.
    let out = keygen(dir, "plane.key");
    let public = std::fs::read_to_string(dir.join("plane.key.pub")).unwrap();
    assert!(
        out.contains(&format!("trusted_keys = [\"{}\"]", public.trim())),
        "{out}"
    );
    let mode = |p: &str| std::fs::metadata(dir.join(p)).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode("plane.key"), 0o600);
    assert_eq!(mode("plane.key.pub"), 0o644);
    let id = out
        .lines()
        .find_map(|l| l.strip_prefix("key id "))
        .unwrap()
        .to_string();
    assert_eq!(id.len(), 16, "{out}");
    // It does not overwrite a key without --force.
    let secret = std::fs::read(dir.join("plane.key")).unwrap();
    refused(
        &stead(dir, &["plane", "keygen", "--out", "plane.key"], b""),
        "already exists; give --force",
    );
    assert_eq!(std::fs::read(dir.join("plane.key")).unwrap(), secret);

    // sign, from stdin to stdout.
    let o = stead(
        dir,
        &[
            "plane",
            "sign",
            "--key",
            "plane.key",
            "--node",
            "edge-0042",
            "--revision",
            "7",
        ],
        &payload(),
    );
    let signed = ok(&o);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("node edge-0042 revision 7") && err.contains(&id),
        "{err}"
    );
    let env: J = serde_json::from_str(&signed).unwrap();
    assert_eq!(env["payloadType"], "application/vnd.stead.desired.v1+json");
    assert_eq!(env["signatures"][0]["keyid"], id.as_str());
    std::fs::write(dir.join("desired.json"), &signed).unwrap();

    // verify, with the .pub file and with the base64 itself.
    for key in ["plane.key.pub", public.trim()] {
        let out = ok(&stead(
            dir,
            &["plane", "verify", "--key", key, "--node", "edge-0042"],
            signed.as_bytes(),
        ));
        assert!(
            out.contains("node edge-0042 revision 7 issued_at "),
            "{out}"
        );
        assert!(out.contains(" modules: sensor, web"), "{out}");
        assert!(out.contains(&format!("signed by key {id}")), "{out}");
    }
    ok(&stead(
        dir,
        &[
            "plane",
            "verify",
            "--key",
            "plane.key.pub",
            "--in",
            "desired.json",
        ],
        b"",
    ));

    // A tampered document is refused.
    let mut tampered = env.clone();
    let body = String::from_utf8(base64_decode(tampered["payload"].as_str().unwrap()))
        .unwrap()
        .replace("nginx:1.27", "nginx:6.66");
    tampered["payload"] = base64_encode(body.as_bytes()).into();
    refused(
        &stead(
            dir,
            &["plane", "verify", "--key", "plane.key.pub"],
            tampered.to_string().as_bytes(),
        ),
        "bad-signature",
    );
    // Not an envelope at all.
    refused(
        &stead(
            dir,
            &["plane", "verify", "--key", "plane.key.pub"],
            b"{\"x\": 1}",
        ),
        "envelope: (document): missing field `payloadType`",
    );

    // Another key is not trusted: refused, naming the signer's key id.
    keygen(dir, "other.key");
    refused(
        &stead(
            dir,
            &["plane", "verify", "--key", "other.key.pub"],
            signed.as_bytes(),
        ),
        &format!("unknown-key): signed only by keys this node does not trust ({id})"),
    );
    // Both keys trusted (a rotation): it verifies.
    let out = ok(&stead(
        dir,
        &[
            "plane",
            "verify",
            "--key",
            "other.key.pub",
            "--key",
            "plane.key.pub",
        ],
        signed.as_bytes(),
    ));
    assert!(out.contains(&format!("signed by key {id}")), "{out}");
    // Signed by both keys (a key named twice signs once): each device
    // verifies it, whichever of the two it trusts.
    let both = ok(&stead(
        dir,
        &[
            "plane",
            "sign",
            "--key",
            "plane.key",
            "--key",
            "other.key",
            "--key",
            "plane.key",
            "--node",
            "edge-0042",
        ],
        &payload(),
    ));
    let env: J = serde_json::from_str(&both).unwrap();
    assert_eq!(env["signatures"].as_array().unwrap().len(), 2, "{env}");
    for key in ["plane.key.pub", "other.key.pub"] {
        ok(&stead(
            dir,
            &["plane", "verify", "--key", key],
            both.as_bytes(),
        ));
    }

    // --node names another node: refused.
    refused(
        &stead(
            dir,
            &[
                "plane",
                "verify",
                "--key",
                "plane.key.pub",
                "--node",
                "edge-0043",
            ],
            signed.as_bytes(),
        ),
        "the document is for node edge-0042, not edge-0043",
    );

    // A payload for another node is not signed for this one.
    let other = payload_with(|p| p["node"] = "edge-0043".into());
    let o = stead(
        dir,
        &["plane", "sign", "--key", "plane.key", "--node", "edge-0042"],
        &other,
    );
    refused(
        &o,
        "node: the payload is for node \"edge-0043\", not edge-0042",
    );
    assert!(o.stdout.is_empty());
    // A bad module refuses the whole payload, named.
    let bad = payload_with(|p| p["modules"][1]["ports"] = json!(["nope"]));
    refused(
        &stead(
            dir,
            &["plane", "sign", "--key", "plane.key", "--node", "edge-0042"],
            &bad,
        ),
        "modules[1] (sensor): ports[0]: invalid port",
    );
    // A live file the engine could not mount (0.5.0 signed it, and every
    // node that adopted it aborted on each pass) is refused at signing.
    let live = payload_with(|p| {
        p["modules"][1]["config"] =
            json!({"path": "/app.json", "format": "json", "reload": "signal:SIGHUP"})
    });
    refused(
        &stead(
            dir,
            &["plane", "sign", "--key", "plane.key", "--node", "edge-0042"],
            &live,
        ),
        "modules[1] (sensor): config.path: /app.json is directly under /",
    );
    // A missing key file is said.
    let o = stead(
        dir,
        &["plane", "sign", "--key", "none.key", "--node", "edge-0042"],
        &payload(),
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("none.key"));
}

#[test]
fn sign_to_a_file_with_defaults_and_expiry() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    keygen(dir, "k");
    std::fs::write(dir.join("payload.json"), payload()).unwrap();
    let before = now();
    ok(&stead(
        dir,
        &[
            "plane",
            "sign",
            "--key",
            "k",
            "--node",
            "edge-1",
            "--in",
            "payload.json",
            "--out",
            "out.json",
            "--expires-in",
            "1h",
        ],
        b"",
    ));
    let env: J = serde_json::from_slice(&std::fs::read(dir.join("out.json")).unwrap()).unwrap();
    let doc: J = serde_json::from_slice(&base64_decode(env["payload"].as_str().unwrap())).unwrap();
    let revision = doc["revision"].as_u64().unwrap();
    assert!(
        (before..=now()).contains(&revision),
        "the revision is the time: {doc}"
    );
    assert_eq!(doc["node"], "edge-1");
    assert_eq!(
        doc["poll"],
        json!({"interval": "5m"}),
        "kept as given: {doc}"
    );
    let out = ok(&stead(
        dir,
        &["plane", "verify", "--key", "k.pub", "--in", "out.json"],
        b"",
    ));
    assert!(out.contains(&format!("revision {revision} ")), "{out}");

    // The payload's own expires is kept, so one in the past is refused at
    // signing, as not after issued_at.
    let p = payload_with(|p| p["expires"] = "2001-01-01T00:00:00Z".into());
    refused(
        &stead(
            dir,
            &["plane", "sign", "--key", "k", "--node", "edge-1"],
            &p,
        ),
        "expires: 2001-01-01T00:00:00Z is not after issued_at",
    );
    // A document that expired since it was signed is refused by verify.
    let expired = ok(&sign_expiring_in(dir, "1s"));
    std::thread::sleep(std::time::Duration::from_millis(2100));
    refused(
        &stead(
            dir,
            &["plane", "verify", "--key", "k.pub"],
            expired.as_bytes(),
        ),
        "the document expired at",
    );
    // A bad lifetime is a usage error (exit 2, from the argument parser).
    let o = sign_expiring_in(dir, "3651d");
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("from 1s to 3650d"));
}

/// Signs the payload for edge-1 with `k`, to expire `expires_in` from now.
fn sign_expiring_in(dir: &Path, expires_in: &str) -> Output {
    let args = [
        "plane",
        "sign",
        "--key",
        "k",
        "--node",
        "edge-1",
        "--expires-in",
    ];
    let args: Vec<&str> = args.into_iter().chain([expires_in]).collect();
    stead(dir, &args, &payload())
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn base64_decode(s: &str) -> Vec<u8> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.decode(s).unwrap()
}

fn base64_encode(b: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(b)
}

#[test]
fn sign_refuses_what_no_node_would_take_and_signs_the_largest_that_fits() {
    use base64::Engine as _;
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    keygen(dir, "k");
    let padded =
        |n: usize| payload_with(|p| p["modules"][1]["env"] = json!({"PAD": "x".repeat(n)}));
    let args: Vec<&str> = "plane sign --key k --node edge-1 --revision 7"
        .split(' ')
        .collect();
    let sign = |p: &[u8]| stead(dir, &args, p);
    // 800,000 bytes of payload: a 1,066,668-byte envelope, over 1 MiB.
    let o = sign(&padded(800_000));
    refused(&o, "over the 1048576 bytes (1 MiB) a node takes");
    assert!(o.stdout.is_empty());
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    let largest: usize = err
        .split("can be at most ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no limit in: {err}"));
    assert!((780_000..790_000).contains(&largest), "{err}");
    // The stamped payload grows byte for byte with the padding.
    let small = ok(&sign(&padded(10)));
    let env: J = serde_json::from_str(&small).unwrap();
    let stamped = base64::engine::general_purpose::STANDARD
        .decode(env["payload"].as_str().unwrap())
        .unwrap()
        .len();
    let fits = padded(10 + largest - stamped);
    let signed = ok(&sign(&fits));
    assert!(signed.len() <= 1 << 20, "{}", signed.len());
    std::fs::write(dir.join("largest.json"), &signed).unwrap();
    ok(&stead(
        dir,
        &["plane", "verify", "--key", "k.pub", "--in", "largest.json"],
        b"",
    ));
    refused(&sign(&padded(11 + largest - stamped)), "can be at most");
}

/// Documents signed by securesystemslib's DSSE (made by
/// `scripts/dsse-fixture.py`, which says how): its own key id, or none at
/// all, both verify against the trusted key.
#[test]
fn documents_signed_by_securesystemslib_verify_with_its_key_id_or_none() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/dsse");
    let public = fixtures.join("securesystemslib.pub");
    for doc in ["securesystemslib.json", "securesystemslib-nokeyid.json"] {
        let out = ok(&stead(
            &fixtures,
            &[
                "plane",
                "verify",
                "--key",
                public.to_str().unwrap(),
                "--node",
                "edge-1",
                "--in",
                doc,
            ],
            b"",
        ));
        assert!(out.contains("node edge-1 revision 1"), "{doc}: {out}");
    }
    // Another key is still refused.
    let d = tempfile::tempdir().unwrap();
    keygen(d.path(), "other");
    let o = stead(
        &fixtures,
        &[
            "plane",
            "verify",
            "--key",
            d.path().join("other.pub").to_str().unwrap(),
            "--in",
            "securesystemslib-nokeyid.json",
        ],
        b"",
    );
    refused(&o, "unknown-key");
}
