//! `stead check`: the intentions directory validated and each module's
//! inputs resolved and digested, without the engine (so without the image
//! ID, which only the engine knows).

use crate::model::sort::Insert as _;
use std::collections::BTreeMap;
use std::path::Path;

use crate::host::digest::FileDigester;
use crate::intake::dir::{FileRejected, IntentionsDir};
use crate::model::names::{Digest, ModuleName};
use crate::reconcile::resolve::{read_host, resolve_inputs};

/// What `stead check` says of one module.
pub struct CheckLine {
    /// The module.
    pub module: ModuleName,
    /// The image reference, which the engine resolves at run time.
    pub image: String,
    /// The fields holding a value sealed to the device: checked as written,
    /// never opened here (only the agent on its device opens them).
    pub sealed: Vec<String>,
    /// The digest over every input but the image (none when a value is
    /// sealed: it is the device's to compute, keyed by its key), with each
    /// input's digest, or why one could not be computed.
    pub result: Result<(Option<Digest>, BTreeMap<String, Digest>), String>,
}

/// Validates the intentions directory and computes each module's inputs.
pub fn check(intentions_dir: &Path) -> Result<(Vec<CheckLine>, Vec<FileRejected>), std::io::Error> {
    let loaded = IntentionsDir::new(intentions_dir.to_path_buf()).load()?;
    let mut digester = FileDigester::new();
    let lines = loaded
        .intentions
        .into_iter()
        .map(|(module, (_, i))| {
            let sealed: Vec<String> = i.sealed_fields().into_iter().map(|(f, _)| f).collect();
            let result = if sealed.is_empty() {
                resolve_inputs(&i, &mut digester, None).map(|inp| {
                    let each = inp
                        .digests
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.clone()))
                        .into_map();
                    (Some(inp.digest_without_image()), each)
                })
            } else {
                // Without the device's key: what the host gives is read,
                // the sealed values are named, not opened.
                read_host(&i, &mut digester).map(|read| {
                    let each = read
                        .digests()
                        .map(|(k, v)| (k.to_string(), v.clone()))
                        .into_map();
                    (None, each)
                })
            };
            CheckLine {
                module,
                image: i.image.clone(),
                sealed,
                result: result.map_err(|e| e.to_string()),
            }
        })
        .collect();
    Ok((lines, loaded.rejected))
}
