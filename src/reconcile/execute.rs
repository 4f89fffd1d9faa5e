//! Carrying out one step of a plan against the engine. A recreate records
//! its target (an applied record in state `Pending`) before it touches the
//! old container, so a crash anywhere leaves a record of what was under
//! way, and the next pass finds the new container carrying the target
//! digest and does not replace it again. An engine refusal is this module's
//! failure and is reported; only an engine that went away fails the pass.

use std::sync::Arc;

use crate::engine::{Engine, EngineError};
use crate::host::clock::now;
use crate::model::intention::UpdateOrder;
use crate::model::names::ModuleName;
use crate::model::spec::Desired;
use crate::reconcile::plan::Step;
use crate::reconcile::report::{Action, ModuleReport, Subject};
use crate::reconcile::resolve::Resolved;
use crate::store::{AppliedRecord, ApplyState, EventKind, Store};

/// Why an action on one module did not complete.
#[derive(Debug, thiserror::Error)]
enum ActError {
    /// The engine refused, or went away.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// Something on this host was not as the action needs it.
    #[error("{0}")]
    Host(String),
}

/// A module's report for a step the engine has nothing to do in (keep,
/// wait, hold, pulling, conflict, drift reported), or the step back when
/// it acts. Most steps of an idle pass end here, without a task.
pub fn at_once(resolved: &Resolved, step: Step) -> Result<ModuleReport, Step> {
    let report = |module: &ModuleName, action: Action, container: Option<String>| {
        report(resolved, Subject::Module(module.clone()), action, container)
    };
    match step {
        Step::Keep { module, container } => Ok(report(&module, Action::Unchanged, Some(container))),
        Step::Wait {
            module,
            container,
            state,
        } => {
            let mut r = report(&module, Action::Waiting, Some(container));
            r.error = Some(format!("container is {}", state.as_str()));
            Ok(r)
        }
        Step::Hold {
            module,
            container,
            reason,
        } => {
            let mut r = report(&module, Action::Held, container);
            r.error = Some(reason);
            Ok(r)
        }
        Step::Depend {
            module,
            container,
            stop: false,
            reason,
        } => {
            let mut r = report(&module, Action::Depending, container);
            r.error = Some(reason);
            Ok(r)
        }
        Step::Pulling {
            module,
            container,
            doing,
        } => {
            let mut r = report(&module, Action::Pulling, container);
            r.error = Some(doing);
            Ok(r)
        }
        Step::Conflict { module, container } => {
            Ok(report(&module, Action::Conflict, Some(container)))
        }
        Step::ReportDrift {
            module,
            container,
            moved,
        } => {
            let mut r = report(&module, Action::Drifted, Some(container));
            r.moved = moved;
            Ok(r)
        }
        Step::Defer {
            module,
            container,
            moved,
            why,
        } => {
            let mut r = report(&module, Action::Deferred, Some(container));
            r.moved = moved;
            r.error = Some(why);
            Ok(r)
        }
        acts => Err(acts),
    }
}

/// A module's report, with the digest it is to run.
fn report(
    resolved: &Resolved,
    module: Subject,
    action: Action,
    container: Option<String>,
) -> ModuleReport {
    let digest = module
        .module()
        .and_then(|m| resolved.desired(m))
        .map(|d| d.digest.clone());
    ModuleReport {
        container,
        ..ModuleReport::new(module, action, digest)
    }
}

