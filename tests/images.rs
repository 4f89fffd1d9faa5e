//! Image collection on the engine the suite runs against (the Docker
//! Engine, and Podman's service in the test command's second run): a
//! module whose image is changed twice keeps its current and its previous
//! image, the one before goes, and the dry run says why each stays. The
//! images come from a TLS registry on loopback (Podman pulls plain HTTP
//! from no registry it is not told is insecure; its test CA is placed in
//! `/etc/containers/certs.d` for the registry's port while the test runs).

mod common;

use common::agent::Agent;
use common::intention::Module;
use common::registry::{Registry, Tls, Trusted, docker_engine};
use common::*;

/// Pushes a new image to `repo:tag` of a plain registry, from the Docker
/// Engine (which keeps nothing of it); returns its image ID there.
fn push(reg: &Registry, repo: &str, tag: &str) -> String {
    let target = format!("{}/{repo}:{tag}", reg.addr);
    let tmp = docker_engine(&["create", IMAGE_1, "true"]);
    docker_engine(&[
        "commit",
        "--change",
        &format!("LABEL org.example.pushed={repo}:{tag}"),
        &tmp,
        &target,
    ]);
    docker_engine(&["rm", &tmp]);
    docker_engine(&["push", &target]);
    let id = docker_engine(&["image", "inspect", "--format", "{{.Id}}", &target]);
    docker_engine(&["rmi", &target]);
    id
}

#[test]
fn an_image_changed_twice_keeps_the_current_and_the_previous_and_the_first_goes() {
    require_engine();
    let plain = Registry::plain();
    let repo = "acme/collected";
    let pushed: Vec<String> = ["1", "2", "3"]
        .iter()
        .map(|t| push(&plain, repo, t))
        .collect();
    let tls = Tls::new();
    let reg = Registry::tls_with_auth(&tls, &plain.storage, "ci", "s3cret");
    let _trusted = Trusted::new(&tls, &reg.addr);
    let n = Node::new("collect").with_heartbeat("1s");
    let auth = n.dir.path().join("registry-auth.json");
    std::fs::write(
        &auth,
        format!(
            r#"{{"auths": {{"{}": {{"username": "ci", "password": "s3cret"}}}}}}"#,
            reg.addr
        ),
    )
    .unwrap();
    let n = n.with_config(&format!(
        "settle_window = \"1s\"\nregistry_auth = {:?}\nregistry_ca = {:?}\n[images]\nmin_age = \"1s\"",
        auth.display().to_string(),
        tls.ca.display().to_string()
    ));
    let m = n.module("app");
    let image = |t: &str| format!("{}/{repo}:{t}", reg.addr);
    let write =
        |t: &str| n.write_intention("app.toml", Module::new(&m, &image(t)).sh(&idle_after("up")));
    let agent = Agent::start(&n);
    let id_of = |r: &str| {
        let o = docker(&["image", "inspect", "--format", "{{.Id}}", r]);
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    };
    // The ID each engine gives the image (Podman's is its own).
    let mut ids = Vec::new();
    for t in ["1", "2", "3"] {
        write(t);
        n.wait_for(90, &format!("{m} converged on :{t}"), || {
            let (_, body) = agent.get(&format!("/v1/modules/{m}"));
            let v: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
            let id = id_of(&image(t));
            v["state"] == "converged" && !id.is_empty() && v["image_id"] == id.as_str()
        });
        ids.push(id_of(&image(t)));
    }
    if !on_podman() {
        assert_eq!(ids, pushed);
    }
    let present = |r: &str| docker(&["image", "inspect", r]).status.success();
    n.wait_for(60, "the first image collected", || !present(&image("1")));
    assert!(present(&image("2")), "the previous image stays");
    assert!(present(&image("3")), "the current image stays");
    let (code, out) = n.cli(&["images", "prune", "--dry-run"]);
    assert_eq!(code, Some(0), "{out}");
    let kept = |id: &str, why: &str| {
        let hex = id.strip_prefix("sha256:").unwrap_or(id);
        out.lines()
            .any(|l| l.starts_with("kept") && l.contains(&hex[..12]) && l.contains(why))
    };
    assert!(kept(&ids[1], "before its last image change"), "{out}");
    assert!(kept(&ids[2], "uses it"), "{out}");
    // Taken down with the module: what it pulled is asked to go too.
    n.remove_intention("app.toml");
    n.wait_for(60, "the module removed", || n.container(&m).is_none());
    let (code, out) = n.cli(&["images", "prune"]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("reclaimed 2 image(s)"), "{out}");
    assert!(!present(&image("2")) && !present(&image("3")), "{out}");
}
