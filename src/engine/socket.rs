//! The engine's HTTP/1.1 on its unix socket: one connection per call (a
//! local socket opens in microseconds, and nothing pooled can be left
//! stale by an engine restart), every answer that is not a success read
//! once into an [`EngineError`], and streamed answers (events, a pull's
//! progress) cut into their JSON lines. What the calls say and read is
//! [`super::wire`]; which calls the agent makes is [`super::docker`].

use std::path::Path;

use bytes::Bytes;
use http::Method;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;

use crate::engine::EngineError;

/// The longest line a streamed answer may have: an engine's event or
/// progress line is a few hundred bytes; past this it is not one.
const MAX_LINE: usize = 1 << 20;

/// Sends one request and waits for its answer's head; the body of a
/// success (2xx, or 304: already so), else the engine's refusal.
/// `auth` is a pull's `X-Registry-Auth`.
pub async fn send(
    socket: &Path,
    method: Method,
    path: &str,
    body: Option<Vec<u8>>,
    auth: Option<String>,
) -> Result<Incoming, EngineError> {
    let json = body.is_some();
    let body = Full::new(Bytes::from(body.unwrap_or_default()));
    send_body(
        socket,
        method,
        path,
        body,
        json.then_some("application/json"),
        auth,
    )
    .await
}

/// A request body that streams from a channel, of a length said up front
/// (an image archive read from the spool as it is sent).
pub struct Channel {
    /// Where the body's bytes come from, in order; an error ends the
    /// request.
    pub rx: tokio::sync::mpsc::Receiver<Result<Bytes, std::io::Error>>,
    /// Its length in bytes (its `Content-Length`).
    pub length: u64,
}

impl hyper::body::Body for Channel {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, std::io::Error>>> {
        self.rx
            .poll_recv(cx)
            .map(|o| o.map(|r| r.map(hyper::body::Frame::data)))
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        hyper::body::SizeHint::with_exact(self.length)
    }
}

/// [`send`] with any body, of `content_type` when there is one.
pub async fn send_body<B>(
    socket: &Path,
    method: Method,
    path: &str,
    body: B,
    content_type: Option<&str>,
    auth: Option<String>,
) -> Result<Incoming, EngineError>
where
    B: hyper::body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let away = |e: &dyn std::fmt::Display| EngineError::Unreachable(e.to_string());
    let stream = tokio::net::UnixStream::connect(socket)
        .await
        .map_err(|e| away(&e))?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| away(&e))?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let mut req = http::Request::builder()
        .method(method)
        .uri(path)
        .header("host", "docker");
    if let Some(t) = content_type {
        req = req.header("content-type", t);
    }
    if let Some(auth) = auth {
        req = req.header("x-registry-auth", auth);
    }
    let req = req.body(body).map_err(|e| away(&e))?;
    let resp = sender.send_request(req).await.map_err(|e| away(&e))?;
    let status = resp.status();
    if status.is_success() || status == http::StatusCode::NOT_MODIFIED {
        return Ok(resp.into_body());
    }
    let body = resp
        .into_body()
        .collect()
        .await
        .map_err(|e| away(&e))?
        .to_bytes();
    Err(refusal(status.as_u16(), &body))
}

/// One call, its whole answer.
pub async fn call(
    socket: &Path,
    method: Method,
    path: &str,
    body: Option<Vec<u8>>,
) -> Result<Bytes, EngineError> {
    let answer = send(socket, method, path, body, None).await?;
    answer
        .collect()
        .await
        .map(|b| b.to_bytes())
        .map_err(|e| EngineError::Unreachable(e.to_string()))
}

/// The engine's answer to a call it did not do: its `{"message": …}`, or
/// the text as it came; 404 and 409 by their kinds.
pub fn refusal(status: u16, body: &[u8]) -> EngineError {
    #[derive(serde::Deserialize)]
    struct Said {
        message: String,
    }
    let message = serde_json::from_slice::<Said>(body).map_or_else(
        |_| String::from_utf8_lossy(body).trim().to_string(),
        |s| s.message,
    );
    match status {
        404 => EngineError::NotFound(message),
        409 => EngineError::Conflict(message),
        status => EngineError::Refused { status, message },
    }
}

