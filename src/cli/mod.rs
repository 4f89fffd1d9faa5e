//! The command line: `stead run` (the agent, or one pass with `--once`),
//! `stead check` (validate intentions and print their digests offline),
//! `stead import` (intentions from a Compose file, [`import`]), and the
//! client commands that talk to a running agent's API ([`client`]).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};

use hyper::Method;

use crate::VERSION;
use crate::agent::{Agent, DockerSocket};
use crate::config::{Config, DEFAULT_CONFIG};
use crate::model::intention::{DocFormat, Intention};
use crate::reconcile::{self, Action};
use client::{Answer, Client, ClientError};

pub mod client;
pub mod import;
pub mod plane;

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
    /// Show the running agent's node and module status.
    Status {
        /// The agent's config file (for its address and token).
        #[arg(long, short, value_name = "FILE")]
        config: Option<PathBuf>,
        /// Print the API's JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// State a module's intention (a TOML or JSON intention file) through the API.
    Apply {
        /// The agent's config file (for its address and token).
        #[arg(long, short, value_name = "FILE")]
        config: Option<PathBuf>,
        /// The intention file.
        file: PathBuf,
    },
    /// Set settings of a module: KEY=VALUE (VALUE read as JSON when it is JSON).
    Set {
        /// The agent's config file (for its address and token).
        #[arg(long, short, value_name = "FILE")]
        config: Option<PathBuf>,
        /// The module.
        module: String,
        /// KEY=VALUE pairs; dotted keys.
        #[arg(required = true)]
        settings: Vec<String>,
    },
    /// Remove settings of a module.
    Unset {
        /// The agent's config file (for its address and token).
        #[arg(long, short, value_name = "FILE")]
        config: Option<PathBuf>,
        /// The module.
        module: String,
        /// Dotted keys.
        #[arg(required = true)]
        keys: Vec<String>,
    },
    /// Delete a module stated through the API (its container is removed).
    Rm {
        /// The agent's config file (for its address and token).
        #[arg(long, short, value_name = "FILE")]
        config: Option<PathBuf>,
        /// The module.
        module: String,
    },
    /// Ask for a module (or every module with an [update] section) to be
    /// reloaded: its newest compatible version landed, with one restart.
    Reload {
        /// The agent's config file (for its address and token).
        #[arg(long, short, value_name = "FILE")]
        config: Option<PathBuf>,
        /// The module; every module with an [update] section when left out.
        module: Option<String>,
        /// Why (required): carried into the request's log.
        #[arg(long, required_unless_present = "cancel")]
        reason: Option<String>,
        /// Wait until the request is done, failed or faulted; exit non-zero
        /// unless done.
        #[arg(long)]
        wait: bool,
        /// Cancel this open request instead: it ends failed, and the module
        /// goes back to what it ran before it.
        #[arg(long, value_name = "ID", conflicts_with_all = ["module", "wait", "reason"])]
        cancel: Option<u64>,
    },
    /// List reload requests.
    Reloads {
        /// The agent's config file (for its address and token).
        #[arg(long, short, value_name = "FILE")]
        config: Option<PathBuf>,
        /// Keep printing as requests move.
        #[arg(long, short)]
        follow: bool,
    },
    /// Fetch the central plane's document now (a nudge: the plane stays
    /// the one source of truth) and say what came of it.
    Sync {
        /// The agent's config file (for its address and token).
        #[arg(long, short, value_name = "FILE")]
        config: Option<PathBuf>,
    },
    /// Print the agent's event log.
    Events {
        /// The agent's config file (for its address and token).
        #[arg(long, short, value_name = "FILE")]
        config: Option<PathBuf>,
        /// Keep printing new events as they come.
        #[arg(long, short)]
        follow: bool,
        /// Start after this sequence number.
        #[arg(long, default_value_t = 0)]
        since: u64,
    },
    /// Make intention files from a Compose file, one per service.
    ///
    /// Keys that cannot be carried are listed on stderr (exit 3); a file
    /// that cannot be imported writes nothing (exit 2). See docs/import.md.
    Import {
        /// Write `<module>.toml` files into this directory (made when
        /// missing) instead of printing them.
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
        /// Overwrite intention files that exist.
        #[arg(long)]
        force: bool,
        /// Copy a config's file into an intention even when it is outside
        /// the Compose file's directory.
        #[arg(long)]
        allow_outside: bool,
        /// The Compose file.
        file: PathBuf,
    },
    /// Publish desired state for the central plane: keys, signing, verifying.
    Plane {
        /// What to do.
        #[command(subcommand)]
        command: plane::PlaneCommand,
    },
}

