//! Layers rebuilt from chunks: where the plane's static host publishes a
//! casync index of a layer (`<base>/chunks/<diff hex>.caibx`, made by
//! `stead-plane chunks`) and its chunk store (`<base>/chunks/store.castr/`),
//! a layer the engine lacks is put together from the chunks of the layers
//! it has (the images of the same repository, read from the engine's
//! export) and those chunks it lacks, fetched from the store; the layer is
//! then checked against its diff ID and handed to the engine uncompressed.
//! Where no index is published, or the chunks to fetch would cost more
//! than the layer's blob ([`crate::model::chunk::plan`]), the blob is
//! pulled as before.
//!
//! A rebuild under way is `<spool>/sha256/<diff hex>.rebuild`, written at
//! each chunk's offset and synced as it goes; after a restart or a power
//! cut each chunk's span is hashed again, and those that match are kept.
//! Nothing rests on the host or the seeds: every chunk is checked by its
//! ID, the layer by its diff ID, the image by its config's digest.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::Duration;

use http_body_util::BodyExt;

use crate::engine::{Engine, Image};
use crate::model::chunk::{self, Digest, Id, Index};
use crate::model::tar::{Piece, TarStream};
use crate::net::http::{Http, Transport};
use crate::registry::fetch::{FetchError, Spool, Tally};

/// How long a call to the host, or a read of an engine's export, may
/// go without an answer.
const STALL: Duration = Duration::from_secs(30);
/// The largest index read (a 4 GiB layer in 16 KiB chunks).
const MAX_INDEX: usize = 12 << 20;
/// The images of the layer's repository read for chunks: the newest.
const SEEDS: usize = 2;
/// Bytes written to a rebuild between syncs.
const SYNC_EVERY: u64 = 4 << 20;

/// The plane's static host, where chunk indexes and the store are.
#[derive(Clone)]
pub struct ChunkSource {
    http: Http,
    base: String,
}

impl ChunkSource {
    /// The host at `base` (the plane's URL), asked with `http` (the
    /// plane's client: its CA and credentials).
    pub fn new(http: Http, base: &http::Uri) -> ChunkSource {
        ChunkSource {
            http,
            base: base.to_string().trim_end_matches('/').to_string(),
        }
    }

    /// `<base>/chunks/<path>`: its bytes, `None` when the host has none
    /// (404, 403: S3 says 403 for a key it does not hold to a reader
    /// that may not list).
    async fn get(&self, path: &str, max: usize) -> Result<Option<bytes::Bytes>, Got> {
        let url = format!("{}/chunks/{path}", self.base);
        let uri: http::Uri = url
            .parse()
            .map_err(|_| Got::Wrong(format!("{url}: not a URL")))?;
        match self
            .http
            .send(http::Method::GET, uri, &http::HeaderMap::new(), STALL, max)
            .await
        {
            Ok(a) if a.status.is_success() => Ok(Some(a.body)),
            Ok(a) if matches!(a.status.as_u16(), 404 | 403 | 410) => Ok(None),
            Ok(a) => Err(Got::Wrong(format!("{url}: status {}", a.status.as_u16()))),
            Err(Transport::TooLarge(n)) => Err(Got::Wrong(format!("{url}: over {n} bytes"))),
            Err(t) => Err(Got::Link(format!("{url}: {t}"))),
        }
    }
}

/// Why the host gave nothing usable.
enum Got {
    /// It could not be reached.
    Link(String),
    /// It answered something else than the file.
    Wrong(String),
}

/// A layer to rebuild when it can be: its place in the image, its diff
/// ID, its blob's size (what a pull would move).
#[derive(Clone, Debug)]
pub struct Target {
    /// Its place among the image's layers.
    pub at: usize,
    /// `sha256:…` of its uncompressed tar.
    pub diff_id: String,
    /// Its compressed blob's size.
    pub blob_size: u64,
}

/// What the rebuilds did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    /// The layers rebuilt, by place: their uncompressed size (the spool
    /// holds them under their diff IDs).
    pub rebuilt: BTreeMap<usize, u64>,
    /// Bytes that came from the host (chunks as stored, and indexes).
    pub wire: u64,
    /// Bytes that came from the site's peers (chunks, indexes).
    pub peers: u64,
    /// Bytes of the rebuilt layers that came from layers held here.
    pub local: u64,
}

