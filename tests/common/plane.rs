//! The central plane for tests: Debian's nginx on loopback, started by the
//! test, serving a docroot in a tempdir. A node GETs
//! `/nodes/<node>/desired.json` (static file: ETag, `If-None-Match` → 304)
//! and PUTs its report to `/nodes/<node>/status.json` (the DAV module, only
//! there); anything else is read-only, so a node can never overwrite its own
//! desired state (PUT of desired.json → 403). The plane can be stopped and
//! restarted on the same port, can answer faults (a status with
//! `Retry-After`) through a config reload, and logs every request to an
//! access log the tests read. Also here: a tiny HTTP/1.1 client, and the
//! environment that runs a child under libfaketime.
//!
//! nginx facts the tests rely on (each checked in `tests/plane_harness.rs`
//! but the one about reloads):
//! - Its ETag is `"<mtime hex>-<size hex>"`, mtime in whole seconds: same
//!   bytes with a new mtime is a new ETag (the "ETag changed, revision did
//!   not" case a node must handle), and, worse, other bytes of the same size
//!   within the same second keep the old ETag (a wrong 304). `publish` hence
//!   gives every file it writes an mtime one second past any it gave before,
//!   so each publish is a new ETag, deterministically.
//! - A DAV PUT writes the body to `client_body_temp_path` and renames it into
//!   place (same filesystem here): a report is never read half-written. It
//!   answers 201 when it created the file, 204 when it replaced it. When the
//!   request has a `Date` header, nginx sets the file's mtime from it (a
//!   node under faketime would leave its fake time there).
//! - `master_process off` cannot reload: after SIGHUP the single process
//!   answered a client with its own error-log lines instead of HTTP (seen
//!   while building this).
//!   So nginx runs with a master and one worker (`user root`, as the tests
//!   run as root); a reload starts a new worker and retires the old one,
//!   and `stop` sends SIGTERM to the master, which exits only after its
//!   worker (SIGKILL would orphan the worker, still listening).
//! - Its access-log line is written after the answer is sent: a client can
//!   see the answer before the line; `wait_count` waits for it.
//!
//! `set_redirect` (desired.json) and `set_report_redirect` (status.json)
//! answer a redirect until cleared; `set_etags(false)` turns ETags off
//! (`Last-Modified` and `If-Modified-Since` only, as some hosts do); the
//! access log has each request's `If-Modified-Since`.
//!
//! Faults: `set_fault` (desired.json) and `set_report_fault` (status.json)
//! hold until cleared, for every request, as real nginx answers. For "the
//! next N requests" use `faults::FaultProxy` in front (`FaultProxy::start(
//! &plane.addr())`): it works with nginx (one connection per request,
//! `Connection: close` upstream). Mind that the answers it injects never
//! reach nginx (they are in the proxy's `seen`, not in `requests()`), that
//! it keeps the client's connection open after an answer (a client goes by
//! `Content-Length` and `Connection: close`, as hyper does), and that it
//! injects without reading a request body: fault PUTs with
//! `set_report_fault`.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::registry::free_port;
use super::tls::{children_of, signal};

/// Debian's nginx.
pub const NGINX: &str = "/usr/sbin/nginx";

/// An answer nginx gives instead of the file: this status, with
/// `Retry-After: <secs>` when given.
pub type FaultAnswer = (u16, Option<u64>);

/// One line of the plane's access log.
#[derive(Clone, Debug, PartialEq)]
pub struct Request {
    /// When nginx logged it (seconds since the epoch, real clock).
    pub at: f64,
    pub method: String,
    /// The path as requested (with any query).
    pub path: String,
    pub status: u16,
    /// Body bytes sent.
    pub bytes: u64,
    /// nginx's `$request_time`, in seconds.
    pub request_time: f64,
    /// The request's `If-None-Match`, if any.
    pub if_none_match: Option<String>,
    /// The ETag answered, if any.
    pub etag: Option<String>,
    /// The request's `If-Modified-Since`, if any.
    pub if_modified_since: Option<String>,
}

