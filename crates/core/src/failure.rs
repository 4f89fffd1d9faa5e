//! Why a command could not run, as one line: its error and each cause
//! below it said once (most of stead's errors already name their cause in
//! their own message), with what the command was doing in front. Small in
//! place of anyhow, which is a backtrace's code on a device.

use std::fmt;

/// A command's error, its causes folded in.
pub struct Failure(String);

/// A command's result.
pub type Result<T> = std::result::Result<T, Failure>;

impl<E: std::error::Error> From<E> for Failure {
    fn from(e: E) -> Self {
        let mut out = String::new();
        fold(&mut out, &e);
        Failure(out)
    }
}

/// Appends `e` and its sources to `out`, each unless `out` says it already.
fn fold(out: &mut String, e: &dyn std::error::Error) {
    let mut cause = Some(e);
    while let Some(c) = cause {
        let text = c.to_string();
        if !out.contains(&text) {
            if !out.is_empty() {
                out.push_str(": ");
            }
            out.push_str(&text);
        }
        cause = c.source();
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What the command was doing when it failed, in front of why.
pub trait Context<T> {
    /// With this said first.
    fn context(self, what: impl fmt::Display) -> Result<T>;
    /// With what `what` makes said first (made only on failure).
    fn with_context<M: fmt::Display>(self, what: impl FnOnce() -> M) -> Result<T>;
}

impl<T, E: std::error::Error> Context<T> for std::result::Result<T, E> {
    fn context(self, what: impl fmt::Display) -> Result<T> {
        self.map_err(|e| {
            let mut out = what.to_string();
            fold(&mut out, &e);
            Failure(out)
        })
    }

    fn with_context<M: fmt::Display>(self, what: impl FnOnce() -> M) -> Result<T> {
        self.map_err(|e| {
            let mut out = what().to_string();
            fold(&mut out, &e);
            Failure(out)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("outer says {0}")]
    struct Outer(#[source] std::io::Error);

    #[test]
    fn each_cause_is_said_once_after_what_was_being_done() {
        let io = || std::io::Error::other("disk full");
        let r: std::result::Result<(), _> = Err(Outer(io()));
        assert_eq!(
            r.context("cannot write x").unwrap_err().to_string(),
            "cannot write x: outer says disk full"
        );
        let r: std::result::Result<(), std::io::Error> = Err(io());
        assert_eq!(
            r.with_context(|| "cannot read y").unwrap_err().to_string(),
            "cannot read y: disk full"
        );
        let f: Failure = Outer(io()).into();
        assert_eq!(f.to_string(), "outer says disk full");
    }
}
