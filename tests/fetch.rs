//! The agent's own pull against the real registry and the real engine
//! (Docker, and Podman when the test command points the suite at its
//! socket): blobs fetched into the spool through a proxy that cuts every
//! connection after a few hundred kilobytes, each resumed from the bytes
//! already synced (no byte fetched twice), one archive loaded, the image
//! ID checked against the config. A spool left by a power cut (bytes past
//! the synced mark) and a corrupted spool are each cut back or fetched
//! again; nothing wrong is loaded.

mod common;

use std::sync::atomic::Ordering;

use common::agent::Agent;
use common::desired::*;
use common::pulls::{Cutter, client, rt};
use common::registry::{Registry, docker_engine};
use common::*;
use serde_json::{Value as J, json};
use stead::engine::Engine;
use stead::engine::docker::DockerEngine;
use stead::model::time::format_rfc3339;
use stead::plane::envelope::SecretKey;
use stead::registry::fetch::{Origins, Spool, Tally, fetch_blob, pull};

/// Builds and pushes an image of the test image and one layer of `kib`
/// random KiB to `repo:tag` on `reg`; returns its reference there, its
/// config digest and its layers (digest, size) from the registry.
fn push_big(
    reg: &Registry,
    repo: &str,
    tag: &str,
    kib: u32,
) -> (String, String, Vec<(String, u64)>) {
    let built = push_built(
        reg,
        repo,
        tag,
        &format!(
            "FROM {IMAGE_1}\nRUN dd if=/dev/urandom of=/blob bs=1024 count={kib} 2>/dev/null && echo {tag} > /tag\n"
        ),
    );
    docker_engine(&["rmi", &built.0]);
    built
}

/// Builds `dockerfile` on the Docker Engine and pushes it to `repo:tag`
/// on `reg` (the engine keeps no tag of it); returns its reference there,
/// its config digest and its layers (digest, size) from the registry.
fn push_built(
    reg: &Registry,
    repo: &str,
    tag: &str,
    dockerfile: &str,
) -> (String, String, Vec<(String, u64)>) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("Dockerfile"), dockerfile).unwrap();
    common::registry::build_and_push(reg, repo, tag, dir.path())
}

#[test]
fn a_pull_of_the_agent_s_own_resumes_every_cut_and_loads_the_image_it_named() {
    require_engine();
    let reg = Registry::plain();
    let (_, config, layers) = push_big(&reg, "fetch/app", "1", 1200);
    // Through a proxy that cuts each connection after 300 KiB.
    let cutter = Cutter::start(&reg.addr, 300 * 1024);
    let reference = format!("{}/fetch/app:1", cutter.addr);
    let _ = docker(&["rmi", &reference]);
    let spool_dir = tempfile::tempdir().unwrap();
    let spool = Spool::new(spool_dir.path()).unwrap();
    let rt = rt();
    let tally = Tally::default();
    let fetched = rt
        .block_on(async {
            let engine = DockerEngine::connect(&engine_socket()).await.unwrap();
            pull(
                &Origins {
                    registries: &client(),
                    chunks: None,
                    peers: None,
                },
                &engine,
                &spool,
                &reference,
                &tally,
            )
            .await
        })
        .unwrap();
    assert_eq!(fetched.id, config, "{fetched:?}");
    assert_eq!(fetched.layers, layers.len());
    let need: u64 = layers[fetched.present..].iter().map(|l| l.1).sum();
    assert!(
        need > 1_000_000,
        "the new layer is fetched: {fetched:?} {layers:?}"
    );
    assert_eq!(fetched.wire, need, "every byte once: {fetched:?}");
    let p = tally.progress();
    assert_eq!((p.bytes, p.of), (need, need));
    assert!(
        cutter.cuts.load(Ordering::SeqCst) >= 3,
        "the transfers were cut: {}",
        cutter.cuts.load(Ordering::SeqCst)
    );
    // Over the wire: the blob bytes and no more than the calls around them.
    let down = cutter.down.load(Ordering::SeqCst);
    assert!(down >= need && down < need + 64 * 1024, "{down} for {need}");
    // The engine has it, by the tag, as the config's ID; it runs.
    let inspect = docker_ok(&["image", "inspect", "--format", "{{.Id}}", &reference]);
    assert_eq!(inspect.trim(), config);
    let out = docker_ok(&["run", "--rm", &reference, "cat", "/tag"]);
    assert_eq!(out.trim(), "1");
    // The spool keeps nothing of a loaded image.
    for (d, _) in &layers {
        assert!(!spool.path(d).exists(), "{d} left in the spool");
    }
    let _ = docker(&["rmi", "-f", &config]);
}

