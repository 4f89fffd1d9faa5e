//! What a module asks of its container beyond its image, against the real
//! engine: every runtime field lands on the container the engine creates
//! (read back with `docker inspect`), and a change of one field recreates
//! it once, naming the field.

mod common;

use common::agent::Agent;
use common::*;
use serde_json::Value as J;
use std::collections::BTreeMap;
use std::process::Command;

fn inspect(id: &str) -> J {
    let out = docker_ok(&["inspect", "--format", "{{json .}}", id]);
    serde_json::from_str(&out).unwrap()
}

fn module(name: &str, mem: &str) -> String {
    // Podman's Docker-compatible API drops device cgroup rules and keeps
    // one log file: the agent refuses both there (tested below).
    let (rules, log_files) = if on_podman() {
        ("", "")
    } else {
        (
            "device_cgroup_rules = [\"c 188:* rwm\"]\n",
            ", max-file = \"2\"",
        )
    };
    format!(
        r#"name = "{name}"
image = "{IMAGE_1}"
entrypoint = ["/bin/sh", "-c"]
command = [{cmd:?}]
restart = "always"
working_dir = "/tmp"
user = "1000:1000"
labels = {{"com.example.role" = "sensor"}}
devices = ["/dev/zero:/dev/myzero:r"]
{rules}cap_add = ["net_admin"]
cap_drop = ["CAP_MKNOD"]
extra_hosts = ["db:10.0.0.2", "cache=10.0.0.3,fe80::1"]
dns = ["10.0.0.53"]
tmpfs = ["/run:size=16m"]
read_only = true
mem_limit = "{mem}"
cpus = 0.5
pids_limit = 50
shm_size = "32m"
ulimits = {{nofile = {{soft = 1024, hard = 2048}}, nproc = 4096}}
sysctls = {{"net.ipv4.ip_forward" = "1"}}
init = true
stop_signal = "INT"
stop_grace_period = "3s"

[healthcheck]
test = "true"
interval = "1s"
retries = 2

[logging]
driver = "json-file"
options = {{max-size = "1m"{log_files}}}
"#,
        cmd = idle_after("echo up")
    )
}

#[test]
fn every_runtime_field_lands_on_the_container_and_a_change_recreates_it_once() {
    let n = Node::new("runtime");
    let m = n.module("rt");
    n.write_intention("rt.toml", module(&m, "64m"));
    let agent = Agent::start(&n);
    let _timer = HealthTimer::start(&n.id);
    n.wait_for(60, "the module running", || {
        n.container(&m).is_some_and(|(_, s, _)| s == "running")
    });
    let id = n.container_id(&m);
    let c = inspect(&id);
    let cfg = &c["Config"];
    let host = &c["HostConfig"];
    assert_eq!(cfg["Entrypoint"], serde_json::json!(["/bin/sh", "-c"]));
    assert_eq!(cfg["WorkingDir"], "/tmp");
    assert_eq!(cfg["User"], "1000:1000");
    assert_eq!(cfg["Labels"]["com.example.role"], "sensor");
    assert_eq!(cfg["Labels"]["stead.module"], m.as_str());
    // Podman's inspect says the signal's number.
    assert_eq!(cfg["StopSignal"], if on_podman() { "2" } else { "SIGINT" });
    assert_eq!(cfg["StopTimeout"], 3);
    assert_eq!(
        cfg["Healthcheck"]["Test"],
        serde_json::json!(["CMD-SHELL", "true"])
    );
    assert_eq!(cfg["Healthcheck"]["Interval"], 1_000_000_000u64);
    assert_eq!(cfg["Healthcheck"]["Retries"], 2);
    // Podman applies the permissions and does not say them.
    assert_eq!(
        host["Devices"],
        serde_json::json!([{"PathOnHost": "/dev/zero", "PathInContainer": "/dev/myzero", "CgroupPermissions": if on_podman() { "" } else { "r" }}])
    );
    if !on_podman() {
        assert_eq!(
            host["DeviceCgroupRules"],
            serde_json::json!(["c 188:* rwm"])
        );
    }
    assert_eq!(host["CapAdd"], serde_json::json!(["NET_ADMIN"]));
    assert_eq!(host["CapDrop"], serde_json::json!(["MKNOD"]));
    assert_eq!(
        host["ExtraHosts"],
        serde_json::json!(["cache:10.0.0.3", "cache:fe80::1", "db:10.0.0.2"])
    );
    // One name with several addresses has each of them in /etc/hosts.
    let hosts = docker_ok(&["exec", &id, "cat", "/etc/hosts"]);
    for ip in ["10.0.0.3", "fe80::1", "10.0.0.2"] {
        assert!(
            hosts
                .lines()
                .any(|l| l.split_whitespace().next() == Some(ip)
                    && l.split_whitespace().any(|w| w == "cache" || w == "db")),
            "{ip}: {hosts}"
        );
    }
    assert_eq!(host["Dns"], serde_json::json!(["10.0.0.53"]));
    // Podman adds its mount options.
    assert!(
        host["Tmpfs"]["/run"]
            .as_str()
            .unwrap()
            .starts_with("size=16m"),
        "{host:#}"
    );
    assert_eq!(host["ReadonlyRootfs"], true);
    assert_eq!(host["Memory"], 64u64 << 20);
    assert_eq!(host["NanoCpus"], 500_000_000u64);
    assert_eq!(host["ShmSize"], 32u64 << 20);
    assert_eq!(host["PidsLimit"], 50);
    // Podman names limits as the kernel does.
    let ulimits = if on_podman() {
        serde_json::json!([{"Name": "RLIMIT_NOFILE", "Soft": 1024, "Hard": 2048}, {"Name": "RLIMIT_NPROC", "Soft": 4096, "Hard": 4096}])
    } else {
        serde_json::json!([{"Name": "nofile", "Soft": 1024, "Hard": 2048}, {"Name": "nproc", "Soft": 4096, "Hard": 4096}])
    };
    assert_eq!(host["Ulimits"], ulimits);
    assert_eq!(host["Init"], true);
    assert_eq!(host["LogConfig"]["Type"], "json-file");
    if on_podman() {
        assert_eq!(
            podman_inspect(&id)[0]["HostConfig"]["LogConfig"]["Size"],
            "1MB"
        );
    } else {
        assert_eq!(host["Sysctls"]["net.ipv4.ip_forward"], "1");
        assert_eq!(host["LogConfig"]["Config"]["max-size"], "1m");
    }
    // The container runs as asked: its user, its read-only root, the device.
    let exec = |cmd: &str| docker_ok(&["exec", &id, "sh", "-c", cmd]);
    assert_eq!(exec("id -u"), "1000");
    assert!(docker(&["exec", &id, "sh", "-c", "touch /x"]).status.code() != Some(0));
    assert_eq!(exec("ls /dev/myzero"), "/dev/myzero");
    assert_eq!(exec("cat /proc/sys/net/ipv4/ip_forward"), "1");
    // The container's own process (an exec may be given other limits).
    assert_eq!(
        exec("grep 'open files' /proc/1/limits | tr -s ' ' | cut -d' ' -f4,5"),
        "1024 2048"
    );
    // Healthy by its check.
    n.wait_for(30, "healthy", || {
        inspect(&id)["State"]["Health"]["Status"] == "healthy"
    });

    // One field changes: one recreate, the field named.
    let since = unix_now();
    n.write_intention("rt.toml", module(&m, "96m"));
    n.wait_for(60, "the new limit", || {
        n.container(&m).is_some_and(|(i, s, _)| {
            i != id && s == "running" && inspect(&i)["HostConfig"]["Memory"] == 96u64 << 20
        })
    });
    std::thread::sleep(std::time::Duration::from_secs(2));
    assert_eq!(
        n.creates_since(&m, since),
        1,
        "{:?}",
        n.events_since(&m, since)
    );
    let (_, events) = agent.get("/v1/events?limit=1000");
    assert!(events.contains("mem_limit"), "{events}");
}

