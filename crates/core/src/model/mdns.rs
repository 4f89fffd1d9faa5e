//! The multicast DNS messages (RFC 6762, with DNS-SD's names, RFC 6763)
//! by which the devices of a site find each other's peers' listeners
//! (`[site] mdns`): the query for [`SERVICE`], the answer that names a
//! device's listener (a PTR to its instance, the instance's SRV with
//! the listener's port, an empty TXT, the A of its host), and the
//! reading of both, whoever wrote them (name compression included). Pure:
//! the sockets are the device's.
//!
//! A listener found this way is only where a blob is asked first: what
//! it serves is checked as the registry's and the plane's are, so a
//! false answer costs one request (the peer then rests).

use std::net::{Ipv4Addr, SocketAddrV4};

/// The DNS-SD service type of a site's peers' listeners.
pub const SERVICE: &str = "_stead-peer._tcp.local";
/// mDNS's port.
pub const PORT: u16 = 5353;
/// mDNS's IPv4 group.
pub const GROUP: Ipv4Addr = Ipv4Addr::new(224, 0, 0, 251);
/// The TTL of the records a device answers with: RFC 6762's for records
/// that name a host (120 s). A device asks again before it runs out.
pub const TTL: u32 = 120;
/// The TTL of an answer to a legacy (one-shot, not port 5353) query
/// (RFC 6762 6.7: at most 10 s).
pub const LEGACY_TTL: u32 = 10;

const A: u16 = 1;
const PTR: u16 = 12;
const TXT: u16 = 16;
const SRV: u16 = 33;
const ANY: u16 = 255;
const IN: u16 = 1;
/// The top bit of a record's class: the record is unique (cache flush);
/// of a question's: a unicast answer is asked for.
const TOP: u16 = 0x8000;
/// How many compression pointers one name may follow.
const MAX_JUMPS: usize = 16;
/// The most labels a name read may have.
const MAX_LABELS: usize = 64;

/// A device's listener, as it is answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listener {
    /// The instance's label: the node ID.
    pub instance: String,
    /// Where it listens.
    pub at: SocketAddrV4,
}

impl Listener {
    /// The host label its SRV names (`stead-<node>`, dots made dashes,
    /// at most 63 bytes).
    fn host(&self) -> String {
        let mut h: String = format!("stead-{}", self.instance.replace('.', "-"));
        h.truncate(63);
        h
    }
}

/// A question read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Question {
    pub name: Vec<String>,
    pub qtype: u16,
}

/// A record read, with what this module uses of its data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    pub name: Vec<String>,
    pub ttl: u32,
    pub data: Data,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Data {
    Ptr(Vec<String>),
    Srv { port: u16, target: Vec<String> },
    A(Ipv4Addr),
    Other,
}

/// A message read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    pub id: u16,
    pub response: bool,
    pub questions: Vec<Question>,
    /// Answers, authority and additional records, in that order.
    pub records: Vec<Record>,
}

/// A listener a response names: its instance, where it listens, and for
/// how long (0: it is gone).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Found {
    pub instance: String,
    pub at: SocketAddrV4,
    pub ttl: u32,
}

fn labels(name: &str) -> Vec<String> {
    name.split('.').map(str::to_string).collect()
}

fn same(a: &[String], b: &[String]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.eq_ignore_ascii_case(y))
}

fn service() -> Vec<String> {
    labels(SERVICE)
}

fn put_name(out: &mut Vec<u8>, name: &[String]) {
    for l in name {
        let b = l.as_bytes();
        let n = b.len().min(63);
        out.push(n as u8);
        out.extend_from_slice(&b[..n]);
    }
    out.push(0);
}

fn put_u16(out: &mut Vec<u8>, v: u16) {
    out.extend_from_slice(&v.to_be_bytes());
}

fn put_record(out: &mut Vec<u8>, name: &[String], rtype: u16, class: u16, ttl: u32, data: &[u8]) {
    put_name(out, name);
    put_u16(out, rtype);
    put_u16(out, class);
    out.extend_from_slice(&ttl.to_be_bytes());
    put_u16(out, data.len() as u16);
    out.extend_from_slice(data);
}

fn header(id: u16, flags: u16, qd: u16, an: u16, ar: u16) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    for v in [id, flags, qd, an, 0, ar] {
        put_u16(&mut out, v);
    }
    out
}

/// The query for the site's peers' listeners (a PTR question for
/// [`SERVICE`], answered by multicast).
pub fn query() -> Vec<u8> {
    let mut out = header(0, 0, 1, 0, 0);
    put_name(&mut out, &service());
    put_u16(&mut out, PTR);
    put_u16(&mut out, IN);
    out
}