/// nginx as the central plane; stopped on drop.
pub struct Plane {
    child: Option<Child>,
    port: u16,
    dir: tempfile::TempDir,
    token: String,
    generation: u64,
    fault_desired: Option<FaultAnswer>,
    fault_status: Option<FaultAnswer>,
    /// Redirects answered for desired.json and status.json: a status and
    /// the `Location`.
    redirect_desired: Option<(u16, String)>,
    redirect_status: Option<(u16, String)>,
    /// Whether nginx sends ETags (off: only `Last-Modified`, as some
    /// hosts do).
    etags: bool,
    /// The last mtime `publish` gave a file (seconds since the epoch).
    last_mtime: AtomicI64,
}

impl Plane {
    /// Starts nginx on a free loopback port with an empty docroot; returns
    /// once it answers.
    pub fn start() -> Plane {
        assert!(
            Path::new(NGINX).exists(),
            "{NGINX} is needed (scripts/test.sh installs nginx)"
        );
        let dir = tempfile::Builder::new()
            .prefix("stead-plane-")
            .tempdir()
            .unwrap();
        std::fs::create_dir_all(dir.path().join("root/nodes")).unwrap();
        std::fs::create_dir_all(dir.path().join("tmp")).unwrap();
        // Names this nginx among others (and whatever else takes its port).
        static STARTED: AtomicU64 = AtomicU64::new(0);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let nth = STARTED.fetch_add(1, Ordering::SeqCst);
        let mut plane = Plane {
            child: None,
            port: 0,
            token: format!("{}-{nth}-{nanos}", std::process::id()),
            dir,
            generation: 0,
            fault_desired: None,
            fault_status: None,
            redirect_desired: None,
            redirect_status: None,
            etags: true,
            last_mtime: AtomicI64::new(0),
        };
        // Another process may take the free port before nginx binds it.
        for _ in 0..5 {
            plane.port = free_port();
            match plane.launch() {
                Ok(()) => return plane,
                Err(log) if log.contains("Address already in use") => continue,
                Err(log) => panic!("nginx did not start:\n{log}"),
            }
        }
        panic!("nginx found no free port in 5 tries:\n{}", plane.logs());
    }

    /// `http://127.0.0.1:<port>`.
    pub fn base(&self) -> String {
        format!("http://{}", self.addr())
    }

    /// `127.0.0.1:<port>` (for `FaultProxy::start` and raw clients).
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// The docroot.
    pub fn root(&self) -> PathBuf {
        self.dir.path().join("root")
    }

    /// The URL a node GETs its desired state from.
    pub fn desired_url(&self, node: &str) -> String {
        format!("{}/nodes/{node}/desired.json", self.base())
    }

    /// The URL a node PUTs its report to.
    pub fn status_url(&self, node: &str) -> String {
        format!("{}/nodes/{node}/status.json", self.base())
    }

    /// Publishes `bytes` as the node's desired state; every publish is a
    /// new ETag, even of the same bytes.
    pub fn publish(&self, node: &str, bytes: &[u8]) {
        assert!(!node.contains('/') && !node.is_empty(), "node id {node:?}");
        self.publish_raw_path(&format!("nodes/{node}/desired.json"), bytes);
    }

