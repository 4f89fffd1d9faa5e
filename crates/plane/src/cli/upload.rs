//! `--upload s3://BUCKET/PREFIX`: once a command has written the site,
//! the documents of it that the bucket does not hold as they are go up,
//! each a PUT signed by AWS Signature Version 4 with the signer and the
//! credentials file the devices use (`stead-net`'s [`HostAuth`]), in the
//! order [`crate::plane::upload::plan`] gives (roots, `root.json`, groups,
//! nodes), a step at a time. What the bucket holds is read with
//! `ListObjectsV2` (each object's ETag against the file's MD5). The site
//! stays the source of truth: nothing is read back from the bucket into
//! it, and nothing in the bucket is deleted.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use http::{HeaderMap, HeaderValue, Method, StatusCode, Uri};

use crate::net::auth::HostAuth;
use crate::net::http::{Http, Redirects, Transport};
use crate::plane::accept::MAX_DOCUMENT;
use crate::plane::upload::{Target, encode, error_code, order, plan, read_page};

/// Requests at once within a step.
const AT_ONCE: usize = 16;
/// Tries of one request that got no answer, or a 5xx or a 429.
const TRIES: u32 = 3;
/// The time limit of one request.
const LIMIT: Duration = Duration::from_secs(60);
/// The largest listing page read (1,000 keys).
const MAX_PAGE: usize = 8 << 20;

/// Where and how a site is uploaded (`--upload` and its options).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Upload {
    /// The bucket and the keys' prefix.
    pub target: Target,
    /// The AWS credentials file (its `[default]` key).
    pub credentials: PathBuf,
    /// The region signed for.
    pub region: String,
    /// The endpoint: scheme and host (path-style requests).
    pub endpoint: Uri,
    /// Extra CA certificates for the endpoint.
    pub ca: Option<PathBuf>,
}

impl Upload {
    /// Puts every document of `site` the bucket does not hold as it is
    /// (with `dry_run`, says which it would). The error names what failed
    /// and the answer, never a credential.
    pub fn run(&self, site: &Path, dry_run: bool) -> Result<(), String> {
        let files = site_files(site)?;
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the async runtime: {e}"))?
            .block_on(self.send(site, files, dry_run))
    }

    /// Whether the bucket refuses a write whose condition does not hold
    /// (S3's conditional writes), which a site disruption budget's leases
    /// rest on: a probe object put with `If-None-Match: *`, put again so
    /// (refused: 412, or 409 for a write in flight), put with `If-Match` an
    /// ETag it does not have (refused), then deleted. The error says which
    /// write the host took that it should have refused.
    pub fn check_conditional_writes(&self) -> Result<(), String> {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the async runtime: {e}"))?
            .block_on(self.conditional_writes())
    }

