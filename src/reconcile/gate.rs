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
//!
//! With an allow-list (the root's, when the node's plane has one), every
//! image is looked at: a pinned digest it does not list is refused at
//! once (`refused (unlisted-image)`), one it lists runs as it is; a tag is
//! resolved to its digest by the registry first, then judged the same,
//! and what runs is pulled by that digest.

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
use crate::store::images::Checked as StoredCheck;

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
    /// The digest of the policy in force, while one is.
    policy_digest: Option<String>,
    /// Whether the checks the store keeps are to be taken (once per
    /// policy).
    wants_stored: bool,
    /// References whose check the store keeps.
    stored: std::collections::HashSet<String>,
    /// What the store is to keep or forget, since it was last told.
    writes: Vec<(String, Option<StoredCheck>)>,
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
            self.policy_digest = match &known {
                Known::Is(p) if !p.is_empty() => Some(p.digest()),
                _ => None,
            };
            self.wants_stored = self.policy_digest.is_some();
            self.known = Some(known);
        }
    }

    /// Whether the checks the store keeps are to be read now (the first
    /// pass under a policy).
    pub fn wants_stored(&self) -> bool {
        self.wants_stored
    }

    /// Takes the checks the store keeps: those made under the policy in
    /// force count as made (a device away from its registry still knows
    /// what it verified); the others are forgotten.
    pub fn take_stored(&mut self, stored: std::collections::BTreeMap<String, StoredCheck>) {
        self.wants_stored = false;
        for (reference, c) in stored {
            self.stored.insert(reference.clone());
            if Some(&c.policy) != self.policy_digest.as_ref() {
                self.forget_stored(&reference);
                continue;
            }
            self.verdicts
                .entry(reference)
                .or_insert(Verdict::Signed(Checked {
                    manifest: c.manifest,
                    config: c.config,
                    by: c.by,
                }));
        }
    }

    /// What the store is to keep or forget since it was last told.
    pub fn take_writes(&mut self) -> Vec<(String, Option<StoredCheck>)> {
        std::mem::take(&mut self.writes)
    }

    fn forget_stored(&mut self, reference: &str) {
        if self.stored.remove(reference) {
            self.writes.push((reference.to_string(), None));
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
            if let Some(Ok(outcome)) = task.now_or_never() {
                self.settle(reference, outcome, now);
            }
        }
        !done.is_empty()
    }

    /// Waits for every check under way and takes its outcome (`stead run
    /// --once`).
    pub async fn join(&mut self) {
        for (reference, task) in std::mem::take(&mut self.in_flight) {
            if let Ok(outcome) = task.await {
                self.settle(&reference, outcome, Instant::now());
            }
        }
    }

    /// Keeps what a check of `reference` found.
    fn settle(&mut self, reference: &str, outcome: Result<Checked, Unchecked>, now: Instant) {
        let verdict = match outcome {
            Ok(c) => {
                tracing::info!(
                    image = reference,
                    digest = c.manifest.as_str(),
                    "image signature verified ({})",
                    c.by.iter()
                        .map(|(d, k)| format!("{d}: {k}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                );
                if let Some(policy) = &self.policy_digest {
                    self.stored.insert(reference.to_string());
                    self.writes.push((
                        reference.to_string(),
                        Some(StoredCheck {
                            policy: policy.clone(),
                            manifest: c.manifest.clone(),
                            config: c.config.clone(),
                            by: c.by.clone(),
                            at: crate::host::clock::now(),
                        }),
                    ));
                }
                Verdict::Signed(c)
            }
            Err(Unchecked::Refused { digest, why }) => {
                self.forget_stored(reference);
                tracing::warn!(image = reference, digest = digest.as_str(), "{why}");
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
                    image = reference,
                    "the image's signature cannot be checked: {e}"
                );
                Verdict::Unreachable {
                    error: e.to_string(),
                    failures,
                    next_at: now + wait,
                }
            }
        };
        self.verdicts.insert(reference.to_string(), verdict);
    }

    /// Forgets the checks of references no module names any more (and
    /// stops those under way): what is kept is bounded by the modules.
    pub fn keep(&mut self, named: &std::collections::BTreeSet<&str>) {
        self.verdicts.retain(|r, _| named.contains(r.as_str()));
        let gone: Vec<String> = self
            .stored
            .iter()
            .filter(|r| !named.contains(r.as_str()))
            .cloned()
            .collect();
        for r in gone {
            self.forget_stored(&r);
        }
        self.in_flight.retain(|r, t| {
            let keep = named.contains(r.as_str());
            if !keep {
                t.abort();
            }
            keep
        });
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
        if !policy.covers(&r) {
            return Admit::Free;
        }
        // A pinned digest the allow-list does not list: refused now, no
        // registry asked.
        // A pinned digest it lists, of an image no rule asks a signature
        // of: as it is (the engine pulls that very digest).
        if let Some(d) = &r.digest {
            if let Some(why) = policy.unlisted(&r, d) {
                return Admit::Hold(format!("image {image} ({d}): {why}"), None);
            }
            if policy.asks(&r).is_empty() {
                return Admit::Free;
            }
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
                Admit::Hold(format!("image {image} ({digest}): {why}"), None)
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
                Some(reg) => check(&reg, &Platform::this(), &policy, &r).await,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::image_policy::{PublicKey, Require, Rule, Rules, Scope};

    fn policy() -> Known {
        let key = PublicKey::Ed25519(vec![7; 32]);
        Known::Is(Arc::new(Policy::of_node(Rules(vec![Rule {
            scope: Scope::parse("reg.example").unwrap(),
            require: Require::Sigstore(vec![key]),
            attestation: None,
        }]))))
    }

    #[tokio::test]
    async fn what_the_gate_says_as_the_policy_and_the_checks_move() {
        let images = Images::new(Vec::new());
        let now = Instant::now();
        let mut gate = Gate::default();
        gate.set_registries(Err("no CA file".into()));
        // No plane: nothing is asked.
        assert_eq!(gate.admit("reg.example/app:1", &images, now), Admit::Free);
        // A plane whose documents are not read yet: everything waits.
        gate.set_policy(Known::NotYet);
        assert!(matches!(
            gate.admit("other.example/app:1", &images, now),
            Admit::Check(w) if w.contains("the image policy is not known yet")
        ));
        gate.set_policy(Known::Is(Arc::default()));
        assert_eq!(gate.admit("reg.example/app:1", &images, now), Admit::Free);
        gate.set_policy(policy());
        // Not covered: free; covered: checked in the background.
        assert_eq!(gate.admit("other.example/app:1", &images, now), Admit::Free);
        assert!(matches!(
            gate.admit("reg.example/app:1", &images, now),
            Admit::Check(w) if w.contains("its signature is being checked")
        ));
        assert!(gate.checking());
        gate.join().await;
        // The check could not be made (no client): waited for, with a time
        // to look again, not refused.
        match gate.admit("reg.example/app:1", &images, now) {
            Admit::Hold(why, Some(at)) => {
                assert!(
                    why.contains("cannot be checked yet") && why.contains("no CA file"),
                    "{why}"
                );
                assert!(at >= now + UNREACHABLE_MIN);
            }
            other => panic!("{other:?}"),
        }
        // Past its time it is checked again.
        assert!(matches!(
            gate.admit("reg.example/app:1", &images, now + UNREACHABLE_MAX),
            Admit::Check(_)
        ));
        gate.join().await;
        // A reference no module names any more is forgotten.
        gate.keep(&std::collections::BTreeSet::new());
        assert!(gate.verdicts.is_empty() && !gate.checking());
        // A new policy forgets every verdict.
        gate.admit("reg.example/app:1", &images, now);
        gate.join().await;
        assert_eq!(gate.verdicts.len(), 1);
        gate.set_policy(Known::Is(Arc::default()));
        assert!(gate.verdicts.is_empty());
    }

    #[tokio::test]
    async fn with_an_allow_list_a_pinned_digest_is_judged_at_once_and_a_tag_is_resolved_first() {
        const LISTED: &str =
            "sha256:1111111111111111111111111111111111111111111111111111111111111111";
        const OTHER: &str =
            "sha256:2222222222222222222222222222222222222222222222222222222222222222";
        let list = crate::model::image_policy::Allowed {
            version: 2,
            payload: "sha256:00".into(),
            images: [(None, LISTED.to_string())].into_iter().collect(),
        };
        let images = Images::new(Vec::new());
        let now = Instant::now();
        let mut gate = Gate::default();
        gate.set_registries(Err("no CA file".into()));
        gate.set_policy(Known::Is(Arc::new(Policy {
            allowed: Some(list),
            ..Policy::default()
        })));
        // (image, what the gate says: "free", "check" or the refusal's end)
        let cases = [
            (format!("reg.example/app@{LISTED}"), "free"),
            (
                format!("reg.example/app@{OTHER}"),
                "refused (unlisted-image): sha256:2222222222222222222222222222222222222222222222222222222222222222 of reg.example/app is not in the allow-list (version 2)",
            ),
            ("reg.example/app:1".to_string(), "check"),
        ];
        for (image, want) in cases {
            match (gate.admit(&image, &images, now), want) {
                (Admit::Free, "free") | (Admit::Check(_), "check") => {}
                (Admit::Hold(why, None), end) => {
                    assert!(why.starts_with(&format!("image {image} (")), "{why}");
                    assert!(why.ends_with(end), "{image}: {why}");
                }
                (other, _) => panic!("{image}: {other:?}"),
            }
        }
        assert_eq!(
            gate.in_flight.len(),
            1,
            "only the tag is asked of a registry"
        );
    }
}