/// Executes one step.
pub async fn execute<E: Engine>(
    engine: &E,
    store: &Arc<Store>,
    resolved: &Resolved,
    step: Step,
) -> Result<ModuleReport, EngineError> {
    let step = match at_once(resolved, step) {
        Ok(r) => return Ok(r),
        Err(acts) => acts,
    };
    let report = |module: &ModuleName, action: Action, container: Option<String>| {
        report(resolved, module.into(), action, container)
    };
    // A refusal fails this module; an engine that went away fails the pass.
    // What the engine says is masked of every value opened for the module
    // (it may quote the env it was given).
    let failed = |mut r: ModuleReport, what: &str, e: ActError| match e {
        ActError::Engine(e) if e.is_unreachable() => Err(e),
        e => {
            r.action = Action::Failed;
            let said = format!("{what}: {e}");
            r.error = Some(match r.module.module().and_then(|m| resolved.desired(m)) {
                Some(d) => d.secrets.mask(&said),
                None => said,
            });
            Ok(r)
        }
    };
    match step {
        Step::Depend {
            module,
            container: Some(container),
            reason,
            ..
        } => {
            // The engine would restart it into a crash loop: stopped until
            // what it depends on is there, then started again.
            let mut r = report(&module, Action::Depending, Some(container.clone()));
            r.error = Some(reason);
            match engine.stop(&container).await {
                Ok(()) => {
                    tracing::info!(
                        module = module.as_str(),
                        "stopped container {} until what it depends on is there: {}",
                        short_id(Some(&container)),
                        r.error.as_deref().unwrap_or_default()
                    );
                    Ok(r)
                }
                Err(e) => failed(r, "stop failed", e.into()),
            }
        }
        Step::Restart {
            module,
            container,
            reason,
        } => {
            let r = report(&module, Action::Started, Some(container.clone()));
            let restarted = match engine.stop(&container).await {
                Ok(()) => engine.start(&container).await,
                Err(e) => Err(e),
            };
            match restarted {
                Ok(()) => {
                    log_event(
                        store,
                        module.as_str(),
                        EventKind::Started,
                        format!(
                            "restarted container {}: {reason}",
                            short_id(Some(&container))
                        ),
                    )
                    .await;
                    Ok(r)
                }
                Err(e) => failed(r, "restart failed", e.into()),
            }
        }
        Step::Start { module, container } => {
            let r = report(&module, Action::Started, Some(container.clone()));
            match engine.start(&container).await {
                Ok(()) => {
                    log_event(
                        store,
                        module.as_str(),
                        EventKind::Started,
                        format!("started container {}", short_id(Some(&container))),
                    )
                    .await;
                    Ok(r)
                }
                Err(e) => failed(r, "start failed", e.into()),
            }
        }
        Step::Create { module } => {
            let d = resolved
                .desired(&module)
                .expect("a step's module to run is desired");
            let r = report(&module, Action::Created, None);
            if let Err(e) = record_target(store, d).await {
                return failed(r, "create failed", e);
            }
            match create_and_start(engine, store, d).await {
                Ok(id) => {
                    log_event(
                        store,
                        module.as_str(),
                        EventKind::Created,
                        format!(
                            "created container {} from {}",
                            short_id(Some(&id)),
                            d.digest
                        ),
                    )
                    .await;
                    Ok(ModuleReport {
                        container: Some(id),
                        ..r
                    })
                }
                Err(e) => failed(r, "create failed", e),
            }
        }
        Step::Recreate {
            module,
            container,
            successor,
            moved,
        } => {
            let d = resolved
                .desired(&module)
                .expect("a step's module to run is desired");
            let mut r = report(&module, Action::Recreated, Some(container.clone()));
            r.moved = moved;
            match replace(engine, store, d, &container, successor).await {
                Ok(id) => {
                    log_event(
                        store,
                        module.as_str(),
                        EventKind::Recreated,
                        format!(
                            "recreated container {} → {}: {}",
                            short_id(Some(&container)),
                            short_id(Some(&id)),
                            join_moved(&r.moved)
                        ),
                    )
                    .await;
                    r.container = Some(id);
                    Ok(r)
                }
                Err((what, e)) => failed(r, what, e),
            }
        }
        Step::Promote { module, container } => {
            let d = resolved
                .desired(&module)
                .expect("a step's module to run is desired");
            let mut r = report(&module, Action::Recreated, Some(container.clone()));
            let promoted = async {
                engine.start(&container).await?;
                engine.rename(&container, &d.spec.name).await?;
                crate::host::crash_point("recreate:after-rename");
                Ok::<_, EngineError>(())
            };
            match promoted.await {
                Ok(()) => {
                    applied(store, d, &container).await;
                    log_event(
                        store,
                        module.as_str(),
                        EventKind::Recreated,
                        format!(
                            "recreated container → {}: a recreate interrupted after its old container went, completed",
                            short_id(Some(&container))
                        ),
                    )
                    .await;
                    r.container = Some(container);
                    Ok(r)
                }
                Err(e) => failed(r, "completing the recreate failed", e.into()),
            }
        }
        Step::Remove { module, container } => {
            let subject = Subject::of_label(module.as_deref());
            let name = subject.to_string();
            let r = self::report(
                resolved,
                subject.clone(),
                Action::Removed,
                Some(container.clone()),
            );
            match engine.remove(&container).await {
                Ok(()) => {
                    if let Some(m) = subject.module() {
                        if resolved.desired(m).is_none() {
                            let gone = m.to_string();
                            if let Err(e) = store.blocking(move |s| s.forget(&gone)).await {
                                tracing::error!(module = m.as_str(), "cannot forget records: {e}");
                            }
                        }
                    }
                    log_event(
                        store,
                        &name,
                        EventKind::Removed,
                        format!(
                            "removed container {}: no intention names it",
                            short_id(Some(&container))
                        ),
                    )
                    .await;
                    Ok(r)
                }
                Err(e) => failed(r, "remove failed", e.into()),
            }
        }
        settled => at_once(resolved, settled)
            .map_err(|_| unreachable!("at_once takes every step that does not act")),
    }
}

