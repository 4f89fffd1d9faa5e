//! The publisher's side of the central plane, pure: which of a fleet's
//! documents to sign ([`publish`]), its reports rolled up ([`rollup`]),
//! a web server's listing of them read as links ([`index`]), its devices'
//! keys taken from their reports ([`enroll`]), a value sealed to one of
//! them by the reference age implementation ([`seal`]). The documents
//! themselves are the core's, re-exported here.

pub mod enroll;
pub mod index;
pub mod publish;
pub mod rollup;
pub mod seal;

pub use stead_core::plane::{RefusalClass, accept, document, envelope, group, root};