#[test]
fn a_spool_left_by_a_power_cut_or_corrupted_is_cut_back_or_fetched_again() {
    require_engine();
    let reg = Registry::plain();
    let (_, _, layers) = push_big(&reg, "fetch/spool", "1", 600);
    let (digest, size) = layers.last().unwrap().clone();
    let reference = format!("{}/fetch/spool:1", reg.addr);
    let r = stead::model::reference::Reference::parse(&reference).unwrap();
    let spool_dir = tempfile::tempdir().unwrap();
    let spool = Spool::new(spool_dir.path()).unwrap();
    let blob = common::registry::raw(
        &reg.addr,
        "GET",
        &format!("/v2/fetch/spool/blobs/{digest}"),
        &[],
        b"",
    )
    .2;
    assert_eq!(blob.len() as u64, size);
    let hex = digest.strip_prefix("sha256:").unwrap();
    let part = spool_dir.path().join("sha256").join(hex);
    let mark = spool_dir
        .path()
        .join("sha256")
        .join(format!("{hex}.synced"));
    let rt = rt();
    // The spool left holding `bytes` under a mark of `synced`; fetched
    // again, it holds the blob: the bytes that came over the wire.
    let resume = |bytes: &[u8], synced: u64| {
        std::fs::write(&part, bytes).unwrap();
        std::fs::write(&mark, synced.to_string()).unwrap();
        let tally = Tally::default();
        let wire = rt
            .block_on(fetch_blob(
                &client(),
                None,
                &r,
                &spool,
                &digest,
                size,
                &tally,
            ))
            .unwrap()
            .origin;
        assert_eq!(std::fs::read(&part).unwrap(), blob);
        assert_eq!(tally.progress().bytes, size);
        wire
    };

    // A power cut: the first 100,000 bytes synced and marked, then zeros
    // the filesystem kept past the mark. They are cut off, the rest asked
    // for from 100,000: only size - 100,000 bytes come.
    let mut kept = blob[..100_000].to_vec();
    kept.extend(std::iter::repeat_n(0u8, 50_000));
    assert_eq!(resume(&kept, 100_000), size - 100_000);

    // Corrupted bytes under a mark that says they are all there: the
    // digest finds it, the blob is fetched again whole.
    let mut bad = blob.clone();
    bad[size as usize / 2] ^= 0xff;
    assert_eq!(resume(&bad, size), size);

    // A spool longer than the blob can be is not trusted.
    let mut long = blob.clone();
    long.extend_from_slice(b"more");
    assert_eq!(resume(&long, size + 4), size);

    // A blob the registry does not have is the fetch's failure, at once.
    let missing = format!("sha256:{}", "0".repeat(64));
    let e = rt
        .block_on(fetch_blob(
            &client(),
            None,
            &r,
            &spool,
            &missing,
            10,
            &Tally::default(),
        ))
        .unwrap_err()
        .to_string();
    assert!(e.contains("404"), "{e}");
    assert!(!spool.path(&missing).exists());
}

