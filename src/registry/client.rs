//! The Distribution API, as much as a reload needs: a repository's tags
//! (following `Link` pagination, with caps on pages and bytes), a
//! manifest's digest by `HEAD` (with the OCI and Docker media types; a GET
//! and a hash when the registry does not say), and an image's config for
//! this machine's platform (its labels and health check), read before any
//! layer is pulled. Auth: the `/v2/` challenge, bearer tokens per
//! repository (asked with Basic credentials when there are any), or Basic.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use http::{HeaderMap, HeaderValue, Method, StatusCode, Uri};

use crate::model::reference::Reference;
use crate::model::time::{MAX_RETRY_AFTER, RetryAfter, parse_retry_after};
use crate::model::version::{Newest, Range, TagVersion};
use crate::net::http::{Answer, Http, Open, Sink, Transport};
use crate::registry::auth::{Challenge, Credentials, realm_refused};
use crate::registry::error::{Object, RegistryError};
use crate::registry::tags::TagScan;

/// Manifest media types asked for, index types first. Distribution 2.8
/// answers a HEAD without the OCI types with 404 for an OCI image.
pub const MANIFEST_TYPES: [&str; 4] = [
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
];

/// The time one registry call may take.
const CALL_LIMIT: Duration = Duration::from_secs(30);
/// The largest manifest or index read.
const MAX_MANIFEST: usize = 4 * 1024 * 1024;
/// The largest image config read.
const MAX_CONFIG: usize = 4 * 1024 * 1024;
/// The most tag-list bytes read, all pages together. A list is read as it
/// streams and filtered by the range as it is read (memory does not grow
/// with it); past this it is a decided answer: asking again would read it
/// all again.
const MAX_TAGS_TOTAL: usize = 16 * 1024 * 1024;
/// Tag-list pages followed.
const MAX_TAGS_PAGES: usize = 100;
/// Tags asked for per page.
const TAGS_PAGE: usize = 1000;
/// Referrers-API pages followed.
const MAX_REFERRERS_PAGES: usize = 8;
/// Referrers read from those pages (they are filtered to bundles after).
const MAX_REFERRERS: usize = 1024;

/// A manifest's identity, from a `HEAD` (or a GET when the registry does
/// not say its digest).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ManifestHead {
    /// Its digest, `sha256:…`.
    pub digest: String,
    /// Its media type.
    pub media_type: String,
}

/// What an image's config says that a reload needs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ImageConfig {
    /// The config's digest: the image ID the engine gives it.
    pub id: String,
    /// Its labels.
    pub labels: std::collections::BTreeMap<String, String>,
    /// Whether it declares a health check.
    pub healthcheck: bool,
}

/// A platform, as an index lists them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Platform {
    /// `linux`.
    pub os: String,
    /// `amd64`, `arm64`, `arm`.
    pub architecture: String,
    /// `v7` for 32-bit ARM.
    pub variant: Option<String>,
}

impl Platform {
    /// This machine's.
    pub fn this() -> Platform {
        let (architecture, variant) = match std::env::consts::ARCH {
            "x86_64" => ("amd64", None),
            "aarch64" => ("arm64", None),
            "arm" => ("arm", Some("v7")),
            other => (other, None),
        };
        Platform {
            os: "linux".into(),
            architecture: architecture.into(),
            variant: variant.map(str::to_string),
        }
    }
}

impl std::fmt::Display for Platform {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.os, self.architecture)?;
        if let Some(v) = &self.variant {
            write!(f, "/{v}")?;
        }
        Ok(())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Scheme {
    Https,
    Http,
}

#[derive(Default)]
struct Known {
    /// Per registry: the scheme it answers on and its challenge.
    registries: HashMap<String, (Scheme, Option<Challenge>)>,
    /// Bearer tokens per registry and repository, with when they expire.
    tokens: HashMap<(String, String), (String, Instant)>,
}

/// A client for the registries a node's modules come from.
pub struct Registries {
    http: Http,
    credentials: Credentials,
    /// Registries reached over plain HTTP when they do not speak TLS (the
    /// configured ones, and any on loopback, as the engine does).
    insecure: Vec<String>,
    known: Mutex<Known>,
}

impl Registries {
    /// A client with this HTTP stack and these credentials.
    pub fn new(http: Http, credentials: Credentials, insecure: Vec<String>) -> Registries {
        Registries {
            http,
            credentials,
            insecure,
            known: Mutex::new(Known::default()),
        }
    }

    /// The credentials, for the engine's pull.
    pub fn credentials(&self) -> &Credentials {
        &self.credentials
    }

    /// Every tag of the repository, following the registry's pages (held
    /// whole: for a list known to be small; a reload uses
    /// [`Registries::newest`]).
    pub async fn tags(&self, r: &Reference) -> Result<Vec<String>, RegistryError> {
        let mut tags = Vec::new();
        self.each_tag(r, &mut |t| tags.push(t.to_string())).await?;
        Ok(tags)
    }

