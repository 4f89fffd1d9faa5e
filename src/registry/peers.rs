//! Asking a site's peers: the devices on one LAN that serve each other
//! the blobs and chunks they fetched (`crate::site` is the serving
//! side), so that each crosses the WAN once. This module owns which
//! peers there are (the config's, the group documents', those found by
//! mDNS), which rest after
//! failing to answer, and the requests. The rules (where a blob is asked
//! next) are [`crate::model::site`]'s.
//!
//! A peer is asked by the paths of an OCI registry's blobs and of a
//! casync chunk store, so what it serves is what the registry and the
//! plane's static host serve, checked the same way: nothing rests on it.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::model::site::{MAX_PEERS, PEER_REST};
use crate::net::http::{Answer, Http, Open, Redirects, Transport};

/// How long a peer may take to answer a request's head, or to send its
/// next bytes.
pub const PEER_STALL: Duration = Duration::from_secs(10);
/// The header that names the asking device: a device does not serve
/// itself (a site's list of peers names it too).
pub const NODE_HEADER: &str = "x-stead-node";

/// The peers a device asks before the WAN: their base URLs
/// (`http://host:port`), from its config, its group documents and mDNS
/// (`crate::site::mdns`).
#[derive(Clone)]
pub struct Peers {
    http: Http,
    node: String,
    inner: Arc<Mutex<Inner>>,
}

#[derive(Default)]
struct Inner {
    /// From the config.
    configured: Vec<String>,
    /// From the group documents held.
    named: Vec<String>,
    /// Found by mDNS, until their records run out, in the order found.
    found: Vec<(String, Instant)>,
    /// Until when a peer that did not answer is left alone.
    resting: std::collections::HashMap<String, Instant>,
}

pub use crate::model::site::peer_url as base_url;

impl Peers {
    /// The peers of device `node`, `configured` in its config (base URLs,
    /// [`base_url`]'s).
    pub fn new(node: &str, configured: Vec<String>) -> Result<Peers, String> {
        let http = Http::lan()?.with_redirects(Redirects::Never);
        Ok(Peers {
            http,
            node: node.to_string(),
            inner: Arc::new(Mutex::new(Inner {
                configured,
                ..Inner::default()
            })),
        })
    }

    /// Takes the peers the group documents name now (their addresses as
    /// written; one that is not an address is left out, saying so).
    pub fn named(&self, peers: &[String]) {
        let named: Vec<String> = peers
            .iter()
            .filter_map(|p| match base_url(p) {
                Ok(u) => Some(u),
                Err(e) => {
                    tracing::warn!("a group document's peer is left out: {e}");
                    None
                }
            })
            .collect();
        let mut inner = self.inner.lock().expect("peers lock");
        if inner.named != named {
            tracing::info!(
                peers = named.len(),
                "the group documents name the site's peers"
            );
            inner.named = named;
        }
    }

    /// Takes a peer found by mDNS (`url`, a base URL), for `ttl`
    /// seconds from now; a TTL of 0 says it is gone. Says whether the
    /// peers found changed. At most [`MAX_PEERS`] are held.
    pub fn found(&self, url: &str, ttl: u32) -> bool {
        let mut inner = self.inner.lock().expect("peers lock");
        let now = Instant::now();
        inner.found.retain(|(_, until)| *until > now);
        let had = inner.found.iter().position(|(u, _)| u == url);
        match (had, ttl) {
            (Some(i), 0) => {
                inner.found.remove(i);
                true
            }
            (None, 0) => false,
            (Some(i), t) => {
                inner.found[i].1 = now + Duration::from_secs(u64::from(t));
                false
            }
            (None, t) if inner.found.len() < MAX_PEERS => {
                inner
                    .found
                    .push((url.to_string(), now + Duration::from_secs(u64::from(t))));
                true
            }
            (None, _) => false,
        }
    }

    /// How many peers found by mDNS are held now.
    pub fn found_count(&self) -> usize {
        let inner = self.inner.lock().expect("peers lock");
        let now = Instant::now();
        inner.found.iter().filter(|(_, until)| *until > now).count()
    }

    /// The peers, in the order they are asked (the config's, the
    /// documents', then those found by mDNS, each once, at most
    /// [`MAX_PEERS`]), and whether each is resting.
    pub fn list(&self) -> Vec<(String, bool)> {
        let inner = self.inner.lock().expect("peers lock");
        let now = Instant::now();
        let mut seen = std::collections::BTreeSet::new();
        inner
            .configured
            .iter()
            .chain(inner.named.iter())
            .chain(
                inner
                    .found
                    .iter()
                    .filter(|(_, until)| *until > now)
                    .map(|(u, _)| u),
            )
            .filter(|u| seen.insert(u.as_str()))
            .take(MAX_PEERS)
            .map(|u| (u.clone(), inner.resting.get(u).is_some_and(|t| *t > now)))
            .collect()
    }

    /// Whether there are any.
    pub fn is_empty(&self) -> bool {
        let inner = self.inner.lock().expect("peers lock");
        let now = Instant::now();
        inner.configured.is_empty()
            && inner.named.is_empty()
            && inner.found.iter().all(|(_, until)| *until <= now)
    }

