//! Finding the site's peers by multicast DNS, and being found
//! (`[site] mdns = "<interface>"`, opt-in): on that one interface the
//! device asks for [`SERVICE`] when it starts and again before the
//! answers run out, takes each listener answered as a peer
//! ([`Peers::found`]) until its records run out or it says it is gone,
//! and, when it serves its site (`site.listen`), announces its own
//! listener when it starts and answers the questions for it (a legacy
//! one-shot asker such as `dig -p 5353` by unicast). On the way out it
//! says its listener is gone. The messages are
//! [`crate::model::mdns`]'s; this module owns the socket and the timing.
//!
//! It never stops the agent: an interface that is not there, or has no
//! IPv4 address yet, is tried again every [`RETRY`].

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::sync::Arc;
use std::time::Duration;

use socket2::{Domain, InterfaceIndexOrAddress, Protocol, Socket, Type};
use tokio::time::Instant;

use crate::model::mdns::{self, GROUP, Listener, PORT, SERVICE, TTL};
use crate::registry::peers::Peers;

/// How often the device asks again: before the answers' [`TTL`] runs
/// out (RFC 6762 5.2 asks again from 80 % of it).
pub const ASK: Duration = Duration::from_secs(100);
/// How long after a failure the interface is tried again.
pub const RETRY: Duration = Duration::from_secs(30);
/// The first questions after the start, then every [`ASK`].
const FIRST: [Duration; 3] = [
    Duration::ZERO,
    Duration::from_secs(1),
    Duration::from_secs(3),
];
/// The most bytes of an mDNS message (RFC 6762 17).
const MAX_MESSAGE: usize = 9000;
/// How long after a multicast answer the next is left out: the last
/// one is still in the askers' caches (RFC 6762 6).
const ANSWER_GAP: Duration = Duration::from_secs(1);

/// Who looks for peers on which interface, and what it answers.
pub struct Mdns {
    /// The interface.
    pub interface: String,
    /// This device's node ID: its instance's name.
    pub node: String,
    /// The port of its site listener, when it serves.
    pub port: Option<u16>,
    /// The listener's address when it was bound to one; otherwise the
    /// interface's is answered.
    pub address: Option<Ipv4Addr>,
    /// Where the peers found go.
    pub peers: Peers,
    pub metrics: Arc<crate::status::metrics::Metrics>,
}

/// Runs until aborted.
pub async fn run(m: Mdns) {
    let mut said = String::new();
    loop {
        let failed = match open(&m.interface) {
            Ok(opened) => {
                said.clear();
                m.session(opened).await
            }
            Err(e) => e,
        };
        // Said once, not every retry.
        if failed != said {
            tracing::warn!(
                "the site's peers are not looked for by mDNS on {}: {failed} (tried again every {} s)",
                m.interface,
                RETRY.as_secs()
            );
            said = failed;
        }
        tokio::time::sleep(RETRY).await;
    }
}

/// A socket open on the interface, and the interface's address.
struct Opened {
    socket: tokio::net::UdpSocket,
    /// A handle on the same socket to say "gone" from a drop.
    sync: std::net::UdpSocket,
    own: Ipv4Addr,
}

fn open(interface: &str) -> Result<Opened, String> {
    let index: u32 = std::fs::read_to_string(format!("/sys/class/net/{interface}/ifindex"))
        .ok()
        .and_then(|t| t.trim().parse().ok())
        .ok_or_else(|| "there is no such network interface".to_string())?;
    let own = own_address(interface)?;
    let e = |what: &str, e: std::io::Error| format!("{what}: {e}");
    let s =
        Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP)).map_err(|x| e("socket", x))?;
    // Beside another responder on the host (Avahi).
    s.set_reuse_address(true)
        .map_err(|x| e("SO_REUSEADDR", x))?;
    s.bind_device(Some(interface.as_bytes()))
        .map_err(|x| e("SO_BINDTODEVICE", x))?;
    s.bind(&SocketAddr::from((Ipv4Addr::UNSPECIFIED, PORT)).into())
        .map_err(|x| e("bind to port 5353", x))?;
    s.set_multicast_all_v4(false)
        .map_err(|x| e("IP_MULTICAST_ALL", x))?;
    s.join_multicast_v4_n(&GROUP, &InterfaceIndexOrAddress::Index(index))
        .map_err(|x| e("joining 224.0.0.251", x))?;
    s.set_multicast_if_v4(&own)
        .map_err(|x| e("IP_MULTICAST_IF", x))?;
    // RFC 6762 11: sent with an IP TTL of 255.
    s.set_multicast_ttl_v4(255)
        .map_err(|x| e("IP_MULTICAST_TTL", x))?;
    s.set_ttl_v4(255).map_err(|x| e("IP_TTL", x))?;
    s.set_nonblocking(true).map_err(|x| e("O_NONBLOCK", x))?;
    let std: std::net::UdpSocket = s.into();
    let sync = std.try_clone().map_err(|x| e("dup", x))?;
    let socket = tokio::net::UdpSocket::from_std(std).map_err(|x| e("socket", x))?;
    Ok(Opened { socket, sync, own })
}

