//! The records of disk stewardship, version 1 of the `images` table (images
//! this node pulled, by ID) and of the `previous` table (per module: the
//! image it runs and the one it ran before), tables added without a schema
//! change. Field order is the encoding: never change it.

use serde::{Deserialize, Serialize};

/// An image this node pulled.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct PulledRecord {
    /// The reference it was pulled by.
    pub reference: String,
    /// When, seconds since the epoch.
    pub at: u64,
    /// Its layers as its manifest named them (digest, compressed size),
    /// when the agent read the manifest before pulling.
    pub layers: Vec<(String, u64)>,
}

/// What a module runs and ran before.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct HistoryRecord {
    /// The image ID its container runs.
    pub current: String,
    /// The image ID it ran before its last image change.
    pub previous: Option<String>,
    /// When `current` was first seen, seconds since the epoch.
    pub since: u64,
}
