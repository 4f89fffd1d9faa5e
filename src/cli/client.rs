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
    /// The body as JSON (`Null` when empty or text for a person).
    pub body: serde_json::Value,
    /// The body, when the agent answered with text for a person
    /// (`text/plain`, asked by [`Client::text`]).
    pub text: Option<String>,
}

impl Answer {
    /// An answer of JSON.
    pub fn json(status: u16, body: serde_json::Value) -> Answer {
        Answer {
            status,
            body,
            text: None,
        }
    }

    /// The error message of a refusal, as the API words it.
    pub fn error_message(&self) -> String {
        let error = &self.body["error"];
        match (error["field"].as_str(), error["message"].as_str()) {
            (Some(f), Some(m)) => format!("{f}: {m}"),
            (None, Some(m)) => m.to_string(),
            // Not the API's error: said as it came.
            _ => self.body.to_string(),
        }
    }
}

/// The fields of an answer the command line reads, read from its JSON
/// value where it needs them (the device's binary holds no reader of
/// each view: every one is code of its own, in a binary whose size is
/// budgeted). A field missing or of another type is an error naming the
/// endpoint and the field.
pub struct Fields<'a> {
    endpoint: &'a str,
    value: &'a serde_json::Value,
}

impl<'a> Fields<'a> {
    /// The fields of `value`, an answer of `endpoint`.
    pub fn of(endpoint: &'a str, value: &'a serde_json::Value) -> Fields<'a> {
        Fields { endpoint, value }
    }

    fn wrong(&self, key: &str, what: &str) -> ClientError {
        ClientError::Protocol(format!("{}: {key} is not {what}", self.endpoint))
    }

    /// The field `key`, when present and not `null`.
    pub fn get(&self, key: &str) -> Option<&'a serde_json::Value> {
        self.value.get(key).filter(|v| !v.is_null())
    }

    /// A string field.
    pub fn str(&self, key: &str) -> Result<&'a str, ClientError> {
        self.get(key)
            .and_then(|v| v.as_str())
            .ok_or_else(|| self.wrong(key, "a string"))
    }

    /// A string field that may be missing or `null`.
    pub fn opt_str(&self, key: &str) -> Result<Option<&'a str>, ClientError> {
        self.get(key)
            .map(|v| v.as_str().ok_or_else(|| self.wrong(key, "a string")))
            .transpose()
    }

    /// A whole number field.
    pub fn u64(&self, key: &str) -> Result<u64, ClientError> {
        self.get(key)
            .and_then(|v| v.as_u64())
            .ok_or_else(|| self.wrong(key, "a whole number"))
    }

    /// A true-or-false field.
    pub fn bool(&self, key: &str) -> Result<bool, ClientError> {
        self.get(key)
            .and_then(|v| v.as_bool())
            .ok_or_else(|| self.wrong(key, "true or false"))
    }

    /// An array field's elements, each with its fields (an endpoint
    /// naming them as `key[i]` is not kept: the endpoint says the array).
    pub fn list(&self, key: &str) -> Result<Vec<Fields<'a>>, ClientError> {
        let items = self
            .get(key)
            .and_then(|v| v.as_array())
            .ok_or_else(|| self.wrong(key, "an array"))?;
        Ok(items.iter().map(|v| Fields::of(self.endpoint, v)).collect())
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
        self.send(method, path, body, "application/json").await
    }

    /// A GET of the text a person reads of a view (`Accept:
    /// text/plain`): [`Answer::text`], or JSON from an agent that has no
    /// text of it.
    pub async fn text(&self, path: &str) -> Result<Answer, ClientError> {
        self.send(Method::GET, path, None, "text/plain, application/json")
            .await
    }

    async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<&serde_json::Value>,
        accept: &str,
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
            .header("content-type", "application/json")
            .header("accept", accept);
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
        let is_text = resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|t| t.starts_with("text/plain"));
        let raw = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| ClientError::Protocol(e.to_string()))?
            .to_bytes();
        if is_text {
            return Ok(Answer {
                status,
                body: serde_json::Value::Null,
                text: Some(String::from_utf8_lossy(&raw).into_owned()),
            });
        }
        let body = if raw.is_empty() {
            serde_json::Value::Null
        } else {
            serde_json::from_slice(&raw).unwrap_or_else(|_| {
                serde_json::Value::String(String::from_utf8_lossy(&raw).into_owned())
            })
        };
        Ok(Answer::json(status, body))
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
            let a = Answer::json(400, serde_json::from_str(body).unwrap());
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
