//! `stead-plane chunks --site DIR IMAGE...`: content-defined chunks of
//! images' layers, published beside the documents in casync's format (a
//! blob index per layer, `DIR/chunks/<diff ID hex>.caibx`, and one chunk
//! store, `DIR/chunks/store.castr/<4 hex>/<id>.cacnk`, gzip-compressed).
//! A device rebuilds a layer it lacks from the chunks of the layers it
//! has and those of the store it lacks; `casync extract` reads the same
//! files. Each layer is read from its registry (every platform of an
//! index), its blob checked against its digest, its tar against its diff
//! ID; a layer indexed already is not read again, and a chunk stored
//! already is not written again.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::cli::registry::{LayerBlob, Registries};
use crate::model::chunk::{Chunk, Cutter, DEFAULT_FLAGS, Digest, Index, Sizes};

/// The largest layer blob read.
const MAX_LAYER: usize = 16 << 30;

/// What publishing one layer did.
#[derive(Debug, Default)]
struct Layer {
    /// Its chunks.
    chunks: usize,
    /// Of them, those the store did not have.
    new: usize,
    /// Bytes the new chunks take in the store.
    stored: u64,
    /// The layer's size, uncompressed.
    size: u64,
}

/// `stead-plane chunks`.
pub fn chunks(site: &Path, auth: Option<&Path>, ca: Option<&Path>, images: &[String]) -> ExitCode {
    let mut registries = match Registries::new(auth, ca) {
        Ok(r) => r,
        Err(e) => return super::plane::refused(format_args!("{e}")),
    };
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            return super::plane::refused(format_args!("cannot start the async runtime: {e}"));
        }
    };
    let dir = site.join("chunks");
    let store = dir.join("store.castr");
    if let Err(e) = std::fs::create_dir_all(&store) {
        return super::plane::refused(format_args!("{}: {e}", store.display()));
    }
    for image in images {
        let layers = match rt.block_on(registries.layers(image)) {
            Ok(l) => l,
            Err(e) => return super::plane::refused(format_args!("{e}")),
        };
        let (mut indexed, mut skipped) = (0usize, 0usize);
        for layer in &layers {
            let hex = &layer.diff_id["sha256:".len()..];
            let index_path = dir.join(format!("{hex}.caibx"));
            if index_path.exists() {
                indexed += 1;
                continue;
            }
            let Some(gzip) = compression(&layer.media_type) else {
                eprintln!(
                    "{image}: layer {} is {}: not chunked (a device pulls it whole)",
                    layer.diff_id, layer.media_type
                );
                skipped += 1;
                continue;
            };
            match rt.block_on(publish_layer(&mut registries, layer, gzip, &dir, &store)) {
                Ok(l) => {
                    indexed += 1;
                    println!(
                        "{image}: layer {}: {} bytes in {} chunks, {} new ({} bytes stored)",
                        layer.diff_id, l.size, l.chunks, l.new, l.stored
                    );
                }
                Err(e) => return super::plane::refused(format_args!("{image}: {e}")),
            }
        }
        println!(
            "{image}: {indexed} of {} layers indexed in {}{}",
            layers.len(),
            dir.display(),
            if skipped > 0 {
                format!(", {skipped} not chunked")
            } else {
                String::new()
            }
        );
    }
    ExitCode::SUCCESS
}

/// Whether a layer's blob is gzip (`Some(true)`) or a plain tar
/// (`Some(false)`); `None` for another compression.
fn compression(media_type: &str) -> Option<bool> {
    match media_type {
        "application/vnd.oci.image.layer.v1.tar+gzip"
        | "application/vnd.docker.image.rootfs.diff.tar.gzip"
        | "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip"
        | "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip" => Some(true),
        "application/vnd.oci.image.layer.v1.tar"
        | "application/vnd.docker.image.rootfs.diff.tar" => Some(false),
        _ => None,
    }
}

