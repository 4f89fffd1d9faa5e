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
use common::registry::{Registry, Site, push_blob, raw};
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
/// The image ID the engine has under `reference`: a `repo@sha256:<hex>`
/// the agent fetched itself is the tag `repo:sha256-<hex>` it gave the
/// image (the engine records a repository digest only for its own pulls).
fn id_of(reference: &str) -> Option<String> {
    let inspect = |r: &str| {
        let o = docker(&["image", "inspect", "--format", "{{.Id}}", r]);
        o.status
            .success()
            .then(|| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    inspect(reference).or_else(|| {
        let (repo, digest) = reference.split_once('@')?;
        inspect(&format!("{repo}:{}", digest.replacen(':', "-", 1)))
    })
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

/// The media type (and artifact type) of a Sigstore bundle v0.3.
const BUNDLE: &str = "application/vnd.dev.sigstore.bundle.v0.3+json";
/// The predicate type cosign signs an image with in a bundle.
const COSIGN_SIGN: &str = "https://sigstore.dev/cosign/sign/v1";

/// A key-based Sigstore bundle made by securesystemslib's DSSE
/// (`scripts/attest.py bundle`): a statement about `digest` of
/// `predicate`, signed by the key at `prefix`.
fn bundle_py(prefix: &str, name: &str, digest: &str, predicate: &str) -> Vec<u8> {
    let python = std::env::var("STEAD_TEST_SSLIB")
        .map(|v| format!("{v}/bin/python"))
        .unwrap_or_else(|_| "/var/cache/stead-test/sslib/bin/python".into());
    let o = std::process::Command::new(&python)
        .args([
            "scripts/attest.py",
            "bundle",
            prefix,
            name,
            digest,
            predicate,
        ])
        .output()
        .unwrap_or_else(|e| panic!("{python}: {e} (scripts/test.sh makes the venv)"));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    o.stdout
}

/// The media type the registry gives the manifest `digest` of `repo`.
fn media_type(reg: &Registry, repo: &str, digest: &str) -> String {
    let (code, head, _) = raw(
        &reg.addr,
        "HEAD",
        &format!("/v2/{repo}/manifests/{digest}"),
        &[(
            "Accept",
            "application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json",
        )],
        b"",
    );
    assert_eq!(code, 200, "{head}");
    head.lines()
        .find_map(|l| l.strip_prefix("Content-Type: "))
        .unwrap()
        .trim()
        .to_string()
}

/// Attaches `bundle` to the manifest `subject` of `repo` as cosign does
/// (its Cosign Bundle Specification): the bundle as a blob, the empty
/// config, and an OCI manifest of artifact type [`BUNDLE`] whose subject
/// is `subject`, pushed by its digest. Returns the descriptor a referrers
/// index lists it by.
fn attach_bundle(reg: &Registry, repo: &str, subject: &str, bundle: &[u8]) -> J {
    let empty = b"{}";
    let manifest = json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "artifactType": BUNDLE,
        "config": {"mediaType": "application/vnd.oci.empty.v1+json", "size": 2, "digest": push_blob(reg, repo, empty)},
        "layers": [{"mediaType": BUNDLE, "size": bundle.len(), "digest": push_blob(reg, repo, bundle)}],
        "subject": {"mediaType": media_type(reg, repo, subject), "size": 0, "digest": subject},
        "annotations": {"dev.sigstore.bundle.content": "dsse-envelope", "dev.sigstore.bundle.predicateType": COSIGN_SIGN},
    })
    .to_string();
    let digest = stead::registry::client::sha256(manifest.as_bytes());
    let (code, head, _) = raw(
        &reg.addr,
        "PUT",
        &format!("/v2/{repo}/manifests/{digest}"),
        &[("Content-Type", "application/vnd.oci.image.manifest.v1+json")],
        manifest.as_bytes(),
    );
    assert_eq!(code, 201, "{head}");
    json!({
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "digest": digest,
        "size": manifest.len(),
        "artifactType": BUNDLE,
    })
}

/// The referrers index listing `descriptors`.
fn referrers_index(descriptors: &[J]) -> String {
    json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": descriptors,
    })
    .to_string()
}

