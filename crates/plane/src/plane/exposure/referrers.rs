//! SBOMs attached to an image in its registry (`exposure
//! --sbom-from-registry`), pure: which of a digest's referrers (the OCI
//! 1.1 referrers API's index, or its tag schema's) and which layers of a
//! referrer's or of cosign's `sha256-<hex>.att` manifest are SBOMs
//! (CycloneDX or SPDX JSON, or DSSE envelopes of in-toto statements of
//! those predicate types), where a reference's repository is, the
//! registry's auth challenge and the credentials file (Docker's
//! `config.json` form). The calls are [`crate::cli::registry`]'s.
//!
//! The same challenge and credentials rules are the device's
//! (`src/registry/auth.rs`); the device crate is no dependency of this
//! one, so they are restated here, held to the same table.

use std::collections::BTreeMap;

use serde_json::Value as J;

/// An SBOM's artifact or layer media types.
pub const SBOM_TYPES: [&str; 2] = ["application/vnd.cyclonedx+json", "application/spdx+json"];
/// A DSSE envelope (cosign's attestation layers).
pub const DSSE: &str = "application/vnd.dsse.envelope.v1+json";
/// An in-toto statement, bare.
pub const IN_TOTO: &str = "application/vnd.in-toto+json";
/// The predicate types of an SBOM attestation (a version may follow).
pub const SBOM_PREDICATES: [&str; 2] = ["https://cyclonedx.org/bom", "https://spdx.dev/Document"];
/// The most referrers and layers read for one digest.
pub const MAX_SBOMS: usize = 16;

