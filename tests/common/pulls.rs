//! The agent's own pulls, for the tests that drive them: a runtime, a
//! registry client with no credentials, and a TCP proxy in front of a
//! registry that counts the bytes it sends and may cut or slow each
//! connection.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use stead::net::http::Http;
use stead::registry::auth::Credentials;
use stead::registry::client::Registries;

pub fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

pub fn client() -> Registries {
    Registries::new(
        Http::new(None).unwrap(),
        Credentials::parse(b"{}").unwrap(),
        Vec::new(),
    )
}

/// A TCP proxy to `upstream` that cuts each connection once it has sent
/// `cut_after` bytes to its client (0: never), counting every byte sent.
pub struct Cutter {
    /// `127.0.0.1:<port>`.
    pub addr: String,
    /// Bytes sent to clients.
    pub down: Arc<AtomicU64>,
    /// Connections cut.
    pub cuts: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
}

impl Cutter {
    pub fn start(upstream: &str, cut_after: u64) -> Cutter {
        Cutter::throttled(upstream, cut_after, std::time::Duration::ZERO)
    }

    /// [`Cutter::start`], waiting `pause` after each 16 KiB it sends.
    pub fn throttled(upstream: &str, cut_after: u64, pause: std::time::Duration) -> Cutter {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let (down, cuts, stop) = (
            Arc::new(AtomicU64::new(0)),
            Arc::new(AtomicU64::new(0)),
            Arc::new(AtomicBool::new(false)),
        );
        let (d, c, s, up) = (
            down.clone(),
            cuts.clone(),
            stop.clone(),
            upstream.to_string(),
        );
        std::thread::spawn(move || {
            for client in l.incoming() {
                if s.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(client) = client else { continue };
                let Ok(server) = TcpStream::connect(&up) else {
                    continue;
                };
                let (c2, s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
                std::thread::spawn(move || {
                    let (mut from, mut to) = (c2, s2);
                    let mut buf = [0u8; 16 * 1024];
                    while let Ok(n) = from.read(&mut buf) {
                        if n == 0 || to.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                    let _ = to.shutdown(Shutdown::Write);
                });
                let (d, c) = (d.clone(), c.clone());
                std::thread::spawn(move || {
                    let (mut from, mut to) = (server, client);
                    let mut buf = [0u8; 16 * 1024];
                    let mut sent = 0u64;
                    while let Ok(n) = from.read(&mut buf) {
                        if n == 0 {
                            break;
                        }
                        let n = if cut_after > 0 {
                            n.min((cut_after - sent) as usize)
                        } else {
                            n
                        };
                        if to.write_all(&buf[..n]).is_err() {
                            break;
                        }
                        sent += n as u64;
                        d.fetch_add(n as u64, Ordering::SeqCst);
                        if !pause.is_zero() {
                            std::thread::sleep(pause);
                        }
                        if cut_after > 0 && sent >= cut_after {
                            c.fetch_add(1, Ordering::SeqCst);
                            break;
                        }
                    }
                    let _ = to.shutdown(Shutdown::Both);
                    let _ = from.shutdown(Shutdown::Both);
                });
            }
        });
        Cutter {
            addr,
            down,
            cuts,
            stop,
        }
    }
}

impl Drop for Cutter {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(&self.addr);
    }
}

/// Builds and pushes the test image with one layer of `kib` random KiB;
/// its config digest and its layers (digest, size).
pub fn push_random(
    reg: &super::registry::Registry,
    repo: &str,
    tag: &str,
    kib: u32,
) -> (String, Vec<(String, u64)>) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("Dockerfile"),
        format!(
            "FROM {}\nRUN dd if=/dev/urandom of=/blob bs=1024 count={kib} 2>/dev/null && echo {tag} > /tag\n",
            super::IMAGE_1
        ),
    )
    .unwrap();
    let (target, config, layers) = super::registry::build_and_push(reg, repo, tag, dir.path());
    super::registry::docker_engine(&["rmi", &target]);
    (config, layers)
}
