//! The image policy at the pass's door: before an image a policy covers is
//! pulled, and again before a container is made of it, the manifest it
//! runs must have been found signed as the policy asks
//! ([`crate::registry::signed`]), and the image the engine holds must be
//! the one that manifest names. Checks run in the background, one per
//! image reference, and are kept per policy: a quiet pass asks no
//! registry. A refusal is decided: the module is held, naming the image,
//! its digest and why, and the same reference is looked at again only
//! when the policy changes, or after [`REFUSED_RECHECK`] (a signature
//! added since). A registry that does not answer is tried again with
//! backoff, as a pull is.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt as _;
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::engine::image::Images;
use crate::model::image_policy::{Known, Policy};
use crate::model::reference::Reference;
use crate::registry::client::{Platform, Registries};
use crate::registry::signed::{Checked, Unchecked, check};

/// When a refused image is looked at again under the same policy.
pub const REFUSED_RECHECK: Duration = Duration::from_secs(3600);
/// The first wait after a registry did not answer a check; doubled up to
/// [`UNREACHABLE_MAX`].
const UNREACHABLE_MIN: Duration = Duration::from_secs(15);
const UNREACHABLE_MAX: Duration = Duration::from_secs(300);

/// What became of one reference's check.
#[derive(Clone, Debug)]
enum Verdict {
    Signed(Checked),
    Refused {
        digest: String,
        why: String,
        at: Instant,
    },
    Unreachable {
        error: String,
        failures: u32,
        next_at: Instant,
    },
}

/// What the pass does with a module's image.
#[derive(Debug, PartialEq)]
pub enum Admit {
    /// No rule asks anything of it: found or pulled as ever.
    Free,
    /// Signed, and the engine holds it: this image ID.
    Run(String),
    /// Signed, and not here: pulled by its verified digest (`repo@sha256:…`).
    Pull(String),
    /// Being checked: what is under way (its container is left as it is).
    Check(String),
    /// Not now: why, and when to look again (none: when a check ends).
    Hold(String, Option<Instant>),
}

/// The checks, kept per policy.
#[derive(Default)]
pub struct Gate {
    /// The policy in force, when it is known.
    known: Option<Known>,
    /// Asks the registries; without it a covered image cannot be checked.
    registries: Option<Arc<Registries>>,
    /// Why there is no client, when there is none.
    no_client: Option<String>,
    verdicts: HashMap<String, Verdict>,
    in_flight: HashMap<String, JoinHandle<Result<Checked, Unchecked>>>,
    /// Woken when a check ends.
    pub wake: Option<Arc<Notify>>,
}

impl Gate {
    /// A gate that lets everything through until [`Gate::set_policy`] is
    /// called (a node without a plane and without a policy).
    pub fn set_registries(&mut self, r: Result<Arc<Registries>, String>) {
        match r {
            Ok(r) => self.registries = Some(r),
            Err(e) => self.no_client = Some(e),
        }
    }

    /// The policy in force now; what was found under another is forgotten.
    pub fn set_policy(&mut self, known: Known) {
        if self.known.as_ref() != Some(&known) {
            self.verdicts.clear();
            for (_, t) in self.in_flight.drain() {
                t.abort();
            }
            self.known = Some(known);
        }
    }