    /// Leaves `peer` alone for [`PEER_REST`]: it did not answer.
    pub fn rest(&self, peer: &str) {
        tracing::info!(peer, "a peer did not answer: left alone for {PEER_REST} s");
        self.inner.lock().expect("peers lock").resting.insert(
            peer.to_string(),
            Instant::now() + Duration::from_secs(PEER_REST),
        );
    }

    fn headers(&self, range: Option<&str>) -> http::HeaderMap {
        let mut h = http::HeaderMap::new();
        if let Ok(v) = http::HeaderValue::try_from(self.node.as_str()) {
            h.insert(NODE_HEADER, v);
        }
        if let Some(v) = range.and_then(|r| http::HeaderValue::try_from(r).ok()) {
            h.insert(http::header::RANGE, v);
        }
        h
    }

    /// A blob from `peer`, from `range` on when there is one, its body
    /// left open ([`Http::open`]).
    pub async fn blob(
        &self,
        peer: &str,
        repository: &str,
        digest: &str,
        range: Option<&str>,
    ) -> Result<(Answer, Option<Open>), Transport> {
        let uri: http::Uri = format!("{peer}/v2/{repository}/blobs/{digest}")
            .parse()
            .map_err(|_| Transport::Connect(format!("{peer}: not a URL")))?;
        self.http
            .open(http::Method::GET, uri, &self.headers(range), PEER_STALL)
            .await
    }

    /// A registry client for the peers (as registries, over plain HTTP,
    /// with no credential): their manifests and blobs by digest.
    pub fn registries(&self) -> crate::registry::client::Registries {
        let hosts = self
            .list()
            .into_iter()
            .filter_map(|(u, _)| u.strip_prefix("http://").map(str::to_string))
            .collect();
        crate::registry::client::Registries::new(
            self.http.clone(),
            crate::registry::auth::Credentials::default(),
            hosts,
        )
    }

    /// `path` of `peer` (a group's document), at most `max` bytes.
    pub async fn get(&self, peer: &str, path: &str, max: usize) -> Result<Answer, Transport> {
        let uri: http::Uri = format!("{peer}{path}")
            .parse()
            .map_err(|_| Transport::Connect(format!("{peer}: not a URL")))?;
        self.http
            .send(http::Method::GET, uri, &self.headers(None), PEER_STALL, max)
            .await
    }

    /// A file of `peer`'s chunk store or index (`path` under `/chunks/`),
    /// at most `max` bytes; `None` when it has none.
    pub async fn chunk_file(
        &self,
        peer: &str,
        path: &str,
        max: usize,
    ) -> Result<Option<bytes::Bytes>, Transport> {
        let uri: http::Uri = format!("{peer}/chunks/{path}")
            .parse()
            .map_err(|_| Transport::Connect(format!("{peer}: not a URL")))?;
        let a = self
            .http
            .send(http::Method::GET, uri, &self.headers(None), PEER_STALL, max)
            .await?;
        Ok(a.status.is_success().then_some(a.body))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peers_are_asked_configured_first_each_once_and_a_silent_one_rests() {
        let p = Peers::new("a", vec![base_url("10.0.0.2").unwrap()]).unwrap();
        assert!(!p.is_empty());
        p.named(&["10.0.0.3".into(), "10.0.0.2".into(), "not a/peer".into()]);
        let urls: Vec<String> = p.list().into_iter().map(|(u, _)| u).collect();
        assert_eq!(urls, ["http://10.0.0.2:7412", "http://10.0.0.3:7412"]);
        p.rest("http://10.0.0.3:7412");
        assert_eq!(
            p.list(),
            [
                ("http://10.0.0.2:7412".to_string(), false),
                ("http://10.0.0.3:7412".to_string(), true)
            ]
        );
        assert!(Peers::new("a", vec![]).unwrap().is_empty());
    }

    #[test]
    fn peers_found_by_mdns_come_last_and_go_when_gone_or_run_out() {
        let p = Peers::new("a", vec![base_url("10.0.0.2").unwrap()]).unwrap();
        let urls = |p: &Peers| -> Vec<String> { p.list().into_iter().map(|(u, _)| u).collect() };
        assert!(p.found("http://10.0.0.9:7000", 120), "new");
        assert!(!p.found("http://10.0.0.9:7000", 120), "refreshed");
        // A configured peer found too is asked once, in the config's place.
        assert!(p.found("http://10.0.0.2:7412", 120));
        assert_eq!(p.found_count(), 2);
        assert_eq!(urls(&p), ["http://10.0.0.2:7412", "http://10.0.0.9:7000"]);
        assert!(p.found("http://10.0.0.9:7000", 0), "gone");
        assert!(!p.found("http://10.0.0.9:7000", 0), "already gone");
        assert_eq!(urls(&p), ["http://10.0.0.2:7412"]);
        // Only found, then run out: none.
        let q = Peers::new("a", vec![]).unwrap();
        q.found("http://10.0.0.9:7000", 120);
        assert!(!q.is_empty());
        q.inner.lock().unwrap().found[0].1 = Instant::now();
        assert!(q.is_empty() && q.list().is_empty() && q.found_count() == 0);
        // At most MAX_PEERS are held.
        for i in 0..MAX_PEERS + 3 {
            q.found(&format!("http://10.0.1.{i}:7000"), 120);
        }
        assert_eq!(q.found_count(), MAX_PEERS);
    }
}
