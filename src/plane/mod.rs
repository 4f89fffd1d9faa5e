//! The central plane, on the device: polling a node's document and its
//! groups' with conditional GETs ([`sync`]), the node's status PUT back
//! ([`report`]), its config ([`config`]), the site budget's leases
//! ([`lease`]). The documents, every rule that
//! judges them, the one holder of the node's trust ([`trusted`]) and what
//! the node holds from the plane as one value with pure transitions
//! ([`held`]) are the core's (`stead_core::plane`, re-exported here:
//! [`envelope`], [`document`], [`group`], [`accept`], [`root`],
//! [`allowlist`]);
//! the publisher's side is the operator's tool, `stead-plane`.

pub mod broker;
pub mod clock;
pub mod config;
#[cfg(test)]
pub(crate) mod fixtures;
pub mod lease;
pub mod report;
pub mod sync;
pub mod uploads;

pub use stead_core::plane::{
    RefusalClass, accept, allowlist, document, envelope, group, held, nudge, root, trusted,
};

/// The node's clocks as they read now (nothing counted): the system
/// clock read here, the build time the core knows.
pub fn read_clock() -> accept::Clock {
    accept::Clock::at(crate::host::clock::now())
}