#[test]
fn an_image_the_engine_would_not_load_as_named_is_refused() {
    require_engine();
    let reg = Registry::plain();
    let (_, _, layers) = push_big(&reg, "fetch/lie", "1", 64);
    // The registry's blob is replaced by other bytes under its digest's
    // path (a lying mirror): the digest check refuses it, nothing loads.
    let (digest, _) = layers.last().unwrap().clone();
    let hex = digest.strip_prefix("sha256:").unwrap();
    let data = reg
        .storage
        .join("docker/registry/v2/blobs/sha256")
        .join(&hex[..2])
        .join(hex)
        .join("data");
    let mut bytes = std::fs::read(&data).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x55;
    std::fs::write(&data, &bytes).unwrap();
    let reference = format!("{}/fetch/lie:1", reg.addr);
    let _ = docker(&["rmi", &reference]);
    let spool_dir = tempfile::tempdir().unwrap();
    let spool = Spool::new(spool_dir.path()).unwrap();
    let e = rt().block_on(async {
        let engine = DockerEngine::connect(&engine_socket()).await.unwrap();
        let e = pull(
            &Origins {
                registries: &client(),
                chunks: None,
                peers: None,
            },
            &engine,
            &spool,
            &reference,
            &Tally::default(),
        )
        .await;
        (e, engine.image_root(&reference).await.is_err())
    });
    let (e, absent) = e;
    let e = e.unwrap_err().to_string();
    assert!(e.contains("do not match the digest"), "{e}");
    assert!(absent, "nothing was loaded");
}

#[test]
fn the_agent_fetches_a_module_s_image_itself_resumed_and_runs_it_by_its_digest() {
    require_engine();
    let reg = Registry::plain();
    let (_, config, layers) = push_big(&reg, "fetch/module", "1", 900);
    let digest = common::registry::manifest_digest(&reg, "fetch/module", "1");
    // Every connection cut after 256 KiB, and slow (about 300 KiB/s);
    // the module names its digest.
    let cutter = Cutter::throttled(&reg.addr, 256 * 1024, std::time::Duration::from_millis(50));
    let image = format!("{}/fetch/module@{digest}", cutter.addr);
    let n = Node::new("fetchmod").with_heartbeat("1s");
    let m = n.module("app");
    n.write_intention(
        "app.toml",
        common::intention::Module::new(&m, &image).idle("fetched"),
    );
    let agent = Agent::start(&n);
    // While it comes, the status says how far it is.
    let need: u64 = layers[1..].iter().map(|l| l.1).sum();
    let mut seen = None;
    n.wait_for(120, "the module running its fetched image", || {
        let (_, status) = agent.get("/v1/status");
        let status: serde_json::Value = serde_json::from_str(&status).unwrap_or_default();
        if let Some(p) = status["node"]["fetching"]["images"].get(&image) {
            seen = Some(p.clone());
        }
        n.container(&m).is_some_and(|(_, s, _)| s == "running")
    });
    let seen = seen.expect("the fetch was in the status while it came");
    assert_eq!(seen["of"], need, "{seen}");
    assert!(seen["bytes"].as_u64().unwrap() <= need, "{seen}");
    let runs = docker_ok(&["inspect", "--format", "{{.Image}}", &n.container_id(&m)]);
    assert_eq!(runs.trim(), config);
    n.wait_logs(&m, "fetched");
    // Found again by its digest at every pass: not fetched twice.
    std::thread::sleep(std::time::Duration::from_secs(3));
    let (_, metrics) = agent.get("/metrics");
    assert!(
        metrics.contains("stead_image_fetches_total{by=\"agent\"} 1\n"),
        "{metrics}"
    );
    assert!(
        metrics.contains(&format!(
            "stead_image_fetch_bytes_total{{source=\"registry\"}} {need}\n"
        )),
        "{need}: {metrics}"
    );
    assert!(cutter.cuts.load(Ordering::SeqCst) >= 2);
    assert!(!metrics.contains("by=\"engine\""), "{metrics}");
    let (_, status) = agent.get("/v1/status");
    assert!(!status.contains("fetching"), "{status}");
}

