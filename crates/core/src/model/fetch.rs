//! A blob fetched into a spool and resumed where it stopped, pure: what to
//! ask for given the bytes already synced ([`ask`]), and whether an answer
//! is the bytes asked for and where they go ([`take`]). The device's
//! spool does the I/O; these are the rules, each a row of a table test.
//!
//! The rules are HTTP's (RFC 9110 §14): a request for `bytes=<synced>-`
//! may be answered with those bytes (206, its `Content-Range` starting at
//! `synced`, its total the blob's size or `*`), or with the whole blob
//! (200: a server that does not do ranges), or refused (416: the server
//! has fewer bytes than the spool, which then cannot be trusted). Any
//! other range is not what was asked for; the spool is not written and
//! the next ask is for the whole blob. Integrity does not rest on this:
//! the whole blob is checked against its digest before it is used.

/// What to ask a server for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ask {
    /// Every byte of the blob: the spool holds nothing that can be kept
    /// (empty, or longer than the blob can be; it is emptied first).
    Whole,
    /// The bytes from this offset on (`Range: bytes=<n>-`): the spool
    /// holds the first `n`.
    From(u64),
    /// Nothing: the spool holds every byte (still to be checked against
    /// the digest).
    Done,
}

impl Ask {
    /// The offset the answer's bytes are expected at.
    pub fn offset(self) -> u64 {
        match self {
            Ask::Whole => 0,
            Ask::From(n) => n,
            Ask::Done => 0,
        }
    }

    /// The `Range` header to send, if any.
    pub fn range(self) -> Option<String> {
        match self {
            Ask::From(n) => Some(format!("bytes={n}-")),
            Ask::Whole | Ask::Done => None,
        }
    }
}

/// What to ask for a blob of `size` bytes whose spool holds `synced`.
pub fn ask(synced: u64, size: u64) -> Ask {
    if synced == size {
        Ask::Done
    } else if synced == 0 || synced > size {
        Ask::Whole
    } else {
        Ask::From(synced)
    }
}

/// Where an answer's bytes go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Take {
    /// Written from this offset on (the spool cut to it first).
    At(u64),
}

/// Why an answer's bytes are not taken; the spool is emptied and the next
/// ask is for the whole blob.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NotTaken {
    /// The server holds fewer bytes than the spool (416).
    #[error("the server has no bytes from {0} on (416): the spool is fetched again from the start")]
    Unsatisfiable(u64),
    /// A 206 whose range is not the one asked for.
    #[error("the server answered with bytes {got} where {asked} were asked")]
    WrongRange {
        /// `<from>-` as asked.
        asked: String,
        /// Its `Content-Range`, as sent (clipped).
        got: String,
    },
    /// A 206 for a blob of another size.
    #[error("the server says the blob has {said} bytes, its descriptor {size}")]
    WrongSize {
        /// The size the server said.
        said: u64,
        /// The size the descriptor says.
        size: u64,
    },
    /// Any other answer.
    #[error("the server answered {0}")]
    Status(u16),
}

/// Judges an answer to `asked` for a blob of `size` bytes: its status and
/// its `Content-Range` header.
pub fn take(
    asked: Ask,
    size: u64,
    status: u16,
    content_range: Option<&str>,
) -> Result<Take, NotTaken> {
    match status {
        200 => Ok(Take::At(0)),
        206 => {
            let from = asked.offset();
            let got = content_range.unwrap_or("").trim();
            let wrong = || NotTaken::WrongRange {
                asked: format!("{from}-"),
                got: crate::model::text::clip(got, 80).into_owned(),
            };
            let (start, end, total) = parse_content_range(got).ok_or_else(wrong)?;
            if let Some(total) = total {
                if total != size {
                    return Err(NotTaken::WrongSize { said: total, size });
                }
            }
            if start != from || end < start || end >= size {
                return Err(wrong());
            }
            Ok(Take::At(start))
        }
        416 => Err(NotTaken::Unsatisfiable(asked.offset())),
        s => Err(NotTaken::Status(s)),
    }
}

/// `bytes <start>-<end>/<total or *>` (RFC 9110 §14.4).
fn parse_content_range(s: &str) -> Option<(u64, u64, Option<u64>)> {
    let rest = s.strip_prefix("bytes ")?;
    let (range, total) = rest.split_once('/')?;
    let (a, b) = range.split_once('-')?;
    let num = |t: &str| {
        let t = t.trim();
        (!t.is_empty() && t.len() <= 20 && t.bytes().all(|c| c.is_ascii_digit()))
            .then(|| t.parse::<u64>().ok())
            .flatten()
    };
    let total = match total.trim() {
        "*" => None,
        t => Some(num(t)?),
    };
    Some((num(a)?, num(b)?, total))
}

/// Images the agent is fetching, as the status says them (`node.fetching`).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Fetching {
    /// Each image under way, by the reference it is fetched by.
    pub images: std::collections::BTreeMap<String, Progress>,
    /// The images fetched ahead of a group's coming rollout turn, when
    /// there are any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ahead: Option<Ahead>,
}

