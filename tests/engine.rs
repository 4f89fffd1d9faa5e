//! The core loop against the real Docker Engine, through the real binary:
//! seeds 000 and 001, image re-pointing, conflicts and orphans, the report
//! policy, crash safety and bad input.

mod common;

use common::intention::Module;
use common::*;
use std::collections::BTreeMap;

fn config_module(name: &str, setting: &str, default: &str, policy: &str) -> Module {
    Module::new(name, IMAGE_1)
        .idle("cat /etc/m/config.json")
        .set("on_drift", &format!("{policy:?}"))
        .set("restart", "\"unless-stopped\"")
        .json_config(
            "/etc/m/config.json",
            &format!("{{ poll_ms = 1000, database = {{ url = {default:?} }} }}"),
        )
        .table("settings", &format!("\"database.url\" = {setting:?}"))
}

#[test]
fn seed_000_a_setting_change_recreates_once_and_the_process_sees_it() {
    let n = Node::new("seed000");
    let m = n.module("sensor");
    n.write_intention(
        "sensor.toml",
        config_module(&m, "pg://first", "pg://default", "recreate"),
    );
    let out = n.once_ok();
    assert!(
        out.lines()
            .any(|l| l.starts_with(&m) && l.contains("created")),
        "{out}"
    );
    n.wait_logs(&m, "pg://first");
    let first = n.container_id(&m);

    // Nothing changed: nothing is done.
    let out = n.once_ok();
    assert!(out.contains("unchanged"), "{out}");
    assert_eq!(n.container_id(&m), first);

    // A setting changes: exactly one recreate, and the new process reads it.
    let since = unix_now();
    n.write_intention(
        "sensor.toml",
        config_module(&m, "pg://second", "pg://default", "recreate"),
    );
    let out = n.once_ok();
    assert!(
        out.contains("recreated") && out.contains("config:/etc/m/config.json"),
        "{out}"
    );
    n.wait_logs(&m, "pg://second");
    assert_ne!(n.container_id(&m), first);
    let out = n.once_ok();
    assert!(out.contains("unchanged"), "{out}");
    assert_eq!(n.creates_since(&m, since), 1);

    // Only the defaults change (under a key no setting overrides).
    let since = unix_now();
    let text = config_module(&m, "pg://second", "pg://default", "recreate")
        .toml()
        .replace("poll_ms = 1000", "poll_ms = 250");
    n.write_intention("sensor.toml", &text);
    let out = n.once_ok();
    assert!(out.contains("recreated"), "{out}");
    n.wait_logs(&m, "\"poll_ms\": 250");
    n.once_ok();
    assert_eq!(n.creates_since(&m, since), 1);
}

