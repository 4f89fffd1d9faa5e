//! HTTP(S) on the hyper stack the agent already has: rustls (ring) for
//! TLS, trusting the system's CA bundle plus an optional extra CA file; a
//! time limit on every call and a cap on every body; redirects followed a
//! few times (registry blobs are often served from elsewhere), without the
//! credentials once the host changes, and only those the caller's
//! [`Redirects`] policy allows.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Method, Request, StatusCode, Uri};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

use crate::host::clock::Floor;

/// Where the system keeps its CA bundle (Debian, Alpine, Fedora, OpenSUSE).
const SYSTEM_BUNDLES: [&str; 4] = [
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/ca-bundle.pem",
    "/etc/ssl/cert.pem",
];

/// Redirects followed before giving up.
const MAX_REDIRECTS: usize = 5;

/// A failure below HTTP: the call never got an answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transport {
    /// No answer within the limit.
    Timeout,
    /// The connection failed or broke.
    Connect(String),
    /// TLS failed: the certificate is not trusted, or the handshake broke.
    Tls(String),
    /// The peer does not speak TLS at all (a plain-HTTP server).
    NotTls(String),
    /// The body was larger than its cap.
    TooLarge(usize),
    /// Redirects that do not end (a loop, or more than the limit): a
    /// definite answer.
    Redirects(String),
    /// The host's credentials could not be read (the request was not sent).
    Credentials(String),
}

impl std::fmt::Display for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Transport::Timeout => write!(f, "no answer in time"),
            Transport::Connect(m) => write!(f, "connection failed: {m}"),
            Transport::Tls(m) => write!(f, "TLS failed: {m}"),
            Transport::NotTls(m) => write!(f, "not TLS: {m}"),
            Transport::TooLarge(n) => write!(f, "over {n} bytes"),
            Transport::Redirects(m) => write!(f, "redirects: {m}"),
            Transport::Credentials(m) => write!(f, "credentials: {m}"),
        }
    }
}

/// An answer: its status, headers and (capped) body, and the URI that gave
/// it after redirects.
#[derive(Debug)]
pub struct Answer {
    /// The status.
    pub status: StatusCode,
    /// The headers.
    pub headers: HeaderMap,
    /// The body (empty for a HEAD).
    pub body: Bytes,
}

/// How a successful answer's body is read.
enum Read<'a> {
    /// Whole, into the answer.
    Whole,
    /// Handed to a sink as it arrives.
    Sink(Sink<'a>),
    /// Left to the caller ([`Open`]).
    Open,
}

/// An answer's body being read ([`Http::open`]).
pub struct Open {
    body: Incoming,
    stall: Duration,
}

impl Open {
    /// The next chunk of the body, `None` at its end; a chunk that does
    /// not come within the stall bound is [`Transport::Timeout`], a link
    /// that drops is [`Transport::Connect`].
    pub async fn chunk(&mut self) -> Result<Option<Bytes>, Transport> {
        loop {
            let frame = tokio::time::timeout(self.stall, self.body.frame())
                .await
                .map_err(|_| Transport::Timeout)?;
            match frame {
                None => return Ok(None),
                Some(Err(e)) => return Err(Transport::Connect(e.to_string())),
                Some(Ok(f)) => {
                    if let Ok(data) = f.into_data() {
                        return Ok(Some(data));
                    }
                }
            }
        }
    }
}

/// Where a streamed answer's body goes, chunk by chunk.
pub type Sink<'a> = &'a mut (dyn FnMut(&[u8]) + Send);

/// Which redirects a client follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Redirects {
    /// Any (registries: blobs are often served from a CDN).
    Any,
    /// Only to the same scheme, host and port (the plane's GETs: a
    /// document is fetched from where the node was told, and a redirect
    /// elsewhere would make the node a probe of other hosts).
    SameOrigin,
    /// None: a 3xx is the answer (the plane's report PUTs, whose body must
    /// not travel anywhere else).
    Never,
}

impl Redirects {
    /// Whether a redirect from `from` to `to` is followed.
    pub fn allows(self, from: &Uri, to: &Uri) -> bool {
        match self {
            Redirects::Any => true,
            Redirects::Never => false,
            Redirects::SameOrigin => origin(from) == origin(to),
        }
    }
}

/// A URI's scheme, host and port (the scheme's default when none is given).
fn origin(u: &Uri) -> Option<(&str, &str, u16)> {
    let scheme = u.scheme_str()?;
    let default = match scheme {
        "https" => 443,
        "http" => 80,
        _ => return None,
    };
    Some((scheme, u.host()?, u.port_u16().unwrap_or(default)))
}

