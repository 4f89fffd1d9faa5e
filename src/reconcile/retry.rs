//! The retry policy, apart from the work it holds back: attempts toward a
//! module's target (a create, start or recreate that did not hold, or that
//! the engine refused) and image pulls that failed are tried again after
//! `crash_backoff_min`, doubling to `crash_backoff_max`, never given up. A
//! new target is acted on at once; a container up for
//! `crash_backoff_reset` has its past failures forgiven. The state is in
//! memory: an agent restart starts it over.

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use tokio::time::Instant;

use crate::model::names::{Digest, ModuleName};
use crate::reconcile::plan::Step;
use crate::reconcile::report::{Action, ModuleReport};
use crate::reconcile::resolve::Resolved;
use crate::status::judge::Settle;

/// The windows of settling and of the crash-loop backoff.
#[derive(Clone, Copy, Debug)]
pub struct Tuning {
    /// What tells settling from crash-looping.
    pub settle: Settle,
    /// The first wait before acting again toward a target that failed.
    pub crash_backoff_min: Duration,
    /// The longest such wait.
    pub crash_backoff_max: Duration,
    /// Up this long: the backoff starts over.
    pub crash_backoff_reset: Duration,
}

impl Default for Tuning {
    fn default() -> Self {
        Tuning {
            settle: Settle {
                window: Duration::from_secs(30),
                crash_restarts: 5,
            },
            crash_backoff_min: Duration::from_secs(10),
            crash_backoff_max: Duration::from_secs(300),
            crash_backoff_reset: Duration::from_secs(600),
        }
    }
}

impl Tuning {
    /// The wait after `attempts` earlier attempts: `crash_backoff_min`,
    /// doubling, capped at `crash_backoff_max`.
    pub fn delay(&self, attempts: u32) -> Duration {
        self.crash_backoff_min
            .saturating_mul(1u32 << attempts.min(16))
            .min(self.crash_backoff_max)
    }
}

/// Attempts toward one target.
struct Attempts<K> {
    target: K,
    count: u32,
    next_at: Instant,
    /// What the last attempt failed with, when it did.
    last_error: Option<String>,
}

/// What the policy remembers.
#[derive(Default)]
pub struct Retries {
    repairs: HashMap<ModuleName, Attempts<Digest>>,
    pulls: HashMap<String, Attempts<()>>,
}

/// Holds back the steps that act again toward a target already tried
/// (a create, start, promote or recreate), each reported as backing off
/// with what it waits on; a new target is acted on at once, and so is a
/// container that is simply gone (removed by hand): only a create the
/// engine refused waits.
pub fn hold_back(
    retries: &Retries,
    steps: &mut Vec<Step>,
    resolved: &Resolved,
    now: Instant,
) -> Vec<ModuleReport> {
    let mut held_back = Vec::new();
    steps.retain(|step| {
        let (module, container) = match step {
            Step::Create { module } => (module, None),
            Step::Start { module, container }
            | Step::Promote { module, container }
            | Step::Recreate {
                module, container, ..
            } => (module, Some(container)),
            _ => return true,
        };
        let Some(d) = resolved.desired(module) else {
            return true;
        };
        let Some(held) = retries.held_back(module, &d.digest, now) else {
            return true;
        };
        if matches!(step, Step::Create { .. }) && held.last_error.is_none() {
            return true;
        }
        let mut r = ModuleReport::new(module.into(), Action::BackingOff, Some(d.digest.clone()));
        r.container = container.cloned();
        r.refused = held.last_error.is_some();
        r.error = Some(held.last_error.unwrap_or_else(|| "keeps failing".into()));
        r.retry_in = Some(held.next_at.saturating_duration_since(now));
        held_back.push(r);
        false
    });
    held_back
}

/// Why a step is held back, and until when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldBack {
    /// What the last attempt failed with, when it did (a container that
    /// keeps dying failed with nothing to say).
    pub last_error: Option<String>,
    /// When the next attempt is due.
    pub next_at: Instant,
}

impl Retries {
    /// Whether acting toward `target` for `module` now is held back.
    pub fn held_back(
        &self,
        module: &ModuleName,
        target: &Digest,
        now: Instant,
    ) -> Option<HeldBack> {
        let a = self.repairs.get(module)?;
        (a.target == *target && now < a.next_at).then(|| HeldBack {
            last_error: a.last_error.clone(),
            next_at: a.next_at,
        })
    }

