//! Failed or Faulted, decided in ONE place. Every registry and engine path
//! of a reload asks [`classify`]; a second copy of this table is how a
//! download answering 503 once would read as final.
//!
//! Transient (the request is `faulted`, and retried for ever with backoff):
//! 5xx, 408 and 429 answers, a timeout, a reset or refused connection, a
//! name that does not resolve, an engine that is away, a pull that would
//! not fit on the disk (room may be freed), and anything not recognised (a
//! crash is never final). Decided (`failed`: asking again
//! gets the same answer): 404 for a manifest, blob or tag list, 401 and 403
//! (credentials), any other 4xx, a digest mismatch, no manifest for this
//! platform, an untrusted certificate, an unreadable manifest, a floor above
//! this agent, a malformed reference.

use std::time::Duration;

use crate::engine::EngineError;
use crate::registry::error::RegistryError;

/// What a failure means for its request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// It may clear on its own: retry, not before `retry_after` when the
    /// registry asked for a delay.
    Transient {
        /// The registry's `Retry-After`.
        retry_after: Option<Duration>,
    },
    /// A definite answer: asking again gets the same.
    Decided,
}

/// A failure on a reload's path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Failure {
    /// Talking to the registry.
    #[error(transparent)]
    Registry(#[from] RegistryError),
    /// The engine's pull, or another engine call.
    #[error("{0}")]
    Engine(String, EngineFailure),
    /// The image declares a floor above this agent.
    #[error("{version} needs stead >= {floor}; running {running}")]
    Floor {
        /// The version found.
        version: String,
        /// Its floor.
        floor: String,
        /// This agent.
        running: String,
    },
    /// Something this agent could not do for a reason of its own (a store
    /// write that failed, a crash): retried.
    #[error("{0}")]
    Internal(String),
    /// The pull would not fit on the engine's data root: nothing was
    /// fetched; retried, since room may be freed.
    #[error("{0}")]
    NoRoom(String),
    /// The version found is not signed as the image policy asks: decided.
    #[error("{0}")]
    Unsigned(String),
    /// Fetching a file over HTTP (an update of stead itself: its release
    /// statement or binary), and how it went wrong.
    #[error("{0}")]
    Fetch(String, FetchFailure),
}

/// How a fetch over HTTP failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FetchFailure {
    /// No answer (the transport's failure).
    Transport(crate::net::http::Transport),
    /// An answer of this status, and its `Retry-After`.
    Status(u16, Option<Duration>),
    /// What came is not what was signed (size or SHA-256), or does not run
    /// as the version it was said to be.
    Mismatch,
}

/// How an engine call failed, as far as a reload cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EngineFailure {
    /// The engine is away, or did not answer in time.
    Away,
    /// The engine answered with an error of this HTTP status (0: an error
    /// in the pull's progress stream).
    Answered(u16),
}

impl Failure {
    /// An engine error on a reload's path.
    pub fn engine(e: &EngineError) -> Failure {
        let kind = match e {
            EngineError::Unreachable(_) | EngineError::TimedOut(_) => EngineFailure::Away,
            EngineError::NotFound(_) => EngineFailure::Answered(404),
            EngineError::Conflict(_) => EngineFailure::Answered(409),
            EngineError::Refused { status, .. } => EngineFailure::Answered(*status),
            EngineError::Unsupported { .. } => EngineFailure::Answered(400),
        };
        Failure::Engine(e.to_string(), kind)
    }
}

