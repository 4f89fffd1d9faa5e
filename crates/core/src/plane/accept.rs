//! Whether a fetched document is adopted: every check, in its order, as
//! one pure function of the bytes, this node, its trusted keys, what it
//! holds and its clock ([`judge`]). The signature is verified over the
//! envelope before a byte of the payload is parsed; the revision floor and
//! the freshness rule depend on nothing the transport says. A document
//! signed only by a delegation of the root is adopted only within its
//! scope, and when the root asks for an allow-list every image it names
//! must be pinned and listed ([`judge_by`], [`Authority`]).

use serde::Deserialize;

use crate::model::names::{Digest, ModuleName, NodeId};
use crate::model::time::{format_rfc3339, parse_rfc3339};
use crate::plane::RefusalClass;
use crate::plane::allowlist::AllowList;
use crate::plane::document::{Desired, DocumentError};
use crate::plane::envelope::{self, Envelope, PublicKey, VerifyError};
use crate::plane::group::{GROUP_PAYLOAD_TYPE, GroupDesired, GroupName};
use crate::plane::root::{Delegation, Named};

/// The largest document taken, in bytes.
pub const MAX_DOCUMENT: usize = 1 << 20;

/// How far the system clock may be from a time the agent knows has passed
/// before it says the clock is wrong.
pub const CLOCK_TOLERANCE: u64 = 300;

/// The largest revision a document may carry: 2^53, the largest integer
/// every JSON reader keeps exact. A revision is a floor for good, so one
/// near 2^64 would leave no room above it.
pub const MAX_REVISION: u64 = 1 << 53;

/// How far ahead of the node's own clocks (the system clock, its build, the
/// time it counted since it started) a document's `issued_at` may be, and
/// the node's "now" with it, in total: a document further ahead is wrong,
/// and "now" never moves past that bound, however many documents lead it
/// on a step at a time.
pub const MAX_SKEW: u64 = 24 * 3600;

/// The document the node accepted last, as the store keeps it (the
/// floor every later document is judged against).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Held {
    /// Where it was fetched from.
    pub url: String,
    /// Its revision: the floor below which nothing is accepted.
    pub revision: u64,
    /// The digest of its payload: the same revision with another payload is
    /// an equivocation.
    pub payload_digest: Digest,
    /// The ETag it was served with, for the next conditional GET.
    pub etag: Option<String>,
    /// When the plane issued it, seconds since the epoch.
    pub issued_at: u64,
    /// When it expires.
    pub expires: u64,
    /// The newest `issued_at` of every document ever accepted: the agent's
    /// clock is never taken to be earlier than this.
    pub newest_issued_at: u64,
    /// When this node accepted it.
    pub accepted_at: u64,
    /// The key that signed it.
    pub key_id: String,
}

/// The times the agent's "now" is made of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Clock {
    /// The system clock, seconds since the epoch.
    pub system: u64,
    /// When the running binary was built: no "now" is earlier.
    pub build: u64,
    /// The time the node counted to on its own: a floor of "now" it held
    /// (at start, or raised since) plus the seconds its monotonic clock
    /// counted since (0 when none is kept). A device whose system clock is
    /// wrong learns time from documents no faster than this.
    pub counted: u64,
}

impl Clock {
    /// The clock at a system time (nothing counted): the device reads
    /// the system clock (`crate::plane::read_clock`), the core never does.
    pub fn at(system: u64) -> Clock {
        Clock {
            system,
            build: crate::BUILD_TIME,
            counted: 0,
        }
    }

    /// The latest a document's `issued_at` may move "now" to: [`MAX_SKEW`]
    /// past the node's own clocks, or the time it counted, whichever is
    /// later. Never a time learned from a signature plus the skew: so the
    /// bound holds for "now" as a whole, not per document.
    pub fn ceiling(&self) -> u64 {
        self.system
            .max(self.build)
            .saturating_add(MAX_SKEW)
            .max(self.counted)
    }

    /// Now, as far as the agent can tell: never earlier than its build nor
    /// than the newest document it ever accepted (a device that boots with
    /// its clock in 1970 is not in 1970).
    pub fn now(&self, held: Option<&Held>) -> u64 {
        self.system
            .max(self.build)
            .max(held.map_or(0, |h| h.newest_issued_at))
    }
}

/// What the clock looks like, for the status and the reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClockStatus {
    /// Nothing says it is wrong.
    Ok,
    /// Earlier than a time known to have passed (the build, a document's
    /// issue, the plane's own clock), by this many seconds.
    Behind(u64),
    /// Later than the plane's clock by this many seconds.
    Ahead(u64),
}

impl ClockStatus {
    /// Judges the system clock against what is known to have passed and,
    /// when the plane answered with a `Date`, against the plane's clock
    /// (only ever reported, never trusted for a decision: it is not signed).
    pub fn of(clock: Clock, held: Option<&Held>, plane_date: Option<u64>) -> ClockStatus {
        let floor = clock.now(held).max(plane_date.unwrap_or(0));
        if floor > clock.system + CLOCK_TOLERANCE {
            return ClockStatus::Behind(floor - clock.system);
        }
        match plane_date {
            Some(d) if clock.system > d + CLOCK_TOLERANCE => ClockStatus::Ahead(clock.system - d),
            _ => ClockStatus::Ok,
        }
    }

    /// `ok`, `behind` or `ahead`.
    pub fn as_str(self) -> &'static str {
        match self {
            ClockStatus::Ok => "ok",
            ClockStatus::Behind(_) => "behind",
            ClockStatus::Ahead(_) => "ahead",
        }
    }
}

/// Why a document is not adopted: a stable class and a sentence.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refused {
    /// Its class.
    pub class: RefusalClass,
    /// What is wrong.
    pub detail: String,
    /// The document's revision, when it could be read.
    pub revision: Option<u64>,
}

/// What to do with a document (a node's, or a group's: `D`).
#[derive(Debug)]
pub enum Verdict<D = Desired> {
    /// A new revision, every check passed: adopt it.
    Adopt(Box<Accepted<D>>),
    /// The revision held, the same payload: nothing to do.
    Same,
    /// Not adopted.
    Refused(Refused),
}

/// A document that passed every check.
#[derive(Debug)]
pub struct Accepted<D = Desired> {
    /// What it says.
    pub desired: D,
    /// The digest of its payload.
    pub payload_digest: Digest,
    /// The trusted key that signed it.
    pub key_id: String,
    /// The newest `issued_at` to keep as the floor of "now": the held one,
    /// or this document's, never more than [`MAX_SKEW`] ahead of the
    /// node's clocks.
    pub newest_issued_at: u64,
}

impl Accepted<Desired> {
    /// The record of the node's document accepted: fetched from `url` with
    /// `etag`, at `now`.
    pub fn record(&self, url: &str, etag: Option<String>, now: u64) -> Held {
        Held {
            url: url.to_string(),
            revision: self.desired.revision,
            payload_digest: self.payload_digest.clone(),
            etag,
            issued_at: self.desired.issued_at,
            expires: self.desired.expires,
            newest_issued_at: self.newest_issued_at,
            accepted_at: now,
            key_id: self.key_id.clone(),
        }
    }
}

/// The few fields read before the modules are: enough to say whose it is,
/// which revision, and whether it is fresh. A node's document names its
/// node, a group's its group.
#[derive(Deserialize)]
struct Header {
    #[serde(default)]
    node: Option<String>,
    #[serde(default)]
    group: Option<String>,
    revision: u64,
    issued_at: String,
    expires: String,
}