/// The answer that names `l`: to the link (`legacy` none), or to a
/// legacy query's asker (its id and question echoed, a short TTL). A
/// `ttl` of 0 says the listener is gone.
pub fn answer(l: &Listener, ttl: u32, legacy: Option<u16>) -> Vec<u8> {
    let svc = service();
    let mut instance = vec![l.instance.clone()];
    instance.extend(svc.iter().cloned());
    let host = vec![l.host(), "local".to_string()];
    let (id, ttl, unique) = match legacy {
        Some(id) => (id, ttl.min(LEGACY_TTL), IN),
        None => (0, ttl, IN | TOP),
    };
    let mut out = header(id, 0x8400, u16::from(legacy.is_some()), 1, 3);
    if legacy.is_some() {
        put_name(&mut out, &svc);
        put_u16(&mut out, PTR);
        put_u16(&mut out, IN);
    }
    let mut ptr = Vec::new();
    put_name(&mut ptr, &instance);
    put_record(&mut out, &svc, PTR, IN, ttl, &ptr);
    let mut srv = Vec::new();
    put_u16(&mut srv, 0);
    put_u16(&mut srv, 0);
    put_u16(&mut srv, l.at.port());
    put_name(&mut srv, &host);
    put_record(&mut out, &instance, SRV, unique, ttl, &srv);
    put_record(&mut out, &instance, TXT, unique, ttl, &[0]);
    put_record(&mut out, &host, A, unique, ttl, &l.at.ip().octets());
    out
}

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], String> {
        let end = self.at.checked_add(n).filter(|e| *e <= self.b.len());
        let end = end.ok_or_else(|| format!("ends inside a field at byte {}", self.at))?;
        let s = &self.b[self.at..end];
        self.at = end;
        Ok(s)
    }

    fn u16(&mut self) -> Result<u16, String> {
        let s = self.take(2)?;
        Ok(u16::from_be_bytes([s[0], s[1]]))
    }

    fn u32(&mut self) -> Result<u32, String> {
        let s = self.take(4)?;
        Ok(u32::from_be_bytes([s[0], s[1], s[2], s[3]]))
    }

    /// A name at the cursor, following compression pointers (each to an
    /// earlier byte than the label that holds it, at most
    /// [`MAX_JUMPS`]).
    fn name(&mut self) -> Result<Vec<String>, String> {
        let mut out = Vec::new();
        let mut at = self.at;
        let mut jumps = 0;
        let mut resume = None;
        loop {
            let len = *self
                .b
                .get(at)
                .ok_or_else(|| format!("a name runs past the end at byte {at}"))?;
            match len {
                0 => {
                    at += 1;
                    break;
                }
                l if l & 0xC0 == 0xC0 => {
                    let lo = *self
                        .b
                        .get(at + 1)
                        .ok_or_else(|| format!("a name's pointer is cut at byte {at}"))?;
                    let to = (usize::from(l & 0x3F) << 8) | usize::from(lo);
                    jumps += 1;
                    if to >= at || jumps > MAX_JUMPS {
                        return Err(format!("a name's pointer at byte {at} loops"));
                    }
                    resume.get_or_insert(at + 2);
                    at = to;
                }
                l if l & 0xC0 != 0 => return Err(format!("a label type at byte {at} is unknown")),
                l => {
                    let l = usize::from(l);
                    let s = self
                        .b
                        .get(at + 1..at + 1 + l)
                        .ok_or_else(|| format!("a label runs past the end at byte {at}"))?;
                    out.push(String::from_utf8_lossy(s).into_owned());
                    if out.len() > MAX_LABELS {
                        return Err(format!("a name at byte {at} has too many labels"));
                    }
                    at += 1 + l;
                }
            }
        }
        self.at = resume.unwrap_or(at);
        Ok(out)
    }
}

/// Reads a message; the error says where it is wrong.
pub fn read(b: &[u8]) -> Result<Message, String> {
    let mut r = Reader { b, at: 0 };
    let id = r.u16()?;
    let flags = r.u16()?;
    let counts = [r.u16()?, r.u16()?, r.u16()?, r.u16()?];
    let mut questions = Vec::new();
    for _ in 0..counts[0] {
        let name = r.name()?;
        let qtype = r.u16()?;
        r.u16()?;
        questions.push(Question { name, qtype });
    }
    let mut records = Vec::new();
    let total = u32::from(counts[1]) + u32::from(counts[2]) + u32::from(counts[3]);
    for _ in 0..total {
        let name = r.name()?;
        let rtype = r.u16()?;
        let _class = r.u16()?;
        let ttl = r.u32()?;
        let len = usize::from(r.u16()?);
        let start = r.at;
        r.take(len)?;
        let end = r.at;
        r.at = start;
        let data = match rtype {
            PTR => Data::Ptr(r.name()?),
            SRV => {
                r.u16()?;
                r.u16()?;
                let port = r.u16()?;
                Data::Srv {
                    port,
                    target: r.name()?,
                }
            }
            A if len == 4 => {
                let s = r.take(4)?;
                Data::A(Ipv4Addr::new(s[0], s[1], s[2], s[3]))
            }
            _ => Data::Other,
        };
        if r.at > end {
            return Err(format!(
                "a record's data runs past its length at byte {start}"
            ));
        }
        r.at = end;
        records.push(Record { name, ttl, data });
    }
    Ok(Message {
        id,
        response: flags & 0x8000 != 0,
        questions,
        records,
    })
}

