//! Polling the plane: one conditional GET of this node's document per
//! cycle ([`Syncer::poll_once`]), judged ([`crate::plane::accept`]) and, when
//! adopted, written with its intentions in one transaction before the pass
//! is woken. The loop ([`run`]) waits for the first pass (the node runs
//! what it holds before it touches the network), then polls every interval
//! with jitter; after a failure it backs off (`min(interval, 15 s × 2^n)`,
//! full jitter, at least what a `Retry-After` asks) and never stops. A
//! nudge (`POST /v1/plane/sync`, `stead sync`) polls at once.
//!
//! The poller does the I/O: what the node holds from the plane is one
//! value ([`crate::plane::held::Held`], moved by its pure transitions),
//! everything it trusts is the trusted set
//! ([`crate::plane::trusted::TrustedSet`], the only verifier, kept in the
//! watch channel that hands it, with what the plane asks, to the
//! updater), and the status ([`PlaneStatus`]) is derived from both.

use crate::model::sort::Insert as _;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use http::{HeaderMap, HeaderValue, Method, StatusCode};
use tokio::sync::{Notify, mpsc, oneshot, watch};

use std::collections::{BTreeMap, BTreeSet};

use crate::model::fleet::{GroupName, Take};
use crate::model::names::NodeId;
use crate::model::time;
use crate::net::http::{Http, Redirects, Transport};
use crate::plane::RefusalClass;
use crate::plane::accept::{ClockStatus, MAX_DOCUMENT, Verdict};
use crate::plane::config::PlaneConfig;
use crate::plane::document::{AgentRelease, Budget, Desired, Poll};
use crate::plane::envelope::{Envelope, PublicKey};
use crate::plane::group::{GROUP_PAYLOAD_TYPE, GroupDesired, GroupStanding, HeldGroup};
use crate::plane::held::{self, GroupLooked, Heard};
use crate::plane::root::{self, Root};
use crate::plane::trusted::{self, TrustedSet};
use crate::store::Store;
use crate::store::plane::{Contact, Held, Refusal, StoredGroup};

/// The allow-list of image digests, beside `root.json`.
pub const ALLOW_LIST: &str = "allow-list.json";
/// The longest a fetch may take.
const FETCH_LIMIT: Duration = Duration::from_secs(30);
/// The first back-off after a failure; it doubles up to the poll interval.
const BACKOFF_BASE: Duration = Duration::from_secs(15);

/// What one poll did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// 304: the document held is still the plane's.
    NotModified,
    /// A new revision was adopted.
    Adopted {
        /// Its revision.
        revision: u64,
    },
    /// The document served is the one held (a new ETag, the same payload).
    Same {
        /// Its revision.
        revision: u64,
    },
    /// The document served was not adopted.
    Refused(Refusal),
    /// No usable answer.
    Failed {
        /// Why.
        error: String,
        /// How long the plane asked to be left alone.
        retry_after: Option<Duration>,
    },
}

impl Outcome {
    /// A word for the API and the log.
    pub fn as_str(&self) -> &'static str {
        match self {
            Outcome::NotModified => "not-modified",
            Outcome::Adopted { .. } => "adopted",
            Outcome::Same { .. } => "same",
            Outcome::Refused(_) => "refused",
            Outcome::Failed { .. } => "failed",
        }
    }
}

/// The plane as the status and the reports tell it: derived from what is
/// held, trusted and asked ([`PlaneStatus::show`]) but for the reports'
/// own fields, which the reporter keeps.
#[derive(Clone, Debug, Default)]
pub struct PlaneStatus {
    /// The document's URL.
    pub url: String,
    /// The document held: revision, times, key (not its bytes).
    pub held: Option<HeldSummary>,
    /// The last contact.
    pub contact: Contact,
    /// The clock, as judged at the last poll.
    pub clock: Option<ClockStatus>,
    /// Modules the held document names that another source owns.
    pub conflicts: Vec<(String, String)>,
    /// When the next poll is due, seconds since the epoch.
    pub next_poll_at: Option<u64>,
    /// Where reports go, and how the last went.
    pub reports: ReportStatus,
    /// The version of stead the held document asks for, and its revision.
    pub agent: Option<(u64, crate::plane::document::AgentRelease)>,
    /// The groups the held document lists, in its order.
    pub groups: Vec<GroupStatus>,
    /// The root of trust held, and how the last look at the plane's went.
    pub root: RootStatus,
    /// How many polls of this process the plane answered with a document
    /// taken (adopted, the same, not modified): counted in memory only,
    /// never stored, so it is this process's own (a candidate's proof).
    pub taken_here: u64,
    /// The nudge's subscription, when one is configured.
    pub nudge: Option<crate::views::NudgeView>,
}

/// The root of trust a node holds ([`crate::plane::root`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RootStatus {
    /// The root held: the config's keys (version 0) until one is taken
    /// from the plane.
    pub held: Option<Root>,
    /// Why the plane's newer root was not taken, or that the one held has
    /// expired, while so (documents are judged by the root held).
    pub error: Option<String>,
    /// The allow-list held (its version, expiry and count of images),
    /// when the root asks for one and one is.
    pub allow_list: Option<(u64, u64, usize)>,
}

impl RootStatus {
    /// Its view, times written by `time`: none while the config's keys
    /// are the root and nothing is wrong.
    pub fn view<T>(&self, time: impl Fn(u64) -> T) -> Option<crate::views::RootView<T>> {
        let r = self.held.as_ref()?;
        if r.version == 0 && self.error.is_none() {
            return None;
        }
        let ids = |ks: &[PublicKey]| ks.iter().map(|k| k.id().as_str().to_string()).collect();
        Some(crate::views::RootView {
            document_keys: ids(&r.documents),
            error: self.error.clone(),
            expires: (r.expires != u64::MAX).then(|| time(r.expires)),
            root_keys: ids(&r.root.keys),
            threshold: r.root.threshold,
            version: r.version,
            delegations: r.delegations.iter().map(|d| d.name.clone()).collect(),
            allow_list: r
                .allow_list
                .as_ref()
                .map(|role| crate::views::AllowListView {
                    threshold: role.threshold,
                    version: self.allow_list.map(|l| l.0),
                    expires: self.allow_list.map(|l| time(l.1)),
                    images: self.allow_list.map_or(0, |l| l.2),
                }),
        })
    }
}

impl PlaneStatus {
    /// Shows what the node holds from the plane (`h`; `group_url` says
    /// where a group's document is): the held document's summary, the
    /// last contact, the groups, why the root was not taken. Derived
    /// whole, after every transition.
    pub fn show(&mut self, h: &held::Held, group_url: impl Fn(&GroupName) -> String) {
        self.held = h.node.as_ref().map(|n| summary(n, h.revoked.as_ref()));
        self.contact = h.contact.clone();
        self.root.error = h.root_error.clone();
        self.clock = h.clock;
        self.conflicts.clone_from(&h.conflicts);
        self.next_poll_at = h.next_poll_at;
        self.taken_here = h.taken_here;
        self.groups = h
            .node_groups
            .iter()
            .map(|name| {
                let standing = h.standings.iter().find(|s| &s.group == name);
                GroupStatus {
                    group: name.to_string(),
                    url: group_url(name),
                    revision: h.groups.get(name).map(|(r, _)| r.revision),
                    running: standing.filter(|s| s.out.is_none()).map(|s| s.running),
                    take: standing.and_then(|s| s.take.clone()),
                    error: h.group_errors.get(name).map(|(why, _)| why.clone()),
                    revoked: h.group_revoked.get(name).cloned(),
                    not_for: standing.and_then(|s| s.out.clone()),
                }
            })
            .collect();
    }
}

/// One of the node's groups, as the status and the reports tell it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupStatus {
    /// The group.
    pub group: String,
    /// Where its document is.
    pub url: String,
    /// The revision of its document the node holds.
    pub revision: Option<u64>,
    /// The revision whose modules the node runs: the held one, or the
    /// previous one while its rollout has not reached this node.
    pub running: Option<u64>,
    /// The rollout's decision for this node, when the held revision has a
    /// rollout.
    pub take: Option<Take>,
    /// Why the last look at it brought nothing, while so (what is held
    /// keeps running).
    pub error: Option<String>,
    /// Why the revision held is no longer its floor (no key in force
    /// signed it), while so: what it stated keeps running until a
    /// document a key in force signed replaces it, whatever its revision.
    pub revoked: Option<String>,
    /// Why the group is not for this device (its `when`), while so: it
    /// gives the device no modules.
    pub not_for: Option<String>,
}

impl GroupStatus {
    /// The group as the API (`time` the identity) and the report (RFC
    /// 3339) show it.
    pub fn view<T>(&self, time: impl Fn(u64) -> T) -> crate::views::GroupView<T> {
        crate::views::GroupView {
            error: self.error.clone(),
            group: self.group.clone(),
            not_for: self.not_for.clone(),
            revision: self.revision,
            revoked: self.revoked.clone(),
            rollout: self.take.as_ref().map(|t| match t {
                Take::New(why) => crate::views::RolloutView {
                    taken: true,
                    until: None,
                    why: why.as_str().to_string(),
                },
                Take::Previous { why, until } => crate::views::RolloutView {
                    taken: false,
                    until: until.map(&time),
                    why: why.as_str().to_string(),
                },
            }),
            running: self.running,
        }
    }
}

/// The held document, without its bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeldSummary {
    /// Its revision.
    pub revision: u64,
    /// When the plane issued it.
    pub issued_at: u64,
    /// When it expires (an expired document keeps running what it says).
    pub expires: u64,
    /// When this node adopted it.
    pub accepted_at: u64,
    /// The key that signed it.
    pub key_id: String,
    /// Why it no longer stands as the revision floor (no key trusted now
    /// signed it), when so: what it stated keeps running until a document
    /// signed by a trusted key replaces it, whatever that one's revision.
    pub revoked: Option<String>,
}

impl From<&Held> for HeldSummary {
    fn from(h: &Held) -> Self {
        HeldSummary {
            revision: h.revision,
            issued_at: h.issued_at,
            expires: h.expires,
            accepted_at: h.accepted_at,
            key_id: h.key_id.clone(),
            revoked: None,
        }
    }
}

/// How reporting goes.
#[derive(Clone, Debug, Default)]
pub struct ReportStatus {
    /// Where reports are PUT.
    pub url: String,
    /// When the last report was delivered, seconds since the epoch.
    pub last_sent_at: Option<u64>,
    /// Its sequence number.
    pub last_seq: Option<u64>,
    /// A report waits to be delivered (the last attempt failed).
    pub pending: bool,
    /// Why the last attempt failed, while reports fail.
    pub error: Option<String>,
}

