//! The agent's own pull: an image's blobs fetched by the agent's registry
//! client (its credentials and TLS rules) into a spool on the data
//! directory, each resumed from the bytes already synced and checked
//! against its digest, then handed to the engine in one archive
//! ([`crate::model::archive`]) and checked by the image ID it loads as.
//! The engine's own pull starts a layer again from nothing after a
//! dropped link; this one never fetches a byte twice.
//!
//! The spool: `<spool>/sha256/<hex>` holds a blob's bytes,
//! `<hex>.synced` how many of them are durable (written after the data is
//! synced, replaced atomically). After a power cut the blob is cut back to
//! that many bytes, whatever the filesystem kept past it. The rules for
//! what to ask and what to take are [`crate::model::fetch`]'s.

use std::collections::{BTreeSet, HashMap};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::engine::Engine;
use crate::engine::socket::Channel;
use crate::model::archive::{self, Body, Layer};
use crate::model::fetch::{self as rule, Ask, SYNC_EVERY, Take};
use crate::model::reference::Reference;
use crate::registry::chunks::{ChunkSource, Target};
use crate::registry::client::{Platform, Registries};
use crate::registry::error::RegistryError;

/// How long a transfer may go without a byte before the link counts as
/// dropped.
pub const STALL: Duration = Duration::from_secs(30);
/// Attempts in a row that move no byte before a blob's fetch gives up
/// (and the pull is retried later, with the pass's backoff).
const IDLE_TRIES: u32 = 5;
/// Answers that were not the blob (bytes that do not match its digest, a
/// range not asked for) before a fetch gives up: one is fetched again,
/// the second is the source's failure.
const WRONG_TRIES: u32 = 2;
/// The first wait after an attempt that moved nothing; doubled after each.
const FIRST_WAIT: Duration = Duration::from_secs(1);

/// Why the agent's own pull did not bring an image.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// The registry did not answer as asked.
    #[error(transparent)]
    Registry(#[from] RegistryError),
    /// The spool could not be read or written.
    #[error("the spool {path}: {message}")]
    Spool {
        /// The file.
        path: String,
        /// What went wrong.
        message: String,
    },
    /// What came is not what was named (a blob, a config, a layer count).
    #[error("{0}")]
    Wrong(String),
    /// A blob's transfer stopped part-way (the link dropped, or went
    /// silent); its bytes so far are kept.
    #[error("{digest}: the transfer stopped at {synced} of {size} bytes: {why}")]
    Stopped {
        /// The blob.
        digest: String,
        /// Its bytes in the spool.
        synced: u64,
        /// Its size.
        size: u64,
        /// What the link said.
        why: String,
    },
    /// The spool's filesystem has no room for it (the store keeps its
    /// reserve).
    #[error("the spool: {0}")]
    NoRoom(crate::model::disk::NoRoom),
    /// The engine did not load it, or loaded something else.
    #[error("the engine: {0}")]
    Engine(#[from] crate::engine::EngineError),
}

impl FetchError {
    /// Whether the link failed (the registry did not answer, or stopped
    /// answering): the pull is tried again later, from where it stopped.
    pub fn is_link(&self) -> bool {
        matches!(
            self,
            FetchError::Registry(RegistryError::Timeout { .. } | RegistryError::Connect { .. })
        ) || matches!(self, FetchError::Stopped { .. })
    }
}

/// What a pull of the agent's own did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Fetched {
    /// The image ID it loaded as (its config's digest).
    pub id: String,
    /// Bytes that came over the wire for it from its registry (blob
    /// bodies).
    pub wire: u64,
    /// Bytes that came from the site's peers (blobs, chunks, indexes).
    pub peers: u64,
    /// Of its layers, how many the engine had already (not fetched).
    pub present: usize,
    /// Of them, how many were rebuilt from chunks.
    pub rebuilt: usize,
    /// Bytes of chunks (and their indexes) from the plane's host.
    pub chunks: u64,
    /// Bytes of rebuilt layers that came from layers held here.
    pub local: u64,
    /// Its layers.
    pub layers: usize,
}

/// How far one pull is: bytes of its missing layers in the spool, and in
/// all; shared with whoever says the status.
#[derive(Debug, Default)]
pub struct Tally {
    /// Bytes here.
    pub bytes: AtomicU64,
    /// Bytes in all.
    pub of: AtomicU64,
}

impl Tally {
    /// As the status says it.
    pub fn progress(&self) -> crate::model::fetch::Progress {
        crate::model::fetch::Progress {
            bytes: self.bytes.load(Ordering::Relaxed),
            of: self.of.load(Ordering::Relaxed),
        }
    }
}

/// The spool on the data directory.
#[derive(Clone, Debug)]
pub struct Spool {
    dir: PathBuf,
    /// A lock per blob a pull is fetching or loading: two pulls that share
    /// a layer take turns, and the second finds it loaded.
    busy: Arc<std::sync::Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>>,
    /// The blobs being fetched from their registry now, with their sizes:
    /// a peer asking for one is sent its bytes as they come.
    origin: Arc<std::sync::Mutex<HashMap<String, u64>>>,
    /// How long what was loaded stays to be served to the site's peers;
    /// none: a blob goes once the engine has it.
    keep: Option<Duration>,
    /// The images' high and low marks, percent used: kept blobs go while
    /// the spool's filesystem is over the high one.
    marks: (u8, u8),
}

/// What the spool can serve of a blob.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Serving {
    /// Every byte, checked against its digest.
    Whole(u64),
    /// The bytes come from its registry now: so far, and of this size.
    Coming(u64),
    /// Nothing.
    None,
}

