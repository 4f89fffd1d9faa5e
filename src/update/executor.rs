//! Moves an update of stead itself through its durable steps: filed from a
//! signed release statement ([`Updater::request`]), landed (fetched,
//! resumable and bounded, its size and SHA-256 checked against the signed
//! statement before the bytes are ever executed, written beside the
//! current binary and run once with `--version`), then switched: the
//! `switching` stamp is stored before the launcher's state names the
//! candidate, and the one restart is asked for once. What the candidate
//! then proves is `update::confirm`'s; what a starting agent makes of a
//! request it finds is `model::agent_update::resume`.
//!
//! Failed or Faulted is decided by the reloads' one classifier.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use http::{HeaderMap, HeaderValue, Method, Uri};
use tokio::sync::{Notify, watch};

use crate::host::launch::Launched;
use crate::model::agent_update::{AgentUpdate, Resume, Stage, TransitionError};
use crate::model::launch::{AgentVersion, Slot};
use crate::model::release::{self, Binary, NotTaken, Release};
use crate::net::http::{Http, Transport};
use crate::plane::sync::PlaneAsk;
use crate::plane::trusted::TrustedSet;
use crate::reload::classify::{Failure, FetchFailure, Verdict, classify};
use crate::store::Store;
use crate::store::agent_updates::FileError;

use crate::TARGET;

/// A fetch's time limit (a statement; a binary's download gets this per
/// 4 MiB on top).
const FETCH_LIMIT: Duration = Duration::from_secs(60);

/// How long the landed binary gets to print its version.
const VERSION_LIMIT: Duration = Duration::from_secs(20);

/// How much of a download is written between two syncs of its part.
const SYNC_EVERY: usize = 1 << 20;

use crate::version_number as running_version;

/// Why a request was not filed.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    /// This agent was not started by the launcher: it cannot switch.
    #[error(
        "this agent was not started by the launcher (/usr/bin/stead from the package), so it cannot switch to another version"
    )]
    NotLaunched,
    /// The statement is not one (its envelope, its payload) or is not
    /// signed by a trusted key.
    #[error("{0}")]
    Statement(String),
    /// A statement that is well formed and signed, but not for this agent.
    #[error("{0}")]
    Refused(String),
    /// The statement could not be fetched.
    #[error("{0}")]
    Fetch(String),
    /// One is switching or confirming.
    #[error(transparent)]
    Busy(FileError),
    #[error(transparent)]
    Store(crate::store::StoreError),
}

/// What filing gave.
#[derive(Debug)]
pub enum Filed {
    /// A request, to follow at `GET /v1/agent`.
    Filed(Box<AgentUpdate>),
    /// The version asked for runs already: nothing to do.
    Running(String),
}

/// The updater: one per agent.
pub struct Updater {
    pub store: Arc<Store>,
    /// The store's file: copied before a switch (`update::snapshot`).
    pub store_path: std::path::PathBuf,
    /// How the launcher started this agent (`None`: it did not, and no
    /// update is taken).
    pub launched: Option<Launched>,
    /// Fetches statements and binaries (or why it cannot: a CA file that
    /// does not read).
    pub http: Result<Http, String>,
    /// The base of a faulted request's backoff.
    pub retry_interval: Duration,
    /// Ends the agent's run for the one restart, `restart_asked` saying so.
    pub restart: Arc<Notify>,
    pub restart_asked: Arc<AtomicBool>,
    /// Wakes the executor: a request was filed.
    pub wake: Arc<Notify>,
    /// What the node trusts (`[update] trusted_keys` for statements, and
    /// the plane's root's document keys at the time) and the version of
    /// stead the plane's held document asks for: said by the plane's
    /// poller on this channel whenever either changes (without a plane,
    /// only the set it was made with).
    pub asks: watch::Receiver<PlaneAsk>,
    /// The plane's ask last fetched and failed to fetch, and when: tried
    /// again after [`PLANE_RETRY`].
    pub plane_tried: std::sync::Mutex<Option<(String, tokio::time::Instant)>>,
}

