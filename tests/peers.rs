//! A site's peers, against the real registry and the real engine (Docker,
//! and Podman when the test command points the suite at its socket): a
//! device that fetched an image serves its blobs to the site from its
//! spool; a second device takes them from it, and the registry, behind a
//! proxy that counts every byte, sends each blob once; a blob still
//! coming from the registry is sent on as it comes. A lying peer (wrong
//! bytes under the right digest), a truncated one and one that refuses an
//! address outside its site each cost one more source, never a wrong
//! image. The agent serves what it fetched on its own listener, to the
//! site's networks alone.

mod common;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use common::agent::Agent;
use common::pulls::{Cutter, client, push_random, rt};
use common::registry::{Registry, free_port};
use common::*;
use stead::engine::docker::DockerEngine;
use stead::registry::fetch::{Fetched, Origins, Spool, Tally, pull};
use stead::registry::peers::Peers;
use stead::site::{Served, serve};
use stead::status::metrics::Metrics;

/// A device's spool and, when it serves, its listener on loopback (to
/// `allow`): its base URL and its metrics.
struct Device {
    spool: Spool,
    _dir: tempfile::TempDir,
    url: String,
    metrics: Arc<Metrics>,
}

impl Device {
    fn serving(rt: &tokio::runtime::Runtime, node: &str, allow: &[&str]) -> Device {
        let dir = tempfile::tempdir().unwrap();
        let spool = Spool::new(dir.path())
            .unwrap()
            .keeping(Duration::from_secs(3600), 99, 98);
        let metrics = Arc::new(Metrics::default());
        let served = Arc::new(Served::new(
            spool.clone(),
            allow.iter().map(|a| a.parse().unwrap()).collect(),
            64 << 20,
            node,
            metrics.clone(),
        ));
        let listener = rt
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        rt.spawn(serve(listener, served));
        Device {
            spool,
            _dir: dir,
            url,
            metrics,
        }
    }

    fn served(&self, what: &str) -> u64 {
        let text = self.metrics.render(&Default::default());
        let line = format!("stead_site_served_bytes_total{{what=\"{what}\"}} ");
        text.lines()
            .find_map(|l| l.strip_prefix(&line))
            .map_or(0, |n| n.parse().unwrap())
    }
}

/// Pulls `reference` into the engine with `spool`, asking `peers` first.
fn pull_via(
    rt: &tokio::runtime::Runtime,
    spool: &Spool,
    peers: Option<&Peers>,
    reference: &str,
) -> Fetched {
    try_pull_via(rt, spool, peers, reference).unwrap_or_else(|e| panic!("{reference}: {e}"))
}

fn try_pull_via(
    rt: &tokio::runtime::Runtime,
    spool: &Spool,
    peers: Option<&Peers>,
    reference: &str,
) -> Result<Fetched, stead::registry::fetch::FetchError> {
    rt.block_on(async {
        let engine = DockerEngine::connect(&engine_socket()).await.unwrap();
        let registries = client();
        let from = Origins {
            registries: &registries,
            chunks: None,
            peers,
        };
        pull(&from, &engine, spool, reference, &Tally::default()).await
    })
}

fn peers(node: &str, urls: &[&str]) -> Peers {
    let urls = urls
        .iter()
        .map(|u| stead::model::site::peer_url(u.trim_start_matches("http://")).unwrap())
        .collect();
    Peers::new(node, urls).unwrap()
}

#[test]
fn a_second_device_takes_the_blobs_from_the_first_and_the_registry_sends_them_once() {
    require_engine();
    let reg = Registry::plain();
    let (config, layers) = push_random(&reg, "peers/app", "1", 2048);
    let (layer, size) = layers.last().unwrap().clone();
    let cutter = Cutter::start(&reg.addr, 0);
    let reference = format!("{}/peers/app:1", cutter.addr);
    let rt = rt();
    let a = Device::serving(&rt, "a", &["127.0.0.0/8"]);
    let fa = pull_via(&rt, &a.spool, None, &reference);
    assert_eq!(
        (fa.id.as_str(), fa.wire, fa.peers),
        (config.as_str(), size, 0)
    );
    let first = cutter.down.load(Ordering::SeqCst);
    // The engine's copy goes; the first device's spool keeps the blob,
    // checked, to serve.
    let _ = docker(&["rmi", "-f", &config]);
    assert_eq!(
        std::fs::metadata(a.spool.path(&layer)).unwrap().len(),
        size,
        "kept to serve"
    );

    // The second device asks the first before the registry.
    let b_dir = tempfile::tempdir().unwrap();
    let b = Spool::new(b_dir.path()).unwrap();
    let fb = pull_via(&rt, &b, Some(&peers("b", &[a.url.as_str()])), &reference);
    assert_eq!(fb.id, config, "{fb:?}");
    assert_eq!(
        (fb.wire, fb.peers),
        (0, size),
        "every blob byte from the peer: {fb:?}"
    );
    let second = cutter.down.load(Ordering::SeqCst) - first;
    assert!(
        second < 64 << 10,
        "the registry sent the manifest and config only ({second} bytes); the layer was {size}"
    );
    assert_eq!(a.served("blob"), size);
    // The second device, not serving, keeps nothing.
    assert!(!b.path(&layer).exists());
    let _ = docker(&["rmi", "-f", &config]);
}

