//! The central plane: the desired state a node is told by a central place,
//! as a signed document. Owns the document's format (what a node is asked
//! to run, how often to look again, where to report), its signature
//! envelope and keys, and the timestamps it carries; all pure, so the
//! publishing CLI and the node's fetcher check a document the same way.
pub mod document;
pub mod envelope;
pub mod time;
