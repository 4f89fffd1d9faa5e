//! Records new in schema 7: the intention record version 6 (the read-only
//! mounts that are not inputs).

use serde::{Deserialize, Serialize};

use super::v6;

/// An intention with its read-only mounts that are not inputs
/// (`input = false`): their indices in `mounts`, which version 6 keeps
/// as read-only.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct IntentionRecord {
    pub base: v6::IntentionRecord,
    pub views: Vec<u32>,
}

impl From<v6::IntentionRecord> for IntentionRecord {
    fn from(base: v6::IntentionRecord) -> Self {
        // Every read-only mount was an input.
        IntentionRecord {
            base,
            views: Vec::new(),
        }
    }
}
