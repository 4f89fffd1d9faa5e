//! No secret where others read: a value from a module's env, settings or
//! files is never in a container's label, an error, an event, the log or
//! an unauthenticated answer, against the real agent and the real Docker
//! Engine; a store rebuilt from the containers still takes them back.

mod common;

use common::agent::{Agent, http_get};
use common::*;

/// Every event's text in the node's store (read from a copy: opening a
/// store writes to it).
fn event_texts(n: &Node) -> String {
    let copy = n.dir.path().join("events-copy.redb");
    std::fs::copy(n.data().join("stead.redb"), &copy).unwrap();
    let s = stead::store::Store::open(&copy).unwrap();
    s.events_since(0, 10_000)
        .unwrap()
        .iter()
        .map(|e| format!("{} {}\n", e.module.as_deref().unwrap_or("-"), e.detail))
        .collect()
}

/// `docker inspect` of a container, whole.
fn inspect(id: &str) -> serde_json::Value {
    let out = docker_ok(&["inspect", id]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    v[0].clone()
}

/// Waits until the module reads `state` in the (unauthenticated) API.
fn wait_state(n: &Node, agent: &Agent, m: &str, state: &str) {
    n.wait_for(60, &format!("{m} {state}"), || {
        let (_, body) = agent.get(&format!("/v1/modules/{m}"));
        serde_json::from_str::<serde_json::Value>(&body).is_ok_and(|b| b["state"] == state)
    });
}

#[test]
fn no_value_of_env_settings_or_files_is_in_a_label_an_error_or_an_unauthenticated_read() {
    // Converged once up for a second, not the default 30.
    let n = Node::new("secrets").with_config("settle_window = \"1s\"");
    let marker = format!("m4rk3r{}", std::process::id());
    let (api, file, bad) = (n.module("api"), n.module("file"), n.module("badenv"));
    let cmd = serde_json::json!(["sh", "-c", idle_after("true")]);
    n.write_intention(
        "file.toml",
        format!(
            "name = \"{file}\"\nimage = \"{IMAGE_1}\"\ncommand = {cmd}\n[config]\npath = \"/c.json\"\nformat = \"json\"\ndefaults = {{ a = 1 }}\n"
        ),
    );
    // An env file whose second line is not KEY=VALUE: a value on its own.
    let env_file = n.write_host("bad.env", &format!("A=1\nDB_PASS {marker}=x\n"));
    n.write_intention(
        "bad.toml",
        format!(
            "name = \"{bad}\"\nimage = \"{IMAGE_1}\"\ncommand = {cmd}\nenv_files = [{:?}]\n",
            env_file.display().to_string()
        ),
    );
    let agent = Agent::start(&n);
    let body = serde_json::json!({
        "name": api, "image": IMAGE_1, "command": cmd,
        "env": { "TOKEN": marker },
        "config": { "path": "/c.json", "format": "json", "defaults": { "pw": "x" } },
        "settings": { "pw": marker },
        "files": [{ "path": "/k.txt", "content": marker }],
    });
    let (code, said) = agent.send(
        &n,
        "PUT",
        &format!("/v1/intentions/{api}"),
        &body.to_string(),
    );
    assert_eq!(code, 201, "{said}");
    n.wait_for(30, "the file module known", || {
        agent.get(&format!("/v1/modules/{file}")).0 == 200
    });
    let (code, said) = agent.patch(
        &n,
        &format!("/v1/intentions/{file}/settings"),
        &serde_json::json!({ "a": marker }).to_string(),
    );
    assert_eq!(code, 200, "{said}");
    wait_state(&n, &agent, &api, "converged");
    n.wait_for(60, "the layered settings running", || {
        n.container(&file).is_some_and(|c| c.1 == "running")
            && agent
                .get(&format!("/v1/modules/{file}"))
                .1
                .contains("\"converged\"")
            && docker_ok(&["inspect", &n.container_id(&file)]).contains("stead.stated")
    });

    // The labels carry the statements sealed, and nothing of the inspect
    // but the container's own environment holds a value.
    for m in [&api, &file] {
        let mut c = inspect(&n.container_id(m));
        let stated = c["Config"]["Labels"]["stead.stated"].as_str().unwrap();
        assert!(stated.starts_with("sealed1:"), "{m}: {stated}");
        let env = c["Config"]["Env"].take();
        let rest = c.to_string();
        assert!(
            !rest.contains(&marker),
            "{m}: the inspect holds the value: {rest}"
        );
        if m == &api {
            assert!(
                env.to_string().contains(&format!("TOKEN={marker}")),
                "{env}"
            );
        }
    }
    // The list every label reader uses.
    let ps = docker_ok(&["ps", "-a", "--no-trunc", "--format", "{{.Labels}}"]);
    assert!(!ps.contains(&marker), "{ps}");

    // The env file's error names the file, the line and the key, not the
    // value; everywhere it goes.
    n.wait_for(30, "the bad env file said", || {
        agent
            .get(&format!("/v1/modules/{bad}"))
            .1
            .contains("line 2")
    });
    let (_, status) = agent.get(&format!("/v1/modules/{bad}"));
    for says in [
        "bad.env",
        "line 2",
        "\\\"DB_PASS\\\" is followed by a space",
    ] {
        assert!(status.contains(says), "{says}: {status}");
    }

    // Unauthenticated reads show no value; the token shows them.
    for path in [
        "/v1/status".to_string(),
        "/v1/events?limit=1000".into(),
        "/v1/intentions".into(),
        format!("/v1/intentions/{api}"),
        format!("/v1/intentions/{file}"),
        format!("/v1/modules/{api}"),
        format!("/v1/modules/{bad}"),
        "/v1/plane".into(),
        "/metrics".into(),
    ] {
        let (code, body) = agent.get(&path);
        assert_eq!(code, 200, "{path}: {body}");
        assert!(!body.contains(&marker), "{path}: {body}");
    }
    let (_, open) = agent.get(&format!("/v1/intentions/{api}"));
    let open: serde_json::Value = serde_json::from_str(&open).unwrap();
    assert!(open["values_hidden"].is_string(), "{open}");
    assert_eq!(open["intention"]["env"]["TOKEN"], serde_json::Value::Null);
    assert_eq!(open["intention"]["files"][0]["path"], "/k.txt");
    assert_eq!(open["intention"]["image"], IMAGE_1, "the rest is shown");
    let (code, _) = common::agent::http_send(
        &agent.addr,
        "GET",
        &format!("/v1/intentions/{api}"),
        Some("wrong-token-wrong-token"),
        "",
    );
    assert_eq!(code, 401, "a wrong token is refused, not taken as none");
    let (_, full) = agent.send(&n, "GET", &format!("/v1/intentions/{api}"), "");
    let full: serde_json::Value = serde_json::from_str(&full).unwrap();
    assert_eq!(full["intention"]["env"]["TOKEN"], marker.as_str());
    assert_eq!(full["intention"]["settings"]["pw"], marker.as_str());
    assert_eq!(full["intention"]["files"][0]["content"], marker.as_str());
    assert!(full.get("values_hidden").is_none(), "{full}");
    let (_, layered) = agent.send(&n, "GET", &format!("/v1/intentions/{file}"), "");
    assert!(layered.contains(&marker), "{layered}");

    // A store lost: the sealed labels are taken back, nothing restarts.
    let ids = [n.container_id(&api), n.container_id(&file)];
    drop(agent);
    let since = unix_now();
    std::fs::remove_file(n.data().join("stead.redb")).unwrap();
    // (Not ok: the module with the bad env file is held.)
    let (_, out, err) = n.once();
    assert!(!err.contains(&marker), "{err}");
    for (m, id) in [&api, &file].into_iter().zip(&ids) {
        assert!(
            out.lines()
                .any(|l| l.starts_with(m.as_str()) && l.contains("unchanged")),
            "{out}"
        );
        assert_eq!(&n.container_id(m), id);
        assert_eq!(n.creates_since(m, since), 0);
    }
    let said = event_texts(&n);
    assert_eq!(
        said.matches("taken back from the container's labels")
            .count(),
        2,
        "{said}"
    );
    assert!(!said.contains(&marker), "{said}");
    let log = Agent::log(&n);
    assert!(!log.contains(&marker), "the log holds the value: {log}");
    let key = n.data().join("local.key");
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&key).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o600);

    // A damaged key does not keep the node down: moved aside, made anew.
    std::fs::write(&key, b"damaged").unwrap();
    let agent = Agent::start(&n);
    n.wait_for(30, "a pass", || agent.get("/readyz").0 == 200);
    assert_eq!(std::fs::metadata(&key).unwrap().len(), 32);
    let aside = std::fs::read_dir(n.data())
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("local.key.bad-")
        })
        .count();
    assert_eq!(aside, 1);
}

