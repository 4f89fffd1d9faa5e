//! A site's peers, pure: the devices on one LAN that serve each other the
//! blobs and chunks they fetched, so that each crosses the WAN once.
//! Which addresses a device serves ([`Cidr`]), how fast ([`Bucket`]), what
//! a peer may be asked for ([`Asked`]: blobs, chunks, and the signed group
//! documents it holds, relayed), and where a blob is asked next
//! ([`Sources`]). The device's listener and client do the I/O; these are
//! the rules, each a row of a table test.
//!
//! Nothing rests on a peer: a blob is checked against its digest, a chunk
//! against its ID, a layer against its diff ID, an image against its
//! config's digest, whoever sent the bytes. A peer that lies, or that is
//! not there, costs one more source.

use std::net::IpAddr;

/// The port a device serves its peers on unless told otherwise.
pub const DEFAULT_PORT: u16 = 7412;
/// The rate a device serves its peers at, in all, unless told otherwise
/// (bytes per second).
pub const DEFAULT_RATE: u64 = 4 << 20;
/// The most peers a device asks.
pub const MAX_PEERS: usize = 32;
/// How long a peer that did not answer is left alone by every pull,
/// seconds.
pub const PEER_REST: u64 = 60;
/// How long a blob or chunk stays in the spool to be served after the
/// engine loaded it, unless told otherwise, seconds: a rollout's fetches
/// ahead on one site start within a poll interval of each other.
pub const DEFAULT_KEEP: u64 = 3 * 24 * 3600;

/// A peer's address as a config or a document gives it (`host`,
/// `host:port`, `[v6]:port`, a bare IPv6 address), as the base URL it is
/// asked at (`http://host:port`, the port [`DEFAULT_PORT`] unless
/// given); the error says what is wrong.
pub fn peer_url(peer: &str) -> Result<String, String> {
    let p = peer.trim();
    let bad = |why: &str| Err(format!("{p:?}: {why}"));
    if p.is_empty()
        || p.bytes()
            .any(|b| !(b.is_ascii_alphanumeric() || b".-:[]".contains(&b)))
    {
        return bad("a peer is a host or host:port (192.168.1.12:7412)");
    }
    let (host, port) = if let Some(rest) = p.strip_prefix('[') {
        let (h, after) = rest
            .split_once(']')
            .ok_or_else(|| format!("{p:?}: an IPv6 address in brackets is not closed"))?;
        let port = match after {
            "" => None,
            a => Some(
                a.strip_prefix(':')
                    .ok_or_else(|| format!("{p:?}: not host:port"))?,
            ),
        };
        (format!("[{h}]"), port)
    } else if p.matches(':').count() > 1 {
        (format!("[{p}]"), None)
    } else {
        match p.split_once(':') {
            Some((h, port)) => (h.to_string(), Some(port)),
            None => (p.to_string(), None),
        }
    };
    let inner = host.trim_start_matches('[').trim_end_matches(']');
    if inner.is_empty() || (host.starts_with('[') && inner.parse::<std::net::Ipv6Addr>().is_err()) {
        return bad("not a host");
    }
    let port = match port {
        None => DEFAULT_PORT,
        Some(n) => match n.parse::<u16>() {
            Ok(n) if n > 0 => n,
            _ => return bad("its port is not a port number"),
        },
    };
    Ok(format!("http://{host}:{port}"))
}

/// A network a device serves: `192.168.1.0/24`, `10.0.0.7` (one
/// address), `fd00::/8`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cidr {
    net: IpAddr,
    bits: u8,
}

impl std::str::FromStr for Cidr {
    type Err = String;

    fn from_str(s: &str) -> Result<Cidr, String> {
        let (addr, bits) = match s.split_once('/') {
            Some((a, b)) => (a, Some(b)),
            None => (s, None),
        };
        let net: IpAddr = addr
            .trim()
            .parse()
            .map_err(|_| format!("{s:?}: not an IP address or network (192.168.1.0/24)"))?;
        let max = if net.is_ipv4() { 32 } else { 128 };
        let bits = match bits {
            None => max,
            Some(b) => b
                .parse::<u8>()
                .ok()
                .filter(|b| *b <= max)
                .ok_or_else(|| format!("{s:?}: the prefix length must be 0 to {max}"))?,
        };
        Ok(Cidr {
            net: mask(net, bits),
            bits,
        })
    }
}

impl std::fmt::Display for Cidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.net, self.bits)
    }
}