    /// The newest `keep` candidates for an update from `running` within
    /// `range`, newest first, filtered as the tag list streams.
    pub async fn newest(
        &self,
        r: &Reference,
        range: &Range,
        running: &TagVersion,
        keep: usize,
    ) -> Result<Vec<TagVersion>, RegistryError> {
        let mut newest = Newest::new(range, running, keep);
        self.each_tag(r, &mut |t| newest.offer(t)).await?;
        Ok(newest.finish())
    }

    /// Hands every tag of the repository to `tag` as it is read, following
    /// the registry's pages; no page is held whole.
    pub async fn each_tag(
        &self,
        r: &Reference,
        tag: &mut (dyn FnMut(&str) + Send),
    ) -> Result<(), RegistryError> {
        let mut total = 0usize;
        let mut next = format!("/v2/{}/tags/list?n={TAGS_PAGE}", r.repository);
        for _ in 0..MAX_TAGS_PAGES {
            let mut scan = TagScan::default();
            let mut read = 0usize;
            let a = self
                .call_with(
                    r,
                    Method::GET,
                    &next,
                    &[],
                    Object::Tags,
                    How::Stream(
                        MAX_TAGS_TOTAL.saturating_sub(total),
                        &mut |chunk: &[u8]| {
                            read += chunk.len();
                            scan.feed(chunk, tag);
                        },
                    ),
                )
                .await
                .map(|(a, _)| a)
                .map_err(|e| match e {
                    RegistryError::Malformed { message, .. } if message.starts_with("larger") => {
                        malformed(r, Object::Tags, "more than 16 MiB of tags")
                    }
                    e => e,
                })?;
            total += read;
            scan.finish()
                .map_err(|e| malformed(r, Object::Tags, &format!("not a tag list: {e}")))?;
            match a
                .headers
                .get(http::header::LINK)
                .and_then(|l| l.to_str().ok())
                .and_then(next_link)
            {
                Some(link) => next = link,
                None => return Ok(()),
            }
        }
        Err(malformed(
            r,
            Object::Tags,
            &format!("more than {MAX_TAGS_PAGES} pages of tags"),
        ))
    }

    /// The digest of the manifest (or index) a tag names, by `HEAD`; by a
    /// GET and a hash when the registry does not say it.
    pub async fn head(&self, r: &Reference) -> Result<ManifestHead, RegistryError> {
        let at = r
            .digest
            .clone()
            .or_else(|| r.tag.clone())
            .unwrap_or_else(|| "latest".into());
        let path = format!("/v2/{}/manifests/{at}", r.repository);
        let accept = MANIFEST_TYPES.join(", ");
        let a = self
            .call(
                r,
                Method::HEAD,
                &path,
                &[("accept", &accept)],
                Object::Manifest,
                0,
            )
            .await?;
        let media_type = header(&a.headers, "content-type");
        if let Some(d) = a
            .headers
            .get("docker-content-digest")
            .and_then(|v| v.to_str().ok())
            .filter(|d| is_digest(d))
        {
            return Ok(ManifestHead {
                digest: d.to_string(),
                media_type,
            });
        }
        let a = self.manifest(r, &at).await?;
        Ok(ManifestHead {
            digest: sha256(&a.body),
            media_type: header(&a.headers, "content-type"),
        })
    }

    /// The config of the image a manifest digest names, for `platform`
    /// when it is an index: manifests and config are read (and checked
    /// against their digests), no layer is.
    pub async fn config(
        &self,
        r: &Reference,
        digest: &str,
        platform: &Platform,
    ) -> Result<ImageConfig, RegistryError> {
        let doc = self.platform_manifest(r, digest, platform).await?;
        let config = doc
            .config
            .ok_or_else(|| malformed(r, Object::Manifest, "no config"))?;
        let path = format!("/v2/{}/blobs/{}", r.repository, config.digest);
        let a = self
            .call(r, Method::GET, &path, &[], Object::Blob, MAX_CONFIG)
            .await?;
        check_digest(r, Object::Blob, &config.digest, &a.body)?;
        let c: ConfigDoc = serde_json::from_slice(&a.body)
            .map_err(|e| malformed(r, Object::Blob, &e.to_string()))?;
        let inner = c.config.unwrap_or_default();
        Ok(ImageConfig {
            id: config.digest,
            labels: inner.labels.unwrap_or_default(),
            healthcheck: inner
                .healthcheck
                .is_some_and(|h| h.test.first().is_some_and(|t| t != "NONE")),
        })
    }

    /// The sigstore signatures the registry holds for the manifest
    /// `digest` of `r`'s repository: cosign's signature manifest at the
    /// tag `sha256-<hex>.sig`, each simple-signing layer's payload (checked
    /// against its digest) with the signature its annotation carries. No
    /// such manifest is no signature.
    pub async fn signatures(
        &self,
        r: &Reference,
        digest: &str,
    ) -> Result<Vec<crate::model::image_policy::Signature>, RegistryError> {
        use crate::model::image_policy::{
            MAX_PAYLOAD, SIGNATURE_ANNOTATION, SIMPLE_SIGNING, Signature,
        };
        let layers = self
            .cosign_layers(
                r,
                digest,
                "sig",
                SIMPLE_SIGNING,
                Some(SIGNATURE_ANNOTATION),
                MAX_PAYLOAD,
            )
            .await?;
        Ok(layers
            .into_iter()
            .map(|(signature, payload)| Signature { payload, signature })
            .collect())
    }

