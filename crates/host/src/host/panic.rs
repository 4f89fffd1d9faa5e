//! What the agent was acting on when it panicked, noted in a file of the
//! data directory for its next start (the crash guard reads it:
//! [`crate::model::guard`]). The pass names the module it works on
//! ([`acting_on`], [`acting_on_async`]); the panic hook writes that name and
//! the panic's place in the code, never its message (which may quote
//! input), then aborts, in every build: a panic in any task ends the agent,
//! as the release profile's `panic = "abort"` does, rather than leaving it
//! half alive.

use std::cell::RefCell;
use std::future::Future;
use std::io::Write;
use std::path::{Path, PathBuf};

thread_local! {
    static ACTING: RefCell<Option<String>> = const { RefCell::new(None) };
}

tokio::task_local! {
    static TASK_ACTING: String;
}

/// Notes, while it lives, that this thread acts on a module (blocking
/// work, or async work between two awaits).
pub struct Acting(Option<String>);

impl Acting {
    /// Notes `module` until dropped.
    pub fn new(module: &str) -> Acting {
        Acting(ACTING.with(|a| a.replace(Some(module.to_string()))))
    }
}

impl Drop for Acting {
    fn drop(&mut self) {
        let before = self.0.take();
        ACTING.with(|a| *a.borrow_mut() = before);
    }
}

/// Runs `fut` noted as acting on `module` (async work: the note holds
/// whenever the future is polled, whatever else the task polls).
pub async fn acting_on_async<F: Future>(module: String, fut: F) -> F::Output {
    TASK_ACTING.scope(module, fut).await
}

/// The module noted where the panic happens, if any.
fn acting() -> Option<String> {
    TASK_ACTING
        .try_with(Clone::clone)
        .ok()
        .or_else(|| ACTING.with(|a| a.borrow().clone()))
}

/// Installs the hook: the default report on standard error, then the note
/// at `path`, then abort. A candidate (an update of stead itself on trial)
/// also leaves where it panicked as its last words, for the version that
/// runs after it.
pub fn install(path: PathBuf) {
    let last_words = crate::host::launch::Launched::from_env().and_then(|l| match &l.slot {
        crate::model::launch::Slot::Candidate(v) => Some(l.last_words_path(v)),
        _ => None,
    });
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        default(info);
        let at = info
            .location()
            .map_or_else(|| "an unknown place".to_string(), |l| l.to_string());
        let note = format!("{}\n{at}\n", acting().unwrap_or_default());
        // Best effort: a panic note that cannot be written still aborts.
        if let Ok(mut f) = std::fs::File::create(&path) {
            let _ = f.write_all(note.as_bytes());
            let _ = f.sync_all();
        }
        if let Some(p) = &last_words {
            if let Ok(mut f) = std::fs::File::create(p) {
                let _ = write!(f, "panicked at {at}");
                let _ = f.sync_all();
            }
        }
        std::process::abort();
    }));
}

/// Takes the note the last run left (and removes it): the module it was
/// acting on, if any, and where it panicked. `None`: it left none.
pub fn take_note(path: &Path) -> Option<(Option<String>, String)> {
    let text = std::fs::read_to_string(path).ok()?;
    let _ = std::fs::remove_file(path);
    let mut lines = text.lines();
    let module = lines.next().filter(|m| !m.is_empty()).map(str::to_string);
    // A place in the code: short, and never quoting input.
    let at: String = lines
        .next()
        .unwrap_or("an unknown place")
        .chars()
        .take(200)
        .collect();
    Some((module, at))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_note_names_the_module_acted_on_in_either_kind_of_work() {
        assert_eq!(acting(), None);
        {
            let _a = Acting::new("a");
            assert_eq!(acting().as_deref(), Some("a"));
        }
        assert_eq!(acting(), None);
        acting_on_async("b".into(), async {
            tokio::task::yield_now().await;
            assert_eq!(acting().as_deref(), Some("b"));
        })
        .await;
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("panic");
        std::fs::write(&p, "sensor\nsrc/model/spec.rs:254:18\n").unwrap();
        assert_eq!(
            take_note(&p),
            Some((Some("sensor".into()), "src/model/spec.rs:254:18".into()))
        );
        assert_eq!(take_note(&p), None, "taken once");
        std::fs::write(&p, "\nsrc/x.rs:1:1\n").unwrap();
        assert_eq!(take_note(&p), Some((None, "src/x.rs:1:1".into())));
    }
}
