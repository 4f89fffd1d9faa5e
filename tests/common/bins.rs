//! The workspace's binaries as the tests run them: the agent (`stead`,
//! this package's) and those of other packages (the launcher, the
//! operator's tool), built on first use. Std only, so a test that needs
//! nothing else of the harness includes this file alone.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

/// A binary of another package of this workspace (the launcher,
/// `stead-launch`; the operator's tool, `stead-plane`), next to the agent
/// the tests run. Cargo builds only the binaries of the package under
/// test, so the first call in a test process builds it (`cargo build`
/// knows when it is fresh; the build lock is free while tests run). With
/// `STEAD_TEST_BIN`, the binary beside that one is taken as it is.
pub fn workspace_bin(name: &str) -> PathBuf {
    static BUILT: Mutex<Vec<String>> = Mutex::new(Vec::new());
    if let Ok(bin) = std::env::var("STEAD_TEST_BIN") {
        return Path::new(&bin).with_file_name(name);
    }
    let stead = Path::new(env!("CARGO_BIN_EXE_stead"));
    let path = stead.with_file_name(name);
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if !built.iter().any(|b| b == name) {
        let profile = stead
            .parent()
            .and_then(|d| d.file_name())
            .and_then(|d| d.to_str());
        let target_dir = stead.parent().and_then(|d| d.parent()).expect("target dir");
        let mut c = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
        c.current_dir(env!("CARGO_MANIFEST_DIR"))
            .args([
                "build",
                "--quiet",
                "--workspace",
                "--bin",
                name,
                "--target-dir",
            ])
            .arg(target_dir);
        if profile == Some("release") {
            c.arg("--release");
        }
        let status = c.status().expect("cargo runs");
        assert!(status.success(), "cargo build --bin {name} failed");
        built.push(name.to_string());
    }
    path
}

/// The command that runs `args` as a user would type them after `stead`:
/// `plane …` and `import …` are the operator's tool's (`stead-plane
/// …`, `stead-plane import …`), the rest the agent's `stead`.
pub fn stead_cmd(args: &[&str]) -> Command {
    match args.split_first() {
        Some((&"plane", rest)) => {
            let mut c = Command::new(workspace_bin("stead-plane"));
            c.args(rest);
            c
        }
        Some((&"import", _)) => {
            let mut c = Command::new(workspace_bin("stead-plane"));
            c.args(args);
            c
        }
        _ => {
            let mut c = Command::new(env!("CARGO_BIN_EXE_stead"));
            c.args(args);
            c
        }
    }
}
