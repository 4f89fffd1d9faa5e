//! The publisher's side of the central plane, pure: which of a fleet's
//! documents to sign ([`publish`]), its reports rolled up ([`rollup`]),
//! which devices run an image or a vulnerable package ([`exposure`]),
//! a web server's listing of them read as links ([`index`]), its devices'
//! keys taken from their reports ([`enroll`]), a value sealed to one of
//! them by the reference age implementation ([`seal`]), what a site's
//! upload to a bucket puts and in what order ([`upload`]). The documents
//! themselves and the trusted set that verifies them (a device's,
//! [`trusted`]) are the core's, re-exported here.

pub mod enroll;
pub mod exposure;
pub mod index;
pub mod publish;
pub mod rollup;
pub mod seal;
pub mod upload;
pub mod verdicts;

pub use stead_core::plane::{
    RefusalClass, accept, allowlist, document, envelope, group, root, trusted,
};
