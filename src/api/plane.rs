//! The central plane through the API: what the node holds and heard of it
//! (`GET /v1/plane`, also folded into `/v1/status`), and the nudge that
//! polls at once (`POST /v1/plane/sync`): any push channel an operator has
//! becomes a nudge, never a second source of truth.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::mpsc;

use crate::api::error::ApiError;
use crate::plane::sync::{Nudge, Outcome, PlaneStatus};
use crate::views::{
    HeldView, OutcomeView, PlaneDetail, PlaneView, RefusalView, ReportsView, conflicts,
};

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
    let now = crate::plane::read_clock().now(None);
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
            groups: s.groups.iter().map(|g| g.view(|t| t)).collect(),
            reports: ReportsView {
                error: s.reports.error,
                last_seq: s.reports.last_seq,
                last_sent_at: s.reports.last_sent_at,
                pending: s.reports.pending,
                url: crate::net::shown(&s.reports.url),
            },
            root: s.root.view(|t| t),
            url: crate::net::shown(&s.url),
            nudge: s.nudge.clone(),
        }),
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::plane::Refusal;
    use crate::views::fixtures::{OUTCOMES, PLANES, golden, same_text};

    fn outcomes() -> Vec<Outcome> {
        let refusal = |class: &str, detail: &str, revision| Refusal {
            class: crate::plane::RefusalClass::parse(class).unwrap(),
            detail: detail.into(),
            revision,
            at: 9,
        };
        vec![
            Outcome::NotModified,
            Outcome::Adopted { revision: 3 },
            Outcome::Same { revision: 3 },
            Outcome::Refused(refusal("rollback", "revision 2 is older", Some(2))),
            Outcome::Refused(refusal("too-large", "too large", None)),
            Outcome::Failed {
                error: "HTTP 503".into(),
                retry_after: Some(Duration::from_secs(60)),
            },
            Outcome::Failed {
                error: "gone".into(),
                retry_after: None,
            },
        ]
    }

    fn plane_text(p: Option<PlaneStatus>) -> String {
        let h = p.map(|p| PlaneHandle {
            status: Arc::new(Mutex::new(p)),
            nudge: mpsc::channel(1).0,
        });
        same_text(&plane_view(h.as_ref()))
    }

    fn outcome_text(o: &Outcome) -> String {
        same_text(&outcome_view(o))
    }

    /// `GET /v1/plane` and `POST /v1/plane/sync` as 0.5.0 wrote them (the
    /// texts in [`crate::views::fixtures`]).
    #[test]
    fn the_wire_formats_are_as_they_were() {
        let planes = crate::plane::fixtures::planes().map(Some);
        for (p, want) in planes.into_iter().chain([None]).zip(PLANES) {
            assert_eq!(plane_text(p), golden(want));
        }
        for (o, want) in outcomes().iter().zip(OUTCOMES) {
            assert_eq!(outcome_text(o), golden(want));
        }
    }

    /// A nudge's subscription is one more key, absent without one (the
    /// texts above).
    #[test]
    fn a_nudge_is_said_beside_the_rest() {
        let [mut p, _] = crate::plane::fixtures::planes();
        p.nudge = Some(crate::views::NudgeView {
            broker: "mqtts://broker.lan:8883".into(),
            topic: "stead/edge-1".into(),
            connected: false,
            error: Some("the broker closed the connection".into()),
            hints: 12,
            polls: 3,
        });
        let v: serde_json::Value = serde_json::from_str(&plane_text(Some(p))).unwrap();
        assert_eq!(
            v["nudge"],
            serde_json::json!({
                "broker": "mqtts://broker.lan:8883",
                "topic": "stead/edge-1",
                "connected": false,
                "error": "the broker closed the connection",
                "hints": 12,
                "polls": 3
            })
        );
    }
}