/// A rebuild under way.
struct Work {
    target: Target,
    index: Index,
    path: PathBuf,
    file: std::fs::File,
    /// Per chunk of the index: whether its bytes are in the file.
    filled: Vec<bool>,
    written: u64,
}

impl Work {
    fn write(&mut self, k: usize, data: &[u8]) -> std::io::Result<()> {
        let start = if k == 0 {
            0
        } else {
            self.index.chunks[k - 1].end
        };
        self.file.seek(SeekFrom::Start(start))?;
        self.file.write_all(data)?;
        self.filled[k] = true;
        self.written += data.len() as u64;
        if self.written >= SYNC_EVERY {
            self.file.sync_data()?;
            self.written = 0;
        }
        Ok(())
    }
}

fn spool_error(path: &std::path::Path) -> impl Fn(std::io::Error) -> FetchError + '_ {
    move |e| FetchError::Spool {
        path: path.display().to_string(),
        message: e.to_string(),
    }
}

/// Whether `image` is named in `repo` (`registry/repository`; Docker
/// Hub's without its registry, as the engine names them).
fn in_repo(image: &Image, repo: &str) -> bool {
    let short = repo
        .strip_prefix("docker.io/library/")
        .or_else(|| repo.strip_prefix("docker.io/"));
    let same = |name: &str| name == repo || Some(name) == short;
    image
        .tags
        .iter()
        .filter_map(|t| t.rsplit_once(':').map(|(r, _)| r))
        .chain(
            image
                .digests
                .iter()
                .filter_map(|d| d.split_once('@').map(|(r, _)| r)),
        )
        .any(same)
}

/// The images whose chunks a layer of `repo` (`registry/repository`) is
/// rebuilt from: those named in that repository, the newest first.
pub fn seeds(images: &[Image], repo: &str) -> Vec<String> {
    let mut found: Vec<&Image> = images.iter().filter(|i| in_repo(i, repo)).collect();
    crate::model::sort::sort_by(&mut found, |a, b| {
        b.created.cmp(&a.created).then_with(|| a.id.cmp(&b.id))
    });
    found
        .into_iter()
        .take(SEEDS)
        .map(|i| i.id.clone())
        .collect()
}

/// The images most likely to hold an image of `repo`'s layers, at most
/// `limit`: those of the same repository, then the others, each the
/// newest first.
pub fn likely(images: &[Image], repo: &str, limit: usize) -> Vec<String> {
    let mut all: Vec<&Image> = images.iter().collect();
    crate::model::sort::sort_by(&mut all, |a, b| {
        in_repo(b, repo)
            .cmp(&in_repo(a, repo))
            .then_with(|| b.created.cmp(&a.created))
            .then_with(|| a.id.cmp(&b.id))
    });
    all.into_iter().take(limit).map(|i| i.id.clone()).collect()
}