#[test]
fn two_pulls_that_share_a_new_layer_fetch_it_once() {
    require_engine();
    let reg = Registry::plain();
    let (a_ref, a_id, a_layers) = push_built(
        &reg,
        "fetch/base",
        "1",
        &format!("FROM {IMAGE_1}\nRUN dd if=/dev/urandom of=/blob bs=1024 count=700 2>/dev/null\n"),
    );
    let (_, b_id, b_layers) = push_built(
        &reg,
        "fetch/app",
        "1",
        &format!("FROM {a_ref}\nRUN dd if=/dev/urandom of=/more bs=1024 count=100 2>/dev/null\n"),
    );
    docker_engine(&["rmi", &format!("{}/fetch/app:1", reg.addr), &a_ref]);
    assert_eq!(b_layers[..2], a_layers[..]);
    let (a, b) = (
        format!("{}/fetch/base:1", reg.addr),
        format!("{}/fetch/app:1", reg.addr),
    );
    let _ = docker(&["rmi", &a, &b]);
    let spool_dir = tempfile::tempdir().unwrap();
    let spool = Spool::new(spool_dir.path()).unwrap();
    let (fa, fb) = rt().block_on(async {
        let engine = DockerEngine::connect(&engine_socket()).await.unwrap();
        let registries = client();
        let (ta, tb) = (Tally::default(), Tally::default());
        let from = Origins {
            registries: &registries,
            chunks: None,
            peers: None,
        };
        tokio::join!(
            pull(&from, &engine, &spool, &a, &ta),
            pull(&from, &engine, &spool, &b, &tb)
        )
    });
    let (fa, fb) = (fa.unwrap(), fb.unwrap());
    assert_eq!(
        (fa.id.as_str(), fb.id.as_str()),
        (a_id.as_str(), b_id.as_str())
    );
    // The shared layer came once, by whichever pull took it first.
    assert_eq!(
        fa.wire + fb.wire,
        b_layers[1].1 + b_layers[2].1,
        "{fa:?} {fb:?}"
    );
    let _ = docker(&["rmi", "-f", &b_id, &a_id]);
}

