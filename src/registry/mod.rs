//! OCI registries, as a reload talks to them (over [`crate::net::http`]):
//! credentials and auth challenges ([`auth`]), the Distribution API calls
//! ([`client`]) and their typed failures ([`error`]); whether a pull fits
//! on the disk before it starts ([`room`]); the agent's own pull
//! ([`fetch`]), the layers it rebuilds from chunks ([`chunks`]), and the
//! site's peers it asks first ([`peers`]).

pub mod auth;
pub mod chunks;
pub mod client;
pub mod error;
pub mod fetch;
pub mod peers;
pub mod room;
pub mod signed;
pub mod tags;
