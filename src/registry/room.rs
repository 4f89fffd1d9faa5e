//! Whether a pull fits before it starts: the image's layers from its
//! manifest (no blob is fetched), the layers already here left out, the
//! rest unpacked ([`crate::model::disk::pull_need`]) against the free
//! space of the engine's data root less its reserve. A pull that would not
//! fit is refused with what it needs and what is free; the room it wanted
//! is left for the collector ([`Room::wanted`]). A manifest that cannot be
//! read (the registry away, an image only the engine's mirror has) lets
//! the pull go ahead: the engine says what is wrong with it.
//!
//! Then the pull itself ([`pull_checked`]): the agent's own
//! ([`crate::registry::fetch`], resumed) when the room has a spool, the
//! engine's when it has none, or when the agent's could not bring the
//! image for a reason other than the link (the engine may know a mirror
//! or a login the agent does not).

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::{Arc, Mutex};

use crate::model::disk::{Layer, NoRoom, fits, pull_need, pull_reserve};
use crate::model::reference::Reference;
use crate::registry::client::{Platform, Registries};
use crate::registry::fetch::{self, FetchError, Spool};

/// The check, shared by the pass's pulls and the reload executor.
pub struct Room {
    registries: Registries,
    platform: Platform,
    /// Layer digests of the images this node pulled that are still here
    /// (the pass keeps it up to date).
    pub present: Mutex<BTreeSet<String>>,
    /// What the last refused pull needed, bytes, until the collector takes
    /// it.
    pub wanted: Mutex<Option<u64>>,
    /// Where the agent's own pulls spool their blobs; none: the engine
    /// pulls.
    spool: Option<Spool>,
    /// Where what each pull brought is counted.
    metrics: Arc<crate::status::metrics::Metrics>,
    /// The plane's static host, where layers' chunks may be published.
    chunks: Option<crate::registry::chunks::ChunkSource>,
    /// The site's peers, asked before the WAN.
    peers: Option<crate::registry::peers::Peers>,
    /// The agent's own pulls under way, by reference, and how far each is.
    under_way: Mutex<std::collections::BTreeMap<String, Arc<fetch::Tally>>>,
    /// What the last of them that loaded brought.
    last: Mutex<Option<crate::model::fetch::Brought>>,
}

impl Room {
    /// A check with this registry client; pulls are the agent's own into
    /// `spool` when there is one.
    pub fn new(
        registries: Registries,
        spool: Option<Spool>,
        chunks: Option<crate::registry::chunks::ChunkSource>,
        peers: Option<crate::registry::peers::Peers>,
        metrics: Arc<crate::status::metrics::Metrics>,
    ) -> Arc<Room> {
        Arc::new(Room {
            registries,
            platform: Platform::this(),
            present: Mutex::default(),
            wanted: Mutex::default(),
            spool,
            chunks,
            peers,
            metrics,
            under_way: Mutex::default(),
            last: Mutex::default(),
        })
    }

    /// Where the agent's own pulls spool their blobs, when they do.
    pub fn spool(&self) -> Option<&Spool> {
        self.spool.as_ref()
    }

    /// The site's peers, when the device has any.
    pub fn peers(&self) -> Option<&crate::registry::peers::Peers> {
        self.peers.as_ref()
    }

    /// What the last image the agent fetched itself brought.
    pub fn last(&self) -> Option<crate::model::fetch::Brought> {
        self.last.lock().expect("room lock").clone()
    }

    /// The agent's own pulls under way, as the status says them.
    pub fn fetching(&self) -> crate::model::fetch::Fetching {
        crate::model::fetch::Fetching {
            images: self
                .under_way
                .lock()
                .expect("room lock")
                .iter()
                .map(|(r, t)| (r.clone(), t.progress()))
                .collect(),
            ahead: None,
        }
    }

    /// Checks a pull of `image` onto the data root `root`; says its layers
    /// (empty when the manifest could not be read), or why it would not
    /// fit.
    pub async fn check(&self, image: &str, root: &Path) -> Result<Vec<Layer>, NoRoom> {
        let layers = match self.layers_of(image).await {
            Ok(l) => l,
            Err(e) => {
                tracing::debug!(image, "the manifest does not say the pull's size: {e}");
                return Ok(Vec::new());
            }
        };
        let space = match crate::host::disk::space(root) {
            Ok(s) => s,
            Err(e) => {
                tracing::debug!("the engine's data root {}: {e}", root.display());
                return Ok(layers);
            }
        };
        let need = pull_need(&layers, &self.present.lock().expect("room lock"));
        if fits(need, space) {
            return Ok(layers);
        }
        *self.wanted.lock().expect("room lock") = Some(need);
        Err(NoRoom {
            image: image.to_string(),
            need,
            free: space.free,
            reserve: pull_reserve(space.total),
            path: root.display().to_string(),
        })
    }

