//! How this agent was started, as the launcher (`/usr/bin/stead`) told it,
//! and the launcher's state file, read and written with the one reader of
//! `model::launch`. A candidate's last words (why it gave up, what it died
//! on) are a file of their own beside its binary, readable by any version.

use std::path::{Path, PathBuf};

use crate::model::launch::{AgentVersion, MAX_BYTES, Slot, State};

/// The exit code that asks for a restart into what the launcher picks
/// (EX_TEMPFAIL): under systemd, `Restart=` starts the launcher again.
pub const EXIT_RESTART: u8 = 75;

/// What the launcher said when it started this agent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Launched {
    /// The agent directory: the state file and each version's binary.
    pub dir: PathBuf,
    /// What this agent runs as.
    pub slot: Slot,
    /// The launcher's own path, to `exec` for a restart without systemd.
    pub launcher: Option<PathBuf>,
}

/// The last words a candidate leaves, bounded.
const MAX_LAST_WORDS: u64 = 2048;

impl Launched {
    /// From the environment the launcher set; `None` when this agent was
    /// not started by it (run by hand, the bare static binary). The slot's
    /// version is read from the state file: a candidate is the candidate
    /// it names, a current agent its `current`.
    pub fn from_env() -> Option<Launched> {
        let dir = PathBuf::from(std::env::var_os("STEAD_AGENT_DIR")?);
        let slot = std::env::var("STEAD_LAUNCH_SLOT").ok()?;
        let launcher = std::env::var_os("STEAD_LAUNCHER").map(PathBuf::from);
        let state = read_state(&dir).unwrap_or_default();
        let slot = match slot.as_str() {
            "candidate" => Slot::Candidate(state.candidate?.version),
            "current" => Slot::Current(state.current?),
            _ => Slot::Package,
        };
        Some(Launched {
            dir,
            slot,
            launcher,
        })
    }

    pub fn state_path(&self) -> PathBuf {
        self.dir.join("launch")
    }

    /// Where a version's binary is.
    pub fn binary(&self, v: &AgentVersion) -> PathBuf {
        self.dir.join(v.as_str()).join("stead")
    }

    /// Where a version's last words are.
    pub fn last_words_path(&self, v: &AgentVersion) -> PathBuf {
        self.dir.join(v.as_str()).join("last-words")
    }

    /// Writes a version's last words (one line, bounded; never a secret:
    /// the same texts the log says).
    pub fn leave_last_words(&self, v: &AgentVersion, why: &str) {
        let text = crate::model::launch::one_line(why);
        if let Err(e) =
            crate::host::files::replace_atomic(&self.last_words_path(v), text.as_bytes(), 0o644)
        {
            tracing::warn!("cannot leave last words for {v}: {e}");
        }
    }

    /// A version's last words, if it left any.
    pub fn last_words(&self, v: &AgentVersion) -> Option<String> {
        let b = crate::host::files::read_regular(&self.last_words_path(v), MAX_LAST_WORDS).ok()?;
        let s = String::from_utf8_lossy(&b).trim().to_string();
        (!s.is_empty()).then_some(s)
    }

    pub fn read_state(&self) -> Result<State, String> {
        read_state(&self.dir)
    }

    /// Changes the state file whole (atomically, durably).
    pub fn change_state(&self, f: impl FnOnce(&mut State)) -> Result<State, String> {
        let mut s = self.read_state()?;
        f(&mut s);
        crate::host::files::replace_atomic(&self.state_path(), s.render().as_bytes(), 0o644)
            .map_err(|e| format!("{}: {e}", self.state_path().display()))?;
        Ok(s)
    }
}

fn read_state(dir: &Path) -> Result<State, String> {
    let path = dir.join("launch");
    match crate::host::files::read_regular(&path, MAX_BYTES as u64) {
        Ok(b) => std::str::from_utf8(&b)
            .map_err(|_| "not UTF-8".to_string())
            .and_then(State::parse)
            .map_err(|e| format!("{}: {e}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(State::default()),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

/// Restarts into what the launcher picks now. Under systemd (which sets
/// `INVOCATION_ID` for a service) the agent exits with [`EXIT_RESTART`]
/// and `Restart=` starts the launcher again; otherwise it `exec`s the
/// launcher with its own arguments, keeping its process. Returns only the
/// exit code to end with.
pub fn restart(l: Option<&Launched>) -> std::process::ExitCode {
    let code = std::process::ExitCode::from(EXIT_RESTART);
    if std::env::var_os("INVOCATION_ID").is_some() {
        return code;
    }
    let Some(launcher) = l.and_then(|l| l.launcher.as_ref()) else {
        return code;
    };
    use std::os::unix::process::CommandExt;
    let e = std::process::Command::new(launcher)
        .arg0("stead")
        .args(std::env::args_os().skip(1))
        .exec();
    tracing::error!("cannot exec the launcher {}: {e}", launcher.display());
    code
}
