//! Images the engine has, and finding one by the reference an intention
//! names: by ID, by `repo@digest`, or by tag.

/// One image the engine has.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Image {
    /// Its ID, `sha256:…`.
    pub id: String,
    /// Its tags, `repo:tag`.
    pub tags: Vec<String>,
    /// Its repository digests, `repo@sha256:…`.
    pub digests: Vec<String>,
}

/// Finds an image reference among the engine's images: by ID, by
/// `repo@digest`, or by tag (a reference without a tag means `:latest`;
/// Docker Hub's `docker.io/library/` prefix is optional).
pub fn find_image<'a>(images: &'a [Image], reference: &str) -> Option<&'a Image> {
    if reference.starts_with("sha256:") {
        return images.iter().find(|i| i.id == reference);
    }
    let norm = normalise_reference(reference);
    if norm.contains('@') {
        return images
            .iter()
            .find(|i| i.digests.iter().any(|d| normalise_reference(d) == norm));
    }
    images
        .iter()
        .find(|i| i.tags.iter().any(|t| normalise_reference(t) == norm))
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
        }
    }

    #[test]
    fn image_references_resolve() {
        let images = vec![
            img(
                "sha256:aa",
                &["busybox:latest", "stead-test/busybox:1"],
                &["busybox@sha256:dd"],
            ),
            img("sha256:bb", &["localhost:5000/app:2"], &[]),
        ];
        assert_eq!(find_image(&images, "busybox").unwrap().id, "sha256:aa");
        assert_eq!(
            find_image(&images, "docker.io/library/busybox:latest")
                .unwrap()
                .id,
            "sha256:aa"
        );
        assert_eq!(
            find_image(&images, "stead-test/busybox:1").unwrap().id,
            "sha256:aa"
        );
        assert_eq!(
            find_image(&images, "busybox@sha256:dd").unwrap().id,
            "sha256:aa"
        );
        assert_eq!(
            find_image(&images, "localhost:5000/app:2").unwrap().id,
            "sha256:bb"
        );
        assert_eq!(find_image(&images, "sha256:bb").unwrap().id, "sha256:bb");
        assert!(find_image(&images, "localhost:5000/app").is_none());
        assert!(find_image(&images, "stead-test/busybox:2").is_none());
    }
}