/// What the plane asks of the updater, as the poller last said it: the
/// trusted set in force (the one holder of the node's trust, handed over
/// whole) and the version of stead the held document asks for, with its
/// revision. Sent on a watch channel whenever either changes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlaneAsk {
    /// What the node trusts now.
    pub trusted: TrustedSet,
    /// The version of stead the held document asks for (while it stands
    /// as the floor), and its revision.
    pub agent: Option<(u64, AgentRelease)>,
}

/// The monotonic clock, for what [`held::Held`] counts.
fn mono() -> std::time::Instant {
    tokio::time::Instant::now().into_std()
}

/// A request to poll now, answered with what the poll did.
pub type Nudge = oneshot::Sender<Outcome>;

/// What the poller shares with the agent.
pub struct Syncer {
    node: NodeId,
    config: PlaneConfig,
    url: String,
    http: Http,
    store: Arc<Store>,
    /// Wakes the agent for a pass (a document was adopted).
    wake: Arc<Notify>,
    /// Wakes the reporter (the plane's state changed).
    report_wake: Arc<Notify>,
    /// The plane's state, for the API and the reports.
    pub status: Arc<Mutex<PlaneStatus>>,
    /// What the node holds from the plane, as one value: read from the
    /// store once at start (a poll reads no store), then moved by its
    /// transitions.
    held: Mutex<held::Held>,
    /// The counters.
    pub metrics: Arc<crate::status::metrics::Metrics>,
    /// What the node trusts and what the plane asks of the updater: the
    /// one place both are kept, and how the updater hears of them.
    asks: watch::Sender<PlaneAsk>,
    /// Where the image policy the held documents compose is said (the
    /// pass and the reloads listen).
    images: Option<watch::Sender<crate::model::image_policy::Known>>,
    /// The maintenance windows in force, for the pass (`None`: not read).
    maintenance: Option<watch::Sender<crate::model::maintenance::InForce>>,
    /// The device's config's image rules, one more document in the
    /// policy the held documents compose.
    local_images: crate::model::image_policy::Rules,
    /// The allow-list's last look: the ETag of the list held (asked
    /// conditionally) and why the plane's was not taken, while so.
    allow_list: Mutex<AllowListLook>,
    /// Where the images to fetch ahead of a coming rollout turn are said
    /// (the pass listens).
    ahead: Option<watch::Sender<BTreeSet<String>>>,
    /// The site's peers, told which the group documents name.
    peers: Option<crate::registry::peers::Peers>,
    /// What the device is, said after each pass: the groups' `when` is
    /// judged by it (none: every group is for this device).
    facts: Option<watch::Receiver<crate::model::facts::Facts>>,
    /// The `when` of each group composed last, to judge again when the
    /// facts move.
    whens: Mutex<Vec<(GroupName, crate::model::facts::When)>>,
}

/// The allow-list's last look ([`Syncer::follow_allow_list`]).
#[derive(Default)]
struct AllowListLook {
    etag: Option<String>,
    error: Option<String>,
}

impl Syncer {
    /// A poller for this node's document; the error names a CA file that
    /// cannot be used. From here on, `asks` says the config's keys as the
    /// root (version 0) and every root the poller takes after; the keys
    /// the set it held trusted for release statements only stay so.
    pub fn new(
        node: NodeId,
        config: PlaneConfig,
        store: Arc<Store>,
        wake: Arc<Notify>,
        report_wake: Arc<Notify>,
        metrics: Arc<crate::status::metrics::Metrics>,
        asks: watch::Sender<PlaneAsk>,
    ) -> Result<Syncer, String> {
        let http = config.http()?.with_redirects(Redirects::SameOrigin);
        let url = config.document_url(&node);
        asks.send_modify(|a| {
            a.trusted = TrustedSet::new(&config.trusted_keys)
                .with_release_keys(a.trusted.release_keys().to_vec());
        });
        let status = PlaneStatus {
            root: RootStatus {
                held: Some(Root::initial(&config.trusted_keys)),
                error: None,
                allow_list: None,
            },
            url: url.clone(),
            reports: ReportStatus {
                url: config.default_report_url(&node),
                ..Default::default()
            },
            ..Default::default()
        };
        Ok(Syncer {
            node,
            config,
            url,
            http,
            store,
            wake,
            report_wake,
            status: Arc::new(Mutex::new(status)),
            held: Mutex::new(held::Held::default()),
            metrics,
            asks,
            images: None,
            maintenance: None,
            local_images: Default::default(),
            allow_list: Mutex::new(AllowListLook::default()),
            ahead: None,
            peers: None,
            facts: None,
            whens: Mutex::new(Vec::new()),
        })
    }

    /// Says the image policy the held documents compose on `images`, with
    /// the device's config's rules (`local`) as one more document.
    pub fn with_image_policy(
        mut self,
        images: watch::Sender<crate::model::image_policy::Known>,
        local: crate::model::image_policy::Rules,
    ) -> Syncer {
        self.images = Some(images);
        self.local_images = local;
        self
    }

    /// Judges the groups' `when` by the device's facts as `facts` says
    /// them.
    pub fn with_facts(mut self, facts: watch::Receiver<crate::model::facts::Facts>) -> Syncer {
        self.facts = Some(facts);
        self
    }

    /// The device's facts moved: its groups are composed again when a
    /// group's `when` now judges otherwise than at the last composition.
    pub async fn facts_moved(&self) {
        use crate::model::facts::Member;
        let Some(facts) = self.facts.as_ref().map(|f| f.borrow().clone()) else {
            return;
        };
        let moved = {
            let whens = self.whens.lock().unwrap_or_else(PoisonError::into_inner);
            let h = self.mem();
            whens
                .iter()
                .find(|(g, w)| {
                    let was_in = h.standings.iter().any(|s| &s.group == g && s.out.is_none());
                    (w.judge(&facts, was_in) == Member::In) != was_in
                })
                .map(|(g, _)| g.clone())
        };
        let held = self.mem().node.clone();
        if let (Some(group), Some(h)) = (moved, held) {
            tracing::info!(
                group = group.as_str(),
                "plane: the device's facts moved, and group {group} judges it otherwise; its groups are composed again"
            );
            self.take_again(&h).await;
        }
    }

    /// Says the images to fetch ahead of a coming rollout turn on `ahead`.
    pub fn with_ahead(mut self, ahead: watch::Sender<BTreeSet<String>>) -> Syncer {
        self.ahead = Some(ahead);
        self
    }

    /// Says the maintenance windows in force on `windows`.
    pub fn with_maintenance(
        mut self,
        windows: watch::Sender<crate::model::maintenance::InForce>,
    ) -> Syncer {
        self.maintenance = Some(windows);
        self
    }

    /// Tells `peers` which peers the group documents name.
    pub fn with_peers(mut self, peers: Option<crate::registry::peers::Peers>) -> Syncer {
        self.peers = peers;
        self
    }

    /// The site's peers the group documents name, from now on.
    fn name_peers(&self, named: &[String]) {
        if let Some(p) = &self.peers {
            p.named(named);
        }
    }

    /// The images to fetch ahead from now on; the pass is woken when
    /// they changed.
    fn fetch_ahead(&self, images: BTreeSet<String>) {
        let Some(tx) = &self.ahead else { return };
        if tx.send_if_modified(|a| {
            let changed = *a != images;
            *a = images;
            changed
        }) {
            self.wake.notify_one();
        }
    }

    /// The maintenance windows in force from now on; the pass is woken
    /// when they changed.
    fn keep_windows(&self, sets: crate::model::maintenance::Disruption) {
        let Some(tx) = &self.maintenance else { return };
        let new = Some(Arc::new(sets));
        if tx.send_if_modified(|w| {
            let changed = *w != new;
            *w = new;
            changed
        }) {
            self.wake.notify_one();
        }
    }

    /// The image policy in force from now on (the documents' rules, the
    /// config's, and the allow-list held); the pass is woken when it
    /// changed.
    fn police(&self, policy: crate::model::image_policy::Policy) {
        use crate::model::image_policy::Known;
        let Some(tx) = &self.images else { return };
        let mut policy = policy.with_config(&self.local_images);
        policy.allowed = self
            .asks
            .borrow()
            .trusted
            .allow_list()
            .map(crate::plane::allowlist::AllowList::allowed);
        let changed = tx.send_if_modified(|k| {
            let new = Known::Is(Arc::new(policy));
            let changed = *k != new;
            *k = new;
            changed
        });
        if changed {
            self.wake.notify_one();
        }
    }

    /// The policy in force again with the allow-list held now (taken,
    /// replaced or dropped with the root); nothing while the documents
    /// are still being read.
    fn police_allow_list(&self) {
        use crate::model::image_policy::Known;
        let Some(tx) = &self.images else { return };
        let held = tx.borrow().clone();
        if let Known::Is(p) = held {
            let mut p = (*p).clone();
            p.documents
                .remove(crate::model::image_policy::CONFIG_DOCUMENT);
            self.police(p);
        }
    }

    /// The HTTP client (the reporter shares it).
    pub fn http(&self) -> Http {
        self.http.clone()
    }

    /// What the node holds from the plane (a panic elsewhere while it was
    /// held leaves it as it was: every transition is whole).
    /// What a nudge's hint is judged against: the revision of the node's
    /// document held, and of each group it lists (0: not held yet).
    pub fn revisions(&self) -> (Option<u64>, BTreeMap<GroupName, u64>) {
        let h = self.mem();
        let groups = crate::model::sort::map(
            h.node_groups
                .iter()
                .map(|g| (g.clone(), h.groups.get(g).map_or(0, |(r, _)| r.revision))),
        );
        (h.node.as_ref().map(|n| n.revision), groups)
    }

    fn mem(&self) -> MutexGuard<'_, held::Held> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The plane's status, for the API and the reports.
    fn shown(&self) -> MutexGuard<'_, PlaneStatus> {
        self.status.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Shows what is held, what is trusted and what is asked: the status
    /// is derived from them (but for the reports' own fields).
    fn show(&self) {
        let (root, agent, allow_list) = {
            let a = self.asks.borrow();
            let l = a
                .trusted
                .allow_list()
                .map(|l| (l.version, l.expires, l.images.len()));
            (a.trusted.root().clone(), a.agent.clone(), l)
        };
        let m = self.mem();
        let report_url = m
            .followed
            .as_ref()
            .and_then(|(_, r)| r.clone())
            .unwrap_or_else(|| self.config.default_report_url(&self.node));
        let mut st = self.shown();
        st.show(&m, |g| self.config.group_url(g));
        // Why the plane's allow-list was not taken is said with the root's.
        let allow_error = self.look().error.clone();
        if let Some(e) = allow_error {
            st.root.error = Some(match st.root.error.take() {
                None => e,
                Some(r) => format!("{r}; {e}"),
            });
        }
        st.reports.url = report_url;
        st.root.held = Some(root);
        st.root.allow_list = allow_list;
        st.agent = agent;
    }

