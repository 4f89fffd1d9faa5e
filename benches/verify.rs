//! What an image's signature check costs, measured in one run on this
//! machine: the core's verdict alone (a cosign signature by an ECDSA P-256
//! key, and by an Ed25519 key, over a simple-signing payload), and the
//! device's whole check against Debian's registry (Distribution) on
//! loopback: the tag's digest by HEAD, the signature manifest at
//! `sha256-<hex>.sig`, its payload blob, the referrers API (which
//! Distribution does not serve: 404) and its tag schema (404), the image's
//! manifest and config, and the verdict, with a client that already knows the registry (as the
//! agent's does after its first check) and with a new one. Needs
//! `docker-registry` (scripts/test.sh installs it). Prints medians;
//! asserts nothing about time.
//!
//! `cargo bench --bench verify` (`STEAD_BENCH_ROUNDS`, 200 by default).

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use ring::rand::SystemRandom;
use ring::signature::{ECDSA_P256_SHA256_ASN1_SIGNING, EcdsaKeyPair, Ed25519KeyPair, KeyPair as _};
use serde_json::json;
use stead::model::image_policy::{
    Policy, PublicKey, Require, Rule, Rules, Scope, Signature, judge,
};
use stead::model::reference::Reference;
use stead::registry::client::{Platform, Registries, sha256};

fn rounds() -> usize {
    std::env::var("STEAD_BENCH_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(200)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn payload(reference: &str, digest: &str) -> Vec<u8> {
    json!({
        "critical": {
            "identity": {"docker-reference": reference},
            "image": {"docker-manifest-digest": digest},
            "type": "cosign container image signature"
        },
        "optional": null
    })
    .to_string()
    .into_bytes()
}

/// A raw HTTP/1.1 exchange with the registry: (status, head, body).
fn raw(addr: &str, method: &str, path: &str, ctype: &str, body: &[u8]) -> (u16, String) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .unwrap();
    s.write_all(body).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let status = out
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, out)
}

fn push_blob(addr: &str, repo: &str, bytes: &[u8]) -> String {
    let digest = sha256(bytes);
    let (code, head) = raw(
        addr,
        "POST",
        &format!("/v2/{repo}/blobs/uploads/"),
        "text/plain",
        b"",
    );
    assert_eq!(code, 202, "{head}");
    let location = head
        .lines()
        .find_map(|l| l.strip_prefix("Location: "))
        .unwrap()
        .trim()
        .trim_start_matches(&format!("http://{addr}"))
        .to_string();
    let (code, head) = raw(
        addr,
        "PUT",
        &format!("{location}&digest={digest}"),
        "application/octet-stream",
        bytes,
    );
    assert_eq!(code, 201, "{head}");
    digest
}

fn push_manifest(addr: &str, repo: &str, tag: &str, m: &serde_json::Value) -> String {
    let body = m.to_string();
    let (code, head) = raw(
        addr,
        "PUT",
        &format!("/v2/{repo}/manifests/{tag}"),
        "application/vnd.oci.image.manifest.v1+json",
        body.as_bytes(),
    );
    assert_eq!(code, 201, "{head}");
    sha256(body.as_bytes())
}