/// What Podman's Docker-compatible API would take and not apply is refused
/// there before the engine is asked, naming the field; the Docker Engine
/// makes the same modules.
#[test]
fn a_field_the_engine_does_not_apply_is_refused_at_create_naming_it() {
    let n = Node::new("runtime-unsupported");
    let (rules, files, gw) = (n.module("rules"), n.module("files"), n.module("gw"));
    let idle = idle_after("echo up");
    n.write_intention(
        "rules.toml",
        format!(
            "name = \"{rules}\"\nimage = \"{IMAGE_1}\"\ncommand = [\"sh\", \"-c\", {idle:?}]\ndevice_cgroup_rules = [\"c 188:* rwm\"]\n"
        ),
    );
    n.write_intention(
        "files.toml",
        format!(
            "name = \"{files}\"\nimage = \"{IMAGE_1}\"\ncommand = [\"sh\", \"-c\", {idle:?}]\n[logging]\ndriver = \"json-file\"\noptions = {{max-size = \"1m\", max-file = \"2\"}}\n"
        ),
    );
    n.write_intention(
        "gw.toml",
        format!(
            "name = \"{gw}\"\nimage = \"{IMAGE_1}\"\ncommand = [\"sh\", \"-c\", {idle:?}]\nextra_hosts = [\"the-host:host-gateway\"]\n"
        ),
    );
    let agent = Agent::start(&n);
    let module =
        |m: &str| -> J { serde_json::from_str(&agent.get(&format!("/v1/modules/{m}")).1).unwrap() };
    if on_podman() {
        for (m, field) in [
            (&rules, "device_cgroup_rules"),
            (&files, "\"max-file\""),
            (&gw, "extra_hosts.the-host"),
        ] {
            n.wait_for(30, "the module failed", || module(m)["state"] == "failed");
            let s = module(m);
            let e = s["last_error"].as_str().unwrap();
            assert!(
                e.contains("Podman") && e.contains("does not support") && e.contains(field),
                "{s:#}"
            );
            assert!(n.container(m).is_none());
        }
    } else {
        for m in [&rules, &files, &gw] {
            n.wait_for(60, "the module running", || {
                n.container(m).is_some_and(|(_, s, _)| s == "running")
            });
        }
        // The host's address as the container reaches it.
        let hosts = docker_ok(&["exec", &n.container_id(&gw), "cat", "/etc/hosts"]);
        let address = hosts
            .lines()
            .find(|l| l.ends_with("the-host"))
            .and_then(|l| l.split_whitespace().next())
            .unwrap_or_default();
        assert!(address.parse::<std::net::IpAddr>().is_ok(), "{hosts}");
    }
}

#[test]
fn host_networking_and_a_stop_grace_period_are_the_container_s() {
    let n = Node::new("runtime-net");
    let m = n.module("hostnet");
    n.write_intention(
        "h.toml",
        format!(
            "name = \"{m}\"\nimage = \"{IMAGE_1}\"\nnetwork_mode = \"host\"\nstop_grace_period = \"2s\"\ncommand = [\"sh\", \"-c\", \"trap '' TERM; echo up; while true; do sleep 1; done\"]\n"
        ),
    );
    let _agent = Agent::start(&n);
    n.wait_for(60, "the module running", || {
        n.container(&m).is_some_and(|(_, s, _)| s == "running")
    });
    let id = n.container_id(&m);
    let c = inspect(&id);
    assert_eq!(c["HostConfig"]["NetworkMode"], "host");
    // Without its own logging: the agent's default, rotated: Podman has
    // no `local` driver and keeps one file.
    if on_podman() {
        assert_eq!(c["HostConfig"]["LogConfig"]["Type"], "json-file");
        let p = podman_inspect(&id);
        assert_eq!(p[0]["HostConfig"]["LogConfig"]["Size"], "10MB");
    } else {
        assert_eq!(c["HostConfig"]["LogConfig"]["Type"], "local");
        assert_eq!(c["HostConfig"]["LogConfig"]["Config"]["max-size"], "10m");
        assert_eq!(c["HostConfig"]["LogConfig"]["Config"]["max-file"], "3");
    }
    // A process that ignores SIGTERM is killed after its own grace period
    // when the agent removes the module, not after the engine's 10 s.
    let started = std::time::Instant::now();
    n.remove_intention("h.toml");
    n.wait_for(30, "the module removed", || n.container(&m).is_none());
    let took = started.elapsed();
    assert!(took >= std::time::Duration::from_secs(2), "{took:?}");
    assert!(took < std::time::Duration::from_secs(9), "{took:?}");
}

