//! Disk stewardship against a Docker Engine of the test's own whose data
//! root is a small filesystem (a tmpfs), in a network namespace of its own, and a real registry on loopback
//! serving images of known sizes: five reloads leave the module's current
//! and previous image and touch nothing else; a pull that cannot fit is
//! refused before a layer is fetched and lands by itself once room is
//! freed; past the high threshold the oldest unused images go down to the
//! low one, and a critical disk turns readiness false.

mod common;

use common::agent::Agent;
use common::intention::Module;
use common::own_engine::OwnEngine;
use common::registry::Registry;
use common::*;

/// What a pushed image's extra layer holds.
enum Fill {
    /// Nothing: the test image with a label.
    None,
    /// A file of zeros this many MiB: large on disk, small compressed.
    Zeros(u64),
    /// A file of random bytes this many MiB: as large compressed.
    Random(u64),
}

/// Pushes `repo:tag` to the registry (built on the machine's engine and
/// removed from it after the push); returns its image ID.
fn push(reg: &Registry, repo: &str, tag: &str, fill: Fill) -> String {
    let target = format!("{}/{repo}:{tag}", reg.addr);
    let tmp = docker_ok(&["create", IMAGE_1, "true"]);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("fill.bin");
    let (source, mib) = match fill {
        Fill::None => ("", 0),
        Fill::Zeros(n) => ("/dev/zero", n),
        Fill::Random(n) => ("/dev/urandom", n),
    };
    if mib > 0 {
        let o = std::process::Command::new("dd")
            .args([
                &format!("if={source}"),
                &format!("of={}", file.display()),
                "bs=1M",
                &format!("count={mib}"),
            ])
            .output()
            .unwrap();
        assert!(o.status.success());
        docker_ok(&[
            "cp",
            &file.display().to_string(),
            &format!("{tmp}:/fill.bin"),
        ]);
    }
    docker_ok(&[
        "commit",
        "--change",
        &format!("LABEL org.example.pushed={repo}:{tag}"),
        &tmp,
        &target,
    ]);
    docker_ok(&["rm", &tmp]);
    docker_ok(&["push", &target]);
    let id = docker_ok(&["image", "inspect", "--format", "{{.Id}}", &target]);
    // The machine's engine keeps nothing of it.
    docker_ok(&["rmi", &target]);
    id
}

/// A module on the own engine (no network of its own there), idle.
fn module(name: &str, image: &str) -> Module {
    Module::new(name, image)
        .sh(&idle_after("up"))
        .set("network_mode", "\"none\"")
        .set("restart", "\"always\"")
}

/// The module's view in the API.
fn module_view(agent: &Agent, m: &str) -> serde_json::Value {
    let (_, body) = agent.get(&format!("/v1/modules/{m}"));
    serde_json::from_str(&body).unwrap_or_default()
}

/// Waits until the agent says the module is converged on this image.
fn wait_converged(agent: &Agent, n: &Node, m: &str, image: &str) {
    n.wait_for(90, &format!("{m} converged on {image}"), || {
        let v = module_view(agent, m);
        v["state"] == "converged" && v["image_id"] == image
    });
}

