//! The auto lane: for each module with `lane = "auto"`, every `interval`
//! (jittered, so a fleet does not ask at once), the newest tag within its
//! range, not below what runs, is looked up with a tag list and a HEAD
//! (which do not count as pulls). When its digest is new (not what runs,
//! not skipped after a rollback or a decline), a reload request is filed as
//! `auto-update` through the one filing function; the executor lands it as
//! any other. For a `pinned` module the lane looks the same way and
//! declines by name (an event says what is published and that the pin holds
//! it); `manual` ones are left to explicit requests. `POST /v1/reloads/check` makes it look now.

use crate::model::intention::Lane;
use crate::model::names::ModuleName;
use crate::model::reference::Reference;
use crate::model::version::TagVersion;
use crate::reload::executor::{AGENT_VERSION, AUTO_UPDATE, Executor};
use crate::store::StoreError;

/// What the lane did for one module.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Looked {
    /// Filed request `id` for this version.
    Filed(u64, String),
    /// Nothing newer (or only what is skipped).
    Nothing,
    /// The registry could not say; looked again at the next interval.
    Unknown(String),
    /// This version is published, and the module is pinned: declined.
    Declined(String),
}

impl Executor {
    /// Looks for every auto-lane module whose interval has passed; files
    /// a request for each that has a new compatible version.
    pub async fn auto_lane(&self, now: u64) -> Result<Vec<(ModuleName, Looked)>, StoreError> {
        let on_demand = self
            .look_now
            .swap(false, std::sync::atomic::Ordering::AcqRel);
        let (entries, updates) = self.modules().await?;
        // Only modules whose look is due; most runs end here.
        let due: Vec<_> = entries
            .iter()
            .filter(|(name, i)| {
                let Some(u) = i
                    .update
                    .as_ref()
                    .filter(|u| matches!(u.lane, Lane::Auto | Lane::Pinned))
                else {
                    return false;
                };
                let last = updates.get(*name).map_or(0, |s| s.last_look);
                on_demand
                    || last == 0
                    || now >= last + jittered(u.interval.as_secs(), name.as_str())
            })
            .collect();
        if due.is_empty() {
            return Ok(Vec::new());
        }
        let open: Vec<Option<String>> = self
            .store()
            .blocking(|s| s.reloads())
            .await?
            .into_iter()
            // A record this agent did not write holds nothing up.
            .filter(|r| !r.status().is_final() && r.check_ours(self.agent()).is_ok())
            .map(|r| r.module)
            .collect();
        let mut out = Vec::new();
        for (name, i) in due {
            let state = updates.get(name).cloned().unwrap_or_default();
            // A request for it (or for every module) already under way.
            if open
                .iter()
                .any(|m| m.is_none() || m.as_deref() == Some(name.as_str()))
            {
                continue;
            }
            let n = name.clone();
            self.store()
                .blocking(move |s| s.modify_update(&n, |st| st.last_look = now))
                .await?;
            let looked = self.look(i, &state, now).await?;
            match &looked {
                Looked::Filed(id, v) => {
                    tracing::info!(
                        module = name.as_str(),
                        "auto-update: {v} is published; reload {id} filed"
                    )
                }
                Looked::Unknown(e) => {
                    tracing::warn!(module = name.as_str(), "auto-update: cannot look: {e}")
                }
                Looked::Declined(v) => {
                    let (m, text) = (
                        name.to_string(),
                        format!("auto-update declined: the module is pinned ({v} is published)"),
                    );
                    tracing::info!(module = name.as_str(), "{text}");
                    self.store()
                        .blocking(move |s| {
                            s.append_event(Some(&m), crate::store::EventKind::Intention, text)
                        })
                        .await?;
                }
                Looked::Nothing => {}
            }
            out.push((name.clone(), looked));
        }
        Ok(out)
    }

    async fn look(
        &self,
        i: &crate::model::intention::Intention,
        state: &crate::model::reload::UpdateState,
        now: u64,
    ) -> Result<Looked, StoreError> {
        let Some(u) = &i.update else {
            return Ok(Looked::Nothing);
        };
        let registries = match self.registries() {
            Ok(r) => r,
            Err(e) => return Ok(Looked::Unknown(e)),
        };
        let Ok(base) = Reference::parse(&i.image) else {
            return Ok(Looked::Nothing);
        };
        let landed = state
            .landed
            .as_ref()
            .filter(|l| l.stands_for(&i.image, u.range.as_str()));
        let running = landed
            .map(|l| l.version.clone())
            .or_else(|| base.tag.clone())
            .and_then(|t| TagVersion::parse(&t));
        let Some(running) = running else {
            return Ok(Looked::Nothing);
        };
        let newest = match registries.newest(&base, &u.range, &running, 8).await {
            Ok(t) => t,
            Err(e) => return Ok(Looked::Unknown(e.to_string())),
        };
        for c in newest {
            if c.version == running.version {
                // What runs (or its twin tag): nothing newer.
                break;
            }
            let head = match registries.head(&base.with_tag(&c.tag)).await {
                Ok(h) => h,
                Err(e) => return Ok(Looked::Unknown(e.to_string())),
            };
            // Rolled back, what runs, or failed under this very image,
            // range and agent: not asked again.
            if state.skipped.contains(&head.digest)
                || landed.is_some_and(|l| l.digest == head.digest)
                || state.failed_under(&head.digest, &i.image, u.range.as_str(), AGENT_VERSION)
            {
                continue;
            }
            if u.lane == Lane::Pinned {
                return Ok(Looked::Declined(c.tag));
            }
            let (agent, module) = (self.agent(), i.name.clone());
            let reason = format!("{} is published (within {})", c.tag, u.range);
            let filed = self
                .store()
                .blocking(move |s| {
                    crate::reload::file::file(s, agent, Some(&module), &reason, AUTO_UPDATE, now)
                })
                .await;
            return Ok(match filed {
                Ok(r) => Looked::Filed(r.id, c.tag),
                Err(crate::reload::file::FileError::Store(e)) => return Err(e),
                Err(e) => Looked::Unknown(e.to_string()),
            });
        }
        Ok(Looked::Nothing)
    }
}

/// The interval with up to a tenth added, the same for a module each time
/// (so devices spread out, and each keeps its own rhythm).
fn jittered(interval: u64, module: &str) -> u64 {
    let h = module.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    interval + h % (interval / 10 + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_adds_at_most_a_tenth_and_is_stable() {
        for m in ["a", "sensor", "camera-2"] {
            let j = jittered(3600, m);
            assert!((3600..=3960).contains(&j), "{m}: {j}");
            assert_eq!(j, jittered(3600, m));
        }
        assert_ne!(jittered(3600, "a"), jittered(3600, "b"));
    }
}
