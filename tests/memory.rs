//! Memory under the shipped unit's `MemoryMax=64M`, against the real parts:
//! the agent in a memory cgroup (v1) of its own limited to 64M, a
//! 1000-module signed document from Debian's nginx on loopback, the real
//! engine and the real store. The modules name an image on a loopback
//! port where no registry listens, so they stay held (their pulls fail
//! and are retried) and no 1000 containers are made; everything else the
//! node holds for them (the store, the board, the plane document, the
//! specs each pass resolves) is there.

mod common;

use common::agent::{Agent, http_send_within};
use common::cgroup::{MemoryCgroup, rss_and_peak_kib};
use common::desired::*;
use common::plane::Plane;
use common::*;
use serde_json::{Value as J, json};
use stead::plane::document::{MAX_GROUPS, MAX_MODULES, MAX_TOTAL_BYTES, MAX_TOTAL_MODULES};
use stead::plane::envelope::SecretKey;
use stead::plane::group::GROUP_PAYLOAD_TYPE;

/// Modules in the document.
const MODULES: usize = 1000;

/// A module of about 700 bytes of payload (the envelope's base64 makes it
/// about 950): env, settings, a config file and a literal file.
fn big_module(name: &str, k: usize) -> J {
    padded_module(name, k, 145)
}

/// [`big_module`] with a literal file of `pad` bytes and a few more.
fn padded_module(name: &str, k: usize, pad: usize) -> J {
    json!({
        "name": name,
        "image": "127.0.0.1:9/stead-absent/app:1.0.0",
        "command": ["sh", "-c", "exec /app --config /etc/app/config.json"],
        "env": {
            "MODE": "production",
            "REGION": format!("region-{}", k % 7),
            "TOKEN": format!("token-{k:08}-{}", "s".repeat(40)),
        },
        "restart": "always",
        "config": {
            "path": "/etc/app/config.json",
            "format": "json",
            "defaults": {"log": {"level": "warn"}, "http": {"port": 80}, "peer": {"url": ""}},
        },
        "settings": {
            "log.level": "info",
            "http.port": 8000 + (k % 1000) as i64,
            "peer.url": format!("http://peer-{k}.local:9000/api/v1/endpoint"),
        },
        "files": [
            {"path": "/etc/app/banner.txt", "content": format!("module {k}: {}\n", "b".repeat(pad))},
        ],
    })
}