/// Files a reload of `m` and waits for it to end (`done`, `failed`) or,
/// with `until_faulted`, to fault; returns it.
fn reload(agent: &Agent, n: &Node, m: &str, until_faulted: bool) -> serde_json::Value {
    let (code, out) = agent.send(
        n,
        "POST",
        "/v1/reloads",
        &format!(r#"{{"module": "{m}", "reason": "disk test"}}"#),
    );
    assert_eq!(code, 202, "{out}");
    let id = serde_json::from_str::<serde_json::Value>(&out).unwrap()["id"]
        .as_u64()
        .unwrap();
    let mut last = serde_json::Value::Null;
    n.wait_for(120, &format!("reload {id} of {m} to end"), || {
        let (_, body) = agent.get(&format!("/v1/reloads/{id}"));
        last = serde_json::from_str(&body).unwrap_or_default();
        let s = last["status"].as_str().unwrap_or("");
        matches!(s, "done" | "failed") || (until_faulted && s == "faulted")
    });
    last
}

/// The registry's port.
fn port(reg: &Registry) -> u16 {
    reg.addr.rsplit(':').next().unwrap().parse().unwrap()
}

fn ids(images: &[(String, String)]) -> Vec<String> {
    images.iter().map(|(id, _)| id.clone()).collect()
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

#[test]
fn five_reloads_leave_the_current_and_the_previous_image_and_nothing_else_of_theirs() {
    require_engine();
    let own = OwnEngine::start(512);
    let reg = Registry::plain();
    own.forward(port(&reg));
    // Each version is published just before its reload: a reload lands
    // the newest.
    let mut versions = vec![push(&reg, "acme/gc", "1.0.0", Fill::None)];
    let other = push(&reg, "acme/other", "1", Fill::None);
    // An image this node did not pull: the operator's.
    let theirs = push(&reg, "acme/theirs", "1", Fill::None);
    own.docker_ok(&["pull", &format!("{}/acme/theirs:1", reg.addr)]);
    let n = Node::new("gc")
        .with_socket(&own.socket)
        .with_heartbeat("1s")
        .with_config("settle_window = \"1s\"\n[images]\nmin_age = \"1s\"");
    let (m, o) = (n.module("app"), n.module("other"));
    n.write_intention(
        "app.toml",
        module(&m, &format!("{}/acme/gc:1.0.0", reg.addr))
            .table("update", "range = \"^1.0\"\nhealth_window = \"1s\""),
    );
    n.write_intention(
        "other.toml",
        module(&o, &format!("{}/acme/other:1", reg.addr)),
    );
    let agent = Agent::start(&n);
    wait_converged(&agent, &n, &m, &versions[0]);
    wait_converged(&agent, &n, &o, &other);
    // The first version, pulled here, also named by hand (as `docker
    // build` or `docker tag` would): not this node's to collect.
    own.docker_ok(&["tag", &format!("{}/acme/gc:1.0.0", reg.addr), "mine/gc:dev"]);
    for p in 1..=5 {
        let want = push(&reg, "acme/gc", &format!("1.0.{p}"), Fill::None);
        let r = reload(&agent, &n, &m, false);
        assert_eq!(r["status"], "done", "reload to 1.0.{p}: {r:#}");
        assert_eq!(r["items"][0]["target_image"], want.as_str(), "{r:#}");
        wait_converged(&agent, &n, &m, &want);
        versions.push(want);
    }
    // What stays: the module's current and previous image, the other
    // module's, the one this node did not pull, and the one named by hand.
    let expected = sorted(vec![
        versions[0].clone(),
        versions[4].clone(),
        versions[5].clone(),
        other.clone(),
        theirs.clone(),
    ]);
    n.wait_for(60, "the old versions collected", || {
        sorted(ids(&own.images())) == expected
    });
    // A pass or two later, still exactly those.
    std::thread::sleep(std::time::Duration::from_secs(3));
    assert_eq!(sorted(ids(&own.images())), expected);
    // Each removal was said, naming the image, its size and why.
    let (_, events) = agent.get("/v1/events?limit=1000");
    let removed: Vec<&str> = events
        .lines()
        .filter(|l| l.contains("removed: no container uses it"))
        .collect();
    assert_eq!(removed.len(), 3, "{events}");
    for v in &versions[1..4] {
        let hex = v.strip_prefix("sha256:").unwrap();
        assert!(
            removed
                .iter()
                .any(|l| l.contains(&hex[..12]) && l.contains("MiB")),
            "{v}: {events}"
        );
    }
    let (_, metrics) = agent.get("/metrics");
    assert!(
        metrics.contains("stead_images_removed_total 3\n"),
        "{metrics}"
    );
    // The dry run lists the same: nothing would go, and why each stays.
    let (code, out) = n.cli(&["images", "prune", "--dry-run"]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("would reclaim 0 image(s)"), "{out}");
    let kept = |id: &str, why: &str| {
        let hex = id.strip_prefix("sha256:").unwrap();
        out.lines()
            .any(|l| l.starts_with("kept") && l.contains(&hex[..12]) && l.contains(why))
    };
    assert!(kept(&versions[5], "uses it"), "{out}");
    assert!(kept(&versions[4], "before its last image change"), "{out}");
    assert!(kept(&other, "uses it"), "{out}");
    assert!(kept(&theirs, "did not pull it"), "{out}");
    assert!(
        kept(
            &versions[0],
            "mine/gc:dev names it, a name this node did not pull"
        ),
        "{out}"
    );
    assert_eq!(sorted(ids(&own.images())), expected);
}

#[test]
fn a_pull_that_cannot_fit_is_refused_before_a_layer_and_lands_once_room_is_freed() {
    require_engine();
    let own = OwnEngine::start(300);
    let reg = Registry::plain();
    own.forward(port(&reg));
    // 160 MiB on disk, a few hundred KiB compressed.
    let big = push(&reg, "acme/big", "1", Fill::Zeros(160));
    let small = push(&reg, "acme/app", "1.0.0", Fill::None);
    // 60 MiB of random bytes: about 150 MiB unpacked by the estimate, and
    // 30 MiB must stay free of 300.
    let large = push(&reg, "acme/app", "1.1.0", Fill::Random(60));
    let n = Node::new("room")
        .with_socket(&own.socket)
        .with_heartbeat("1s")
        .with_config(
            "settle_window = \"1s\"\nreload_retry_interval = \"2s\"\n[images]\nmin_age = \"1s\"",
        );
    let (b, m) = (n.module("big"), n.module("app"));
    n.write_intention("big.toml", module(&b, &format!("{}/acme/big:1", reg.addr)));
    n.write_intention(
        "app.toml",
        module(&m, &format!("{}/acme/app:1.0.0", reg.addr))
            .table("update", "range = \"^1\"\nhealth_window = \"1s\""),
    );
    let agent = Agent::start(&n);
    wait_converged(&agent, &n, &b, &big);
    wait_converged(&agent, &n, &m, &small);
    let before = reg.requests().len();
    let r = reload(&agent, &n, &m, true);
    assert_eq!(r["status"], "faulted", "{r:#}");
    let failure = r["items"][0]["failure"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let root = own.root.display().to_string();
    assert!(
        failure.contains("no room for")
            && failure.contains("needs ~150.")
            && failure.contains(&format!("free on {root}")),
        "{r:#}"
    );
    // Refused before a layer: the registry served manifests and the
    // image's config (the reload reads its labels), no layer.
    let (code, _, manifest) = common::registry::raw(
        &reg.addr,
        "GET",
        "/v2/acme/app/manifests/1.1.0",
        &[(
            "Accept",
            "application/vnd.docker.distribution.manifest.v2+json",
        )],
        b"",
    );
    assert_eq!(code, 200);
    let manifest: serde_json::Value = serde_json::from_slice(&manifest).unwrap();
    let layers: Vec<&str> = manifest["layers"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|l| l["digest"].as_str())
        .collect();
    assert!(!layers.is_empty(), "{manifest:#}");
    let asked: Vec<String> = reg.requests()[before..].to_vec();
    assert!(
        !asked
            .iter()
            .any(|r| layers.iter().any(|l| r.contains(&format!("/blobs/{l}")))),
        "{asked:#?}"
    );
    // The module keeps running its version.
    assert_eq!(module_view(&agent, &m)["image_id"], small.as_str());
    // Room is freed: the big module goes, and its image with it (this node
    // pulled it and nothing needs it); the same request lands by itself.
    n.remove_intention("big.toml");
    n.wait_for(120, "the reload to land once room was freed", || {
        let (_, body) = agent.get(&format!("/v1/reloads/{}", r["id"]));
        serde_json::from_str::<serde_json::Value>(&body).is_ok_and(|v| v["status"] == "done")
    });
    wait_converged(&agent, &n, &m, &large);
    let left = ids(&own.images());
    assert!(!left.contains(&big), "{left:?}");
    // The previous version stays for a rollback.
    assert!(left.contains(&small), "{left:?}");
    let (_, events) = agent.get("/v1/events?limit=1000");
    assert!(
        events.contains("a pull needs ~150."),
        "the collection says why it ran: {events}"
    );
}

#[test]
fn past_the_high_threshold_the_oldest_unused_images_go_down_to_the_low_one() {
    require_engine();
    let own = OwnEngine::start(300);
    let reg = Registry::plain();
    own.forward(port(&reg));
    let fills: Vec<String> = (1..=3)
        .map(|i| push(&reg, &format!("acme/fill{i}"), "1", Fill::Zeros(40)))
        .collect();
    let n = Node::new("pressure")
        .with_socket(&own.socket)
        .with_heartbeat("1s")
        .with_config("settle_window = \"1s\"\n[images]\nmin_age = \"1s\"");
    // Pulled one after another: the first is the oldest.
    let agent = Agent::start(&n);
    let mut modules = Vec::new();
    for (i, id) in fills.iter().enumerate() {
        let m = n.module(&format!("fill{}", i + 1));
        n.write_intention(
            &format!("fill{}.toml", i + 1),
            module(&m, &format!("{}/acme/fill{}:1", reg.addr, i + 1)),
        );
        wait_converged(&agent, &n, &m, id);
        std::thread::sleep(std::time::Duration::from_millis(1100));
        modules.push(m);
    }
    // Gone, their images unused: below the threshold nothing is collected.
    for i in 1..=3 {
        n.remove_intention(&format!("fill{i}.toml"));
    }
    n.wait_for(60, "the modules removed", || {
        own.docker_ok(&["ps", "-aq"]).is_empty()
    });
    std::thread::sleep(std::time::Duration::from_secs(3));
    for id in &fills {
        assert!(
            ids(&own.images()).contains(id),
            "{id} kept below the threshold"
        );
    }
    // The engine's data root reads ok (the node's summary is the worst of
    // its filesystems: the store's is this machine's disk).
    let (_, status) = agent.get("/v1/status");
    let s: serde_json::Value = serde_json::from_str(&status).unwrap();
    let fs = &s["node"]["disk"]["filesystems"];
    let root = own.root.display().to_string();
    assert!(
        fs.as_array()
            .unwrap()
            .iter()
            .any(|f| f["path"] == root.as_str()
                && f["level"] == "ok"
                && f["roles"].as_array().unwrap().iter().any(|r| r == "images")),
        "{s:#}"
    );
    // Filled past 85 %: the oldest go until it is at 80 % or below.
    let filler = own.root.join("filler");
    let used = own.used_percent();
    let mib = (87 - used) * 3 + 1;
    let o = std::process::Command::new("dd")
        .args([
            "if=/dev/zero",
            &format!("of={}", filler.display()),
            "bs=1M",
            &format!("count={mib}"),
        ])
        .output()
        .unwrap();
    assert!(o.status.success());
    assert!(own.used_percent() >= 86, "{}", own.used_percent());
    n.wait_for(90, "collected down to the low threshold", || {
        own.used_percent() <= 80
    });
    let left = ids(&own.images());
    assert!(!left.contains(&fills[0]), "the oldest went: {left:?}");
    assert!(
        left.contains(&fills[2]),
        "only as many as needed went: {left:?}"
    );
    let (_, events) = agent.get("/v1/events?limit=1000");
    assert!(events.contains("data root is 85% used or more"), "{events}");
    let (_, metrics) = agent.get("/metrics");
    assert!(
        metrics.contains(&format!("stead_disk_free_bytes{{path=\"{root}\"")),
        "{metrics}"
    );
    // Almost full: readiness says why; with room again, ready.
    let used = own.used_percent();
    let more = own.root.join("more");
    // dd may stop at a full filesystem: what it wrote is what is tested.
    std::process::Command::new("dd")
        .args([
            "if=/dev/zero",
            &format!("of={}", more.display()),
            "bs=1M",
            &format!("count={}", (99 - used) * 3),
        ])
        .output()
        .unwrap();
    n.wait_for(30, "readiness false on a critical disk", || {
        let (code, body) = agent.get("/readyz");
        code == 503 && body.contains("disk critical") && body.contains(&root)
    });
    std::fs::remove_file(&more).unwrap();
    std::fs::remove_file(&filler).unwrap();
    n.wait_for(30, "ready again", || agent.get("/readyz").0 == 200);
}

/// Free bytes on the filesystem of `path`, as `df` says them.
fn free_bytes(path: &std::path::Path) -> u64 {
    let o = std::process::Command::new("df")
        .args(["-B1", "--output=avail"])
        .arg(path)
        .output()
        .unwrap();
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .last()
        .and_then(|l| l.trim().parse().ok())
        .expect("df says the free bytes")
}

#[test]
fn below_its_reserve_the_store_stops_writing_events_and_still_takes_intentions() {
    require_engine();
    let n = Node::new("reserve").with_heartbeat("1s");
    // The store's directory on a filesystem of 16 MiB: its reserve is 5 %.
    let data = n.data();
    let _fs = Tmpfs::mount(&data, "16m");
    let agent = Agent::start(&n);
    let status = || -> serde_json::Value {
        serde_json::from_str(&agent.get("/v1/status").1).unwrap_or_default()
    };
    n.wait_for(30, "the disks measured", || {
        status()["node"]["disk"]["events_paused"] == false
    });
    // Filled to below the reserve (819 KiB): events stop.
    let filler = data.join("filler");
    let leave = 600 * 1024;
    let fill = free_bytes(&data).saturating_sub(leave);
    std::fs::write(&filler, vec![0u8; fill as usize]).unwrap();
    n.wait_for(30, "events paused", || {
        status()["node"]["disk"]["events_paused"] == true
    });
    let last = |a: &Agent| -> u64 {
        let v: serde_json::Value =
            serde_json::from_str(&a.get("/v1/events?limit=1000").1).unwrap_or_default();
        v["next"].as_u64().unwrap_or(0)
    };
    let before = last(&agent);
    // An intention is still taken, and acted on; no event is written.
    let m = n.module("kept");
    let body =
        serde_json::json!({"name": m, "image": IMAGE_1, "command": ["sh", "-c", idle_after("up")]});
    let (code, out) = agent.send(&n, "PUT", &format!("/v1/intentions/{m}"), &body.to_string());
    assert_eq!(code, 201, "{out}");
    n.wait_for(60, "the module created", || {
        n.container(&m).is_some_and(|(_, s, _)| s == "running")
    });
    assert_eq!(last(&agent), before, "no event written below the reserve");
    // With room again, events are written.
    std::fs::remove_file(&filler).unwrap();
    n.wait_for(30, "events written again", || {
        status()["node"]["disk"]["events_paused"] == false
    });
    let (code, out) = agent.send(&n, "DELETE", &format!("/v1/intentions/{m}"), "");
    assert!(code == 200 || code == 204, "{code} {out}");
    n.wait_for(30, "an event again", || last(&agent) > before);
}
