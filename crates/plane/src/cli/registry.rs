//! The SBOMs a registry holds for an image digest (`exposure
//! --sbom-from-registry`): the OCI 1.1 referrers API
//! (`GET /v2/<repo>/referrers/<digest>`, its pages followed), or where a
//! registry has none (404, or 400, 405, 501 from one before it) the
//! referrers tag schema's index at `sha256-<hex>`, and cosign's
//! attestations at the tag `sha256-<hex>.att`. Every manifest and blob
//! read is checked against its digest. Auth is the registry's `/v2/`
//! challenge (Bearer with a token per repository, or Basic) with the
//! logins of a credentials file in Docker's `config.json` form; a
//! plain-HTTP registry is tried only on loopback, and only when the peer
//! does not speak TLS at all. What is an SBOM is
//! [`crate::plane::exposure::referrers`]'s.
//!
//! The device has the same client (`src/registry/client.rs`); it is not
//! a dependency of this crate, so this is a small restatement of it.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::time::Duration;

use http::{HeaderMap, HeaderValue, Method, StatusCode, Uri};

use crate::net::http::{Answer, Http, Transport};
use crate::plane::exposure::referrers::{
    self, Challenge, Login, MAX_SBOMS, is_digest, is_loopback, locate, next_link, realm_refused,
};
use crate::plane::exposure::{Sbom, read_sbom};

/// Each call's time limit.
const CALL_LIMIT: Duration = Duration::from_secs(30);
/// The largest manifest or index read.
const MAX_MANIFEST: usize = 4 << 20;
/// A layer blob's time limit.
const BLOB_LIMIT: Duration = Duration::from_secs(3600);
/// The largest SBOM or attestation read.
const MAX_BLOB: usize = 256 << 20;
/// The most pages of referrers read.
const MAX_PAGES: usize = 10;

/// A layer of an image, as its manifest and config name it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LayerBlob {
    /// The repository it is read from.
    pub repository: String,
    /// `sha256:…` of its uncompressed tar.
    pub diff_id: String,
    /// `sha256:…` of its blob.
    pub digest: String,
    /// Its blob's media type.
    pub media_type: String,
}

/// The registries asked, with what each answered `/v2/`.
pub struct Registries {
    http: Http,
    logins: BTreeMap<String, Login>,
    /// Per registry: its scheme (`https`, or `http` on loopback) and
    /// challenge.
    known: HashMap<String, (&'static str, Option<Challenge>)>,
    /// Bearer tokens per registry and repository.
    tokens: HashMap<(String, String), String>,
}

impl Registries {
    /// A client trusting the system's CAs and `ca`, logging in with the
    /// credentials file `auth`. The error names the file at fault.
    pub fn new(auth: Option<&Path>, ca: Option<&Path>) -> Result<Registries, String> {
        let logins = match auth {
            None => BTreeMap::new(),
            Some(f) => {
                let bytes = crate::host::files::read_regular(f, 1 << 20)
                    .map_err(|e| format!("--registry-auth {}: {e}", f.display()))?;
                referrers::credentials(&bytes)
                    .map_err(|e| format!("--registry-auth {}: {e}", f.display()))?
            }
        };
        let http = Http::new(ca).map_err(|e| format!("--registry-ca: {e}"))?;
        Ok(Registries {
            http,
            logins,
            known: HashMap::new(),
            tokens: HashMap::new(),
        })
    }

