//! The local HTTP API (hyper, HTTP/1.1, JSON): health and readiness, the
//! node's and each module's status, intentions (read, put, delete, settings
//! patch), the event log and Prometheus metrics. Writes need the bearer
//! token, and so do the values of intentions that may be secrets (env,
//! settings, file contents: hidden from a read without it); bad input gets a JSON error naming the field and changes nothing.
//! The handlers are thin: they parse the request, hand writes to the intake
//! (one store transaction, off the async threads) and wake the agent. Every
//! error maps to its status in one place, [`ApiError::status`].

use crate::model::sort::Insert as _;
use std::collections::BTreeMap;
use std::convert::Infallible;
use std::ops::Bound::{Excluded, Unbounded};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::header::{ACCEPT, AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{Value as J, json};
use tokio::net::TcpListener;
use tokio::sync::Notify;

use crate::intake;
use crate::model::intention::Intention;
use crate::model::names::{ModuleName, NodeId, SettingKey};
use crate::model::value::Value;
use crate::status::metrics::Metrics;
use crate::status::{Board, EngineStatus, ModuleStatus, NodeStatus};
use crate::store::{Entry, Source, Store};
use crate::views;

mod error;
pub mod plane;
mod stream;
mod values;

pub use plane::PlaneHandle;

pub use error::ApiError;

/// The largest request body taken: an intention file's limit.
pub const MAX_BODY: usize = crate::intake::dir::MAX_INTENTION_BYTES as usize;

/// What the API serves from.
pub struct ApiState {
    /// This node.
    pub node_id: NodeId,
    /// The store.
    pub store: Arc<Store>,
    /// Every module's status.
    pub board: Arc<Mutex<Board>>,
    /// The node's status.
    pub node: Arc<Mutex<NodeStatus>>,
    /// The counters.
    pub metrics: Arc<Metrics>,
    /// Wakes the agent for a pass now.
    pub wake: Arc<Notify>,
    /// The bearer token for writes.
    pub token: String,
    /// The heartbeat, to say when the next pass is due.
    pub heartbeat: Duration,
    /// Reads that copy every intention (up to a quarter megabyte each)
    /// wait their turn here, until their answer is written: their memory
    /// stays bounded whoever asks.
    pub heavy_reads: Arc<tokio::sync::Semaphore>,
    /// This agent's id, stamped on the reload requests it files.
    pub agent: u64,
    /// Wakes the reload executor.
    pub reload_wake: Arc<Notify>,
    /// Makes the auto lane look now.
    pub look_now: Arc<std::sync::atomic::AtomicBool>,
    /// The central plane's poller, when one is configured.
    pub plane: Option<PlaneHandle>,
    /// Asks to collect unused images, for the loop (which alone acts on
    /// the engine) to answer after its next pass.
    pub prune: PruneAsks,
    /// Asks to take update locks, for the loop to take before its next
    /// pass (it alone asks the engine which container runs).
    pub lock_asks: LockAsks,
    /// What each one-shot action in force and not over waits for, by id
    /// (the pass says it).
    pub actions_waiting: Arc<Mutex<BTreeMap<String, String>>>,
    /// Updates of stead itself.
    pub updater: Arc<crate::update::executor::Updater>,
}

/// An ask to collect images (`true`: a dry run) and where its answer goes.
pub type PruneAsk = (
    bool,
    tokio::sync::oneshot::Sender<Result<crate::model::disk::Pruned, String>>,
);

/// The asks not answered yet.
pub type PruneAsks = Arc<Mutex<Vec<PruneAsk>>>;

/// A lock asked: the module, the reason (checked), what it holds off, and
/// where the lock taken, or why not, is sent.
pub type LockAsk = (
    ModuleName,
    String,
    crate::model::lock::Scope,
    tokio::sync::oneshot::Sender<Result<crate::model::lock::Lock, String>>,
);

/// The update locks asked and not taken yet.
pub type LockAsks = Arc<Mutex<Vec<LockAsk>>>;

/// How long a prune is waited for: a pass, then the removals.
const PRUNE_WAIT: Duration = Duration::from_secs(300);

/// How many whole-intention reads are served at once.
pub const HEAVY_READS: usize = 1;

type Resp = Response<BoxBody<Bytes, Infallible>>;

/// A view as the JSON value it is sent as. (`to_value` fails only for a
/// map key that is not a string or a Serialize impl that errs; the views
/// derive theirs and key their maps by strings, so no input reaches it.)
fn to_json(view: impl serde::Serialize) -> J {
    serde_json::to_value(view).expect("a view serialises")
}

fn json_response(status: StatusCode, body: &J) -> Resp {
    let mut text = serde_json::to_vec_pretty(body).expect("JSON serialises");
    text.push(b'\n');
    Response::builder()
        .status(status)
        .header(CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(text)).boxed())
        .expect("a valid response")
}

/// Whether the client asked for text (`Accept: text/plain`): the views a
/// person reads (`/v1/status`, `/v1/agent`, `/v1/reloads`) are then
/// answered as `stead status`, `stead agent` and `stead reloads` print
/// them ([`views::text`]).
fn wants_text(req: &Request<Incoming>) -> bool {
    req.headers()
        .get_all(ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| t.trim().starts_with("text/plain"))
}

