//! The `stead` binary: parse, set up logging, run, report the error.

use std::io::Write as _;
use std::process::ExitCode;

use stead::cli::args::{Parsed, parse};

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

fn main() -> ExitCode {
    few_malloc_arenas();
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    let command = match parse(&args) {
        Ok(Parsed::Command(c)) => c,
        Ok(Parsed::Help(text)) => return print(&text),
        Ok(Parsed::Version) => return print(&format!("stead {}\n", stead::VERSION)),
        // A usage error: what is wrong and the usage, exit 2.
        Err(e) => {
            let _ = std::io::stderr().write_all(e.0.as_bytes());
            return ExitCode::from(2);
        }
    };
    // The log filter from `STEAD_LOG` (`info`, `debug`,
    // `stead=debug,warn`, …): targets and levels.
    stead::host::log::init(stead::host::log::from_env());
    match stead::cli::run(command) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("stead: {e}");
            ExitCode::from(1)
        }
    }
}

/// Prints a help or the version; a closed stdout is no error.
fn print(text: &str) -> ExitCode {
    let _ = std::io::stdout().write_all(text.as_bytes());
    ExitCode::SUCCESS
}