    /// Shows what the store holds (the document, the last contact, the
    /// groups) before anything is judged or polled: called before the API
    /// answers, so that its first answer after a start names the document
    /// held, not none. [`Syncer::load`] then takes it up whole. The
    /// document held, as read.
    pub async fn show_stored(
        &self,
    ) -> Result<Option<crate::plane::accept::Held>, crate::store::StoreError> {
        let (held, contact) = self.store.blocking(|s| s.plane()).await?;
        let groups = self.store.blocking(|s| s.plane_groups()).await?;
        *self.mem() = held::Held::loaded(held.clone(), contact, groups, mono());
        self.show();
        Ok(held)
    }

    /// Reads what the store holds into the status, judges what stands as
    /// a floor under the keys in force ([`Syncer::judge_floors`]: so after
    /// every change of the config's keys), and takes the held document's
    /// modules again (one another source may have released): one that no
    /// longer stands keeps running, but its poll settings, report URL and
    /// agent are not followed.
    pub async fn load(&self) -> Result<(), crate::store::StoreError> {
        // The root taken last, which the config's keys started.
        if let Some(bytes) = self.store.blocking(|s| s.plane_root()).await? {
            let mut set = self.trusted();
            match set.resume(&bytes) {
                Ok(()) => self.trust(set),
                Err(e) => tracing::error!(
                    "plane: the root kept in the store does not read ({e}); the config's trusted_keys are the root until the plane's is taken again"
                ),
            }
        }
        // The allow-list taken last, read again under the root held.
        if let Some(bytes) = self.store.blocking(|s| s.plane_allow_list()).await? {
            let mut set = self.trusted();
            if set.root().allow_list.is_some() {
                match set.resume_allow_list(&bytes) {
                    Ok(()) => self.trust(set),
                    Err(e) => tracing::warn!(
                        "plane: the allow-list kept in the store is not taken again ({e}); it is fetched at the next poll"
                    ),
                }
            }
        }
        let held = self.show_stored().await?;
        self.judge_floors().await;
        match &held {
            Some(h) => self.take_again(h).await,
            // Nothing held: no document asks anything of an image yet.
            None => {
                self.police(crate::model::image_policy::Policy::default());
                self.keep_windows(Default::default());
            }
        }
        Ok(())
    }

    /// The allow-list's last look.
    fn look(&self) -> MutexGuard<'_, AllowListLook> {
        self.allow_list
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// What the node trusts now (its one holder is `asks`).
    fn trusted(&self) -> TrustedSet {
        self.asks.borrow().trusted.clone()
    }

    /// Trusts `set` from now on: handed to the updater, and its root shown.
    fn trust(&self, set: TrustedSet) {
        let mut list_moved = false;
        self.asks.send_if_modified(|a| {
            let changed = a.trusted != set;
            list_moved = a.trusted.allow_list() != set.allow_list();
            a.trusted = set;
            changed
        });
        if list_moved {
            self.police_allow_list();
        }
        self.show();
    }

    /// Asks the updater for `agent` (the held document's, while it stands)
    /// and shows it.
    fn ask(&self, agent: Option<(u64, AgentRelease)>) {
        self.asks.send_if_modified(|a| {
            let changed = a.agent != agent;
            a.agent.clone_from(&agent);
            changed
        });
        self.show();
    }

    /// The URL of the plane's file `rel`.
    fn plane_url(&self, rel: &str) -> String {
        format!(
            "{}/{rel}",
            self.config.url.to_string().trim_end_matches('/')
        )
    }

    /// One GET of a root file: its body and ETag, `Ok(None)` when it did
    /// not change (304), `Err(None)` when the plane has none: a 404, or a
    /// 403, which is what S3 answers for a missing file to a key that may
    /// not list the bucket (said in the status, and the next error holds
    /// why).
    async fn get_root(
        &self,
        rel: &str,
        etag: Option<&str>,
    ) -> Result<Option<(hyper::body::Bytes, Option<String>)>, Option<String>> {
        let url = self.plane_url(rel);
        let at = crate::net::shown(&url);
        let uri: http::Uri = url.parse().map_err(|e| Some(format!("{at}: {e}")))?;
        let mut headers = HeaderMap::new();
        if let Some(v) = etag.and_then(|e| HeaderValue::from_str(e).ok()) {
            headers.insert(http::header::IF_NONE_MATCH, v);
        }
        let a = self
            .http
            .send(Method::GET, uri, &headers, FETCH_LIMIT, root::MAX_ROOT)
            .await
            .map_err(|t| Some(format!("cannot fetch {at}: {}", describe(&t))))?;
        match a.status {
            StatusCode::OK => {
                let etag = etag_of(&a.headers);
                Ok(Some((a.body, etag)))
            }
            StatusCode::NOT_MODIFIED => Ok(None),
            StatusCode::NOT_FOUND => Err(None),
            StatusCode::FORBIDDEN => {
                self.mem().root_forbidden = Some(format!(
                    "{at}: HTTP 403, taken as no root published (what S3 answers for a missing \
                     file to a key that may not list the bucket); asked again in an hour"
                ));
                Err(None)
            }
            s => Err(Some(format!("{at}: HTTP {s}"))),
        }
    }

    /// Looks at the plane's root (`root.json`, asked conditionally) and,
    /// when it is newer than the one held, walks the chain to it one
    /// version at a time (`roots/<version>.json`), keeping each root taken
    /// in the store before the next is looked at. When one is taken, the
    /// held documents are judged again by its keys. A root that is not
    /// taken stops the walk, is said in the status and the log, and
    /// changes nothing.
    async fn follow_root(&self) {
        let (etag, due) = {
            let m = self.mem();
            (m.root_etag.clone(), m.root_due(mono()))
        };
        if !due {
            return self.root_expiry();
        }
        self.mem().root_forbidden = None;
        let newest = match self.get_root("root.json", etag.as_deref()).await {
            Ok(Some(n)) => n,
            Ok(None) => return self.root_expiry(),
            Err(None) => {
                let mut m = self.mem();
                m.root_error = m.root_not_published(mono());
                drop(m);
                return self.root_expiry();
            }
            // The document's fetch says what is wrong with the plane.
            Err(Some(_)) => return,
        };
        self.mem().root_absent = None;
        let said = root::version_said(&newest.0).unwrap_or(0);
        let from = self.trusted();
        let walked = from
            .walk(
                &newest.0,
                |v| async move {
                    let rel = format!("roots/{v}.json");
                    match self.get_root(&rel, None).await {
                        Ok(Some((b, _))) => Ok(b.to_vec()),
                        Ok(None) | Err(None) => Err(format!(
                            "the plane's root is version {said}, but {} is not there: the chain is walked one version at a time",
                            crate::net::shown(&self.plane_url(&rel))
                        )),
                        Err(Some(e)) => Err(e),
                    }
                },
                |_, b| async move {
                    self.store
                        .blocking(move |s| s.put_plane_root(&b))
                        .await
                        .map_err(|e| e.to_string())
                },
            )
            .await;
        for r in &walked.taken {
            tracing::info!(
                version = r.version,
                "plane: took root version {}: {} document key(s), {} of {} root keys sign the next",
                r.version,
                r.documents.len(),
                r.root.threshold,
                r.root.keys.len()
            );
        }
        let taken = !walked.taken.is_empty();
        if taken {
            self.trust(walked.trusted);
        }
        // A walk cut short is walked on at the next poll: `root.json` is
        // then asked for whole again.
        if walked.complete {
            self.mem().root_etag = newest.1;
        } else if walked.error.is_none() {
            tracing::info!(
                "plane: the plane's root is version {said}; {} root(s) taken this poll, the rest at the next",
                trusted::MAX_ROOTS_PER_POLL
            );
        }
        if let Some(e) = &walked.error {
            tracing::warn!("plane: root not taken: {e}");
        }
        self.mem().root_error = walked.error;
        self.root_expiry();
        if taken {
            self.judge_floors().await;
        }
    }

    /// Looks at the plane's allow-list (`allow-list.json`, asked
    /// conditionally) when the root held asks for one, and takes it when
    /// it is newer than the one held ([`TrustedSet::next_allow_list`]:
    /// signed by a threshold of the root's allow-list role, not older,
    /// not expired), kept in the store before it is trusted. One that is
    /// not taken changes nothing and is said with the root's error.
    async fn follow_allow_list(&self) {
        let set = self.trusted();
        if set.root().allow_list.is_none() {
            let mut l = self.look();
            *l = AllowListLook::default();
            return;
        }
        let etag = match set.allow_list() {
            Some(_) => self.look().etag.clone(),
            None => None,
        };
        let url = self.plane_url(ALLOW_LIST);
        let at = crate::net::shown(&url);
        let got = async {
            let uri: http::Uri = url.parse().map_err(|e| format!("{at}: {e}"))?;
            let mut headers = HeaderMap::new();
            if let Some(v) = etag.as_deref().and_then(|e| HeaderValue::from_str(e).ok()) {
                headers.insert(http::header::IF_NONE_MATCH, v);
            }
            let a = self
                .http
                .send(
                    Method::GET,
                    uri,
                    &headers,
                    FETCH_LIMIT,
                    crate::plane::allowlist::MAX_ALLOW_LIST,
                )
                .await
                .map_err(|t| format!("cannot fetch {at}: {}", describe(&t)))?;
            match a.status {
                StatusCode::OK => {
                    let etag = etag_of(&a.headers);
                    Ok(Some((a.body, etag)))
                }
                StatusCode::NOT_MODIFIED => Ok(None),
                s => Err(format!(
                    "the root (version {}) asks for an allow-list of images, and {at} answers HTTP {s}",
                    set.root().version
                )),
            }
        }
        .await;
        let (bytes, etag) = match got {
            Ok(Some(b)) => b,
            Ok(None) => {
                self.look().error = None;
                return self.show();
            }
            Err(e) => {
                tracing::warn!("plane: allow-list: {e}");
                self.look().error = Some(format!("allow-list: {e}"));
                return self.show();
            }
        };
        let node = self.mem().node.clone();
        let now = self.now(node.as_ref());
        let error = match set.next_allow_list(&bytes, now) {
            Ok(None) => None,
            Ok(Some(next)) => {
                let kept = bytes.to_vec();
                match self
                    .store
                    .blocking(move |s| s.put_plane_allow_list(&kept))
                    .await
                {
                    Ok(()) => {
                        if let Some(l) = next.allow_list() {
                            tracing::info!(
                                version = l.version,
                                "plane: took allow-list version {}: {} image(s), expires {}",
                                l.version,
                                l.images.len(),
                                time::format_rfc3339(l.expires)
                            );
                        }
                        self.trust(next);
                        None
                    }
                    Err(e) => Some(format!("allow-list: cannot keep it: {e}")),
                }
            }
            Err(e) => Some(format!("allow-list not taken: {e}")),
        };
        let mut l = self.look();
        if error.is_none() {
            l.etag = etag;
        }
        if let Some(e) = &error {
            tracing::warn!("plane: {e}");
        }
        l.error = error;
        drop(l);
        self.show();
    }

