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
use crate::model::reload::{Request, Status};
use crate::model::time::format_rfc3339;
use crate::reconcile::{self, Action};
use crate::views::{
    EngineView, EventsView, FiledView, OutcomeView, PlaneDetail, ReloadsView, StatusView,
};
use client::{Answer, Client, ClientError};

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
                let Some(w) = written(&a, "PUT /v1/intentions")? else {
                    return Ok(report(&a, String::new));
                };
                Ok(report(&a, || {
                    format!(
                        "{name}: revision {} ({})",
                        w.revision,
                        if w.changed { "applied" } else { "unchanged" }
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
    let Some(a) = get_or_print(&c, "/v1/agent", json).await? else {
        return Ok(ExitCode::SUCCESS);
    };
    if a.status != 200 {
        return Ok(report(&a, String::new));
    }
    print!("{}", agent_text(&a.view("GET /v1/agent")?));
    Ok(ExitCode::SUCCESS)
}

/// A GET whose answer is printed as JSON when `json` (then `None`), or
/// handed back to be shown.
async fn get_or_print(c: &Client, path: &str, json: bool) -> Result<Option<Answer>, ClientError> {
    let a = c.request(Method::GET, path, None).await?;
    if json && a.status == 200 {
        println!(
            "{}",
            serde_json::to_string_pretty(&a.body).unwrap_or_default()
        );
        return Ok(None);
    }
    Ok(Some(a))
}

/// What `stead agent` prints.
fn agent_text(v: &crate::views::agent::AgentView) -> String {
    let mut out = format!(
        "running    {} ({}, {})\n",
        v.running.version, v.running.slot, v.running.target
    );
    let or_package = |x: &Option<String>| x.clone().unwrap_or_else(|| "the package's".into());
    out.push_str(&format!("current    {}\n", or_package(&v.current)));
    if let Some(p) = &v.previous {
        out.push_str(&format!("previous   {p}\n"));
    }
    if let Some(c) = &v.candidate {
        out.push_str(&format!(
            "candidate  {} (started {} times)\n",
            c.version, c.starts
        ));
    }
    if let Some(f) = &v.failed {
        out.push_str(&format!("failed     {}: {}\n", f.version, f.why));
    }
    if let Some(e) = &v.launcher_error {
        out.push_str(&format!("launcher   {e}\n"));
    }
    for u in &v.updates {
        out.push_str(&format!(
            "update {:<3} {} -> {}  {}{}  (by {})\n",
            u.id,
            u.from,
            u.version,
            u.state,
            u.failure
                .as_ref()
                .map(|f| format!(": {f}"))
                .unwrap_or_default(),
            u.requested_by
        ));
    }
    out
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
        let running = a
            .view::<crate::views::agent::AlreadyRunningView>("POST /v1/agent/update")
            .map_or_else(|_| "it".to_string(), |v| v.running);
        println!("{running} runs already: nothing to do");
        return Ok(ExitCode::SUCCESS);
    }
    if a.status != 202 {
        return Ok(report(&a, String::new));
    }
    let u: crate::views::agent::AgentUpdateView = match a.view("POST /v1/agent/update") {
        Ok(u) => u,
        Err(e) => {
            eprintln!("stead: {e}");
            return Ok(ExitCode::from(EXIT_REFUSED));
        }
    };
    println!("update {} to {} requested", u.id, u.version);
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
            let v: crate::views::agent::AgentView = match a.view("GET /v1/agent") {
                Ok(v) => v,
                Err(e) => {
                    eprintln!("stead: {e}");
                    return Ok(ExitCode::from(EXIT_REFUSED));
                }
            };
            if let Some(r) = v.updates.iter().find(|r| r.id == u.id) {
                for l in r.log.iter().skip(printed) {
                    println!("{} {}", format_rfc3339(l.at), l.line);
                }
                printed = printed.max(r.log.len());
                let failure = r.failure.as_deref().unwrap_or("");
                match r.state.as_str() {
                    "done" => return Ok(ExitCode::SUCCESS),
                    "failed" => {
                        eprintln!("stead: update {} failed: {failure}", u.id);
                        return Ok(ExitCode::from(EXIT_REFUSED));
                    }
                    "faulted" => {
                        eprintln!(
                            "stead: update {} faulted (the agent retries it with backoff): {failure}",
                            u.id
                        );
                        return Ok(ExitCode::from(EXIT_FAULTED));
                    }
                    _ => {}
                }
            }
        }
        if std::time::Instant::now() > deadline {
            eprintln!(
                "stead: update {} has not ended; `stead agent` shows where it stands",
                u.id
            );
            return Ok(ExitCode::from(EXIT_FAULTED));
        }
        std::thread::sleep(std::time::Duration::from_secs(1));
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
        let Some(w) = written(&a, "PATCH /v1/intentions/{name}/settings")? else {
            return Ok(report(&a, String::new));
        };
        Ok(report(&a, || format!("{module}: revision {}", w.revision)))
    })
}