/// How long a connection may take to open.
const CONNECT: Duration = Duration::from_secs(10);
/// How long a connection to a host on the same LAN may take to open.
pub const LAN_CONNECT: Duration = Duration::from_secs(2);

/// A connection [`Http::stream`] made, read and written as tokio's.
pub type Stream = hyper_util::rt::TokioIo<
    hyper_rustls::MaybeHttpsStream<hyper_util::rt::TokioIo<tokio::net::TcpStream>>,
>;

/// The HTTP client; cheap to clone.
#[derive(Clone)]
pub struct Http {
    client: Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>,
    /// The client's connector, for a connection that is not HTTP's
    /// ([`Http::stream`]).
    connector: hyper_rustls::HttpsConnector<HttpConnector>,
    redirects: Redirects,
    /// How requests to one origin (this URI's) are authenticated.
    auth: Option<Arc<(Uri, crate::net::auth::HostAuth)>>,
    /// The client certificate presented, checked before each request (a
    /// key that cannot be used fails the request naming its file, as a
    /// token file does).
    cert: Option<Arc<crate::net::auth::ClientCert>>,
}

impl Http {
    /// A client trusting the system's CA bundle and, when given, the
    /// certificates in `extra_ca` (PEM). The error names the file at fault.
    pub fn new(extra_ca: Option<&Path>) -> Result<Http, String> {
        Http::keeping(extra_ca, 2)
    }

    /// [`Http::new`], keeping up to `idle` connections to a host open
    /// between requests (for a client that sends many at once).
    pub fn keeping(extra_ca: Option<&Path>, idle: usize) -> Result<Http, String> {
        Http::build(extra_ca, idle, None, Floor::default())
    }

    /// The agent's client: [`Http::new`], presenting `client_cert` (a
    /// certificate and its key, PEM) to a host that asks for one, and
    /// checking servers' certificates at max(clock, `floor`) (the time the
    /// device knows has passed, shared with every client it makes).
    pub fn at_floor(
        extra_ca: Option<&Path>,
        client_cert: Option<(&Path, &Path)>,
        floor: &Floor,
    ) -> Result<Http, String> {
        Http::build(extra_ca, 2, client_cert, floor.clone())
    }

    /// [`Http::new`] presenting the client certificate in `cert` with the
    /// key in `key` (PEM; read again when they change) to a host that asks
    /// for one.
    pub fn with_client_cert(
        extra_ca: Option<&Path>,
        cert: &Path,
        key: &Path,
    ) -> Result<Http, String> {
        Http::build(extra_ca, 2, Some((cert, key)), Floor::default())
    }

    /// A client for the hosts of one LAN (a site's peers): [`Http::new`]
    /// with no CA of its own, giving up a connection that does not open
    /// within [`LAN_CONNECT`] (a host that is not there answers no
    /// connection on a LAN, and the next is asked).
    pub fn lan() -> Result<Http, String> {
        Http::build_with(None, 2, None, Floor::default(), LAN_CONNECT)
    }

    fn build(
        extra_ca: Option<&Path>,
        idle: usize,
        client_cert: Option<(&Path, &Path)>,
        floor: Floor,
    ) -> Result<Http, String> {
        Http::build_with(extra_ca, idle, client_cert, floor, CONNECT)
    }

    /// The TLS client configuration every connection of the agent uses:
    /// the system's CA bundle and `extra_ca` (PEM), servers' certificates
    /// checked at max(clock, `floor`), and `client_cert` presented to a
    /// server that asks. The error names the file at fault.
    pub fn tls_config(
        extra_ca: Option<&Path>,
        client_cert: Option<(&Path, &Path)>,
        floor: Floor,
    ) -> Result<
        (
            rustls::ClientConfig,
            Option<Arc<crate::net::auth::ClientCert>>,
        ),
        String,
    > {
        let mut roots = rustls::RootCertStore::empty();
        let mut read = |path: &Path, required: bool| -> Result<(), String> {
            use rustls::pki_types::CertificateDer;
            use rustls::pki_types::pem::PemObject;
            let bytes = match std::fs::read(path) {
                Ok(b) => b,
                Err(e) if !required && e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
                Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
            };
            let mut found = 0;
            for cert in CertificateDer::pem_slice_iter(&bytes) {
                let cert =
                    cert.map_err(|e| format!("{}: not PEM certificates: {e}", path.display()))?;
                // A bundle may hold a certificate rustls cannot use; the
                // others still count.
                if roots.add(cert).is_ok() {
                    found += 1;
                }
            }
            if required && found == 0 {
                return Err(format!("{}: no usable certificate", path.display()));
            }
            Ok(())
        };
        for b in SYSTEM_BUNDLES {
            read(Path::new(b), false)?;
        }
        if let Some(p) = extra_ca {
            read(p, true)?;
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?;
        // rustls' own verifier, handed max(clock, floor) as now: with no
        // floor raised (the operator's tool, a test), the clock itself.
        // Without a certificate to trust, no server's verifies at any time.
        let builder = if roots.is_empty() {
            builder.with_root_certificates(roots)
        } else {
            let webpki = rustls::client::WebPkiServerVerifier::builder_with_provider(
                Arc::new(roots),
                provider.clone(),
            )
            .build()
            .map_err(|e| e.to_string())?;
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(crate::net::tls::FloorVerifier::new(
                    webpki, floor,
                )))
        };
        let (tls, cert) = match client_cert {
            None => (builder.with_no_client_auth(), None),
            Some((cert, key)) => {
                let c = Arc::new(crate::net::auth::ClientCert::new(cert, key, provider));
                (builder.with_client_cert_resolver(c.clone()), Some(c))
            }
        };
        Ok((tls, cert))
    }