#[test]
fn a_clear_label_made_by_0_5_0_is_taken_back_without_a_recreate_and_new_ones_are_sealed() {
    // Converged once up for a second, not the default 30.
    let n = Node::new("clearlabel").with_config("settle_window = \"1s\"");
    let m = n.module("old");
    let cmd = serde_json::json!(["sh", "-c", idle_after("true")]);
    let body = serde_json::json!({
        "name": m, "image": IMAGE_1, "command": cmd, "env": { "SAID": "in clear" },
    });
    let intention = {
        let agent = Agent::start(&n);
        let (code, said) = agent.send(&n, "PUT", &format!("/v1/intentions/{m}"), &body.to_string());
        assert_eq!(code, 201, "{said}");
        wait_state(&n, &agent, &m, "converged");
        let (_, i) = agent.send(&n, "GET", &format!("/v1/intentions/{m}"), "");
        let i: serde_json::Value = serde_json::from_str(&i).unwrap();
        i["intention"].clone()
    };
    // The container as 0.5.0 made it: the same, with the statement in
    // clear in its label.
    let made = inspect(&n.container_id(&m));
    let name = made["Name"]
        .as_str()
        .unwrap()
        .trim_start_matches('/')
        .to_string();
    docker_ok(&["rm", "-f", &n.container_id(&m)]);
    let mut args: Vec<String> = vec!["create".into(), "--name".into(), name];
    for (k, v) in made["Config"]["Labels"].as_object().unwrap() {
        if k != "stead.stated" {
            args.extend(["--label".into(), format!("{k}={}", v.as_str().unwrap())]);
        }
    }
    let clear = serde_json::json!({ "api": intention }).to_string();
    args.extend(["--label".into(), format!("stead.stated={clear}")]);
    for e in made["Config"]["Env"].as_array().unwrap() {
        args.extend(["--env".into(), e.as_str().unwrap().to_string()]);
    }
    args.push(IMAGE_1.into());
    for a in made["Config"]["Cmd"].as_array().unwrap() {
        args.push(a.as_str().unwrap().to_string());
    }
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let id = docker_ok(&refs).trim().to_string();
    docker_ok(&["start", &id]);

    let since = unix_now();
    std::fs::remove_file(n.data().join("stead.redb")).unwrap();
    let out = n.once_ok();
    assert!(
        out.lines()
            .any(|l| l.starts_with(m.as_str()) && l.contains("unchanged")),
        "{out}"
    );
    assert_eq!(n.container_id(&m), id, "not recreated for its label");
    assert_eq!(n.creates_since(&m, since), 0);
    let said = event_texts(&n);
    assert!(
        said.contains("in clear, as stead 0.5.0 wrote them"),
        "{said}"
    );

    // It is the API's again, and its next container carries a sealed label.
    let agent = Agent::start(&n);
    let (_, i) = agent.send(&n, "GET", &format!("/v1/intentions/{m}"), "");
    assert!(i.contains("in clear") && i.contains("\"api\""), "{i}");
    let changed = serde_json::json!({
        "name": m, "image": IMAGE_1, "command": cmd, "env": { "SAID": "sealed now" },
    });
    let (code, said) = agent.send(
        &n,
        "PUT",
        &format!("/v1/intentions/{m}"),
        &changed.to_string(),
    );
    assert_eq!(code, 200, "{said}");
    n.wait_for(60, "the changed module recreated", || {
        n.container(&m)
            .is_some_and(|c| c.0 != id && c.1 == "running")
    });
    let label = docker_ok(&[
        "inspect",
        "--format",
        "{{index .Config.Labels \"stead.stated\"}}",
        &n.container_id(&m),
    ]);
    assert!(label.starts_with("sealed1:"), "{label}");
    assert!(!label.contains("sealed now"), "{label}");
    let _ = http_get(&agent.addr, "/healthz");
}