impl Spool {
    /// The spool in `dir` (made when missing).
    pub fn new(dir: &Path) -> Result<Spool, FetchError> {
        let dir = dir.join("sha256");
        std::fs::create_dir_all(&dir).map_err(spool_error(&dir))?;
        Ok(Spool {
            dir,
            busy: Arc::default(),
            origin: Arc::default(),
            keep: None,
            marks: {
                let p = crate::model::disk::Policy::default();
                (p.high, p.low)
            },
        })
    }

    /// This spool, keeping what it fetched for `keep` after the engine
    /// loaded it, for the site's peers, unless its filesystem passes the
    /// `high` mark (percent used; then down to `low`).
    pub fn keeping(mut self, keep: Duration, high: u8, low: u8) -> Spool {
        self.keep = Some(keep);
        self.marks = (high, low);
        self
    }

    /// Where chunks fetched are kept for the site's peers, laid out as a
    /// casync store (`store.castr/`) beside their indexes.
    pub fn chunks_dir(&self) -> Option<PathBuf> {
        self.keep?;
        Some(self.dir.parent().unwrap_or(&self.dir).join("chunks"))
    }

    /// Where manifests loaded are kept for the site's peers, by digest
    /// (`<hex>`, with its media type in `<hex>.type`).
    fn manifests_dir(&self) -> Option<PathBuf> {
        self.keep?;
        Some(self.dir.parent().unwrap_or(&self.dir).join("manifests"))
    }

    /// The manifest `hex` kept for the site's peers: its file and media
    /// type.
    pub fn manifest(&self, hex: &str) -> Option<(PathBuf, String)> {
        let dir = self.manifests_dir()?;
        let media_type = std::fs::read_to_string(dir.join(format!("{hex}.type"))).ok()?;
        let path = dir.join(hex);
        path.is_file()
            .then(|| (path, media_type.trim().to_string()))
    }

    /// Keeps, for the site's peers, what a loaded image was named by: its
    /// manifests (by digest) and its config (a blob). Nothing when the
    /// spool does not keep; what cannot be written is not kept.
    fn keep_image(&self, manifests: &[crate::registry::client::Served], config: (&str, &[u8])) {
        let Some(dir) = self.manifests_dir() else {
            return;
        };
        let kept = std::fs::create_dir_all(&dir).and_then(|()| {
            for m in manifests {
                let hex = hex(&m.digest);
                std::fs::write(dir.join(format!("{hex}.type")), m.media_type.as_bytes())?;
                std::fs::write(dir.join(hex), &m.bytes)?;
            }
            let (digest, bytes) = config;
            std::fs::write(self.path(digest), bytes)?;
            std::fs::write(self.mark(digest), bytes.len().to_string())?;
            std::fs::write(self.dir.join(format!("{}.ok", hex(digest))), b"")
        });
        if let Err(e) = kept {
            tracing::info!(
                "the image's manifests and config are not kept for the site's peers: {e}"
            );
        }
    }

    /// What can be served of the blob `hex`.
    pub fn serving(&self, hex: &str) -> Serving {
        let digest = format!("sha256:{hex}");
        if let Some(size) = self.origin.lock().expect("spool lock").get(&digest) {
            return Serving::Coming(*size);
        }
        if self.dir.join(format!("{hex}.ok")).exists() {
            if let Ok(m) = std::fs::metadata(self.dir.join(hex)) {
                return Serving::Whole(m.len());
            }
        }
        Serving::None
    }

    /// Marks `digest` as being fetched from its registry until the guard
    /// is dropped.
    fn fetching_from_origin(&self, digest: &str, size: u64) -> OriginMark {
        self.origin
            .lock()
            .expect("spool lock")
            .insert(digest.to_string(), size);
        OriginMark {
            origin: self.origin.clone(),
            digest: digest.to_string(),
        }
    }

    /// A blob fetched whole and checked: when the spool keeps what it
    /// fetched for the site's peers, it is served whole from now on, the
    /// engine's load or not.
    fn checked(&self, digest: &str) {
        if self.keep.is_some() {
            let _ = std::fs::write(self.dir.join(format!("{}.ok", hex(digest))), b"");
        }
    }

    /// Done with a blob the engine loaded: kept, checked, for the site's
    /// peers when the spool keeps, else gone.
    fn done(&self, digest: &str) {
        if self.keep.is_some() {
            if let Err(e) = std::fs::write(self.dir.join(format!("{}.ok", hex(digest))), b"") {
                tracing::info!(digest, "not kept for the site's peers: {e}");
                self.discard(digest);
            }
        } else {
            self.discard(digest);
        }
    }

    /// Holds these blobs (in a fixed order, so two pulls never wait on
    /// each other) until the guards are dropped.
    async fn hold(&self, digests: &BTreeSet<String>) -> Vec<tokio::sync::OwnedMutexGuard<()>> {
        let mut guards = Vec::new();
        for d in digests {
            let lock = {
                let mut busy = self.busy.lock().expect("spool lock");
                busy.retain(|_, l| Arc::strong_count(l) > 1);
                busy.entry(d.clone()).or_default().clone()
            };
            guards.push(lock.lock_owned().await);
        }
        guards
    }

