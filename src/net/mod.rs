//! HTTP(S) to the outside: one client on the hyper stack with rustls, used
//! by the registry client and the central plane alike, so the binary holds
//! one TLS stack trusting one CA bundle.

pub mod http;
