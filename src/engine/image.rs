//! Images the engine has, and finding one by the reference an intention
//! names: by ID, by `repo@digest`, or by tag.

use std::collections::HashMap;

/// One image the engine has.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Image {
    /// Its ID, `sha256:…`.
    pub id: String,
    /// Its tags, `repo:tag`.
    pub tags: Vec<String>,
    /// Its repository digests, `repo@sha256:…`.
    pub digests: Vec<String>,
    /// What it takes on disk, in bytes, as the engine counts it (layers
    /// it shares with other images are counted in each).
    pub size: u64,
    /// When it was built, seconds since the epoch (not when it came here).
    pub created: i64,
}

/// The engine's images, indexed once by every name they answer to: a
/// pass looks up each module's image in constant time, however many
/// images the engine keeps.
#[derive(Debug, Default)]
pub struct Images {
    /// By ID.
    ids: HashMap<String, usize>,
    /// By normalised `repo@digest` and by normalised tag (only the first
    /// has an `@`); the first image listed under a name wins, as a scan in
    /// list order would find.
    names: HashMap<String, usize>,
    list: Vec<Image>,
}

impl Images {
    /// Indexes the engine's list. A tag `repo:sha256-<hex>` (the agent's
    /// own pull names what it loads so, [`digest_tag`]) is also the
    /// repository digest `repo@sha256:<hex>`.
    pub fn new(mut list: Vec<Image>) -> Images {
        for i in &mut list {
            let from_tags: Vec<String> = i.tags.iter().filter_map(|t| tag_digest(t)).collect();
            for d in from_tags {
                if !i.digests.contains(&d) {
                    i.digests.push(d);
                }
            }
        }
        let (mut ids, mut names) = (HashMap::new(), HashMap::new());
        for (n, i) in list.iter().enumerate() {
            ids.entry(i.id.clone()).or_insert(n);
            for name in i.digests.iter().chain(&i.tags) {
                names.entry(normalise_reference(name)).or_insert(n);
            }
        }
        Images { ids, names, list }
    }

    /// Finds an image reference: by ID, by `repo@digest`, or by tag (a
    /// reference without a tag means `:latest`; Docker Hub's
    /// `docker.io/library/` prefix is optional).
    pub fn find(&self, reference: &str) -> Option<&Image> {
        let n = if reference.starts_with("sha256:") {
            self.ids.get(reference)
        } else {
            self.names.get(&normalise_reference(reference))
        };
        n.and_then(|&n| self.list.get(n))
    }

    /// Every image, as the engine listed them.
    pub fn all(&self) -> &[Image] {
        &self.list
    }
}

pub use crate::model::reference::digest_tag;

/// `repo@sha256:<hex>` for a tag `repo:sha256-<hex>` ([`digest_tag`]).
fn tag_digest(tag: &str) -> Option<String> {
    let (repo, t) = tag.rsplit_once(':')?;
    let digest = crate::model::reference::tag_digest(t)?;
    (!repo.is_empty() && !repo.ends_with('/')).then(|| format!("{repo}@{digest}"))
}

fn normalise_reference(r: &str) -> String {
    let r = r.strip_prefix("docker.io/").unwrap_or(r);
    let r = r.strip_prefix("library/").unwrap_or(r);
    if r.contains('@') {
        return r.to_string();
    }
    // A tag follows the last colon after the last slash.
    let last = r.rsplit('/').next().unwrap_or(r);
    if last.contains(':') {
        r.to_string()
    } else {
        format!("{r}:latest")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn img(id: &str, tags: &[&str], digests: &[&str]) -> Image {
        Image {
            id: id.into(),
            tags: tags.iter().map(|s| s.to_string()).collect(),
            digests: digests.iter().map(|s| s.to_string()).collect(),
            size: 0,
            created: 0,
        }
    }

    #[test]
    fn image_references_resolve() {
        let images = Images::new(vec![
            img(
                "sha256:aa",
                &["busybox:latest", "stead-test/busybox:1"],
                &["busybox@sha256:dd"],
            ),
            img("sha256:bb", &["localhost:5000/app:2"], &[]),
            // Listed later under a name the first has: the first wins.
            img("sha256:cc", &["busybox:latest"], &[]),
        ]);
        assert_eq!(images.find("busybox").unwrap().id, "sha256:aa");
        assert_eq!(
            images.find("docker.io/library/busybox:latest").unwrap().id,
            "sha256:aa"
        );
        assert_eq!(images.find("stead-test/busybox:1").unwrap().id, "sha256:aa");
        assert_eq!(images.find("busybox@sha256:dd").unwrap().id, "sha256:aa");
        assert_eq!(images.find("localhost:5000/app:2").unwrap().id, "sha256:bb");
        assert_eq!(images.find("sha256:bb").unwrap().id, "sha256:bb");
        assert!(images.find("localhost:5000/app").is_none());
        assert!(images.find("stead-test/busybox:2").is_none());
    }

    #[test]
    fn a_digest_tag_is_the_repository_digest_it_names() {
        let hex = "e".repeat(64);
        let tag = format!(
            "localhost:5000/app:{}",
            digest_tag(&format!("sha256:{hex}"))
        );
        assert_eq!(tag, format!("localhost:5000/app:sha256-{hex}"));
        let images = Images::new(vec![img("sha256:bb", &[tag.as_str()], &[])]);
        let by_digest = format!("localhost:5000/app@sha256:{hex}");
        assert_eq!(images.find(&by_digest).unwrap().id, "sha256:bb");
        assert_eq!(images.all()[0].digests, [by_digest]);
        for (t, want) in [
            (
                format!("app:sha256-{hex}"),
                Some(format!("app@sha256:{hex}")),
            ),
            (format!("app:sha256-{}", "E".repeat(64)), None),
            ("app:sha256-abc".to_string(), None),
            (format!(":sha256-{hex}"), None),
            ("app:1".to_string(), None),
        ] {
            assert_eq!(tag_digest(&t), want, "{t}");
        }
    }
}