/// A 200 of text for a person.
fn text_response(text: String) -> Resp {
    Response::builder()
        .status(StatusCode::OK)
        .header(CONTENT_TYPE, "text/plain; charset=utf-8")
        .body(Full::new(Bytes::from(text)).boxed())
        .expect("a valid response")
}

/// A 200 whose JSON is written by `produce` on a blocking thread as the
/// client reads it ([`stream`]): `head` with the array under `key`.
fn streamed_response(
    head: serde_json::Map<String, J>,
    key: &str,
    produce: impl FnOnce(&mut stream::Writer) + Send + 'static,
) -> Resp {
    let (body, mut writer) = stream::channel(head, key);
    crate::host::blocking::detach(move || {
        produce(&mut writer);
        writer.finish();
    });
    Response::builder()
        .status(StatusCode::OK)
        .header(CONTENT_TYPE, "application/json")
        .body(body.boxed())
        .expect("a valid response")
}

/// How many API connections are served at once. Past the cap, new
/// connections wait in the kernel's listen queue (no descriptor of ours)
/// until one ends: the descriptors a pass needs (the engine's socket, the
/// files it reads, the store) stay free under the unit's 1,024.
pub const MAX_CONNECTIONS: usize = 64;
/// How long one connection may live: an idle client cannot hold a slot.
pub const CONNECTION_LIFETIME: Duration = Duration::from_secs(120);