    /// Collects what no pull has touched for `keep` (blobs and their
    /// marks; none a pull holds now), what was kept for the site's peers
    /// past its own time, and, while the spool's filesystem is over the
    /// images' high mark, what was kept, the oldest first, until it is
    /// under their low mark; says how many bytes went.
    pub fn sweep(&self, keep: Duration) -> u64 {
        let Ok(dir) = std::fs::read_dir(&self.dir) else {
            return 0;
        };
        let busy: BTreeSet<String> = crate::model::sort::set(
            self.busy
                .lock()
                .expect("spool lock")
                .iter()
                .filter(|(_, l)| Arc::strong_count(l) > 1)
                .map(|(d, _)| hex(d).to_string()),
        );
        let now = std::time::SystemTime::now();
        let age = |m: &std::fs::Metadata| {
            m.modified()
                .ok()
                .and_then(|t| now.duration_since(t).ok())
                .unwrap_or_default()
        };
        let files: Vec<(String, PathBuf, std::fs::Metadata)> = dir
            .flatten()
            .filter_map(|e| {
                let m = e.metadata().ok()?;
                Some((e.file_name().to_string_lossy().into_owned(), e.path(), m))
            })
            .collect();
        // Blobs kept for the peers, and since when.
        let kept: HashMap<String, Duration> = files
            .iter()
            .filter_map(|(n, _, m)| n.strip_suffix(".ok").map(|b| (b.to_string(), age(m))))
            .collect();
        let mut freed = 0;
        // What is kept and stays, the oldest first: collected under
        // pressure.
        let mut served: Vec<(Duration, PathBuf, u64)> = Vec::new();
        for (name, path, m) in &files {
            let blob = name
                .strip_suffix(".synced")
                .or_else(|| name.strip_suffix(".rebuild"))
                .or_else(|| name.strip_suffix(".ok"))
                .unwrap_or(name);
            if busy.contains(blob) {
                continue;
            }
            let (old, why) = match (kept.get(blob), self.keep) {
                (Some(since), Some(k)) => (*since > k, "kept for the site's peers"),
                (Some(_), None) => (true, "kept for the site's peers"),
                (None, _) => (age(m) > keep, "a fetch no pull took up again"),
            };
            if old {
                if std::fs::remove_file(path).is_ok() {
                    freed += m.len();
                    tracing::info!(blob, bytes = m.len(), "spool: collected {why}");
                }
            } else if let Some(since) = kept.get(blob) {
                served.push((*since, path.clone(), m.len()));
            }
        }
        if let (Some(k), Some(chunks), Some(manifests)) =
            (self.keep, self.chunks_dir(), self.manifests_dir())
        {
            let mut files = chunk_files(&chunks);
            files.extend(chunk_files(&manifests));
            for (path, m) in files {
                if age(&m) > k {
                    if std::fs::remove_file(&path).is_ok() {
                        freed += m.len();
                    }
                } else {
                    served.push((age(&m), path, m.len()));
                }
            }
        }
        freed + self.trim(served)
    }

    /// While the spool's filesystem is over the images' high mark, what
    /// was kept for the peers goes, the oldest first, until it is under
    /// their low mark.
    fn trim(&self, mut served: Vec<(Duration, PathBuf, u64)>) -> u64 {
        let Ok(space) = crate::host::disk::space(&self.dir) else {
            return 0;
        };
        let (high, low) = self.marks;
        if space.used_percent() < u64::from(high) || served.is_empty() {
            return 0;
        }
        crate::model::sort::sort_by(&mut served, |a, b| b.0.cmp(&a.0));
        let low = space.total / 100 * u64::from(low);
        let mut used = space.used();
        let mut freed = 0;
        for (_, path, len) in served {
            if used <= low {
                break;
            }
            if std::fs::remove_file(&path).is_ok() {
                used = used.saturating_sub(len);
                freed += len;
            }
        }
        tracing::info!(
            bytes = freed,
            "spool: the disk is over its high mark: what was kept for the site's peers is collected"
        );
        freed
    }

    /// Where a blob's bytes are kept.
    pub fn path(&self, digest: &str) -> PathBuf {
        self.dir.join(hex(digest))
    }

    /// The spool's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where a layer is rebuilt from chunks, by its diff ID.
    pub fn rebuild_path(&self, diff_id: &str) -> PathBuf {
        self.dir.join(format!("{}.rebuild", hex(diff_id)))
    }

    /// Takes the layer rebuilt at `from` as the blob `digest` of `size`
    /// bytes, all of them synced: the mark first, then the file (a cut
    /// between the two leaves the rebuild, which is checked again).
    pub fn adopt(&self, digest: &str, from: &Path, size: u64) -> std::io::Result<()> {
        crate::host::files::replace_atomic(&self.mark(digest), size.to_string().as_bytes(), 0o600)
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        std::fs::rename(from, self.path(digest))
    }

    fn mark(&self, digest: &str) -> PathBuf {
        self.dir.join(format!("{}.synced", hex(digest)))
    }

    /// How many of a blob's bytes are durable here; the file is cut back
    /// to them.
    pub fn synced(&self, digest: &str) -> Result<u64, FetchError> {
        let path = self.path(digest);
        let len = match std::fs::metadata(&path) {
            Ok(m) => m.len(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
            Err(e) => return Err(spool_error(&path)(e)),
        };
        let mark = std::fs::read_to_string(self.mark(digest))
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
            .unwrap_or(0);
        let synced = mark.min(len);
        if synced < len {
            let f = std::fs::OpenOptions::new()
                .write(true)
                .open(&path)
                .map_err(spool_error(&path))?;
            f.set_len(synced).map_err(spool_error(&path))?;
        }
        Ok(synced)
    }

    /// Forgets a blob.
    pub fn discard(&self, digest: &str) {
        let _ = std::fs::remove_file(self.dir.join(format!("{}.ok", hex(digest))));
        let _ = std::fs::remove_file(self.mark(digest));
        let _ = std::fs::remove_file(self.path(digest));
    }

    /// Notes that the first `n` bytes of `file` (a blob's) are durable.
    fn note(&self, digest: &str, file: &std::fs::File, n: u64) -> Result<(), FetchError> {
        let path = self.path(digest);
        file.sync_data().map_err(spool_error(&path))?;
        let mark = self.mark(digest);
        crate::host::files::replace_atomic(&mark, n.to_string().as_bytes(), 0o600)
            .map_err(spool_error(&mark))
    }

    /// Whether the blob's bytes here hash to its digest.
    pub fn check(&self, digest: &str) -> Result<bool, FetchError> {
        let path = self.path(digest);
        let mut f = std::fs::File::open(&path).map_err(spool_error(&path))?;
        let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = f.read(&mut buf).map_err(spool_error(&path))?;
            if n == 0 {
                break;
            }
            ctx.update(&buf[..n]);
        }
        let got: String = ctx
            .finish()
            .as_ref()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        Ok(digest.strip_prefix("sha256:") == Some(got.as_str()))
    }
}