#[test]
fn a_blob_still_coming_from_the_registry_is_sent_on_to_a_second_device_as_it_comes() {
    require_engine();
    let reg = Registry::plain();
    let (config, layers) = push_random(&reg, "peers/coming", "1", 3072);
    let (layer, size) = layers.last().unwrap().clone();
    // About 800 KiB/s: the first device takes about 4 s.
    let cutter = Cutter::throttled(&reg.addr, 0, Duration::from_millis(20));
    let reference = format!("{}/peers/coming:1", cutter.addr);
    let rt = Arc::new(rt());
    let a = Device::serving(&rt, "a", &["127.0.0.0/8"]);
    let first = {
        let (rt, spool, reference) = (rt.clone(), a.spool.clone(), reference.clone());
        std::thread::spawn(move || pull_via(&rt, &spool, None, &reference))
    };
    let part = a.spool.path(&layer);
    let t = std::time::Instant::now();
    while std::fs::metadata(&part).map_or(0, |m| m.len()) < 256 << 10 {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "the first fetch never started"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let b_dir = tempfile::tempdir().unwrap();
    let b = Spool::new(b_dir.path()).unwrap();
    let fb = pull_via(&rt, &b, Some(&peers("b", &[a.url.as_str()])), &reference);
    let fa = first.join().unwrap();
    assert_eq!(
        (fa.id.as_str(), fb.id.as_str()),
        (config.as_str(), config.as_str())
    );
    assert_eq!(
        (fa.wire, fb.wire, fb.peers),
        (size, 0, size),
        "{fa:?} {fb:?}"
    );
    let down = cutter.down.load(Ordering::SeqCst);
    assert!(
        down < size + (64 << 10),
        "the registry sent {down} bytes for a layer of {size}: more than once"
    );
    let _ = docker(&["rmi", "-f", &config]);
}

#[test]
fn a_lying_a_truncated_and_a_refusing_peer_each_cost_one_more_source_never_a_wrong_image() {
    require_engine();
    let reg = Registry::plain();
    let (config, layers) = push_random(&reg, "peers/liar", "1", 1024);
    let (layer, size) = layers.last().unwrap().clone();
    let cutter = Cutter::start(&reg.addr, 0);
    let reference = format!("{}/peers/liar:1", cutter.addr);
    let rt = rt();
    let good = Device::serving(&rt, "good", &["127.0.0.0/8"]);
    let fa = pull_via(&rt, &good.spool, None, &reference);
    assert_eq!(fa.id, config);
    let _ = docker(&["rmi", "-f", &config]);
    let blob = std::fs::read(good.spool.path(&layer)).unwrap();
    let hex = layer.strip_prefix("sha256:").unwrap();

    // A liar: the right digest, the right size, other bytes (checked, as
    // the spool marks what it checked). A truncated one: the first half.
    // One that serves only 10.77.0.0/16.
    let plant = |d: &Device, bytes: &[u8]| {
        let dir = d.spool.dir();
        std::fs::write(dir.join(hex), bytes).unwrap();
        std::fs::write(dir.join(format!("{hex}.synced")), bytes.len().to_string()).unwrap();
        std::fs::write(dir.join(format!("{hex}.ok")), b"").unwrap();
    };
    let liar = Device::serving(&rt, "liar", &["127.0.0.0/8"]);
    let mut wrong = blob.clone();
    wrong[blob.len() / 3] ^= 0x5a;
    plant(&liar, &wrong);
    let short = Device::serving(&rt, "short", &["127.0.0.0/8"]);
    plant(&short, &blob[..blob.len() / 2]);
    let elsewhere = Device::serving(&rt, "elsewhere", &["10.77.0.0/16"]);
    plant(&elsewhere, &blob);

    // (peers asked in this order, bytes from the registry, what is said)
    let cases: Vec<(Vec<&str>, u64, &str)> = vec![
        (
            vec![liar.url.as_str(), good.url.as_str()],
            0,
            "the liar's bytes are not the digest: the next peer",
        ),
        (
            vec![short.url.as_str(), good.url.as_str()],
            0,
            "the short one ends, then says 416: the next peer",
        ),
        (vec![elsewhere.url.as_str()], size, "refused: the registry"),
        (
            vec![liar.url.as_str()],
            size,
            "the only peer lies: the registry",
        ),
    ];
    for (k, (asked, from_registry, why)) in cases.iter().enumerate() {
        let dir = tempfile::tempdir().unwrap();
        let spool = Spool::new(dir.path()).unwrap();
        let before = cutter.down.load(Ordering::SeqCst);
        let f = pull_via(
            &rt,
            &spool,
            Some(&peers(&format!("b{k}"), asked)),
            &reference,
        );
        assert_eq!(f.id, config, "{why}: {f:?}");
        assert_eq!(f.wire, *from_registry, "{why}: {f:?}");
        let down = cutter.down.load(Ordering::SeqCst) - before;
        assert!(
            (down >= *from_registry) && down < from_registry + (64 << 10),
            "{why}: the registry sent {down}"
        );
        let _ = docker(&["rmi", "-f", &config]);
    }
    let text = elsewhere.metrics.render(&Default::default());
    let refused: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("stead_site_refused_total "))
        .map_or(0, |n| n.parse().unwrap());
    assert!(refused >= 1, "{text}");
    assert_eq!(elsewhere.served("blob"), 0);
}

