//! Delegated keys and two-key releases against the real parts (Debian's
//! nginx on loopback, a registry, the real agent, engine and store, the
//! operator's tool): a root made with the CLI delegates a group to a
//! team's key, whose group document is taken for its group and refused
//! by name for another; and a root that asks for an allow-list of image
//! digests, signed by two offline keys, runs a listed digest, refuses an
//! unlisted one by name (module, image), takes a newer list, and refuses
//! a stale list's version and one signed by the online key alone.

mod common;

use common::agent::Agent;
use common::desired::*;
use common::plane::{Plane, plane_cli, plane_cli_with};
use common::registry::Registry;
use common::*;
use serde_json::{Value as J, json};
use stead::plane::envelope::SecretKey;

fn config(plane: &Plane, keys: &[&SecretKey]) -> String {
    let keys: Vec<String> = keys
        .iter()
        .map(|k| format!("{:?}", k.public().to_base64()))
        .collect();
    format!(
        "[plane]\nurl = {:?}\ntrusted_keys = [{}]\npoll_interval = \"1s\"",
        plane.base(),
        keys.join(", ")
    )
}

/// Keys written to files in `d`, by name.
fn key_file(d: &tempfile::TempDir, name: &str, k: &SecretKey) -> String {
    let p = d.path().join(name);
    stead::host::keyfile::write(&p, k).unwrap();
    p.to_str().unwrap().to_string()
}

/// Waits for `group`'s status in `/v1/plane` to satisfy `f`.
fn wait_group(n: &Node, agent: &Agent, group: &str, what: &str, f: impl Fn(&J) -> bool) -> J {
    let p = wait_plane(n, agent, what, |p| {
        p["groups"]
            .as_array()
            .and_then(|gs| gs.iter().find(|g| g["group"] == group))
            .is_some_and(&f)
    });
    p["groups"]
        .as_array()
        .and_then(|gs| gs.iter().find(|g| g["group"] == group))
        .cloned()
        .unwrap()
}