/// Puts the referrers tag schema's index for `subject` (the tag
/// `sha256-<hex>`), as a client does where the registry has no referrers
/// API (OCI distribution spec 1.1).
fn put_referrers_tag(reg: &Registry, repo: &str, subject: &str, descriptors: &[J]) {
    let index = referrers_index(descriptors);
    let (code, head, _) = raw(
        &reg.addr,
        "PUT",
        &format!("/v2/{repo}/manifests/{}", subject.replacen(':', "-", 1)),
        &[("Content-Type", "application/vnd.oci.image.index.v1+json")],
        index.as_bytes(),
    );
    assert_eq!(code, 201, "{head}");
}

#[test]
fn bundles_found_by_the_referrers_tag_schema_sign_an_image_and_each_bad_one_is_refused_by_name() {
    let (plane, key, site) = start();
    let a = CosignKey::new();
    let dir = tempfile::tempdir().unwrap();
    let prefix = |f: &str| dir.path().join(f).display().to_string();
    attest_py(&["keygen", &prefix("ci")]);
    attest_py(&["keygen", &prefix("intruder")]);
    let r = site.reg.addr.clone();
    const SLSA: &str = "https://slsa.dev/provenance/v1";
    let bundled = site.push("app", "bundled", "bundled");
    // Each tag: who signs a bundle for it, about which digest (None: its
    // own), of which predicate type.
    let cases = [
        ("other-key", "intruder", None, COSIGN_SIGN),
        ("other-digest", "ci", Some(bundled.clone()), COSIGN_SIGN),
        ("other-predicate", "ci", None, SLSA),
    ];
    let mut digests = std::collections::BTreeMap::new();
    let attach = |tag: &str, digest: &str, by: &str, about: &str, predicate: &str| {
        let b = bundle_py(&prefix(by), &format!("{r}/app"), about, predicate);
        let d = attach_bundle(&site.plain, "app", digest, &b);
        put_referrers_tag(&site.plain, "app", digest, &[d]);
        eprintln!("{tag}: a bundle by {by} about {about} of {predicate}");
    };
    attach("bundled", &bundled, "ci", &bundled, COSIGN_SIGN);
    for (tag, by, about, predicate) in &cases {
        let digest = site.push("app", tag, tag);
        attach(
            tag,
            &digest,
            by,
            about.as_deref().unwrap_or(&digest),
            predicate,
        );
        digests.insert(*tag, digest);
    }
    // A cosign `.sig` signature still counts beside the bundles.
    let sig = site.push("app", "sig", "sig");
    site.sign(&a, "app", "sig", &sig, None);

    let n = site.node("bundles", &plane, &key);
    let mut doc = payload(
        &n,
        1,
        [
            "bundled",
            "sig",
            "other-key",
            "other-digest",
            "other-predicate",
        ]
        .iter()
        .map(|t| module_of(t, &site.image("app", t)))
        .collect(),
    );
    let ci_pem = std::fs::read_to_string(prefix("ci.pub")).unwrap();
    doc["images"] =
        json!([{"scope": format!("{r}/app"), "require": "sigstore", "keys": [ci_pem, a.pem()]}]);
    plane.publish(&n.id, &sign(&key, &doc));
    let agent = Agent::start(&n);
    n.wait_for(90, "bundled and sig to run", || {
        ["bundled", "sig"]
            .iter()
            .all(|m| n.container(m).is_some_and(|(_, s, _)| s == "running"))
    });
    let image = docker_ok(&[
        "inspect",
        "--format",
        "{{.Image}}",
        &n.container_id("bundled"),
    ]);
    assert_eq!(Some(image), id_of(&format!("{r}/app@{bundled}")));
    for (tag, why) in [
        (
            "other-key",
            "found a bundle signed by no key the policy names".to_string(),
        ),
        ("other-digest", "found a bundle about another digest".into()),
        (
            "other-predicate",
            format!("found a bundle of predicate type {SLSA}, not {COSIGN_SIGN}"),
        ),
    ] {
        let said = wait_error(
            &agent,
            &n,
            tag,
            &[&format!("{r}/app:{tag}"), &digests[tag], &why],
        );
        eprintln!("{tag}: {said}");
        assert!(
            said.contains("refused by the image policy"),
            "{tag}: {said}"
        );
        assert!(n.container(tag).is_none(), "{tag}: nothing is created");
    }
    // The registry has no referrers API (it answers 404, which its log
    // does not list): the tag schema's index was read, and served.
    let tag = format!(
        "http.request.uri=/v2/app/manifests/{} ",
        bundled.replacen(':', "-", 1)
    );
    let log = std::fs::read_to_string(&site.reg.log).unwrap_or_default();
    assert!(
        log.lines().any(|l| l.contains("response completed")
            && l.contains(&tag)
            && l.contains("http.response.status=200")),
        "the registry's log lists no {tag}"
    );
    drop(agent);
}

