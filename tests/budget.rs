//! Site disruption budgets against the real parts: three agents on the
//! engine, one site, a group with `budget = {per = "site", max_updating =
//! 1}` published by the operator's tool to a private bucket on moto's S3
//! server (its conditional writes checked at publish), the leases taken
//! by the agents' conditional PUTs there. A new revision is taken by the
//! three one at a time: each device's disruption (its old container's
//! stop to its new one's start, as the engine's events time them) falls
//! inside its own lease, and no two overlap. A device killed holding the
//! lease holds its site back until the lease ends, then the site goes
//! on. And a host without conditional writes (nginx's WebDAV takes any
//! PUT) is refused at publish, nothing written; and a device whose host
//! keeps no lease (no ETag) waits, saying why, and disrupts nothing.

mod common;

use std::time::{Duration, Instant};

use common::agent::Agent;
use common::desired::module;
use common::s3::{Moto, credentials};
use common::*;
use serde_json::json;
use stead::plane::envelope::SecretKey;

const GROUP: &str = "tills";
const LEASE: &str = "prod/leases/tills/site/shop-1/0.json";

/// A lease version as the bucket kept it: holder, taken, expires (host
/// seconds), released.
#[derive(Debug, Clone)]
struct Version {
    holder: String,
    taken: f64,
    expires: f64,
    released: bool,
}

fn history(moto: &Moto, kf: &str) -> Vec<Version> {
    let out = moto.py(&["history", kf, "fleet", LEASE]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    v.as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let body: serde_json::Value =
                serde_json::from_str(e["body"].as_str().unwrap()).unwrap();
            let t = |f: &str| {
                stead::model::time::parse_rfc3339(body[f].as_str().unwrap()).unwrap() as f64
            };
            Version {
                holder: body["holder"].as_str().unwrap().to_string(),
                taken: t("taken"),
                expires: t("expires"),
                released: body["released"].as_bool().unwrap(),
            }
        })
        .collect()
}

/// Each holder's spans of holding, in order: from the first write of a
/// run of its writes to the release that ends it (or its lease's end, if
/// another took the place after it ended unreleased).
fn spans(versions: &[Version]) -> Vec<(String, f64, f64)> {
    let mut out: Vec<(String, f64, f64)> = Vec::new();
    let mut open: Option<(String, f64, f64)> = None;
    for v in versions {
        match &mut open {
            Some((h, _, end)) if *h == v.holder => {
                *end = v.expires;
                if v.released {
                    out.push(open.take().unwrap());
                }
            }
            _ => {
                if let Some(o) = open.take() {
                    out.push(o);
                }
                if !v.released {
                    open = Some((v.holder.clone(), v.taken, v.expires));
                }
            }
        }
    }
    out.extend(open);
    out
}

/// When `n`'s container of `app` other than `new` stopped (its first
/// `die`), and when `new` started, from the engine's events since `t0`
/// (seconds since the epoch).
fn disruption(n: &Node, t0: f64, new: &str) -> (f64, f64) {
    let events = n.timed_events_since(&n.module("app"), t0);
    let mine: Vec<&(f64, String, String)> = events.iter().collect();
    let stop = mine
        .iter()
        .find(|(_, a, id)| id != new && a == "die")
        .map(|(t, _, _)| *t);
    let start = mine
        .iter()
        .find(|(_, a, id)| id == new && a == "start")
        .map(|(t, _, _)| *t);
    match (stop, start) {
        (Some(a), Some(b)) => (a, b),
        _ => panic!("{}: no stop and start since {t0}: {mine:?}", n.id),
    }
}

struct Site {
    moto: Moto,
    _d: tempfile::TempDir,
    kf: String,
    creds: std::path::PathBuf,
    key_path: std::path::PathBuf,
    fleet: std::path::PathBuf,
    site: std::path::PathBuf,
    signing: SecretKey,
}

