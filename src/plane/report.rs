//! The node's status, PUT to the plane ([`run`]): the whole status each
//! time (a PUT to one URL is idempotent, and the newest status carries all
//! an older one did), sent when it changed (a filesystem's free space:
//! when it moved by 1 % of its size), at most once per
//! [`MIN_SPACING`], and in any case after boot (jittered) and every
//! [`FULL_EVERY`]. A report that cannot be delivered is kept and retried
//! with backoff, superseded only by a newer one; the count of failed
//! attempts travels in the next report that arrives. Reporting runs beside
//! the passes and never holds one up. Every report is signed by the
//! device's report key ([`crate::views::signed`]): a DSSE envelope of the
//! report's JSON.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method};
use tokio::sync::{Notify, watch};
use tokio::time::Instant;

use crate::model::names::{Digest, ModuleName, NodeId};
use crate::model::reload::{Request, UpdateState};
use crate::model::time::format_rfc3339;
use crate::net::http::{Http, Redirects};
use crate::plane::sync::{PlaneStatus, Syncer};
use crate::status::{Board, NodeStatus};
use crate::store::Store;
use crate::views::{
    EngineView, HeldView, QuarantineView, RefusalView, ReportClock, ReportError, ReportLanded,
    ReportModule, ReportPlane, ReportReload, ReportRequest, ReportView, conflicts,
};

/// The least time between two reports.
pub const MIN_SPACING: Duration = Duration::from_secs(10);
/// A report is sent at least this often, changed or not.
pub const FULL_EVERY: Duration = Duration::from_secs(24 * 3600);
/// The longest wait between attempts to deliver a report.
const RETRY_MAX: Duration = Duration::from_secs(300);
/// The longest a PUT may take.
const PUT_LIMIT: Duration = Duration::from_secs(30);

/// What a report is made of.
pub struct Parts<'a> {
    /// This node.
    pub node: &'a NodeId,
    /// The plane's state.
    pub plane: &'a PlaneStatus,
    /// The node's status.
    pub status: &'a NodeStatus,
    /// Every module's status.
    pub board: &'a Board,
    /// Each module's update state.
    pub updates: &'a BTreeMap<ModuleName, UpdateState>,
    /// Reload requests, newest last.
    pub reloads: &'a [Request],
    /// The agent itself and its updates.
    pub agent: Option<&'a crate::views::agent::AgentView>,
    /// The one-shot actions' records.
    pub actions: &'a [crate::model::action::Record],
}