/// What [`ReferrersApi`] is told for a digest it is to answer 405 for.
const NO_ROUTE: &str = "405";

/// An in-test stand-in for the OCI 1.1 referrers API, which no registry
/// here serves (Debian's docker-registry 2.8 answers 404 to it): a
/// plain-HTTP proxy on loopback to a real registry that answers `GET
/// /v2/<repo>/referrers/<digest>` itself, with the index set for that
/// digest (an empty one otherwise, as the API does), and passes every
/// other request through to the registry untouched.
struct ReferrersApi {
    addr: String,
    indexes: std::sync::Arc<std::sync::Mutex<std::collections::HashMap<String, String>>>,
    asked: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl ReferrersApi {
    fn new(upstream: &str) -> ReferrersApi {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let api = ReferrersApi {
            addr,
            indexes: Default::default(),
            asked: Default::default(),
        };
        let (indexes, asked, upstream) =
            (api.indexes.clone(), api.asked.clone(), upstream.to_string());
        std::thread::spawn(move || {
            for c in listener.incoming().flatten() {
                let (indexes, asked, upstream) = (indexes.clone(), asked.clone(), upstream.clone());
                std::thread::spawn(move || {
                    let _ = Self::serve(c, &upstream, &indexes, &asked);
                });
            }
        });
        api
    }

    fn serve(
        mut c: std::net::TcpStream,
        upstream: &str,
        indexes: &std::sync::Mutex<std::collections::HashMap<String, String>>,
        asked: &std::sync::Mutex<Vec<String>>,
    ) -> std::io::Result<()> {
        use std::io::{Read, Write};
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            if c.read(&mut byte)? == 0 {
                return Ok(());
            }
            if head.is_empty() && byte[0] == 0x16 {
                // A TLS hello: answered as a plain-HTTP server answers it.
                c.write_all(b"HTTP/1.0 400 Bad Request\r\n\r\n")?;
                return Ok(());
            }
            head.push(byte[0]);
        }
        let head = String::from_utf8_lossy(&head).to_string();
        let path = head
            .split_whitespace()
            .nth(1)
            .unwrap_or_default()
            .to_string();
        if path.contains("/referrers/") {
            asked.lock().unwrap().push(path.clone());
            let digest = path.rsplit('/').next().unwrap_or_default();
            let digest = digest.split('?').next().unwrap_or_default();
            let body = indexes
                .lock()
                .unwrap()
                .get(digest)
                .cloned()
                .unwrap_or_else(|| referrers_index(&[]));
            if body == NO_ROUTE {
                // As a registry from before the API may answer.
                c.write_all(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")?;
                return Ok(());
            }
            write!(
                c,
                "HTTP/1.1 200 OK\r\nContent-Type: application/vnd.oci.image.index.v1+json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            )?;
            return Ok(());
        }
        let length: usize = head
            .lines()
            .find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.eq_ignore_ascii_case("content-length")
                    .then(|| v.trim().parse().ok())?
            })
            .unwrap_or(0);
        let mut body = vec![0u8; length];
        c.read_exact(&mut body)?;
        let mut forward: String = head
            .trim_end()
            .lines()
            .filter(|l| !l.to_ascii_lowercase().starts_with("connection:"))
            .map(|l| format!("{l}\r\n"))
            .collect();
        forward.push_str("Connection: close\r\n\r\n");
        let mut u = std::net::TcpStream::connect(upstream)?;
        u.write_all(forward.as_bytes())?;
        u.write_all(&body)?;
        std::io::copy(&mut u, &mut c)?;
        Ok(())
    }
}