impl Site {
    fn start() -> Site {
        let moto = Moto::start();
        let key: serde_json::Value = serde_json::from_str(&moto.py(&["setup"])).unwrap();
        let d = tempfile::tempdir().unwrap();
        let key_file = d.path().join("key.json");
        std::fs::write(&key_file, key.to_string()).unwrap();
        let kf = key_file.to_str().unwrap().to_string();
        moto.py(&["versioning", &kf, "fleet"]);
        let creds = d.path().join("credentials");
        credentials(&creds, &key, 0o600);
        let signing = SecretKey::generate().unwrap();
        let key_path = d.path().join("plane.key");
        stead::host::keyfile::write(&key_path, &signing).unwrap();
        let (fleet, site) = (d.path().join("fleet"), d.path().join("site"));
        std::fs::create_dir_all(fleet.join("groups")).unwrap();
        std::fs::create_dir_all(fleet.join("nodes")).unwrap();
        std::fs::write(
            fleet.join("node-defaults.json"),
            json!({"poll": {"interval": "1s", "jitter": "100ms"}}).to_string(),
        )
        .unwrap();
        Site {
            moto,
            _d: d,
            kf,
            creds,
            key_path,
            fleet,
            site,
            signing,
        }
    }

    fn node(&self, tag: &str) -> Node {
        Node::new(tag).with_config(&format!(
            "settle_window = \"2s\"\n[labels]\nsite = \"shop-1\"\n[plane]\nurl = \"{}/fleet/prod\"\ntrusted_keys = [{:?}]\npoll_interval = \"1s\"\ns3_credentials = {:?}\ns3_region = \"us-east-1\"",
            self.moto.url,
            self.signing.public().to_base64(),
            self.creds.display().to_string()
        ))
    }

    /// The group with its budget, each node in it running its own `app`
    /// at `v` (one engine: a container's name is its module's), published
    /// with the tool.
    fn publish(&self, nodes: &[Node], v: &str) {
        std::fs::write(
            self.fleet.join("groups/tills.json"),
            json!({
                "modules": [],
                "budget": {"per": "site", "max_updating": 1, "lease": "10s"},
            })
            .to_string(),
        )
        .unwrap();
        for n in nodes {
            std::fs::write(
                self.fleet.join(format!("nodes/{}.json", n.id)),
                json!({"groups": [GROUP], "modules": [module(&n.module("app"), v)]}).to_string(),
            )
            .unwrap();
        }
        let (ok, out, err) = common::plane::plane_cli_with(
            &[
                "publish",
                "--key",
                self.key_path.to_str().unwrap(),
                "--fleet",
                self.fleet.to_str().unwrap(),
                "--site",
                self.site.to_str().unwrap(),
                "--upload",
                "s3://fleet/prod",
                "--s3-credentials",
                self.creds.to_str().unwrap(),
                "--s3-endpoint",
                &self.moto.url,
            ],
            "",
        );
        assert!(ok, "publish: {out}{err}");
    }
}