/// A report without the sequence number and the times that move on
/// every poll (they read 0, empty or `null` until [`full`] sets them): the
/// part that says what changed.
pub fn stable(p: &Parts) -> ReportView {
    let held = p.plane.held.as_ref().map(|h| HeldView {
        accepted_at: format_rfc3339(h.accepted_at),
        expired: None,
        expires: format_rfc3339(h.expires),
        floor: h.revoked.is_none(),
        issued_at: format_rfc3339(h.issued_at),
        key_id: h.key_id.clone(),
        revision: h.revision,
        revoked: h.revoked.clone(),
    });
    let refusal = p.plane.contact.refusal.as_ref().map(|r| RefusalView {
        at: format_rfc3339(r.at),
        class: r.class,
        detail: r.detail.clone(),
        revision: r.revision,
    });
    let mut modules = BTreeMap::new();
    for (name, m) in p.board {
        let key = ModuleName::try_from(name.as_str()).ok();
        let landed = key
            .as_ref()
            .and_then(|k| p.updates.get(k))
            .and_then(|u| u.landed.as_ref());
        let request = p
            .reloads
            .iter()
            .rev()
            .find(|r| r.items.iter().any(|i| i.module == *name));
        let reload = (landed.is_some() || request.is_some()).then(|| ReportReload {
            landed: landed.map(|l| ReportLanded {
                digest: l.digest.clone(),
                version: l.version.clone(),
            }),
            request: request.map(|r| ReportRequest {
                failure: r.failure().map(str::to_string),
                id: r.id,
                status: r.status().as_str().to_string(),
            }),
        });
        let module = ReportModule {
            desired_digest: m.desired_digest.clone(),
            health: m.health.clone(),
            image: m.image.clone(),
            image_digests: m.image_digests.clone(),
            image_id: m.image_id.clone(),
            last_error: m.last_error.as_ref().map(|e| ReportError {
                class: m.state.as_str().to_string(),
                message: e.clone(),
            }),
            reload,
            restart_count: m.restart_count,
            running_digest: m.running_digest.clone(),
            state: m.state.as_str().to_string(),
        };
        modules.insert(name.clone(), module);
    }
    ReportView {
        actions: crate::views::ActionView::latest(p.actions),
        agent: p.agent.cloned(),
        agent_version: crate::VERSION.to_string(),
        clock: ReportClock {
            plane_date: None,
            skew: None,
            status: p.plane.clock.map_or("unknown", |c| c.as_str()).to_string(),
            system: String::new(),
        },
        device_key: p.status.device_key.clone(),
        disk: (!p.status.disk.filesystems.is_empty()).then(|| p.status.disk.clone()),
        engine: EngineView::from(&p.status.engine).as_str().to_string(),
        fetching: (!p.status.fetching.is_empty()).then(|| p.status.fetching.clone()),
        fetched: p.status.fetched.clone(),
        facts: (!p.status.facts.arch.is_empty()).then(|| p.status.facts.clone()),
        modules,
        node: p.node.to_string(),
        passing: p.status.passing(),
        plane: ReportPlane {
            conflicts: conflicts(&p.plane.conflicts),
            error: p.plane.contact.error.clone(),
            groups: p
                .plane
                .groups
                .iter()
                .map(|g| g.view(format_rfc3339))
                .collect(),
            held,
            last_contact: None,
            refusal,
            root: p.plane.root.view(format_rfc3339),
            url: crate::net::shown(&p.plane.url),
        },
        quarantine: QuarantineView::new(&p.status.quarantine),
        report_key: p.status.report_key.clone(),
        sent_at: String::new(),
        seq: 0,
        undelivered: 0,
    }
}

/// A whole report: the stable part with the sequence number and times.
pub fn full(
    mut report: ReportView,
    seq: u64,
    now: u64,
    p: &PlaneStatus,
    undelivered: u32,
) -> ReportView {
    report.seq = seq;
    report.sent_at = format_rfc3339(now);
    report.undelivered = undelivered;
    report.plane.last_contact = p.contact.at.map(format_rfc3339);
    report.clock.system = format_rfc3339(now);
    report.clock.plane_date = p.contact.plane_date.map(format_rfc3339);
    report.clock.skew = p
        .contact
        .at
        .zip(p.contact.plane_date)
        .map(|(at, date)| crate::model::clock::skew(at, date));
    report
}

/// The digest of what counts as a change: the stable part, less each
/// filesystem's free bytes, which move with every line a log takes
/// ([`free_moved`] says when they moved enough to report; its level
/// counts), and less the bytes each fetch has so far, which move with
/// every chunk (an image starting or ending counts, and the images ahead
/// being here).
fn change_digest(s: &mut ReportView) -> Digest {
    fn moving(s: &mut ReportView) -> impl Iterator<Item = &mut u64> {
        let free = s
            .disk
            .iter_mut()
            .flat_map(|d| d.filesystems.iter_mut())
            .map(|f| &mut f.free_bytes);
        let fetched = s
            .fetching
            .iter_mut()
            .flat_map(|f| f.images.values_mut())
            .map(|p| &mut p.bytes);
        // The free disk among the facts moves as the filesystems' does.
        let facts = s.facts.iter_mut().filter_map(|f| f.disk_free.as_mut());
        free.chain(fetched).chain(facts)
    }
    let kept: Vec<u64> = moving(s).map(std::mem::take).collect();
    let digest = Digest::canonical("stead.report", &*s);
    for (f, b) in moving(s).zip(kept) {
        *f = b;
    }
    digest
}

