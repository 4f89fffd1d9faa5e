//! Content-defined chunks of a layer, in casync's format: the chunker
//! (casync's buzhash over a 48-byte window, its table and its cut test,
//! so a layer cut here is cut where `casync make` cuts it), the blob
//! index (`.caibx`: the chunks' ends and IDs), the chunk store's paths
//! (`<4 hex>/<64 hex>.cacnk`), and the rule that says which of a layer's
//! chunks are fetched and whether rebuilding it is worth it against a
//! plain pull of its blob.
//!
//! A chunk's ID is the SHA-512/256 of its bytes (casync's default); an
//! index may say SHA-256 instead, and is read either way. The layer a
//! device rebuilds is checked against its diff ID, so an index or a store
//! that lies costs a pull, never a wrong layer.

use std::collections::BTreeMap;

/// casync's window: the bytes the rolling hash covers.
pub const WINDOW: usize = 48;

/// An index's object type (`CA_FORMAT_INDEX`).
const FORMAT_INDEX: u64 = 0x96824d9c7b129ff9;
/// The table's object type (`CA_FORMAT_TABLE`).
const FORMAT_TABLE: u64 = 0xe75b9e112f17417d;
/// The table's end marker (`CA_FORMAT_TABLE_TAIL_MARKER`).
const TABLE_TAIL_MARKER: u64 = 0x4b4f050e5549ecd1;
/// The feature flag that says the IDs are SHA-512/256 (`CA_FORMAT_SHA512_256`).
pub const FLAG_SHA512_256: u64 = 0x2000000000000000;
/// The flags `casync make` writes in a blob's index by default (its
/// exclusion flags and SHA-512/256), which this writes too.
pub const DEFAULT_FLAGS: u64 = 0xb000000000000000;
/// The smallest and largest chunk casync allows (`CA_CHUNK_SIZE_LIMIT_*`).
const LIMIT_MIN: u64 = 1;
const LIMIT_MAX: u64 = 128 << 20;