/// Rebuilds what it can of `targets` (layers of an image of `repo` the
/// engine lacks) into the spool; the rest is left to the pull.
pub async fn rebuild<E: Engine>(
    source: &ChunkSource,
    peers: Option<&crate::registry::peers::Peers>,
    engine: &E,
    spool: &Spool,
    repo: &str,
    targets: &[Target],
    tally: &Tally,
) -> Result<Outcome, FetchError> {
    let mut out = Outcome::default();
    let mut works = Vec::new();
    // Bytes the rebuilds taken so far still write.
    let mut writing = 0u64;
    for t in targets {
        let Some(hex) = t.diff_id.strip_prefix("sha256:") else {
            continue;
        };
        let name = format!("{hex}.caibx");
        let index = match get_any(source, peers, &name, MAX_INDEX).await {
            Ok(Some((b, from_peer))) => {
                if from_peer {
                    out.peers += b.len() as u64;
                } else {
                    out.wire += b.len() as u64;
                }
                match Index::decode(&b) {
                    Ok(i) if i.size() > 0 => {
                        keep(spool, &name, &b);
                        i
                    }
                    Ok(_) => continue,
                    Err(e) => {
                        tracing::warn!(layer = t.diff_id, "its chunk index: {e}: pulled whole");
                        continue;
                    }
                }
            }
            Ok(None) => continue,
            Err(Got::Link(e) | Got::Wrong(e)) => {
                tracing::info!(layer = t.diff_id, "no chunk index ({e}): pulled whole");
                continue;
            }
        };
        let size = index.size();
        if spool.synced(&t.diff_id)? == size && spool.check(&t.diff_id)? {
            out.rebuilt.insert(t.at, size);
            continue;
        }
        // The layer is written whole, uncompressed: the spool's filesystem
        // must hold it and keep the store's reserve, or it is pulled.
        let had = std::fs::metadata(spool.rebuild_path(&t.diff_id)).map_or(0, |m| m.len());
        let more = size.saturating_sub(had).saturating_add(writing);
        if let Ok(space) = crate::host::disk::space(spool.dir())
            && !crate::model::fetch::spool_fits(more, space)
        {
            tracing::info!(
                layer = t.diff_id,
                size,
                free = space.free,
                "no room in the spool to rebuild the layer: pulled whole"
            );
            continue;
        }
        writing = more;
        works.push(open_work(spool, t.clone(), index)?);
    }
    if works.is_empty() {
        return Ok(out);
    }
    // The chunks still wanted, by ID: where each goes.
    let wanted = |works: &[Work]| {
        let mut need: HashMap<Id, Vec<(usize, usize)>> = HashMap::new();
        for (w, work) in works.iter().enumerate() {
            for (k, c) in work.index.chunks.iter().enumerate() {
                if !work.filled[k] {
                    need.entry(c.id).or_default().push((w, k));
                }
            }
        }
        need
    };
    let need = wanted(&works);
    if !need.is_empty() {
        let images = super::fetch::listed(engine).await?;
        for seed in seeds(&images, repo) {
            let need = wanted(&works);
            if need.is_empty() {
                break;
            }
            works = match scan_seed(engine, &seed, works, need).await {
                Ok(w) => w,
                Err((w, e)) => {
                    tracing::info!(seed, "its layers were not read for chunks: {e}");
                    w
                }
            };
        }
    }
    // Per layer: rebuild, or pull.
    let need = wanted(&works);
    let mut rebuilding = Vec::new();
    let mut fetch: BTreeMap<Id, u64> = BTreeMap::new();
    for work in works {
        let plan = chunk::plan(
            &work.index,
            |id| !need.contains_key(id),
            work.target.blob_size,
        );
        tracing::info!(
            layer = work.target.diff_id,
            here = plan.here,
            missing = plan.missing,
            chunks = plan.fetch.len(),
            wire = plan.wire,
            pull = work.target.blob_size,
            rebuild = plan.rebuild,
            "a layer's chunks"
        );
        if plan.rebuild {
            fetch.extend(plan.fetch.iter().copied());
            tally.of.fetch_add(plan.wire, Ordering::Relaxed);
            rebuilding.push((work, plan.here));
        } else {
            let _ = std::fs::remove_file(&work.path);
        }
    }
    // The chunks no layer here holds, from the store.
    let mut failed: BTreeSet<usize> = BTreeSet::new();
    for (id, len) in fetch {
        let digests: BTreeSet<(bool, u64)> = crate::model::sort::set(
            rebuilding
                .iter()
                .filter(|(w, _)| w.index.chunks.iter().any(|c| c.id == id))
                .map(|(w, _)| (w.index.digest() == Digest::Sha512_256, w.index.sizes.max)),
        );
        let Some(&(sha512, max)) = digests.iter().next() else {
            continue;
        };
        let digest = if sha512 {
            Digest::Sha512_256
        } else {
            Digest::Sha256
        };
        let got = fetch_chunk(source, peers, spool, &id, digest, max.max(len)).await;
        let bytes = match got {
            Ok((bytes, wire, from_peer)) => {
                if from_peer {
                    out.peers += wire;
                } else {
                    out.wire += wire;
                }
                tally.bytes.fetch_add(wire, Ordering::Relaxed);
                bytes
            }
            Err(Got::Link(e)) => {
                // The rebuilds stay as they are, for the next try.
                for (w, _) in &mut rebuilding {
                    let _ = w.file.sync_data();
                }
                return Err(FetchError::Stopped {
                    digest: format!("chunk {}", id.hex()),
                    synced: 0,
                    size: len,
                    why: e,
                });
            }
            Err(Got::Wrong(e)) => {
                tracing::warn!(chunk = id.hex(), "{e}: its layers are pulled whole");
                for (w, (work, _)) in rebuilding.iter().enumerate() {
                    if work.index.chunks.iter().any(|c| c.id == id) {
                        failed.insert(w);
                    }
                }
                continue;
            }
        };
        for (work, _) in &mut rebuilding {
            for k in 0..work.index.chunks.len() {
                if work.index.chunks[k].id == id && !work.filled[k] {
                    work.write(k, &bytes).map_err(spool_error(&work.path))?;
                }
            }
        }
    }
    for (w, (work, here)) in rebuilding.into_iter().enumerate() {
        if failed.contains(&w) || work.filled.iter().any(|f| !f) {
            let _ = std::fs::remove_file(&work.path);
            continue;
        }
        work.file.sync_data().map_err(spool_error(&work.path))?;
        drop(work.file);
        let size = work.index.size();
        let path = work.path.clone();
        let diff = work.target.diff_id.clone();
        let sum = tokio::task::spawn_blocking(move || sha256_of(&path))
            .await
            .map_err(|e| FetchError::Wrong(e.to_string()))?
            .map_err(spool_error(&work.path))?;
        if diff.strip_prefix("sha256:") != Some(sum.as_str()) {
            tracing::warn!(
                layer = diff,
                "the layer rebuilt from chunks is not its diff ID (sha256:{sum}): pulled whole"
            );
            let _ = std::fs::remove_file(&work.path);
            continue;
        }
        spool
            .adopt(&diff, &work.path, size)
            .map_err(spool_error(&work.path))?;
        out.local += here;
        out.rebuilt.insert(work.target.at, size);
    }
    Ok(out)
}

