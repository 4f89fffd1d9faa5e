//! stead: an agent for one edge node that keeps the node's containers true to
//! what they were told to run.
//!
//! Data flows one way: intentions ([`intention`]) → rendered files
//! ([`render`]) and digests ([`digest`], [`spec`]) → a plan ([`plan`]) →
//! engine actions ([`runtime`]) → observations and events ([`store`]),
//! driven by [`reconcile`] on every heartbeat of the [`agent`] loop.

pub mod agent;
pub mod api;
pub mod cli;
pub mod client;
pub mod config;
pub mod digest;
pub mod intention;
pub mod metrics;
pub mod names;
pub mod plan;
pub mod reconcile;
pub mod render;
pub mod runtime;
pub mod spec;
pub mod status;
pub mod store;
pub mod systemd;
pub mod value;
pub mod watch;
