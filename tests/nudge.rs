//! The nudge (`[plane.nudge]`) against the real parts: Debian's
//! mosquitto as the operator's broker (a password, and TLS with a CA of
//! the test's), mosquitto_pub as the operator's publisher, nginx as the
//! plane's static host. A hint brings a published revision at once where
//! the poll interval is an hour; a replayed, a foreign or a flooding hint
//! costs at most one conditional GET per jitter window; a broker away
//! leaves polling as it was, and is subscribed to when it comes.

mod common;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::agent::Agent;
use common::desired::*;
use common::plane::Plane;
use common::registry::free_port;
use common::tls::Certs;
use common::*;
use serde_json::json;
use stead::plane::envelope::SecretKey;

const USER: &str = "edge";
const PASSWORD: &str = "nudge-pw-7";

/// Debian's mosquitto on loopback: a plain listener (the publisher's)
/// and, with `certs`, a TLS one; both ask for a password.
struct Broker {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

impl Broker {
    fn start(certs: Option<&Certs>) -> Broker {
        Broker::start_on(free_port(), certs.map(|c| (free_port(), c)))
    }

    fn start_on(port: u16, tls: Option<(u16, &Certs)>) -> Broker {
        let dir = tempfile::tempdir().unwrap();
        let passwd = dir.path().join("passwd");
        let out = Command::new("mosquitto_passwd")
            .args(["-b", "-c"])
            .arg(&passwd)
            .args([USER, PASSWORD])
            .output()
            .expect("mosquitto_passwd (Debian's mosquitto)");
        assert!(out.status.success(), "{out:?}");
        let mut conf = format!(
            "user root\npersistence false\nper_listener_settings false\nallow_anonymous false\npassword_file {}\nlistener {port} 127.0.0.1\n",
            passwd.display()
        );
        if let Some((p, c)) = tls {
            conf.push_str(&format!(
                "listener {p} 127.0.0.1\ncertfile {}\nkeyfile {}\n",
                c.cert.display(),
                c.key.display()
            ));
        }
        let conf_path = dir.path().join("mosquitto.conf");
        std::fs::write(&conf_path, conf).unwrap();
        let log = std::fs::File::create(dir.path().join("log")).unwrap();
        let child = Command::new("mosquitto")
            .arg("-c")
            .arg(&conf_path)
            .arg("-v")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("mosquitto");
        let mut b = Broker { child, port, dir };
        // Until it listens, or it exited (a configuration it refused).
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Some(status) = b.child.try_wait().unwrap() {
                panic!("mosquitto exited ({status}): {}", b.log());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        b
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("log")).unwrap_or_default()
    }

    fn password_file(&self) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let p = self.dir.path().join("pw");
        std::fs::write(&p, format!("{PASSWORD}\n")).unwrap();
        // A secret file: the agent's own, read by it alone.
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        p
    }

    /// Publishes each of `messages` on `topic`, as the operator would.
    fn publish(&self, topic: &str, messages: &[&str]) {
        let mut child = Command::new("mosquitto_pub")
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string()])
            .args(["-u", USER, "-P", PASSWORD, "-t", topic, "-l"])
            .stdin(Stdio::piped())
            .spawn()
            .expect("mosquitto_pub (Debian's mosquitto-clients)");
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        for m in messages {
            writeln!(stdin, "{m}").unwrap();
        }
        drop(stdin);
        assert!(child.wait().unwrap().success());
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A node whose poll interval is an hour, nudged by `broker_url`.
fn nudged_node(tag: &str, plane: &Plane, key: &SecretKey, nudge: &str, plane_lines: &str) -> Node {
    Node::new(tag).with_config(&format!(
        "[plane]\nurl = {:?}\ntrusted_keys = [{:?}]\npoll_interval = \"1h\"\n{plane_lines}[plane.nudge]\n{nudge}",
        plane.base(),
        key.public().to_base64()
    ))
}

fn publish_rev(plane: &Plane, key: &SecretKey, n: &Node, m: &str, revision: u64, v: &str) {
    let mut p = payload(n, revision, vec![module(m, v)]);
    p["poll"] = json!({"interval": "1h", "jitter": "1s"});
    plane.publish(&n.id, &sign(key, &p));
}

