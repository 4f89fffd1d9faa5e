//! The registry client against real registries (Distribution on loopback,
//! plain and with TLS and htpasswd auth) and, for what Distribution 2.8 does
//! not do (paginate tags, a bearer-token challenge, a HEAD without a
//! digest), an in-process fake.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::registry::{Registry, Tls};
use common::require_engine;
use stead::model::reference::Reference;
use stead::model::version::{Range, TagVersion, candidates};
use stead::net::http::Http;
use stead::registry::auth::Credentials;
use stead::registry::client::{Platform, Registries};
use stead::registry::error::RegistryError;
use stead::reload::classify::{Failure, Verdict, classify};

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn client(ca: Option<&std::path::Path>, creds: &str) -> Registries {
    Registries::new(
        Http::new(ca).unwrap(),
        Credentials::parse(creds.as_bytes()).unwrap(),
        Vec::new(),
    )
}

#[test]
fn a_real_registry_gives_tags_digests_and_the_config_without_a_layer() {
    require_engine();
    let reg = Registry::plain();
    let repo = "acme/sensor";
    let floor = "io.stead.min-agent-version";
    let mut pushed = std::collections::BTreeMap::new();
    for (tag, labels) in [
        ("1.4.2", vec![]),
        ("1.5.0", vec![(floor, "9.0.0")]),
        ("v1.10.0", vec![]),
        ("1.2.0-alpine", vec![]),
        ("20240101", vec![]),
        ("latest", vec![]),
    ] {
        pushed.insert(tag, reg.push(repo, tag, &labels));
    }
    let rt = rt();
    let c = client(None, "{}");
    let r = Reference::parse(&format!("{}/{repo}:1.4.2", reg.addr)).unwrap();
    let mut tags = rt.block_on(c.tags(&r)).unwrap();
    tags.sort();
    assert_eq!(
        tags,
        [
            "1.2.0-alpine",
            "1.4.2",
            "1.5.0",
            "20240101",
            "latest",
            "v1.10.0"
        ]
    );
    // The newest compatible version of the running one's variant.
    let picked = candidates(
        tags.iter().map(String::as_str),
        &Range::parse("^1.4").unwrap(),
        &TagVersion::parse("1.4.2").unwrap(),
    );
    let picked: Vec<&str> = picked.iter().map(|t| t.tag.as_str()).collect();
    assert_eq!(picked, ["v1.10.0", "1.5.0", "1.4.2"]);
    // Digests by HEAD, as the engine has them.
    for (tag, (_, digest)) in &pushed {
        let head = rt.block_on(c.head(&r.with_tag(tag))).unwrap();
        assert_eq!(&head.digest, digest, "{tag}");
    }
    // The config, with the floor label, is the image the engine has; no
    // layer was fetched for it.
    let before = reg.requests().len();
    let (id, digest) = &pushed["1.5.0"];
    let config = rt
        .block_on(c.config(&r, digest, &Platform::this()))
        .unwrap();
    assert_eq!(&config.id, id);
    assert_eq!(config.labels.get(floor).map(String::as_str), Some("9.0.0"));
    assert!(!config.healthcheck);
    let asked: Vec<String> = reg.requests()[before..].to_vec();
    let blobs: Vec<&String> = asked.iter().filter(|l| l.contains("/blobs/")).collect();
    assert_eq!(blobs.len(), 1, "{asked:?}");
    assert!(blobs[0].ends_with(id.as_str()), "{asked:?}");
    // No such tag: 404, decided.
    let e = rt.block_on(c.head(&r.with_tag("9.9.9"))).unwrap_err();
    assert!(
        matches!(e, RegistryError::Status { status: 404, .. }),
        "{e}"
    );
    assert_eq!(classify(&Failure::Registry(e)), Verdict::Decided);
}

