//! Whether an image may run under the node's image policy, asked of its
//! registry: the manifest digest a tag names now (or the one a reference
//! pins), the sigstore signatures held for it (cosign's `.sig` and `.att`
//! tags, and the Sigstore bundles its referrers list), the core's verdict on them
//! ([`crate::model::image_policy::judge`]), and the config digest the
//! verified manifest names for this platform: the image ID that may run.
//! A refusal is decided (a signature will not appear by asking again); a
//! registry that does not answer is not.

use crate::model::image_policy::{Policy, judge};
use crate::model::reference::Reference;
use crate::registry::client::{Platform, Registries};
use crate::registry::error::RegistryError;

/// An image found signed as the policy asks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Checked {
    /// The manifest (or index) digest verified.
    pub manifest: String,
    /// The config digest it names for this platform: the image ID.
    pub config: String,
    /// Per document, the key that signed it.
    pub by: Vec<(String, String)>,
}

impl Checked {
    /// Whether the engine's image `id` is the one the verified manifest
    /// names (its config, or the manifest itself on an engine that names
    /// images by their manifest).
    pub fn runs_as(&self, id: &str) -> bool {
        id == self.config || id == self.manifest
    }
}

/// Why an image is not let through.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unchecked {
    /// Its signatures do not satisfy the policy, or the allow-list does
    /// not list it: decided.
    Refused {
        /// The manifest digest looked at.
        digest: String,
        /// Why: `refused by the image policy: …` or `refused
        /// (unlisted-image): …`.
        why: String,
    },
    /// The registry could not be asked: tried again later.
    Unreachable(RegistryError),
}

/// Checks `image` against what the policy asks of it (it covers it): the
/// manifest it pins, or the one its tag names now (so a tag is checked
/// against the allow-list as the digest it names).
pub async fn check(
    registries: &Registries,
    platform: &Platform,
    policy: &Policy,
    image: &Reference,
) -> Result<Checked, Unchecked> {
    let digest = match &image.digest {
        Some(d) => d.clone(),
        None => {
            registries
                .head(image)
                .await
                .map_err(Unchecked::Unreachable)?
                .digest
        }
    };
    check_at(registries, platform, policy, image, &digest).await
}

/// Checks the manifest `digest` of `image` (named by its tag, or pinned)
/// against what the policy asks of it: the allow-list first (no more is
/// asked of a registry for a digest it does not list), then the rules.
pub async fn check_at(
    registries: &Registries,
    platform: &Platform,
    policy: &Policy,
    image: &Reference,
    digest: &str,
) -> Result<Checked, Unchecked> {
    if let Some(why) = policy.unlisted(image, digest) {
        return Err(Unchecked::Refused {
            digest: digest.to_string(),
            why,
        });
    }
    let asks = policy.asks(image);
    let asks = asks.as_slice();
    // The signatures, the attestations when a rule asks for one, and the
    // config the manifest names, asked together (no signature is asked
    // for when only the allow-list covers the image).
    let sign = !asks.is_empty();
    let attest = asks.iter().any(|(_, r)| r.attestation.is_some());
    let (signatures, attestations, bundles, config) = tokio::join!(
        async {
            if sign {
                registries.signatures(image, digest).await
            } else {
                Ok(Vec::new())
            }
        },
        async {
            if attest {
                registries.attestations(image, digest).await
            } else {
                Ok(Vec::new())
            }
        },
        async {
            if sign {
                registries.bundles(image, digest).await
            } else {
                Ok(Vec::new())
            }
        },
        registries.config(image, digest, platform)
    );
    let signatures = signatures.map_err(Unchecked::Unreachable)?;
    let attestations = attestations.map_err(Unchecked::Unreachable)?;
    let bundles = bundles.map_err(Unchecked::Unreachable)?;
    let verified =
        judge(asks, image, digest, &signatures, &attestations, &bundles).map_err(|why| {
            Unchecked::Refused {
                digest: digest.to_string(),
                why: format!("refused by the image policy: {why}"),
            }
        })?;
    let config = config.map_err(Unchecked::Unreachable)?;
    Ok(Checked {
        manifest: digest.to_string(),
        config: config.id,
        by: verified.by,
    })
}
