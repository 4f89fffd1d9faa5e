//! Module reloads from an OCI registry: one durable request per reload,
//! resolved to the newest compatible version, landed, activated with
//! exactly one restart, measured, and reported; Failed or Faulted decided
//! in one place ([`classify`]).

pub mod classify;
pub mod executor;
pub mod file;
pub mod lane;