/// How long a statement the plane names that could not be fetched waits
/// before it is fetched again.
const PLANE_RETRY: Duration = Duration::from_secs(300);

/// How soon what the plane asks is followed again after the store failed
/// or another request was switching or confirming.
const PLANE_AGAIN: Duration = Duration::from_secs(10);

impl Updater {
    pub fn launched(&self) -> Option<&Launched> {
        self.launched.as_ref()
    }

    /// Whether the running version is a floor (a release below it must
    /// say `downgrade`): it is, unless this agent was updated to it by a
    /// statement no key in force signed (the one rule of every floor,
    /// [`TrustedSet::release_stands`]); a version installed otherwise is one.
    async fn running_is_floor(&self, trusted: &TrustedSet) -> bool {
        let Ok(all) = self.store.blocking(|s| s.agent_updates()).await else {
            return true;
        };
        let Some(u) = all
            .iter()
            .rev()
            .find(|u| u.stage() == Stage::Done && u.version.as_str() == running_version())
        else {
            return true;
        };
        let Err(why) = trusted.release_stands(&u.statement) else {
            return true;
        };
        tracing::warn!(
            "agent update: the running {} is no longer the floor: {why}; a release a key in force signed is taken below it",
            running_version()
        );
        false
    }

    /// Reads a statement (its envelope), checks its signature and what it
    /// says against this agent.
    async fn judge(
        &self,
        statement: &[u8],
        downgrade: bool,
    ) -> Result<Result<Release, NotTaken>, RequestError> {
        let trusted = self.asks.borrow().trusted.clone();
        let r = trusted
            .verify_release(statement)
            .map_err(RequestError::Statement)?;
        let running = semver::Version::parse(running_version()).map_err(|e| {
            RequestError::Refused(format!("this agent's own version does not read: {e}"))
        })?;
        let me = release::Running {
            version: &running,
            target: TARGET,
            store_schema: crate::store::SCHEMA_VERSION,
        };
        let downgrade = downgrade || !self.running_is_floor(&trusted).await;
        Ok(match release::admit(&r, &me, downgrade) {
            Ok(_) => Ok(r),
            Err(n) => Err(n),
        })
    }

