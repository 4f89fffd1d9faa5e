//! The one-shot actions a pass does itself (`model::action`): a restart or
//! a recreate of a module becomes that module's step of the pass (so it
//! waits for the maintenance windows and the update locks as any
//! disruption does), and a reboot is asked of systemd at the pass's end,
//! when this device's config allows it. Each is stored `begun`, with what
//! shows it had not acted yet, before the engine or systemd is asked, and
//! `done` or `failed` after; a begun action found again is judged by that
//! evidence, so a power cut anywhere neither skips nor repeats it.
//!
//! Owns: which actions in force a pass acts on, their steps, their
//! records' moves, the reboot, and what each action not begun waits for
//! (shared with the API).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use crate::engine::{Engine, EngineError, LogRange, Observed};
use crate::model::action::{Action, Kind, Next, Record, Upload, evidence, next};
use crate::model::lock::Lock;
use crate::model::names::ModuleName;
use crate::store::Store;

use super::plan::{self, Step};
use super::report::{Action as Did, ModuleReport};
use super::{PassError, Reconciler};

/// What each action in force and not over waits for, by id.
pub type Waiting = Arc<Mutex<BTreeMap<String, String>>>;

/// Where a pass hands the uploads it collected (the plane's uploader).
#[derive(Clone)]
pub struct Uploads {
    /// The uploader.
    pub tx: tokio::sync::mpsc::Sender<Upload>,
    /// The ids handed over and not ended: not collected again meanwhile.
    pub in_flight: Arc<Mutex<BTreeSet<String>>>,
    /// Where an upload without `upload_to` goes: `<this>/<id>/<name>`
    /// (the plane's `nodes/<node>/uploads`).
    pub base: String,
}

/// How many of each module's last log lines a support bundle carries.
pub const BUNDLE_TAIL: u32 = 500;

/// An action this pass acts on, with its record (when begun before) and
/// what shows now that it has not acted.
pub(super) struct Asked {
    action: Action,
    record: Option<Record>,
    before: String,
}

/// The boot this is, as the kernel says it (empty when unread).
fn boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

impl Reconciler {
    /// The actions in force of `kinds`, each id once (the node document's
    /// first, then the groups' in their order).
    fn actions_in_force(&self, kinds: &[Kind]) -> Vec<Action> {
        let Some(said) = self.maintenance.as_ref().and_then(|rx| rx.borrow().clone()) else {
            return Vec::new();
        };
        let mut out: Vec<Action> = Vec::new();
        for (_, a) in &said.actions {
            if kinds.contains(&a.kind) && !out.iter().any(|b| b.id == a.id) {
                out.push(a.clone());
            }
        }
        out
    }

    /// Stores a record and says it.
    async fn keep(store: &Arc<Store>, r: Record) -> Result<(), PassError> {
        let said = format!(
            "action {} ({}): {}{}",
            r.id,
            r.kind.as_str(),
            r.status.as_str(),
            r.result
                .as_deref()
                .map(|x| format!(": {x}"))
                .unwrap_or_default()
        );
        store.blocking(move |s| s.keep_action(&r, said)).await?;
        Ok(())
    }