/// A write's answer read as the intention written, when it was written
/// (2xx); `None` for a refusal, which [`report`] says.
fn written(a: &Answer, endpoint: &str) -> Result<Option<crate::views::WrittenView>, ClientError> {
    if (200..300).contains(&a.status) {
        a.view(endpoint).map(Some)
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
    let out: crate::model::disk::Pruned = a.view("POST /v1/images/prune")?;
    print!("{}", prune_text(&out));
    Ok(if out.failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_REFUSED)
    })
}

/// What `stead images prune` prints: a line per image, what it came to.
fn prune_text(p: &crate::model::disk::Pruned) -> String {
    use crate::model::disk::human;
    let gone = if p.dry_run { "would remove" } else { "removed" };
    let mut o = String::new();
    let mut line = |what: &str, i: &crate::model::disk::ImageLine| {
        let id = i.id.strip_prefix("sha256:").unwrap_or(&i.id);
        o.push_str(&format!(
            "{what:<13}{:<40} {:<13} {:>10}  {}\n",
            i.names.first().map_or("<none>", String::as_str),
            id.get(..12).unwrap_or(id),
            human(i.size_bytes),
            i.why
        ));
    };
    for i in &p.removed {
        line(gone, i);
    }
    for i in &p.failed {
        line("not removed", i);
    }
    for i in &p.kept {
        line("kept", i);
    }
    let total: u64 = p.removed.iter().map(|i| i.size_bytes).sum();
    o.push_str(&format!(
        "{} {} image(s), {}\n",
        if p.dry_run {
            "would reclaim"
        } else {
            "reclaimed"
        },
        p.removed.len(),
        human(total)
    ));
    o
}

async fn sync(c: Client) -> Result<ExitCode, ClientError> {
    let a = c.request(Method::POST, "/v1/plane/sync", None).await?;
    if a.status != 200 && a.status != 202 {
        return Ok(report(&a, String::new));
    }
    let outcome: OutcomeView = a.view("POST /v1/plane/sync")?;
    println!("{}", sync_line(&outcome));
    Ok(match outcome {
        OutcomeView::Refused { .. } | OutcomeView::Failed { .. } => ExitCode::from(1),
        _ => ExitCode::SUCCESS,
    })
}

/// What `stead sync` prints for what the poll did.
fn sync_line(o: &OutcomeView) -> String {
    match o {
        OutcomeView::Adopted { revision } => format!("adopted revision {revision}"),
        OutcomeView::Same { revision } => format!("revision {revision} held: the same document"),
        OutcomeView::NotModified => "not modified: the document held is the plane's".into(),
        OutcomeView::Refused { class, detail, .. } => format!("refused ({class}): {detail}"),
        OutcomeView::Failed { error, .. } => format!("failed: {error}"),
        OutcomeView::UnderWay => "a poll is under way; see stead status".into(),
    }
}

async fn status(c: Client, json: bool) -> Result<ExitCode, ClientError> {
    let Some(a) = get_or_print(&c, "/v1/status", json).await? else {
        return Ok(ExitCode::SUCCESS);
    };
    if a.status != 200 {
        return Ok(report(&a, String::new));
    }
    let view: StatusView = a.view("GET /v1/status")?;
    if view.plane.configured && view.plane.plane.is_none() {
        // Say which of the plane's fields is missing.
        #[derive(serde::Deserialize)]
        struct Plane {
            #[allow(dead_code)]
            plane: PlaneDetail,
        }
        a.view::<Plane>("GET /v1/status, plane")?;
    }
    print!("{}", status_text(&view));
    Ok(ExitCode::SUCCESS)
}

