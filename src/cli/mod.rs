//! The command line: `stead run` (the agent, or one pass with `--once`),
//! `stead check` (validate intentions and print their digests offline),
//! and the client commands that talk to a running agent's API
//! ([`client`]). The operator's commands (`plane …`, `import`) are the
//! operator's tool's, `stead-plane`: asked here, they say so
//! ([`Command::Moved`]).

use crate::model::sort::Insert as _;
use std::path::PathBuf;
use std::process::ExitCode;

use crate::cli::failure::Context as _;

use hyper::Method;

use crate::VERSION;
use crate::agent::{Agent, DockerSocket};
use crate::config::{Config, DEFAULT_CONFIG};
use crate::model::intention::{DocFormat, Intention};
use crate::model::time::format_rfc3339;
use crate::reconcile::{self, Action};
use client::{Answer, Client, ClientError, Fields};

pub mod args;
pub mod client;

pub use stead_core::failure;

/// A command line, read by [`args::parse`]; each field is the option or
/// argument of the same name (its help is in `args.rs`'s table).
#[derive(Debug, PartialEq)]
pub enum Command {
    /// `stead run [--config FILE] [--once]`.
    Run { config: Option<PathBuf>, once: bool },
    /// `stead check`: the intentions validated offline.
    Check { config: Option<PathBuf> },
    /// `stead status [--json]`.
    Status { config: Option<PathBuf>, json: bool },
    /// `stead apply FILE`.
    Apply {
        config: Option<PathBuf>,
        file: PathBuf,
    },
    /// `stead set MODULE KEY=VALUE...`.
    Set {
        config: Option<PathBuf>,
        module: String,
        settings: Vec<String>,
    },
    /// `stead unset MODULE KEY...`.
    Unset {
        config: Option<PathBuf>,
        module: String,
        keys: Vec<String>,
    },
    /// `stead rm MODULE`.
    Rm {
        config: Option<PathBuf>,
        module: String,
    },
    /// `stead reload [MODULE] --reason WHY [--wait]`, or `--cancel ID`
    /// alone (then `reason` is `None`).
    Reload {
        config: Option<PathBuf>,
        module: Option<String>,
        reason: Option<String>,
        wait: bool,
        cancel: Option<u64>,
    },
    /// `stead reloads [--follow]`.
    Reloads {
        config: Option<PathBuf>,
        follow: bool,
    },
    /// `stead sync`.
    Sync { config: Option<PathBuf> },
    /// `stead agent [--json]`.
    Agent { config: Option<PathBuf>, json: bool },
    /// `stead self-update STATEMENT [--downgrade] [--wait]`.
    SelfUpdate {
        config: Option<PathBuf>,
        statement: String,
        downgrade: bool,
        wait: bool,
    },
    /// `stead images ...`.
    Images { command: ImagesCommand },
    /// `stead events [--follow] [--since N]`.
    Events {
        config: Option<PathBuf>,
        follow: bool,
        since: u64,
    },
    /// `stead plane …` or `stead import …`: an operator's command, which
    /// the operator's tool (`stead-plane`) runs; the words given.
    Moved { words: Vec<String> },
}

/// What `stead images` does.
#[derive(Debug, PartialEq)]
pub enum ImagesCommand {
    /// `stead images prune [--dry-run]`.
    Prune {
        config: Option<PathBuf>,
        dry_run: bool,
    },
}

/// What `stead plane …` and `stead import …` say: the same words, to
/// the operator's tool.
pub fn moved(words: &[String]) -> String {
    let to = match words.split_first() {
        Some((first, rest)) if first == "plane" => rest.join(" "),
        _ => words.join(" "),
    };
    format!(
        "stead: `stead {}` is the operator's tool's: run `stead-plane {to}` (a binary and \
         package of its own; the device's stead carries the agent and its client only)",
        words.join(" ")
    )
}