/// Reads a layer's blob into a file beside the store, checks it, and cuts
/// its tar into the store and an index.
async fn publish_layer(
    registries: &mut Registries,
    layer: &LayerBlob,
    gzip: bool,
    dir: &Path,
    store: &Path,
) -> Result<Layer, String> {
    let hex = &layer.diff_id["sha256:".len()..];
    let tmp = dir.join(format!(".blob-{hex}"));
    let mut file = std::fs::File::create(&tmp).map_err(|e| format!("{}: {e}", tmp.display()))?;
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    let mut failed: Option<std::io::Error> = None;
    {
        let mut sink = |b: &[u8]| {
            ctx.update(b);
            if failed.is_none()
                && let Err(e) = file.write_all(b)
            {
                failed = Some(e);
            }
        };
        let got = registries.blob(layer, MAX_LAYER, &mut sink).await;
        if let Err(e) = got {
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
    }
    drop(file);
    let cleanup = Cleanup(tmp.clone());
    if let Some(e) = failed {
        return Err(format!("{}: {e}", tmp.display()));
    }
    if hex_of(ctx.finish().as_ref()) != layer.digest["sha256:".len()..] {
        return Err(format!(
            "blob {}: its bytes are not its digest",
            layer.digest
        ));
    }
    let blob = std::fs::File::open(&cleanup.0).map_err(|e| format!("{}: {e}", tmp.display()))?;
    let reader: Box<dyn Read> = if gzip {
        Box::new(flate2::read::MultiGzDecoder::new(std::io::BufReader::new(
            blob,
        )))
    } else {
        Box::new(std::io::BufReader::new(blob))
    };
    let (index, out) = cut(reader, store).map_err(|e| format!("layer {}: {e}", layer.diff_id))?;
    let got = index.1;
    if got != hex {
        return Err(format!(
            "layer {}: its tar is sha256:{got}, not its diff ID",
            layer.diff_id
        ));
    }
    let path = dir.join(format!("{hex}.caibx"));
    crate::host::files::replace_atomic(&path, &index.0.encode(), 0o644)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(out)
}

/// Removes a file when dropped.
struct Cleanup(PathBuf);

impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn hex_of(b: &[u8]) -> String {
    b.iter().map(|b| format!("{b:02x}")).collect()
}

/// Cuts what `r` reads into chunks, each stored once; its index and the
/// SHA-256 of all of it.
fn cut(mut r: impl Read, store: &Path) -> std::io::Result<((Index, String), Layer)> {
    let sizes = Sizes::DEFAULT;
    let mut cutter = Cutter::new(sizes);
    let mut whole = ring::digest::Context::new(&ring::digest::SHA256);
    let mut current = Vec::new();
    let mut chunks = Vec::new();
    let mut out = Layer::default();
    let mut buf = vec![0u8; 1 << 20];
    let mut end = 0u64;
    loop {
        let n = r.read(&mut buf)?;
        if n == 0 {
            break;
        }
        whole.update(&buf[..n]);
        let mut d = &buf[..n];
        while !d.is_empty() {
            match cutter.feed(d) {
                Some(k) => {
                    current.extend_from_slice(&d[..k]);
                    d = &d[k..];
                    end += current.len() as u64;
                    chunks.push(store_chunk(&current, end, store, &mut out)?);
                    current.clear();
                }
                None => {
                    current.extend_from_slice(d);
                    d = &[];
                }
            }
        }
    }
    if !current.is_empty() {
        end += current.len() as u64;
        chunks.push(store_chunk(&current, end, store, &mut out)?);
    }
    out.size = end;
    out.chunks = chunks.len();
    let index = Index {
        flags: DEFAULT_FLAGS,
        sizes,
        chunks,
    };
    Ok(((index, hex_of(whole.finish().as_ref())), out))
}

/// Stores a chunk (gzip, as casync's `--compression=gzip` does) unless the
/// store has it.
fn store_chunk(data: &[u8], end: u64, store: &Path, out: &mut Layer) -> std::io::Result<Chunk> {
    let id = Digest::Sha512_256.id(data);
    let path = store.join(id.store_path());
    if !path.exists() {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(data)?;
        let bytes = gz.finish()?;
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        crate::host::files::replace_atomic(&path, &bytes, 0o644)?;
        out.new += 1;
        out.stored += bytes.len() as u64;
    }
    Ok(Chunk { end, id })
}