    /// Says when the root held has expired (documents are still judged by
    /// it: a device is not frozen by a root nobody signed again, and each
    /// document carries its own expiry).
    fn root_expiry(&self) {
        let expired = self.trusted().expiry(crate::host::clock::now());
        {
            let mut m = self.mem();
            m.root_error = trusted::root_error(m.root_error.take(), expired);
        }
        self.show();
    }

    /// The one place that says what the node holds still stands as a
    /// floor under the keys in force: the held document and each group's
    /// (at start, so after every change of the config's keys, and whenever
    /// a root is taken). One no key in force signed keeps running what it
    /// stated, but is no floor: the next document a key in force signed
    /// is judged on its own, whatever its revision and its `issued_at`;
    /// its time is no floor of "now"; and the node's document's poll
    /// settings, report URL and agent are no longer followed.
    async fn judge_floors(&self) {
        let held = self.mem().node.clone();
        let revoked = match &held {
            None => None,
            Some(h) => match self.store.blocking(|s| s.plane_envelope()).await {
                Ok(Some(b)) => self
                    .trusted()
                    .document_stands(&b, crate::plane::envelope::PAYLOAD_TYPE, h)
                    .err(),
                Ok(None) => Some("its bytes are not in the store".to_string()),
                Err(e) => Some(format!("it cannot be read again: {e}")),
            }
            .map(|why| not_the_floor(h.revision, "held document", why)),
        };
        let groups = match self.store.blocking(|s| s.plane_groups()).await {
            Ok(g) => g,
            Err(e) => {
                tracing::error!("plane: cannot read the group documents held: {e}");
                BTreeMap::new()
            }
        };
        let trusted = self.trusted();
        let group_revoked: BTreeMap<GroupName, String> = groups
            .iter()
            .filter_map(|(name, g)| {
                let why = trusted
                    .document_stands(&g.envelope, GROUP_PAYLOAD_TYPE, &g.held)
                    .err()?;
                let what = format!("document of group {name}");
                Some((name.clone(), not_the_floor(g.held.revision, &what, why)))
            })
            .into_map();
        let newly_revoked = self.mem().floors_judged(revoked, group_revoked, mono());
        if newly_revoked {
            // The held document no longer stands: its poll settings, report
            // URL and agent are not followed (the config's are).
            self.ask(None);
        }
        self.show();
    }

    /// The poll interval and jitter in force.
    pub fn poll(&self) -> Poll {
        self.mem()
            .followed
            .as_ref()
            .map(|(p, _)| *p)
            .unwrap_or(Poll {
                interval: self.config.poll_interval,
                jitter: self.config.poll_interval / 10,
            })
    }

    /// Where reports go: the held document's `report`, or the default.
    pub fn report_url(&self) -> String {
        self.mem()
            .followed
            .as_ref()
            .and_then(|(_, r)| r.clone())
            .unwrap_or_else(|| self.config.default_report_url(&self.node))
    }

    /// Takes the held document's modules again and, while it stands as
    /// the floor, remembers its settings.
    async fn take_again(&self, held: &Held) {
        let stands = self.mem().revoked.is_none();
        match self.store.blocking(|s| s.plane_envelope()).await {
            Ok(Some(bytes)) => self.take_again_from(held, &bytes, stands).await,
            Ok(None) => tracing::error!(
                "the held plane document cannot be read again: its bytes are not in the store"
            ),
            Err(e) => tracing::error!("the held plane document cannot be read again: {e}"),
        }
    }

    /// Takes the modules of the held document (its bytes, `envelope`)
    /// again, composed with the group documents held when it lists groups,
    /// and, when `follow`, its poll settings and report URL.
    async fn take_again_from(&self, held: &Held, envelope: &[u8], follow: bool) {
        let desired = Envelope::parse(envelope)
            .map_err(|e| e.to_string())
            .and_then(|e| Desired::parse(&e.payload).map_err(|e| e.to_string()));
        let desired = match desired {
            Ok(d) => d,
            Err(e) => {
                tracing::error!("the held plane document cannot be read again: {e}");
                return;
            }
        };
        let followed = Followed::of(&desired);
        if follow {
            self.remember(&followed);
        }
        self.mem().node_groups = followed.groups.clone();
        let revision = held.revision;
        let c = if desired.groups.is_empty() {
            Composition::alone(desired)
        } else {
            let now = self.now(Some(held).filter(|_| follow));
            match self.compose(desired, envelope, BTreeMap::new(), now).await {
                Ok(c) => c,
                Err(Stop::Refused(r)) => {
                    tracing::error!(
                        "plane: the held documents do not compose again: {}",
                        r.detail
                    );
                    return;
                }
                Err(Stop::Failed(e)) => {
                    tracing::error!("plane: the held documents cannot be composed again: {e}");
                    return;
                }
            }
        };
        if let Err(e) = self.adopt_again(c, revision).await {
            tracing::error!("plane: cannot take the held document again: {e}");
        }
    }

    /// Follows the held document's poll settings, report URL and agent.
    fn remember(&self, d: &Followed) {
        self.mem().followed = Some((d.poll, d.report.clone()));
        self.ask(d.agent.clone().map(|a| (d.revision, a)));
        self.show();
    }

    fn set_conflicts(&self, a: &crate::intake::plane::Adoption) {
        self.mem().conflicts = a
            .conflicts
            .iter()
            .map(|(n, e)| (n.to_string(), e.to_string()))
            .collect();
        self.show();
    }

    /// One poll: a conditional GET, the judgement, and what it leads to.
    pub async fn poll_once(&self) -> Outcome {
        // The root first: a key it revoked signs nothing taken from now;
        // then the allow-list it asks for, which every image must be in.
        self.follow_root().await;
        self.follow_allow_list().await;
        let outcome = self.fetch_and_judge().await;
        // A key not trusted may be one a newly published root trusts: the
        // root is asked for at the next poll, even if there was none.
        if matches!(&outcome, Outcome::Refused(r) if r.class == RefusalClass::UnknownKey) {
            self.mem().root_absent = None;
        }
        // The groups of the document held, when the plane answered: an
        // adopted document looked at its groups already.
        if matches!(
            outcome,
            Outcome::NotModified | Outcome::Same { .. } | Outcome::Refused(_)
        ) {
            self.poll_groups().await;
        }
        // The plane away: what the site's peers hold of the groups.
        if matches!(outcome, Outcome::Failed { .. }) {
            self.relay_groups().await;
        }
        // A module the held document names but another source owned may
        // have been let go of since: take it at the next contact.
        if matches!(outcome, Outcome::NotModified | Outcome::Same { .. })
            && !self.mem().conflicts.is_empty()
        {
            let held = self.mem().node.clone();
            if let Some(h) = held {
                self.take_again(&h).await;
            }
        }
        match &outcome {
            Outcome::Adopted { revision } => {
                tracing::info!(revision, "plane: adopted revision {revision}")
            }
            Outcome::Refused(r) => tracing::warn!(
                class = r.class.as_str(),
                "plane: document not adopted: {}",
                r.detail
            ),
            Outcome::Failed { error, .. } => tracing::warn!("plane: {error}"),
            Outcome::NotModified | Outcome::Same { .. } => {}
        }
        self.metrics.plane_poll(outcome.as_str());
        self.keep_floor().await;
        let revision = {
            let mut m = self.mem();
            if matches!(
                outcome,
                Outcome::NotModified | Outcome::Same { .. } | Outcome::Adopted { .. }
            ) {
                m.taken_here += 1;
            }
            m.node.as_ref().map(|h| h.revision)
        };
        self.show();
        if let Some(revision) = revision {
            self.metrics.plane_revision(revision);
        }
        self.report_wake.notify_one();
        outcome
    }

    /// Raises the time floor to the newest `issued_at` of the documents
    /// accepted (the node's and its groups'): in the store when it moves,
    /// and in the floor every TLS client checks certificates at.
    async fn keep_floor(&self) {
        let seen = {
            let m = self.mem();
            m.node
                .iter()
                .map(|h| h.newest_issued_at)
                .chain(m.groups.values().map(|(h, _)| h.newest_issued_at))
                .max()
        };
        if let Some(seen) = seen.filter(|s| *s > crate::host::clock::process_floor().get()) {
            self.store
                .blocking(move |s| crate::plane::clock::raise(s, seen))
                .await;
        }
    }

