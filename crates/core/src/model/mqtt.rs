//! The MQTT 3.1.1 packets (OASIS standard, 2014) a subscriber to one
//! topic needs: CONNECT, SUBSCRIBE, PINGREQ, PUBACK and DISCONNECT
//! written, and what a broker sends read from a byte stream as it comes
//! (CONNACK, SUBACK, PUBLISH, PINGRESP), each bounded. Pure: the
//! connection is the device's (`crate::plane::nudge` there).
//!
//! Nothing here is trusted: what a broker carries is a hint
//! ([`crate::plane::nudge`]).

/// The most bytes of one packet read ([`read`]'s bound): a hint is a few
/// tens of bytes; a packet over this is refused, never buffered.
pub const MAX_PACKET: usize = 16 << 10;
/// The most bytes of a topic, a client ID, a user name or a password
/// written (MQTT's strings are 16-bit lengths).
pub const MAX_STRING: usize = u16::MAX as usize;

const CONNECT: u8 = 1;
const CONNACK: u8 = 2;
const PUBLISH: u8 = 3;
const PUBACK: u8 = 4;
const SUBSCRIBE: u8 = 8;
const SUBACK: u8 = 9;
const PINGREQ: u8 = 12;
const PINGRESP: u8 = 13;
const DISCONNECT: u8 = 14;

/// Where a broker is: `mqtt://host[:port]` (1883) or
/// `mqtts://host[:port]` (8883, over TLS).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Broker {
    pub tls: bool,
    /// A name, an IPv4 address, or an IPv6 address without brackets.
    pub host: String,
    pub port: u16,
}

impl std::str::FromStr for Broker {
    type Err = String;

    fn from_str(s: &str) -> Result<Broker, String> {
        let shown = crate::model::url::without_userinfo(s);
        let bad = |why: &str| format!("{shown:?} is not a broker's URL (mqtts://host:8883): {why}");
        let (tls, rest) = if let Some(r) = s.strip_prefix("mqtts://") {
            (true, r)
        } else if let Some(r) = s.strip_prefix("mqtt://") {
            (false, r)
        } else {
            return Err(bad("mqtt:// or mqtts://"));
        };
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        if rest.contains(['/', '@', '?', '#']) || rest.is_empty() {
            return Err(bad(
                "a host and a port alone (credentials go in their own keys)",
            ));
        }
        let (host, port) = if let Some(v6) = rest.strip_prefix('[') {
            let (h, p) = v6.split_once(']').ok_or_else(|| bad("an unclosed ["))?;
            (h, p.strip_prefix(':'))
        } else {
            match rest.rsplit_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (rest, None),
            }
        };
        let port = match port {
            None => {
                if tls {
                    8883
                } else {
                    1883
                }
            }
            Some(p) => p
                .parse::<u16>()
                .ok()
                .filter(|p| *p > 0)
                .ok_or_else(|| bad("the port is 1 to 65535"))?,
        };
        let host_ok = !host.is_empty()
            && host
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b':'));
        if !host_ok {
            return Err(bad("the host"));
        }
        Ok(Broker {
            tls,
            host: host.to_string(),
            port,
        })
    }
}

impl std::fmt::Display for Broker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let scheme = if self.tls { "mqtts" } else { "mqtt" };
        if self.host.contains(':') {
            write!(f, "{scheme}://[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{scheme}://{}:{}", self.host, self.port)
        }
    }
}

/// How a client connects.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Connect<'a> {
    pub client_id: &'a str,
    pub username: Option<&'a str>,
    pub password: Option<&'a [u8]>,
    /// Seconds; the client sends something at least this often.
    pub keep_alive: u16,
}

/// A packet read from a broker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Packet {
    /// The answer to CONNECT: 0 accepted, else refused ([`refusal`]).
    ConnAck {
        code: u8,
    },
    /// The answer to SUBSCRIBE: the QoS granted per filter, 0x80 a
    /// refusal.
    SubAck {
        id: u16,
        granted: Vec<u8>,
    },
    Publish {
        topic: String,
        payload: Vec<u8>,
        qos: u8,
        /// QoS 1 and 2 only.
        id: Option<u16>,
    },
    PingResp,
    /// Anything else a broker may send (PUBREL, UNSUBACK…): its type.
    Other(u8),
}

