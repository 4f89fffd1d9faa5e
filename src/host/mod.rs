//! What stead does on its own host, apart from the engine: content digests
//! of the files a container reads, atomic file writes, watching files for
//! change, the service manager's notify protocol, and running blocking work
//! off the async threads.

pub mod blocking;
pub mod digest;
pub mod files;
pub mod systemd;
pub mod watch;
