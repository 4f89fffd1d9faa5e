//! How long from a settings change to the new container running, against
//! the bare engine creating and starting the same container, measured in
//! one run on this machine. Needs a Docker Engine and the test image
//! (scripts/bench.sh sets both up). Prints medians; asserts nothing about
//! time.
//!
//! - baseline: the engine's create + start of the module's container spec,
//!   through the same client stead uses, until the start call returns.
//! - PATCH → running: a `PATCH /v1/intentions/{m}/settings` to the running
//!   agent, until the engine lists a running container carrying the new
//!   digest under the module's name (stead creates the new one beside the
//!   old, stops the old, starts the new and gives it the module's name).
//! - file → running: the same, triggered by rewriting the intention file.
//! - the gap: for each change, how long no container of the module runs
//!   (from the engine's events: the old one's `die` to the new one's
//!   `start`; an overlap counts as 0), for stead's default stop-first order,
//!   for `update_order = "start-first"`, for `docker-compose up -d` doing the
//!   same change (Compose 1.29, when installed), and the engine's own floor
//!   for a stop-first swap (a new container already created: stop the old,
//!   start the new).
//! - stop-first's own floor: the engine's create + stop of the old + start
//!   of the new, against which a stop-first change is measured (its path
//!   holds all three whatever the order).
//! - drift repaired: `docker rm -f` of the module's container → a new one
//!   running (the agent follows the engine's events; the heartbeat is ten
//!   minutes).

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use hyper::Method;
use serde_json::json;
use stead::cli::client::Client;
use stead::engine::Engine;
use stead::engine::docker::DockerEngine;

const IMAGE: &str = "stead-test/busybox:1";
fn rounds() -> usize {
    std::env::var("STEAD_BENCH_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(15)
}

fn median(v: &[Duration]) -> Duration {
    let mut v = v.to_vec();
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn intention(name: &str, value: u64) -> String {
    format!(
        "name = \"{name}\"\nimage = \"{IMAGE}\"\ncommand = [\"sh\", \"-c\", \"trap 'exit 0' TERM; sleep 1000000 & wait\"]\nrestart = \"unless-stopped\"\n[config]\npath = \"/etc/b/config.json\"\nformat = \"json\"\ndefaults = {{ n = {value} }}\n"
    )
}

fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// The engine's container events matching `filter` since `since`:
/// (action, container id, time in nanoseconds).
fn events(filter: &str, since: f64) -> Vec<(String, String, u128)> {
    let out = Command::new("docker")
        .args([
            "events",
            "--since",
            &format!("{since:.3}"),
            "--until",
            &format!("{:.3}", unix_now() + 0.2),
        ])
        .args(["--filter", "type=container", "--filter", filter])
        .args(["--format", "{{.Action}} {{.Actor.ID}} {{.TimeNano}}"])
        .output()
        .expect("docker events");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            Some((
                f.next()?.to_string(),
                f.next()?.to_string(),
                f.next()?.parse().ok()?,
            ))
        })
        .collect()
}

/// From `since` (seconds since the epoch) to `new`'s start event.
fn to_start(evs: &[(String, String, u128)], new: &str, since: f64) -> Duration {
    let started = evs
        .iter()
        .find(|(a, i, _)| a == "start" && i.starts_with(new))
        .map(|(_, _, t)| *t)
        .unwrap_or_else(|| panic!("no start of {new} in {evs:?}"));
    Duration::from_nanos((started as f64 - since * 1e9).max(0.0) as u64)
}

/// How long no container ran between `old` dying and `new` starting (an
/// overlap is zero).
fn gap(evs: &[(String, String, u128)], old: &str, new: &str) -> Duration {
    let at = |action: &str, id: &str| {
        evs.iter()
            .find(|(a, i, _)| a == action && i.starts_with(id))
            .map(|(_, _, t)| *t)
            .unwrap_or_else(|| panic!("no {action} of {id} in {evs:?}"))
    };
    let (died, started) = (at("die", old), at("start", new));
    Duration::from_nanos(started.saturating_sub(died) as u64)
}