#[test]
fn the_default_logging_is_the_node_s_and_not_an_input() {
    // Podman keeps one file per container: max_file is not for it.
    let files = if on_podman() { "" } else { "\nmax_file = 2" };
    let n = Node::new("runtime-log").with_config(&format!(
        "[logging]\ndriver = \"json-file\"\nmax_size = \"1m\"{files}"
    ));
    let m = n.module("log");
    n.write_intention(
        "l.toml",
        format!(
            "name = \"{m}\"\nimage = \"{IMAGE_1}\"\ncommand = [\"sh\", \"-c\", {:?}]\n",
            idle_after("echo up")
        ),
    );
    let _agent = Agent::start(&n);
    n.wait_for(60, "the module running", || {
        n.container(&m).is_some_and(|(_, s, _)| s == "running")
    });
    let id = n.container_id(&m);
    let c = inspect(&id);
    assert_eq!(c["HostConfig"]["LogConfig"]["Type"], "json-file");
    if on_podman() {
        assert_eq!(
            podman_inspect(&id)[0]["HostConfig"]["LogConfig"]["Size"],
            "1MB"
        );
    } else {
        assert_eq!(c["HostConfig"]["LogConfig"]["Config"]["max-size"], "1m");
        assert_eq!(c["HostConfig"]["LogConfig"]["Config"]["max-file"], "2");
    }
    let labels = c["Config"]["Labels"].as_object().unwrap();
    assert!(!labels.contains_key("stead.input.logging"), "{labels:?}");
}

#[test]
fn a_failing_health_check_reads_unhealthy_with_the_probe_s_words_and_healthy_converges() {
    let n = Node::new("runtime-health").with_config("settle_window = \"1s\"");
    let m = n.module("hc");
    n.write_intention(
        "hc.toml",
        format!(
            "name = \"{m}\"\nimage = \"{IMAGE_1}\"\ncommand = [\"sh\", \"-c\", {:?}]\n[healthcheck]\ntest = \"cat /tmp/ok || (echo not ready yet; exit 1)\"\ninterval = \"1s\"\nretries = 1\n",
            idle_after("echo up")
        ),
    );
    let agent = Agent::start(&n);
    let _timer = HealthTimer::start(&n.id);
    let module =
        || -> J { serde_json::from_str(&agent.get(&format!("/v1/modules/{m}")).1).unwrap() };
    n.wait_for(60, "unhealthy", || module()["state"] == "unhealthy");
    let s = module();
    assert!(
        s["health_output"]
            .as_str()
            .unwrap()
            .contains("not ready yet"),
        "{s:#}"
    );
    assert!(
        s["last_error"]
            .as_str()
            .unwrap()
            .contains("health check fails"),
        "{s:#}"
    );
    let (_, metrics) = agent.get("/metrics");
    assert!(
        metrics.contains("stead_modules{state=\"unhealthy\"} 1"),
        "{metrics}"
    );
    // Made healthy by hand: converged, no recreate.
    let id = n.container_id(&m);
    docker_ok(&["exec", &id, "touch", "/tmp/ok"]);
    n.wait_for(60, "converged once healthy", || {
        module()["state"] == "converged"
    });
    assert_eq!(n.container_id(&m), id);
    assert_eq!(module()["health"], "healthy");
}

#[test]
fn named_volumes_are_kept_and_user_networks_resolve_module_names_and_go_when_unused() {
    let n = Node::new("runtime-volnet");
    let (a, b) = (n.module("web"), n.module("client"));
    let net = format!("{}-net", n.id);
    let vol = format!("{}-data", n.id);
    // A read-write mount whose source is missing: made, as Compose does.
    let missing = n.dir.path().join("host/not/yet");
    // httpd as PID 1 ignores SIGTERM: a short grace keeps its stop quick.
    n.write_intention(
        "a.toml",
        format!(
            "name = \"{a}\"\nimage = \"{IMAGE_1}\"\nvolumes = [\"{vol}:/data\"]\nnetworks = [\"{net}\"]\nstop_grace_period = \"1s\"\ncommand = [\"sh\", \"-c\", \"echo made > /made/here; echo hello-from-the-volume > /data/index.html; exec httpd -f -p 8080 -h /data\"]\n[[mounts]]\nsource = {missing:?}\ntarget = \"/made\"\n"
        ),
    );
    n.write_intention(
        "b.toml",
        format!(
            "name = \"{b}\"\nimage = \"{IMAGE_1}\"\nnetworks = [\"{net}\"]\ncommand = [\"sh\", \"-c\", {:?}]\n",
            format!("until wget -q -O- http://{a}:8080/; do sleep 0.5; done; {}", idle_after("echo fetched"))
        ),
    );
    let _agent = Agent::start(&n);
    n.wait_logs(&b, "hello-from-the-volume");
    assert_eq!(
        std::fs::read_to_string(missing.join("here")).unwrap(),
        "made\n"
    );
    let label = |kind: &str, name: &str| {
        docker_ok(&[
            kind,
            "inspect",
            "--format",
            "{{index .Labels \"stead.managed-by\"}}",
            name,
        ])
    };
    assert_eq!(label("volume", &vol), n.id);
    assert_eq!(label("network", &net), n.id);
    // Both modules go: the network goes with its last container, the
    // volume (state) stays.
    n.remove_intention("a.toml");
    n.remove_intention("b.toml");
    n.wait_for(60, "the network removed", || {
        docker(&["network", "inspect", &net]).status.code() != Some(0)
    });
    assert_eq!(label("volume", &vol), n.id);
    docker_ok(&["volume", "rm", &vol]);
}

