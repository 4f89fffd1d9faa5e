//! Credentials and the registry's auth challenge: the credentials file (in
//! Docker's `config.json` form, `auths` by registry), the `WWW-Authenticate`
//! challenge of `GET /v2/` (Bearer with realm, service and scope, or
//! Basic), and the `X-Registry-Auth` the engine's pull takes.

use std::collections::BTreeMap;
use std::path::Path;

use base64::Engine as _;

/// A user name and password (or token) for one registry.
#[derive(Clone, PartialEq, Eq)]
pub struct Login {
    /// The user.
    pub username: String,
    /// The password or access token.
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
        let raw = format!("{}:{}", self.username, self.password);
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(raw)
        )
    }
}

/// The credentials of every registry the file names.
#[derive(Clone, Debug, Default)]
pub struct Credentials {
    by_registry: BTreeMap<String, Login>,
}

impl Credentials {
    /// Reads a credentials file in Docker's `config.json` form:
    /// `{"auths": {"<registry>": {"auth": "<base64 user:password>"}}}` or
    /// with `username` and `password`. The error names the file and the
    /// entry at fault, never a secret.
    pub fn load(path: &Path) -> Result<Credentials, String> {
        let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
        if bytes.len() > 1024 * 1024 {
            return Err(format!("{}: larger than 1 MiB", path.display()));
        }
        Credentials::parse(&bytes).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Parses the file's bytes.
    pub fn parse(bytes: &[u8]) -> Result<Credentials, String> {
        let doc: serde_json::Value = serde_json::from_slice(bytes)
            .map_err(|e| format!("not JSON (line {}, column {})", e.line(), e.column()))?;
        let mut by_registry = BTreeMap::new();
        let Some(auths) = doc.get("auths") else {
            return Ok(Credentials { by_registry });
        };
        let auths = auths.as_object().ok_or("\"auths\" is not an object")?;
        for (key, entry) in auths {
            let registry = registry_key(key);
            let field = |name: &str| entry.get(name).and_then(|v| v.as_str()).unwrap_or("");
            let login = if !field("auth").is_empty() {
                let raw = base64::engine::general_purpose::STANDARD
                    .decode(field("auth").trim())
                    .map_err(|_| format!("auths.{key:?}.auth is not base64"))?;
                let raw = String::from_utf8(raw)
                    .map_err(|_| format!("auths.{key:?}.auth is not text"))?;
                let (u, p) = raw
                    .split_once(':')
                    .ok_or_else(|| format!("auths.{key:?}.auth is not user:password"))?;
                Login {
                    username: u.to_string(),
                    password: p.to_string(),
                }
            } else if !field("username").is_empty() {
                Login {
                    username: field("username").to_string(),
                    password: field("password").to_string(),
                }
            } else {
                continue;
            };
            by_registry.insert(registry, login);
        }
        Ok(Credentials { by_registry })
    }

    /// The login for a registry (as a reference names it), if any.
    pub fn for_registry(&self, registry: &str) -> Option<&Login> {
        self.by_registry.get(&registry_key(registry))
    }

    /// The engine's login for pulling `reference`, when the file has one
    /// for its registry.
    pub fn pull_auth(&self, reference: &str) -> Option<crate::engine::PullAuth> {
        let r = crate::model::reference::Reference::parse(reference).ok()?;
        self.for_registry(&r.registry)
            .map(|l| crate::engine::PullAuth {
                username: l.username.clone(),
                password: l.password.clone(),
                server: r.registry.clone(),
            })
    }
}

/// The key a registry is known by: Docker Hub's several names are one, a
/// scheme and path are dropped.
fn registry_key(s: &str) -> String {
    let s = s
        .strip_prefix("https://")
        .or_else(|| s.strip_prefix("http://"))
        .unwrap_or(s);
    let host = s.split('/').next().unwrap_or(s);
    match host {
        "index.docker.io" | "registry-1.docker.io" | "docker.io" => "docker.io".to_string(),
        h => h.to_ascii_lowercase(),
    }
}

/// What `GET /v2/` asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Challenge {
    /// A token from `realm`, for `service`.
    Bearer {
        /// The token service's URL.
        realm: String,
        /// The service name to ask for.
        service: Option<String>,
    },
    /// Basic auth on every call.
    Basic,
}

