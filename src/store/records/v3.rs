//! Records new in schema 3: the intention (record version 3) gains its
//! update order.

use serde::{Deserialize, Serialize};

use super::{v1, v2};

#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq)]
pub enum UpdateOrder {
    StopFirst,
    StartFirst,
}

/// Version 1's intention, then the new field: in postcard, the same
/// bytes as the fields written one after the other.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Intention {
    pub base: v1::Intention,
    pub update_order: UpdateOrder,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct IntentionRecord {
    pub source: v1::Source,
    pub revision: u64,
    pub intention: Intention,
    pub plane_revision: Option<u64>,
}

impl From<v2::IntentionRecord> for IntentionRecord {
    fn from(r: v2::IntentionRecord) -> Self {
        IntentionRecord {
            source: r.source,
            revision: r.revision,
            intention: Intention {
                base: r.intention,
                // Every module before there was a choice.
                update_order: UpdateOrder::StopFirst,
            },
            plane_revision: r.plane_revision,
        }
    }
}
