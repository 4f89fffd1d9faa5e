//! The command line: `stead run` (the agent, or one pass with `--once`) and
//! `stead check` (validate intentions and print their digests offline).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};

use crate::agent::{Agent, DockerSocket};
use crate::config::{Config, DEFAULT_CONFIG};
use crate::reconcile::{self, Action};

/// The version line: version, commit and target.
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("STEAD_GIT_COMMIT"),
    ", target ",
    env!("STEAD_TARGET"),
    ")"
);

/// stead keeps this node's containers true to what they were told to run.
#[derive(Parser, Debug)]
#[command(name = "stead", version = VERSION, about)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run the agent (or one pass with --once).
    Run {
        /// The agent's config file.
        #[arg(long, short, value_name = "FILE")]
        config: Option<PathBuf>,
        /// Do one pass, print one line per module, and exit.
        #[arg(long)]
        once: bool,
    },
    /// Validate the intentions and print each module's digests without
    /// touching the engine.
    Check {
        /// The agent's config file.
        #[arg(long, short, value_name = "FILE")]
        config: Option<PathBuf>,
    },
}

fn load_config(path: Option<PathBuf>) -> anyhow::Result<Config> {
    let explicit = path.is_some();
    let path = path.unwrap_or_else(|| PathBuf::from(DEFAULT_CONFIG));
    Ok(Config::load(&path, explicit)?)
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = match signal(SignalKind::terminate()) {
        Ok(s) => s,
        Err(e) => {
            tracing::error!("cannot listen for SIGTERM: {e}");
            std::future::pending::<()>().await;
            return;
        }
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    tracing::info!("shutting down");
}

/// Runs a parsed command line; the exit code says whether all was well.
pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Run { config, once } => {
            let config = load_config(config)?;
            let connector = DockerSocket(config.docker_socket.clone());
            let mut agent = Agent::open(config, connector)?;
            let rt = runtime()?;
            if once {
                let report = rt.block_on(agent.once())?;
                let mut clean = true;
                for r in &report.rejected {
                    println!(
                        "{:<24} {:<10} - ({})",
                        r.module.as_ref().map_or("-", |m| m.as_str()),
                        "rejected",
                        r.error
                    );
                    clean = false;
                }
                for m in &report.modules {
                    println!("{m}");
                    clean &= !matches!(m.action, Action::Failed | Action::Held | Action::Conflict);
                }
                Ok(if clean {
                    ExitCode::SUCCESS
                } else {
                    ExitCode::from(1)
                })
            } else {
                tracing::info!(version = VERSION, node = %agent_node(&agent), "stead starting");
                rt.block_on(agent.run(shutdown_signal()))?;
                Ok(ExitCode::SUCCESS)
            }
        }
        Command::Check { config } => {
            let config = load_config(config)?;
            let (lines, rejected) = reconcile::check(&config.intentions_dir)
                .with_context(|| format!("cannot read {}", config.intentions_dir.display()))?;
            let mut clean = rejected.is_empty();
            for r in &rejected {
                println!("rejected  {}", r.error);
            }
            for l in lines {
                match l.result {
                    Ok((digest, inputs)) => {
                        println!(
                            "{:<24} {digest}  image={} (resolved by the engine at run time)",
                            l.module, l.image
                        );
                        for (name, d) in inputs {
                            println!("    {name:<40} {d}");
                        }
                    }
                    Err(e) => {
                        clean = false;
                        println!("{:<24} unresolved  ({e})", l.module);
                    }
                }
            }
            Ok(if clean {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
    }
}

fn agent_node<C: crate::agent::Connect>(a: &Agent<C>) -> String {
    a.node_id().to_string()
}