/// The container's environment, as the engine holds it.
fn container_env(n: &Node, module: &str) -> BTreeMap<String, String> {
    let out = docker_ok(&[
        "inspect",
        "--format",
        "{{json .Config.Env}}",
        &n.container_id(module),
    ]);
    let vars: Vec<String> = serde_json::from_str(&out).unwrap();
    vars.iter()
        .filter_map(|v| v.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// An env file read by Compose's rules (`env_file_format = "compose"`)
/// gives the process what Compose would; the same file read raw (the
/// default, as 0.5.0 read it) gives it verbatim; changing the format
/// recreates once, naming the env file.
#[test]
fn an_env_file_read_by_compose_s_rules_reaches_the_process_and_a_new_format_recreates_once() {
    let n = Node::new("envfmt");
    let m = n.module("app");
    let env = n.write_host(
        "app.env",
        "# settings\nGREETING=\"hello world\" # said\nPLAIN= padded \nLIT='no $PORT here'\nURL=http://db:${PORT}/x\nTWO=\"a\nB=b\"\nA.B-C=dots\n",
    );
    let text = |format: &str| {
        format!(
            "name = \"{m}\"\nimage = \"{IMAGE_1}\"\ncommand = [\"sh\", \"-c\", {cmd:?}]\nenv_files = [{env:?}]\n{format}env = {{ PORT = \"5432\" }}\n",
            cmd = idle_after("echo up")
        )
    };
    n.write_intention("app.toml", text(""));
    n.once_ok();
    let raw = container_env(&n, &m);
    assert_eq!(raw["PLAIN"], " padded ");
    assert_eq!(raw["URL"], "http://db:${PORT}/x");
    assert_eq!((raw["TWO"].as_str(), raw["B"].as_str()), ("\"a", "b\""));
    assert_eq!(raw["GREETING"], "\"hello world\" # said");

    n.write_intention("app.toml", text("env_file_format = \"compose\"\n"));
    let since = unix_now();
    let out = n.once_ok();
    assert!(
        out.contains("recreated") && out.contains(&format!("env_file:{}", env.display())),
        "{out}"
    );
    let got = container_env(&n, &m);
    for (k, v) in [
        ("GREETING", "hello world"),
        ("PLAIN", "padded"),
        ("LIT", "no $PORT here"),
        ("URL", "http://db:5432/x"),
        ("TWO", "a\nB=b"),
        ("A.B-C", "dots"),
        ("PORT", "5432"),
    ] {
        assert_eq!(got.get(k).map(String::as_str), Some(v), "{k}: {got:?}");
    }
    assert!(!got.contains_key("B"), "{got:?}");
    n.wait_logs(&m, "up");
    assert_eq!(n.creates_since(&m, since), 1);
    // And again: nothing moved, nothing is done.
    let quiet = unix_now();
    assert!(n.once_ok().contains("unchanged"));
    assert!(n.events_since(&m, quiet).is_empty());
}

#[test]
fn seed_001_inputs_changed_while_the_agent_was_stopped_are_caught() {
    let n = Node::new("seed001");
    let m = n.module("db");
    let model = n.write_host("model.bin", "model-v1");
    let env = n.write_host(
        "secrets.env",
        "# creds\nDATABASE_URL=postgresql://u@:20000/x\n",
    );
    let text = format!(
        r#"name = "{m}"
image = "{IMAGE_1}"
command = ["sh", "-c", {cmd:?}]
env_files = [{env:?}]
restart = "always"

[[mounts]]
source = {model:?}
target = "/model.bin"
read_only = true
"#,
        cmd = idle_after("echo url=$DATABASE_URL; cat /model.bin; echo")
    );
    n.write_intention("db.toml", &text);
    n.once_ok();
    n.wait_logs(&m, "url=postgresql://u@:20000/x");
    let first = n.container_id(&m);

    // The agent is not running; the env file is rewritten.
    std::fs::write(&env, "DATABASE_URL=postgresql://u@db:20000/x\n").unwrap();
    let since = unix_now();
    let out = n.once_ok();
    assert!(
        out.contains("recreated") && out.contains(&format!("env_file:{}", env.display())),
        "{out}"
    );
    n.wait_logs(&m, "url=postgresql://u@db:20000/x");
    let second = n.container_id(&m);
    assert_ne!(first, second);

    // A second pass with nothing changed does nothing: same container, no
    // engine write of any kind.
    let quiet_since = unix_now();
    let out = n.once_ok();
    assert!(out.contains("unchanged"), "{out}");
    assert_eq!(n.container_id(&m), second);
    let events = n.events_since(&m, quiet_since);
    assert!(
        events.is_empty(),
        "engine events on a quiet pass: {events:?}"
    );

    // The read-only mount's file is replaced while the agent is stopped, and
    // the agent's store is lost too: the comparison needs no memory of what
    // was applied, only the container's labels and the file as it is now.
    std::fs::write(&model, "model-v2").unwrap();
    std::fs::remove_dir_all(n.data()).unwrap();
    let out = n.once_ok();
    assert!(
        out.contains("recreated") && out.contains("mount:/model.bin"),
        "{out}"
    );
    n.wait_logs(&m, "model-v2");
    assert_eq!(n.creates_since(&m, since), 2);
}

#[test]
fn an_image_tag_repointed_recreates() {
    let n = Node::new("retag");
    let m = n.module("app");
    let tag = format!("stead-test/retag-{}:v", m);
    docker_ok(&["tag", IMAGE_1, &tag]);
    n.write_intention(
        "app.toml",
        format!(
            "name = \"{m}\"\nimage = \"{tag}\"\ncommand = [\"sh\", \"-c\", {:?}]\n",
            idle_after("cat /variant")
        ),
    );
    n.once_ok();
    n.wait_logs(&m, "1");
    docker_ok(&["tag", IMAGE_2, &tag]);
    let out = n.once_ok();
    assert!(out.contains("recreated") && out.contains("image:"), "{out}");
    n.wait_logs(&m, "2");
    let img = docker_ok(&["inspect", "--format", "{{.Image}}", &n.container_id(&m)]);
    assert_eq!(img, image_id(IMAGE_2));
    let _ = docker(&["rmi", &tag]);
}

#[test]
fn unmanaged_containers_are_never_touched_and_orphans_are_removed() {
    let n = Node::new("conflict");
    let taken = n.module("taken");
    let gone = n.module("gone");
    // Someone else's container holding a module's name.
    let stranger = docker_ok(&[
        "create",
        "--name",
        &format!("stead-{taken}"),
        IMAGE_1,
        "sleep",
        "1000",
    ]);
    let _cleanup = Cleanup(stranger.clone());
    n.write_intention(
        "taken.toml",
        format!("name = \"{taken}\"\nimage = \"{IMAGE_1}\"\ncommand = [\"sleep\", \"1000\"]\n"),
    );
    n.write_intention(
        "gone.toml",
        format!(
            "name = \"{gone}\"\nimage = \"{IMAGE_1}\"\ncommand = [\"sh\", \"-c\", {:?}]\n",
            idle_after("true")
        ),
    );
    let (ok, out, _) = n.once();
    assert!(!ok, "a conflict is not a clean pass");
    assert!(
        out.lines()
            .any(|l| l.starts_with(&taken) && l.contains("conflict")),
        "{out}"
    );
    assert!(
        out.lines()
            .any(|l| l.starts_with(&gone) && l.contains("created")),
        "{out}"
    );
    let (_, out, _) = n.once();
    assert!(
        out.lines()
            .any(|l| l.starts_with(&taken) && l.contains("conflict")),
        "{out}"
    );
    // The stranger is exactly as it was: not started, not replaced.
    let state = docker_ok(&["inspect", "--format", "{{.State.Status}}", &stranger]);
    assert_eq!(state, "created");

    // The intention goes: its container goes.
    n.remove_intention("gone.toml");
    let (_, out, _) = n.once();
    assert!(
        out.lines()
            .any(|l| l.starts_with(&gone) && l.contains("removed")),
        "{out}"
    );
    assert!(n.container(&gone).is_none());
    assert!(
        docker(&["inspect", &stranger]).status.success(),
        "the stranger survives"
    );
}

struct Cleanup(String);
impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = docker(&["rm", "-f", &self.0]);
    }
}