/// Serves the API on `listener` until the task is dropped.
pub async fn serve(listener: TcpListener, state: Arc<ApiState>) {
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    loop {
        let slot = slots
            .clone()
            .acquire_owned()
            .await
            .expect("the semaphore is never closed");
        let (stream, _) = match listener.accept().await {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!("API accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let state = state.clone();
        tokio::spawn(async move {
            let svc = hyper::service::service_fn(move |req| {
                let state = state.clone();
                async move { Ok::<_, Infallible>(handle(&state, req).await) }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(Duration::from_secs(10))
                .serve_connection(TokioIo::new(stream), svc);
            match tokio::time::timeout(CONNECTION_LIFETIME, conn).await {
                Ok(Err(e)) => tracing::debug!("API connection ended: {e}"),
                Ok(Ok(())) => {}
                Err(_) => tracing::debug!("API connection closed after {CONNECTION_LIFETIME:?}"),
            }
            drop(slot);
        });
    }
}

/// Answers one request.
pub async fn handle(state: &ApiState, req: Request<Incoming>) -> Resp {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let result = route(state, req).await;
    match result {
        Ok(r) => r,
        Err(e) => {
            if e.status().is_server_error() {
                tracing::error!("{method} {path}: {e}");
            } else {
                tracing::debug!("{method} {path}: {e}");
            }
            json_response(e.status(), &e.body())
        }
    }
}

async fn route(state: &ApiState, req: Request<Incoming>) -> Result<Resp, ApiError> {
    let path = req.uri().path().to_string();
    let segs: Vec<&str> = path.trim_end_matches('/').split('/').skip(1).collect();
    let m = req.method().clone();
    match (segs.as_slice(), &m) {
        (["healthz"], &Method::GET) => healthz(state).await,
        (["readyz"], &Method::GET) => Ok(readyz(state).await),
        (["metrics"], &Method::GET) => Ok(metrics(state).await),
        (["v1", "status"], &Method::GET) => Ok(status(state, wants_text(&req)).await),
        (["v1", "modules", name], &Method::GET) => module(state, name).await,
        (["v1", "events"], &Method::GET) => events(state, req.uri().query().unwrap_or("")).await,
        (["v1", "intentions"], &Method::GET) => {
            let values = may_read_values(state, &req)?;
            list_intentions(state, values).await
        }
        (["v1", "intentions", name], &Method::GET) => {
            let values = may_read_values(state, &req)?;
            get_intention(state, name, values).await
        }
        (["v1", "intentions", name], &Method::PUT) => {
            authorize(state, &req)?;
            let name = module_name(name)?;
            let body = read_body(req).await?;
            put_intention(state, name, &body).await
        }
        (["v1", "intentions", name], &Method::DELETE) => {
            authorize(state, &req)?;
            delete_intention(state, module_name(name)?).await
        }
        (["v1", "intentions", name, "settings"], &Method::PATCH) => {
            authorize(state, &req)?;
            let name = module_name(name)?;
            let body = read_body(req).await?;
            patch_settings(state, name, &body).await
        }
        (["v1", "reloads"], &Method::POST) => {
            authorize(state, &req)?;
            let body = read_body(req).await?;
            file_reload(state, &body).await
        }
        (["v1", "reloads"], &Method::GET) => list_reloads(state, wants_text(&req)).await,
        (["v1", "agent"], &Method::GET) => agent(state, wants_text(&req)).await,
        (["v1", "agent", "update"], &Method::POST) => {
            authorize(state, &req)?;
            let body = read_body(req).await?;
            file_agent_update(state, &body).await
        }
        (["v1", "reloads", "check"], &Method::POST) => {
            authorize(state, &req)?;
            state
                .look_now
                .store(true, std::sync::atomic::Ordering::Release);
            state.reload_wake.notify_one();
            Ok(json_response(
                StatusCode::ACCEPTED,
                &json!({ "looking": "every module with lane = \"auto\"" }),
            ))
        }
        (["v1", "reloads", id], &Method::GET) => get_reload(state, id).await,
        (["v1", "reloads", id], &Method::DELETE) => {
            authorize(state, &req)?;
            cancel_reload(state, id, req.uri().query().unwrap_or("")).await
        }
        (["v1", "plane"], &Method::GET) => Ok(json_response(
            StatusCode::OK,
            &to_json(plane::plane_view(state.plane.as_ref())),
        )),
        (["v1", "plane", "sync"], &Method::POST) => {
            authorize(state, &req)?;
            let (status, body) = plane::sync(state.plane.as_ref()).await?;
            Ok(json_response(status, &to_json(body)))
        }
        (["v1", "images", "prune"], &Method::POST) => {
            authorize(state, &req)?;
            prune(state, req.uri().query().unwrap_or("")).await
        }
        (["v1", "modules", name, "lock"], &Method::POST) => {
            authorize(state, &req)?;
            let name = module_name(name)?;
            let body = read_body(req).await?;
            take_lock(state, name, &body).await
        }
        (["v1", "modules", name, "lock"], &Method::DELETE) => {
            authorize(state, &req)?;
            let name = module_name(name)?;
            let held = state
                .store
                .blocking(move |s| s.release_lock(name.as_str()))
                .await?;
            // The pass it held off may go now.
            state.wake.notify_one();
            Ok(json_response(StatusCode::OK, &json!({ "released": held })))
        }
        (["v1", "actions"], &Method::GET) => actions(state).await,
        (["v1", "locks"], &Method::GET) => {
            let locks = state.store.blocking(|s| s.locks()).await?;
            let view: Vec<J> = locks.iter().map(lock_view).collect();
            Ok(json_response(StatusCode::OK, &json!({ "locks": view })))
        }
        (["v1", "plane"], _)
        | (["v1", "plane", "sync"], _)
        | (["v1", "images", "prune"], _)
        | (["v1", "locks" | "actions"], _)
        | (["v1", "modules", _, "lock"], _) => Err(ApiError::MethodNotAllowed),
        (["healthz" | "readyz" | "metrics"], _)
        | (["v1", "reloads"], _)
        | (["v1", "reloads", _], _)
        | (["v1", "status" | "events" | "intentions"], _)
        | (["v1", "modules" | "intentions", _], _)
        | (["v1", "intentions", _, "settings"], _) => Err(ApiError::MethodNotAllowed),
        _ => Err(ApiError::NotFound(format!("no such route: {path}"))),
    }
}

fn authorize(state: &ApiState, req: &Request<Incoming>) -> Result<(), ApiError> {
    let Some(h) = req.headers().get(AUTHORIZATION) else {
        return Err(ApiError::Unauthorized(
            "missing Authorization: Bearer <token>".into(),
        ));
    };
    let given = h
        .to_str()
        .ok()
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("");
    // Compare in constant time: the token is the only secret here.
    let (a, b) = (given.as_bytes(), state.token.as_bytes());
    let same = a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0;
    if same {
        Ok(())
    } else {
        Err(ApiError::Unauthorized("wrong bearer token".into()))
    }
}

/// Whether a read may show values that may be secrets: with the token,
/// yes; without one, no (the rest is shown); with a wrong one, refused.
fn may_read_values(state: &ApiState, req: &Request<Incoming>) -> Result<bool, ApiError> {
    if req.headers().get(AUTHORIZATION).is_none() {
        return Ok(false);
    }
    authorize(state, req).map(|()| true)
}

async fn read_body(req: Request<Incoming>) -> Result<Bytes, ApiError> {
    let declared = req
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > MAX_BODY) {
        return Err(ApiError::TooLarge);
    }
    match Limited::new(req.into_body(), MAX_BODY).collect().await {
        Ok(c) => Ok(c.to_bytes()),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => Err(ApiError::TooLarge),
        Err(e) => Err(ApiError::BadRequest(format!("cannot read the body: {e}"))),
    }
}

fn module_name(s: &str) -> Result<ModuleName, ApiError> {
    ModuleName::try_from(s).map_err(|e| ApiError::BadRequest(e.0))
}

/// `GET /v1/actions`: every one-shot action this device keeps a record
/// of (begun, done, failed, expired: what it did or why not), and each
/// in force not begun with what it waits for. An upload's URL is never
/// shown.
async fn actions(state: &ApiState) -> Result<Resp, ApiError> {
    let records = state.store.blocking(|s| s.actions()).await?;
    let mut waiting = state
        .actions_waiting
        .lock()
        .expect("actions waiting")
        .clone();
    let mut out: Vec<J> = records
        .iter()
        .map(|r| {
            let mut v = to_json(views::ActionView::from(r));
            v["waiting"] = J::from(waiting.remove(&r.id));
            v
        })
        .collect();
    out.extend(
        waiting
            .into_iter()
            .map(|(id, why)| json!({ "id": id, "status": "waiting", "waiting": why })),
    );
    Ok(json_response(StatusCode::OK, &json!({ "actions": out })))
}

/// A lock as the API shows it.
fn lock_view(l: &crate::model::lock::Lock) -> J {
    json!({
        "module": l.module.as_str(),
        "scope": l.scope.as_str(),
        "reason": l.reason,
        "taken_at": l.taken_at,
        "container_id": l.container,
        "waited_since": l.waited_since,
        "by": if l.file { "file" } else { "api" },
    })
}

/// Takes an update lock for a module's running container (`{"reason":
/// "…", "scope": "module" | "device"}`): asked of the loop, whose next
/// pass takes it before it acts.
async fn take_lock(state: &ApiState, module: ModuleName, body: &[u8]) -> Result<Resp, ApiError> {
    use crate::model::lock::{Scope, check_reason};
    crate::model::json::no_repeated_keys(body).map_err(|r| ApiError::Invalid {
        field: r.path,
        message: r.message,
    })?;
    let invalid = |field: &str, message: String| ApiError::Invalid {
        field: field.into(),
        message,
    };
    let doc: serde_json::Map<String, J> = crate::model::json::read(body)
        .map_err(|e| invalid("(body)", format!("must be a JSON object: {}", e.message())))?;
    if let Some(k) = doc
        .keys()
        .find(|k| !["reason", "scope"].contains(&k.as_str()))
    {
        return Err(invalid(
            "(body)",
            format!(
                "unknown field {:?} (reason, scope)",
                crate::model::text::clip(k, 64)
            ),
        ));
    }
    let reason = match doc.get("reason") {
        Some(J::String(r)) => check_reason(r).map_err(|m| invalid("reason", m))?,
        _ => return Err(invalid("reason", "must say why, as a string".into())),
    };
    let scope = match doc.get("scope") {
        None => Scope::Module,
        Some(J::String(s)) => Scope::parse(s).map_err(|m| invalid("scope", m))?,
        Some(_) => return Err(invalid("scope", "must be \"module\" or \"device\"".into())),
    };
    let (tx, rx) = tokio::sync::oneshot::channel();
    state
        .lock_asks
        .lock()
        .expect("lock asks")
        .push((module, reason, scope, tx));
    state.wake.notify_one();
    match tokio::time::timeout(PRUNE_WAIT, rx).await {
        Ok(Ok(Ok(lock))) => Ok(json_response(StatusCode::OK, &lock_view(&lock))),
        Ok(Ok(Err(e))) => Err(ApiError::Conflict(e)),
        Ok(Err(_)) => Err(ApiError::Unavailable("the agent's loop stopped".into())),
        Err(_) => Err(ApiError::Unavailable(format!(
            "no pass began within {}s to take the lock",
            PRUNE_WAIT.as_secs()
        ))),
    }
}

/// Collects the images no module needs (`?dry_run=true`: says what would
/// go and why each other one stays): asked of the loop, answered after
/// its next pass.
async fn prune(state: &ApiState, query: &str) -> Result<Resp, ApiError> {
    let mut dry_run = false;
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        match pair.split_once('=').unwrap_or((pair, "true")) {
            ("dry_run", "true" | "1") => dry_run = true,
            ("dry_run", "false" | "0") => dry_run = false,
            ("dry_run", _) => {
                return Err(ApiError::BadRequest("dry_run: true or false".into()));
            }
            (other, _) => {
                return Err(ApiError::BadRequest(format!(
                    "unknown query parameter {:?}",
                    crate::model::text::clip(other, 64)
                )));
            }
        }
    }
    let (tx, rx) = tokio::sync::oneshot::channel();
    state.prune.lock().expect("prune lock").push((dry_run, tx));
    state.wake.notify_one();
    match tokio::time::timeout(PRUNE_WAIT, rx).await {
        Ok(Ok(Ok(out))) => Ok(json_response(StatusCode::OK, &to_json(out))),
        Ok(Ok(Err(e))) => Err(ApiError::Unavailable(e)),
        Ok(Err(_)) => Err(ApiError::Unavailable("the agent's loop stopped".into())),
        Err(_) => Err(ApiError::Unavailable(format!(
            "no pass completed within {}s to prune after",
            PRUNE_WAIT.as_secs()
        ))),
    }
}

async fn healthz(state: &ApiState) -> Result<Resp, ApiError> {
    // The store answers a read.
    state.store.blocking(|s| s.check()).await?;
    Ok(json_response(StatusCode::OK, &json!({ "status": "ok" })))
}

async fn readyz(state: &ApiState) -> Resp {
    let node = state.node.lock().expect("node lock").clone();
    // A pass is due every heartbeat; one this late means the loop is stuck.
    let overdue = state.heartbeat * 2 + Duration::from_secs(60);
    let reason = match (&node.engine, node.passes) {
        (EngineStatus::Unknown, _) => Some("the engine has not been reached yet".to_string()),
        (EngineStatus::Waiting { error, .. }, _) => {
            Some(format!("waiting for the engine: {error}"))
        }
        (EngineStatus::Reachable, 0) => Some("the first pass has not completed".to_string()),
        (EngineStatus::Reachable, _) if node.other_agent.is_some() => node.other_agent.clone(),
        (EngineStatus::Reachable, _) => match (&node.failing, node.last_pass) {
            (Some((since, error)), _) => Some(format!(
                "passes fail since {}s ago: {error}",
                since.elapsed().map_or(0, |d| d.as_secs())
            )),
            (None, Some((at, _))) if at.elapsed().is_ok_and(|a| a > overdue) => Some(format!(
                "no pass completed for {}s",
                at.elapsed().map_or(0, |d| d.as_secs())
            )),
            _ => None,
        },
    };
    let reason = match reason {
        Some(r) => Some(r),
        None if !node.quarantine.is_empty() => Some(format!(
            "quarantined by the crash guard: {}",
            node.quarantine.summary()
        )),
        None if node.disk.critical().is_some() => node.disk.critical(),
        None => state
            .store
            .blocking(|s| s.check())
            .await
            .err()
            .map(|e| format!("the store does not answer: {e}")),
    };
    match reason {
        None => json_response(StatusCode::OK, &json!({ "ready": true })),
        Some(r) => json_response(
            StatusCode::SERVICE_UNAVAILABLE,
            &json!({ "ready": false, "reason": r }),
        ),
    }
}

async fn metrics(state: &ApiState) -> Resp {
    // Rendered under the lock: a copy of a 1000-module board is larger
    // than the text.
    let mut text = state
        .metrics
        .render(&state.board.lock().expect("board lock"));
    let l = state.updater.launched.clone();
    // A store that does not answer leaves the updates out, not the rest.
    let updates = state
        .store
        .blocking(|s| s.agent_updates())
        .await
        .unwrap_or_default();
    text.push_str(&views::agent::of(l.as_ref(), &updates).metrics_text());
    Response::builder()
        .status(StatusCode::OK)
        .header(CONTENT_TYPE, "text/plain; version=0.0.4")
        .body(Full::new(Bytes::from(text)).boxed())
        .expect("a valid response")
}

/// How many modules' statuses are read from the board under one lock.
const BOARD_BATCH: usize = 32;

/// `GET /v1/status`: the node's status and every module's, the modules
/// read from the board a batch at a time as the answer is written (no copy
/// of the whole board, no whole text); each module's status is as it was
/// when its batch was read. As text, a line per module.
async fn status(state: &ApiState, text: bool) -> Resp {
    let board = state.board.clone();
    // The agent's own line: what runs and its last update (a store that
    // does not read leaves it out rather than the status).
    let updates = state.store.blocking(|s| s.agent_updates()).await;
    let agent = updates.ok().map(|u| {
        let a = views::agent::of(state.updater.launched(), &u);
        views::agent::AgentStatusView::from(&a)
    });
    let head = status_head(state, agent);
    if text {
        let mut out = views::text::status_head(&head);
        board_batches(&board, |m| {
            out.push_str(&views::text::module_line(&views::ModuleView::from(m)));
            true
        });
        return text_response(out);
    }
    let head = match serde_json::to_value(head).expect("the status serialises") {
        J::Object(m) => m,
        _ => serde_json::Map::new(),
    };
    streamed_response(head, "modules", move |w| {
        board_batches(&board, |m| {
            w.push(&serde_json::to_value(views::ModuleView::from(m)).unwrap_or(J::Null))
        })
    })
}

/// Hands every module's status on the board to `each`, in name order, a
/// batch at a time under the board's lock (each is as it was when its
/// batch was read), until `each` says stop (`false`).
fn board_batches(board: &Mutex<Board>, mut each: impl FnMut(&ModuleStatus) -> bool) {
    let mut after: Option<String> = None;
    loop {
        let batch: Vec<(String, ModuleStatus)> = {
            let b = board.lock().expect("board lock");
            let rest = match &after {
                Some(k) => b.range::<str, _>((Excluded(k.as_str()), Unbounded)),
                None => b.range::<str, _>(..),
            };
            rest.take(BOARD_BATCH)
                .map(|(k, m)| (k.clone(), m.clone()))
                .collect()
        };
        let Some((last, _)) = batch.last() else {
            return;
        };
        after = Some(last.clone());
        for (_, m) in &batch {
            if !each(m) {
                return;
            }
        }
    }
}

/// The node's status and the plane's, as `GET /v1/status` serves them
/// before the modules.
fn status_head(
    state: &ApiState,
    agent: Option<views::agent::AgentStatusView>,
) -> views::StatusView {
    let node = state.node.lock().expect("node lock").clone();
    views::StatusView {
        agent,
        modules: Vec::new(),
        node: views::NodeView::new(state.node_id.as_str(), &node, state.heartbeat),
        plane: plane::plane_view(state.plane.as_ref()),
    }
}

async fn module(state: &ApiState, name: &str) -> Result<Resp, ApiError> {
    let name = module_name(name)?;
    let known = state
        .board
        .lock()
        .expect("board lock")
        .get(name.as_str())
        .cloned();
    let status = match known {
        Some(m) => m,
        None => {
            // Known to the store but not reported on yet.
            let n = name.clone();
            let stored = state
                .store
                .blocking(move |s| s.entries().map(|e| e.contains_key(&n)))
                .await?;
            if !stored {
                return Err(ApiError::NotFound(format!("no module {:?}", name.as_str())));
            }
            ModuleStatus::pending(name.as_str())
        }
    };
    let mut body =
        serde_json::to_value(views::ModuleView::from(&status)).expect("status serialises");
    // What reloads landed for it, and the digests its auto lane skips.
    let n = name.clone();
    let update = state
        .store
        .blocking(move |s| s.updates().map(|mut u| u.remove(&n)))
        .await?;
    if let Some(u) = update {
        body["update"] = serde_json::to_value(u).expect("update state serialises");
    }
    Ok(json_response(StatusCode::OK, &body))
}

async fn events(state: &ApiState, query: &str) -> Result<Resp, ApiError> {
    let mut since = 0u64;
    let mut limit = 100usize;
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        match k {
            "since" => {
                since = v.parse().map_err(|_| {
                    ApiError::BadRequest(format!("since: {v:?} is not a sequence number"))
                })?
            }
            "limit" => {
                limit = v
                    .parse()
                    .map_err(|_| ApiError::BadRequest(format!("limit: {v:?} is not a number")))?;
                if limit == 0 || limit > 1000 {
                    return Err(ApiError::BadRequest("limit: must be 1 to 1000".into()));
                }
            }
            other => {
                return Err(ApiError::BadRequest(format!(
                    "unknown query parameter {other:?}"
                )));
            }
        }
    }
    let evs = state
        .store
        .blocking(move |s| s.events_since(since, limit))
        .await?;
    let next = evs.last().map_or(since, |e| e.seq);
    let mut head = serde_json::Map::new();
    head.insert("next".into(), J::from(next));
    Ok(streamed_response(head, "events", move |w| {
        for e in &evs {
            if !w.push(&serde_json::to_value(e).unwrap_or(J::Null)) {
                return;
            }
        }
    }))
}

/// An entry as the API shows it; without `values`, the values that may be
/// secrets read `null` ([`values`]).
fn entry_json(name: &ModuleName, e: &Entry, values: bool) -> Option<J> {
    let r = e.record.as_ref()?;
    let source = match &r.source {
        Source::File(p) => json!({ "kind": "file", "path": p }),
        Source::Api => json!({ "kind": "api" }),
        Source::Plane => json!({ "kind": "plane" }),
    };
    let overlay: serde_json::Map<String, J> = e
        .overlay
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_json()))
        .into_object();
    let mut doc = json!({
        "name": name.as_str(),
        "source": source,
        "revision": r.revision,
        "plane_revision": r.plane_revision,
        "intention": r.intention.to_json(),
        "settings_overlay": overlay,
        "effective": e.effective().map(|i| i.to_json()),
    });
    if !values {
        values::hide_intention(&mut doc["intention"]);
        values::hide_intention(&mut doc["effective"]);
        values::hide_map(doc.get_mut("settings_overlay"));
        doc["values_hidden"] = J::from(values::HIDDEN);
    }
    Some(doc)
}