/// What a CONNACK's code says.
pub fn refusal(code: u8) -> &'static str {
    match code {
        0 => "accepted",
        1 => "the broker does not speak MQTT 3.1.1",
        2 => "the client ID is refused",
        3 => "the broker is unavailable",
        4 => "the user name or password is refused",
        5 => "not authorized",
        _ => "an unknown refusal",
    }
}

fn put_len(out: &mut Vec<u8>, mut n: usize) {
    loop {
        let mut b = (n % 128) as u8;
        n /= 128;
        if n > 0 {
            b |= 0x80;
        }
        out.push(b);
        if n == 0 {
            break;
        }
    }
}

fn put_str(out: &mut Vec<u8>, s: &[u8]) {
    let s = &s[..s.len().min(MAX_STRING)];
    out.extend_from_slice(&(s.len() as u16).to_be_bytes());
    out.extend_from_slice(s);
}

fn packet(first: u8, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() + 5);
    out.push(first);
    put_len(&mut out, body.len());
    out.extend_from_slice(body);
    out
}

/// CONNECT, with a clean session (a subscriber that reconnects asks
/// again; nothing queued for it while away is wanted).
pub fn connect(c: &Connect) -> Vec<u8> {
    let mut body = Vec::new();
    put_str(&mut body, b"MQTT");
    body.push(4);
    let mut flags = 0x02;
    if c.username.is_some() {
        flags |= 0x80;
        if c.password.is_some() {
            flags |= 0x40;
        }
    }
    body.push(flags);
    body.extend_from_slice(&c.keep_alive.to_be_bytes());
    put_str(&mut body, c.client_id.as_bytes());
    if let Some(u) = c.username {
        put_str(&mut body, u.as_bytes());
        if let Some(p) = c.password {
            put_str(&mut body, p);
        }
    }
    packet(CONNECT << 4, &body)
}

/// SUBSCRIBE to `topic` at QoS 0 (a hint lost is the next poll's).
pub fn subscribe(id: u16, topic: &str) -> Vec<u8> {
    let mut body = id.to_be_bytes().to_vec();
    put_str(&mut body, topic.as_bytes());
    body.push(0);
    packet((SUBSCRIBE << 4) | 0x02, &body)
}

pub fn pingreq() -> Vec<u8> {
    packet(PINGREQ << 4, &[])
}

pub fn puback(id: u16) -> Vec<u8> {
    packet(PUBACK << 4, &id.to_be_bytes())
}

pub fn disconnect() -> Vec<u8> {
    packet(DISCONNECT << 4, &[])
}

/// Whether `topic` is one this client may subscribe to: 1 to 65,535
/// bytes, no NUL, and wildcards only as whole levels (`+`, a last `#`).
pub fn check_topic(topic: &str) -> Result<(), String> {
    if topic.is_empty() || topic.len() > MAX_STRING || topic.contains('\0') {
        return Err(format!("{topic:?} is not an MQTT topic"));
    }
    let levels: Vec<&str> = topic.split('/').collect();
    for (i, l) in levels.iter().enumerate() {
        let wild = l.contains(['+', '#']);
        let ok = !wild || *l == "+" || (*l == "#" && i == levels.len() - 1);
        if !ok {
            return Err(format!(
                "{topic:?}: a wildcard is a whole level (a/+/b, a/#)"
            ));
        }
    }
    Ok(())
}