/// The files of a kept chunk store: its indexes and its chunks.
fn chunk_files(dir: &Path) -> Vec<(PathBuf, std::fs::Metadata)> {
    let mut out = Vec::new();
    let mut look = |d: &Path| {
        for e in std::fs::read_dir(d).into_iter().flatten().flatten() {
            if let Ok(m) = e.metadata()
                && m.is_file()
            {
                out.push((e.path(), m));
            }
        }
    };
    look(dir);
    let store = dir.join("store.castr");
    for e in std::fs::read_dir(&store).into_iter().flatten().flatten() {
        look(&e.path());
    }
    out
}

fn hex(digest: &str) -> &str {
    digest.strip_prefix("sha256:").unwrap_or(digest)
}

fn spool_error(path: &Path) -> impl Fn(std::io::Error) -> FetchError + '_ {
    move |e| FetchError::Spool {
        path: path.display().to_string(),
        message: e.to_string(),
    }
}

/// Bytes that came over the wire for a blob, by where from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Wire {
    /// From its registry.
    pub origin: u64,
    /// From the site's peers.
    pub peers: u64,
}

/// An answer to a blob's request, from a peer or the registry.
type Opened = (crate::net::http::Answer, Option<crate::net::http::Open>);

/// Fetches one blob into the spool, resuming from what it holds, until
/// every byte is there and matches its digest; says the bytes that came
/// over the wire, and from where. The site's `peers` are asked first,
/// each until it has nothing more to give, then the registry; gives up
/// after [`IDLE_TRIES`] attempts in a row that move nothing from the
/// registry (the bytes moved stay for the next time). Bytes that are not
/// the digest, some of them from a peer, are fetched again from the
/// registry alone.
pub async fn fetch_blob(
    registries: &Registries,
    peers: Option<&crate::registry::peers::Peers>,
    r: &Reference,
    spool: &Spool,
    digest: &str,
    size: u64,
    tally: &Tally,
) -> Result<Wire, FetchError> {
    use crate::model::site::{Said, Source, Sources};
    if !is_sha256(digest) {
        return Err(FetchError::Wrong(format!("{digest}: not a sha256 digest")));
    }
    let mut wire = Wire::default();
    let (mut idle, mut wrong) = (0u32, 0u32);
    // What the tally counts of this blob: its bytes in the spool.
    let mut counted = 0u64;
    let mut count = |now: u64| {
        if now >= counted {
            tally.bytes.fetch_add(now - counted, Ordering::Relaxed);
        } else {
            tally.bytes.fetch_sub(counted - now, Ordering::Relaxed);
        }
        counted = now;
    };
    let listed = peers.map(|p| p.list()).unwrap_or_default();
    let resting: Vec<bool> = listed.iter().map(|(_, r)| *r).collect();
    let spooled = spool.synced(digest)? > 0;
    let mut sources = Sources::new(listed.len(), &resting, spooled);
    let mut wait = FIRST_WAIT;
    let mut last: Option<FetchError> = None;
    // While the bytes come from the registry, a peer asking is sent them
    // as they come; the mark is held until the blob is checked and marked
    // to serve whole, so a peer asking in between is never told "not
    // here" (2026-12-07: one asking while the engine loaded it was).
    let mut from_origin: Option<OriginMark> = None;
    loop {
        if idle >= IDLE_TRIES || wrong >= WRONG_TRIES {
            return Err(last.unwrap_or_else(|| {
                FetchError::Wrong(format!("{digest}: no byte came in {IDLE_TRIES} attempts"))
            }));
        }
        let synced = spool.synced(digest)?;
        count(synced.min(size));
        let ask = rule::ask(synced, size);
        if ask == Ask::Done {
            if spool.check(digest)? {
                spool.checked(digest);
                drop(from_origin);
                return Ok(wire);
            }
            from_origin = None;
            spool.discard(digest);
            last = Some(FetchError::Wrong(format!(
                "{digest}: the bytes fetched do not match the digest"
            )));
            if sources.from_peers() {
                tracing::warn!(
                    digest,
                    "a blob fetched from the site's peers does not match its digest: fetched again"
                );
                sources.wrong();
            } else {
                tracing::warn!(
                    digest,
                    "a spooled blob does not match its digest: fetched again"
                );
                wrong += 1;
            }
            continue;
        }
        if ask == Ask::Whole && synced > 0 {
            spool.discard(digest);
        }
        let range = ask.range();
        let source = sources.next();
        let asked: Result<Opened, FetchError> = match source {
            Source::Peer(i) => {
                let (peer, p) = (&listed[i].0, peers.expect("listed peers"));
                match p.blob(peer, &r.repository, digest, range.as_deref()).await {
                    Ok((a, open)) if a.status.is_success() => Ok((a, open)),
                    Ok(a) => {
                        tracing::debug!(peer = %peer, digest, status = a.0.status.as_u16(), "a peer has not got the blob");
                        sources.said(i, Said::Missing);
                        continue;
                    }
                    Err(e) => {
                        tracing::info!(peer = %peer, digest, "a peer did not answer: {e}");
                        p.rest(peer);
                        sources.said(i, Said::Gone);
                        continue;
                    }
                }
            }
            Source::Origin => match registries.blob(r, digest, range.as_deref(), STALL).await {
                Ok(a) => Ok(a),
                // Only a link that failed is worth asking again at once; a
                // registry's decided answer is the pull's failure.
                Err(e @ (RegistryError::Timeout { .. } | RegistryError::Connect { .. })) => {
                    last = Some(e.into());
                    idle += 1;
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(STALL);
                    continue;
                }
                Err(e) => return Err(e.into()),
            },
        };
        let (answer, open) = asked?;
        let content_range = answer
            .headers
            .get(http::header::CONTENT_RANGE)
            .and_then(|v| v.to_str().ok());
        let at = match rule::take(ask, size, answer.status.as_u16(), content_range) {
            Ok(Take::At(at)) => at,
            Err(e) => {
                if let Source::Peer(i) = source {
                    // The peer's answer is left; the spool is not its.
                    tracing::warn!(peer = %listed[i].0, digest, "{e}");
                    sources.said(i, Said::Wrong);
                    continue;
                }
                tracing::warn!(digest, "{e}");
                spool.discard(digest);
                last = Some(FetchError::Wrong(format!("{digest}: {e}")));
                wrong += 1;
                continue;
            }
        };
        let Some(mut open) = open else {
            match source {
                Source::Peer(i) => sources.said(i, Said::Gone),
                Source::Origin => idle += 1,
            }
            continue;
        };
        // A peer asking for this blob meanwhile is sent it as it comes.
        from_origin =
            matches!(source, Source::Origin).then(|| spool.fetching_from_origin(digest, size));
        let path = spool.path(digest);
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(spool_error(&path))?;
        file.set_len(at).map_err(spool_error(&path))?;
        file.seek(SeekFrom::Start(at)).map_err(spool_error(&path))?;
        // Whatever ends the transfer (its end, an error, the pull's task
        // dropped at a shutdown), what was written is made durable.
        let mut w = Writing {
            spool,
            digest,
            file,
            written: at,
            since_sync: 0,
        };
        let mut moved = 0u64;
        let ended = loop {
            match open.chunk().await {
                Ok(Some(data)) => {
                    let room = size.saturating_sub(w.written);
                    let data = &data[..data.len().min(usize::try_from(room).unwrap_or(usize::MAX))];
                    w.file.write_all(data).map_err(spool_error(&path))?;
                    let n = data.len() as u64;
                    w.written += n;
                    moved += n;
                    match source {
                        Source::Peer(_) => wire.peers += n,
                        Source::Origin => wire.origin += n,
                    }
                    w.since_sync += n;
                    if n > 0 && source == Source::Origin {
                        idle = 0;
                        wait = FIRST_WAIT;
                    }
                    count(w.written);
                    if w.since_sync >= SYNC_EVERY {
                        w.sync()?;
                    }
                    if w.written >= size {
                        break Ok(());
                    }
                }
                Ok(None) => break Ok(()),
                Err(e) => break Err(e),
            }
        };
        w.sync()?;
        let written = w.written;
        if moved > 0 {
            sources.gave(source);
        }
        if let Source::Peer(i) = source {
            if written < size {
                let said = if moved > 0 { Said::Stopped } else { Said::Gone };
                tracing::info!(peer = %listed[i].0, digest, synced = written, size, "a peer's transfer stopped");
                sources.said(i, said);
            }
            continue;
        }
        if let Err(t) = ended {
            tracing::info!(
                digest,
                synced = written,
                size,
                "a blob's transfer stopped ({t}): resumed"
            );
            last = Some(FetchError::Stopped {
                digest: digest.to_string(),
                synced: written,
                size,
                why: t.to_string(),
            });
            idle += 1;
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(STALL);
        }
    }
}

