//! The record of a group document a node holds, version 1 of the `groups`
//! table (a table added without a schema change: an agent that does not
//! know it never opens it). Field order is the encoding: never change it.

use serde::{Deserialize, Serialize};

use super::v5::HeldRecord;

/// A group document held: its record (revision floor, ETag, times, key),
/// its bytes as fetched, and the digest of the modules of it this node
/// took.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct GroupRecord {
    pub held: HeldRecord,
    pub envelope: Vec<u8>,
    pub took: Option<String>,
}
