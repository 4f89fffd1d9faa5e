//! The `stead-plane` binary: read the command line (clap), run the
//! command, report the error.

use std::process::ExitCode;

use clap::Parser as _;

use stead_plane::args::{Cli, Command};

/// mimalloc, not the C library's allocator: see Cargo.toml.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let command = Cli::parse().into_command();
    stead_host::host::log::init(stead_host::host::log::from_env());
    let result = match command {
        Command::Plane(c) => stead_plane::cli::plane::run(c),
        Command::Import {
            out,
            force,
            options,
            file,
        } => Ok(stead_plane::cli::import::run(
            &file,
            out.as_deref(),
            force,
            &options,
        )),
        Command::Completions(shell) => {
            clap_complete::generate(
                shell,
                &mut <Cli as clap::CommandFactory>::command(),
                "stead-plane",
                &mut std::io::stdout(),
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Man(dir) => stead_plane::cli::man(&<Cli as clap::CommandFactory>::command(), &dir),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("stead-plane: {e}");
            ExitCode::from(1)
        }
    }
}