#[test]
fn bundles_listed_by_the_referrers_api_sign_an_image_and_a_referrer_of_another_manifest_does_not() {
    let (plane, key, site) = start();
    let dir = tempfile::tempdir().unwrap();
    let prefix = |f: &str| dir.path().join(f).display().to_string();
    attest_py(&["keygen", &prefix("ci")]);
    let api = ReferrersApi::new(&site.plain.addr);
    let r = api.addr.clone();
    let signed = site.push("app", "api-signed", "api-signed");
    let b = bundle_py(&prefix("ci"), &format!("{r}/app"), &signed, COSIGN_SIGN);
    let d = attach_bundle(&site.plain, "app", &signed, &b);
    // Listed by the API only (no tag-schema index is put): found only by
    // asking the API.
    api.indexes
        .lock()
        .unwrap()
        .insert(signed.clone(), referrers_index(std::slice::from_ref(&d)));
    // Another image whose referrers list the first one's bundle (its
    // manifest's subject is the first image): not this image's signature.
    let stolen = site.push("app", "api-stolen", "api-stolen");
    api.indexes
        .lock()
        .unwrap()
        .insert(stolen.clone(), referrers_index(&[d]));
    // A registry from before the API that answers 405 for it (not the
    // spec's 404): the tag schema is read for it all the same.
    let old = site.push("app", "api-old", "api-old");
    let b = bundle_py(&prefix("ci"), &format!("{r}/app"), &old, COSIGN_SIGN);
    let d = attach_bundle(&site.plain, "app", &old, &b);
    put_referrers_tag(&site.plain, "app", &old, &[d]);
    api.indexes
        .lock()
        .unwrap()
        .insert(old.clone(), NO_ROUTE.into());
    let n = Node::new("referrers-api").with_config(&format!(
        "[plane]\nurl = {:?}\ntrusted_keys = [{:?}]\npoll_interval = \"1s\"",
        plane.base(),
        key.public().to_base64()
    ));
    let image = |tag: &str| format!("{r}/app:{tag}");
    let mut doc = payload(
        &n,
        1,
        vec![
            module_of("signed", &image("api-signed")),
            module_of("stolen", &image("api-stolen")),
            module_of("old", &image("api-old")),
        ],
    );
    let ci_pem = std::fs::read_to_string(prefix("ci.pub")).unwrap();
    doc["images"] = json!([{"scope": format!("{r}/app"), "require": "sigstore", "keys": [ci_pem]}]);
    plane.publish(&n.id, &sign(&key, &doc));
    let agent = Agent::start(&n);
    let said = wait_error(
        &agent,
        &n,
        "stolen",
        &[
            &image("api-stolen"),
            &stolen,
            "refused by the image policy",
            "found no signature",
        ],
    );
    eprintln!("stolen: {said}");
    assert!(n.container("stolen").is_none());
    if on_podman() {
        // Podman pulls over plain HTTP from no registry it is not told is
        // insecure, and this stand-in is plain HTTP: the verdict on the
        // signed one is the log's.
        n.wait_for(90, "the signed ones verified", || {
            let log = Agent::log(&n);
            [&signed, &old].iter().all(|d| {
                log.lines()
                    .any(|l| l.contains("image signature verified") && l.contains(d.as_str()))
            })
        });
    } else {
        n.wait_for(90, "the signed ones to run", || {
            ["signed", "old"]
                .iter()
                .all(|m| n.container(m).is_some_and(|(_, s, _)| s == "running"))
        });
        let id = docker_ok(&[
            "inspect",
            "--format",
            "{{.Image}}",
            &n.container_id("signed"),
        ]);
        assert_eq!(Some(id), id_of(&format!("{r}/app@{signed}")));
    }
    let asked = api.asked.lock().unwrap().clone();
    assert!(
        asked
            .iter()
            .any(|p| p == &format!("/v2/app/referrers/{signed}")),
        "{asked:?}"
    );
    drop(agent);
}

