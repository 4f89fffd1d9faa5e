//! age (age-encryption.org/v1, c2sp.org/age) with X25519 recipients: the
//! published format values are sealed to one device in. The device's
//! identity is an X25519 secret (`AGE-SECRET-KEY-1…`), its recipient the
//! public half (`age1…`); a value sealed by `age -r age1…` (or the `age`
//! crate, as `stead-plane seal` does) opens here. The device only reads:
//! the writer ([`encrypt`]) is built for tests alone. Only the X25519 recipient type
//! is read (any other stanza is passed over, as the spec asks), and only
//! the binary form (no ASCII armor). Pure: randomness comes in as bytes.
//! Checked against C2SP's test vectors (tests/age.rs).

use base64::Engine as _;
use curve25519_dalek::montgomery::MontgomeryPoint;
use ring::aead::{Aad, CHACHA20_POLY1305, LessSafeKey, Nonce, UnboundKey};
use ring::{hkdf, hmac};

const VERSION_LINE: &[u8] = b"age-encryption.org/v1\n";
const X25519_INFO: &[u8] = b"age-encryption.org/v1/X25519";
const IDENTITY_HRP: &str = "age-secret-key-";
const RECIPIENT_HRP: &str = "age";
const FILE_KEY_LEN: usize = 16;
const TAG_LEN: usize = 16;
const NONCE_LEN: usize = 16;
const CHUNK: usize = 64 * 1024;
/// The randomness one encryption takes: a file key, an ephemeral secret
/// and the payload's nonce.
#[cfg(any(test, feature = "test-writer"))]
pub const RANDOM_LEN: usize = FILE_KEY_LEN + 32 + NONCE_LEN;

/// Why an age file does not open.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AgeError {
    /// Its header is not age v1's.
    #[error("not an age file: {0}")]
    Header(String),
    /// No stanza is for this identity.
    #[error("not sealed to this device's key")]
    NoMatch,
    /// The header was changed since it was made.
    #[error("its header was altered")]
    Mac,
    /// The payload does not decrypt whole.
    #[error("its payload was altered or cut short: {0}")]
    Payload(String),
    /// The recipient is a point of low order: the secret shared with it
    /// is all zeros, known to anyone.
    #[error("a key of low order: what is sealed to it opens for anyone")]
    LowOrder,
}

/// An X25519 identity: the secret. Never printed.
#[derive(Clone)]
pub struct Identity([u8; 32]);

impl std::fmt::Debug for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Identity(..)")
    }
}

/// An X25519 recipient: the public half of an identity; never a point of
/// low order ([`Recipient::parse`] refuses one).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Recipient([u8; 32]);

impl Identity {
    /// The identity of these 32 secret bytes.
    pub fn from_bytes(bytes: [u8; 32]) -> Identity {
        Identity(bytes)
    }

    /// Reads `AGE-SECRET-KEY-1…`.
    pub fn parse(s: &str) -> Result<Identity, String> {
        let (hrp, data) = bech32::decode(s.trim())?;
        if hrp != IDENTITY_HRP {
            return Err("not an age identity (AGE-SECRET-KEY-1…)".into());
        }
        Ok(Identity(key_bytes(&data)?))
    }

    /// `AGE-SECRET-KEY-1…`, as age-keygen writes it.
    pub fn encode(&self) -> String {
        bech32::encode(IDENTITY_HRP, &self.0).to_ascii_uppercase()
    }

    /// Its recipient.
    pub fn recipient(&self) -> Recipient {
        Recipient(MontgomeryPoint::mul_base_clamped(self.0).to_bytes())
    }
}

impl Recipient {
    /// Reads `age1…`. A point of low order (the all-zero key among them,
    /// and every key whose shared secret is all zeros whatever the other
    /// side's secret) is refused, as age's reference refuses to wrap to
    /// one.
    pub fn parse(s: &str) -> Result<Recipient, String> {
        let (hrp, data) = bech32::decode(s.trim())?;
        if hrp != RECIPIENT_HRP {
            return Err(format!("{s:?} is not an age recipient (age1…)"));
        }
        let key = key_bytes(&data)?;
        if small_order(&key) {
            return Err(AgeError::LowOrder.to_string());
        }
        Ok(Recipient(key))
    }

