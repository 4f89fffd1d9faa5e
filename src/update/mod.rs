//! The agent's own update: a candidate that proves itself within its
//! window or gives up ([`confirm`]). The launcher that starts it is
//! `stead-launch` (its rule: `model::launch`); the state file it shares
//! with the agent is read and written through `host::launch`.

pub mod confirm;
pub mod executor;
pub mod snapshot;