/// `GET /v1/intentions`, written an intention at a time as the client
/// reads, the entries read from the store a batch at a time (each batch
/// as it was when read); the turn is held until the answer is written.
async fn list_intentions(state: &ApiState, values: bool) -> Result<Resp, ApiError> {
    let turn = state
        .heavy_reads
        .clone()
        .acquire_owned()
        .await
        .expect("never closed");
    // The first batch is read before answering, so a store that cannot be
    // read is an error status, not a cut answer.
    let first = state
        .store
        .blocking(|s| s.entries_after(None, STORE_BATCH))
        .await?;
    let store = state.store.clone();
    Ok(streamed_response(
        serde_json::Map::new(),
        "intentions",
        move |w| {
            let _turn = turn;
            let mut batch = first;
            loop {
                let Some((last, _)) = batch.last() else {
                    return;
                };
                let last = last.clone();
                for (n, e) in &batch {
                    if let Some(doc) = entry_json(n, e, values)
                        && !w.push(&doc)
                    {
                        return;
                    }
                }
                batch = match store.entries_after(Some(&last), STORE_BATCH) {
                    Ok(b) => b,
                    Err(e) => {
                        // Said in the log; the answer ends cut short (its
                        // JSON does not parse), never as a shorter list.
                        tracing::error!("GET /v1/intentions: {e}");
                        w.abort();
                        return;
                    }
                };
            }
        },
    ))
}