/// A streamed answer, line by line (empty lines skipped).
pub struct Lines {
    body: Incoming,
    buf: Vec<u8>,
    ended: bool,
}

impl Lines {
    /// Reads the lines of an answer's body.
    pub fn of(body: Incoming) -> Lines {
        Lines {
            body,
            buf: Vec::new(),
            ended: false,
        }
    }

    /// The next line; `None` once the answer ended.
    pub async fn next(&mut self) -> Option<Result<Vec<u8>, EngineError>> {
        loop {
            if let Some(line) = take_line(&mut self.buf, self.ended) {
                return Some(Ok(line));
            }
            if self.ended {
                return None;
            }
            if self.buf.len() > MAX_LINE {
                self.ended = true;
                return Some(Err(EngineError::Refused {
                    status: 0,
                    message: format!(
                        "a line of the engine's answer is longer than {MAX_LINE} bytes"
                    ),
                }));
            }
            match self.body.frame().await {
                None => self.ended = true,
                Some(Ok(frame)) => {
                    if let Some(data) = frame.data_ref() {
                        self.buf.extend_from_slice(data);
                    }
                }
                Some(Err(e)) => {
                    self.ended = true;
                    return Some(Err(EngineError::Unreachable(e.to_string())));
                }
            }
        }
    }
}

/// The first non-empty line of `buf`, taken out of it; at the end of the
/// answer, what is left without its newline too.
fn take_line(buf: &mut Vec<u8>, ended: bool) -> Option<Vec<u8>> {
    loop {
        let line = match buf.iter().position(|b| *b == b'\n') {
            Some(at) => {
                let mut line: Vec<u8> = buf.drain(..=at).collect();
                line.pop();
                line
            }
            None if ended && !buf.is_empty() => std::mem::take(buf),
            None => return None,
        };
        if !line.trim_ascii().is_empty() {
            return Some(line);
        }
    }
}

/// Every byte but the unreserved ones as `%XX`: a query's value.
pub fn query(s: &str) -> String {
    escape(s, b"-._~")
}

/// A name or reference inside a path: `/`, `:` and `@` stay (an image's
/// reference has all three, and the engine routes on them as written).
pub fn path(s: &str) -> String {
    escape(s, b"-._~/:@")
}

fn escape(s: &str, keep: &[u8]) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || keep.contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_cut_where_the_engine_ends_them() {
        for (chunks, ended, lines) in [
            (&[&b"{\"a\":1}\n{\"b\""[..]][..], false, &["{\"a\":1}"][..]),
            (
                &[b"{\"a\":1}\n", b"\n", b"{\"b\":2}"],
                true,
                &["{\"a\":1}", "{\"b\":2}"],
            ),
            (&[b"\r\n  \n"], true, &[]),
            (&[b"x"], false, &[]),
        ] {
            let mut buf = Vec::new();
            let mut got = Vec::new();
            for c in chunks {
                buf.extend_from_slice(c);
                while let Some(l) = take_line(&mut buf, false) {
                    got.push(String::from_utf8(l).unwrap());
                }
            }
            while let Some(l) = take_line(&mut buf, ended) {
                got.push(String::from_utf8(l).unwrap());
            }
            assert_eq!(got, lines, "{chunks:?}");
        }
    }

    #[test]
    fn a_refusal_reads_as_its_kind_with_the_engine_s_words() {
        for (status, body, says) in [
            (
                404,
                &br#"{"message":"No such container: x"}"#[..],
                "not found: No such container: x",
            ),
            (
                409,
                br#"{"message":"name in use"}"#,
                "conflict: name in use",
            ),
            (500, b"plain words\n", "engine refused (500): plain words"),
            (
                400,
                br#"{"other":1}"#,
                "engine refused (400): {\"other\":1}",
            ),
        ] {
            assert_eq!(refusal(status, body).to_string(), says);
        }
    }

    #[test]
    fn names_are_escaped_as_the_engine_routes_them() {
        assert_eq!(
            query(r#"{"health":["healthy"]}"#),
            "%7B%22health%22%3A%5B%22healthy%22%5D%7D"
        );
        assert_eq!(
            path("localhost:5000/app@sha256:ab"),
            "localhost:5000/app@sha256:ab"
        );
        assert_eq!(path("a b?c#d"), "a%20b%3Fc%23d");
    }
}
