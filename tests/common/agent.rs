//! The agent as a process for tests: its log in a file, raw HTTP to its API.

use std::process::Command;

use super::Node;

/// The agent as a process, its log in a file (a pipe nobody reads would
/// stall it), and raw HTTP to its API.
pub struct Agent {
    pub child: std::process::Child,
    pub addr: String,
}

impl Agent {
    pub fn start(n: &Node) -> Agent {
        Agent::start_under(n, &[])
    }

    /// The agent run by a wrapper command (`prlimit …`), when one is given.
    pub fn start_under(n: &Node, wrapper: &[&str]) -> Agent {
        Agent::start_with(n, wrapper, &[])
    }

    /// The agent with more environment (`STEAD_CRASH_AT`, libfaketime's).
    pub fn start_env(n: &Node, env: &[(String, String)]) -> Agent {
        Agent::start_with(n, &[], env)
    }

    /// The agent started with a wrapper and more environment; returns once
    /// its API listens.
    pub fn start_with(n: &Node, wrapper: &[&str], env: &[(String, String)]) -> Agent {
        let child = Agent::spawn_with(n, wrapper, env);
        let addr_file = n.data().join("api-addr");
        n.wait_for(20, "the API to listen", || addr_file.exists());
        let addr = std::fs::read_to_string(&addr_file)
            .unwrap()
            .trim()
            .to_string();
        Agent { child, addr }
    }

    /// The agent as a process with more environment, not waited for (it
    /// may abort at a crash point before its API listens).
    pub fn spawn_with(n: &Node, wrapper: &[&str], env: &[(String, String)]) -> std::process::Child {
        let addr_file = n.data().join("api-addr");
        let _ = std::fs::remove_file(&addr_file);
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(n.dir.path().join("agent.log"))
            .unwrap();
        // STEAD_TEST_BIN runs another build (tests/memory.rs's figures for
        // the release binary: docs/performance.md).
        let bin = std::env::var("STEAD_TEST_BIN")
            .unwrap_or_else(|_| env!("CARGO_BIN_EXE_stead").to_string());
        let mut cmd = match wrapper.split_first() {
            Some((first, rest)) => {
                let mut c = Command::new(first);
                c.args(rest).arg(&bin);
                c
            }
            None => Command::new(&bin),
        };
        // STEAD_TEST_LOG=debug (or any STEAD_LOG filter) for more.
        let level = std::env::var("STEAD_TEST_LOG").unwrap_or_else(|_| "info".into());
        cmd.env("STEAD_LOG", level)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .args(["run", "--config"])
            .arg(n.config())
            .stdout(std::process::Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap()
    }

    /// The agent's log so far (across restarts).
    pub fn log(n: &Node) -> String {
        std::fs::read_to_string(n.dir.path().join("agent.log")).unwrap_or_default()
    }

    /// (status, body) of a GET.
    pub fn get(&self, path: &str) -> (u16, String) {
        http_get(&self.addr, path)
    }
}

impl Agent {
    /// (status, body) of an authorised PATCH.
    pub fn patch(&self, n: &Node, path: &str, body: &str) -> (u16, String) {
        self.send(n, "PATCH", path, body)
    }

    /// (status, body) of an authorised request.
    pub fn send(&self, n: &Node, method: &str, path: &str, body: &str) -> (u16, String) {
        let token = std::fs::read_to_string(n.data().join("api-token")).unwrap();
        http_send(&self.addr, method, path, Some(token.trim()), body)
    }
}

/// (status, body) of a request with a JSON body, with a bearer token when
/// given.
pub fn http_send(
    addr: &str,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: &str,
) -> (u16, String) {
    http_send_within(addr, method, path, token, body, 10)
}

/// [`http_send`], its answer waited for up to `secs` seconds (a reader
/// that waits its turn on purpose, where the test is not of latency).
pub fn http_send_within(
    addr: &str,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: &str,
    secs: u64,
) -> (u16, String) {
    let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    exchange(
        addr,
        &format!(
            "{method} {path} HTTP/1.1\r\nHost: x\r\n{auth}Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        ),
        secs,
    )
}

/// (status, body) of a GET to `addr`.
pub fn http_get(addr: &str, path: &str) -> (u16, String) {
    exchange(
        addr,
        &format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"),
        30,
    )
}

/// (status, body) of a GET to `addr`, or `None` when nothing listens there
/// (an agent that has just died, or the address a dead one left).
#[allow(dead_code)]
pub fn try_http_get(addr: &str, path: &str) -> Option<(u16, String)> {
    std::net::TcpStream::connect(addr).ok()?;
    Some(http_get(addr, path))
}

/// Writes one request and reads the whole answer.
fn exchange(addr: &str, request: &str, timeout_secs: u64) -> (u16, String) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(timeout_secs)))
        .unwrap();
    // The agent may answer (413) and close before it has read all of a
    // body it refuses; its answer is still there to read.
    let _ = s.write_all(request.as_bytes());
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    let status = out
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let (head, body) = out.split_once("\r\n\r\n").unwrap_or(("", ""));
    let chunked = head
        .to_ascii_lowercase()
        .contains("\r\ntransfer-encoding: chunked");
    let body = if chunked {
        dechunk(body)
    } else {
        body.to_string()
    };
    (status, body)
}

/// A chunked body (large answers are written as they are read) decoded;
/// what is cut short ends where it was cut.
fn dechunk(mut rest: &str) -> String {
    let mut out = String::new();
    while let Some((size, after)) = rest.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.split(';').next().unwrap_or("").trim(), 16) else {
            break;
        };
        if n == 0 || after.len() < n {
            out.push_str(after.get(..n.min(after.len())).unwrap_or(""));
            break;
        }
        out.push_str(&after[..n]);
        rest = after[n..].strip_prefix("\r\n").unwrap_or(&after[n..]);
    }
    out
}

impl Agent {
    /// SIGKILL, and waited for.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