    /// Fetches a release statement.
    pub async fn fetch_statement(&self, url: &str) -> Result<Vec<u8>, RequestError> {
        crate::net::check_no_userinfo(url).map_err(RequestError::Fetch)?;
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(RequestError::Fetch(
                "must be an http:// or https:// URL".into(),
            ));
        }
        let at = crate::net::shown(url);
        let uri: Uri = url
            .parse()
            .map_err(|e| RequestError::Fetch(format!("{at}: {e}")))?;
        let http = self
            .http
            .as_ref()
            .map_err(|e| RequestError::Fetch(format!("no HTTP client: {e}")))?;
        let a = http
            .send(
                Method::GET,
                uri,
                &HeaderMap::new(),
                FETCH_LIMIT,
                release::MAX_STATEMENT,
            )
            .await
            .map_err(|t| RequestError::Fetch(format!("cannot fetch {at}: {t}")))?;
        if !a.status.is_success() {
            return Err(RequestError::Fetch(format!("{at} answered {}", a.status)));
        }
        Ok(a.body.to_vec())
    }

    /// Files a request for the release a signed statement names.
    pub async fn request(
        &self,
        statement: Vec<u8>,
        statement_url: Option<String>,
        requested_by: &str,
        downgrade: bool,
    ) -> Result<Filed, RequestError> {
        self.request_as(statement, statement_url, requested_by, downgrade, None)
            .await
    }

    /// [`Updater::request`], the statement required to name `expect` (the
    /// version a plane document asks for) when given.
    async fn request_as(
        &self,
        statement: Vec<u8>,
        statement_url: Option<String>,
        requested_by: &str,
        downgrade: bool,
        expect: Option<&str>,
    ) -> Result<Filed, RequestError> {
        if self.launched.is_none() {
            return Err(RequestError::NotLaunched);
        }
        let r = match self.judge(&statement, downgrade).await? {
            Ok(r) if expect.is_some_and(|v| v != r.version) => {
                return Err(RequestError::Refused(format!(
                    "the release statement names {}, the document asks for {}",
                    r.version,
                    expect.unwrap_or_default()
                )));
            }
            Ok(r) => r,
            Err(NotTaken::Running) => return Ok(Filed::Running(running_version().to_string())),
            Err(NotTaken::Refused(why)) => return Err(RequestError::Refused(why)),
        };
        let version = r.agent_version().map_err(RequestError::Statement)?;
        let now = crate::host::clock::now();
        let by = crate::model::launch::one_line(requested_by);
        let filed = self
            .store
            .blocking(move |s| {
                s.file_agent_update(now, |id| {
                    let mut u = AgentUpdate::new(
                        id,
                        version,
                        running_version(),
                        (statement, statement_url),
                        &by,
                        now,
                    );
                    u.downgrade = downgrade;
                    u.say(
                        now,
                        format!("requested by {by}: {} → {}", running_version(), r.version),
                    );
                    u
                })
                .map_err(|e| match e {
                    FileError::Store(e) => RequestError::Store(e),
                    busy => RequestError::Busy(busy),
                })
            })
            .await?;
        tracing::info!(
            "update {} to {} filed by {}",
            filed.id,
            filed.version,
            filed.requested_by
        );
        self.wake.notify_one();
        Ok(Filed::Filed(Box::new(filed)))
    }

    /// At start, before anything else: what became of a switch this agent
    /// or another version began ([`crate::model::agent_update::resume`]).
    pub async fn resume(&self) {
        let Some(l) = self.launched.clone() else {
            return;
        };
        let open = match self.store.blocking(|s| s.open_agent_update()).await {
            Ok(Some(u)) => u,
            Ok(None) => return,
            Err(e) => {
                tracing::error!("agent update: {e}");
                return;
            }
        };
        let launch = l.read_state().unwrap_or_default();
        let words = l.last_words(&open.version);
        if let Resume::To(stage, line) =
            crate::model::agent_update::resume(&open, &l.slot, &launch, words.as_deref())
        {
            let now = crate::host::clock::now();
            let line2 = line.clone();
            let r = self
                .store
                .blocking(move |s| s.change_agent_update(open.id, |u| u.step(stage, now, line2)))
                .await;
            match (r, stage) {
                (Err(e), _) => tracing::error!("agent update: {e}"),
                (Ok(Some(Err(e))), _) => tracing::error!("agent update: {}", breach(e)),
                (Ok(_), Stage::Failed | Stage::Faulted) => tracing::error!("agent update: {line}"),
                (Ok(_), _) => tracing::info!("agent update: {line}"),
            }
        }
    }

    /// The candidate's watch ended: the request says so.
    pub async fn candidate_ended(&self, confirmed: Result<(), String>) {
        let Some(Slot::Candidate(me)) = self.launched.as_ref().map(|l| l.slot.clone()) else {
            return;
        };
        let now = crate::host::clock::now();
        let r = self
            .store
            .blocking(move |s| {
                let Some(u) = s.open_agent_update()?.filter(|u| u.version == me) else {
                    return Ok(None);
                };
                s.change_agent_update(u.id, |u| match confirmed {
                    Ok(()) => u.step(
                        Stage::Done,
                        now,
                        format!("{me} confirmed: a pass completed and the plane, if any, answered"),
                    ),
                    Err(why) => u.fail(now, format!("candidate {me}: {why}")),
                })
            })
            .await;
        match r {
            Err(e) => tracing::error!("agent update: {e}"),
            Ok(Some(Err(e))) => tracing::error!("agent update: {}", breach(e)),
            Ok(_) => {}
        }
    }

    /// Runs for ever: follows what the plane asks, moves the open request
    /// on, then waits to be woken, for the plane to ask anew, or for a
    /// faulted one's retry (or a failed fetch of the plane's statement's).
    pub async fn run(self: Arc<Self>) {
        let mut asks = self.asks.clone();
        // Whether the poller still says what the plane asks (none runs
        // without a plane, or once the agent stops).
        let mut open = true;
        loop {
            asks.mark_unchanged();
            let retry = self.follow_plane().await;
            let wait = self.step().await;
            let wait = match (wait, retry) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            let sleep = async {
                match wait {
                    Some(d) => tokio::time::sleep(d).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = sleep => {}
                () = self.wake.notified() => {}
                r = asks.changed(), if open => open = r.is_ok(),
            }
        }
    }

    /// Files what the plane's held document asks for, once per (version,
    /// statement URL): a request that failed is not filed again until the
    /// document names another release; one in progress is left to go on.
    /// Returns how long until a statement that could not be fetched is
    /// fetched again, while one waits to be.
    async fn follow_plane(&self) -> Option<Duration> {
        let (revision, ask) = self.asks.borrow().agent.clone()?;
        if self.launched.is_none() || ask.version == running_version() {
            return None;
        }
        let all = match self.store.blocking(|s| s.agent_updates()).await {
            Ok(a) => a,
            Err(e) => {
                tracing::error!("agent update: {e}");
                return Some(PLANE_AGAIN);
            }
        };
        let asked_before = all.iter().any(|u| {
            u.version.as_str() == ask.version
                && u.statement_url.as_deref() == Some(ask.release.as_str())
                && u.requested_by.starts_with("plane")
        });
        if asked_before {
            return None;
        }
        let key = format!("{} {}", ask.version, ask.release);
        if let Ok(tried) = self.plane_tried.lock()
            && let Some((k, at)) = &*tried
            && *k == key
            && at.elapsed() < PLANE_RETRY
        {
            return Some(PLANE_RETRY.saturating_sub(at.elapsed()));
        }
        let by = format!("plane revision {revision}");
        let statement = match self.fetch_statement(&ask.release).await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!("agent update asked by {by}: {e}; tried again in {PLANE_RETRY:?}");
                if let Ok(mut tried) = self.plane_tried.lock() {
                    *tried = Some((key, tokio::time::Instant::now()));
                }
                return Some(PLANE_RETRY);
            }
        };
        let filed = self
            .request_as(
                statement.clone(),
                Some(ask.release.clone()),
                &by,
                ask.downgrade,
                Some(&ask.version),
            )
            .await;
        let why = match filed {
            Ok(_) => return None,
            Err(RequestError::NotLaunched) => return None,
            Err(e @ RequestError::Store(_)) | Err(e @ RequestError::Busy(_)) => {
                tracing::warn!("agent update asked by {by}: {e}");
                return Some(PLANE_AGAIN);
            }
            Err(e) => e.to_string(),
        };
        // A decided refusal is kept as a failed request: reported, and not
        // asked again for this release.
        tracing::error!("agent update asked by {by}: {why}");
        let Ok(version) = AgentVersion::parse(&ask.version) else {
            return None;
        };
        let now = crate::host::clock::now();
        let url = ask.release.clone();
        let r = self
            .store
            .blocking(move |s| {
                s.file_agent_update(now, |id| {
                    AgentUpdate::new(
                        id,
                        version,
                        running_version(),
                        (statement, Some(url)),
                        &by,
                        now,
                    )
                    .refused(now, why)
                })
            })
            .await;
        if let Err(e) = r {
            tracing::warn!("agent update: {e}");
        }
        None
    }

    /// One step of the open request; how long until the next is due.
    async fn step(&self) -> Option<Duration> {
        let l = self.launched.clone()?;
        let u = match self.store.blocking(|s| s.open_agent_update()).await {
            Ok(Some(u)) => u,
            Ok(None) => return None,
            Err(e) => {
                tracing::error!("agent update: {e}");
                return Some(Duration::from_secs(30));
            }
        };
        let now = crate::host::clock::now();
        match u.stage() {
            Stage::Requested => {
                self.change(u.id, move |u| {
                    u.step(Stage::Landing, now, format!("landing {}", u.version))
                })
                .await;
                Some(Duration::ZERO)
            }
            Stage::Landing => {
                match self.land(&l, &u).await {
                    Ok(said) => {
                        let at = crate::host::clock::now();
                        self.change(u.id, move |u| {
                            u.landed = true;
                            u.say(at, said);
                            Ok(())
                        })
                        .await;
                        self.switch(&l, &u).await;
                    }
                    Err(f) => {
                        let at = crate::host::clock::now();
                        let why = f.to_string();
                        let _ = match classify(&f) {
                            Verdict::Decided => self.change(u.id, move |u| u.fail(at, why)).await,
                            Verdict::Transient { .. } => {
                                self.change(u.id, move |u| u.fault(at, why)).await
                            }
                        };
                    }
                }
                Some(Duration::ZERO)
            }
            Stage::Faulted => {
                let due = u.retry_at(self.retry_interval.as_secs()).unwrap_or(now);
                if now >= due {
                    self.change(u.id, move |u| u.rearm(now)).await;
                    Some(Duration::ZERO)
                } else {
                    Some(Duration::from_secs(due - now))
                }
            }
            // A switch under way is moved on by the agent that starts next.
            Stage::Switching | Stage::Confirming | Stage::Done | Stage::Failed => None,
        }
    }

    /// Changes request `id` by `f`; returns it as written, or `None` when
    /// nothing was (no such request, the store failed, or a guard refused
    /// the move: said in the log, the request left as stored).
    async fn change(
        &self,
        id: u64,
        f: impl FnOnce(&mut AgentUpdate) -> Result<(), TransitionError> + Send + 'static,
    ) -> Option<AgentUpdate> {
        match self
            .store
            .blocking(move |s| s.change_agent_update(id, f))
            .await
        {
            Ok(Some(Ok(u))) => Some(u),
            Ok(Some(Err(e))) => {
                tracing::error!("agent update {id}: {}", breach(e));
                None
            }
            Ok(None) => None,
            Err(e) => {
                tracing::error!("agent update {id}: {e}");
                None
            }
        }
    }

    /// The switch: the stamp stored first, then the store's snapshot, then
    /// the launcher's state, then the one restart.
    async fn switch(&self, l: &Launched, u: &AgentUpdate) {
        let now = crate::host::clock::now();
        let Some(stamped) = self
            .change(u.id, move |u| {
                let line = format!(
                    "switching to {}: the launcher is told, one restart asked for",
                    u.version
                );
                // The move stamps the one restart of this attempt.
                u.step(Stage::Switching, now, line)
            })
            .await
        else {
            return;
        };
        crate::host::crash_point("update:after-switch-stamp");
        // The store as it is now, stamp included, for the way back: no
        // candidate is named without it.
        let path = self.store_path.clone();
        let taken = self
            .store
            .blocking(move |s| crate::update::snapshot::take(s, &path))
            .await;
        match taken {
            Ok(said) => tracing::info!("update {}: {said}", u.id),
            Err(e) => {
                let at = crate::host::clock::now();
                self.change(u.id, move |u| u.fault(at, e)).await;
                return;
            }
        }
        crate::host::crash_point("update:after-snapshot");
        let v = stamped.version.clone();
        let written = l.change_state(|s| {
            s.candidate = Some(crate::model::launch::Candidate {
                version: v.clone(),
                attempts: 0,
            });
            if s.failed.as_ref().is_some_and(|f| f.version == v) {
                s.failed = None;
            }
        });
        if let Err(e) = written {
            let at = crate::host::clock::now();
            self.change(u.id, move |u| {
                u.fault(at, format!("cannot write the launcher's state: {e}"))
            })
            .await;
            return;
        }
        crate::host::crash_point("update:after-launch-state");
        tracing::info!("update {} to {}: restarting into the candidate", u.id, v);
        self.restart_asked.store(true, Ordering::SeqCst);
        self.restart.notify_one();
    }

    /// Lands the binary: fetched (resuming a part already there), checked,
    /// put in place, run once. Returns what its `--version` said.
    async fn land(&self, l: &Launched, u: &AgentUpdate) -> Result<String, Failure> {
        let mismatch = |m: String| Failure::Fetch(m, FetchFailure::Mismatch);
        // The statement is judged again: a key may have been revoked since.
        let r = match self.judge(&u.statement, u.downgrade).await {
            Ok(Ok(r)) => r,
            Ok(Err(NotTaken::Running)) => {
                return Err(mismatch(format!("{} runs already", u.version)));
            }
            Ok(Err(NotTaken::Refused(why))) => return Err(mismatch(why)),
            Err(e) => return Err(mismatch(e.to_string())),
        };
        let bin = r
            .binaries
            .get(TARGET)
            .cloned()
            .ok_or_else(|| mismatch(format!("no binary for {TARGET}")))?;
        let url = resolve(u.statement_url.as_deref(), &bin.url).map_err(mismatch)?;
        let dir = l.dir.join(u.version.as_str());
        let target = l.binary(&u.version);
        if !(target.is_file() && self.check(&target, &bin).await.is_ok()) {
            self.download(&dir, &url, &bin).await?;
        }
        run_version(&target, &u.version).await
    }

    /// Whether a file is the binary the statement names.
    async fn check(&self, path: &Path, bin: &Binary) -> Result<(), Failure> {
        let path = path.to_path_buf();
        let bin = bin.clone();
        crate::host::blocking::run(move || check_file(&path, &bin)).await
    }

    async fn download(&self, dir: &Path, url: &str, bin: &Binary) -> Result<(), Failure> {
        let http = self
            .http
            .as_ref()
            .map_err(|e| Failure::Internal(format!("no HTTP client: {e}")))?;
        let internal = |e: std::io::Error| Failure::Internal(format!("{}: {e}", dir.display()));
        std::fs::create_dir_all(dir).map_err(internal)?;
        let part = dir.join("stead.part");
        let have = std::fs::metadata(&part).map(|m| m.len()).unwrap_or(0);
        let have = if have >= bin.size { 0 } else { have };
        let mut headers = HeaderMap::new();
        if have > 0 {
            if let Ok(v) = HeaderValue::from_str(&format!("bytes={have}-")) {
                headers.insert(http::header::RANGE, v);
            }
        }
        let at = crate::net::shown(url);
        let uri: Uri = url
            .parse()
            .map_err(|e| Failure::Fetch(format!("{at}: {e}"), FetchFailure::Mismatch))?;
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&part)
            .map_err(internal)?;
        if have == 0 {
            file.set_len(0).map_err(internal)?;
        }
        let mut write_error: Option<std::io::Error> = None;
        // Synced as it comes, so that what a power cut leaves is resumed
        // from (the page cache holds up to half a minute of writes).
        let mut unsynced = 0usize;
        let limit = FETCH_LIMIT + Duration::from_secs(15 * (bin.size / (4 << 20) + 1));
        // At most the whole binary again (a host that ignores the range).
        let max = bin.size as usize + 1;
        let answer = {
            let mut sink = |chunk: &[u8]| {
                if write_error.is_none() {
                    unsynced += chunk.len();
                    let synced = if unsynced >= SYNC_EVERY {
                        unsynced = 0;
                        file.write_all(chunk).and_then(|()| file.sync_data())
                    } else {
                        file.write_all(chunk)
                    };
                    if let Err(e) = synced {
                        write_error = Some(e);
                    }
                }
            };
            http.send_streamed(Method::GET, uri, &headers, limit, max, &mut sink)
                .await
        };
        // What came is kept for the next attempt to resume from.
        let _ = file.sync_all();
        drop(file);
        if matches!(answer, Err(Transport::TooLarge(_))) {
            // More than the statement says: nothing of it is kept.
            let _ = std::fs::remove_file(&part);
        }
        let a = answer.map_err(|t| {
            Failure::Fetch(
                format!("cannot fetch {at}: {t}"),
                FetchFailure::Transport(t),
            )
        })?;
        if let Some(e) = write_error {
            return Err(internal(e));
        }
        match a.status.as_u16() {
            206 => {}
            // The host sent it whole after what was there: that goes.
            200 if have > 0 => drop_prefix(&part, have).map_err(internal)?,
            200 => {}
            s => {
                let retry = a
                    .headers
                    .get(http::header::RETRY_AFTER)
                    .and_then(|v| v.to_str().ok())
                    .and_then(crate::model::time::parse_retry_after)
                    .map(|r| r.wait(crate::host::clock::now()));
                return Err(Failure::Fetch(
                    format!("{at} answered {s}"),
                    FetchFailure::Status(s, retry),
                ));
            }
        }
        let got = std::fs::metadata(&part).map_err(internal)?.len();
        if got < bin.size {
            return Err(Failure::Fetch(
                format!(
                    "{at}: the download stopped at {got} of {} bytes; the next attempt resumes it",
                    bin.size
                ),
                FetchFailure::Transport(Transport::Connect("cut short".into())),
            ));
        }
        if let Err(e) = self.check(&part, bin).await {
            let _ = std::fs::remove_file(&part);
            return Err(e);
        }
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&part, std::fs::Permissions::from_mode(0o755))
            .map_err(internal)?;
        std::fs::rename(&part, dir.join("stead")).map_err(internal)?;
        std::fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(internal)?;
        Ok(())
    }
}

