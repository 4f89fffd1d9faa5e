//! Finding a site's peers by mDNS (`[site] mdns`), on a link of its own:
//! a veth pair whose one end is in this test's network namespace and the
//! other in the host's, where multicast goes nowhere else. The reference
//! side is python-zeroconf (`scripts/mdns-ref.py`), a complete mDNS and
//! DNS-SD implementation: it reads what the agent answers, and announces
//! a listener the agent must find and then forget when it says goodbye.
//! The last test is two agents, one in the namespace whose registry is
//! out of reach, that finds the other by mDNS and takes its image from
//! it. Needs root (namespaces) and `STEAD_TEST_ZEROCONF` (a venv with
//! python-zeroconf, which scripts/test.sh makes).

mod common;

use std::process::{Command, Stdio};

use common::agent::Agent;
use common::pulls::push_random;
use common::registry::{Registry, free_port};
use common::*;

/// A link of its own: a namespace, and a veth pair between it and the
/// host's namespace, each end with an address of `10.213.<net>.0/24`.
struct Link {
    ns: String,
    /// The host's end: its name and address.
    host_if: String,
    host_ip: String,
    /// The namespace's end.
    ns_if: String,
    ns_ip: String,
    net: String,
}

fn ip(args: &[&str]) -> String {
    let out = Command::new("ip")
        .args(args)
        .output()
        .expect("ip (iproute2)");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

impl Link {
    fn new(tag: &str) -> Link {
        let pid = std::process::id();
        let ns = format!("stead-mdns-{tag}-{pid}");
        let short = format!("{}{}", &tag[..1], pid % 100_000);
        let host_if = format!("smh{short}");
        let ns_if = format!("smn{short}");
        // A /24 no interface of the host has yet.
        let taken = ip(&["-o", "-4", "addr", "show"]);
        let x = (0..250)
            .map(|i| (pid as usize + i) % 250 + 1)
            .find(|x| !taken.contains(&format!(" 10.213.{x}.")))
            .expect("a free 10.213.x.0/24");
        let net = format!("10.213.{x}");
        let _ = Command::new("ip").args(["netns", "del", &ns]).output();
        let _ = Command::new("ip").args(["link", "del", &host_if]).output();
        ip(&["netns", "add", &ns]);
        ip(&[
            "link", "add", &host_if, "type", "veth", "peer", "name", &ns_if, "netns", &ns,
        ]);
        ip(&["addr", "add", &format!("{net}.1/24"), "dev", &host_if]);
        ip(&["link", "set", &host_if, "up"]);
        let in_ns = |args: &[&str]| {
            let mut a = vec!["netns", "exec", ns.as_str(), "ip"];
            a.extend_from_slice(args);
            ip(&a)
        };
        in_ns(&["addr", "add", &format!("{net}.2/24"), "dev", &ns_if]);
        in_ns(&["link", "set", &ns_if, "up"]);
        in_ns(&["link", "set", "lo", "up"]);
        Link {
            host_ip: format!("{net}.1"),
            ns_ip: format!("{net}.2"),
            ns,
            host_if,
            ns_if,
            net,
        }
    }

    /// `ip netns exec <ns>`: a wrapper that runs a command in the
    /// namespace.
    fn wrapper(&self) -> [&str; 3] {
        ["netns", "exec", self.ns.as_str()]
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.ns]).output();
        let _ = Command::new("ip")
            .args(["link", "del", &self.host_if])
            .output();
    }
}

/// python-zeroconf's interpreter and the script that drives it.
fn zeroconf() -> (String, String) {
    let venv = std::env::var("STEAD_TEST_ZEROCONF")
        .expect("STEAD_TEST_ZEROCONF: a venv with python-zeroconf (scripts/test.sh makes it)");
    (
        format!("{venv}/bin/python"),
        format!("{}/scripts/mdns-ref.py", env!("CARGO_MANIFEST_DIR")),
    )
}

/// A metric's value in the agent's /metrics (0 when absent).
fn metric(agent: &Agent, line: &str) -> u64 {
    let (_, text) = agent.get("/metrics");
    text.lines()
        .find_map(|l| l.strip_prefix(line))
        .map_or(0, |v| v.trim().parse().unwrap())
}