#[test]
fn tls_and_credentials_against_a_real_registry() {
    require_engine();
    let plain = Registry::plain();
    plain.push("acme/private", "1.0.0", &[]);
    let tls = Tls::new();
    let reg = Registry::tls_with_auth(&tls, &plain.storage, "ci", "s3cret");
    let r = Reference::parse(&format!("{}/acme/private:1.0.0", reg.addr)).unwrap();
    let good = format!(
        r#"{{"auths": {{"{}": {{"username": "ci", "password": "s3cret"}}}}}}"#,
        reg.addr
    );
    let rt = rt();
    // Trusted CA and the right credentials.
    let c = client(Some(&tls.ca), &good);
    assert_eq!(rt.block_on(c.tags(&r)).unwrap(), ["1.0.0"]);
    let head = rt.block_on(c.head(&r)).unwrap();
    assert!(head.digest.starts_with("sha256:"));
    // No credentials, or the wrong ones: refused, decided.
    for creds in ["{}".to_string(), good.replace("s3cret", "wrong")] {
        let e = rt
            .block_on(client(Some(&tls.ca), &creds).tags(&r))
            .unwrap_err();
        assert!(
            matches!(e, RegistryError::Credentials { status: 401, .. }),
            "{e}"
        );
        assert_eq!(classify(&Failure::Registry(e)), Verdict::Decided);
    }
    // The CA not trusted: a TLS failure, decided, and the credentials are
    // never sent in the clear (loopback may fall back to plain HTTP only
    // when the peer does not speak TLS at all).
    let e = rt.block_on(client(None, &good).tags(&r)).unwrap_err();
    assert!(matches!(e, RegistryError::Tls { .. }), "{e}");
    assert_eq!(classify(&Failure::Registry(e)), Verdict::Decided);
}

#[test]
fn a_registry_over_tls_whose_token_realm_is_plain_http_is_refused_before_credentials_go() {
    let tls = Tls::new();
    // The realm: a plain listener that would see the credentials.
    let realm = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    realm.set_nonblocking(true).unwrap();
    let realm_url = format!("http://{}/token", realm.local_addr().unwrap());
    let reg = Registry::tls_with_token_realm(&tls, &realm_url);
    let r = Reference::parse(&format!("{}/acme/private:1.0.0", reg.addr)).unwrap();
    let creds = format!(
        r#"{{"auths": {{"{}": {{"username": "ci", "password": "s3cret"}}}}}}"#,
        reg.addr
    );
    let rt = rt();
    let c = client(Some(&tls.ca), &creds);
    for call in ["tags", "head"] {
        let e = match call {
            "tags" => rt.block_on(c.tags(&r)).unwrap_err(),
            _ => rt.block_on(c.head(&r)).unwrap_err(),
        };
        let text = e.to_string();
        assert!(
            text.contains(&realm_url) && text.contains("not HTTPS") && !text.contains("s3cret"),
            "{call}: {text}"
        );
        assert_eq!(classify(&Failure::Registry(e)), Verdict::Decided, "{call}");
    }
    // Nothing ever reached the realm.
    match realm.accept() {
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
        other => panic!("the plain realm was asked: {other:?}"),
    }
    // The registry did challenge with it (the refusal is the client's).
    let log = std::fs::read_to_string(&reg.log).unwrap();
    assert!(log.contains("/v2/"), "{log}");
}