/// On a user network a module is found by its module name, by each of its
/// aliases and by its host name; a new alias recreates it once, and the
/// new name resolves.
#[test]
fn a_module_is_found_on_its_networks_by_its_name_its_aliases_and_its_host_name() {
    let n = Node::new("runtime-names");
    let (db, client) = (n.module("db"), n.module("client"));
    let net = format!("{}-names", n.id);
    // httpd as PID 1 ignores SIGTERM: a short grace keeps its stop quick.
    let db_intention = |aliases: &str| {
        format!(
            "name = \"{db}\"\nimage = \"{IMAGE_1}\"\nnetworks = [\"{net}\"]\nhostname = \"dbhost\"\naliases = [{aliases}]\nstop_grace_period = \"1s\"\ncommand = [\"sh\", \"-c\", \"mkdir -p /www; echo pong > /www/index.html; exec httpd -f -p 8080 -h /www\"]\n"
        )
    };
    n.write_intention("db.toml", db_intention("\"db_main\", \"edgex-db\""));
    // Resolved by the engine's DNS with busybox's nslookup (its static
    // wget cannot resolve a name with `_`, and crashes on a refused
    // connection with -T), then fetched.
    const GET: &str = "get() { ip=$(nslookup \"$1\" 2>/dev/null | awk '/^Address/ {a=$2} END {print a}'); wget -q -O- \"http://$ip:8080/\"; }; ";
    let reach = |names: &[&str]| {
        names
            .iter()
            .map(|h| {
                format!("until get {h} | grep -q pong; do sleep 0.5; done; echo reached-{h}; ")
            })
            .collect::<String>()
    };
    n.write_intention(
        "client.toml",
        format!(
            "name = \"{client}\"\nimage = \"{IMAGE_1}\"\nnetworks = [\"{net}\"]\ncommand = [\"sh\", \"-c\", {:?}]\n",
            format!(
                "{GET}{}{}",
                reach(&[&db, "db_main", "edgex-db", "dbhost"]),
                idle_after("echo all")
            )
        ),
    );
    let _agent = Agent::start(&n);
    n.wait_logs(&client, "all");
    let logs = n.logs(&client);
    for h in [db.as_str(), "db_main", "edgex-db", "dbhost"] {
        assert!(logs.contains(&format!("reached-{h}")), "{h}: {logs}");
    }
    let c = inspect(&n.container_id(&db));
    assert_eq!(c["Config"]["Hostname"], "dbhost");

    // An alias more: made again once, found by it.
    let old = n.container_id(&db);
    let since = unix_now();
    n.write_intention(
        "db.toml",
        db_intention("\"db_main\", \"edgex-db\", \"mysql\""),
    );
    // The swap done: the new container at the module's name, running.
    n.wait_for(60, "db made again", || {
        n.container(&db)
            .is_some_and(|(id, state, _)| id != old && state == "running")
    });
    let id = n.container_id(&db);
    let found = docker_ok(&[
        "exec",
        &n.container_id(&client),
        "sh",
        "-c",
        &format!("{GET}for i in $(seq 60); do get mysql && exit 0; sleep 0.5; done; exit 1"),
    ]);
    assert_eq!(found, "pong");
    std::thread::sleep(std::time::Duration::from_secs(2));
    assert_eq!(n.creates_since(&db, since), 1);
    assert_eq!(n.container_id(&db), id);
}

#[test]
fn a_module_in_another_s_network_stack_waits_for_it_and_follows_its_replacement_once() {
    let n = Node::new("runtime-netns");
    let (vpn, app) = (n.module("vpn"), n.module("app"));
    // httpd as PID 1 ignores SIGTERM: a short grace keeps its stop quick.
    let vpn_intention = |v: &str| {
        format!(
            "name = \"{vpn}\"\nimage = \"{IMAGE_1}\"\nenv = {{V = \"{v}\"}}\nstop_grace_period = \"1s\"\ncommand = [\"sh\", \"-c\", \"mkdir -p /www; echo stack-of-$V > /www/index.html; exec httpd -f -p 127.0.0.1:8080 -h /www\"]\n"
        )
    };
    // The module that joins is stated first: it waits for the other.
    n.write_intention(
        "app.toml",
        format!(
            "name = \"{app}\"\nimage = \"{IMAGE_1}\"\nnetwork_mode = \"container:{vpn}\"\ncommand = [\"sh\", \"-c\", {:?}]\n",
            format!("until wget -q -O- http://127.0.0.1:8080/; do sleep 0.5; done; {}", idle_after("echo"))
        ),
    );
    let agent = Agent::start(&n);
    n.wait_for(30, "the module to wait", || {
        agent
            .get(&format!("/v1/modules/{app}"))
            .1
            .contains(&format!("waits for module {vpn}"))
    });
    n.write_intention("vpn.toml", vpn_intention("one"));
    n.wait_logs(&app, "stack-of-one");
    let id = n.container_id(&app);
    let vpn_id = n.container_id(&vpn);
    assert_eq!(
        inspect(&id)["HostConfig"]["NetworkMode"],
        format!("container:{vpn_id}")
    );
    // The stack's module is replaced: the joined one follows, once.
    let since = unix_now();
    n.write_intention("vpn.toml", vpn_intention("two"));
    n.wait_for(60, "the joined module made again", || {
        n.container(&app).is_some_and(|(i, _, _)| i != id) && n.logs(&app).contains("stack-of-two")
    });
    std::thread::sleep(std::time::Duration::from_secs(2));
    assert_eq!(
        n.creates_since(&app, since),
        1,
        "{:?}",
        n.events_since(&app, since)
    );
    assert_eq!(n.creates_since(&vpn, since), 1);
}