/// `stead import ARGS` in `dir`: (exit code, stderr).
fn import(dir: &std::path::Path, args: &[&str]) -> (i32, String) {
    let o = std::process::Command::new(common::workspace_bin("stead-plane"))
        .current_dir(dir)
        .arg("import")
        .args(args)
        .output()
        .unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn mode(p: &std::path::Path) -> u32 {
    std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(p).unwrap().permissions()) & 0o777
}

#[test]
fn an_import_that_copies_a_file_writes_it_private_says_so_and_stays_in_its_tree() {
    let d = tempfile::tempdir().unwrap();
    let app = d.path().join("app");
    let elsewhere = d.path().join("elsewhere");
    std::fs::create_dir_all(&app).unwrap();
    std::fs::create_dir_all(&elsewhere).unwrap();
    let key = app.join("key.pem");
    std::fs::write(&key, "-----BEGIN KEY----- m4rk3r").unwrap();
    std::fs::write(elsewhere.join("shadow"), "root:m4rk3r").unwrap();
    std::os::unix::fs::symlink(elsewhere.join("shadow"), app.join("link.pem")).unwrap();
    let compose = |source: &str| {
        format!(
            "services:\n  s:\n    image: x:1\n    configs: [{{source: k, target: /k.pem}}]\n  t:\n    image: x:1\n    environment: {{PW: \"${{PW}}\"}}\nconfigs:\n  k: {{file: {source}}}\n"
        )
    };
    std::fs::write(app.join("compose.yml"), compose("./key.pem")).unwrap();
    // A secret in a private .env, interpolated into t's environment.
    std::fs::write(app.join(".env"), "PW=m4rk3r-env\n").unwrap();
    std::fs::set_permissions(
        app.join(".env"),
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .unwrap();
    // A link planted where the old importer put its temp file.
    let out = app.join("out");
    std::fs::create_dir_all(&out).unwrap();
    let victim = d.path().join("victim");
    std::fs::write(&victim, "keep").unwrap();
    std::os::unix::fs::symlink(&victim, out.join(".s.toml.stead-import")).unwrap();

    let (code, err) = import(&app, &["--out", "out", "compose.yml"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains(&format!(
            "note: s: configs[0]: the content of {} is copied into the intention, which is written readable by its owner only (0600)",
            key.display()
        )),
        "{err}"
    );
    assert!(
        err.contains("(1 with content copied from files or variables, written 0600: s.toml)"),
        "{err}"
    );
    assert!(!err.contains("m4rk3r"), "{err}");
    assert_eq!(mode(&out.join("s.toml")), 0o600);
    // Every intention is written 0600: t's value came from the private .env.
    assert_eq!(mode(&out.join("t.toml")), 0o600);
    assert!(
        std::fs::read_to_string(out.join("t.toml"))
            .unwrap()
            .contains("m4rk3r-env")
    );
    assert!(
        std::fs::read_to_string(out.join("s.toml"))
            .unwrap()
            .contains("m4rk3r")
    );
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");

    // Outside the Compose file's tree, by its path or by a link: refused,
    // nothing written, unless --allow-outside.
    let shadow = elsewhere.join("shadow").display().to_string();
    for source in [shadow.as_str(), "../elsewhere/shadow", "./link.pem"] {
        std::fs::write(app.join("compose.yml"), compose(source)).unwrap();
        let fresh = format!("out-{}", source.len());
        let (code, err) = import(&app, &["--out", &fresh, "compose.yml"]);
        assert_eq!(code, 2, "{source}: {err}");
        assert!(
            err.contains("outside the Compose file's directory"),
            "{err}"
        );
        assert!(err.contains("--allow-outside"), "{err}");
        assert!(!err.contains("m4rk3r"), "{err}");
        assert!(!app.join(&fresh).exists(), "nothing written");
        let (code, err) = import(&app, &["--allow-outside", "--out", &fresh, "compose.yml"]);
        assert_eq!(code, 0, "{source}: {err}");
        assert_eq!(mode(&app.join(&fresh).join("s.toml")), 0o600);
    }
}

#[test]
fn a_value_sealed_to_the_device_reaches_its_container_alone_and_opens_nowhere_else() {
    use common::desired::{payload, sign};
    use common::plane::Plane;
    use common::plane::plane_cli_with as plane_cli;
    use serde_json::json;
    let key = stead::plane::envelope::SecretKey::generate().unwrap();
    let plane = Plane::start();
    // Converged once up for a second, not the default 30.
    let n = Node::new("sealed").with_config(&format!(
        "settle_window = \"1s\"\n[plane]\nurl = {:?}\ntrusted_keys = [{:?}]\npoll_interval = \"1s\"",
        plane.base(),
        key.public().to_base64()
    ));
    let agent = Agent::start(&n);
    n.wait_for(60, "a report naming the device's key", || {
        plane
            .report_json(&n.id)
            .is_some_and(|r| r["device_key"].is_string())
    });

    // The operator's side: the key enrolled from the reports, values
    // sealed to it from stdin.
    let fleet = n.dir.path().join("fleet");
    std::fs::create_dir_all(&fleet).unwrap();
    let reports = plane.root().join("nodes");
    let (ok, out, err) = plane_cli(
        &[
            "enroll",
            "--fleet",
            fleet.to_str().unwrap(),
            "--reports",
            reports.to_str().unwrap(),
        ],
        "",
    );
    assert!(
        ok && out.contains(&format!("enrolled {}", n.id)),
        "{out}{err}"
    );
    let (_, status) = agent.get("/v1/status");
    let status: serde_json::Value = serde_json::from_str(&status).unwrap();
    let device_key = status["node"]["device_key"].as_str().unwrap().to_string();
    // Its report key beside it, taken from the report it signed.
    let report_key = status["node"]["report_key"].as_str().unwrap().to_string();
    let enrolled = std::fs::read_to_string(fleet.join("device-keys.csv")).unwrap();
    assert!(
        enrolled.contains(&format!("{},{device_key},{report_key}\n", n.id)),
        "{enrolled}"
    );
    // Another key enrolled for the node (a device replaced, or a report
    // not its own): the reports' key is kept out until --replace.
    let other = stead::model::age::Identity::from_bytes([9; 32])
        .recipient()
        .encode();
    std::fs::write(fleet.join("device-keys.csv"), format!("{},{other}\n", n.id)).unwrap();
    let enroll = |more: &[&str]| {
        let mut args = vec![
            "enroll",
            "--fleet",
            fleet.to_str().unwrap(),
            "--reports",
            reports.to_str().unwrap(),
        ];
        args.extend(more);
        plane_cli(&args, "")
    };
    let (ok, _, err) = enroll(&[]);
    assert!(
        !ok && err.contains("reports a key other than the one enrolled"),
        "{err}"
    );
    let kept = std::fs::read_to_string(fleet.join("device-keys.csv")).unwrap();
    assert!(kept.contains(&other), "{kept}");
    let (ok, out, err) = enroll(&["--replace"]);
    assert!(
        ok && out.contains(&format!("replaced the key of {}", n.id)),
        "{out}{err}"
    );
    let replaced = std::fs::read_to_string(fleet.join("device-keys.csv")).unwrap();
    assert!(
        replaced.contains(&format!("{},{device_key}", n.id)),
        "{replaced}"
    );
    // A report that names the node from another node's directory is
    // refused; one naming another node with this device's key is not
    // enrolled: one key is one device's. The keys stay as they were.
    let report = std::fs::read(reports.join(&n.id).join("status.json")).unwrap();
    let twin = format!("{}-twin", n.id);
    std::fs::create_dir_all(reports.join(&twin)).unwrap();
    std::fs::write(reports.join(&twin).join("status.json"), &report).unwrap();
    let (ok, _, err) = enroll(&[]);
    assert!(
        !ok && err.contains(&format!(
            "it names node {} but is in the directory of node {twin}: refused",
            n.id
        )),
        "{err}"
    );
    // A second device with this one's data directory copied: it signs its
    // own report, naming itself, with this device's keys.
    let local: [u8; 32] = std::fs::read(n.data().join("local.key"))
        .unwrap()
        .try_into()
        .unwrap();
    let cloned = stead::plane::envelope::SecretKey::from_seed(
        stead::model::seal::LocalKey::from_bytes(local).report_seed(),
    );
    assert_eq!(cloned.public().to_base64(), report_key);
    let mut twin_report = common::plane::open_report(&n.id, &report);
    twin_report["node"] = twin.as_str().into();
    std::fs::write(
        reports.join(&twin).join("status.json"),
        stead::views::signed::sign(&serde_json::to_vec(&twin_report).unwrap(), &cloned),
    )
    .unwrap();
    let (ok, _, err) = enroll(&["--replace"]);
    assert!(
        !ok && err.contains(&format!("{twin} reports the key enrolled for {}", n.id)),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(fleet.join("device-keys.csv")).unwrap(),
        replaced
    );
    std::fs::remove_dir_all(reports.join(&twin)).unwrap();
    // A key of low order (the all-zero one: what is sealed to it opens
    // for anyone) is refused, given by hand or enrolled.
    let zero = "age1qqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqq5cu47z";
    let seal_to = |to: &[&str]| {
        let mut args = vec![
            "seal", "--node", &n.id, "--module", "db", "--field", "env.X",
        ];
        args.extend(to);
        plane_cli(&args, "v")
    };
    let (ok, out, err) = seal_to(&["--to", zero]);
    assert!(!ok && out.is_empty() && err.contains("low order"), "{err}");
    let zeroed = tempfile::tempdir().unwrap();
    std::fs::write(
        zeroed.path().join("device-keys.csv"),
        format!("{},{zero}\n", n.id),
    )
    .unwrap();
    let (ok, out, err) = seal_to(&["--fleet", zeroed.path().to_str().unwrap()]);
    assert!(!ok && out.is_empty() && err.contains("low order"), "{err}");
    // A node not enrolled has nothing to seal to.
    let (ok, _, err) = plane_cli(
        &[
            "seal",
            "--node",
            "nobody",
            "--module",
            "db",
            "--field",
            "env.X",
            "--fleet",
            fleet.to_str().unwrap(),
        ],
        "v",
    );
    assert!(!ok && err.contains("nobody is not enrolled"), "{err}");

    let marker = format!("s3cr3t{}", std::process::id());
    let db = n.module("db");
    let seal = |module: &str, field: &str, value: &str| {
        let (ok, out, err) = plane_cli(
            &[
                "seal",
                "--node",
                &n.id,
                "--module",
                module,
                "--field",
                field,
                "--fleet",
                fleet.to_str().unwrap(),
            ],
            value,
        );
        assert!(ok, "{err}");
        assert!(
            !err.contains(&marker) && !out.contains(&marker),
            "{out}{err}"
        );
        out.trim().to_string()
    };
    let module = |name: &str, sealed: [String; 3]| {
        let [env, setting, file] = sealed;
        json!({
            "name": name,
            "image": IMAGE_1,
            "command": ["sh", "-c", idle_after("echo P=$DB_PASSWORD; cat /run/key; echo; cat /etc/app.json")],
            "env": {"DB_PASSWORD": {"sealed": env}, "MODE": "x"},
            "config": {"path": "/etc/app.json", "format": "json", "defaults": {"db": {"host": "h"}}},
            "settings": {"db.password": {"sealed": setting}},
            "files": [{"path": "/run/key", "content": {"sealed": file}}],
            "restart": "always",
        })
    };
    let sealed_for = |m: &str| {
        [
            seal(m, "env.DB_PASSWORD", &format!("{marker}-env\n")),
            seal(m, "settings.db.password", &format!("{marker}-set")),
            seal(m, "files./run/key", &format!("{marker}-file")),
        ]
    };
    let publish = |revision: u64, modules: Vec<serde_json::Value>| {
        plane.publish(&n.id, &sign(&key, &payload(&n, revision, modules)))
    };
    let first = sealed_for(&db);
    publish(1, vec![module(&db, first.clone())]);
    n.wait_for(90, "the module running with its values opened", || {
        n.container(&db).is_some_and(|(_, s, _)| s == "running") && {
            let logs = n.logs(&db);
            logs.contains(&format!("P={marker}-env\n"))
                && logs.contains(&format!("{marker}-file"))
                && logs.contains(&format!("\"password\": \"{marker}-set\""))
        }
    });
    let id = n.container_id(&db);

    // In the container's environment, and nowhere else of its inspect.
    let mut c = inspect(&id);
    let env = c["Config"]["Env"].take();
    assert!(
        env.to_string()
            .contains(&format!("DB_PASSWORD={marker}-env\"")),
        "{env}"
    );
    assert!(
        !c.to_string().contains(&marker),
        "the inspect holds it: {c}"
    );
    let ps = docker_ok(&["ps", "-a", "--no-trunc", "--format", "{{.Labels}}"]);
    assert!(!ps.contains(&marker), "{ps}");
    // Nowhere the API answers, with its token or without: sealed, shown
    // as such.
    for path in [
        "/v1/status".to_string(),
        "/v1/events?limit=1000".into(),
        "/v1/intentions".into(),
        format!("/v1/intentions/{db}"),
        format!("/v1/modules/{db}"),
        "/v1/plane".into(),
        "/metrics".into(),
    ] {
        let (code, body) = agent.get(&path);
        assert_eq!(code, 200, "{path}: {body}");
        assert!(!body.contains(&marker), "{path}: {body}");
        let (code, body) = agent.send(&n, "GET", &path, "");
        assert_eq!(code, 200, "{path}: {body}");
        assert!(!body.contains(&marker), "{path} with the token: {body}");
    }
    let (_, open) = agent.get(&format!("/v1/intentions/{db}"));
    let open: serde_json::Value = serde_json::from_str(&open).unwrap();
    assert_eq!(
        open["intention"]["env"]["DB_PASSWORD"], "(sealed)",
        "{open}"
    );
    let (_, full) = agent.send(&n, "GET", &format!("/v1/intentions/{db}"), "");
    let full: serde_json::Value = serde_json::from_str(&full).unwrap();
    assert_eq!(
        full["intention"]["env"]["DB_PASSWORD"]["sealed"],
        first[0].as_str()
    );
    // Nor in the store's file, its events, the report or the log.
    let store = std::fs::read(n.data().join("stead.redb")).unwrap();
    assert!(
        !store.windows(marker.len()).any(|w| w == marker.as_bytes()),
        "the store holds it in clear"
    );
    assert!(!event_texts(&n).contains(&marker));
    n.wait_for(30, "a report of the module", || {
        plane
            .report_json(&n.id)
            .is_some_and(|r| r["modules"][db.as_str()].is_object())
    });
    // The payload, as signed (in the envelope it is base64).
    let report = common::plane::open_report(&n.id, &plane.report(&n.id).unwrap()).to_string();
    assert!(!report.contains(&marker), "{report}");

    // Sealed again (new randomness), the same values: a new revision taken,
    // and nothing made again.
    let since = unix_now();
    publish(2, vec![module(&db, sealed_for(&db))]);
    common::desired::wait_plane(&n, &agent, "revision 2", |p| p["held"]["revision"] == 2);
    n.wait_for(30, "a pass after revision 2", || {
        agent
            .get(&format!("/v1/modules/{db}"))
            .1
            .contains("\"converged\"")
    });
    assert_eq!(n.container_id(&db), id);
    assert_eq!(n.creates_since(&db, since), 0);

    // Values sealed for db given to another module: held, naming the
    // field and where they belong; db runs on.
    let other = n.module("other");
    publish(3, vec![module(&db, first.clone()), module(&other, first)]);
    n.wait_for(60, "the other module held", || {
        agent.get(&format!("/v1/modules/{other}")).1.contains(&format!(
            "env.DB_PASSWORD: a value sealed for node {}, module {db}, field env.DB_PASSWORD, not here",
            n.id
        ))
    });
    assert!(n.container(&other).is_none());
    assert_eq!(n.container_id(&db), id);

    // A value that cannot be an env value (a NUL byte, which the engine
    // refuses, quoting it): `seal` refuses it, and the device refuses one
    // sealed by another tool before the engine sees it, naming the field.
    let nul = n.module("nul");
    let (ok, out, err) = plane_cli(
        &[
            "seal",
            "--node",
            &n.id,
            "--module",
            &nul,
            "--field",
            "env.DB_PASSWORD",
            "--fleet",
            fleet.to_str().unwrap(),
        ],
        &format!("{marker}\0-nul"),
    );
    assert!(
        !ok && err
            .contains("env.DB_PASSWORD: the value cannot be sealed for it: it holds a NUL byte"),
        "{out}{err}"
    );
    assert!(!err.contains(&marker), "{err}");
    let recipient = stead::model::age::Recipient::parse(&device_key).unwrap();
    let by_hand = |field: &str, value: &str| {
        let at = stead::model::sealed::Binding {
            node: &n.id,
            module: &nul,
            field,
        };
        stead::model::sealed::seal(
            &recipient,
            &at,
            value.as_bytes(),
            &[7; stead::model::age::RANDOM_LEN],
        )
        .unwrap()
    };
    let with_nul = [
        by_hand("env.DB_PASSWORD", &format!("{marker}\0-nul\n\"q\"")),
        by_hand("settings.db.password", &format!("{marker}-set")),
        by_hand("files./run/key", &format!("{marker}-file")),
    ];
    publish(
        4,
        vec![module(&db, sealed_for(&db)), module(&nul, with_nul)],
    );
    n.wait_for(60, "the module with a NUL held", || {
        agent
            .get(&format!("/v1/modules/{nul}"))
            .1
            .contains("env.DB_PASSWORD: the opened value cannot be used there: it holds a NUL byte")
    });
    assert!(n.container(&nul).is_none());
    for path in ["/v1/status".to_string(), format!("/v1/modules/{nul}")] {
        let (_, body) = agent.get(&path);
        assert!(!body.contains(&marker), "{path}: {body}");
    }
    let (_, cli) = n.cli(&["status"]);
    assert!(cli.contains(&nul) && !cli.contains(&marker), "{cli}");

    // Uploads an action asks (to the plane's host): the module's logs and
    // a support bundle carry what it printed of its values masked, and
    // nothing else of them.
    let in_an_hour = stead::model::time::format_rfc3339(common::desired::now() + 3600);
    let mut p = payload(&n, 5, vec![module(&db, sealed_for(&db))]);
    p["actions"] = json!([
        {"id": "logs-1", "kind": "upload-logs", "module": db, "expires": in_an_hour},
        {"id": "bundle-1", "kind": "support-bundle", "expires": in_an_hour},
    ]);
    plane.publish(&n.id, &sign(&key, &p));
    let uploads = plane.root().join(format!("nodes/{}/uploads", n.id));
    let logs_at = uploads.join(format!("logs-1/{db}.log"));
    let bundle_at = uploads.join("bundle-1/support-bundle.tar");
    n.wait_for(90, "both uploads on the plane's host", || {
        logs_at.exists() && bundle_at.exists()
    });
    let logs = std::fs::read_to_string(&logs_at).unwrap();
    assert!(logs.contains("P=(sealed)"), "{logs}");
    assert!(!logs.contains(&marker), "the uploaded logs hold it: {logs}");
    let unpacked = tempfile::tempdir().unwrap();
    let out = std::process::Command::new("tar")
        .arg("-xf")
        .arg(&bundle_at)
        .arg("-C")
        .arg(unpacked.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let in_bundle =
        std::fs::read_to_string(unpacked.path().join(format!("logs/{db}.log"))).unwrap();
    assert!(in_bundle.contains("P=(sealed)"), "{in_bundle}");
    let bundle = std::fs::read(&bundle_at).unwrap();
    assert!(
        !bundle.windows(marker.len()).any(|w| w == marker.as_bytes()),
        "the bundle holds it"
    );
    let (_, actions) = agent.get("/v1/actions");
    assert!(!actions.contains(&marker), "{actions}");
    let log = Agent::log(&n);
    assert!(!log.contains(&marker), "the log holds it: {log}");
    assert!(!event_texts(&n).contains(&marker));
}

#[test]
fn keyed_digests_turned_on_recreate_nothing_and_a_container_made_after_carries_no_guessable_digest()
{
    let n = Node::new("keyed");
    let m = n.module("app");
    let intention = |v: &str| {
        format!(
            "name = \"{m}\"\nimage = \"{IMAGE_1}\"\ncommand = [\"sh\", \"-c\", {:?}]\nenv = {{ PIN = \"{v}\" }}\n",
            idle_after("true")
        )
    };
    n.write_intention("app.toml", intention("1234"));
    n.once_ok();
    let id = n.container_id(&m);
    let plain = inspect(&id)["Config"]["Labels"].clone();
    // A guess of the env checks against a plain label, off the device.
    let guess = stead::model::names::Digest::canonical(
        "env",
        &std::collections::BTreeMap::from([("PIN", "1234")]),
    );
    assert_eq!(plain["stead.input.env"], guess.as_str());

    // Turned on: the running container is the target in keyed terms.
    let n = n.with_config("keyed_digests = true");
    let since = unix_now();
    let out = n.once_ok();
    assert!(
        out.lines()
            .any(|l| l.starts_with(m.as_str()) && l.contains("unchanged")),
        "{out}"
    );
    assert_eq!(n.container_id(&m), id);
    assert_eq!(n.creates_since(&m, since), 0);

    // Made again for a change: every digest keyed, none a guess matches.
    n.write_intention("app.toml", intention("5678"));
    n.once_ok();
    let keyed = inspect(&n.container_id(&m))["Config"]["Labels"].clone();
    assert_eq!(keyed["stead.digests"], "keyed");
    let guess = stead::model::names::Digest::canonical(
        "env",
        &std::collections::BTreeMap::from([("PIN", "5678")]),
    );
    assert_ne!(keyed["stead.input.env"], guess.as_str());
    for (k, v) in keyed.as_object().unwrap() {
        if let Some(input) = k.strip_prefix("stead.input.") {
            assert_ne!(plain.get(k), Some(v), "{input} kept its plain digest");
        }
    }
    // And the next pass keeps it.
    let since = unix_now();
    n.once_ok();
    assert_eq!(n.creates_since(&m, since), 0);
}