/// A blob being fetched from its registry, until dropped.
struct OriginMark {
    origin: Arc<std::sync::Mutex<HashMap<String, u64>>>,
    digest: String,
}

impl Drop for OriginMark {
    fn drop(&mut self) {
        if let Ok(mut o) = self.origin.lock() {
            o.remove(&self.digest);
        }
    }
}

/// A blob being written into the spool; dropped, it makes what it wrote
/// durable.
struct Writing<'a> {
    spool: &'a Spool,
    digest: &'a str,
    file: std::fs::File,
    written: u64,
    since_sync: u64,
}

impl Writing<'_> {
    fn sync(&mut self) -> Result<(), FetchError> {
        self.spool.note(self.digest, &self.file, self.written)?;
        self.since_sync = 0;
        Ok(())
    }
}

impl Drop for Writing<'_> {
    fn drop(&mut self) {
        if self.since_sync > 0 {
            let _ = self.sync();
        }
    }
}

fn is_sha256(d: &str) -> bool {
    d.strip_prefix("sha256:")
        .is_some_and(|h| h.len() == 64 && h.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
}

/// Where an image's bytes are asked: its registry, the plane's chunk
/// store, the site's peers.
#[derive(Clone, Copy)]
pub struct Origins<'a> {
    /// The registries, with their credentials.
    pub registries: &'a Registries,
    /// The plane's static host, when it publishes layers' chunks.
    pub chunks: Option<&'a ChunkSource>,
    /// The site's peers, asked first.
    pub peers: Option<&'a crate::registry::peers::Peers>,
}