fn mask(ip: IpAddr, bits: u8) -> IpAddr {
    match ip {
        IpAddr::V4(a) => {
            let m = u32::MAX.checked_shl(32 - u32::from(bits)).unwrap_or(0);
            IpAddr::V4((u32::from(a) & m).into())
        }
        IpAddr::V6(a) => {
            let m = u128::MAX.checked_shl(128 - u32::from(bits)).unwrap_or(0);
            IpAddr::V6((u128::from(a) & m).into())
        }
    }
}

impl Cidr {
    /// Whether `ip` is in it (an IPv4 address seen through an IPv6
    /// socket, `::ffff:a.b.c.d`, as the IPv4 address).
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        ip.is_ipv4() == self.net.is_ipv4() && mask(ip, self.bits) == self.net
    }
}

/// Whether any of `allowed` holds `ip`.
pub fn allowed(allowed: &[Cidr], ip: IpAddr) -> bool {
    allowed.iter().any(|c| c.contains(ip))
}

/// A token bucket: what a device sends its peers, in all, is held to
/// `rate` bytes a second, with at most `burst` sent at once.
#[derive(Clone, Debug, PartialEq)]
pub struct Bucket {
    rate: u64,
    burst: u64,
    /// Bytes that may go now; below zero, owed.
    tokens: i128,
    /// When `tokens` was counted, nanoseconds on any monotonic clock.
    at: u64,
}

impl Bucket {
    /// A full bucket at `now`.
    pub fn new(rate: u64, burst: u64, now: u64) -> Bucket {
        let rate = rate.max(1);
        Bucket {
            rate,
            burst,
            tokens: i128::from(burst),
            at: now,
        }
    }

    /// Takes `n` bytes at `now`: how long, nanoseconds, the sender waits
    /// before sending them (0: at once).
    pub fn take(&mut self, now: u64, n: u64) -> u64 {
        let since = now.saturating_sub(self.at);
        self.at = self.at.max(now);
        let refill = i128::from(since) * i128::from(self.rate) / 1_000_000_000;
        self.tokens = (self.tokens + refill).min(i128::from(self.burst));
        self.tokens -= i128::from(n);
        if self.tokens >= 0 {
            0
        } else {
            let owed = -self.tokens;
            u64::try_from(owed * 1_000_000_000 / i128::from(self.rate)).unwrap_or(u64::MAX)
        }
    }
}

/// What a peer is asked for: the paths of an OCI registry's blobs, of a
/// casync chunk store and of a group's document, as a registry and the
/// plane's static host lay them out, so any registry client or `casync`
/// reads a peer too. Anything else is not served.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Asked {
    /// `/v2/`: the registry API's version check.
    Version,
    /// `/v2/<name>/blobs/sha256:<hex>`: a blob, by its digest's hex.
    Blob(String),
    /// `/v2/<name>/manifests/sha256:<hex>`: a manifest (or index), by its
    /// digest's hex (never by tag: what a tag names is its registry's
    /// word).
    Manifest(String),
    /// `/chunks/store.castr/<4 hex>/<hex>.cacnk`: a chunk, by its ID's
    /// hex.
    Chunk(String),
    /// `/chunks/<hex>.caibx`: a layer's chunk index, by its diff ID's hex.
    Index(String),
    /// `/groups/<group>/desired.json`: a group's signed document, as the
    /// plane's host lays it out (relayed: it is judged as the plane's).
    Group(crate::model::fleet::GroupName),
}

fn is_hex64(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

impl Asked {
    /// The thing a request's path names, if it names one.
    pub fn parse(path: &str) -> Option<Asked> {
        if path == "/v2/" || path == "/v2" {
            return Some(Asked::Version);
        }
        if let Some(rest) = path.strip_prefix("/v2/") {
            let (name, digest, manifest) = match rest.rsplit_once("/blobs/") {
                Some((n, d)) => (n, d, false),
                None => {
                    let (n, d) = rest.rsplit_once("/manifests/")?;
                    (n, d, true)
                }
            };
            let name_ok = !name.is_empty()
                && name.split('/').all(|p| {
                    !p.is_empty()
                        && p != "."
                        && p != ".."
                        && p.bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b"._-:".contains(&b))
                });
            let hex = digest.strip_prefix("sha256:")?;
            return (name_ok && is_hex64(hex)).then(|| {
                if manifest {
                    Asked::Manifest(hex.to_string())
                } else {
                    Asked::Blob(hex.to_string())
                }
            });
        }
        if let Some(rest) = path.strip_prefix("/groups/") {
            let name = rest.strip_suffix("/desired.json")?;
            return crate::model::fleet::GroupName::try_from(name)
                .ok()
                .map(Asked::Group);
        }
        let rest = path.strip_prefix("/chunks/")?;
        if let Some(store) = rest.strip_prefix("store.castr/") {
            let (dir, file) = store.split_once('/')?;
            let hex = file.strip_suffix(".cacnk")?;
            return (is_hex64(hex) && hex.get(..4) == Some(dir)).then(|| Asked::Chunk(hex.into()));
        }
        let hex = rest.strip_suffix(".caibx")?;
        is_hex64(hex).then(|| Asked::Index(hex.to_string()))
    }
}