/// casync's buzhash table.
const TABLE: [u32; 256] = [
    0x458be752, 0xc10748cc, 0xfbbcdbb8, 0x6ded5b68, 0xb10a82b5, 0x20d75648, 0xdfc5665f, 0xa8428801,
    0x7ebf5191, 0x841135c7, 0x65cc53b3, 0x280a597c, 0x16f60255, 0xc78cbc3e, 0x294415f5, 0xb938d494,
    0xec85c4e6, 0xb7d33edc, 0xe549b544, 0xfdeda5aa, 0x882bf287, 0x3116737c, 0x05569956, 0xe8cc1f68,
    0x0806ac5e, 0x22a14443, 0x15297e10, 0x50d090e7, 0x4ba60f6f, 0xefd9f1a7, 0x5c5c885c, 0x82482f93,
    0x9bfd7c64, 0x0b3e7276, 0xf2688e77, 0x8fad8abc, 0xb0509568, 0xf1ada29f, 0xa53efdfe, 0xcb2b1d00,
    0xf2a9e986, 0x6463432b, 0x95094051, 0x5a223ad2, 0x9be8401b, 0x61e579cb, 0x1a556a14, 0x5840fdc2,
    0x9261ddf6, 0xcde002bb, 0x52432bb0, 0xbf17373e, 0x7b7c222f, 0x2955ed16, 0x9f10ca59, 0xe840c4c9,
    0xccabd806, 0x14543f34, 0x1462417a, 0x0d4a1f9c, 0x087ed925, 0xd7f8f24c, 0x7338c425, 0xcf86c8f5,
    0xb19165cd, 0x9891c393, 0x325384ac, 0x0308459d, 0x86141d7e, 0xc922116a, 0xe2ffa6b6, 0x53f52aed,
    0x2cd86197, 0xf5b9f498, 0xbf319c8f, 0xe0411fae, 0x977eb18c, 0xd8770976, 0x9833466a, 0xc674df7f,
    0x8c297d45, 0x8ca48d26, 0xc49ed8e2, 0x7344f874, 0x556f79c7, 0x6b25eaed, 0xa03e2b42, 0xf68f66a4,
    0x8e8b09a2, 0xf2e0e62a, 0x0d3a9806, 0x9729e493, 0x8c72b0fc, 0x160b94f6, 0x450e4d3d, 0x7a320e85,
    0xbef8f0e1, 0x21d73653, 0x4e3d977a, 0x1e7b3929, 0x1cc6c719, 0xbe478d53, 0x8d752809, 0xe6d8c2c6,
    0x275f0892, 0xc8acc273, 0x4cc21580, 0xecc4a617, 0xf5f7be70, 0xe795248a, 0x375a2fe9, 0x425570b6,
    0x8898dcf8, 0xdc2d97c4, 0x0106114b, 0x364dc22f, 0x1e0cad1f, 0xbe63803c, 0x5f69fac2, 0x4d5afa6f,
    0x1bc0dfb5, 0xfb273589, 0x0ea47f7b, 0x3c1c2b50, 0x21b2a932, 0x6b1223fd, 0x2fe706a8, 0xf9bd6ce2,
    0xa268e64e, 0xe987f486, 0x3eacf563, 0x1ca2018c, 0x65e18228, 0x2207360a, 0x57cf1715, 0x34c37d2b,
    0x1f8f3cde, 0x93b657cf, 0x31a019fd, 0xe69eb729, 0x8bca7b9b, 0x4c9d5bed, 0x277ebeaf, 0xe0d8f8ae,
    0xd150821c, 0x31381871, 0xafc3f1b0, 0x927db328, 0xe95effac, 0x305a47bd, 0x426ba35b, 0x1233af3f,
    0x686a5b83, 0x50e072e5, 0xd9d3bb2a, 0x8befc475, 0x487f0de6, 0xc88dff89, 0xbd664d5e, 0x971b5d18,
    0x63b14847, 0xd7d3c1ce, 0x7f583cf3, 0x72cbcb09, 0xc0d0a81c, 0x7fa3429b, 0xe9158a1b, 0x225ea19a,
    0xd8ca9ea3, 0xc763b282, 0xbb0c6341, 0x020b8293, 0xd4cd299d, 0x58cfa7f8, 0x91b4ee53, 0x37e4d140,
    0x95ec764c, 0x30f76b06, 0x5ee68d24, 0x679c8661, 0xa41979c2, 0xf2b61284, 0x4fac1475, 0x0adb49f9,
    0x19727a23, 0x15a7e374, 0xc43a18d5, 0x3fb1aa73, 0x342fc615, 0x924c0793, 0xbee2d7f0, 0x8a279de9,
    0x4aa2d70c, 0xe24dd37f, 0xbe862c0b, 0x177c22c2, 0x5388e5ee, 0xcd8a7510, 0xf901b4fd, 0xdbc13dbc,
    0x6c0bae5b, 0x64efe8c7, 0x48b02079, 0x80331a49, 0xca3d8ae6, 0xf3546190, 0xfed7108b, 0xc49b941b,
    0x32baf4a9, 0xeb833a4a, 0x88a3f1a5, 0x3a91ce0a, 0x3cc27da1, 0x7112e684, 0x4a3096b1, 0x3794574c,
    0xa3c8b6f3, 0x1d213941, 0x6e0a2e00, 0x233479f1, 0x0f4cd82f, 0x6093edd2, 0x5d7d209e, 0x464fe319,
    0xd4dcac9e, 0x0db845cb, 0xfb5e4bc3, 0xe0256ce1, 0x09fb4ed1, 0x0914be1e, 0xa5bdb2c3, 0xc6eb57bb,
    0x30320350, 0x3f397e91, 0xa67791bc, 0x86bc0e2c, 0xefa0a7e2, 0xe9ff7543, 0xe733612c, 0xd185897b,
    0x329e5388, 0x91dd236b, 0x2ecb0d93, 0xf4d82a3d, 0x35b5c03f, 0xe4e606f0, 0x05b21843, 0x37b45964,
    0x5eff22f4, 0x6027f4cc, 0x77178b3c, 0xae507131, 0x7bf7cabc, 0xf9c18d66, 0x593ade65, 0xd95ddf11,
];

/// The chunk sizes: casync's `--chunk-size=MIN:AVG:MAX`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sizes {
    /// No cut before this many bytes.
    pub min: u64,
    /// The aimed average.
    pub avg: u64,
    /// A cut at this many bytes at the latest.
    pub max: u64,
}

impl Sizes {
    /// casync's default: 16 / 64 / 256 KiB.
    pub const DEFAULT: Sizes = Sizes {
        min: 16 << 10,
        avg: 64 << 10,
        max: 256 << 10,
    };

