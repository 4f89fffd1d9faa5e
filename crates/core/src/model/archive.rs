//! The archive an image is handed to the engine in (`POST /images/load`),
//! pure: which files it holds and their tar headers. One archive both
//! engines read: an OCI image layout (`oci-layout`, `index.json`, the
//! registry's manifest as it was fetched, under `blobs/sha256/`), which
//! Podman and Docker 25 and later read, and beside it Docker's
//! `manifest.json` naming the same blobs, which every Docker reads (a
//! layer may stay compressed: the engine inflates it). Docker 25 writes
//! its own archives the same way.
//!
//! The layers the engine already has are left out: Docker looks a layer
//! up by its chain before it opens the file, Podman by its digest before
//! it asks for the blob. Which ones it has is [`present_prefix`]: the
//! longest run of the image's layers, from its base, that an image the
//! engine holds starts with (a layer's identity is its chain, so only a
//! common prefix counts).

/// One file of the archive.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// Its path in the archive.
    pub name: String,
    /// What it holds.
    pub body: Body,
}

/// What a file of the archive holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Body {
    /// These bytes (the archive's own files, the manifest, the config).
    Bytes(Vec<u8>),
    /// A blob from the spool, by digest, of this size.
    Blob {
        /// `sha256:…`.
        digest: String,
        /// Bytes.
        size: u64,
    },
}

impl Entry {
    /// The bytes of its content.
    pub fn size(&self) -> u64 {
        match &self.body {
            Body::Bytes(b) => b.len() as u64,
            Body::Blob { size, .. } => *size,
        }
    }
}

/// A layer as the manifest lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layer {
    /// Its blob's digest, `sha256:…`.
    pub digest: String,
    /// Its blob's size, bytes.
    pub size: u64,
}

/// An image as fetched: what the archive is made of.
#[derive(Clone, Debug)]
pub struct Image<'a> {
    /// The manifest's bytes, as the registry served them.
    pub manifest: &'a [u8],
    /// Its media type.
    pub manifest_type: &'a str,
    /// The config's digest (the image ID it loads as) and bytes.
    pub config: (&'a str, &'a [u8]),
    /// Its layers, base first.
    pub layers: &'a [Layer],
    /// How many of them, from the base, the engine has already.
    pub present: usize,
}

/// Why an image cannot be put in an archive.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Unfit {
    /// A digest that is not `sha256:` and 64 hex digits.
    #[error("{0}: not a sha256 digest")]
    Digest(String),
}

/// The archive's files, in the order they are written.
pub fn entries(image: &Image<'_>, manifest_digest: &str) -> Result<Vec<Entry>, Unfit> {
    let hex = |d: &str| {
        d.strip_prefix("sha256:")
            .filter(|h| h.len() == 64 && h.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
            .map(str::to_string)
            .ok_or_else(|| Unfit::Digest(crate::model::text::clip(d, 80).into_owned()))
    };
    let blob = |d: &str| hex(d).map(|h| format!("blobs/sha256/{h}"));
    let (config_digest, config) = image.config;
    let manifest_path = blob(manifest_digest)?;
    let config_path = blob(config_digest)?;
    let layer_paths = image
        .layers
        .iter()
        .map(|l| blob(&l.digest))
        .collect::<Result<Vec<_>, _>>()?;
    let index = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [{
            "mediaType": image.manifest_type,
            "digest": manifest_digest,
            "size": image.manifest.len(),
        }],
    });
    let docker = serde_json::json!([{
        "Config": config_path,
        "RepoTags": null,
        "Layers": layer_paths,
    }]);
    let bytes = |name: &str, b: Vec<u8>| Entry {
        name: name.to_string(),
        body: Body::Bytes(b),
    };
    let mut out = vec![
        bytes("oci-layout", br#"{"imageLayoutVersion":"1.0.0"}"#.to_vec()),
        bytes("index.json", index.to_string().into_bytes()),
        bytes("manifest.json", docker.to_string().into_bytes()),
        bytes(&manifest_path, image.manifest.to_vec()),
        bytes(&config_path, config.to_vec()),
    ];
    let mut named = std::collections::BTreeSet::from([manifest_path, config_path]);
    for (l, path) in image.layers.iter().zip(layer_paths).skip(image.present) {
        if named.insert(path.clone()) {
            out.push(Entry {
                name: path,
                body: Body::Blob {
                    digest: l.digest.clone(),
                    size: l.size,
                },
            });
        }
    }
    Ok(out)
}