    async fn fetch_and_judge(&self) -> Outcome {
        // What the judgement stands on: the held document, unless it no
        // longer stands (then nothing is asked conditionally either).
        let (held, last_modified, mut contact) = {
            let m = self.mem();
            (
                m.standing().cloned(),
                m.last_modified.clone(),
                m.contact.clone(),
            )
        };
        let uri: http::Uri = match self.url.parse() {
            Ok(u) => u,
            Err(e) => {
                return Outcome::Failed {
                    error: format!("{}: {e}", crate::net::shown(&self.url)),
                    retry_after: None,
                };
            }
        };
        let headers = conditional(held.as_ref(), &self.url, last_modified.as_deref());
        let answer = self
            .http
            .send(Method::GET, uri, &headers, FETCH_LIMIT, MAX_DOCUMENT)
            .await;
        let now = crate::host::clock::now();
        let answer = match answer {
            Ok(a) => a,
            Err(Transport::TooLarge(_)) => {
                let r = Refusal {
                    class: RefusalClass::TooLarge,
                    detail: format!("the document is over the {MAX_DOCUMENT}-byte limit"),
                    revision: None,
                    at: now,
                };
                contact.hear(Heard::TooLarge {
                    at: now,
                    refusal: r.clone(),
                });
                self.record(None, &contact).await;
                return Outcome::Refused(r);
            }
            Err(t) => {
                let error = format!(
                    "cannot fetch {}: {}",
                    crate::net::shown(&self.url),
                    describe(&t)
                );
                contact.hear(Heard::Failed(error.clone()));
                self.record(None, &contact).await;
                return Outcome::Failed {
                    error,
                    retry_after: None,
                };
            }
        };
        let date = answer
            .headers
            .get(http::header::DATE)
            .and_then(|d| d.to_str().ok())
            .and_then(time::parse_http_date);
        // A `Date` read over TLS that verified (an answer over https is
        // one) may step the clock forward (`[clock] step`), at most a day
        // past signed time; the contact keeps the clock as it reads after.
        let now = match date {
            Some(d) if self.url.starts_with("https://") => {
                let to =
                    crate::model::clock::date_target(d, crate::host::clock::process_floor().get());
                crate::plane::clock::step_forward(
                    now,
                    to,
                    "the plane host's Date over verified TLS",
                )
                .unwrap_or(now)
            }
            _ => now,
        };
        contact.hear(Heard::Answered { at: now, date });
        let header = |name| {
            answer
                .headers
                .get(name)
                .and_then(|e: &HeaderValue| e.to_str().ok())
                .map(str::to_string)
        };
        let etag = header(http::header::ETAG);
        let last_modified = header(http::header::LAST_MODIFIED);
        match answer.status {
            StatusCode::NOT_MODIFIED if held.is_some() => {
                contact.hear(Heard::Fine);
                self.record(None, &contact).await;
                Outcome::NotModified
            }
            StatusCode::OK => {
                contact.hear(Heard::Fine);
                self.guarded(held, contact, answer.body, (etag, last_modified), now)
                    .await
            }
            s => {
                let retry_after = if matches!(
                    s,
                    StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE
                ) {
                    answer
                        .headers
                        .get(http::header::RETRY_AFTER)
                        .and_then(|v| v.to_str().ok())
                        .and_then(time::parse_retry_after)
                        .map(|r| r.wait(now))
                } else {
                    None
                };
                let at = crate::net::shown(&self.url);
                let error = if s == StatusCode::NOT_FOUND {
                    format!("no document for this node at {at} (HTTP 404)")
                } else if s.is_redirection() {
                    format!(
                        "{at}: HTTP {s}, a redirect to another scheme, host or port, not followed \
                         (the document is fetched only from the plane's own origin)"
                    )
                } else {
                    format!("{at}: HTTP {s}")
                };
                contact.hear(Heard::Failed(error.clone()));
                self.record(None, &contact).await;
                Outcome::Failed { error, retry_after }
            }
        }
    }

    /// Judges a document under the crash guard: its digest is stored
    /// before it is judged and cleared after it was (and adopted: the
    /// fetches of its groups and their composition are under it too), and
    /// one the agent died on a few times in a row is not judged again.
    async fn guarded(
        &self,
        held: Option<Held>,
        mut contact: Contact,
        body: hyper::body::Bytes,
        validators: (Option<String>, Option<String>),
        now: u64,
    ) -> Outcome {
        let digest = crate::model::names::Digest::of(&body);
        let before = match self
            .guard_begin(&digest, "judging this document", now)
            .await
        {
            Ok(before) => before,
            Err(r) => {
                contact.hear(Heard::Refused(r.clone()));
                self.record(None, &contact).await;
                return Outcome::Refused(r);
            }
        };
        let outcome = self.judged(held, contact, body, validators, now).await;
        self.guard_end(before).await;
        outcome
    }

    /// The crash guard around a risky step on a document (judging it, or
    /// composing documents, by the digest `key`): the key is stored before
    /// the step ([`Syncer::guard_end`] puts back what was noted before,
    /// returned here), so a death in it, even an out-of-memory kill, is
    /// counted at the next start; one the agent died on a few times in a
    /// row is refused (`doing` says what it died doing), not tried again.
    async fn guard_begin(
        &self,
        key: &crate::model::names::Digest,
        doing: &str,
        now: u64,
    ) -> Result<Option<(crate::model::names::Digest, String)>, Refusal> {
        let (d, boot) = (key.clone(), crate::host::boot_id());
        let begun = self
            .store
            .blocking(move |s| {
                s.change_guard(|g| {
                    if g.quarantine.holds_document(&d) {
                        Err(())
                    } else {
                        Ok(g.judging.replace((d, boot)))
                    }
                })
            })
            .await;
        match begun {
            Ok(Ok(before)) => Ok(before),
            Ok(Err(())) => Err(Refusal {
                class: RefusalClass::Quarantined,
                detail: format!(
                    "the agent died {} times in a row {doing} ({}); it is not tried again: publish another",
                    crate::model::guard::CRASHES,
                    key.short()
                ),
                revision: None,
                at: now,
            }),
            Err(e) => {
                tracing::warn!("crash guard: {e}");
                Ok(None)
            }
        }
    }

    /// Ends [`Syncer::guard_begin`]: the step is done; what was noted
    /// before it (an enclosing step's) is noted again.
    async fn guard_end(&self, before: Option<(crate::model::names::Digest, String)>) {
        if let Err(e) = self
            .store
            .blocking(|s| s.change_guard(|g| g.judging = before))
            .await
        {
            tracing::warn!("crash guard: {e}");
        }
    }

    async fn judged(
        &self,
        held: Option<Held>,
        mut contact: Contact,
        body: hyper::body::Bytes,
        (etag, last_modified): (Option<String>, Option<String>),
        now: u64,
    ) -> Outcome {
        let clock = self.mem().clock(crate::plane::read_clock(), mono());
        let verdict = self
            .trusted()
            .verify_document(&body, &self.node, held.as_ref(), clock);
        self.mem().clock = Some(ClockStatus::of(clock, held.as_ref(), contact.plane_date));
        match verdict {
            Verdict::Same => {
                // `judge` says Same only of a document held.
                let Some(mut h) = held else {
                    return Outcome::Failed {
                        error: "the same document, with none held".into(),
                        retry_after: None,
                    };
                };
                contact.hear(Heard::Stands);
                // Served from another URL (the config's changed): the
                // validators are this URL's from now on.
                let new_validators = h.etag != etag || h.url != self.url;
                h.etag = etag;
                h.url.clone_from(&self.url);
                self.mem().last_modified = last_modified;
                self.record(new_validators.then_some(&h), &contact).await;
                Outcome::Same {
                    revision: h.revision,
                }
            }
            Verdict::Refused(r) => {
                let r = Refusal {
                    class: r.class,
                    detail: r.detail,
                    revision: r.revision,
                    at: now,
                };
                contact.hear(Heard::Refused(r.clone()));
                self.record(None, &contact).await;
                Outcome::Refused(r)
            }
            Verdict::Adopt(a) => {
                let new = a.record(&self.url, etag, now);
                let d = a.desired;
                contact.hear(Heard::Stands);
                crate::host::crash_point("plane:after-verify");
                let revision = d.revision;
                let followed = Followed::of(&d);
                let c = if d.groups.is_empty() {
                    // Moved, not copied: the parsed modules and the fetched
                    // bytes are the only copies of the document in memory.
                    Composition::alone(d)
                } else {
                    let mut budget = Budget::default();
                    // It fits: one document's limits are within the total's.
                    let _ = budget.take("the node document", body.len(), d.modules.len());
                    let fresh = self.fetch_groups(&d.groups, budget).await;
                    match self.compose(d, &body, fresh, self.now(Some(&new))).await {
                        Ok(c) => c,
                        Err(Stop::Refused(r)) => {
                            contact.hear(Heard::Refused(r.clone()));
                            self.record(None, &contact).await;
                            return Outcome::Refused(r);
                        }
                        Err(Stop::Failed(error)) => {
                            let error = format!("revision {revision} not adopted: {error}");
                            contact.hear(Heard::Failed(error.clone()));
                            self.record(None, &contact).await;
                            return Outcome::Failed {
                                error,
                                retry_after: None,
                            };
                        }
                    }
                };
                let Composition {
                    modules,
                    writes,
                    standings,
                    images,
                    ahead,
                    peers,
                    maintenance,
                } = c;
                let (h2, c2, bytes) = (new.clone(), contact.clone(), body);
                let adopted = self
                    .store
                    .blocking(move |s| {
                        crate::intake::plane::adopt(
                            s,
                            Some((&h2, &bytes)),
                            Some(&c2),
                            &writes,
                            &modules,
                            revision,
                        )
                        .map(|a| (a, writes))
                    })
                    .await;
                match adopted {
                    Ok((adoption, writes)) => {
                        crate::host::crash_point("plane:after-adopt");
                        self.police(images);
                        self.keep_windows(maintenance);
                        self.fetch_ahead(ahead);
                        self.name_peers(&peers);
                        self.composed(writes, standings);
                        self.mem().adopted(
                            new,
                            contact,
                            last_modified,
                            (followed.poll, followed.report.clone()),
                            followed.groups.clone(),
                            crate::plane::read_clock(),
                            mono(),
                        );
                        self.ask(followed.agent.map(|a| (followed.revision, a)));
                        self.set_conflicts(&adoption);
                        self.show();
                        self.wake.notify_one();
                        Outcome::Adopted { revision }
                    }
                    Err(e) => Outcome::Failed {
                        error: format!("cannot store revision {revision}: {e}"),
                        retry_after: None,
                    },
                }
            }
        }
    }

    /// Keeps the contact (and the held document's record when
    /// `write_held`), and shows both. The store is written when the held
    /// record changed, when the contact says something new, or hourly.
    async fn record(&self, write_held: Option<&Held>, contact: &Contact) {
        let at = mono();
        let write = self.mem().contacted(write_held, contact, at);
        if let Some(w) = write {
            let held::ContactWrite { held, contact } = w;
            let c = contact.clone();
            match self
                .store
                .blocking(move |s| s.plane_contact(held.as_ref(), &c))
                .await
            {
                Ok(()) => self.mem().kept(contact, at),
                Err(e) => tracing::error!("plane: cannot record the contact: {e}"),
            }
        }
        self.show();
    }
}

/// What the poller follows of the held document besides its modules.
struct Followed {
    revision: u64,
    poll: Poll,
    report: Option<String>,
    agent: Option<AgentRelease>,
    groups: Vec<GroupName>,
}

impl Followed {
    fn of(d: &Desired) -> Followed {
        Followed {
            revision: d.revision,
            poll: d.poll,
            report: d.report.clone(),
            agent: d.agent.clone(),
            groups: d.groups.clone(),
        }
    }
}

