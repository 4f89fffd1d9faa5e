//! A Docker Engine of a test's own whose data root is a small filesystem
//! (a tmpfs of the size asked): what a device with little flash is, for
//! disk stewardship. It runs in a network namespace of its own (an engine
//! started with `--bridge=none` removes the host's `docker0`; in its own
//! namespace there is none to remove), with no firewall rules of its own;
//! its containers use `network_mode = "none"`. A registry on the host's
//! loopback is reached through [`OwnEngine::forward`]: the same address
//! inside, forwarded out. Everything it made goes with it on drop.

use std::path::PathBuf;
use std::process::{Child, Command, Output};
use std::time::{Duration, Instant};

/// A second Docker Engine; stopped, and its filesystem unmounted, on drop.
pub struct OwnEngine {
    dir: tempfile::TempDir,
    /// Its network namespace.
    ns: String,
    /// Its socket's path.
    pub socket: String,
    /// Its data root (the small filesystem).
    pub root: PathBuf,
    child: Child,
}

impl OwnEngine {
    /// Starts an engine whose data root is a tmpfs of `mib` MiB.
    pub fn start(mib: u64) -> OwnEngine {
        let dir = tempfile::Builder::new()
            .prefix("stead-own-engine-")
            .tempdir()
            .unwrap();
        let root = dir.path().join("root");
        std::fs::create_dir_all(&root).unwrap();
        let o = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={mib}m"), "tmpfs"])
            .arg(&root)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "mount a tmpfs (the engine tests run as root): {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let socket = dir.path().join("docker.sock").display().to_string();
        let log = std::fs::File::create(dir.path().join("dockerd.log")).unwrap();
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let ns = format!(
            "stead-own-{}-{}",
            std::process::id(),
            N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        );
        for args in [
            vec!["netns", "add", &ns],
            vec!["-n", &ns, "link", "set", "lo", "up"],
        ] {
            let o = Command::new("ip").args(&args).output().unwrap();
            assert!(
                o.status.success(),
                "ip {args:?}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
        }
        let child = Command::new("nsenter")
            .arg(format!("--net=/run/netns/{ns}"))
            .arg("dockerd")
            .arg("--data-root")
            .arg(&root)
            .arg("--exec-root")
            .arg(dir.path().join("exec"))
            .arg("--pidfile")
            .arg(dir.path().join("docker.pid"))
            .args(["--host", &format!("unix://{socket}")])
            .args(["--bridge=none", "--iptables=false", "--ip-masq=false"])
            .stdout(std::process::Stdio::null())
            .stderr(log)
            .spawn()
            .expect("dockerd runs (scripts/engine.sh installs it)");
        let e = OwnEngine {
            dir,
            ns,
            socket,
            root,
            child,
        };
        let end = Instant::now() + Duration::from_secs(60);
        while !e.docker(&["info"]).status.success() {
            assert!(
                Instant::now() < end,
                "the engine of our own did not start: {}",
                std::fs::read_to_string(e.dir.path().join("dockerd.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        e
    }

    /// Forwards `127.0.0.1:port` inside the engine's namespace to the same
    /// address on the host (a registry there): its listener is made inside
    /// by a thread that steps into the namespace and back, and each
    /// connection is carried out by two copying threads. It lives as long
    /// as the test process.
    pub fn forward(&self, port: u16) {
        use std::os::fd::AsRawFd;
        let inside = std::fs::File::open(format!("/run/netns/{}", self.ns)).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let home = std::fs::File::open("/proc/thread-self/ns/net").unwrap();
            // SAFETY: setns on descriptors of network namespaces, for this
            // thread alone.
            assert_eq!(
                unsafe { libc::setns(inside.as_raw_fd(), libc::CLONE_NEWNET) },
                0
            );
            let listener = std::net::TcpListener::bind(("127.0.0.1", port)).unwrap();
            assert_eq!(
                unsafe { libc::setns(home.as_raw_fd(), libc::CLONE_NEWNET) },
                0
            );
            tx.send(()).unwrap();
            for down in listener.incoming() {
                let Ok(down) = down else { continue };
                let Ok(up) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
                    continue;
                };
                let (mut d2, mut u2) = (down.try_clone().unwrap(), up.try_clone().unwrap());
                let (mut d, mut u) = (down, up);
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut d, &mut u);
                    let _ = u.shutdown(std::net::Shutdown::Write);
                });
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut u2, &mut d2);
                    let _ = d2.shutdown(std::net::Shutdown::Write);
                });
            }
        });
        rx.recv().unwrap();
    }

    /// Runs the docker CLI against this engine.
    pub fn docker(&self, args: &[&str]) -> Output {
        Command::new("docker")
            .env("DOCKER_HOST", format!("unix://{}", self.socket))
            .args(args)
            .output()
            .unwrap()
    }

    /// The same, which must succeed; its trimmed stdout.
    pub fn docker_ok(&self, args: &[&str]) -> String {
        let o = self.docker(args);
        assert!(
            o.status.success(),
            "docker {args:?} (own engine): {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    }

    /// Every image it has: (ID, its first tag or `<none>`), sorted by ID.
    pub fn images(&self) -> Vec<(String, String)> {
        let out = self.docker_ok(&[
            "images",
            "--no-trunc",
            "--format",
            "{{.ID}}\t{{.Repository}}:{{.Tag}}",
        ]);
        let mut v: Vec<(String, String)> = out
            .lines()
            .filter_map(|l| l.split_once('\t'))
            .map(|(id, tag)| (id.to_string(), tag.to_string()))
            .collect();
        v.sort();
        v.dedup_by(|a, b| a.0 == b.0);
        v
    }

    /// Used percent of its data root, as `df` says it.
    pub fn used_percent(&self) -> u64 {
        let o = Command::new("df")
            .args(["--output=pcent"])
            .arg(&self.root)
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .last()
            .and_then(|l| l.trim().trim_end_matches('%').parse().ok())
            .expect("df says the used percent")
    }

    /// The engine's log.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("dockerd.log")).unwrap_or_default()
    }
}

impl Drop for OwnEngine {
    fn drop(&mut self) {
        let ids = self.docker(&["ps", "-aq"]);
        for id in String::from_utf8_lossy(&ids.stdout).split_whitespace() {
            let _ = self.docker(&["rm", "-f", id]);
        }
        // SIGTERM, then a kill if it does not stop.
        let _ = Command::new("kill")
            .arg(self.child.id().to_string())
            .status();
        let end = Instant::now() + Duration::from_secs(20);
        while self.child.try_wait().ok().flatten().is_none() && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        // Mounts it left under its roots, then the tmpfs itself.
        let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
        let base = self.dir.path().display().to_string();
        let mut under: Vec<&str> = mounts
            .lines()
            .filter_map(|l| l.split_whitespace().nth(1))
            .filter(|m| m.starts_with(&base))
            .collect();
        under.sort_by_key(|m| std::cmp::Reverse(m.len()));
        for m in under {
            let _ = Command::new("umount").arg("-l").arg(m).status();
        }
        let _ = Command::new("ip").args(["netns", "del", &self.ns]).status();
    }
}