#[test]
fn the_agent_is_read_by_python_zeroconf_and_finds_what_it_announces_until_its_goodbye() {
    require_engine();
    let link = Link::new("r");
    let port = free_port();
    let n = Node::new("mdnsref")
        .with_heartbeat("1s")
        .with_config(&format!(
            "[site]\nlisten = \"{}:{port}\"\nallow = [\"{}.0/24\"]\nmdns = \"{}\"",
            link.host_ip, link.net, link.host_if
        ));
    // With the packaged unit's capabilities alone (no CAP_NET_RAW, no
    // CAP_NET_ADMIN): the socket's options need none.
    let agent = Agent::start_under(
        &n,
        &[
            "setpriv",
            "--bounding-set=-all,+dac_read_search",
            "--inh-caps=-all",
        ],
    );
    let caps = std::fs::read_to_string(format!("/proc/{}/status", agent.child.id())).unwrap();
    assert!(
        caps.lines()
            .any(|l| l.starts_with("CapEff:") && l.ends_with("0000000000000004")),
        "{caps}"
    );
    let (python, script) = zeroconf();
    let w = link.wrapper();

    // The reference reads this device's listener from its answers.
    let out = Command::new("ip")
        .args(w)
        .args([
            python.as_str(),
            script.as_str(),
            "browse",
            &link.ns_ip,
            "20",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stderr),
        Agent::log(&n)
    );
    let got: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        got,
        serde_json::json!({
            "name": format!("{}._stead-peer._tcp.local.", n.id),
            "addresses": [link.host_ip],
            "port": port,
        })
    );

    // A listener the reference announces is found, and forgotten when
    // it says goodbye.
    let mut publish = Command::new("ip")
        .args(w)
        .args([
            python.as_str(),
            script.as_str(),
            "publish",
            &link.ns_ip,
            "box-9",
            &link.ns_ip,
            "7999",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    n.wait_for(20, "the listener python-zeroconf announces found", || {
        metric(&agent, "stead_site_mdns_peers ") == 1
    });
    let log = Agent::log(&n);
    assert!(
        log.contains(&format!("http://{}:7999", link.ns_ip)) && log.contains("box-9"),
        "{log}"
    );
    drop(publish.stdin.take());
    assert!(publish.wait().unwrap().success());
    n.wait_for(10, "the listener forgotten after its goodbye", || {
        metric(&agent, "stead_site_mdns_peers ") == 0
    });
    assert!(Agent::log(&n).contains("a peer found by mDNS is gone"));
}

#[test]
fn a_device_whose_registry_is_away_finds_its_peer_by_mdns_and_takes_the_image_from_it() {
    require_engine();
    let reg = Registry::plain();
    let (config, layers) = push_random(&reg, "mdns/module", "1", 1024);
    let (_, size) = layers.last().unwrap().clone();
    let digest = common::registry::manifest_digest(&reg, "mdns/module", "1");
    let image = format!("{}/mdns/module@{digest}", reg.addr);
    let link = Link::new("e");

    // A, in the host's namespace, fetches the image and serves it.
    let port = free_port();
    let a = Node::new("mdnsa")
        .with_heartbeat("1s")
        .with_config(&format!(
            "[site]\nlisten = \"{}:{port}\"\nallow = [\"{}.0/24\"]\nmdns = \"{}\"",
            link.host_ip, link.net, link.host_if
        ));
    let ma = a.module("app");
    a.write_intention(
        "app.toml",
        common::intention::Module::new(&ma, &image).idle("a"),
    );
    let agent_a = Agent::start(&a);
    a.wait_for(120, "A running its fetched image", || {
        a.container(&ma).is_some_and(|(_, s, _)| s == "running")
    });
    // The engine then forgets it: B must fetch it again.
    a.remove_intention("app.toml");
    a.wait_for(60, "A's module removed", || a.container(&ma).is_none());
    let _ = docker(&["rmi", "-f", &image]);
    let _ = docker(&["rmi", "-f", &config]);
    assert!(!docker(&["image", "inspect", &image]).status.success());

    // B, in the namespace, where the registry (the host's loopback) is
    // not, names no peer: it finds A by mDNS.
    let b = Node::new("mdnsb")
        .with_heartbeat("1s")
        .with_config(&format!("[site]\nmdns = \"{}\"", link.ns_if));
    let mb = b.module("app");
    b.write_intention(
        "app.toml",
        common::intention::Module::new(&mb, &image).idle("b"),
    );
    let w = link.wrapper();
    let _agent_b = Agent::start_under(&b, &["ip", w[0], w[1], w[2]]);
    b.wait_for(120, "B running the image it took from A", || {
        b.container(&mb).is_some_and(|(_, s, _)| s == "running")
    });
    let log = Agent::log(&b);
    assert!(
        log.contains("a peer found by mDNS")
            && log.contains(&format!("http://{}:{port}", link.host_ip)),
        "{log}"
    );
    assert!(
        metric(&agent_a, "stead_site_served_bytes_total{what=\"blob\"} ") >= size,
        "{}",
        agent_a.get("/metrics").1
    );
    assert!(
        metric(
            &agent_a,
            "stead_site_served_bytes_total{what=\"manifest\"} "
        ) > 0
    );
    let _ = config;
}