/// What a node adopts: its modules, the group documents to write with
/// them (new revisions, and revisions newly taken), and how each of its
/// groups stands.
struct Composition {
    modules: BTreeMap<crate::model::names::ModuleName, crate::model::intention::Intention>,
    writes: Vec<(GroupName, StoredGroup)>,
    standings: Vec<GroupStanding>,
    images: crate::model::image_policy::Policy,
    /// Images to fetch ahead of a coming rollout turn.
    ahead: BTreeSet<String>,
    /// The site's peers the groups name.
    peers: Vec<String>,
    /// The maintenance windows and update locks' policies in force, with
    /// who set each.
    maintenance: crate::model::maintenance::Disruption,
}

impl Composition {
    /// A node document without groups: its own modules and image policy.
    fn alone(d: Desired) -> Composition {
        Composition {
            modules: d.modules,
            writes: Vec::new(),
            standings: Vec::new(),
            images: crate::model::image_policy::Policy::of_node(d.images),
            ahead: BTreeSet::new(),
            peers: Vec::new(),
            maintenance: crate::model::maintenance::Disruption {
                windows: d
                    .maintenance
                    .map(|w| ("node".to_string(), w))
                    .into_iter()
                    .collect(),
                locks: d
                    .locks
                    .map(|p| ("node".to_string(), p))
                    .into_iter()
                    .collect(),
                actions: d
                    .actions
                    .into_iter()
                    .map(|a| ("node".to_string(), a))
                    .collect(),
                budgets: Vec::new(),
            },
        }
    }
}

/// Why nothing was composed.
enum Stop {
    /// Refused: the documents do not compose, or a group's was refused
    /// and none of it is held.
    Refused(Refusal),
    /// A group's document could not be had, nor is one held.
    Failed(String),
}

/// What one look at a group's document brought.
enum GroupLook {
    /// A new revision, every check passed: its record and bytes, and what
    /// it says.
    New(Box<(StoredGroup, GroupDesired)>),
    /// The held revision stands (304, or the same payload).
    Held,
    /// Nothing usable, and why; what is held (if anything) stands.
    Not(String, Option<Refusal>),
}

impl Syncer {
    /// Now, as the agent can tell (never earlier than its build or any
    /// document it accepted): a rollout's clock.
    /// `node` is the node's document that stands as the floor, if any;
    /// the groups' that stand are added.
    fn now(&self, node: Option<&Held>) -> u64 {
        self.mem().now(node, crate::plane::read_clock(), mono())
    }

    /// Looks at each of `names`' documents once; returns the new revisions
    /// accepted. Why the others brought nothing is kept for the status.
    async fn fetch_groups(
        &self,
        names: &[GroupName],
        mut budget: Budget,
    ) -> BTreeMap<GroupName, (StoredGroup, GroupDesired)> {
        let mut fresh = BTreeMap::new();
        for name in names {
            let look = self.fetch_group(name, &mut budget).await;
            let mut m = self.mem();
            // A group whose held document stays takes its share of the
            // limits a new revision of the next is fetched under (over
            // them, the composition refuses the whole).
            if !matches!(look, GroupLook::New(_))
                && let Some((bytes, modules)) = m.group_sizes.get(name)
            {
                let _ = budget.take("", *bytes, *modules);
            }
            let looked = match look {
                GroupLook::New(b) => {
                    fresh.insert(name.clone(), *b);
                    GroupLooked::Fine
                }
                GroupLook::Held => GroupLooked::Fine,
                GroupLook::Not(why, refusal) => {
                    tracing::warn!("plane: {why}");
                    GroupLooked::Not(why, refusal)
                }
            };
            m.group_looked(name, looked);
        }
        fresh
    }

    /// One conditional GET of a group's document, judged under the crash
    /// guard with every rule a node's document is judged by, against the
    /// group's own floor.
    async fn fetch_group(&self, name: &GroupName, budget: &mut Budget) -> GroupLook {
        self.fetch_group_via(name, budget, None).await
    }

    /// [`Syncer::fetch_group`], from the plane, or `via` a site's peer
    /// (the document it holds, asked whole, with no credential; judged
    /// as the plane's, and held as the plane's URL's).
    async fn fetch_group_via(
        &self,
        name: &GroupName,
        budget: &mut Budget,
        via: Option<(&crate::registry::peers::Peers, &str)>,
    ) -> GroupLook {
        let url = self.config.group_url(name);
        let path = format!("/groups/{name}/desired.json");
        let at = match via {
            Some((_, peer)) => format!("{peer}{path} (a peer)"),
            None => crate::net::shown(&url),
        };
        let (held, revoked, clock) = {
            let m = self.mem();
            let revoked = m.group_revoked.contains_key(name);
            (
                m.groups.get(name).cloned(),
                revoked,
                m.clock(crate::plane::read_clock(), mono()),
            )
        };
        // What the judgement stands on: the document held, unless it no
        // longer stands (then nothing is asked conditionally either); what
        // this node took of it is kept all the same.
        let took = held.as_ref().and_then(|(_, took)| took.clone());
        let held = held.filter(|_| !revoked);
        let uri: http::Uri = match url.parse() {
            Ok(u) => u,
            Err(e) => return GroupLook::Not(format!("group {name}: {at}: {e}"), None),
        };
        // A Last-Modified counts only for the revision it was sent with: a
        // revision fetched but not adopted is fetched whole again.
        let since = held
            .as_ref()
            .and_then(|(h, _)| self.mem().group_since(name, h.revision));
        let headers = conditional(held.as_ref().map(|(h, _)| h), &url, since.as_deref());
        // Never more than the limits the node's document and its groups
        // share leave: the body is not read past them.
        let limit = budget.bytes_left();
        let answer = match via {
            Some((peers, peer)) => peers.get(peer, &path, limit).await,
            None => {
                self.http
                    .send(Method::GET, uri, &headers, FETCH_LIMIT, limit)
                    .await
            }
        };
        // What a peer sent carries no validator of the plane's.
        let relayed = via.is_some();
        let now = crate::host::clock::now();
        let refused = |class, detail: String, revision| {
            let detail = format!("group {name}: {detail}");
            let r = Refusal {
                class,
                detail: detail.clone(),
                revision,
                at: now,
            };
            GroupLook::Not(detail, Some(r))
        };
        let answer = match answer {
            Ok(a) => a,
            Err(Transport::TooLarge(_)) => {
                let detail = if limit < MAX_DOCUMENT {
                    format!(
                        "the document is over the {limit} bytes left of the {} a node's document and its groups' may hold together",
                        crate::plane::document::MAX_TOTAL_BYTES
                    )
                } else {
                    format!("the document is over the {MAX_DOCUMENT}-byte limit")
                };
                return refused(RefusalClass::TooLarge, detail, None);
            }
            Err(t) => {
                return GroupLook::Not(
                    format!("group {name}: cannot fetch {at}: {}", describe(&t)),
                    None,
                );
            }
        };
        match answer.status {
            StatusCode::NOT_MODIFIED if held.is_some() => return GroupLook::Held,
            StatusCode::OK => {}
            StatusCode::NOT_FOUND => {
                return GroupLook::Not(
                    format!("group {name}: no document at {at} (HTTP 404)"),
                    None,
                );
            }
            s => return GroupLook::Not(format!("group {name}: {at}: HTTP {s}"), None),
        }
        let header = |h| {
            answer
                .headers
                .get(h)
                .and_then(|e: &HeaderValue| e.to_str().ok())
                .map(str::to_string)
        };
        let (etag, last_modified) = if relayed {
            (None, None)
        } else {
            (
                header(http::header::ETAG),
                header(http::header::LAST_MODIFIED),
            )
        };
        let digest = crate::model::names::Digest::of(&answer.body);
        let before = match self
            .guard_begin(&digest, "judging this document", now)
            .await
        {
            Ok(before) => before,
            Err(r) => return refused(r.class, r.detail, None),
        };
        let verdict =
            self.trusted()
                .verify_group(&answer.body, name, held.as_ref().map(|(h, _)| h), clock);
        self.guard_end(before).await;
        match verdict {
            Verdict::Same => {
                // The same payload under new validators: asked with them
                // next time.
                if !relayed {
                    self.mem()
                        .group_served_again(name, &url, etag, last_modified);
                }
                GroupLook::Held
            }
            Verdict::Refused(r) => refused(r.class, r.detail, r.revision),
            Verdict::Adopt(a) => {
                let d = a.desired;
                let revision = Some(d.revision);
                if let Err(e) = budget.take(
                    &format!("revision {}", d.revision),
                    answer.body.len(),
                    listed(&d),
                ) {
                    return refused(RefusalClass::TooLarge, e, revision);
                }
                self.mem()
                    .group_fetched(name, Some(d.revision), last_modified);
                let stored = StoredGroup {
                    held: Held {
                        url,
                        revision: d.revision,
                        payload_digest: a.payload_digest,
                        etag,
                        issued_at: d.issued_at,
                        expires: d.expires,
                        newest_issued_at: a.newest_issued_at,
                        accepted_at: now,
                        key_id: a.key_id,
                    },
                    // Moved, not copied, where the body is the only owner.
                    envelope: Vec::from(answer.body),
                    took,
                };
                GroupLook::New(Box::new((stored, d)))
            }
        }
    }