/// Waits until every node's `app` runs and printed `V=<v>`, noting what
/// their statuses said meanwhile.
fn wait_all(nodes: &[(&Node, &Agent)], v: &str, secs: u64, said: &mut Vec<String>) {
    let end = Instant::now() + Duration::from_secs(secs);
    loop {
        let done = nodes.iter().all(|(n, _)| {
            let app = n.module("app");
            n.container(&app).is_some_and(|(_, s, _)| s == "running")
                && n.logs(&app).contains(&format!("V={v}"))
        });
        if done {
            return;
        }
        for (_, a) in nodes {
            if let Some((200, body)) = common::agent::try_http_get(&a.addr, "/v1/status") {
                said.push(body);
            }
        }
        assert!(
            Instant::now() < end,
            "not all at V={v} within {secs}s; the agents' logs:\n{}",
            nodes
                .iter()
                .map(|(n, _)| format!("--- {}\n{}", n.id, n.agent_log_tail(40)))
                .collect::<String>()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

#[test]
fn a_site_takes_a_revision_one_device_at_a_time_and_a_dead_holders_lease_ends() {
    let s = Site::start();
    let nodes: Vec<Node> = ["bud-a", "bud-b", "bud-c"]
        .iter()
        .map(|t| s.node(t))
        .collect();
    s.publish(&nodes, "1");
    let mut agents: Vec<Agent> = nodes.iter().map(Agent::start).collect();
    fn pairs<'a>(nodes: &'a [Node], agents: &'a [Agent]) -> Vec<(&'a Node, &'a Agent)> {
        nodes.iter().zip(agents).collect()
    }
    let mut said = Vec::new();
    // The first creates disrupt nothing: no lease is asked.
    wait_all(&pairs(&nodes, &agents), "1", 90, &mut said);
    assert!(
        history(&s.moto, &s.kf).is_empty(),
        "no lease for a first create"
    );

    // Revision 2: one device at a time.
    let t0 = unix_now();
    s.publish(&nodes, "2");
    said.clear();
    wait_all(&pairs(&nodes, &agents), "2", 120, &mut said);
    // The last device's release comes a settle window after its start.
    let versions = {
        let end = Instant::now() + Duration::from_secs(30);
        loop {
            let v = history(&s.moto, &s.kf);
            if v.last().is_some_and(|l| l.released) || Instant::now() > end {
                break v;
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    };
    let held = spans(&versions);
    let mut disrupted: Vec<(String, f64, f64)> = nodes
        .iter()
        .map(|n| {
            let new = n.container_id(&n.module("app"));
            let (stop, start) = disruption(n, t0, &new);
            (n.id.clone(), stop, start)
        })
        .collect();
    disrupted.sort_by(|a, b| a.1.total_cmp(&b.1));
    for w in disrupted.windows(2) {
        assert!(
            w[0].2 < w[1].1,
            "two devices of one site disrupted at once: {disrupted:?}; leases {held:?}"
        );
    }
    for (id, stop, start) in &disrupted {
        // The lease's times are whole seconds of the host's clock (this
        // machine's): a second of slack each side.
        assert!(
            held.iter()
                .any(|(h, from, to)| h == id && *from - 1.0 <= *stop && *start <= *to + 1.0),
            "{id} disrupted {stop}..{start} outside its lease: {held:?}"
        );
    }
    assert!(
        held.iter()
            .all(|(h, _, _)| nodes.iter().any(|n| n.id == *h)),
        "{held:?}"
    );
    assert!(
        said.iter()
            .any(|b| b.contains("waits for the site's budget")),
        "no status said a device waited for the site's budget"
    );
    assert!(
        versions.last().unwrap().released,
        "the lease is released once the site is done: {versions:?}"
    );

    // Revision 3, and the first device seen holding the lease killed: the
    // site waits for its lease to end, then goes on.
    let t1 = unix_now();
    s.publish(&nodes, "3");
    let (dead, dead_until) = {
        let end = Instant::now() + Duration::from_secs(60);
        loop {
            let v = history(&s.moto, &s.kf);
            if let Some(l) = v.last().filter(|l| !l.released && l.taken >= t1.floor()) {
                let i = nodes.iter().position(|n| n.id == l.holder).unwrap();
                agents[i].kill();
                // What it last wrote before it died.
                let last = history(&s.moto, &s.kf).last().unwrap().clone();
                assert_eq!(last.holder, l.holder);
                break (i, last.expires);
            }
            assert!(
                Instant::now() < end,
                "no device took the lease for revision 3"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    let others: Vec<(&Node, &Agent)> = pairs(&nodes, &agents)
        .into_iter()
        .enumerate()
        .filter(|(i, _)| *i != dead)
        .map(|(_, p)| p)
        .collect();
    wait_all(&others, "3", 120, &mut said);
    for (n, _) in &others {
        let (stop, _) = disruption(n, t1, &n.container_id(&n.module("app")));
        assert!(
            stop >= dead_until - 1.0,
            "{} disrupted at {stop}, before the dead holder's lease ended at {dead_until}",
            n.id
        );
    }
    // The dead device's agent, started again, takes the revision too.
    agents[dead] = Agent::start(&nodes[dead]);
    wait_all(&pairs(&nodes, &agents), "3", 120, &mut said);
}

#[test]
fn a_budget_is_refused_at_publish_on_a_host_without_conditional_writes() {
    let d = tempfile::tempdir().unwrap();
    let plane = common::plane::Plane::start();
    let signing = SecretKey::generate().unwrap();
    let key_path = d.path().join("plane.key");
    stead::host::keyfile::write(&key_path, &signing).unwrap();
    let creds = d.path().join("credentials");
    std::fs::write(
        &creds,
        "[default]\naws_access_key_id = AKIDEXAMPLE\naws_secret_access_key = wJalrXUtnFEMI\n",
    )
    .unwrap();
    std::fs::set_permissions(&creds, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let (fleet, site) = (d.path().join("fleet"), d.path().join("site"));
    std::fs::create_dir_all(fleet.join("groups")).unwrap();
    std::fs::write(
        fleet.join("groups/tills.json"),
        json!({"modules": [module("app", "1")], "budget": {"per": "site", "max_updating": 1}})
            .to_string(),
    )
    .unwrap();
    std::fs::write(fleet.join("nodes.csv"), "node,groups\nt1,tills\n").unwrap();
    let publish = |extra: &[&str]| {
        let mut args = vec![
            "publish",
            "--key",
            key_path.to_str().unwrap(),
            "--fleet",
            fleet.to_str().unwrap(),
            "--site",
            site.to_str().unwrap(),
        ];
        args.extend(extra);
        common::plane::plane_cli_with(&args, "")
    };
    // nginx's WebDAV as the bucket's host: it takes every PUT.
    let endpoint = format!("http://{}", plane.addr());
    let (ok, out, err) = publish(&[
        "--upload",
        "s3://fleet/prod",
        "--s3-credentials",
        creds.to_str().unwrap(),
        "--s3-endpoint",
        &endpoint,
    ]);
    assert!(!ok, "{out}{err}");
    assert!(
        err.contains("group tills sets a budget")
            && err.contains("If-None-Match: *")
            && err.contains("nothing published"),
        "{err}"
    );
    assert!(!err.contains("wJalrXUtnFEMI"), "{err}");
    assert!(!site.exists(), "nothing written to the site");
    assert!(
        plane.count("PUT", "/fleet/prod/leases/.probe-", 201) >= 1,
        "the probe went to the host"
    );
    assert!(
        !plane.root().join("fleet/prod/groups").exists(),
        "no document went up"
    );
    // Without an upload, the host cannot be checked: refused too.
    let (ok, _, err) = publish(&[]);
    assert!(!ok);
    assert!(
        err.contains("publish with --upload s3://BUCKET/PREFIX")
            && err.contains("nothing published"),
        "{err}"
    );
    assert!(!site.exists());
    // The same fleet without a budget publishes.
    std::fs::write(
        fleet.join("groups/tills.json"),
        json!({"modules": [module("app", "1")]}).to_string(),
    )
    .unwrap();
    let (ok, out, err) = publish(&[]);
    assert!(ok, "{out}{err}");
}

#[test]
fn a_device_whose_host_keeps_no_lease_waits_saying_so_and_disrupts_nothing() {
    use common::desired::{group_payload, node_payload, plane_node, publish_group, sign};
    // A group document with a budget, signed and put on nginx by hand (as
    // a publish that skipped the check would): WebDAV takes the lease's
    // PUT but keeps no ETag, so no lease can be held there.
    let plane = common::plane::Plane::start();
    let key = SecretKey::generate().unwrap();
    let n = plane_node("budnginx", &plane, &key).with_config("\n[labels]\nsite = \"shop-9\"");
    let app = n.module("app");
    let budget = json!({"budget": {"per": "site", "max_updating": 1}});
    publish_group(
        &plane,
        &key,
        GROUP,
        &group_payload(GROUP, 1, vec![], budget.clone()),
    );
    let doc = |rev: u64, v: &str| {
        sign(
            &key,
            &node_payload(&n, rev, &[GROUP], vec![module(&app, v)], json!({})),
        )
    };
    plane.publish(&n.id, &doc(1, "1"));
    let agent = Agent::start(&n);
    common::desired::wait_v(&n, &app, "1");
    let first = n.container_id(&app);
    plane.publish(&n.id, &doc(2, "2"));
    n.wait_for(60, "the module to wait for the site's lease", || {
        let (_, body) = agent.get("/v1/status");
        body.contains("waits for the site's lease") && body.contains("it cannot keep a budget")
    });
    assert_eq!(n.container_id(&app), first, "nothing disrupted");
    assert!(!n.logs(&app).contains("V=2"));
    assert!(
        plane.count("PUT", "/leases/tills/site/shop-9/0.json", 201) >= 1,
        "the lease was asked of the host"
    );
}
