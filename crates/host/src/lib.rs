//! stead on its host: the I/O the device agent (and the operator's tool,
//! for files, the clock and randomness) does apart from the engine and
//! the network ([`host`]).

pub mod host;

use stead_core::model;
