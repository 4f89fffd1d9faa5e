//! Images that run only when signed, against the real parts: Debian's
//! registry (Distribution) on loopback holding cosign signatures at
//! `sha256-<hex>.sig`, nginx serving the node's signed document with an
//! image policy, the real engine (Docker, and Podman in the test
//! command's second pass). A valid signature runs, and runs the image its
//! signed manifest names; an unsigned image, one signed by another key, a
//! signature moved to another digest and a tag re-pointed after signing
//! are each refused by name, and nothing is created for them; an image no
//! rule covers runs as ever; a registry that is away is waited for.

mod common;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use common::agent::Agent;
use common::desired::*;
use common::plane::Plane;
use common::registry::{Registry, Site, raw};
use common::*;
use ring::rand::SystemRandom;
use ring::signature::{ECDSA_P256_SHA256_ASN1_SIGNING, EcdsaKeyPair, KeyPair};
use serde_json::{Value as J, json};
use stead::plane::envelope::SecretKey;

/// A cosign-style ECDSA P-256 signing key.
struct CosignKey(EcdsaKeyPair);

impl CosignKey {
    fn new() -> CosignKey {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, &rng).unwrap();
        CosignKey(
            EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, pkcs8.as_ref(), &rng)
                .unwrap(),
        )
    }

    /// The public key as PEM SubjectPublicKeyInfo, as a policy names it.
    fn pem(&self) -> String {
        let key =
            stead::model::image_policy::PublicKey::P256(self.0.public_key().as_ref().to_vec());
        format!(
            "-----BEGIN PUBLIC KEY-----\n{}\n-----END PUBLIC KEY-----\n",
            STANDARD.encode(key.to_der())
        )
    }

    /// Signs `digest` as `identity` names it (cosign's simple-signing
    /// payload) and pushes the signature to `repo`'s `sha256-<hex>.sig`
    /// (`at`: another digest's tag, to move a signature).
    fn sign(&self, reg: &Registry, repo: &str, identity: &str, digest: &str, at: Option<&str>) {
        let payload = json!({
            "critical": {
                "identity": {"docker-reference": identity},
                "image": {"docker-manifest-digest": digest},
                "type": "cosign container image signature"
            },
            "optional": null
        })
        .to_string();
        let sig = self
            .0
            .sign(&SystemRandom::new(), payload.as_bytes())
            .unwrap();
        let config = b"{}";
        let cd = push_blob(reg, repo, config);
        let pd = push_blob(reg, repo, payload.as_bytes());
        let manifest = json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "size": config.len(), "digest": cd},
            "layers": [{
                "mediaType": "application/vnd.dev.cosign.simplesigning.v1+json",
                "size": payload.len(),
                "digest": pd,
                "annotations": {"dev.cosignproject.cosign/signature": STANDARD.encode(sig.as_ref())}
            }]
        })
        .to_string();
        let tag = format!("{}.sig", at.unwrap_or(digest).replacen(':', "-", 1));
        let (code, head, _) = raw(
            &reg.addr,
            "PUT",
            &format!("/v2/{repo}/manifests/{tag}"),
            &[("Content-Type", "application/vnd.oci.image.manifest.v1+json")],
            manifest.as_bytes(),
        );
        assert_eq!(code, 201, "{head}");
    }
}

/// Uploads a blob to `repo`; its digest.
fn push_blob(reg: &Registry, repo: &str, bytes: &[u8]) -> String {
    let digest = stead::registry::client::sha256(bytes);
    let (code, head, _) = raw(
        &reg.addr,
        "POST",
        &format!("/v2/{repo}/blobs/uploads/"),
        &[],
        b"",
    );
    assert_eq!(code, 202, "{head}");
    let location = head
        .lines()
        .find_map(|l| l.strip_prefix("Location: "))
        .expect("an upload's location")
        .trim();
    let path = location
        .strip_prefix(&format!("http://{}", reg.addr))
        .unwrap_or(location);
    let (code, head, _) = raw(
        &reg.addr,
        "PUT",
        &format!("{path}&digest={digest}"),
        &[("Content-Type", "application/octet-stream")],
        bytes,
    );
    assert_eq!(code, 201, "{head}");
    digest
}

/// Signing at the site's plain registry, as the agent names the image.
trait Signs {
    /// Signs `digest` for `repo:tag` (the agent's name) with `key`; at
    /// another digest's tag when `at` says one.
    fn sign(&self, key: &CosignKey, repo: &str, tag: &str, digest: &str, at: Option<&str>);
}