/// Publishes a root on `plane` that the node's first key (`first`) hands
/// to `root`, with `online` signing documents and `offline` (threshold 1)
/// the allow-list role, and an allow-list of `images` signed by
/// `offline`, each checked and published by the operator's tool.
fn publish_allow_list(
    plane: &Plane,
    first: &SecretKey,
    [root, online, offline]: [&SecretKey; 3],
    images: &[String],
) {
    use common::plane::plane_cli;
    let d = tempfile::tempdir().unwrap();
    let file = |name: &str| d.path().join(name).to_str().unwrap().to_string();
    let key_file = |name: &str, k: &SecretKey| {
        stead::host::keyfile::write(&d.path().join(name), k).unwrap();
        file(name)
    };
    let b64 = |k: &SecretKey| k.public().to_base64();
    let site = plane.root().to_str().unwrap().to_string();
    plane_cli(&[
        "root",
        "init",
        "--root-key",
        &b64(root),
        "--documents-key",
        &b64(online),
        "--allow-list-key",
        &b64(offline),
        "--allow-list-threshold",
        "1",
        "--out",
        &file("root.payload"),
    ]);
    plane_cli(&[
        "root",
        "sign",
        "--key",
        &key_file("first", first),
        "--key",
        &key_file("root", root),
        "--in",
        &file("root.payload"),
        "--out",
        &file("root.json"),
    ]);
    let trusted = b64(first);
    plane_cli(&[
        "root",
        "verify",
        "--trusted",
        &trusted,
        "--site",
        &site,
        "--in",
        &file("root.json"),
        "--publish",
    ]);
    let mut args = vec!["root", "allow-list", "--out"];
    let payload = file("list.payload");
    args.push(&payload);
    for i in images {
        args.extend(["--image", i]);
    }
    plane_cli(&args);
    let (kf, signed) = (key_file("offline", offline), file("list.json"));
    plane_cli(&[
        "root", "sign", "--in", &payload, "--key", &kf, "--out", &signed,
    ]);
    plane_cli(&[
        "root",
        "verify",
        "--trusted",
        &trusted,
        "--site",
        &site,
        "--allow-list",
        &signed,
        "--publish",
    ]);
}