/// Whether a file is the binary the statement names: its size, then its
/// SHA-256, read in pieces.
fn check_file(path: &Path, bin: &Binary) -> Result<(), Failure> {
    let mismatch = |m: String| Failure::Fetch(m, FetchFailure::Mismatch);
    let internal = |e: std::io::Error| Failure::Internal(format!("{}: {e}", path.display()));
    let got = std::fs::metadata(path).map_err(internal)?.len();
    if got != bin.size {
        return Err(mismatch(format!(
            "{}: {got} bytes, the statement says {}",
            path.display(),
            bin.size
        )));
    }
    let mut f = std::fs::File::open(path).map_err(internal)?;
    let mut h = crate::model::names::Hasher::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = std::io::Read::read(&mut f, &mut buf).map_err(internal)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    let digest = crate::model::names::Digest::from_hasher(h);
    if digest.hex() != bin.sha256 {
        return Err(mismatch(format!(
            "{}: sha256 {}, the statement says {}",
            path.display(),
            digest.hex(),
            bin.sha256
        )));
    }
    Ok(())
}

/// Drops a file's first `n` bytes, copying the rest in pieces.
fn drop_prefix(path: &Path, n: u64) -> std::io::Result<()> {
    use std::io::{Seek, SeekFrom};
    let tmp = path.with_extension("part2");
    let mut from = std::fs::File::open(path)?;
    from.seek(SeekFrom::Start(n))?;
    let mut to = std::fs::File::create(&tmp)?;
    std::io::copy(&mut from, &mut to)?;
    to.sync_all()?;
    std::fs::rename(&tmp, path)
}

