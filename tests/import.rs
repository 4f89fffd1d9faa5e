//! `stead import`: the fixtures (Compose files in the shape of well-known
//! public examples, tests/fixtures/compose) each import, listing what is
//! not carried, and every file written parses; the command's files and
//! exit codes; and, against the real engine, one Compose file run by
//! docker-compose 1.29 and by the agent from its imported intentions,
//! their containers compared field by field.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::agent::Agent;
use common::*;
use serde_json::{Value as J, json};
use stead::model::intention::{DocFormat, Intention};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `stead import ARGS`, with more environment.
fn import(args: &[&str], env: &[(&str, &str)]) -> Output {
    std::process::Command::new(common::workspace_bin("stead-plane"))
        .arg("import")
        .args(args)
        .envs(env.iter().copied())
        .output()
        .unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The `<service>: <key>` of each line on stderr saying a key was not
/// carried (not notes, not the summary).
fn unmapped(o: &Output) -> BTreeSet<String> {
    stderr(o)
        .lines()
        .filter(|l| !l.starts_with("note: ") && !l.starts_with("stead-plane: "))
        .map(|l| {
            let mut parts = l.splitn(3, ": ");
            format!("{}: {}", parts.next().unwrap(), parts.next().unwrap_or(""))
        })
        .collect()
}

/// Every intention file in `dir`, parsed: module name → intention.
fn intentions(dir: &Path) -> BTreeMap<String, Intention> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            let i = Intention::parse(&text, DocFormat::Toml, &p.display().to_string())
                .unwrap_or_else(|e| panic!("{e}\n{text}"));
            assert_eq!(
                p.file_name().unwrap().to_str().unwrap(),
                format!("{}.toml", i.name),
                "a file is named by its module"
            );
            (i.name.to_string(), i)
        })
        .collect()
}