    /// The restarts and recreates the documents ask that are due: each
    /// module's kept step becomes its restart or recreate; what cannot act
    /// now says why; one found done by its evidence, or expired, is stored
    /// so. Returns those to begin once the windows and locks have judged
    /// the steps ([`Reconciler::begin_actions`]).
    pub(super) async fn ask_actions<E: Engine>(
        &mut self,
        engine: &E,
        store: &Arc<Store>,
        steps: &mut plan::Plan,
        entries: &BTreeMap<ModuleName, crate::store::Entry>,
    ) -> Result<Vec<Asked>, PassError> {
        let asked_of = self.actions_in_force(&[Kind::Restart, Kind::Recreate, Kind::Repull]);
        let mut waiting = BTreeMap::new();
        let mut asked = Vec::new();
        if !asked_of.is_empty() {
            let records: BTreeMap<String, Record> = store
                .blocking(|s| s.actions())
                .await?
                .into_iter()
                .map(|r| (r.id.clone(), r))
                .collect();
            let now = crate::host::clock::now();
            for a in asked_of {
                let record = records.get(&a.id).cloned();
                // Over: nothing to read of it (no inspect each pass).
                if record.as_ref().is_some_and(|r| r.status.is_final()) {
                    continue;
                }
                if a.kind == Kind::Repull {
                    self.repull(engine, store, &a, record, entries, &mut waiting, now)
                        .await?;
                    continue;
                }
                let Some(m) = a.module.clone() else { continue };
                let step = steps.iter().position(|s| s.module() == Some(m.as_str()));
                let here = match step.map(|i| &steps[i]) {
                    Some(Step::Keep { container, .. }) => {
                        let started = match engine.inspect(container).await {
                            Ok(life) => Some(life.started_ns),
                            Err(EngineError::NotFound(_)) => None,
                            Err(e) => return Err(e.into()),
                        };
                        started.map(|s| evidence(a.kind, Some((container, s)), ""))
                    }
                    _ => None,
                };
                if step.is_none() && record.is_none() && now < a.expires {
                    let mut r = Record::begin(&a, String::new(), now);
                    let _ = r.fail(format!("this device runs no module {m}"), now);
                    Self::keep(store, r).await?;
                    continue;
                }
                let next = next(&a, record.as_ref(), now, here.as_deref());
                if !self
                    .follow(store, &a, record.as_ref(), next, &mut waiting, now)
                    .await?
                {
                    continue;
                }
                let (Some(i), Some(before)) = (step, here) else {
                    continue;
                };
                let Step::Keep { module, container } = steps[i].clone() else {
                    continue;
                };
                steps[i] = match a.kind {
                    Kind::Restart => Step::Restart {
                        module,
                        container,
                        reason: format!("asked by action {}", a.id),
                    },
                    _ => Step::Recreate {
                        module,
                        container,
                        successor: None,
                        moved: Vec::new(),
                    },
                };
                asked.push(Asked {
                    action: a,
                    record,
                    before,
                });
            }
        }
        self.keep_waiting(waiting, &[Kind::Restart, Kind::Recreate, Kind::Repull]);
        Ok(asked)
    }

    /// A `repull`: the module's image, as its intention names it, pulled
    /// again (stored begun first); done once the pull ended, or failed
    /// with the pull's error. If the name now means another image, the
    /// module differs from what it runs, and the passes after recreate it
    /// as any change (its `on_drift`, the windows and locks). Found begun
    /// by an agent that did not start its pull, the pull is started again.
    #[allow(clippy::too_many_arguments)]
    async fn repull<E: Engine>(
        &mut self,
        engine: &E,
        store: &Arc<Store>,
        a: &Action,
        record: Option<Record>,
        entries: &BTreeMap<ModuleName, crate::store::Entry>,
        waiting: &mut BTreeMap<String, String>,
        now: u64,
    ) -> Result<(), PassError> {
        let reference = a
            .module
            .as_ref()
            .and_then(|m| entries.get(m))
            .and_then(|e| e.record.as_ref())
            .map(|r| r.intention.image.clone());
        // The evidence of a repull is the reference it pulls: the same
        // found begun again is pulled again (a pull is idempotent).
        let here = reference
            .as_ref()
            .map(|r| format!("image={r}"))
            .unwrap_or_default();
        let next = next(a, record.as_ref(), now, Some(&here));
        if !self
            .follow(store, a, record.as_ref(), next, waiting, now)
            .await?
        {
            return Ok(());
        }
        let Some(reference) = reference else {
            let m = a.module.as_ref().map_or("", |m| m.as_str());
            let mut r = record.unwrap_or_else(|| Record::begin(a, String::new(), now));
            let _ = r.fail(format!("this device runs no module {m}"), now);
            return Self::keep(store, r).await;
        };
        let record = match record {
            Some(r) => r,
            None => {
                let r = Record::begin(a, here, now);
                Self::keep(store, r.clone()).await?;
                r
            }
        };
        if self.pulls.pulling(&reference) {
            waiting.insert(a.id.clone(), format!("pulling {reference}"));
            return Ok(());
        }
        match self.repulls.remove(&a.id) {
            // Its pull ended: what it came to.
            Some(pulled) => {
                let mut r = record;
                let failed = self
                    .retries
                    .pull_held_back(&pulled, tokio::time::Instant::now())
                    .map(|h| h.last_error.unwrap_or_else(|| "no reason given".into()));
                let moved = match failed {
                    Some(e) => r.fail(format!("pulling {pulled} again failed: {e}"), now),
                    None => r.finish(format!("pulled {pulled} again"), now),
                };
                if moved.is_ok() {
                    Self::keep(store, r).await?;
                }
                // What it brought is taken at once.
                self.wake_at(Some(now));
            }
            None => {
                tracing::info!(
                    image = reference.as_str(),
                    "pulling again: asked by action {}",
                    a.id
                );
                self.pulls.start(engine, &reference);
                self.repulls.insert(a.id.clone(), reference.clone());
                waiting.insert(a.id.clone(), format!("pulling {reference}"));
            }
        }
        Ok(())
    }