fn main() {
    let rng = SystemRandom::new();
    let p256 = EcdsaKeyPair::from_pkcs8(
        &ECDSA_P256_SHA256_ASN1_SIGNING,
        EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, &rng)
            .unwrap()
            .as_ref(),
        &rng,
    )
    .unwrap();
    let ed =
        Ed25519KeyPair::from_pkcs8(Ed25519KeyPair::generate_pkcs8(&rng).unwrap().as_ref()).unwrap();
    let digest = format!("sha256:{}", "ab".repeat(32));
    let image = Reference::parse("registry.example/app:1").unwrap();
    let p = payload("registry.example/app:1", &digest);
    let verdict = |key: PublicKey, sig: Vec<u8>| {
        let rule = Rule {
            scope: Scope::parse("registry.example").unwrap(),
            require: Require::Sigstore(vec![key]),
            attestation: None,
        };
        let sigs = [Signature {
            payload: p.clone(),
            signature: STANDARD.encode(sig),
        }];
        let mut times = Vec::new();
        for _ in 0..rounds() * 5 {
            let t = Instant::now();
            let v = judge(&[("node", &rule)], &image, &digest, &sigs, &[], &[]);
            times.push(t.elapsed());
            assert!(v.is_ok());
        }
        median(times)
    };
    let p256_verdict = verdict(
        PublicKey::P256(p256.public_key().as_ref().to_vec()),
        p256.sign(&rng, &p).unwrap().as_ref().to_vec(),
    );
    let ed_verdict = verdict(
        PublicKey::Ed25519(ed.public_key().as_ref().to_vec()),
        ed.sign(&p).as_ref().to_vec(),
    );

    // The whole check, against a registry on loopback.
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
    let cfg = dir.path().join("config.yml");
    std::fs::write(
        &cfg,
        format!(
            "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: {addr}\n",
            dir.path().join("storage").display()
        ),
    )
    .unwrap();
    let mut registry = Command::new("docker-registry")
        .arg("serve")
        .arg(&cfg)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("docker-registry runs (scripts/test.sh installs it)");
    let end = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(&addr).is_err() {
        assert!(Instant::now() < end, "the registry never listened");
        std::thread::sleep(Duration::from_millis(50));
    }
    let config = json!({"architecture": "amd64", "os": "linux", "config": {}, "rootfs": {"type": "layers", "diff_ids": []}}).to_string();
    let cd = push_blob(&addr, "app", config.as_bytes());
    let manifest = json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "size": config.len(), "digest": cd},
        "layers": []
    });
    let md = push_manifest(&addr, "app", "1", &manifest);
    let reference = format!("{addr}/app:1");
    let sp = payload(&reference, &md);
    let pd = push_blob(&addr, "app", &sp);
    let empty = push_blob(&addr, "app", b"{}");
    push_manifest(
        &addr,
        "app",
        &format!("{}.sig", md.replacen(':', "-", 1)),
        &json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "size": 2, "digest": empty},
            "layers": [{
                "mediaType": "application/vnd.dev.cosign.simplesigning.v1+json",
                "size": sp.len(),
                "digest": pd,
                "annotations": {"dev.cosignproject.cosign/signature": STANDARD.encode(p256.sign(&rng, &sp).unwrap().as_ref())}
            }]
        }),
    );
    let key = PublicKey::P256(p256.public_key().as_ref().to_vec());
    let pem = format!(
        "-----BEGIN PUBLIC KEY-----\n{}\n-----END PUBLIC KEY-----",
        STANDARD.encode(key.to_der())
    );
    let rules =
        Rules::parse(json!([{"scope": addr, "require": "sigstore", "keys": [pem]}])).unwrap();
    let policy = Policy::of_node(rules);
    let image = Reference::parse(&reference).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let client = || {
        Registries::new(
            stead::net::http::Http::new(None).unwrap(),
            Default::default(),
            vec![],
        )
    };
    let (warm, cold) = rt.block_on(async {
        let platform = Platform::this();
        let known = client();
        let mut warm = Vec::new();
        let mut cold = Vec::new();
        for _ in 0..rounds() {
            let t = Instant::now();
            let c = stead::registry::signed::check(&known, &platform, &policy, &image).await;
            warm.push(t.elapsed());
            assert_eq!(c.map(|c| c.config), Ok(cd.clone()));
            let fresh = client();
            let t = Instant::now();
            let c = stead::registry::signed::check(&fresh, &platform, &policy, &image).await;
            cold.push(t.elapsed());
            assert!(c.is_ok());
        }
        (median(warm), median(cold))
    });
    let _ = registry.kill();
    let _ = registry.wait();
    println!("image signature check, medians of {} rounds:", rounds());
    println!(
        "  the verdict alone (ECDSA P-256):            {:.3} ms",
        ms(p256_verdict)
    );
    println!(
        "  the verdict alone (Ed25519):                {:.3} ms",
        ms(ed_verdict)
    );
    println!(
        "  the whole check, registry on loopback:      {:.3} ms (7 requests)",
        ms(warm)
    );
    println!(
        "  the same with a new client (+ GET /v2/):    {:.3} ms",
        ms(cold)
    );
}