/// A rebuild's file, opened (made at its size when new, else its
/// chunks checked: those whose bytes match their IDs are kept).
fn open_work(spool: &Spool, target: Target, index: Index) -> Result<Work, FetchError> {
    let path = spool.rebuild_path(&target.diff_id);
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(&path)
        .map_err(spool_error(&path))?;
    let size = index.size();
    let len = file.metadata().map_err(spool_error(&path))?.len();
    let mut filled = vec![false; index.chunks.len()];
    if len == size {
        let digest = index.digest();
        let mut buf = Vec::new();
        for (k, (start, c)) in index.spans().enumerate() {
            buf.resize((c.end - start) as usize, 0);
            file.seek(SeekFrom::Start(start))
                .map_err(spool_error(&path))?;
            file.read_exact(&mut buf).map_err(spool_error(&path))?;
            filled[k] = digest.id(&buf) == c.id;
        }
    } else {
        file.set_len(0).map_err(spool_error(&path))?;
        file.set_len(size).map_err(spool_error(&path))?;
    }
    Ok(Work {
        target,
        index,
        path,
        file,
        filled,
        written: 0,
    })
}

/// Reads the image `seed` from the engine, cuts each of its files (its
/// layers, whatever the export names them) into chunks, and writes
/// those `need`ed where they go. Hands the rebuilds back, with what
/// went wrong if something did.
async fn scan_seed<E: Engine>(
    engine: &E,
    seed: &str,
    works: Vec<Work>,
    need: HashMap<Id, Vec<(usize, usize)>>,
) -> Result<Vec<Work>, (Vec<Work>, String)> {
    let body = match engine.export(seed).await {
        Ok(b) => b,
        Err(e) => return Err((works, e.to_string())),
    };
    let (tx, mut rx) = tokio::sync::mpsc::channel::<bytes::Bytes>(8);
    let digests: BTreeSet<bool> =
        crate::model::sort::set(works.iter().map(|w| w.index.digest() == Digest::Sha512_256));
    // One cut for every index; indexes cut otherwise are not seeded.
    let sizes = works[0].index.sizes;
    let digest = if digests.contains(&true) {
        Digest::Sha512_256
    } else {
        Digest::Sha256
    };
    let worker = tokio::task::spawn_blocking(move || {
        let mut works = works;
        let mut need = need;
        let mut tar = TarStream::default();
        let mut cutter = chunk::Cutter::new(sizes);
        let mut current: Vec<u8> = Vec::new();
        let mut failed: Option<String> = None;
        let place = |current: &mut Vec<u8>,
                     works: &mut Vec<Work>,
                     need: &mut HashMap<Id, Vec<(usize, usize)>>| {
            if current.is_empty() {
                return Ok(());
            }
            let id = digest.id(current);
            if let Some(places) = need.remove(&id) {
                for (w, k) in places {
                    if works[w].index.sizes == sizes && works[w].index.digest() == digest {
                        works[w].write(k, current)?;
                    }
                }
            }
            current.clear();
            Ok::<(), std::io::Error>(())
        };
        while let Some(bytes) = rx.blocking_recv() {
            // Nothing more to find, or nothing more to read: the receiver
            // dropped, the export is read no further.
            if failed.is_some() || need.is_empty() {
                break;
            }
            let mut io: Result<(), std::io::Error> = Ok(());
            let fed = tar.feed(&bytes, |p| {
                if io.is_err() {
                    return;
                }
                match p {
                    Piece::Begin(_) => {
                        cutter = chunk::Cutter::new(sizes);
                        current.clear();
                    }
                    Piece::Data(mut d) => {
                        while !d.is_empty() {
                            match cutter.feed(d) {
                                Some(n) => {
                                    current.extend_from_slice(&d[..n]);
                                    d = &d[n..];
                                    io = place(&mut current, &mut works, &mut need);
                                }
                                None => {
                                    current.extend_from_slice(d);
                                    d = &[];
                                }
                            }
                        }
                    }
                    Piece::End => io = place(&mut current, &mut works, &mut need),
                }
            });
            if let Err(e) = fed {
                failed = Some(e);
            } else if let Err(e) = io {
                failed = Some(format!("the spool: {e}"));
            }
        }
        (works, failed)
    });
    let mut body = body;
    let mut why = None;
    loop {
        match tokio::time::timeout(STALL, body.frame()).await {
            Ok(Some(Ok(frame))) => {
                if let Ok(data) = frame.into_data()
                    && tx.send(data).await.is_err()
                {
                    break;
                }
            }
            Ok(None) => break,
            Ok(Some(Err(e))) => {
                why = Some(format!("the export broke: {e}"));
                break;
            }
            Err(_) => {
                why = Some(format!("the export stalled for {}s", STALL.as_secs()));
                break;
            }
        }
    }
    drop(tx);
    let (works, failed) = match worker.await {
        Ok(r) => r,
        Err(e) => return Err((Vec::new(), format!("the chunk scan's task: {e}"))),
    };
    match why.or(failed) {
        None => Ok(works),
        Some(e) => Err((works, e)),
    }
}