    /// `age1…`.
    pub fn encode(&self) -> String {
        bech32::encode(RECIPIENT_HRP, &self.0)
    }

    /// Its 32 bytes (the X25519 point).
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }
}

impl std::fmt::Display for Recipient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.encode())
    }
}

fn key_bytes(data: &[u8]) -> Result<[u8; 32], String> {
    data.try_into()
        .map_err(|_| format!("a key of {} bytes, not 32", data.len()))
}

fn b64() -> base64::engine::GeneralPurpose {
    // Unpadded, and canonical: trailing bits must be zero.
    base64::engine::general_purpose::STANDARD_NO_PAD
}

fn hkdf32(salt: &[u8], ikm: &[u8], info: &[u8]) -> [u8; 32] {
    let mut out = [0u8; 32];
    hkdf::Salt::new(hkdf::HKDF_SHA256, salt)
        .extract(ikm)
        .expand(&[info], hkdf::HKDF_SHA256)
        .and_then(|okm| okm.fill(&mut out))
        .expect("HKDF-SHA-256 gives 32 bytes");
    out
}

fn aead(key: &[u8; 32]) -> LessSafeKey {
    LessSafeKey::new(UnboundKey::new(&CHACHA20_POLY1305, key).expect("a 32-byte key"))
}

/// X25519 of a secret and a point, or none when the shared secret is all
/// zeros (a point of low order: a clamped secret is a multiple of the
/// cofactor, so it is all zeros whatever the secret), which age refuses
/// on both sides.
/// The u-coordinates of the points of small order (on the curve and its
/// twist: orders 1, 2, 4 and 8) and their non-canonical encodings, little
/// endian, as libsodium lists them: a point is one of them exactly when
/// every clamped secret shares all zeros with it ([`shared_secret`]; a
/// test holds the two to each other). Compared without the top bit,
/// which X25519 ignores: a fleet's enrolled keys are read in a
/// microsecond each, not a scalar multiplication each.
const SMALL_ORDER: [[u8; 32]; 7] = {
    let mut l = [[0u8; 32]; 7];
    l[1][0] = 1;
    l[2] = [
        0xe0, 0xeb, 0x7a, 0x7c, 0x3b, 0x41, 0xb8, 0xae, 0x16, 0x56, 0xe3, 0xfa, 0xf1, 0x9f, 0xc4,
        0x6a, 0xda, 0x09, 0x8d, 0xeb, 0x9c, 0x32, 0xb1, 0xfd, 0x86, 0x62, 0x05, 0x16, 0x5f, 0x49,
        0xb8, 0x00,
    ];
    l[3] = [
        0x5f, 0x9c, 0x95, 0xbc, 0xa3, 0x50, 0x8c, 0x24, 0xb1, 0xd0, 0xb1, 0x55, 0x9c, 0x83, 0xef,
        0x5b, 0x04, 0x44, 0x5c, 0xc4, 0x58, 0x1c, 0x8e, 0x86, 0xd8, 0x22, 0x4e, 0xdd, 0xd0, 0x9f,
        0x11, 0x57,
    ];
    // p - 1, p, p + 1.
    let mut n = 4;
    while n < 7 {
        let mut k = 1;
        while k < 31 {
            l[n][k] = 0xff;
            k += 1;
        }
        l[n][0] = 0xec + (n as u8 - 4);
        l[n][31] = 0x7f;
        n += 1;
    }
    l
};

/// Whether `point` is of small order ([`SMALL_ORDER`]).
fn small_order(point: &[u8; 32]) -> bool {
    let mut p = *point;
    p[31] &= 0x7f;
    SMALL_ORDER.contains(&p)
}