#[test]
fn report_policy_leaves_the_container_and_names_the_inputs() {
    let n = Node::new("report");
    let m = n.module("watch");
    n.write_intention("w.toml", config_module(&m, "pg://a", "d", "report"));
    n.once_ok();
    let id = n.container_id(&m);
    n.write_intention("w.toml", config_module(&m, "pg://b", "d", "report"));
    let out = n.once_ok();
    let line = out.lines().find(|l| l.starts_with(&m)).unwrap();
    assert!(
        line.contains("drifted") && line.contains("config:/etc/m/config.json"),
        "{line}"
    );
    assert_eq!(n.container_id(&m), id, "left running");
    let state = n.container(&m).unwrap().1;
    assert_eq!(state, "running");
    // The drift is in the store's event log.
    let store = stead::store::Store::open(&n.data().join("stead.redb")).unwrap();
    let events = store.events_since(0, 1000).unwrap();
    assert!(
        events
            .iter()
            .any(|e| e.kind == stead::store::EventKind::Drift
                && e.detail.contains("config:/etc/m/config.json")),
        "{events:?}"
    );
}

/// One pass that aborts at `point` (`STEAD_CRASH_AT`), as a kill -9 would.
fn crash_at(n: &Node, point: &str) {
    let o = n
        .stead()
        .args(["run", "--once", "--config"])
        .arg(n.config())
        .env("STEAD_CRASH_AT", point)
        .output()
        .unwrap();
    assert!(
        !o.status.success(),
        "{point}: the agent did not die there: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        String::from_utf8_lossy(&o.stderr).contains(&format!("STEAD_CRASH_AT={point}")),
        "{point}"
    );
}