/// What the last image the agent fetched itself brought, and from where
/// (`node.fetched` in the status and the reports).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Brought {
    /// The reference it was fetched by.
    pub image: String,
    /// When it loaded, seconds since the epoch.
    pub at: u64,
    /// Bytes of blobs from its registry.
    pub registry: u64,
    /// Bytes of chunks (and their indexes) from the plane's host.
    pub chunks: u64,
    /// Bytes of layers rebuilt from chunks that were taken from layers
    /// held here.
    pub local: u64,
    /// Bytes of blobs and chunks from the site's peers (an agent before
    /// 0.7 says none).
    #[serde(default)]
    pub peers: u64,
    /// Its layers.
    pub layers: u64,
    /// Of them, those the engine had.
    pub present: u64,
    /// Of them, those rebuilt from chunks.
    pub rebuilt: u64,
}

impl Brought {
    /// `registry.example/app:2: 213 KiB over the wire (0 B from the
    /// registry, 213 KiB of chunks), 48.9 MiB from layers here; 1 of 3
    /// layers rebuilt, 2 were here`.
    pub fn line(&self) -> String {
        use crate::model::disk::human;
        let mut s = format!(
            "{}: {} over the wire ({} from the registry, {} of chunks)",
            self.image,
            human(self.registry.saturating_add(self.chunks)),
            human(self.registry),
            human(self.chunks)
        );
        if self.peers > 0 {
            s.push_str(&format!(", {} from the site's peers", human(self.peers)));
        }
        if self.local > 0 {
            s.push_str(&format!(", {} from layers here", human(self.local)));
        }
        s.push_str(&format!(
            "; {} of {} layers rebuilt, {} were here",
            self.rebuilt, self.layers, self.present
        ));
        s
    }
}

/// Images fetched ahead of a coming rollout turn: how many, and how many
/// of them are here.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Ahead {
    pub images: u64,
    pub here: u64,
}

/// How far an image's fetch is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Progress {
    /// Bytes of its missing layers here (in the spool), fetched now or
    /// before a restart.
    pub bytes: u64,
    /// Bytes of its missing layers in all (0 until its manifest is read).
    pub of: u64,
}

impl Fetching {
    /// Whether there is nothing to say.
    pub fn is_empty(&self) -> bool {
        self.images.is_empty() && self.ahead.is_none()
    }

    /// `2 images, 41 MiB of 96 MiB; ahead of a rollout turn, 1/3 images here`.
    pub fn line(&self) -> Option<String> {
        use crate::model::disk::human;
        let mut parts = Vec::new();
        if !self.images.is_empty() {
            let (bytes, of) = self.images.values().fold((0u64, 0u64), |(b, o), p| {
                (b.saturating_add(p.bytes), o.saturating_add(p.of))
            });
            let n = self.images.len();
            let s = if n == 1 { "" } else { "s" };
            parts.push(format!("{n} image{s}, {} of {}", human(bytes), human(of)));
        }
        if let Some(a) = self.ahead {
            let s = if a.images == 1 { "" } else { "s" };
            parts.push(format!(
                "ahead of a rollout turn, {}/{} image{s} here",
                a.here, a.images
            ));
        }
        (!parts.is_empty()).then(|| parts.join("; "))
    }
}

/// Who fetches an image's blobs (`[images] fetch`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Puller {
    /// The agent, into its spool, resumed where a link dropped; the
    /// engine's own pull when the agent cannot (a registry only the
    /// engine's mirror serves, an engine that does not load archives).
    #[default]
    Agent,
    /// The engine's own pull, whole, as before.
    Engine,
}

/// A spooled blob no pull has touched for this long, seconds, is
/// collected (a fetch that is no longer wanted: a reverted rollout, a
/// module removed); one under way is never.
pub const SPOOL_KEEP: u64 = 7 * 24 * 3600;

/// Whether a spool, holding `spooled` bytes already, has room for `more`
/// on a filesystem of `space`: what stays free must cover the store's
/// reserve ([`crate::model::disk::store_reserve`]), so the spool never
/// takes the room intentions are written in.
pub fn spool_fits(more: u64, space: crate::model::disk::Space) -> bool {
    space.free.saturating_sub(more) >= crate::model::disk::store_reserve(space.total)
}

