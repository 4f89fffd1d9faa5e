//! stead-plane, the operator's tool: everything a fleet's operator runs
//! on a workstation or in CI, apart from the devices' agent. Its verbs
//! ([`cli`]): keys, signing and verifying documents, publishing a fleet's
//! documents, enrolling devices and sealing values to them, rolling their
//! reports up, halting staged rollouts, the root of trust, release
//! statements, and making intentions of a Compose file ([`import`]). The
//! publisher's rules ([`plane`]: which documents to sign, reports rolled
//! up, a web server's listing read, devices' keys taken from reports) are
//! pure; the documents and the rules a device judges them by are the
//! core's (`stead_core`), so both sides decide alike.

pub mod args;
pub mod cli;
pub mod import;
pub mod plane;

use stead_core::{model, views};
use stead_host::host;
use stead_net::net;