    /// Takes the checks that ended; says whether one did.
    pub fn collect(&mut self, now: Instant) -> bool {
        let done: Vec<String> = self
            .in_flight
            .iter()
            .filter(|(_, t)| t.is_finished())
            .map(|(r, _)| r.clone())
            .collect();
        for reference in &done {
            let Some(task) = self.in_flight.remove(reference) else {
                continue;
            };
            let Some(Ok(outcome)) = task.now_or_never() else {
                continue;
            };
            let verdict = match outcome {
                Ok(c) => {
                    tracing::info!(
                        image = reference.as_str(),
                        digest = c.manifest.as_str(),
                        "image signature verified ({})",
                        c.by.iter()
                            .map(|(d, k)| format!("{d}: {k}"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    );
                    Verdict::Signed(c)
                }
                Err(Unchecked::Refused { digest, why }) => {
                    tracing::warn!(
                        image = reference.as_str(),
                        digest = digest.as_str(),
                        "refused by the image policy: {why}"
                    );
                    Verdict::Refused {
                        digest,
                        why,
                        at: now,
                    }
                }
                Err(Unchecked::Unreachable(e)) => {
                    let failures = match self.verdicts.get(reference) {
                        Some(Verdict::Unreachable { failures, .. }) => failures.saturating_add(1),
                        _ => 1,
                    };
                    let wait = UNREACHABLE_MIN
                        .saturating_mul(1 << (failures - 1).min(8))
                        .min(UNREACHABLE_MAX);
                    tracing::warn!(
                        image = reference.as_str(),
                        "the image's signature cannot be checked: {e}"
                    );
                    Verdict::Unreachable {
                        error: e.to_string(),
                        failures,
                        next_at: now + wait,
                    }
                }
            };
            self.verdicts.insert(reference.clone(), verdict);
        }
        !done.is_empty()
    }

    /// Waits for every check under way (`stead run --once`).
    pub async fn join(&mut self) {
        for t in self.in_flight.values_mut() {
            let _ = (&mut *t).await;
        }
        self.collect(Instant::now());
    }

    /// Whether a check is under way.
    pub fn checking(&self) -> bool {
        !self.in_flight.is_empty()
    }

    /// What the pass does with `image` (a module's reference), given the
    /// engine's images; starts a check when one is due.
    pub fn admit(&mut self, image: &str, images: &Images, now: Instant) -> Admit {
        let policy: Arc<Policy> = match &self.known {
            None => return Admit::Free,
            Some(Known::NotYet) => {
                return Admit::Check(format!(
                    "image {image}: the image policy is not known yet (the plane's documents are being read)"
                ));
            }
            Some(Known::Is(p)) => p.clone(),
        };
        if policy.is_empty() {
            return Admit::Free;
        }
        let Ok(r) = Reference::parse(image) else {
            return Admit::Free;
        };
        if policy.asks(&r).is_empty() {
            return Admit::Free;
        }
        match self.verdicts.get(image) {
            Some(Verdict::Signed(c)) => {
                let pinned = format!("{}@{}", r.name(), c.manifest);
                match images.find(&pinned) {
                    Some(found) if c.runs_as(&found.id) => Admit::Run(found.id.clone()),
                    Some(found) => Admit::Hold(
                        format!(
                            "image {image} ({}): refused by the image policy: the engine's image for it is {}, not {}, the one the signed manifest names",
                            c.manifest, found.id, c.config
                        ),
                        None,
                    ),
                    None => Admit::Pull(pinned),
                }
            }
            Some(Verdict::Refused { digest, why, at }) if now < *at + REFUSED_RECHECK => {
                Admit::Hold(
                    format!("image {image} ({digest}): refused by the image policy: {why}"),
                    None,
                )
            }
            Some(Verdict::Unreachable { error, next_at, .. }) if now < *next_at => Admit::Hold(
                format!("image {image}: its signature cannot be checked yet ({error})"),
                Some(*next_at),
            ),
            _ => {
                self.start(image, r, policy);
                Admit::Check(format!(
                    "image {image}: its signature is being checked against the image policy"
                ))
            }
        }
    }

    fn start(&mut self, image: &str, r: Reference, policy: Arc<Policy>) {
        if self.in_flight.contains_key(image) {
            return;
        }
        let registries = self.registries.clone();
        let no_client = self.no_client.clone();
        let wake = self.wake.clone();
        let task = tokio::spawn(async move {
            let out = match registries {
                Some(reg) => {
                    let asks = policy.asks(&r);
                    check(&reg, &Platform::this(), &asks, &r).await
                }
                None => Err(Unchecked::Unreachable(
                    crate::registry::error::RegistryError::Reference(format!(
                        "no registry client: {}",
                        no_client.as_deref().unwrap_or("none was set up")
                    )),
                )),
            };
            if let Some(w) = wake {
                w.notify_one();
            }
            out
        });
        self.in_flight.insert(image.to_string(), task);
    }
}