/// Exit code: the agent refused, with a reason.
pub const EXIT_REFUSED: u8 = 1;
/// Exit code: no agent answers.
pub const EXIT_UNREACHABLE: u8 = 2;
/// Exit code of `stead reload --wait`: the request faulted (the agent
/// retries it; the answer is not known yet).
pub const EXIT_FAULTED: u8 = 3;

fn load_config(path: Option<PathBuf>) -> crate::cli::failure::Result<Config> {
    let explicit = path.is_some();
    let path = path.unwrap_or_else(|| PathBuf::from(DEFAULT_CONFIG));
    Ok(Config::load(&path, explicit)?)
}

fn runtime() -> crate::cli::failure::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        // The unit's TasksMax is 64: blocking work (file hashing, store
        // transactions) queues for these rather than spawning without end.
        .max_blocking_threads(8)
        // An idle agent keeps no blocking thread (nor the stack it touched)
        // between passes. Threads kept past a heartbeat cost 90 KB at 200
        // modules and saved no CPU measurable above the noise.
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
pub fn run(command: Command) -> crate::cli::failure::Result<ExitCode> {
    match command {
        Command::Run { config, once } => {
            let config = load_config(config)?;
            // A panic anywhere ends the agent (as the release build's
            // panic = "abort" does) and notes what it was acting on.
            crate::host::panic::install(config.panic_path());
            let connector = DockerSocket(config.docker_socket.clone());
            let mut agent = Agent::open(config, connector).inspect_err(|e| {
                // A candidate that cannot even open says why, for the
                // version that runs after it.
                if let Some(l) = crate::host::launch::Launched::from_env() {
                    if let crate::model::launch::Slot::Candidate(v) = &l.slot {
                        l.leave_last_words(v, &format!("cannot start: {e}"));
                    }
                }
            })?;
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
                if agent.restart_asked() {
                    let launched = agent.launched().cloned();
                    drop(agent);
                    drop(rt);
                    return Ok(crate::host::launch::restart(launched.as_ref()));
                }
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
                let Some((revision, changed)) = written(&a, "PUT /v1/intentions")? else {
                    return Ok(report(&a, String::new));
                };
                Ok(report(&a, || {
                    format!(
                        "{name}: revision {revision} ({})",
                        if changed { "applied" } else { "unchanged" }
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
                .into_object();
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
        Command::Agent { config, json } => client_command(config, |c| agent_show(c, json)),
        Command::SelfUpdate {
            config,
            statement,
            downgrade,
            wait,
        } => self_update(config, &statement, downgrade, wait),
        Command::Images {
            command: ImagesCommand::Prune { config, dry_run },
        } => client_command(config, move |c| prune(c, dry_run)),
        Command::Moved { words } => {
            eprintln!("{}", moved(&words));
            Ok(ExitCode::from(2))
        }
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
                    return Err(e)
                        .context(format!("cannot read {}", config.intentions_dir.display()));
                }
            };
            let mut clean = rejected.is_empty();
            for r in &rejected {
                println!("rejected  {}", r.error);
            }
            for l in lines {
                match l.result {
                    Ok((digest, inputs)) => {
                        match digest {
                            Some(digest) => println!(
                                "{:<24} {digest}  image={} (resolved by the engine at run time)",
                                l.module, l.image
                            ),
                            None => println!(
                                "{:<24} sealed ({}): opened and digested by the agent on its device  image={}",
                                l.module,
                                l.sealed.join(", "),
                                l.image
                            ),
                        }
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
fn read_intention_file(file: &std::path::Path) -> crate::cli::failure::Result<Intention> {
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
fn client_command<F, Fut>(config: Option<PathBuf>, f: F) -> crate::cli::failure::Result<ExitCode>
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

/// `stead agent`: what runs, the launcher's state, the updates.
async fn agent_show(c: Client, json: bool) -> Result<ExitCode, ClientError> {
    show(&c, "/v1/agent", json).await
}

/// A GET a person reads, printed: as the agent writes it for a person
/// ([`crate::views::text`]), or its JSON with `json` (and from an agent
/// that has no text of it).
async fn show(c: &Client, path: &str, json: bool) -> Result<ExitCode, ClientError> {
    let a = if json {
        c.request(Method::GET, path, None).await?
    } else {
        c.text(path).await?
    };
    if a.status != 200 {
        return Ok(report(&a, String::new));
    }
    match &a.text {
        Some(t) => print!("{t}"),
        None => println!(
            "{}",
            serde_json::to_string_pretty(&a.body).unwrap_or_default()
        ),
    }
    Ok(ExitCode::SUCCESS)
}

/// `stead self-update`: files the update, then (with `--wait`) follows it
/// through the agent's restart until it ends.
fn self_update(
    config: Option<PathBuf>,
    statement: &str,
    downgrade: bool,
    wait: bool,
) -> crate::cli::failure::Result<ExitCode> {
    let body = if statement.starts_with("http://") || statement.starts_with("https://") {
        serde_json::json!({ "url": statement, "downgrade": downgrade })
    } else {
        let bytes = crate::host::files::read_regular(
            std::path::Path::new(statement),
            crate::model::release::MAX_STATEMENT as u64,
        )
        .with_context(|| format!("cannot read the statement {statement}"))?;
        let envelope: serde_json::Value = serde_json::from_slice(&bytes)
            .with_context(|| format!("{statement} is not a JSON release statement"))?;
        serde_json::json!({ "statement": envelope, "downgrade": downgrade })
    };
    let config = load_config(config)?;
    let rt = runtime()?;
    let filed = rt.block_on(async {
        let a = Client::for_config(&config)
            .request(Method::POST, "/v1/agent/update", Some(&body))
            .await?;
        Ok::<_, ClientError>(a)
    });
    let a = match filed {
        Ok(a) => a,
        Err(e) => {
            eprintln!("stead: {e} (is `stead run` running?)");
            return Ok(ExitCode::from(EXIT_UNREACHABLE));
        }
    };
    if a.status == 200 {
        let running = a.body["running"].as_str().unwrap_or("it");
        println!("{running} runs already: nothing to do");
        return Ok(ExitCode::SUCCESS);
    }
    if a.status != 202 {
        return Ok(report(&a, String::new));
    }
    let filed = Fields::of("POST /v1/agent/update", &a.body);
    let (id, version) = match filed
        .u64("id")
        .and_then(|id| Ok((id, filed.str("version")?)))
    {
        Ok(u) => u,
        Err(e) => {
            eprintln!("stead: {e}");
            return Ok(ExitCode::from(EXIT_REFUSED));
        }
    };
    println!("update {id} to {version} requested");
    if !wait {
        return Ok(ExitCode::SUCCESS);
    }
    // Through the restart: the agent is away for a moment (and may come
    // back on another port when it chooses its own), so the client is
    // made again from the config each time.
    let mut printed = 0;
    let deadline =
        std::time::Instant::now() + config.confirm_window + std::time::Duration::from_secs(600);
    loop {
        let got = rt.block_on(async {
            Client::for_config(&config)
                .request(Method::GET, "/v1/agent", None)
                .await
        });
        if let Ok(a) = got
            .as_ref()
            .map_err(|_| ())
            .and_then(|a| (a.status == 200).then_some(a).ok_or(()))
        {
            match update_progress(&a.body, id, &mut printed) {
                Ok(None) => {}
                Ok(Some(code)) => return Ok(code),
                Err(e) => {
                    eprintln!("stead: {e}");
                    return Ok(ExitCode::from(EXIT_REFUSED));
                }
            }
        }
        if std::time::Instant::now() > deadline {
            eprintln!("stead: update {id} has not ended; `stead agent` shows where it stands");
            return Ok(ExitCode::from(EXIT_FAULTED));
        }
        std::thread::sleep(std::time::Duration::from_secs(1));
    }
}

/// Prints the log lines of update `id` in `GET /v1/agent`'s answer past
/// the `printed` first, and its end when it ended (`Some` exit code).
fn update_progress(
    agent: &serde_json::Value,
    id: u64,
    printed: &mut usize,
) -> Result<Option<ExitCode>, ClientError> {
    let agent = Fields::of("GET /v1/agent", agent);
    let Some(r) = agent
        .list("updates")?
        .into_iter()
        .find(|r| r.u64("id").is_ok_and(|i| i == id))
    else {
        return Ok(None);
    };
    let log = r.list("log")?;
    for l in log.iter().skip(*printed) {
        println!("{} {}", format_rfc3339(l.u64("at")?), l.str("line")?);
    }
    *printed = (*printed).max(log.len());
    let failure = r.opt_str("failure")?.unwrap_or("");
    Ok(match r.str("state")? {
        "done" => Some(ExitCode::SUCCESS),
        "failed" => {
            eprintln!("stead: update {id} failed: {failure}");
            Some(ExitCode::from(EXIT_REFUSED))
        }
        "faulted" => {
            eprintln!("stead: update {id} faulted (the agent retries it with backoff): {failure}");
            Some(ExitCode::from(EXIT_FAULTED))
        }
        _ => None,
    })
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
) -> crate::cli::failure::Result<ExitCode> {
    let body = serde_json::Value::Object(patch);
    client_command(config, |c| async move {
        let a = c
            .request(
                Method::PATCH,
                &format!("/v1/intentions/{module}/settings"),
                Some(&body),
            )
            .await?;
        let Some((revision, _)) = written(&a, "PATCH /v1/intentions/{name}/settings")? else {
            return Ok(report(&a, String::new));
        };
        Ok(report(&a, || format!("{module}: revision {revision}")))
    })
}

/// The revision of the intention a write wrote and whether it changed,
/// when it was written (2xx); `None` for a refusal, which [`report`] says.
fn written(a: &Answer, endpoint: &str) -> Result<Option<(u64, bool)>, ClientError> {
    if (200..300).contains(&a.status) {
        let w = Fields::of(endpoint, &a.body);
        Ok(Some((w.u64("revision")?, w.bool("changed")?)))
    } else {
        Ok(None)
    }
}

async fn prune(c: Client, dry_run: bool) -> Result<ExitCode, ClientError> {
    let path = format!("/v1/images/prune?dry_run={dry_run}");
    let a = c.request(Method::POST, &path, None).await?;
    if a.status != 200 {
        return Ok(report(&a, String::new));
    }
    let out = Fields::of("POST /v1/images/prune", &a.body);
    print!("{}", prune_text(&out)?);
    Ok(if out.list("failed")?.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_REFUSED)
    })
}

/// What `stead images prune` prints: a line per image, what it came to.
fn prune_text(p: &Fields) -> Result<String, ClientError> {
    use crate::model::disk::human;
    let dry_run = p.bool("dry_run")?;
    let gone = if dry_run { "would remove" } else { "removed" };
    let mut o = String::new();
    let mut line = |what: &str, i: &Fields| -> Result<u64, ClientError> {
        let id = i.str("id")?;
        let id = id.strip_prefix("sha256:").unwrap_or(id);
        let name = i
            .get("names")
            .and_then(|n| n.get(0))
            .and_then(|n| n.as_str())
            .unwrap_or("<none>");
        let size = i.u64("size_bytes")?;
        o.push_str(&format!(
            "{what:<13}{:<40} {:<13} {:>10}  {}\n",
            name,
            id.get(..12).unwrap_or(id),
            human(size),
            i.str("why")?
        ));
        Ok(size)
    };
    let removed = p.list("removed")?;
    let mut total = 0;
    for i in &removed {
        total += line(gone, i)?;
    }
    for i in &p.list("failed")? {
        line("not removed", i)?;
    }
    for i in &p.list("kept")? {
        line("kept", i)?;
    }
    o.push_str(&format!(
        "{} {} image(s), {}\n",
        if dry_run {
            "would reclaim"
        } else {
            "reclaimed"
        },
        removed.len(),
        human(total)
    ));
    Ok(o)
}

async fn sync(c: Client) -> Result<ExitCode, ClientError> {
    let a = c.request(Method::POST, "/v1/plane/sync", None).await?;
    if a.status != 200 && a.status != 202 {
        return Ok(report(&a, String::new));
    }
    let outcome = Fields::of("POST /v1/plane/sync", &a.body);
    println!("{}", sync_line(&outcome)?);
    Ok(match outcome.str("outcome")? {
        "refused" | "failed" => ExitCode::from(1),
        _ => ExitCode::SUCCESS,
    })
}

/// What `stead sync` prints for what the poll did.
fn sync_line(o: &Fields) -> Result<String, ClientError> {
    Ok(match o.str("outcome")? {
        "adopted" => format!("adopted revision {}", o.u64("revision")?),
        "same" => format!("revision {} held: the same document", o.u64("revision")?),
        "not-modified" => "not modified: the document held is the plane's".into(),
        "refused" => format!("refused ({}): {}", o.str("class")?, o.str("detail")?),
        "failed" => format!("failed: {}", o.str("error")?),
        "under-way" => "a poll is under way; see stead status".into(),
        other => other.to_string(),
    })
}

async fn status(c: Client, json: bool) -> Result<ExitCode, ClientError> {
    show(&c, "/v1/status", json).await
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
        let page = Fields::of("GET /v1/events", &a.body);
        for e in page.list("events")? {
            println!("{}", event_line(&e)?);
        }
        since = page.u64("next")?;
        if !follow {
            return Ok(ExitCode::SUCCESS);
        }
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    }
}

/// What `stead events` prints for an event.
fn event_line(e: &Fields) -> Result<String, ClientError> {
    Ok(format!(
        "{:>6} {} {:<24} {:<10} {}",
        e.u64("seq")?,
        format_rfc3339(e.u64("at")?),
        e.opt_str("module")?.unwrap_or("-"),
        e.str("kind")?,
        e.str("detail")?
    ))
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
    let id = Fields::of("POST /v1/reloads", &a.body).u64("id")?;
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
        let endpoint = format!("GET /v1/reloads/{id}");
        let r = Fields::of(&endpoint, &a.body);
        let log = r.list("log")?;
        for l in log.iter().skip(printed) {
            println!("{} {}", format_rfc3339(l.u64("at")?), l.str("text")?);
        }
        printed = printed.max(log.len());
        let failure = r.opt_str("failure")?.unwrap_or("");
        match r.str("status")? {
            "done" => return Ok(ExitCode::SUCCESS),
            "failed" => {
                eprintln!("stead: reload {id} failed: {failure}");
                return Ok(ExitCode::from(EXIT_REFUSED));
            }
            // Retried by the agent with backoff; the caller is told now.
            "faulted" => {
                eprintln!(
                    "stead: reload {id} faulted (the agent retries it with backoff): {failure}"
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
    let failure = if (200..300).contains(&a.status) {
        let endpoint = format!("DELETE /v1/reloads/{id}");
        Fields::of(&endpoint, &a.body)
            .opt_str("failure")?
            .map(str::to_string)
    } else {
        None
    };
    Ok(report(&a, || {
        format!("reload {id}: {}", failure.as_deref().unwrap_or("cancelled"))
    }))
}

async fn reloads(c: Client, follow: bool) -> Result<ExitCode, ClientError> {
    let mut last = String::new();
    loop {
        let a = c.text("/v1/reloads").await?;
        if a.status != 200 {
            return Ok(report(&a, String::new));
        }
        let out = match &a.text {
            Some(t) => t.clone(),
            None => serde_json::to_string_pretty(&a.body).unwrap_or_default() + "\n",
        };
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

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(json: &str) -> serde_json::Value {
        serde_json::from_str(json).unwrap()
    }

    fn view(plane: Option<crate::plane::sync::PlaneStatus>) -> crate::views::StatusView {
        use crate::views::{ModuleView, NodeView, fixtures};
        let [n, _] = fixtures::nodes();
        let h = plane.map(|p| crate::api::PlaneHandle {
            status: std::sync::Arc::new(std::sync::Mutex::new(p)),
            nudge: tokio::sync::mpsc::channel(1).0,
        });
        crate::views::StatusView {
            agent: Some(fixtures::agent_status()),
            modules: fixtures::board().values().map(ModuleView::from).collect(),
            node: NodeView::new("edge-1", &n, std::time::Duration::from_secs(30)),
            plane: crate::api::plane::plane_view(h.as_ref()),
        }
    }

    #[test]
    fn the_status_table_prints_every_field_it_reads() {
        let [full, bare] = crate::plane::fixtures::planes();
        let got = crate::views::text::status(&view(Some(full)));
        let want = "\
node edge-1  engine waiting since 1970-01-01T00:01:40Z (gone)  last pass 1970-01-01T00:03:20Z (1500 ms)
stead 0.7.1 (candidate)  previous 0.6.0  candidate 0.7.1 (started 2 times)  update 4 to 0.7.1: confirming  given up: 0.7.0 (started 3 times and never confirmed)
plane revision 9 (still run, but no longer the floor: no key trusted now signed it)  last contact 2023-11-14T22:16:40Z; refused revision 8: rollback; HTTP 503; clock behind
  group eu revision 4; rollout waiting until 2023-11-14T23:13:20Z (its turn), running revision 3
  group cameras revision 2; rollout taken (canary); group cameras: no document at http://plane/groups/cameras/desired.json (HTTP 404)
disk pressure  /var/lib/docker (images, store) 2.0 GiB free of 16.0 GiB; logs at most 30.0 MiB
MODULE                   STATE          RESTARTS  DIGEST               CONTAINER     NOTE
db                       pending               -  -                    -             
web                      crash-looping         4  sha256:b60b935389f7  c0ffee        env moved; it keeps restarting; next attempt 2023-11-14T22:28:20Z
";
        assert_eq!(got, want);
        let bare = crate::views::text::status(&view(Some(bare)));
        assert!(
            bare.contains("plane no document yet  last contact never\n"),
            "{bare}"
        );
        assert!(!crate::views::text::status(&view(None)).contains("plane "));
    }

    #[test]
    fn a_module_without_an_error_shows_its_last_action() {
        let mut v = view(None);
        v.modules[1].last_error = None;
        v.modules[1].inputs_differ.clear();
        let got = crate::views::text::status(&v);
        assert!(got.contains("  recreated 2023-11-14T22:14:10Z\n"), "{got}");
    }

    #[test]
    fn sync_says_what_the_poll_did() {
        // (the answer, what `stead sync` prints)
        #[rustfmt::skip]
        let cases = [
            (r#"{"outcome":"refused","class":"rollback","detail":"older","revision":2}"#, "refused (rollback): older"),
            (r#"{"outcome":"adopted","revision":3}"#, "adopted revision 3"),
            (r#"{"outcome":"same","revision":3}"#, "revision 3 held: the same document"),
            (r#"{"outcome":"not-modified"}"#, "not modified: the document held is the plane's"),
            (r#"{"outcome":"failed","error":"HTTP 503","retry_after_secs":null}"#, "failed: HTTP 503"),
            (r#"{"outcome":"under-way"}"#, "a poll is under way; see stead status"),
        ];
        for (json, want) in cases {
            let v = fields(json);
            assert_eq!(sync_line(&Fields::of("s", &v)).unwrap(), want, "{json}");
        }
    }

    #[test]
    fn the_lines_are_read_from_the_views_the_agent_writes() {
        // The JSON the agent writes, read by the fields the CLI prints.
        let refused = crate::views::OutcomeView::Refused {
            class: crate::plane::RefusalClass::Rollback,
            detail: "older".into(),
            revision: None,
        };
        let v = serde_json::to_value(&refused).unwrap();
        assert_eq!(
            sync_line(&Fields::of("s", &v)).unwrap(),
            "refused (rollback): older"
        );
        let e = crate::store::Event {
            seq: 7,
            at: 60,
            module: None,
            kind: crate::store::EventKind::Created,
            detail: "made".into(),
        };
        let v = serde_json::to_value(&e).unwrap();
        assert_eq!(
            event_line(&Fields::of("e", &v)).unwrap(),
            "     7 1970-01-01T00:01:00Z -                        created    made"
        );
        let pruned = crate::model::disk::Pruned {
            dry_run: true,
            trigger: "asked".into(),
            reclaimed_bytes: 0,
            removed: vec![crate::model::disk::ImageLine {
                id: "sha256:0123456789abcdef".into(),
                names: vec!["busybox:1".into()],
                size_bytes: 2048,
                why: "not used".into(),
            }],
            failed: vec![],
            kept: vec![],
        };
        let v = serde_json::to_value(&pruned).unwrap();
        assert_eq!(
            prune_text(&Fields::of("p", &v)).unwrap(),
            "would remove busybox:1                                0123456789ab     2.0 KiB  not used\nwould reclaim 1 image(s), 2.0 KiB\n"
        );
    }

    #[test]
    fn a_followed_update_prints_its_new_lines_and_ends_with_its_state() {
        use crate::views::agent::{AgentUpdateView, LogLine};
        let update = |state: &str, lines: u64| AgentUpdateView {
            attempt: 0,
            downgrade: false,
            failure: (state == "failed").then(|| "no".to_string()),
            finished_at: None,
            from: "0.6.0".into(),
            id: 4,
            landed: false,
            log: (0..lines)
                .map(|i| LogLine {
                    at: i,
                    line: format!("step {i}"),
                })
                .collect(),
            requested_at: 0,
            requested_by: "cli".into(),
            restart_requested_at: None,
            state: state.into(),
            version: "0.7.0".into(),
        };
        let agent = |u: AgentUpdateView| serde_json::json!({ "updates": [u] });
        let mut printed = 0;
        // (the update as the agent shows it, the exit code it ends with)
        let cases = [
            (update("landing", 2), None),
            (update("confirming", 3), None),
            (update("done", 4), Some(ExitCode::SUCCESS)),
            (update("failed", 4), Some(ExitCode::from(EXIT_REFUSED))),
            (update("faulted", 4), Some(ExitCode::from(EXIT_FAULTED))),
        ];
        for (u, want) in cases {
            let state = u.state.clone();
            let got = update_progress(&agent(u), 4, &mut printed).unwrap();
            assert_eq!(got, want, "{state}");
        }
        assert_eq!(printed, 4, "each line printed once");
        // Another update's id: not this one's end.
        assert_eq!(
            update_progress(&agent(update("done", 1)), 5, &mut printed).unwrap(),
            None
        );
        let e = update_progress(&serde_json::json!({}), 4, &mut printed).unwrap_err();
        assert!(
            e.to_string()
                .contains("GET /v1/agent: updates is not an array"),
            "{e}"
        );
    }

    #[test]
    fn a_missing_or_mistyped_field_names_the_endpoint_and_the_field() {
        // (the answer, the error)
        #[rustfmt::skip]
        let cases = [
            (r#"{"outcome":"adopted"}"#, "POST /v1/plane/sync: revision is not a whole number"),
            (r#"{"outcome":"adopted","revision":"3"}"#, "POST /v1/plane/sync: revision is not a whole number"),
            (r#"{"revision":3}"#, "POST /v1/plane/sync: outcome is not a string"),
            (r#"{"outcome":"refused","class":null,"detail":"x"}"#, "POST /v1/plane/sync: class is not a string"),
        ];
        for (json, want) in cases {
            let v = fields(json);
            let e = sync_line(&Fields::of("POST /v1/plane/sync", &v)).unwrap_err();
            assert_eq!(
                e.to_string(),
                format!("unreadable answer from the agent: {want}"),
                "{json}"
            );
        }
    }
}