    /// Writes `bytes` to `rel` under the docroot, atomically (a temp file
    /// renamed: nginx serves the old file or the new, never half), with an
    /// mtime past every one given before (so a new ETag).
    pub fn publish_raw_path(&self, rel: &str, bytes: &[u8]) {
        let path = self.root().join(rel.trim_start_matches('/'));
        let parent = path.parent().unwrap();
        std::fs::create_dir_all(parent).unwrap();
        let tmp = parent.join(format!(
            ".{}.publishing",
            path.file_name().unwrap().to_string_lossy()
        ));
        let mut f = std::fs::File::create(&tmp).unwrap();
        f.write_all(bytes).unwrap();
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64;
        let prev = self
            .last_mtime
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |last| {
                Some(now.max(last + 1))
            })
            .unwrap();
        let mtime = now.max(prev + 1);
        f.set_modified(UNIX_EPOCH + Duration::from_secs(mtime as u64))
            .unwrap();
        f.sync_all().unwrap();
        drop(f);
        std::fs::rename(&tmp, &path).unwrap();
    }

    /// Removes `rel` under the docroot (nginx answers 404 for it next).
    pub fn remove_path(&self, rel: &str) {
        std::fs::remove_file(self.root().join(rel.trim_start_matches('/'))).unwrap();
    }

    /// The ETag nginx gives `rel` now (`"<mtime hex>-<size hex>"`), if it
    /// exists.
    pub fn etag(&self, rel: &str) -> Option<String> {
        let m = std::fs::metadata(self.root().join(rel.trim_start_matches('/'))).ok()?;
        let mtime = m
            .modified()
            .ok()?
            .duration_since(UNIX_EPOCH)
            .ok()?
            .as_secs();
        Some(format!("\"{mtime:x}-{:x}\"", m.len()))
    }

    /// What the node last PUT as its report, if anything.
    pub fn report(&self, node: &str) -> Option<Vec<u8>> {
        std::fs::read(self.root().join(format!("nodes/{node}/status.json"))).ok()
    }

    /// The node's last report as JSON, if any: the payload of the signed
    /// report its agent PUT ([`open_report`]).
    pub fn report_json(&self, node: &str) -> Option<serde_json::Value> {
        self.report(node).map(|b| open_report(node, &b))
    }

    /// Every request nginx has logged, in order (across restarts).
    pub fn requests(&self) -> Vec<Request> {
        std::fs::read_to_string(self.dir.path().join("access.log"))
            .unwrap_or_default()
            .lines()
            .filter_map(parse_line)
            .collect()
    }

    /// How many logged requests have this method, a path containing
    /// `path_contains`, and this status.
    pub fn count(&self, method: &str, path_contains: &str, status: u16) -> usize {
        self.requests()
            .iter()
            .filter(|r| r.method == method && r.path.contains(path_contains) && r.status == status)
            .count()
    }

    /// Waits up to `secs` until `count(…)` is at least `at_least`; returns
    /// the count, or panics with the access log.
    pub fn wait_count(
        &self,
        method: &str,
        path_contains: &str,
        status: u16,
        at_least: usize,
        secs: u64,
    ) -> usize {
        let end = Instant::now() + Duration::from_secs(secs);
        loop {
            let n = self.count(method, path_contains, status);
            if n >= at_least {
                return n;
            }
            assert!(
                Instant::now() < end,
                "timed out after {secs}s waiting for {at_least} × {method} {path_contains} → {status} (saw {n}); the plane logged:\n{:#?}",
                self.requests()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Answers every request to any desired.json with this fault (`None`:
    /// serves the files again). Reloads nginx; returns once the new
    /// config is the only one answering.
    pub fn set_fault(&mut self, fault: Option<FaultAnswer>) {
        self.fault_desired = fault;
        self.reload();
    }

    /// Answers every request to any status.json with this fault (`None`:
    /// takes reports again). Reloads nginx like `set_fault`.
    pub fn set_report_fault(&mut self, fault: Option<FaultAnswer>) {
        self.fault_status = fault;
        self.reload();
    }

    /// Answers every request to any desired.json with a redirect
    /// (`Some((302, location))`), or serves the files again (`None`).
    /// Reloads nginx like `set_fault`.
    pub fn set_redirect(&mut self, redirect: Option<(u16, String)>) {
        self.redirect_desired = redirect;
        self.reload();
    }

    /// Answers every request to any status.json with a redirect, or takes
    /// reports again (`None`). Reloads nginx like `set_fault`.
    pub fn set_report_redirect(&mut self, redirect: Option<(u16, String)>) {
        self.redirect_status = redirect;
        self.reload();
    }

    /// Sends ETags (`true`, nginx's default) or only `Last-Modified`
    /// (`etag off`, as Python's http.server and some CDNs). Reloads nginx
    /// like `set_fault`.
    pub fn set_etags(&mut self, on: bool) {
        self.etags = on;
        self.reload();
    }

    /// Stops nginx: once this returns, connections to its port are
    /// refused. Idempotent.
    pub fn stop(&mut self) {
        if !self.end_nginx() {
            return;
        }
        let end = Instant::now() + Duration::from_secs(5);
        while TcpStream::connect(self.addr()).is_ok() {
            assert!(
                Instant::now() < end,
                "{} still accepts connections after nginx stopped",
                self.addr()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Ends nginx ([`super::tls::end_nginx`]); false if it was not running.
    fn end_nginx(&mut self) -> bool {
        let Some(mut child) = self.child.take() else {
            return false;
        };
        super::tls::end_nginx(&mut child);
        true
    }

    /// Starts nginx again on the same port with the same docroot, faults and
    /// log (stopping it first if it runs); returns once it answers.
    pub fn restart(&mut self) {
        self.stop();
        // The port may have been taken by someone else meanwhile.
        let end = Instant::now() + Duration::from_secs(15);
        loop {
            match self.launch() {
                Ok(()) => return,
                Err(log) if log.contains("Address already in use") && Instant::now() < end => {
                    std::thread::sleep(Duration::from_millis(200))
                }
                Err(log) => panic!("nginx did not restart on {}:\n{log}", self.addr()),
            }
        }
    }

    /// nginx's error log and stderr.
    pub fn logs(&self) -> String {
        let read = |n: &str| std::fs::read_to_string(self.dir.path().join(n)).unwrap_or_default();
        format!(
            "--- error.log\n{}--- stderr\n{}",
            read("error.log"),
            read("stderr.log")
        )
    }

    fn config(&self) -> String {
        let d = self.dir.path().display();
        let root = self.root();
        let root = root.display();
        let fault = |f: Option<FaultAnswer>| match f {
            None => String::new(),
            Some((code, retry)) => {
                let retry = retry.map_or(String::new(), |s| {
                    format!("add_header Retry-After {s} always; ")
                });
                format!("{retry}return {code};")
            }
        };
        let redirect = |r: &Option<(u16, String)>| match r {
            None => String::new(),
            Some((code, to)) => format!("return {code} \"{to}\";"),
        };
        format!(
            r#"# Written by tests/common/plane.rs; regenerated on every reload.
# Workers run as root: the tests do, and everything is in a root-only tempdir.
user root root;
worker_processes 1;
daemon off;
pid "{d}/nginx.pid";
error_log "{d}/error.log" info;
# A reload retires the old worker; it may not linger past this.
worker_shutdown_timeout 2s;
events {{ worker_connections 512; }}
http {{
    types {{ application/json json; }}
    default_type application/octet-stream;
    client_body_temp_path "{d}/tmp/body";
    proxy_temp_path "{d}/tmp/proxy";
    fastcgi_temp_path "{d}/tmp/fastcgi";
    uwsgi_temp_path "{d}/tmp/uwsgi";
    scgi_temp_path "{d}/tmp/scgi";
    client_max_body_size 1m;
    # Tab-separated; values escaped (\xHH) as nginx does by default, "-" when empty.
    # No buffer: each line is written as its request ends.
    log_format plane "$msec\t$request_method\t$request_uri\t$status\t$body_bytes_sent\t$request_time\t$http_if_none_match\t$sent_http_etag\t$http_if_modified_since";
    access_log "{d}/access.log" plane;
    server {{
        listen 127.0.0.1:{port};
        root "{root}";
        etag {etag};
        # Which nginx and which config answers (readiness, reloads).
        location = /__plane {{
            access_log off;
            return 200 "stead-plane {token} {generation}";
        }}
        location ~ ^/nodes/[^/]+/desired\.json$ {{
            {fault_desired}{redirect_desired}
            limit_except GET {{ deny all; }}
        }}
        location ~ ^/nodes/[^/]+/status\.json$ {{
            {fault_status}{redirect_status}
            dav_methods PUT;
            create_full_put_path on;
            dav_access user:rw group:r all:r;
            limit_except GET PUT {{ deny all; }}
        }}
        # What a device uploads for an action (a support bundle, logs).
        location ~ ^/nodes/[^/]+/uploads/ {{
            dav_methods PUT;
            create_full_put_path on;
            dav_access user:rw group:r all:r;
            limit_except GET PUT {{ deny all; }}
        }}
        # An S3 bucket's leases and the operator's tool's probe of them
        # (tests/budget.rs): WebDAV takes every PUT, whatever it is
        # conditioned on.
        location ~ /leases/ {{
            dav_methods PUT DELETE;
            create_full_put_path on;
            dav_access user:rw group:r all:r;
            limit_except GET PUT DELETE {{ deny all; }}
        }}
        # Directories listed (stead plane status --reports URL walks them).
        location / {{
            autoindex on;
            limit_except GET {{ deny all; }}
        }}
        # The same listed in nginx's json and xml formats, which stead does
        # not read (and must say so).
        location /json/ {{
            alias "{root}/";
            autoindex on;
            autoindex_format json;
        }}
        location /xml/ {{
            alias "{root}/";
            autoindex on;
            autoindex_format xml;
        }}
    }}
}}
"#,
            port = self.port,
            token = self.token,
            generation = self.generation,
            fault_desired = fault(self.fault_desired),
            fault_status = fault(self.fault_status),
            redirect_desired = redirect(&self.redirect_desired),
            redirect_status = redirect(&self.redirect_status),
            etag = if self.etags { "on" } else { "off" },
        )
    }

    fn write_config(&self) -> PathBuf {
        let p = self.dir.path().join("nginx.conf");
        std::fs::write(&p, self.config()).unwrap();
        p
    }

    /// Starts nginx with the current config; Err(logs) if it exits.
    fn launch(&mut self) -> Result<(), String> {
        let conf = self.write_config();
        let d = self.dir.path().to_path_buf();
        // What this attempt logs is what follows (the log is kept across
        // restarts).
        let from = std::fs::metadata(d.join("error.log")).map_or(0, |m| m.len() as usize);
        let child = Command::new(NGINX)
            .arg("-p")
            .arg(format!("{}/", d.display()))
            .arg("-c")
            .arg(&conf)
            .arg("-e")
            .arg(d.join("error.log"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(d.join("stderr.log")).unwrap())
            .spawn()
            .unwrap();
        self.child = Some(child);
        let end = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(st) = self.child.as_mut().unwrap().try_wait().unwrap() {
                self.child = None;
                let log = std::fs::read(d.join("error.log")).unwrap_or_default();
                let stderr = std::fs::read(d.join("stderr.log")).unwrap_or_default();
                return Err(format!(
                    "nginx exited ({st})\n--- error.log (this start)\n{}--- stderr\n{}",
                    String::from_utf8_lossy(log.get(from..).unwrap_or_default()),
                    String::from_utf8_lossy(&stderr)
                ));
            }
            if self.answers_generation() {
                return Ok(());
            }
            if Instant::now() > end {
                self.end_nginx();
                return Err(format!("nginx never answered\n{}", self.logs()));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Whether our nginx answers with the current config's generation.
    fn answers_generation(&self) -> bool {
        let want = format!("stead-plane {} {}", self.token, self.generation);
        http(&self.addr(), "GET", "/__plane", &[], b"")
            .is_ok_and(|r| r.status == 200 && r.body == want.as_bytes())
    }

    /// Rewrites the config and reloads (SIGHUP); returns once the new config
    /// answers and the old worker is gone.
    fn reload(&mut self) {
        self.generation += 1;
        self.write_config();
        let Some(child) = self.child.as_ref() else {
            // Stopped: the next restart uses the new config.
            return;
        };
        let master = child.id();
        signal(master, SIGHUP);
        let end = Instant::now() + Duration::from_secs(15);
        while !(self.answers_generation() && children_of(master).len() == 1) {
            assert!(
                Instant::now() < end,
                "nginx did not reload to generation {}:\n{}",
                self.generation,
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Plane {
    fn drop(&mut self) {
        self.end_nginx();
    }
}

fn parse_line(line: &str) -> Option<Request> {
    let f: Vec<String> = line.split('\t').map(unescape).collect();
    let opt = |s: &String| (s != "-").then(|| s.clone());
    let [at, method, path, status, bytes, rt, inm, etag, ims] = f.as_slice() else {
        return None;
    };
    Some(Request {
        at: at.parse().ok()?,
        method: method.clone(),
        path: path.clone(),
        status: status.parse().ok()?,
        bytes: bytes.parse().ok()?,
        request_time: rt.parse().ok()?,
        if_none_match: opt(inm),
        etag: opt(etag),
        if_modified_since: opt(ims),
    })
}

/// Undoes nginx's default log escaping (`"`, `\` and control bytes as
/// `\xHH`).
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let hex = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if let [b'\\', b'x', h, l, ..] = b[i..] {
            if let (Some(h), Some(l)) = (hex(h), hex(l)) {
                out.push(h << 4 | l);
                i += 4;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// An HTTP answer.
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    /// Header names lower-cased, in order.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    /// The first header of this name (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// One HTTP/1.1 request on its own connection (`Connection: close`) to
/// `addr` (`127.0.0.1:<port>`); Err when the connection fails (refused,
/// reset, timed out after 10 s).
pub fn http(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> std::io::Result<Response> {
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    if !body.is_empty() || method == "PUT" || method == "POST" {
        head.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    s.write_all(head.as_bytes())?;
    s.write_all(body)?;
    // The head, then the body by its length (a proxy may keep the
    // connection open after the answer), or to the end.
    let bad = |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_string());
    let mut out = Vec::new();
    let mut buf = [0u8; 8192];
    let split = loop {
        if let Some(at) = out.windows(4).position(|w| w == b"\r\n\r\n") {
            break at;
        }
        match s.read(&mut buf)? {
            0 => return Err(bad("connection closed before the end of the head")),
            n => out.extend_from_slice(&buf[..n]),
        }
    };
    let text = String::from_utf8_lossy(&out[..split]).into_owned();
    let mut lines = text.split("\r\n");
    let status: u16 = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| bad("no status line"))?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let mut response = Response {
        status,
        headers,
        body: out[split + 4..].to_vec(),
    };
    if method == "HEAD" || status == 204 || status == 304 || status < 200 {
        response.body.clear();
    } else if let Some(len) = response
        .header("content-length")
        .and_then(|v| v.parse::<usize>().ok())
    {
        while response.body.len() < len {
            match s.read(&mut buf)? {
                0 => return Err(bad("connection closed before the end of the body")),
                n => response.body.extend_from_slice(&buf[..n]),
            }
        }
        response.body.truncate(len);
    } else if response.header("transfer-encoding") == Some("chunked") {
        s.read_to_end(&mut response.body)?;
        response.body = dechunk(&response.body).ok_or_else(|| bad("bad chunked body"))?;
    } else {
        s.read_to_end(&mut response.body)?;
    }
    Ok(response)
}

/// A chunked body, decoded (the connection closed after it).
fn dechunk(mut b: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let eol = b.windows(2).position(|w| w == b"\r\n")?;
        let size = std::str::from_utf8(&b[..eol]).ok()?;
        let size = usize::from_str_radix(size.split(';').next()?.trim(), 16).ok()?;
        b = &b[eol + 2..];
        if size == 0 {
            return Some(out);
        }
        out.extend_from_slice(b.get(..size)?);
        b = b.get(size + 2..)?;
    }
}

/// libfaketime, as Debian's `faketime` package installs it.
pub fn libfaketime() -> PathBuf {
    let p = PathBuf::from(format!(
        "/usr/lib/{}-linux-gnu/faketime/libfaketime.so.1",
        std::env::consts::ARCH
    ));
    assert!(
        p.exists(),
        "{} is needed (scripts/test.sh installs faketime)",
        p.display()
    );
    p
}

/// The environment that makes a child (dynamically linked against glibc,
/// like the debug `stead` the tests run; a static musl binary ignores
/// LD_PRELOAD) see its wall clock start at `at` (`YYYY-MM-DD HH:MM:SS`,
/// UTC) and run on from there, while its monotonic clock stays real:
/// - `FAKETIME=@…`: start there and tick (without `@` the clock stands
///   still).
/// - `FAKETIME_DONT_FAKE_MONOTONIC=1`: needed. With CLOCK_MONOTONIC faked
///   too, a tokio `sleep` and std's `recv_timeout` never return (absolute
///   futex/epoll deadlines from a faked clock).
/// - `TZ=UTC`: libfaketime reads `at` in the local zone.
/// - `FAKETIME_DONT_RESET=1`: children the child starts continue its clock
///   instead of starting at `at` again.
///
/// `FAKETIME_NO_CACHE` does not matter: it is about re-reading a spec from
/// a file that changes while the process runs.
pub fn faketime_env(at: &str) -> Vec<(String, String)> {
    [
        ("LD_PRELOAD", libfaketime().display().to_string()),
        ("FAKETIME", format!("@{at}")),
        ("FAKETIME_DONT_FAKE_MONOTONIC", "1".into()),
        ("FAKETIME_DONT_RESET", "1".into()),
        ("TZ", "UTC".into()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

const SIGHUP: i32 = 1;

/// Runs `stead plane ARGS` with `stdin`; returns (success, stdout, stderr).
pub fn plane_cli_with(args: &[&str], stdin: &str) -> (bool, String, String) {
    use std::io::Write as _;
    let mut c = std::process::Command::new(super::workspace_bin("stead-plane"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // A command that refuses before reading its stdin closes it: the
    // write may fail, and what it said is in its output.
    let _ = c.stdin.take().unwrap().write_all(stdin.as_bytes());
    let out = c.wait_with_output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Runs `stead plane ARGS`; returns its stdout, asserting it succeeded.
pub fn plane_cli(args: &[&str]) -> String {
    let (ok, stdout, stderr) = plane_cli_with(args, "");
    assert!(ok, "stead plane {args:?}: {stdout}{stderr}");
    stdout
}

/// A report as the agent PUTs it, opened: the JSON of its payload, once
/// its envelope verified under the report key it carries and it names
/// `node` (panics otherwise: every agent signs its reports).
pub fn open_report(node: &str, bytes: &[u8]) -> serde_json::Value {
    use stead::views::signed::{Read, claim};
    let text = || String::from_utf8_lossy(bytes).into_owned();
    let read = Read::parse(bytes)
        .unwrap_or_else(|e| panic!("the report of {node} does not read ({e}): {}", text()));
    let Read::Signed(envelope) = &read else {
        panic!("the report of {node} is not signed: {}", text())
    };
    let payload = envelope.payload.clone();
    let claim = claim(read, Some(node))
        .unwrap_or_else(|e| panic!("the report of {node} does not verify: {e}: {}", text()));
    assert!(claim.report_key.is_some(), "{}", text());
    serde_json::from_slice(&payload)
        .unwrap_or_else(|e| panic!("the report of {node} is not JSON ({e}): {}", text()))
}