/// The count of nudges by outcome in the agent's metrics.
fn nudges(agent: &Agent, outcome: &str) -> u64 {
    let (_, text) = agent.get("/metrics");
    let line = format!("stead_plane_nudges_total{{outcome=\"{outcome}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&line))
        .map_or(0, |v| v.trim().parse().unwrap())
}

fn wait_log(n: &Node, what: &str, text: &str) {
    n.wait_for(60, what, || Agent::log(n).contains(text));
}

#[test]
fn a_hint_brings_a_revision_at_once_and_a_replayed_foreign_or_flooding_one_costs_at_most_a_poll() {
    require_engine();
    let key = SecretKey::generate().unwrap();
    let plane = Plane::start();
    let broker = Broker::start(None);
    let n = nudged_node(
        "nudge",
        &plane,
        &key,
        &format!(
            "broker = \"mqtt://127.0.0.1:{}\"\ntopic = \"stead/{{node}}\"\njitter = \"2s\"\nusername = \"{USER}\"\npassword_file = {:?}",
            broker.port,
            broker.password_file()
        ),
        "",
    );
    let m = n.module("web");
    publish_rev(&plane, &key, &n, &m, 1, "one");
    let agent = Agent::start(&n);
    wait_v(&n, &m, "one");
    wait_plane(&n, &agent, "revision 1", |p| p["held"]["revision"] == 1);
    wait_log(&n, "the subscription", "plane: nudged by mqtt://127.0.0.1");
    let topic = format!("stead/{}", n.id);
    let p = plane_state(&agent);
    assert_eq!(p["nudge"]["connected"], true, "{p:#}");
    assert_eq!(p["nudge"]["topic"], topic.as_str());

    // Published, then hinted: taken long before the hour's poll.
    publish_rev(&plane, &key, &n, &m, 2, "two");
    broker.publish(&topic, &["{\"revision\": 2}"]);
    wait_plane(&n, &agent, "revision 2", |p| p["held"]["revision"] == 2);
    wait_v(&n, &m, "two");
    assert_eq!(nudges(&agent, "poll"), 1);
    let gets = plane
        .requests()
        .iter()
        .filter(|r| r.path.contains("desired.json"))
        .count();

    // Replayed (a revision held), or for a group this node is not in:
    // nothing asked of the plane.
    std::thread::sleep(Duration::from_secs(3));
    broker.publish(
        &topic,
        &[
            "{\"revision\": 2}",
            "{\"revision\": 1}",
            "{\"group\": \"other\", \"revision\": 9}",
            "rm -rf /",
        ],
    );
    n.wait_for(10, "the hints counted", || {
        nudges(&agent, "held") == 2
            && nudges(&agent, "not_mine") == 1
            && nudges(&agent, "unreadable") == 1
    });

    // A flood (forged revisions, "poll"s): one conditional GET in the
    // window, the rest held back by the gate.
    let flood: Vec<String> = (0..100)
        .map(|i| {
            if i % 2 == 0 {
                "poll".to_string()
            } else {
                format!("{{\"revision\": {}}}", 1000 + i)
            }
        })
        .collect();
    broker.publish(
        &topic,
        &flood.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    n.wait_for(10, "the flood counted", || {
        nudges(&agent, "poll") + nudges(&agent, "gated") == 101
    });
    // The window (2 s) and the poll within it.
    std::thread::sleep(Duration::from_secs(5));
    assert_eq!(nudges(&agent, "poll"), 2, "{}", agent.get("/metrics").1);
    let after = plane
        .requests()
        .iter()
        .filter(|r| r.path.contains("desired.json"))
        .count();
    assert_eq!(after - gets, 1, "{:#?}", plane.requests());
    assert_eq!(plane.count("GET", "desired.json", 304), 1);
}

#[test]
fn with_its_broker_away_a_device_polls_as_before_and_takes_hints_over_tls_once_it_comes() {
    require_engine();
    let key = SecretKey::generate().unwrap();
    let plane = Plane::start();
    let certs = Certs::made_at(now() - 3600, 30, "127.0.0.1");
    let (port, tls_port) = (free_port(), free_port());
    let password = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(password.path(), PASSWORD).unwrap();
    let n = nudged_node(
        "nudgetls",
        &plane,
        &key,
        &format!(
            "broker = \"mqtts://127.0.0.1:{tls_port}\"\njitter = \"1s\"\nusername = \"{USER}\"\npassword_file = {:?}",
            password.path()
        ),
        &format!("ca = {:?}\n", certs.ca),
    );
    let m = n.module("web");
    publish_rev(&plane, &key, &n, &m, 1, "one");
    let agent = Agent::start(&n);
    // No broker: the first poll is as it always was.
    wait_v(&n, &m, "one");
    wait_log(&n, "the broker said away", "the nudge's broker is away");
    assert!(nudges(&agent, "broker_away") >= 1);
    let p = plane_state(&agent);
    assert_eq!(p["nudge"]["connected"], false, "{p:#}");
    assert!(
        p["nudge"]["error"]
            .as_str()
            .is_some_and(|e| e.contains("refused")),
        "{p:#}"
    );

    // The broker comes: the device subscribes (its back-off is short yet),
    // over TLS checked against the plane's CA, with its password.
    let broker = Broker::start_on(port, Some((tls_port, &certs)));
    wait_log(
        &n,
        "the subscription",
        &format!("plane: nudged by mqtts://127.0.0.1:{tls_port}"),
    );
    publish_rev(&plane, &key, &n, &m, 2, "two");
    broker.publish("stead/nudge", &["poll"]);
    wait_plane(&n, &agent, "revision 2", |p| p["held"]["revision"] == 2);
    wait_v(&n, &m, "two");
    let p = plane_state(&agent);
    assert_eq!(
        (
            &p["nudge"]["connected"],
            &p["nudge"]["hints"],
            &p["nudge"]["polls"]
        ),
        (&json!(true), &json!(1), &json!(1)),
        "{p:#}"
    );
    let log = Agent::log(&n);
    assert!(!log.contains(PASSWORD), "{log}");
    assert!(
        broker.log().contains(&format!("stead-{}", n.id)),
        "{}",
        broker.log()
    );
}
