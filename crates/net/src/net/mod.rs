//! HTTP(S) to the outside: one client on the hyper stack with rustls, used
//! by the registry client and the central plane alike, so the binary holds
//! one TLS stack trusting one CA bundle; and the one rule for the URLs the
//! agent is given (`check_no_userinfo`, the core's `model::url`); and
//! a subscriber to one MQTT topic on the same TLS stack ([`mqtt`]).

pub mod auth;
pub mod http;
pub mod mqtt;
pub mod sigv4;
pub mod tls;

pub use crate::model::url::{SHOWN_URL, check_no_userinfo, shown, without_userinfo};