impl Challenge {
    /// Parses a `WWW-Authenticate` header; `None` for a scheme it does not
    /// know or a Bearer challenge without a realm.
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

/// Why a token realm is not asked, for a registry reached over TLS
/// (`tls`) or not: a registry reached over HTTPS whose realm is not HTTPS
/// would have its credentials sent in clear (pure). A plain-HTTP registry
/// (loopback, `insecure_registries`) is already in clear.
pub fn realm_refused(tls: bool, realm: &str) -> Option<String> {
    let scheme = realm.split_once("://").map(|(s, _)| s.to_ascii_lowercase());
    match scheme.as_deref() {
        Some("https") => None,
        Some("http") if !tls => None,
        _ => Some(format!(
            "its token realm {:?} is not HTTPS, and the registry is: the credentials would leave TLS; not asked",
            crate::model::text::clip(realm, 256)
        )),
    }
}

/// `k="v",k2=v2` (quoted values may hold commas).
fn parse_params(s: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut rest = s.trim();
    while !rest.is_empty() {
        let Some((k, after)) = rest.split_once('=') else {
            break;
        };
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn challenges() {
        assert_eq!(
            Challenge::parse(
                r#"Bearer realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:library/busybox:pull,push""#
            ),
            Some(Challenge::Bearer {
                realm: "https://auth.docker.io/token".into(),
                service: Some("registry.docker.io".into()),
            })
        );
        assert_eq!(
            Challenge::parse(r#"Bearer realm=http://127.0.0.1:9/token"#),
            Some(Challenge::Bearer {
                realm: "http://127.0.0.1:9/token".into(),
                service: None,
            })
        );
        assert_eq!(
            Challenge::parse(r#"Basic realm="Registry Realm""#),
            Some(Challenge::Basic)
        );
        assert_eq!(Challenge::parse("Bearer service=x"), None);
        assert_eq!(Challenge::parse("Negotiate"), None);
    }

    #[test]
    fn a_registry_over_tls_asks_only_an_https_realm() {
        for (tls, realm, refused) in [
            (true, "https://auth.example/token", false),
            (true, "HTTPS://auth.example/token", false),
            (true, "http://127.0.0.1:9/token", true),
            (true, "HTTP://auth.example/token", true),
            (true, "ftp://auth.example/token", true),
            (true, "/token", true),
            (false, "http://127.0.0.1:9/token", false),
            (false, "https://auth.example/token", false),
            (false, "/token", true),
        ] {
            assert_eq!(
                realm_refused(tls, realm).is_some(),
                refused,
                "{tls} {realm}"
            );
        }
        let why = realm_refused(true, "http://127.0.0.1:9/token").unwrap();
        assert!(why.contains("http://127.0.0.1:9/token"), "{why}");
    }

    #[test]
    fn credentials_file() {
        let f = br#"{"auths": {
            "https://index.docker.io/v1/": {"auth": "dTpw"},
            "127.0.0.1:5001": {"username": "ci", "password": "s3cret"},
            "empty.example": {}
        }, "credsStore": "desktop"}"#;
        let c = Credentials::parse(f).unwrap();
        assert_eq!(c.for_registry("docker.io").unwrap().username, "u");
        assert_eq!(c.for_registry("docker.io").unwrap().password, "p");
        assert_eq!(
            c.for_registry("127.0.0.1:5001").unwrap().basic(),
            "Basic Y2k6czNjcmV0"
        );
        assert!(c.for_registry("empty.example").is_none());
        assert!(!format!("{:?}", c).contains("s3cret"));
        for (bad, says) in [
            (&b"{"[..], "not JSON"),
            (br#"{"auths": []}"#, "not an object"),
            (br#"{"auths": {"r": {"auth": "%%%"}}}"#, "not base64"),
            (
                br#"{"auths": {"r": {"auth": "bm9jb2xvbg=="}}}"#,
                "not user:password",
            ),
        ] {
            let e = Credentials::parse(bad).unwrap_err();
            assert!(e.contains(says), "{e}");
        }
    }
}
