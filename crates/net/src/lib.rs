//! stead's HTTP(S) client ([`net`]): the registry client, the central
//! plane's poller and the operator's tool all speak through it.

pub mod net;

use stead_core::model;
use stead_host::host;