#[test]
fn a_crash_between_any_two_engine_calls_of_a_recreate_converges_once() {
    let n = Node::new("crashpt");
    let m = n.module("pt");
    n.write_intention("c.toml", config_module(&m, "v0", "d", "recreate"));
    let start = unix_now();
    n.once_ok();
    // Every point between two engine calls of a recreate (the successor
    // made beside the old container, the old one stopped, the successor
    // started, the old one moved aside, the successor renamed, the old one
    // removed) and of a create; after each, a fresh agent finishes the
    // change without a second create.
    let points = [
        ("recreate:after-create", "recreated"),
        ("recreate:after-stop", "recreated"),
        ("recreate:after-start", "recreated"),
        ("recreate:after-retire", "recreated"),
        ("recreate:after-rename", "unchanged"),
        ("recreate:after-remove", "unchanged"),
    ];
    for (k, (point, expect)) in points.iter().enumerate() {
        let k = k + 1;
        n.write_intention(
            "c.toml",
            config_module(&m, &format!("v{k}"), "d", "recreate"),
        );
        crash_at(&n, point);
        let out = n.once_ok();
        assert!(
            out.lines().any(|l| l.starts_with(&m) && l.contains(expect)),
            "{point}: expected {expect}: {out}"
        );
        n.wait_logs(&m, &format!("\"url\": \"v{k}\""));
        assert!(n.once_ok().contains("unchanged"), "{point}");
        assert_eq!(
            n.creates_since(&m, start),
            1 + k,
            "{point}: one create per change"
        );
        let ids = docker_ok(&["ps", "-aq", "--filter", &format!("label=stead.module={m}")]);
        assert_eq!(ids.lines().count(), 1, "{point}: one container: {ids}");
    }

    // A create interrupted: a fresh agent finishes it, without a second.
    for (short, point, expect) in [
        ("fresh1", "create:after-create", "started"),
        ("fresh2", "create:after-start", "unchanged"),
    ] {
        let c = n.module(short);
        let start = unix_now();
        n.write_intention(
            &format!("{short}.toml"),
            config_module(&c, "f", "d", "recreate"),
        );
        crash_at(&n, point);
        let out = n.once_ok();
        assert!(
            out.lines().any(|l| l.starts_with(&c) && l.contains(expect)),
            "{point}: expected {expect}: {out}"
        );
        assert_eq!(n.creates_since(&c, start), 1, "{point}: one create");
    }
}

#[test]
fn a_recreate_whose_old_container_cannot_be_moved_aside_removes_it_first() {
    let n = Node::new("retired");
    let m = n.module("rt");
    // Someone else's container holding the name the old one is moved to.
    let stranger = docker_ok(&[
        "create",
        "--name",
        &format!("stead-{m}.old"),
        IMAGE_1,
        "sleep",
        "1000",
    ]);
    let _cleanup = Cleanup(stranger.clone());
    n.write_intention("rt.toml", config_module(&m, "v0", "d", "recreate"));
    let start = unix_now();
    n.once_ok();
    n.write_intention("rt.toml", config_module(&m, "v1", "d", "recreate"));
    let (ok, out, err) = n.once();
    assert!(ok, "{out}{err}");
    assert!(
        out.lines()
            .any(|l| l.starts_with(&m) && l.contains("recreated")),
        "{out}"
    );
    assert!(err.contains("could not be moved aside"), "{err}");
    n.wait_logs(&m, "\"url\": \"v1\"");
    assert!(n.once_ok().contains("unchanged"));
    assert_eq!(n.creates_since(&m, start), 2, "one create per change");
    let ids = docker_ok(&["ps", "-aq", "--filter", &format!("label=stead.module={m}")]);
    assert_eq!(ids.lines().count(), 1, "one container: {ids}");
    let state = docker_ok(&["inspect", "--format", "{{.State.Status}}", &stranger]);
    assert_eq!(state, "created", "the stranger is untouched");
}