/// How many intentions are read from the store at a time for a list.
const STORE_BATCH: usize = 32;

async fn get_intention(state: &ApiState, name: &str, values: bool) -> Result<Resp, ApiError> {
    let name = module_name(name)?;
    let _turn = state.heavy_reads.acquire().await.expect("never closed");
    let n = name.clone();
    let doc = state
        .store
        .blocking(move |s| s.entry(&n))
        .await?
        .and_then(|e| entry_json(&name, &e, values))
        .ok_or_else(|| ApiError::NotFound(format!("no module {:?}", name.as_str())))?;
    Ok(json_response(StatusCode::OK, &doc))
}

async fn put_intention(state: &ApiState, name: ModuleName, body: &[u8]) -> Result<Resp, ApiError> {
    // Parsed once, straight from the body: malformed JSON is a bad request,
    // a well-formed but invalid intention names its field.
    serde_json::from_slice::<serde::de::IgnoredAny>(body)
        .map_err(|e| ApiError::BadRequest(format!("malformed JSON: {e}")))?;
    let i = Intention::parse_json(body, "request body").map_err(|e| ApiError::Invalid {
        field: e.field,
        message: e.message,
    })?;
    if i.name != name {
        return Err(ApiError::Invalid {
            field: "name".into(),
            message: format!(
                "{:?} does not match the module in the path, {:?}",
                i.name.as_str(),
                name.as_str()
            ),
        });
    }
    let out = state
        .store
        .blocking(move |s| intake::api::put(s, i))
        .await?;
    if out.changed {
        state.wake.notify_one();
    }
    let status = if out.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok(json_response(
        status,
        &to_json(views::WrittenView {
            changed: out.changed,
            name: name.to_string(),
            revision: out.revision,
            settings: None,
        }),
    ))
}