    async fn layers_of(&self, image: &str) -> Result<Vec<Layer>, String> {
        let r = Reference::parse(image)?;
        let at = r
            .digest
            .clone()
            .or_else(|| r.tag.clone())
            .unwrap_or_else(|| "latest".into());
        self.registries
            .layers(&r, &at, &self.platform)
            .await
            .map_err(|e| e.to_string())
    }
}

/// Why a checked pull did not bring its image.
#[derive(Debug)]
pub enum NotPulled {
    /// It would not fit: nothing was fetched.
    NoRoom(NoRoom),
    /// The engine's pull failed.
    Engine(crate::engine::EngineError),
    /// The agent's own pull lost its link; what it fetched stays in the
    /// spool for the next try.
    Link(FetchError),
}

impl std::fmt::Display for NotPulled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotPulled::NoRoom(n) => n.fmt(f),
            NotPulled::Engine(e) => e.fmt(f),
            NotPulled::Link(e) => e.fmt(f),
        }
    }
}

/// Pulls `reference` once `room` (when there is one, and the engine says
/// its data root) says it fits; returns its layers as its manifest named
/// them (empty when unknown). The one path of the pass's pulls and a
/// reload's landing.
pub async fn pull_checked<E: crate::engine::Engine>(
    room: Option<&Room>,
    engine: &E,
    reference: &str,
    auth: Option<crate::engine::PullAuth>,
) -> Result<Vec<Layer>, NotPulled> {
    let layers = match (room, engine.data_root()) {
        (Some(room), Some(root)) => room
            .check(reference, &root)
            .await
            .map_err(NotPulled::NoRoom)?,
        _ => Vec::new(),
    };
    if let Some((room, spool)) = room.and_then(|r| r.spool.as_ref().map(|s| (r, s))) {
        let tally = Arc::new(fetch::Tally::default());
        let under_way = UnderWay::start(room, reference, tally.clone());
        let from = fetch::Origins {
            registries: &room.registries,
            chunks: room.chunks.as_ref(),
            peers: room.peers.as_ref(),
        };
        let pulled = fetch::pull(&from, engine, spool, reference, &tally).await;
        drop(under_way);
        match pulled {
            Ok(f) => {
                tracing::info!(
                    image = reference,
                    id = f.id,
                    bytes = f.wire,
                    chunks = f.chunks,
                    local = f.local,
                    peers = f.peers,
                    "fetched {} of {} layers ({} bytes from the registry, {} from the site's peers), {} rebuilt from chunks ({} bytes from the plane's host, {} from layers here), the rest were here",
                    f.layers - f.present,
                    f.layers,
                    f.wire,
                    f.peers,
                    f.rebuilt,
                    f.chunks,
                    f.local
                );
                room.metrics.image_fetched("agent", "registry", f.wire);
                room.metrics.fetched_bytes("chunks", f.chunks);
                room.metrics.fetched_bytes("local", f.local);
                room.metrics.fetched_bytes("peers", f.peers);
                *room.last.lock().expect("room lock") = Some(crate::model::fetch::Brought {
                    image: reference.to_string(),
                    at: std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map_or(0, |d| d.as_secs()),
                    registry: f.wire,
                    chunks: f.chunks,
                    local: f.local,
                    peers: f.peers,
                    layers: f.layers as u64,
                    present: f.present as u64,
                    rebuilt: f.rebuilt as u64,
                });
                return Ok(layers);
            }
            Err(e) if e.is_link() => return Err(NotPulled::Link(e)),
            Err(e) => {
                tracing::warn!(
                    image = reference,
                    "the agent's own pull did not bring it ({e}): the engine pulls it"
                );
            }
        }
    }
    engine
        .pull(reference, auth)
        .await
        .map_err(NotPulled::Engine)?;
    if let Some(room) = room {
        room.metrics.image_fetched("engine", "registry", 0);
    }
    Ok(layers)
}

/// A pull listed as under way until it is dropped (ended, or its task
/// cancelled).
struct UnderWay<'a> {
    room: &'a Room,
    reference: String,
}

impl<'a> UnderWay<'a> {
    fn start(room: &'a Room, reference: &str, tally: Arc<fetch::Tally>) -> UnderWay<'a> {
        room.under_way
            .lock()
            .expect("room lock")
            .insert(reference.to_string(), tally);
        UnderWay {
            room,
            reference: reference.to_string(),
        }
    }
}

impl Drop for UnderWay<'_> {
    fn drop(&mut self) {
        self.room
            .under_way
            .lock()
            .expect("room lock")
            .remove(&self.reference);
    }
}