    /// The SBOMs `repository` holds for `digest`, each read as
    /// [`read_sbom`] reads it and taken to be of `digest` (what it is
    /// attached to names the image). The error says why nothing is known.
    pub async fn sboms(&mut self, repository: &str, digest: &str) -> Result<Vec<Sbom>, String> {
        if !is_digest(digest) {
            return Err(format!("{digest:?} is not a sha256 digest"));
        }
        let repo = locate(repository)?;
        let mut blobs = Vec::new();
        // The referrers API, or its tag schema.
        let tag = digest.replacen(':', "-", 1);
        let mut referrers = Vec::new();
        let mut next = Some(format!("/v2/{}/referrers/{digest}", repo.2));
        let mut pages = 0;
        while let Some(path) = next.take() {
            pages += 1;
            let index = "application/vnd.oci.image.index.v1+json";
            let a = match self.get(&repo, &path, index, MAX_MANIFEST).await? {
                Ok(a) => a,
                Err(404 | 400 | 405 | 501) if pages == 1 => {
                    match self.manifest(&repo, &tag).await? {
                        Ok(a) => a,
                        Err(404) => break,
                        Err(s) => return Err(format!("{repository}:{tag}: status {s}")),
                    }
                }
                Err(s) => return Err(format!("{repository} referrers of {digest}: status {s}")),
            };
            referrers.extend(referrers::sbom_referrers(&a.body)?);
            if pages < MAX_PAGES && referrers.len() < MAX_SBOMS {
                next = a
                    .headers
                    .get(http::header::LINK)
                    .and_then(|l| l.to_str().ok())
                    .and_then(next_link);
            }
        }
        for m in referrers.into_iter().take(MAX_SBOMS) {
            let a = match self.manifest(&repo, &m).await? {
                Ok(a) => a,
                // Listed, and gone since.
                Err(404) => continue,
                Err(s) => return Err(format!("{repository}@{m}: status {s}")),
            };
            check(&m, &a.body)?;
            blobs.extend(referrers::sbom_layers(&a.body, Some(digest))?);
        }
        // cosign's attestations.
        let att = format!("{tag}.att");
        match self.manifest(&repo, &att).await? {
            Ok(a) => blobs.extend(
                referrers::sbom_layers(&a.body, None)
                    .map_err(|e| format!("{repository}:{att}: {e}"))?,
            ),
            Err(404) => {}
            Err(s) => return Err(format!("{repository}:{att}: status {s}")),
        }
        let mut out = Vec::new();
        for b in blobs.into_iter().take(MAX_SBOMS) {
            let path = format!("/v2/{}/blobs/{b}", repo.2);
            let a = match self.get(&repo, &path, "*/*", MAX_BLOB).await? {
                Ok(a) => a,
                Err(s) => return Err(format!("{repository} blob {b}: status {s}")),
            };
            check(&b, &a.body)?;
            match read_sbom(&a.body, &tag) {
                Ok(mut sbom) => {
                    sbom.digests = [digest.to_string()].into();
                    out.push(sbom);
                }
                Err(e) if is_sbom_blob(&a.body) => {
                    return Err(format!("{repository} blob {b}: {e}"));
                }
                // An attestation of another kind, unannotated: not an SBOM.
                Err(_) => {}
            }
        }
        Ok(out)
    }

    async fn manifest(
        &mut self,
        repo: &(String, String, String),
        at: &str,
    ) -> Result<Result<Answer, u16>, String> {
        let accept = "application/vnd.oci.image.manifest.v1+json, \
                      application/vnd.oci.image.index.v1+json, \
                      application/vnd.docker.distribution.manifest.v2+json";
        let path = format!("/v2/{}/manifests/{at}", repo.2);
        self.get(repo, &path, accept, MAX_MANIFEST).await
    }

