//! The central plane through the API: what the node holds and heard of it
//! (`GET /v1/plane`, also folded into `/v1/status`), and the nudge that
//! polls at once (`POST /v1/plane/sync`): any push channel an operator has
//! becomes a nudge, never a second source of truth.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::mpsc;

use crate::api::error::ApiError;
use crate::api::views::{
    ConflictView, HeldView, OutcomeView, PlaneDetail, PlaneView, RefusalView, ReportsView,
};
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

/// The plane's state (`null` fields where nothing is known).
pub fn plane_view(plane: Option<&PlaneHandle>) -> PlaneView {
    let Some(p) = plane else {
        return PlaneView {
            configured: false,
            plane: None,
        };
    };
    let s = p.status.lock().expect("plane status lock").clone();
    // Times are seconds since the epoch, as everywhere in the API.
    let now = crate::plane::accept::Clock::read().now(None);
    PlaneView {
        configured: true,
        plane: Some(PlaneDetail {
            clock: s.clock.map(|c| c.as_str().to_string()),
            conflicts: conflicts(&s.conflicts),
            error: s.contact.error,
            held: s.held.as_ref().map(|h| HeldView {
                accepted_at: h.accepted_at,
                expired: Some(h.expires <= now),
                expires: h.expires,
                floor: h.revoked.is_none(),
                issued_at: h.issued_at,
                key_id: h.key_id.clone(),
                revision: h.revision,
                revoked: h.revoked.clone(),
            }),
            last_contact: s.contact.at,
            next_poll_at: s.next_poll_at,
            plane_date: s.contact.plane_date,
            refusal: s.contact.refusal.as_ref().map(|r| RefusalView {
                at: r.at,
                class: r.class,
                detail: r.detail.clone(),
                revision: r.revision,
            }),
            reports: ReportsView {
                error: s.reports.error,
                last_seq: s.reports.last_seq,
                last_sent_at: s.reports.last_sent_at,
                pending: s.reports.pending,
                url: s.reports.url,
            },
            url: s.url,
        }),
    }
}

/// The modules the held document names that another source owns.
pub fn conflicts(c: &[(String, String)]) -> Vec<ConflictView> {
    c.iter()
        .map(|(m, e)| ConflictView {
            error: e.clone(),
            module: m.clone(),
        })
        .collect()
}

/// Polls now and says what the poll did (or, past a minute, that it is
/// under way).
pub async fn sync(
    plane: Option<&PlaneHandle>,
) -> Result<(hyper::StatusCode, OutcomeView), ApiError> {
    let Some(p) = plane else {
        return Err(ApiError::Conflict(
            "no central plane is configured ([plane] url in stead.toml)".into(),
        ));
    };
    let (tx, rx) = tokio::sync::oneshot::channel();
    if p.nudge.try_send(tx).is_err() {
        // Full: polls are already asked for; this one is answered by them.
        return Ok((hyper::StatusCode::ACCEPTED, OutcomeView::UnderWay));
    }
    match tokio::time::timeout(NUDGE_WAIT, rx).await {
        Ok(Ok(o)) => Ok((hyper::StatusCode::OK, outcome_view(&o))),
        _ => Ok((hyper::StatusCode::ACCEPTED, OutcomeView::UnderWay)),
    }
}

/// What a poll did, as the API says it.
pub fn outcome_view(o: &Outcome) -> OutcomeView {
    match o {
        Outcome::NotModified => OutcomeView::NotModified,
        Outcome::Adopted { revision } => OutcomeView::Adopted {
            revision: *revision,
        },
        Outcome::Same { revision } => OutcomeView::Same {
            revision: *revision,
        },
        Outcome::Refused(r) => OutcomeView::Refused {
            class: r.class,
            detail: r.detail.clone(),
            revision: r.revision,
        },
        Outcome::Failed { error, retry_after } => OutcomeView::Failed {
            error: error.clone(),
            retry_after_secs: retry_after.map(|d| d.as_secs()),
        },
    }
}
