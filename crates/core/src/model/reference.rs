//! Image references read the way the engine reads them: which registry,
//! which repository, and a tag or a digest. `sensor:1.4` is
//! `docker.io/library/sensor:1.4`; a first component with a dot or a colon,
//! or `localhost`, names a registry.

use std::fmt;

/// Docker Hub, as references name it.
pub const DOCKER_HUB: &str = "docker.io";

/// A parsed image reference.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reference {
    /// The registry's host (and port): `docker.io`, `127.0.0.1:5000`.
    pub registry: String,
    /// The repository within it: `library/busybox`, `acme/sensor`.
    pub repository: String,
    /// The tag, when one is named (none with a digest alone).
    pub tag: Option<String>,
    /// The digest, `sha256:…`, when one is named.
    pub digest: Option<String>,
}

impl Reference {
    /// Parses a reference; the error says what is wrong with it.
    pub fn parse(s: &str) -> Result<Reference, String> {
        if s.is_empty() || s.len() > 512 {
            return Err("an image reference is 1 to 512 characters".into());
        }
        if s.starts_with("sha256:") {
            return Err("an image ID names no repository".into());
        }
        let (rest, digest) = match s.split_once('@') {
            Some((r, d)) => {
                let hex = d
                    .strip_prefix("sha256:")
                    .ok_or("a digest is sha256:<64 hex digits>")?;
                if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                    return Err("a digest is sha256:<64 hex digits>".into());
                }
                (r, Some(d.to_ascii_lowercase()))
            }
            None => (s, None),
        };
        let (name, tag) = match rest.rsplit_once(':') {
            Some((n, t)) if !t.contains('/') => (n, Some(t.to_string())),
            _ => (rest, None),
        };
        if let Some(t) = &tag {
            let ok = !t.is_empty()
                && t.len() <= 128
                && t.bytes()
                    .next()
                    .is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_')
                && t.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'));
            if !ok {
                return Err(format!("invalid tag {t:?}"));
            }
        }
        let (registry, path) = match name.split_once('/') {
            Some((first, path))
                if first.contains('.') || first.contains(':') || first == "localhost" =>
            {
                (first.to_string(), path.to_string())
            }
            _ => (DOCKER_HUB.to_string(), name.to_string()),
        };
        let repository = if registry == DOCKER_HUB && !path.contains('/') {
            format!("library/{path}")
        } else {
            path
        };
        let component_ok = |c: &str| {
            !c.is_empty()
                && c.bytes().all(|b| {
                    b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-')
                })
                && c.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
        };
        if !repository.split('/').all(component_ok) {
            return Err(format!("invalid repository {repository:?}"));
        }
        if tag.is_none() && digest.is_none() {
            return Ok(Reference {
                registry,
                repository,
                tag: Some("latest".into()),
                digest,
            });
        }
        Ok(Reference {
            registry,
            repository,
            tag,
            digest,
        })
    }

    /// The host the registry's API answers on (Docker Hub's is not its
    /// name).
    pub fn api_host(&self) -> &str {
        if self.registry == DOCKER_HUB {
            "registry-1.docker.io"
        } else {
            &self.registry
        }
    }

    /// The same repository at another tag.
    pub fn with_tag(&self, tag: &str) -> Reference {
        Reference {
            tag: Some(tag.to_string()),
            digest: None,
            ..self.clone()
        }
    }

    /// The same repository at a digest (`repo@sha256:…`), as a pull names
    /// it.
    pub fn with_digest(&self, digest: &str) -> Reference {
        Reference {
            tag: None,
            digest: Some(digest.to_string()),
            ..self.clone()
        }
    }

    /// The repository with its registry, as the engine names it
    /// (`127.0.0.1:5000/acme/sensor`).
    pub fn name(&self) -> String {
        format!("{}/{}", self.registry, self.repository)
    }
}

impl fmt::Display for Reference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.name())?;
        if let Some(t) = &self.tag {
            write!(f, ":{t}")?;
        }
        if let Some(d) = &self.digest {
            write!(f, "@{d}")?;
        }
        Ok(())
    }
}

/// The tag that names an image the agent loaded itself (not pulled by
/// the engine, which alone records a repository digest) as the manifest
/// `digest`: `sha256:<hex>` → `sha256-<hex>`. Read back by [`tag_digest`].
pub fn digest_tag(digest: &str) -> String {
    digest.replacen(':', "-", 1)
}

/// The digest `sha256:<hex>` a tag made by [`digest_tag`] names (the tag
/// alone, without its repository).
pub fn tag_digest(tag: &str) -> Option<String> {
    let hex = tag.strip_prefix("sha256-")?;
    (hex.len() == 64 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
        .then(|| format!("sha256:{hex}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_read_as_the_engine_reads_them() {
        let d = format!("sha256:{}", "a".repeat(64));
        type Case<'a> = (String, &'a str, &'a str, Option<&'a str>, Option<&'a str>);
        let cases: Vec<Case> = vec![
            (
                "busybox".into(),
                "docker.io",
                "library/busybox",
                Some("latest"),
                None,
            ),
            (
                "busybox:1.36".into(),
                "docker.io",
                "library/busybox",
                Some("1.36"),
                None,
            ),
            (
                "acme/sensor:1.4.2".into(),
                "docker.io",
                "acme/sensor",
                Some("1.4.2"),
                None,
            ),
            (
                "127.0.0.1:5000/acme/sensor:1.4.2".into(),
                "127.0.0.1:5000",
                "acme/sensor",
                Some("1.4.2"),
                None,
            ),
            ("localhost/x".into(), "localhost", "x", Some("latest"), None),
            (
                "registry.example:5000/a/b/c:v1".into(),
                "registry.example:5000",
                "a/b/c",
                Some("v1"),
                None,
            ),
            (
                format!("reg.io/a@{d}"),
                "reg.io",
                "a",
                None,
                Some(d.as_str()),
            ),
            (
                format!("reg.io/a:1@{d}"),
                "reg.io",
                "a",
                Some("1"),
                Some(d.as_str()),
            ),
        ];
        for (s, reg, repo, tag, digest) in cases {
            let r = Reference::parse(&s).unwrap();
            assert_eq!(
                (
                    r.registry.as_str(),
                    r.repository.as_str(),
                    r.tag.as_deref(),
                    r.digest.as_deref()
                ),
                (reg, repo, tag, digest),
                "{s}"
            );
        }
        assert_eq!(
            Reference::parse("127.0.0.1:5000/acme/sensor:1.4.2")
                .unwrap()
                .with_digest(&d)
                .to_string(),
            format!("127.0.0.1:5000/acme/sensor@{d}")
        );
        assert_eq!(
            Reference::parse("busybox").unwrap().api_host(),
            "registry-1.docker.io"
        );
    }

    #[test]
    fn malformed_references_are_refused() {
        for bad in [
            "",
            "Upper/case",
            "a@sha256:short",
            "a@md5:00",
            "a:",
            "a:-x",
            "a//b",
            "sha256:0123",
            "a:b c",
        ] {
            assert!(Reference::parse(bad).is_err(), "{bad:?}");
        }
    }
}