    /// Composes node document `d` (its signed bytes, `envelope`) with its
    /// groups' documents: the new revisions in `fresh`, the rest as held
    /// (read from the store). A group neither fresh nor held stops it, with
    /// why its look failed; documents that pass the limits they share
    /// ([`Budget`]) together are refused whole. Under the crash guard, by
    /// the documents composed: a composition the agent died in a few times
    /// in a row is not tried again until one of them changes.
    async fn compose(
        &self,
        d: Desired,
        envelope: &[u8],
        fresh: BTreeMap<GroupName, (StoredGroup, GroupDesired)>,
        now: u64,
    ) -> Result<Composition, Stop> {
        let revision = d.revision;
        let mut stored = self
            .store
            .blocking(|s| s.plane_groups())
            .await
            .map_err(|e| Stop::Failed(format!("cannot read the group documents held: {e}")))?;
        // Only the groups composed, and of those held, only the ones not
        // fetched anew: the bytes of no other are kept.
        stored.retain(|name, _| d.groups.contains(name) && !fresh.contains_key(name));
        let mut budget = Budget::default();
        let what = format!("node document revision {revision}");
        let too_large = |detail: String| {
            Stop::Refused(Refusal {
                class: RefusalClass::TooLarge,
                detail,
                revision: Some(revision),
                at: crate::host::clock::now(),
            })
        };
        budget
            .take(&what, envelope.len(), d.modules.len())
            .map_err(too_large)?;
        self.mem().node_size = (envelope.len(), d.modules.len());
        let mut composed_of = vec![(
            what.clone(),
            crate::model::names::Digest::of(envelope).to_string(),
        )];
        for name in &d.groups {
            let st = fresh
                .get(name)
                .map(|(st, _)| st)
                .or_else(|| stored.get(name));
            if let Some(st) = st {
                composed_of.push((name.to_string(), st.held.payload_digest.to_string()));
            }
        }
        let key = crate::model::names::Digest::canonical("stead.guard.composition", &composed_of);
        let doing = format!("composing {what} with its groups' documents");
        let before = self
            .guard_begin(&key, &doing, crate::host::clock::now())
            .await
            .map_err(Stop::Refused)?;
        crate::host::crash_point("plane:composing");
        let c = self
            .compose_noted(d, fresh, stored, budget, now)
            .map_err(|e| match e {
                Stop::Refused(r) if r.class == RefusalClass::TooLarge => too_large(r.detail),
                e => e,
            });
        self.guard_end(before).await;
        c
    }

    /// [`Syncer::compose`] under its note: each held group's document read
    /// again, every group's document taken from `budget` (what the node's
    /// left), then composed; each group's parsed document is moved into
    /// the composition, not copied.
    fn compose_noted(
        &self,
        d: Desired,
        mut fresh: BTreeMap<GroupName, (StoredGroup, GroupDesired)>,
        mut stored: BTreeMap<GroupName, StoredGroup>,
        mut budget: Budget,
        now: u64,
    ) -> Result<Composition, Stop> {
        let mut groups = BTreeMap::new();
        let mut fresh_records = BTreeMap::new();
        let mut sizes = BTreeMap::new();
        let mut whens = Vec::new();
        for name in &d.groups {
            let (bytes, desired) = if let Some((st, desired)) = fresh.remove(name) {
                let bytes = st.envelope.len();
                fresh_records.insert(name.clone(), st);
                (bytes, desired)
            } else if let Some(st) = stored.get(name) {
                let desired = Envelope::parse(&st.envelope)
                    .map_err(|e| e.to_string())
                    .and_then(|e| GroupDesired::parse(&e.payload).map_err(|e| e.to_string()))
                    .map_err(|e| {
                        Stop::Failed(format!(
                            "the held document of group {name} cannot be read again: {e}"
                        ))
                    })?;
                (st.envelope.len(), desired)
            } else {
                let error = self.mem().group_errors.get(name).cloned();
                return Err(match error {
                    Some((_, Some(refusal))) => Stop::Refused(refusal),
                    Some((why, None)) => Stop::Failed(why),
                    None => Stop::Failed(format!("group {name}: not fetched")),
                });
            };
            let listed = listed(&desired);
            sizes.insert(name.clone(), (bytes, listed));
            budget
                .take(&format!("group {name}"), bytes, listed)
                .map_err(|e| {
                    Stop::Refused(Refusal {
                        class: RefusalClass::TooLarge,
                        detail: e,
                        revision: None,
                        at: 0,
                    })
                })?;
            let record = fresh_records.get(name).or_else(|| stored.get(name));
            let took = record.is_some_and(|st| {
                st.took == Some(crate::plane::group::modules_digest(&desired.modules))
            });
            // In the group before: it took a revision of it, or the last
            // composition had it in.
            let was_in = record.is_some_and(|st| st.took.is_some())
                || self
                    .mem()
                    .standings
                    .iter()
                    .any(|s| &s.group == name && s.out.is_none());
            if let Some(w) = &desired.when {
                whens.push((name.clone(), w.clone()));
            }
            groups.insert(
                name.clone(),
                HeldGroup {
                    desired,
                    took,
                    was_in,
                },
            );
        }
        self.mem().group_sizes = sizes;
        *self.whens.lock().unwrap_or_else(PoisonError::into_inner) = whens;
        let revision = d.revision;
        let facts = self.facts.as_ref().map(|f| f.borrow().clone());
        let composed =
            crate::plane::group::compose_owned(d, groups, &self.node, now, facts.as_ref())
                .map_err(|e| {
                    Stop::Refused(Refusal {
                        class: RefusalClass::Conflict,
                        detail: e.0,
                        revision: Some(revision),
                        at: crate::host::clock::now(),
                    })
                })?;
        let mut writes = Vec::new();
        for standing in &composed.groups {
            let name = &standing.group;
            if let Some(mut st) = fresh_records.remove(name) {
                st.took = standing.remembered(st.took.as_ref());
                writes.push((name.clone(), st));
            } else if let Some(mut st) = stored.remove(name) {
                let took = standing.remembered(st.took.as_ref());
                if st.took != took {
                    st.took = took;
                    writes.push((name.clone(), st));
                }
            }
        }
        Ok(Composition {
            modules: composed.modules,
            images: composed.images,
            writes,
            standings: composed.groups,
            ahead: composed.ahead,
            peers: composed.peers,
            maintenance: composed.maintenance,
        })
    }

    /// Keeps what a composition wrote and how the groups stand, and shows it.
    fn composed(&self, writes: Vec<(GroupName, StoredGroup)>, standings: Vec<GroupStanding>) {
        self.mem()
            .composed(&writes, standings, crate::plane::read_clock(), mono());
        self.show();
    }

    /// When a group's rollout reaches this node next, while one waits for
    /// its turn.
    pub fn next_turn(&self) -> Option<u64> {
        self.mem().next_turn()
    }

    /// Adopts a composition of the held document (at `revision`) with the
    /// group documents it wrote, in one transaction, and shows it.
    async fn adopt_again(
        &self,
        c: Composition,
        revision: u64,
    ) -> Result<(), crate::store::StoreError> {
        let Composition {
            modules,
            writes,
            standings,
            images,
            ahead,
            peers,
            maintenance,
        } = c;
        let (a, writes) = self
            .store
            .blocking(move |s| {
                crate::intake::plane::adopt(s, None, None, &writes, &modules, revision)
                    .map(|a| (a, writes))
            })
            .await?;
        for standing in &standings {
            if writes.iter().any(|(n, _)| n == &standing.group) {
                tracing::info!(
                    group = standing.group.as_str(),
                    "plane: group {} at revision {}, running revision {}",
                    standing.group,
                    standing.revision,
                    standing.running
                );
            }
        }
        self.police(images);
        self.keep_windows(maintenance);
        self.fetch_ahead(ahead);
        self.name_peers(&peers);
        if a.changed() {
            self.wake.notify_one();
        }
        self.set_conflicts(&a);
        self.composed(writes, standings);
        Ok(())
    }

    /// The groups of the held document, looked at again: a new revision of
    /// one, or a rollout whose turn came for this node, composes the held
    /// document again and adopts what it gives.
    async fn poll_groups(&self) {
        let Some((names, held, budget)) = self.groups_held() else {
            return;
        };
        let fresh = self.fetch_groups(&names, budget).await;
        self.take_groups(&held, fresh).await;
    }

    /// The groups the node document held lists, that document, and the
    /// limits its groups' documents share after it; none without groups.
    fn groups_held(&self) -> Option<(Vec<GroupName>, Held, Budget)> {
        let (names, held, m_node) = {
            let m = self.mem();
            (m.node_groups.clone(), m.standing().cloned(), m.node_size)
        };
        let held = held.filter(|_| !names.is_empty())?;
        let mut budget = Budget::default();
        let _ = budget.take("the node document", m_node.0, m_node.1);
        Some((names, held, budget))
    }

    /// When the plane does not answer: the group documents of the node
    /// document held, from the site's peers (each peer in turn, until one
    /// holds the group's document), each judged as the plane's (a peer
    /// relays, it never decides: a document it forged is refused, an
    /// older one is not taken); a new revision is taken as a poll of the
    /// plane takes it. A site cut off from its plane converges on what one
    /// of its devices fetched.
    async fn relay_groups(&self) {
        let Some(peers) = self.peers.clone().filter(|p| !p.is_empty()) else {
            return;
        };
        let Some((names, held, mut budget)) = self.groups_held() else {
            return;
        };
        let mut fresh = BTreeMap::new();
        for name in &names {
            let mut new = false;
            for (peer, resting) in peers.list() {
                if resting {
                    continue;
                }
                match self
                    .fetch_group_via(name, &mut budget, Some((&peers, &peer)))
                    .await
                {
                    GroupLook::New(b) => {
                        tracing::info!(
                            group = name.as_str(),
                            peer,
                            revision = b.1.revision,
                            "plane: not answering; a peer relayed the group's revision {}",
                            b.1.revision
                        );
                        fresh.insert(name.clone(), *b);
                        new = true;
                        break;
                    }
                    GroupLook::Held => break,
                    GroupLook::Not(why, _) => tracing::info!("plane: not answering; {why}"),
                }
            }
            if !new && let Some((bytes, modules)) = self.mem().group_sizes.get(name) {
                let _ = budget.take("", *bytes, *modules);
            }
        }
        if !fresh.is_empty() {
            self.take_groups(&held, fresh).await;
        }
    }

    /// Takes the groups' new revisions in `fresh` (and a rollout turn
    /// that came) into what the node runs, over the node document held.
    async fn take_groups(
        &self,
        held: &Held,
        fresh: BTreeMap<GroupName, (StoredGroup, GroupDesired)>,
    ) {
        let now = self.now(Some(held));
        let due = self.next_turn().is_some_and(|t| t <= now);
        if fresh.is_empty() && !due {
            self.show();
            return;
        }
        let bytes = match self.store.blocking(|s| s.plane_envelope()).await {
            Ok(Some(b)) => b,
            Ok(None) => {
                tracing::error!("plane: the held document's bytes are not in the store");
                return;
            }
            Err(e) => {
                tracing::error!("plane: cannot read the held document again: {e}");
                return;
            }
        };
        let desired = match Envelope::parse(&bytes)
            .map_err(|e| e.to_string())
            .and_then(|e| Desired::parse(&e.payload).map_err(|e| e.to_string()))
        {
            Ok(d) => d,
            Err(e) => {
                tracing::error!("plane: the held document cannot be read again: {e}");
                return;
            }
        };
        let c = match self.compose(desired, &bytes, fresh, now).await {
            Ok(c) => c,
            Err(Stop::Refused(r)) => {
                tracing::warn!(
                    class = r.class.as_str(),
                    "plane: {}; what runs stays",
                    r.detail
                );
                self.mem().groups_refused(&r);
                self.show();
                return;
            }
            Err(Stop::Failed(e)) => {
                tracing::warn!("plane: {e}");
                self.show();
                return;
            }
        };
        if let Err(e) = self.adopt_again(c, held.revision).await {
            tracing::error!("plane: cannot store the groups' revisions: {e}");
        }
    }
}