/// A layer the engine had when the pull asked may have left it by the
/// time the archive comes (an image removed meanwhile): the engine
/// refuses an archive that leaves it out, and the pull fetches it and
/// loads again.
#[test]
fn a_layer_removed_from_the_engine_during_a_pull_is_fetched_and_the_image_loads() {
    require_engine();
    let reg = Registry::plain();
    let (base, _, base_layers) = push_built(
        &reg,
        "fetch/gone-base",
        "1",
        &format!("FROM {IMAGE_1}\nRUN dd if=/dev/urandom of=/base bs=1024 count=300 2>/dev/null\n"),
    );
    let (_, app_id, app_layers) = push_built(
        &reg,
        "fetch/gone-app",
        "1",
        &format!("FROM {base}\nRUN dd if=/dev/urandom of=/app bs=1024 count=1200 2>/dev/null\n"),
    );
    docker_engine(&["rmi", &format!("{}/fetch/gone-app:1", reg.addr), &base]);
    assert_eq!(app_layers[..2], base_layers[..]);
    // The base is in the engine under test, by the agent's own pull.
    let spool_dir = tempfile::tempdir().unwrap();
    let spool = Spool::new(spool_dir.path()).unwrap();
    let rt = rt();
    let engine = rt
        .block_on(DockerEngine::connect(&engine_socket()))
        .unwrap();
    let _ = docker(&["rmi", &base]);
    let fb = rt
        .block_on(pull(
            &Origins {
                registries: &client(),
                chunks: None,
                peers: None,
            },
            &engine,
            &spool,
            &base,
            &Tally::default(),
        ))
        .unwrap();
    // The app comes slowly; once its new layer is under way, the base
    // (the only image with the layer below it) is removed.
    let cutter = Cutter::throttled(&reg.addr, 0, std::time::Duration::from_millis(20));
    let app = format!("{}/fetch/gone-app:1", cutter.addr);
    let tally = Tally::default();
    let registries = client();
    let from = Origins {
        registries: &registries,
        chunks: None,
        peers: None,
    };
    let (fetched, removed) = rt.block_on(async {
        tokio::join!(pull(&from, &engine, &spool, &app, &tally), async {
            while tally.progress().bytes == 0 {
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
            let id = fb.id.clone();
            tokio::task::spawn_blocking(move || docker(&["rmi", "-f", &id]))
                .await
                .unwrap()
        })
    });
    assert!(removed.status.success(), "the base removed: {removed:?}");
    let fetched = fetched.unwrap();
    assert_eq!(fetched.id, app_id);
    // The base's own layer was fetched again once the engine lost it;
    // nothing else twice.
    assert_eq!(fetched.present, 1, "{fetched:?}");
    assert_eq!(
        fetched.wire,
        app_layers[1].1 + app_layers[2].1,
        "{fetched:?}"
    );
    let out = docker_ok(&["run", "--rm", &app, "ls", "/base", "/app"]);
    assert!(out.contains("/base") && out.contains("/app"), "{out}");
    let _ = docker(&["rmi", "-f", &app_id]);
}

#[test]
fn an_agent_killed_mid_fetch_resumes_from_what_its_spool_synced() {
    stopped_mid_fetch("fetchkill", "KILL");
}

#[test]
fn an_agent_stopped_mid_fetch_syncs_its_spool_and_resumes_from_every_byte() {
    stopped_mid_fetch("fetchterm", "TERM");
}

/// A module's image fetched by an agent stopped by `signal` once 1.5 MiB
/// of its 3 MiB layer are here, then by a new agent: the second asks only
/// for what the first had not made durable (SIGKILL: the spool syncs every
/// MiB, so at most the last MiB comes twice; SIGTERM: the pull's task,
/// dropped, syncs what it wrote, so nothing before the stop comes twice).
fn stopped_mid_fetch(node: &str, signal: &str) {
    require_engine();
    let reg = Registry::plain();
    let (_, config, layers) = push_big(&reg, "fetch/killed", "1", 3 * 1024);
    let need: u64 = layers[1..].iter().map(|l| l.1).sum();
    // Slow enough (about 300 KiB/s) to be stopped part-way, however late
    // a loaded machine's pass says how far it is.
    let cutter = Cutter::throttled(&reg.addr, 0, std::time::Duration::from_millis(50));
    let image = format!("{}/fetch/killed:1", cutter.addr);
    let n = Node::new(node).with_heartbeat("1s");
    let m = n.module("app");
    n.write_intention(
        "app.toml",
        common::intention::Module::new(&m, &image).idle("fetched"),
    );
    let mut agent = Agent::start(&n);
    n.wait_for(60, "1.5 MiB of the layer fetched", || {
        let (_, status) = agent.get("/v1/status");
        let status: serde_json::Value = serde_json::from_str(&status).unwrap_or_default();
        status["node"]["fetching"]["images"][&image]["bytes"]
            .as_u64()
            .is_some_and(|b| b >= 3 << 19)
    });
    let o = std::process::Command::new("kill")
        .args([format!("-{signal}"), agent.child.id().to_string()])
        .output()
        .unwrap();
    assert!(o.status.success());
    agent.child.wait().unwrap();
    let before = cutter.down.load(Ordering::SeqCst);
    assert!(before < need, "killed before the end: {before} of {need}");
    let agent = Agent::start(&n);
    n.wait_for(120, "the module running the image", || {
        n.container(&m).is_some_and(|(_, s, _)| s == "running")
    });
    let runs = docker_ok(&["inspect", "--format", "{{.Image}}", &n.container_id(&m)]);
    assert_eq!(runs.trim(), config);
    // The second agent asked only for what the first had not synced: at
    // most the last MiB before the kill comes twice (the spool is made
    // durable every MiB), plus the calls around the blob.
    let down = cutter.down.load(Ordering::SeqCst);
    assert!(down >= need, "{down} for {need}");
    assert!(
        down < need + (1 << 20) + 64 * 1024,
        "{down} for {need}: fetched again from the start"
    );
    let (_, metrics) = agent.get("/metrics");
    let fetched: u64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("stead_image_fetch_bytes_total{source=\"registry\"} "))
        .and_then(|v| v.parse().ok())
        .unwrap();
    let most = if signal == "KILL" {
        need - (1 << 19)
    } else {
        need - (3 << 19)
    };
    assert!(
        fetched <= most,
        "{signal}: the second agent fetched {fetched} of {need}"
    );
}