/// The one classifier.
pub fn classify(f: &Failure) -> Verdict {
    let transient = Verdict::Transient { retry_after: None };
    match f {
        Failure::Registry(e) => match e {
            RegistryError::Status {
                status,
                retry_after,
                ..
            } => {
                if transient_status(*status) {
                    Verdict::Transient {
                        retry_after: *retry_after,
                    }
                } else {
                    Verdict::Decided
                }
            }
            RegistryError::Timeout { .. } | RegistryError::Connect { .. } => transient,
            RegistryError::Tls { .. }
            | RegistryError::Credentials { .. }
            | RegistryError::DigestMismatch { .. }
            | RegistryError::NoPlatform { .. }
            | RegistryError::Malformed { .. }
            | RegistryError::Reference(_) => Verdict::Decided,
        },
        Failure::Engine(message, kind) => match kind {
            EngineFailure::Away => transient,
            EngineFailure::Answered(status) if transient_status(*status) => transient,
            // A pull's failure comes as text in its progress stream: the
            // engine's words for the registry's answer.
            EngineFailure::Answered(0) => pull_message(message),
            EngineFailure::Answered(_) => Verdict::Decided,
        },
        Failure::Floor { .. } | Failure::Unsigned(_) => Verdict::Decided,
        Failure::Internal(_) | Failure::NoRoom(_) => transient,
        Failure::Fetch(_, f) => match f {
            FetchFailure::Transport(
                crate::net::http::Transport::Timeout | crate::net::http::Transport::Connect(_),
            ) => transient,
            FetchFailure::Transport(_) => Verdict::Decided,
            FetchFailure::Status(s, retry_after) if transient_status(*s) => Verdict::Transient {
                retry_after: *retry_after,
            },
            FetchFailure::Status(..) | FetchFailure::Mismatch => Verdict::Decided,
        },
    }
}

/// 5xx, 408 and 429: the conventional transient set.
pub fn transient_status(status: u16) -> bool {
    status >= 500 || status == 408 || status == 429
}

