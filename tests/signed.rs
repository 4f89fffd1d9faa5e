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
use common::registry::{Registry, raw};
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

/// A node polling `plane` every second, trusting `key`.
fn node(tag: &str, plane: &Plane, key: &SecretKey) -> Node {
    Node::new(tag).with_config(&format!(
        "[plane]\nurl = {:?}\ntrusted_keys = [{:?}]\npoll_interval = \"1s\"",
        plane.base(),
        key.public().to_base64()
    ))
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

/// Removes the engine's copies of `reference` (pushed from it), so the
/// agent must pull.
fn forget(reference: &str) {
    let _ = docker(&["rmi", "-f", reference]);
}

#[test]
fn an_image_runs_only_when_signed_as_the_policy_asks_and_each_refusal_says_why() {
    require_engine();
    let plane = Plane::start();
    let key = SecretKey::generate().unwrap();
    let reg = Registry::plain();
    let (a, b) = (CosignKey::new(), CosignKey::new());
    let r = &reg.addr;
    // Signed by the trusted key.
    let (good_id, good) = reg.push("app", "good", &[("v", "good")]);
    a.sign(&reg, "app", &format!("{r}/app:good"), &good, None);
    // Not signed at all.
    let (_, unsigned) = reg.push("app", "unsigned", &[("v", "unsigned")]);
    // Signed by another key.
    let (_, other) = reg.push("app", "other", &[("v", "other")]);
    b.sign(&reg, "app", &format!("{r}/app:other"), &other, None);
    // A signature of the good digest, put where another digest's goes.
    let (_, moved) = reg.push("app", "moved", &[("v", "moved")]);
    a.sign(&reg, "app", &format!("{r}/app:moved"), &good, Some(&moved));
    // Signed, then the tag pointed at a new image.
    let (_, first) = reg.push("app", "repointed", &[("v", "first")]);
    a.sign(&reg, "app", &format!("{r}/app:repointed"), &first, None);
    let (_, repointed) = reg.push("app", "repointed", &[("v", "second")]);
    // Signed for another tag of the repository.
    let (_, retagged) = reg.push("app", "retagged", &[("v", "retagged")]);
    a.sign(&reg, "app", &format!("{r}/app:elsewhere"), &retagged, None);
    // No rule covers this repository.
    let (free_id, _) = reg.push("free", "1", &[("v", "free")]);
    for t in [
        "good",
        "unsigned",
        "other",
        "moved",
        "repointed",
        "retagged",
    ] {
        forget(&format!("{r}/app:{t}"));
    }
    forget(&format!("{r}/free:1"));

    let n = node("signed", &plane, &key);
    let policy = json!([
        {"scope": format!("{r}/app"), "require": "sigstore", "keys": [a.pem()]},
    ]);
    let mut doc = payload(
        &n,
        1,
        vec![
            module_of("good", &format!("{r}/app:good")),
            module_of("unsigned", &format!("{r}/app:unsigned")),
            module_of("other", &format!("{r}/app:other")),
            module_of("moved", &format!("{r}/app:moved")),
            module_of("repointed", &format!("{r}/app:repointed")),
            module_of("retagged", &format!("{r}/app:retagged")),
            module_of("free", &format!("{r}/free:1")),
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
    assert_eq!(image_of("good"), good_id);
    assert_eq!(image_of("free"), free_id);

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
    drop(agent);
}