/// Where a blob's bytes are asked next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// The peer at this place in the list.
    Peer(usize),
    /// The registry (or the plane's host, for chunks).
    Origin,
}

/// How many times a peer may stop part-way through one blob before it
/// is asked no more for it.
pub const MAX_STOPS: u8 = 3;

/// What a peer did when asked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Said {
    /// It has not got it (404), or refused.
    Missing,
    /// It did not answer, or stopped answering with nothing new.
    Gone,
    /// What it sent was not what was asked (a range not asked for, bytes
    /// that are not the digest).
    Wrong,
    /// It sent some bytes, then stopped: it is asked again, up to
    /// [`MAX_STOPS`] times.
    Stopped,
}

/// The sources of one blob's fetch: the peers in their order, each
/// asked until it has nothing more to give, then the origin. A blob whose
/// bytes turn out not to be its digest is fetched again from the start:
/// when one peer alone sent them, from the other sources; when they came
/// from more than one (or some were in the spool already), from the
/// origin alone, since which source lied cannot be told.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sources {
    /// Per peer: whether it is still asked.
    asked: Vec<bool>,
    /// Per peer: how many times it stopped part-way.
    stops: Vec<u8>,
    /// Who gave the bytes in the spool: peers by place, `None` the
    /// origin or an earlier fetch.
    gave: std::collections::BTreeSet<Option<usize>>,
}

impl Sources {
    /// `peers` peers, those not `resting` asked first; `spooled`: the
    /// spool holds bytes of an earlier fetch.
    pub fn new(peers: usize, resting: &[bool], spooled: bool) -> Sources {
        Sources {
            asked: (0..peers)
                .map(|i| !resting.get(i).copied().unwrap_or(false))
                .collect(),
            stops: vec![0; peers],
            gave: if spooled {
                std::collections::BTreeSet::from([None])
            } else {
                std::collections::BTreeSet::new()
            },
        }
    }

    /// Where to ask next.
    pub fn next(&self) -> Source {
        self.asked
            .iter()
            .position(|a| *a)
            .map_or(Source::Origin, Source::Peer)
    }

    /// Notes what `peer` did.
    pub fn said(&mut self, peer: usize, said: Said) {
        let off = match said {
            Said::Stopped => {
                let stops = self.stops.get_mut(peer).map_or(MAX_STOPS, |s| {
                    *s = s.saturating_add(1);
                    *s
                });
                stops >= MAX_STOPS
            }
            Said::Missing | Said::Gone | Said::Wrong => true,
        };
        if off && let Some(a) = self.asked.get_mut(peer) {
            *a = false;
        }
    }

    /// Notes that `source` gave bytes to the spool.
    pub fn gave(&mut self, source: Source) {
        self.gave.insert(match source {
            Source::Peer(p) => Some(p),
            Source::Origin => None,
        });
    }

    /// Whether bytes from a peer are in the spool.
    pub fn from_peers(&self) -> bool {
        self.gave.iter().any(Option::is_some)
    }

