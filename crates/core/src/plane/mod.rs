//! The central plane's documents and the rules that judge them, pure: the
//! signature around a document and its keys ([`envelope`]), a node's
//! document ([`document`]; its times are read by [`crate::model::time`]),
//! a group's document with its staged rollout ([`group`]), whether a
//! fetched document is adopted ([`accept`]), the root of trust and how a
//! new one is taken ([`root`]: with its delegations), the allow-list of
//! image digests a root may ask for ([`allowlist`]), the one holder of a node's trust that
//! verifies every document, group document, release statement and root
//! ([`trusted`]), and what a node holds from the plane as one value with
//! pure transitions ([`held`]). The device polls and adopts
//! (`stead::plane`); the operator signs and publishes (`stead-plane`). A
//! refusal's class is data, in the model ([`crate::model::refusal`]),
//! named here as [`RefusalClass`].

pub mod accept;
pub mod allowlist;
pub mod document;
pub mod envelope;
pub mod group;
pub mod held;
pub mod nudge;
pub mod root;
pub mod trusted;

pub use crate::model::refusal::RefusalClass;