fn shared_secret(secret: [u8; 32], point: [u8; 32]) -> Option<[u8; 32]> {
    let shared = MontgomeryPoint(point).mul_clamped(secret).to_bytes();
    (shared != [0; 32]).then_some(shared)
}

/// Encrypts `plain` to `to`, with `random` from a CSPRNG; refused for a
/// recipient of low order.
///
/// Built for tests alone (this crate's, and with the feature
/// `test-writer` the agent's): a value sealed from a seed makes a
/// failure reproduce (proptest, the reconciler's tables), which the
/// reference, drawing its own randomness, cannot. The device only opens;
/// what it opens in the field is written by `stead-plane seal` with the
/// reference implementation (the `age` crate), and tests/age.rs and the
/// operator's tool's tests hold this reader to it.
#[cfg(any(test, feature = "test-writer"))]
pub fn encrypt(
    to: &Recipient,
    plain: &[u8],
    random: &[u8; RANDOM_LEN],
) -> Result<Vec<u8>, AgeError> {
    let (file_key, rest) = random.split_at(FILE_KEY_LEN);
    let (ephemeral, nonce) = rest.split_at(32);
    let ephemeral: [u8; 32] = ephemeral.try_into().expect("32 bytes");
    let share = MontgomeryPoint::mul_base_clamped(ephemeral).to_bytes();
    let shared = shared_secret(ephemeral, to.0).ok_or(AgeError::LowOrder)?;
    let mut salt = share.to_vec();
    salt.extend_from_slice(&to.0);
    let wrap = hkdf32(&salt, &shared, X25519_INFO);
    let mut body = file_key.to_vec();
    aead(&wrap)
        .seal_in_place_append_tag(
            Nonce::assume_unique_for_key([0; 12]),
            Aad::empty(),
            &mut body,
        )
        .expect("a file key seals");
    let mut out = VERSION_LINE.to_vec();
    out.extend_from_slice(format!("-> X25519 {}\n", b64().encode(share)).as_bytes());
    let body = b64().encode(&body);
    for line in body.as_bytes().chunks(64) {
        out.extend_from_slice(line);
        out.push(b'\n');
    }
    if body.len() % 64 == 0 {
        out.push(b'\n');
    }
    out.extend_from_slice(b"---");
    let mac_key = hkdf32(&[], file_key, b"header");
    let mac = hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, &mac_key), &out);
    out.extend_from_slice(format!(" {}\n", b64().encode(mac.as_ref())).as_bytes());
    out.extend_from_slice(nonce);
    let payload = aead(&hkdf32(nonce, file_key, b"payload"));
    let chunks: Vec<&[u8]> = if plain.is_empty() {
        vec![&[]]
    } else {
        plain.chunks(CHUNK).collect()
    };
    let last = chunks.len() - 1;
    for (n, chunk) in chunks.into_iter().enumerate() {
        let mut c = chunk.to_vec();
        payload
            .seal_in_place_append_tag(chunk_nonce(n as u128, n == last), Aad::empty(), &mut c)
            .expect("a chunk seals");
        out.extend_from_slice(&c);
    }
    Ok(out)
}

fn chunk_nonce(counter: u128, last: bool) -> Nonce {
    let mut n = [0u8; 12];
    n[..11].copy_from_slice(&counter.to_be_bytes()[5..]);
    n[11] = u8::from(last);
    Nonce::assume_unique_for_key(n)
}

/// One stanza: its arguments and its body.
struct Stanza<'a> {
    args: Vec<&'a str>,
    body: Vec<u8>,
}

/// The header's stanzas, the bytes its MAC covers and the MAC, and where
/// the payload starts.
struct Header<'a> {
    stanzas: Vec<Stanza<'a>>,
    covered: &'a [u8],
    mac: Vec<u8>,
    payload_at: usize,
}

fn header_err(why: &str) -> AgeError {
    AgeError::Header(why.to_string())
}