    async fn conditional_writes(&self) -> Result<(), String> {
        let http = self.client()?;
        let key = self
            .target
            .key(&format!("leases/.probe-{:016x}", crate::host::random_u64()));
        let uri = self.uri(&format!("/{}", encode(&key, true)))?;
        let shown = format!("s3://{}/{key}", self.target.bucket);
        let put = |header: http::HeaderName, value: &'static str| {
            let mut h = HeaderMap::new();
            h.insert(header, HeaderValue::from_static(value));
            request(
                &http,
                Method::PUT,
                uri.clone(),
                h,
                bytes::Bytes::from_static(b"{}"),
                64 << 10,
            )
        };
        let first = put(http::header::IF_NONE_MATCH, "*").await?;
        if !first.status.is_success() {
            return Err(format!(
                "a PUT of {shown} with If-None-Match: * was not taken: {}",
                answer(first.status, &first.body)
            ));
        }
        let refused =
            |s: StatusCode| matches!(s, StatusCode::PRECONDITION_FAILED | StatusCode::CONFLICT);
        let again = put(http::header::IF_NONE_MATCH, "*").await;
        let other = put(http::header::IF_MATCH, "\"0000000000000000\"").await;
        // The probe goes, whatever the host answered.
        let gone = request(
            &http,
            Method::DELETE,
            uri.clone(),
            HeaderMap::new(),
            bytes::Bytes::new(),
            64 << 10,
        )
        .await;
        let again = again?;
        if !refused(again.status) {
            return Err(format!(
                "the host took a second PUT of {shown} with If-None-Match: * ({}): it has no conditional writes, \
                 and a budget's leases there would not hold",
                again.status
            ));
        }
        let other = other?;
        if !refused(other.status) {
            return Err(format!(
                "the host took a PUT of {shown} with If-Match an ETag it does not have ({}): it has no \
                 conditional writes, and a budget's leases there would not hold",
                other.status
            ));
        }
        if let Err(e) = gone {
            eprintln!("stead-plane: the probe {shown} is left in the bucket: {e}");
        }
        Ok(())
    }

    fn client(&self) -> Result<Http, String> {
        Ok(Http::keeping(self.ca.as_deref(), AT_ONCE)?
            .with_host_auth(
                &self.endpoint,
                Some(HostAuth::S3 {
                    credentials: self.credentials.clone(),
                    region: self.region.clone(),
                }),
            )
            // A body travels nowhere but where it was sent.
            .with_redirects(Redirects::Never))
    }

    /// The URL of `path_and_query` on the endpoint (path-style: the
    /// bucket first).
    fn uri(&self, path_and_query: &str) -> Result<Uri, String> {
        let base = self.endpoint.to_string();
        format!(
            "{}/{}{path_and_query}",
            base.trim_end_matches('/'),
            self.target.bucket
        )
        .parse()
        .map_err(|e| format!("not a URL: {e}"))
    }

    async fn send(
        &self,
        site: &Path,
        files: Vec<(String, String)>,
        dry_run: bool,
    ) -> Result<(), String> {
        let http = self.client()?;
        let held = self.list(&http).await?;
        let steps = plan(&self.target, &files, &held);
        let total: usize = steps.iter().map(Vec::len).sum();
        if dry_run {
            for rel in steps.iter().flatten() {
                println!("would upload {rel} to {}", self.target);
            }
            println!(
                "{total} of {} documents would be uploaded to {}",
                files.len(),
                self.target
            );
            return Ok(());
        }
        for step in steps {
            use futures_util::StreamExt as _;
            let mut puts = futures_util::stream::iter(step)
                .map(|rel| {
                    let http = &http;
                    async move {
                        let done = self.put(http, site, &rel).await;
                        (rel, done)
                    }
                })
                .buffer_unordered(AT_ONCE);
            let mut failed = Vec::new();
            while let Some((rel, done)) = puts.next().await {
                match done {
                    Ok(()) => println!("uploaded {rel}"),
                    Err(e) => {
                        eprintln!("stead-plane: {e}");
                        failed.push(e);
                    }
                }
            }
            // A later step names what this one put: it waits.
            if let Some(first) = failed.first() {
                return Err(format!(
                    "{} upload(s) failed, the first: {first}; the site is written as it was, and \
                     what the bucket misses goes up at the next run",
                    failed.len()
                ));
            }
        }
        println!(
            "{total} of {} documents uploaded to {}; {} already there",
            files.len(),
            self.target,
            files.len() - total
        );
        Ok(())
    }

    /// Every object under the prefix, by key, with its ETag.
    async fn list(&self, http: &Http) -> Result<BTreeMap<String, String>, String> {
        let mut held = BTreeMap::new();
        let mut token: Option<String> = None;
        loop {
            let mut query = format!(
                "?list-type=2&prefix={}",
                encode(&self.target.list_prefix(), false)
            );
            if let Some(t) = &token {
                query.push_str(&format!("&continuation-token={}", encode(t, false)));
            }
            let uri = self.uri(&query)?;
            let what = format!("cannot list {}", self.target);
            let a = request(
                http,
                Method::GET,
                uri,
                HeaderMap::new(),
                bytes::Bytes::new(),
                MAX_PAGE,
            )
            .await
            .map_err(|e| format!("{what}: {e}"))?;
            if a.status != StatusCode::OK {
                return Err(format!("{what}: {}", answer(a.status, &a.body)));
            }
            let page = std::str::from_utf8(&a.body)
                .map_err(|_| "not UTF-8".to_string())
                .and_then(read_page)
                .map_err(|e| format!("{what}: its listing does not read: {e}"))?;
            held.extend(page.objects);
            match page.next {
                Some(next) if token.as_ref() != Some(&next) => token = Some(next),
                Some(_) => return Err(format!("{what}: its listing repeats a page")),
                None => return Ok(held),
            }
        }
    }

    /// One file of the site put at its key.
    async fn put(&self, http: &Http, site: &Path, rel: &str) -> Result<(), String> {
        let key = self.target.key(rel);
        let what = format!("cannot upload {rel} to s3://{}/{key}", self.target.bucket);
        let body = read(site, rel).map_err(|e| format!("{what}: {e}"))?;
        let uri = self.uri(&format!("/{}", encode(&key, true)))?;
        let mut headers = HeaderMap::new();
        headers.insert(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        let a = request(http, Method::PUT, uri, headers, body.into(), 64 << 10)
            .await
            .map_err(|e| format!("{what}: {e}"))?;
        if a.status.is_success() {
            Ok(())
        } else {
            Err(format!("{what}: {}", answer(a.status, &a.body)))
        }
    }
}

