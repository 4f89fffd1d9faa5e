//! Records new in schema 8: version 2 of reload requests (what each item
//! was resolved against) and of update states (the failed auto-update
//! digests).

use serde::{Deserialize, Serialize};

use super::v4;

/// What an item adds to version 1's: the intention's `image` and
/// `update.range` it was resolved against (empty: not known, a request
/// from before schema 8), and the digest of the version found.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct ItemExtra {
    pub image: String,
    pub range: String,
    pub found_digest: Option<String>,
}

/// A request: version 1's, and each item's extra fields, by index (an
/// item without one reads as not known).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct ReloadRecord {
    pub base: v4::ReloadRecord,
    pub items: Vec<ItemExtra>,
}

impl From<v4::ReloadRecord> for ReloadRecord {
    fn from(base: v4::ReloadRecord) -> Self {
        ReloadRecord {
            base,
            items: Vec::new(),
        }
    }
}

/// A digest whose auto-update request failed, and what it failed under.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct FailedRecord {
    pub digest: String,
    pub version: String,
    pub image: String,
    pub range: String,
    pub agent: String,
    pub request: u64,
}

/// A module's update state: version 1's and the failed digests.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct UpdateRecord {
    pub base: v4::UpdateRecord,
    pub failed: Vec<FailedRecord>,
}

impl From<v4::UpdateRecord> for UpdateRecord {
    fn from(base: v4::UpdateRecord) -> Self {
        UpdateRecord {
            base,
            failed: Vec::new(),
        }
    }
}