#[test]
fn with_an_allow_list_what_the_devices_intentions_or_a_reload_name_runs_only_when_listed() {
    let (plane, first, site) = start();
    let [root, online, offline] = std::array::from_fn(|_| SecretKey::generate().unwrap());
    let r = site.reg.addr.clone();
    let repo = "acme/listed";
    let listed = site.push(repo, "1.0.0", "1.0.0");
    let unlisted = site.push(repo, "1.1.0", "1.1.0");
    let pinned = site.push("acme/other", "1", "other");
    publish_allow_list(
        &plane,
        &first,
        [&root, &online, &offline],
        &[format!("{r}/{repo}@{listed}")],
    );
    let n = site.node("allowed", &plane, &first).with_heartbeat("1s");
    plane.publish(&n.id, &sign(&online, &payload(&n, 1, vec![])));
    let agent = Agent::start(&n);
    // A device that has never reached its plane holds no allow-list: the
    // modules are written once it has taken it.
    wait_plane(&n, &agent, "the allow-list taken", |p| {
        p["root"]["allow_list"]["version"] == 1
    });
    let (m, other, tagged) = (n.module("sensor"), n.module("other"), n.module("tagged"));
    let idle = |name: &str, image: &str| {
        common::intention::Module::new(name, image)
            .sh(&idle_after("up"))
            .set("restart", "\"always\"")
    };
    n.write_intention(
        "s.toml",
        idle(&m, &site.image(repo, "1.0.0"))
            .table("update", "range = \"^1\"\nhealth_window = \"2s\""),
    );
    // A digest the list does not hold, pinned: refused without asking.
    n.write_intention("o.toml", idle(&other, &format!("{r}/acme/other@{pinned}")));
    // A tag whose digest the list does not hold: refused once resolved.
    n.write_intention("t.toml", idle(&tagged, &site.image(repo, "1.1.0")));
    let runs = |digest: &str| {
        n.container(&m).is_some_and(|(id, s, _)| {
            s == "running"
                && Some(docker_ok(&["inspect", "--format", "{{.Image}}", &id]))
                    == id_of(&format!("{r}/{repo}@{digest}"))
        })
    };
    n.wait_for(90, "the listed tag running", || runs(&listed));
    for (module, image, digest) in [
        (&other, format!("{r}/acme/other@{pinned}"), &pinned),
        (&tagged, site.image(repo, "1.1.0"), &unlisted),
    ] {
        let said = wait_error(
            &agent,
            &n,
            module,
            &[
                &format!("image {image} ({digest}): refused (unlisted-image): {digest} of "),
                "is not in the allow-list (version 1)",
            ],
        );
        eprintln!("{module}: {said}");
        assert_eq!(module_view(&agent, module)["state"], "failed");
        assert!(
            n.container(module).is_none(),
            "{module}: nothing is created"
        );
    }
    assert_eq!(id_of(&format!("{r}/acme/other@{pinned}")), None);
    assert_eq!(id_of(&format!("{r}/{repo}@{unlisted}")), None);
    // A reload to 1.1.0, whose digest is not listed: failed, decided, and
    // nothing moves.
    let running = n.container_id(&m);
    let done = reload(&agent, &n, &m);
    assert_eq!(done["status"], "failed", "{done:#}");
    let failure = done["items"][0]["failure"].as_str().unwrap_or_default();
    assert!(
        failure.contains(&format!(
            "image {r}/{repo}:1.1.0 ({unlisted}): refused (unlisted-image)"
        )),
        "{done:#}"
    );
    assert_eq!(n.container_id(&m), running);
    assert_eq!(id_of(&format!("{r}/{repo}@{unlisted}")), None);
    drop(agent);
}

