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

/// An image reference found signed as the image policy asks (the
/// `image_checks` table, by the reference as a module names it; version
/// 1, a table added without a schema change).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct CheckedRecord {
    /// The digest of the policy it was checked under.
    pub policy: String,
    /// The manifest (or index) digest verified.
    pub manifest: String,
    /// The config digest it names for this platform: the image ID.
    pub config: String,
    /// Per document, the key that signed it.
    pub by: Vec<(String, String)>,
    /// When, seconds since the epoch.
    pub at: u64,
}