/// Reads the engine's words for a failed pull. Unrecognised words are a
/// crash, retried.
fn pull_message(message: &str) -> Verdict {
    let m = message.to_ascii_lowercase();
    let decided = [
        "manifest unknown",
        "not found",
        "unauthorized",
        "authentication required",
        "denied",
        "forbidden",
        "no matching manifest",
        "invalid reference",
        "digest did not match",
        "does not match",
    ];
    if decided.iter().any(|d| m.contains(d)) {
        Verdict::Decided
    } else {
        Verdict::Transient { retry_after: None }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::error::Object;

    fn status(s: u16) -> Failure {
        Failure::Registry(RegistryError::Status {
            registry: "r".into(),
            object: Object::Manifest,
            what: "a:1".into(),
            status: s,
            retry_after: None,
        })
    }

    fn fetch(f: FetchFailure) -> Failure {
        Failure::Fetch("x".into(), f)
    }

    #[test]
    fn one_table() {
        let t = Verdict::Transient { retry_after: None };
        let d = Verdict::Decided;
        let r = |e: RegistryError| Failure::Registry(e);
        let cases: Vec<(&str, Failure, Verdict)> = vec![
            ("500", status(500), t.clone()),
            ("502", status(502), t.clone()),
            ("503", status(503), t.clone()),
            ("504", status(504), t.clone()),
            ("408", status(408), t.clone()),
            ("429", status(429), t.clone()),
            ("404", status(404), d.clone()),
            (
                "not signed as the image policy asks",
                Failure::Unsigned("image r/a:1 (sha256:…): refused by the image policy".into()),
                d.clone(),
            ),
            (
                "fetch 503",
                fetch(FetchFailure::Status(503, None)),
                t.clone(),
            ),
            (
                "fetch 429",
                fetch(FetchFailure::Status(429, Some(Duration::from_secs(9)))),
                Verdict::Transient {
                    retry_after: Some(Duration::from_secs(9)),
                },
            ),
            (
                "fetch 404",
                fetch(FetchFailure::Status(404, None)),
                d.clone(),
            ),
            (
                "fetch 403",
                fetch(FetchFailure::Status(403, None)),
                d.clone(),
            ),
            (
                "fetch timeout",
                fetch(FetchFailure::Transport(
                    crate::net::http::Transport::Timeout,
                )),
                t.clone(),
            ),
            (
                "fetch refused",
                fetch(FetchFailure::Transport(
                    crate::net::http::Transport::Connect("refused".into()),
                )),
                t.clone(),
            ),
            (
                "fetch untrusted certificate",
                fetch(FetchFailure::Transport(crate::net::http::Transport::Tls(
                    "unknown issuer".into(),
                ))),
                d.clone(),
            ),
            (
                "fetch redirect loop",
                fetch(FetchFailure::Transport(
                    crate::net::http::Transport::Redirects("loop".into()),
                )),
                d.clone(),
            ),
            (
                "fetch sha256 mismatch",
                fetch(FetchFailure::Mismatch),
                d.clone(),
            ),
            ("400", status(400), d.clone()),
            ("410", status(410), d.clone()),
            (
                "429 with Retry-After",
                r(RegistryError::Status {
                    registry: "r".into(),
                    object: Object::Blob,
                    what: "b".into(),
                    status: 429,
                    retry_after: Some(Duration::from_secs(90)),
                }),
                Verdict::Transient {
                    retry_after: Some(Duration::from_secs(90)),
                },
            ),
            (
                "timeout",
                r(RegistryError::Timeout {
                    registry: "r".into(),
                    what: "x".into(),
                    limit: Duration::from_secs(30),
                }),
                t.clone(),
            ),
            (
                "reset",
                r(RegistryError::Connect {
                    registry: "r".into(),
                    message: "connection reset by peer".into(),
                }),
                t.clone(),
            ),
            (
                "credentials",
                r(RegistryError::Credentials {
                    registry: "r".into(),
                    object: Object::Token,
                    what: "a".into(),
                    status: 401,
                }),
                d.clone(),
            ),
            (
                "digest mismatch",
                r(RegistryError::DigestMismatch {
                    registry: "r".into(),
                    object: Object::Blob,
                    what: "sha256:a".into(),
                    got: "sha256:b".into(),
                }),
                d.clone(),
            ),
            (
                "no platform",
                r(RegistryError::NoPlatform {
                    registry: "r".into(),
                    what: "a:1".into(),
                    platform: "linux/arm64".into(),
                    offered: "linux/amd64".into(),
                }),
                d.clone(),
            ),
            (
                "untrusted certificate",
                r(RegistryError::Tls {
                    registry: "r".into(),
                    message: "invalid peer certificate: UnknownIssuer".into(),
                }),
                d.clone(),
            ),
            (
                "malformed reference",
                r(RegistryError::Reference("bad".into())),
                d.clone(),
            ),
            (
                "floor",
                Failure::Floor {
                    version: "1.5.0".into(),
                    floor: "0.4.0".into(),
                    running: "0.3.1".into(),
                },
                d.clone(),
            ),
            (
                "engine away",
                Failure::engine(&EngineError::Unreachable("gone".into())),
                t.clone(),
            ),
            (
                "pull timed out",
                Failure::engine(&EngineError::TimedOut("pull".into())),
                t.clone(),
            ),
            (
                "pull: manifest unknown",
                Failure::engine(&EngineError::Refused {
                    status: 0,
                    message: "manifest for r/a@sha256:x not found: manifest unknown".into(),
                }),
                d.clone(),
            ),
            (
                "pull: toomanyrequests",
                Failure::engine(&EngineError::Refused {
                    status: 0,
                    message: "toomanyrequests: slow down".into(),
                }),
                t.clone(),
            ),
            (
                "pull: bad gateway",
                Failure::engine(&EngineError::Refused {
                    status: 0,
                    message: "received unexpected HTTP status: 502 Bad Gateway".into(),
                }),
                t.clone(),
            ),
            (
                "pull: unauthorized",
                Failure::engine(&EngineError::Refused {
                    status: 0,
                    message: "unauthorized: authentication required".into(),
                }),
                d.clone(),
            ),
            (
                "engine 500",
                Failure::engine(&EngineError::Refused {
                    status: 500,
                    message: "x".into(),
                }),
                t.clone(),
            ),
            (
                "engine 404",
                Failure::engine(&EngineError::NotFound("no such image".into())),
                d.clone(),
            ),
            (
                "a crash",
                Failure::Internal("store: disk full".into()),
                t.clone(),
            ),
            (
                "no room for the pull",
                Failure::NoRoom("no room for app:2: needs ~1.0 GiB".into()),
                t.clone(),
            ),
        ];
        for (name, f, want) in cases {
            assert_eq!(classify(&f), want, "{name}: {f}");
        }
    }
}
