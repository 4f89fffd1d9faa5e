//! stead's pure core: what the device agent and the operator's tool both
//! decide by. Names and values, intentions and the runtime field table,
//! spec digests, sealing (age), fleet and rollout rules, release
//! statements and the launcher's rule ([`model`]). No I/O, no clock, no
//! async runtime: every function here is a function of its arguments.

pub mod failure;
pub mod model;
pub mod plane;
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

/// The commit this binary was built from (12 hex digits, or `unknown`
/// outside a git checkout).
pub const COMMIT: &str = env!("STEAD_GIT_COMMIT");

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