/// A node in a group at revision 1 (module `w` on the test image,
/// printing V=one), running it, its pass every second.
/// Fields drop in their order: the agent first, so that the node's drop
/// removes its containers with no agent left to make them again.
struct InAGroup {
    agent: Agent,
    plane: common::plane::Plane,
    key: SecretKey,
    n: Node,
    g: String,
    w: String,
}

impl InAGroup {
    fn start(tag: &str) -> InAGroup {
        let key = SecretKey::generate().unwrap();
        let plane = common::plane::Plane::start();
        let n = plane_node(tag, &plane, &key).with_heartbeat("1s");
        let g = format!("g-{}", n.id);
        let w = n.module("w");
        publish_in_group(&plane, &key, &n, &g, vec![module(&w, "one")]);
        let agent = Agent::start(&n);
        wait_v(&n, &w, "one");
        InAGroup {
            plane,
            key,
            n,
            g,
            w,
            agent,
        }
    }

    /// Publishes the group's `revision`: [`rolled_out`], with a download
    /// window when one is given.
    fn roll_out(&self, revision: u64, image: &str, start: u64, halt: bool, download: Option<&str>) {
        let mut doc = rolled_out(&self.g, revision, &self.w, image, start, halt);
        if let Some(d) = download {
            doc["rollout"]["download"] = d.into();
        }
        publish_group(&self.plane, &self.key, &self.g, &doc);
    }
}

/// A group's revision 2 running module `w` on `image`, rolled out from
/// `start` (`halt`: stopped there), revision 1 (`w` on the test image)
/// before it.
fn rolled_out(g: &str, revision: u64, w: &str, image: &str, start: u64, halt: bool) -> J {
    let mut two = module(w, "two");
    two["image"] = image.into();
    group_payload(
        g,
        revision,
        vec![two],
        json!({
            "rollout": {"start": format_rfc3339(start), "duration": "1s", "salt": "s", "halt": halt},
            "previous": {"revision": 1, "modules": [module(w, "one")]},
        }),
    )
}

/// `HH:MM` of `t` (seconds since the epoch), UTC.
fn hh_mm(t: u64) -> String {
    format!("{:02}:{:02}", t % 86_400 / 3600, t % 3600 / 60)
}

fn fetching(agent: &Agent) -> J {
    let (_, status) = agent.get("/v1/status");
    let status: J = serde_json::from_str(&status).unwrap_or_default();
    status["node"]["fetching"].clone()
}

/// A group's next revision names an image the device does not have: it is
/// fetched while the old one runs, before the device's turn (the status
/// says how many of the images ahead are here), and at the turn the
/// device takes it with the registry gone.
#[test]
fn a_group_s_next_image_is_fetched_ahead_of_the_turn_which_then_needs_no_network() {
    require_engine();
    let reg = Registry::plain();
    let (_, config, _) = push_big(&reg, "fetch/ahead", "2", 600);
    let image = format!("{}/fetch/ahead:2", reg.addr);
    let _ = docker(&["rmi", &image]);
    let at = InAGroup::start("fetchahead");
    let (n, w, agent) = (&at.n, &at.w, &at.agent);
    let old = docker_ok(&["inspect", "--format", "{{.Image}}", &n.container_id(w)]);

    // Revision 2 takes the new image a minute from now.
    let start = now() + 60;
    at.roll_out(2, &image, start, false, None);
    n.wait_for(40, "the next image fetched ahead", || {
        fetching(agent)["ahead"] == json!({"images": 1, "here": 1})
    });
    assert!(now() < start, "fetched before the turn");
    n.wait_for(30, "the report saying the image ahead here", || {
        at.plane
            .report_json(&n.id)
            .is_some_and(|r| r["fetching"]["ahead"] == json!({"images": 1, "here": 1}))
    });
    let runs = docker_ok(&["inspect", "--format", "{{.Image}}", &n.container_id(w)]);
    assert_eq!(runs, old, "the old image runs until the turn");
    let (_, cli) = n.cli(&["status"]);
    assert!(
        cli.contains("ahead of a rollout turn, 1/1 image here"),
        "{cli}"
    );

    // The registry gone, the turn takes the image fetched ahead.
    drop(reg);
    n.wait_for(90, "the new image running at the turn", || {
        n.container(w).is_some_and(|(_, s, _)| s == "running") && n.logs(w).contains("V=two")
    });
    let runs = docker_ok(&["inspect", "--format", "{{.Image}}", &n.container_id(w)]);
    assert_eq!(runs.trim(), config);
    let (_, metrics) = agent.get("/metrics");
    assert!(
        metrics.contains("stead_image_fetches_total{by=\"agent\"} 1\n"),
        "{metrics}\n{}",
        Agent::log(n)
    );
    // The status is the last pass's: the pass after the turn says it.
    n.wait_for(30, "nothing ahead once taken", || fetching(agent).is_null());
    let _ = docker(&["rmi", "-f", &config]);
}