    /// The in-toto attestations the registry holds for the manifest
    /// `digest` (cosign's attestation manifest at the tag
    /// `sha256-<hex>.att`): each DSSE envelope layer's bytes, checked
    /// against its digest. No such manifest is none.
    pub async fn attestations(
        &self,
        r: &Reference,
        digest: &str,
    ) -> Result<Vec<Vec<u8>>, RegistryError> {
        use crate::model::image_policy::{DSSE_ENVELOPE, MAX_ATTESTATION};
        let layers = self
            .cosign_layers(r, digest, "att", DSSE_ENVELOPE, None, MAX_ATTESTATION)
            .await?;
        Ok(layers.into_iter().map(|(_, bytes)| bytes).collect())
    }

    /// The Sigstore bundles the registry holds for the manifest `digest`
    /// (OCI distribution 1.1): the referrers API's index
    /// (`/v2/<repo>/referrers/<digest>`, its pages followed), or, where
    /// the registry has no such API (it answers 404), the referrers tag
    /// schema's index at the tag `sha256-<hex>` (also where a registry from
    /// before the API answers 400, 405 or 501); none when neither is
    /// there. Each referrer whose artifact type is a bundle's is read: its
    /// manifest (checked against its digest, its `subject` this digest)
    /// and its bundle layers (each at most
    /// [`crate::model::image_policy::MAX_ATTESTATION`] bytes, checked
    /// against its digest); at most
    /// [`crate::model::image_policy::MAX_SIGNATURES`] in all.
    pub async fn bundles(
        &self,
        r: &Reference,
        digest: &str,
    ) -> Result<Vec<Vec<u8>>, RegistryError> {
        use crate::model::image_policy::{BUNDLE_TYPES, MAX_ATTESTATION, MAX_SIGNATURES};
        if !is_digest(digest) {
            return Err(malformed(r, Object::Manifest, "not a sha256 digest"));
        }
        let accept = "application/vnd.oci.image.index.v1+json";
        let mut referrers: Vec<Descriptor> = Vec::new();
        let mut next = Some(format!("/v2/{}/referrers/{digest}", r.repository));
        let mut pages = 0;
        while let Some(path) = next.take() {
            pages += 1;
            let a = match self
                .call(
                    r,
                    Method::GET,
                    &path,
                    &[("accept", accept)],
                    Object::Manifest,
                    MAX_MANIFEST,
                )
                .await
            {
                Ok(a) => a,
                // No referrers API: the tag schema. 404 is the spec's
                // answer; a registry from before it may say it does not
                // know the route otherwise (400, 405, 501).
                Err(RegistryError::Status {
                    status: 404 | 400 | 405 | 501,
                    ..
                }) if pages == 1 => {
                    let tag = digest.replacen(':', "-", 1);
                    match self.manifest(r, &tag).await {
                        Ok(a) => a,
                        Err(RegistryError::Status { status: 404, .. }) => return Ok(Vec::new()),
                        Err(e) => return Err(e),
                    }
                }
                Err(e) => return Err(e),
            };
            let doc: Manifest = serde_json::from_slice(&a.body).map_err(|e| {
                malformed(r, Object::Manifest, &format!("referrers of {digest}: {e}"))
            })?;
            referrers.extend(doc.manifests.unwrap_or_default());
            if pages < MAX_REFERRERS_PAGES && referrers.len() < MAX_REFERRERS {
                next = a
                    .headers
                    .get(http::header::LINK)
                    .and_then(|l| l.to_str().ok())
                    .and_then(next_link);
            }
        }
        let mut out = Vec::new();
        let bundles = referrers.into_iter().filter(|d| {
            d.artifact_type
                .as_deref()
                .is_some_and(|t| BUNDLE_TYPES.contains(&t))
                && is_digest(&d.digest)
        });
        for d in bundles.take(MAX_SIGNATURES) {
            let a = match self.manifest(r, &d.digest).await {
                Ok(a) => a,
                // Listed, and gone since: not there.
                Err(RegistryError::Status { status: 404, .. }) => continue,
                Err(e) => return Err(e),
            };
            check_digest(r, Object::Manifest, &d.digest, &a.body)?;
            let m: Manifest = serde_json::from_slice(&a.body)
                .map_err(|e| malformed(r, Object::Manifest, &format!("{}: {e}", d.digest)))?;
            // A referrer of another manifest (a tag-schema index anyone
            // could write) is not this one's.
            if m.subject.as_ref().map(|s| s.digest.as_str()) != Some(digest) {
                continue;
            }
            for l in m.layers.unwrap_or_default() {
                if out.len() >= MAX_SIGNATURES {
                    break;
                }
                let is_bundle = l
                    .media_type
                    .as_deref()
                    .is_some_and(|t| BUNDLE_TYPES.contains(&t));
                if !is_bundle || !is_digest(&l.digest) {
                    continue;
                }
                let path = format!("/v2/{}/blobs/{}", r.repository, l.digest);
                let b = self
                    .call(r, Method::GET, &path, &[], Object::Blob, MAX_ATTESTATION)
                    .await?;
                check_digest(r, Object::Blob, &l.digest, &b.body)?;
                out.push(b.body.to_vec());
            }
        }
        Ok(out)
    }