/// Exit code: the agent refused, with a reason.
pub const EXIT_REFUSED: u8 = 1;
/// Exit code: no agent answers.
pub const EXIT_UNREACHABLE: u8 = 2;
/// Exit code of `stead reload --wait`: the request faulted (the agent
/// retries it; the answer is not known yet).
pub const EXIT_FAULTED: u8 = 3;

fn load_config(path: Option<PathBuf>) -> anyhow::Result<Config> {
    let explicit = path.is_some();
    let path = path.unwrap_or_else(|| PathBuf::from(DEFAULT_CONFIG));
    Ok(Config::load(&path, explicit)?)
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        // The unit's TasksMax is 64: blocking work (file hashing, store
        // transactions) queues for these rather than spawning without end.
        .max_blocking_threads(8)
        // An idle agent keeps no blocking thread (nor the stack it touched)
        // between passes.
        .thread_keep_alive(std::time::Duration::from_secs(1))
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
            // A panic anywhere ends the agent (as the release build's
            // panic = "abort" does) and notes what it was acting on.
            crate::host::panic::install(config.panic_path());
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
        Command::Status { config, json } => client_command(config, |c| status(c, json)),
        Command::Apply { config, file } => {
            let (name, doc) = match read_intention_file(&file) {
                Ok(i) => (i.name.to_string(), i.to_json()),
                Err(e) => {
                    eprintln!("stead: {e}");
                    return Ok(ExitCode::from(EXIT_REFUSED));
                }
            };
            client_command(config, |c| async move {
                let a = c
                    .request(Method::PUT, &format!("/v1/intentions/{name}"), Some(&doc))
                    .await?;
                Ok(report(&a, || {
                    format!(
                        "{name}: revision {} ({})",
                        a.body["revision"],
                        if a.body["changed"] == true {
                            "applied"
                        } else {
                            "unchanged"
                        }
                    )
                }))
            })
        }
        Command::Set {
            config,
            module,
            settings,
        } => {
            let mut patch = serde_json::Map::new();
            for s in &settings {
                match client::parse_assignment(s) {
                    Ok((k, v)) => {
                        patch.insert(k, v);
                    }
                    Err(e) => {
                        eprintln!("stead: {e}");
                        return Ok(ExitCode::from(EXIT_REFUSED));
                    }
                }
            }
            patch_settings(config, module, patch)
        }
        Command::Unset {
            config,
            module,
            keys,
        } => {
            let patch = keys
                .into_iter()
                .map(|k| (k, serde_json::Value::Null))
                .collect();
            patch_settings(config, module, patch)
        }
        Command::Rm { config, module } => client_command(config, |c| async move {
            let a = c
                .request(Method::DELETE, &format!("/v1/intentions/{module}"), None)
                .await?;
            Ok(report(&a, || format!("{module}: deleted")))
        }),
        Command::Events {
            config,
            follow,
            since,
        } => client_command(config, |c| events(c, since, follow)),
        Command::Reload {
            config,
            module,
            reason,
            wait,
            cancel,
        } => client_command(config, |c| async move {
            match cancel {
                Some(id) => cancel_reload(c, id).await,
                None => reload(c, module, reason.unwrap_or_default(), wait).await,
            }
        }),
        Command::Reloads { config, follow } => client_command(config, |c| reloads(c, follow)),
        Command::Sync { config } => client_command(config, sync),
        Command::Plane { command } => plane::run(command),
        Command::Import {
            out,
            force,
            allow_outside,
            file,
        } => Ok(import::run(&file, out.as_deref(), force, allow_outside)),
        Command::Check { config } => {
            let config = load_config(config)?;
            let (lines, rejected) = match reconcile::check::check(&config.intentions_dir) {
                Ok(x) => x,
                // Nothing stated yet (a fresh install): nothing to refuse.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    eprintln!(
                        "stead: the intentions directory {} does not exist: nothing to check",
                        config.intentions_dir.display()
                    );
                    return Ok(ExitCode::SUCCESS);
                }
                Err(e) => {
                    return Err(anyhow::Error::new(e)
                        .context(format!("cannot read {}", config.intentions_dir.display())));
                }
            };
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