/// A fetch ahead of a turn that a halt makes moot stops: nothing more
/// comes over the link, and the status no longer lists it.
#[test]
fn a_halt_stops_a_fetch_ahead_of_the_turn() {
    require_engine();
    let reg = Registry::plain();
    let (_, config, _) = push_big(&reg, "fetch/halted", "2", 3 * 1024);
    // About 300 KiB/s: under way for ten seconds.
    let cutter = Cutter::throttled(&reg.addr, 0, std::time::Duration::from_millis(50));
    let image = format!("{}/fetch/halted:2", cutter.addr);
    let at = InAGroup::start("fetchhalt");
    let (n, w, agent) = (&at.n, &at.w, &at.agent);

    let start = now() + 3600;
    at.roll_out(2, &image, start, false, None);
    n.wait_for(60, "the fetch ahead under way", || {
        fetching(agent)["images"][&image]["bytes"]
            .as_u64()
            .is_some_and(|b| b > 0)
    });
    at.roll_out(3, &image, start, true, None);
    n.wait_for(30, "the fetch stopped", || fetching(agent).is_null());
    // The proxy may still write the piece it read before the agent closed
    // the connection (a write into a socket whose peer has just closed
    // succeeds once): counted after a moment, nothing more comes.
    std::thread::sleep(std::time::Duration::from_secs(1));
    let stopped = cutter.down.load(Ordering::SeqCst);
    std::thread::sleep(std::time::Duration::from_secs(3));
    let after = cutter.down.load(Ordering::SeqCst);
    assert_eq!(after, stopped, "nothing more came over the link");
    assert!(after < 3 << 20, "stopped before the end: {after}");
    assert!(docker(&["image", "inspect", &config]).status.code() != Some(0));
    assert!(n.logs(w).contains("V=one") && !n.logs(w).contains("V=two"));
}

/// A rollout's download window holds a fetch ahead of the turn until it
/// opens: nothing comes over the link before, and the image is fetched
/// once it has.
#[test]
fn a_fetch_ahead_waits_for_its_download_window() {
    require_engine();
    let reg = Registry::plain();
    let (_, config, _) = push_big(&reg, "fetch/window", "2", 300);
    let cutter = Cutter::start(&reg.addr, 0);
    let image = format!("{}/fetch/window:2", cutter.addr);
    let at = InAGroup::start("fetchwindow");
    let (n, agent) = (&at.n, &at.agent);
    // The window opens at a minute at least 20 s away, for two minutes.
    let opens = (now() + 20).div_ceil(60) * 60;
    let window = format!("{}-{}", hh_mm(opens), hh_mm(opens + 120));
    at.roll_out(2, &image, now() + 3600, false, Some(&window));
    while now() + 3 < opens {
        assert!(fetching(agent).is_null(), "nothing ahead before {window}");
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    assert_eq!(
        cutter.down.load(Ordering::SeqCst),
        0,
        "nothing asked before {window}"
    );
    n.wait_for(60, "the image fetched ahead in its window", || {
        fetching(agent)["ahead"] == json!({"images": 1, "here": 1})
    });
    assert!(now() >= opens);
    assert!(docker(&["image", "inspect", &config]).status.success());
    let _ = docker(&["rmi", "-f", &config]);
}