/// How often a fetch makes its spool durable: after this many bytes since
/// the last time (and at its end). A power cut loses at most this much.
pub const SYNC_EVERY: u64 = 1 << 20;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_spool_leaves_the_store_its_reserve() {
        use crate::model::disk::{MIB, Space};
        let gib = 1024 * MIB;
        for (more, total, free, fits) in [
            (100 * MIB, 16 * gib, gib, true),
            // 64 MiB must stay free on a large filesystem.
            (gib - 64 * MIB, 16 * gib, gib, true),
            (gib - 64 * MIB + 1, 16 * gib, gib, false),
            // 5 % of a small one.
            (100 * MIB - 5 * MIB, 100 * MIB, 100 * MIB, true),
            (100 * MIB - 5 * MIB + 1, 100 * MIB, 100 * MIB, false),
            (1, 16 * gib, 0, false),
        ] {
            assert_eq!(
                spool_fits(more, Space { total, free }),
                fits,
                "{more} {total} {free}"
            );
        }
    }

    #[test]
    fn progress_reads_as_one_line() {
        let mut f = Fetching::default();
        assert_eq!(f.line(), None);
        f.images.insert(
            "a:1".into(),
            Progress {
                bytes: 41 << 20,
                of: 60 << 20,
            },
        );
        assert_eq!(f.line().unwrap(), "1 image, 41.0 MiB of 60.0 MiB");
        f.images.insert(
            "b:1".into(),
            Progress {
                bytes: 0,
                of: 36 << 20,
            },
        );
        assert_eq!(f.line().unwrap(), "2 images, 41.0 MiB of 96.0 MiB");
        f.ahead = Some(Ahead { images: 3, here: 1 });
        assert_eq!(
            f.line().unwrap(),
            "2 images, 41.0 MiB of 96.0 MiB; ahead of a rollout turn, 1/3 images here"
        );
        f.images.clear();
        f.ahead = Some(Ahead { images: 1, here: 1 });
        assert_eq!(f.line().unwrap(), "ahead of a rollout turn, 1/1 image here");
        assert!(!f.is_empty());
    }

    #[test]
    fn what_is_asked_for_from_what_the_spool_holds() {
        for (synced, size, want) in [
            (0, 100, Ask::Whole),
            (1, 100, Ask::From(1)),
            (99, 100, Ask::From(99)),
            (100, 100, Ask::Done),
            (101, 100, Ask::Whole),
            (0, 0, Ask::Done),
        ] {
            assert_eq!(ask(synced, size), want, "{synced} of {size}");
        }
        assert_eq!(Ask::From(7).range().as_deref(), Some("bytes=7-"));
        assert_eq!(Ask::Whole.range(), None);
    }

    #[test]
    fn an_answer_is_taken_only_where_its_bytes_belong() {
        use NotTaken::*;
        let wr = |a: &str, g: &str| WrongRange {
            asked: a.into(),
            got: g.into(),
        };
        for (asked, status, range, want) in [
            // A server without ranges sends it all: written from the start.
            (Ask::From(40), 200, None, Ok(Take::At(0))),
            (Ask::Whole, 200, None, Ok(Take::At(0))),
            (
                Ask::From(40),
                206,
                Some("bytes 40-99/100"),
                Ok(Take::At(40)),
            ),
            (Ask::From(40), 206, Some("bytes 40-99/*"), Ok(Take::At(40))),
            // Fewer bytes than asked is still where they belong.
            (
                Ask::From(40),
                206,
                Some("bytes 40-59/100"),
                Ok(Take::At(40)),
            ),
            (
                Ask::From(40),
                206,
                Some("bytes 0-99/100"),
                Err(wr("40-", "bytes 0-99/100")),
            ),
            (
                Ask::From(40),
                206,
                Some("bytes 41-99/100"),
                Err(wr("40-", "bytes 41-99/100")),
            ),
            (
                Ask::From(40),
                206,
                Some("bytes 40-100/100"),
                Err(wr("40-", "bytes 40-100/100")),
            ),
            (
                Ask::From(40),
                206,
                Some("bytes 40-39/100"),
                Err(wr("40-", "bytes 40-39/100")),
            ),
            (
                Ask::From(40),
                206,
                Some("bytes 40-99/120"),
                Err(WrongSize {
                    said: 120,
                    size: 100,
                }),
            ),
            (Ask::From(40), 206, None, Err(wr("40-", ""))),
            (
                Ask::From(40),
                206,
                Some("bytes=40-99/100"),
                Err(wr("40-", "bytes=40-99/100")),
            ),
            (
                Ask::From(40),
                206,
                Some("bytes -1-99/100"),
                Err(wr("40-", "bytes -1-99/100")),
            ),
            (
                Ask::From(40),
                206,
                Some("bytes 40-99/+100"),
                Err(wr("40-", "bytes 40-99/+100")),
            ),
            (
                Ask::From(40),
                206,
                Some("bytes 40-99999999999999999999999/100"),
                Err(wr("40-", "bytes 40-99999999999999999999999/100")),
            ),
            (Ask::Whole, 206, Some("bytes 0-99/100"), Ok(Take::At(0))),
            (Ask::From(40), 416, None, Err(Unsatisfiable(40))),
            (Ask::From(40), 500, None, Err(Status(500))),
        ] {
            assert_eq!(
                take(asked, 100, status, range),
                want,
                "{asked:?} {status} {range:?}"
            );
        }
    }
}
