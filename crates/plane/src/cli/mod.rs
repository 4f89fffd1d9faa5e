//! The operator's commands: `keygen`, `sign`, `verify`, `release`
//! ([`plane`]); `publish`, `status`, `rollout watch` ([`fleet`]);
//! `enroll`, `seal` ([`devices`]); `exposure` ([`exposure`]); `root init|sign|verify` ([`trust`]);
//! what they wrote put into an S3 bucket (`--upload`, [`upload`]);
//! `import` ([`import`]); long runs show their [`progress`] on a
//! terminal. Each reads its typed arguments and returns the
//! exit code; the command line itself is `src/main.rs`'s (clap).

pub mod chunks;
pub mod devices;
pub mod exposure;
pub mod fleet;
pub mod import;
pub mod plane;
pub mod progress;
pub mod registry;
pub mod trust;
pub mod upload;

pub use stead_core::failure;

/// Exit code: refused, with a reason (what was given is wrong, or the
/// site is not as it must be); nothing was written.
pub const EXIT_REFUSED: u8 = 1;

/// Writes the manual pages into `dir` (made when missing): `stead-plane.1`
/// and one per verb (`stead-plane-publish.1`, `stead-plane-root-init.1`,
/// …), made from the command line's own types.
pub fn man(cli: &clap::Command, dir: &std::path::Path) -> failure::Result<std::process::ExitCode> {
    use failure::Context as _;
    std::fs::create_dir_all(dir).with_context(|| format!("cannot make {}", dir.display()))?;
    clap_mangen::generate_to(cli.clone(), dir)
        .with_context(|| format!("cannot write the manual pages into {}", dir.display()))?;
    Ok(std::process::ExitCode::SUCCESS)
}