#[test]
fn a_policy_in_the_devices_own_config_holds_without_a_plane_and_as_a_floor_under_the_planes() {
    let (plane, key, site) = start();
    let a = CosignKey::new();
    let r = site.reg.addr.clone();
    let good = site.push("app", "cfg-good", "cfg-good");
    site.sign(&a, "app", "cfg-good", &good, None);
    let unsigned = site.push("app", "cfg-unsigned", "cfg-unsigned");
    let keys = tempfile::tempdir().unwrap();
    let pub_file = keys.path().join("release.pub");
    std::fs::write(&pub_file, a.pem()).unwrap();
    // The key by its file's path.
    let rules = format!(
        "[[image_policy]]\nscope = \"{r}/app\"\nrequire = \"sigstore\"\nkeys = [{:?}]\n",
        pub_file.display().to_string()
    );
    let idle = |name: &str, image: &str| {
        common::intention::Module::new(name, image)
            .sh(&idle_after("up"))
            .set("restart", "\"always\"")
    };
    let why = format!(
        "image {r}/app:cfg-unsigned ({unsigned}): refused by the image policy: the device's config's rule for {r}/app asks for a signature by"
    );
    // Without a plane: the config's rules alone, over the intentions.
    let alone = site.node_with("cfg-alone", &rules, None);
    let (g, u) = (alone.module("good"), alone.module("unsigned"));
    alone.write_intention("g.toml", idle(&g, &site.image("app", "cfg-good")));
    alone.write_intention("u.toml", idle(&u, &site.image("app", "cfg-unsigned")));
    let agent = Agent::start(&alone);
    alone.wait_for(90, "the signed one to run", || {
        alone.container(&g).is_some_and(|(_, s, _)| s == "running")
    });
    let said = wait_error(&agent, &alone, &u, &[&why, "found no signature"]);
    eprintln!("alone: {said}");
    assert!(alone.container(&u).is_none());
    drop(agent);
    // With a plane whose document lets the repository through: the
    // config's rule is a floor the document does not loosen.
    let n = site.node_with("cfg-floor", &rules, Some((&plane, &key)));
    let mut doc = payload(
        &n,
        1,
        vec![
            module_of("good", &site.image("app", "cfg-good")),
            module_of("unsigned", &site.image("app", "cfg-unsigned")),
        ],
    );
    doc["images"] = json!([{"scope": format!("{r}/app"), "require": "none"}]);
    plane.publish(&n.id, &sign(&key, &doc));
    let agent = Agent::start(&n);
    n.wait_for(90, "the signed one to run", || {
        n.container("good").is_some_and(|(_, s, _)| s == "running")
    });
    let said = wait_error(&agent, &n, "unsigned", &[&why, "found no signature"]);
    eprintln!("floor: {said}");
    assert!(n.container("unsigned").is_none());
    assert_eq!(id_of(&format!("{r}/app@{unsigned}")), None);
    drop(agent);
}

/// A `repull` action: the module's tag, moved on in the registry, is
/// pulled again, and the module then runs its new image (one create), as
/// any change; the action is done once the pull ended.
#[test]
fn a_repull_action_brings_the_tags_new_image_and_the_module_runs_it_once() {
    let (plane, key, site) = start();
    site.push("app", "latest", "one");
    let n = site.node("repull", &plane, &key);
    let m = n.module("app");
    let module = module_of(&m, &site.image("app", "latest"));
    plane.publish(&n.id, &sign(&key, &payload(&n, 1, vec![module.clone()])));
    let agent = Agent::start(&n);
    n.wait_for(90, "the module running", || {
        n.container(&m).is_some_and(|(_, s, _)| s == "running")
    });
    let first = n.container_id(&m);
    let label = |id: &str| docker_ok(&["inspect", "-f", "{{index .Config.Labels \"v\"}}", id]);
    assert_eq!(label(&first).trim(), "one");

    // The tag moves on in the registry: nothing on the device knows.
    site.push("app", "latest", "two");
    let since = unix_now();
    let mut p = payload(&n, 2, vec![module]);
    p["actions"] = json!([{
        "id": "pull-1", "kind": "repull", "module": m,
        "expires": stead::model::time::format_rfc3339(now() + 3600),
    }]);
    plane.publish(&n.id, &sign(&key, &p));
    n.wait_for(90, "the repull done", || {
        agent.get("/v1/actions").1.contains("\"status\": \"done\"")
    });
    n.wait_for(90, "the module on the new image", || {
        n.container(&m)
            .is_some_and(|(id, s, _)| s == "running" && id != first && label(&id).trim() == "two")
    });
    std::thread::sleep(std::time::Duration::from_secs(2));
    assert_eq!(
        n.creates_since(&m, since),
        1,
        "{:?}",
        n.events_since(&m, since)
    );
    let (_, actions) = agent.get("/v1/actions");
    assert!(
        actions.contains("pulled ") && actions.contains("again"),
        "{actions}"
    );
}
