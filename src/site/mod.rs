//! Serving a site's peers (the devices on one LAN that share what each
//! fetched; `crate::registry::peers` is the asking side): a listener of its own (never the
//! API's) that answers only to the site's networks (`site.allow`; any
//! other address is closed before a byte is read), read-only, at most
//! `site.rate` bytes a second in all. It serves what the spool holds:
//! blobs the engine loaded, checked against their digest (kept for
//! `site.keep`), a blob being fetched from its registry now (its bytes as
//! they come, so a second device on the site waits for the first's
//! fetch instead of the WAN), the manifests (by digest) and configs of
//! the images loaded, the chunks and chunk indexes fetched from
//! the plane's host, and the signed group documents it holds (relayed to
//! a peer that cannot reach the plane, which judges them as the plane's).
//! Paths are an OCI registry's, a casync store's and the plane host's
//! ([`crate::model::site::Asked`]); a name is never a path.

pub mod mdns;

use std::convert::Infallible;
use std::io::{Read, Seek, SeekFrom};
use std::net::IpAddr;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use hyper::body::{Body, Bytes, Frame, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::mpsc;

use crate::model::site::{Asked, Bucket, Cidr};
use crate::registry::fetch::{Serving, Spool};

/// How many peers are served at once.
pub const MAX_CONNECTIONS: usize = 16;
/// The size bytes are read and sent at.
const PIECE: usize = 64 << 10;
/// How long a blob being fetched may go without a new byte before its
/// answer ends (the asker then goes elsewhere).
const TAIL_STALL: Duration = Duration::from_secs(30);
/// How long a peer may take to read what it was sent.
const SEND_STALL: Duration = Duration::from_secs(60);

/// What a device serves its site's peers, and to whom.
pub struct Served {
    /// The spool that holds it.
    pub spool: Spool,
    /// The networks served.
    pub allow: Vec<Cidr>,
    /// This device's node ID: a request that names it is its own.
    pub node: String,
    /// Counts what is served.
    pub metrics: Arc<crate::status::metrics::Metrics>,
    /// Where the group documents held are read, when the device has a
    /// plane.
    store: Option<Arc<crate::store::Store>>,
    bucket: Mutex<Bucket>,
    start: Instant,
}

impl Served {
    /// Serving `spool` to `allow` at `rate` bytes a second (bursts of a
    /// quarter second's worth, at least a piece).
    pub fn new(
        spool: Spool,
        allow: Vec<Cidr>,
        rate: u64,
        node: &str,
        metrics: Arc<crate::status::metrics::Metrics>,
    ) -> Served {
        Served {
            spool,
            allow,
            node: node.to_string(),
            metrics,
            store: None,
            bucket: Mutex::new(Bucket::new(rate, (rate / 4).max(PIECE as u64), 0)),
            start: Instant::now(),
        }
    }

    /// Serving the group documents `store` holds too.
    pub fn with_store(mut self, store: Arc<crate::store::Store>) -> Served {
        self.store = Some(store);
        self
    }

    /// Waits until `n` more bytes may go.
    async fn pace(&self, n: u64) {
        let now = u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX);
        let wait = self.bucket.lock().expect("bucket lock").take(now, n);
        if wait > 0 {
            tokio::time::sleep(Duration::from_nanos(wait)).await;
        }
    }
}

/// A response body: whole, or fed piece by piece (an error ends the
/// connection, so an answer cut short is never taken as whole).
pub enum Sent {
    /// Whole.
    Whole(Option<Bytes>),
    /// Fed by a task.
    Fed(mpsc::Receiver<Result<Bytes, std::io::Error>>),
}

impl Body for Sent {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        match &mut *self {
            Sent::Whole(b) => Poll::Ready(b.take().map(|b| Ok(Frame::data(b)))),
            Sent::Fed(rx) => rx.poll_recv(cx).map(|c| c.map(|r| r.map(Frame::data))),
        }
    }
}

type Resp = Response<Sent>;

