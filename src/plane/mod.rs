//! The central plane, on the device: polling a node's document and its
//! groups' with conditional GETs ([`sync`]), what the node holds from the
//! plane as one value with pure transitions ([`held`]), the one holder of
//! the node's trust ([`trusted`]), the node's status PUT back
//! ([`report`]), its config ([`config`]). The documents and every rule
//! that judges them are the core's (`stead_core::plane`, re-exported
//! here: [`envelope`], [`document`], [`group`], [`accept`], [`root`]);
//! the publisher's side is the operator's tool, `stead-plane`.

pub mod config;
#[cfg(test)]
pub(crate) mod fixtures;
pub mod held;
pub mod report;
pub mod sync;
pub mod trusted;

pub use stead_core::plane::{RefusalClass, accept, document, envelope, group, root};

/// The node's clocks as they read now (nothing counted): the system
/// clock read here, the build time the core knows.
pub fn read_clock() -> accept::Clock {
    accept::Clock::at(crate::host::clock::now())
}
