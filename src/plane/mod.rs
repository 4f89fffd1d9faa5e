//! The central plane: desired state for this node as a signed document on
//! any static HTTP host, polled with conditional GETs, and the node's status
//! PUT back. The document's envelope and keys ([`envelope`]), its payload
//! ([`document`]) and times ([`time`]); whether a fetched document is
//! adopted ([`accept`]); the polling loop ([`sync`]) and the reports
//! ([`report`]); a refusal's class ([`refusal`]).

pub mod accept;
pub mod document;
pub mod envelope;
pub mod refusal;
pub mod report;
pub mod sync;
pub mod time;

pub use refusal::RefusalClass;
