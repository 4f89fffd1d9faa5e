//! A subscriber to one topic of an MQTT 3.1.1 broker, over TCP or TLS
//! (the agent's TLS configuration: its CA, its client certificate, its
//! time floor): connect, subscribe, then the messages as they come, the
//! connection kept alive by PINGREQ and given up when the broker goes
//! silent. The packets are the core's ([`crate::model::mqtt`]); what a
//! message means is the caller's.

use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::time::Instant;

use crate::model::mqtt::{self, Broker, Connect, Packet};

/// How long connecting, the TLS handshake and each answer to CONNECT and
/// SUBSCRIBE may take.
pub const STEP: Duration = Duration::from_secs(15);

trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

/// A message published on the topic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    pub topic: String,
    pub payload: Vec<u8>,
}

/// A connection subscribed to its topic.
pub struct Subscribed {
    io: Box<dyn Io>,
    buf: Vec<u8>,
    keep_alive: Duration,
    /// When this client last sent a packet.
    sent: Instant,
    /// When the broker last sent one.
    heard: Instant,
}

fn io_error(what: &str, e: std::io::Error) -> String {
    format!("{what}: {e}")
}

/// Connects to `broker` by `http`'s connector (over TLS, with its CA,
/// client certificate and time floor, when it is `mqtts://`), sends
/// `connect`, and subscribes to `topic`. The error says which step
/// failed and why (a refusal names the broker's reason; never the
/// password).
pub async fn subscribe(
    broker: &Broker,
    http: &crate::net::http::Http,
    connect: &Connect<'_>,
    topic: &str,
) -> Result<Subscribed, String> {
    let scheme = if broker.tls { "https" } else { "http" };
    let host = if broker.host.contains(':') {
        format!("[{}]", broker.host)
    } else {
        broker.host.clone()
    };
    let uri: http::Uri = format!("{scheme}://{host}:{}/", broker.port)
        .parse()
        .map_err(|_| format!("{broker}: not a host and port"))?;
    let io = tokio::time::timeout(STEP, http.stream(uri))
        .await
        .map_err(|_| format!("{broker}: no connection within {} s", STEP.as_secs()))?
        .map_err(|e| format!("{broker}: {e}"))?;
    let io: Box<dyn Io> = Box::new(io);
    let now = Instant::now();
    let mut s = Subscribed {
        io,
        buf: Vec::new(),
        keep_alive: Duration::from_secs(u64::from(connect.keep_alive.max(1))),
        sent: now,
        heard: now,
    };
    s.send(&mqtt::connect(connect)).await?;
    match s.answer().await? {
        Packet::ConnAck { code: 0 } => {}
        Packet::ConnAck { code } => {
            return Err(format!(
                "{broker} refused the connection: {} ({code})",
                mqtt::refusal(code)
            ));
        }
        _ => return Err(format!("{broker} answered CONNECT with another packet")),
    }
    s.send(&mqtt::subscribe(1, topic)).await?;
    match s.answer().await? {
        Packet::SubAck { id: 1, granted } if granted.first().is_some_and(|g| *g < 0x80) => {}
        Packet::SubAck { .. } => {
            return Err(format!("{broker} refused the subscription to {topic:?}"));
        }
        _ => return Err(format!("{broker} answered SUBSCRIBE with another packet")),
    }
    Ok(s)
}

impl Subscribed {
    async fn send(&mut self, bytes: &[u8]) -> Result<(), String> {
        self.io
            .write_all(bytes)
            .await
            .map_err(|e| io_error("sending", e))?;
        self.io.flush().await.map_err(|e| io_error("sending", e))?;
        self.sent = Instant::now();
        Ok(())
    }

    /// The next packet, waiting at most `until`.
    async fn packet(&mut self, until: Instant) -> Result<Option<Packet>, String> {
        loop {
            if let Some((p, n)) = mqtt::read(&self.buf)? {
                self.buf.drain(..n);
                self.heard = Instant::now();
                return Ok(Some(p));
            }
            let mut chunk = [0u8; 4096];
            let n = match tokio::time::timeout_at(until, self.io.read(&mut chunk)).await {
                Err(_) => return Ok(None),
                Ok(r) => r.map_err(|e| io_error("receiving", e))?,
            };
            if n == 0 {
                return Err("the broker closed the connection".into());
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    /// The answer to what was just sent, within [`STEP`].
    async fn answer(&mut self) -> Result<Packet, String> {
        self.packet(Instant::now() + STEP)
            .await?
            .ok_or_else(|| format!("no answer within {} s", STEP.as_secs()))
    }

    /// The next message on the topic. Keeps the connection alive
    /// (PINGREQ when this client sent nothing for its keep-alive) and
    /// gives it up when the broker sent nothing for one and a half of
    /// them (MQTT 3.1.1 3.1.2.10).
    pub async fn next(&mut self) -> Result<Message, String> {
        loop {
            let ping_at = self.sent + self.keep_alive;
            let dead_at = self.heard + self.keep_alive + self.keep_alive / 2;
            match self.packet(ping_at.min(dead_at)).await? {
                Some(Packet::Publish {
                    topic,
                    payload,
                    qos,
                    id,
                }) => {
                    if let (1, Some(id)) = (qos, id) {
                        self.send(&mqtt::puback(id)).await?;
                    }
                    return Ok(Message { topic, payload });
                }
                Some(_) => {}
                None => {
                    let now = Instant::now();
                    if now >= dead_at {
                        return Err(format!(
                            "the broker sent nothing for {} s",
                            (self.keep_alive + self.keep_alive / 2).as_secs()
                        ));
                    }
                    if now >= ping_at {
                        self.send(&mqtt::pingreq()).await?;
                    }
                }
            }
        }
    }

    /// Says goodbye (DISCONNECT), best effort.
    pub async fn close(mut self) {
        let _ = tokio::time::timeout(Duration::from_secs(1), self.send(&mqtt::disconnect())).await;
    }
}
