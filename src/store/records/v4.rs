//! Records new in schema 4: the intention (record version 4) gains its
//! `[update]` section (how its image is updated from its registry); reload
//! requests and update states, version 1 of their tables.

use serde::{Deserialize, Serialize};

use super::{v1, v3};

#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq)]
pub enum Lane {
    Manual,
    Auto,
    Pinned,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Update {
    pub lane: Lane,
    pub range: String,
    pub interval_ms: u64,
    pub health_window_ms: u64,
}

/// Version 3's intention, then the new field.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Intention {
    pub base: v3::Intention,
    pub update: Option<Update>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct IntentionRecord {
    pub source: v1::Source,
    pub revision: u64,
    pub intention: Intention,
    pub plane_revision: Option<u64>,
}

impl From<v3::IntentionRecord> for IntentionRecord {
    fn from(r: v3::IntentionRecord) -> Self {
        IntentionRecord {
            source: r.source,
            revision: r.revision,
            intention: Intention {
                base: r.intention,
                // No module was updated from a registry before.
                update: None,
            },
            plane_revision: r.plane_revision,
        }
    }
}

#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq)]
pub enum ReloadStatus {
    Requested,
    Landing,
    Activating,
    Done,
    Failed,
    Faulted,
}

#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq)]
pub enum Activation {
    Restart,
    NotNeeded,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct ItemRecord {
    pub module: String,
    pub running_version: Option<String>,
    pub running_image: Option<String>,
    pub found_version: Option<String>,
    pub found_floor: Option<String>,
    pub registry: Option<String>,
    pub target_version: Option<String>,
    pub target_digest: Option<String>,
    pub target_image: Option<String>,
    pub healthcheck: bool,
    pub landed: bool,
    pub decision: String,
    pub failure: Option<String>,
    pub transient: bool,
    pub running_target_since: Option<u64>,
    pub restarts_at_start: Option<u32>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct LogRecord {
    pub at: u64,
    pub attempt: u32,
    pub text: String,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct ReloadRecord {
    pub id: u64,
    pub written_by: u64,
    pub module: Option<String>,
    pub reason: String,
    pub requested_by: String,
    pub requested_at: u64,
    pub status: ReloadStatus,
    pub attempt: u32,
    pub faulted_at: Option<u64>,
    pub not_before: Option<u64>,
    pub items: Vec<ItemRecord>,
    pub activation: Option<Activation>,
    pub activation_detail: Option<String>,
    pub restart_requested_at: Option<u64>,
    pub failure: Option<String>,
    pub finished_at: Option<u64>,
    pub log: Vec<LogRecord>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct LandedRecord {
    pub version: String,
    pub digest: String,
    pub image_id: String,
    pub reference: String,
    pub request: u64,
    pub from_image: String,
    pub from_range: String,
    pub previous_image: Option<String>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct UpdateRecord {
    pub landed: Option<LandedRecord>,
    pub skipped: Vec<String>,
    pub last_look: u64,
}