impl Signs for Site {
    fn sign(&self, key: &CosignKey, repo: &str, tag: &str, digest: &str, at: Option<&str>) {
        key.sign(&self.plain, repo, &self.image(repo, tag), digest, at);
    }
}

/// The ID the suite's engine gives an image (Podman's may be its own), or
/// none when it does not hold it.
fn id_of(reference: &str) -> Option<String> {
    let o = docker(&["image", "inspect", "--format", "{{.Id}}", reference]);
    o.status
        .success()
        .then(|| String::from_utf8_lossy(&o.stdout).trim().to_string())
}

/// A module of `image` that idles.
fn module_of(name: &str, image: &str) -> J {
    json!({
        "name": name,
        "image": image,
        "command": ["sh", "-c", idle_after("up")],
        "restart": "always",
    })
}

/// The module's view in the API.
fn module_view(agent: &Agent, m: &str) -> J {
    let (_, body) = agent.get(&format!("/v1/modules/{m}"));
    serde_json::from_str(&body).unwrap_or_default()
}

/// Waits until the module's last error contains every one of `parts`;
/// returns it.
fn wait_error(agent: &Agent, n: &Node, m: &str, parts: &[&str]) -> String {
    let mut last = String::new();
    n.wait_for(60, &format!("{m} held, saying {parts:?}"), || {
        let v = module_view(agent, m);
        last = v["last_error"]["message"]
            .as_str()
            .or_else(|| v["error"].as_str())
            .unwrap_or_default()
            .to_string();
        if last.is_empty() {
            last = v.to_string();
        }
        parts.iter().all(|p| last.contains(p))
    });
    last
}

/// The engine checked, a plane on nginx with its signing key, and a site
/// of registries: what every test here starts from.
fn start() -> (Plane, SecretKey, Site) {
    require_engine();
    (Plane::start(), SecretKey::generate().unwrap(), Site::new())
}

#[test]
fn an_image_runs_only_when_signed_as_the_policy_asks_and_each_refusal_says_why() {
    let (plane, key, site) = start();
    let (a, b) = (CosignKey::new(), CosignKey::new());
    let r = site.reg.addr.clone();
    // Signed by the trusted key.
    let good = site.push("app", "good", "good");
    site.sign(&a, "app", "good", &good, None);
    // Not signed at all.
    let unsigned = site.push("app", "unsigned", "unsigned");
    // Signed by another key.
    let other = site.push("app", "other", "other");
    site.sign(&b, "app", "other", &other, None);
    // A signature of the good digest, put where another digest's goes.
    let moved = site.push("app", "moved", "moved");
    site.sign(&a, "app", "moved", &good, Some(&moved));
    // Signed, then the tag pointed at a new image.
    let first = site.push("app", "repointed", "first");
    site.sign(&a, "app", "repointed", &first, None);
    let repointed = site.push("app", "repointed", "second");
    // Signed for another tag of the repository.
    let retagged = site.push("app", "retagged", "retagged");
    site.sign(&a, "app", "elsewhere", &retagged, None);
    // No rule covers this repository.
    site.push("free", "1", "free");
    // A registry that is not there.
    let away = format!("127.0.0.1:{}", common::registry::free_port());

    let n = site.node("signed", &plane, &key);
    let policy = json!([
        {"scope": format!("{r}/app"), "require": "sigstore", "keys": [a.pem()]},
        {"scope": away, "require": "sigstore", "keys": [a.pem()]},
    ]);
    let mut doc = payload(
        &n,
        1,
        vec![
            module_of("good", &site.image("app", "good")),
            module_of("unsigned", &site.image("app", "unsigned")),
            module_of("other", &site.image("app", "other")),
            module_of("moved", &site.image("app", "moved")),
            module_of("repointed", &site.image("app", "repointed")),
            module_of("retagged", &site.image("app", "retagged")),
            module_of("free", &site.image("free", "1")),
            module_of("away", &format!("{away}/app:1")),
        ],
    );
    doc["images"] = policy;
    plane.publish(&n.id, &sign(&key, &doc));
    let agent = Agent::start(&n);

    // The signed one runs the image its signed manifest names.
    n.wait_for(90, "good and free to run", || {
        ["good", "free"]
            .iter()
            .all(|m| n.container(m).is_some_and(|(_, s, _)| s == "running"))
    });
    let image_of = |m: &str| docker_ok(&["inspect", "--format", "{{.Image}}", &n.container_id(m)]);
    let good_image = image_of("good");
    assert_eq!(Some(good_image.clone()), id_of(&format!("{r}/app@{good}")));
    assert_eq!(Some(image_of("free")), id_of(&site.image("free", "1")));

    let key_id = stead::model::image_policy::PublicKey::from_pem(&a.pem())
        .unwrap()
        .id();
    let refused = "refused by the image policy: the node document's rule for";
    for (m, digest, why) in [
        ("unsigned", &unsigned, "found no signature".to_string()),
        (
            "other",
            &other,
            "found a signature by no key the policy names".into(),
        ),
        (
            "moved",
            &moved,
            format!("found a signature of another digest ({good})"),
        ),
        ("repointed", &repointed, "found no signature".into()),
        (
            "retagged",
            &retagged,
            "found a signature for another tag (elsewhere)".into(),
        ),
    ] {
        let said = wait_error(&agent, &n, m, &[&format!("{r}/app:{m}"), digest, &why]);
        eprintln!("{m}: {said}");
        assert!(
            said.contains(refused) && said.contains(&key_id),
            "{m}: {said}"
        );
        assert!(
            n.container(m).is_none(),
            "{m}: nothing is created for a refused image"
        );
        assert!(
            docker(&["image", "inspect", &format!("{r}/app@{digest}")])
                .status
                .code()
                != Some(0),
            "{m}: a refused image is not pulled"
        );
    }
    // A registry that does not answer is waited for, not a refusal.
    wait_error(
        &agent,
        &n,
        "away",
        &[&format!(
            "image {away}/app:1: its signature cannot be checked yet"
        )],
    );
    let v = module_view(&agent, "away");
    assert!(
        v["next_attempt_at"].is_string() || v["next_attempt_at"].is_u64(),
        "{v}"
    );
    assert!(n.container("away").is_none());

    // After a restart, with the registry gone, the signed module runs on,
    // never made again and never held: what was verified is kept in the
    // store under the policy it was verified under.
    let running = n.container_id("good");
    let since = unix_now();
    drop(agent);
    drop(site);
    let agent = Agent::start(&n);
    n.wait_for(60, "good seen converged again after the restart", || {
        module_view(&agent, "good")["state"] == "converged"
    });
    assert_eq!(n.container_id("good"), running);
    assert_eq!(n.creates_since("good", since), 0);
    // Still away from its registry, a change to the module is made of the
    // image verified before.
    doc["revision"] = json!(2);
    doc["modules"][0]["env"] = json!({"CHANGED": "1"});
    plane.publish(&n.id, &sign(&key, &doc));
    n.wait_for(60, "good made again with the change, offline", || {
        n.container("good").is_some_and(|(id, s, _)| {
            s == "running" && id != running && image_of("good") == good_image
        })
    });
    assert_eq!(n.creates_since("good", since), 1);
    drop(agent);
}

