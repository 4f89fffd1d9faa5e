//! The bytes of an update rebuilt from chunks against a plain pull of the
//! same image (a benchmark: `scripts/bench-chunks.sh` sets up the
//! registry, the static host with the chunks `stead-plane chunks`
//! published, and the images, then runs this). For each pair of images
//! OLD→NEW (the same repository), with OLD held by the engine, NEW is
//! pulled by the agent's own pull twice per run: with the host's chunks
//! and without; between pulls NEW is removed. Per pair it prints the
//! medians over the runs: bytes from the registry, from the host (bodies,
//! and all the host sent and was sent, from nginx's log), bytes taken
//! from the layers held here, the time, and the ratio against the plain
//! pull.
//!
//! Env: STEAD_BENCH_SOCKET (the engine), STEAD_BENCH_BASE (the host's
//! URL), STEAD_BENCH_ACCESS_LOG (nginx's log: `$request_length` and
//! `$bytes_sent` in fields 5 and 6), STEAD_BENCH_PAIRS (`old new` per
//! line), STEAD_BENCH_RUNS (3).

use std::time::Instant;

use stead::engine::docker::DockerEngine;
use stead::net::http::Http;
use stead::registry::auth::Credentials;
use stead::registry::chunks::ChunkSource;
use stead::registry::client::Registries;
use stead::registry::fetch::{Origins, Spool, Tally, pull};

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} is not set: run scripts/bench-chunks.sh"))
}

fn docker(socket: &str, args: &[&str]) {
    let _ = std::process::Command::new("docker")
        .env("DOCKER_HOST", format!("unix://{socket}"))
        .args(args)
        .output();
}

/// Bytes the host's log says crossed the link (requests and answers),
/// from `from` bytes into the log on.
fn host_bytes(log: &str, from: u64) -> (u64, u64) {
    let text = std::fs::read(log).unwrap_or_default();
    let text = String::from_utf8_lossy(&text[(from as usize).min(text.len())..]).into_owned();
    let mut requests = 0;
    let mut bytes = 0;
    for l in text.lines() {
        let f: Vec<&str> = l.split('\t').collect();
        if f.len() > 6 {
            requests += 1;
            bytes += f[4].parse::<u64>().unwrap_or(0) + f[5].parse::<u64>().unwrap_or(0);
        }
    }
    (requests, bytes)
}

fn log_len(log: &str) -> u64 {
    std::fs::metadata(log).map(|m| m.len()).unwrap_or(0)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

#[derive(Default)]
struct Runs {
    plain_bytes: Vec<f64>,
    plain_secs: Vec<f64>,
    registry: Vec<f64>,
    chunk_bodies: Vec<f64>,
    host_wire: Vec<f64>,
    host_requests: Vec<f64>,
    local: Vec<f64>,
    secs: Vec<f64>,
    rebuilt: Vec<f64>,
}

fn main() {
    // `cargo bench` passes --bench; nothing else is read from the line.
    let socket = env("STEAD_BENCH_SOCKET");
    let base: http::Uri = env("STEAD_BENCH_BASE")
        .parse()
        .expect("STEAD_BENCH_BASE is a URL");
    let log = env("STEAD_BENCH_ACCESS_LOG");
    let runs: usize = std::env::var("STEAD_BENCH_RUNS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(3);
    let pairs: Vec<(String, String)> = env("STEAD_BENCH_PAIRS")
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            Some((w.next()?.to_string(), w.next()?.to_string()))
        })
        .collect();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let registries = Registries::new(
        Http::new(None).unwrap(),
        Credentials::parse(b"{}").unwrap(),
        Vec::new(),
    );
    let source = ChunkSource::new(Http::new(None).unwrap(), &base);
    let spool_dir = tempfile::tempdir().unwrap();
    let spool = Spool::new(spool_dir.path()).unwrap();
    let engine = rt
        .block_on(DockerEngine::connect(&socket))
        .expect("the engine answers");
    println!(
        "pair\tplain pull: bytes, s\twith chunks: registry bytes, chunk bodies, host wire (requests), from layers here, s\trebuilt layers\tratio (all bytes with chunks / plain)"
    );
    for (old, new) in &pairs {
        let held = rt
            .block_on(pull(
                &Origins {
                    registries: &registries,
                    chunks: None,
                    peers: None,
                },
                &engine,
                &spool,
                old,
                &Tally::default(),
            ))
            .unwrap_or_else(|e| panic!("{old}: {e}"));
        let mut r = Runs::default();
        for _ in 0..runs {
            docker(&socket, &["rmi", "-f", new]);
            let at = log_len(&log);
            let t = Instant::now();
            let f = rt
                .block_on(pull(
                    &Origins {
                        registries: &registries,
                        chunks: Some(&source),
                        peers: None,
                    },
                    &engine,
                    &spool,
                    new,
                    &Tally::default(),
                ))
                .unwrap_or_else(|e| panic!("{new}: {e}"));
            r.secs.push(t.elapsed().as_secs_f64());
            let (requests, wire) = host_bytes(&log, at);
            r.registry.push(f.wire as f64);
            r.chunk_bodies.push(f.chunks as f64);
            r.host_wire.push(wire as f64);
            r.host_requests.push(requests as f64);
            r.local.push(f.local as f64);
            r.rebuilt.push(f.rebuilt as f64);
            docker(&socket, &["rmi", "-f", &f.id]);
            let t = Instant::now();
            let p = rt
                .block_on(pull(
                    &Origins {
                        registries: &registries,
                        chunks: None,
                        peers: None,
                    },
                    &engine,
                    &spool,
                    new,
                    &Tally::default(),
                ))
                .unwrap_or_else(|e| panic!("{new}: {e}"));
            r.plain_secs.push(t.elapsed().as_secs_f64());
            r.plain_bytes.push(p.wire as f64);
            docker(&socket, &["rmi", "-f", &p.id]);
        }
        let plain = median(r.plain_bytes);
        let with = median(r.registry.clone()) + median(r.host_wire.clone());
        println!(
            "{old} → {new}\t{:.0}, {:.2}\t{:.0}, {:.0}, {:.0} ({:.0}), {:.0}, {:.2}\t{:.0}\t{:.4}",
            plain,
            median(r.plain_secs),
            median(r.registry),
            median(r.chunk_bodies),
            median(r.host_wire),
            median(r.host_requests),
            median(r.local),
            median(r.secs),
            median(r.rebuilt),
            with / plain.max(1.0),
        );
        docker(&socket, &["rmi", "-f", &held.id]);
    }
    println!(
        "({runs} runs each, medians; {} cores)",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
}