/// Whose document is judged: this node's own, or a group's it belongs to.
#[derive(Clone, Copy, Debug)]
pub enum Whose<'a> {
    Node(&'a NodeId),
    Group(&'a GroupName),
}

impl<'a> Whose<'a> {
    fn payload_type(self) -> (&'static str, &'static str) {
        match self {
            Whose::Node(_) => (envelope::PAYLOAD_TYPE, "stead desired-state document"),
            Whose::Group(_) => (GROUP_PAYLOAD_TYPE, "stead group document"),
        }
    }

    /// `node` or `group`, and the name the document must carry there.
    fn field(self) -> (&'static str, &'a str) {
        match self {
            Whose::Node(n) => ("node", n.as_str()),
            Whose::Group(g) => ("group", g.as_str()),
        }
    }
}

/// Who may sign a document and what its images must be in: the root's
/// document keys (anything), its delegations (each within its scope),
/// and, when the root names an allow-list role, the list held.
#[derive(Clone, Copy, Debug)]
pub struct Authority<'a> {
    /// The keys that sign any document; one signature is enough.
    pub documents: &'a [PublicKey],
    /// The delegations, in the root's order.
    pub delegations: &'a [Delegation],
    /// `None`: no allow-list is asked for; `Some(None)`: one is, and none
    /// is held (every document naming an image is refused).
    pub allow_list: Option<Option<&'a AllowList>>,
}

impl<'a> Authority<'a> {
    /// The document keys alone (no delegation, no allow-list).
    pub fn keys(documents: &'a [PublicKey]) -> Authority<'a> {
        Authority {
            documents,
            delegations: &[],
            allow_list: None,
        }
    }
}

/// What a document names, for a delegation's scope and the allow-list.
pub trait Names {
    /// Whose it is, its groups, its modules, whether it asks for stead.
    fn named(&self) -> Named<'_>;
    /// Every image it names, with the module that names it.
    fn images(&self) -> Vec<(&ModuleName, &str)>;
}

impl Names for Desired {
    fn named(&self) -> Named<'_> {
        Named {
            group: None,
            groups: self.groups.iter().collect(),
            modules: self
                .modules
                .keys()
                .chain(&self.remove)
                .chain(self.overrides.keys())
                .collect(),
            agent: self.agent.is_some(),
            policy: !self.images.0.is_empty(),
        }
    }

    fn images(&self) -> Vec<(&ModuleName, &str)> {
        let own = self.modules.iter().map(|(m, i)| (m, i.image.as_str()));
        let over = self
            .overrides
            .iter()
            .filter_map(|(m, o)| o.image.as_deref().map(|i| (m, i)));
        own.chain(over).collect()
    }
}

impl Names for GroupDesired {
    fn named(&self) -> Named<'_> {
        Named {
            group: Some(&self.group),
            groups: Vec::new(),
            modules: self.modules.keys().chain(previous(self).keys()).collect(),
            agent: false,
            policy: !self.images.0.is_empty(),
        }
    }

    fn images(&self) -> Vec<(&ModuleName, &str)> {
        self.modules
            .iter()
            .chain(previous(self))
            .map(|(m, i)| (m, i.image.as_str()))
            .collect()
    }
}

/// A group's previous modules (none without a previous revision).
fn previous(
    g: &GroupDesired,
) -> &std::collections::BTreeMap<ModuleName, crate::model::intention::Intention> {
    static NONE: std::collections::BTreeMap<ModuleName, crate::model::intention::Intention> =
        std::collections::BTreeMap::new();
    g.previous.as_ref().map_or(&NONE, |p| &p.modules)
}

