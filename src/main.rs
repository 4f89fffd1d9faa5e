//! The `stead` binary: parse, set up tracing, run, report the error.

use clap::Parser;

fn main() -> std::process::ExitCode {
    let cli = stead::cli::Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("STEAD_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    match stead::cli::run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("stead: {e:#}");
            std::process::ExitCode::from(1)
        }
    }
}