/// Makes root version 1 with the CLI (signed by the devices' first key
/// and its one root key) with `extra` arguments to `root init`, and
/// publishes it on the plane.
fn publish_root(
    plane: &Plane,
    d: &tempfile::TempDir,
    first: &SecretKey,
    root: &SecretKey,
    online: &SecretKey,
    extra: &[&str],
) -> String {
    let b64 = |k: &SecretKey| k.public().to_base64();
    let file = |name: &str| d.path().join(name).to_str().unwrap().to_string();
    let (kf, kr) = (key_file(d, "first", first), key_file(d, "root", root));
    let mut args = vec![
        "root".to_string(),
        "init".into(),
        "--root-key".into(),
        b64(root),
        "--documents-key".into(),
        b64(online),
        "--out".into(),
        file("1.payload"),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    plane_cli(&args);
    plane_cli(&[
        "root",
        "sign",
        "--key",
        &kf,
        "--key",
        &kr,
        "--in",
        &file("1.payload"),
        "--out",
        &file("1.json"),
    ]);
    plane_cli(&[
        "root",
        "verify",
        "--trusted",
        &b64(first),
        "--site",
        plane.root().to_str().unwrap(),
        "--in",
        &file("1.json"),
        "--publish",
    ])
}

#[test]
fn a_delegated_key_signs_its_own_group_and_is_refused_another_by_name() {
    let [first, root, online, team] = std::array::from_fn(|_| SecretKey::generate().unwrap());
    let plane = Plane::start();
    let n = Node::new("deleg-scope").with_config(&config(&plane, &[&first]));
    let (mine, theirs) = ("deleg-scope-a", "deleg-scope-b");
    let (ma, mb) = (n.module("wa"), n.module("wb"));
    let d = tempfile::tempdir().unwrap();
    let spec = format!(
        "name=team-a;keys={};groups={mine}",
        team.public().to_base64()
    );
    let said = publish_root(&plane, &d, &first, &root, &online, &["--delegate", &spec]);
    assert!(said.contains("delegation team-a: keys"), "{said}");
    // The node's document (the online key's) lists the team's group,
    // whose document the team's key alone signed: taken.
    // The team's CI signs its group's document with the CLI.
    let payload_file = d.path().join("group.json");
    std::fs::write(
        &payload_file,
        serde_json::to_vec(&json!({"modules": [module(&ma, "team")]})).unwrap(),
    )
    .unwrap();
    let team_file = key_file(&d, "team", &team);
    let signed_file = d.path().join("group.signed");
    plane_cli(&[
        "sign-group",
        "--key",
        &team_file,
        "--group",
        mine,
        "--revision",
        "1",
        "--in",
        payload_file.to_str().unwrap(),
        "--out",
        signed_file.to_str().unwrap(),
    ]);
    plane.publish_raw_path(
        &format!("groups/{mine}/desired.json"),
        &std::fs::read(&signed_file).unwrap(),
    );
    plane.publish(
        &n.id,
        &sign(&online, &node_payload(&n, 1, &[mine], vec![], json!({}))),
    );
    let agent = Agent::start(&n);
    let p = wait_plane(&n, &agent, "root version 1", |p| p["root"]["version"] == 1);
    assert_eq!(p["root"]["delegations"], json!(["team-a"]), "{p:#}");
    assert!(p["root"].get("allow_list").is_none(), "{p:#}");
    wait_v(&n, &ma, "team");
    // Another team's group, signed by the team's key: refused by name,
    // and the node's document that lists it with it (a node runs its
    // groups whole or not at all); nothing of it runs.
    publish_group(
        &plane,
        &team,
        theirs,
        &group_payload(theirs, 1, vec![module(&mb, "team")], json!({})),
    );
    plane.publish(
        &n.id,
        &sign(
            &online,
            &node_payload(&n, 2, &[mine, theirs], vec![], json!({})),
        ),
    );
    let p = wait_plane(&n, &agent, "the other team's group refused", |p| {
        p["refusal"]["class"] == "out-of-scope"
    });
    let e = p["refusal"]["detail"].as_str().unwrap();
    assert!(
        e.contains("delegation team-a")
            && e.contains(team.public().id().as_str())
            && e.contains(&format!("group {theirs} is not one of its groups ({mine})")),
        "{p:#}"
    );
    assert_eq!(p["held"]["revision"], 1, "{p:#}");
    assert!(
        n.container(&mb).is_none(),
        "nothing of the refused group runs"
    );
    // The online key still signs any group: the same node document is
    // taken then.
    publish_group(
        &plane,
        &online,
        theirs,
        &group_payload(theirs, 2, vec![module(&mb, "online")], json!({})),
    );
    wait_v(&n, &mb, "online");
    wait_v(&n, &ma, "team");
    // The team's key signs no node's document (its delegation has no
    // module prefix).
    plane.publish(
        &n.id,
        &sign(&team, &node_payload(&n, 3, &[mine], vec![], json!({}))),
    );
    let p = wait_plane(&n, &agent, "the team's node document refused", |p| {
        p["refusal"]["class"] == "out-of-scope"
    });
    assert!(
        p["refusal"]["detail"]
            .as_str()
            .unwrap()
            .contains("a node's document is signed only by"),
        "{p:#}"
    );
    // After a restart, the team's group document held still stands as the
    // floor (its delegation signed it).
    drop(agent);
    let agent = Agent::start(&n);
    let st = wait_group(&n, &agent, mine, "the team's group held", |g| {
        g["revision"] == 1
    });
    assert!(st["revoked"].is_null(), "{st:#}");
}

#[test]
fn only_images_in_the_allow_list_two_offline_keys_signed_run() {
    let [first, root, online, o1, o2] = std::array::from_fn(|_| SecretKey::generate().unwrap());
    let registry = Registry::plain();
    let (_, listed) = registry.push("deleg/app", "1", &[("v", "listed")]);
    let (_, unlisted) = registry.push("deleg/app", "2", &[("v", "unlisted")]);
    let repo = format!("{}/deleg/app", registry.addr);
    let plane = Plane::start();
    let n = Node::new("deleg-allow").with_config(&config(&plane, &[&first]));
    let m = n.module("app");
    let d = tempfile::tempdir().unwrap();
    let b64 = |k: &SecretKey| k.public().to_base64();
    let file = |name: &str| d.path().join(name).to_str().unwrap().to_string();
    publish_root(
        &plane,
        &d,
        &first,
        &root,
        &online,
        &[
            "--allow-list-key",
            &b64(&o1),
            "--allow-list-key",
            &b64(&o2),
            "--allow-list-threshold",
            "2",
        ],
    );
    let (k1, k2, ko) = (
        key_file(&d, "o1", &o1),
        key_file(&d, "o2", &o2),
        key_file(&d, "online", &online),
    );
    let site = plane.root();
    let site = site.to_str().unwrap();
    // Each allow-list: written, signed by both offline keys, checked and
    // published with the CLI.
    let list = |name: &str, images: &[&str], after: Option<&str>, keys: &[&str]| {
        let mut args = vec!["root", "allow-list", "--out"];
        let payload = file(&format!("{name}.payload"));
        args.push(&payload);
        for i in images {
            args.extend(["--image", i]);
        }
        if let Some(a) = after {
            args.extend(["--after", a]);
        }
        plane_cli(&args);
        let mut args = vec!["root", "sign", "--in", &payload];
        for k in keys {
            args.extend(["--key", k]);
        }
        let signed = file(&format!("{name}.json"));
        args.extend(["--out", &signed]);
        plane_cli(&args);
        signed
    };
    let v1 = list("v1", &[&format!("{repo}@{listed}")], None, &[&k1, &k2]);
    let trusted = b64(&first);
    let verify = |l: &str| {
        plane_cli_with(
            &[
                "root",
                "verify",
                "--trusted",
                &trusted,
                "--site",
                site,
                "--allow-list",
                l,
                "--publish",
            ],
            "",
        )
    };
    let (ok, out, err) = verify(&v1);
    assert!(
        ok && out.contains("allow-list version 1: 1 image(s)"),
        "{out}{err}"
    );
    // The listed digest runs.
    let app = |digest: &str, v: &str| {
        let mut j = module(&m, v);
        j["image"] = json!(format!("{repo}@{digest}"));
        j
    };
    plane.publish(
        &n.id,
        &sign(&online, &payload(&n, 1, vec![app(&listed, "listed")])),
    );
    let agent = Agent::start(&n);
    wait_v(&n, &m, "listed");
    // An unlisted digest, signed by the online key: refused by name,
    // nothing created.
    let since = unix_now();
    plane.publish(
        &n.id,
        &sign(&online, &payload(&n, 2, vec![app(&unlisted, "unlisted")])),
    );
    let p = wait_plane(&n, &agent, "the unlisted image refused", |p| {
        p["refusal"]["class"] == "unlisted-image"
    });
    let detail = p["refusal"]["detail"].as_str().unwrap();
    assert!(
        detail.contains(&format!("module {m}: image \"{repo}@{unlisted}\""))
            && detail.contains("is not in the allow-list (version 1)"),
        "{p:#}"
    );
    // A tag alone is refused too: every image must be pinned.
    plane.publish(
        &n.id,
        &sign(
            &online,
            &payload(
                &n,
                3,
                vec![{
                    let mut j = module(&m, "tag");
                    j["image"] = json!(format!("{repo}:2"));
                    j
                }],
            ),
        ),
    );
    wait_plane(&n, &agent, "the tag refused", |p| {
        p["refusal"]["detail"]
            .as_str()
            .is_some_and(|d| d.contains("is not pinned by digest"))
    });
    assert_eq!(n.creates_since(&m, since), 0);
    // A list signed by the online key alone is refused by the CLI and by
    // the device.
    let forged = list(
        "forged",
        &[&format!("{repo}@{listed}"), &format!("{repo}@{unlisted}")],
        Some(&v1),
        &[&ko],
    );
    let (ok, out, err) = verify(&forged);
    assert!(
        !ok && err.contains("signed by 0 of the allow-list role's keys, which needs 2"),
        "{out}{err}"
    );
    plane.publish_raw_path("allow-list.json", &std::fs::read(&forged).unwrap());
    wait_plane(&n, &agent, "the forged list refused", |p| {
        p["root"]["error"]
            .as_str()
            .is_some_and(|e| e.contains("signed by 0 of the allow-list role's keys"))
    });
    // Version 2 lists the second digest: the document naming it is taken.
    let v2 = list(
        "v2",
        &[&format!("{repo}@{listed}"), &format!("{repo}@{unlisted}")],
        Some(&v1),
        &[&k1, &k2],
    );
    let (ok, out, err) = verify(&v2);
    assert!(ok, "{out}{err}");
    plane.publish(
        &n.id,
        &sign(&online, &payload(&n, 4, vec![app(&unlisted, "now-listed")])),
    );
    wait_v(&n, &m, "now-listed");
    let p = plane_state(&agent);
    assert!(p["root"]["error"].is_null(), "{p:#}");
    // The status says the list held.
    assert_eq!(p["root"]["allow_list"]["version"], 2, "{p:#}");
    assert_eq!(p["root"]["allow_list"]["images"], 2, "{p:#}");
    assert_eq!(p["root"]["allow_list"]["threshold"], 2, "{p:#}");
    assert!(
        p["root"]["allow_list"]["expires"].as_u64() > Some(now()),
        "{p:#}"
    );
    // The stale version 1 served again: refused by the CLI and the device,
    // which keeps version 2 (through a restart too).
    let (ok, out, err) = verify(&v1);
    assert!(
        !ok && err.contains("allow-list version 1 is older than version 2 held"),
        "{out}{err}"
    );
    plane.publish_raw_path("allow-list.json", &std::fs::read(&v1).unwrap());
    wait_plane(&n, &agent, "the stale list refused", |p| {
        p["root"]["error"]
            .as_str()
            .is_some_and(|e| e.contains("allow-list version 1 is older than version 2 held"))
    });
    drop(agent);
    let agent = Agent::start(&n);
    wait_plane(&n, &agent, "the stale list refused after a restart", |p| {
        p["root"]["error"]
            .as_str()
            .is_some_and(|e| e.contains("older than version 2 held"))
    });
    assert!(Agent::log(&n).contains("took allow-list version 2"));
}