    /// The layers of `image` (`repo:tag` or `repo@sha256:…`; every
    /// platform of an index but attestations'), each once: its diff ID,
    /// its blob's digest and media type. Every manifest and config read is
    /// checked against its digest where one names it.
    pub async fn layers(&mut self, image: &str) -> Result<Vec<LayerBlob>, String> {
        let (repository, at) = match image.split_once('@') {
            Some((r, d)) => (r, d.to_string()),
            None => match image.rsplit_once(':').filter(|(_, t)| !t.contains('/')) {
                Some((r, t)) => (r, t.to_string()),
                None => (image, "latest".to_string()),
            },
        };
        let repo = locate(repository)?;
        let top = match self.manifest(&repo, &at).await? {
            Ok(a) => a,
            Err(s) => return Err(format!("{image}: its manifest: status {s}")),
        };
        if is_digest(&at) {
            check(&at, &top.body)?;
        }
        let doc: serde_json::Value = serde_json::from_slice(&top.body)
            .map_err(|e| format!("{image}: its manifest is not JSON: {e}"))?;
        let mut manifests = Vec::new();
        match doc["manifests"].as_array() {
            Some(list) => {
                for m in list {
                    if m["platform"]["os"].as_str() == Some("unknown") {
                        continue;
                    }
                    let d = m["digest"]
                        .as_str()
                        .filter(|d| is_digest(d))
                        .ok_or_else(|| format!("{image}: an index entry without a digest"))?;
                    let a = match self.manifest(&repo, d).await? {
                        Ok(a) => a,
                        Err(s) => return Err(format!("{image}@{d}: status {s}")),
                    };
                    check(d, &a.body)?;
                    manifests.push(
                        serde_json::from_slice::<serde_json::Value>(&a.body)
                            .map_err(|e| format!("{image}@{d}: not JSON: {e}"))?,
                    );
                }
            }
            None => manifests.push(doc),
        }
        let mut out: Vec<LayerBlob> = Vec::new();
        for m in manifests {
            let config = m["config"]["digest"]
                .as_str()
                .filter(|d| is_digest(d))
                .ok_or_else(|| format!("{image}: a manifest without a config digest"))?;
            let path = format!("/v2/{}/blobs/{config}", repo.2);
            let c = match self.get(&repo, &path, "*/*", MAX_MANIFEST).await? {
                Ok(a) => a,
                Err(s) => return Err(format!("{image}: its config {config}: status {s}")),
            };
            check(config, &c.body)?;
            let c: serde_json::Value = serde_json::from_slice(&c.body)
                .map_err(|e| format!("{image}: its config is not JSON: {e}"))?;
            let diff_ids = c["rootfs"]["diff_ids"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let layers = m["layers"].as_array().cloned().unwrap_or_default();
            if diff_ids.len() != layers.len() {
                return Err(format!(
                    "{image}: its manifest names {} layers, its config {}",
                    layers.len(),
                    diff_ids.len()
                ));
            }
            for (d, l) in diff_ids.iter().zip(&layers) {
                let (Some(diff_id), Some(digest)) = (
                    d.as_str().filter(|d| is_digest(d)),
                    l["digest"].as_str().filter(|d| is_digest(d)),
                ) else {
                    return Err(format!("{image}: a layer without a sha256 digest"));
                };
                if out.iter().any(|o| o.diff_id == diff_id) {
                    continue;
                }
                out.push(LayerBlob {
                    repository: repository.to_string(),
                    diff_id: diff_id.to_string(),
                    digest: digest.to_string(),
                    media_type: l["mediaType"].as_str().unwrap_or_default().to_string(),
                });
            }
        }
        Ok(out)
    }

    /// A layer's blob, handed to `sink` as it comes (at most `max`
    /// bytes); its digest is the caller's to check.
    pub async fn blob(
        &mut self,
        layer: &LayerBlob,
        max: usize,
        sink: crate::net::http::Sink<'_>,
    ) -> Result<(), String> {
        let repo = locate(&layer.repository)?;
        let path = format!("/v2/{}/blobs/{}", repo.2, layer.digest);
        match self.request(&repo, &path, "*/*", max, Some(sink)).await? {
            Ok(_) => Ok(()),
            Err(s) => Err(format!(
                "{} blob {}: status {s}",
                layer.repository, layer.digest
            )),
        }
    }

    /// A GET to the registry: the answer, or its status when it is not a
    /// success; the error says why there is none.
    async fn get(
        &mut self,
        repo: &(String, String, String),
        path: &str,
        accept: &str,
        max: usize,
    ) -> Result<Result<Answer, u16>, String> {
        self.request(repo, path, accept, max, None).await
    }

    /// [`Registries::get`], a success's body handed to `sink` when there
    /// is one.
    async fn request(
        &mut self,
        repo: &(String, String, String),
        path: &str,
        accept: &str,
        max: usize,
        mut sink: Option<crate::net::http::Sink<'_>>,
    ) -> Result<Result<Answer, u16>, String> {
        let (scheme, challenge) = self.probe(repo).await?;
        let mut retried = false;
        loop {
            let mut headers = HeaderMap::new();
            if let Ok(v) = HeaderValue::try_from(accept) {
                headers.insert(http::header::ACCEPT, v);
            }
            match &challenge {
                Some(Challenge::Basic) => {
                    if let Some(l) = self.logins.get(&repo.0)
                        && let Ok(v) = HeaderValue::try_from(l.basic())
                    {
                        headers.insert(http::header::AUTHORIZATION, v);
                    }
                }
                Some(Challenge::Bearer { realm, service }) => {
                    let token = self.token(repo, realm, service.as_deref()).await?;
                    if let Ok(v) = HeaderValue::try_from(format!("Bearer {token}")) {
                        headers.insert(http::header::AUTHORIZATION, v);
                    }
                }
                None => {}
            }
            let uri = uri(scheme, &repo.1, path)?;
            let a = match sink.as_mut() {
                None => {
                    self.http
                        .send(Method::GET, uri, &headers, CALL_LIMIT, max)
                        .await
                }
                Some(sink) => {
                    self.http
                        .send_streamed(Method::GET, uri, &headers, BLOB_LIMIT, max, &mut **sink)
                        .await
                }
            }
            .map_err(|t| format!("{}{path}: {t}", repo.1))?;
            match a.status {
                s if s.is_success() => return Ok(Ok(a)),
                StatusCode::UNAUTHORIZED if !retried && challenge.is_some() => {
                    self.tokens.remove(&(repo.0.clone(), repo.2.clone()));
                    retried = true;
                }
                StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => {
                    return Err(format!(
                        "{}: refused ({}): give --registry-auth with a login for it",
                        repo.0,
                        a.status.as_u16()
                    ));
                }
                s => return Ok(Err(s.as_u16())),
            }
        }
    }

    /// The scheme a registry answers on and its challenge (asked once).
    async fn probe(
        &mut self,
        repo: &(String, String, String),
    ) -> Result<(&'static str, Option<Challenge>), String> {
        if let Some(k) = self.known.get(&repo.0) {
            return Ok(k.clone());
        }
        let mut scheme = "https";
        let a = loop {
            match self
                .http
                .send(
                    Method::GET,
                    uri(scheme, &repo.1, "/v2/")?,
                    &HeaderMap::new(),
                    CALL_LIMIT,
                    64 << 10,
                )
                .await
            {
                Ok(a) => break a,
                // Only a peer that does not speak TLS at all: a
                // certificate that is not trusted is never bypassed.
                Err(Transport::NotTls(_)) if scheme == "https" && is_loopback(&repo.1) => {
                    scheme = "http";
                }
                Err(t) => return Err(format!("{}: {t}", repo.1)),
            }
        };
        let challenge = match a.status {
            s if s.is_success() => None,
            StatusCode::UNAUTHORIZED => {
                let h = a
                    .headers
                    .get(http::header::WWW_AUTHENTICATE)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("");
                let c = Challenge::parse(h)
                    .ok_or_else(|| format!("{}: an auth challenge it cannot read", repo.0))?;
                if let Challenge::Bearer { realm, .. } = &c
                    && let Some(why) = realm_refused(scheme == "https", realm)
                {
                    return Err(format!("{}: {why}", repo.0));
                }
                Some(c)
            }
            s => return Err(format!("{}: /v2/ answers status {}", repo.0, s.as_u16())),
        };
        self.known
            .insert(repo.0.clone(), (scheme, challenge.clone()));
        Ok((scheme, challenge))
    }

    /// A pull token for the repository, from the challenge's realm.
    async fn token(
        &mut self,
        repo: &(String, String, String),
        realm: &str,
        service: Option<&str>,
    ) -> Result<String, String> {
        let key = (repo.0.clone(), repo.2.clone());
        if let Some(t) = self.tokens.get(&key) {
            return Ok(t.clone());
        }
        let mut url = format!(
            "{realm}{}scope=repository:{}:pull",
            if realm.contains('?') { '&' } else { '?' },
            repo.2
        );
        if let Some(s) = service {
            url.push_str("&service=");
            url.push_str(&encode(s));
        }
        let uri: Uri = url
            .parse()
            .map_err(|_| format!("{}: a token realm that is not a URL", repo.0))?;
        let mut headers = HeaderMap::new();
        if let Some(l) = self.logins.get(&repo.0)
            && let Ok(v) = HeaderValue::try_from(l.basic())
        {
            headers.insert(http::header::AUTHORIZATION, v);
        }
        let a = self
            .http
            .send(Method::GET, uri, &headers, CALL_LIMIT, 1 << 20)
            .await
            .map_err(|t| format!("{} token: {t}", repo.0))?;
        if !a.status.is_success() {
            return Err(format!(
                "{}: its token service answers status {}",
                repo.0,
                a.status.as_u16()
            ));
        }
        let t: serde_json::Value = serde_json::from_slice(&a.body)
            .map_err(|e| format!("{}: a token answer that is not JSON: {e}", repo.0))?;
        let token = t["token"]
            .as_str()
            .or(t["access_token"].as_str())
            .ok_or_else(|| format!("{}: no token in the answer", repo.0))?
            .to_string();
        self.tokens.insert(key, token.clone());
        Ok(token)
    }
}

/// Whether a blob that did not read as an SBOM claims to be one (an
/// in-toto statement of an SBOM predicate, or a document of an SBOM's
/// format): then it is an error, else it is passed over.
fn is_sbom_blob(bytes: &[u8]) -> bool {
    let Ok(doc) = serde_json::from_slice::<serde_json::Value>(bytes) else {
        return false;
    };
    let statement = match doc.get("payloadType") {
        Some(_) => doc["payload"]
            .as_str()
            .and_then(|p| {
                use base64::Engine as _;
                base64::engine::general_purpose::STANDARD.decode(p).ok()
            })
            .and_then(|raw| serde_json::from_slice::<serde_json::Value>(&raw).ok())
            .unwrap_or_default(),
        None => doc.clone(),
    };
    statement["predicateType"]
        .as_str()
        .is_some_and(referrers::is_sbom_predicate)
        || doc.get("bomFormat").is_some()
        || doc.get("spdxVersion").is_some()
}

/// Checks that `body` is what `digest` names.
fn check(digest: &str, body: &[u8]) -> Result<(), String> {
    let got = format!("sha256:{}", crate::net::sigv4::hex_sha256(body));
    if got != digest {
        return Err(format!("{digest}: the registry served {got} instead"));
    }
    Ok(())
}

fn uri(scheme: &str, host: &str, path: &str) -> Result<Uri, String> {
    format!("{scheme}://{host}{path}")
        .parse()
        .map_err(|_| format!("{host}: not a registry address"))
}

/// Percent-encodes a query value.
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}
