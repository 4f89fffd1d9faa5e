//! Which devices run an image (`stead-plane exposure`), against the real
//! parts: Debian's registry (Distribution) on loopback holding two images,
//! nginx serving a fleet's documents published by `stead-plane publish`
//! and keeping the device's signed reports, the real engine (Docker, and
//! Podman in the test command's second pass) pulling the image, the agent
//! reporting the manifest digest it runs. The operator's tool finds the
//! device by that digest, by a vulnerable package an SBOM of the image
//! lists (CycloneDX and SPDX), says which published revision moves it off,
//! and finds it no longer once it has moved; a report moved to another
//! node's directory is not counted; bad input is refused by name. With
//! `--sbom-from-registry` the SBOMs come from the registry itself (with
//! its login and CA): a cosign attestation (a DSSE envelope of an in-toto
//! CycloneDX statement at `sha256-<hex>.att`) and an SPDX referrer found
//! through the referrers tag schema; a registry not trusted is reported
//! per digest and fails nothing.

mod common;

use common::agent::Agent;
use common::plane::{Plane, plane_cli, plane_cli_with};
use common::registry::{Registry, Site, push_blob, raw};
use common::*;
use serde_json::{Value as J, json};
use stead::plane::envelope::SecretKey;

fn write_json(path: &std::path::Path, v: &J) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, serde_json::to_vec_pretty(v).unwrap()).unwrap();
}

/// Puts `manifest` (of `media_type`) at `at` (a tag, or its digest when
/// none); its descriptor.
fn put_manifest(reg: &Registry, repo: &str, at: Option<&str>, media_type: &str, manifest: &J) -> J {
    let body = manifest.to_string();
    let digest = stead::registry::client::sha256(body.as_bytes());
    let (code, head, _) = raw(
        &reg.addr,
        "PUT",
        &format!("/v2/{repo}/manifests/{}", at.unwrap_or(&digest)),
        &[("Content-Type", media_type)],
        body.as_bytes(),
    );
    assert_eq!(code, 201, "{head}");
    json!({"mediaType": media_type, "digest": digest, "size": body.len()})
}

const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";

/// Attaches `sbom` to `digest` as `cosign attest --type cyclonedx` does:
/// a DSSE envelope of an in-toto statement (its signature is not
/// checked by the flag, so none is made) as the layer of the manifest
/// tagged `sha256-<hex>.att`.
fn attest_sbom(reg: &Registry, repo: &str, digest: &str, sbom: &J) {
    use base64::Engine as _;
    let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
    let statement = json!({
        "_type": "https://in-toto.io/Statement/v0.1",
        "predicateType": "https://cyclonedx.org/bom",
        "subject": [{"name": repo, "digest": {"sha256": digest.trim_start_matches("sha256:")}}],
        "predicate": sbom,
    });
    let envelope = json!({
        "payloadType": "application/vnd.in-toto+json",
        "payload": b64(statement.to_string().as_bytes()),
        "signatures": [{"keyid": "", "sig": b64(b"not checked")}],
    });
    let mut layer = push_described(
        reg,
        repo,
        "application/vnd.dsse.envelope.v1+json",
        envelope.to_string().as_bytes(),
    );
    layer["annotations"] = json!({"predicateType": "https://cyclonedx.org/bom"});
    let config = push_described(reg, repo, "application/vnd.oci.image.config.v1+json", b"{}");
    let tag = format!("{}.att", digest.replacen(':', "-", 1));
    put_manifest(
        reg,
        repo,
        Some(&tag),
        OCI_MANIFEST,
        &json!({"schemaVersion": 2, "mediaType": OCI_MANIFEST, "config": config, "layers": [layer]}),
    );
}

/// Attaches `sbom` (SPDX JSON) to `digest` as an OCI 1.1 referrer, listed
/// in the referrers tag schema's index (the registry has no referrers
/// API).
fn refer_sbom(reg: &Registry, repo: &str, digest: &str, sbom: &J) {
    let spdx = "application/spdx+json";
    let layer = push_described(reg, repo, spdx, sbom.to_string().as_bytes());
    let config = push_described(reg, repo, "application/vnd.oci.empty.v1+json", b"{}");
    let subject = json!({"mediaType": "application/vnd.docker.distribution.manifest.v2+json", "size": 0, "digest": digest});
    let mut d = put_manifest(
        reg,
        repo,
        None,
        OCI_MANIFEST,
        &json!({"schemaVersion": 2, "mediaType": OCI_MANIFEST, "artifactType": spdx,
                "config": config, "layers": [layer], "subject": subject}),
    );
    d["artifactType"] = json!(spdx);
    let index = "application/vnd.oci.image.index.v1+json";
    put_manifest(
        reg,
        repo,
        Some(&digest.replacen(':', "-", 1)),
        index,
        &json!({"schemaVersion": 2, "mediaType": index, "manifests": [d]}),
    );
}