/// Files a reload of `module` and waits for it to end.
fn reload(agent: &Agent, n: &Node, module: &str) -> J {
    let (code, out) = agent.send(
        n,
        "POST",
        "/v1/reloads",
        &format!(r#"{{"module": "{module}", "reason": "signed test"}}"#),
    );
    assert_eq!(code, 202, "{out}");
    let id = serde_json::from_str::<J>(&out).unwrap()["id"]
        .as_u64()
        .unwrap();
    let mut last = J::Null;
    n.wait_for(90, "the reload to end", || {
        let (_, body) = agent.get(&format!("/v1/reloads/{id}"));
        last = serde_json::from_str(&body).unwrap_or_default();
        matches!(last["status"].as_str(), Some("done" | "failed"))
    });
    last
}

#[test]
fn a_reload_lands_only_a_signed_version() {
    let (plane, key, site) = start();
    let a = CosignKey::new();
    let r = site.reg.addr.clone();
    let repo = "acme/sensor";
    let old = site.push(repo, "1.0.0", "1.0.0");
    site.sign(&a, repo, "1.0.0", &old, None);
    let new = site.push(repo, "1.1.0", "1.1.0");
    let n = site
        .node("signed-reload", &plane, &key)
        .with_heartbeat("1s");
    let mut doc = payload(&n, 1, vec![]);
    doc["images"] = json!([{"scope": r, "require": "sigstore", "keys": [a.pem()]}]);
    plane.publish(&n.id, &sign(&key, &doc));
    let m = n.module("sensor");
    n.write_intention(
        "s.toml",
        common::intention::Module::new(&m, &site.image(repo, "1.0.0"))
            .sh(&idle_after("up"))
            .set("restart", "\"always\"")
            .table("update", "range = \"^1\"\nhealth_window = \"2s\""),
    );
    let agent = Agent::start(&n);
    let runs = |digest: &str| {
        n.container(&m).is_some_and(|(id, s, _)| {
            s == "running"
                && Some(docker_ok(&["inspect", "--format", "{{.Image}}", &id]))
                    == id_of(&format!("{r}/{repo}@{digest}"))
        })
    };
    n.wait_for(90, "the module running 1.0.0", || runs(&old));
    let running = n.container_id(&m);

    // 1.1.0 is not signed: the reload fails, decided, and nothing moves.
    let done = reload(&agent, &n, &m);
    assert_eq!(done["status"], "failed", "{done:#}");
    let item = &done["items"][0];
    let failure = item["failure"].as_str().unwrap_or_default();
    assert!(
        failure.contains(&format!(
            "image {r}/{repo}:1.1.0 ({new}): refused by the image policy"
        )) && failure.contains("found no signature"),
        "{done:#}"
    );
    assert_eq!(n.container_id(&m), running);
    assert_eq!(
        id_of(&format!("{r}/{repo}@{new}")),
        None,
        "a refused version is not pulled"
    );

    // Signed since: the next reload lands it with one create.
    site.sign(&a, repo, "1.1.0", &new, None);
    let since = unix_now();
    let done = reload(&agent, &n, &m);
    assert_eq!(done["status"], "done", "{done:#}");
    n.wait_for(90, "the module running 1.1.0", || runs(&new));
    assert_eq!(n.creates_since(&m, since), 1);
    drop(agent);
}

/// The reference signer and verifier (the Sigstore project's own Rust
/// implementation, `scripts/cosign-ref`): the test command builds it and
/// says where; run alone, the script is asked (it builds it once).
fn cosign_ref() -> std::path::PathBuf {
    if let Ok(p) = std::env::var("STEAD_TEST_COSIGN_REF") {
        return p.into();
    }
    let o = std::process::Command::new("scripts/cosign-ref.sh")
        .output()
        .expect("scripts/cosign-ref.sh runs");
    assert!(
        o.status.success(),
        "scripts/cosign-ref.sh: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).trim().into()
}

/// Runs the reference tool; its exit code and what it said.
fn reference(args: &[&str], password: &str) -> (i32, String) {
    let o = std::process::Command::new(cosign_ref())
        .env("COSIGN_PASSWORD", password)
        .args(args)
        .output()
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    (o.status.code().unwrap_or(-1), said)
}

#[test]
fn signatures_made_by_the_sigstore_reference_are_taken_and_its_verifier_agrees_case_by_case() {
    let (plane, key, site) = start();
    let dir = tempfile::tempdir().unwrap();
    let path = |f: &str| dir.path().join(f).display().to_string();
    // The trusted key in the format skopeo's --sign-by-sigstore-private-key
    // reads, made by scripts/sigstore-key.py; another made by the
    // reference itself.
    let o = std::process::Command::new("/usr/bin/python3")
        .arg("scripts/sigstore-key.py")
        .arg(path("trusted"))
        .env("SIGSTORE_PASSWORD", "s3cret")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let (rc, said) = reference(&["generate", &path("other")], "other");
    assert_eq!(rc, 0, "{said}");
    let trusted_pem = std::fs::read_to_string(path("trusted.pub")).unwrap();
    let (r, plain) = (site.reg.addr.clone(), site.plain.addr.clone());
    // Each tag: who signs it, for which identity (None: not signed).
    /// A signer's key file, its password, the identity it signs for.
    type Signer<'a> = Option<(&'a str, &'a str, String)>;
    let cases: [(&str, Signer); 5] = [
        // cosign's own identity: the repository alone.
        (
            "repo",
            Some(("trusted.private", "s3cret", format!("{r}/app"))),
        ),
        // skopeo's: the reference with its tag.
        (
            "tagged",
            Some(("trusted.private", "s3cret", format!("{r}/app:tagged"))),
        ),
        ("other", Some(("other.key", "other", format!("{r}/app")))),
        ("unsigned", None),
        (
            "repointed",
            Some(("trusted.private", "s3cret", format!("{r}/app"))),
        ),
    ];
    for (tag, signer) in &cases {
        site.push("app", tag, tag);
        if let Some((k, password, identity)) = signer {
            let (rc, said) = reference(
                &[
                    "sign",
                    "--key",
                    &path(k),
                    "--identity",
                    identity,
                    &format!("{plain}/app:{tag}"),
                ],
                password,
            );
            assert_eq!(rc, 0, "{tag}: {said}");
        }
    }
    site.push("app", "repointed", "second");
    let n = site.node("signed-reference", &plane, &key);
    let mut doc = payload(
        &n,
        1,
        cases
            .iter()
            .map(|(tag, _)| module_of(tag, &site.image("app", tag)))
            .collect(),
    );
    doc["images"] =
        json!([{"scope": format!("{r}/app"), "require": "sigstore", "keys": [trusted_pem]}]);
    plane.publish(&n.id, &sign(&key, &doc));
    let agent = Agent::start(&n);
    for (tag, _) in &cases {
        // The reference's verdict on what the registry holds for the tag.
        let (rc, said) = reference(
            &[
                "verify",
                "--key",
                &path("trusted.pub"),
                &format!("{plain}/app:{tag}"),
            ],
            "",
        );
        assert!(
            rc == 0 || rc == 1,
            "{tag}: the reference decided nothing: {said}"
        );
        let mut runs = false;
        let mut last = J::Null;
        n.wait_for(90, &format!("the agent's verdict on {tag}"), || {
            last = module_view(&agent, tag);
            runs = n.container(tag).is_some_and(|(_, s, _)| s == "running");
            runs || last["state"] == "failed"
        });
        eprintln!(
            "{tag}: the reference says {rc} ({}), the agent {}",
            said.trim(),
            if runs { "runs it" } else { "refuses it" }
        );
        assert_eq!(
            runs,
            rc == 0,
            "{tag}: the reference said {said}; the agent: {last}"
        );
        if !runs {
            assert!(
                last["last_error"]
                    .as_str()
                    .is_some_and(|e| e.contains("refused by the image policy")),
                "{tag}: {last}"
            );
        }
    }
    drop(agent);
}

/// Runs `scripts/attest.py` with securesystemslib's venv (the test command
/// makes it and says where).
fn attest_py(args: &[&str]) {
    let python = std::env::var("STEAD_TEST_SSLIB")
        .map(|v| format!("{v}/bin/python"))
        .unwrap_or_else(|_| "/var/cache/stead-test/sslib/bin/python".into());
    let o = std::process::Command::new(&python)
        .arg("scripts/attest.py")
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{python}: {e} (scripts/test.sh makes the venv)"));
    assert!(
        o.status.success(),
        "attest.py {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn a_rule_that_asks_for_an_attestation_runs_only_images_attested_by_its_key_of_its_predicate_type()
{
    let (plane, key, site) = start();
    let a = CosignKey::new();
    let dir = tempfile::tempdir().unwrap();
    let prefix = |f: &str| dir.path().join(f).display().to_string();
    attest_py(&["keygen", &prefix("ci")]);
    attest_py(&["keygen", &prefix("intruder")]);
    const SLSA: &str = "https://slsa.dev/provenance/v1";
    let plain = site.plain.addr.clone();
    // Each tag: who attests it, of which predicate type (None: nobody).
    let cases = [
        ("attested", Some(("ci", SLSA))),
        ("unattested", None),
        ("other-predicate", Some(("ci", "https://spdx.dev/Document"))),
        ("other-key", Some(("intruder", SLSA))),
    ];
    for (tag, by) in cases {
        let digest = site.push("app", tag, tag);
        site.sign(&a, "app", tag, &digest, None);
        if let Some((k, predicate)) = by {
            attest_py(&["attest", &prefix(k), &plain, "app", &digest, predicate]);
        }
    }
    let n = site.node("attested", &plane, &key);
    let mut doc = payload(
        &n,
        1,
        cases
            .iter()
            .map(|(tag, _)| module_of(tag, &site.image("app", tag)))
            .collect(),
    );
    doc["images"] = json!([{
        "scope": format!("{}/app", site.reg.addr),
        "require": "sigstore",
        "keys": [a.pem()],
        "attestation": {
            "predicate_type": SLSA,
            "keys": [std::fs::read_to_string(prefix("ci.pub")).unwrap()],
        },
    }]);
    plane.publish(&n.id, &sign(&key, &doc));
    let agent = Agent::start(&n);
    n.wait_for(90, "attested to run", || {
        n.container("attested")
            .is_some_and(|(_, s, _)| s == "running")
    });
    for (tag, why) in [
        ("unattested", "found no attestation"),
        (
            "other-predicate",
            "found an attestation of another predicate type (https://spdx.dev/Document)",
        ),
        (
            "other-key",
            "found an attestation signed by no key the rule names",
        ),
    ] {
        let said = wait_error(
            &agent,
            &n,
            tag,
            &[
                &format!("asks for an attestation of {SLSA} by ecdsa-p256:"),
                why,
            ],
        );
        eprintln!("{tag}: {said}");
        assert!(n.container(tag).is_none(), "{tag}: nothing is created");
    }
    drop(agent);
}
