//! The central plane: desired state for this node as a signed document on
//! any static HTTP host, polled with conditional GETs, and the node's status
//! PUT back. The document's envelope and keys ([`envelope`]), its payload
//! ([`document`]; its times are read by [`crate::model::time`]), a group's
//! document with its staged rollout ([`group`]); whether a
//! fetched document is adopted ([`accept`]); the polling loop ([`sync`])
//! and the reports ([`report`]); the one holder of the node's trust
//! ([`trusted`]). The publisher's side: which of a fleet's
//! documents to sign ([`publish`]), its reports rolled up ([`rollup`]),
//! read from a web server's listings when not from a directory
//! ([`index`]). A refusal's class is data, in the model
//! ([`crate::model::refusal`]), named here as [`RefusalClass`].

pub mod accept;
pub mod config;
pub mod document;
pub mod enroll;
pub mod envelope;
#[cfg(test)]
pub(crate) mod fixtures;
pub mod group;
pub mod held;
pub mod index;
pub mod publish;
pub mod report;
pub mod rollup;
pub mod root;
pub mod sync;
pub mod trusted;

pub use crate::model::refusal::RefusalClass;