/// Pulls `reference` with the agent's own client: its manifest for this
/// platform, its config, the blobs of the layers the engine lacks (into
/// the spool, resumed), one archive to the engine; the image that loads
/// must be the config's. A reference with a tag is then tagged so.
pub async fn pull<E: Engine>(
    from: &Origins<'_>,
    engine: &E,
    spool: &Spool,
    reference: &str,
    tally: &Tally,
) -> Result<Fetched, FetchError> {
    let Origins {
        registries,
        chunks,
        peers,
    } = *from;
    let r = Reference::parse(reference).map_err(FetchError::Wrong)?;
    let at = r
        .digest
        .clone()
        .or_else(|| r.tag.clone())
        .unwrap_or_else(|| "latest".into());
    let m = match registries.manifest_for(&r, &at, &Platform::this()).await {
        Ok(m) => m,
        // The registry away: a manifest named by its digest may come from
        // the site's peers (checked against it); a tag is the registry's
        // word alone.
        Err(e) if is_away(&e) && r.digest.is_some() => {
            let at = &at;
            from_peers(peers, &r, &e, |p, pr| async move {
                p.manifest_for(&pr, at, &Platform::this()).await
            })
            .await?
        }
        Err(e) => return Err(e.into()),
    };
    let (config_digest, _) = &m.config;
    let config = match registries.config_bytes(&r, config_digest).await {
        Ok(c) => c,
        Err(e) if is_away(&e) => {
            from_peers(peers, &r, &e, |p, pr| async move {
                p.config_bytes(&pr, config_digest).await
            })
            .await?
        }
        Err(e) => return Err(e.into()),
    };
    let diff_ids = diff_ids(&config)
        .map_err(|e| FetchError::Wrong(format!("{reference}: its config: {e}")))?;
    if diff_ids.len() != m.layers.len() {
        return Err(FetchError::Wrong(format!(
            "{reference}: its manifest names {} layers, its config {}",
            m.layers.len(),
            diff_ids.len()
        )));
    }
    // The image's blobs are this pull's until it has loaded them; what
    // the engine has is asked once they are (a pull that shared a layer
    // may have loaded it meanwhile).
    let _held = spool
        .hold(
            &m.layers
                .iter()
                .map(|(d, _)| d.clone())
                .chain(diff_ids.iter().cloned())
                .collect(),
        )
        .await;
    spool.sweep(Duration::from_secs(rule::SPOOL_KEEP));
    let layers: Vec<Layer> = m
        .layers
        .iter()
        .map(|(digest, size)| Layer {
            digest: digest.clone(),
            size: *size,
        })
        .collect();
    let mut wire = Wire::default();
    let mut fetched = BTreeSet::new();
    let repo = format!("{}/{}", r.registry, r.repository);
    let mut present = engine_has(engine, &repo, &diff_ids).await?;
    tally.of.store(0, Ordering::Relaxed);
    // The layers the plane's host has chunks of, rebuilt where that is
    // cheaper than their blobs; the others are pulled.
    let outcome = match chunks {
        Some(source) if present < layers.len() => {
            let targets: Vec<Target> = (present..layers.len())
                .map(|at| Target {
                    at,
                    diff_id: diff_ids[at].clone(),
                    blob_size: layers[at].size,
                })
                .collect();
            super::chunks::rebuild(source, peers, engine, spool, &repo, &targets, tally).await?
        }
        _ => super::chunks::Outcome::default(),
    };
    // The archive's layers: a rebuilt one by its diff ID, uncompressed,
    // under a manifest that says so.
    let (loaded, manifest, manifest_type, manifest_digest) = if outcome.rebuilt.is_empty() {
        (
            layers.clone(),
            m.bytes.to_vec(),
            m.media_type.clone(),
            m.digest.clone(),
        )
    } else {
        let replaced: std::collections::BTreeMap<usize, (String, u64)> = crate::model::sort::map(
            outcome
                .rebuilt
                .iter()
                .map(|(&at, &size)| (at, (diff_ids[at].clone(), size))),
        );
        let bytes = archive::with_uncompressed(&m.bytes, &m.media_type, &replaced)
            .map_err(|e| FetchError::Wrong(format!("{reference}: its manifest: {e}")))?;
        let digest = format!(
            "sha256:{}",
            ring::digest::digest(&ring::digest::SHA256, &bytes)
                .as_ref()
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>()
        );
        let loaded = layers
            .iter()
            .enumerate()
            .map(|(at, l)| match replaced.get(&at) {
                Some((d, size)) => Layer {
                    digest: d.clone(),
                    size: *size,
                },
                None => l.clone(),
            })
            .collect();
        (loaded, bytes, m.media_type.clone(), digest)
    };
    let rebuilding = tally.of.load(Ordering::Relaxed);
    let mut sent_whole = false;
    let said = loop {
        tally.of.store(rebuilding, Ordering::Relaxed);
        let whole: Vec<Layer> = layers[present..]
            .iter()
            .enumerate()
            .filter(|(k, _)| !outcome.rebuilt.contains_key(&(present + k)))
            .map(|(_, l)| l.clone())
            .collect();
        let w = fetch_missing(from, &r, spool, reference, &whole, tally, &mut fetched).await?;
        wire.origin += w.origin;
        wire.peers += w.peers;
        let image = archive::Image {
            manifest: &manifest,
            manifest_type: &manifest_type,
            config: (config_digest, &config),
            layers: &loaded,
            present,
        };
        match load(engine, spool, &image, &manifest_digest).await {
            Ok(said) => break said,
            Err(e) => {
                // A layer the engine had when asked may have left it since
                // (an image removed meanwhile): the archive then names a
                // file it does not hold. Asked again, fewer present layers
                // are fetched and the archive carries them; the same
                // answer is the engine's refusal.
                let now = engine_has(engine, &repo, &diff_ids).await?;
                if now >= present {
                    // It still has them, and did not take the archive
                    // without them: Podman finds a layer it holds by its
                    // blob's digest only when it has seen that blob (its
                    // blob-info cache), not by the layer alone. Once, the
                    // archive carries every layer; the same answer then
                    // is the engine's refusal.
                    if present == 0 || sent_whole {
                        return Err(e);
                    }
                    tracing::info!(
                        image = reference,
                        "the engine did not take the image without the {present} layers it holds ({e}): sending them too"
                    );
                    sent_whole = true;
                    present = 0;
                    continue;
                }
                tracing::info!(
                    image = reference,
                    "the engine no longer has {} of the image's layers it had: fetching them",
                    present - now
                );
                present = now;
            }
        }
    };
    let (id, _) = engine.image_root(config_digest).await?;
    if &id != config_digest
        || said
            .iter()
            .any(|s| s.starts_with("sha256:") && s != config_digest)
    {
        return Err(FetchError::Wrong(format!(
            "{reference}: the engine loaded {} where {config_digest} was fetched",
            said.join(", ")
        )));
    }
    // Named as the engine's own pull names it: by its tag, and by the
    // digest the reference named (or its manifest's), as the tag
    // `sha256-<hex>` that the engine's image list reads as `repo@sha256:…`
    // (an engine records a repository digest only for what it pulled).
    let repo = format!("{}/{}", r.registry, r.repository);
    if let (Some(tag), None) = (&r.tag, &r.digest) {
        engine.tag(&id, &repo, tag).await?;
    }
    let named = r.digest.as_deref().unwrap_or(&m.digest);
    engine
        .tag(&id, &repo, &crate::engine::image::digest_tag(named))
        .await?;
    for l in &fetched {
        spool.done(l);
    }
    let manifests: Vec<crate::registry::client::Served> = m
        .index
        .iter()
        .cloned()
        .chain(std::iter::once(crate::registry::client::Served {
            digest: m.digest.clone(),
            bytes: m.bytes.clone(),
            media_type: m.media_type.clone(),
        }))
        .collect();
    spool.keep_image(&manifests, (config_digest, &config));
    for at in outcome.rebuilt.keys() {
        spool.discard(&diff_ids[*at]);
    }
    Ok(Fetched {
        id,
        wire: wire.origin,
        peers: wire.peers + outcome.peers,
        present,
        layers: layers.len(),
        rebuilt: outcome.rebuilt.len(),
        chunks: outcome.wire,
        local: outcome.local,
    })
}