    /// Does what `next` says of action `a` but act (an expiry or an end
    /// stored, a wait said, the pass woken when it may go): `true` when it
    /// is to act.
    async fn follow(
        &mut self,
        store: &Arc<Store>,
        a: &Action,
        record: Option<&Record>,
        next: Next,
        waiting: &mut BTreeMap<String, String>,
        now: u64,
    ) -> Result<bool, PassError> {
        match next {
            Next::Nothing => {}
            Next::Later(t) => {
                self.wake_at(Some(t));
                waiting.insert(
                    a.id.clone(),
                    format!("not before {}", crate::model::time::format_rfc3339(t)),
                );
            }
            Next::Expire => Self::keep(store, Record::expired(a, now)).await?,
            Next::Wait(why) => {
                waiting.insert(a.id.clone(), why);
            }
            Next::Finish(what) => {
                if let Some(mut r) = record.cloned()
                    && r.finish(what, now).is_ok()
                {
                    Self::keep(store, r).await?;
                }
            }
            Next::Act => return Ok(true),
        }
        Ok(false)
    }

    /// What the actions of `kinds` wait for now (those of the other kinds
    /// are the other step's to say).
    fn keep_waiting(&self, now: BTreeMap<String, String>, kinds: &[Kind]) {
        let mut w = self.actions_waiting.lock().expect("actions waiting");
        let of_kinds: Vec<String> = self
            .actions_in_force(kinds)
            .into_iter()
            .map(|a| a.id)
            .collect();
        w.retain(|id, _| !of_kinds.contains(id));
        w.extend(now);
        // Those no document carries any more are gone.
        let all: Vec<String> = self
            .actions_in_force(&Kind::ALL)
            .into_iter()
            .map(|a| a.id)
            .collect();
        w.retain(|id, _| all.contains(id));
    }

    /// Stores `begun` each asked action whose step the windows and locks
    /// left to act (before it acts); one they deferred waits, and says
    /// why. Returns the records begun, to end after the steps ran.
    pub(super) async fn begin_actions(
        &mut self,
        store: &Arc<Store>,
        steps: &plan::Plan,
        asked: Vec<Asked>,
    ) -> Result<Vec<Record>, PassError> {
        let now = crate::host::clock::now();
        let mut begun = Vec::new();
        for Asked {
            action,
            record,
            before,
        } in asked
        {
            let m = action.module.as_ref().map(|m| m.as_str());
            match steps.iter().find(|s| s.module() == m) {
                Some(Step::Restart { .. } | Step::Recreate { .. }) => {
                    let r = match record {
                        Some(r) => r,
                        None => {
                            let r = Record::begin(&action, before, now);
                            Self::keep(store, r.clone()).await?;
                            r
                        }
                    };
                    self.actions_waiting
                        .lock()
                        .expect("actions waiting")
                        .remove(&action.id);
                    begun.push(r);
                }
                Some(Step::Defer { why, .. }) => {
                    self.actions_waiting
                        .lock()
                        .expect("actions waiting")
                        .insert(action.id.clone(), why.clone());
                }
                _ => {}
            }
        }
        Ok(begun)
    }

