//! A TLS host for the clock's tests (tests/clock.rs, tests/lab.rs'
//! 1970 machine): a CA and a server certificate made by openssl with
//! libfaketime's clock, so that they begin when the test says, and nginx
//! serving over TLS with them. Needs nothing of the engine.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use stead::model::time::format_rfc3339;

/// The environment that runs a child (glibc) with its wall clock starting
/// at `at` (`YYYY-MM-DD HH:MM:SS`, UTC): as `common::plane::faketime_env`.
pub fn faketime_env(at: &str) -> Vec<(String, String)> {
    let lib = format!(
        "/usr/lib/{}-linux-gnu/faketime/libfaketime.so.1",
        std::env::consts::ARCH
    );
    assert!(
        std::path::Path::new(&lib).exists(),
        "{lib} is needed (scripts/test.sh installs faketime)"
    );
    [
        ("LD_PRELOAD", lib),
        ("FAKETIME", format!("@{at}")),
        ("FAKETIME_DONT_FAKE_MONOTONIC", "1".into()),
        ("FAKETIME_DONT_RESET", "1".into()),
        ("TZ", "UTC".into()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// A CA and a server certificate for an IP address, made at a time of
/// the test's choosing.
pub struct Certs {
    /// The CA certificate (PEM), for clients to trust.
    pub ca: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
    _dir: tempfile::TempDir,
}

impl Certs {
    /// A CA and a server certificate for `ip` made at `at` (seconds since
    /// the epoch: both begin then), valid for `days`.
    pub fn made_at(at: u64, days: u32, ip: &str) -> Certs {
        let dir = tempfile::tempdir().unwrap();
        let p = |n: &str| dir.path().join(n);
        let s = |p: PathBuf| p.display().to_string();
        let days = days.to_string();
        std::fs::write(
            p("ext"),
            format!("subjectAltName=IP:{ip}\nbasicConstraints=CA:FALSE\n"),
        )
        .unwrap();
        let env = faketime_env(&civil(at));
        for args in [
            vec![
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
                "-nodes",
                "-days",
                &days,
                "-subj",
                "/CN=stead clock test CA",
                "-keyout",
                &s(p("ca.key")),
                "-out",
                &s(p("ca.pem")),
            ],
            vec![
                "req",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
                "-nodes",
                "-subj",
                &format!("/CN={ip}"),
                "-keyout",
                &s(p("server.key")),
                "-out",
                &s(p("server.csr")),
            ],
            vec![
                "x509",
                "-req",
                "-in",
                &s(p("server.csr")),
                "-CA",
                &s(p("ca.pem")),
                "-CAkey",
                &s(p("ca.key")),
                "-CAcreateserial",
                "-days",
                &days,
                "-extfile",
                &s(p("ext")),
                "-out",
                &s(p("server.pem")),
            ],
        ] {
            let o = Command::new("openssl")
                .args(&args)
                .envs(env.iter().map(|(k, v)| (k, v)))
                .output()
                .unwrap();
            assert!(
                o.status.success(),
                "openssl {args:?}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
        }
        let o = Command::new("openssl")
            .args(["x509", "-noout", "-startdate", "-in", &s(p("server.pem"))])
            .output()
            .unwrap();
        let start = String::from_utf8_lossy(&o.stdout).to_string();
        assert!(
            start.contains(&civil(at)[..4]),
            "libfaketime did not move openssl's clock: {start}"
        );
        Certs {
            ca: p("ca.pem"),
            cert: p("server.pem"),
            key: p("server.key"),
            _dir: dir,
        }
    }
}

/// `YYYY-MM-DD HH:MM:SS` (UTC) of `t`, as libfaketime reads it.
pub fn civil(t: u64) -> String {
    format_rfc3339(t).replace('T', " ").replace('Z', "")
}

/// nginx on loopback over TLS with a [`Certs`]' server certificate,
/// serving `root` (reports PUT to `nodes/<node>/status.json`).
pub struct Tls {
    child: Child,
    /// Its port on 127.0.0.1.
    pub port: u16,
    /// What it serves.
    pub root: PathBuf,
    _dir: tempfile::TempDir,
}

impl Drop for Tls {
    fn drop(&mut self) {
        end_nginx(&mut self.child);
    }
}

impl Tls {
    /// Starts it; returns once it listens.
    pub fn start(certs: &Certs) -> Tls {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().display().to_string();
        let root = dir.path().join("root");
        std::fs::create_dir_all(root.join("nodes")).unwrap();
        std::fs::create_dir_all(dir.path().join("tmp")).unwrap();
        std::fs::write(root.join("hello"), "hello").unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let conf = format!(
            r#"user root root;
worker_processes 1;
daemon off;
pid "{d}/nginx.pid";
error_log "{d}/error.log" info;
events {{ worker_connections 64; }}
http {{
    default_type application/octet-stream;
    client_body_temp_path "{d}/tmp/body";
    proxy_temp_path "{d}/tmp/proxy";
    fastcgi_temp_path "{d}/tmp/fastcgi";
    uwsgi_temp_path "{d}/tmp/uwsgi";
    scgi_temp_path "{d}/tmp/scgi";
    access_log "{d}/access.log";
    server {{
        listen 127.0.0.1:{port} ssl;
        ssl_certificate "{cert}";
        ssl_certificate_key "{key}";
        root "{root}";
        location ~ ^/nodes/[^/]+/status\.json$ {{
            dav_methods PUT;
            create_full_put_path on;
            limit_except GET PUT {{ deny all; }}
        }}
        location / {{ limit_except GET {{ deny all; }} }}
    }}
}}
"#,
            cert = certs.cert.display(),
            key = certs.key.display(),
            root = root.display(),
        );
        let child = start_nginx(dir.path(), &conf, port);
        Tls {
            child,
            port,
            root,
            _dir: dir,
        }
    }

    /// Its base URL on loopback.
    pub fn base(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }
}

/// Starts Debian's nginx with `conf` (written into `dir`, its prefix and
/// error log there) and waits until it listens on `port`.
pub fn start_nginx(dir: &std::path::Path, conf: &str, port: u16) -> Child {
    let conf_path = dir.join("nginx.conf");
    std::fs::write(&conf_path, conf).unwrap();
    let child = Command::new("/usr/sbin/nginx")
        .arg("-p")
        .arg(format!("{}/", dir.display()))
        .arg("-c")
        .arg(&conf_path)
        .arg("-e")
        .arg(dir.join("error.log"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let end = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            std::time::Instant::now() < end,
            "nginx did not listen: {}",
            std::fs::read_to_string(dir.join("error.log")).unwrap_or_default()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    child
}

/// Ends the nginx whose master is `child`: SIGTERM to the master, which
/// ends its workers first, then exits; SIGKILL to all of them after 10 s.
/// (A SIGKILL to the master alone orphans its workers, still listening on
/// the port.)
pub fn end_nginx(child: &mut Child) {
    let master = child.id();
    signal(master, SIGTERM);
    let end = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while child.try_wait().ok().flatten().is_none() {
        if std::time::Instant::now() > end {
            for pid in children_of(master) {
                signal(pid, SIGKILL);
            }
            let _ = child.kill();
            let _ = child.wait();
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

const SIGKILL: i32 = 9;
const SIGTERM: i32 = 15;

/// Sends `sig` to `pid`.
pub fn signal(pid: u32, sig: i32) {
    // SAFETY: kill(2) with a pid we started and a plain signal number.
    unsafe {
        kill(pid as i32, sig);
    }
}

unsafe extern "C" {
    fn kill(pid: i32, sig: i32) -> i32;
}

/// The processes whose parent is `pid` (nginx's workers).
pub fn children_of(pid: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|p| {
            std::fs::read_to_string(format!("/proc/{p}/stat")).is_ok_and(|s| {
                // "pid (comm) state ppid …"; comm may hold spaces and ')'.
                s.rsplit_once(')')
                    .and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<u32>().ok())
                    == Some(pid)
            })
        })
        .collect()
}