    /// Notes an attempt toward a target and how it went, scheduling when
    /// the next attempt toward the same target may be made.
    pub fn attempted(
        &mut self,
        t: &Tuning,
        module: &ModuleName,
        target: &Digest,
        error: Option<String>,
        now: Instant,
    ) {
        let a = self
            .repairs
            .entry(module.clone())
            .or_insert_with(|| Attempts {
                target: target.clone(),
                count: 0,
                next_at: now,
                last_error: None,
            });
        if a.target != *target {
            a.target = target.clone();
            a.count = 0;
        }
        a.next_at = now + t.delay(a.count);
        a.count += 1;
        a.last_error = error;
    }

    /// Forgets a module's failures: it has been up long enough.
    pub fn forgive(&mut self, module: &ModuleName) {
        self.repairs.remove(module);
    }

    /// Whether pulling `image` now is held back after failed pulls.
    pub fn pull_held_back(&self, image: &str, now: Instant) -> Option<HeldBack> {
        let a = self.pulls.get(image)?;
        (now < a.next_at).then(|| HeldBack {
            last_error: a.last_error.clone(),
            next_at: a.next_at,
        })
    }

    /// Notes a pull of `image` and how it went.
    pub fn pulled(&mut self, t: &Tuning, image: &str, error: Option<String>, now: Instant) {
        let Some(error) = error else {
            self.pulls.remove(image);
            return;
        };
        let a = self
            .pulls
            .entry(image.to_string())
            .or_insert_with(|| Attempts {
                target: (),
                count: 0,
                next_at: now,
                last_error: None,
            });
        a.next_at = now + t.delay(a.count);
        a.count += 1;
        a.last_error = Some(error);
    }

    /// Forgets pulls of images no longer missing or no longer named.
    pub fn keep_pulls(&mut self, missing: &BTreeSet<String>) {
        self.pulls.retain(|image, _| missing.contains(image));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_from_min_to_max() {
        let t = Tuning::default();
        let secs: Vec<u64> = (0..8).map(|n| t.delay(n).as_secs()).collect();
        assert_eq!(secs, [10, 20, 40, 80, 160, 300, 300, 300]);
        assert_eq!(t.delay(u32::MAX), t.crash_backoff_max);
    }

    #[test]
    fn a_target_is_held_back_until_its_time_and_a_new_target_is_not() {
        let t = Tuning::default();
        let m = ModuleName::try_from("m").unwrap();
        let (a, b) = (Digest::of(b"a"), Digest::of(b"b"));
        let t0 = Instant::now();
        let mut r = Retries::default();
        assert_eq!(r.held_back(&m, &a, t0), None);
        r.attempted(&t, &m, &a, Some("refused".into()), t0);
        let held = r.held_back(&m, &a, t0).unwrap();
        assert_eq!(held.last_error.as_deref(), Some("refused"));
        assert_eq!(held.next_at, t0 + Duration::from_secs(10));
        assert_eq!(r.held_back(&m, &b, t0), None, "a new target goes at once");
        assert_eq!(r.held_back(&m, &a, t0 + Duration::from_secs(10)), None);
        r.attempted(&t, &m, &a, None, t0 + Duration::from_secs(10));
        assert_eq!(
            r.held_back(&m, &a, t0 + Duration::from_secs(10))
                .unwrap()
                .next_at,
            t0 + Duration::from_secs(30)
        );
        r.forgive(&m);
        assert_eq!(r.held_back(&m, &a, t0 + Duration::from_secs(10)), None);
    }

    #[test]
    fn failed_pulls_back_off_and_a_good_one_forgets() {
        let t = Tuning::default();
        let t0 = Instant::now();
        let mut r = Retries::default();
        r.pulled(&t, "img:1", Some("404".into()), t0);
        r.pulled(&t, "img:1", Some("404".into()), t0);
        assert_eq!(
            r.pull_held_back("img:1", t0).unwrap().next_at,
            t0 + Duration::from_secs(20)
        );
        r.pulled(&t, "img:1", None, t0);
        assert_eq!(r.pull_held_back("img:1", t0), None);
        r.pulled(&t, "img:2", Some("404".into()), t0);
        r.keep_pulls(&BTreeSet::new());
        assert_eq!(r.pull_held_back("img:2", t0), None);
    }
}
