//! moto's S3 server on loopback (from the venv scripts/test.sh makes,
//! `STEAD_TEST_MOTO`), driven by tests/data/s3/moto.py: a private bucket
//! with an IAM key that signs every request.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// The venv that holds moto's server and boto3.
pub fn venv() -> PathBuf {
    let v =
        std::env::var("STEAD_TEST_MOTO").unwrap_or_else(|_| "/var/cache/stead-test/moto".into());
    let v = PathBuf::from(v);
    assert!(
        v.join("bin/moto_server").exists(),
        "no moto server in {} (scripts/test.sh installs it; or set STEAD_TEST_MOTO to a venv with moto[server])",
        v.display()
    );
    v
}

pub struct Moto {
    child: Child,
    pub url: String,
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Moto {
    /// The server on loopback, its first three actions (the IAM user, its
    /// key and policy) taken without authentication, every later one
    /// checked.
    pub fn start() -> Moto {
        let port = super::registry::free_port();
        // Through tests/data/s3/serve.py: moto's server, its conditional
        // PUTs made whole (S3 checks and writes as one; moto's threads
        // would let two writes both pass the check).
        let child = Command::new(venv().join("bin/python"))
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/s3/serve.py"))
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .env("INITIAL_NO_AUTH_ACTION_COUNT", "3")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let url = format!("http://127.0.0.1:{port}");
        let end = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                std::time::Instant::now() < end,
                "moto's server did not listen"
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        Moto { child, url }
    }

    /// Runs tests/data/s3/moto.py; returns its stdout.
    pub fn py(&self, args: &[&str]) -> String {
        let out = Command::new(venv().join("bin/python"))
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/s3/moto.py"))
            .arg(args[0])
            .arg(&self.url)
            .args(&args[1..])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "moto.py {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }
}

/// Writes an AWS credentials file of `key` (moto.py's JSON) at `path`.
pub fn credentials(path: &Path, key: &serde_json::Value, mode: u32) {
    std::fs::write(
        path,
        format!(
            "[default]\naws_access_key_id = {}\naws_secret_access_key = {}\n",
            key["AccessKeyId"].as_str().unwrap(),
            key["SecretAccessKey"].as_str().unwrap()
        ),
    )
    .unwrap();
    std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(mode)).unwrap();
}