/// A fake registry: a bearer challenge, a token service that wants Basic
/// credentials, tags in pages of two, a HEAD that does not say its digest,
/// and a 503 with Retry-After for one repository.
async fn fake_registry() -> (String, Arc<std::sync::Mutex<Vec<String>>>) {
    use http_body_util::Full;
    use hyper::body::Bytes;
    use hyper::{Request, Response};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let (a, s) = (addr.clone(), seen.clone());
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let (a, s) = (a.clone(), s.clone());
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                    let (a, s) = (a.clone(), s.clone());
                    async move {
                        let path = req
                            .uri()
                            .path_and_query()
                            .map(|p| p.to_string())
                            .unwrap_or_default();
                        let auth = req
                            .headers()
                            .get("authorization")
                            .and_then(|v| v.to_str().ok())
                            .unwrap_or("")
                            .to_string();
                        s.lock()
                            .unwrap()
                            .push(format!("{} {path} [{auth}]", req.method()));
                        let resp = |code: u16, body: &str| {
                            Response::builder()
                                .status(code)
                                .body(Full::new(Bytes::from(body.to_string())))
                                .unwrap()
                        };
                        let challenge =
                            format!(r#"Bearer realm="http://{a}/token",service="fake""#);
                        if path.starts_with("/token") {
                            // "u:p"
                            return Ok::<_, std::convert::Infallible>(if auth == "Basic dTpw" {
                                assert!(
                                    path.contains("scope=repository:acme/paged:pull")
                                        || path.contains("scope=repository:acme/busy:pull"),
                                    "{path}"
                                );
                                assert!(path.contains("service=fake"), "{path}");
                                resp(200, r#"{"token": "t1", "expires_in": 300}"#)
                            } else {
                                resp(401, "{}")
                            });
                        }
                        if auth != "Bearer t1" {
                            let mut r = resp(401, "{}");
                            r.headers_mut()
                                .insert("www-authenticate", challenge.parse().unwrap());
                            return Ok(r);
                        }
                        Ok(match path.as_str() {
                            "/v2/" => resp(200, "{}"),
                            "/v2/acme/paged/tags/list?n=1000" => {
                                let mut r =
                                    resp(200, r#"{"name":"acme/paged","tags":["1.0.0","1.1.0"]}"#);
                                r.headers_mut().insert(
                                    "link",
                                    r#"</v2/acme/paged/tags/list?last=1.1.0&n=2>; rel="next""#
                                        .parse()
                                        .unwrap(),
                                );
                                r
                            }
                            "/v2/acme/paged/tags/list?last=1.1.0&n=2" => {
                                let mut r =
                                    resp(200, r#"{"name":"acme/paged","tags":["1.2.0","2.0.0"]}"#);
                                r.headers_mut().insert(
                                    "link",
                                    r#"</v2/acme/paged/tags/list?last=2.0.0&n=2>; rel="next""#
                                        .parse()
                                        .unwrap(),
                                );
                                r
                            }
                            "/v2/acme/paged/tags/list?last=2.0.0&n=2" => {
                                resp(200, r#"{"name":"acme/paged","tags":["2.1.0"]}"#)
                            }
                            // No Docker-Content-Digest: the client GETs and hashes.
                            "/v2/acme/paged/manifests/1.2.0" => resp(200, r#"{"schemaVersion":2}"#),
                            _ if path.starts_with("/v2/acme/busy/") => {
                                let mut r = resp(503, "busy");
                                r.headers_mut()
                                    .insert("retry-after", "120".parse().unwrap());
                                r
                            }
                            _ => resp(404, "{}"),
                        })
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    (addr, seen)
}

#[test]
fn bearer_tokens_pagination_and_a_head_without_a_digest_against_a_fake() {
    let rt = rt();
    rt.block_on(async {
        let (addr, seen) = fake_registry().await;
        let creds = format!(r#"{{"auths": {{"{addr}": {{"auth": "dTpw"}}}}}}"#);
        let c = client(None, &creds);
        let r = Reference::parse(&format!("{addr}/acme/paged:1.0.0")).unwrap();
        assert_eq!(
            c.tags(&r).await.unwrap(),
            ["1.0.0", "1.1.0", "1.2.0", "2.0.0", "2.1.0"]
        );
        let head = c.head(&r.with_tag("1.2.0")).await.unwrap();
        assert_eq!(
            head.digest,
            stead::registry::client::sha256(br#"{"schemaVersion":2}"#)
        );
        // One token for the repository, asked once with the credentials.
        let log = seen.lock().unwrap().clone();
        assert_eq!(
            log.iter().filter(|l| l.starts_with("GET /token")).count(),
            1,
            "{log:?}"
        );
        // 503 with Retry-After: transient, not before what it asked.
        let busy = Reference::parse(&format!("{addr}/acme/busy:1.0.0")).unwrap();
        let e = c.tags(&busy).await.unwrap_err();
        assert_eq!(
            classify(&Failure::Registry(e)),
            Verdict::Transient {
                retry_after: Some(Duration::from_secs(120))
            }
        );
        // Without credentials the token is refused: decided.
        let e = client(None, "{}").tags(&r).await.unwrap_err();
        assert!(matches!(e, RegistryError::Credentials { .. }), "{e}");
    });
}

#[test]
fn an_image_index_is_followed_to_this_platform_and_no_other() {
    require_engine();
    let reg = Registry::plain();
    let repo = "acme/multi";
    let (id, digest) = reg.push(repo, "1.0.0", &[("io.stead.min-agent-version", "0.1.0")]);
    let platform = Platform::this();
    let other = if platform.architecture == "arm64" {
        "amd64"
    } else {
        "arm64"
    };
    reg.push_index(repo, "1.1.0", &digest, &platform.architecture);
    reg.push_index(repo, "1.2.0", &digest, other);
    let rt = rt();
    let c = client(None, "{}");
    let r = Reference::parse(&format!("{}/{repo}:1.1.0", reg.addr)).unwrap();
    // The HEAD gives the index's digest; its config is this platform's.
    let head = rt.block_on(c.head(&r)).unwrap();
    assert_eq!(head.media_type, "application/vnd.oci.image.index.v1+json");
    assert_ne!(head.digest, digest);
    let config = rt.block_on(c.config(&r, &head.digest, &platform)).unwrap();
    assert_eq!(config.id, id);
    assert_eq!(config.labels["io.stead.min-agent-version"], "0.1.0");
    // An index with no image for this machine: decided.
    let r2 = r.with_tag("1.2.0");
    let head = rt.block_on(c.head(&r2)).unwrap();
    let e = rt
        .block_on(c.config(&r2, &head.digest, &platform))
        .unwrap_err();
    assert!(matches!(e, RegistryError::NoPlatform { .. }), "{e}");
    assert_eq!(classify(&Failure::Registry(e)), Verdict::Decided);
}

/// A raw HTTP server on loopback: each connection's request head is kept,
/// and answered by `answer(path)` (status line and headers, then a body).
fn raw_server(
    answer: impl Fn(&str) -> (String, String) + Send + 'static,
) -> (String, Arc<std::sync::Mutex<Vec<String>>>) {
    use std::io::{BufRead, BufReader, Write};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let heads: Arc<std::sync::Mutex<Vec<String>>> = Arc::default();
    let kept = heads.clone();
    std::thread::spawn(move || {
        for s in l.incoming().flatten() {
            let mut r = BufReader::new(s.try_clone().unwrap());
            let mut head = String::new();
            while r.read_line(&mut head).is_ok_and(|n| n > 2) {}
            let path = head.split(' ').nth(1).unwrap_or("").to_string();
            kept.lock().unwrap().push(head);
            let (status, body) = answer(&path);
            let _ = write!(
                &s,
                "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    (addr, heads)
}

#[test]
fn credentials_stay_behind_when_a_redirect_leaves_the_host_and_a_redirect_loop_is_decided() {
    let tags = r#"{"name":"acme/x","tags":["1.0.0"]}"#.to_string();
    let (other, other_heads) = raw_server(move |_| ("200 OK".into(), tags.clone()));
    let (addr, heads) = raw_server(move |path| {
        if path == "/v2/" {
            (
                "401 Unauthorized\r\nWWW-Authenticate: Basic realm=\"r\"".into(),
                String::new(),
            )
        } else if path.contains("/loop/") {
            (
                format!("307 Temporary Redirect\r\nLocation: {path}"),
                String::new(),
            )
        } else {
            (
                format!("307 Temporary Redirect\r\nLocation: http://{other}{path}"),
                String::new(),
            )
        }
    });
    let creds = format!(r#"{{"auths": {{"{addr}": {{"auth": "dTpzZWNyZXQ="}}}}}}"#);
    let c = client(None, &creds);
    let rt = rt();
    let r = Reference::parse(&format!("{addr}/acme/x:1.0.0")).unwrap();
    let got = rt.block_on(c.tags(&r)).unwrap();
    assert_eq!(got, vec!["1.0.0".to_string()]);
    let asked = heads.lock().unwrap().join("\n---\n");
    assert!(
        asked.to_ascii_lowercase().contains("authorization: basic"),
        "{asked}"
    );
    let followed = other_heads.lock().unwrap().join("\n---\n");
    assert!(followed.contains("/tags/list"), "{followed}");
    assert!(
        !followed.to_ascii_lowercase().contains("authorization"),
        "the credentials followed the redirect to another host: {followed}"
    );
    // A redirect loop: a definite answer, never retried.
    let r = Reference::parse(&format!("{addr}/loop/x:1.0.0")).unwrap();
    let e = rt.block_on(c.tags(&r)).unwrap_err();
    assert!(e.to_string().contains("redirects"), "{e}");
    assert_eq!(classify(&Failure::Registry(e)), Verdict::Decided);
}
