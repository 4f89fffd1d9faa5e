//! `stead-launch`: the package's fixed entry point, installed as
//! `/usr/bin/stead`. It picks which agent binary to run (the package's, the
//! version the agent confirmed last, or a candidate an update landed) from
//! the state file `<agent dir>/launch`, counts a candidate's starts, goes
//! back after [`launch::MAX_ATTEMPTS`] that never confirmed, and `exec`s
//! the binary with the same arguments. Its rule is
//! `stead::model::launch::decide` (pure, table-tested); this file is the
//! I/O around it. It links nothing but that module and the standard
//! library: no network, no store, nothing an update replaces.
//!
//! Environment (the agent is given the first three):
//! - `STEAD_AGENT_DIR`: the agent directory (default `/var/lib/stead/agent`);
//! - `STEAD_LAUNCH_SLOT`: set for the agent, `package`, `current` or
//!   `candidate`;
//! - `STEAD_LAUNCHER`: set for the agent, this binary's path (an agent not
//!   under systemd `exec`s it to restart into a candidate);
//! - `STEAD_PACKAGE_BINARY`: the package's agent (default
//!   `/usr/lib/stead/stead`);
//! - `STEAD_LAUNCH_ATTEMPTS`: a candidate's starts before going back
//!   (default 3).
//!
//! The package's version is read from `package-version` beside the
//! package's agent (`/usr/lib/stead/package-version`, shipped by the .deb):
//! a package of another version installed since takes over.

use std::ffi::OsString;
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use stead_launch::{self as launch, AgentVersion, Launch, Slot, State};

const AGENT_DIR: &str = "/var/lib/stead/agent";
const PACKAGE_BINARY: &str = "/usr/lib/stead/stead";

fn say(what: &str) {
    eprintln!("stead-launch: {what}");
}

fn binary(dir: &Path, v: &AgentVersion) -> PathBuf {
    dir.join(v.as_str()).join("stead")
}

fn read_state(path: &Path) -> State {
    match fs::read(path) {
        Ok(bytes) => match std::str::from_utf8(&bytes)
            .map_err(|_| "not UTF-8".to_string())
            .and_then(State::parse)
        {
            Ok(s) => s,
            Err(e) => {
                say(&format!(
                    "{}: {e}; running the package's binary",
                    path.display()
                ));
                State::default()
            }
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => State::default(),
        Err(e) => {
            say(&format!(
                "{}: {e}; running the package's binary",
                path.display()
            ));
            State::default()
        }
    }
}

/// Replaces the file whole: a temporary file beside it, fsynced, renamed
/// over it, the directory fsynced. A power cut leaves the old state or
/// the new one.
fn write_state(path: &Path, state: &State) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let tmp = dir.join(format!(".launch.{}", std::process::id()));
    let written = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .open(&tmp)?;
        f.write_all(state.render().as_bytes())?;
        f.sync_all()?;
        fs::rename(&tmp, path)?;
        File::open(dir)?.sync_all()
    })();
    if written.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    written
}

/// The package's version, from `package-version` beside its agent; `None`
/// (nothing taken over) when there is none or it does not read.
fn installed(package: &Path) -> Option<AgentVersion> {
    let path = package.with_file_name("package-version");
    let text = match fs::read(&path) {
        Ok(b) if b.len() <= 128 => String::from_utf8(b).ok()?,
        Ok(_) => return None,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => {
            say(&format!("{}: {e}", path.display()));
            return None;
        }
    };
    AgentVersion::parse(text.trim())
        .map_err(|e| say(&format!("{}: {e}", path.display())))
        .ok()
}

fn main() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let dir = std::env::var_os("STEAD_AGENT_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(AGENT_DIR));
    let package = std::env::var_os("STEAD_PACKAGE_BINARY")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(PACKAGE_BINARY));
    let max = std::env::var("STEAD_LAUNCH_ATTEMPTS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(launch::MAX_ATTEMPTS);
    // `stead run …` starts the agent; any other command is the CLI.
    let agent = args
        .iter()
        .find(|a| !a.to_string_lossy().starts_with('-'))
        .is_some_and(|a| a == "run");
    let path = dir.join("launch");
    let mut state = read_state(&path);
    let present = |v: &AgentVersion| binary(&dir, v).is_file();
    let installed = installed(&package);
    // At most three rounds: a candidate that cannot be executed is given
    // up on at once, then the current one, then the package's.
    for _ in 0..3 {
        let Launch { slot, write, note } =
            launch::decide(&state, agent, &present, installed.as_ref(), max);
        if let Some(n) = note {
            say(&n);
        }
        if let Some(next) = write {
            if let Err(e) = write_state(&path, &next) {
                // A start that cannot be counted is not made: a candidate
                // that kills the machine would otherwise run for ever.
                say(&format!(
                    "{}: {e}; not starting a candidate",
                    path.display()
                ));
                state.candidate = None;
                continue;
            }
            state = next;
        }
        let exe = match &slot {
            Slot::Package => package.clone(),
            Slot::Current(v) | Slot::Candidate(v) => binary(&dir, v),
        };
        let mut cmd = Command::new(&exe);
        cmd.arg0("stead")
            .args(&args)
            .env("STEAD_AGENT_DIR", &dir)
            .env("STEAD_LAUNCH_SLOT", slot.name());
        if let Ok(me) = std::env::current_exe() {
            cmd.env("STEAD_LAUNCHER", me);
        }
        let e = cmd.exec();
        say(&format!("{}: {e}", exe.display()));
        match slot {
            Slot::Candidate(v) if agent => {
                let mut next = state.clone();
                next.candidate = None;
                next.failed = Some(launch::Failed {
                    version: v,
                    why: launch::one_line(&format!("could not be executed: {e}")),
                });
                if write_state(&path, &next).is_err() {
                    say("the candidate's failure could not be written down");
                }
                state = next;
            }
            Slot::Candidate(_) => state.candidate = None,
            Slot::Current(_) => state.current = None,
            Slot::Package => break,
        }
    }
    ExitCode::from(127)
}