#[test]
fn a_config_with_a_reload_signal_is_swapped_in_place_and_signalled_with_no_recreate() {
    let n = Node::new("runtime-live");
    let m = n.module("live");
    // Prints its config at start and on every SIGHUP; stops at once on
    // SIGTERM (a shell as PID 1 ignores it otherwise, and each stop would
    // wait out the grace period).
    let script = "show() { echo \"conf=$(cat /etc/app/live/conf.json) motd=$(cat /etc/app/live/motd)\"; }; trap show HUP; trap 'exit 0' TERM; show; while true; do sleep 1 & wait; done";
    let intention = |v: &str, motd: &str| {
        format!(
            "name = \"{m}\"\nimage = \"{IMAGE_1}\"\ncommand = [\"sh\", \"-c\", {script:?}]\nrestart = \"always\"\n[config]\npath = \"/etc/app/live/conf.json\"\nformat = \"json\"\nreload = \"signal:SIGHUP\"\ndefaults = {{v = \"{v}\"}}\n[[files]]\npath = \"/etc/app/live/motd\"\ncontent = \"{motd}\"\n"
        )
    };
    n.write_intention("live.toml", intention("one", "hello"));
    let agent = Agent::start(&n);
    n.wait_logs(&m, "\"v\": \"one\"");
    assert!(n.logs(&m).contains("motd=hello"), "{}", n.logs(&m));
    let id = n.container_id(&m);
    let since = unix_now();
    // Both live files change: swapped, signalled, the same container.
    n.write_intention("live.toml", intention("two", "bye"));
    n.wait_for(30, "the new config read live", || {
        let l = n.logs(&m);
        l.contains("\"v\": \"two\"") && l.contains("motd=bye")
    });
    assert_eq!(n.container_id(&m), id);
    assert_eq!(
        n.creates_since(&m, since),
        0,
        "{:?}",
        n.events_since(&m, since)
    );
    let (_, events) = agent.get("/v1/events?limit=1000");
    assert!(events.contains("config reloaded live: SIGHUP"), "{events}");
    let (_, status) = agent.get(&format!("/v1/modules/{m}"));
    assert!(status.contains("reloaded-live"), "{status}");
    // Nothing changes: no signal again.
    std::thread::sleep(std::time::Duration::from_secs(2));
    let (_, metrics) = agent.get("/metrics");
    assert!(
        metrics.contains("stead_engine_api_calls_total{op=\"signal\"} 1\n"),
        "{metrics}"
    );
    // What is not a live file (the command) still recreates, once.
    let since = unix_now();
    n.write_intention(
        "live.toml",
        intention("two", "bye").replace("restart = \"always\"", "restart = \"unless-stopped\""),
    );
    n.wait_for(60, "the recreate", || {
        n.container(&m)
            .is_some_and(|(i, s, _)| i != id && s == "running")
    });
    std::thread::sleep(std::time::Duration::from_secs(2));
    assert_eq!(n.creates_since(&m, since), 1);
    // The module goes: its live files go with its container.
    let live = n.data().join("live").join(&m);
    assert!(live.exists(), "{}", live.display());
    n.remove_intention("live.toml");
    n.wait_for(60, "the live files removed", || {
        n.container(&m).is_none() && !live.exists()
    });
}

#[test]
fn a_kill_between_the_swap_and_the_signal_signals_after_the_restart() {
    let n = Node::new("runtime-livekill");
    let m = n.module("live");
    let script = "trap 'echo conf=$(cat /etc/app/live/conf.env)' HUP; echo conf=$(cat /etc/app/live/conf.env); while true; do sleep 1 & wait; done";
    let intention = |v: &str| {
        format!(
            "name = \"{m}\"\nimage = \"{IMAGE_1}\"\ncommand = [\"sh\", \"-c\", {script:?}]\n[config]\npath = \"/etc/app/live/conf.env\"\nformat = \"env\"\nreload = \"signal:HUP\"\ndefaults = {{V = \"{v}\"}}\n"
        )
    };
    n.write_intention("live.toml", intention("one"));
    let agent = Agent::start(&n);
    n.wait_logs(&m, "conf=V=one");
    drop(agent);
    let id = n.container_id(&m);
    let since = unix_now();
    n.write_intention("live.toml", intention("two"));
    let mut child = Agent::spawn_with(
        &n,
        &[],
        &[("STEAD_CRASH_AT".into(), "live:before-signal".into())],
    );
    assert!(
        !child.wait().unwrap().success(),
        "the agent did not stop there"
    );
    // Swapped, not told: the process has not read the new set yet.
    assert!(!n.logs(&m).contains("conf=V=two"), "{}", n.logs(&m));
    let _agent = Agent::start(&n);
    n.wait_logs(&m, "conf=V=two");
    assert_eq!(n.container_id(&m), id);
    assert_eq!(
        n.creates_since(&m, since),
        0,
        "{:?}",
        n.events_since(&m, since)
    );
}