/// The first delegation, in the root's order, whose threshold the
/// envelope's signatures meet (every delegation is terminating: it alone
/// decides), with the id of the first of its keys that signed; `Ok(None)`
/// when no delegated key signed; the error, when some did, short of
/// every threshold, says whose and how many.
pub fn delegated(
    env: &Envelope,
    delegations: &[Delegation],
) -> Result<Option<(usize, String)>, String> {
    let mut short = None;
    for (i, d) in delegations.iter().enumerate() {
        let by = envelope::signers(env, &d.role.keys);
        if by.len() >= d.role.threshold {
            let id = by.first().map(|k| k.id().to_string()).unwrap_or_default();
            return Ok(Some((i, id)));
        }
        if !by.is_empty() && short.is_none() {
            short = Some(format!(
                "signed by {} of delegation {}'s keys ({}), which needs {}",
                by.len(),
                d.name,
                by.iter()
                    .map(|k| k.id().to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
                d.role.threshold
            ));
        }
    }
    short.map_or(Ok(None), Err)
}

/// What passed every check but the payload's own: the payload, ready to
/// be parsed as its kind.
struct Checked {
    payload: Vec<u8>,
    payload_digest: Digest,
    key_id: String,
    /// The delegation that signed it (an index of the authority's), when
    /// no document key did.
    delegation: Option<usize>,
    newest_issued_at: u64,
    revision: Option<u64>,
}

/// Judges a fetched document, in this order: its size; its envelope; its
/// signature, by a trusted key, over the pre-authentication encoding; its
/// node; its revision against the one held (lower: rollback; equal: the
/// same payload or an equivocation); its freshness against the agent's
/// "now"; and then every module in it, all or nothing.
pub fn judge(
    body: &[u8],
    node: &NodeId,
    trusted: &[PublicKey],
    held: Option<&Held>,
    clock: Clock,
) -> Verdict {
    judge_by(body, node, Authority::keys(trusted), held, clock)
}

/// Judges a node's fetched document as [`judge`] does, by a root's whole
/// authority: signed by a document key, or by a delegation and then
/// only within its scope (`out-of-scope` otherwise, naming the key, the
/// delegation and what is outside it); and, when an allow-list is asked
/// for, every image it names pinned and listed (`unlisted-image`, naming
/// the module and the image).
pub fn judge_by(
    body: &[u8],
    node: &NodeId,
    authority: Authority,
    held: Option<&Held>,
    clock: Clock,
) -> Verdict {
    judge_as(
        body,
        Whose::Node(node),
        authority,
        held,
        clock,
        Desired::parse,
    )
}

/// Judges a group's fetched document as [`judge`] judges a node's, every
/// check in the same order, against the group's own floor (`held`): its
/// payload type is a group's, and it must name `group`.
pub fn judge_group(
    body: &[u8],
    group: &GroupName,
    trusted: &[PublicKey],
    held: Option<&Held>,
    clock: Clock,
) -> Verdict<GroupDesired> {
    judge_group_by(body, group, Authority::keys(trusted), held, clock)
}

/// Judges a group's fetched document as [`judge_by`] judges a node's.
pub fn judge_group_by(
    body: &[u8],
    group: &GroupName,
    authority: Authority,
    held: Option<&Held>,
    clock: Clock,
) -> Verdict<GroupDesired> {
    judge_as(
        body,
        Whose::Group(group),
        authority,
        held,
        clock,
        GroupDesired::parse,
    )
}

fn judge_as<D: Names>(
    body: &[u8],
    whose: Whose,
    authority: Authority,
    held: Option<&Held>,
    clock: Clock,
    parse: fn(&[u8]) -> Result<D, DocumentError>,
) -> Verdict<D> {
    let c = match check(body, whose, &authority, held, clock) {
        Ok(c) => c,
        Err(None) => return Verdict::Same,
        Err(Some(r)) => return Verdict::Refused(r),
    };
    let refused = |class, detail| {
        Verdict::Refused(Refused {
            class,
            detail,
            revision: c.revision,
        })
    };
    let desired = match parse(&c.payload) {
        Ok(d) => d,
        Err(e) => return refused(RefusalClass::Invalid, e.to_string()),
    };
    if let Some(d) = c.delegation.and_then(|i| authority.delegations.get(i))
        && let Some(why) = d.out_of_scope(&desired.named())
    {
        return refused(
            RefusalClass::OutOfScope,
            format!(
                "signed only by delegation {} (key {}), outside its scope: {why}",
                d.name, c.key_id
            ),
        );
    }
    if let Some(list) = authority.allow_list {
        let now = clock.now(held);
        for (module, image) in desired.images() {
            let image_shown: String = image.chars().take(200).collect();
            let why = match list {
                None => "no allow-list is held, and the root asks for one".to_string(),
                Some(l) if l.expired(now) => format!(
                    "allow-list version {} expired at {}",
                    l.version,
                    format_rfc3339(l.expires)
                ),
                Some(l) => match l.admits(image) {
                    Ok(()) => continue,
                    Err(e) => e,
                },
            };
            return refused(
                RefusalClass::UnlistedImage,
                format!("module {module}: image {image_shown:?}: {why}"),
            );
        }
    }
    Verdict::Adopt(Box::new(Accepted {
        desired,
        payload_digest: c.payload_digest,
        key_id: c.key_id,
        newest_issued_at: c.newest_issued_at,
    }))
}

/// Every check before the payload is parsed as its kind; `Err(None)` is
/// the payload held already.
fn check(
    body: &[u8],
    whose: Whose,
    authority: &Authority,
    held: Option<&Held>,
    clock: Clock,
) -> Result<Checked, Option<Refused>> {
    let refuse = |class: RefusalClass, detail: String, revision: Option<u64>| {
        Err(Some(Refused {
            class,
            detail,
            revision,
        }))
    };
    if body.len() > MAX_DOCUMENT {
        return refuse(
            RefusalClass::TooLarge,
            format!(
                "the document is {} bytes, over the {MAX_DOCUMENT}-byte limit",
                body.len()
            ),
            None,
        );
    }
    let env = match Envelope::parse(body) {
        Ok(e) => e,
        Err(e) => {
            return refuse(
                RefusalClass::Malformed,
                format!("not a signed envelope: {e}"),
                None,
            );
        }
    };
    let (payload_type, what) = whose.payload_type();
    let (key_id, delegation) =
        match envelope::verify_as(&env, authority.documents, payload_type, what) {
            Ok(k) => (k.id().to_string(), None),
            // Not a document key's: a delegation's, judged by its scope
            // once the payload is read.
            Err(e @ VerifyError::UnknownKey { .. }) => {
                match delegated(&env, authority.delegations) {
                    Ok(Some((i, id))) => (id, Some(i)),
                    Ok(None) => return refuse(e.class(), e.to_string(), None),
                    Err(short) => return refuse(e.class(), short, None),
                }
            }
            Err(e) => return refuse(e.class(), e.to_string(), None),
        };
    // Signed by a trusted key: the payload may be read now.
    let header: Header = match serde_json::from_slice(&env.payload) {
        Ok(h) => h,
        Err(e) => return refuse(RefusalClass::Invalid, format!("the payload: {e}"), None),
    };
    let revision = Some(header.revision);
    let (field, want) = whose.field();
    let named = match whose {
        Whose::Node(_) => header.node.as_deref(),
        Whose::Group(_) => header.group.as_deref(),
    };
    if named != Some(want) {
        return refuse(
            RefusalClass::OtherNode,
            format!(
                "the document is for {field} {:?}, not {want:?}",
                named.unwrap_or("(none)")
            ),
            revision,
        );
    }
    if header.revision > MAX_REVISION {
        return refuse(
            RefusalClass::RevisionTooLarge,
            format!(
                "revision {} is over the largest a document may carry, 2^53 = {MAX_REVISION}",
                header.revision
            ),
            revision,
        );
    }
    let payload_digest = Digest::of(&env.payload);
    if let Some(h) = held {
        if header.revision < h.revision {
            return refuse(
                RefusalClass::Rollback,
                format!(
                    "revision {} is older than revision {} held (a stale copy, or a replay)",
                    header.revision, h.revision
                ),
                revision,
            );
        }
        if header.revision == h.revision {
            if payload_digest == h.payload_digest {
                return Err(None);
            }
            return refuse(
                RefusalClass::Equivocation,
                format!(
                    "revision {} is held with another payload ({}; this one is {})",
                    h.revision, h.payload_digest, payload_digest
                ),
                revision,
            );
        }
    }
    let issued_at = match parse_rfc3339(&header.issued_at) {
        Ok(t) => t,
        Err(e) => return refuse(RefusalClass::Invalid, format!("issued_at: {e}"), revision),
    };
    // A document issued further ahead of the node's own clocks than the
    // skew is wrong, unless the system clock itself reads behind what is
    // known to have passed (then nothing tells how far it is off, and the
    // document is taken). Either way "now" moves at most to the ceiling,
    // which no signed time raises: the bound holds in total.
    let known = clock
        .system
        .max(clock.build)
        .max(held.map_or(0, |h| h.newest_issued_at));
    let ceiling = clock.ceiling();
    let system_behind = clock.system.saturating_add(CLOCK_TOLERANCE) < known;
    if issued_at > ceiling && !system_behind {
        return refuse(
            RefusalClass::IssuedInFuture,
            format!(
                "issued_at {} is more than {}h ahead of this node's own clocks \
                 (the system clock reads {}): the document is wrong, not the clock; \
                 what runs keeps running",
                format_rfc3339(issued_at),
                MAX_SKEW / 3600,
                format_rfc3339(clock.system)
            ),
            revision,
        );
    }
    let expires = match parse_rfc3339(&header.expires) {
        Ok(t) => t,
        Err(e) => return refuse(RefusalClass::Invalid, format!("expires: {e}"), revision),
    };
    let now = clock.now(held);
    if expires <= now {
        let clock_note = if clock.system < now {
            format!(
                " (the system clock reads {}, behind what is known to have passed)",
                format_rfc3339(clock.system)
            )
        } else {
            String::new()
        };
        return refuse(
            RefusalClass::StaleOrClock,
            format!(
                "the document expired at {} and it is {}{clock_note}; what runs keeps running",
                header.expires,
                format_rfc3339(now)
            ),
            revision,
        );
    }
    Ok(Checked {
        payload: env.payload,
        payload_digest,
        key_id,
        delegation,
        newest_issued_at: held
            .map_or(0, |h| h.newest_issued_at)
            .max(issued_at.min(ceiling)),
        revision,
    })
}

/// What a node holds that is a floor for what comes after it: a node's
/// document, a group's (its revision and its `issued_at`), or the release
/// statement the running version came from (versions below it are a
/// downgrade).
#[derive(Clone, Copy, Debug)]
pub struct Floor<'a> {
    /// Its envelope, as kept.
    pub envelope: &'a [u8],
    /// The payload type it was taken as.
    pub payload_type: &'static str,
    /// Its revision (0 for a release statement).
    pub revision: u64,
    /// The key that signed it, as recorded (empty when none was).
    pub key_id: &'a str,
}

