//! Layers rebuilt from chunks, against the real registry, the real
//! engine (Docker, and Podman when the test command points the suite at
//! its socket), nginx as the plane's static host and Debian's `casync`:
//! `stead-plane chunks` publishes an image's layers as casync indexes and
//! a chunk store, which casync reads as its own (the same index bytes,
//! the layer extracted from the store over HTTP); a device that holds the
//! previous version of an image fetches only the changed chunks of its
//! new layer, rebuilds it, checks its diff ID and loads it. A chunk that
//! lies, or no index, costs a pull of the layer; nothing wrong is loaded.

mod common;

use common::agent::Agent;
use common::plane::Plane;
use common::pulls::{client, rt};
use common::registry::{Registry, docker_engine};
use common::*;
use stead::engine::docker::DockerEngine;
use stead::net::http::Http;
use stead::registry::chunks::ChunkSource;
use stead::registry::fetch::{Fetched, Origins, Spool, Tally, pull};

/// Bytes that do not compress, from a seed.
fn noise(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E3779B97F4A7C15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// An application image: the test image and a layer of one directory
/// holding `data` (the same bytes and time in every version) and a file
/// that says `version`. Pushed to `repo:version` on `reg`; its reference
/// there, its config digest, and its layers (digest, size, media type).
fn push_app(
    reg: &Registry,
    repo: &str,
    version: &str,
    data: &std::path::Path,
) -> (String, String, Vec<(String, u64)>) {
    let dir = tempfile::tempdir().unwrap();
    let app = dir.path().join("app");
    std::fs::create_dir(&app).unwrap();
    std::fs::copy(data, app.join("data.bin")).unwrap();
    let stamp = std::fs::metadata(data).unwrap().modified().unwrap();
    std::fs::File::options()
        .write(true)
        .open(app.join("data.bin"))
        .unwrap()
        .set_modified(stamp)
        .unwrap();
    std::fs::write(app.join("version"), version).unwrap();
    std::fs::write(
        dir.path().join("Dockerfile"),
        format!("FROM {IMAGE_1}\nCOPY app /app\n"),
    )
    .unwrap();
    let built = common::registry::build_and_push(reg, repo, version, dir.path());
    docker_engine(&["rmi", &built.0]);
    built
}

/// The diff IDs of an image's config, from the registry.
fn diff_ids(reg: &Registry, repo: &str, config: &str) -> Vec<String> {
    let c = common::registry::raw(
        &reg.addr,
        "GET",
        &format!("/v2/{repo}/blobs/{config}"),
        &[],
        b"",
    );
    let c: serde_json::Value = serde_json::from_slice(&c.2).unwrap();
    c["rootfs"]["diff_ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_str().unwrap().to_string())
        .collect()
}

fn publish_chunks(plane: &Plane, images: &[&str]) -> String {
    let mut args = vec![
        "chunks".to_string(),
        "--site".into(),
        plane.root().display().to_string(),
    ];
    args.extend(images.iter().map(|s| s.to_string()));
    let out = std::process::Command::new(common::bins::workspace_bin("stead-plane"))
        .args(&args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "stead-plane chunks: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn pull_with(source: Option<&ChunkSource>, reference: &str, spool: &Spool) -> Fetched {
    rt().block_on(async {
        let engine = DockerEngine::connect(&engine_socket()).await.unwrap();
        pull(
            &Origins {
                registries: &client(),
                chunks: source,
                peers: None,
            },
            &engine,
            spool,
            reference,
            &Tally::default(),
        )
        .await
    })
    .unwrap()
}

fn sha256_file(p: &std::path::Path) -> String {
    let b = std::fs::read(p).unwrap();
    let d = ring::digest::digest(&ring::digest::SHA256, &b);
    d.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn a_new_version_moves_only_its_changed_chunks_and_a_lying_chunk_costs_a_pull() {
    require_engine();
    let reg = Registry::plain();
    let plane = Plane::start();
    let work = tempfile::tempdir().unwrap();
    let data = work.path().join("data.bin");
    std::fs::write(&data, noise(4 << 20, 7)).unwrap();
    let repo = format!("chunks/app-{}", std::process::id());
    let (v1, config1, _) = push_app(&reg, &repo, "1", &data);
    let (v2, config2, layers2) = push_app(&reg, &repo, "2", &data);
    let said = publish_chunks(&plane, &[&v1, &v2]);
    assert!(said.contains("layers indexed"), "{said}");
    let base: http::Uri = plane.base().parse().unwrap();
    let source = ChunkSource::new(Http::new(None).unwrap(), &base);
    let spool_dir = tempfile::tempdir().unwrap();
    let spool = Spool::new(spool_dir.path()).unwrap();
    for c in [&config1, &config2] {
        let _ = docker(&["rmi", "-f", c]);
    }

    // Version 1 arrives whole: nothing here to rebuild it from.
    let f1 = pull_with(Some(&source), &v1, &spool);
    assert_eq!(f1.id, config1);
    assert_eq!(f1.rebuilt, 0, "{f1:?}");
    assert!(f1.wire > 4 << 20, "{f1:?}");

    // Version 2: its application layer from version 1's chunks and the
    // few the host has of the change; nothing of it from the registry.
    let app_blob = layers2.last().unwrap().1;
    let before = plane.requests().len();
    let f2 = pull_with(Some(&source), &v2, &spool);
    assert_eq!(f2.id, config2, "{f2:?}");
    eprintln!("version 2: {f2:?}, its layer blob {app_blob} bytes");
    assert_eq!(f2.rebuilt, 1, "{f2:?}");
    assert_eq!(f2.wire, 0, "no blob from the registry: {f2:?}");
    assert!(
        f2.local > 3 << 20,
        "most of the layer from version 1: {f2:?}"
    );
    assert!(
        f2.chunks * 4 < app_blob,
        "{} bytes of chunks for a layer of {app_blob}: {f2:?}",
        f2.chunks
    );
    // What nginx sent is what the pull counted.
    let sent: u64 = plane.requests()[before..].iter().map(|r| r.bytes).sum();
    assert_eq!(sent, f2.chunks, "{:?}", &plane.requests()[before..]);
    let out = docker_ok(&["run", "--rm", &v2, "cat", "/app/version"]);
    assert_eq!(out, "2");
    let inspect = docker_ok(&["image", "inspect", "--format", "{{.Id}}", &v2]);
    assert_eq!(inspect, config2);
    let sum = docker_ok(&["run", "--rm", &v2, "sha256sum", "/app/data.bin"]);
    let want = sha256_file(&data);
    assert!(sum.starts_with(&want), "{sum} for {want}");
    assert!(
        std::fs::read_dir(spool_dir.path().join("sha256"))
            .unwrap()
            .next()
            .is_none(),
        "the spool keeps nothing of a loaded image"
    );

    // Version 3, whose new chunks the host holds wrong (another chunk's
    // bytes under their names): the layer is pulled whole, and right.
    let (v3, config3, layers3) = push_app(&reg, &repo, "3", &data);
    publish_chunks(&plane, &[&v3]);
    let index_of = |config: &str| {
        let id = diff_ids(&reg, &repo, config).pop().unwrap();
        let b = std::fs::read(plane.root().join(format!("chunks/{}.caibx", &id[7..]))).unwrap();
        stead::model::chunk::Index::decode(&b).unwrap()
    };
    let (index2, index3) = (index_of(&config2), index_of(&config3));
    let store = plane.root().join("chunks/store.castr");
    let other = std::fs::read(store.join(index2.chunks[0].id.store_path())).unwrap();
    let mut lied = 0;
    for c in &index3.chunks {
        if !index2.chunks.iter().any(|o| o.id == c.id) {
            std::fs::write(store.join(c.id.store_path()), &other).unwrap();
            lied += 1;
        }
    }
    assert!(lied > 0, "version 3 stored new chunks");
    let _ = docker(&["rmi", "-f", &config3]);
    let f3 = pull_with(Some(&source), &v3, &spool);
    assert_eq!(f3.id, config3, "{f3:?}");
    assert_eq!(f3.rebuilt, 0, "{f3:?}");
    assert_eq!(
        f3.wire,
        layers3.last().unwrap().1,
        "the layer pulled whole: {f3:?}"
    );
    assert_eq!(docker_ok(&["run", "--rm", &v3, "cat", "/app/version"]), "3");

    // Without an index (a host with no chunks), the pull of today.
    let none = ChunkSource::new(
        Http::new(None).unwrap(),
        &format!("{}/elsewhere", plane.base()).parse().unwrap(),
    );
    let _ = docker(&["rmi", "-f", &config2]);
    let f2b = pull_with(Some(&none), &v2, &spool);
    assert_eq!(
        (f2b.id.as_str(), f2b.rebuilt, f2b.chunks),
        (config2.as_str(), 0, 0),
        "{f2b:?}"
    );
    assert_eq!(f2b.wire, app_blob);
    for c in [&config1, &config2, &config3] {
        let _ = docker(&["rmi", "-f", c]);
    }
}

#[test]
fn casync_reads_the_published_index_and_store_as_its_own() {
    require_engine();
    let reg = Registry::plain();
    let plane = Plane::start();
    let work = tempfile::tempdir().unwrap();
    let data = work.path().join("data.bin");
    std::fs::write(&data, noise(1 << 20, 11)).unwrap();
    let repo = format!("chunks/casync-{}", std::process::id());
    let (v1, config, _) = push_app(&reg, &repo, "1", &data);
    publish_chunks(&plane, &[&v1]);
    // Publishing again reads no layer again.
    let again = publish_chunks(&plane, &[&v1]);
    assert!(!again.contains("bytes in"), "{again}");
    for diff in diff_ids(&reg, &repo, &config) {
        let hex = &diff[7..];
        let index = plane.root().join(format!("chunks/{hex}.caibx"));
        // casync extracts the layer from the store, over HTTP from nginx.
        let out = work.path().join(format!("{hex}.tar"));
        let store = format!("{}/chunks/store.castr", plane.base());
        let x = std::process::Command::new("casync")
            .args(["extract", &format!("--store={store}")])
            .arg(&index)
            .arg(&out)
            .output()
            .unwrap();
        assert!(
            x.status.success(),
            "casync extract: {}",
            String::from_utf8_lossy(&x.stderr)
        );
        assert_eq!(sha256_file(&out), hex, "the layer casync put together");
        // And cuts it into the same index.
        let own = work.path().join(format!("{hex}.caibx"));
        let m = std::process::Command::new("casync")
            .args([
                "make",
                &format!("--store={}", work.path().join("own.castr").display()),
            ])
            .arg(&own)
            .arg(&out)
            .output()
            .unwrap();
        assert!(
            m.status.success(),
            "casync make: {}",
            String::from_utf8_lossy(&m.stderr)
        );
        assert_eq!(
            std::fs::read(&own).unwrap(),
            std::fs::read(&index).unwrap(),
            "{hex}"
        );
    }
    assert!(plane.count("GET", "/chunks/store.castr/", 200) > 0);
}

/// The value of a metric line, 0 when absent.
fn metric(metrics: &str, line: &str) -> u64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(line)?.trim().parse().ok())
        .unwrap_or(0)
}

#[test]
fn an_agent_whose_plane_publishes_chunks_updates_a_module_by_its_changed_chunks() {
    use common::desired::*;
    require_engine();
    let reg = Registry::plain();
    let plane = Plane::start();
    let work = tempfile::tempdir().unwrap();
    let data = work.path().join("data.bin");
    std::fs::write(&data, noise(4 << 20, 13)).unwrap();
    let repo = format!("chunks/agent-{}", std::process::id());
    let (v1, config1, layers1) = push_app(&reg, &repo, "1", &data);
    let (v2, config2, layers2) = push_app(&reg, &repo, "2", &data);
    publish_chunks(&plane, &[&v1, &v2]);
    for c in [&config1, &config2] {
        let _ = docker(&["rmi", "-f", c]);
    }
    let key = stead::plane::envelope::SecretKey::generate().unwrap();
    let n = plane_node("chunkagent", &plane, &key).with_heartbeat("1s");
    let m = n.module("app");
    let module = |image: &str| {
        serde_json::json!({
            "name": m,
            "image": image,
            "command": ["sh", "-c", idle_after("echo version-$(cat /app/version)")],
            "restart": "always",
        })
    };
    plane.publish(&n.id, &sign(&key, &payload(&n, 1, vec![module(&v1)])));
    let agent = Agent::start(&n);
    let runs = |config: &str| {
        n.container(&m).is_some_and(|(_, s, _)| s == "running")
            && docker_ok(&["inspect", "--format", "{{.Image}}", &n.container_id(&m)]) == config
    };
    n.wait_for(120, "version 1 running", || runs(&config1));
    plane.publish(&n.id, &sign(&key, &payload(&n, 2, vec![module(&v2)])));
    n.wait_for(120, "version 2 running", || runs(&config2));
    n.wait_logs(&m, "version-2");
    let (_, metrics) = agent.get("/metrics");
    let registry = metric(
        &metrics,
        "stead_image_fetch_bytes_total{source=\"registry\"}",
    );
    let chunks = metric(&metrics, "stead_image_fetch_bytes_total{source=\"chunks\"}");
    let local = metric(&metrics, "stead_image_fetch_bytes_total{source=\"local\"}");
    // Version 1's new layer came whole from the registry; version 2's from
    // its chunks: a few of them from the host, the rest from version 1.
    assert_eq!(registry, layers1.last().unwrap().1, "{metrics}");
    let app_blob = layers2.last().unwrap().1;
    assert!(
        chunks > 0 && chunks * 4 < app_blob,
        "{chunks} for {app_blob}: {metrics}"
    );
    assert!(local > 3 << 20, "{metrics}");
    assert!(
        metrics.contains("stead_image_fetches_total{by=\"agent\"} 2\n"),
        "{metrics}"
    );
    // The status (as its next pass sees the pulls: the one that ran the
    // image may have seen the pull under way) and the report say what the
    // update cost, by source.
    let mut status = serde_json::Value::Null;
    n.wait_for(30, "the status saying what version 2 brought", || {
        let (_, s) = agent.get("/v1/status");
        status = serde_json::from_str(&s).unwrap_or_default();
        status["node"]["fetched"]["image"] == v2.as_str()
    });
    let fetched = &status["node"]["fetched"];
    assert_eq!(fetched["image"], v2.as_str(), "{status}");
    let (by_host, by_registry) = (
        fetched["chunks"].as_u64().unwrap(),
        fetched["registry"].as_u64(),
    );
    assert!(by_host > 0 && by_host <= chunks, "{status}");
    assert_eq!(
        (by_registry, fetched["rebuilt"].as_u64()),
        (Some(0), Some(1)),
        "{status}"
    );
    assert!(fetched["local"].as_u64().unwrap() > 3 << 20, "{status}");
    n.wait_for(30, "the report saying it", || {
        plane.report_json(&n.id).is_some_and(|r| {
            r["fetched"]["image"] == v2.as_str() && r["fetched"]["chunks"] == by_host
        })
    });
    drop(agent);
    for c in [&config1, &config2] {
        let _ = docker(&["rmi", "-f", c]);
    }
}

#[test]
fn a_rebuild_cut_by_a_power_cut_keeps_the_chunks_it_wrote_and_fetches_the_rest() {
    require_engine();
    let reg = Registry::plain();
    let plane = Plane::start();
    let work = tempfile::tempdir().unwrap();
    let data = work.path().join("data.bin");
    std::fs::write(&data, noise(4 << 20, 17)).unwrap();
    let repo = format!("chunks/cut-{}", std::process::id());
    let (v1, config1, layers1) = push_app(&reg, &repo, "1", &data);
    publish_chunks(&plane, &[&v1]);
    let _ = docker(&["rmi", "-f", &config1]);
    // The layer as it will be: the blob, inflated.
    let (digest, size) = layers1.last().unwrap().clone();
    let blob = common::registry::raw(
        &reg.addr,
        "GET",
        &format!("/v2/{repo}/blobs/{digest}"),
        &[],
        b"",
    )
    .2;
    assert_eq!(blob.len() as u64, size);
    let layer = stead::model::chunk::inflate_gzip(&blob, 64 << 20).unwrap();
    let diff = diff_ids(&reg, &repo, &config1).pop().unwrap();
    // What a power cut left: the file at its size, its first three
    // quarters written but for a torn chunk, the rest never written.
    let spool_dir = tempfile::tempdir().unwrap();
    let spool = Spool::new(spool_dir.path()).unwrap();
    let mut left = layer.clone();
    let quarter = layer.len() * 3 / 4;
    left[quarter..].fill(0);
    left[100_000..100_100].fill(0xff);
    std::fs::write(spool.rebuild_path(&diff), &left).unwrap();
    let source = ChunkSource::new(Http::new(None).unwrap(), &plane.base().parse().unwrap());
    let f = pull_with(Some(&source), &v1, &spool);
    eprintln!("resumed: {f:?}, the blob {size} bytes");
    assert_eq!(f.id, config1, "{f:?}");
    assert_eq!(f.rebuilt, 1, "{f:?}");
    // The rebuilt layer costs nothing over the wire. Podman takes an
    // archive without the base layers it holds only when its blob-info
    // cache has seen their blobs (a fresh machine's has not): the agent
    // then sends them too, their blobs' bytes and no more.
    let base: u64 = layers1[..layers1.len() - 1].iter().map(|(_, s)| s).sum();
    assert!(
        f.wire == 0 || (on_podman() && f.wire <= base),
        "{f:?}, the base layers {base} bytes"
    );
    // The chunks the cut spoilt and the last quarter, no more.
    assert!(f.local > layer.len() as u64 / 2, "{f:?}");
    assert!(f.chunks < size / 2, "{f:?}");
    let sum = docker_ok(&["run", "--rm", &v1, "sha256sum", "/app/data.bin"]);
    assert!(sum.starts_with(&sha256_file(&data)), "{sum}");
    assert!(!spool.rebuild_path(&diff).exists());
    let _ = docker(&["rmi", "-f", &config1]);
}

/// Every file under `dir`.
fn files_under(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files_under(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[test]
fn a_second_device_of_a_site_takes_the_changed_chunks_from_the_first_and_a_lying_chunk_from_the_next()
 {
    use std::sync::Arc;
    use stead::registry::peers::Peers;
    use stead::site::{Served, serve};
    require_engine();
    let reg = Registry::plain();
    let plane = Plane::start();
    let work = tempfile::tempdir().unwrap();
    let data = work.path().join("data.bin");
    std::fs::write(&data, noise(4 << 20, 11)).unwrap();
    let repo = format!("chunks/site-{}", std::process::id());
    let (v1, config1, _) = push_app(&reg, &repo, "1", &data);
    let (v2, config2, _) = push_app(&reg, &repo, "2", &data);
    publish_chunks(&plane, &[&v1, &v2]);
    let base: http::Uri = plane.base().parse().unwrap();
    let source = ChunkSource::new(Http::new(None).unwrap(), &base);
    for c in [&config1, &config2] {
        let _ = docker(&["rmi", "-f", c]);
    }
    let rt = rt();
    // A device that serves its site (what it fetched kept), on loopback.
    let serving = |node: &str| {
        let dir = tempfile::tempdir().unwrap();
        let spool =
            Spool::new(dir.path())
                .unwrap()
                .keeping(std::time::Duration::from_secs(3600), 99, 98);
        let served = Arc::new(Served::new(
            spool.clone(),
            vec!["127.0.0.0/8".parse().unwrap()],
            64 << 20,
            node,
            Arc::new(stead::status::metrics::Metrics::default()),
        ));
        let l = rt
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let url = l.local_addr().unwrap().to_string();
        rt.spawn(serve(l, served));
        (dir, spool, url)
    };
    let pull_from = |spool: &Spool, peers: Option<&Peers>, reference: &str| {
        rt.block_on(async {
            let engine = DockerEngine::connect(&engine_socket()).await.unwrap();
            let registries = client();
            let from = Origins {
                registries: &registries,
                chunks: Some(&source),
                peers,
            };
            pull(&from, &engine, spool, reference, &Tally::default()).await
        })
        .unwrap()
    };
    // The first device: version 1 whole, version 2 by its chunks from the
    // host, which it keeps.
    let (_a_dir, a, a_url) = serving("a");
    assert_eq!(pull_from(&a, None, &v1).id, config1);
    let fa = pull_from(&a, None, &v2);
    assert_eq!(
        (fa.id.as_str(), fa.rebuilt),
        (config2.as_str(), 1),
        "{fa:?}"
    );
    assert!(fa.chunks > 0, "{fa:?}");
    let _ = docker(&["rmi", "-f", &config2]);
    // A liar: the first device's store, with one chunk's bytes changed.
    let (_l_dir, liar, liar_url) = serving("liar");
    let (from, to) = (a.chunks_dir().unwrap(), liar.chunks_dir().unwrap());
    let kept = files_under(&from);
    assert!(
        kept.iter()
            .any(|p| p.extension().is_some_and(|e| e == "caibx")),
        "{kept:?}"
    );
    let mut lied = false;
    for f in &kept {
        let at = to.join(f.strip_prefix(&from).unwrap());
        std::fs::create_dir_all(at.parent().unwrap()).unwrap();
        let mut bytes = std::fs::read(f).unwrap();
        if !lied && f.extension().is_some_and(|e| e == "cacnk") {
            let n = bytes.len();
            bytes[n / 2] ^= 0x5a;
            lied = true;
        }
        std::fs::write(at, bytes).unwrap();
    }
    assert!(lied, "{kept:?}");

    // The second device holds version 1: version 2's index and chunks come
    // from its peers, the liar's bad chunk from the next; nothing from the
    // host, nothing from the registry.
    let b_dir = tempfile::tempdir().unwrap();
    let b = Spool::new(b_dir.path()).unwrap();
    let peers = Peers::new(
        "b",
        vec![format!("http://{liar_url}"), format!("http://{a_url}")],
    )
    .unwrap();
    let before = plane.requests().len();
    let fb = pull_from(&b, Some(&peers), &v2);
    assert_eq!(
        (fb.id.as_str(), fb.rebuilt, fb.wire, fb.chunks),
        (config2.as_str(), 1, 0, 0),
        "{fb:?}"
    );
    assert!(fb.peers > 0, "{fb:?}");
    let asked: Vec<String> = plane.requests()[before..]
        .iter()
        .map(|r| r.path.clone())
        .filter(|p| p.contains("/chunks/"))
        .collect();
    assert!(asked.is_empty(), "the host was asked {asked:?}");
    let out = docker_ok(&["run", "--rm", &v2, "cat", "/app/version"]);
    assert_eq!(out, "2");
    for c in [&config1, &config2] {
        let _ = docker(&["rmi", "-f", c]);
    }
}