/// `<chunks>/<path>` from the first of the site's peers that has it,
/// else from the host; with whether a peer gave it.
async fn get_any(
    source: &ChunkSource,
    peers: Option<&crate::registry::peers::Peers>,
    path: &str,
    max: usize,
) -> Result<Option<(bytes::Bytes, bool)>, Got> {
    for (peer, resting) in peers.map(|p| p.list()).unwrap_or_default() {
        if resting {
            continue;
        }
        match peers
            .expect("listed peers")
            .chunk_file(&peer, path, max)
            .await
        {
            Ok(Some(b)) => return Ok(Some((b, true))),
            Ok(None) => {}
            Err(e) => {
                tracing::info!(peer = %peer, "a peer did not answer: {e}");
                if let Some(p) = peers {
                    p.rest(&peer);
                }
            }
        }
    }
    Ok(source.get(path, max).await?.map(|b| (b, false)))
}

/// Keeps a file fetched (an index, a chunk as stored) for the site's
/// peers, when the spool keeps; a file that cannot be written is not
/// kept.
fn keep(spool: &Spool, path: &str, bytes: &[u8]) {
    let Some(dir) = spool.chunks_dir() else {
        return;
    };
    let to = dir.join(path);
    let tmp = to.with_extension("part");
    let kept = to
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|()| std::fs::write(&tmp, bytes))
        .and_then(|()| std::fs::rename(&tmp, &to));
    if let Err(e) = kept {
        tracing::debug!("{}: not kept for the site's peers: {e}", to.display());
        let _ = std::fs::remove_file(&tmp);
    }
}