/// The applied record of a desired container.
pub fn applied_record(
    d: &Desired,
    state: ApplyState,
    container_id: Option<String>,
) -> AppliedRecord {
    AppliedRecord {
        state,
        digest: d.digest.clone(),
        inputs: d.inputs.clone(),
        spec: d.spec_recorded(),
        container_id,
        at: now(),
    }
}

/// Records the target before acting on it.
async fn record_target(store: &Arc<Store>, d: &Desired) -> Result<(), ActError> {
    let name = d.name.clone();
    let rec = applied_record(d, ApplyState::Pending, None);
    store
        .blocking(move |s| s.put_applied(&name, &rec))
        .await
        .map_err(|e| ActError::Host(format!("cannot record the target: {e}")))
}

/// Replaces `old` with the target's container, never leaving the module
/// without one while that can be helped, and with nothing on the way to
/// the new container running under the module's name that can wait: the
/// successor is made beside the running container (under the successor
/// name); it starts (start-first), or the old one stops and it starts (or
/// the old one starts again, if it cannot: stop-first); the old one is moved
/// aside (the retired name), the successor takes the module's name, the
/// target is recorded as applied, and only then is the old one stopped and
/// removed. Every state in between is recognised from names and labels by
/// the next pass (the plan's `successor`, `Promote`, and the removal of a
/// module's container under any other name), so a crash anywhere still
/// makes one container per change.
async fn replace<E: Engine>(
    engine: &E,
    store: &Arc<Store>,
    d: &Desired,
    old: &str,
    successor: Option<String>,
) -> Result<String, (&'static str, ActError)> {
    record_target(store, d)
        .await
        .map_err(|e| ("cannot record the target", e))?;
    let new = match successor {
        Some(id) => id,
        None => {
            check_files(d).map_err(|e| ("create failed", e))?;
            let mut spec = d.spec.clone();
            spec.name = d.name.successor_name();
            engine
                .create(&spec)
                .await
                .map_err(|e| ("create failed; the old container runs on", e.into()))?
        }
    };
    crate::host::crash_point("recreate:after-create");
    match d.update_order {
        UpdateOrder::StopFirst => {
            if let Err(e) = engine.stop(old).await {
                let _ = engine.remove(&new).await;
                return Err(("stopping the old container failed; it runs on", e.into()));
            }
            crate::host::crash_point("recreate:after-stop");
            if let Err(e) = engine.start(&new).await {
                // The old one serves again; the new one goes (the next
                // attempt makes it again, after the retry policy's wait).
                let _ = engine.start(old).await;
                let _ = engine.remove(&new).await;
                return Err(("start failed; the old container runs again", e.into()));
            }
        }
        UpdateOrder::StartFirst => {
            // The new one starts while the old one serves: no gap.
            if let Err(e) = engine.start(&new).await {
                let _ = engine.remove(&new).await;
                return Err(("start failed; the old container runs on", e.into()));
            }
        }
    }
    crate::host::crash_point("recreate:after-start");
    // The old one steps aside, so that the new one has the module's name
    // now; its stop and removal wait until after. Where it cannot (say, an
    // old one of an earlier crash holds the retired name and could not be
    // removed), it is removed first, as the name needs.
    let retired = match engine.rename(old, &d.name.retired_name()).await {
        Ok(()) => {
            crate::host::crash_point("recreate:after-retire");
            true
        }
        Err(e) => {
            tracing::warn!(
                module = d.name.as_str(),
                "the old container {} could not be moved aside ({e}): it is removed first",
                short_id(Some(old))
            );
            engine
                .remove(old)
                .await
                .map_err(|e| ("removing the old container failed", e.into()))?;
            crate::host::crash_point("recreate:after-remove");
            false
        }
    };
    engine
        .rename(&new, &d.spec.name)
        .await
        .map_err(|e| ("renaming the new container failed", e.into()))?;
    crate::host::crash_point("recreate:after-rename");
    applied(store, d, &new).await;
    if retired {
        // The change is made; the old container's stop (its grace) and
        // removal are not on its way. One that cannot be removed now is
        // the next pass's: a container of the module under another name.
        if let Err(e) = engine.remove(old).await {
            tracing::warn!(
                module = d.name.as_str(),
                "the old container {} is left for the next pass to remove: {e}",
                short_id(Some(old))
            );
        }
        crate::host::crash_point("recreate:after-remove");
    }
    Ok(new)
}