/// The next line (without its LF) from `at`, and where the one after
/// starts; a line is ASCII without CR.
fn line(file: &[u8], at: usize) -> Result<(&str, usize), AgeError> {
    let rest = file.get(at..).unwrap_or_default();
    let end = rest
        .iter()
        .position(|&b| b == b'\n')
        .ok_or_else(|| header_err("the header ends without a line feed"))?;
    let text = std::str::from_utf8(&rest[..end])
        .ok()
        .filter(|t| t.bytes().all(|b| (0x20..0x7f).contains(&b)))
        .ok_or_else(|| header_err("a header line holds a character it may not"))?;
    Ok((text, at + end + 1))
}

fn decode_b64(s: &str) -> Result<Vec<u8>, AgeError> {
    if !s
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/')
    {
        return Err(header_err("not base64 (unpadded)"));
    }
    b64()
        .decode(s)
        .map_err(|_| header_err("not canonical base64"))
}

fn parse_header(file: &[u8]) -> Result<Header<'_>, AgeError> {
    if !file.starts_with(VERSION_LINE) {
        return Err(if file.starts_with(b"age-encryption.org/") {
            header_err("a version other than v1")
        } else {
            header_err("no age-encryption.org/v1 line")
        });
    }
    let mut at = VERSION_LINE.len();
    let mut stanzas = Vec::new();
    loop {
        let (text, next) = line(file, at)?;
        if let Some(mac) = text.strip_prefix("--- ") {
            if stanzas.is_empty() {
                return Err(header_err("no recipient stanza"));
            }
            let mac = decode_b64(mac)?;
            if mac.len() != 32 {
                return Err(header_err("a MAC that is not 32 bytes"));
            }
            return Ok(Header {
                stanzas,
                covered: &file[..at + 3],
                mac,
                payload_at: next,
            });
        }
        let args = text
            .strip_prefix("-> ")
            .ok_or_else(|| header_err("a line that is neither a stanza nor the MAC"))?;
        let args: Vec<&str> = args.split(' ').collect();
        if args.iter().any(|a| a.is_empty()) {
            return Err(header_err("a stanza with an empty argument"));
        }
        at = next;
        let mut body = String::new();
        loop {
            let (text, next) = line(file, at)?;
            at = next;
            if text.len() > 64 {
                return Err(header_err("a stanza body line over 64 columns"));
            }
            body.push_str(text);
            if text.len() < 64 {
                break;
            }
        }
        stanzas.push(Stanza {
            args,
            body: decode_b64(&body)?,
        });
    }
}

/// Opens an age file with `id`.
pub fn decrypt(id: &Identity, file: &[u8]) -> Result<Vec<u8>, AgeError> {
    let h = parse_header(file)?;
    // Every X25519 stanza is checked whole before any is tried.
    let mut ours = Vec::new();
    for s in &h.stanzas {
        if s.args.first() != Some(&"X25519") {
            continue;
        }
        let [_, share] = s.args[..] else {
            return Err(header_err("an X25519 stanza takes one argument"));
        };
        let share: [u8; 32] = decode_b64(share)?
            .try_into()
            .map_err(|_| header_err("an X25519 share that is not 32 bytes"))?;
        if s.body.len() != FILE_KEY_LEN + TAG_LEN {
            return Err(header_err(
                "an X25519 body that is not a wrapped 16-byte file key",
            ));
        }
        ours.push((share, &s.body));
    }
    let recipient = id.recipient();
    let mut file_key = None;
    for (share, body) in ours {
        let shared =
            shared_secret(id.0, share).ok_or_else(|| header_err("an X25519 share of low order"))?;
        let mut salt = share.to_vec();
        salt.extend_from_slice(&recipient.0);
        let wrap = hkdf32(&salt, &shared, X25519_INFO);
        let mut body = body.clone();
        if let Ok(key) = aead(&wrap).open_in_place(
            Nonce::assume_unique_for_key([0; 12]),
            Aad::empty(),
            &mut body,
        ) {
            file_key = Some(key.to_vec());
            break;
        }
    }
    let file_key = file_key.ok_or(AgeError::NoMatch)?;
    let mac_key = hkdf32(&[], &file_key, b"header");
    hmac::verify(
        &hmac::Key::new(hmac::HMAC_SHA256, &mac_key),
        h.covered,
        &h.mac,
    )
    .map_err(|_| AgeError::Mac)?;
    let payload = &file[h.payload_at..];
    if payload.len() < NONCE_LEN {
        // The nonce is read with the header.
        return Err(header_err("no payload nonce after the header"));
    }
    let (nonce, mut rest) = payload.split_at(NONCE_LEN);
    let key = aead(&hkdf32(nonce, &file_key, b"payload"));
    let mut plain = Vec::new();
    let mut counter: u128 = 0;
    loop {
        if rest.len() < TAG_LEN {
            return Err(AgeError::Payload("a chunk shorter than its tag".into()));
        }
        let take = rest.len().min(CHUNK + TAG_LEN);
        let last = rest.len() <= CHUNK + TAG_LEN;
        let mut chunk = rest[..take].to_vec();
        let opened = key
            .open_in_place(chunk_nonce(counter, last), Aad::empty(), &mut chunk)
            .map_err(|_| {
                AgeError::Payload(if last && take == CHUNK + TAG_LEN {
                    "no final chunk".into()
                } else {
                    format!("chunk {counter} does not open")
                })
            })?;
        if last && opened.is_empty() && counter > 0 {
            return Err(AgeError::Payload("an empty final chunk".into()));
        }
        plain.extend_from_slice(opened);
        rest = &rest[take..];
        if last {
            return Ok(plain);
        }
        counter += 1;
    }
}