/// Fetches a chunk from the site's peers, else the store, and opens it;
/// its bytes, the bytes that came, and whether a peer sent them. A chunk
/// that is not its ID is asked of the next peer, and of the store once
/// more (a cache's bad copy), then it is the store's failure.
async fn fetch_chunk(
    source: &ChunkSource,
    peers: Option<&crate::registry::peers::Peers>,
    spool: &Spool,
    id: &Id,
    digest: Digest,
    max: u64,
) -> Result<(Vec<u8>, u64, bool), Got> {
    let path = format!("store.castr/{}", id.store_path());
    let cap = usize::try_from(max)
        .unwrap_or(usize::MAX)
        .saturating_add(64 << 10);
    let mut lan = 0u64;
    for (peer, resting) in peers.map(|p| p.list()).unwrap_or_default() {
        if resting {
            continue;
        }
        let p = peers.expect("listed peers");
        match p.chunk_file(&peer, &path, cap).await {
            Ok(Some(b)) => {
                lan += b.len() as u64;
                match chunk::open_chunk(&b, id, digest, max) {
                    Ok(data) => {
                        keep(spool, &path, &b);
                        return Ok((data, lan, true));
                    }
                    Err(e) => tracing::warn!(peer = %peer, chunk = id.hex(), "a peer's chunk: {e}"),
                }
            }
            Ok(None) => {}
            Err(e) => {
                tracing::info!(peer = %peer, "a peer did not answer: {e}");
                p.rest(&peer);
            }
        }
    }
    let mut last = String::new();
    for _ in 0..2 {
        let Some(b) = source.get(&path, cap).await? else {
            return Err(Got::Wrong(format!(
                "chunk {} is not in the store",
                id.hex()
            )));
        };
        match chunk::open_chunk(&b, id, digest, max) {
            Ok(data) => {
                keep(spool, &path, &b);
                return Ok((data, b.len() as u64, false));
            }
            Err(e) => last = format!("chunk {}: {e}", id.hex()),
        }
    }
    Err(Got::Wrong(last))
}

fn sha256_of(path: &std::path::Path) -> std::io::Result<String> {
    let mut f = std::fs::File::open(path)?;
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    let mut buf = vec![0u8; 256 * 1024];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        ctx.update(&buf[..n]);
    }
    Ok(ctx
        .finish()
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_seeds_are_the_newest_images_of_the_same_repository() {
        let image = |id: &str, tags: &[&str], digests: &[&str], created: i64| Image {
            id: id.into(),
            tags: tags.iter().map(|s| s.to_string()).collect(),
            digests: digests.iter().map(|s| s.to_string()).collect(),
            size: 0,
            created,
        };
        let images = vec![
            image("a", &["localhost:5000/app:v1"], &[], 1),
            image("b", &["localhost:5000/app:v2"], &[], 3),
            image("c", &[], &["localhost:5000/app@sha256:00"], 2),
            image("d", &["localhost:5000/other:v1"], &[], 9),
            image("e", &["localhost:5000/app/sub:v1"], &[], 9),
            image("f", &["busybox:latest"], &[], 5),
        ];
        // (repository, seeds)
        let table: &[(&str, &[&str])] = &[
            ("localhost:5000/app", &["b", "c"]),
            ("localhost:5000/other", &["d"]),
            ("docker.io/library/busybox", &["f"]),
            ("localhost:5000/none", &[]),
        ];
        for (repo, want) in table {
            assert_eq!(seeds(&images, repo), *want, "{repo}");
        }
        // (repository, limit, the images inspected for layers, in order)
        let table: &[(&str, usize, &[&str])] = &[
            ("localhost:5000/app", 9, &["b", "c", "a", "d", "e", "f"]),
            ("localhost:5000/app", 4, &["b", "c", "a", "d"]),
            ("localhost:5000/none", 3, &["d", "e", "f"]),
        ];
        for (repo, limit, want) in table {
            assert_eq!(likely(&images, repo, *limit), *want, "{repo} {limit}");
        }
    }
}