    /// Ends each action begun this pass by what its module's step did:
    /// done when it restarted or recreated, failed with the engine's why;
    /// otherwise it stays begun, and its evidence judges it next pass.
    pub(super) async fn end_actions(
        &mut self,
        store: &Arc<Store>,
        begun: Vec<Record>,
        modules: &[ModuleReport],
    ) -> Result<(), PassError> {
        let now = crate::host::clock::now();
        for mut r in begun {
            let Some(m) = &r.module else { continue };
            let Some(report) = modules.iter().find(|x| x.module.module() == Some(m)) else {
                continue;
            };
            let container = super::execute::short_id(report.container.as_deref()).to_string();
            let moved = match (&report.action, &report.error) {
                (Did::Failed, Some(e)) => r.fail(e.clone(), now),
                (Did::Started, None) if r.kind == Kind::Restart => {
                    r.finish(format!("restarted container {container}"), now)
                }
                (Did::Recreated, None) if r.kind == Kind::Recreate => {
                    r.finish(format!("recreated: container {container}"), now)
                }
                _ => continue,
            };
            if moved.is_ok() {
                Self::keep(store, r).await?;
            }
        }
        Ok(())
    }

    /// A reboot the documents ask, at the pass's end: when this device's
    /// config allows it (else it fails, saying so), inside the maintenance
    /// windows and with no update lock held (else it waits); stored begun
    /// with the boot it ends, then asked of systemd. Found again in
    /// another boot, it is done.
    pub(super) async fn reboot_if_asked(
        &mut self,
        store: &Arc<Store>,
        locks: &[Lock],
    ) -> Result<(), PassError> {
        let asked = self.actions_in_force(&[Kind::Reboot]);
        let mut waiting = BTreeMap::new();
        if !asked.is_empty() {
            let records = store.blocking(|s| s.actions()).await?;
            let now = crate::host::clock::now();
            let boot = boot_id();
            let here = evidence(Kind::Reboot, None, &boot);
            for a in asked {
                let record = records.iter().find(|r| r.id == a.id).cloned();
                let next = next(&a, record.as_ref(), now, Some(&here));
                if !self
                    .follow(store, &a, record.as_ref(), next, &mut waiting, now)
                    .await?
                {
                    continue;
                }
                if !self.reboot_allowed {
                    let mut r = record.unwrap_or_else(|| Record::begin(&a, here.clone(), now));
                    let _ = r.fail(
                        "this device's config does not allow reboots ([actions] reboot = true)"
                            .into(),
                        now,
                    );
                    Self::keep(store, r).await?;
                    continue;
                }
                if let Err(why) = self.door() {
                    waiting.insert(a.id.clone(), why);
                    continue;
                }
                if let Some(l) = locks.first() {
                    waiting.insert(
                        a.id.clone(),
                        format!(
                            "waits for the update lock {} holds ({})",
                            l.module, l.reason
                        ),
                    );
                    continue;
                }
                if let Err(why) = self.budget_door() {
                    waiting.insert(a.id.clone(), why);
                    continue;
                }
                let mut r = match record {
                    Some(r) => r,
                    None => {
                        let r = Record::begin(&a, here.clone(), now);
                        Self::keep(store, r.clone()).await?;
                        r
                    }
                };
                tracing::warn!("rebooting the device: asked by action {}", a.id);
                if let Err(e) = super::blocking(crate::host::systemd::reboot).await {
                    let _ = r.fail(format!("systemd did not reboot: {e}"), now);
                    Self::keep(store, r).await?;
                }
                // One reboot a pass: the others wait for the next boot.
                break;
            }
        }
        self.keep_waiting(waiting, &[Kind::Reboot]);
        Ok(())
    }