/// Reads and checks an intention file (TOML or JSON by its extension),
/// once; a bad file is named by its path, not as "request body".
fn read_intention_file(file: &std::path::Path) -> anyhow::Result<Intention> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
    let format = if file.extension().is_some_and(|e| e == "json") {
        DocFormat::Json
    } else {
        DocFormat::Toml
    };
    Ok(Intention::parse(
        &text,
        format,
        &file.display().to_string(),
    )?)
}

/// Runs a client command: exit 2 when no agent answers.
fn client_command<F, Fut>(config: Option<PathBuf>, f: F) -> anyhow::Result<ExitCode>
where
    F: FnOnce(Client) -> Fut,
    Fut: std::future::Future<Output = Result<ExitCode, ClientError>>,
{
    let config = load_config(config)?;
    let client = Client::for_config(&config);
    match runtime()?.block_on(f(client)) {
        Ok(code) => Ok(code),
        Err(e @ ClientError::Unreachable { .. }) => {
            eprintln!("stead: {e} (is `stead run` running?)");
            Ok(ExitCode::from(EXIT_UNREACHABLE))
        }
        // An agent answered, but not in a way this client reads.
        Err(e @ ClientError::Protocol(_)) => {
            eprintln!("stead: {e}");
            Ok(ExitCode::from(EXIT_REFUSED))
        }
    }
}

/// Prints a success line, or the refusal; exit 0 or 1.
fn report(a: &Answer, ok: impl FnOnce() -> String) -> ExitCode {
    if (200..300).contains(&a.status) {
        println!("{}", ok());
        ExitCode::SUCCESS
    } else {
        eprintln!("stead: refused ({}): {}", a.status, a.error_message());
        ExitCode::from(EXIT_REFUSED)
    }
}

fn patch_settings(
    config: Option<PathBuf>,
    module: String,
    patch: serde_json::Map<String, serde_json::Value>,
) -> anyhow::Result<ExitCode> {
    let body = serde_json::Value::Object(patch);
    client_command(config, |c| async move {
        let a = c
            .request(
                Method::PATCH,
                &format!("/v1/intentions/{module}/settings"),
                Some(&body),
            )
            .await?;
        Ok(report(&a, || {
            format!("{module}: revision {}", a.body["revision"])
        }))
    })
}

async fn sync(c: Client) -> Result<ExitCode, ClientError> {
    let a = c.request(Method::POST, "/v1/plane/sync", None).await?;
    if a.status != 200 && a.status != 202 {
        return Ok(report(&a, String::new));
    }
    let b = &a.body;
    let outcome = b["outcome"].as_str().unwrap_or("?");
    let line = match outcome {
        "adopted" => format!("adopted revision {}", b["revision"]),
        "same" => format!("revision {} held: the same document", b["revision"]),
        "not-modified" => "not modified: the document held is the plane's".into(),
        "refused" => format!(
            "refused ({}): {}",
            b["class"].as_str().unwrap_or("?"),
            b["detail"].as_str().unwrap_or("")
        ),
        "failed" => format!("failed: {}", b["error"].as_str().unwrap_or("")),
        _ => "a poll is under way; see stead status".into(),
    };
    println!("{line}");
    Ok(match outcome {
        "refused" | "failed" => ExitCode::from(1),
        _ => ExitCode::SUCCESS,
    })
}