/// The EdgeX-like stack moves over whole: its project's network and
/// volume names, its services' names there, its `.env` and env files read
/// by Compose's rules, and its dependencies with their conditions.
#[test]
fn an_edgex_like_stack_imports_with_its_names_env_and_dependencies() {
    let dir = root().join("tests/fixtures/compose/edgex-like");
    let out = tempfile::tempdir().unwrap();
    let o = import(
        &[
            "--out",
            out.path().to_str().unwrap(),
            dir.join("docker-compose.yml").to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let i = intentions(out.path());
    let (broker, core, device) = (&i["broker"], &i["core-data"], &i["device-virtual"]);
    // `.env`: `export`, quotes and a comment; an empty value takes the
    // default.
    assert_eq!(core.image, "edgexfoundry/core-data:3.1");
    assert_eq!(broker.image, "eclipse-mosquitto:2");
    for m in [broker, core, device] {
        let nets: Vec<&str> = m.runtime.networks.iter().map(String::as_str).collect();
        assert_eq!(nets, ["edgex_default"], "{}", m.name);
    }
    assert_eq!(broker.runtime.volumes[0].name, "edgex_broker-data");
    assert_eq!(
        broker.runtime.hostname.as_deref(),
        Some("edgex-mqtt-broker")
    );
    assert!(device.runtime.aliases.contains("edgex-device-virtual"));
    assert!(device.runtime.aliases.contains("device_virtual"));
    assert_eq!(broker.mounts[0].target.as_str(), "/mosquitto/config");
    assert_eq!(
        core.env_file_format,
        stead::model::env_file::Format::Compose
    );
    let d = &core.depends_on[0];
    assert_eq!(
        (d.module.as_str(), d.condition, d.restart),
        ("broker", stead::model::intention::Condition::Healthy, true)
    );
    assert_eq!(
        device.depends_on[0].condition,
        stead::model::intention::Condition::Started
    );
    // The env file as the agent will read it.
    let vars = stead::model::env_file::read(
        &std::fs::read(dir.join("common.env")).unwrap(),
        core.env_file_format,
        &|_| None,
        &Default::default(),
    )
    .unwrap();
    let want: Vec<(String, String)> = [
        ("MESSAGEQUEUE_HOST", "edgex-mqtt-broker"),
        ("MESSAGEQUEUE_PORT", "1883"),
        ("REGISTRY_URL", "consul://edgex-core-consul:8500"),
        ("WRITABLE_LOGLEVEL", "INFO"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    assert_eq!(vars, want);
}

#[test]
fn every_fixture_imports_listing_what_is_not_carried_and_every_file_parses() {
    // (file, exit code, modules written, keys not carried)
    let cases: &[(&str, u8, &[&str], &[&str])] = &[
        (
            "nginx-flask-mariadb/compose.yaml",
            3,
            &["db", "proxy"],
            &["backend: build"],
        ),
        (
            "prometheus-grafana/compose.yaml",
            3,
            &["cadvisor", "grafana", "node-exporter", "prometheus"],
            &[
                "cadvisor: deploy.resources.reservations",
                "node-exporter: pid",
                "node-exporter: volumes[0]",
            ],
        ),
        (
            "wordpress-mariadb/docker-compose.yml",
            0,
            &["db", "wordpress"],
            &[],
        ),
        (
            "home-assistant-edge/docker-compose.yml",
            3,
            &["esphome", "homeassistant", "mosquitto", "zigbee2mqtt"],
            &["zigbee2mqtt: group_add"],
        ),
        ("gitea-postgres/compose.yml", 0, &["db", "server"], &[]),
        (
            "edgex-like/docker-compose.yml",
            0,
            &["broker", "core-data", "device-virtual"],
            &[],
        ),
    ];
    for (file, code, modules, keys) in cases {
        let compose = root().join("tests/fixtures/compose").join(file);
        let out = tempfile::tempdir().unwrap();
        let o = import(
            &[
                "--out",
                out.path().to_str().unwrap(),
                compose.to_str().unwrap(),
            ],
            &[],
        );
        assert_eq!(
            o.status.code(),
            Some(i32::from(*code)),
            "{file}: {}",
            stderr(&o)
        );
        let want: BTreeSet<String> = keys.iter().map(|k| k.to_string()).collect();
        assert_eq!(unmapped(&o), want, "{file}: {}", stderr(&o));
        let written = intentions(out.path());
        let names: Vec<&str> = written.keys().map(String::as_str).collect();
        assert_eq!(&names, modules, "{file}");
        assert!(stderr(&o).contains(&format!(
            "stead-plane: wrote {} intention files to ",
            modules.len()
        )));
    }

    // What the fixtures show beyond the keys: a config's content is in
    // the intention, a file secret is a read-only mount, `$$` is a `$`,
    // `.env` and merged `x-` fragments are read, deploy limits are limits.
    let out = tempfile::tempdir().unwrap();
    let dir = root().join("tests/fixtures/compose");
    for f in [
        "prometheus-grafana/compose.yaml",
        "nginx-flask-mariadb/compose.yaml",
        "gitea-postgres/compose.yml",
    ] {
        import(
            &[
                "--force",
                "--out",
                out.path().to_str().unwrap(),
                dir.join(f).to_str().unwrap(),
            ],
            &[],
        );
    }
    let all = intentions(out.path());
    let prom = &all["prometheus"];
    assert_eq!(
        prom.files[0].path.as_str(),
        "/etc/prometheus/prometheus.yml"
    );
    assert_eq!(
        prom.files[0].content.plain(),
        Some(
            std::fs::read_to_string(dir.join("prometheus-grafana/prometheus/prometheus.yml"))
                .unwrap()
                .as_str()
        )
    );
    // `./grafana/:/etc/grafana/provisioning/datasources/:ro`: the paths
    // without their trailing slashes, as Compose and the engine take them.
    let grafana = &all["grafana"].mounts[0];
    assert_eq!(
        (grafana.source.as_str(), grafana.target.as_str()),
        (
            dir.join("prometheus-grafana/grafana").to_str().unwrap(),
            "/etc/grafana/provisioning/datasources"
        )
    );
    assert_eq!(all["cadvisor"].runtime.nano_cpus, Some(500_000_000));
    assert_eq!(all["cadvisor"].runtime.mem_limit, Some(256 << 20));
    let db = &all["db"];
    assert_eq!(
        db.runtime.healthcheck.as_ref().unwrap().test[1],
        "pg_isready -U gitea"
    );
    assert_eq!(
        db.env[&stead::model::names::EnvName::try_from("POSTGRES_PASSWORD").unwrap()].plain(),
        Some("example-only")
    );
    assert_eq!(db.restart.as_str(), "unless-stopped");
    assert_eq!(db.runtime.logging.as_ref().unwrap().driver, "local");
    assert_eq!(all["server"].image, "gitea/gitea:1.21.7");
    let node = &all["node-exporter"];
    assert_eq!(
        node.command.as_ref().unwrap()[1],
        "--collector.filesystem.mount-points-exclude=^/(sys|proc|dev|host|etc)($|/)"
    );
}

#[test]
fn printed_files_are_headed_by_their_names_and_refusals_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let compose = dir.path().join("docker-compose.yml");
    std::fs::write(
        &compose,
        "services:\n  web:\n    image: nginx:1\n    ports: ['8080:80']\n  cache:\n    image: redis:7\n",
    )
    .unwrap();
    let c = compose.to_str().unwrap();

    // Printed: each file after a `# <file>` line.
    let o = import(&[c], &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let stdout = String::from_utf8(o.stdout).unwrap();
    let parts: Vec<&str> = stdout.split("# web.toml\n").collect();
    assert!(parts[0].starts_with("# cache.toml\n"), "{stdout}");
    for text in [&parts[0]["# cache.toml\n".len()..], parts[1]] {
        Intention::parse(text, DocFormat::Toml, "stdout").unwrap();
    }

    // Written, then refused without --force (nothing written), then
    // overwritten with it.
    let out = dir.path().join("intentions.d");
    let o = import(&["--out", out.to_str().unwrap(), c], &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(intentions(&out).len(), 2);
    std::fs::write(
        &compose,
        "services:\n  web:\n    image: nginx:2\n  extra:\n    image: x\n",
    )
    .unwrap();
    let o = import(&["--out", out.to_str().unwrap(), c], &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("web.toml exist (--force overwrites)"),
        "{}",
        stderr(&o)
    );
    assert!(!out.join("extra.toml").exists());
    let o = import(&["--force", "--out", out.to_str().unwrap(), c], &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(intentions(&out)["web"].image, "nginx:2");
    // No temporary file is left beside them.
    assert_eq!(std::fs::read_dir(&out).unwrap().count(), 3);

    // A file that cannot be imported: exit 2, nothing written, the reason.
    for (text, needle) in [
        ("services: [", "(file): (yaml): line"),
        (
            "services:\n  a:\n    image: x\n  b:\n    image: x\n    network_mode: service:a\n",
            "b: network_mode: \"service:a\": stead does not run a container in another's network namespace",
        ),
        (
            "services:\n  a:\n    image: x\n    environment: ['PW=${NEED:?set NEED}']\n",
            "a: environment[0]: required variable NEED is missing a value: set NEED",
        ),
    ] {
        let fresh = dir.path().join("fresh");
        std::fs::write(&compose, text).unwrap();
        let o = import(&["--out", fresh.to_str().unwrap(), c], &[]);
        assert_eq!(o.status.code(), Some(2), "{text}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("import refused, nothing written"),
            "{}",
            stderr(&o)
        );
        assert!(stderr(&o).contains(needle), "{}", stderr(&o));
        assert!(!fresh.exists());
    }
    // The environment is read as Compose reads it.
    let o = import(&[c], &[("NEED", "x")]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));

    // A config too large for an intention file is refused, naming why.
    std::fs::write(dir.path().join("big.conf"), "x".repeat(300 << 10)).unwrap();
    std::fs::write(
        &compose,
        "services:\n  a:\n    image: x\n    configs: [big]\nconfigs:\n  big: {file: ./big.conf}\n",
    )
    .unwrap();
    let o = import(&[c], &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("over the agent's limit"),
        "{}",
        stderr(&o)
    );
}

/// A free port on 127.0.0.1 for TCP (or UDP).
fn free_port(udp: bool) -> u16 {
    if udp {
        std::net::UdpSocket::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    } else {
        std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    }
}

/// A docker-compose project, taken down (with its volumes) when dropped.
/// Imports `file` as project `project` into `out` with nothing left out
/// (exit 0), and gives the node its intentions.
fn import_whole_to(
    n: &Node,
    file: &Path,
    project: &str,
    out: &Path,
    env: &[(&str, &str)],
) -> BTreeMap<String, Intention> {
    let o = import(
        &[
            "--out",
            out.to_str().unwrap(),
            "-p",
            project,
            file.to_str().unwrap(),
        ],
        env,
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let written = intentions(out);
    for m in written.keys() {
        n.write_intention(
            &format!("{m}.toml"),
            std::fs::read_to_string(out.join(format!("{m}.toml"))).unwrap(),
        );
    }
    written
}

struct Project {
    name: String,
    file: PathBuf,
}

impl Project {
    fn compose(&self, args: &[&str], env: &[(&str, String)]) -> String {
        let o = Command::new("docker-compose")
            .args(["-p", &self.name, "-f"])
            .arg(&self.file)
            .args(args)
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .output()
            .expect("docker-compose runs");
        assert!(
            o.status.success(),
            "docker-compose {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    }
}

impl Drop for Project {
    fn drop(&mut self) {
        let _ = Command::new("docker-compose")
            .args(["-p", &self.name, "-f"])
            .arg(&self.file)
            .args(["down", "-v", "--timeout", "2"])
            .output();
    }
}

/// A volume the agent made for a node, removed when dropped, after the
/// node's containers (which the node removes too, but later).
struct VolumeGuard {
    name: String,
    node: String,
}

impl Drop for VolumeGuard {
    fn drop(&mut self) {
        let ids = docker(&[
            "ps",
            "-aq",
            "--filter",
            &format!("label=stead.managed-by={}", self.node),
        ]);
        for id in String::from_utf8_lossy(&ids.stdout).split_whitespace() {
            let _ = docker(&["rm", "-f", id]);
        }
        let _ = docker(&["volume", "rm", "-f", &self.name]);
    }
}

fn inspect(id: &str) -> J {
    serde_json::from_str(&docker_ok(&["inspect", "--format", "{{json .}}", id])).unwrap()
}

/// The user's own labels: Compose's and the agent's taken out.
fn user_labels(c: &J) -> BTreeMap<String, J> {
    c["Config"]["Labels"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(k, _)| !k.starts_with("com.docker.compose.") && !k.starts_with("stead."))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// The environment set for the container (the image's own taken out).
fn user_env(c: &J, image: &J) -> BTreeSet<String> {
    let own: BTreeSet<&str> = image["Config"]["Env"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(J::as_str)
        .collect();
    c["Config"]["Env"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(J::as_str)
        .filter(|e| !own.contains(e))
        .map(str::to_string)
        .collect()
}

/// The mounts by where the container sees them: (type, source or volume
/// name, read-write).
fn mounts(c: &J) -> BTreeMap<String, (String, String, bool)> {
    c["Mounts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let typ = m["Type"].as_str().unwrap().to_string();
            let source = if typ == "volume" {
                m["Name"].as_str().unwrap().to_string()
            } else {
                m["Source"].as_str().unwrap().to_string()
            };
            (
                m["Destination"].as_str().unwrap().to_string(),
                (typ, source, m["RW"].as_bool().unwrap()),
            )
        })
        .collect()
}

#[test]
fn a_compose_file_run_by_docker_compose_and_by_the_agent_from_its_import_makes_the_same_containers()
{
    let n = Node::new("import");
    let (main, host) = (n.module("main"), n.module("hostnet"));
    let volume_key = format!("data-{}", n.id);
    let project = format!("steadimport{}", std::process::id());
    // The import under a project name of its own, beside Compose's run.
    let stead_project = format!("{project}s");
    let _stead_volume = VolumeGuard {
        name: format!("{stead_project}_{volume_key}"),
        node: n.id.clone(),
    };

    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("ro")).unwrap();
    std::fs::write(dir.path().join("ro/model.bin"), "weights").unwrap();
    std::fs::write(dir.path().join("app.conf"), "mode = compare\n").unwrap();
    std::fs::write(dir.path().join("pw.txt"), "example-only\n").unwrap();
    let file = dir.path().join("docker-compose.yml");
    std::fs::write(
        &file,
        format!(
            r#"services:
  {main}:
    image: {IMAGE_1}
    entrypoint: /bin/sh -c
    command: ["echo up; trap 'exit 0' INT TERM; sleep 1000000 & wait"]
    environment:
      - MODE=compare
      - EMPTY=
      - FROM_DEFAULT=${{IMPORT_TEST_UNSET:-dflt}}
      - DOLLAR=$$HOME
    ports:
      - "127.0.0.1:${{TCP_PORT}}:80"
      - "127.0.0.1:${{UDP_PORT}}:81/udp"
    volumes:
      - ./ro:/ro:ro
      - {volume_key}:/data
    tmpfs:
      - /scratch:size=16m
    secrets: [pw]
    configs:
      - source: appconf
        target: /etc/app.conf
    mem_limit: 64m
    shm_size: 32m
    cpus: 0.5
    pids_limit: 50
    ulimits:
      nofile: {{soft: 1024, hard: 2048}}
    sysctls:
      net.ipv4.ip_forward: "1"
    cap_add: [NET_ADMIN]
    cap_drop: [MKNOD]
    devices: ["/dev/zero:/dev/myzero:r"]
    user: "1000:1000"
    working_dir: /tmp
    labels:
      com.example.role: compare
    init: true
    stop_signal: SIGINT
    stop_grace_period: 3s
    healthcheck:
      test: ["CMD-SHELL", "true"]
      interval: 1s
      timeout: 2s
      retries: 2
      start_period: 1s
    logging:
      driver: json-file
      options:
        max-size: 1m
        max-file: "2"
    extra_hosts: ["db:10.0.0.2"]
    dns: [10.0.0.53]
    read_only: true
    restart: unless-stopped
  {host}:
    image: {IMAGE_1}
    network_mode: host
    command: sh -c "trap 'exit 0' INT TERM; sleep 1000000 & wait"
volumes:
  {volume_key}: {{}}
configs:
  appconf:
    file: ./app.conf
secrets:
  pw:
    file: ./pw.txt
"#
        ),
    )
    .unwrap();

    // Compose's run, and the agent's, on ports of their own.
    let ports =
        |tcp: u16, udp: u16| vec![("TCP_PORT", tcp.to_string()), ("UDP_PORT", udp.to_string())];
    let (compose_tcp, compose_udp) = (free_port(false), free_port(true));
    let p = Project {
        name: project.clone(),
        file: file.clone(),
    };
    p.compose(&["up", "-d"], &ports(compose_tcp, compose_udp));

    let (stead_tcp, stead_udp) = (free_port(false), free_port(true));
    let out = dir.path().join("imported");
    let env: Vec<(&str, String)> = ports(stead_tcp, stead_udp);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    // Nothing this file says is left out.
    for i in import_whole_to(&n, &file, &stead_project, &out, &env).values() {
        assert_eq!(i.image, IMAGE_1);
    }
    let _agent = Agent::start(&n);
    for m in [&main, &host] {
        n.wait_for(60, &format!("{m} running"), || {
            n.container(m).is_some_and(|(_, s, _)| s == "running")
        });
    }

    let compose_id = |service: &str| p.compose(&["ps", "-q", service], &[]);
    let (c, s) = (inspect(&compose_id(&main)), inspect(&n.container_id(&main)));
    let image = inspect(IMAGE_1);

    // The same image; the agent creates from its ID (Config.Image is the
    // ID), Compose from the tag.
    assert_eq!(c["Image"], s["Image"]);
    assert_eq!(c["Config"]["Image"], IMAGE_1);
    assert_eq!(s["Config"]["Image"], image["Id"]);
    // The same process: a string entrypoint split as Compose splits it.
    for f in [
        "Entrypoint",
        "Cmd",
        "User",
        "WorkingDir",
        "StopSignal",
        "StopTimeout",
        "Healthcheck",
    ] {
        assert_eq!(c["Config"][f], s["Config"][f], "Config.{f}");
    }
    assert_eq!(s["Config"]["Entrypoint"], json!(["/bin/sh", "-c"]));
    assert_eq!(s["Config"]["StopTimeout"], 3);
    assert_eq!(user_env(&c, &image), user_env(&s, &image));
    assert!(user_env(&s, &image).contains("DOLLAR=$HOME"));
    assert!(user_env(&s, &image).contains("FROM_DEFAULT=dflt"));
    assert_eq!(user_labels(&c), user_labels(&s));
    assert_eq!(user_labels(&s)["com.example.role"], "compare");

    let (ch, sh) = (&c["HostConfig"], &s["HostConfig"]);
    for f in [
        "Memory",
        "ShmSize",
        "NanoCpus",
        "PidsLimit",
        "Ulimits",
        "Sysctls",
        "CapAdd",
        "CapDrop",
        "Devices",
        "Init",
        "LogConfig",
        "ExtraHosts",
        "Dns",
        "ReadonlyRootfs",
        "Tmpfs",
        "RestartPolicy",
    ] {
        assert_eq!(ch[f], sh[f], "HostConfig.{f}");
    }
    // What they both are, so that no equality above is of two unsets.
    for (f, want) in [
        ("Memory", json!(64u64 << 20)),
        ("ShmSize", json!(32u64 << 20)),
        ("NanoCpus", json!(500_000_000u64)),
        ("PidsLimit", json!(50)),
        (
            "Ulimits",
            json!([{"Name": "nofile", "Soft": 1024, "Hard": 2048}]),
        ),
        ("Sysctls", json!({"net.ipv4.ip_forward": "1"})),
        ("CapAdd", json!(["NET_ADMIN"])),
        ("CapDrop", json!(["MKNOD"])),
        (
            "Devices",
            json!([{"PathOnHost": "/dev/zero", "PathInContainer": "/dev/myzero", "CgroupPermissions": "r"}]),
        ),
        ("Init", json!(true)),
        (
            "LogConfig",
            json!({"Type": "json-file", "Config": {"max-size": "1m", "max-file": "2"}}),
        ),
        ("ExtraHosts", json!(["db:10.0.0.2"])),
        ("Dns", json!(["10.0.0.53"])),
        ("ReadonlyRootfs", json!(true)),
        ("Tmpfs", json!({"/scratch": "size=16m"})),
        (
            "RestartPolicy",
            json!({"Name": "unless-stopped", "MaximumRetryCount": 0}),
        ),
    ] {
        assert_eq!(sh[f], want, "HostConfig.{f}");
    }
    for (f, want) in [
        ("User", json!("1000:1000")),
        ("WorkingDir", json!("/tmp")),
        ("StopSignal", json!("SIGINT")),
        (
            "Healthcheck",
            json!({"Test": ["CMD-SHELL", "true"], "Interval": 1_000_000_000u64, "Timeout": 2_000_000_000u64, "StartPeriod": 1_000_000_000u64, "Retries": 2}),
        ),
    ] {
        assert_eq!(s["Config"][f], want, "Config.{f}");
    }
    // The same ports, each run on its own host ports.
    let bindings = |h: &J, tcp: u16, udp: u16| {
        assert_eq!(
            h["PortBindings"],
            json!({
                "80/tcp": [{"HostIp": "127.0.0.1", "HostPort": tcp.to_string()}],
                "81/udp": [{"HostIp": "127.0.0.1", "HostPort": udp.to_string()}],
            })
        );
    };
    bindings(ch, compose_tcp, compose_udp);
    bindings(sh, stead_tcp, stead_udp);

    // Mounts: the bind mount and the file secret are the same; the named
    // volume is `<project>_<key>` in both; the config is bind-mounted by
    // stead from its content, and docker-compose 1.29 drops `configs`
    // without a word outside swarm.
    let (cm, sm) = (mounts(&c), mounts(&s));
    let ro = dir.path().join("ro").display().to_string();
    let pw = dir.path().join("pw.txt").display().to_string();
    for (target, want) in [
        ("/ro", ("bind".to_string(), ro, false)),
        ("/run/secrets/pw", ("bind".to_string(), pw, false)),
    ] {
        assert_eq!(cm[target], want, "{target}");
        assert_eq!(sm[target], want, "{target}");
    }
    assert_eq!(
        cm["/data"],
        (
            "volume".to_string(),
            format!("{project}_{volume_key}"),
            true
        )
    );
    assert_eq!(
        sm["/data"],
        (
            "volume".to_string(),
            format!("{stead_project}_{volume_key}"),
            true
        )
    );
    assert!(!cm.contains_key("/etc/app.conf"), "{cm:?}");
    assert!(!sm["/etc/app.conf"].2, "{sm:?}");
    let id = n.container_id(&main);
    assert_eq!(
        docker_ok(&["exec", &id, "cat", "/etc/app.conf"]),
        "mode = compare"
    );
    assert_eq!(cm.len() + 1, sm.len(), "{cm:?} {sm:?}");
    // Both put the service on the project's network.
    assert_eq!(ch["NetworkMode"], format!("{project}_default"));
    assert_eq!(sh["NetworkMode"], format!("{stead_project}_default"));

    // The host-networked service: the same in both.
    let (c, s) = (inspect(&compose_id(&host)), inspect(&n.container_id(&host)));
    assert_eq!(c["HostConfig"]["NetworkMode"], "host");
    assert_eq!(s["HostConfig"]["NetworkMode"], "host");
    assert_eq!(c["Config"]["Cmd"], s["Config"]["Cmd"]);
    assert_eq!(
        s["Config"]["Cmd"],
        json!(["sh", "-c", "trap 'exit 0' INT TERM; sleep 1000000 & wait"])
    );
}

/// A stack whose services find each other by service name, by
/// `container_name` and by `hostname` (wordpress's `WORDPRESS_DB_HOST=db`,
/// EdgeX's container names): under docker-compose 1.29, and imported and
/// run by the agent, the client reaches the server by every name.
#[test]
fn a_stack_s_services_find_each_other_by_every_name_under_compose_and_once_imported() {
    let n = Node::new("import-names");
    let h = n.module("x").trim_start_matches("x-").to_string();
    let (db, client) = (format!("db_{h}"), format!("client_{h}"));
    let container_name = format!("edgex-db-{h}");
    let project = format!("steadnames{}", std::process::id());
    let stead_project = format!("{project}s");
    // Resolved by the engine's DNS with busybox's nslookup (its static
    // wget cannot resolve a name with `_`), then fetched.
    let get = "get() { ip=$(nslookup \"$1\" 2>/dev/null | awk '/^Address/ {a=$2} END {print a}'); wget -q -O- \"http://$ip:8080/\"; }; ";
    let names = [db.as_str(), container_name.as_str(), "dbhost"];
    let reach: String = names
        .iter()
        .map(|h| format!("until get {h} | grep -q pong; do sleep 0.5; done; echo reached-{h}; "))
        .collect();
    let client_cmd = format!("{get}{reach}{}", idle_after("echo all"));
    // Compose interpolates `$`: `$$` is one.
    let yaml_cmd = |c: &str| serde_json::to_string(&c.replace('$', "$$")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("docker-compose.yml");
    std::fs::write(
        &file,
        format!(
            "services:\n  {db}:\n    image: {IMAGE_1}\n    container_name: {container_name}\n    hostname: dbhost\n    command: [sh, -c, {}]\n  {client}:\n    image: {IMAGE_1}\n    command: [sh, -c, {}]\n",
            yaml_cmd("mkdir -p /www; echo pong > /www/index.html; exec httpd -f -p 8080 -h /www"),
            yaml_cmd(&client_cmd),
        ),
    )
    .unwrap();

    let p = Project {
        name: project.clone(),
        file: file.clone(),
    };
    p.compose(&["up", "-d"], &[]);
    let compose_logs = || p.compose(&["logs", "--no-color", &client], &[]);
    n.wait_for(60, "the client under Compose reaching every name", || {
        compose_logs().contains("all")
    });
    let logs = compose_logs();
    for h in names {
        assert!(logs.contains(&format!("reached-{h}")), "{h}: {logs}");
    }

    let out = dir.path().join("imported");
    import_whole_to(&n, &file, &stead_project, &out, &[]);
    let (db_module, client_module) = (format!("db-{h}"), format!("client-{h}"));
    let _agent = Agent::start(&n);
    n.wait_for(60, "the client under the agent reaching every name", || {
        n.logs(&client_module).contains("all")
    });
    let logs = n.logs(&client_module);
    for h in names {
        assert!(logs.contains(&format!("reached-{h}")), "{h}: {logs}");
    }
    // On the project's own network, with the names Compose gave it.
    let s = inspect(&n.container_id(&db_module));
    assert_eq!(s["Config"]["Hostname"], "dbhost");
    let on = &s["NetworkSettings"]["Networks"][format!("{stead_project}_default")];
    let aliases: BTreeSet<&str> = on["Aliases"]
        .as_array()
        .unwrap_or_else(|| panic!("{s:#}"))
        .iter()
        .filter_map(J::as_str)
        .collect();
    for a in [
        db_module.as_str(),
        db.as_str(),
        container_name.as_str(),
        "dbhost",
    ] {
        assert!(aliases.contains(a), "{a}: {aliases:?}");
    }
}