/// One request, tried again (after 1 s, then 2 s) when it got no answer,
/// or a 5xx or 429; a credentials file that cannot be used is not.
async fn request(
    http: &Http,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: bytes::Bytes,
    max: usize,
) -> Result<crate::net::http::Answer, String> {
    let mut tried = 0;
    loop {
        tried += 1;
        let a = http
            .send_body(
                method.clone(),
                uri.clone(),
                &headers,
                body.clone(),
                LIMIT,
                max,
            )
            .await;
        let again = match &a {
            Err(Transport::Credentials(_)) => false,
            Err(_) => true,
            Ok(a) => a.status.is_server_error() || a.status == StatusCode::TOO_MANY_REQUESTS,
        };
        if !again || tried >= TRIES {
            return a.map_err(|e| e.to_string());
        }
        tokio::time::sleep(Duration::from_secs(1 << (tried - 1))).await;
    }
}

/// An answer that is not a success: its status, and the S3 error's code.
fn answer(status: StatusCode, body: &[u8]) -> String {
    let code = std::str::from_utf8(body).ok().and_then(error_code);
    match code {
        Some(c) => format!("HTTP {status} ({c})"),
        None => format!("HTTP {status}"),
    }
}

/// A file of the site, read as it is.
fn read(site: &Path, rel: &str) -> Result<Vec<u8>, String> {
    crate::host::files::read_regular(&site.join(rel), MAX_DOCUMENT as u64)
        .map_err(|e| format!("cannot read {}: {e}", site.join(rel).display()))
}

/// The documents of the site a host serves (`root.json`, `roots/*.json`,
/// `groups/*/desired.json`, `nodes/*/desired.json`), each with its MD5.
fn site_files(site: &Path) -> Result<Vec<(String, String)>, String> {
    use md5::Digest as _;
    let mut rels = vec!["root.json".to_string()];
    let names = |dir: &str| -> Result<Vec<String>, String> {
        let path = site.join(dir);
        let entries = match std::fs::read_dir(&path) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
        };
        let mut out = Vec::new();
        for e in entries {
            let e = e.map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            out.push(e.file_name().to_string_lossy().into_owned());
        }
        Ok(out)
    };
    rels.extend(names("roots")?.into_iter().map(|n| format!("roots/{n}")));
    for kind in ["groups", "nodes"] {
        rels.extend(
            names(kind)?
                .into_iter()
                .map(|n| format!("{kind}/{n}/desired.json")),
        );
    }
    let mut out = Vec::new();
    for rel in rels {
        if order(&rel).is_none() {
            continue;
        }
        let bytes = match crate::host::files::read_regular(&site.join(&rel), MAX_DOCUMENT as u64) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(format!("cannot read {}: {e}", site.join(&rel).display())),
        };
        let md5: String = md5::Md5::digest(&bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        out.push((rel, md5));
    }
    out.sort();
    Ok(out)
}