/// A binary's URL, read against the statement's.
fn resolve(base: Option<&str>, url: &str) -> Result<String, String> {
    if url.starts_with("http://") || url.starts_with("https://") {
        return Ok(url.to_string());
    }
    let Some(base) = base else {
        return Err(format!(
            "the binary's url '{url}' is relative, and the statement came with no URL of its own to read it against"
        ));
    };
    let origin_end = base
        .find("://")
        .and_then(|i| base[i + 3..].find('/').map(|j| i + 3 + j))
        .unwrap_or(base.len());
    if url.starts_with('/') {
        return Ok(format!("{}{url}", &base[..origin_end]));
    }
    let path = &base[origin_end..];
    let dir_end = origin_end + path.rfind('/').map_or(0, |i| i + 1);
    let dir = if dir_end > origin_end {
        &base[..dir_end]
    } else {
        &base[..origin_end]
    };
    let sep = if dir.ends_with('/') { "" } else { "/" };
    Ok(format!("{dir}{sep}{url}"))
}

/// What is logged when a guard refuses a move the executor asked for:
/// its rule and the request's guards disagree, so the move is not made and
/// the request stays as stored. Safer than marking it faulted: a fault is
/// a move too (refused from a final stage, which must never reopen), and
/// from switching or confirming the agent that starts next decides from
/// the launcher's state ([`crate::model::agent_update::resume`]); a fault
/// there would begin a new attempt with its own restart.
fn breach(e: TransitionError) -> String {
    format!("invariant breach, the request is left as stored: {e}")
}