    /// The cut test's divisor: the average corrected as casync corrects
    /// it (chunks come out ~1.32 times the raw divisor), within min..max.
    fn discriminator(self) -> u32 {
        let avg = self.avg as f64;
        let d = (avg / (-1.42888852e-7 * avg + 1.33237515)) as u64;
        // Within min..=max, which an index's own sizes bound to u32 by
        // `Index::decode`'s checks.
        u32::try_from(d.clamp(self.min, self.max)).unwrap_or(u32::MAX)
    }

    /// Whether casync would accept these sizes (and the window fits
    /// under the smallest chunk, as with every size casync writes).
    fn valid(self) -> bool {
        (WINDOW as u64) < self.min
            && self.min <= self.avg
            && self.avg <= self.max
            && self.max <= LIMIT_MAX
            && self.min >= LIMIT_MIN
    }
}

/// Finds chunk ends in a stream of bytes, fed in any pieces.
#[derive(Clone, Debug)]
pub struct Cutter {
    sizes: Sizes,
    discriminator: u32,
    /// The current chunk's bytes so far.
    len: u64,
    h: u32,
    /// The last [`WINDOW`] bytes, at `len % WINDOW`.
    window: [u8; WINDOW],
}

impl Cutter {
    /// A cutter for these sizes.
    pub fn new(sizes: Sizes) -> Cutter {
        Cutter {
            sizes,
            discriminator: sizes.discriminator(),
            len: 0,
            h: 0,
            window: [0; WINDOW],
        }
    }

    /// Takes `data`; the offset in it just after the first cut, if there
    /// is one (the rest is fed again by the caller), else `None` (all of
    /// it belongs to the current chunk).
    pub fn feed(&mut self, data: &[u8]) -> Option<usize> {
        let (min, max, d) = (self.sizes.min, self.sizes.max, self.discriminator);
        let mut i = 0;
        // The bytes before the window's first full position are only
        // remembered: no cut comes before `min`.
        while i < data.len() && self.len + 1 < min {
            self.window[(self.len % WINDOW as u64) as usize] = data[i];
            self.len += 1;
            i += 1;
        }
        while i < data.len() {
            let b = data[i];
            let at = (self.len % WINDOW as u64) as usize;
            let leave = self.window[at];
            self.window[at] = b;
            self.len += 1;
            i += 1;
            if self.len == min {
                // The window's first hash: its bytes oldest first, each
                // rotated by its distance from the newest.
                let mut h = 0u32;
                for k in 0..WINDOW {
                    let byte = self.window[(at + 1 + k) % WINDOW];
                    h ^= TABLE[byte as usize].rotate_left(((WINDOW - 1 - k) % 32) as u32);
                }
                self.h = h;
            } else {
                self.h = self.h.rotate_left(1)
                    ^ TABLE[leave as usize].rotate_left((WINDOW % 32) as u32)
                    ^ TABLE[b as usize];
            }
            if self.len >= max || self.h % d == d - 1 {
                self.len = 0;
                self.h = 0;
                return Some(i);
            }
        }
        None
    }

    /// Whether bytes were fed since the last cut (the stream's end then
    /// ends a last chunk).
    pub fn pending(&self) -> bool {
        self.len > 0
    }
}

/// The ends of the chunks of `data`, cut with `sizes`.
pub fn cuts(data: &[u8], sizes: Sizes) -> Vec<u64> {
    let mut c = Cutter::new(sizes);
    let mut ends = Vec::new();
    let mut at = 0usize;
    while at < data.len() {
        match c.feed(&data[at..]) {
            Some(n) => {
                at += n;
                ends.push(at as u64);
            }
            None => break,
        }
    }
    if c.pending() {
        ends.push(data.len() as u64);
    }
    ends
}

/// How an index names its chunks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Digest {
    /// SHA-512/256 (casync's default).
    Sha512_256,
    /// SHA-256 (`casync --digest=sha256`).
    Sha256,
}

impl Digest {
    /// The ring algorithm.
    pub fn algorithm(self) -> &'static ring::digest::Algorithm {
        match self {
            Digest::Sha512_256 => &ring::digest::SHA512_256,
            Digest::Sha256 => &ring::digest::SHA256,
        }
    }

    /// A chunk's ID.
    pub fn id(self, data: &[u8]) -> Id {
        let d = ring::digest::digest(self.algorithm(), data);
        let mut id = [0u8; 32];
        id.copy_from_slice(d.as_ref());
        Id(id)
    }
}