/// What `stead status` prints: the node, the plane (when one is
/// configured) and a line per module.
fn status_text(v: &StatusView) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let n = &v.node;
    let engine = match &n.engine {
        EngineView::Waiting { error, since } => {
            format!("waiting since {} ({error})", format_rfc3339(*since))
        }
        e => e.as_str().to_string(),
    };
    let last = match &n.last_pass {
        Some(p) => format!("{} ({:.0} ms)", format_rfc3339(p.at), p.duration_ms),
        None => "none yet".into(),
    };
    let _ = writeln!(out, "node {}  engine {engine}  last pass {last}", n.id);
    if let Some(a) = &v.agent {
        let _ = writeln!(out, "{}", a.line());
    }
    if let Some(f) = &n.facts {
        let _ = writeln!(out, "facts {}", f.line());
    }
    if let Some(p) = &v.plane.plane {
        let held = match &p.held {
            Some(h) if !h.floor => format!(
                "revision {} (still run, but no longer the floor: {})",
                h.revision,
                h.revoked.as_deref().unwrap_or("revoked")
            ),
            Some(h) if h.expired == Some(true) => {
                format!("revision {} (expired; still run)", h.revision)
            }
            Some(h) => format!("revision {}", h.revision),
            None => "no document yet".into(),
        };
        let contact = p.last_contact.map_or("never".to_string(), format_rfc3339);
        let mut note = String::new();
        if let Some(r) = &p.refusal {
            let revision = r.revision.map_or("null".to_string(), |r| r.to_string());
            let _ = write!(note, "; refused revision {revision}: {}", r.class);
        }
        if let Some(e) = &p.error {
            let _ = write!(note, "; {e}");
        }
        if let Some(c) = p.clock.as_deref().filter(|c| *c != "ok") {
            let _ = write!(note, "; clock {c}");
        }
        let _ = writeln!(out, "plane {held}  last contact {contact}{note}");
        for g in &p.groups {
            let _ = writeln!(out, "  {}", g.with_times(|t| format_rfc3339(*t)).line());
        }
    }
    if let Some(line) = n.fetching.as_ref().and_then(|f| f.line()) {
        let _ = writeln!(out, "fetching {line}");
    }
    if let Some(b) = &n.fetched {
        let _ = writeln!(out, "last fetched {}", b.line());
    }
    if let Some(d) = &n.disk {
        use crate::model::disk::human;
        let each: Vec<String> = d
            .filesystems
            .iter()
            .map(|f| {
                format!(
                    "{} ({}) {} free of {}",
                    f.path,
                    f.roles.join(", "),
                    human(f.free_bytes),
                    human(f.size_bytes)
                )
            })
            .collect();
        let paused = if d.events_paused {
            "; events paused (the store keeps its room)"
        } else {
            ""
        };
        let _ = writeln!(
            out,
            "disk {}  {}; logs at most {}{paused}",
            d.level.as_str(),
            each.join("; "),
            human(d.logs.bound_bytes)
        );
    }
    let _ = writeln!(
        out,
        "{:<24} {:<14} {:>8}  {:<19}  {:<12}  NOTE",
        "MODULE", "STATE", "RESTARTS", "DIGEST", "CONTAINER"
    );
    for m in &v.modules {
        let short =
            |v: Option<&str>, n: usize| v.map_or("-".to_string(), |s| s.chars().take(n).collect());
        let mut note = String::new();
        for d in &m.inputs_differ {
            let _ = write!(note, "{} moved; ", d.input);
        }
        if let Some(e) = &m.last_error {
            note.push_str(e);
            if let Some(at) = m.next_attempt_at {
                let _ = write!(note, "; next attempt {}", format_rfc3339(at));
            }
        } else if let Some(act) = &m.last_action {
            let _ = write!(note, "{} {}", act.action, format_rfc3339(act.at));
        }
        let _ = writeln!(
            out,
            "{:<24} {:<14} {:>8}  {:<19}  {:<12}  {}",
            m.name,
            m.state,
            m.restart_count.map_or("-".into(), |n| n.to_string()),
            short(m.desired_digest.as_ref().map(|d| d.as_str()), 19),
            short(m.container_id.as_deref(), 12),
            note.trim_end_matches("; ")
        );
    }
    out
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
        let page: EventsView = a.view("GET /v1/events")?;
        for e in &page.events {
            println!("{}", event_line(e));
        }
        since = page.next;
        if !follow {
            return Ok(ExitCode::SUCCESS);
        }
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    }
}

