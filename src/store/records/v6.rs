//! Records new in schema 6: the intention record version 5 (the runtime
//! fields), and version 1 of the `live` table.

use serde::{Deserialize, Serialize};

use super::v4;

/// An intention with what its container needs beyond version 4's
/// fields: the runtime fields as a JSON object in the intention
/// document's own form (`None`: every one unset).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct IntentionRecord {
    pub base: v4::IntentionRecord,
    pub runtime: Option<String>,
    /// The config's reload signal (`SIGHUP`).
    pub config_reload: Option<String>,
}

/// The container a module's live files were last delivered to.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct LiveRecord {
    pub container: String,
    pub digest: String,
}

impl From<v4::IntentionRecord> for IntentionRecord {
    fn from(base: v4::IntentionRecord) -> Self {
        // Nothing beyond version 4's fields was asked of a container.
        IntentionRecord {
            base,
            runtime: None,
            config_reload: None,
        }
    }
}