    fn build_with(
        extra_ca: Option<&Path>,
        idle: usize,
        client_cert: Option<(&Path, &Path)>,
        floor: Floor,
        connect: Duration,
    ) -> Result<Http, String> {
        let (tls, cert) = Http::tls_config(extra_ca, client_cert, floor)?;
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_connect_timeout(Some(connect));
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .wrap_connector(http);
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(30))
            .pool_max_idle_per_host(idle)
            .build(https.clone());
        Ok(Http {
            client,
            connector: https,
            redirects: Redirects::Any,
            auth: None,
            cert,
        })
    }

    /// A connection to `uri`'s host and port (`https://`: over TLS;
    /// `http://`: plain) made as this client makes its own: the same CA,
    /// client certificate, time floor and connect timeout, and the same
    /// code (an MQTT broker's connection, [`crate::net::mqtt`]).
    pub async fn stream(&self, uri: Uri) -> Result<Stream, Transport> {
        use tower_service::Service;
        let mut c = self.connector.clone();
        std::future::poll_fn(|cx| c.poll_ready(cx))
            .await
            .map_err(|e| said(e.as_ref()))?;
        c.call(uri)
            .await
            .map(hyper_util::rt::TokioIo::new)
            .map_err(|e| said(e.as_ref()))
    }

    /// The same client, authenticating every request to `base`'s origin
    /// (scheme, host and port) with `auth`; none elsewhere.
    pub fn with_host_auth(&self, base: &Uri, auth: Option<crate::net::auth::HostAuth>) -> Http {
        Http {
            client: self.client.clone(),
            connector: self.connector.clone(),
            redirects: self.redirects,
            auth: auth.map(|a| Arc::new((base.clone(), a))),
            cert: self.cert.clone(),
        }
    }

    /// The same client (sharing its connections), following only the
    /// redirects `policy` allows: a redirect it does not is the answer.
    pub fn with_redirects(&self, policy: Redirects) -> Http {
        Http {
            client: self.client.clone(),
            connector: self.connector.clone(),
            redirects: policy,
            auth: self.auth.clone(),
            cert: self.cert.clone(),
        }
    }

    /// Sends one request (following redirects; `Authorization` only to the
    /// host first asked), and reads at most `max_body` bytes of the answer,
    /// all within `limit`.
    pub async fn send(
        &self,
        method: Method,
        uri: Uri,
        headers: &HeaderMap,
        limit: Duration,
        max_body: usize,
    ) -> Result<Answer, Transport> {
        self.send_body(method, uri, headers, Bytes::new(), limit, max_body)
            .await
    }

    /// [`Http::send`] for a large answer: a successful answer's body is
    /// handed to `sink` as it arrives, never held whole (at most
    /// `max_body` bytes, or [`Transport::TooLarge`]); any other answer's
    /// body is read as [`Http::send`] reads it, up to 64 KiB.
    pub async fn send_streamed(
        &self,
        method: Method,
        uri: Uri,
        headers: &HeaderMap,
        limit: Duration,
        max_body: usize,
        sink: Sink<'_>,
    ) -> Result<Answer, Transport> {
        let follow = self.follow(
            method,
            uri,
            headers,
            Bytes::new(),
            max_body,
            Read::Sink(sink),
        );
        tokio::time::timeout(limit, follow)
            .await
            .map(|r| r.map(|(a, _)| a))
            .unwrap_or(Err(Transport::Timeout))
    }

    /// Sends one request and hands back a successful answer's head with
    /// its body still to be read ([`Open`]): for a transfer that takes as
    /// long as the link needs, bounded by `stall` (the head, and each
    /// chunk after the one before) instead of a total. Any other answer
    /// comes whole (up to 64 KiB) and without an [`Open`].
    pub async fn open(
        &self,
        method: Method,
        uri: Uri,
        headers: &HeaderMap,
        stall: Duration,
    ) -> Result<(Answer, Option<Open>), Transport> {
        let follow = self.follow(method, uri, headers, Bytes::new(), 64 * 1024, Read::Open);
        let (a, body) = tokio::time::timeout(stall, follow)
            .await
            .unwrap_or(Err(Transport::Timeout))?;
        Ok((a, body.map(|body| Open { body, stall })))
    }

    /// [`Http::send`] with a request body (a PUT).
    pub async fn send_body(
        &self,
        method: Method,
        uri: Uri,
        headers: &HeaderMap,
        body: Bytes,
        limit: Duration,
        max_body: usize,
    ) -> Result<Answer, Transport> {
        tokio::time::timeout(
            limit,
            self.follow(method, uri, headers, body, max_body, Read::Whole),
        )
        .await
        .map(|r| r.map(|(a, _)| a))
        .unwrap_or(Err(Transport::Timeout))
    }

    async fn follow(
        &self,
        method: Method,
        mut uri: Uri,
        headers: &HeaderMap,
        body: Bytes,
        max_body: usize,
        mut read: Read<'_>,
    ) -> Result<(Answer, Option<Incoming>), Transport> {
        let first = uri.clone();
        // Once a redirect leaves the first scheme and host, the credentials
        // stay behind for good (also if a later one comes back).
        let mut authorized = true;
        if let Some(c) = &self.cert {
            c.check().map_err(Transport::Credentials)?;
        }
        for _ in 0..=MAX_REDIRECTS {
            authorized &= same_origin(&first, &uri);
            let mut req = Request::builder().method(method.clone()).uri(uri.clone());
            // The host's own credentials, for each request to it (a
            // signature is over the request it is sent with).
            let host_auth = match &self.auth {
                Some(a) if authorized && same_origin(&a.0, &uri) => {
                    a.1.headers(&method, &uri, &body, crate::host::clock::now())
                        .map_err(Transport::Credentials)?
                }
                _ => Vec::new(),
            };
            for (k, v) in headers {
                if k == http::header::AUTHORIZATION && (!authorized || !host_auth.is_empty()) {
                    continue;
                }
                req = req.header(k, v);
            }
            for (k, v) in host_auth {
                req = req.header(k, v);
            }
            let req = req
                .body(Full::new(body.clone()))
                .map_err(|e| Transport::Connect(e.to_string()))?;
            let resp = self.client.request(req).await.map_err(transport)?;
            let status = resp.status();
            if status.is_redirection() {
                if let Some(next) = resp
                    .headers()
                    .get(http::header::LOCATION)
                    .and_then(|l| l.to_str().ok())
                    .and_then(|l| resolve(&uri, l))
                    .filter(|next| self.redirects.allows(&uri, next))
                {
                    uri = next;
                    continue;
                }
            }
            let (parts, mut body) = resp.into_parts();
            if matches!(read, Read::Open) && status.is_success() && method != Method::HEAD {
                let head = Answer {
                    status,
                    headers: parts.headers,
                    body: Bytes::new(),
                };
                return Ok((head, Some(body)));
            }
            let body = if method == Method::HEAD {
                Bytes::new()
            } else if let (Read::Sink(sink), true) = (&mut read, status.is_success()) {
                let mut read = 0usize;
                while let Some(frame) = body.frame().await {
                    let frame = frame.map_err(|e| Transport::Connect(e.to_string()))?;
                    if let Some(data) = frame.data_ref() {
                        read = read.saturating_add(data.len());
                        if read > max_body {
                            return Err(Transport::TooLarge(max_body));
                        }
                        sink(data);
                    }
                }
                Bytes::new()
            } else {
                let max_body = if matches!(read, Read::Sink(_)) {
                    max_body.min(64 * 1024)
                } else {
                    max_body
                };
                match Limited::new(body, max_body).collect().await {
                    Ok(b) => b.to_bytes(),
                    Err(e) if e.is::<http_body_util::LengthLimitError>() => {
                        return Err(Transport::TooLarge(max_body));
                    }
                    Err(e) => return Err(Transport::Connect(e.to_string())),
                }
            };
            return Ok((
                Answer {
                    status,
                    headers: parts.headers,
                    body,
                },
                None,
            ));
        }
        Err(Transport::Redirects(format!(
            "more than {MAX_REDIRECTS} redirects (last to {})",
            crate::model::text::clip(&uri.to_string(), 256)
        )))
    }
}

