//! stead: an agent for one edge node that keeps the node's containers true
//! to what they were told to run.
//!
//! Data flows one way: desired state comes in through the [`intake`] (the
//! intentions directory, the HTTP API) into the [`store`]; every pass of
//! the [`agent`] loop, the [`reconcile`]r resolves it with the pure
//! [`model`] against the files on the [`host`], plans against what the
//! [`engine`] shows, acts, and records what it did in the store and the
//! [`status`]. The [`api`] and the [`cli`] only read status and hand writes
//! to the intake; the [`views`] are their wire formats as types, one per
//! format, shared by the API, the CLI and the plane report.

pub mod agent;
pub mod api;
pub mod cli;
pub mod config;
pub mod engine;
pub mod host;
#[cfg(feature = "import")]
pub mod import;
pub mod intake;
pub mod model;
pub mod net;
pub mod plane;
pub mod reconcile;
pub mod registry;
pub mod reload;
pub mod status;
pub mod store;
pub mod update;
pub mod views;

/// When this binary was built (its commit's time), seconds since the
/// epoch: no clock reading is taken to be earlier.
pub const BUILD_TIME: u64 = const_u64(env!("STEAD_BUILD_TIME"));

const fn const_u64(s: &str) -> u64 {
    let b = s.as_bytes();
    let mut i = 0;
    let mut n: u64 = 0;
    while i < b.len() {
        assert!(b[i].is_ascii_digit(), "STEAD_BUILD_TIME is not a number");
        n = n * 10 + (b[i] - b'0') as u64;
        i += 1;
    }
    n
}

/// The target triple this binary was built for: which binary of a
/// release of stead is this one's.
pub const TARGET: &str = env!("STEAD_TARGET");

/// This agent's version: the first word of [`VERSION`], so that every
/// place that says it says the same.
pub fn version_number() -> &'static str {
    VERSION.split(' ').next().unwrap_or(VERSION)
}

/// The version line: version, commit and target.
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("STEAD_GIT_COMMIT"),
    ", target ",
    env!("STEAD_TARGET"),
    ")"
);
