//! The update locks in a pass: which still stand (each only for the life
//! of the container it was taken for: one inspect per lock held), the
//! recreates they hold off, and the locks asked through the API, taken
//! for the module's running container before the pass that might have
//! replaced it. The rules are `model::lock`'s; the locks are the store's.

use std::sync::Arc;

use crate::engine::{Engine, EngineError};
use crate::model::lock::{self, Hold, Lock, Scope};
use crate::model::names::ModuleName;
use crate::store::{EventKind, Store};

use super::{PassError, Reconciler, plan};

impl Reconciler {
    /// Takes a lock asked through the API (`reason` checked), for its
    /// module's container as last observed, if that runs: its life is
    /// what the lock stands for. `Err` says why not.
    pub async fn take_lock<E: Engine>(
        &mut self,
        engine: &E,
        store: &Arc<Store>,
        module: ModuleName,
        reason: String,
        scope: Scope,
    ) -> Result<Lock, String> {
        let observed = store
            .blocking(|s| s.all_observed())
            .await
            .map_err(|e| e.to_string())?;
        let no = || format!("{module} has no running container to hold a lock for");
        let container = observed
            .get(module.as_str())
            .map(|o| o.container_id.clone())
            .ok_or_else(no)?;
        let life = match engine.inspect(&container).await {
            Ok(life) => life,
            Err(EngineError::NotFound(_)) => return Err(no()),
            Err(e) => return Err(format!("the engine: {e}")),
        };
        let taken = Lock {
            module: module.clone(),
            reason,
            scope,
            taken_at: crate::host::clock::now(),
            container: container.clone(),
            started_ns: life.started_ns,
            waited_since: None,
        };
        if !taken.stands(
            &container,
            life.started_ns,
            life.finished_ns,
            life.restarting,
        ) {
            return Err(no());
        }
        let kept = taken.clone();
        store
            .blocking(move |s| s.keep_lock(&kept))
            .await
            .map_err(|e| e.to_string())?;
        let detail = format!("{} taken", taken.said());
        if let Err(e) = store
            .blocking(move |s| s.append_event(Some(module.as_str()), EventKind::Intention, detail))
            .await
        {
            tracing::warn!("event: {e}");
        }
        Ok(taken)
    }

    /// The locks held that still stand; those whose container stopped,
    /// started again or is gone are released, saying so.
    pub(super) async fn standing_locks<E: Engine>(
        &mut self,
        engine: &E,
        store: &Arc<Store>,
    ) -> Result<Vec<Lock>, PassError> {
        let held = store.blocking(|s| s.locks()).await?;
        let mut standing = Vec::new();
        for l in held {
            let ended = match engine.inspect(&l.container).await {
                Ok(life)
                    if l.stands(
                        &l.container,
                        life.started_ns,
                        life.finished_ns,
                        life.restarting,
                    ) =>
                {
                    None
                }
                Ok(life) if life.started_ns != l.started_ns => Some("was started again"),
                Ok(_) => Some("stopped"),
                Err(EngineError::NotFound(_)) => Some("is gone"),
                Err(e) => return Err(e.into()),
            };
            let Some(how) = ended else {
                standing.push(l);
                continue;
            };
            let module = l.module.clone();
            store.blocking(move |s| s.release_lock(&module)).await?;
            let detail = format!(
                "{} released: the container it was taken for {how}",
                l.said()
            );
            let module = l.module.clone();
            store
                .blocking(move |s| {
                    s.append_event(Some(module.as_str()), EventKind::Intention, detail)
                })
                .await?;
        }
        Ok(standing)
    }

    /// Holds off each recreate a lock holds (under the documents' policy),
    /// and stores when a recreate first waited for each lock, so the max
    /// counts across restarts of the agent.
    pub(super) async fn hold_for_locks(
        &mut self,
        store: &Arc<Store>,
        locks: &[Lock],
        steps: &mut plan::Plan,
    ) -> Result<(), PassError> {
        let now = crate::host::clock::now();
        let policy = self.lock_policy();
        let mut waited: Vec<ModuleName> = Vec::new();
        let mut taken: Vec<(ModuleName, String)> = Vec::new();
        let mut wake_at: Option<u64> = None;
        plan::defer(steps, |module| {
            let hold = lock::hold(locks, module, policy.as_ref(), now);
            if hold != Hold::Free {
                waited.extend(
                    locks
                        .iter()
                        .filter(|l| l.scope == Scope::Device || &l.module == module)
                        .filter(|l| l.waited_since.is_none())
                        .map(|l| l.module.clone()),
                );
            }
            match hold {
                Hold::Free => None,
                Hold::Waits(why, until) => {
                    wake_at = match (wake_at, until) {
                        (Some(a), Some(b)) => Some(a.min(b)),
                        (a, b) => a.or(b),
                    };
                    Some(why)
                }
                Hold::Takes(why) => {
                    taken.push((module.clone(), why));
                    None
                }
            }
        });
        self.wake_at(wake_at);
        for l in locks.iter().filter(|l| waited.contains(&l.module)) {
            let mut l = l.clone();
            l.waited_since = Some(now);
            store.blocking(move |s| s.keep_lock(&l)).await?;
        }
        for (module, why) in taken {
            let detail = format!("recreated though locked: {why}");
            store
                .blocking(move |s| {
                    s.append_event(Some(module.as_str()), EventKind::Intention, detail)
                })
                .await?;
        }
        Ok(())
    }
}
