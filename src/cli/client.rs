//! The CLI's client of the running agent's HTTP API: finds the agent's
//! address and token from its config, sends one request, and tells "the
//! agent refused" from "no agent answers".

use std::net::SocketAddr;
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::{Method, Request};
use hyper_util::rt::TokioIo;

use crate::config::Config;

/// Why a request got no answer.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// Nothing answered at the address.
    #[error("no agent answers at {addr}: {message}")]
    Unreachable {
        /// Where it was asked.
        addr: String,
        /// Why.
        message: String,
    },
    /// The answer was not readable.
    #[error("unreadable answer from the agent: {0}")]
    Protocol(String),
}

/// An answer: its status and JSON body (or text, for non-JSON answers).
#[derive(Debug)]
pub struct Answer {
    /// The HTTP status.
    pub status: u16,
    /// The body as JSON (`Null` when empty).
    pub body: serde_json::Value,
}

impl Answer {
    /// The body read as the view `V` of `endpoint`'s wire format; a field
    /// missing or of another type is an error naming the endpoint and the
    /// field (not the path to it: serde_path_to_error's tracking of every
    /// view type cost 19 KB of the device binary).
    pub fn view<V: serde::de::DeserializeOwned>(&self, endpoint: &str) -> Result<V, ClientError> {
        V::deserialize(&self.body).map_err(|e| ClientError::Protocol(format!("{endpoint}: {e}")))
    }

    /// The error message of a refusal, as the API words it.
    pub fn error_message(&self) -> String {
        match self.view::<crate::views::ErrorView>("an error") {
            Ok(v) => match v.error.field {
                Some(f) => format!("{f}: {}", v.error.message),
                None => v.error.message,
            },
            // Not the API's error: said as it came.
            Err(_) => self.body.to_string(),
        }
    }
}

/// A client of one agent.
pub struct Client {
    addr: SocketAddr,
    token: Option<String>,
}

impl Client {
    /// The client of the agent that `config` describes: its address (the
    /// one the running agent wrote, when it chose its own port) and token.
    pub fn for_config(config: &Config) -> Client {
        let mut addr = config.api_listen;
        if addr.port() == 0 {
            if let Some(a) = std::fs::read_to_string(config.api_addr_path())
                .ok()
                .and_then(|s| s.trim().parse().ok())
            {
                addr = a;
            }
        }
        let token = config.api_token.clone().or_else(|| {
            std::fs::read_to_string(config.token_path())
                .ok()
                .map(|t| t.trim().to_string())
        });
        Client { addr, token }
    }

    /// A client of an address, with an optional token.
    pub fn new(addr: SocketAddr, token: Option<String>) -> Client {
        Client { addr, token }
    }

    /// Sends one request.
    pub async fn request(
        &self,
        method: Method,
        path: &str,
        body: Option<&serde_json::Value>,
    ) -> Result<Answer, ClientError> {
        let unreachable = |m: String| ClientError::Unreachable {
            addr: self.addr.to_string(),
            message: m,
        };
        let stream = tokio::time::timeout(
            Duration::from_secs(5),
            tokio::net::TcpStream::connect(self.addr),
        )
        .await
        .map_err(|_| unreachable("connection timed out".into()))?
        .map_err(|e| unreachable(e.to_string()))?;
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| unreachable(e.to_string()))?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        let bytes = body.map(|b| Bytes::from(b.to_string())).unwrap_or_default();
        let mut req = Request::builder()
            .method(method)
            .uri(path)
            .header("host", self.addr.to_string())
            .header("content-type", "application/json");
        if let Some(t) = &self.token {
            req = req.header("authorization", format!("Bearer {t}"));
        }
        let req = req
            .body(Full::new(bytes))
            .map_err(|e| ClientError::Protocol(e.to_string()))?;
        let resp = tokio::time::timeout(Duration::from_secs(60), sender.send_request(req))
            .await
            .map_err(|_| ClientError::Protocol("the agent did not answer within 60s".into()))?
            .map_err(|e| ClientError::Protocol(e.to_string()))?;
        let status = resp.status().as_u16();
        let raw = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| ClientError::Protocol(e.to_string()))?
            .to_bytes();
        let body = if raw.is_empty() {
            serde_json::Value::Null
        } else {
            serde_json::from_slice(&raw).unwrap_or_else(|_| {
                serde_json::Value::String(String::from_utf8_lossy(&raw).into_owned())
            })
        };
        Ok(Answer { status, body })
    }
}

/// Reads a `KEY=VALUE` argument: the value as JSON when it parses as JSON
/// (`500`, `true`, `"x"`, `{"a":1}`), else as a string.
pub fn parse_assignment(arg: &str) -> Result<(String, serde_json::Value), String> {
    let (k, v) = arg
        .split_once('=')
        .ok_or_else(|| format!("{arg:?}: expected KEY=VALUE"))?;
    let value =
        serde_json::from_str(v).unwrap_or_else(|_| serde_json::Value::String(v.to_string()));
    Ok((k.to_string(), value))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_is_said_as_the_api_words_it() {
        // (the answer's body, what the client says of it)
        #[rustfmt::skip]
        let cases = [
            (r#"{"error":{"field":"mounts[0].target","message":"must be absolute","status":422}}"#, "mounts[0].target: must be absolute"),
            (r#"{"error":{"message":"no module \"x\"","status":404}}"#, "no module \"x\""),
            (r#"{"error":{"message":"gone"}}"#, "gone"),
            (r#"{"error":{"field":"f"}}"#, r#"{"error":{"field":"f"}}"#),
            (r#"{"oops":1}"#, r#"{"oops":1}"#),
            ("null", "null"),
        ];
        for (body, want) in cases {
            let a = Answer {
                status: 400,
                body: serde_json::from_str(body).unwrap(),
            };
            assert_eq!(a.error_message(), want, "{body}");
        }
    }

    #[test]
    fn assignments() {
        assert_eq!(
            parse_assignment("poll_ms=500").unwrap(),
            ("poll_ms".into(), serde_json::json!(500))
        );
        assert_eq!(
            parse_assignment("a.b=pg://x:1/y").unwrap(),
            ("a.b".into(), serde_json::json!("pg://x:1/y"))
        );
        assert_eq!(
            parse_assignment("f=true").unwrap().1,
            serde_json::json!(true)
        );
        assert_eq!(
            parse_assignment("s=\"500\"").unwrap().1,
            serde_json::json!("500")
        );
        assert_eq!(parse_assignment("e=").unwrap().1, serde_json::json!(""));
        assert!(parse_assignment("novalue").is_err());
    }
}
