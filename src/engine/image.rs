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
    /// Indexes the engine's list.
    pub fn new(list: Vec<Image>) -> Images {
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
}