/// A chunk's ID: the digest of its bytes.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Id(pub [u8; 32]);

impl Id {
    /// Lowercase hex.
    pub fn hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Its path in a chunk store: `<4 hex>/<64 hex>.cacnk`.
    pub fn store_path(&self) -> String {
        let h = self.hex();
        format!("{}/{h}.cacnk", &h[..4])
    }
}

impl std::fmt::Debug for Id {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.hex())
    }
}

/// One chunk of an index: where it ends in the blob, and its ID.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Chunk {
    /// Its end: the offset just past its last byte.
    pub end: u64,
    /// Its ID.
    pub id: Id,
}

/// A blob's index (`.caibx`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Index {
    /// The feature flags (the digest is read from them).
    pub flags: u64,
    /// The sizes it was cut with.
    pub sizes: Sizes,
    /// Its chunks, in order.
    pub chunks: Vec<Chunk>,
}

/// Why bytes are not an index.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BadIndex {
    /// Shorter than its headers.
    #[error("the index is {0} bytes: too short for a casync index")]
    Short(usize),
    /// Not casync's blob index (a header's size or type, the tail).
    #[error("not a casync blob index: {0}")]
    Format(&'static str),
    /// The chunk sizes casync would not write.
    #[error("the index's chunk sizes {min}/{avg}/{max} are not casync's")]
    Sizes {
        /// Its minimum.
        min: u64,
        /// Its average.
        avg: u64,
        /// Its maximum.
        max: u64,
    },
    /// A chunk that ends before it starts, or is bigger than the maximum.
    #[error("chunk {0} of the index is empty or longer than its maximum")]
    Chunk(usize),
}

fn le(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

impl Index {
    /// The index of `data`, cut with `sizes`, its chunks named by
    /// SHA-512/256, with casync's default flags.
    pub fn of(data: &[u8], sizes: Sizes) -> Index {
        let mut start = 0usize;
        let chunks = cuts(data, sizes)
            .into_iter()
            .map(|end| {
                let e = end as usize;
                let id = Digest::Sha512_256.id(&data[start..e]);
                start = e;
                Chunk { end, id }
            })
            .collect();
        Index {
            flags: DEFAULT_FLAGS,
            sizes,
            chunks,
        }
    }

    /// How its chunks are named.
    pub fn digest(&self) -> Digest {
        if self.flags & FLAG_SHA512_256 != 0 {
            Digest::Sha512_256
        } else {
            Digest::Sha256
        }
    }

    /// The blob's length.
    pub fn size(&self) -> u64 {
        self.chunks.last().map_or(0, |c| c.end)
    }

    /// Each chunk with its start.
    pub fn spans(&self) -> impl Iterator<Item = (u64, &Chunk)> {
        let mut start = 0;
        self.chunks.iter().map(move |c| {
            let s = start;
            start = c.end;
            (s, c)
        })
    }

    /// As casync writes it.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(48 + 16 + 40 * self.chunks.len() + 40);
        for v in [
            48,
            FORMAT_INDEX,
            self.flags,
            self.sizes.min,
            self.sizes.avg,
            self.sizes.max,
            u64::MAX,
            FORMAT_TABLE,
        ] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        for c in &self.chunks {
            out.extend_from_slice(&c.end.to_le_bytes());
            out.extend_from_slice(&c.id.0);
        }
        let table = 16 + 40 * self.chunks.len() as u64 + 40;
        for v in [0, 0, 48, table, TABLE_TAIL_MARKER] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out
    }

    /// Reads an index as casync writes it; every field checked.
    pub fn decode(b: &[u8]) -> Result<Index, BadIndex> {
        if b.len() < 48 + 16 + 40 {
            return Err(BadIndex::Short(b.len()));
        }
        if le(b, 0) != 48 || le(b, 8) != FORMAT_INDEX {
            return Err(BadIndex::Format("its header"));
        }
        let sizes = Sizes {
            min: le(b, 24),
            avg: le(b, 32),
            max: le(b, 40),
        };
        if !sizes.valid() {
            return Err(BadIndex::Sizes {
                min: sizes.min,
                avg: sizes.avg,
                max: sizes.max,
            });
        }
        if le(b, 48) != u64::MAX || le(b, 56) != FORMAT_TABLE {
            return Err(BadIndex::Format("its table's header"));
        }
        let items = &b[64..];
        if items.len() % 40 != 0 {
            return Err(BadIndex::Format("its table's length"));
        }
        let n = items.len() / 40 - 1;
        let tail = &items[n * 40..];
        let table = 16 + 40 * n as u64 + 40;
        if le(tail, 0) != 0
            || le(tail, 8) != 0
            || le(tail, 16) != 48
            || le(tail, 24) != table
            || le(tail, 32) != TABLE_TAIL_MARKER
        {
            return Err(BadIndex::Format("its table's tail"));
        }
        let mut chunks = Vec::with_capacity(n);
        let mut start = 0u64;
        for k in 0..n {
            let item = &items[k * 40..k * 40 + 40];
            let end = le(item, 0);
            if end <= start || end - start > sizes.max {
                return Err(BadIndex::Chunk(k));
            }
            let mut id = [0u8; 32];
            id.copy_from_slice(&item[8..40]);
            chunks.push(Chunk { end, id: Id(id) });
            start = end;
        }
        Ok(Index {
            flags: le(b, 16),
            sizes,
            chunks,
        })
    }
}

