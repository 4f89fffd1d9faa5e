//! What a pass did, module by module: the action taken, the digest it
//! aimed at, the inputs that moved, why it failed or is held, and when the
//! next attempt is due. `stead run --once` prints one line per module.

use std::fmt;
use std::time::Duration;

use crate::intake::dir::FileRejected;
use crate::model::names::{Digest, ModuleName};
use crate::model::spec::Moved;

/// What a pass did for one module.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Nothing: the container matches.
    Unchanged,
    /// A container was created and started.
    Created,
    /// A stopped container was started.
    Started,
    /// The container was replaced because inputs moved.
    Recreated,
    /// An orphaned container was removed.
    Removed,
    /// Inputs moved; by policy only reported.
    Drifted,
    /// Inputs moved; the recreate waits for a maintenance window.
    Deferred,
    /// Its target cannot be computed now; the container is left alone.
    Held,
    /// The crash guard holds it: neither run nor removed.
    Quarantined,
    /// A container not managed here holds its name.
    Conflict,
    /// The engine is busy with the container.
    Waiting,
    /// A module it depends on is not there yet.
    Depending,
    /// Its image is being pulled (in the background).
    Pulling,
    /// Acting again toward a target that keeps failing is held back.
    BackingOff,
    /// An engine action failed.
    Failed,
}

impl Action {
    /// Its word in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Unchanged => "unchanged",
            Action::Created => "created",
            Action::Started => "started",
            Action::Recreated => "recreated",
            Action::Removed => "removed",
            Action::Drifted => "drifted",
            Action::Deferred => "deferred",
            Action::Held => "held",
            Action::Quarantined => "quarantined",
            Action::Conflict => "conflict",
            Action::Waiting => "waiting",
            Action::Depending => "waiting-for-dependency",
            Action::Pulling => "pulling",
            Action::BackingOff => "backing-off",
            Action::Failed => "failed",
        }
    }

    /// Whether this is an attempt at the module's target (a failed one
    /// included: a create the engine refuses is not retried every pass).
    pub fn is_attempt(self) -> bool {
        matches!(
            self,
            Action::Created | Action::Started | Action::Recreated | Action::Failed
        )
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Whom a report is about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Subject {
    /// A module (one this node holds, or a container's that it held).
    Module(ModuleName),
    /// A container no module owns whose label names none: what the label
    /// says, if anything.
    Unowned(Option<String>),
}

impl Subject {
    /// A container's module label: the module it names, or what it says.
    pub fn of_label(label: Option<&str>) -> Subject {
        match label.map(ModuleName::try_from) {
            Some(Ok(m)) => Subject::Module(m),
            _ => Subject::Unowned(label.map(str::to_string)),
        }
    }

    /// The module, when it is one.
    pub fn module(&self) -> Option<&ModuleName> {
        match self {
            Subject::Module(m) => Some(m),
            Subject::Unowned(_) => None,
        }
    }

    /// As reports and events name it.
    pub fn as_str(&self) -> &str {
        match self {
            Subject::Module(m) => m.as_str(),
            Subject::Unowned(Some(label)) => label,
            Subject::Unowned(None) => "(unlabelled)",
        }
    }
}

impl From<&ModuleName> for Subject {
    fn from(m: &ModuleName) -> Subject {
        Subject::Module(m.clone())
    }
}

impl fmt::Display for Subject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

impl PartialEq<str> for Subject {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for Subject {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialOrd for Subject {
    fn partial_cmp(&self, other: &Subject) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// By name, as reports are listed.
impl Ord for Subject {
    fn cmp(&self, other: &Subject) -> std::cmp::Ordering {
        self.as_str().cmp(other.as_str())
    }
}

/// What a pass did for one module.
#[derive(Clone, Debug)]
pub struct ModuleReport {
    /// The module, or the unowned container's label.
    pub module: Subject,
    /// What was done.
    pub action: Action,
    /// The desired spec digest, when known.
    pub digest: Option<Digest>,
    /// The container acted on or kept.
    pub container: Option<String>,
    /// For drift and recreation, the inputs that moved.
    pub moved: Vec<Moved>,
    /// Why it failed or is held.
    pub error: Option<String>,
    /// When the next attempt is due, from the pass's start, when it waits
    /// out a back-off.
    pub retry_in: Option<Duration>,
    /// For a back-off: the last attempt was refused (as opposed to made,
    /// with a container that did not stay up).
    pub refused: bool,
}

impl ModuleReport {
    /// A report of `action` with nothing else said yet.
    pub fn new(module: Subject, action: Action, digest: Option<Digest>) -> ModuleReport {
        ModuleReport {
            module,
            action,
            digest,
            container: None,
            moved: vec![],
            error: None,
            retry_in: None,
            refused: false,
        }
    }
}

impl fmt::Display for ModuleReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let digest = self.digest.as_ref().map_or("-", |d| d.as_str());
        write!(
            f,
            "{:<24} {:<10} {digest}",
            self.module,
            self.action.as_str()
        )?;
        for m in &self.moved {
            write!(f, "  [{m}]")?;
        }
        match (&self.error, self.retry_in) {
            (Some(e), Some(r)) => write!(f, "  ({e}; next attempt in {}s)", r.as_secs() + 1)?,
            (Some(e), None) => write!(f, "  ({e})")?,
            (None, Some(r)) => write!(f, "  (next attempt in {}s)", r.as_secs() + 1)?,
            (None, None) => {}
        }
        Ok(())
    }
}

/// What one pass did.
#[derive(Debug, Default)]
pub struct PassReport {
    /// One entry per module acted on or looked at, by module name.
    pub modules: Vec<ModuleReport>,
    /// Intention files that were refused.
    pub rejected: Vec<FileRejected>,
    /// The host paths whose change should trigger a pass: every env file
    /// and read-only mount source of the stored intentions.
    pub watched_inputs: std::collections::BTreeSet<std::path::PathBuf>,
    /// How long the pass took.
    pub duration: Duration,
    /// When the next pass is wanted before the heartbeat: the soonest end
    /// of a starting container's settle window (to say it converged) or of
    /// a back-off (to act again).
    pub next_in: Option<Duration>,
    /// Another agent shares this node id: what was seen.
    pub other_agent: Option<String>,
}
