//! The pure model: checked names and values, the intention schema and its
//! checks, what a module needs from its container beyond its image
//! ([`runtime`]), config composition, the one rule for JSON documents ([`json`]: no key
//! twice), the container spec and its labels, and
//! the mapping of a Compose file to intentions ([`compose_file`]), and why
//! a plane document is not adopted, in a class ([`refusal`]), and time as
//! text: durations, civil dates, RFC 3339 and HTTP dates ([`time`]). Nothing
//! here does I/O; everything here is table-tested.

pub mod action;
pub mod age;
pub mod agent_update;
pub mod archive;
pub mod budget;
pub mod chunk;
pub mod clock;
pub mod config;
pub mod disk;
pub mod dsse;
pub mod env_file;
pub mod facts;
pub mod fetch;
pub mod files;
pub mod fleet;
pub mod guard;
pub mod image_policy;
pub mod intention;
pub mod interpolate;
pub mod json;
pub mod labels;
pub mod lock;
pub mod logs;
pub mod maintenance;
pub mod mdns;
pub mod mqtt;
pub use stead_launch as launch;
pub mod names;
pub mod reference;
pub mod refusal;
pub mod release;
pub mod reload;
pub mod runtime;
pub mod seal;
pub mod sealed;
pub mod site;
pub mod sort;
pub mod spec;
pub mod tar;
pub mod text;
pub mod time;
pub mod url;
pub mod value;
pub mod version;