async fn file_reload(state: &ApiState, body: &[u8]) -> Result<Resp, ApiError> {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Body {
        #[serde(default)]
        module: Option<String>,
        #[serde(default)]
        reason: Option<String>,
        #[serde(default)]
        requested_by: Option<String>,
    }
    let b: Body = serde_json::from_slice(body)
        .map_err(|e| ApiError::BadRequest(format!("malformed JSON: {e}")))?;
    let module = b.module.as_deref().map(module_name).transpose()?;
    let reason = b.reason.unwrap_or_default();
    let by = b.requested_by.unwrap_or_else(|| "api".into());
    if by.trim() == crate::model::reload::AUTO_UPDATE {
        return Err(ApiError::Invalid {
            field: "requested_by".into(),
            message: format!(
                "{:?} is the agent's own (its auto lane); name who asks",
                crate::model::reload::AUTO_UPDATE
            ),
        });
    }
    let agent = state.agent;
    let r = state
        .store
        .blocking(move |s| {
            crate::reload::file::file(
                s,
                agent,
                module.as_ref(),
                &reason,
                &by,
                crate::host::clock::now(),
            )
        })
        .await?;
    state.reload_wake.notify_one();
    let url = format!("/v1/reloads/{}", r.id);
    Ok(json_response(
        StatusCode::ACCEPTED,
        &to_json(views::FiledView {
            id: r.id,
            status: r.status(),
            url,
        }),
    ))
}