#[test]
fn bad_input_names_file_and_field_and_changes_nothing() {
    let n = Node::new("badinput");
    let a = n.module("a");
    let b = n.module("b");
    n.write_intention("a.toml", config_module(&a, "a1", "d", "recreate"));
    n.write_intention("b.toml", config_module(&b, "b1", "d", "recreate"));
    n.once_ok();
    let a_id = n.container_id(&a);
    let store_path = n.data().join("stead.redb");
    let stored_a = || {
        let s = stead::store::Store::open(&store_path).unwrap();
        let all = s.intentions().unwrap();
        all.get(&stead::model::names::ModuleName::try_from(a.as_str()).unwrap())
            .cloned()
            .expect("a is stored")
    };
    let before = stored_a();

    let good_a = config_module(&a, "a2", "d", "recreate").toml();
    let cases: Vec<(&str, String, &str)> = vec![
        ("bad TOML", good_a.replace("[config]", "[config"), "(file)"),
        (
            "unknown field",
            good_a.replace("on_drift", "colour = \"red\"\non_drift"),
            "colour",
        ),
        (
            "invalid name",
            good_a.replace(&format!("name = \"{a}\""), "name = \"Not_Valid\""),
            "name",
        ),
        (
            "relative path",
            good_a.replace(
                "path = \"/etc/m/config.json\"",
                "path = \"etc/m/config.json\"",
            ),
            "config.path",
        ),
        (
            "dot-dot path",
            good_a.replace("path = \"/etc/m/config.json\"", "path = \"/etc/../m.json\""),
            "config.path",
        ),
        (
            "unknown format",
            good_a.replace("format = \"json\"", "format = \"yaml\""),
            "config.format",
        ),
        (
            "a setting key 100,000 segments deep",
            good_a.replace(
                "\"database.url\" = ",
                &format!(
                    "{:?} = 1\n\"database.url\" = ",
                    vec!["k"; 100_000].join(".")
                ),
            ),
            "settings",
        ),
        (
            "defaults nested too deep",
            good_a.replace(
                "poll_ms = 1000,",
                &format!("poll_ms = {}1{},", "[".repeat(40), "]".repeat(40)),
            ),
            "config.defaults",
        ),
        (
            "a NUL in an argument",
            good_a.replace("command = [\"sh\",", "command = [\"s\\u0000h\","),
            "command[0]",
        ),
        (
            "one host port published on two addresses",
            good_a.replace(
                "restart = ",
                "ports = [\"127.0.0.1:18111:80\", \"18111:81\"]\nrestart = ",
            ),
            "ports[1]",
        ),
        (
            "the config file inside a mounted directory",
            good_a.replace(
                "[config]",
                "[[mounts]]\nsource = \"/srv\"\ntarget = \"/etc/m\"\n\n[config]",
            ),
            "config.path",
        ),
    ];
    for (k, (what, text, field)) in cases.into_iter().enumerate() {
        n.write_intention("a.toml", &text);
        // b changes at the same time and must still be reconciled.
        n.write_intention(
            "b.toml",
            config_module(&b, &format!("b-{k}"), "d", "recreate"),
        );
        let (ok, out, _) = n.once();
        assert!(!ok, "{what}: a refused file is not a clean pass");
        let file = n.intention_path("a.toml").display().to_string();
        let line = out
            .lines()
            .find(|l| l.contains("rejected"))
            .unwrap_or_else(|| panic!("{what}: {out}"));
        assert!(
            line.contains(&file) && line.contains(&format!(": {field}: ")),
            "{what}: {line}"
        );
        assert!(
            out.lines()
                .any(|l| l.starts_with(&b) && l.contains("recreated")),
            "{what}: b not reconciled: {out}"
        );
        assert_eq!(n.container_id(&a), a_id, "{what}: a's container changed");
        assert_eq!(stored_a(), before, "{what}: a's stored intention changed");
    }

    // Two files naming the same module: neither is taken, nothing changes.
    n.write_intention("a.toml", &good_a);
    n.write_intention("a-again.toml", config_module(&a, "a3", "d", "recreate"));
    let (_, out, _) = n.once();
    assert!(
        out.contains("is also defined by") || out.contains("more than one file"),
        "{out}"
    );
    assert_eq!(n.container_id(&a), a_id);
    assert_eq!(stored_a(), before);

    // Fixed: taken.
    n.remove_intention("a-again.toml");
    let out = n.once_ok();
    assert!(
        out.lines()
            .any(|l| l.starts_with(&a) && l.contains("recreated")),
        "{out}"
    );
    n.wait_logs(&a, "a2");
}