async fn status(c: Client, json: bool) -> Result<ExitCode, ClientError> {
    let a = c.request(Method::GET, "/v1/status", None).await?;
    if a.status != 200 {
        return Ok(report(&a, String::new));
    }
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&a.body).unwrap_or_default()
        );
        return Ok(ExitCode::SUCCESS);
    }
    let n = &a.body["node"];
    let engine = match n["engine"]["state"].as_str() {
        Some("waiting") => format!(
            "waiting since {} ({})",
            client::rfc3339(n["engine"]["since"].as_u64().unwrap_or(0)),
            n["engine"]["error"].as_str().unwrap_or("")
        ),
        Some(s) => s.to_string(),
        None => "?".into(),
    };
    let last = match n["last_pass"]["at"].as_u64() {
        Some(at) => format!(
            "{} ({:.0} ms)",
            client::rfc3339(at),
            n["last_pass"]["duration_ms"].as_f64().unwrap_or(0.0)
        ),
        None => "none yet".into(),
    };
    println!(
        "node {}  engine {engine}  last pass {last}",
        n["id"].as_str().unwrap_or("?")
    );
    let p = &a.body["plane"];
    if p["configured"] == true {
        let held = match p["held"]["revision"].as_u64() {
            Some(r) if p["held"]["floor"] == false => format!(
                "revision {r} (still run, but no longer the floor: {})",
                p["held"]["revoked"].as_str().unwrap_or("?")
            ),
            Some(r) if p["held"]["expired"] == true => format!("revision {r} (expired; still run)"),
            Some(r) => format!("revision {r}"),
            None => "no document yet".into(),
        };
        let contact = p["last_contact"]
            .as_u64()
            .map_or("never".to_string(), client::rfc3339);
        let mut note = String::new();
        if let Some(r) = p["refusal"]["class"].as_str() {
            note.push_str(&format!(
                "; refused revision {}: {r}",
                p["refusal"]["revision"]
            ));
        }
        if let Some(e) = p["error"].as_str() {
            note.push_str(&format!("; {e}"));
        }
        if let Some(c) = p["clock"].as_str().filter(|c| *c != "ok") {
            note.push_str(&format!("; clock {c}"));
        }
        println!("plane {held}  last contact {contact}{note}");
    }
    println!(
        "{:<24} {:<14} {:>8}  {:<19}  {:<12}  NOTE",
        "MODULE", "STATE", "RESTARTS", "DIGEST", "CONTAINER"
    );
    for m in a.body["modules"].as_array().into_iter().flatten() {
        let short = |v: &serde_json::Value, n: usize| {
            v.as_str()
                .map_or("-".to_string(), |s| s.chars().take(n).collect())
        };
        let mut note = String::new();
        for d in m["inputs_differ"].as_array().into_iter().flatten() {
            note.push_str(&format!("{} moved; ", d["input"].as_str().unwrap_or("?")));
        }
        if let Some(e) = m["last_error"].as_str() {
            note.push_str(e);
            if let Some(at) = m["next_attempt_at"].as_u64() {
                note.push_str(&format!("; next attempt {}", client::rfc3339(at)));
            }
        } else if let Some(act) = m["last_action"]["action"].as_str() {
            note.push_str(&format!(
                "{act} {}",
                client::rfc3339(m["last_action"]["at"].as_u64().unwrap_or(0))
            ));
        }
        println!(
            "{:<24} {:<14} {:>8}  {:<19}  {:<12}  {}",
            m["name"].as_str().unwrap_or("?"),
            m["state"].as_str().unwrap_or("?"),
            m["restart_count"]
                .as_u64()
                .map_or("-".into(), |n| n.to_string()),
            short(&m["desired_digest"], 19),
            short(&m["container_id"], 12),
            note.trim_end_matches("; ")
        );
    }
    Ok(ExitCode::SUCCESS)
}

async fn events(c: Client, mut since: u64, follow: bool) -> Result<ExitCode, ClientError> {
    loop {
        let a = c
            .request(
                Method::GET,
                &format!("/v1/events?since={since}&limit=1000"),
                None,
            )
            .await?;
        if a.status != 200 {
            return Ok(report(&a, String::new));
        }
        for e in a.body["events"].as_array().into_iter().flatten() {
            println!(
                "{:>6} {} {:<24} {:<10} {}",
                e["seq"],
                client::rfc3339(e["at"].as_u64().unwrap_or(0)),
                e["module"].as_str().unwrap_or("-"),
                e["kind"].as_str().unwrap_or("?"),
                e["detail"].as_str().unwrap_or("")
            );
        }
        since = a.body["next"].as_u64().unwrap_or(since);
        if !follow {
            return Ok(ExitCode::SUCCESS);
        }
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    }
}

