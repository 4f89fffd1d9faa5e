//! The `stead` binary: parse, set up logging, run, report the error.

use clap::Parser;

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
    // The log filter from `STEAD_LOG` (`info`, `debug`,
    // `stead=debug,warn`, …): targets and levels.
    stead::host::log::init(stead::host::log::from_env());
    match stead::cli::run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("stead: {e}");
            std::process::ExitCode::from(1)
        }
    }
}