/// Whether a registry's error says it could not be reached.
fn is_away(e: &RegistryError) -> bool {
    matches!(
        e,
        RegistryError::Timeout { .. } | RegistryError::Connect { .. }
    )
}

/// Asks each of the site's peers in turn, as a registry (`ask`, with the
/// peers' registry client and `r` named at the peer), while its registry
/// is away (`away`, the error said when no peer has it).
async fn from_peers<T, F, Fut>(
    peers: Option<&crate::registry::peers::Peers>,
    r: &Reference,
    away: &RegistryError,
    ask: F,
) -> Result<T, FetchError>
where
    F: Fn(Registries, Reference) -> Fut,
    Fut: std::future::Future<Output = Result<T, RegistryError>>,
{
    let Some(peers) = peers else {
        return Err(FetchError::Wrong(away.to_string()));
    };
    for (peer, resting) in peers.list() {
        if resting {
            continue;
        }
        let Some(host) = peer.strip_prefix("http://") else {
            continue;
        };
        let pr = Reference {
            registry: host.to_string(),
            ..r.clone()
        };
        match ask(peers.registries(), pr).await {
            Ok(t) => {
                tracing::info!(peer, image = %r, "the registry is away: taken from a peer");
                return Ok(t);
            }
            Err(e) => tracing::debug!(peer, "a peer as a registry: {e}"),
        }
    }
    Err(FetchError::Registry(away.clone()))
}

/// The most images inspected for the layers a pull has already.
const INSPECTED: usize = 64;

/// How many of `diff_ids`, base first, an image the engine holds starts
/// with: those layers are not fetched. The images of the same
/// repository are looked at first, then the newest, at most
/// [`INSPECTED`] of them, until one holds every layer.
async fn engine_has<E: Engine>(
    engine: &E,
    repo: &str,
    diff_ids: &[String],
) -> Result<usize, FetchError> {
    let mut held = Vec::new();
    for id in super::chunks::likely(&listed(engine).await?, repo, INSPECTED) {
        if let Ok((_, layers)) = engine.image_root(&id).await {
            held.push(layers);
            if archive::present_prefix(diff_ids, &held) == diff_ids.len() {
                break;
            }
        }
    }
    Ok(archive::present_prefix(diff_ids, &held))
}

