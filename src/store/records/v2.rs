//! Records new in schema 2: the intention record (version 2) gains the
//! revision a central plane stamps; every other record is as in schema 1.

use serde::{Deserialize, Serialize};

use super::v1;

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct IntentionRecord {
    pub source: v1::Source,
    pub revision: u64,
    pub intention: v1::Intention,
    /// The revision of the plane's document that stated it (plane
    /// modules only).
    pub plane_revision: Option<u64>,
}

impl From<v1::IntentionRecord> for IntentionRecord {
    fn from(r: v1::IntentionRecord) -> Self {
        IntentionRecord {
            source: r.source,
            revision: r.revision,
            intention: r.intention,
            plane_revision: None,
        }
    }
}