/// What rebuilding a layer from its index costs, against pulling its blob.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// The chunks to fetch from the store, each once (by ID), with their
    /// uncompressed sizes.
    pub fetch: Vec<(Id, u64)>,
    /// Bytes of the layer that are here already (from seeds, or a
    /// rebuild that was under way).
    pub here: u64,
    /// Bytes of the layer to fetch, uncompressed.
    pub missing: u64,
    /// The bytes expected on the wire for them.
    pub wire: u64,
    /// Whether to rebuild (else the blob is pulled).
    pub rebuild: bool,
}

/// What one fetch of a chunk costs beyond its bytes: the request and the
/// answer's headers.
pub const REQUEST_COST: u64 = 512;

/// Which of `index`'s chunks to fetch, given those `held`, and whether
/// that beats the pull of the layer's blob of `blob_size` bytes: the
/// chunks are expected to compress as the blob does, and each costs
/// [`REQUEST_COST`]; a rebuild is chosen when it moves at most nine
/// tenths of the pull's bytes (a rebuild reads and writes the layer
/// locally too, so a near-tie goes to the pull).
pub fn plan(index: &Index, held: impl Fn(&Id) -> bool, blob_size: u64) -> Plan {
    let mut fetch: BTreeMap<Id, u64> = BTreeMap::new();
    let (mut here, mut missing) = (0u64, 0u64);
    for (start, c) in index.spans() {
        let len = c.end - start;
        if held(&c.id) {
            here += len;
        } else {
            missing += len;
            fetch.entry(c.id).or_insert(len);
        }
    }
    let size = index.size().max(1);
    let unique: u64 = fetch.values().sum();
    let wire = (u128::from(unique) * u128::from(blob_size) / u128::from(size)) as u64
        + REQUEST_COST * fetch.len() as u64;
    Plan {
        rebuild: u128::from(wire) * 10 <= u128::from(blob_size) * 9,
        fetch: fetch.into_iter().collect(),
        here,
        missing,
        wire,
    }
}

/// The bytes of a `.cacnk` as casync's store holds them with gzip
/// compression: the chunk, inflated (no bigger than `limit`).
pub fn inflate_gzip(data: &[u8], limit: usize) -> Result<Vec<u8>, String> {
    // RFC 1952: magic, method 8, flags, mtime, xfl, os; then the optional
    // fields the flags name; then the deflate stream; then CRC and size
    // (not checked: the chunk's ID is).
    if data.len() < 18 || data[0] != 0x1f || data[1] != 0x8b || data[2] != 8 {
        return Err("not a gzip member".into());
    }
    let flags = data[3];
    let mut at = 10usize;
    if flags & 0x04 != 0 {
        let n = data
            .get(at..at + 2)
            .map(|x| usize::from(u16::from_le_bytes([x[0], x[1]])))
            .ok_or("a gzip extra field past the end")?;
        at += 2 + n;
    }
    for bit in [0x08, 0x10] {
        if flags & bit != 0 {
            let nul = data
                .get(at..)
                .and_then(|r| r.iter().position(|&b| b == 0))
                .ok_or("a gzip name or comment past the end")?;
            at += nul + 1;
        }
    }
    if flags & 0x02 != 0 {
        at += 2;
    }
    let body = data.get(at..).ok_or("a gzip header past the end")?;
    miniz_oxide::inflate::decompress_to_vec_with_limit(body, limit)
        .map_err(|e| format!("its deflate stream: {e}"))
}