/// The engine's images. Podman's list fails (500) while an image it
/// lists is being removed: asked again twice, a moment apart.
pub(super) async fn listed<E: Engine>(
    engine: &E,
) -> Result<Vec<crate::engine::Image>, crate::engine::EngineError> {
    let mut tries = 0;
    loop {
        match engine.list_images().await {
            Err(e) if !e.is_unreachable() && tries < 2 => {
                tries += 1;
                tracing::debug!("the engine's image list failed ({e}): asked again");
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            r => return r,
        }
    }
}

/// Fetches `missing` into the spool (each once, even if named twice),
/// if its filesystem holds what is still to come and keeps the store's
/// reserve (what it holds already counts as there); the bytes that came.
async fn fetch_missing(
    from: &Origins<'_>,
    r: &Reference,
    spool: &Spool,
    reference: &str,
    missing: &[Layer],
    tally: &Tally,
    fetched: &mut BTreeSet<String>,
) -> Result<Wire, FetchError> {
    let missing: BTreeSet<(&str, u64)> =
        crate::model::sort::set(missing.iter().map(|l| (l.digest.as_str(), l.size)));
    let of: u64 = missing.iter().map(|(_, size)| size).sum();
    // Beside what chunks are coming for (counted by the rebuild).
    tally.of.fetch_add(of, Ordering::Relaxed);
    let mut here = 0;
    for (d, size) in &missing {
        here += spool.synced(d)?.min(*size);
    }
    if let Ok(space) = crate::host::disk::space(&spool.dir) {
        if !rule::spool_fits(of - here, space) {
            return Err(FetchError::NoRoom(crate::model::disk::NoRoom {
                image: reference.to_string(),
                need: of - here,
                free: space.free,
                reserve: crate::model::disk::store_reserve(space.total),
                path: spool.dir.display().to_string(),
            }));
        }
    }
    let mut wire = Wire::default();
    for (digest, size) in missing {
        let w = fetch_blob(from.registries, from.peers, r, spool, digest, size, tally).await?;
        wire.origin += w.origin;
        wire.peers += w.peers;
        fetched.insert(digest.to_string());
    }
    Ok(wire)
}

/// Streams `image` as one archive from the spool into the engine's load;
/// what the engine said it loaded.
async fn load<E: Engine>(
    engine: &E,
    spool: &Spool,
    image: &archive::Image<'_>,
    manifest_digest: &str,
) -> Result<Vec<String>, FetchError> {
    let entries =
        archive::entries(image, manifest_digest).map_err(|e| FetchError::Wrong(e.to_string()))?;
    let length = archive::length(&entries);
    let (tx, rx) = tokio::sync::mpsc::channel(8);
    let writer = {
        let spool = spool.clone();
        tokio::task::spawn_blocking(move || stream_archive(&entries, &spool, &tx))
    };
    let said = engine.load(Channel { rx, length }).await;
    let streamed = writer.await;
    let said = said?;
    if let Ok(Err(e)) = streamed {
        return Err(e);
    }
    Ok(said)
}

/// The diff IDs a config lists, base first.
fn diff_ids(config: &[u8]) -> Result<Vec<String>, String> {
    #[derive(serde::Deserialize)]
    struct Config {
        rootfs: RootFs,
    }
    #[derive(serde::Deserialize)]
    struct RootFs {
        diff_ids: Vec<String>,
    }
    let c: Config = serde_json::from_slice(config).map_err(|e| e.to_string())?;
    Ok(c.rootfs.diff_ids)
}

/// Writes the archive into `tx` as the engine reads it: each entry's
/// header, its bytes (a blob's from the spool), its padding, the end.
fn stream_archive(
    entries: &[archive::Entry],
    spool: &Spool,
    tx: &tokio::sync::mpsc::Sender<Result<bytes::Bytes, std::io::Error>>,
) -> Result<(), FetchError> {
    let send = |b: Vec<u8>| tx.blocking_send(Ok(bytes::Bytes::from(b))).is_ok();
    for e in entries {
        if !send(archive::header(&e.name, e.size()).to_vec()) {
            return Ok(());
        }
        match &e.body {
            Body::Bytes(b) => {
                if !send(b.clone()) {
                    return Ok(());
                }
            }
            Body::Blob { digest, size } => {
                let path = spool.path(digest);
                let mut f = std::fs::File::open(&path).map_err(spool_error(&path))?;
                let mut left = *size;
                while left > 0 {
                    let mut buf = vec![0u8; 256 * 1024];
                    let n = f.read(&mut buf).map_err(spool_error(&path))?;
                    if n == 0 {
                        let e = std::io::Error::new(
                            std::io::ErrorKind::UnexpectedEof,
                            "the spool is short",
                        );
                        let _ = tx.blocking_send(Err(e));
                        return Err(FetchError::Wrong(format!("{digest}: the spool is short")));
                    }
                    buf.truncate(n.min(usize::try_from(left).unwrap_or(usize::MAX)));
                    left -= buf.len() as u64;
                    if !send(buf) {
                        return Ok(());
                    }
                }
            }
        }
        let pad = archive::padding(e.size());
        if pad > 0 && !send(vec![0; pad]) {
            return Ok(());
        }
    }
    send(archive::END.to_vec());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spooled_blob_no_pull_touched_for_a_week_is_collected_unless_held() {
        let dir = tempfile::tempdir().unwrap();
        let spool = Spool::new(dir.path()).unwrap();
        let d = |c: char| format!("sha256:{}", c.to_string().repeat(64));
        let week = Duration::from_secs(crate::model::fetch::SPOOL_KEEP);
        let old = std::time::SystemTime::now() - week - Duration::from_secs(60);
        for (c, age) in [('a', Some(old)), ('b', None), ('c', Some(old))] {
            let path = spool.path(&d(c));
            std::fs::write(&path, vec![0u8; 100]).unwrap();
            std::fs::write(spool.mark(&d(c)), "100").unwrap();
            if let Some(t) = age {
                for p in [path, spool.mark(&d(c))] {
                    std::fs::File::options()
                        .write(true)
                        .open(p)
                        .unwrap()
                        .set_modified(t)
                        .unwrap();
                }
            }
        }
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let held = rt.block_on(spool.hold(&BTreeSet::from([d('c')])));
        let freed = spool.sweep(week);
        assert_eq!(freed, 100 + 3);
        assert!(!spool.path(&d('a')).exists() && !spool.mark(&d('a')).exists());
        assert!(spool.path(&d('b')).exists(), "touched lately");
        assert!(spool.path(&d('c')).exists(), "held by a pull");
        drop(held);
        assert_eq!(spool.sweep(week), 103);
        assert!(!spool.path(&d('c')).exists());
    }
}