/// `sha256:<64 lowercase hex>` exactly (what is asked of a registry).
pub fn is_digest(d: &str) -> bool {
    d.strip_prefix("sha256:").is_some_and(|h| {
        h.len() == 64
            && h.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// Whether an attestation's predicate type is an SBOM's.
pub fn is_sbom_predicate(t: &str) -> bool {
    SBOM_PREDICATES
        .iter()
        .any(|p| t == *p || t.strip_prefix(p).is_some_and(|v| v.starts_with('/')))
}

/// The manifests an index of referrers lists that may hold an SBOM (by
/// their artifact type), at most [`MAX_SBOMS`].
pub fn sbom_referrers(index: &[u8]) -> Result<Vec<String>, String> {
    let doc: J = serde_json::from_slice(index).map_err(|e| format!("an index: {e}"))?;
    let manifests = match doc.get("manifests") {
        None | Some(J::Null) => return Ok(Vec::new()),
        Some(m) => m
            .as_array()
            .ok_or("an index whose manifests are not a list")?,
    };
    Ok(manifests
        .iter()
        .filter(|m| {
            m["artifactType"]
                .as_str()
                .is_some_and(|t| SBOM_TYPES.contains(&t) || t == DSSE || t == IN_TOTO)
        })
        .filter_map(|m| m["digest"].as_str().filter(|d| is_digest(d)))
        .map(str::to_string)
        .take(MAX_SBOMS)
        .collect())
}

/// The layers of a manifest that are SBOMs or SBOM attestations (at most
/// [`MAX_SBOMS`]): an SBOM's media type; a DSSE envelope or in-toto
/// statement unless its `predicateType` annotation names another
/// predicate. With `subject`, a manifest that names another subject (a
/// referrer of another image, in a tag-schema index anyone could write)
/// gives none.
pub fn sbom_layers(manifest: &[u8], subject: Option<&str>) -> Result<Vec<String>, String> {
    let doc: J = serde_json::from_slice(manifest).map_err(|e| format!("a manifest: {e}"))?;
    if let Some(s) = subject
        && doc["subject"]["digest"].as_str() != Some(s)
    {
        return Ok(Vec::new());
    }
    let layers = match doc.get("layers") {
        None | Some(J::Null) => return Ok(Vec::new()),
        Some(l) => l
            .as_array()
            .ok_or("a manifest whose layers are not a list")?,
    };
    Ok(layers
        .iter()
        .filter(|l| {
            let t = l["mediaType"].as_str().unwrap_or("");
            let predicate = l["annotations"]["predicateType"].as_str();
            SBOM_TYPES.contains(&t)
                || ((t == DSSE || t == IN_TOTO) && predicate.is_none_or(is_sbom_predicate))
        })
        .filter_map(|l| l["digest"].as_str().filter(|d| is_digest(d)))
        .map(str::to_string)
        .take(MAX_SBOMS)
        .collect())
}

/// Where a reference's repository is: (the registry as a credentials
/// file names it, the host its API answers on, the repository's path),
/// Docker's rules: a first part with a `.` or a `:`, or `localhost`, is a
/// registry; anything else is on Docker Hub (`library/` for a single
/// name).
pub fn locate(repository: &str) -> Result<(String, String, String), String> {
    let bad = || format!("{repository:?} is not an image repository");
    if repository.is_empty()
        || repository.contains(['@', ' ', '?', '#'])
        || repository.split('/').any(str::is_empty)
    {
        return Err(bad());
    }
    let (first, rest) = repository.split_once('/').unwrap_or(("", repository));
    if !first.is_empty() && (first.contains(['.', ':']) || first == "localhost") {
        return Ok((first.to_string(), first.to_string(), rest.to_string()));
    }
    let path = if repository.contains('/') {
        repository.to_string()
    } else {
        format!("library/{repository}")
    };
    Ok((
        "docker.io".into(),
        "registry-1.docker.io".into(),
        path.to_ascii_lowercase(),
    ))
}

/// Whether a host is this machine (where a plain-HTTP registry is tried
/// when it does not speak TLS).
pub fn is_loopback(host: &str) -> bool {
    let h = host
        .rsplit_once(':')
        .filter(|(_, p)| p.bytes().all(|b| b.is_ascii_digit()))
        .map_or(host, |(h, _)| h);
    let h = h.trim_start_matches('[').trim_end_matches(']');
    h == "localhost"
        || h.parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// What `GET /v2/` asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Challenge {
    /// A token from `realm`, for `service`.
    Bearer {
        realm: String,
        service: Option<String>,
    },
    /// Basic auth on every call.
    Basic,
}

impl Challenge {
    /// A `WWW-Authenticate` header; `None` for a scheme it does not know
    /// or a Bearer challenge without a realm.
    pub fn parse(header: &str) -> Option<Challenge> {
        let (scheme, params) = header.trim().split_once(' ').unwrap_or((header.trim(), ""));
        match scheme.to_ascii_lowercase().as_str() {
            "basic" => Some(Challenge::Basic),
            "bearer" => {
                let params = parse_params(params);
                Some(Challenge::Bearer {
                    realm: params.get("realm")?.clone(),
                    service: params.get("service").cloned(),
                })
            }
            _ => None,
        }
    }
}

/// `k="v",k2=v2` (quoted values may hold commas).
fn parse_params(s: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut rest = s.trim();
    while let Some((k, after)) = rest.split_once('=') {
        let key = k.trim().trim_start_matches(',').trim().to_ascii_lowercase();
        let after = after.trim_start();
        let (value, next) = if let Some(q) = after.strip_prefix('"') {
            match q.find('"') {
                Some(end) => (q[..end].to_string(), &q[end + 1..]),
                None => (q.to_string(), ""),
            }
        } else {
            match after.find(',') {
                Some(end) => (after[..end].trim().to_string(), &after[end..]),
                None => (after.trim().to_string(), ""),
            }
        };
        out.insert(key, value);
        rest = next.trim_start().trim_start_matches(',').trim_start();
    }
    out
}

/// Why a token realm is not asked: a registry reached over TLS whose
/// realm is not HTTPS would have the credentials sent in clear.
pub fn realm_refused(tls: bool, realm: &str) -> Option<String> {
    let scheme = realm.split_once("://").map(|(s, _)| s.to_ascii_lowercase());
    match scheme.as_deref() {
        Some("https") => None,
        Some("http") if !tls => None,
        _ => Some(format!(
            "its token realm {:?} is not HTTPS: the credentials would leave TLS; not asked",
            crate::model::text::clip(realm, 256)
        )),
    }
}

/// A user name and password for one registry.
#[derive(Clone, PartialEq, Eq)]
pub struct Login {
    pub username: String,
    pub password: String,
}

impl std::fmt::Debug for Login {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Login({:?}, <password>)", self.username)
    }
}

impl Login {
    /// `Authorization: Basic …`.
    pub fn basic(&self) -> String {
        use base64::Engine as _;
        let raw = format!("{}:{}", self.username, self.password);
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(raw)
        )
    }
}

/// The registries' logins a credentials file in Docker's `config.json`
/// form names (`auths`: `auth` as base64 `user:password`, or `username`
/// and `password`), by registry. The error names the entry, never a
/// secret.
pub fn credentials(bytes: &[u8]) -> Result<BTreeMap<String, Login>, String> {
    use base64::Engine as _;
    let doc: J = serde_json::from_slice(bytes)
        .map_err(|e| format!("not JSON (line {}, column {})", e.line(), e.column()))?;
    let mut out = BTreeMap::new();
    let Some(auths) = doc.get("auths") else {
        return Ok(out);
    };
    let auths = auths.as_object().ok_or("\"auths\" is not an object")?;
    for (key, entry) in auths {
        let field = |name: &str| entry.get(name).and_then(J::as_str).unwrap_or("");
        let login = if !field("auth").is_empty() {
            let raw = base64::engine::general_purpose::STANDARD
                .decode(field("auth").trim())
                .map_err(|_| format!("auths.{key:?}.auth is not base64"))?;
            let raw =
                String::from_utf8(raw).map_err(|_| format!("auths.{key:?}.auth is not text"))?;
            let (u, p) = raw
                .split_once(':')
                .ok_or_else(|| format!("auths.{key:?}.auth is not user:password"))?;
            Login {
                username: u.into(),
                password: p.into(),
            }
        } else if !field("username").is_empty() {
            Login {
                username: field("username").into(),
                password: field("password").into(),
            }
        } else {
            continue;
        };
        out.insert(registry_key(key), login);
    }
    Ok(out)
}

/// The key a registry is known by: Docker Hub's several names are one; a
/// scheme and path are dropped.
pub fn registry_key(s: &str) -> String {
    let s = s
        .strip_prefix("https://")
        .or_else(|| s.strip_prefix("http://"))
        .unwrap_or(s);
    match s.split('/').next().unwrap_or(s) {
        "index.docker.io" | "registry-1.docker.io" | "docker.io" => "docker.io".into(),
        h => h.to_ascii_lowercase(),
    }
}

/// The next page of a paged answer, from its `Link` header.
pub fn next_link(link: &str) -> Option<String> {
    link.split(',').find_map(|part| {
        let (target, params) = part.split_once(';')?;
        params
            .contains("rel=\"next\"")
            .then(|| target.trim().trim_start_matches('<').trim_end_matches('>'))
            .filter(|t| t.starts_with('/'))
            .map(str::to_string)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: &str = "sha256:1111111111111111111111111111111111111111111111111111111111111111";
    const E: &str = "sha256:2222222222222222222222222222222222222222222222222222222222222222";

    #[test]
    fn which_referrers_may_hold_an_sbom() {
        for (index, want) in [
            (
                format!(
                    r#"{{"manifests": [
                        {{"digest": "{D}", "artifactType": "application/vnd.cyclonedx+json"}},
                        {{"digest": "{E}", "artifactType": "application/vnd.dev.sigstore.bundle.v0.3+json"}}]}}"#
                ),
                vec![D],
            ),
            (
                format!(r#"{{"manifests": [{{"digest": "{D}", "artifactType": "application/spdx+json"}}]}}"#),
                vec![D],
            ),
            (
                format!(r#"{{"manifests": [{{"digest": "{D}", "artifactType": "application/vnd.dsse.envelope.v1+json"}}]}}"#),
                vec![D],
            ),
            (
                format!(r#"{{"manifests": [{{"digest": "{D}", "artifactType": "application/vnd.in-toto+json"}}]}}"#),
                vec![D],
            ),
            (format!(r#"{{"manifests": [{{"digest": "{D}"}}]}}"#), vec![]),
            (
                r#"{"manifests": [{"digest": "sha256:XYZ", "artifactType": "application/spdx+json"}]}"#.into(),
                vec![],
            ),
            (
                format!(r#"{{"manifests": [{{"digest": "sha256:{}", "artifactType": "application/spdx+json"}}]}}"#, "A".repeat(64)),
                vec![],
            ),
            (r#"{"schemaVersion": 2}"#.into(), vec![]),
            (r#"{"manifests": null}"#.into(), vec![]),
        ] {
            assert_eq!(sbom_referrers(index.as_bytes()).unwrap(), want, "{index}");
        }
        for bad in [&b"{"[..], br#"{"manifests": {}}"#] {
            assert!(sbom_referrers(bad).is_err());
        }
    }

    #[test]
    fn which_layers_are_sboms() {
        let layer = |t: &str, predicate: Option<&str>| {
            let a = predicate.map_or(String::new(), |p| {
                format!(r#", "annotations": {{"predicateType": "{p}"}}"#)
            });
            format!(
                r#"{{"layers": [{{"mediaType": "{t}", "digest": "{E}"{a}}}], "subject": {{"digest": "{D}"}}}}"#
            )
        };
        for (manifest, subject, found) in [
            (layer(DSSE, Some("https://cyclonedx.org/bom")), None, true),
            (
                layer(DSSE, Some("https://cyclonedx.org/bom/v1.5")),
                None,
                true,
            ),
            (layer(DSSE, Some("https://spdx.dev/Document")), None, true),
            (
                layer(DSSE, Some("https://spdx.dev/Document")),
                Some(D),
                true,
            ),
            (
                layer(DSSE, Some("https://slsa.dev/provenance/v1")),
                None,
                false,
            ),
            (layer(DSSE, Some("https://cyclonedx.org/bomb")), None, false),
            (layer(DSSE, None), None, true),
            (layer(IN_TOTO, None), None, true),
            (layer("application/vnd.cyclonedx+json", None), Some(D), true),
            (layer("application/spdx+json", None), Some(D), true),
            // A referrer of another image.
            (layer("application/spdx+json", None), Some(E), false),
            (
                layer("application/vnd.oci.image.layer.v1.tar+gzip", None),
                None,
                false,
            ),
            (r#"{"config": {}}"#.into(), None, false),
        ] {
            let got = sbom_layers(manifest.as_bytes(), subject).unwrap();
            assert_eq!(got == vec![E.to_string()], found, "{manifest} {subject:?}");
        }
        assert!(sbom_layers(b"[", None).is_err());
        assert!(sbom_layers(br#"{"layers": 1}"#, None).is_err());
    }

    #[test]
    fn where_a_repository_is() {
        for (repo, want) in [
            (
                "127.0.0.1:5000/app",
                Some(("127.0.0.1:5000", "127.0.0.1:5000", "app")),
            ),
            (
                "reg.example/team/app",
                Some(("reg.example", "reg.example", "team/app")),
            ),
            ("localhost/app", Some(("localhost", "localhost", "app"))),
            (
                "busybox",
                Some(("docker.io", "registry-1.docker.io", "library/busybox")),
            ),
            (
                "team/app",
                Some(("docker.io", "registry-1.docker.io", "team/app")),
            ),
            ("", None),
            ("reg.example//app", None),
            ("reg.example/app@sha256", None),
            ("reg.example/a pp", None),
        ] {
            let got = locate(repo).ok();
            let want = want.map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()));
            assert_eq!(got, want, "{repo}");
        }
        for (host, loopback) in [
            ("127.0.0.1:5000", true),
            ("localhost", true),
            ("[::1]:5000", true),
            ("reg.example:5000", false),
            ("10.0.0.1", false),
        ] {
            assert_eq!(is_loopback(host), loopback, "{host}");
        }
    }

    #[test]
    fn challenges_realms_and_links() {
        for (header, want) in [
            (
                r#"Bearer realm="https://auth.example/token",service="reg",scope="repository:a:pull,push""#,
                Some(Challenge::Bearer {
                    realm: "https://auth.example/token".into(),
                    service: Some("reg".into()),
                }),
            ),
            (
                "Bearer realm=http://127.0.0.1:9/token",
                Some(Challenge::Bearer {
                    realm: "http://127.0.0.1:9/token".into(),
                    service: None,
                }),
            ),
            (r#"Basic realm="Registry Realm""#, Some(Challenge::Basic)),
            ("Bearer service=x", None),
            ("Negotiate", None),
        ] {
            assert_eq!(Challenge::parse(header), want, "{header}");
        }
        for (tls, realm, refused) in [
            (true, "https://auth.example/token", false),
            (true, "http://auth.example/token", true),
            (true, "/token", true),
            (false, "http://127.0.0.1:9/token", false),
        ] {
            assert_eq!(realm_refused(tls, realm).is_some(), refused, "{realm}");
        }
        for (link, want) in [
            (
                r#"</v2/a/referrers/x?n=2&last=y>; rel="next""#,
                Some("/v2/a/referrers/x?n=2&last=y"),
            ),
            (r#"<https://elsewhere/v2/x>; rel="next""#, None),
            (r#"</v2/x>; rel="prev""#, None),
        ] {
            assert_eq!(next_link(link).as_deref(), want, "{link}");
        }
    }

    #[test]
    fn credentials_file() {
        let c = credentials(
            br#"{"auths": {
                "https://index.docker.io/v1/": {"auth": "dTpw"},
                "127.0.0.1:5001": {"username": "ci", "password": "s3cret"},
                "empty.example": {}
            }}"#,
        )
        .unwrap();
        assert_eq!(c["docker.io"].username, "u");
        assert_eq!(c["127.0.0.1:5001"].basic(), "Basic Y2k6czNjcmV0");
        assert!(!c.contains_key("empty.example"));
        assert!(!format!("{c:?}").contains("s3cret"));
        for (bad, says) in [
            (&b"{"[..], "not JSON"),
            (br#"{"auths": []}"#, "not an object"),
            (br#"{"auths": {"r": {"auth": "%%%"}}}"#, "not base64"),
            (
                br#"{"auths": {"r": {"auth": "bm9jb2xvbg=="}}}"#,
                "not user:password",
            ),
        ] {
            let e = credentials(bad).unwrap_err();
            assert!(e.contains(says), "{e}");
        }
    }
}