/// Uploads a blob to `repo`; its descriptor (with `media_type`).
fn push_described(reg: &Registry, repo: &str, media_type: &str, bytes: &[u8]) -> J {
    let digest = push_blob(reg, repo, bytes);
    json!({"mediaType": media_type, "digest": digest, "size": bytes.len()})
}

/// `stead-plane exposure` with `args`, as JSON (it must succeed).
fn exposure(args: &[&str]) -> J {
    let mut all = vec!["exposure"];
    all.extend_from_slice(args);
    all.push("--json");
    let (ok, out, err) = plane_cli_with(&all, "");
    assert!(ok, "{all:?}: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

#[test]
fn exposure_finds_the_devices_that_run_a_digest_or_a_vulnerable_package_and_what_moves_them_off() {
    require_engine();
    let key = SecretKey::generate().unwrap();
    let plane = Plane::start();
    let site = Site::new();
    let d1 = site.push("app", "1", "one");
    let d2 = site.push("app", "2", "two");
    let n = site.node("expo", &plane, &key);
    let g = format!("g-{}", n.id);
    let w = n.module("w");
    let work = tempfile::tempdir().unwrap();
    let key_file = work.path().join("plane.key");
    stead::host::keyfile::write(&key_file, &key).unwrap();
    let fleet = work.path().join("fleet");
    let served = plane.root();
    let elsewhere = work.path().join("next-site");
    let (k, f, s) = (
        key_file.to_str().unwrap(),
        fleet.to_str().unwrap(),
        served.to_str().unwrap(),
    );
    let group = |tag: &str| {
        write_json(
            &fleet.join(format!("groups/{g}.json")),
            &json!({"modules": [{
                "name": w, "image": site.image("app", tag),
                "command": ["sh", "-c", idle_after("up")], "restart": "always",
            }]}),
        );
    };
    group("1");
    std::fs::write(
        fleet.join("nodes.csv"),
        format!("node,groups\n{},{g}\n", n.id),
    )
    .unwrap();
    write_json(
        &fleet.join("node-defaults.json"),
        &json!({"poll": {"interval": "1s", "jitter": "100ms"}}),
    );
    let publish = |to: &str| plane_cli(&["publish", "--key", k, "--fleet", f, "--site", to]);
    publish(s);
    let agent = Agent::start(&n);
    let runs = |digest: &str| {
        let repo_digest = format!("{}/app@{digest}", site.reg.addr);
        let w = w.clone();
        move |r: &J| {
            r["modules"][w.as_str()]["image_digests"]
                .as_array()
                .is_some_and(|d| d.iter().any(|d| *d == repo_digest.as_str()))
        }
    };
    let on_1 = runs(&d1);
    n.wait_for(120, "a report of the module running app:1", || {
        plane.report_json(&n.id).is_some_and(|r| on_1(&r))
    });
    // The API says the same.
    let (_, body) = agent.get(&format!("/v1/modules/{w}"));
    let view: J = serde_json::from_str(&body).unwrap();
    assert_eq!(view["image"], site.image("app", "1").as_str(), "{view:#}");
    assert!(view["image_digests"].to_string().contains(&d1), "{view:#}");
    let out = plane_cli(&["enroll", "--fleet", f, "--reports", s]);
    assert!(out.contains(&format!("enrolled {}", n.id)), "{out}");

    // Without a question: the devices per digest.
    let table = exposure(&["--reports", s, "--fleet", f]);
    assert_eq!(table["devices"], 1, "{table:#}");
    let row = &table["digests"][&d1];
    assert_eq!(
        (row["devices"].as_u64(), row["modules"].as_u64()),
        (Some(1), Some(1)),
        "{table:#}"
    );
    assert_eq!(row["names"], json!([w]), "{table:#}");
    assert_eq!(
        row["repositories"],
        json!([format!("{}/app", site.reg.addr)]),
        "{table:#}"
    );
    assert!(table["digests"].get(&d2).is_none(), "{table:#}");

    // Asked for the digest, with the site: the device, its group, its
    // module; the served revision names the same tag.
    let asked = exposure(&["--reports", s, "--fleet", f, "--digest", &d1, "--site", s]);
    assert_eq!(asked["affected_devices"], 1, "{asked:#}");
    let a = &asked["affected"][0];
    assert_eq!(a["node"], n.id.as_str(), "{asked:#}");
    assert!(
        a["groups"][0]
            .as_str()
            .unwrap()
            .starts_with(&format!("{g}@")),
        "{asked:#}"
    );
    let m = &a["modules"][0];
    assert_eq!(
        (&m["module"], &m["image"], &m["digest"]),
        (&json!(w), &json!(site.image("app", "1")), &json!(d1)),
        "{asked:#}"
    );
    assert_eq!(m["moved_off"]["by"], "same-tag", "{asked:#}");
    // The next revision, signed where the host does not serve it yet:
    // it would move the module off.
    group("2");
    publish(elsewhere.to_str().unwrap());
    let next = exposure(&[
        "--reports",
        s,
        "--fleet",
        f,
        "--digest",
        &format!("{}/app@{d1}", site.reg.addr),
        "--site",
        elsewhere.to_str().unwrap(),
    ]);
    let moved = &next["affected"][0]["modules"][0]["moved_off"];
    assert_eq!(moved["by"], "revision", "{next:#}");
    assert_eq!(
        moved["document"],
        format!("groups/{g}/desired.json"),
        "{next:#}"
    );
    assert_eq!(moved["image"], site.image("app", "2"), "{next:#}");
    let text = plane_cli(&["exposure", "--reports", s, "--fleet", f, "--digest", &d1]);
    assert!(
        text.contains("affected devices 1") && text.contains(&w),
        "{text}"
    );

    // SBOMs: one of each format, one per image; a vulnerable version only
    // app:1's lists finds the device, one only app:2's does not.
    let sboms = work.path().join("sboms");
    write_json(
        &sboms.join("one.cdx.json"),
        &json!({
            "bomFormat": "CycloneDX", "specVersion": "1.5", "version": 1,
            "metadata": {"component": {"type": "container", "name": site.image("app", "1"), "version": d1}},
            "components": [{"type": "application", "name": "busybox", "version": "1.36.1",
                            "purl": "pkg:deb/debian/busybox@1.36.1"}],
        }),
    );
    write_json(
        &sboms.join("two.spdx.json"),
        &json!({
            "spdxVersion": "SPDX-2.3", "SPDXID": "SPDXRef-DOCUMENT", "name": "app",
            "documentDescribes": ["SPDXRef-image"],
            "packages": [
                {"SPDXID": "SPDXRef-image", "name": "app",
                 "externalRefs": [{"referenceCategory": "PACKAGE-MANAGER", "referenceType": "purl",
                   "referenceLocator": format!("pkg:oci/app@{}", d2.replace(':', "%3A"))}]},
                {"SPDXID": "SPDXRef-bb", "name": "busybox", "versionInfo": "1.37.0"},
            ],
        }),
    );
    let sb = sboms.to_str().unwrap();
    let by_package = exposure(&[
        "--reports",
        s,
        "--fleet",
        f,
        "--sbom",
        sb,
        "--package",
        "pkg:deb/debian/busybox@1.36.1",
    ]);
    assert_eq!(by_package["affected_devices"], 1, "{by_package:#}");
    assert_eq!(
        by_package["affected"][0]["modules"][0]["why"],
        json!(["pkg:deb/debian/busybox@1.36.1"]),
        "{by_package:#}"
    );
    let list = work.path().join("vulnerable.txt");
    std::fs::write(&list, "# advisory 1\nbusybox 1.37.0\n").unwrap();
    let by_list = exposure(&[
        "--reports",
        s,
        "--fleet",
        f,
        "--sbom",
        sb,
        "--vulnerable",
        list.to_str().unwrap(),
    ]);
    assert_eq!(
        by_list["asked"],
        json!({&d2: ["busybox@1.37.0"]}),
        "{by_list:#}"
    );
    assert_eq!(by_list["affected_devices"], 0, "{by_list:#}");
    // With SBOMs and no question, the table says which digests have one.
    let marked = exposure(&["--reports", s, "--fleet", f, "--sbom", sb]);
    assert_eq!(marked["digests"][&d1]["sbom"], true, "{marked:#}");

    // SBOMs from the registry, asked with its login and CA: app:1's
    // attested by cosign's tag, app:2's an SPDX referrer.
    attest_sbom(
        &site.plain,
        "app",
        &d1,
        &json!({
            "bomFormat": "CycloneDX", "specVersion": "1.5", "version": 1,
            "components": [{"type": "library", "name": "openssl", "version": "3.0.11-1",
                            "purl": "pkg:deb/debian/openssl@3.0.11-1"}],
        }),
    );
    refer_sbom(
        &site.plain,
        "app",
        &d2,
        &json!({
            "spdxVersion": "SPDX-2.3", "SPDXID": "SPDXRef-DOCUMENT", "name": "app",
            "packages": [{"SPDXID": "SPDXRef-z", "name": "zlib", "versionInfo": "1.2.13"}],
        }),
    );
    let auth = work.path().join("registry-auth.json");
    std::fs::write(
        &auth,
        format!(
            r#"{{"auths": {{"{}": {{"username": "ci", "password": "s3cret"}}}}}}"#,
            site.reg.addr
        ),
    )
    .unwrap();
    let (auth, ca) = (auth.to_str().unwrap(), site.tls.ca.to_str().unwrap());
    let from_registry = |package: &str, trusted: bool| {
        let mut args = vec![
            "--reports",
            s,
            "--fleet",
            f,
            "--package",
            package,
            "--sbom-from-registry",
            "--registry-auth",
            auth,
        ];
        if trusted {
            args.extend(["--registry-ca", ca]);
        }
        exposure(&args)
    };
    let fetched = from_registry("pkg:deb/debian/openssl@3.0.11-1", true);
    assert_eq!(fetched["affected_devices"], 1, "{fetched:#}");
    assert_eq!(fetched["affected"][0]["node"], n.id.as_str(), "{fetched:#}");
    assert_eq!(
        fetched["affected"][0]["modules"][0]["why"],
        json!(["pkg:deb/debian/openssl@3.0.11-1"]),
        "{fetched:#}"
    );
    assert_eq!(
        fetched["registry"][&d1],
        json!({"repository": format!("{}/app", site.reg.addr), "sboms": 1}),
        "{fetched:#}"
    );
    // A registry whose certificate is not trusted: not known, per digest,
    // and the run still answers.
    let untrusted = from_registry("pkg:deb/debian/openssl@3.0.11-1", false);
    assert_eq!(untrusted["affected_devices"], 0, "{untrusted:#}");
    let why = untrusted["registry"][&d1]["not_known"]
        .as_str()
        .unwrap_or("");
    assert!(why.contains("TLS"), "{untrusted:#}");
    let text = plane_cli(&[
        "exposure",
        "--reports",
        s,
        "--fleet",
        f,
        "--package",
        "openssl@3.0.11-1",
        "--sbom-from-registry",
        "--registry-auth",
        auth,
    ]);
    assert!(text.contains(&format!("SBOM not known: {d1}")), "{text}");

    // The revision published: the device moves to app:2 and runs app:1
    // no longer.
    publish(s);
    let on_2 = runs(&d2);
    n.wait_for(120, "a report of the module running app:2", || {
        plane.report_json(&n.id).is_some_and(|r| on_2(&r))
    });
    let after = exposure(&["--reports", s, "--fleet", f, "--digest", &d1]);
    assert_eq!(after["affected_devices"], 0, "{after:#}");
    let by_list = exposure(&[
        "--reports",
        s,
        "--fleet",
        f,
        "--sbom",
        sb,
        "--vulnerable",
        list.to_str().unwrap(),
    ]);
    assert_eq!(by_list["affected"][0]["node"], n.id.as_str(), "{by_list:#}");
    // app:2's SPDX referrer, from the registry.
    let referred = from_registry("zlib@1.2.13", true);
    assert_eq!(referred["affected_devices"], 1, "{referred:#}");
    assert_eq!(referred["registry"][&d2]["sboms"], 1, "{referred:#}");

    // A report copied to another node's directory is listed, not counted,
    // and the other node (enrolled) is not known.
    let copied = served.join("nodes/other-node/status.json");
    std::fs::create_dir_all(copied.parent().unwrap()).unwrap();
    std::fs::copy(served.join(format!("nodes/{}/status.json", n.id)), &copied).unwrap();
    let x = exposure(&["--reports", s, "--fleet", f, "--digest", &d2]);
    assert_eq!(
        (x["devices"].as_u64(), x["unverified"].as_u64()),
        (Some(1), Some(1)),
        "{x:#}"
    );
    assert_eq!(x["affected_devices"], 1, "{x:#}");
    assert!(
        x["unverified_listed"][0]["source"]
            .as_str()
            .unwrap()
            .contains("other-node"),
        "{x:#}"
    );

    // Bad input is refused by name, and nothing is read.
    let empty = work.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    for (args, says) in [
        (
            vec!["--digest", "app:1"],
            "--digest: \"app:1\" is not an image digest",
        ),
        (vec!["--package", "busybox@1.36.1"], "give --sbom DIR"),
        (vec!["--registry-auth", "x.json"], "--sbom-from-registry"),
        (
            vec!["--package", "busybox"],
            "--package: \"busybox\" names no package version",
        ),
        (
            vec!["--sbom", empty.to_str().unwrap(), "--package", "busybox@1"],
            "no .json file",
        ),
    ] {
        let mut all = vec!["exposure", "--reports", s, "--fleet", f];
        all.extend(args.iter().copied());
        let (ok, out, err) = plane_cli_with(&all, "");
        assert!(
            !ok && out.is_empty() && err.contains(says),
            "{all:?}: {err}"
        );
    }
    drop(agent);
}