#[test]
fn the_agent_serves_what_it_fetched_to_its_site_alone_read_only_with_ranges() {
    require_engine();
    let reg = Registry::plain();
    let (config, layers) = push_random(&reg, "peers/module", "1", 512);
    let (layer, size) = layers.last().unwrap().clone();
    let image = format!("{}/peers/module:1", reg.addr);
    let port = free_port();
    let n = Node::new("peerserve")
        .with_heartbeat("1s")
        .with_config(&format!(
            "[site]\nlisten = \"127.0.0.1:{port}\"\nallow = [\"127.0.0.0/8\"]\nrate = \"8m\""
        ));
    let m = n.module("app");
    n.write_intention(
        "app.toml",
        common::intention::Module::new(&m, &image).idle("served"),
    );
    let agent = Agent::start(&n);
    n.wait_for(120, "the module running its fetched image", || {
        n.container(&m).is_some_and(|(_, s, _)| s == "running")
    });
    let site = format!("127.0.0.1:{port}");
    let path = format!("/v2/peers/module/blobs/{layer}");
    let (code, head, body) = common::registry::raw(&site, "GET", &path, &[], b"");
    assert_eq!(code, 200, "{head}");
    assert_eq!(body.len() as u64, size);
    assert_eq!(stead::registry::client::sha256(&body), layer);
    // From an offset on.
    let (code, head, tail) =
        common::registry::raw(&site, "GET", &path, &[("Range", "bytes=1000-")], b"");
    assert_eq!(code, 206, "{head}");
    assert!(
        head.to_ascii_lowercase()
            .contains(&format!("content-range: bytes 1000-{}/{size}", size - 1)),
        "{head}"
    );
    assert_eq!(tail, body[1000..]);
    // The registry API's version check, as a registry client asks it.
    assert_eq!(common::registry::raw(&site, "GET", "/v2/", &[], b"").0, 200);
    // Read-only, and nothing but blobs, chunks and indexes.
    for (method, path, code) in [
        ("PUT", path.as_str(), 405),
        ("DELETE", path.as_str(), 405),
        ("GET", "/v1/status", 404),
        ("GET", "/v2/peers/module/manifests/1", 404),
        ("GET", "/v2/../../etc/passwd/blobs/sha256:00", 404),
        (
            "GET",
            &format!("/v2/x/blobs/sha256:{}", "0".repeat(64)),
            404,
        ),
    ] {
        assert_eq!(
            common::registry::raw(&site, method, path, &[], b"").0,
            code,
            "{method} {path}"
        );
    }
    // A request that names this device is its own: nothing.
    let (code, _, _) = common::registry::raw(&site, "GET", &path, &[("X-Stead-Node", &n.id)], b"");
    assert_eq!(code, 404);
    let (_, metrics) = agent.get("/metrics");
    let served: u64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("stead_site_served_bytes_total{what=\"blob\"} "))
        .map_or(0, |v| v.parse().unwrap());
    assert_eq!(served, size + (size - 1000), "{metrics}");
    let _ = config;
}

/// Answers every request with `body` (200): a peer that relays a forged
/// document. Its address.
fn forger(body: Vec<u8>) -> String {
    use std::io::{Read, Write};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            let mut seen = Vec::new();
            let mut buf = [0u8; 4096];
            while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                match s.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => seen.extend_from_slice(&buf[..n]),
                }
            }
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            let _ = s.write_all(head.as_bytes());
            let _ = s.write_all(&body);
        }
    });
    addr
}

