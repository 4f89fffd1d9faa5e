//! Records new in schema 5: the central plane's held document and last
//! contact, version 1 of the `plane` table.

use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub enum PlaneRecord {
    Held(HeldRecord),
    Contact(ContactRecord),
    Envelope(Vec<u8>),
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct HeldRecord {
    pub url: String,
    pub revision: u64,
    pub payload_digest: String,
    pub etag: Option<String>,
    pub issued_at: u64,
    pub expires: u64,
    pub newest_issued_at: u64,
    pub accepted_at: u64,
    pub key_id: String,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct RefusalRecord {
    pub class: String,
    pub detail: String,
    pub revision: Option<u64>,
    pub at: u64,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct ContactRecord {
    pub at: Option<u64>,
    pub refusal: Option<RefusalRecord>,
    pub error: Option<String>,
    pub plane_date: Option<u64>,
}