/// When `new` took the module's name (its last `rename` event), from
/// `since`: the engine's own clock for "running under the name", which a
/// poll every few milliseconds can only overshoot.
fn to_named(evs: &[(String, String, u128)], new: &str, since: f64) -> Duration {
    let named = evs
        .iter()
        .filter(|(a, i, _)| a == "rename" && i.starts_with(new))
        .map(|(_, _, t)| *t)
        .max()
        .unwrap_or_else(|| panic!("no rename of {new} in {evs:?}"));
    Duration::from_nanos((named as f64 - since * 1e9).max(0.0) as u64)
}

/// Whether the container is at the module's own name (not a successor
/// under way, not an old one moved aside).
fn at_its_name(c: &stead::engine::Observed, module: &str) -> bool {
    let name = format!("stead-{module}");
    c.names.contains(&name)
}

/// The id of the running container of `module` on `node`, at its name.
async fn running(engine: &DockerEngine, node: &str, module: &str) -> String {
    loop {
        let list = engine.list_containers().await.expect("list");
        if let Some(c) = list.iter().find(|c| {
            c.labels.managed_by.as_deref() == Some(node)
                && c.labels.module.as_deref() == Some(module)
                && c.state == stead::engine::ContainerState::Running
                && at_its_name(c, module)
        }) {
            return c.id.clone();
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

struct Agent(Child);
impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Waits until the module's running container carries a digest other than
/// `old`; returns it.
async fn wait_new_running(engine: &DockerEngine, node: &str, module: &str, old: &str) -> String {
    loop {
        let list = engine.list_containers().await.expect("list");
        let found = list.iter().find(|c| {
            c.labels.managed_by.as_deref() == Some(node)
                && c.labels.module.as_deref() == Some(module)
                && c.state == stead::engine::ContainerState::Running
                && c.labels.digest.as_ref().is_some_and(|d| d.as_str() != old)
                // Done when the new one has the module's name.
                && at_its_name(c, module)
        });
        if let Some(d) = found.and_then(|c| c.labels.digest.as_ref()) {
            return d.to_string();
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// The module's container spec as stead makes it (its composed file
/// written under `dir`), for the bare engine to run, labelled as node
/// `node`'s.
async fn bare_spec(
    engine: &DockerEngine,
    module: &str,
    node: &str,
    dir: &std::path::Path,
) -> stead::model::spec::ContainerSpec {
    let i = stead::model::intention::Intention::parse(
        &intention(module, 0),
        stead::model::intention::DocFormat::Toml,
        "bench",
    )
    .unwrap();
    let inputs = stead::reconcile::resolve::resolve_inputs(
        &i,
        &mut stead::host::digest::FileDigester::new(),
        None,
    )
    .unwrap();
    let images = stead::engine::image::Images::new(engine.list_images().await.unwrap());
    let img =
        stead::model::spec::image_digest(&images.find(IMAGE).expect("the test image").id).unwrap();
    let d = stead::model::spec::desired(
        &i,
        inputs,
        &img,
        &stead::model::names::NodeId::try_from(node).unwrap(),
        dir,
        None,
    )
    .unwrap();
    for (p, f) in &d.files {
        stead::host::files::write_once(p, &f.content).unwrap();
    }
    d.spec
}

/// One round of the bare engine, paired with a round of stead's: a
/// create and start (the baseline), then that container replaced the way
/// stead's order does it, to running under its name (the order's own
/// floor). Start-first: create and start the new one, move the old aside,
/// rename the new. Stop-first: create the new one, stop the old, start the
/// new, and the same renames.
async fn paired(
    engine: &DockerEngine,
    spec: &stead::model::spec::ContainerSpec,
    k: usize,
    start_first: bool,
) -> (Duration, Duration) {
    let name = format!("stead-pair-{}-{k}", std::process::id());
    let mut s = spec.clone();
    s.name = name.clone();
    let t = Instant::now();
    let old = engine.create(&s).await.unwrap();
    engine.start(&old).await.unwrap();
    let base = t.elapsed();
    s.name = format!("{name}.next");
    let t = Instant::now();
    let new = engine.create(&s).await.unwrap();
    if !start_first {
        engine.stop(&old).await.unwrap();
    }
    engine.start(&new).await.unwrap();
    engine.rename(&old, &format!("{name}.old")).await.unwrap();
    engine.rename(&new, &name).await.unwrap();
    let floor = t.elapsed();
    engine.remove(&old).await.unwrap();
    engine.remove(&new).await.unwrap();
    (base, floor)
}

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        // The engine scripts/bench.sh starts for the run (holding only the
        // test image), named by DOCKER_HOST as for `docker` and Compose.
        let socket = std::env::var("DOCKER_HOST")
            .ok()
            .and_then(|h| h.strip_prefix("unix://").map(str::to_string))
            .unwrap_or_else(|| "/var/run/docker.sock".to_string());
        let engine = DockerEngine::connect(&socket).await.expect("a Docker Engine (run scripts/bench.sh)");
        let node = format!("bench-{}", std::process::id());
        let module = format!("lat{}", std::process::id());
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("i")).unwrap();
        std::fs::write(
            dir.path().join("c.toml"),
            format!("node_id = \"{node}\"\ndata_dir = \"data\"\nintentions_dir = \"i\"\nheartbeat = \"10m\"\napi_listen = \"127.0.0.1:0\"\ndocker_socket = \"{socket}\"\n"),
        )
        .unwrap();
        std::fs::write(dir.path().join("i/m.toml"), intention(&module, 0)).unwrap();

        // Baseline: the bare engine creating and starting the same spec.
        let mut baseline = Vec::new();
        {
            let store_dir = tempfile::tempdir().unwrap();
            let mut spec = bare_spec(&engine, &module, "baseline", store_dir.path()).await;
            spec.name = format!("stead-baseline-{}", std::process::id());
            for _ in 0..rounds() {
                let t = Instant::now();
                let id = engine.create(&spec).await.unwrap();
                engine.start(&id).await.unwrap();
                baseline.push(t.elapsed());
                engine.remove(&id).await.unwrap();
            }
        }

        let child = Command::new(env!("CARGO_BIN_EXE_stead"))
            .args(["run", "--config"])
            .arg(dir.path().join("c.toml"))
            .env("STEAD_LOG", std::env::var("STEAD_LOG").unwrap_or_else(|_| "warn".into()))
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let _agent = Agent(child);
        let addr_file = dir.path().join("data/api-addr");
        while !addr_file.exists() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let addr = std::fs::read_to_string(&addr_file).unwrap().trim().parse().unwrap();
        let token = std::fs::read_to_string(dir.path().join("data/api-token")).unwrap().trim().to_string();
        let client = Client::new(addr, Some(token));
        let mut digest = wait_new_running(&engine, &node, &module, "").await;

        let mut patch = Vec::new();
        for k in 1..=rounds() {
            let t = Instant::now();
            let a = client.request(Method::PATCH, &format!("/v1/intentions/{module}/settings"), Some(&json!({ "n": k }))).await.unwrap();
            assert_eq!(a.status, 200, "{:?}", a.body);
            digest = wait_new_running(&engine, &node, &module, &digest).await;
            patch.push(t.elapsed());
        }
        // Back to no overlay, so the file's value counts again.
        client.request(Method::PATCH, &format!("/v1/intentions/{module}/settings"), Some(&json!({ "n": null }))).await.unwrap();
        digest = wait_new_running(&engine, &node, &module, &digest).await;

        let mut file = Vec::new();
        for k in 1..=rounds() {
            let tmp = dir.path().join("i/.m.tmp");
            std::fs::write(&tmp, intention(&module, 1000 + k as u64)).unwrap();
            let t = Instant::now();
            std::fs::rename(&tmp, dir.path().join("i/m.toml")).unwrap();
            digest = wait_new_running(&engine, &node, &module, &digest).await;
            file.push(t.elapsed());
        }
        // The gap of stead's stop-first order, for PATCHes.
        let (mut gap_stop_first, mut started_stop_first, mut named_stop_first) = (Vec::new(), Vec::new(), Vec::new());
        // Each round paired with the bare engine doing the same just before
        // (a baseline and the order's own floor), so that both see the same
        // machine.
        let pair_dir = tempfile::tempdir().unwrap();
        let pair_spec = bare_spec(&engine, &module, "pair", pair_dir.path()).await;
        let (mut pair_stop_first, mut pair_start_first) = (Vec::new(), Vec::new());
        for k in 1..=rounds() {
            pair_stop_first.push(paired(&engine, &pair_spec, k, false).await);
            let old = running(&engine, &node, &module).await;
            let since = unix_now();
            client.request(Method::PATCH, &format!("/v1/intentions/{module}/settings"), Some(&json!({ "n": 5000 + k }))).await.unwrap();
            digest = wait_new_running(&engine, &node, &module, &digest).await;
            let new = running(&engine, &node, &module).await;
            let evs = events(&format!("label=stead.module={module}"), since);
            gap_stop_first.push(gap(&evs, &old, &new));
            started_stop_first.push(to_start(&evs, &new, since));
            named_stop_first.push(to_named(&evs, &new, since));
        }

        // start-first: a module of its own, changed by PATCH.
        let sf = format!("sf{}", std::process::id());
        std::fs::write(
            dir.path().join("i/sf.toml"),
            intention(&sf, 0).replace("restart = ", "update_order = \"start-first\"\nrestart = "),
        )
        .unwrap();
        let mut sf_digest = wait_new_running(&engine, &node, &sf, "").await;
        let (mut sf_running, mut gap_start_first, mut sf_started, mut sf_named) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for k in 1..=rounds() {
            pair_start_first.push(paired(&engine, &pair_spec, k, true).await);
            let old = running(&engine, &node, &sf).await;
            let since = unix_now();
            let t = Instant::now();
            client.request(Method::PATCH, &format!("/v1/intentions/{sf}/settings"), Some(&json!({ "n": k }))).await.unwrap();
            sf_digest = wait_new_running(&engine, &node, &sf, &sf_digest).await;
            sf_running.push(t.elapsed());
            let new = running(&engine, &node, &sf).await;
            let evs = events(&format!("label=stead.module={sf}"), since);
            gap_start_first.push(gap(&evs, &old, &new));
            sf_started.push(to_start(&evs, &new, since));
            sf_named.push(to_named(&evs, &new, since));
        }

        // Drift made by hand, repaired.
        let mut repaired = Vec::new();
        for _ in 0..rounds() {
            let old = running(&engine, &node, &module).await;
            let t = Instant::now();
            engine.remove(&old).await.unwrap();
            loop {
                let list = engine.list_containers().await.unwrap();
                if list.iter().any(|c| {
                    c.labels.module.as_deref() == Some(module.as_str())
                        && c.state == stead::engine::ContainerState::Running
                        && c.id != old
                }) {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            repaired.push(t.elapsed());
        }
        drop(_agent);

        // The engine's floor for a stop-first swap: the new container
        // already created, stop the old, start the new; and for a
        // stop-first change whole: create, stop the old, start the new.
        let (mut floor_gap, mut floor_swap, mut floor_change, mut floor_start_first) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        {
            let store_dir = tempfile::tempdir().unwrap();
            let mut spec = bare_spec(&engine, &module, "floor", store_dir.path()).await;
            spec.labels.insert("stead.module".into(), format!("floor{}", std::process::id()));
            spec.name = format!("stead-floor-{}-0", std::process::id());
            let mut old = engine.create(&spec).await.unwrap();
            engine.start(&old).await.unwrap();
            for k in 1..=rounds() {
                spec.name = format!("stead-floor-{}-{k}", std::process::id());
                let made = Instant::now();
                let new = engine.create(&spec).await.unwrap();
                let since = unix_now();
                let t = Instant::now();
                engine.stop(&old).await.unwrap();
                engine.start(&new).await.unwrap();
                floor_swap.push(t.elapsed());
                floor_change.push(made.elapsed());
                floor_gap.push(gap(&events(&format!("label=stead.module=floor{}", std::process::id()), since), &old, &new));
                engine.remove(&old).await.unwrap();
                old = new;
            }
            engine.remove(&old).await.unwrap();

            // The engine's floor for a start-first change, to running under
            // the module's name: create the new one beside the old, start
            // it, move the old one aside, give the new one the name (the old
            // one's stop and removal after, untimed).
            let name = format!("stead-floorsf-{}", std::process::id());
            spec.name = name.clone();
            let mut old = engine.create(&spec).await.unwrap();
            engine.start(&old).await.unwrap();
            for _ in 1..=rounds() {
                spec.name = format!("{name}.next");
                let t = Instant::now();
                let new = engine.create(&spec).await.unwrap();
                engine.start(&new).await.unwrap();
                engine.rename(&old, &format!("{name}.old")).await.unwrap();
                engine.rename(&new, &name).await.unwrap();
                floor_start_first.push(t.elapsed());
                engine.remove(&old).await.unwrap();
                old = new;
            }
            engine.remove(&old).await.unwrap();
        }

        // docker-compose doing the same settings change (an environment
        // value here: Compose has no config-file merge), when installed.
        let compose = compose_rounds(dir.path());

        let list = engine.list_containers().await.unwrap();
        for c in list.iter().filter(|c| c.labels.managed_by.as_deref() == Some(node.as_str())) {
            engine.remove(&c.id).await.unwrap();
        }

        let (b, p, f) = (median(&baseline), median(&patch), median(&file));
        let floor = median(&floor_gap);
        println!("rounds: {} each", rounds());
        println!("baseline  engine create+start            median {:>8.1} ms", ms(b));
        println!("stead     PATCH -> new container running median {:>8.1} ms  ({:.2}x baseline)", ms(p), ms(p) / ms(b));
        println!("stead     file  -> new container running median {:>8.1} ms  ({:.2}x baseline)", ms(f), ms(f) / ms(b));
        println!("stead     start-first PATCH -> running   median {:>8.1} ms  ({:.2}x baseline)", ms(median(&sf_running)), ms(median(&sf_running)) / ms(b));
        println!("stead     stop-first PATCH -> new started  median {:>8.1} ms  ({:.2}x floor swap)", ms(median(&started_stop_first)), ms(median(&started_stop_first)) / ms(median(&floor_swap)));
        println!("stead     start-first PATCH -> new started median {:>8.1} ms  ({:.2}x baseline)", ms(median(&sf_started)), ms(median(&sf_started)) / ms(b));
        println!("stead     start-first PATCH -> named (engine's clock) median {:>8.1} ms  ({:.2}x baseline)", ms(median(&sf_named)), ms(median(&sf_named)) / ms(b));
        let sf_floor = ms(median(&floor_start_first));
        println!("engine    floor: create + start new + 2 renames median {:>8.1} ms  ({:.2}x baseline; start-first's own floor)", sf_floor, sf_floor / ms(b));
        println!("stead     start-first PATCH -> running / that floor {:>8.2}x; named (engine's clock) / that floor {:.2}x", ms(median(&sf_running)) / sf_floor, ms(median(&sf_named)) / sf_floor);
        println!("stead     stop-first PATCH -> named (engine's clock)  median {:>8.1} ms  ({:.2}x baseline)", ms(median(&named_stop_first)), ms(median(&named_stop_first)) / ms(b));
        println!("engine    floor: stop old + start new     median {:>8.1} ms", ms(median(&floor_swap)));
        let change = ms(median(&floor_change));
        println!("engine    floor: create + stop old + start new median {:>8.1} ms", change);
        println!("stead     PATCH -> running / that floor  {:>8.2}x (stop-first's own floor)", ms(p) / change);
        println!("stead     stop-first PATCH -> named (engine's clock) / that floor {:>8.2}x", ms(median(&named_stop_first)) / change);
        println!("gap       engine floor (stop-first swap)  median {:>8.1} ms  (1.00x)", ms(floor));
        println!("gap       stead stop-first               median {:>8.1} ms  ({:.2}x floor)", ms(median(&gap_stop_first)), ms(median(&gap_stop_first)) / ms(floor));
        println!("gap       stead start-first              median {:>8.1} ms", ms(median(&gap_start_first)));
        println!("repair    docker rm -f -> new running     median {:>8.1} ms", ms(median(&repaired)));
        let pairs = |p: &[(Duration, Duration)]| (median(&p.iter().map(|x| x.0).collect::<Vec<_>>()), median(&p.iter().map(|x| x.1).collect::<Vec<_>>()));
        let ((sb, sfl), (tb, tfl)) = (pairs(&pair_stop_first), pairs(&pair_start_first));
        println!("paired    stop-first:  engine create+start {:>8.1} ms, its floor (create + stop + start + renames) {:>8.1} ms; stead named {:.2}x the create+start, {:.2}x the floor", ms(sb), ms(sfl), ms(median(&named_stop_first)) / ms(sb), ms(median(&named_stop_first)) / ms(sfl));
        println!("paired    start-first: engine create+start {:>8.1} ms, its floor (create + start + renames) {:>8.1} ms; stead named {:.2}x the create+start, {:.2}x the floor", ms(tb), ms(tfl), ms(median(&sf_named)) / ms(tb), ms(median(&sf_named)) / ms(tfl));
        match compose {
            Some((running, gaps)) => {
                println!("compose   up -d -> new container running median {:>8.1} ms  ({:.2}x baseline)", ms(median(&running)), ms(median(&running)) / ms(b));
                println!("gap       compose                        median {:>8.1} ms  ({:.2}x floor)", ms(median(&gaps)), ms(median(&gaps)) / ms(floor));
            }
            None => println!("compose   (docker-compose not installed: not measured)"),
        }
    });
}

/// `docker-compose up -d` changing one environment value, `rounds()`
/// times: (change → running, gap), or `None` without docker-compose.
fn compose_rounds(dir: &std::path::Path) -> Option<(Vec<Duration>, Vec<Duration>)> {
    Command::new("docker-compose")
        .arg("version")
        .output()
        .ok()
        .filter(|o| o.status.success())?;
    let project = format!("steadbench{}", std::process::id());
    let file = dir.join("compose.yml");
    let write = |n: usize| {
        std::fs::write(
            &file,
            format!(
                "version: \"2.4\"\nservices:\n  m:\n    image: {IMAGE}\n    command: [\"sh\", \"-c\", \"trap 'exit 0' TERM; sleep 1000000 & wait\"]\n    restart: unless-stopped\n    environment:\n      N: \"{n}\"\n    labels:\n      bench: {project}\n"
            ),
        )
        .unwrap()
    };
    let up = || {
        let o = Command::new("docker-compose")
            .args(["-p", &project, "-f"])
            .arg(&file)
            .args(["up", "-d"])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    };
    let id = || {
        let o = Command::new("docker")
            .args([
                "ps",
                "-q",
                "--no-trunc",
                "--filter",
                &format!("label=bench={project}"),
            ])
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    };
    write(0);
    up();
    let (mut running, mut gaps) = (Vec::new(), Vec::new());
    for k in 1..=rounds() {
        let old = id();
        write(k);
        let since = unix_now();
        let t = Instant::now();
        up();
        running.push(t.elapsed());
        let new = id();
        gaps.push(gap(
            &events(&format!("label=bench={project}"), since),
            &old,
            &new,
        ));
    }
    let _ = Command::new("docker-compose")
        .args(["-p", &project, "-f"])
        .arg(&file)
        .args(["down", "-t", "1"])
        .output();
    Some((running, gaps))
}
