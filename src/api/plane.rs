//! The central plane through the API: what the node holds and heard of it
//! (`GET /v1/plane`, also folded into `/v1/status`), and the nudge that
//! polls at once (`POST /v1/plane/sync`): any push channel an operator has
//! becomes a nudge, never a second source of truth.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value as J, json};
use tokio::sync::mpsc;

use crate::api::error::ApiError;
use crate::plane::sync::{Nudge, Outcome, PlaneStatus};

/// How long a nudge waits for its poll before answering that it is under way.
const NUDGE_WAIT: Duration = Duration::from_secs(60);

/// The poller, as the API reaches it.
#[derive(Clone)]
pub struct PlaneHandle {
    /// The plane's state.
    pub status: Arc<Mutex<PlaneStatus>>,
    /// Asks for a poll now.
    pub nudge: mpsc::Sender<Nudge>,
}

/// The plane's state as JSON (`null` fields where nothing is known).
pub fn plane_json(plane: Option<&PlaneHandle>) -> J {
    let Some(p) = plane else {
        return json!({ "configured": false });
    };
    let s = p.status.lock().expect("plane status lock").clone();
    // Times are seconds since the epoch, as everywhere in the API.
    let t = |v: Option<u64>| v;
    json!({
        "configured": true,
        "url": s.url,
        "held": s.held.as_ref().map(|h| json!({
            "revision": h.revision,
            "issued_at": h.issued_at,
            "expires": h.expires,
            "expired": h.expires <= crate::plane::accept::Clock::read().now(None),
            "accepted_at": h.accepted_at,
            "key_id": h.key_id,
            "floor": h.revoked.is_none(),
            "revoked": h.revoked,
        })),
        "last_contact": t(s.contact.at),
        "error": s.contact.error,
        "refusal": s.contact.refusal.as_ref().map(|r| json!({
            "class": r.class,
            "detail": r.detail,
            "revision": r.revision,
            "at": r.at,
        })),
        "conflicts": s.conflicts.iter().map(|(m, e)| json!({"module": m, "error": e})).collect::<Vec<_>>(),
        "clock": s.clock.map(|c| c.as_str()),
        "plane_date": t(s.contact.plane_date),
        "next_poll_at": t(s.next_poll_at),
        "reports": {
            "url": s.reports.url,
            "last_sent_at": t(s.reports.last_sent_at),
            "last_seq": s.reports.last_seq,
            "pending": s.reports.pending,
            "error": s.reports.error,
        },
    })
}

/// Polls now and says what the poll did (or, past a minute, that it is
/// under way).
pub async fn sync(plane: Option<&PlaneHandle>) -> Result<(hyper::StatusCode, J), ApiError> {
    let Some(p) = plane else {
        return Err(ApiError::Conflict(
            "no central plane is configured ([plane] url in stead.toml)".into(),
        ));
    };
    let (tx, rx) = tokio::sync::oneshot::channel();
    if p.nudge.try_send(tx).is_err() {
        // Full: polls are already asked for; this one is answered by them.
        return Ok((hyper::StatusCode::ACCEPTED, json!({"outcome": "under-way"})));
    }
    match tokio::time::timeout(NUDGE_WAIT, rx).await {
        Ok(Ok(o)) => Ok((hyper::StatusCode::OK, outcome_json(&o))),
        _ => Ok((hyper::StatusCode::ACCEPTED, json!({"outcome": "under-way"}))),
    }
}

pub(crate) fn outcome_json(o: &Outcome) -> J {
    let mut j = json!({ "outcome": o.as_str() });
    match o {
        Outcome::Adopted { revision } | Outcome::Same { revision } => {
            j["revision"] = json!(revision);
        }
        Outcome::Refused(r) => {
            j["class"] = json!(r.class);
            j["detail"] = json!(r.detail);
            j["revision"] = json!(r.revision);
        }
        Outcome::Failed { error, retry_after } => {
            j["error"] = json!(error);
            j["retry_after_secs"] = json!(retry_after.map(|d| d.as_secs()));
        }
        Outcome::NotModified => {}
    }
    j
}