/// The manifest `manifest` (of `media_type`) with the layers at the
/// places `replaced` names given as uncompressed tars (their diff ID and
/// size): the manifest of an image whose layers were rebuilt from chunks,
/// which the engine checks each blob of the archive against. The rest of
/// it is kept as it was.
pub fn with_uncompressed(
    manifest: &[u8],
    media_type: &str,
    replaced: &std::collections::BTreeMap<usize, (String, u64)>,
) -> Result<Vec<u8>, String> {
    let mut m: serde_json::Value = serde_json::from_slice(manifest).map_err(|e| e.to_string())?;
    let tar = if media_type == "application/vnd.docker.distribution.manifest.v2+json" {
        "application/vnd.docker.image.rootfs.diff.tar"
    } else {
        "application/vnd.oci.image.layer.v1.tar"
    };
    let layers = m
        .get_mut("layers")
        .and_then(|l| l.as_array_mut())
        .ok_or("no layers")?;
    for (&at, (digest, size)) in replaced {
        let l = layers
            .get_mut(at)
            .and_then(|l| l.as_object_mut())
            .ok_or_else(|| format!("no layer {at}"))?;
        l.insert("mediaType".into(), tar.into());
        l.insert("digest".into(), digest.clone().into());
        l.insert("size".into(), (*size).into());
        l.remove("urls");
    }
    serde_json::to_vec(&m).map_err(|e| e.to_string())
}

/// How many of an image's layers (`diff_ids`, base first) the engine has:
/// the longest prefix of them that one of its images (`held`, each its
/// diff IDs base first) starts with.
pub fn present_prefix(diff_ids: &[String], held: &[Vec<String>]) -> usize {
    held.iter()
        .map(|h| diff_ids.iter().zip(h).take_while(|(a, b)| a == b).count())
        .max()
        .unwrap_or(0)
}

/// A tar block.
pub const BLOCK: u64 = 512;

/// The ustar header of a regular file (mode 0644, owned by root, dated
/// at the epoch). `name` is at most 100 bytes (the archive's are 77).
/// A size past ustar's octal field (8 GiB) is written in base-256, as GNU
/// tar and Go's archive/tar read it.
pub fn header(name: &str, size: u64) -> [u8; 512] {
    let mut h = [0u8; 512];
    let n = name.as_bytes();
    let len = n.len().min(100);
    h[..len].copy_from_slice(&n[..len]);
    octal(&mut h[100..108], 0o644);
    octal(&mut h[108..116], 0);
    octal(&mut h[116..124], 0);
    if size < 1 << 33 {
        octal(&mut h[124..136], size);
    } else {
        h[124] = 0x80;
        h[128..136].copy_from_slice(&size.to_be_bytes());
    }
    octal(&mut h[136..148], 0);
    h[156] = b'0';
    h[257..263].copy_from_slice(b"ustar\0");
    h[263..265].copy_from_slice(b"00");
    h[148..156].copy_from_slice(b"        ");
    let sum: u32 = h.iter().map(|&b| u32::from(b)).sum();
    let s = format!("{sum:06o}\0 ");
    h[148..156].copy_from_slice(s.as_bytes());
    h
}

/// Zeros that pad a file of `size` bytes to a whole block.
pub fn padding(size: u64) -> usize {
    ((BLOCK - size % BLOCK) % BLOCK) as usize
}

/// The archive's end: two zero blocks.
pub const END: [u8; 1024] = [0; 1024];

/// The whole archive's length in bytes.
pub fn length(entries: &[Entry]) -> u64 {
    entries
        .iter()
        .map(|e| BLOCK + e.size() + padding(e.size()) as u64)
        .sum::<u64>()
        + END.len() as u64
}