/// A read-only mount with `input = false` is a view of the host's state:
/// mounted read-only, read live by the module, never hashed by the agent
/// (a socket is fine), and a change there recreates nothing.
#[test]
fn a_read_only_view_of_host_state_is_mounted_and_is_not_an_input() {
    let n = Node::new("runtime-view");
    let m = n.module("view");
    std::fs::create_dir_all(n.host("state")).unwrap();
    let now = n.write_host("state/now", "one");
    let dir = now.parent().unwrap().to_path_buf();
    let socket = engine_socket();
    n.write_intention(
        "v.toml",
        format!(
            "name = \"{m}\"\nimage = \"{IMAGE_1}\"\ncommand = [\"sh\", \"-c\", {idle:?}]\n[[mounts]]\nsource = {dir:?}\ntarget = \"/host/state\"\nread_only = true\ninput = false\n[[mounts]]\nsource = {socket:?}\ntarget = \"/engine.sock\"\nread_only = true\ninput = false\n[[mounts]]\nsource = \"/\"\ntarget = \"/hostroot\"\nread_only = true\ninput = false\n",
            idle = idle_after("echo up")
        ),
    );
    let out = n.once_ok();
    assert!(
        out.lines()
            .any(|l| l.starts_with(&m) && l.contains("created")),
        "{out}"
    );
    let id = n.container_id(&m);
    std::fs::write(&now, "two").unwrap();
    let out = n.once_ok();
    assert!(out.contains("unchanged"), "{out}");
    assert_eq!(n.container_id(&m), id);
    n.wait_for(20, "the container running", || {
        n.container(&m).is_some_and(|(_, s, _)| s == "running")
    });
    assert_eq!(docker_ok(&["exec", &id, "cat", "/host/state/now"]), "two");
    assert!(
        docker(&["exec", &id, "sh", "-c", "echo x > /host/state/now"])
            .status
            .code()
            != Some(0),
        "read-only"
    );
    let c = inspect(&id);
    let mounts = c["Mounts"].as_array().unwrap();
    // The host's root, whole.
    assert_eq!(
        docker_ok(&["exec", &id, "cat", &format!("/hostroot{}", now.display())]),
        "two"
    );
    for target in ["/host/state", "/engine.sock", "/hostroot"] {
        let mount = mounts
            .iter()
            .find(|x| x["Destination"] == target)
            .unwrap_or_else(|| panic!("{target}: {mounts:?}"));
        assert_eq!(mount["RW"], false, "{mount}");
    }
    // Its source and mode are an input, named as any mount is.
    assert!(
        c["Config"]["Labels"]
            .as_object()
            .unwrap()
            .contains_key("stead.input.mount:/host/state"),
        "{c:#}"
    );
}

/// A health check without a test is the image's own, with the timings the
/// intention gives (as Compose takes it).
#[test]
fn a_health_check_without_a_test_is_the_image_s_with_other_timings() {
    // Converged one second after healthy, not the default 30.
    let n = Node::new("runtime-imagecheck").with_config("settle_window = \"1s\"");
    let m = n.module("own");
    // An image whose own check passes once /tmp/ok exists, probed every
    // 30 s by itself.
    let image = format!("stead-test/health-{}:1", n.id.to_lowercase());
    let change = "HEALTHCHECK --interval=30s CMD cat /tmp/ok";
    if on_podman() {
        // Podman 4.3 commits no HEALTHCHECK: the Docker Engine makes the
        // image and Podman loads it.
        let made = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "set -e; export DOCKER_HOST=unix:///var/run/docker.sock; c=$(docker create {IMAGE_1} true); docker commit --change '{change}' $c {image} >/dev/null; docker rm $c >/dev/null; docker save {image} | CONTAINERS_CONF={conf} podman load >/dev/null; docker rmi {image} >/dev/null",
                conf = std::path::Path::new(&engine_socket()).with_file_name("containers.conf").display()
            ))
            .output()
            .unwrap();
        assert!(
            made.status.success(),
            "{}",
            String::from_utf8_lossy(&made.stderr)
        );
    } else {
        let base = docker_ok(&["create", IMAGE_1, "true"]);
        docker_ok(&["commit", "--change", change, &base, &image]);
        docker_ok(&["rm", &base]);
    }
    n.write_intention(
        "own.toml",
        format!(
            "name = \"{m}\"\nimage = \"{image}\"\ncommand = [\"sh\", \"-c\", {:?}]\n[healthcheck]\ninterval = \"1s\"\nretries = 1\n",
            idle_after("echo up")
        ),
    );
    let agent = Agent::start(&n);
    let _timer = HealthTimer::start(&n.id);
    let module =
        || -> J { serde_json::from_str(&agent.get(&format!("/v1/modules/{m}")).1).unwrap() };
    if on_podman() {
        // Podman keeps the image's check whole (its timings too): refused.
        n.wait_for(30, "the module failed", || module()["state"] == "failed");
        let s = module();
        let e = s["last_error"].as_str().unwrap();
        assert!(
            e.contains("does not support") && e.contains("healthcheck.test"),
            "{s:#}"
        );
        drop(agent);
        drop(n);
        let _ = podman(&["rmi", &image]);
        return;
    }
    // Within seconds, not the image's 30: the intention's interval.
    n.wait_for(20, "unhealthy", || module()["state"] == "unhealthy");
    let id = n.container_id(&m);
    let check = &inspect(&id)["Config"]["Healthcheck"];
    assert_eq!(
        check["Test"],
        serde_json::json!(["CMD-SHELL", "cat /tmp/ok"]),
        "{check}"
    );
    assert_eq!(check["Interval"], 1_000_000_000u64, "{check}");
    docker_ok(&["exec", &id, "touch", "/tmp/ok"]);
    n.wait_for(30, "converged once healthy", || {
        module()["state"] == "converged"
    });
    drop(agent);
    drop(n);
    let _ = docker(&["rmi", &image]);
}