/// The agent: what runs, the launcher's state, the updates of itself.
async fn agent(state: &ApiState, text: bool) -> Result<Resp, ApiError> {
    let updates = state.store.blocking(|s| s.agent_updates()).await?;
    let view = views::agent::of(state.updater.launched(), &updates);
    if text {
        return Ok(text_response(views::text::agent(&view)));
    }
    Ok(json_response(StatusCode::OK, &to_json(view)))
}

/// Files an update of stead itself: `{"statement": <envelope>}` or
/// `{"url": "<where the statement is>"}`, and `"downgrade": true` for a
/// deliberate downgrade.
async fn file_agent_update(state: &ApiState, body: &[u8]) -> Result<Resp, ApiError> {
    use crate::update::executor::{Filed, RequestError};
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Ask {
        statement: Option<serde_json::Value>,
        url: Option<String>,
        #[serde(default)]
        downgrade: bool,
    }
    crate::model::json::no_repeated_keys(body).map_err(|r| ApiError::Invalid {
        field: r.path,
        message: r.message,
    })?;
    let ask: Ask =
        serde_json::from_slice(body).map_err(|e| ApiError::BadRequest(format!("the body: {e}")))?;
    let invalid = |field: &str, message: String| ApiError::Invalid {
        field: field.into(),
        message,
    };
    let (statement, url) = match (ask.statement, ask.url) {
        // The signature covers the payload, not the envelope's text.
        (Some(s), None) => (
            serde_json::to_vec(&s).expect("a JSON value serialises"),
            None,
        ),
        (None, Some(url)) => {
            let bytes = state
                .updater
                .fetch_statement(&url)
                .await
                .map_err(|e| invalid("url", e.to_string()))?;
            (bytes, Some(url))
        }
        _ => {
            return Err(ApiError::BadRequest(
                "give the release statement as \"statement\" or where it is as \"url\", one of them".into(),
            ));
        }
    };
    match state
        .updater
        .request(statement, url, "the API", ask.downgrade)
        .await
    {
        Ok(Filed::Filed(u)) => Ok(json_response(
            StatusCode::ACCEPTED,
            &to_json(views::agent::AgentUpdateView::from(&*u)),
        )),
        Ok(Filed::Running(running)) => Ok(json_response(
            StatusCode::OK,
            &to_json(views::agent::AlreadyRunningView { running }),
        )),
        Err(e @ (RequestError::NotLaunched | RequestError::Busy(_))) => {
            Err(ApiError::Conflict(e.to_string()))
        }
        Err(RequestError::Statement(m)) => Err(invalid("statement", m)),
        Err(RequestError::Refused(m)) => Err(invalid("version", m)),
        Err(RequestError::Fetch(m)) => Err(invalid("url", m)),
        Err(RequestError::Store(e)) => Err(ApiError::Store(e)),
    }
}

