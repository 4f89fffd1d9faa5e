//! OCI registries, as a reload talks to them: HTTP(S) with rustls
//! ([`http`]), credentials and auth challenges ([`auth`]), the Distribution
//! API calls ([`client`]) and their typed failures ([`error`]).

pub mod auth;
pub mod client;
pub mod error;
pub mod http;