/// Where the engine's user networks cannot resolve names (Podman with CNI
/// and no dnsname plugin: scripts/podman.sh starts one with
/// `STEAD_PODMAN_NETWORK_BACKEND=cni` and the test command runs this test
/// against it), a module on one is refused, naming the network backend and
/// what to install, and the network is not left behind; where they can, it
/// runs.
#[test]
fn a_user_network_that_cannot_resolve_names_is_refused_naming_the_backend() {
    let n = Node::new("runtime-nodns");
    let m = n.module("m");
    let net = format!("{}-net", n.id);
    let no_names = on_podman() && {
        let o = podman(&[
            "--remote",
            "--url",
            &format!("unix://{}", engine_socket()),
            "info",
            "--format",
            "{{.Host.NetworkBackend}}",
        ]);
        assert!(o.status.success(), "podman info failed");
        String::from_utf8_lossy(&o.stdout).trim() == "cni"
            && !std::path::Path::new("/usr/lib/cni/dnsname").exists()
    };
    n.write_intention(
        "m.toml",
        format!(
            "name = \"{m}\"\nimage = \"{IMAGE_1}\"\nnetworks = [\"{net}\"]\ncommand = [\"sh\", \"-c\", {:?}]\n",
            idle_after("echo up")
        ),
    );
    let agent = Agent::start(&n);
    let status =
        || -> J { serde_json::from_str(&agent.get(&format!("/v1/modules/{m}")).1).unwrap() };
    if no_names {
        n.wait_for(30, "the module failed", || status()["state"] == "failed");
        let s = status();
        let e = s["last_error"].as_str().unwrap_or_default();
        assert!(
            e.contains("Podman")
                && e.contains(&format!("{net:?}"))
                && e.contains("network backend is CNI")
                && e.contains("netavark and aardvark-dns"),
            "{s:#}"
        );
        assert!(n.container(&m).is_none());
        // Made again at each retry, and removed again.
        n.wait_for(30, "the network not left behind", || {
            docker(&["network", "inspect", &net]).status.code() != Some(0)
        });
    } else {
        n.wait_for(60, "the module running", || {
            n.container(&m).is_some_and(|(_, s, _)| s == "running")
        });
        n.remove_intention("m.toml");
        n.wait_for(60, "the network removed", || {
            docker(&["network", "inspect", &net]).status.code() != Some(0)
        });
    }
}