/// The first packet in `buf`, and how many bytes it took; `None` while
/// it has not all come. The error says what is wrong (the connection is
/// then closed).
pub fn read(buf: &[u8]) -> Result<Option<(Packet, usize)>, String> {
    let Some(&first) = buf.first() else {
        return Ok(None);
    };
    // The remaining length: at most four bytes of seven bits.
    let mut len = 0usize;
    let mut at = 1;
    loop {
        let Some(&b) = buf.get(at) else {
            return Ok(None);
        };
        len |= usize::from(b & 0x7F) << (7 * (at - 1));
        at += 1;
        if b & 0x80 == 0 {
            break;
        }
        if at > 4 {
            return Err("a packet's length runs over four bytes".into());
        }
    }
    if len > MAX_PACKET {
        return Err(format!(
            "a packet of {len} bytes is over the {MAX_PACKET} taken"
        ));
    }
    let Some(body) = buf.get(at..at + len) else {
        return Ok(None);
    };
    let kind = first >> 4;
    let short = |what: &str| format!("a {what} packet is cut short");
    let u16_at =
        |i: usize| -> Option<u16> { Some(u16::from_be_bytes([*body.get(i)?, *body.get(i + 1)?])) };
    let p = match kind {
        CONNACK => Packet::ConnAck {
            code: *body.get(1).ok_or_else(|| short("CONNACK"))?,
        },
        SUBACK => Packet::SubAck {
            id: u16_at(0).ok_or_else(|| short("SUBACK"))?,
            granted: body.get(2..).unwrap_or_default().to_vec(),
        },
        PUBLISH => {
            let qos = (first >> 1) & 0x03;
            if qos == 3 {
                return Err("a PUBLISH with QoS 3".into());
            }
            let tlen = usize::from(u16_at(0).ok_or_else(|| short("PUBLISH"))?);
            let topic = body.get(2..2 + tlen).ok_or_else(|| short("PUBLISH"))?;
            let topic = std::str::from_utf8(topic)
                .map_err(|_| "a PUBLISH's topic is not UTF-8".to_string())?
                .to_string();
            let mut rest = 2 + tlen;
            let id = if qos > 0 {
                let id = u16_at(rest).ok_or_else(|| short("PUBLISH"))?;
                rest += 2;
                Some(id)
            } else {
                None
            };
            Packet::Publish {
                topic,
                payload: body.get(rest..).unwrap_or_default().to_vec(),
                qos,
                id,
            }
        }
        PINGRESP => Packet::PingResp,
        k => Packet::Other(k),
    };
    Ok(Some((p, at + len)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connect_is_written_as_the_standard_s_example_reads() {
        // MQTT 3.1.1 3.1: protocol name, level 4, flags, keep alive,
        // then the payload's strings in order.
        let c = connect(&Connect {
            client_id: "stead-a",
            username: Some("u"),
            password: Some(b"pw"),
            keep_alive: 60,
        });
        let mut want = vec![0x10, 26, 0, 4, b'M', b'Q', b'T', b'T', 4, 0xC2, 0, 60];
        want.extend_from_slice(&[0, 7]);
        want.extend_from_slice(b"stead-a");
        want.extend_from_slice(&[0, 1, b'u', 0, 2, b'p', b'w']);
        assert_eq!(c, want);
        // No user name: no password either, clean session alone.
        let c = connect(&Connect {
            client_id: "x",
            username: None,
            password: Some(b"pw"),
            keep_alive: 30,
        });
        assert_eq!(c[9], 0x02);
        assert_eq!(
            subscribe(1, "stead/nudge"),
            [&[0x82, 16, 0, 1, 0, 11][..], b"stead/nudge", &[0]].concat()
        );
        assert_eq!(pingreq(), [0xC0, 0]);
        assert_eq!(puback(7), [0x40, 2, 0, 7]);
        assert_eq!(disconnect(), [0xE0, 0]);
    }

    #[test]
    fn packets_are_read_as_they_come_and_bounded() {
        // (bytes, what is read)
        let publish0 = [&[0x30, 7, 0, 1, b't'][..], b"poll"].concat();
        let publish1 = [&[0x32, 9, 0, 1, b't', 0, 5][..], b"poll"].concat();
        for (bytes, want) in [
            (vec![0x20, 2, 0, 0], Some((Packet::ConnAck { code: 0 }, 4))),
            (vec![0x20, 2, 0, 5], Some((Packet::ConnAck { code: 5 }, 4))),
            (
                vec![0x90, 3, 0, 1, 0],
                Some((
                    Packet::SubAck {
                        id: 1,
                        granted: vec![0],
                    },
                    5,
                )),
            ),
            (
                publish0.clone(),
                Some((
                    Packet::Publish {
                        topic: "t".into(),
                        payload: b"poll".to_vec(),
                        qos: 0,
                        id: None,
                    },
                    9,
                )),
            ),
            (
                publish1,
                Some((
                    Packet::Publish {
                        topic: "t".into(),
                        payload: b"poll".to_vec(),
                        qos: 1,
                        id: Some(5),
                    },
                    11,
                )),
            ),
            (vec![0xD0, 0], Some((Packet::PingResp, 2))),
            (vec![0x62, 2, 0, 1], Some((Packet::Other(6), 4))),
            // Not all here yet.
            (vec![], None),
            (vec![0x30], None),
            (vec![0x30, 0x80], None),
            (publish0[..8].to_vec(), None),
        ] {
            assert_eq!(read(&bytes).unwrap(), want, "{bytes:?}");
        }
        // Two in one read: the first, and where the second starts.
        let two = [&[0xD0, 0][..], &[0x20, 2, 0, 0]].concat();
        let (p, n) = read(&two).unwrap().unwrap();
        assert_eq!((p, n), (Packet::PingResp, 2));
        assert_eq!(
            read(&two[n..]).unwrap().unwrap().0,
            Packet::ConnAck { code: 0 }
        );
        // (bytes, what the error says)
        for (bytes, says) in [
            (vec![0x30, 0xFF, 0xFF, 0xFF, 0xFF, 1], "four bytes"),
            (vec![0x30, 0x81, 0x80, 0x01], "over the"),
            (vec![0x36, 2, 0, 0], "QoS 3"),
            (vec![0x30, 3, 0, 5, b't'], "cut short"),
            (vec![0x30, 3, 0, 1, 0xFF], "UTF-8"),
            (vec![0x20, 1, 0], "cut short"),
        ] {
            let e = read(&bytes).unwrap_err();
            assert!(e.contains(says), "{bytes:?}: {e}");
        }
    }

    #[test]
    fn a_remaining_length_is_written_in_seven_bit_groups() {
        for (n, want) in [
            (0usize, vec![0u8]),
            (127, vec![0x7F]),
            (128, vec![0x80, 0x01]),
            (16_383, vec![0xFF, 0x7F]),
            (16_384, vec![0x80, 0x80, 0x01]),
        ] {
            let mut out = Vec::new();
            put_len(&mut out, n);
            assert_eq!(out, want, "{n}");
        }
    }

    #[test]
    fn a_broker_is_a_scheme_a_host_and_a_port() {
        for (url, want) in [
            ("mqtt://broker.lan", Ok(("broker.lan", 1883, false))),
            ("mqtts://broker.lan", Ok(("broker.lan", 8883, true))),
            ("mqtts://10.0.0.1:9000/", Ok(("10.0.0.1", 9000, true))),
            ("mqtt://[fd00::1]:1884", Ok(("fd00::1", 1884, false))),
            ("http://broker", Err("mqtt://")),
            ("mqtt://u:p@broker", Err("credentials")),
            ("mqtt://u:s3cret@broker", Err("\"mqtt://…@broker\"")),
            ("mqtt://broker/topic", Err("credentials")),
            ("mqtt://broker:0", Err("port")),
            ("mqtt://broker:x", Err("port")),
            ("mqtt://", Err("host")),
            ("mqtt://bro ker", Err("host")),
        ] {
            match (url.parse::<Broker>(), want) {
                (Ok(b), Ok((host, port, tls))) => {
                    assert_eq!((b.host.as_str(), b.port, b.tls), (host, port, tls));
                    assert_eq!(b.to_string().parse::<Broker>().unwrap(), b);
                }
                (Err(e), Err(says)) => assert!(e.contains(says), "{url}: {e}"),
                (got, want) => panic!("{url}: {got:?}, wanted {want:?}"),
            }
        }
    }

    #[test]
    fn topics_are_checked_as_the_broker_would() {
        for (t, ok) in [
            ("stead/nudge", true),
            ("stead/+/nudge", true),
            ("stead/#", true),
            ("#", true),
            ("", false),
            ("stead/#/x", false),
            ("stead/a+", false),
            ("a\0b", false),
        ] {
            assert_eq!(check_topic(t).is_ok(), ok, "{t}");
        }
    }
}