impl<'a> Floor<'a> {
    /// A document held (a node's or a group's, by `payload_type`).
    pub fn held(envelope: &'a [u8], payload_type: &'static str, held: &'a Held) -> Floor<'a> {
        Floor {
            envelope,
            payload_type,
            revision: held.revision,
            key_id: &held.key_id,
        }
    }
}

/// The one rule, for every kind of floor: whether what the node holds
/// still stands as a floor under the keys in force (judged at start, so
/// after every change of the config's keys, and whenever a root is
/// taken): it must still be signed by one of them, as its kind, at a
/// revision within [`MAX_REVISION`]. When it does not stand, what it
/// stated keeps running, but it is no floor: the next one a key in force
/// signed is judged on its own, whatever its revision or its time. The
/// error says why, in a sentence.
pub fn still_stands(floor: Floor, trusted: &[PublicKey]) -> Result<(), String> {
    let env =
        Envelope::parse(floor.envelope).map_err(|e| format!("it cannot be read again: {e}"))?;
    if let Err(e) = envelope::verify_as(
        &env,
        trusted,
        floor.payload_type,
        "thing of the kind it was taken as",
    ) {
        let by = match floor.key_id {
            "" => String::new(),
            k => format!(
                " (it was signed by key {})",
                k.chars().take(64).collect::<String>()
            ),
        };
        return Err(format!("no key trusted now signed it{by}: {e}"));
    }
    if floor.revision > MAX_REVISION {
        return Err(format!(
            "its revision {} is over the largest a document may carry, 2^53 = {MAX_REVISION}",
            floor.revision
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plane::envelope::{PAYLOAD_TYPE, SecretKey};

    const DAY: u64 = 86_400;
    /// 2026-11-01T00:00:00Z.
    const T0: u64 = 1_793_491_200;

    fn node() -> NodeId {
        NodeId::try_from("edge-1").unwrap()
    }

    fn payload(node: &str, revision: u64, issued: u64, expires: u64, image: &str) -> Vec<u8> {
        serde_json::to_vec(&serde_json::json!({
            "node": node,
            "revision": revision,
            "issued_at": format_rfc3339(issued),
            "expires": format_rfc3339(expires),
            "modules": [{"name": "web", "image": image}],
        }))
        .unwrap()
    }

    fn held(key: &SecretKey, revision: u64, payload: &[u8], newest: u64) -> Held {
        Held {
            url: "http://plane/nodes/edge-1/desired.json".into(),
            revision,
            payload_digest: Digest::of(payload),
            etag: None,
            issued_at: newest,
            expires: newest + 30 * DAY,
            newest_issued_at: newest,
            accepted_at: newest,
            key_id: key.public().id().to_string(),
        }
    }

    /// A document's revision, whichever its kind.
    trait Revision {
        fn revision(&self) -> u64;
    }
    impl Revision for Desired {
        fn revision(&self) -> u64 {
            self.revision
        }
    }
    impl Revision for GroupDesired {
        fn revision(&self) -> u64 {
            self.revision
        }
    }

    /// The verdict in a word: `adopt r<revision>`, `same`, or the class.
    fn word<D: Revision>(v: &Verdict<D>) -> String {
        match v {
            Verdict::Adopt(a) => format!("adopt r{}", a.desired.revision()),
            Verdict::Same => "same".into(),
            Verdict::Refused(r) => r.class.to_string(),
        }
    }

    /// A trusted key, one that is not, and a clock: now is T0.
    fn keys_and_clock() -> (SecretKey, SecretKey, Clock) {
        let clock = Clock {
            system: T0,
            build: T0 - 100 * DAY,
            counted: 0,
        };
        (
            SecretKey::generate().unwrap(),
            SecretKey::generate().unwrap(),
            clock,
        )
    }

    #[test]
    fn every_check_in_its_order() {
        let (key, other, clock) = keys_and_clock();
        let trusted = [key.public()];
        let p5 = payload("edge-1", 5, T0 - DAY, T0 + 30 * DAY, "a:1");
        let h5 = held(&key, 5, &p5, T0 - DAY);
        let signed = |p: &[u8]| key.sign(PAYLOAD_TYPE, p).to_json();
        let mut tampered = signed(&p5);
        // Flip one base64 character of the payload.
        let at = tampered
            .windows(10)
            .position(|w| w == b"\"payload\":")
            .unwrap()
            + 14;
        tampered[at] = if tampered[at] == b'A' { b'B' } else { b'A' };
        let mut huge = signed(&p5);
        huge.resize(MAX_DOCUMENT + 1, b' ');
        type Case<'a> = (&'a str, Vec<u8>, Option<&'a Held>, Clock, &'a str);
        let cases: Vec<Case> = vec![
            ("first document", signed(&p5), None, clock, "adopt r5"),
            ("a newer revision", signed(&payload("edge-1", 6, T0, T0 + DAY, "a:2")), Some(&h5), clock, "adopt r6"),
            ("the same payload again", signed(&p5), Some(&h5), clock, "same"),
            ("the same payload re-signed by an untrusted key", {
                other.sign(PAYLOAD_TYPE, &p5).to_json()
            }, Some(&h5), clock, "unknown-key"),
            ("over the size limit", huge, None, clock, "too-large"),
            ("truncated", signed(&p5)[..40].to_vec(), None, clock, "malformed"),
            ("not JSON", b"<html>".to_vec(), None, clock, "malformed"),
            ("tampered payload", tampered, None, clock, "bad-signature"),
            ("an unknown key", other.sign(PAYLOAD_TYPE, &p5).to_json(), None, clock, "unknown-key"),
            ("another payload type", key.sign("text/plain", &p5).to_json(), None, clock, "payload-type"),
            ("for another node", signed(&payload("edge-2", 9, T0, T0 + DAY, "a:1")), Some(&h5), clock, "other-node"),
            ("an older revision", signed(&payload("edge-1", 4, T0, T0 + DAY, "a:1")), Some(&h5), clock, "rollback"),
            ("the same revision, another payload", signed(&payload("edge-1", 5, T0, T0 + DAY, "b:1")), Some(&h5), clock, "equivocation"),
            ("expired", signed(&payload("edge-1", 6, T0 - 10 * DAY, T0 - DAY, "a:1")), Some(&h5), clock, "stale-or-clock"),
            ("expires exactly now", signed(&payload("edge-1", 6, T0 - DAY, T0, "a:1")), Some(&h5), clock, "stale-or-clock"),
            (
                "a clock in 1970: now is the build time",
                signed(&payload("edge-1", 1, T0 - 200 * DAY, T0 - 99 * DAY, "a:1")),
                None,
                Clock { system: 0, build: T0 - 100 * DAY, counted: 0 },
                "adopt r1",
            ),
            (
                "a clock in 1970 with a document held: now is its issue",
                signed(&payload("edge-1", 6, T0 - 3 * DAY, T0 - 2 * DAY, "a:1")),
                Some(&h5),
                Clock { system: 0, build: T0 - 100 * DAY, counted: 0 },
                "stale-or-clock",
            ),
            (
                "a clock far in the future: every document is expired",
                signed(&payload("edge-1", 6, T0, T0 + 30 * DAY, "a:1")),
                Some(&h5),
                Clock { system: T0 + 3650 * DAY, build: T0 - 100 * DAY, counted: 0 },
                "stale-or-clock",
            ),
            ("revision 2^53, the largest", signed(&payload("edge-1", MAX_REVISION, T0, T0 + DAY, "a:1")), Some(&h5), clock, "adopt r9007199254740992"),
            ("revision 2^53 + 1", signed(&payload("edge-1", MAX_REVISION + 1, T0, T0 + DAY, "a:1")), Some(&h5), clock, "revision-too-large"),
            ("revision 2^64 - 1", signed(&payload("edge-1", u64::MAX, T0, T0 + DAY, "a:1")), None, clock, "revision-too-large"),
            ("issued 23 h ahead of the clock", signed(&payload("edge-1", 6, T0 + 23 * 3600, T0 + 30 * DAY, "a:1")), Some(&h5), clock, "adopt r6"),
            ("issued 25 h ahead of the clock", signed(&payload("edge-1", 6, T0 + 25 * 3600, T0 + 30 * DAY, "a:1")), Some(&h5), clock, "issued-in-future"),
            ("issued in 2100", signed(&payload("edge-1", 6, T0 + 27_000 * DAY, T0 + 28_000 * DAY, "a:1")), None, clock, "issued-in-future"),
            (
                "issued far ahead, the clock behind the build: taken",
                signed(&payload("edge-1", 6, T0 + 10 * DAY, T0 + 40 * DAY, "a:1")),
                Some(&h5),
                Clock { system: 0, build: T0 - 100 * DAY, counted: 0 },
                "adopt r6",
            ),
            (
                "an invalid module",
                signed(&serde_json::to_vec(&serde_json::json!({
                    "node": "edge-1", "revision": 6,
                    "issued_at": format_rfc3339(T0), "expires": format_rfc3339(T0 + DAY),
                    "modules": [{"name": "web", "image": "a:1"}, {"name": "Bad Name", "image": "a:1"}],
                })).unwrap()),
                Some(&h5),
                clock,
                "invalid",
            ),
            (
                "a rollback is refused before its modules are read",
                signed(&serde_json::to_vec(&serde_json::json!({
                    "node": "edge-1", "revision": 2,
                    "issued_at": format_rfc3339(T0), "expires": format_rfc3339(T0 + DAY),
                    "modules": [{"name": "Bad Name"}],
                })).unwrap()),
                Some(&h5),
                clock,
                "rollback",
            ),
        ];
        let mut failed = Vec::new();
        for (what, body, held, clock, want) in cases {
            let got = word(&judge(&body, &node(), &trusted, held, clock));
            if got != want {
                failed.push(format!("{what}: got {got}, want {want}"));
            }
        }
        assert!(failed.is_empty(), "{}", failed.join("\n"));
    }

    #[test]
    fn now_moves_on_an_issue_at_most_the_skew_ahead_of_every_clock() {
        let key = SecretKey::generate().unwrap();
        let trusted = [key.public()];
        let newest = |p: &[u8], held: Option<&Held>, clock: Clock| match judge(
            &key.sign(PAYLOAD_TYPE, p).to_json(),
            &node(),
            &trusted,
            held,
            clock,
        ) {
            Verdict::Adopt(a) => a.newest_issued_at,
            other => panic!("{other:?}"),
        };
        let ok = Clock {
            system: T0,
            build: T0 - 100 * DAY,
            counted: 0,
        };
        let behind = Clock {
            system: 0,
            build: T0,
            counted: 0,
        };
        let counting = |counted| Clock {
            system: 0,
            build: T0,
            counted,
        };
        let p1 = payload("edge-1", 1, T0 - DAY, T0 + DAY, "a:1");
        let h1 = held(&key, 1, &p1, T0 - DAY);
        let ahead = held(&key, 1, &p1, T0 + DAY);
        // (what, issued_at, held, clock, the floor of "now" after it)
        #[rustfmt::skip]
        let cases = [
            ("an issue in the past", T0 - 2 * DAY, None, ok, T0 - 2 * DAY),
            ("an issue older than the held one", T0 - 2 * DAY, Some(&h1), ok, T0 - DAY),
            ("an issue 23 h ahead", T0 + 23 * 3600, Some(&h1), ok, T0 + 23 * 3600),
            ("a floor a day ahead already, an issue 47 h ahead", T0 + 47 * 3600, Some(&ahead), behind, T0 + DAY),
            ("a clock behind the build, an issue far ahead", T0 + 30 * DAY, None, behind, T0 + MAX_SKEW),
            ("a clock behind the held issue, an issue far ahead: no further", T0 + 30 * DAY, Some(&ahead), behind, T0 + DAY),
            ("the same, 3 days counted since the floor", T0 + 30 * DAY, Some(&ahead), counting(T0 + 4 * DAY), T0 + 4 * DAY),
            ("counted past the issue: the issue", T0 + 2 * DAY, Some(&ahead), counting(T0 + 4 * DAY), T0 + 2 * DAY),
        ];
        for (what, issued, held, clock, want) in cases {
            let p = payload("edge-1", 2, issued, issued + 60 * DAY, "a:1");
            assert_eq!(newest(&p, held, clock), want, "{what}");
        }
    }

    /// The bound holds for "now" as a whole: documents that each lead it a
    /// day further (41 of them moved a node 40 days with 0.5.0) move it
    /// no further than a day past the node's own clocks, whether its
    /// clock is right or reads 1970; an honest document is taken after.
    #[test]
    fn documents_a_day_ahead_each_move_now_at_most_a_day_in_all() {
        let key = SecretKey::generate().unwrap();
        let trusted = [key.public()];
        let ok = Clock {
            system: T0,
            build: T0 - 100 * DAY,
            counted: 0,
        };
        let in_1970 = Clock {
            system: 3600,
            build: T0,
            counted: T0 + 600,
        };
        // (what, clock): "now" reaches at most a day past the node's clocks.
        for (what, clock) in [("a clock that is right", ok), ("a clock in 1970", in_1970)] {
            let bound = T0 + MAX_SKEW;
            let mut floor: Option<Held> = None;
            for i in 1..=41u64 {
                let issued = T0 + i * DAY;
                let p = payload("edge-1", i, issued, issued + 30 * DAY, "a:1");
                let body = key.sign(PAYLOAD_TYPE, &p).to_json();
                match judge(&body, &node(), &trusted, floor.as_ref(), clock) {
                    Verdict::Adopt(a) => {
                        let moved = a.newest_issued_at;
                        assert!(moved <= bound, "{what}: document {i} moved now to {moved}");
                        let mut h = held(&key, i, &p, issued);
                        h.newest_issued_at = moved;
                        floor = Some(h);
                    }
                    Verdict::Refused(r) => assert_eq!(r.class.to_string(), "issued-in-future"),
                    Verdict::Same => panic!("{what}: same"),
                }
            }
            let held_now = clock.now(floor.as_ref());
            assert!(held_now <= bound, "{what}: now is {held_now}");
            // An honest document, issued now and expiring in two days.
            let honest = payload("edge-1", 100, T0, T0 + 2 * DAY, "b:1");
            let body = key.sign(PAYLOAD_TYPE, &honest).to_json();
            let v = judge(&body, &node(), &trusted, floor.as_ref(), clock);
            assert_eq!(word(&v), "adopt r100", "{what}: {v:?}");
        }
    }

    /// The one rule of what stands as a floor under the keys in force, for
    /// every kind: a node's document, a group's, a release statement.
    #[test]
    fn a_floor_stands_only_while_a_key_in_force_signed_it_whatever_its_kind() {
        let (old, new) = (
            SecretKey::generate().unwrap(),
            SecretKey::generate().unwrap(),
        );
        let p = payload("edge-1", 7, T0, T0 + DAY, "a:1");
        let g = serde_json::to_vec(&serde_json::json!({"group": "eu", "revision": 7})).unwrap();
        let r = br#"{"version":"0.9.0"}"#;
        let node_doc = old.sign(PAYLOAD_TYPE, &p).to_json();
        let group_doc = old.sign(GROUP_PAYLOAD_TYPE, &g).to_json();
        let release = old.sign(crate::model::release::PAYLOAD_TYPE, r).to_json();
        let mut both = old.sign(PAYLOAD_TYPE, &p);
        both.countersign(&new);
        let both = both.to_json();
        let id = old.public().id().to_string();
        fn f<'a>(envelope: &'a [u8], payload_type: &'static str, revision: u64) -> Floor<'a> {
            Floor {
                envelope,
                payload_type,
                revision,
                key_id: "",
            }
        }
        let (n, gd, rs, b2) = (&node_doc[..], &group_doc[..], &release[..], &both[..]);
        let (old_k, new_k, none) = (vec![old.public()], vec![new.public()], vec![]);
        let rel = crate::model::release::PAYLOAD_TYPE;
        // (what, the floor, the keys in force, None: it stands, or words of why not)
        #[rustfmt::skip]
        let cases: Vec<(&str, Floor, &Vec<PublicKey>, Option<&str>)> = vec![
            ("a node's document, its key still trusted", f(n, PAYLOAD_TYPE, 7), &old_k, None),
            ("a node's document signed by both, the old key removed", f(b2, PAYLOAD_TYPE, 7), &new_k, None),
            ("a node's document, its key removed", f(n, PAYLOAD_TYPE, 7), &new_k, Some("no key trusted now signed it")),
            ("a node's document, no key at all", f(n, PAYLOAD_TYPE, 7), &none, Some("no key trusted now signed it")),
            ("a node's document, the key named", Floor { key_id: &id, ..f(n, PAYLOAD_TYPE, 7) }, &new_k, Some("it was signed by key ")),
            ("a node's document damaged", f(&n[..30], PAYLOAD_TYPE, 7), &old_k, Some("cannot be read again")),
            ("a node's document over 2^53 (taken by 0.5.0)", f(n, PAYLOAD_TYPE, u64::MAX), &old_k, Some("over the largest")),
            ("a group's document, its key still trusted", f(gd, GROUP_PAYLOAD_TYPE, 7), &old_k, None),
            ("a group's document, its key removed", f(gd, GROUP_PAYLOAD_TYPE, 1 << 53), &new_k, Some("no key trusted now signed it")),
            ("a group's document held as a node's", f(gd, PAYLOAD_TYPE, 7), &old_k, Some("no key trusted now signed it")),
            ("a release statement, its key still trusted", f(rs, rel, 0), &old_k, None),
            ("a release statement, its key removed", f(rs, rel, 0), &new_k, Some("no key trusted now signed it")),
        ];
        for (what, floor, trusted, says) in cases {
            let got = still_stands(floor, trusted);
            match says {
                None => assert_eq!(got, Ok(()), "{what}"),
                Some(s) => {
                    let e = got.unwrap_err();
                    assert!(e.contains(s), "{what}: {e}");
                }
            }
        }
    }

    #[test]
    fn two_trusted_keys_during_a_rotation() {
        let old = SecretKey::generate().unwrap();
        let new = SecretKey::generate().unwrap();
        let clock = Clock {
            system: T0,
            build: 0,
            counted: 0,
        };
        let p = payload("edge-1", 1, T0, T0 + DAY, "a:1");
        let both = [old.public(), new.public()];
        for k in [&old, &new] {
            let v = judge(
                &k.sign(PAYLOAD_TYPE, &p).to_json(),
                &node(),
                &both,
                None,
                clock,
            );
            assert_eq!(word(&v), "adopt r1");
        }
        // The old key removed: its documents are refused, the new key's taken.
        let only_new = [new.public()];
        let v = judge(
            &old.sign(PAYLOAD_TYPE, &p).to_json(),
            &node(),
            &only_new,
            None,
            clock,
        );
        assert_eq!(word(&v), "unknown-key");
        let v = judge(
            &new.sign(PAYLOAD_TYPE, &p).to_json(),
            &node(),
            &only_new,
            None,
            clock,
        );
        match v {
            Verdict::Adopt(a) => assert_eq!(a.key_id, new.public().id().to_string()),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn refusals_say_what_is_wrong() {
        let key = SecretKey::generate().unwrap();
        let clock = Clock {
            system: T0,
            build: 0,
            counted: 0,
        };
        let p5 = payload("edge-1", 5, T0 - DAY, T0 + DAY, "a:1");
        let h5 = held(&key, 5, &p5, T0 - DAY);
        let body = key
            .sign(PAYLOAD_TYPE, &payload("edge-1", 3, T0, T0 + DAY, "a:1"))
            .to_json();
        let Verdict::Refused(r) = judge(&body, &node(), &[key.public()], Some(&h5), clock) else {
            panic!("not refused")
        };
        assert_eq!(r.revision, Some(3));
        assert!(
            r.detail.contains("revision 3 is older than revision 5"),
            "{}",
            r.detail
        );
        let body = key
            .sign(
                PAYLOAD_TYPE,
                &payload("edge-1", 6, T0 - 9 * DAY, T0 - 8 * DAY, "a:1"),
            )
            .to_json();
        let Verdict::Refused(r) = judge(&body, &node(), &[key.public()], Some(&h5), clock) else {
            panic!("not refused")
        };
        assert!(r.detail.contains("what runs keeps running"), "{}", r.detail);
    }

    #[test]
    fn the_clock_status() {
        let c = |system| Clock {
            system,
            build: T0,
            counted: 0,
        };
        assert_eq!(ClockStatus::of(c(T0 + 10), None, None), ClockStatus::Ok);
        assert_eq!(ClockStatus::of(c(0), None, None), ClockStatus::Behind(T0));
        assert_eq!(
            ClockStatus::of(c(T0 + DAY), None, Some(T0 + DAY + 60)),
            ClockStatus::Ok
        );
        assert_eq!(
            ClockStatus::of(c(T0 + 10 * DAY), None, Some(T0 + DAY)),
            ClockStatus::Ahead(9 * DAY)
        );
        assert_eq!(
            ClockStatus::of(c(T0 + DAY), None, Some(T0 + 2 * DAY)),
            ClockStatus::Behind(DAY)
        );
    }

    fn group_payload(
        group: &str,
        revision: u64,
        issued: u64,
        expires: u64,
        image: &str,
    ) -> Vec<u8> {
        serde_json::to_vec(&serde_json::json!({
            "group": group,
            "revision": revision,
            "issued_at": format_rfc3339(issued),
            "expires": format_rfc3339(expires),
            "modules": [{"name": "web", "image": image}],
        }))
        .unwrap()
    }

    /// A group's document is judged by every rule of a node's, against
    /// the group's own floor; neither kind is ever read as the other.
    #[test]
    fn a_group_document_every_check_in_its_order() {
        let (key, other, clock) = keys_and_clock();
        let trusted = [key.public()];
        let group = GroupName::try_from("edge-eu").unwrap();
        let g5 = group_payload("edge-eu", 5, T0 - DAY, T0 + 30 * DAY, "a:1");
        let h5 = held(&key, 5, &g5, T0 - DAY);
        let signed = |p: &[u8]| key.sign(GROUP_PAYLOAD_TYPE, p).to_json();
        let rollout_without_previous = serde_json::to_vec(&serde_json::json!({
            "group": "edge-eu", "revision": 6,
            "issued_at": format_rfc3339(T0), "expires": format_rfc3339(T0 + DAY),
            "modules": [],
            "rollout": {"start": format_rfc3339(T0), "duration": "1h", "salt": "x"},
        }))
        .unwrap();
        #[rustfmt::skip]
        let cases: Vec<(&str, Vec<u8>, Option<&Held>, &str)> = vec![
            ("first document", signed(&g5), None, "adopt r5"),
            ("a newer revision", signed(&group_payload("edge-eu", 6, T0, T0 + DAY, "a:2")), Some(&h5), "adopt r6"),
            ("the same payload again", signed(&g5), Some(&h5), "same"),
            ("a node's document", key.sign(PAYLOAD_TYPE, &payload("edge-1", 6, T0, T0 + DAY, "a:1")).to_json(), None, "payload-type"),
            ("a node's payload signed as a group's", signed(&payload("edge-1", 6, T0, T0 + DAY, "a:1")), None, "other-node"),
            ("another group", signed(&group_payload("edge-us", 9, T0, T0 + DAY, "a:1")), Some(&h5), "other-node"),
            ("an unknown key", other.sign(GROUP_PAYLOAD_TYPE, &g5).to_json(), None, "unknown-key"),
            ("an older revision", signed(&group_payload("edge-eu", 4, T0, T0 + DAY, "a:1")), Some(&h5), "rollback"),
            ("the same revision, another payload", signed(&group_payload("edge-eu", 5, T0, T0 + DAY, "b:1")), Some(&h5), "equivocation"),
            ("expired", signed(&group_payload("edge-eu", 6, T0 - 10 * DAY, T0 - DAY, "a:1")), Some(&h5), "stale-or-clock"),
            ("a rollout without the previous revision", signed(&rollout_without_previous), Some(&h5), "invalid"),
        ];
        for (what, body, h, want) in cases {
            let v = judge_group(&body, &group, &trusted, h, clock);
            assert_eq!(word(&v), want, "{what}: {v:?}");
        }
        // A group's document is never a node's.
        let v = judge(&signed(&g5), &node(), &trusted, None, clock);
        assert!(
            matches!(&v, Verdict::Refused(r) if r.class.to_string() == "payload-type"),
            "{v:?}"
        );
    }
}

/// Delegations and the allow-list, as the verdict takes them: every
/// refusal a row.
#[cfg(test)]
mod authority_tests {
    use super::*;
    use crate::plane::allowlist::Listed;
    use crate::plane::envelope::{PAYLOAD_TYPE, SecretKey};
    use crate::plane::root::Role;
    use serde_json::{Value as J, json};

    const DAY: u64 = 86_400;
    const T0: u64 = 1_793_491_200;

    fn key() -> SecretKey {
        SecretKey::generate().unwrap()
    }

    fn clock() -> Clock {
        Clock {
            system: T0,
            build: T0 - 100 * DAY,
            counted: 0,
        }
    }

    fn delegation(
        name: &str,
        keys: &[&SecretKey],
        t: usize,
        groups: &[&str],
        prefix: Option<&str>,
    ) -> Delegation {
        Delegation {
            name: name.into(),
            role: Role {
                keys: keys.iter().map(|k| k.public()).collect(),
                threshold: t,
            },
            groups: groups
                .iter()
                .map(|g| GroupName::try_from(*g).unwrap())
                .collect(),
            modules: prefix.map(str::to_string),
        }
    }

    fn modules(names: &[(&str, &str)]) -> J {
        names
            .iter()
            .map(|(n, i)| json!({"name": n, "image": i}))
            .collect()
    }

    /// A node's document for edge-1 with `extra` fields.
    fn node_doc(mods: &[(&str, &str)], extra: J) -> Vec<u8> {
        let mut d = json!({
            "node": "edge-1", "revision": 2,
            "issued_at": format_rfc3339(T0), "expires": format_rfc3339(T0 + DAY),
            "modules": modules(mods),
        });
        if let (Some(o), J::Object(e)) = (d.as_object_mut(), extra) {
            o.extend(e);
        }
        serde_json::to_vec(&d).unwrap()
    }

    /// A group's document with `extra` fields.
    fn group_doc(group: &str, mods: &[(&str, &str)], extra: J) -> Vec<u8> {
        let mut d = json!({
            "group": group, "revision": 2,
            "issued_at": format_rfc3339(T0), "expires": format_rfc3339(T0 + DAY),
            "modules": modules(mods),
        });
        if let (Some(o), J::Object(e)) = (d.as_object_mut(), extra) {
            o.extend(e);
        }
        serde_json::to_vec(&d).unwrap()
    }

    enum Doc {
        Node(Vec<u8>),
        Group(&'static str, Vec<u8>),
    }

    fn sign(doc: &Doc, by: &[&SecretKey]) -> Vec<u8> {
        let (t, p) = match doc {
            Doc::Node(p) => (PAYLOAD_TYPE, p),
            Doc::Group(_, p) => (GROUP_PAYLOAD_TYPE, p),
        };
        let (first, more) = by.split_first().unwrap();
        let mut env = first.sign(t, p);
        for k in more {
            env.countersign(k);
        }
        env.to_json()
    }

    /// The verdict's word and, when refused, its detail.
    fn judged(doc: &Doc, by: &[&SecretKey], a: Authority) -> (String, String) {
        let body = sign(doc, by);
        let node = NodeId::try_from("edge-1").unwrap();
        let (class, detail) = match doc {
            Doc::Node(_) => match judge_by(&body, &node, a, None, clock()) {
                Verdict::Adopt(_) => return ("adopt".into(), String::new()),
                Verdict::Same => return ("same".into(), String::new()),
                Verdict::Refused(r) => (r.class, r.detail),
            },
            Doc::Group(g, _) => {
                let g = GroupName::try_from(*g).unwrap();
                match judge_group_by(&body, &g, a, None, clock()) {
                    Verdict::Adopt(_) => return ("adopt".into(), String::new()),
                    Verdict::Same => return ("same".into(), String::new()),
                    Verdict::Refused(r) => (r.class, r.detail),
                }
            }
        };
        (class.to_string(), detail)
    }

    #[test]
    fn a_delegated_key_signs_only_within_its_scope() {
        let (online, ci_a, ci_b, c1, c2, stray) = (key(), key(), key(), key(), key(), key());
        let delegations = vec![
            // Team A's CI: the documents of its groups, any module.
            delegation("team-a", &[&ci_a], 1, &["edge-eu", "edge-eu-lab"], None),
            // Team B's CI: any group's document and node documents, its
            // modules only.
            delegation("team-b", &[&ci_b], 1, &[], Some("b-")),
            // Two of three keys, a group and a prefix.
            delegation("team-c", &[&c1, &c2, &stray], 2, &["edge-c"], Some("c-")),
            // A second delegation of team A's key: never reached (the
            // first one met decides).
            delegation("team-a-wide", &[&ci_a], 1, &["edge-us"], None),
        ];
        let docs = [online.public()];
        let a = Authority {
            documents: &docs,
            delegations: &delegations,
            allow_list: None,
        };
        let g = |name: &'static str, mods: &[(&str, &str)], extra: J| {
            Doc::Group(name, group_doc(name, mods, extra))
        };
        let n = |mods: &[(&str, &str)], extra: J| Doc::Node(node_doc(mods, extra));
        let prev = |mods: &[(&str, &str)]| {
            json!({
                "rollout": {"start": format_rfc3339(T0), "duration": "1h", "salt": "x"},
                "previous": {"revision": 1, "modules": modules(mods)},
            })
        };
        let other = key();
        // (what, the document, signed by, the verdict, words of its detail)
        #[rustfmt::skip]
        let cases: Vec<(&str, Doc, Vec<&SecretKey>, &str, &str)> = vec![
            ("the document key signs any group", g("edge-us", &[("web", "a:1")], json!({})), vec![&online], "adopt", ""),
            ("the document key signs any node's document", n(&[("web", "a:1")], json!({"agent": {"version": "9.0.0", "release": "https://p/r.json"}})), vec![&online], "adopt", ""),
            ("team A's key, its group", g("edge-eu", &[("web", "a:1")], json!({})), vec![&ci_a], "adopt", ""),
            ("team A's key, its other group", g("edge-eu-lab", &[("any", "a:1")], json!({})), vec![&ci_a], "adopt", ""),
            ("team A's key, another team's group", g("edge-us", &[("web", "a:1")], json!({})), vec![&ci_a], "out-of-scope", "delegation team-a (key "),
            ("the same names the group and its groups", g("edge-us", &[("web", "a:1")], json!({})), vec![&ci_a], "out-of-scope", "group edge-us is not one of its groups (edge-eu, edge-eu-lab)"),
            ("team A's key, a node's document", n(&[("web", "a:1")], json!({})), vec![&ci_a], "out-of-scope", "a node's document is signed only by the root's document keys or a delegation with a module prefix"),
            ("team A's key, its group with an image policy", g("edge-eu", &[("web", "a:1")], json!({"images": [{"scope": "*", "require": "none"}]})), vec![&ci_a], "out-of-scope", "it carries an image policy (images)"),
            ("team B's key, a node's document with an image policy", n(&[("b-web", "a:1")], json!({"images": [{"scope": "*", "require": "none"}]})), vec![&ci_b], "out-of-scope", "only the root's document keys set one"),
            ("the document key, an image policy", g("edge-us", &[("web", "a:1")], json!({"images": [{"scope": "*", "require": "none"}]})), vec![&online], "adopt", ""),
            ("team A's key beside the document key", g("edge-us", &[("web", "a:1")], json!({})), vec![&ci_a, &online], "adopt", ""),
            ("team B's key, any group, its modules", g("edge-us", &[("b-web", "a:1"), ("b-db", "a:1")], json!({})), vec![&ci_b], "adopt", ""),
            ("team B's key, a module outside its prefix", g("edge-us", &[("b-web", "a:1"), ("web", "a:1")], json!({})), vec![&ci_b], "out-of-scope", "module web does not start with its prefix \"b-\""),
            ("team B's key, a previous module outside its prefix", g("edge-us", &[("b-web", "a:2")], prev(&[("web", "a:1")])), vec![&ci_b], "out-of-scope", "module web does not start"),
            ("team B's key, a node's document of its modules", n(&[("b-web", "a:1")], json!({})), vec![&ci_b], "adopt", ""),
            ("team B's key, a node's module outside its prefix", n(&[("b-web", "a:1"), ("web", "a:1")], json!({})), vec![&ci_b], "out-of-scope", "module web does not start"),
            ("team B's key, a node's document listing a group", n(&[("b-web", "a:1")], json!({"groups": ["edge-eu"]})), vec![&ci_b], "out-of-scope", "lists group edge-eu, not one of its groups (none)"),
            ("team B's key, a version of stead", n(&[("b-web", "a:1")], json!({"agent": {"version": "9.0.0", "release": "https://p/r.json"}})), vec![&ci_b], "out-of-scope", "asks for a version of stead"),
            ("team C, two of three, its group and prefix", g("edge-c", &[("c-web", "a:1")], json!({})), vec![&c1, &c2], "adopt", ""),
            ("team C, one of three", g("edge-c", &[("c-web", "a:1")], json!({})), vec![&c1], "unknown-key", "signed by 1 of delegation team-c's keys"),
            ("team C, the same key twice", g("edge-c", &[("c-web", "a:1")], json!({})), vec![&c1, &c1], "unknown-key", "which needs 2"),
            ("team C, another group", g("edge-eu", &[("c-web", "a:1")], json!({})), vec![&c1, &stray], "out-of-scope", "group edge-eu is not one of its groups (edge-c)"),
            ("team C, its group, a module outside its prefix", g("edge-c", &[("web", "a:1")], json!({})), vec![&c1, &c2], "out-of-scope", "module web does not start with its prefix \"c-\""),
            ("team C, a node's document in its group and prefix", n(&[("c-web", "a:1")], json!({"groups": ["edge-c"]})), vec![&c1, &c2], "adopt", ""),
            ("team C, a node's document removing another's module", n(&[("c-web", "a:1")], json!({"groups": ["edge-c"], "remove": ["web"]})), vec![&c1, &c2], "out-of-scope", "module web does not start"),
            ("team C, a node's document overriding another's module", n(&[("c-web", "a:1")], json!({"groups": ["edge-c"], "overrides": {"web": {"image": "x:1"}}})), vec![&c1, &c2], "out-of-scope", "module web does not start"),
            ("team C, a node's document in another group", n(&[("c-web", "a:1")], json!({"groups": ["edge-c", "edge-eu"]})), vec![&c1, &c2], "out-of-scope", "lists group edge-eu"),
            ("a key of no delegation", g("edge-eu", &[("web", "a:1")], json!({})), vec![&other], "unknown-key", "signed only by keys this node does not trust"),
            ("the first delegation met decides", g("edge-us", &[("web", "a:1")], json!({})), vec![&ci_a], "out-of-scope", "delegation team-a "),
        ];
        let mut failed = Vec::new();
        for (what, doc, by, want, says) in cases {
            let (got, detail) = judged(&doc, &by, a);
            if got != want || !detail.contains(says) {
                failed.push(format!(
                    "{what}: got {got} ({detail}), want {want} ({says})"
                ));
            }
        }
        assert!(failed.is_empty(), "{}", failed.join("\n"));
        // The refusal names the key that signed.
        let (_, detail) = judged(&g("edge-us", &[("web", "a:1")], json!({})), &[&ci_a], a);
        assert!(detail.contains(ci_a.public().id().as_str()), "{detail}");
        // A delegated key's signature moved onto another payload counts
        // for nothing.
        let good = sign(&g("edge-eu", &[("web", "a:1")], json!({})), &[&ci_a]);
        let mut env = Envelope::parse(&good).unwrap();
        env.payload = group_doc("edge-eu", &[("web", "b:1")], json!({}));
        let eu = GroupName::try_from("edge-eu").unwrap();
        match judge_group_by(&env.to_json(), &eu, a, None, clock()) {
            Verdict::Refused(r) => assert_eq!(r.class, RefusalClass::UnknownKey, "{}", r.detail),
            v => panic!("{v:?}"),
        }
    }

    #[test]
    fn every_image_is_pinned_and_listed_when_the_root_asks_for_a_list() {
        let (online, ci) = (key(), key());
        let delegations = vec![delegation("team-a", &[&ci], 1, &["edge-eu"], None)];
        let docs = [online.public()];
        let hex = |c: char| std::iter::repeat_n(c, 64).collect::<String>();
        let (da, db, dc) = (
            format!("sha256:{}", hex('a')),
            format!("sha256:{}", hex('b')),
            format!("sha256:{}", hex('c')),
        );
        let listed = |e: &[String], expires: u64| {
            let l: Vec<Listed> = e.iter().map(|t| Listed::parse(t).unwrap()).collect();
            AllowList::parse(&AllowList::payload(4, expires, &l)).unwrap()
        };
        let list = listed(
            &[da.clone(), format!("registry.example/app@{db}")],
            T0 + DAY,
        );
        let expired = listed(std::slice::from_ref(&da), T0 - 1);
        let (list, expired) = (&list, &expired);
        let pinned = format!("busybox@{da}");
        let app = format!("registry.example/app@{db}");
        let unlisted = format!("busybox@{dc}");
        let g = |mods: &[(&str, &str)], extra: J| {
            Doc::Group("edge-eu", group_doc("edge-eu", mods, extra))
        };
        let n = |mods: &[(&str, &str)], extra: J| Doc::Node(node_doc(mods, extra));
        let prev = |mods: &[(&str, &str)]| {
            json!({
                "rollout": {"start": format_rfc3339(T0), "duration": "1h", "salt": "x"},
                "previous": {"revision": 1, "modules": modules(mods)},
            })
        };
        // (what, the document, signed by, the list asked for and held, the
        //  verdict, words of its detail)
        type Case<'a> = (
            &'a str,
            Doc,
            &'a SecretKey,
            Option<Option<&'a AllowList>>,
            &'a str,
            &'a str,
        );
        #[rustfmt::skip]
        let cases: Vec<Case> = vec![
            ("no list asked for: a tag runs", n(&[("web", "busybox:1")], json!({})), &online, None, "adopt", ""),
            ("a listed digest", n(&[("web", &pinned)], json!({})), &online, Some(Some(list)), "adopt", ""),
            ("a digest listed with its repository", n(&[("web", &app)], json!({})), &online, Some(Some(list)), "adopt", ""),
            ("a delegated key, a listed digest", g(&[("web", &pinned)], json!({})), &ci, Some(Some(list)), "adopt", ""),
            ("a tag: not pinned", n(&[("web", "busybox:1")], json!({})), &online, Some(Some(list)), "unlisted-image", "module web: image \"busybox:1\": is not pinned by digest"),
            ("a digest not listed, by the online key", n(&[("web", &unlisted)], json!({})), &online, Some(Some(list)), "unlisted-image", "of docker.io/library/busybox is not in the allow-list (version 4)"),
            ("a digest not listed, by a delegated key", g(&[("web", &pinned), ("db", &unlisted)], json!({})), &ci, Some(Some(list)), "unlisted-image", "module db: image"),
            ("a listed digest from another repository", n(&[("web", &format!("registry.example/other@{db}"))], json!({})), &online, Some(Some(list)), "unlisted-image", "is not in the allow-list"),
            ("an override's image not listed", n(&[("web", &pinned)], json!({"groups": ["edge-eu"], "overrides": {"db": {"image": unlisted.clone()}}})), &online, Some(Some(list)), "unlisted-image", "module db: image"),
            ("a previous revision's image not listed", g(&[("web", &pinned)], prev(&[("web", &unlisted)])), &online, Some(Some(list)), "unlisted-image", "module web: image"),
            ("a list asked for, none held", n(&[("web", &pinned)], json!({})), &online, Some(None), "unlisted-image", "no allow-list is held"),
            ("the list held has expired", n(&[("web", &pinned)], json!({})), &online, Some(Some(expired)), "unlisted-image", "allow-list version 4 expired at"),
            ("no image, no list needed", n(&[], json!({})), &online, Some(None), "adopt", ""),
            ("out of scope is said before the images", Doc::Group("edge-us", group_doc("edge-us", &[("web", &unlisted)], json!({}))), &ci, Some(Some(list)), "out-of-scope", "group edge-us"),
        ];
        let mut failed = Vec::new();
        for (what, doc, by, l, want, says) in cases {
            let a = Authority {
                documents: &docs,
                delegations: &delegations,
                allow_list: l,
            };
            let (got, detail) = judged(&doc, &[by], a);
            if got != want || !detail.contains(says) {
                failed.push(format!(
                    "{what}: got {got} ({detail}), want {want} ({says})"
                ));
            }
        }
        assert!(failed.is_empty(), "{}", failed.join("\n"));
    }
}