/// `v` in octal, zero-padded to fill `field` but its last byte (NUL).
fn octal(field: &mut [u8], v: u64) {
    let w = field.len() - 1;
    let s = format!("{v:0w$o}");
    field[..w].copy_from_slice(&s.as_bytes()[s.len() - w..]);
    field[w] = 0;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(c: char) -> String {
        format!("sha256:{}", c.to_string().repeat(64))
    }

    #[test]
    fn the_layers_the_engine_has_are_a_common_prefix() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        for (ids, held, want) in [
            (s(&["a", "b", "c"]), vec![], 0),
            (s(&["a", "b", "c"]), vec![s(&["a"])], 1),
            (
                s(&["a", "b", "c"]),
                vec![s(&["a", "x"]), s(&["a", "b", "y"])],
                2,
            ),
            (s(&["a", "b", "c"]), vec![s(&["a", "b", "c", "d"])], 3),
            // The same layer over another base is another chain.
            (s(&["a", "b", "c"]), vec![s(&["x", "b", "c"])], 0),
            (s(&[]), vec![s(&["a"])], 0),
        ] {
            assert_eq!(present_prefix(&ids, &held), want, "{ids:?} {held:?}");
        }
    }

    #[test]
    fn an_archive_names_each_blob_once_and_leaves_out_what_is_there() {
        let layers = [
            Layer {
                digest: d('a'),
                size: 10,
            },
            Layer {
                digest: d('b'),
                size: 20,
            },
            Layer {
                digest: d('b'),
                size: 20,
            },
            Layer {
                digest: d('c'),
                size: 30,
            },
        ];
        let image = Image {
            manifest: b"{}",
            manifest_type: "application/vnd.oci.image.manifest.v1+json",
            config: (&d('f'), b"{\"rootfs\":{}}"),
            layers: &layers,
            present: 1,
        };
        let e = entries(&image, &d('e')).unwrap();
        let names: Vec<&str> = e.iter().map(|e| e.name.as_str()).collect();
        let blob = |c: char| format!("blobs/sha256/{}", c.to_string().repeat(64));
        assert_eq!(
            names,
            [
                "oci-layout",
                "index.json",
                "manifest.json",
                &blob('e'),
                &blob('f'),
                &blob('b'),
                &blob('c')
            ]
        );
        let docker: serde_json::Value = match &e[2].body {
            Body::Bytes(b) => serde_json::from_slice(b).unwrap(),
            Body::Blob { .. } => unreachable!(),
        };
        assert_eq!(
            docker[0]["Layers"].as_array().unwrap().len(),
            4,
            "every layer named"
        );
        assert_eq!(docker[0]["Config"], blob('f'));
        assert_eq!(
            e[6].body,
            Body::Blob {
                digest: d('c'),
                size: 30
            }
        );
        let bad = Image {
            config: ("sha256:ABC", b""),
            ..image.clone()
        };
        assert_eq!(
            entries(&bad, &d('e')),
            Err(Unfit::Digest("sha256:ABC".into()))
        );
        let upper = format!("sha256:{}", "A".repeat(64));
        assert!(entries(&image, &upper).is_err());
    }

    #[test]
    fn a_rebuilt_layer_is_named_uncompressed_and_the_rest_is_kept() {
        let oci = br#"{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"digest":"sha256:c","size":1},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"sha256:a","size":10},{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"sha256:b","size":20,"urls":["http://x"],"annotations":{"k":"v"}}]}"#;
        let docker = br#"{"schemaVersion":2,"layers":[{"mediaType":"application/vnd.docker.image.rootfs.diff.tar.gzip","digest":"sha256:a","size":10}]}"#;
        let one =
            |at: usize| std::collections::BTreeMap::from([(at, ("sha256:d".to_string(), 99u64))]);
        // (manifest, its type, replaced place) => the layers after
        let table: &[(&[u8], &str, usize, &str)] = &[
            (
                oci,
                "application/vnd.oci.image.manifest.v1+json",
                1,
                r#"[{"digest":"sha256:a","mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","size":10},{"annotations":{"k":"v"},"digest":"sha256:d","mediaType":"application/vnd.oci.image.layer.v1.tar","size":99}]"#,
            ),
            (
                docker,
                "application/vnd.docker.distribution.manifest.v2+json",
                0,
                r#"[{"digest":"sha256:d","mediaType":"application/vnd.docker.image.rootfs.diff.tar","size":99}]"#,
            ),
        ];
        for (m, t, at, want) in table {
            let out: serde_json::Value =
                serde_json::from_slice(&with_uncompressed(m, t, &one(*at)).unwrap()).unwrap();
            assert_eq!(out["layers"].to_string(), *want, "{t}");
            let before: serde_json::Value = serde_json::from_slice(m).unwrap();
            assert_eq!(out["config"], before["config"]);
        }
        assert!(
            with_uncompressed(docker, "x", &one(3)).is_err(),
            "no such layer"
        );
        assert!(with_uncompressed(b"{}", "x", &one(0)).is_err(), "no layers");
    }

    #[test]
    fn a_header_is_ustar_with_its_checksum() {
        let h = header("blobs/sha256/x", 1234);
        assert_eq!(&h[..14], b"blobs/sha256/x");
        assert_eq!(&h[124..136], b"00000002322\0");
        assert_eq!(&h[257..263], b"ustar\0");
        let stored = u32::from_str_radix(std::str::from_utf8(&h[148..154]).unwrap(), 8).unwrap();
        let mut blank = h;
        blank[148..156].copy_from_slice(b"        ");
        assert_eq!(stored, blank.iter().map(|&b| u32::from(b)).sum::<u32>());
        let big = header("x", 10 << 30);
        assert_eq!(big[124], 0x80);
        assert_eq!(&big[128..136], &(10u64 << 30).to_be_bytes());
        assert_eq!(
            (padding(0), padding(1), padding(512), padding(513)),
            (0, 511, 0, 511)
        );
        let e = [Entry {
            name: "a".into(),
            body: Body::Bytes(vec![1; 513]),
        }];
        assert_eq!(length(&e), 512 + 1024 + 1024);
    }
}