async fn reload(
    c: Client,
    module: Option<String>,
    reason: String,
    wait: bool,
) -> Result<ExitCode, ClientError> {
    let who = std::env::var("USER").unwrap_or_else(|_| "cli".into());
    let body = serde_json::json!({ "module": module, "reason": reason, "requested_by": who });
    let a = c.request(Method::POST, "/v1/reloads", Some(&body)).await?;
    if a.status != 202 {
        return Ok(report(&a, String::new));
    }
    let id = a.body["id"].as_u64().unwrap_or(0);
    println!("reload {id} requested");
    if !wait {
        return Ok(ExitCode::SUCCESS);
    }
    let mut printed = 0;
    loop {
        let a = c
            .request(Method::GET, &format!("/v1/reloads/{id}"), None)
            .await?;
        if a.status != 200 {
            return Ok(report(&a, String::new));
        }
        let log = a.body["log"].as_array().cloned().unwrap_or_default();
        for l in log.iter().skip(printed) {
            println!(
                "{} {}",
                client::rfc3339(l["at"].as_u64().unwrap_or(0)),
                l["text"].as_str().unwrap_or("")
            );
        }
        printed = printed.max(log.len());
        match a.body["status"].as_str() {
            Some("done") => return Ok(ExitCode::SUCCESS),
            Some("failed") => {
                eprintln!(
                    "stead: reload {id} failed: {}",
                    a.body["failure"].as_str().unwrap_or("")
                );
                return Ok(ExitCode::from(EXIT_REFUSED));
            }
            // Retried by the agent with backoff; the caller is told now.
            Some("faulted") => {
                eprintln!(
                    "stead: reload {id} faulted (the agent retries it with backoff): {}",
                    a.body["failure"].as_str().unwrap_or("")
                );
                return Ok(ExitCode::from(EXIT_FAULTED));
            }
            _ => tokio::time::sleep(std::time::Duration::from_secs(1)).await,
        }
    }
}

async fn cancel_reload(c: Client, id: u64) -> Result<ExitCode, ClientError> {
    let who: String = std::env::var("USER")
        .unwrap_or_else(|_| "cli".into())
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || "._@-".contains(*c))
        .take(64)
        .collect();
    let who = if who.is_empty() { "cli".into() } else { who };
    let a = c
        .request(Method::DELETE, &format!("/v1/reloads/{id}?by={who}"), None)
        .await?;
    Ok(report(&a, || {
        format!(
            "reload {id}: {}",
            a.body["failure"].as_str().unwrap_or("cancelled")
        )
    }))
}

async fn reloads(c: Client, follow: bool) -> Result<ExitCode, ClientError> {
    let mut last = String::new();
    loop {
        let a = c.request(Method::GET, "/v1/reloads", None).await?;
        if a.status != 200 {
            return Ok(report(&a, String::new));
        }
        let mut out = String::new();
        for r in a.body["reloads"].as_array().into_iter().flatten() {
            let items: Vec<String> = r["items"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|i| {
                    format!(
                        "{}: {}",
                        i["module"].as_str().unwrap_or("?"),
                        i["failure"]
                            .as_str()
                            .or(i["decision"].as_str())
                            .unwrap_or("")
                    )
                })
                .collect();
            out.push_str(&format!(
                "{:>4} {} {:<10} {:<24} {} — {}\n",
                r["id"],
                client::rfc3339(r["requested_at"].as_u64().unwrap_or(0)),
                r["status"].as_str().unwrap_or("?"),
                r["module"].as_str().unwrap_or("(every module)"),
                r["reason"].as_str().unwrap_or(""),
                items.join("; ")
            ));
        }
        if out != last {
            print!("{out}");
            if follow {
                println!();
            }
            last = out;
        }
        if !follow {
            return Ok(ExitCode::SUCCESS);
        }
        tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    }
}

fn agent_node<C: crate::agent::Connect>(a: &Agent<C>) -> String {
    a.node_id().to_string()
}