impl Message {
    /// Whether it is a query that asks for the site's peers' listeners.
    pub fn asks_for_peers(&self) -> bool {
        let svc = service();
        !self.response
            && self
                .questions
                .iter()
                .any(|q| matches!(q.qtype, PTR | ANY) && same(&q.name, &svc))
    }

    /// The listeners a response names, each whole: a PTR from
    /// [`SERVICE`] to an instance, the instance's SRV, and its target's
    /// A in the same message, or else `from` (the address it came from).
    /// The TTL is the least of the PTR's and the SRV's.
    pub fn found(&self, from: Ipv4Addr) -> Vec<Found> {
        if !self.response {
            return Vec::new();
        }
        let svc = service();
        let mut out: Vec<Found> = Vec::new();
        for r in &self.records {
            let Data::Ptr(instance) = &r.data else {
                continue;
            };
            if !same(&r.name, &svc) || instance.len() != svc.len() + 1 {
                continue;
            }
            if !same(&instance[1..], &svc) {
                continue;
            }
            let srv = self.records.iter().find_map(|s| match &s.data {
                Data::Srv { port, target } if same(&s.name, instance) => {
                    Some((*port, target, s.ttl))
                }
                _ => None,
            });
            let Some((port, target, srv_ttl)) = srv else {
                continue;
            };
            if port == 0 {
                continue;
            }
            let ip = self
                .records
                .iter()
                .find_map(|a| match a.data {
                    Data::A(ip) if same(&a.name, target) => Some(ip),
                    _ => None,
                })
                .unwrap_or(from);
            if ip.is_unspecified() || ip.is_multicast() || ip.is_broadcast() {
                continue;
            }
            let f = Found {
                instance: instance[0].clone(),
                at: SocketAddrV4::new(ip, port),
                ttl: r.ttl.min(srv_ttl),
            };
            if !out.contains(&f) {
                out.push(f);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listener(node: &str, ip: [u8; 4], port: u16) -> Listener {
        Listener {
            instance: node.into(),
            at: SocketAddrV4::new(ip.into(), port),
        }
    }

    fn found(node: &str, ip: [u8; 4], port: u16, ttl: u32) -> Found {
        Found {
            instance: node.into(),
            at: SocketAddrV4::new(ip.into(), port),
            ttl,
        }
    }

    const FROM: Ipv4Addr = Ipv4Addr::new(192, 168, 1, 9);

    #[test]
    fn an_answer_is_read_back_as_the_listener_it_names() {
        let l = listener("till-3", [192, 168, 1, 12], 7412);
        let m = read(&answer(&l, TTL, None)).unwrap();
        assert!(m.response && !m.asks_for_peers());
        assert_eq!(
            m.found(FROM),
            [found("till-3", [192, 168, 1, 12], 7412, TTL)]
        );
        // Gone: TTL 0.
        let m = read(&answer(&l, 0, None)).unwrap();
        assert_eq!(m.found(FROM), [found("till-3", [192, 168, 1, 12], 7412, 0)]);
        // A legacy asker gets its id, its question, a short TTL.
        let m = read(&answer(&l, TTL, Some(77))).unwrap();
        assert_eq!((m.id, m.questions.len()), (77, 1));
        assert_eq!(m.found(FROM)[0].ttl, LEGACY_TTL);
        // A node ID with dots is one label; its host is dashed.
        let l = listener("shop.till.3", [10, 0, 0, 2], 7000);
        let m = read(&answer(&l, TTL, None)).unwrap();
        assert_eq!(
            m.found(FROM),
            [found("shop.till.3", [10, 0, 0, 2], 7000, TTL)]
        );
        assert!(m.records.iter().any(|r| r.name[0] == "stead-shop-till-3"));
    }

    #[test]
    fn the_query_asks_for_the_service_and_only_it_is_answered() {
        let m = read(&query()).unwrap();
        assert!(!m.response && m.asks_for_peers());
        assert!(m.found(FROM).is_empty());
        // Another service's question, or an A question for ours: not ours.
        let mut other = header(0, 0, 1, 0, 0);
        put_name(&mut other, &labels("_http._tcp.local"));
        put_u16(&mut other, PTR);
        put_u16(&mut other, IN | TOP);
        assert!(!read(&other).unwrap().asks_for_peers());
        let mut a = header(0, 0, 1, 0, 0);
        put_name(&mut a, &labels("_STEAD-peer._tcp.LOCAL"));
        put_u16(&mut a, ANY);
        put_u16(&mut a, IN | TOP);
        assert!(read(&a).unwrap().asks_for_peers(), "names are caseless");
        let mut a = header(0, 0, 1, 0, 0);
        put_name(&mut a, &service());
        put_u16(&mut a, A);
        put_u16(&mut a, IN);
        assert!(!read(&a).unwrap().asks_for_peers());
    }

    /// A response as Avahi and python-zeroconf write them: names
    /// compressed by pointers to earlier ones.
    fn compressed(with_a: bool, port: u16) -> Vec<u8> {
        let mut b = header(0, 0x8400, 0, 1, if with_a { 2 } else { 1 });
        let svc_at = b.len();
        put_name(&mut b, &service());
        put_u16(&mut b, PTR);
        put_u16(&mut b, IN);
        b.extend_from_slice(&4500u32.to_be_bytes());
        // "box-1" + pointer to the service name.
        put_u16(&mut b, 8);
        let inst_at = b.len();
        b.push(5);
        b.extend_from_slice(b"box-1");
        put_u16(&mut b, 0xC000 | svc_at as u16);
        // SRV named by a pointer to the instance.
        put_u16(&mut b, 0xC000 | inst_at as u16);
        put_u16(&mut b, SRV);
        put_u16(&mut b, IN | TOP);
        b.extend_from_slice(&120u32.to_be_bytes());
        put_u16(&mut b, 6 + 6);
        put_u16(&mut b, 0);
        put_u16(&mut b, 0);
        put_u16(&mut b, port);
        let host_at = b.len();
        b.push(3);
        b.extend_from_slice(b"box");
        // ".local": a pointer to the service name's last label.
        put_u16(&mut b, 0xC000 | (svc_at + 1 + 11 + 1 + 4) as u16);
        if with_a {
            put_u16(&mut b, 0xC000 | host_at as u16);
            put_u16(&mut b, A);
            put_u16(&mut b, IN | TOP);
            b.extend_from_slice(&120u32.to_be_bytes());
            put_u16(&mut b, 4);
            b.extend_from_slice(&[10, 1, 2, 3]);
        }
        b
    }

    #[test]
    fn compressed_names_are_followed_and_a_missing_a_is_the_sender() {
        let m = read(&compressed(true, 7000)).unwrap();
        assert_eq!(m.found(FROM), [found("box-1", [10, 1, 2, 3], 7000, 120)]);
        let m = read(&compressed(false, 7000)).unwrap();
        assert_eq!(m.found(FROM), [found("box-1", [192, 168, 1, 9], 7000, 120)]);
        // Port 0 names no listener.
        assert!(read(&compressed(true, 0)).unwrap().found(FROM).is_empty());
    }

    #[test]
    fn a_broken_message_is_refused_naming_where() {
        let good = compressed(true, 7000);
        for (bytes, says) in [
            (good[..5].to_vec(), "ends inside"),
            (good[..good.len() - 2].to_vec(), "ends inside"),
            // A pointer to itself.
            (
                {
                    let mut b = header(0, 0x8400, 0, 1, 0);
                    put_u16(&mut b, 0xC00C);
                    b
                },
                "loops",
            ),
            (
                {
                    let mut b = header(0, 0x8400, 1, 0, 0);
                    b.push(0x80);
                    b
                },
                "label type",
            ),
        ] {
            let e = read(&bytes).unwrap_err();
            assert!(e.contains(says), "{e} lacks {says}");
        }
        // Every cut of a good message is refused or read, never a panic.
        for n in 0..good.len() {
            let _ = read(&good[..n]);
        }
    }

    #[test]
    fn records_of_other_services_or_incomplete_ones_name_nothing() {
        let l = listener("a", [10, 0, 0, 2], 7412);
        let mut m = read(&answer(&l, TTL, None)).unwrap();
        m.records.retain(|r| !matches!(r.data, Data::Srv { .. }));
        assert!(m.found(FROM).is_empty(), "no SRV");
        let mut m = read(&answer(&l, TTL, None)).unwrap();
        for r in &mut m.records {
            if let Data::Ptr(p) = &mut r.data {
                p[1] = "_http".into();
            }
        }
        assert!(m.found(FROM).is_empty(), "another service");
    }
}