#[test]
fn ports_and_restart_policy_reach_the_engine() {
    let n = Node::new("ports");
    let m = n.module("web");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    n.write_intention(
        "web.toml",
        format!(
            "name = \"{m}\"\nimage = \"{IMAGE_1}\"\ncommand = [\"sh\", \"-c\", {:?}]\nports = [\"127.0.0.1:{port}:80/tcp\"]\nrestart = \"on-failure\"\nenv = {{ GREETING = \"hi\" }}\n",
            idle_after("echo $GREETING")
        ),
    );
    n.once_ok();
    let id = n.container_id(&m);
    let p = docker_ok(&["port", &id, "80/tcp"]);
    assert!(p.contains(&format!("127.0.0.1:{port}")), "{p}");
    let r = docker_ok(&[
        "inspect",
        "--format",
        "{{.HostConfig.RestartPolicy.Name}}",
        &id,
    ]);
    assert_eq!(r, "on-failure");
    n.wait_logs(&m, "hi");
    let labels = docker_ok(&["inspect", "--format", "{{json .Config.Labels}}", &id]);
    for key in [
        "stead.managed-by",
        "stead.module",
        "stead.digest",
        "stead.input.image",
        "stead.input.ports",
        "stead.input.env",
    ] {
        assert!(labels.contains(key), "{key} missing: {labels}");
    }
}

#[test]
fn start_first_starts_the_new_container_before_the_old_one_stops() {
    let n = Node::new("startfirst");
    let m = n.module("sf");
    let text =
        |v: &str| config_module(&m, v, "d", "recreate").set("update_order", "\"start-first\"");
    n.write_intention("sf.toml", text("v0"));
    n.once_ok();
    let start = unix_now();
    let old = n.container_id(&m);
    n.write_intention("sf.toml", text("v1"));
    assert!(n.once_ok().contains("recreated"));
    n.wait_logs(&m, "\"url\": \"v1\"");
    let new = n.container_id(&m);
    let events: String = n
        .events_of_containers_since(&m, start)
        .iter()
        .map(|(a, id)| format!("{a} {id}\n"))
        .collect();
    let at = |what: &str| {
        events
            .lines()
            .position(|l| l == what)
            .unwrap_or_else(|| panic!("{what} not in:\n{events}"))
    };
    assert!(
        at(&format!("start {new}")) < at(&format!("die {old}")),
        "the new container started before the old one stopped:\n{events}"
    );
    // It took the module's name before the old one stopped: the old one's
    // stop is not on the change's way.
    assert!(
        at(&format!("rename {new}")) < at(&format!("die {old}")),
        "the new container took the module's name before the old one stopped:\n{events}"
    );

    // Crash-safe as the stop-first path: one create per change.
    let points = [
        "recreate:after-create",
        "recreate:after-start",
        "recreate:after-retire",
        "recreate:after-rename",
        "recreate:after-remove",
    ];
    for (k, point) in points.iter().enumerate() {
        let v = format!("v{}", k + 2);
        n.write_intention("sf.toml", text(&v));
        crash_at(&n, point);
        n.once_ok();
        n.wait_logs(&m, &format!("\"url\": \"{v}\""));
        assert!(n.once_ok().contains("unchanged"), "{point}");
        assert_eq!(
            n.creates_since(&m, start),
            2 + k,
            "{point}: one create per change"
        );
        let ids = docker_ok(&["ps", "-aq", "--filter", &format!("label=stead.module={m}")]);
        assert_eq!(ids.lines().count(), 1, "{point}: one container: {ids}");
    }
}