async fn list_reloads(state: &ApiState, text: bool) -> Result<Resp, ApiError> {
    let all = state.store.blocking(|s| s.reloads()).await?;
    if text {
        return Ok(text_response(views::text::reloads(&all)));
    }
    Ok(json_response(
        StatusCode::OK,
        &to_json(views::ReloadsView { reloads: all }),
    ))
}

/// Cancels an open request: it ends `failed` ("cancelled by …"), and a
/// version it landed is set aside (the module goes back to what it ran).
async fn cancel_reload(state: &ApiState, id: &str, query: &str) -> Result<Resp, ApiError> {
    let id = reload_id(id)?;
    let mut by = "the API".to_string();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        match pair.split_once('=').unwrap_or((pair, "")) {
            ("by", v) => {
                let fine = |c: char| c.is_ascii_alphanumeric() || "._@-".contains(c);
                if v.is_empty() || v.len() > 64 || !v.chars().all(fine) {
                    return Err(ApiError::Invalid {
                        field: "by".into(),
                        message: "1 to 64 letters, digits, '.', '_', '@' or '-'".into(),
                    });
                }
                by = v.to_string();
            }
            (other, _) => {
                return Err(ApiError::BadRequest(format!(
                    "unknown query parameter {:?}",
                    crate::model::text::clip(other, 64)
                )));
            }
        }
    }
    let why = format!("cancelled by {by}");
    let out = state
        .store
        .blocking(move |s| s.end_reload(id, why, crate::host::clock::now()))
        .await?;
    use crate::model::reload::RequestError;
    let r = match out {
        Ok(r) => r,
        Err(RequestError::Invalid { .. }) => {
            return Err(ApiError::NotFound(format!("no reload request {id}")));
        }
        Err(e) => return Err(ApiError::Conflict(e.to_string())),
    };
    tracing::info!(id, "reload {}", r.failure().unwrap_or("cancelled"));
    // The pass puts back what the module ran; the executor lets it go.
    state.wake.notify_one();
    state.reload_wake.notify_one();
    Ok(json_response(
        StatusCode::OK,
        &serde_json::to_value(&r).expect("serialises"),
    ))
}

fn reload_id(id: &str) -> Result<u64, ApiError> {
    id.parse().map_err(|_| {
        ApiError::BadRequest(format!(
            "{:?} is not a request id",
            crate::model::text::clip(id, 64)
        ))
    })
}

async fn get_reload(state: &ApiState, id: &str) -> Result<Resp, ApiError> {
    let id = reload_id(id)?;
    match state.store.blocking(move |s| s.reload(id)).await? {
        Some(r) => Ok(json_response(
            StatusCode::OK,
            &serde_json::to_value(&r).expect("serialises"),
        )),
        None => Err(ApiError::NotFound(format!("no reload request {id}"))),
    }
}

async fn delete_intention(state: &ApiState, name: ModuleName) -> Result<Resp, ApiError> {
    let n = name.clone();
    state
        .store
        .blocking(move |s| intake::api::delete(s, &n))
        .await?;
    state.wake.notify_one();
    Ok(json_response(
        StatusCode::OK,
        &json!({ "name": name.as_str(), "deleted": true }),
    ))
}

async fn patch_settings(state: &ApiState, name: ModuleName, body: &[u8]) -> Result<Resp, ApiError> {
    crate::model::json::no_repeated_keys(body).map_err(|r| ApiError::Invalid {
        field: if r.path == "." {
            "(body)".into()
        } else {
            r.path
        },
        message: r.message,
    })?;
    let J::Object(map) = serde_json::from_slice(body)
        .map_err(|e| ApiError::BadRequest(format!("malformed JSON: {e}")))?
    else {
        return Err(ApiError::Invalid {
            field: "(body)".into(),
            message: "must be a JSON object of setting keys".into(),
        });
    };
    let mut patch: intake::api::Patch = BTreeMap::new();
    for (k, v) in map {
        let field = crate::model::names::setting_field(&k);
        let key = SettingKey::try_from(k.as_str()).map_err(|e| ApiError::Invalid {
            field: field.clone(),
            message: e.0,
        })?;
        let v = if v.is_null() {
            None
        } else {
            Some(Value::from_json(v, &field).map_err(|m| ApiError::Invalid {
                field: field.clone(),
                message: m,
            })?)
        };
        patch.insert(key, v);
    }
    let n = name.clone();
    let out = state
        .store
        .blocking(move |s| intake::api::patch_settings(s, &n, &patch))
        .await?;
    if out.changed {
        state.wake.notify_one();
    }
    let settings: serde_json::Map<String, J> = out
        .settings
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_json()))
        .into_object();
    Ok(json_response(
        StatusCode::OK,
        &to_json(views::WrittenView {
            changed: out.changed,
            name: name.to_string(),
            revision: out.revision,
            settings: Some(settings),
        }),
    ))
}