/// Every GET endpoint the API serves, for module `m`.
fn endpoints(m: &str) -> Vec<String> {
    [
        "/healthz",
        "/readyz",
        "/metrics",
        "/v1/status",
        "/v1/events?limit=1000",
        "/v1/intentions",
        "/v1/plane",
        "/v1/reloads",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([format!("/v1/modules/{m}"), format!("/v1/intentions/{m}")])
    .collect()
}

#[test]
fn under_64m_a_1000_module_document_is_held_and_8_clients_read_every_endpoint() {
    let key = SecretKey::generate().unwrap();
    let plane = Plane::start();
    let n = Node::new("mem1k").with_config(&format!(
        "[plane]\nurl = {:?}\ntrusted_keys = [{:?}]\npoll_interval = \"1s\"",
        plane.base(),
        key.public().to_base64()
    ));
    let names: Vec<String> = (0..MODULES).map(|k| n.module(&format!("m{k}"))).collect();
    let modules = names
        .iter()
        .enumerate()
        .map(|(k, m)| big_module(m, k))
        .collect();
    let doc = sign(&key, &payload(&n, 1, modules));
    assert!(
        doc.len() > 900_000 && doc.len() < 1 << 20,
        "a document near the limit: {} bytes",
        doc.len()
    );
    plane.publish(&n.id, &doc);

    let cg = MemoryCgroup::new(&format!("stead-test-mem-{}", std::process::id()), "64M");
    let wrapper = cg.wrapper();
    let wrapper: Vec<&str> = wrapper.iter().map(String::as_str).collect();
    let mut agent = Agent::start_under(&n, &wrapper);
    wait_plane(&n, &agent, "revision 1 held", |p| {
        p["held"]["revision"].as_u64() == Some(1)
    });
    n.wait_for(120, "every module on the board", || {
        let (code, body) = agent.get("/v1/status");
        code == 200
            && serde_json::from_str::<J>(&body)
                .is_ok_and(|s| s["modules"].as_array().is_some_and(|a| a.len() == MODULES))
    });

    let (rss, peak) = rss_and_peak_kib(agent.child.id());
    eprintln!(
        "adopted: RSS {rss} KiB, peak {peak} KiB; {}",
        std::fs::read_to_string(format!("/proc/{}/status", agent.child.id()))
            .unwrap_or_default()
            .lines()
            .filter(|l| l.starts_with("Rss") || l.starts_with("Threads"))
            .collect::<Vec<_>>()
            .join(" ")
    );
    // Eight clients, each reading every endpoint three times, half of them
    // with the token (values shown), half without (values hidden).
    let token = std::fs::read_to_string(n.data().join("api-token")).unwrap();
    let readers: Vec<_> = (0..8)
        .map(|c| {
            let addr = agent.addr.clone();
            let token = (c % 2 == 0).then(|| token.trim().to_string());
            let paths = endpoints(&names[c * 100]);
            std::thread::spawn(move || {
                let mut answers = Vec::new();
                for _ in 0..3 {
                    for p in &paths {
                        // Reads of every intention are served one at a
                        // time (their memory bounded whoever asks): 8
                        // readers' 24 of them queue, and on two loaded
                        // cores the last waited past 10 s once (the test
                        // command, 2026-12-07). This test is of memory,
                        // not latency: a reader waits a minute.
                        let (code, body) =
                            http_send_within(&addr, "GET", p, token.as_deref(), "", 60);
                        answers.push((p.clone(), code, body.len(), body.contains("m999")));
                    }
                }
                answers
            })
        })
        .collect();
    for r in readers {
        let answers = r.join().unwrap_or_else(|_| {
            panic!(
                "a reader failed (the agent gone? OOM kills: {}); its log:\n{}",
                cg.oom_kills(),
                Agent::log(&n)
            )
        });
        for (path, code, len, last) in answers {
            let ok = if path == "/readyz" {
                code == 200 || code == 503
            } else {
                code == 200
            };
            assert!(ok, "GET {path}: {code}\nagent log:\n{}", Agent::log(&n));
            if path == "/v1/intentions" || path == "/v1/status" {
                assert!(
                    last && len > 300_000,
                    "GET {path}: a whole answer: {len} bytes"
                );
            }
        }
    }
    assert!(
        agent.child.try_wait().unwrap().is_none(),
        "the agent lives; its log:\n{}",
        Agent::log(&n)
    );
    assert_eq!(agent.get("/healthz").0, 200, "the agent answers");
    assert_eq!(cg.oom_kills(), 0, "no OOM kill under 64M");
    let (rss, peak) = rss_and_peak_kib(agent.child.id());
    eprintln!("after the readers: RSS {rss} KiB, peak {peak} KiB");
}

/// Signs a group document of `group` at `revision` with `modules`.
fn group_doc(key: &SecretKey, group: &str, revision: u64, modules: Vec<J>) -> Vec<u8> {
    let p = group_payload(group, revision, modules, json!({}));
    key.sign(GROUP_PAYLOAD_TYPE, &serde_json::to_vec(&p).unwrap())
        .to_json()
}

#[test]
fn under_64m_a_node_in_16_groups_holds_the_limits_and_is_refused_past_them() {
    let key = SecretKey::generate().unwrap();
    let plane = Plane::start();
    let n = Node::new("mem16g").with_config(&format!(
        "[plane]\nurl = {:?}\ntrusted_keys = [{:?}]\npoll_interval = \"1s\"",
        plane.base(),
        key.public().to_base64()
    ));
    let groups: Vec<String> = (0..MAX_GROUPS).map(|g| format!("{}-g{g}", n.id)).collect();
    let node_doc = |revision, modules| {
        let mut p = payload(&n, revision, modules);
        p["groups"] = json!(groups);
        sign(&key, &p)
    };
    // Past the limits: the fleet, 16 groups of 1,000 modules, each
    // document under its own 1 MiB (152 MB of memory in 0.6.0's
    // beginnings): refused as too large, in bounded memory.
    let mut k = 0;
    for g in &groups {
        let modules = (0..MAX_MODULES)
            .map(|_| {
                k += 1;
                big_module(&format!("{}-m{k}", n.id), k)
            })
            .collect();
        let doc = group_doc(&key, g, 1, modules);
        assert!(doc.len() < 1 << 20, "each document under 1 MiB");
        plane.publish_raw_path(&format!("groups/{g}/desired.json"), &doc);
    }
    plane.publish(&n.id, &node_doc(1, vec![]));

    let cg = MemoryCgroup::new(&format!("stead-test-mem16-{}", std::process::id()), "64M");
    let wrapper = cg.wrapper();
    let wrapper: Vec<&str> = wrapper.iter().map(String::as_str).collect();
    let agent = Agent::start_under(&n, &wrapper);
    let p = wait_plane(&n, &agent, "the fleet past the limits refused", |p| {
        p["refusal"]["class"] == "too-large"
    });
    assert!(
        p["refusal"]["detail"]
            .as_str()
            .is_some_and(|d| d.contains("may list together")),
        "{p:#}"
    );
    let (_, past) = rss_and_peak_kib(agent.child.id());
    eprintln!("16 groups of 1,000 modules refused: peak {past} KiB");

    // At the limits: 16 groups and the node's document, 1,500 modules and
    // about 2 MiB in all, composed and adopted.
    let pad = 420;
    let node_own = MAX_TOTAL_MODULES - MAX_GROUPS * (MAX_TOTAL_MODULES / MAX_GROUPS);
    let mut total = 0;
    let mut k = 0;
    let mut next = |count: usize| -> Vec<J> {
        (0..count)
            .map(|_| {
                k += 1;
                padded_module(&n.module(&format!("m{k}")), k, pad)
            })
            .collect()
    };
    let own = next(node_own);
    let per_group: Vec<Vec<J>> = groups
        .iter()
        .map(|_| next(MAX_TOTAL_MODULES / MAX_GROUPS))
        .collect();
    for (g, modules) in groups.iter().zip(per_group) {
        let doc = group_doc(&key, g, 2, modules);
        total += doc.len();
        plane.publish_raw_path(&format!("groups/{g}/desired.json"), &doc);
    }
    let doc = node_doc(2, own);
    total += doc.len();
    assert!(
        total > MAX_TOTAL_BYTES * 9 / 10 && total <= MAX_TOTAL_BYTES,
        "near the limit: {total} bytes"
    );
    plane.publish(&n.id, &doc);
    wait_plane(&n, &agent, "revision 2 adopted", |p| {
        p["held"]["revision"].as_u64() == Some(2)
    });
    n.wait_for(120, "every module on the board", || {
        let (code, body) = agent.get("/v1/status");
        code == 200
            && serde_json::from_str::<J>(&body).is_ok_and(|s| {
                s["modules"]
                    .as_array()
                    .is_some_and(|a| a.len() == MAX_TOTAL_MODULES)
            })
    });
    let (rss, peak) = rss_and_peak_kib(agent.child.id());
    eprintln!(
        "1,500 modules from 17 documents ({total} bytes) adopted: RSS {rss} KiB, peak {peak} KiB; {}",
        std::fs::read_to_string(format!("/proc/{}/status", agent.child.id()))
            .unwrap_or_default()
            .lines()
            .filter(|l| l.starts_with("Rss"))
            .collect::<Vec<_>>()
            .join(" ")
    );
    assert_eq!(agent.get("/healthz").0, 200, "the agent answers");
    assert_eq!(cg.oom_kills(), 0, "no OOM kill under 64M");
}
