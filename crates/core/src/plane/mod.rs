//! The central plane's documents and the rules that judge them, pure: the
//! signature around a document and its keys ([`envelope`]), a node's
//! document ([`document`]; its times are read by [`crate::model::time`]),
//! a group's document with its staged rollout ([`group`]), whether a
//! fetched document is adopted ([`accept`]), the root of trust and how a
//! new one is taken ([`root`]). The device polls and adopts
//! (`stead::plane`); the operator signs and publishes (`stead-plane`). A
//! refusal's class is data, in the model ([`crate::model::refusal`]),
//! named here as [`RefusalClass`].

pub mod accept;
pub mod document;
pub mod envelope;
pub mod group;
pub mod root;

pub use crate::model::refusal::RefusalClass;