/// Serves the site's peers on `listener` until the task is dropped.
pub async fn serve(listener: TcpListener, served: Arc<Served>) {
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    loop {
        let slot = slots
            .clone()
            .acquire_owned()
            .await
            .expect("the semaphore is never closed");
        let (stream, addr) = match listener.accept().await {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!("the peers' listener: accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        if !crate::model::site::allowed(&served.allow, addr.ip()) {
            served.metrics.site_refused();
            tracing::debug!(peer = %addr, "refused: not an address of the site (site.allow)");
            drop(stream);
            continue;
        }
        let served = served.clone();
        tokio::spawn(async move {
            let ip = addr.ip();
            let svc = hyper::service::service_fn(move |req| {
                let served = served.clone();
                async move { Ok::<_, Infallible>(answer(&served, ip, &req).await) }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(Duration::from_secs(10))
                .serve_connection(TokioIo::new(stream), svc);
            if let Err(e) = conn.await {
                tracing::debug!(peer = %ip, "a peer's connection ended: {e}");
            }
            drop(slot);
        });
    }
}

fn plain(status: StatusCode, text: &'static str) -> Resp {
    let mut r = Response::new(Sent::Whole(Some(Bytes::from_static(text.as_bytes()))));
    *r.status_mut() = status;
    r
}

/// Answers one request.
async fn answer(served: &Arc<Served>, ip: IpAddr, req: &Request<Incoming>) -> Resp {
    let head = match *req.method() {
        Method::GET => false,
        Method::HEAD => true,
        _ => return plain(StatusCode::METHOD_NOT_ALLOWED, "read-only\n"),
    };
    let own = req
        .headers()
        .get(crate::registry::peers::NODE_HEADER)
        .is_some_and(|v| v.as_bytes() == served.node.as_bytes());
    let Some(asked) = Asked::parse(req.uri().path()) else {
        return plain(StatusCode::NOT_FOUND, "not served\n");
    };
    if own {
        return plain(StatusCode::NOT_FOUND, "this device\n");
    }
    let range = req
        .headers()
        .get(http::header::RANGE)
        .and_then(|v| v.to_str().ok())
        .and_then(from_range);
    tracing::debug!(peer = %ip, path = req.uri().path(), "a peer asks");
    match asked {
        Asked::Version => {
            let mut r = plain(StatusCode::OK, "{}");
            r.headers_mut().insert(
                "docker-distribution-api-version",
                http::HeaderValue::from_static("registry/2.0"),
            );
            r
        }
        Asked::Blob(hex) => {
            let path = served.spool.dir().join(&hex);
            match served.spool.serving(&hex) {
                Serving::Whole(size) => send_file(served, path, size, range, head, None, "blob"),
                Serving::Coming(size) => {
                    send_file(served, path, size, range, head, Some(hex), "blob")
                }
                Serving::None => plain(StatusCode::NOT_FOUND, "not here\n"),
            }
        }
        Asked::Manifest(hex) => match served.spool.manifest(&hex) {
            Some((path, media_type)) => {
                let mut r = whole_file(served, path, None, head, "manifest");
                if let Ok(v) = http::HeaderValue::try_from(media_type) {
                    r.headers_mut().insert(http::header::CONTENT_TYPE, v);
                }
                if let Ok(v) = http::HeaderValue::try_from(format!("sha256:{hex}")) {
                    r.headers_mut().insert("docker-content-digest", v);
                }
                r
            }
            None => plain(StatusCode::NOT_FOUND, "not here\n"),
        },
        Asked::Chunk(hex) => {
            let Some(dir) = served.spool.chunks_dir() else {
                return plain(StatusCode::NOT_FOUND, "not here\n");
            };
            let path = dir
                .join("store.castr")
                .join(&hex[..4])
                .join(format!("{hex}.cacnk"));
            whole_file(served, path, range, head, "chunk")
        }
        Asked::Index(hex) => {
            let Some(dir) = served.spool.chunks_dir() else {
                return plain(StatusCode::NOT_FOUND, "not here\n");
            };
            whole_file(
                served,
                dir.join(format!("{hex}.caibx")),
                range,
                head,
                "index",
            )
        }
        Asked::Group(name) => {
            let Some(store) = served.store.clone() else {
                return plain(StatusCode::NOT_FOUND, "not here\n");
            };
            let held = store
                .blocking(move |s| s.plane_groups().map(|mut g| g.remove(&name)))
                .await;
            match held {
                Ok(Some(g)) => {
                    let n = g.envelope.len() as u64;
                    served.pace(n).await;
                    served.metrics.site_served("document", n);
                    let mut r =
                        Response::new(Sent::Whole((!head).then(|| Bytes::from(g.envelope))));
                    let h = r.headers_mut();
                    h.insert(http::header::CONTENT_LENGTH, n.into());
                    h.insert(
                        http::header::CONTENT_TYPE,
                        http::HeaderValue::from_static("application/json"),
                    );
                    r
                }
                Ok(None) => plain(StatusCode::NOT_FOUND, "not here\n"),
                Err(e) => {
                    tracing::warn!("the peers' listener: the group documents held: {e}");
                    plain(StatusCode::SERVICE_UNAVAILABLE, "not now\n")
                }
            }
        }
    }
}

/// `bytes=<n>-`: where the answer starts (its end is the file's). Any
/// other range is not honoured: the whole file is the answer (RFC 9110
/// lets a server ignore it).
fn from_range(v: &str) -> Option<u64> {
    let spec = v.strip_prefix("bytes=")?;
    let start = spec.strip_suffix('-')?;
    start.trim().parse().ok()
}

fn whole_file(
    served: &Arc<Served>,
    path: PathBuf,
    range: Option<u64>,
    head: bool,
    what: &'static str,
) -> Resp {
    match std::fs::metadata(&path) {
        Ok(m) if m.is_file() => send_file(served, path, m.len(), range, head, None, what),
        _ => plain(StatusCode::NOT_FOUND, "not here\n"),
    }
}

/// Sends `path` (of `size` bytes once whole) from `range` on; while
/// `coming` names a blob being fetched, bytes not yet there are waited
/// for.
fn send_file(
    served: &Arc<Served>,
    path: PathBuf,
    size: u64,
    range: Option<u64>,
    head: bool,
    coming: Option<String>,
    what: &'static str,
) -> Resp {
    let from = range.unwrap_or(0);
    if range.is_some() && from >= size {
        let mut r = plain(StatusCode::RANGE_NOT_SATISFIABLE, "");
        if let Ok(v) = http::HeaderValue::try_from(format!("bytes */{size}")) {
            r.headers_mut().insert(http::header::CONTENT_RANGE, v);
        }
        return r;
    }
    let length = size - from;
    let mut r = if head {
        Response::new(Sent::Whole(None))
    } else {
        let (tx, rx) = mpsc::channel(4);
        tokio::spawn(feed(served.clone(), path, from, size, coming, what, tx));
        Response::new(Sent::Fed(rx))
    };
    if range.is_some() {
        *r.status_mut() = StatusCode::PARTIAL_CONTENT;
        if let Ok(v) = http::HeaderValue::try_from(format!("bytes {from}-{}/{size}", size - 1)) {
            r.headers_mut().insert(http::header::CONTENT_RANGE, v);
        }
    }
    let h = r.headers_mut();
    h.insert(http::header::CONTENT_LENGTH, length.into());
    h.insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/octet-stream"),
    );
    h.insert(
        http::header::ACCEPT_RANGES,
        http::HeaderValue::from_static("bytes"),
    );
    r
}

/// Reads `path` from `from` to `size`, paced, into `tx`; an error (a file
/// that went, a blob no longer coming, a peer that stopped reading) ends
/// the answer short.
async fn feed(
    served: Arc<Served>,
    path: PathBuf,
    from: u64,
    size: u64,
    coming: Option<String>,
    what: &'static str,
    tx: mpsc::Sender<Result<Bytes, std::io::Error>>,
) {
    let fail = |m: String| Err(std::io::Error::other(m));
    let mut file = match std::fs::File::open(&path).and_then(|mut f| {
        f.seek(SeekFrom::Start(from))?;
        Ok(f)
    }) {
        Ok(f) => f,
        Err(e) => {
            let _ = tx.send(fail(e.to_string())).await;
            return;
        }
    };
    let mut at = from;
    let mut last_new = Instant::now();
    let mut buf = vec![0u8; PIECE];
    while at < size {
        let want = usize::try_from(size - at).unwrap_or(PIECE).min(PIECE);
        let n = match file.read(&mut buf[..want]) {
            Ok(n) => n,
            Err(e) => {
                let _ = tx.send(fail(e.to_string())).await;
                return;
            }
        };
        if n == 0 {
            // Not there yet: a blob being fetched is waited for; anything
            // else is short.
            let still = coming
                .as_deref()
                .is_some_and(|hex| served.spool.serving(hex) != Serving::None);
            if !still || last_new.elapsed() > TAIL_STALL {
                let _ = tx.send(fail(format!("{}: short", path.display()))).await;
                return;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        }
        last_new = Instant::now();
        served.pace(n as u64).await;
        let piece = Bytes::copy_from_slice(&buf[..n]);
        match tokio::time::timeout(SEND_STALL, tx.send(Ok(piece))).await {
            Ok(Ok(())) => {}
            _ => return,
        }
        served.metrics.site_served(what, n as u64);
        at += n as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_range_says_where_the_answer_starts() {
        // (header, start)
        let table: &[(&str, Option<u64>)] = &[
            ("bytes=0-", Some(0)),
            ("bytes=1048576-", Some(1 << 20)),
            ("bytes=10-20", None),
            ("bytes=-20", None),
            ("items=1-", None),
            ("bytes=x-", None),
        ];
        for (h, want) in table {
            assert_eq!(from_range(h), *want, "{h}");
        }
    }
}
