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
//!   digest (stead stops and removes the old one, then creates and starts).
//! - file → running: the same, triggered by rewriting the intention file.

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

fn median(mut v: Vec<Duration>) -> Duration {
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
        });
        if let Some(d) = found.and_then(|c| c.labels.digest.as_ref()) {
            return d.to_string();
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let engine = DockerEngine::connect("/var/run/docker.sock").await.expect("a Docker Engine (run scripts/bench.sh)");
        let node = format!("bench-{}", std::process::id());
        let module = format!("lat{}", std::process::id());
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("i")).unwrap();
        std::fs::write(
            dir.path().join("c.toml"),
            format!("node_id = \"{node}\"\ndata_dir = \"data\"\nintentions_dir = \"i\"\nheartbeat = \"10m\"\napi_listen = \"127.0.0.1:0\"\n"),
        )
        .unwrap();
        std::fs::write(dir.path().join("i/m.toml"), intention(&module, 0)).unwrap();

        // Baseline: the bare engine creating and starting the same spec.
        let mut baseline = Vec::new();
        {
            let store_dir = tempfile::tempdir().unwrap();
            let i = stead::model::intention::Intention::parse(&intention(&module, 0), stead::model::intention::DocFormat::Toml, "bench").unwrap();
            let inputs = stead::reconcile::resolve::resolve_inputs(&i, &mut stead::host::digest::FileDigester::new()).unwrap();
            let images = engine.list_images().await.unwrap();
            let img = stead::model::spec::image_digest(&stead::engine::image::find_image(&images, IMAGE).expect("the test image").id).unwrap();
            let mut d = stead::model::spec::desired(&i, inputs, &img, &stead::model::names::NodeId::try_from("baseline").unwrap(), store_dir.path());
            d.spec.name = format!("stead-baseline-{}", std::process::id());
            for (p, f) in &d.files {
                stead::host::files::write_once(p, &f.content).unwrap();
            }
            for _ in 0..rounds() {
                let t = Instant::now();
                let id = engine.create(&d.spec).await.unwrap();
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
        drop(_agent);
        let list = engine.list_containers().await.unwrap();
        for c in list.iter().filter(|c| c.labels.managed_by.as_deref() == Some(node.as_str())) {
            engine.remove(&c.id).await.unwrap();
        }

        let (b, p, f) = (median(baseline), median(patch), median(file));
        println!("rounds: {} each", rounds());
        println!("baseline  engine create+start            median {:>8.1} ms", ms(b));
        println!("stead     PATCH -> new container running median {:>8.1} ms  ({:.1}x baseline)", ms(p), ms(p) / ms(b));
        println!("stead     file  -> new container running median {:>8.1} ms  ({:.1}x baseline)", ms(f), ms(f) / ms(b));
    });
}
