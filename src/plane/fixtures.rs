//! The plane's fixed inputs for the wire formats' golden tests (their
//! texts, and the node's and the board's inputs, are in
//! [`crate::views::fixtures`]).

use crate::model::fleet::{Take, Why};
use crate::plane::accept::ClockStatus;
use crate::plane::sync::{GroupStatus, HeldSummary, PlaneStatus, ReportStatus};
use crate::store::plane::{Contact, Refusal};

/// A plane with every fact, and a bare one.
pub fn planes() -> [PlaneStatus; 2] {
    let full = PlaneStatus {
        url: "http://plane/nodes/edge-1/desired.json".into(),
        held: Some(HeldSummary {
            revision: 9,
            issued_at: 1_700_000_000,
            expires: 1_700_086_400,
            accepted_at: 1_700_000_100,
            key_id: "ed25519:abc".into(),
            revoked: Some("no key trusted now signed it".into()),
        }),
        contact: Contact {
            at: Some(1_700_000_200),
            refusal: Some(Refusal {
                class: crate::plane::RefusalClass::Rollback,
                detail: "revision 8 is older".into(),
                revision: Some(8),
                at: 1_700_000_150,
            }),
            error: Some("HTTP 503".into()),
            plane_date: Some(1_700_000_201),
        },
        clock: Some(ClockStatus::Behind(30)),
        conflicts: vec![("db".into(), "a file owns it".into())],
        next_poll_at: Some(1_700_000_500),
        agent: None,
        groups: vec![
            GroupStatus {
                group: "eu".into(),
                url: "http://plane/groups/eu/desired.json".into(),
                revision: Some(4),
                running: Some(3),
                take: Some(Take::Previous {
                    why: Why::Turn,
                    until: Some(1_700_003_600),
                }),
                error: None,
                revoked: None,
                not_for: None,
            },
            GroupStatus {
                group: "cameras".into(),
                url: "http://plane/groups/cameras/desired.json".into(),
                revision: Some(2),
                running: Some(2),
                take: Some(Take::New(Why::Canary)),
                error: Some("group cameras: no document at http://plane/groups/cameras/desired.json (HTTP 404)".into()),
                revoked: None,
                not_for: None,
            },
        ],
        reports: ReportStatus {
            url: "http://plane/nodes/edge-1/status.json".into(),
            last_sent_at: Some(1_700_000_300),
            last_seq: Some(42),
            pending: true,
            error: Some("PUT: HTTP 500".into()),
        },
        root: super::sync::RootStatus {
            held: Some(crate::plane::root::Root {
                version: 2,
                expires: 1_731_000_000,
                root: crate::plane::root::Role {
                    keys: vec![key(1), key(2)],
                    threshold: 2,
                },
                documents: vec![key(3)],
                delegations: Vec::new(),
                allow_list: None,
            }),
            error: Some("root version 3 is signed by 1 of the root keys of version 2, which needs 2".into()),
            allow_list: None,
        },
        taken_here: 7,
        nudge: None,
    };
    let bare = PlaneStatus {
        url: "http://plane/d.json".into(),
        ..PlaneStatus::default()
    };
    [full, bare]
}

/// A fixed public key of the fixtures.
fn key(n: u8) -> crate::plane::envelope::PublicKey {
    use base64::Engine as _;
    crate::plane::envelope::PublicKey::parse(
        &base64::engine::general_purpose::STANDARD.encode([n; 32]),
    )
    .expect("32 bytes are a key")
}