/// The interface's IPv4 address: the source a datagram to the mDNS
/// group sent on it would have.
fn own_address(interface: &str) -> Result<Ipv4Addr, String> {
    let none = || "it has no IPv4 address".to_string();
    let s = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP))
        .map_err(|e| format!("socket: {e}"))?;
    s.bind_device(Some(interface.as_bytes()))
        .map_err(|e| format!("SO_BINDTODEVICE: {e}"))?;
    s.connect(&SocketAddr::from((GROUP, PORT)).into())
        .map_err(|_| none())?;
    let local = s.local_addr().map_err(|e| format!("local address: {e}"))?;
    local
        .as_socket_ipv4()
        .map(|a| *a.ip())
        .filter(|ip| !ip.is_unspecified())
        .ok_or_else(none)
}

/// Says the listener is gone when the session ends (the agent stops, or
/// the interface's address moved).
struct Goodbye {
    sync: std::net::UdpSocket,
    message: Option<Vec<u8>>,
}

impl Drop for Goodbye {
    fn drop(&mut self) {
        if let Some(m) = &self.message {
            let _ = self.sync.send_to(m, SocketAddrV4::new(GROUP, PORT));
        }
    }
}

impl Mdns {
    /// Asks and answers until the socket fails or the interface's
    /// address moves; says why.
    async fn session(&self, o: Opened) -> String {
        let listener = self.port.map(|port| Listener {
            instance: self.node.clone(),
            at: SocketAddrV4::new(self.address.unwrap_or(o.own), port),
        });
        let _goodbye = Goodbye {
            sync: o.sync,
            message: listener.as_ref().map(|l| mdns::answer(l, 0, None)),
        };
        tracing::info!(
            "looking for the site's peers by mDNS on {} ({}){}",
            self.interface,
            o.own,
            match &listener {
                Some(l) => format!(", answering {SERVICE} with {}", l.at),
                None => String::new(),
            }
        );
        let group = SocketAddr::from((GROUP, PORT));
        let start = Instant::now();
        let mut asked = 0;
        let mut next_ask = start;
        // The start's announcement, twice, a second apart (RFC 6762 8.3).
        let announce = listener.as_ref().map(|_| [start, start + ANSWER_GAP]);
        let mut announced = 0;
        let mut last_answer: Option<Instant> = None;
        let mut buf = vec![0u8; MAX_MESSAGE];
        loop {
            let next_announce = announce.and_then(|a| a.get(announced).copied());
            let wake = next_announce.map_or(next_ask, |a| a.min(next_ask));
            tokio::select! {
                () = tokio::time::sleep_until(wake) => {
                    let now = Instant::now();
                    if let (Some(l), Some(at)) = (&listener, next_announce)
                        && at <= now
                    {
                        if let Err(e) = o.socket.send_to(&mdns::answer(l, TTL, None), group).await {
                            return format!("sending: {e}");
                        }
                        last_answer = Some(now);
                        announced += 1;
                    }
                    if next_ask <= now {
                        if asked >= FIRST.len() {
                            // The address may have moved (a new lease).
                            match own_address(&self.interface) {
                                Ok(a) if a == o.own => {}
                                Ok(a) => return format!("its address moved from {} to {a}", o.own),
                                Err(e) => return e,
                            }
                        }
                        if let Err(e) = o.socket.send_to(&mdns::query(), group).await {
                            return format!("sending: {e}");
                        }
                        asked += 1;
                        next_ask = match FIRST.get(asked) {
                            Some(d) => start + *d,
                            None => now + ASK,
                        };
                        self.metrics.site_found(self.peers.found_count());
                    }
                }
                got = o.socket.recv_from(&mut buf) => {
                    let (n, from) = match got {
                        Ok(x) => x,
                        Err(e) => return format!("receiving: {e}"),
                    };
                    let SocketAddr::V4(from) = from else { continue };
                    let message = match mdns::read(&buf[..n]) {
                        Ok(m) => m,
                        Err(e) => {
                            tracing::debug!("an mDNS message from {from} is not read: {e}");
                            continue;
                        }
                    };
                    if let Some(l) = &listener
                        && message.asks_for_peers()
                    {
                        let sent = if from.port() != PORT {
                            // A legacy asker: to it alone.
                            o.socket.send_to(&mdns::answer(l, TTL, Some(message.id)), from).await
                        } else if last_answer.is_none_or(|t| t.elapsed() >= ANSWER_GAP) {
                            last_answer = Some(Instant::now());
                            o.socket.send_to(&mdns::answer(l, TTL, None), group).await
                        } else {
                            Ok(0)
                        };
                        if let Err(e) = sent {
                            return format!("sending: {e}");
                        }
                    }
                    self.take(&message, *from.ip());
                }
            }
        }
    }

    /// Takes the peers a message names (not this device).
    fn take(&self, message: &mdns::Message, from: Ipv4Addr) {
        let mut changed = false;
        for f in message.found(from) {
            if f.instance == self.node {
                continue;
            }
            let url = format!("http://{}", f.at);
            if self.peers.found(&url, f.ttl) {
                changed = true;
                if f.ttl == 0 {
                    tracing::info!(peer = %url, instance = %f.instance, "a peer found by mDNS is gone");
                } else {
                    tracing::info!(peer = %url, instance = %f.instance, "a peer found by mDNS");
                }
            }
        }
        if changed {
            self.metrics.site_found(self.peers.found_count());
        }
    }
}
