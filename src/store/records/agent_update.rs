//! An update of stead itself, version 1 of the `agent_updates` table (a
//! table added without a schema change). Unlike the other records this one
//! is JSON behind its version byte: it must read the same in the version
//! that filed it and in the version it installs, in both directions, so a
//! field a later version adds is an optional key the earlier one ignores
//! (postcard's fields are positional).

use serde::{Deserialize, Serialize};

use crate::model::agent_update as m;
use crate::model::launch::AgentVersion;

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct AgentUpdateRecord {
    pub id: u64,
    pub version: String,
    pub from: String,
    /// The envelope, base64.
    pub statement: String,
    #[serde(default)]
    pub statement_url: Option<String>,
    pub requested_by: String,
    pub requested_at: u64,
    #[serde(default)]
    pub downgrade: bool,
    pub stage: String,
    #[serde(default)]
    pub landed: bool,
    #[serde(default)]
    pub restart_requested_at: Option<u64>,
    #[serde(default)]
    pub finished_at: Option<u64>,
    #[serde(default)]
    pub failure: Option<String>,
    #[serde(default)]
    pub attempt: u32,
    #[serde(default)]
    pub faulted_at: Option<u64>,
    #[serde(default)]
    pub log: Vec<(u64, String)>,
}

pub fn record(u: &m::AgentUpdate) -> AgentUpdateRecord {
    use base64::Engine as _;
    // The record spells the request's state flat, as it always has.
    let flat = u.flat();
    AgentUpdateRecord {
        id: u.id,
        version: u.version.to_string(),
        from: u.from.clone(),
        statement: base64::engine::general_purpose::STANDARD.encode(&u.statement),
        statement_url: u.statement_url.clone(),
        requested_by: u.requested_by.clone(),
        requested_at: u.requested_at,
        downgrade: u.downgrade,
        stage: flat.stage.as_str().to_string(),
        landed: u.landed,
        restart_requested_at: flat.restart_requested_at,
        finished_at: flat.finished_at,
        failure: flat.failure,
        attempt: u.attempt,
        faulted_at: flat.faulted_at,
        log: u.log.clone(),
    }
}

pub fn from_record(r: AgentUpdateRecord) -> Result<m::AgentUpdate, String> {
    use base64::Engine as _;
    let statement = base64::engine::general_purpose::STANDARD
        .decode(&r.statement)
        .map_err(|e| format!("statement: {e}"))?;
    let mut u = m::AgentUpdate::new(
        r.id,
        AgentVersion::parse(&r.version)?,
        &r.from,
        (statement, r.statement_url),
        &r.requested_by,
        r.requested_at,
    )
    .restored(m::FlatState {
        // A stage a later version named is read as faulted: tried again,
        // never taken for final.
        stage: m::Stage::parse(&r.stage).unwrap_or(m::Stage::Faulted),
        restart_requested_at: r.restart_requested_at,
        finished_at: r.finished_at,
        failure: r.failure,
        faulted_at: r.faulted_at,
    });
    u.downgrade = r.downgrade;
    u.landed = r.landed;
    u.attempt = r.attempt;
    u.log = r.log;
    Ok(u)
}

pub fn encode(u: &m::AgentUpdate) -> Vec<u8> {
    let mut out = vec![super::AGENT_UPDATES];
    out.extend(serde_json::to_vec(&record(u)).expect("a record of strings and numbers serialises"));
    out
}

pub fn decode(bytes: &[u8]) -> Result<m::AgentUpdate, String> {
    match bytes.split_first() {
        Some((v, rest)) if *v == super::AGENT_UPDATES => {
            let r: AgentUpdateRecord = serde_json::from_slice(rest).map_err(|e| e.to_string())?;
            from_record(r)
        }
        Some((v, _)) => Err(format!(
            "record version {v}, expected {}",
            super::AGENT_UPDATES
        )),
        None => Err("empty record".into()),
    }
}