/// What `stead events` prints for an event.
fn event_line(e: &crate::store::Event) -> String {
    // The kind as the API words it.
    let kind = serde_json::to_value(e.kind).unwrap_or_default();
    format!(
        "{:>6} {} {:<24} {:<10} {}",
        e.seq,
        format_rfc3339(e.at),
        e.module.as_deref().unwrap_or("-"),
        kind.as_str().unwrap_or_default(),
        e.detail
    )
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
    let id = a.view::<FiledView>("POST /v1/reloads")?.id;
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
        let r: Request = a.view(&format!("GET /v1/reloads/{id}"))?;
        for l in r.log.iter().skip(printed) {
            println!("{} {}", format_rfc3339(l.at), l.text);
        }
        printed = printed.max(r.log.len());
        let failure = r.failure().unwrap_or("");
        match r.status() {
            Status::Done => return Ok(ExitCode::SUCCESS),
            Status::Failed => {
                eprintln!("stead: reload {id} failed: {failure}");
                return Ok(ExitCode::from(EXIT_REFUSED));
            }
            // Retried by the agent with backoff; the caller is told now.
            Status::Faulted => {
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
        a.view::<Request>(&format!("DELETE /v1/reloads/{id}"))?
            .failure()
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
        let a = c.request(Method::GET, "/v1/reloads", None).await?;
        if a.status != 200 {
            return Ok(report(&a, String::new));
        }
        let out = reloads_text(&a.view::<ReloadsView>("GET /v1/reloads")?);
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

/// What `stead reloads` prints: a line per request.
fn reloads_text(v: &ReloadsView) -> String {
    let mut out = String::new();
    for r in &v.reloads {
        let items: Vec<String> = r
            .items
            .iter()
            .map(|i| {
                format!(
                    "{}: {}",
                    i.module,
                    i.failure.as_deref().unwrap_or(&i.decision)
                )
            })
            .collect();
        out.push_str(&format!(
            "{:>4} {} {:<10} {:<24} {} — {}\n",
            r.id,
            format_rfc3339(r.requested_at),
            r.status().as_str(),
            r.module.as_deref().unwrap_or("(every module)"),
            r.reason,
            items.join("; ")
        ));
    }
    out
}

fn agent_node<C: crate::agent::Connect>(a: &Agent<C>) -> String {
    a.node_id().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::views::{ModuleView, NodeView, fixtures};

    fn view(plane: Option<crate::plane::sync::PlaneStatus>) -> StatusView {
        let [n, _] = fixtures::nodes();
        let h = plane.map(|p| crate::api::PlaneHandle {
            status: std::sync::Arc::new(std::sync::Mutex::new(p)),
            nudge: tokio::sync::mpsc::channel(1).0,
        });
        StatusView {
            agent: Some(fixtures::agent_status()),
            modules: fixtures::board().values().map(ModuleView::from).collect(),
            node: NodeView::new("edge-1", &n, std::time::Duration::from_secs(30)),
            plane: crate::api::plane::plane_view(h.as_ref()),
        }
    }

    #[test]
    fn the_status_table_prints_every_field_it_reads() {
        let [full, bare] = crate::plane::fixtures::planes();
        let got = status_text(&view(Some(full)));
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
        let bare = status_text(&view(Some(bare)));
        assert!(
            bare.contains("plane no document yet  last contact never\n"),
            "{bare}"
        );
        assert!(!status_text(&view(None)).contains("plane "));
    }

    #[test]
    fn a_module_without_an_error_shows_its_last_action() {
        let mut v = view(None);
        v.modules[1].last_error = None;
        v.modules[1].inputs_differ.clear();
        let got = status_text(&v);
        assert!(got.contains("  recreated 2023-11-14T22:14:10Z\n"), "{got}");
    }

    #[test]
    fn sync_says_what_the_poll_did() {
        let refused = OutcomeView::Refused {
            class: crate::plane::RefusalClass::Rollback,
            detail: "older".into(),
            revision: Some(2),
        };
        assert_eq!(sync_line(&refused), "refused (rollback): older");
        assert_eq!(
            sync_line(&OutcomeView::Adopted { revision: 3 }),
            "adopted revision 3"
        );
    }

    #[test]
    fn reloads_and_events_print_from_their_fields() {
        let (_, mut requests) = fixtures::reloads();
        requests[0].written_by = 0;
        let v = ReloadsView { reloads: requests };
        let back: ReloadsView = serde_json::from_value(serde_json::to_value(&v).unwrap()).unwrap();
        assert_eq!(back, v);
        assert_eq!(
            reloads_text(&v),
            "   5 2023-11-14T22:13:30Z failed     web                      why — web: \n"
        );
        let e = crate::store::Event {
            seq: 7,
            at: 60,
            module: None,
            kind: crate::store::EventKind::Created,
            detail: "made".into(),
        };
        assert_eq!(
            event_line(&e),
            "     7 1970-01-01T00:01:00Z -                        created    made"
        );
    }

    #[test]
    fn a_missing_field_names_the_endpoint_and_the_field() {
        let mut body = serde_json::to_value(view(None)).unwrap();
        body["node"].as_object_mut().unwrap().remove("id");
        let a = Answer { status: 200, body };
        let e = a
            .view::<StatusView>("GET /v1/status")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("GET /v1/status") && e.contains("missing field `id`"),
            "{e}"
        );
    }
}
