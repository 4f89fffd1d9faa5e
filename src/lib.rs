//! stead: an agent for one edge node that keeps the node's containers true
//! to what they were told to run.
//!
//! Data flows one way: desired state comes in through the [`intake`] (the
//! intentions directory, the HTTP API) into the [`store`]; every pass of
//! the [`agent`] loop, the [`reconcile`]r resolves it with the pure
//! [`model`] against the files on the [`host`], plans against what the
//! [`engine`] shows, acts, and records what it did in the store and the
//! [`status`]. The [`api`] and the [`cli`] only read status and hand writes
//! to the intake; the [`views`] are their wire formats as types, one per
//! format, shared by the API, the CLI and the plane report.

pub mod agent;
pub mod api;
pub mod cli;
pub mod config;
pub mod engine;
pub mod intake;
pub mod plane;
pub mod reconcile;
pub mod registry;
pub mod reload;
pub mod site;
pub mod status;
pub mod store;
pub mod update;
pub mod views;

pub use stead_core::model;
pub use stead_host::host;
pub use stead_net::net;

pub use stead_core::{BUILD_TIME, COMMIT, TARGET, VERSION, version_number};
