//! Records new in schema 9: the intention record version 7 (the intention
//! as its canonical document).

use serde::{Deserialize, Serialize};

use super::v1;

/// A stored intention: where it came from, its revisions, and the
/// intention as its canonical JSON document ([`Intention::to_json`]),
/// checked by [`Intention::parse_json`] on the way out.
///
/// [`Intention::to_json`]: crate::model::intention::Intention::to_json
/// [`Intention::parse_json`]: crate::model::intention::Intention::parse_json
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct IntentionRecord {
    pub source: v1::Source,
    pub revision: u64,
    pub plane_revision: Option<u64>,
    pub document: String,
}