/// The bytes of a chunk as a store serves them, checked: inflated and
/// named by `id` under `digest`, else why not.
pub fn open_chunk(data: &[u8], id: &Id, digest: Digest, max: u64) -> Result<Vec<u8>, String> {
    let limit = usize::try_from(max).unwrap_or(usize::MAX);
    let bytes = inflate_gzip(data, limit)?;
    if digest.id(&bytes) != *id {
        return Err("its bytes are not the chunk its name says".into());
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bytes that look like data and repeat nowhere.
    fn noise(n: usize, seed: u64) -> Vec<u8> {
        let mut x = seed.wrapping_mul(0x9E3779B97F4A7C15) | 1;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 24) as u8
            })
            .collect()
    }

    #[test]
    fn cuts_fall_between_the_minimum_and_the_maximum_and_cover_the_data() {
        let data = noise(3 << 20, 1);
        let ends = cuts(&data, Sizes::DEFAULT);
        assert_eq!(*ends.last().unwrap(), data.len() as u64);
        let mut start = 0;
        for (k, &e) in ends.iter().enumerate() {
            let len = e - start;
            assert!(len <= Sizes::DEFAULT.max, "chunk {k}: {len}");
            if k + 1 < ends.len() {
                assert!(len >= Sizes::DEFAULT.min, "chunk {k}: {len}");
            }
            start = e;
        }
        let avg = data.len() as u64 / ends.len() as u64;
        assert!((32 << 10..128 << 10).contains(&avg), "average {avg}");
    }

    #[test]
    fn the_cuts_are_the_same_however_the_bytes_are_fed() {
        let data = noise(1 << 20, 2);
        let whole = cuts(&data, Sizes::DEFAULT);
        for piece in [1usize, 47, 48, 4096, 16383, 70000] {
            let mut c = Cutter::new(Sizes::DEFAULT);
            let (mut ends, mut at) = (Vec::new(), 0usize);
            while at < data.len() {
                let stop = (at + piece).min(data.len());
                let mut from = at;
                while let Some(n) = c.feed(&data[from..stop]) {
                    from += n;
                    ends.push(from as u64);
                }
                at = stop;
            }
            if c.pending() {
                ends.push(data.len() as u64);
            }
            assert_eq!(ends, whole, "fed {piece} at a time");
        }
    }

    #[test]
    fn a_change_in_the_middle_moves_only_the_chunks_around_it() {
        let old = noise(4 << 20, 3);
        let mut new = old.clone();
        new.splice(2 << 20..2 << 20, b"a line inserted".iter().copied());
        let (a, b) = (
            Index::of(&old, Sizes::DEFAULT),
            Index::of(&new, Sizes::DEFAULT),
        );
        let held: std::collections::BTreeSet<Id> = a.chunks.iter().map(|c| c.id).collect();
        let p = plan(&b, |id| held.contains(id), new.len() as u64);
        assert!(p.fetch.len() <= 2, "{} chunks to fetch", p.fetch.len());
        assert!(p.rebuild);
    }

    #[test]
    fn an_index_reads_back_as_written_and_a_damaged_one_is_refused() {
        let data = noise(600 << 10, 4);
        let i = Index::of(&data, Sizes::DEFAULT);
        let b = i.encode();
        assert_eq!(Index::decode(&b).unwrap(), i);
        assert_eq!(i.digest(), Digest::Sha512_256);
        type Damage = Box<dyn Fn(&mut Vec<u8>)>;
        let cases: Vec<(&str, Damage, BadIndex)> = vec![
            (
                "cut short",
                Box::new(|b| b.truncate(50)),
                BadIndex::Short(50),
            ),
            (
                "type",
                Box::new(|b| b[8] ^= 1),
                BadIndex::Format("its header"),
            ),
            (
                "table header",
                Box::new(|b| b[56] ^= 1),
                BadIndex::Format("its table's header"),
            ),
            (
                "an item short",
                Box::new(|b| {
                    b.remove(70);
                }),
                BadIndex::Format("its table's length"),
            ),
            (
                "tail marker",
                Box::new(|b| {
                    let n = b.len();
                    b[n - 1] ^= 1;
                }),
                BadIndex::Format("its table's tail"),
            ),
            (
                "min zero",
                Box::new(|b| b[24..32].copy_from_slice(&0u64.to_le_bytes())),
                BadIndex::Sizes {
                    min: 0,
                    avg: 64 << 10,
                    max: 256 << 10,
                },
            ),
            (
                "ends go back",
                Box::new(|b| b[104..112].copy_from_slice(&1u64.to_le_bytes())),
                BadIndex::Chunk(1),
            ),
            (
                "a chunk past max",
                Box::new(|b| b[64..72].copy_from_slice(&(1u64 << 30).to_le_bytes())),
                BadIndex::Chunk(0),
            ),
        ];
        for (what, damage, want) in cases {
            let mut d = b.clone();
            damage(&mut d);
            assert_eq!(Index::decode(&d), Err(want), "{what}");
        }
    }

    #[test]
    fn plan_fetches_each_missing_chunk_once_and_rebuilds_only_when_cheaper() {
        let id = |n: u8| Id([n; 32]);
        let index = |chunks: &[(u64, u8)]| Index {
            flags: DEFAULT_FLAGS,
            sizes: Sizes::DEFAULT,
            chunks: chunks
                .iter()
                .map(|&(end, n)| Chunk { end, id: id(n) })
                .collect(),
        };
        // (index, held, blob size) => (fetch, here, missing, wire, rebuild)
        #[allow(clippy::type_complexity)]
        let table: &[(
            &[(u64, u8)],
            &[u8],
            u64,
            (&[(u8, u64)], u64, u64, u64, bool),
        )] = &[
            // all held: nothing to fetch
            (
                &[(100_000, 1), (200_000, 2)],
                &[1, 2],
                50_000,
                (&[], 200_000, 0, 0, true),
            ),
            // one of two missing, the blob compressed to half
            (
                &[(100_000, 1), (200_000, 2)],
                &[1],
                100_000,
                (&[(2, 100_000)], 100_000, 100_000, 50_512, true),
            ),
            // the same chunk twice is fetched once
            (
                &[(100_000, 3), (200_000, 3)],
                &[],
                400_000,
                (&[(3, 100_000)], 0, 200_000, 200_512, true),
            ),
            // nothing held: the pull
            (
                &[(100_000, 1), (200_000, 2)],
                &[],
                100_000,
                (&[(1, 100_000), (2, 100_000)], 0, 200_000, 101_024, false),
            ),
            // most missing: past nine tenths, the pull
            (
                &[(100_000, 1), (1_000_000, 2)],
                &[1],
                1_000_000,
                (&[(2, 900_000)], 100_000, 900_000, 900_512, false),
            ),
        ];
        for (chunks, held, blob, (fetch, here, missing, wire, rebuild)) in table {
            let p = plan(&index(chunks), |i| held.iter().any(|&h| id(h) == *i), *blob);
            let want: Vec<(Id, u64)> = fetch.iter().map(|&(n, l)| (id(n), l)).collect();
            assert_eq!(
                (p.fetch, p.here, p.missing, p.wire, p.rebuild),
                (want, *here, *missing, *wire, *rebuild),
                "{chunks:?} held {held:?}"
            );
        }
    }

    #[test]
    fn a_stored_chunk_opens_only_as_the_chunk_it_names() {
        let data = noise(20_000, 5);
        let id = Digest::Sha512_256.id(&data);
        // A gzip member: header, stored deflate from miniz, trailer.
        let mut gz = vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3];
        gz.extend(miniz_oxide::deflate::compress_to_vec(&data, 6));
        gz.extend_from_slice(&[0; 8]);
        assert_eq!(
            open_chunk(&gz, &id, Digest::Sha512_256, 1 << 20).unwrap(),
            data
        );
        let other = Digest::Sha512_256.id(b"other");
        assert!(open_chunk(&gz, &other, Digest::Sha512_256, 1 << 20).is_err());
        assert!(
            open_chunk(&data, &id, Digest::Sha512_256, 1 << 20).is_err(),
            "not gzip"
        );
        assert!(
            open_chunk(&gz, &id, Digest::Sha512_256, 1000).is_err(),
            "past the limit"
        );
        assert!(
            open_chunk(&gz[..30], &id, Digest::Sha512_256, 1 << 20).is_err(),
            "cut short"
        );
    }
}
