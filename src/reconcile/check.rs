//! `stead check`: the intentions directory validated and each module's
//! inputs resolved and digested, without the engine (so without the image
//! ID, which only the engine knows).

use std::collections::BTreeMap;
use std::path::Path;

use crate::host::digest::FileDigester;
use crate::intake::dir::{FileRejected, IntentionsDir};
use crate::model::names::{Digest, ModuleName};
use crate::reconcile::resolve::resolve_inputs;

/// What `stead check` says of one module.
pub struct CheckLine {
    /// The module.
    pub module: ModuleName,
    /// The image reference, which the engine resolves at run time.
    pub image: String,
    /// The digest over every input but the image, with each input's
    /// digest, or why it could not be computed.
    pub result: Result<(Digest, BTreeMap<String, Digest>), String>,
}

/// Validates the intentions directory and computes each module's inputs.
pub fn check(intentions_dir: &Path) -> Result<(Vec<CheckLine>, Vec<FileRejected>), std::io::Error> {
    let loaded = IntentionsDir::new(intentions_dir.to_path_buf()).load()?;
    let mut digester = FileDigester::new();
    let lines = loaded
        .intentions
        .into_iter()
        .map(|(module, (_, i))| CheckLine {
            module,
            image: i.image.clone(),
            // Without the device's key: a sealed value is named, not opened.
            result: resolve_inputs(&i, &mut digester, None)
                .map(|inp| {
                    let each = inp
                        .digests
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.clone()))
                        .collect();
                    (inp.digest_without_image(), each)
                })
                .map_err(|e| e.to_string()),
        })
        .collect();
    Ok((lines, loaded.rejected))
}