    /// The uploads the documents ask (a support bundle, a module's logs),
    /// at the pass's end: each module's logs read from the engine and
    /// masked of every value opened for it, the action stored begun, and
    /// handed to the uploader (which adds the device's own part of a
    /// bundle, sends it, and ends the record).
    pub(super) async fn collect_uploads<E: Engine>(
        &mut self,
        engine: &E,
        store: &Arc<Store>,
        observed: &[Observed],
        resolved: &super::resolve::Resolved,
    ) -> Result<(), PassError> {
        let kinds = [Kind::SupportBundle, Kind::UploadLogs];
        let asked = self.actions_in_force(&kinds);
        let mut waiting = BTreeMap::new();
        if let (false, Some(up)) = (asked.is_empty(), self.uploads.clone()) {
            let records = store.blocking(|s| s.actions()).await?;
            let now = crate::host::clock::now();
            for a in asked {
                if up.in_flight.lock().expect("uploads").contains(&a.id) {
                    waiting.insert(a.id.clone(), "uploading".into());
                    continue;
                }
                let record = records.iter().find(|r| r.id == a.id).cloned();
                let next = next(&a, record.as_ref(), now, Some(""));
                if !self
                    .follow(store, &a, record.as_ref(), next, &mut waiting, now)
                    .await?
                {
                    continue;
                }
                // Each module's container at its name, to read its logs.
                let of: Vec<(&str, &str)> = observed
                    .iter()
                    .filter_map(|o| {
                        let m = super::observe::at_its_name(&self.node, o)?;
                        let asked_of = a.module.as_ref().is_none_or(|x| x.as_str() == m);
                        asked_of.then_some((m, o.id.as_str()))
                    })
                    .collect();
                if a.kind == Kind::UploadLogs && of.is_empty() {
                    let m = a.module.as_ref().map_or("", |m| m.as_str());
                    let mut r = record.unwrap_or_else(|| Record::begin(&a, String::new(), now));
                    let _ = r.fail(format!("{m} has no container whose logs to read"), now);
                    Self::keep(store, r).await?;
                    continue;
                }
                let range = match a.kind {
                    Kind::UploadLogs => LogRange {
                        since: a.since,
                        until: a.until,
                        tail: None,
                    },
                    _ => LogRange {
                        tail: Some(BUNDLE_TAIL),
                        ..LogRange::default()
                    },
                };
                let mut files = Vec::new();
                // A bundle's logs together are bounded as one module's are.
                let mut room = crate::model::logs::MAX_LOG_BYTES;
                for (m, id) in of {
                    if room == 0 {
                        files.push((
                            format!("logs/{m}.log"),
                            b"[stead: not read: the bundle's logs are at their bound]\n".to_vec(),
                        ));
                        continue;
                    }
                    let text = match engine.logs(id, range).await {
                        Ok(t) => String::from_utf8_lossy(&t).into_owned(),
                        Err(e) if e.is_unreachable() => return Err(e.into()),
                        Err(e) => format!("[stead: the engine gave no logs: {e}]\n"),
                    };
                    let masked = match ModuleName::try_from(m)
                        .ok()
                        .and_then(|n| resolved.desired(&n))
                    {
                        Some(d) => d.secrets.mask(&text),
                        None => text,
                    };
                    let name = match a.kind {
                        Kind::UploadLogs => format!("{m}.log"),
                        _ => format!("logs/{m}.log"),
                    };
                    let mut bytes = masked.into_bytes();
                    if bytes.len() > room {
                        bytes.truncate(room);
                        bytes.extend_from_slice(crate::model::logs::CUT.as_bytes());
                    }
                    room = room.saturating_sub(bytes.len());
                    files.push((name, bytes));
                }
                let name = match a.kind {
                    Kind::UploadLogs => files.first().map_or("logs".into(), |f| f.0.clone()),
                    _ => "support-bundle.tar".into(),
                };
                let url = a
                    .upload_to
                    .clone()
                    .unwrap_or_else(|| format!("{}/{}/{name}", up.base, a.id));
                let record = match record {
                    Some(r) => r,
                    None => {
                        let r = Record::begin(&a, String::new(), now);
                        Self::keep(store, r.clone()).await?;
                        r
                    }
                };
                up.in_flight.lock().expect("uploads").insert(a.id.clone());
                if up.tx.try_send(Upload { record, url, files }).is_err() {
                    up.in_flight.lock().expect("uploads").remove(&a.id);
                    waiting.insert(a.id.clone(), "waits for the uploader".into());
                }
            }
        }
        self.keep_waiting(waiting, &kinds);
        Ok(())
    }

    /// Where the uploads the documents ask go.
    pub fn set_uploads(&mut self, uploads: Uploads) {
        self.uploads = Some(uploads);
    }

    /// Whether a document may reboot this device (its config's
    /// `[actions] reboot`).
    pub fn allow_reboots(&mut self, allowed: bool) {
        self.reboot_allowed = allowed;
    }

    /// What each action in force waits for, shared with the API.
    pub fn actions_waiting(&self) -> Waiting {
        self.actions_waiting.clone()
    }
}
