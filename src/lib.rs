//! stead: an agent for one edge node that keeps the node's containers true
//! to what they were told to run.
//!
//! Data flows one way: desired state comes in through the [`intake`] (the
//! intentions directory, the HTTP API) into the [`store`]; every pass of
//! the [`agent`] loop, the [`reconcile`]r resolves it with the pure
//! [`model`] against the files on the [`host`], plans against what the
//! [`engine`] shows, acts, and records what it did in the store and the
//! [`status`]. The [`api`] and the [`cli`] only read status and hand writes
//! to the intake.

pub mod agent;
pub mod api;
pub mod cli;
pub mod config;
pub mod engine;
pub mod host;
pub mod intake;
pub mod model;
pub mod plane;
pub mod reconcile;
pub mod registry;
pub mod reload;
pub mod status;
pub mod store;

/// The version line: version, commit and target.
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("STEAD_GIT_COMMIT"),
    ", target ",
    env!("STEAD_TARGET"),
    ")"
);
