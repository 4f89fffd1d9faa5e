//! Module reloads against the real engine and a real registry
//! (Distribution on loopback): a request lands the newest compatible
//! version with exactly one restart and is done only once it held; a floor
//! above the agent declines without a layer fetched; a new version that
//! keeps crashing is rolled back.

mod common;

use common::agent::Agent;
use common::intention::Module;
use common::registry::Registry;
use common::*;
use std::time::Duration;

/// An intention updated from `image`'s repository; the process exits at
/// once when its image says CRASH (an ENV of the image, not the intention).
fn sensor(name: &str, image: &str, range: &str) -> Module {
    Module::new(name, image)
        .sh(&format!(
            "[ -n \"$CRASH\" ] && exit 3; {}",
            idle_after("up")
        ))
        .set("restart", "\"always\"")
        .table(
            "update",
            &format!("range = {range:?}\nhealth_window = \"2s\""),
        )
}

fn image_of(container: &str) -> String {
    docker_ok(&["inspect", "--format", "{{.Image}}", container])
}

/// Files a reload through the API; returns its id.
fn request(agent: &Agent, n: &Node, body: &str) -> u64 {
    let (code, out) = agent.send(n, "POST", "/v1/reloads", body);
    assert_eq!(code, 202, "{out}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    v["id"].as_u64().unwrap()
}

/// Files a reload of `module` and waits for it to end; returns it.
fn reload(agent: &Agent, n: &Node, module: &str, reason: &str) -> serde_json::Value {
    let id = request(
        agent,
        n,
        &format!(r#"{{"module": "{module}", "reason": "{reason}"}}"#),
    );
    wait_end(agent, n, id)
}

/// Waits until the module's container runs this image.
fn wait_running(n: &Node, module: &str, image: &str, what: &str) {
    n.wait_for(90, what, || {
        n.container(module)
            .is_some_and(|(id, state, _)| state == "running" && image_of(&id) == image)
    });
}

/// Waits until the agent's own view of the module (its last pass) says it
/// runs `image`: what a request filed next is resolved against.
fn wait_seen(agent: &Agent, n: &Node, module: &str, image: &str, what: &str) {
    n.wait_for(90, what, || {
        let (_, body) = agent.get(&format!("/v1/modules/{module}"));
        serde_json::from_str::<serde_json::Value>(&body)
            .is_ok_and(|m| m["image_id"] == image && m["state"] == "converged")
    });
}

/// Waits for a request to end; returns it.
fn wait_end(agent: &Agent, n: &Node, id: u64) -> serde_json::Value {
    let end = std::time::Instant::now() + std::time::Duration::from_secs(90);
    loop {
        let (_, body) = agent.get(&format!("/v1/reloads/{id}"));
        let last: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
        if matches!(last["status"].as_str(), Some("done" | "failed")) {
            return last;
        }
        if std::time::Instant::now() > end {
            let (_, module) = agent.get(&format!(
                "/v1/modules/{}",
                last["module"].as_str().unwrap_or("")
            ));
            let log = std::fs::read_to_string(n.dir.path().join("agent.log")).unwrap_or_default();
            panic!("reload {id} did not end: {last:#}\nmodule: {module}\nlog:\n{log}");
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

#[test]
fn a_reload_lands_the_newest_compatible_version_with_exactly_one_restart() {
    require_engine();
    let reg = Registry::plain();
    let repo = "acme/sensor";
    let (old_id, _) = reg.push(repo, "1.4.2", &[]);
    let (new_id, _) = reg.push(repo, "1.5.0", &[]);
    reg.push(repo, "2.0.0", &[]);
    reg.push(repo, "latest", &[]);
    // Landing must pull it.
    docker_ok(&["rmi", &format!("{}/{repo}:1.5.0", reg.addr)]);
    let n = Node::new("reload").with_heartbeat("1s");
    let m = n.module("sensor");
    n.write_intention(
        "s.toml",
        sensor(&m, &format!("{}/{repo}:1.4.2", reg.addr), "^1.4"),
    );
    let agent = Agent::start(&n);
    wait_running(&n, &m, &old_id, "the module running 1.4.2");
    let since = unix_now();
    let id = request(
        &agent,
        &n,
        &format!(r#"{{"module": "{m}", "reason": "needs 1.5", "requested_by": "test"}}"#),
    );
    let r = wait_end(&agent, &n, id);
    assert_eq!(r["status"], "done", "{r:#}");
    let item = &r["items"][0];
    assert_eq!(item["running_version"], "1.4.2", "{r:#}");
    assert_eq!(item["found_version"], "1.5.0", "{r:#}");
    assert_eq!(item["target_version"], "1.5.0", "{r:#}");
    assert_eq!(item["target_image"], new_id.as_str(), "{r:#}");
    assert_eq!(item["landed"], true);
    assert_eq!(r["activation"], "restart");
    assert!(r["restart_requested_at"].is_u64(), "{r:#}");
    // What runs is the landed image, made by exactly one create.
    let c = n.container_id(&m);
    assert_eq!(image_of(&c), new_id);
    assert_eq!(n.creates_since(&m, since), 1);
    // Asked again, through the CLI, waiting: nothing to do, nothing
    // restarted.
    let since = unix_now();
    let o = n
        .stead()
        .args(["reload", &m, "--reason", "again", "--wait", "--config"])
        .arg(n.config())
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        out.contains("reload 2 requested") && out.contains("now done"),
        "{out}"
    );
    let again = wait_end(&agent, &n, 2);
    assert_eq!(again["activation"], "not-needed", "{again:#}");
    assert_eq!(n.creates_since(&m, since), 0);
    let o = n
        .stead()
        .args(["reloads", "--config"])
        .arg(n.config())
        .output()
        .unwrap();
    let list = String::from_utf8_lossy(&o.stdout);
    assert_eq!(list.lines().count(), 2, "{list}");
    assert!(
        list.contains("needs 1.5") && list.contains("done"),
        "{list}"
    );
    // The landed version stands across an agent restart.
    drop(agent);
    let out = n.once_ok();
    assert!(out.contains("unchanged"), "{out}");
    assert_eq!(n.container_id(&m), c);
}

#[test]
fn bad_requests_are_refused_and_change_nothing() {
    require_engine();
    let n = Node::new("reloadbad").with_heartbeat("1s");
    let m = n.module("plain");
    n.write_intention(
        "p.toml",
        format!(
            "name = \"{m}\"\nimage = \"{IMAGE_1}\"\ncommand = [\"sh\", \"-c\", {:?}]\n",
            idle_after("up")
        ),
    );
    let agent = Agent::start(&n);
    // The API answers before the first pass took the file in: until then
    // the module is unknown (404), which is not what is tested here.
    n.wait_for(30, "the module known", || {
        agent.get(&format!("/v1/modules/{m}")).0 == 200
    });
    for (body, code, says) in [
        (format!(r#"{{"module": "{m}"}}"#), 422, "reason"),
        (
            format!(r#"{{"module": "{m}", "reason": "x"}}"#),
            422,
            "no [update] section",
        ),
        (
            r#"{"module": "nosuch", "reason": "x"}"#.to_string(),
            404,
            "no module",
        ),
        (
            r#"{"module": "Bad Name", "reason": "x"}"#.to_string(),
            400,
            "module",
        ),
        (
            r#"{"reason": "x", "extra": 1}"#.to_string(),
            400,
            "unknown field",
        ),
        ("not json".to_string(), 400, "malformed"),
    ] {
        let (got, out) = agent.send(&n, "POST", "/v1/reloads", &body);
        assert_eq!(got, code, "{body}: {out}");
        assert!(out.contains(says), "{body}: {out}");
    }
    let (_, list) = agent.get("/v1/reloads");
    assert_eq!(list.trim().replace([' ', '\n'], ""), r#"{"reloads":[]}"#);
    // Writes need the token.
    let (code, _) = common::agent::http_send(
        &agent.addr,
        "POST",
        "/v1/reloads",
        None,
        r#"{"reason": "x"}"#,
    );
    assert_eq!(code, 401);
}

#[test]
fn a_floor_above_the_agent_declines_without_a_layer_fetched() {
    require_engine();
    let reg = Registry::plain();
    let repo = "acme/floored";
    let (old_id, _) = reg.push(repo, "1.0.0", &[]);
    let (_, _) = reg.push(repo, "1.1.0", &[("io.stead.min-agent-version", "9.0.0")]);
    docker_ok(&["rmi", &format!("{}/{repo}:1.1.0", reg.addr)]);
    let n = Node::new("reloadfloor").with_heartbeat("1s");
    let m = n.module("floored");
    n.write_intention(
        "f.toml",
        sensor(&m, &format!("{}/{repo}:1.0.0", reg.addr), "^1"),
    );
    let agent = Agent::start(&n);
    wait_running(&n, &m, &old_id, "running 1.0.0");
    let before = reg.requests().len();
    let since = unix_now();
    let r = reload(&agent, &n, &m, "try 1.1");
    assert_eq!(r["status"], "failed", "{r:#}");
    let item = &r["items"][0];
    let decision = item["decision"].as_str().unwrap();
    assert!(
        decision.starts_with("declined — 1.1.0 needs stead >= 9.0.0; running "),
        "{r:#}"
    );
    assert_eq!(item["found_floor"], "9.0.0");
    assert_eq!(item["landed"], false);
    // Only the config blob was read: no layer.
    let asked = reg.requests()[before..].to_vec();
    let blobs: Vec<&String> = asked.iter().filter(|l| l.contains("/blobs/")).collect();
    assert_eq!(blobs.len(), 1, "{asked:?}");
    assert!(
        docker(&["image", "inspect", &format!("{}/{repo}:1.1.0", reg.addr)])
            .status
            .code()
            != Some(0)
    );
    // The running version keeps serving.
    assert_eq!(image_of(&n.container_id(&m)), old_id);
    assert_eq!(n.creates_since(&m, since), 0);
}

#[test]
fn a_new_version_that_keeps_crashing_is_rolled_back_and_skipped() {
    require_engine();
    let reg = Registry::plain();
    let repo = "acme/crashy";
    let (old_id, _) = reg.push(repo, "1.0.0", &[]);
    // An image whose process exits at once.
    let (_, bad_digest) = reg.push_changed(repo, "1.1.0", &["ENV CRASH=1"]);
    let n = Node::new("reloadcrash")
        .with_heartbeat("1s")
        .with_config("settle_window = \"3s\"\ncrash_loop_restarts = 2");
    let m = n.module("crashy");
    n.write_intention(
        "c.toml",
        sensor(&m, &format!("{}/{repo}:1.0.0", reg.addr), "^1"),
    );
    let agent = Agent::start(&n);
    wait_running(&n, &m, &old_id, "running 1.0.0");
    let r = reload(&agent, &n, &m, "try 1.1");
    assert_eq!(r["status"], "failed", "{r:#}");
    let failure = r["failure"].as_str().unwrap_or_default();
    assert!(
        failure.contains("1.1.0") && failure.contains("rolled back to 1.0.0"),
        "{r:#}"
    );
    // Back on the previous image, which was kept.
    wait_running(&n, &m, &old_id, "back on 1.0.0");
    // The auto lane skips that digest from then on.
    let (_, module) = agent.get(&format!("/v1/modules/{m}"));
    let module: serde_json::Value = serde_json::from_str(&module).unwrap();
    assert_eq!(
        module["update"]["skipped"][0],
        bad_digest.as_str(),
        "{module:#}"
    );
}

#[test]
fn the_auto_lane_lands_what_is_published_and_never_picks_a_rolled_back_digest_again() {
    require_engine();
    let reg = Registry::plain();
    let repo = "acme/auto";
    let (v1, _) = reg.push(repo, "1.0.0", &[]);
    let (v11, _) = reg.push(repo, "1.1.0", &[]);
    let n = Node::new("reloadauto")
        .with_heartbeat("1s")
        .with_config("settle_window = \"3s\"\ncrash_loop_restarts = 2");
    let m = n.module("auto");
    n.write_intention(
        "a.toml",
        sensor(&m, &format!("{}/{repo}:1.0.0", reg.addr), "^1")
            .in_table("update", "lane = \"auto\"\ninterval = \"1h\""),
    );
    // A pinned module of the same repository: the lane declines it by name.
    let pinned = n.module("pinned");
    n.write_intention(
        "p.toml",
        sensor(&pinned, &format!("{}/{repo}:1.0.0", reg.addr), "^1")
            .in_table("update", "lane = \"pinned\""),
    );
    let agent = Agent::start(&n);
    // Nobody asks: the lane's first look finds 1.1.0 and files the request.
    wait_running(&n, &m, &v11, "1.1.0 running, landed by the auto lane");
    assert_ne!(v1, v11);
    n.wait_for(30, "the pin to be said", || {
        agent
            .get("/v1/events?limit=1000")
            .1
            .contains("auto-update declined: the module is pinned (1.1.0 is published)")
    });
    assert_eq!(image_of(&n.container_id(&pinned)), v1, "the pin holds");
    let first = wait_end(&agent, &n, 1);
    assert_eq!(first["status"], "done", "{first:#}");
    assert_eq!(first["requested_by"], "auto-update");
    // A broken 1.2.0: the lane (asked to look now) lands it, it keeps
    // crashing, it is rolled back to 1.1.0 and skipped.
    let (_, bad) = reg.push_changed(repo, "1.2.0", &["ENV CRASH=1"]);
    let (code, _) = agent.send(&n, "POST", "/v1/reloads/check", "");
    assert_eq!(code, 202);
    n.wait_for(30, "the lane to file for 1.2.0", || {
        agent.get("/v1/reloads/2").0 == 200
    });
    let second = wait_end(&agent, &n, 2);
    assert_eq!(second["status"], "failed", "{second:#}");
    assert!(
        second["failure"]
            .as_str()
            .unwrap_or_default()
            .contains("rolled back to 1.1.0"),
        "{second:#}"
    );
    wait_running(&n, &m, &v11, "back on 1.1.0");
    // Asked to look again: the lane looks (its last look moves on) and
    // does not pick the skipped digest.
    let update = || -> serde_json::Value {
        let (_, module) = agent.get(&format!("/v1/modules/{m}"));
        serde_json::from_str::<serde_json::Value>(&module).unwrap()["update"].clone()
    };
    assert_eq!(update()["skipped"][0], bad.as_str());
    let looked = update()["last_look"].as_u64().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let (code, _) = agent.send(&n, "POST", "/v1/reloads/check", "");
    assert_eq!(code, 202);
    n.wait_for(30, "the lane to look again", || {
        update()["last_look"].as_u64().unwrap() > looked
    });
    let (_, list) = agent.get("/v1/reloads");
    let list: serde_json::Value = serde_json::from_str(&list).unwrap();
    assert_eq!(list["reloads"].as_array().unwrap().len(), 2, "{list:#}");
}

#[test]
fn an_agent_killed_at_any_step_resumes_the_request_with_one_restart() {
    require_engine();
    let reg = Registry::plain();
    let repo = "acme/resume";
    let (v0, _) = reg.push(repo, "1.0.0", &[]);
    let n = Node::new("reloadcrashat").with_heartbeat("1s");
    let m = n.module("resume");
    n.write_intention(
        "r.toml",
        sensor(&m, &format!("{}/{repo}:1.0.0", reg.addr), "^1"),
    );
    {
        let _agent = Agent::start(&n);
        wait_running(&n, &m, &v0, "running 1.0.0");
    }
    let points = [
        "after-landing-begins",
        "after-resolve",
        "after-pull",
        "after-restart-stamp",
        "after-landed-written",
    ];
    for (k, point) in points.iter().enumerate() {
        let version = format!("1.{}.0", k + 1);
        let (want, _) = reg.push(repo, &version, &[]);
        docker_ok(&["rmi", &format!("{}/{repo}:{version}", reg.addr)]);
        let since = unix_now();
        let env = format!("STEAD_CRASH_AT=reload:{point}");
        let mut crashing = Agent::start_under(&n, &["env", &env]);
        let id = request(
            &crashing,
            &n,
            &format!(r#"{{"module": "{m}", "reason": "to {version}"}}"#),
        );
        let end = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while crashing.child.try_wait().unwrap().is_none() {
            assert!(std::time::Instant::now() < end, "{point}: never reached");
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        drop(crashing);
        let agent = Agent::start(&n);
        let r = wait_end(&agent, &n, id);
        assert_eq!(r["status"], "done", "{point}: {r:#}");
        n.wait_for(30, "the target running", || {
            n.container(&m)
                .is_some_and(|(c, state, _)| state == "running" && image_of(&c) == want)
        });
        assert_eq!(n.creates_since(&m, since), 1, "{point}: one create");
    }
}

/// A registry with `repo:1.0.0`, a fault proxy in front of it, and a node
/// whose module runs that image through the proxy, faulted requests
/// retried after `retry`.
fn behind_a_fault_proxy(
    node: &str,
    repo: &str,
    retry: &str,
) -> (Registry, common::faults::FaultProxy, Node, String, Agent) {
    require_engine();
    let reg = Registry::plain();
    let proxy = common::faults::FaultProxy::start(&reg.addr);
    reg.push(repo, "1.0.0", &[]);
    // The module names its image through the proxy.
    let image = format!("{}/{repo}:1.0.0", proxy.addr);
    docker_ok(&["pull", &image]);
    let n = Node::new(node)
        .with_heartbeat("1s")
        .with_config(&format!("reload_retry_interval = \"{retry}\""));
    let m = n.module(repo.rsplit('/').next().unwrap_or(repo));
    n.write_intention("f.toml", sensor(&m, &image, "^1"));
    let agent = Agent::start(&n);
    n.wait_for(60, "running 1.0.0", || {
        n.container(&m)
            .is_some_and(|(_, state, _)| state == "running")
    });
    (reg, proxy, n, m, agent)
}

#[test]
fn registry_faults_end_as_the_classifier_says_and_faulted_requests_land_once_cleared() {
    use common::faults::Fault;
    let (reg, proxy, n, m, agent) = behind_a_fault_proxy("reloadfaults", "acme/faulty", "1s");
    let repo = "acme/faulty";
    // (method, path part, fault, ends done after a fault?, or failed saying)
    let cases: Vec<(&str, &str, Fault, Result<(), &str>)> = vec![
        ("HEAD", "/manifests/", Fault::Status(503, None), Ok(())),
        ("GET", "/tags/list", Fault::Status(429, Some(2)), Ok(())),
        ("GET", "/blobs/", Fault::Status(502, None), Ok(())),
        (
            "GET",
            "/manifests/sha256:",
            Fault::Status(504, None),
            Ok(()),
        ),
        ("GET", "/tags/list", Fault::Reset, Ok(())),
        // No answer: the client's 30 s limit ends the call.
        (
            "GET",
            "/tags/list",
            Fault::Hang(std::time::Duration::from_secs(40)),
            Ok(()),
        ),
        ("HEAD", "/manifests/", Fault::Status(404, None), Err("404")),
        (
            "GET",
            "/tags/list",
            Fault::Status(403, None),
            Err("credentials refused"),
        ),
        (
            "GET",
            "/blobs/",
            Fault::Tamper,
            Err("does not match its digest"),
        ),
    ];
    for (k, (method, part, fault, want)) in cases.into_iter().enumerate() {
        let version = format!("1.{}.0", k + 1);
        reg.push(repo, &version, &[]);
        proxy.clear();
        proxy.inject(method, part, fault.clone(), 1);
        let started = std::time::Instant::now();
        let id = request(
            &agent,
            &n,
            &format!(r#"{{"module": "{m}", "reason": "{version}"}}"#),
        );
        let r = wait_end(&agent, &n, id);
        let case = format!("{method} {part} {fault:?}");
        match want {
            Ok(()) => {
                assert_eq!(r["status"], "done", "{case}: {r:#}");
                assert!(
                    r["attempt"].as_u64().unwrap() >= 1,
                    "{case}: retried: {r:#}"
                );
                let log = r["log"].to_string();
                assert!(log.contains("now faulted"), "{case}: {r:#}");
                assert_eq!(r["items"][0]["target_version"], version.as_str(), "{case}");
                if let Fault::Status(429, Some(secs)) = fault {
                    assert!(
                        started.elapsed() >= std::time::Duration::from_secs(secs),
                        "{case}: Retry-After honoured"
                    );
                }
            }
            Err(says) => {
                assert_eq!(r["status"], "failed", "{case}: {r:#}");
                assert_eq!(r["attempt"], 0, "{case}: never retried");
                let failure = r["failure"].as_str().unwrap_or_default();
                assert!(failure.contains(says), "{case}: {failure}");
            }
        }
    }
}

#[test]
fn a_reload_from_a_registry_with_tls_and_credentials_pulls_with_them() {
    use common::registry::Tls;
    require_engine();
    let plain = Registry::plain();
    let repo = "acme/private";
    plain.push(repo, "1.0.0", &[]);
    let (want, _) = plain.push(repo, "1.1.0", &[]);
    let tls = Tls::new();
    let reg = Registry::tls_with_auth(&tls, &plain.storage, "ci", "s3cret");
    let n = Node::new("reloadtls").with_heartbeat("1s");
    let auth = n.dir.path().join("registry-auth.json");
    std::fs::write(
        &auth,
        format!(
            r#"{{"auths": {{"{}": {{"username": "ci", "password": "s3cret"}}}}}}"#,
            reg.addr
        ),
    )
    .unwrap();
    let n = n.with_config(&format!(
        "registry_auth = {:?}\nregistry_ca = {:?}",
        auth.display().to_string(),
        tls.ca.display().to_string()
    ));
    let m = n.module("private");
    let image = format!("{}/{repo}:1.0.0", reg.addr);
    n.write_intention("p.toml", sensor(&m, &image, "^1"));
    // The agent pulls 1.0.0 itself, with the credentials.
    let agent = Agent::start(&n);
    n.wait_for(90, "running 1.0.0, pulled with the credentials", || {
        n.container(&m)
            .is_some_and(|(_, state, _)| state == "running")
    });
    let r = reload(&agent, &n, &m, "1.1");
    assert_eq!(r["status"], "done", "{r:#}");
    assert_eq!(image_of(&n.container_id(&m)), want);
    // The registry authorised the agent's own fetch of 1.1.0's config
    // (its one layer was here): the credentials reached it (without them
    // the first pull is refused, 401), over TLS with the CA of the config.
    let log = std::fs::read_to_string(&reg.log).unwrap();
    assert!(
        log.lines().any(|l| l.contains("msg=\"authorized request\"")
            && l.contains(&format!("/blobs/{want}"))
            && (l.contains("useragent=stead/") || l.contains("useragent=\"stead/"))),
        "{log}"
    );
}

#[test]
fn a_reload_of_a_tag_that_names_an_image_index_lands_this_platform_s_image() {
    require_engine();
    let reg = Registry::plain();
    let repo = "acme/indexed";
    let (v1, _) = reg.push(repo, "1.0.0", &[]);
    // 1.1.0 exists only as an index over an image pushed under another tag.
    let (v11, manifest) = reg.push(repo, "build-7", &[]);
    docker_ok(&["rmi", &format!("{}/{repo}:build-7", reg.addr)]);
    let arch = stead::registry::client::Platform::this().architecture;
    reg.push_index(repo, "1.1.0", &manifest, &arch);
    let n = Node::new("reloadindex").with_heartbeat("1s");
    let m = n.module("indexed");
    n.write_intention(
        "i.toml",
        sensor(&m, &format!("{}/{repo}:1.0.0", reg.addr), "^1"),
    );
    let agent = Agent::start(&n);
    wait_running(&n, &m, &v1, "running 1.0.0");
    let r = reload(&agent, &n, &m, "to the index");
    assert_eq!(r["status"], "done", "{r:#}");
    assert_eq!(r["items"][0]["target_version"], "1.1.0");
    assert_eq!(r["items"][0]["target_image"], v11.as_str());
    wait_running(&n, &m, &v11, "running the index's image");
}

#[test]
fn an_index_without_this_platform_fails_the_request_naming_the_candidate_version() {
    require_engine();
    let reg = Registry::plain();
    let repo = "acme/otherarch";
    let (v1, _) = reg.push(repo, "1.0.0", &[]);
    let (_, manifest) = reg.push(repo, "build-8", &[]);
    // 1.1.0 is an index for another machine only.
    reg.push_index(repo, "1.1.0", &manifest, "s390x");
    let n = Node::new("reloadnoplat").with_heartbeat("1s");
    let m = n.module("otherarch");
    n.write_intention(
        "i.toml",
        sensor(&m, &format!("{}/{repo}:1.0.0", reg.addr), "^1"),
    );
    let agent = Agent::start(&n);
    wait_running(&n, &m, &v1, "running 1.0.0");
    let since = unix_now();
    let r = reload(&agent, &n, &m, "to an index for another machine");
    assert_eq!(r["status"], "failed", "{r:#}");
    let failure = r["items"][0]["failure"].as_str().unwrap_or_default();
    let platform = stead::registry::client::Platform::this().to_string();
    for says in [
        format!("{repo}:1.1.0 has no image for {platform}"),
        "linux/s390x".to_string(),
    ] {
        assert!(failure.contains(&says), "{says:?} in {failure:?}");
    }
    assert!(!failure.contains(&format!("{repo}:1.0.0")), "{failure}");
    // What runs was not touched.
    assert_eq!(image_of(&n.container_id(&m)), v1);
    assert_eq!(n.creates_since(&m, since), 0);
}

#[test]
fn a_slow_registry_holds_only_its_own_requests() {
    use common::faults::Fault;
    require_engine();
    let (slow_reg, fast_reg) = (Registry::plain(), Registry::plain());
    let proxy = common::faults::FaultProxy::start(&slow_reg.addr);
    let (slow_old, _) = slow_reg.push("acme/slow", "1.0.0", &[]);
    let (slow_new, _) = slow_reg.push("acme/slow", "1.1.0", &[]);
    let (fast_old, _) = fast_reg.push("acme/fast", "1.0.0", &[]);
    let (fast_new, _) = fast_reg.push("acme/fast", "1.1.0", &[]);
    let slow_image = format!("{}/acme/slow:1.0.0", proxy.addr);
    docker_ok(&["pull", &slow_image]);
    let n = Node::new("reloadlanes").with_heartbeat("1s");
    let (ms, mf) = (n.module("slow"), n.module("fast"));
    n.write_intention("s.toml", sensor(&ms, &slow_image, "^1"));
    let fast_image = format!("{}/acme/fast:1.0.0", fast_reg.addr);
    n.write_intention("f.toml", sensor(&mf, &fast_image, "^1"));
    let agent = Agent::start(&n);
    wait_running(&n, &ms, &slow_old, "the slow one running 1.0.0");
    wait_running(&n, &mf, &fast_old, "the fast one running 1.0.0");
    // From now on every request to the slow registry waits 6 s first.
    for method in ["GET", "HEAD"] {
        proxy.inject(method, "/v2/", Fault::Delay(Duration::from_secs(6)), 1000);
    }
    let body = |m: &str| format!(r#"{{"module": "{m}", "reason": "lanes"}}"#);
    let slow = request(&agent, &n, &body(&ms));
    n.wait_for(30, "the slow registry asked", || {
        proxy
            .seen
            .lock()
            .unwrap()
            .iter()
            .any(|l| l.contains("Delay"))
    });
    let fast = request(&agent, &n, &body(&mf));
    let f = wait_end(&agent, &n, fast);
    assert_eq!(f["status"], "done", "{f:#}");
    assert_eq!(image_of(&n.container_id(&mf)), fast_new);
    // Meanwhile the slow one is still asking its registry.
    let (_, s) = agent.get(&format!("/v1/reloads/{slow}"));
    let s: serde_json::Value = serde_json::from_str(&s).unwrap();
    assert!(
        matches!(s["status"].as_str(), Some("requested" | "landing")),
        "{s:#}"
    );
    // Once its registry is quick again it lands too.
    proxy.clear();
    let s = wait_end(&agent, &n, slow);
    assert_eq!(s["status"], "done", "{s:#}");
    wait_running(&n, &ms, &slow_new, "the slow one running 1.1.0");
}

#[test]
fn one_request_reloads_every_module_with_an_update_section() {
    require_engine();
    let reg = Registry::plain();
    let n = Node::new("reloadall").with_heartbeat("1s");
    let mut modules = Vec::new();
    for name in ["a", "b"] {
        let repo = format!("acme/all-{name}");
        let (old, _) = reg.push(&repo, "2.0.0", &[]);
        let (new, _) = reg.push(&repo, "2.3.1", &[]);
        let m = n.module(name);
        n.write_intention(
            &format!("{name}.toml"),
            sensor(&m, &format!("{}/{repo}:2.0.0", reg.addr), "^2"),
        );
        modules.push((m, old, new));
    }
    // A module without an [update] section is not part of it.
    let plain = n.module("plain");
    n.write_intention(
        "plain.toml",
        format!(
            "name = \"{plain}\"\nimage = \"{IMAGE_1}\"\ncommand = [\"sh\", \"-c\", {:?}]\n",
            idle_after("up")
        ),
    );
    let agent = Agent::start(&n);
    for (m, old, _) in &modules {
        wait_running(&n, m, old, "running 2.0.0");
    }
    let plain_id = n.container_id(&plain);
    let since = unix_now();
    let r = wait_end(
        &agent,
        &n,
        request(&agent, &n, r#"{"module": null, "reason": "fleet refresh"}"#),
    );
    assert_eq!(r["status"], "done", "{r:#}");
    assert_eq!(r["items"].as_array().unwrap().len(), 2, "{r:#}");
    for (m, _, new) in &modules {
        wait_running(&n, m, new, "running 2.3.1");
        assert_eq!(n.creates_since(m, since), 1, "{m}: one restart");
    }
    assert_eq!(n.container_id(&plain), plain_id, "untouched");
}

#[test]
fn with_a_health_check_done_waits_for_healthy_and_unhealthy_rolls_back() {
    require_engine();
    let reg = Registry::plain();
    let repo = "acme/checked";
    let check = "HEALTHCHECK --interval=1s --timeout=2s --retries=2 CMD [ -z \"$SICK\" ]";
    let (v1, _) = reg.push(repo, "1.0.0", &[]);
    let (healthy, _) = reg.push_changed(repo, "1.1.0", &[check]);
    let n = Node::new("reloadhealth").with_heartbeat("1s");
    let m = n.module("checked");
    n.write_intention(
        "c.toml",
        sensor(&m, &format!("{}/{repo}:1.0.0", reg.addr), "^1"),
    );
    let agent = Agent::start(&n);
    wait_running(&n, &m, &v1, "running 1.0.0");
    let r = reload(&agent, &n, &m, "to 1.1.0");
    assert_eq!(r["status"], "done", "{r:#}");
    assert_eq!(r["items"][0]["healthcheck"], true, "{r:#}");
    let c = n.container_id(&m);
    assert_eq!(image_of(&c), healthy);
    let health = docker_ok(&["inspect", "--format", "{{.State.Health.Status}}", &c]);
    assert_eq!(health, "healthy", "done only once healthy");
    // A version that runs but turns unhealthy: rolled back.
    let (_, _) = reg.push_changed(repo, "1.2.0", &[check, "ENV SICK=1"]);
    let r = reload(&agent, &n, &m, "to 1.2.0");
    assert_eq!(r["status"], "failed", "{r:#}");
    let failure = r["failure"].as_str().unwrap_or_default();
    assert!(
        failure.contains("1.2.0 turned unhealthy; rolled back to 1.1.0"),
        "{r:#}"
    );
    wait_running(&n, &m, &healthy, "back on 1.1.0");
}

#[test]
fn a_request_this_agent_did_not_write_is_refused_and_nothing_lands() {
    require_engine();
    let reg = Registry::plain();
    let repo = "acme/forged";
    let (v1, _) = reg.push(repo, "1.0.0", &[]);
    reg.push(repo, "1.1.0", &[]);
    let n = Node::new("reloadforged").with_heartbeat("1s");
    let m = n.module("forged");
    n.write_intention(
        "f.toml",
        sensor(&m, &format!("{}/{repo}:1.0.0", reg.addr), "^1"),
    );
    {
        let _agent = Agent::start(&n);
        wait_running(&n, &m, &v1, "running 1.0.0");
    }
    // Written into the store by something other than this agent's filing.
    {
        let store = stead::store::Store::open(&n.data().join("stead.redb")).unwrap();
        let ours = store.agent_id().unwrap();
        let module = stead::model::names::ModuleName::try_from(m.as_str()).unwrap();
        store
            .file_reload(|id| {
                stead::model::reload::Request::new(id, ours ^ 1, Some(&module), "forged", "x", 0)
            })
            .unwrap()
            .unwrap();
    }
    let agent = Agent::start(&n);
    n.wait_for(30, "the refusal to be said", || {
        std::fs::read_to_string(n.dir.path().join("agent.log"))
            .unwrap_or_default()
            .contains("request 1 was not written by this agent; refused, nothing landed")
    });
    let (_, r) = agent.get("/v1/reloads/1");
    let r: serde_json::Value = serde_json::from_str(&r).unwrap();
    assert_eq!(r["status"], "requested", "{r:#}");
    assert_eq!(r["items"].as_array().unwrap().len(), 0, "{r:#}");
    assert_eq!(image_of(&n.container_id(&m)), v1);
}

#[test]
fn a_landed_version_the_engine_cannot_start_is_rolled_back_as_failed_once() {
    require_engine();
    let reg = Registry::plain();
    let repo = "acme/unstartable";
    let (old_id, _) = reg.push(repo, "1.0.0", &[]);
    // An image whose container the engine refuses to start: its user does
    // not exist.
    let (_, bad_digest) = reg.push_changed(repo, "1.1.0", &["USER nosuchuser"]);
    let n = Node::new("reloadnostart")
        .with_heartbeat("1s")
        .with_config("reload_retry_interval = \"1s\"");
    let m = n.module("unstartable");
    n.write_intention(
        "u.toml",
        sensor(&m, &format!("{}/{repo}:1.0.0", reg.addr), "^1"),
    );
    let agent = Agent::start(&n);
    wait_running(&n, &m, &old_id, "running 1.0.0");
    let since = unix_now();
    let r = reload(&agent, &n, &m, "try 1.1");
    assert_eq!(r["status"], "failed", "{r:#}");
    assert_eq!(r["attempt"], 0, "decided, never retried: {r:#}");
    let failure = r["failure"].as_str().unwrap_or_default();
    assert!(
        failure.contains("1.1.0 could not start")
            && failure.contains("nosuchuser")
            && failure.contains("rolled back to 1.0.0"),
        "{r:#}"
    );
    // The previous version serves, and nothing is tried again: one create
    // of the new version, the old container stopped once.
    wait_running(&n, &m, &old_id, "back on 1.0.0");
    std::thread::sleep(std::time::Duration::from_secs(8));
    assert_eq!(
        n.creates_since(&m, since),
        1,
        "{:?}",
        n.events_since(&m, since)
    );
    let stops = n
        .events_since(&m, since)
        .iter()
        .filter(|a| *a == "stop")
        .count();
    assert!(stops <= 1, "{:?}", n.events_since(&m, since));
    // Counted by status.
    let (_, metrics) = agent.get("/metrics");
    assert!(
        metrics.contains("stead_reloads{status=\"failed\"} 1")
            && metrics.contains("stead_reloads{status=\"activating\"} 0"),
        "{metrics}"
    );
    let (_, module) = agent.get(&format!("/v1/modules/{m}"));
    let module: serde_json::Value = serde_json::from_str(&module).unwrap();
    assert!(
        matches!(
            module["state"].as_str(),
            Some("starting" | "settling" | "converged")
        ),
        "{module:#}"
    );
    assert_eq!(
        module["update"]["skipped"][0],
        bad_digest.as_str(),
        "{module:#}"
    );
}

/// Waits until a request reaches `status`; returns it.
fn wait_status(agent: &Agent, n: &Node, id: u64, status: &str) -> serde_json::Value {
    let end = std::time::Instant::now() + std::time::Duration::from_secs(90);
    loop {
        let last: serde_json::Value =
            serde_json::from_str(&agent.get(&format!("/v1/reloads/{id}")).1).unwrap_or_default();
        if last["status"] == status {
            return last;
        }
        assert!(
            std::time::Instant::now() < end,
            "timed out after 90s waiting for reload {id} {status}; it reads:\n{last:#}\n{}",
            n.agent_log_tail(20)
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

#[test]
fn an_edit_of_the_image_supersedes_an_open_request_and_a_cancel_puts_back_what_ran() {
    require_engine();
    let reg = Registry::plain();
    let repo = "acme/edited";
    let (v100, _) = reg.push(repo, "1.0.0", &[]);
    let (v101, _) = reg.push(repo, "1.0.1", &[]);
    let (v110, _) = reg.push(repo, "1.1.0", &[]);
    // Converged (what `wait_seen` waits for) once up for a second, not the
    // default 30.
    let n = Node::new("reloadedit")
        .with_heartbeat("1s")
        .with_config("settle_window = \"1s\"");
    let m = n.module("edited");
    let intention = |tag: &str| {
        // Held for an hour: the request stays activating while the test acts.
        sensor(&m, &format!("{}/{repo}:{tag}", reg.addr), "^1")
            .toml()
            .replace("health_window = \"2s\"", "health_window = \"1h\"")
    };
    n.write_intention("e.toml", intention("1.0.0"));
    let agent = Agent::start(&n);
    wait_running(&n, &m, &v100, "running 1.0.0");

    // A cancel while activating: the module goes back to what it ran.
    let id = request(
        &agent,
        &n,
        &format!(r#"{{"module": "{m}", "reason": "try 1.1"}}"#),
    );
    wait_status(&agent, &n, id, "activating");
    wait_running(&n, &m, &v110, "1.1.0 landed");
    let o = n
        .stead()
        .args(["reload", "--cancel", &id.to_string(), "--config"])
        .arg(n.config())
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(out.contains(&format!("reload {id}: cancelled by")), "{out}");
    let r = wait_status(&agent, &n, id, "failed");
    assert!(
        r["failure"]
            .as_str()
            .unwrap_or_default()
            .starts_with("cancelled by"),
        "{r:#}"
    );
    wait_running(&n, &m, &v100, "back on 1.0.0 after the cancel");
    wait_seen(&agent, &n, &m, &v100, "the agent to see 1.0.0 back");
    // An ended request cannot be cancelled again; an unknown one is not found.
    assert_eq!(
        agent.send(&n, "DELETE", &format!("/v1/reloads/{id}"), "").0,
        409
    );
    assert_eq!(agent.send(&n, "DELETE", "/v1/reloads/999", "").0, 404);
    assert_eq!(agent.get(&format!("/v1/reloads/{id}")).0, 200);

    // An edit of the image while a request is activating supersedes it:
    // the edit is what runs, never overwritten by the request.
    let id = request(
        &agent,
        &n,
        &format!(r#"{{"module": "{m}", "reason": "again"}}"#),
    );
    wait_status(&agent, &n, id, "activating");
    wait_running(&n, &m, &v110, "1.1.0 landed again");
    n.write_intention("e.toml", intention("1.0.1"));
    let r = wait_status(&agent, &n, id, "failed");
    let failure = r["failure"].as_str().unwrap_or_default();
    assert!(
        failure.contains("superseded: its image was edited") && failure.contains(":1.0.1"),
        "{r:#}"
    );
    wait_running(&n, &m, &v101, "the edited image running");
    std::thread::sleep(std::time::Duration::from_secs(3));
    assert_eq!(image_of(&n.container_id(&m)), v101, "the edit stands");
}

#[test]
fn wait_returns_on_faulted_one_request_per_module_and_reserved_requesters_are_refused() {
    use common::faults::Fault;
    let (_reg, proxy, n, m, agent) = behind_a_fault_proxy("reloadwait", "acme/waited", "1h");
    proxy.inject("GET", "/tags/list", Fault::Status(503, None), 1000);
    // --wait returns on faulted, with the reason and its own exit code.
    let o = n
        .stead()
        .args(["reload", &m, "--reason", "try", "--wait", "--config"])
        .arg(n.config())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(
        err.contains("reload 1 faulted") && err.contains("503"),
        "{err}"
    );
    // One open request per module: another is refused, naming the open one.
    let (code, body) = agent.send(
        &n,
        "POST",
        "/v1/reloads",
        &format!(r#"{{"module": "{m}", "reason": "again"}}"#),
    );
    assert_eq!(code, 409, "{body}");
    assert!(body.contains("open reload request 1"), "{body}");
    let (code, body) = agent.send(&n, "POST", "/v1/reloads", r#"{"reason": "every module"}"#);
    assert_eq!(code, 409, "{body}");
    // The agent's own requester name is refused from the API.
    assert_eq!(agent.send(&n, "DELETE", "/v1/reloads/1", "").0, 200);
    let (code, body) = agent.send(
        &n,
        "POST",
        "/v1/reloads",
        &format!(r#"{{"module": "{m}", "reason": "x", "requested_by": "auto-update"}}"#),
    );
    assert_eq!(code, 422, "{body}");
    assert!(body.contains("requested_by"), "{body}");
    // Once the open one ended, a new one is taken.
    let (code, body) = agent.send(
        &n,
        "POST",
        "/v1/reloads",
        &format!(r#"{{"module": "{m}", "reason": "now"}}"#),
    );
    assert_eq!(code, 202, "{body}");
    let (_, list) = agent.get("/v1/reloads");
    assert!(!list.contains("\"auto-update\""), "{list}");
}

#[test]
fn the_auto_lane_does_not_refile_a_failed_digest_until_its_range_changes_and_floors_are_semver() {
    require_engine();
    let reg = Registry::plain();
    let repo = "acme/floorlane";
    let (v1, _) = reg.push(repo, "1.0.0", &[]);
    reg.push(repo, "1.1.0", &[("io.stead.min-agent-version", "9.0.0")]);
    let n = Node::new("reloadfloorlane").with_heartbeat("1s");
    let m = n.module("floorlane");
    let intention = |range: &str| {
        sensor(&m, &format!("{}/{repo}:1.0.0", reg.addr), range)
            .in_table("update", "lane = \"auto\"\ninterval = \"1h\"")
    };
    n.write_intention("f.toml", intention("^1"));
    let agent = Agent::start(&n);
    wait_running(&n, &m, &v1, "running 1.0.0");
    // The lane's first look files for 1.1.0, which is declined by its floor.
    n.wait_for(30, "the lane to file", || {
        agent.get("/v1/reloads/1").0 == 200
    });
    let first = wait_end(&agent, &n, 1);
    assert_eq!(first["status"], "failed", "{first:#}");
    let update = || -> serde_json::Value {
        let (_, module) = agent.get(&format!("/v1/modules/{m}"));
        serde_json::from_str::<serde_json::Value>(&module).unwrap()["update"].clone()
    };
    n.wait_for(10, "the failed digest to be kept", || {
        update()["failed"][0]["version"] == "1.1.0"
    });
    assert_eq!(update()["failed"][0]["range"], "^1");
    // Asked to look again, the lane looks and files nothing.
    let look_again = || {
        let looked = update()["last_look"].as_u64().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(1100));
        assert_eq!(agent.send(&n, "POST", "/v1/reloads/check", "").0, 202);
        n.wait_for(30, "the lane to look again", || {
            update()["last_look"].as_u64().unwrap() > looked
        });
    };
    look_again();
    assert_eq!(agent.get("/v1/reloads/2").0, 404, "not filed again");
    // Another range: tried again (and declined again).
    n.write_intention("f.toml", intention("^1.0"));
    n.wait_for(30, "the new range to be taken", || {
        agent.get(&format!("/v1/intentions/{m}")).1.contains("^1.0")
    });
    look_again();
    n.wait_for(30, "the lane to file again", || {
        agent.get("/v1/reloads/2").0 == 200
    });
    assert_eq!(wait_end(&agent, &n, 2)["status"], "failed");
    // A floor with build metadata equal to this agent's version is met;
    // an empty floor is ignored, with an event.
    let agent_version = env!("CARGO_PKG_VERSION");
    let (v12, _) = reg.push(
        repo,
        "1.2.0",
        &[(
            "io.stead.min-agent-version",
            &format!("{agent_version}+build.7"),
        )],
    );
    look_again();
    n.wait_for(30, "the lane to file for 1.2.0", || {
        agent.get("/v1/reloads/3").0 == 200
    });
    let third = wait_end(&agent, &n, 3);
    assert_eq!(third["status"], "done", "{third:#}");
    wait_running(&n, &m, &v12, "1.2.0 landed");
    let (v13, _) = reg.push(repo, "1.3.0", &[("io.stead.min-agent-version", "\"\"")]);
    look_again();
    n.wait_for(30, "the lane to file for 1.3.0", || {
        agent.get("/v1/reloads/4").0 == 200
    });
    let fourth = wait_end(&agent, &n, 4);
    assert_eq!(fourth["status"], "done", "{fourth:#}");
    wait_running(&n, &m, &v13, "1.3.0 landed");
    assert!(
        agent
            .get("/v1/events?limit=1000")
            .1
            .contains("declares an empty io.stead.min-agent-version; ignored"),
    );
}

#[test]
fn a_huge_floor_label_is_clipped_before_it_reaches_the_store() {
    require_engine();
    let reg = Registry::plain();
    let repo = "acme/hugefloor";
    let (v1, _) = reg.push(repo, "1.0.0", &[]);
    let huge = "9".repeat(60_000);
    reg.push(repo, "1.1.0", &[("io.stead.min-agent-version", &huge)]);
    let n = Node::new("reloadhugefloor").with_heartbeat("1s");
    let m = n.module("hugefloor");
    n.write_intention(
        "h.toml",
        sensor(&m, &format!("{}/{repo}:1.0.0", reg.addr), "^1"),
    );
    let agent = Agent::start(&n);
    wait_running(&n, &m, &v1, "running 1.0.0");
    let r = reload(&agent, &n, &m, "try 1.1");
    assert_eq!(r["status"], "failed", "{r:#}");
    let (_, body) = agent.get("/v1/reloads/1");
    assert!(body.len() < 16 * 1024, "{} bytes", body.len());
    assert!(body.contains("bytes cut"), "{body}");
}