/// Every composed file the container mounts is on the host, and every
/// read-write mount's source: one that is missing is made, an empty
/// directory, as the Docker Engine's `-v` and Compose do (a read-only
/// mount's source is an input, read before this).
fn check_files(d: &Desired) -> Result<(), ActError> {
    for (host, _) in &d.files {
        if !host.exists() {
            return Err(ActError::Host(format!(
                "composed file {} is missing",
                host.display()
            )));
        }
    }
    for m in d.spec.mounts.iter().filter(|m| !m.read_only) {
        let source = std::path::Path::new(&m.source);
        if std::fs::symlink_metadata(source).is_err() {
            std::fs::create_dir_all(source)
                .map_err(|e| ActError::Host(cannot_make(&m.source, &e)))?;
            tracing::info!(
                module = d.name.as_str(),
                "made the missing mount source {} (an empty directory)",
                m.source
            );
        }
    }
    Ok(())
}

/// Why a missing read-write mount source could not be made; on a read-only
/// file system (the shipped unit's `ProtectSystem=strict`), what the unit
/// lets the agent write and how to widen it.
fn cannot_make(source: &str, e: &std::io::Error) -> String {
    let said = format!("cannot make the missing mount source {source}: {e}");
    if e.kind() != std::io::ErrorKind::ReadOnlyFilesystem {
        return said;
    }
    format!(
        "{said}; under the shipped systemd unit (ProtectSystem=strict) the agent makes missing sources only under /srv and /var/lib/stead (ReadWritePaths=): make it beforehand, put it under /srv, or add its parent to ReadWritePaths= in a drop-in (systemctl edit stead)"
    )
}

/// Records that the module's container carries its target now.
async fn applied(store: &Arc<Store>, d: &Desired, id: &str) {
    let name = d.name.clone();
    let rec = applied_record(d, ApplyState::Applied, Some(id.to_string()));
    if let Err(e) = store.blocking(move |s| s.put_applied(&name, &rec)).await {
        tracing::error!(
            module = d.name.as_str(),
            "cannot record the applied spec: {e}"
        );
    }
}

/// Creates and starts the target's container (its target already recorded).
async fn create_and_start<E: Engine>(
    engine: &E,
    store: &Arc<Store>,
    d: &Desired,
) -> Result<String, ActError> {
    check_files(d)?;
    let id = engine.create(&d.spec).await?;
    crate::host::crash_point("create:after-create");
    engine.start(&id).await?;
    crate::host::crash_point("create:after-start");
    applied(store, d, &id).await;
    Ok(id)
}

async fn log_event(store: &Arc<Store>, module: &str, kind: EventKind, detail: String) {
    tracing::info!(module, "{detail}");
    let m = module.to_string();
    if let Err(e) = store
        .blocking(move |s| s.append_event(Some(&m), kind, detail))
        .await
    {
        tracing::error!(module, "cannot append to the event log: {e}");
    }
}

/// The inputs that moved, for people.
pub fn join_moved(moved: &[crate::model::spec::Moved]) -> String {
    moved
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The first 12 characters of a container ID.
pub fn short_id(id: Option<&str>) -> &str {
    id.map_or("-", |i| i.get(..12).unwrap_or(i))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Error, ErrorKind};

    #[test]
    fn a_source_that_cannot_be_made_names_the_unit_only_on_a_read_only_file_system() {
        let unit = "ProtectSystem=strict";
        for (e, names_unit) in [
            (Error::from_raw_os_error(30), true), // EROFS
            (Error::from(ErrorKind::ReadOnlyFilesystem), true),
            (Error::from_raw_os_error(13), false), // EACCES
            (Error::from_raw_os_error(28), false), // ENOSPC
        ] {
            let said = cannot_make("/opt/app/data", &e);
            assert!(
                said.starts_with("cannot make the missing mount source /opt/app/data: "),
                "{said}"
            );
            assert_eq!(
                said.contains(unit) && said.contains("ReadWritePaths="),
                names_unit,
                "{said}"
            );
        }
    }
}