/// The modules a group's document lists (its own and its previous
/// revision's), as the limits count them.
fn listed(d: &GroupDesired) -> usize {
    d.modules.len() + d.previous.as_ref().map_or(0, |p| p.modules.len())
}

/// The validators of a conditional GET of `url`, for the document `held`
/// (when it was fetched from there): its ETag, or, from a host without
/// ETags, the `Last-Modified` it was sent with, as sent.
/// The ETag an answer carries, when it is text.
fn etag_of(h: &HeaderMap) -> Option<String> {
    h.get(http::header::ETAG)
        .and_then(|e| e.to_str().ok())
        .map(str::to_string)
}

fn conditional(held: Option<&Held>, url: &str, last_modified: Option<&str>) -> HeaderMap {
    let mut headers = HeaderMap::new();
    let same_url = held.filter(|h| h.url == url);
    if let Some(etag) = same_url
        .and_then(|h| h.etag.as_deref())
        .and_then(|e| HeaderValue::from_str(e).ok())
    {
        headers.insert(http::header::IF_NONE_MATCH, etag);
    } else if let Some(since) = same_url
        .and(last_modified)
        .and_then(|l| HeaderValue::from_str(l).ok())
    {
        headers.insert(http::header::IF_MODIFIED_SINCE, since);
    }
    headers
}

/// Says in the log that the held `what` at `revision` is no longer a
/// floor, and why; returns why.
fn not_the_floor(revision: u64, what: &str, why: String) -> String {
    tracing::warn!(
        revision,
        "plane: the {what} at revision {revision} is no longer the floor: {why}; what it states keeps running until a document signed by a trusted key arrives"
    );
    why
}

/// The held document as the status tells it, with why it no longer stands
/// as the floor, when so.
fn summary(h: &Held, revoked: Option<&String>) -> HeldSummary {
    HeldSummary {
        revoked: revoked.cloned(),
        ..HeldSummary::from(h)
    }
}

fn describe(t: &Transport) -> String {
    match t {
        Transport::Timeout => format!("no answer within {}s", FETCH_LIMIT.as_secs()),
        Transport::Connect(m) => m.clone(),
        Transport::Tls(m) => format!("TLS: {m}"),
        Transport::NotTls(m) => format!("the server does not speak TLS: {m}"),
        Transport::TooLarge(n) => format!("the answer is over {n} bytes"),
        Transport::Redirects(m) => m.clone(),
        Transport::Credentials(m) => format!("the plane's credentials: {m}"),
    }
}

/// The wait after `failures` failures in a row: `min(interval, 15 s ×
/// 2^(failures-1))` with full jitter, at least a second, and at least what
/// the plane asked.
pub fn backoff(
    failures: u32,
    interval: Duration,
    retry_after: Option<Duration>,
    r: u64,
) -> Duration {
    let exp = BACKOFF_BASE.saturating_mul(1u32 << failures.saturating_sub(1).min(20));
    let cap = exp.min(interval).max(Duration::from_secs(1));
    let jittered =
        Duration::from_millis(r % (cap.as_millis() as u64 + 1)).max(Duration::from_secs(1));
    jittered.max(retry_after.unwrap_or_default())
}

/// The wait after a poll that got an answer: the interval plus up to the
/// jitter.
pub fn steady(poll: Poll, r: u64) -> Duration {
    poll.interval + Duration::from_millis(r % (poll.jitter.as_millis() as u64 + 1))
}

/// Polls for as long as the agent runs. Waits first for the first pass
/// (at most `first_pass_limit`), so the node runs what it holds before it
/// touches the network.
pub async fn run(
    syncer: Arc<Syncer>,
    mut nudges: mpsc::Receiver<Nudge>,
    mut passes: watch::Receiver<u64>,
    first_pass_limit: Duration,
) {
    if let Err(e) = syncer.load().await {
        tracing::error!("plane: cannot read what the store holds: {e}");
    }
    let _ = tokio::time::timeout(first_pass_limit, passes.wait_for(|n| *n >= 1)).await;
    let mut failures = 0u32;
    let mut waiting: Vec<Nudge> = Vec::new();
    let mut facts = syncer.facts.clone();
    loop {
        let outcome = syncer.poll_once().await;
        for w in waiting.drain(..) {
            let _ = w.send(outcome.clone());
        }
        let poll = syncer.poll();
        let r = crate::host::random_u64();
        let wait = match &outcome {
            Outcome::Failed { retry_after, .. } => {
                failures = failures.saturating_add(1);
                backoff(failures, poll.interval, *retry_after, r)
            }
            _ => {
                failures = 0;
                steady(poll, r)
            }
        };
        // A group's rollout reaching this node before the next poll: looked
        // at then (a second after, to be past it).
        let wait = match syncer.next_turn() {
            Some(t) => wait.min(Duration::from_secs(
                t.saturating_sub(crate::host::clock::now()).max(1) + 1,
            )),
            None => wait,
        };
        syncer.mem().next_poll_at = Some(crate::host::clock::now() + wait.as_secs());
        syncer.show();
        let until = tokio::time::Instant::now() + wait;
        loop {
            tokio::select! {
                () = tokio::time::sleep_until(until) => break,
                Some(n) = nudges.recv() => {
                    waiting.push(n);
                    // Every nudge that came meanwhile is answered by one poll.
                    while let Ok(n) = nudges.try_recv() {
                        waiting.push(n);
                    }
                    break;
                }
                // The device's facts moved: judged again with no poll.
                Ok(()) = facts_changed(&mut facts) => syncer.facts_moved().await,
            }
        }
    }
}

/// When the device's facts are said again (never, without them).
async fn facts_changed(
    facts: &mut Option<watch::Receiver<crate::model::facts::Facts>>,
) -> Result<(), ()> {
    match facts {
        Some(f) => f.changed().await.map_err(drop),
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_from_15s_up_to_the_interval_with_full_jitter() {
        let interval = Duration::from_secs(900);
        // The largest draw gives the cap itself.
        let cap = |n| backoff(n, interval, None, u64::MAX - u64::MAX % 1_000_000_001);
        let max_draw = |n: u32| {
            let c = BACKOFF_BASE.saturating_mul(1 << (n - 1)).min(interval);
            backoff(n, interval, None, c.as_millis() as u64)
        };
        assert_eq!(max_draw(1), Duration::from_secs(15));
        assert_eq!(max_draw(2), Duration::from_secs(30));
        assert_eq!(max_draw(3), Duration::from_secs(60));
        assert_eq!(max_draw(7), Duration::from_secs(900));
        assert_eq!(max_draw(30), Duration::from_secs(900));
        for n in 1..40 {
            let d = cap(n);
            assert!(d >= Duration::from_secs(1) && d <= interval, "{n}: {d:?}");
        }
        // A draw of 0 waits the floor; Retry-After wins over a shorter draw.
        assert_eq!(backoff(3, interval, None, 0), Duration::from_secs(1));
        assert_eq!(
            backoff(1, interval, Some(Duration::from_secs(120)), 0),
            Duration::from_secs(120)
        );
        // A short interval caps the back-off.
        let short = Duration::from_secs(5);
        assert!(backoff(9, short, None, 4_999) <= short);
    }

    #[test]
    fn the_status_is_derived_from_what_is_held() {
        let record = |revision| Held {
            url: "u".into(),
            revision,
            payload_digest: crate::model::names::Digest::of(b"p"),
            etag: None,
            issued_at: 10,
            expires: 20,
            newest_issued_at: 10,
            accepted_at: 11,
            key_id: "k".into(),
        };
        let (a, b) = (
            GroupName::try_from("a").unwrap(),
            GroupName::try_from("b").unwrap(),
        );
        let contact = Contact {
            at: Some(5),
            error: Some("HTTP 500".into()),
            ..Contact::default()
        };
        let h = held::Held {
            node: Some(record(7)),
            revoked: Some("no key trusted now signed it".into()),
            contact: contact.clone(),
            node_groups: vec![a.clone(), b.clone()],
            groups: BTreeMap::from([(a.clone(), (record(3), None))]),
            group_errors: BTreeMap::from([(b.clone(), ("group b: HTTP 404".into(), None))]),
            group_revoked: BTreeMap::from([(a.clone(), "revoked".into())]),
            root_error: Some("root version 2 is not the next one".into()),
            conflicts: vec![("web".into(), "api".into())],
            next_poll_at: Some(99),
            taken_here: 4,
            ..held::Held::default()
        };
        let mut st = PlaneStatus::default();
        st.show(&h, |g| format!("groups/{g}.json"));
        let held = st.held.clone().unwrap();
        assert_eq!(
            (held.revision, held.revoked.as_deref()),
            (7, h.revoked.as_deref())
        );
        assert_eq!(st.contact, contact);
        assert_eq!(st.root.error, h.root_error);
        assert_eq!((st.next_poll_at, st.taken_here), (Some(99), 4));
        assert_eq!(st.conflicts, h.conflicts);
        // (group, url, revision held, error, revoked), in the document's order
        let groups: Vec<_> = st
            .groups
            .iter()
            .map(|g| {
                (
                    g.group.as_str(),
                    g.url.as_str(),
                    g.revision,
                    g.error.as_deref(),
                    g.revoked.as_deref(),
                )
            })
            .collect();
        #[rustfmt::skip]
        assert_eq!(groups, vec![
            ("a", "groups/a.json", Some(3), None, Some("revoked")),
            ("b", "groups/b.json", None, Some("group b: HTTP 404"), None),
        ]);
        // Nothing held: nothing shown of it, and the rest as it was.
        st.show(&held::Held::default(), |g| g.to_string());
        assert_eq!(
            (st.held.clone(), st.groups.len(), st.taken_here),
            (None, 0, 0)
        );
    }

    #[test]
    fn a_steady_wait_is_the_interval_plus_up_to_the_jitter() {
        let p = Poll {
            interval: Duration::from_secs(60),
            jitter: Duration::from_secs(6),
        };
        assert_eq!(steady(p, 0), Duration::from_secs(60));
        assert_eq!(steady(p, 6_000), Duration::from_secs(66));
        assert!((0..1000).all(|r| steady(p, r * 7919) <= Duration::from_secs(66)));
    }
}