    /// The layers of `media_type` (at most
    /// [`crate::model::image_policy::MAX_SIGNATURES`], each at most `max`
    /// bytes and checked against its digest) of the manifest cosign tags
    /// `sha256-<hex>.<suffix>` for `digest`, each with the value of its
    /// annotation `annotation` (a layer without it is passed over); none
    /// when there is no such manifest.
    async fn cosign_layers(
        &self,
        r: &Reference,
        digest: &str,
        suffix: &str,
        media_type: &str,
        annotation: Option<&str>,
        max: usize,
    ) -> Result<Vec<(String, Vec<u8>)>, RegistryError> {
        let tag = format!("{}.{suffix}", digest.replacen(':', "-", 1));
        let a = match self.manifest(r, &tag).await {
            Ok(a) => a,
            Err(RegistryError::Status { status: 404, .. }) => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let doc: Manifest = serde_json::from_slice(&a.body)
            .map_err(|e| malformed(r, Object::Manifest, &format!("{tag}: {e}")))?;
        let mut out = Vec::new();
        let layers = doc.layers.unwrap_or_default();
        for l in layers
            .into_iter()
            .take(crate::model::image_policy::MAX_SIGNATURES)
        {
            if l.media_type.as_deref() != Some(media_type) || !is_digest(&l.digest) {
                continue;
            }
            let said = match annotation {
                Some(name) => match l.annotations.get(name) {
                    Some(v) => v.clone(),
                    None => continue,
                },
                None => String::new(),
            };
            let path = format!("/v2/{}/blobs/{}", r.repository, l.digest);
            let b = self
                .call(r, Method::GET, &path, &[], Object::Blob, max)
                .await?;
            check_digest(r, Object::Blob, &l.digest, &b.body)?;
            out.push((said, b.body.to_vec()));
        }
        Ok(out)
    }

    /// The layers (digest, compressed size) of the image a tag or digest
    /// names, for `platform` when it is an index: manifests only, no blob.
    pub async fn layers(
        &self,
        r: &Reference,
        at: &str,
        platform: &Platform,
    ) -> Result<Vec<(String, u64)>, RegistryError> {
        let doc = self.platform_manifest(r, at, platform).await?;
        Ok(doc
            .layers
            .unwrap_or_default()
            .into_iter()
            .map(|l| (l.digest, l.size.unwrap_or(0)))
            .collect())
    }

    /// The manifest a tag or digest names, through an index to the one for
    /// `platform`; what a digest names is checked against it.
    async fn platform_manifest(
        &self,
        r: &Reference,
        at: &str,
        platform: &Platform,
    ) -> Result<Manifest, RegistryError> {
        self.platform_answer(r, at, platform)
            .await
            .map(|(doc, _, _, _)| doc)
    }

    /// [`Registries::platform_manifest`], with the answer it came in and
    /// its digest (a tag's hashed from its bytes).
    async fn platform_answer(
        &self,
        r: &Reference,
        at: &str,
        platform: &Platform,
    ) -> Result<(Manifest, Answer, String, Option<Served>), RegistryError> {
        let mut digest = at.to_string();
        let mut index = None;
        // An index, then the manifest it names for this platform.
        for _ in 0..2 {
            let a = self.manifest(r, &digest).await?;
            if is_digest(&digest) {
                check_digest(r, Object::Manifest, &digest, &a.body)?;
            } else {
                digest = sha256(&a.body);
            }
            let doc: Manifest = serde_json::from_slice(&a.body)
                .map_err(|e| malformed(r, Object::Manifest, &e.to_string()))?;
            if let Some(list) = &doc.manifests {
                match pick(list, platform) {
                    Some(m) => {
                        index = Some(Served {
                            media_type: doc
                                .media_type
                                .clone()
                                .or_else(|| header_opt(&a.headers, "content-type"))
                                .unwrap_or_else(|| MANIFEST_TYPES[0].to_string()),
                            digest,
                            bytes: a.body.clone(),
                        });
                        digest = m.digest.clone();
                        continue;
                    }
                    None => return Err(no_platform(r, list, platform)),
                }
            }
            return Ok((doc, a, digest, index));
        }
        Err(malformed(r, Object::Manifest, "an index within an index"))
    }

    /// GETs a manifest (or index) by tag or digest.
    async fn manifest(&self, r: &Reference, at: &str) -> Result<Answer, RegistryError> {
        let path = format!("/v2/{}/manifests/{at}", r.repository);
        let accept = MANIFEST_TYPES.join(", ");
        self.call(
            r,
            Method::GET,
            &path,
            &[("accept", &accept)],
            Object::Manifest,
            MAX_MANIFEST,
        )
        .await
    }

    /// One call to a registry, authorised as its challenge asks.
    async fn call(
        &self,
        r: &Reference,
        method: Method,
        path_and_query: &str,
        extra: &[(&str, &str)],
        object: Object,
        max_body: usize,
    ) -> Result<Answer, RegistryError> {
        self.call_with(
            r,
            method,
            path_and_query,
            extra,
            object,
            How::Read(max_body),
        )
        .await
        .map(|(a, _)| a)
    }

    /// A blob's bytes, from `range` on when there is one (`bytes=<n>-`),
    /// its body left open to be read as it comes: the head within
    /// `stall`, each chunk within `stall` of the last, however long the
    /// whole takes. The answer's status and `Content-Range` are the
    /// caller's to judge ([`crate::model::fetch::take`]); 416 comes back
    /// as an answer too.
    pub async fn blob(
        &self,
        r: &Reference,
        digest: &str,
        range: Option<&str>,
        stall: Duration,
    ) -> Result<(Answer, Option<Open>), RegistryError> {
        let path = format!("/v2/{}/blobs/{digest}", r.repository);
        let extra: Vec<(&str, &str)> = range.map(|v| ("range", v)).into_iter().collect();
        self.call_with(
            r,
            Method::GET,
            &path,
            &extra,
            Object::Blob,
            How::Open(stall),
        )
        .await
    }

    /// A manifest's bytes and media type by digest (checked against it),
    /// through an index to the one for `platform`; with its digest.
    pub async fn manifest_for(
        &self,
        r: &Reference,
        at: &str,
        platform: &Platform,
    ) -> Result<FetchedManifest, RegistryError> {
        let (doc, a, digest, index) = self.platform_answer(r, at, platform).await?;
        let media_type = doc
            .media_type
            .clone()
            .or_else(|| header_opt(&a.headers, "content-type"))
            .unwrap_or_else(|| MANIFEST_TYPES[2].to_string());
        let config = doc
            .config
            .as_ref()
            .map(|c| (c.digest.clone(), c.size.unwrap_or(0)))
            .ok_or_else(|| malformed(r, Object::Manifest, "no config"))?;
        let layers = doc
            .layers
            .unwrap_or_default()
            .into_iter()
            .map(|l| (l.digest, l.size.unwrap_or(0)))
            .collect();
        Ok(FetchedManifest {
            bytes: a.body,
            digest,
            media_type,
            config,
            layers,
            index,
        })
    }

    /// A config's bytes by digest, checked against it.
    pub async fn config_bytes(
        &self,
        r: &Reference,
        digest: &str,
    ) -> Result<bytes::Bytes, RegistryError> {
        let path = format!("/v2/{}/blobs/{digest}", r.repository);
        let a = self
            .call(r, Method::GET, &path, &[], Object::Blob, MAX_CONFIG)
            .await?;
        check_digest(r, Object::Blob, digest, &a.body)?;
        Ok(a.body)
    }

    /// [`Registries::call`], a successful answer's body read as `how`
    /// says.
    async fn call_with(
        &self,
        r: &Reference,
        method: Method,
        path_and_query: &str,
        extra: &[(&str, &str)],
        object: Object,
        mut how: How<'_>,
    ) -> Result<(Answer, Option<Open>), RegistryError> {
        let (scheme, challenge) = self.probe(r).await?;
        let what = r.to_string();
        let mut retried = false;
        loop {
            let mut headers = HeaderMap::new();
            headers.insert(
                http::header::USER_AGENT,
                HeaderValue::from_static(concat!("stead/", env!("CARGO_PKG_VERSION"))),
            );
            for (k, v) in extra {
                if let (Ok(k), Ok(v)) = (http::HeaderName::try_from(*k), HeaderValue::try_from(*v))
                {
                    headers.insert(k, v);
                }
            }
            match &challenge {
                Some(Challenge::Basic) => {
                    if let Some(l) = self.credentials.for_registry(&r.registry) {
                        headers.insert(http::header::AUTHORIZATION, value(&l.basic()));
                    }
                }
                Some(Challenge::Bearer { realm, service }) => {
                    let token = self.token(r, realm, service.as_deref()).await?;
                    headers.insert(
                        http::header::AUTHORIZATION,
                        value(&format!("Bearer {token}")),
                    );
                }
                None => {}
            }
            let uri = self.uri(r, scheme, path_and_query)?;
            let sent = match &mut how {
                How::Stream(max_body, sink) => self
                    .http
                    .send_streamed(method.clone(), uri, &headers, CALL_LIMIT, *max_body, *sink)
                    .await
                    .map(|a| (a, None)),
                How::Read(max_body) => self
                    .http
                    .send(method.clone(), uri, &headers, CALL_LIMIT, *max_body)
                    .await
                    .map(|a| (a, None)),
                How::Open(stall) => self.http.open(method.clone(), uri, &headers, *stall).await,
            };
            let (a, open) = sent.map_err(|t| transport(r, &what, object, t))?;
            match a.status {
                s if s.is_success() => return Ok((a, open)),
                StatusCode::RANGE_NOT_SATISFIABLE if matches!(how, How::Open(_)) => {
                    return Ok((a, None));
                }
                StatusCode::UNAUTHORIZED if !retried && challenge.is_some() => {
                    // A token may have expired early: ask for a new one once.
                    self.known
                        .lock()
                        .expect("registry lock")
                        .tokens
                        .remove(&(r.registry.clone(), r.repository.clone()));
                    retried = true;
                }
                StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => {
                    return Err(RegistryError::Credentials {
                        registry: r.registry.clone(),
                        object,
                        what,
                        status: a.status.as_u16(),
                    });
                }
                s => {
                    return Err(RegistryError::Status {
                        registry: r.registry.clone(),
                        object,
                        what,
                        status: s.as_u16(),
                        retry_after: retry_after(&a.headers),
                    });
                }
            }
        }
    }

    /// The scheme a registry answers on and its challenge, from `GET /v2/`
    /// (asked once, then kept).
    async fn probe(&self, r: &Reference) -> Result<(Scheme, Option<Challenge>), RegistryError> {
        if let Some(k) = self
            .known
            .lock()
            .expect("registry lock")
            .registries
            .get(&r.registry)
        {
            return Ok(k.clone());
        }
        let host = r.api_host().to_string();
        let plain_allowed = self.insecure.iter().any(|i| i == &r.registry) || is_loopback(&host);
        let mut scheme = Scheme::Https;
        let a = loop {
            let uri = self.uri(r, scheme, "/v2/")?;
            match self
                .http
                .send(Method::GET, uri, &HeaderMap::new(), CALL_LIMIT, 64 * 1024)
                .await
            {
                Ok(a) => break a,
                // Only a peer that does not speak TLS at all; a certificate
                // that is not trusted is never bypassed.
                Err(Transport::NotTls(_)) if plain_allowed && scheme == Scheme::Https => {
                    scheme = Scheme::Http;
                }
                Err(t) => return Err(transport(r, "/v2/", Object::Ping, t)),
            }
        };
        let challenge = match a.status {
            s if s.is_success() => None,
            StatusCode::UNAUTHORIZED => {
                let h = header(&a.headers, "www-authenticate");
                Some(Challenge::parse(&h).ok_or_else(|| {
                    malformed(r, Object::Ping, "an auth challenge it cannot read")
                })?)
            }
            s => {
                return Err(RegistryError::Status {
                    registry: r.registry.clone(),
                    object: Object::Ping,
                    what: "/v2/".into(),
                    status: s.as_u16(),
                    retry_after: retry_after(&a.headers),
                });
            }
        };
        if let Some(Challenge::Bearer { realm, .. }) = &challenge {
            if let Some(why) = realm_refused(scheme == Scheme::Https, realm) {
                return Err(malformed(r, Object::Ping, &why));
            }
        }
        self.known
            .lock()
            .expect("registry lock")
            .registries
            .insert(r.registry.clone(), (scheme, challenge.clone()));
        Ok((scheme, challenge))
    }

    /// A pull token for the repository, from the challenge's realm.
    async fn token(
        &self,
        r: &Reference,
        realm: &str,
        service: Option<&str>,
    ) -> Result<String, RegistryError> {
        let key = (r.registry.clone(), r.repository.clone());
        if let Some((t, until)) = self.known.lock().expect("registry lock").tokens.get(&key) {
            if Instant::now() < *until {
                return Ok(t.clone());
            }
        }
        let mut url = format!(
            "{realm}{}scope=repository:{}:pull",
            if realm.contains('?') { '&' } else { '?' },
            r.repository
        );
        if let Some(s) = service {
            url.push_str("&service=");
            url.push_str(&encode(s));
        }
        let uri: Uri = url
            .parse()
            .map_err(|_| malformed(r, Object::Token, "a token realm that is not a URL"))?;
        let mut headers = HeaderMap::new();
        if let Some(l) = self.credentials.for_registry(&r.registry) {
            headers.insert(http::header::AUTHORIZATION, value(&l.basic()));
        }
        let what = r.to_string();
        let a = self
            .http
            .send(Method::GET, uri, &headers, CALL_LIMIT, 1024 * 1024)
            .await
            .map_err(|t| transport(r, &what, Object::Token, t))?;
        match a.status {
            s if s.is_success() => {}
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => {
                return Err(RegistryError::Credentials {
                    registry: r.registry.clone(),
                    object: Object::Token,
                    what,
                    status: a.status.as_u16(),
                });
            }
            s => {
                return Err(RegistryError::Status {
                    registry: r.registry.clone(),
                    object: Object::Token,
                    what,
                    status: s.as_u16(),
                    retry_after: retry_after(&a.headers),
                });
            }
        }
        #[derive(serde::Deserialize)]
        struct Token {
            token: Option<String>,
            access_token: Option<String>,
            expires_in: Option<u64>,
        }
        let t: Token = serde_json::from_slice(&a.body)
            .map_err(|e| malformed(r, Object::Token, &e.to_string()))?;
        let token = t
            .token
            .or(t.access_token)
            .ok_or_else(|| malformed(r, Object::Token, "no token in the answer"))?;
        // Kept a little less long than it lives.
        let life = Duration::from_secs(t.expires_in.unwrap_or(60).clamp(10, 3600) - 5);
        self.known
            .lock()
            .expect("registry lock")
            .tokens
            .insert(key, (token.clone(), Instant::now() + life));
        Ok(token)
    }

    fn uri(&self, r: &Reference, scheme: Scheme, path: &str) -> Result<Uri, RegistryError> {
        let s = match scheme {
            Scheme::Https => "https",
            Scheme::Http => "http",
        };
        format!("{s}://{}{path}", r.api_host())
            .parse()
            .map_err(|_| RegistryError::Reference(format!("{r}: not a registry address")))
    }
}

/// How a call reads a successful answer's body.
enum How<'a> {
    /// Whole, up to this many bytes.
    Read(usize),
    /// Handed to the sink as it streams, up to this many bytes.
    Stream(usize, Sink<'a>),
    /// Left open, each chunk within this of the last.
    Open(Duration),
}

/// A manifest as fetched for a pull of the agent's own.
#[derive(Clone, Debug)]
pub struct FetchedManifest {
    /// Its bytes, as served.
    pub bytes: bytes::Bytes,
    /// Its digest.
    pub digest: String,
    /// Its media type.
    pub media_type: String,
    /// Its config's digest and size.
    pub config: (String, u64),
    /// Its layers' digests and sizes, base first.
    pub layers: Vec<(String, u64)>,
    /// The index it was named by, when it came through one.
    pub index: Option<Served>,
}

/// A manifest as a registry served it, by its digest.
#[derive(Clone, Debug)]
pub struct Served {
    /// Its digest.
    pub digest: String,
    /// Its bytes.
    pub bytes: bytes::Bytes,
    /// Its media type.
    pub media_type: String,
}

#[derive(serde::Deserialize)]
struct Manifest {
    #[serde(rename = "mediaType", default)]
    media_type: Option<String>,
    manifests: Option<Vec<Descriptor>>,
    config: Option<Descriptor>,
    layers: Option<Vec<Descriptor>>,
    /// What an artifact's manifest refers to (OCI image spec 1.1).
    #[serde(default)]
    subject: Option<Descriptor>,
}

#[derive(serde::Deserialize)]
struct Descriptor {
    digest: String,
    platform: Option<PlatformDoc>,
    size: Option<u64>,
    #[serde(rename = "mediaType", default)]
    media_type: Option<String>,
    #[serde(default)]
    annotations: std::collections::BTreeMap<String, String>,
    /// A referrer's artifact type, as an index lists it.
    #[serde(rename = "artifactType", default)]
    artifact_type: Option<String>,
}

#[derive(serde::Deserialize)]
struct PlatformDoc {
    os: String,
    architecture: String,
    variant: Option<String>,
}

#[derive(serde::Deserialize)]
struct ConfigDoc {
    config: Option<ConfigInner>,
}

#[derive(serde::Deserialize, Default)]
struct ConfigInner {
    #[serde(rename = "Labels")]
    labels: Option<std::collections::BTreeMap<String, String>>,
    #[serde(rename = "Healthcheck")]
    healthcheck: Option<HealthDoc>,
}

#[derive(serde::Deserialize)]
struct HealthDoc {
    #[serde(rename = "Test", default)]
    test: Vec<String>,
}

/// The manifest an index lists for `platform`.
fn pick<'a>(list: &'a [Descriptor], platform: &Platform) -> Option<&'a Descriptor> {
    list.iter().find(|m| {
        m.platform.as_ref().is_some_and(|p| {
            p.os == platform.os
                && p.architecture == platform.architecture
                && (platform.variant.is_none()
                    || p.variant.is_none()
                    || p.variant == platform.variant)
        })
    })
}