/// Bech32 (BIP 173), without its length limit, as age uses it.
mod bech32 {
    const CHARSET: &[u8; 32] = b"qpzry9x8gf2tvdw0s3jn54khce6mua7l";
    /// Each ASCII character's value in [`CHARSET`] (-1: none).
    const VALUE: [i8; 128] = {
        let mut t = [-1i8; 128];
        let mut i = 0;
        while i < CHARSET.len() {
            t[CHARSET[i] as usize] = i as i8;
            i += 1;
        }
        t
    };
    const GEN: [u32; 5] = [
        0x3b6a_57b2,
        0x2650_8e6d,
        0x1ea1_19fa,
        0x3d42_33dd,
        0x2a14_62b3,
    ];

    fn polymod(values: impl Iterator<Item = u8>) -> u32 {
        let mut chk: u32 = 1;
        for v in values {
            let b = chk >> 25;
            chk = ((chk & 0x01ff_ffff) << 5) ^ u32::from(v);
            for (i, g) in GEN.iter().enumerate() {
                if (b >> i) & 1 == 1 {
                    chk ^= g;
                }
            }
        }
        chk
    }

    fn expand(hrp: &str) -> impl Iterator<Item = u8> + '_ {
        hrp.bytes()
            .map(|b| b >> 5)
            .chain(std::iter::once(0))
            .chain(hrp.bytes().map(|b| b & 31))
    }

    /// Regroups bits, `from` wide to `to` wide.
    fn regroup(data: &[u8], from: u32, to: u32, pad: bool) -> Option<Vec<u8>> {
        let (mut acc, mut bits, mut out) = (0u32, 0u32, Vec::new());
        let max = (1u32 << to) - 1;
        let keep = (1u32 << (from + to - 1)) - 1;
        for &v in data {
            acc = ((acc << from) | u32::from(v)) & keep;
            bits += from;
            while bits >= to {
                bits -= to;
                out.push(((acc >> bits) & max) as u8);
            }
        }
        if pad {
            if bits > 0 {
                out.push(((acc << (to - bits)) & max) as u8);
            }
        } else if bits >= from || ((acc << (to - bits)) & max) != 0 {
            return None;
        }
        Some(out)
    }

    pub fn encode(hrp: &str, data: &[u8]) -> String {
        let values = regroup(data, 8, 5, true).unwrap_or_default();
        let check = polymod(expand(hrp).chain(values.iter().copied()).chain([0; 6])) ^ 1;
        let mut s = format!("{hrp}1");
        for v in values
            .iter()
            .copied()
            .chain((0..6).map(|i| ((check >> (5 * (5 - i))) & 31) as u8))
        {
            s.push(CHARSET[usize::from(v)] as char);
        }
        s
    }

    /// The lowercase human-readable part and the data.
    pub fn decode(s: &str) -> Result<(String, Vec<u8>), String> {
        let bad = || "not Bech32".to_string();
        if s.bytes().any(|b| b.is_ascii_lowercase()) && s.bytes().any(|b| b.is_ascii_uppercase()) {
            return Err("Bech32 of mixed case".into());
        }
        let lower = s.to_ascii_lowercase();
        let (hrp, data) = lower.rsplit_once('1').ok_or_else(bad)?;
        if hrp.is_empty() || data.len() < 6 || !hrp.bytes().all(|b| (33..127).contains(&b)) {
            return Err(bad());
        }
        let values: Vec<u8> = data
            .bytes()
            .map(|c| {
                VALUE
                    .get(usize::from(c))
                    .and_then(|&v| u8::try_from(v).ok())
            })
            .collect::<Option<_>>()
            .ok_or_else(bad)?;
        if polymod(expand(hrp).chain(values.iter().copied())) != 1 {
            return Err("a Bech32 checksum that does not match".into());
        }
        let data = regroup(&values[..values.len() - 6], 5, 8, false).ok_or_else(bad)?;
        Ok((hrp.to_string(), data))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_read_as_age_keygen_writes_them() {
        // The identity of C2SP's vectors and its recipient.
        let id = Identity::parse(
            "AGE-SECRET-KEY-1EGTZVFFV20835NWYV6270LXYVK2VKNX2MMDKWYKLMGR48UAWX40Q2P2LM0",
        )
        .unwrap();
        assert_eq!(
            id.encode(),
            "AGE-SECRET-KEY-1EGTZVFFV20835NWYV6270LXYVK2VKNX2MMDKWYKLMGR48UAWX40Q2P2LM0"
        );
        let r = id.recipient().encode();
        assert_eq!(Recipient::parse(&r).unwrap(), id.recipient());
        assert!(r.starts_with("age1"), "{r}");
        // (text, read as a recipient?)
        #[rustfmt::skip]
        let cases = [
            (r.clone(), true),
            (r.to_ascii_uppercase(), true),
            (format!("{}x", &r[..r.len() - 1]), false),           // checksum
            (id.encode(), false),                                   // an identity
            ("age1qqqqqq".to_string(), false),
            (format!("{}{}", &r[..5].to_ascii_uppercase(), &r[5..]), false), // mixed case
        ];
        for (text, ok) in cases {
            assert_eq!(Recipient::parse(&text).is_ok(), ok, "{text}");
        }
        assert!(Identity::parse(&r).is_err());
    }

    fn hex32(h: &str) -> [u8; 32] {
        let b: Vec<u8> = (0..64)
            .step_by(2)
            .map(|i| u8::from_str_radix(&h[i..i + 2], 16).unwrap())
            .collect();
        b.try_into().unwrap()
    }

    #[test]
    fn the_list_of_small_order_points_is_the_points_every_secret_shares_zeros_with() {
        // Every listed point (and with its top bit set), and points drawn
        // at random, and small ones: the list says low order exactly when a
        // scalar multiplication does.
        let rng = ring::rand::SystemRandom::new();
        let listed = SMALL_ORDER.iter().flat_map(|p| {
            let mut high = *p;
            high[31] |= 0x80;
            [*p, high]
        });
        let small = (0u8..=255).map(|b| {
            let mut p = [0u8; 32];
            p[0] = b;
            p
        });
        let random = (0..5000).map(|_| {
            let mut p = [0u8; 32];
            ring::rand::SecureRandom::fill(&rng, &mut p).unwrap();
            p
        });
        let mut low = 0;
        for p in listed.chain(small).chain(random) {
            let zeros = shared_secret([0x5a; 32], p).is_none();
            assert_eq!(small_order(&p), zeros, "{p:02x?}");
            low += usize::from(zeros);
        }
        assert!(low >= 14, "{low}");
    }

    #[test]
    fn a_key_of_low_order_is_refused_to_parse_to_wrap_and_to_unwrap() {
        let id = Identity::from_bytes([7; 32]);
        let good = id.recipient().0;
        // (the point, little-endian, of low order?): the points of order
        // 1, 2, 4 and 8, their non-canonical encodings (p - 1, p, p + 1)
        // and the top bit set, which X25519 ignores.
        #[rustfmt::skip]
        let cases = [
            ("0000000000000000000000000000000000000000000000000000000000000000", true),
            ("0100000000000000000000000000000000000000000000000000000000000000", true),
            ("e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800", true),
            ("5f9c95bca3508c24b1d0b1559c83ef5b04445cc4581c8e86d8224eddd09f1157", true),
            ("ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f", true),
            ("edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f", true),
            ("eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f", true),
            ("0000000000000000000000000000000000000000000000000000000000000080", true),
            ("0900000000000000000000000000000000000000000000000000000000000000", false), // the base point
        ];
        let all = cases
            .iter()
            .map(|(h, low)| (hex32(h), *low))
            .chain([(good, false)]);
        for (point, low) in all {
            let text = bech32::encode(RECIPIENT_HRP, &point);
            let parsed = Recipient::parse(&text);
            assert_eq!(parsed.is_err(), low, "{text}");
            if low {
                assert!(parsed.unwrap_err().contains("low order"));
            }
            // Wrapping to it (a Recipient made by hand) is refused too.
            let wrapped = encrypt(&Recipient(point), b"v", &[3; RANDOM_LEN]);
            assert_eq!(wrapped.is_err(), low, "{text}");
            // A file whose share is this point opens for nobody.
            let file = encrypt(&id.recipient(), b"v", &[3; RANDOM_LEN]).unwrap();
            let share = MontgomeryPoint::mul_base_clamped([3; 32]).to_bytes();
            let forged = String::from_utf8_lossy(&file).replacen(
                &b64().encode(share),
                &b64().encode(point),
                1,
            );
            let opened = decrypt(&id, forged.as_bytes());
            if low {
                assert_eq!(
                    opened,
                    Err(header_err("an X25519 share of low order")),
                    "{text}"
                );
            } else {
                assert!(opened.is_err(), "{text}");
            }
        }
    }

    #[test]
    fn what_is_sealed_opens_with_its_identity_only() {
        let id = Identity::from_bytes([7; 32]);
        let other = Identity::from_bytes([8; 32]);
        for len in [0, 1, 100, CHUNK - 1, CHUNK, CHUNK + 1, 3 * CHUNK] {
            let plain: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
            let file = encrypt(&id.recipient(), &plain, &[len as u8; RANDOM_LEN]).unwrap();
            assert_eq!(decrypt(&id, &file).unwrap(), plain, "{len}");
            assert_eq!(decrypt(&other, &file), Err(AgeError::NoMatch));
            // Cut short, or a byte changed in the payload: refused.
            let mut cut = file.clone();
            cut.pop();
            assert!(matches!(decrypt(&id, &cut), Err(AgeError::Payload(_))));
            let mut flipped = file.clone();
            let last = flipped.len() - 1;
            flipped[last] ^= 1;
            assert!(matches!(decrypt(&id, &flipped), Err(AgeError::Payload(_))));
        }
        // The header's MAC covers the stanzas.
        let file = encrypt(&id.recipient(), b"secret", &[1; RANDOM_LEN]).unwrap();
        let text = String::from_utf8_lossy(&file).into_owned();
        let changed = text.replacen("-> X25519", "-> X25519 extra", 1);
        assert!(matches!(
            decrypt(&id, changed.as_bytes()),
            Err(AgeError::Header(_))
        ));
    }
}