/// Each filesystem's path, size and free bytes, as a report says them.
fn free_space(r: &ReportView) -> Vec<(String, u64, u64)> {
    r.disk
        .iter()
        .flat_map(|d| &d.filesystems)
        .map(|f| (f.path.clone(), f.size_bytes, f.free_bytes))
        .collect()
}

/// Whether a filesystem's free space moved by at least 1 % of its size
/// since the report last delivered said it (`sent`).
fn free_moved(sent: &[(String, u64, u64)], now: &[(String, u64, u64)]) -> bool {
    now.iter().any(|(path, size, free)| {
        let step = (size / 100).max(1);
        sent.iter()
            .find(|(p, ..)| p == path)
            .is_some_and(|(_, _, was)| free.abs_diff(*was) >= step)
    })
}

/// Where the reporter reads what it reports.
#[derive(Clone)]
pub struct Reporter {
    /// This node.
    pub node: NodeId,
    /// The store (update states and reloads).
    pub store: Arc<Store>,
    /// Every module's status.
    pub board: Arc<Mutex<Board>>,
    /// The node's status.
    pub status: Arc<Mutex<NodeStatus>>,
    /// The poller: the plane's state and where reports go.
    pub syncer: Arc<Syncer>,
    /// The HTTP client.
    pub http: Http,
    /// This run's epoch: sequence numbers are `epoch << 32 | n`, so they
    /// grow across restarts.
    pub epoch: u64,
    /// How the launcher started this agent (for the report's `agent`).
    pub launched: Option<crate::host::launch::Launched>,
    /// The device's report key, every report is signed with
    /// ([`crate::views::signed`]).
    pub key: Arc<crate::plane::envelope::SecretKey>,
}

impl Reporter {
    pub(crate) async fn build(&self, seq: u64, undelivered: u32) -> (Digest, ReportView) {
        let launched = self.launched.clone();
        let (updates, reloads, agent, actions) = self
            .store
            .blocking(move |s| {
                let agent = crate::views::agent::of(
                    launched.as_ref(),
                    &s.agent_updates().unwrap_or_default(),
                );
                (
                    s.updates().unwrap_or_default(),
                    s.reloads().unwrap_or_default(),
                    agent,
                    s.actions().unwrap_or_default(),
                )
            })
            .await;
        let plane = self
            .syncer
            .status
            .lock()
            .expect("plane status lock")
            .clone();
        let status = self.status.lock().expect("status lock").clone();
        // Built under the board's lock rather than from a copy of it: a
        // 1000-module board is larger than what is built from it.
        let mut s = {
            let board = self.board.lock().expect("board lock");
            stable(&Parts {
                node: &self.node,
                plane: &plane,
                status: &status,
                board: &board,
                updates: &updates,
                reloads: &reloads,
                agent: Some(&agent),
                actions: &actions,
            })
        };
        let digest = change_digest(&mut s);
        let now = crate::host::clock::now();
        (digest, full(s, seq, now, &plane, undelivered))
    }