/// An index that lists no manifest for `platform`, with those it does.
fn no_platform(r: &Reference, list: &[Descriptor], platform: &Platform) -> RegistryError {
    let offered: Vec<String> = list
        .iter()
        .filter_map(|m| m.platform.as_ref())
        .map(|p| format!("{}/{}", p.os, p.architecture))
        .collect();
    RegistryError::NoPlatform {
        registry: r.registry.clone(),
        what: r.to_string(),
        platform: platform.to_string(),
        offered: offered.join(", "),
    }
}

fn header_opt(h: &HeaderMap, name: &str) -> Option<String> {
    h.get(name)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.split(';').next().unwrap_or(v).trim().to_string())
        .filter(|v| !v.is_empty())
}

fn value(s: &str) -> HeaderValue {
    HeaderValue::try_from(s).unwrap_or_else(|_| HeaderValue::from_static(""))
}

fn header(h: &HeaderMap, name: &str) -> String {
    h.get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string()
}

fn is_digest(d: &str) -> bool {
    d.strip_prefix("sha256:")
        .is_some_and(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// `sha256:<hex>` of some bytes.
pub fn sha256(bytes: &[u8]) -> String {
    crate::model::names::Digest::of(bytes).to_string()
}

fn check_digest(
    r: &Reference,
    object: Object,
    digest: &str,
    body: &[u8],
) -> Result<(), RegistryError> {
    let got = sha256(body);
    if got != digest {
        return Err(RegistryError::DigestMismatch {
            registry: r.registry.clone(),
            object,
            what: digest.to_string(),
            got,
        });
    }
    Ok(())
}

fn malformed(r: &Reference, object: Object, message: &str) -> RegistryError {
    RegistryError::Malformed {
        registry: r.registry.clone(),
        object,
        what: r.to_string(),
        message: message.to_string(),
    }
}

fn transport(r: &Reference, what: &str, object: Object, t: Transport) -> RegistryError {
    let registry = r.registry.clone();
    match t {
        Transport::Timeout => RegistryError::Timeout {
            registry,
            what: format!("{} {what}", object.as_str()),
            limit: CALL_LIMIT,
        },
        // The registry client sets no host credentials of the plane's.
        Transport::Connect(message) | Transport::Credentials(message) => {
            RegistryError::Connect { registry, message }
        }
        Transport::Tls(message) | Transport::NotTls(message) => {
            RegistryError::Tls { registry, message }
        }
        Transport::TooLarge(n) => RegistryError::Malformed {
            registry,
            object,
            what: what.to_string(),
            message: format!("larger than {n} bytes"),
        },
        // A definite answer: asking again loops again.
        Transport::Redirects(message) => RegistryError::Malformed {
            registry,
            object,
            what: what.to_string(),
            message,
        },
    }
}

/// `Retry-After` in seconds (an HTTP date is read as no delay asked).
fn retry_after(h: &HeaderMap) -> Option<Duration> {
    match parse_retry_after(h.get(http::header::RETRY_AFTER)?.to_str().ok()?)? {
        RetryAfter::Seconds(secs) => Some(Duration::from_secs(secs).min(MAX_RETRY_AFTER)),
        RetryAfter::Date(_) => None,
    }
}

/// The next page's path from a `Link: </v2/…?last=x&n=100>; rel="next"`.
fn next_link(link: &str) -> Option<String> {
    link.split(',').find_map(|part| {
        let (target, params) = part.split_once(';')?;
        if !params.replace(' ', "").contains("rel=\"next\"") && !params.contains("rel=next") {
            return None;
        }
        let t = target.trim().strip_prefix('<')?.strip_suffix('>')?;
        // Only paths on the same registry are followed.
        t.starts_with("/v2/").then(|| t.to_string())
    })
}

fn is_loopback(host: &str) -> bool {
    let h = host.rsplit_once(':').map_or(host, |(h, p)| {
        if p.bytes().all(|b| b.is_ascii_digit()) {
            h
        } else {
            host
        }
    });
    h == "localhost"
        || h.parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
        || h.trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<std::net::Ipv6Addr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Percent-encodes a query value.
fn encode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A registry's `Retry-After`: seconds, at most a day; an HTTP date is
    /// no delay asked.
    #[test]
    fn retry_after_exactly() {
        let secs = |s: u64| Some(Duration::from_secs(s));
        for (v, wait) in [
            (" 90 ", secs(90)),
            ("18446744073709551615", secs(86_400)),
            ("Sun, 06 Nov 2094 08:49:37 GMT", None),
            ("soon", None),
        ] {
            let mut h = HeaderMap::new();
            h.insert(http::header::RETRY_AFTER, HeaderValue::from_static(v));
            assert_eq!(retry_after(&h), wait, "{v:?}");
        }
        assert_eq!(retry_after(&HeaderMap::new()), None);
    }

    #[test]
    fn links_and_hosts() {
        assert_eq!(
            next_link(r#"</v2/a/tags/list?last=x&n=2>; rel="next""#).as_deref(),
            Some("/v2/a/tags/list?last=x&n=2")
        );
        assert_eq!(next_link(r#"<https://elsewhere/v2/a>; rel="next""#), None);
        assert_eq!(next_link(r#"</v2/a/tags/list?n=2>; rel="prev""#), None);
        assert!(is_loopback("127.0.0.1:5000"));
        assert!(is_loopback("localhost:5000"));
        assert!(is_loopback("[::1]:5000"));
        assert!(!is_loopback("registry.example:5000"));
        assert_eq!(encode("registry.docker.io"), "registry.docker.io");
        assert_eq!(encode("a b/c"), "a%20b%2Fc");
        let mut h = HeaderMap::new();
        h.insert(http::header::RETRY_AFTER, HeaderValue::from_static("90"));
        assert_eq!(retry_after(&h), Some(Duration::from_secs(90)));
        assert_eq!(
            sha256(b""),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }
}