    /// The blob's bytes were not its digest (the spool is emptied): the
    /// one peer that sent them all is asked no more, or, when they came
    /// from more than one source, no peer is.
    pub fn wrong(&mut self) {
        let mut gave = std::mem::take(&mut self.gave).into_iter();
        match (gave.next(), gave.next()) {
            (Some(Some(p)), None) => {
                if let Some(a) = self.asked.get_mut(p) {
                    *a = false;
                }
            }
            _ => self.asked.iter_mut().for_each(|a| *a = false),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peer_is_a_host_and_a_port() {
        // (as written, base URL or what the error says)
        let table: &[(&str, Result<&str, &str>)] = &[
            ("192.168.1.12", Ok("http://192.168.1.12:7412")),
            ("192.168.1.12:8000", Ok("http://192.168.1.12:8000")),
            ("till-2.local", Ok("http://till-2.local:7412")),
            ("fd00::12", Ok("http://[fd00::12]:7412")),
            ("[fd00::12]:80", Ok("http://[fd00::12]:80")),
            ("[fd00::12]", Ok("http://[fd00::12]:7412")),
            ("http://192.168.1.12", Err("a host or host:port")),
            ("192.168.1.12:0", Err("not a port number")),
            ("192.168.1.12:http", Err("not a port number")),
            ("[fd00::12", Err("not closed")),
            ("[shop]:80", Err("not a host")),
            ("user@host", Err("a host or host:port")),
            ("", Err("a host or host:port")),
        ];
        for (peer, want) in table {
            match (peer_url(peer), want) {
                (Ok(u), Ok(w)) => assert_eq!(u, *w, "{peer}"),
                (Err(e), Err(w)) => assert!(e.contains(w), "{peer}: {e}"),
                (got, _) => panic!("{peer}: {got:?}"),
            }
        }
    }

    #[test]
    fn networks_parse_and_hold_their_addresses() {
        // (network, address, held)
        let table: &[(&str, &str, bool)] = &[
            ("192.168.1.0/24", "192.168.1.77", true),
            ("192.168.1.0/24", "192.168.2.1", false),
            ("192.168.1.9/24", "192.168.1.200", true),
            ("10.0.0.7", "10.0.0.7", true),
            ("10.0.0.7", "10.0.0.8", false),
            ("0.0.0.0/0", "203.0.113.5", true),
            ("192.168.1.0/24", "::ffff:192.168.1.3", true),
            ("192.168.1.0/24", "fd00::1", false),
            ("fd00::/8", "fd12::1", true),
            ("fd00::/8", "fe80::1", false),
            ("fd00::/8", "10.0.0.1", false),
            ("127.0.0.1/32", "127.0.0.1", true),
        ];
        for (net, ip, held) in table {
            let c: Cidr = net.parse().unwrap();
            assert_eq!(c.contains(ip.parse().unwrap()), *held, "{net} {ip}");
        }
        assert_eq!(
            "192.168.1.9/24".parse::<Cidr>().unwrap().to_string(),
            "192.168.1.0/24"
        );
        // (text, the error names)
        let bad: &[(&str, &str)] = &[
            ("192.168.1.0/33", "0 to 32"),
            ("fd00::/129", "0 to 128"),
            ("shop-lan", "not an IP address"),
            ("10.0.0.0/x", "prefix length"),
            ("", "not an IP address"),
        ];
        for (text, says) in bad {
            let e = text.parse::<Cidr>().unwrap_err();
            assert!(e.contains(says), "{text}: {e}");
        }
        let nets: Vec<Cidr> = ["10.0.0.0/8", "192.168.0.0/16"]
            .iter()
            .map(|s| s.parse().unwrap())
            .collect();
        assert!(allowed(&nets, "192.168.4.4".parse().unwrap()));
        assert!(!allowed(&nets, "172.16.0.1".parse().unwrap()));
        assert!(!allowed(&[], "10.0.0.1".parse().unwrap()));
    }

    #[test]
    fn the_bucket_holds_what_is_sent_to_its_rate() {
        const S: u64 = 1_000_000_000;
        let mut b = Bucket::new(1000, 500, 0);
        // (at, bytes, wait)
        let table: &[(u64, u64, u64)] = &[
            (0, 500, 0),           // the burst, at once
            (0, 100, S / 10),      // owed 100 at 1000/s
            (S / 10, 100, S / 10), // paid back, owed 100 again
            (S, 100, 0),           // refilled (to the burst at most)
            (S, 400, 0),
            (S, 1000, S), // more than a burst: a second's wait
            (10 * S, 0, 0),
        ];
        for (k, (at, n, wait)) in table.iter().enumerate() {
            assert_eq!(b.take(*at, *n), *wait, "row {k}");
        }
        // A clock that goes back refills nothing.
        let mut b = Bucket::new(1000, 100, 5 * S);
        assert_eq!(b.take(5 * S, 100), 0);
        assert_eq!(b.take(S, 100), S / 10);
    }

    #[test]
    fn only_blobs_chunks_indexes_and_group_documents_are_asked_of_a_peer() {
        let h = "ab".repeat(32);
        // (path, what it names)
        let table: Vec<(String, Option<Asked>)> = vec![
            ("/v2/".into(), Some(Asked::Version)),
            (
                format!("/v2/app/blobs/sha256:{h}"),
                Some(Asked::Blob(h.clone())),
            ),
            (
                format!("/v2/fleet/sub/app/blobs/sha256:{h}"),
                Some(Asked::Blob(h.clone())),
            ),
            (format!("/v2/../blobs/sha256:{h}"), None),
            (format!("/v2/a//b/blobs/sha256:{h}"), None),
            (format!("/v2/app/blobs/sha512:{h}"), None),
            (format!("/v2/app/blobs/sha256:{}", &h[..63]), None),
            (format!("/v2/app/blobs/sha256:{}", h.to_uppercase()), None),
            (
                format!("/v2/app/manifests/sha256:{h}"),
                Some(Asked::Manifest(h.clone())),
            ),
            ("/v2/app/manifests/latest".into(), None),
            (
                format!("/chunks/store.castr/abab/{h}.cacnk"),
                Some(Asked::Chunk(h.clone())),
            ),
            (format!("/chunks/store.castr/abac/{h}.cacnk"), None),
            (format!("/chunks/store.castr/abab/{h}"), None),
            (format!("/chunks/{h}.caibx"), Some(Asked::Index(h.clone()))),
            (format!("/chunks/../{h}.caibx"), None),
            (
                "/groups/eu/desired.json".into(),
                Some(Asked::Group(
                    crate::model::fleet::GroupName::try_from("eu").unwrap(),
                )),
            ),
            ("/groups/../desired.json".into(), None),
            ("/groups/eu/status.json".into(), None),
            ("/nodes/edge-1/desired.json".into(), None),
            ("/".into(), None),
        ];
        for (path, want) in table {
            assert_eq!(Asked::parse(&path), want, "{path}");
        }
    }

    #[test]
    fn a_blob_is_asked_of_each_peer_then_of_the_origin() {
        use Said::*;
        use Source::*;
        // (peers, resting, what happens, where asked next after each)
        type Step = Option<(usize, Said)>;
        type Row<'a> = (usize, &'a [bool], &'a [Step], &'a [Source]);
        let table: &[Row] = &[
            (0, &[], &[None], &[Origin]),
            (2, &[], &[None], &[Peer(0)]),
            (2, &[true, false], &[None], &[Peer(1)]),
            (2, &[true, true], &[None], &[Origin]),
            (
                3,
                &[],
                &[Some((0, Missing)), Some((1, Gone)), Some((2, Wrong))],
                &[Peer(1), Peer(2), Origin],
            ),
            // A peer that stopped part-way is asked again, from where it
            // stopped.
            (
                2,
                &[],
                &[Some((0, Stopped)), Some((0, Gone))],
                &[Peer(0), Peer(1)],
            ),
            (
                2,
                &[],
                &[Some((0, Stopped)), Some((0, Stopped)), Some((0, Stopped))],
                &[Peer(0), Peer(0), Peer(1)],
            ),
        ];
        for (k, (peers, resting, steps, want)) in table.iter().enumerate() {
            let mut s = Sources::new(*peers, resting, false);
            for (step, want) in steps.iter().zip(want.iter()) {
                if let Some((p, said)) = step {
                    s.said(*p, *said);
                }
                assert_eq!(s.next(), *want, "row {k}");
            }
        }
        // Bytes that are not the digest. (bytes already spooled, who gave
        // bytes, where asked next)
        let table: &[(bool, &[Source], Source)] = &[
            // One peer sent them all: the next peer.
            (false, &[Peer(0)], Peer(1)),
            // Two peers: which lied is not known; the origin.
            (false, &[Peer(0), Peer(1)], Origin),
            // A peer and the origin: the origin.
            (false, &[Peer(0), Origin], Origin),
            // A peer resumed what was spooled: the origin.
            (true, &[Peer(0)], Origin),
            // The origin alone: the origin (its own count of wrong tries
            // bounds it).
            (false, &[Origin], Origin),
        ];
        for (spooled, gave, want) in table {
            let mut s = Sources::new(3, &[], *spooled);
            if gave.contains(&Origin) {
                s.said(0, Gone);
                s.said(1, Gone);
                s.said(2, Gone);
            }
            for g in *gave {
                s.gave(*g);
            }
            assert_eq!(
                s.from_peers(),
                gave.iter().any(|g| *g != Origin),
                "{gave:?}"
            );
            s.wrong();
            assert_eq!(s.next(), *want, "{spooled} {gave:?}");
            assert!(!s.from_peers());
        }
    }
}