/// Seed 004: a runtime that exits while its broker is not reachable yet.
/// Without `depends_on` the engine restarts it until the broker is up: it
/// reads crash-looping, then converged. With `depends_on` on the broker
/// being healthy it is not created until then: zero restarts, `waiting`
/// then `converged`. While the broker is made again, the dependent that
/// runs is left running.
#[test]
fn seed_004_a_dependent_waits_for_its_broker_instead_of_crash_looping() {
    let n = Node::new("runtime-seed004")
        .with_heartbeat("1s")
        .with_config(QUICK_CRASH_LOOP);
    let (broker, eager, patient) = (n.module("broker"), n.module("eager"), n.module("patient"));
    let tied = n.module("tied");
    // Up (serving, then healthy) `up_after` seconds after each start: long
    // enough at first for the eager dependent to be seen crash-looping,
    // shorter once it is made again (V 2) and restarted. httpd as PID 1
    // ignores SIGTERM: a short grace keeps its stop quick.
    let broker_intention = |v: &str, up_after: u32| {
        format!(
            "name = \"{broker}\"\nimage = \"{IMAGE_1}\"\nnetworks = [\"{net}\"]\nenv = {{ V = \"{v}\", UP_AFTER = \"{up_after}\" }}\nrestart = \"always\"\nstop_grace_period = \"1s\"\ncommand = [\"sh\", \"-c\", \"sleep $UP_AFTER; mkdir -p /www; echo up > /www/index.html; exec httpd -f -p 8080 -h /www\"]\n[healthcheck]\ntest = \"wget -q -O /dev/null http://127.0.0.1:8080/\"\ninterval = \"1s\"\nretries = 1\n",
            net = n.id.clone() + "-seed"
        )
    };
    // Exits at once when the broker does not answer, as the seed's runtime.
    let runtime = |name: &str, depends: &str| {
        format!(
            "name = \"{name}\"\nimage = \"{IMAGE_1}\"\nnetworks = [\"{}-seed\"]\nrestart = \"always\"\n{depends}command = [\"sh\", \"-c\", {:?}]\n",
            n.id,
            format!(
                "ip=$(nslookup {broker} 2>/dev/null | awk '/^Address/ {{a=$2}} END {{print a}}'); wget -q -O- http://$ip:8080/ || exit 1; {}",
                idle_after("echo connected")
            )
        )
    };
    n.write_intention("broker.toml", broker_intention("1", 10));
    n.write_intention("eager.toml", runtime(&eager, ""));
    n.write_intention(
        "patient.toml",
        runtime(
            &patient,
            &format!("depends_on = [{{ module = \"{broker}\", condition = \"healthy\" }}]\n"),
        ),
    );
    n.write_intention(
        "tied.toml",
        runtime(
            &tied,
            &format!(
                "depends_on = [{{ module = \"{broker}\", condition = \"healthy\", restart = true }}]\n"
            ),
        ),
    );
    let start = unix_now();
    let agent = Agent::start(&n);
    let _timer = HealthTimer::start(&n.id);
    let state = |m: &str| -> J {
        let (_, body) = agent.get(&format!("/v1/modules/{m}"));
        serde_json::from_str(&body).unwrap_or(J::Null)
    };
    let mut seen: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let end = std::time::Instant::now() + std::time::Duration::from_secs(90);
    loop {
        for m in [&eager, &patient] {
            let s = state(m)["state"].as_str().unwrap_or("").to_string();
            let v = seen.entry(m.to_string()).or_default();
            if v.last() != Some(&s) {
                v.push(s);
            }
        }
        let done = [&eager, &patient, &tied]
            .iter()
            .all(|m| state(m)["state"] == "converged" && n.logs(m).contains("connected"));
        if done {
            break;
        }
        assert!(
            std::time::Instant::now() < end,
            "never both converged: {seen:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(250));
    }
    // Without depends_on: restarted by the engine, crash-looping on the way.
    assert!(
        seen[&eager].iter().any(|s| s == "crash-looping"),
        "{seen:?}"
    );
    assert!(state(&eager)["restart_count"].as_u64() > Some(0));
    // With it: waiting, then made once the broker is healthy; never
    // restarted, never crash-looping.
    let p = &seen[&patient];
    assert!(p.iter().any(|s| s == "waiting"), "{seen:?}");
    assert!(
        !p.iter().any(|s| s == "crash-looping" || s == "settling"),
        "{seen:?}"
    );
    assert_eq!(state(&patient)["restart_count"], 0);
    assert_eq!(n.creates_since(&patient, start), 1);
    let restarts = |m: &str| {
        n.events_since(m, start)
            .iter()
            .filter(|a| *a == "die")
            .count()
    };
    assert_eq!(restarts(&patient), 0);
    assert!(restarts(&eager) > 0);

    // The broker is made again (a setting): the running dependent is left
    // running (it has no `restart = true`), reading waiting meanwhile.
    let before = n.container_id(&patient);
    let since = unix_now();
    // On Podman (its pass runs beside the main one, off the critical
    // path) the broker takes as long as before: once in four runs there,
    // with 6 s, no event of the watcher's restart was seen.
    n.write_intention(
        "broker.toml",
        broker_intention("2", if on_podman() { 15 } else { 6 }),
    );
    n.wait_for(60, "the patient waiting on the new broker", || {
        state(&patient)["state"] == "waiting"
    });
    n.wait_for(60, "the patient converged again", || {
        state(&patient)["state"] == "converged"
    });
    assert_eq!(n.container_id(&patient), before);
    assert!(
        !n.events_since(&patient, since)
            .iter()
            .any(|a| a == "die" || a == "start")
    );
    // With `restart = true`: restarted once the new broker is healthy,
    // exactly once, in the same container.
    let tied_before = n.container_id(&tied);
    let starts = || {
        n.events_since(&tied, since)
            .iter()
            .filter(|a| *a == "start")
            .count()
    };
    n.wait_for(60, "the tied module restarted", || starts() >= 1);
    n.wait_for(60, "the tied module converged again", || {
        state(&tied)["state"] == "converged"
    });
    std::thread::sleep(std::time::Duration::from_secs(3));
    assert_eq!(starts(), 1);
    assert_eq!(n.container_id(&tied), tied_before);
    assert!(n.logs(&tied).matches("connected").count() >= 2);

    // The broker turns unhealthy and back, in the same container: the
    // tied module (restart = true) is restarted once it is healthy again,
    // once; the patient one is left running.
    let since = unix_now();
    let broker_id = n.container_id(&broker);
    docker_ok(&["exec", &broker_id, "rm", "/www/index.html"]);
    n.wait_for(60, "the tied module waiting on an unhealthy broker", || {
        state(&tied)["state"] == "waiting"
    });
    docker_ok(&["exec", &broker_id, "sh", "-c", "echo up > /www/index.html"]);
    n.wait_for(60, "the tied module restarted", || {
        n.events_since(&tied, since).iter().any(|a| a == "start")
    });
    n.wait_for(60, "the tied module converged again", || {
        state(&tied)["state"] == "converged"
    });
    std::thread::sleep(std::time::Duration::from_secs(3));
    let tied_starts = n
        .events_since(&tied, since)
        .iter()
        .filter(|a| *a == "start")
        .count();
    assert_eq!(tied_starts, 1);
    assert!(!n.events_since(&patient, since).iter().any(|a| a == "start"));

    // A dependent that exits whenever its broker goes (as at a reboot,
    // when the engine starts everything at once): while the broker is
    // away the engine's restarts of it are stopped, and it reads waiting,
    // never crash-looping; it is started again once the broker is healthy.
    let watcher = n.module("watcher");
    n.write_intention(
        "watcher.toml",
        format!(
            "name = \"{watcher}\"\nimage = \"{IMAGE_1}\"\nnetworks = [\"{}-seed\"]\nrestart = \"always\"\ndepends_on = [{{ module = \"{broker}\", condition = \"healthy\" }}]\ncommand = [\"sh\", \"-c\", {:?}]\n",
            n.id,
            format!(
                "echo watching; while :; do ip=$(nslookup {broker} 2>/dev/null | awk '/^Address/ {{a=$2}} END {{print a}}'); wget -q -O /dev/null http://$ip:8080/ || exit 1; sleep 1; done"
            )
        ),
    );
    n.wait_for(60, "the watcher converged", || {
        state(&watcher)["state"] == "converged"
    });
    let since = unix_now();
    // Restarted by hand (Podman does not restart a container that is
    // killed; both restart one that is restarted).
    restart_by_hand(&n.container_id(&broker));
    let mut states = Vec::new();
    let end = std::time::Instant::now() + std::time::Duration::from_secs(90);
    loop {
        let s = state(&watcher)["state"].as_str().unwrap_or("").to_string();
        if states.last() != Some(&s) {
            states.push(s.clone());
        }
        if s == "converged" && states.iter().any(|s| s == "waiting") {
            break;
        }
        assert!(std::time::Instant::now() < end, "the watcher: {states:?}");
        std::thread::sleep(std::time::Duration::from_millis(250));
    }
    assert!(!states.iter().any(|s| s == "crash-looping"), "{states:?}");
    // Started again, by the agent after it stopped it (the Docker Engine,
    // whose restarts back off, is seen restarting it) or by the engine
    // (Podman restarts at once, so there is nothing between to stop).
    let events = n.events_since(&watcher, since);
    assert!(events.iter().any(|a| a == "start"), "{events:?}");
    if !on_podman() {
        assert!(events.iter().any(|a| a == "stop"), "{events:?}");
    }
}