/// Runs the landed binary once: it must say it is `version`, for this
/// target.
async fn run_version(path: &Path, version: &AgentVersion) -> Result<String, Failure> {
    let mismatch = |m: String| Failure::Fetch(m, FetchFailure::Mismatch);
    let p = path.to_path_buf();
    let out = crate::host::blocking::run(
        move || -> Result<(std::process::ExitStatus, Vec<u8>), String> {
            let mut child = std::process::Command::new(&p)
                .arg("--version")
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::null())
                .spawn()
                .map_err(|e| format!("{} does not run: {e}", p.display()))?;
            let until = std::time::Instant::now() + VERSION_LIMIT;
            loop {
                match child.try_wait() {
                    Ok(Some(st)) => {
                        let mut out = Vec::new();
                        if let Some(mut o) = child.stdout.take() {
                            let _ = std::io::Read::read_to_end(
                                &mut std::io::Read::take(&mut o, 4096),
                                &mut out,
                            );
                        }
                        return Ok((st, out));
                    }
                    Ok(None) if std::time::Instant::now() < until => {
                        std::thread::sleep(Duration::from_millis(20));
                    }
                    _ => {
                        let _ = child.kill();
                        let _ = child.wait();
                        return Err(format!(
                            "{} --version did not answer within {VERSION_LIMIT:?}",
                            p.display()
                        ));
                    }
                }
            }
        },
    )
    .await
    .map_err(mismatch)?;
    let (status, stdout) = out;
    let said = crate::model::launch::one_line(&String::from_utf8_lossy(&stdout));
    let want = format!("stead {version} ");
    if !status.success() || !said.starts_with(&want) || !said.contains(&format!("target {TARGET}"))
    {
        return Err(mismatch(format!(
            "{} --version says '{}', not stead {version} for {TARGET}",
            path.display(),
            crate::model::text::clip(&said, 200)
        )));
    }
    Ok(format!("landed and checked: {said}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_binarys_url_is_read_against_the_statements() {
        let b = Some("https://h.example:8443/releases/0.7.0/release.json");
        #[rustfmt::skip]
        let cases: &[(Option<&str>, &str, Result<&str, &str>)] = &[
            (b, "stead-x86_64", Ok("https://h.example:8443/releases/0.7.0/stead-x86_64")),
            (b, "/bin/stead", Ok("https://h.example:8443/bin/stead")),
            (b, "http://other/stead", Ok("http://other/stead")),
            (Some("http://h"), "stead", Ok("http://h/stead")),
            (Some("http://h/"), "stead", Ok("http://h/stead")),
            (None, "stead", Err("is relative")),
            (None, "https://x/y", Ok("https://x/y")),
        ];
        for (base, url, want) in cases {
            match (resolve(*base, url), want) {
                (Ok(got), Ok(w)) => assert_eq!(&got, w),
                (Err(e), Err(w)) => assert!(e.contains(w), "{e}"),
                (got, want) => panic!("{base:?} {url}: {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn the_running_version_is_the_first_word_of_the_version_line() {
        assert_eq!(running_version(), env!("CARGO_PKG_VERSION"));
        assert!(crate::VERSION.ends_with(&format!("target {TARGET})")));
    }
}