    /// PUTs a report; the status of a success.
    async fn put(&self, url: &str, body: Vec<u8>) -> Result<u16, String> {
        let uri: http::Uri = url
            .parse()
            .map_err(|e| format!("{}: {e}", crate::net::shown(url)))?;
        // Errors go to the status and the log: a presigned URL's query is
        // not said.
        let url = &crate::net::shown(url);
        let mut headers = HeaderMap::new();
        headers.insert(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        // The report goes where the document or the config says, nowhere
        // a redirect would send it.
        match self
            .http
            .with_redirects(Redirects::Never)
            .send_body(
                Method::PUT,
                uri,
                &headers,
                Bytes::from(body),
                PUT_LIMIT,
                64 * 1024,
            )
            .await
        {
            Ok(a) if a.status.is_success() => Ok(a.status.as_u16()),
            Ok(a) if a.status.is_redirection() => Err(format!(
                "PUT {url}: HTTP {}, a redirect, not followed (a report is PUT only where it is sent)",
                a.status
            )),
            Ok(a) => Err(format!("PUT {url}: HTTP {}", a.status)),
            Err(t) => Err(format!("PUT {url}: {t}")),
        }
    }
}

impl Reporter {
    /// Reads a report just PUT back from its URL, once per URL and run:
    /// a host may answer a PUT with 200 and store nothing (a file server
    /// that takes no PUT, caddy's). `Err` says why it is not delivered.
    async fn read_back(&self, url: &str, sent: &[u8], put: u16) -> Result<(), String> {
        let Ok(uri) = url.parse::<http::Uri>() else {
            return Ok(());
        };
        let mut headers = HeaderMap::new();
        headers.insert(
            http::header::CACHE_CONTROL,
            HeaderValue::from_static("no-cache"),
        );
        let got = self
            .http
            .with_redirects(Redirects::Never)
            .send(Method::GET, uri, &headers, PUT_LIMIT, 1 << 20)
            .await
            .ok();
        let got = got.as_ref().map(|a| (a.status.as_u16(), &a.body[..]));
        stored(sent, got).map_err(|why| {
            format!(
                "PUT {}: HTTP {put}, {why}: not counted as delivered",
                crate::net::shown(url)
            )
        })
    }
}

/// Whether a report PUT was stored, by what a GET of its URL right after
/// answered (`None`: no answer): `Err` says why not. The same bytes: it
/// was. Another report, or none: it was not. An answer that tells
/// nothing (a key that may only PUT, a presigned URL for PUT alone, a
/// server error) counts the PUT's answer as it stands.
pub fn stored(sent: &[u8], got: Option<(u16, &[u8])>) -> Result<(), String> {
    match got {
        Some((200, body)) if body == sent => Ok(()),
        Some((200, _)) => Err(
            "but a GET of it right after reads something else: the host did not store it \
             (a file server that answers PUT without taking it?)"
                .into(),
        ),
        Some((s @ (404 | 410), _)) => Err(format!(
            "but a GET of it right after answers HTTP {s}: the host did not store it \
             (a file server that answers PUT without taking it?)"
        )),
        _ => Ok(()),
    }
}

/// Reports for as long as the agent runs: woken by passes and by the
/// poller, sending what changed, spaced and retried as the module says.
pub async fn run(r: Reporter, mut passes: watch::Receiver<u64>, wake: Arc<Notify>) {
    let mut n: u64 = 0;
    let mut last_sent: Option<Digest> = None;
    let mut last_attempt: Option<Instant> = None;
    let mut failures: u32 = 0;
    let mut retry_at: Option<Instant> = None;
    // The first report after boot is jittered within the poll's jitter, so
    // a fleet rebooted at once does not report at once.
    let jitter = r.syncer.poll().jitter;
    let mut full_due = Instant::now()
        + Duration::from_millis(crate::host::random_u64() % (jitter.as_millis() as u64 + 1));
    // The free space the report last delivered said.
    let mut sent_free: Vec<(String, u64, u64)> = Vec::new();
    // The URL a report was read back from this run.
    let mut read_back: Option<String> = None;
    loop {
        let now = Instant::now();
        let (digest, probe) = r.build(0, failures).await;
        let changed =
            last_sent.as_ref() != Some(&digest) || free_moved(&sent_free, &free_space(&probe));
        drop(probe);
        // Before the boot report is due, changes wait for it; while a
        // report waits to be delivered, its retry decides.
        let boot_wait = last_sent.is_none() && now < full_due;
        let due = match retry_at {
            Some(t) => now >= t,
            None => changed || now >= full_due,
        };
        let mut wake_at = boot_wait.then_some(full_due);
        if due && !boot_wait {
            let spaced = last_attempt.map_or(now, |t| t + MIN_SPACING);
            if now < spaced {
                wake_at = Some(spaced);
            } else {
                n += 1;
                let seq = (r.epoch << 32) | (n & 0xffff_ffff);
                let (digest, body) = r.build(seq, failures).await;
                let url = r.syncer.report_url();
                last_attempt = Some(Instant::now());
                let free = free_space(&body);
                // Signed: a DSSE envelope of the report's JSON, as it was PUT
                // before 0.7.0.
                let bytes = crate::views::signed::sign(
                    &serde_json::to_vec(&body).expect("a report serialises"),
                    &r.key,
                );
                let put = match r.put(&url, bytes.clone()).await {
                    Ok(s) if read_back.as_deref() != Some(url.as_str()) => {
                        let stored = r.read_back(&url, &bytes, s).await;
                        if stored.is_ok() {
                            read_back = Some(url.clone());
                        }
                        stored
                    }
                    other => other.map(|_| ()),
                };
                drop(bytes);
                match put {
                    Ok(()) => {
                        r.syncer.metrics.plane_report("delivered");
                        last_sent = Some(digest);
                        sent_free = free;
                        failures = 0;
                        retry_at = None;
                        full_due = Instant::now() + FULL_EVERY;
                        let mut st = r.syncer.status.lock().expect("plane status lock");
                        st.reports.last_sent_at = Some(crate::host::clock::now());
                        st.reports.last_seq = Some(seq);
                        st.reports.pending = false;
                        st.reports.error = None;
                    }
                    Err(e) => {
                        r.syncer.metrics.plane_report("failed");
                        failures = failures.saturating_add(1);
                        let exp = MIN_SPACING
                            .saturating_mul(1 << failures.min(10))
                            .min(RETRY_MAX);
                        let wait = exp / 2
                            + Duration::from_millis(
                                crate::host::random_u64() % (exp.as_millis() as u64 / 2 + 1),
                            );
                        retry_at = Some(Instant::now() + wait.max(MIN_SPACING));
                        if failures == 1 {
                            tracing::warn!("plane report: {e}; kept, and sent again later");
                        }
                        let mut st = r.syncer.status.lock().expect("plane status lock");
                        st.reports.pending = true;
                        st.reports.error = Some(e);
                    }
                }
                continue;
            }
        }
        let until = [wake_at, retry_at, Some(full_due)]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(full_due);
        tokio::select! {
            () = tokio::time::sleep_until(until) => {}
            r = passes.changed() => if r.is_err() { return },
            () = wake.notified() => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_put_counts_when_what_is_read_back_is_it_or_tells_nothing() {
        let sent = br#"{"seq":7}"#;
        // (what a GET right after answered, counted as delivered)
        type Got<'a> = Option<(u16, &'a [u8])>;
        #[rustfmt::skip]
        let cases: [(Got, bool); 8] = [
            (Some((200, sent)), true),
            (Some((200, br#"{"seq":6}"#)), false),   // an older report: not stored
            (Some((200, b"")), false),
            (Some((404, b"")), false),               // nothing there
            (Some((410, b"")), false),
            (Some((403, b"")), true),                // a key that may only PUT
            (Some((503, b"")), true),
            (None, true),                            // no answer
        ];
        for (got, want) in cases {
            assert_eq!(stored(sent, got).is_ok(), want, "{got:?}");
        }
    }

    #[test]
    fn free_space_is_a_change_when_it_moved_by_a_percent() {
        let fs = |path: &str, size: u64, free: u64| (path.to_string(), size, free);
        let sent = [
            fs("/var/lib/docker", 1000, 500),
            fs("/var/lib/stead", 1_000_000, 400_000),
        ];
        // (free space now, a change?)
        #[rustfmt::skip]
        let cases = [
            (vec![fs("/var/lib/docker", 1000, 500), fs("/var/lib/stead", 1_000_000, 400_000)], false),
            (vec![fs("/var/lib/docker", 1000, 491), fs("/var/lib/stead", 1_000_000, 409_999)], false),
            (vec![fs("/var/lib/docker", 1000, 490)], true),      // 1 % less
            (vec![fs("/var/lib/docker", 1000, 510)], true),      // 1 % more
            (vec![fs("/var/lib/stead", 1_000_000, 390_000)], true),
            (vec![fs("/mnt/other", 10, 0)], false),              // a new one: the digest says it
            (vec![fs("/var/lib/docker", 0, 1)], true),           // no size: any byte
        ];
        for (now, want) in cases {
            assert_eq!(free_moved(&sent, &now), want, "{now:?}");
        }
        assert!(
            !free_moved(&[], &sent),
            "nothing sent yet: the digest decides"
        );
    }

    use crate::plane::fixtures::planes;
    use crate::views::fixtures::{self, REPORTS, golden, same_text};

    fn node_id() -> NodeId {
        NodeId::try_from("edge-1").unwrap()
    }

    type Reloads = (BTreeMap<ModuleName, UpdateState>, Vec<Request>);

    #[test]
    fn the_change_digest_leaves_free_bytes_out_and_keeps_them() {
        let (board, reloads, node) = (fixtures::board(), fixtures::reloads(), node_id());
        let [n, _] = fixtures::nodes();
        let [p, _] = planes();
        let mut a = stable(&parts(&n, &p, &board, &reloads, &node));
        let mut b = a.clone();
        let disk = |r: &mut ReportView| r.disk.as_mut().expect("the fixture has a disk").clone();
        let mut d = disk(&mut b);
        d.filesystems[0].free_bytes -= 1;
        b.disk = Some(d.clone());
        assert_eq!(change_digest(&mut a), change_digest(&mut b));
        assert_eq!(
            free_space(&a)[0].2 - 1,
            free_space(&b)[0].2,
            "the report still says them"
        );
        d.filesystems[0].level = crate::model::disk::Level::Critical;
        b.disk = Some(d);
        assert_ne!(
            change_digest(&mut a),
            change_digest(&mut b),
            "a level is a change"
        );
    }

    #[test]
    fn a_fetch_s_bytes_are_said_but_not_a_change_its_start_and_the_images_ahead_are() {
        use crate::model::fetch::{Ahead, Fetching, Progress};
        let (board, reloads, node) = (fixtures::board(), fixtures::reloads(), node_id());
        let [mut n, _] = fixtures::nodes();
        let [p, _] = planes();
        let mut none = stable(&parts(&n, &p, &board, &reloads, &node));
        assert_eq!(none.fetching, None, "absent while nothing is fetched");
        let progress = |bytes| Progress {
            bytes,
            of: 96 << 20,
        };
        n.fetching = Fetching {
            images: [("reg/app:2".to_string(), progress(1 << 20))].into(),
            ahead: Some(Ahead { images: 3, here: 1 }),
        };
        let mut a = stable(&parts(&n, &p, &board, &reloads, &node));
        assert_ne!(
            change_digest(&mut none),
            change_digest(&mut a),
            "a fetch starting"
        );
        n.fetching
            .images
            .insert("reg/app:2".into(), progress(41 << 20));
        let mut b = stable(&parts(&n, &p, &board, &reloads, &node));
        assert_eq!(change_digest(&mut a), change_digest(&mut b), "bytes coming");
        let said = serde_json::to_value(&b).unwrap();
        assert_eq!(
            said["fetching"],
            serde_json::json!({"images": {"reg/app:2": {"bytes": 41 << 20, "of": 96 << 20}},
                               "ahead": {"images": 3, "here": 1}})
        );
        n.fetching.ahead = Some(Ahead { images: 3, here: 2 });
        let mut c = stable(&parts(&n, &p, &board, &reloads, &node));
        assert_ne!(
            change_digest(&mut b),
            change_digest(&mut c),
            "an image ahead here"
        );
        // An image brought: what it cost, by source, is a change reported.
        n.fetched = Some(crate::model::fetch::Brought {
            image: "reg/app:2".into(),
            at: 1_700_000_000,
            registry: 0,
            chunks: 213_042,
            local: 51_277_551,
            peers: 0,
            layers: 3,
            present: 2,
            rebuilt: 1,
        });
        let mut d = stable(&parts(&n, &p, &board, &reloads, &node));
        assert_ne!(
            change_digest(&mut c),
            change_digest(&mut d),
            "an image brought"
        );
        let said = serde_json::to_value(&d).unwrap();
        assert_eq!(said["fetched"]["chunks"], 213_042);
        assert_eq!(said["fetched"]["local"], 51_277_551);
    }

    fn parts<'a>(
        n: &'a NodeStatus,
        p: &'a PlaneStatus,
        board: &'a Board,
        reloads: &'a Reloads,
        node: &'a NodeId,
    ) -> Parts<'a> {
        Parts {
            node,
            plane: p,
            status: n,
            board,
            updates: &reloads.0,
            reloads: &reloads.1,
            agent: None,
            actions: &[],
        }
    }

    /// A report's bytes as they are PUT (the view serialised directly).
    fn report(n: &NodeStatus, p: &PlaneStatus) -> String {
        let (board, reloads, node) = (fixtures::board(), fixtures::reloads(), node_id());
        let s = stable(&parts(n, p, &board, &reloads, &node));
        let f = full(s, 77, 1_700_000_999, p, 2);
        let bytes = String::from_utf8(serde_json::to_vec(&f).unwrap()).unwrap();
        // Its fields are in the order a JSON value has them (sorted).
        assert_eq!(bytes, same_text(&f));
        bytes
    }

    /// The report as 0.5.0 PUT it (the texts in [`crate::views::fixtures`]),
    /// with the clock's skew against the plane host's `Date` since (absent
    /// without a `Date`); a report without it (0.6.0's) still reads.
    #[test]
    fn the_wire_format_is_as_it_was() {
        let cases = fixtures::nodes().into_iter().zip(planes());
        for ((n, p), want) in cases.zip(REPORTS) {
            let bytes = report(&n, &p);
            assert_eq!(bytes, golden(want));
            let mut older: serde_json::Value = serde_json::from_str(&bytes).unwrap();
            let skew = older["clock"]
                .as_object_mut()
                .unwrap()
                .remove("skew")
                .and_then(|s| s.as_i64());
            let read: ReportView = serde_json::from_value(older).unwrap();
            assert_eq!(read.clock.skew, None);
            let now: ReportView = serde_json::from_str(&bytes).unwrap();
            assert_eq!(now.clock.skew, skew);
            assert_eq!(
                ReportView {
                    clock: now.clock.clone(),
                    ..read
                },
                now
            );
        }
    }

    #[test]
    fn a_report_changes_with_its_facts_not_with_its_times() {
        let [n, _] = fixtures::nodes();
        let [p, _] = planes();
        let (board, reloads, node) = (fixtures::board(), fixtures::reloads(), node_id());
        let digest = |p: &PlaneStatus, board: &Board| {
            let s = stable(&parts(&n, p, board, &reloads, &node));
            Digest::canonical("stead.report", &s)
        };
        let first = digest(&p, &board);
        let mut later = p.clone();
        later.contact.at = Some(1_800_000_000);
        later.contact.plane_date = Some(1_800_000_001);
        later.next_poll_at = Some(1_800_000_100);
        assert_eq!(digest(&later, &board), first);
        let mut moved = board.clone();
        moved.get_mut("db").unwrap().state = crate::status::ModuleState::Converged;
        assert_ne!(digest(&p, &moved), first);
    }
}
