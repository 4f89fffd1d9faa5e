//! The uploads one-shot actions ask (a support bundle, a module's logs):
//! what the pass collected, PUT where the action says (a presigned URL,
//! which no status, event, log line or error shows past its path) or on
//! the plane's host with its credentials (`nodes/<node>/uploads/<id>/…`),
//! retried with back-off while the host is away, and the action's record
//! ended: `done` with where it went, or `failed` with why. The pass
//! stored it `begun` before it handed it here; an agent stopped before the
//! end collects and sends it again (a PUT of the same name replaces it).

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method};
use tokio::sync::mpsc;

use crate::model::action::{Kind, Upload};
use crate::net::http::{Http, Redirects};
use crate::plane::report::Reporter;
use crate::store::Store;

/// How long one PUT may take.
const PUT_LIMIT: Duration = Duration::from_secs(300);
/// How many times an upload is tried before it fails.
const TRIES: u32 = 6;
/// The first wait between tries, doubled after each.
const FIRST_WAIT: Duration = Duration::from_secs(10);

/// The ids of the uploads handed to [`run`] and not ended yet: the pass
/// does not collect them again meanwhile.
pub type InFlight = Arc<Mutex<BTreeSet<String>>>;

/// How many of the last events a support bundle carries.
const BUNDLE_EVENTS: usize = 1000;

/// Sends each upload handed over, one at a time, until the channel
/// closes; a support bundle gets the device's own part first (`r`: the
/// report it would send now, the last events, the store's summary, the
/// agent's log).
pub async fn run(mut uploads: mpsc::Receiver<Upload>, r: Reporter, in_flight: InFlight) {
    // Never where a redirect would send it: the URL is the action's.
    let http = r.http.with_redirects(Redirects::Never);
    let store = r.store.clone();
    while let Some(mut u) = uploads.recv().await {
        if u.record.kind == Kind::SupportBundle {
            let mine = device_part(&r).await;
            u.files.splice(0..0, mine);
        }
        let (content_type, body) = u.body();
        drop(u.files);
        let body = Bytes::from(body);
        let id = u.record.id.clone();
        let shown = crate::model::url::shown(&u.url);
        let size = body.len() as u64;
        let mut wait = FIRST_WAIT;
        let mut last = String::new();
        let mut sent = false;
        for attempt in 1..=TRIES {
            match put(&http, &u.url, content_type, &body).await {
                Ok(()) => {
                    sent = true;
                    break;
                }
                Err(e) => {
                    tracing::warn!("action {id}: upload {attempt} of {TRIES} failed: {e}");
                    last = e;
                }
            }
            if attempt < TRIES {
                tokio::time::sleep(wait).await;
                wait = wait.saturating_mul(2);
            }
        }
        let mut record = u.record;
        let now = crate::host::clock::now();
        let moved = if sent {
            record.finish(
                format!("uploaded {} to {shown}", crate::model::disk::human(size)),
                now,
            )
        } else {
            record.fail(format!("not uploaded after {TRIES} tries: {last}"), now)
        };
        if moved.is_ok() {
            let said = format!(
                "action {id} ({}): {}: {}",
                record.kind.as_str(),
                record.status.as_str(),
                record.result.as_deref().unwrap_or_default()
            );
            if let Err(e) = store.blocking(move |s| s.keep_action(&record, said)).await {
                tracing::error!("action {id}: its end is not stored: {e}");
            }
        }
        in_flight.lock().expect("uploads in flight").remove(&id);
    }
}

/// A support bundle's part the device adds to the modules' logs: the
/// report it would send now (`report.json`: its modules, the plane, the
/// agent, its facts), its last events (`events.json`), the store's
/// summary (`store.txt`) and the agent's last log lines (`agent.log`).
/// None holds a secret: the report, the events and the log never do.
async fn device_part(r: &Reporter) -> Vec<(String, Vec<u8>)> {
    let (_, report) = r.build(0, 0).await;
    let mut files = vec![(
        "report.json".to_string(),
        serde_json::to_vec_pretty(&report).unwrap_or_default(),
    )];
    let (events, summary) = r
        .store
        .blocking(|s| (s.last_events(BUNDLE_EVENTS).unwrap_or_default(), summary(s)))
        .await;
    files.push((
        "events.json".into(),
        serde_json::to_vec_pretty(&events).unwrap_or_default(),
    ));
    files.push(("store.txt".into(), summary.into_bytes()));
    files.push(("agent.log".into(), crate::host::log::recent().into_bytes()));
    files
}

/// What the store holds, in lines: each intention (its source and
/// revision), the reload requests, the updates of stead, the update locks
/// and the actions' records.
fn summary(s: &Store) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    match s.entries() {
        Ok(entries) => {
            let _ = writeln!(out, "intentions: {}", entries.len());
            for (name, e) in &entries {
                let said = e
                    .record
                    .as_ref()
                    .map_or("(none)".to_string(), |r| format!("revision {}", r.revision));
                let _ = writeln!(out, "  {name}: {said}");
            }
        }
        Err(e) => {
            let _ = writeln!(out, "intentions: unread: {e}");
        }
    }
    let count = |n: Result<usize, crate::store::StoreError>| {
        n.map_or_else(|e| format!("unread: {e}"), |n| n.to_string())
    };
    let _ = writeln!(
        out,
        "reload requests: {}",
        count(s.reloads().map(|r| r.len()))
    );
    let _ = writeln!(
        out,
        "updates of stead: {}",
        count(s.agent_updates().map(|u| u.len()))
    );
    match s.locks() {
        Ok(locks) => {
            let _ = writeln!(out, "update locks: {}", locks.len());
            for l in locks {
                let _ = writeln!(out, "  {} ({}): {}", l.module, l.scope.as_str(), l.reason);
            }
        }
        Err(e) => {
            let _ = writeln!(out, "update locks: unread: {e}");
        }
    }
    match s.actions() {
        Ok(actions) => {
            let _ = writeln!(out, "actions: {}", actions.len());
            for a in actions {
                let _ = writeln!(
                    out,
                    "  {} ({}): {} {}",
                    a.id,
                    a.kind.as_str(),
                    a.status.as_str(),
                    a.result.as_deref().unwrap_or_default()
                );
            }
        }
        Err(e) => {
            let _ = writeln!(out, "actions: unread: {e}");
        }
    }
    out
}

/// One PUT; the error names the URL only as [`crate::model::url::shown`].
async fn put(
    http: &Http,
    url: &str,
    content_type: &'static str,
    body: &Bytes,
) -> Result<(), String> {
    let shown = crate::model::url::shown(url);
    let uri: http::Uri = url.parse().map_err(|_| format!("{shown}: not a URL"))?;
    let mut headers = HeaderMap::new();
    headers.insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static(content_type),
    );
    match http
        .send_body(
            Method::PUT,
            uri,
            &headers,
            body.clone(),
            PUT_LIMIT,
            64 * 1024,
        )
        .await
    {
        Ok(a) if a.status.is_success() => Ok(()),
        Ok(a) => Err(format!("PUT {shown}: HTTP {}", a.status)),
        Err(t) => Err(format!("PUT {shown}: {t}")),
    }
}