/// Whether two URIs have the same scheme and host (and port): where
/// credentials may follow a redirect.
fn same_origin(a: &Uri, b: &Uri) -> bool {
    let port = |u: &Uri| {
        u.port_u16().or(match u.scheme_str() {
            Some("https") => Some(443),
            Some("http") => Some(80),
            _ => None,
        })
    };
    a.scheme() == b.scheme() && a.host() == b.host() && port(a) == port(b)
}

/// A redirect's target, absolute or relative to `base`.
fn resolve(base: &Uri, location: &str) -> Option<Uri> {
    if let Ok(u) = location.parse::<Uri>() {
        if u.scheme().is_some() {
            return Some(u);
        }
    }
    if !location.starts_with('/') {
        return None;
    }
    Uri::builder()
        .scheme(base.scheme()?.clone())
        .authority(base.authority()?.clone())
        .path_and_query(location)
        .build()
        .ok()
}

/// Tells a TLS failure from any other failure to connect, by the chain of
/// causes hyper gives (an I/O error's own `source` skips the error it
/// wraps, so wrapped I/O errors are opened one by one).
fn transport(e: hyper_util::client::legacy::Error) -> Transport {
    said(&e)
}

/// [`transport`] for any error.
fn said(e: &(dyn std::error::Error + 'static)) -> Transport {
    fn tls_in(mut e: &(dyn std::error::Error + 'static)) -> Option<Transport> {
        for _ in 0..16 {
            if let Some(tls) = e.downcast_ref::<rustls::Error>() {
                return Some(match tls {
                    rustls::Error::InvalidMessage(_) => Transport::NotTls(tls.to_string()),
                    _ => Transport::Tls(tls.to_string()),
                });
            }
            e = match e.downcast_ref::<std::io::Error>() {
                Some(io) => io.get_ref()?,
                None => e.source()?,
            };
        }
        None
    }
    if let Some(t) = tls_in(e) {
        return t;
    }
    let mut words = Vec::new();
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = source {
        words.push(s.to_string());
        source = s.source();
    }
    words.dedup();
    Transport::Connect(words.join(": "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_follow_a_redirect_only_to_the_same_scheme_and_host() {
        let u = |s: &str| s.parse::<Uri>().unwrap();
        for (a, b, same) in [
            ("https://r.example/v2/", "https://r.example/other", true),
            ("https://r.example/v2/", "https://r.example:443/x", true),
            ("https://r.example/v2/", "http://r.example/x", false),
            ("https://r.example/v2/", "https://r.example:8443/x", false),
            ("https://r.example/v2/", "https://cdn.example/x", false),
            (
                "http://127.0.0.1:5000/v2/",
                "http://127.0.0.1:5001/v2/",
                false,
            ),
        ] {
            assert_eq!(same_origin(&u(a), &u(b)), same, "{a} → {b}");
        }
    }

    #[test]
    fn redirects_resolve_against_where_they_came_from() {
        let base: Uri = "http://127.0.0.1:5000/v2/a/blobs/sha256:x".parse().unwrap();
        assert_eq!(
            resolve(&base, "/storage/x?sig=1").unwrap().to_string(),
            "http://127.0.0.1:5000/storage/x?sig=1"
        );
        assert_eq!(
            resolve(&base, "https://cdn.example/x").unwrap().to_string(),
            "https://cdn.example/x"
        );
        assert_eq!(resolve(&base, "relative"), None);
    }

    #[test]
    fn which_redirects_each_policy_follows() {
        let u = |s: &str| s.parse::<Uri>().unwrap();
        let from = u("http://plane.example/nodes/n/desired.json");
        for (to, any, same, never) in [
            ("http://plane.example/other.json", true, true, false),
            ("http://plane.example:80/other.json", true, true, false),
            ("http://PLANE.example/x", true, false, false),
            ("http://plane.example:8080/x", true, false, false),
            ("https://plane.example/x", true, false, false),
            ("http://127.0.0.1/x", true, false, false),
            ("http://cdn.example/x", true, false, false),
        ] {
            let to = u(to);
            for (policy, want) in [
                (Redirects::Any, any),
                (Redirects::SameOrigin, same),
                (Redirects::Never, never),
            ] {
                assert_eq!(policy.allows(&from, &to), want, "{policy:?} {to}");
            }
        }
        let tls = u("https://plane.example/a");
        assert!(Redirects::SameOrigin.allows(&tls, &u("https://plane.example:443/b")));
    }
}
