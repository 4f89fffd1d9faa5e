//! The `stead` binary: parse, set up logging, run, report the error.

use clap::Parser;
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::prelude::*;

/// The log filter from `STEAD_LOG` (`info`, `debug`, `stead=debug,warn`, …):
/// targets and levels, without regular expressions (they cost a quarter of
/// a megabyte on a device). A filter that does not parse falls back to
/// `info` and says so.
fn log_filter() -> Targets {
    let default = Targets::new().with_default(LevelFilter::INFO);
    match std::env::var("STEAD_LOG") {
        Ok(s) if !s.trim().is_empty() => s.parse().unwrap_or_else(|e| {
            eprintln!("stead: STEAD_LOG={s:?} is not a log filter ({e}); logging at info");
            default
        }),
        _ => default,
    }
}

/// glibc's allocator gives each thread that allocates an arena of its own
/// (up to eight per core) and keeps what was freed in it: the API's and
/// the blocking threads' arenas held 50 MB more than the heap under eight
/// readers of a 1000-module node, over the unit's `MemoryMax=64M`. One
/// arena is enough for the agent's few busy threads. musl's allocator
/// (the shipped static binaries) has no per-thread arenas.
#[cfg(target_env = "gnu")]
fn few_malloc_arenas() {
    // SAFETY: mallopt only sets an allocator parameter; it is called
    // before any other thread exists.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
}

#[cfg(not(target_env = "gnu"))]
fn few_malloc_arenas() {}

fn main() -> std::process::ExitCode {
    few_malloc_arenas();
    let cli = stead::cli::Cli::parse();
    tracing_subscriber::registry()
        .with(tracing_subscriber::fmt::layer().with_writer(std::io::stderr))
        .with(log_filter())
        .init();
    match stead::cli::run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("stead: {}", chain(&e));
            std::process::ExitCode::from(1)
        }
    }
}

/// The error and its causes on one line, each cause said once: most of
/// stead's errors already name their cause in their own message.
fn chain(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if !out.contains(&text) {
            if !out.is_empty() {
                out.push_str(": ");
            }
            out.push_str(&text);
        }
    }
    out
}
