//! What can go wrong talking to a registry, typed so that one classifier
//! ([`crate::reload::classify`]) can tell an answer that may clear on its own
//! from one that will not.

use std::time::Duration;

/// Which object a registry call was about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Object {
    /// `GET /v2/`: the API's version check and its auth challenge.
    Ping,
    /// A bearer token from the registry's auth service.
    Token,
    /// A repository's tag list.
    Tags,
    /// A manifest (or index).
    Manifest,
    /// A blob (an image's config).
    Blob,
}

impl Object {
    /// The word for it.
    pub fn as_str(self) -> &'static str {
        match self {
            Object::Ping => "API check",
            Object::Token => "token",
            Object::Tags => "tag list",
            Object::Manifest => "manifest",
            Object::Blob => "blob",
        }
    }
}

/// A registry call that failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
    /// The registry answered with this status.
    #[error("{registry} answered {status} for the {} {what}", object.as_str())]
    Status {
        /// The registry.
        registry: String,
        /// What was asked for.
        object: Object,
        /// Which one (a repository and tag or digest).
        what: String,
        /// The HTTP status.
        status: u16,
        /// What its `Retry-After` asked for, when it did.
        retry_after: Option<Duration>,
    },
    /// No answer in time.
    #[error("{registry}: no answer within {}s ({what})", limit.as_secs())]
    Timeout {
        /// The registry.
        registry: String,
        /// What was asked for.
        what: String,
        /// The limit.
        limit: Duration,
    },
    /// The connection failed or broke: refused, reset, a name that does not
    /// resolve.
    #[error("{registry}: {message}")]
    Connect {
        /// The registry.
        registry: String,
        /// What the system said.
        message: String,
    },
    /// The registry's certificate is not trusted (or TLS is refused).
    #[error("{registry}: TLS: {message}")]
    Tls {
        /// The registry.
        registry: String,
        /// What rustls said.
        message: String,
    },
    /// The credentials were refused.
    #[error("{registry}: credentials refused ({status}) for the {} {what}", object.as_str())]
    Credentials {
        /// The registry.
        registry: String,
        /// What was asked for.
        object: Object,
        /// Which one.
        what: String,
        /// 401 or 403.
        status: u16,
    },
    /// The bytes the registry sent do not hash to the digest they were
    /// asked by.
    #[error("{registry}: the {} {what} does not match its digest (got {got})", object.as_str())]
    DigestMismatch {
        /// The registry.
        registry: String,
        /// What was asked for.
        object: Object,
        /// Which one (its expected digest).
        what: String,
        /// The digest of what came.
        got: String,
    },
    /// An index names no manifest for this machine's platform.
    #[error("{registry}: {what} has no image for {platform} (it has: {offered})")]
    NoPlatform {
        /// The registry.
        registry: String,
        /// The image.
        what: String,
        /// This machine's platform.
        platform: String,
        /// The platforms it has.
        offered: String,
    },
    /// An answer that cannot be read (not the JSON it should be, too
    /// large, an unknown manifest type).
    #[error("{registry}: unreadable {} for {what}: {message}", object.as_str())]
    Malformed {
        /// The registry.
        registry: String,
        /// What was asked for.
        object: Object,
        /// Which one.
        what: String,
        /// What is wrong with it.
        message: String,
    },
    /// The reference names no registry image (a local image ID, a bad
    /// name).
    #[error("{0}")]
    Reference(String),
}