#[test]
fn a_device_cut_off_from_its_plane_takes_the_group_revision_a_peer_holds_and_never_a_forged_one() {
    use common::desired::*;
    use common::plane::Plane;
    use serde_json::json;
    use stead::plane::envelope::SecretKey;
    require_engine();
    let key = SecretKey::generate().unwrap();
    let mut plane = Plane::start();
    let port = free_port();
    // A holds the group's documents and runs none of its modules; it
    // serves its site. B runs the group's module and asks a forger first.
    let a = plane_node("relaya", &plane, &key)
        .with_heartbeat("1s")
        .with_config(&format!(
            "[site]\nlisten = \"127.0.0.1:{port}\"\nallow = [\"127.0.0.0/8\"]"
        ));
    let b = plane_node("relayb", &plane, &key).with_heartbeat("1s");
    let g = format!("g-relay-{}", std::process::id());
    let w = b.module("w");
    // What the forger relays: revision 3, signed by a key no one trusts.
    let other = SecretKey::generate().unwrap();
    let forged = other
        .sign(
            stead::plane::group::GROUP_PAYLOAD_TYPE,
            &serde_json::to_vec(&group_payload(&g, 3, vec![module(&w, "forged")], json!({})))
                .unwrap(),
        )
        .to_json();
    let liar = forger(forged);
    let b = b.with_config(&format!(
        "[site]\npeers = [\"{liar}\", \"127.0.0.1:{port}\"]"
    ));
    publish_group(
        &plane,
        &key,
        &g,
        &group_payload(&g, 1, vec![module(&w, "one")], json!({})),
    );
    plane.publish(
        &a.id,
        &sign(
            &key,
            &node_payload(&a, 1, &[&g], vec![], json!({"remove": [w]})),
        ),
    );
    plane.publish(
        &b.id,
        &sign(&key, &node_payload(&b, 1, &[&g], vec![], json!({}))),
    );
    let agent_a = Agent::start(&a);
    let agent_b = Agent::start(&b);
    wait_v(&b, &w, "one");
    wait_plane(&a, &agent_a, "A holding revision 1", |p| {
        p["groups"][0]["revision"] == 1
    });

    // B stops; revision 2 is published and A takes it; the plane goes.
    drop(agent_b);
    publish_group(
        &plane,
        &key,
        &g,
        &group_payload(&g, 2, vec![module(&w, "two")], json!({})),
    );
    wait_plane(&a, &agent_a, "A holding revision 2", |p| {
        p["groups"][0]["revision"] == 2
    });
    plane.stop();

    // B, cut off from the plane, takes revision 2 from A, not the forgery.
    let agent_b = Agent::start(&b);
    wait_v(&b, &w, "two");
    let p = wait_plane(&b, &agent_b, "B holding revision 2", |p| {
        p["groups"][0]["revision"] == 2
    });
    assert!(!b.logs(&w).contains("V=forged"), "{p:#}");
    let log = Agent::log(&b);
    assert!(
        log.contains("a peer relayed the group's revision 2"),
        "{log}"
    );
    assert!(
        log.contains("signed only by keys this node does not trust"),
        "the forgery refused: {log}"
    );
    let (_, metrics) = agent_a.get("/metrics");
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("stead_site_served_bytes_total{what=\"document\"} ")),
        "{metrics}"
    );
}

#[test]
fn with_its_registry_away_a_device_takes_an_image_named_by_digest_from_a_peer_never_a_tag() {
    require_engine();
    let reg = Registry::plain();
    let (config, layers) = push_random(&reg, "peers/away", "1", 1024);
    let (_, size) = layers.last().unwrap().clone();
    let digest = common::registry::manifest_digest(&reg, "peers/away", "1");
    let cutter = Cutter::start(&reg.addr, 0);
    let host = cutter.addr.clone();
    let by_digest = format!("{host}/peers/away@{digest}");
    let rt = rt();
    let a = Device::serving(&rt, "a", &["127.0.0.0/8"]);
    assert_eq!(pull_via(&rt, &a.spool, None, &by_digest).id, config);
    let _ = docker(&["rmi", "-f", &config]);

    // The registry goes: the manifest, the config and the layer come from
    // the peer, each checked by its digest.
    drop(cutter);
    drop(reg);
    let b_dir = tempfile::tempdir().unwrap();
    let b = Spool::new(b_dir.path()).unwrap();
    let p = peers("b", &[a.url.as_str()]);
    let fb = pull_via(&rt, &b, Some(&p), &by_digest);
    assert_eq!(
        (fb.id.as_str(), fb.wire, fb.peers),
        (config.as_str(), 0, size),
        "{fb:?}"
    );
    assert!(a.served("manifest") > 0);
    let _ = docker(&["rmi", "-f", &config]);
    // A tag is its registry's word alone.
    let e = try_pull_via(&rt, &b, Some(&p), &format!("{host}/peers/away:1")).unwrap_err();
    assert!(e.is_link(), "{e}");
}
