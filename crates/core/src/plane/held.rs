//! What the node holds from the plane, as one value ([`Held`]): the node's
//! document (its record, whether it still stands as the floor, its
//! validators), its groups' documents and how they stand, the last
//! contact and refusal, what the poller follows of the held document (its
//! poll settings and report URL), the state of the look at the plane's
//! root, and the time the node counts on its own. Its transitions are pure
//! functions that change it and say what to store ([`Held::contacted`]),
//! and what each look at the plane came to is one [`Heard`];
//! the status the API and the reports show is derived from it (the
//! device's `stead::plane::sync::PlaneStatus::show`); the poller only does
//! the I/O. The plain records it is made of, which the device's store
//! keeps and re-exports, are here too: a group's document held
//! ([`StoredGroup`]), the last contact ([`Contact`]) and the last refusal
//! ([`Refusal`]); the node's document's is
//! [`crate::plane::accept::Held`]. No clock is read here: the monotonic
//! instant (`at`) and the clock as read ([`Clock`]) are passed in.

use crate::model::sort::Insert as _;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::model::fleet::{GroupName, Take};
use crate::model::names::Digest;
use crate::model::refusal::RefusalClass;
use crate::plane::accept::{Clock, ClockStatus, Held as Record};
use crate::plane::document::Poll;
use crate::plane::group::GroupStanding;

/// A group document the node holds: its record, its bytes as fetched, and
/// the digest of its modules when this node took them (runs or ran them: a
/// staged rollout never takes them back by itself).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredGroup {
    pub held: Record,
    pub envelope: Vec<u8>,
    pub took: Option<Digest>,
}

/// Why the last document fetched was not adopted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// Its class.
    pub class: RefusalClass,
    /// What was wrong, in a sentence.
    pub detail: String,
    /// The revision the document said, when it could be read.
    pub revision: Option<u64>,
    /// When.
    pub at: u64,
}

/// What the last contact with the plane said.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Contact {
    /// When the plane last answered (any HTTP answer), seconds since the epoch.
    pub at: Option<u64>,
    /// The last refusal, until a document is adopted again or the same one
    /// is served.
    pub refusal: Option<Refusal>,
    /// The last failure to get an answer (or an answer that was an error),
    /// while it holds.
    pub error: Option<String>,
    /// The plane's clock (its `Date` header) at the last answer.
    pub plane_date: Option<u64>,
}

/// What one look at the node's document came to, as the last contact
/// keeps it ([`Contact::hear`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Heard {
    /// The plane answered (any HTTP status) at `at`, its clock saying
    /// `date` (its `Date` header, when it sent one that reads).
    Answered { at: u64, date: Option<u64> },
    /// The answer brings nothing wrong: nothing new (304), or a document to
    /// judge (200).
    Fine,
    /// No answer, an answer that is an error, or a document that could not
    /// be adopted: why, until the next answer without one.
    Failed(String),
    /// An answer over the size limit at `at`: refused, without its headers.
    TooLarge { at: u64, refusal: Refusal },
    /// What was served is refused: said until a document stands again.
    Refused(Refusal),
    /// A document stands: the held one served again, or a new one adopted.
    Stands,
}

impl Contact {
    /// The contact after `heard`: each case changes only what it says.
    pub fn hear(&mut self, heard: Heard) {
        match heard {
            Heard::Answered { at, date } => {
                self.at = Some(at);
                self.plane_date = date;
            }
            Heard::Fine => self.error = None,
            Heard::Failed(error) => self.error = Some(error),
            Heard::TooLarge { at, refusal } => {
                self.at = Some(at);
                self.error = None;
                self.refusal = Some(refusal);
            }
            Heard::Refused(refusal) => self.refusal = Some(refusal),
            Heard::Stands => self.refusal = None,
        }
    }
}

/// How often a contact that says nothing new is written all the same (a
/// poll that says nothing new is not an fsync: wear for nothing).
pub const CONTACT_REFRESH: Duration = Duration::from_secs(3600);

/// How long a plane found to publish no root is not asked for one again.
pub const ROOT_ABSENT_RECHECK: Duration = Duration::from_secs(3600);

/// What the node holds from the plane.
#[derive(Clone, Debug, Default)]
pub struct Held {
    /// The node's document held: its record (not its bytes).
    pub node: Option<Record>,
    /// Why `node` no longer stands as the floor, judged with the keys
    /// trusted now; cleared when a document is adopted.
    pub revoked: Option<String>,
    /// The `Last-Modified` the held document was last served with, for a
    /// host that sends no ETag (this run only: the first poll after a
    /// start is a whole fetch there).
    pub last_modified: Option<String>,
    /// The last contact.
    pub contact: Contact,
    /// The contact last written, and when.
    pub persisted: Option<(Contact, Instant)>,
    /// The held document's poll settings and report URL, while it stands
    /// and is followed.
    pub followed: Option<(Poll, Option<String>)>,
    /// The groups the held document lists, in its order.
    pub node_groups: Vec<GroupName>,
    /// Per group held: its record and the digest of the modules of it this
    /// node took (the bytes stay in the store until a composition reads
    /// them).
    pub groups: BTreeMap<GroupName, (Record, Option<Digest>)>,
    /// How each listed group stood at the last composition.
    pub standings: Vec<GroupStanding>,
    /// The ETag `root.json` was last served with.
    pub root_etag: Option<String>,
    /// When the plane was found to publish no root (404, or 403): asked
    /// again [`ROOT_ABSENT_RECHECK`] later, not at every poll.
    pub root_absent: Option<Instant>,
    /// What the last 403 to a root's GET said, for the status.
    pub root_forbidden: Option<String>,
    /// Why the plane's newer root was not taken, or that the one held has
    /// expired, while so (documents are judged by the root held).
    pub root_error: Option<String>,
    /// Per group, the `Last-Modified` a host without ETags sent with a
    /// revision (this run only).
    pub group_last_modified: BTreeMap<GroupName, (u64, String)>,
    /// Why the last look at a group brought nothing, by group, and the
    /// refusal when it was one.
    pub group_errors: BTreeMap<GroupName, (String, Option<Refusal>)>,
    /// Per group composed last, its document's bytes and the modules it
    /// lists: what a held one takes of the limits a new revision of
    /// another is fetched under.
    pub group_sizes: BTreeMap<GroupName, (usize, usize)>,
    /// The same of the node's document composed last.
    pub node_size: (usize, usize),
    /// Why a group's document held no longer stands as its floor, by
    /// group; cleared when one is adopted.
    pub group_revoked: BTreeMap<GroupName, String>,
    /// A floor of "now" that stood, and when: the time the node counts on
    /// its own from there ([`Clock::counted`]).
    pub counted_from: Option<(u64, Instant)>,
    /// The clock, as judged at the last judgement of a node's document.
    pub clock: Option<ClockStatus>,
    /// Modules the held document names that another source owns, and
    /// which source.
    pub conflicts: Vec<(String, String)>,
    /// When the next poll is due, seconds since the epoch.
    pub next_poll_at: Option<u64>,
    /// How many polls of this process the plane answered with a document
    /// taken (adopted, the same, not modified): never stored, so it is
    /// this process's own (a candidate's proof).
    pub taken_here: u64,
}

/// What to store of a contact: the held document's record when it
/// changed, and the contact.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContactWrite {
    pub held: Option<Record>,
    pub contact: Contact,
}

/// What one look at a group's document brought, as [`Held`] keeps it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GroupLooked {
    /// A new revision or the held one stands: no error.
    Fine,
    /// Nothing usable, and why; what is held (if anything) stands.
    Not(String, Option<Refusal>),
}

/// Whether two contacts say the same but for their times.
fn same_but_times(a: &Contact, b: &Contact) -> bool {
    a.refusal == b.refusal && a.error == b.error
}

impl Held {
    /// What the store holds, read at start (`at`: the contact read counts
    /// as written then).
    pub fn loaded(
        node: Option<Record>,
        contact: Contact,
        groups: BTreeMap<GroupName, StoredGroup>,
        at: Instant,
    ) -> Held {
        Held {
            node,
            persisted: Some((contact.clone(), at)),
            contact,
            groups: groups
                .into_iter()
                .map(|(name, g)| (name, (g.held, g.took)))
                .into_map(),
            ..Held::default()
        }
    }

    /// The node's document the judgement stands on: the one held, unless
    /// it no longer stands as the floor.
    pub fn standing(&self) -> Option<&Record> {
        self.node.as_ref().filter(|_| self.revoked.is_none())
    }

    /// The clock as `read`, with the time counted since the floor it
    /// counts from.
    pub fn clock(&self, mut read: Clock, at: Instant) -> Clock {
        if let Some((from, since)) = self.counted_from {
            read.counted = from.saturating_add(at.saturating_duration_since(since).as_secs());
        }
        read
    }

    /// Counts on from `floor`, a floor of "now" a document just raised,
    /// when it is past what was counted. No floor is past the ceiling it
    /// was raised under, so what is counted stays within the bound.
    fn count_from(&mut self, floor: u64, read: Clock, at: Instant) {
        if floor > self.clock(read, at).counted {
            self.counted_from = Some((floor, at));
        }
    }

    /// Now, as the agent can tell (never earlier than its build or any
    /// document it accepted): a rollout's clock. `node` is the node's
    /// document that stands as the floor, if any; the groups' that stand
    /// are added.
    pub fn now(&self, node: Option<&Record>, read: Clock, at: Instant) -> u64 {
        let groups = self
            .groups
            .iter()
            .filter(|(name, _)| !self.group_revoked.contains_key(*name))
            .map(|(_, (h, _))| h.newest_issued_at)
            .max();
        self.clock(read, at).now(node).max(groups.unwrap_or(0))
    }

    /// When the groups are to be looked at again without a new document:
    /// a rollout reaching this node, while one waits for its turn, or a
    /// download window opening or closing meanwhile.
    pub fn next_turn(&self) -> Option<u64> {
        self.standings
            .iter()
            .flat_map(|s| {
                let turn = match s.take {
                    Some(Take::Previous { until, .. }) => until,
                    _ => None,
                };
                [turn, s.ahead_edge]
            })
            .flatten()
            .min()
    }

    /// Keeps `contact` (and `record`, the held document's with new
    /// validators, when given) and says what to store: the record when
    /// given, the contact when it says something new or was last written
    /// [`CONTACT_REFRESH`] ago; nothing otherwise. Once stored,
    /// [`Held::kept`] says so.
    pub fn contacted(
        &mut self,
        record: Option<&Record>,
        contact: &Contact,
        at: Instant,
    ) -> Option<ContactWrite> {
        if let Some(h) = record {
            self.node = Some(h.clone());
        }
        self.contact = contact.clone();
        let write = record.is_some()
            || self.persisted.as_ref().is_none_or(|(c, when)| {
                !same_but_times(c, contact)
                    || at.saturating_duration_since(*when) >= CONTACT_REFRESH
            });
        write.then(|| ContactWrite {
            held: record.cloned(),
            contact: contact.clone(),
        })
    }

    /// `contact` was stored at `at`.
    pub fn kept(&mut self, contact: Contact, at: Instant) {
        self.persisted = Some((contact, at));
    }

    /// A document was adopted (and stored, with `contact`): it is the
    /// floor, followed (`followed`, listing `groups`), and "now" counts on
    /// from its time.
    #[allow(clippy::too_many_arguments)]
    pub fn adopted(
        &mut self,
        record: Record,
        contact: Contact,
        last_modified: Option<String>,
        followed: (Poll, Option<String>),
        groups: Vec<GroupName>,
        read: Clock,
        at: Instant,
    ) {
        self.count_from(record.newest_issued_at, read, at);
        self.node = Some(record);
        self.revoked = None;
        self.last_modified = last_modified;
        self.persisted = Some((contact.clone(), at));
        self.contact = contact;
        self.followed = Some(followed);
        self.node_groups = groups;
    }

    /// The floors were judged under the keys in force: why the node's
    /// document (`revoked`) and each group's (`group_revoked`) no longer
    /// stand, when so. "Now" counts from the newest time of those that
    /// stand. Returns whether the node's document newly stopped standing:
    /// its poll settings, report URL and agent are then no longer followed.
    pub fn floors_judged(
        &mut self,
        revoked: Option<String>,
        group_revoked: BTreeMap<GroupName, String>,
        at: Instant,
    ) -> bool {
        let newly = revoked.is_some() && self.revoked.is_none();
        self.revoked = revoked;
        self.group_revoked = group_revoked;
        let floor = self
            .standing()
            .map(|h| h.newest_issued_at)
            .into_iter()
            .chain(
                self.groups
                    .iter()
                    .filter(|(n, _)| !self.group_revoked.contains_key(*n))
                    .map(|(_, (h, _))| h.newest_issued_at),
            );
        self.counted_from = Some((floor.max().unwrap_or(0), at));
        if newly {
            self.followed = None;
        }
        newly
    }

    /// A composition wrote `writes` (stored) and the groups stand as
    /// `standings`. A group's document other than the one held (only a key
    /// in force signs one taken) is its floor again, and "now" counts on
    /// from its time.
    pub fn composed<'a>(
        &mut self,
        writes: impl IntoIterator<Item = &'a (GroupName, StoredGroup)>,
        standings: Vec<GroupStanding>,
        read: Clock,
        at: Instant,
    ) {
        for (name, st) in writes {
            let same = self.groups.get(name).is_some_and(|(h, _)| {
                h.payload_digest == st.held.payload_digest && h.key_id == st.held.key_id
            });
            if !same {
                self.group_revoked.remove(name);
                self.count_from(st.held.newest_issued_at, read, at);
            }
            self.groups
                .insert(name.clone(), (st.held.clone(), st.took.clone()));
        }
        self.standings = standings;
    }

    /// What a look at group `name`'s document brought.
    pub fn group_looked(&mut self, name: &GroupName, looked: GroupLooked) {
        match looked {
            GroupLooked::Fine => {
                self.group_errors.remove(name);
            }
            GroupLooked::Not(why, refusal) => {
                self.group_errors.insert(name.clone(), (why, refusal));
            }
        }
    }

    /// Group `name`'s held document was served again (the same payload)
    /// from `url` with `etag` and `last_modified`: asked with them next
    /// time.
    pub fn group_served_again(
        &mut self,
        name: &GroupName,
        url: &str,
        etag: Option<String>,
        last_modified: Option<String>,
    ) {
        let mut held_revision = None;
        if let Some((h, _)) = self.groups.get_mut(name) {
            h.etag = etag;
            h.url = url.to_string();
            held_revision = Some(h.revision);
        }
        self.group_fetched(name, held_revision, last_modified);
    }

    /// Group `name`'s document at `revision` was fetched with
    /// `last_modified`: it counts for that revision only.
    pub fn group_fetched(
        &mut self,
        name: &GroupName,
        revision: Option<u64>,
        last_modified: Option<String>,
    ) {
        match (revision, last_modified) {
            (Some(r), Some(lm)) => {
                self.group_last_modified.insert(name.clone(), (r, lm));
            }
            _ => {
                self.group_last_modified.remove(name);
            }
        }
    }

    /// The `Last-Modified` to ask group `name`'s document with, when it
    /// was sent with the revision `held`.
    pub fn group_since(&self, name: &GroupName, held: u64) -> Option<String> {
        self.group_last_modified
            .get(name)
            .filter(|(revision, _)| *revision == held)
            .map(|(_, lm)| lm.clone())
    }

    /// A composition of the held document with its groups was refused
    /// (`r`): each group it names keeps the refusal as its error.
    pub fn groups_refused(&mut self, r: &Refusal) {
        for name in &self.node_groups {
            if r.detail.contains(&format!("group {name}")) {
                self.group_errors
                    .insert(name.clone(), (r.detail.clone(), Some(r.clone())));
            }
        }
    }

    /// Whether the plane's root is to be asked for at `at`: not within
    /// [`ROOT_ABSENT_RECHECK`] of finding it has none.
    pub fn root_due(&self, at: Instant) -> bool {
        self.root_absent
            .is_none_or(|since| at.saturating_duration_since(since) >= ROOT_ABSENT_RECHECK)
    }

    /// The plane publishes no root (found at `at`); returns what a 403
    /// said of it, for the status.
    pub fn root_not_published(&mut self, at: Instant) -> Option<String> {
        self.root_absent = Some(at);
        self.root_forbidden.take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::fleet::Why;

    fn record(revision: u64, newest: u64, key: &str) -> Record {
        Record {
            url: "u".into(),
            revision,
            payload_digest: Digest::of(format!("{revision}").as_bytes()),
            etag: None,
            issued_at: newest,
            expires: newest + 100,
            newest_issued_at: newest,
            accepted_at: newest,
            key_id: key.into(),
        }
    }

    fn group(s: &str) -> GroupName {
        GroupName::try_from(s).unwrap()
    }

    fn refusal(detail: &str) -> Refusal {
        Refusal {
            class: RefusalClass::Rollback,
            detail: detail.into(),
            revision: None,
            at: 1,
        }
    }

    const CLOCK: Clock = Clock {
        system: 1_000,
        build: 500,
        counted: 0,
    };

    #[test]
    fn what_is_heard_changes_only_what_it_says() {
        let r = refusal("r");
        let before = Contact {
            at: Some(1),
            refusal: Some(refusal("old")),
            error: Some("e".into()),
            plane_date: Some(2),
        };
        let with = |f: fn(&mut Contact)| {
            let mut c = before.clone();
            f(&mut c);
            c
        };
        let cases: Vec<(&str, Heard, Contact)> = vec![
            (
                "answered",
                Heard::Answered {
                    at: 9,
                    date: Some(8),
                },
                with(|c| (c.at, c.plane_date) = (Some(9), Some(8))),
            ),
            (
                "answered, no date",
                Heard::Answered { at: 9, date: None },
                with(|c| (c.at, c.plane_date) = (Some(9), None)),
            ),
            ("fine", Heard::Fine, with(|c| c.error = None)),
            (
                "failed",
                Heard::Failed("f".into()),
                with(|c| c.error = Some("f".into())),
            ),
            (
                "too large",
                Heard::TooLarge {
                    at: 9,
                    refusal: r.clone(),
                },
                with(|c| (c.at, c.error, c.refusal) = (Some(9), None, Some(refusal("r")))),
            ),
            (
                "refused",
                Heard::Refused(r.clone()),
                with(|c| c.refusal = Some(refusal("r"))),
            ),
            ("stands", Heard::Stands, with(|c| c.refusal = None)),
        ];
        for (name, heard, after) in cases {
            let mut c = before.clone();
            c.hear(heard);
            assert_eq!(c, after, "{name}");
        }
    }

    #[test]
    fn a_contact_is_stored_when_it_says_something_new_or_hourly() {
        let t0 = Instant::now();
        let hour = CONTACT_REFRESH;
        let quiet = Contact {
            at: Some(10),
            ..Contact::default()
        };
        let later = Contact {
            at: Some(20),
            ..Contact::default()
        };
        let failing = Contact {
            error: Some("HTTP 500".into()),
            ..later.clone()
        };
        let refused = Contact {
            refusal: Some(refusal("rollback")),
            ..later.clone()
        };
        // (what, written before, the record given, the contact, after,
        //  stored)
        type Case<'a> = (
            &'a str,
            Option<&'a Contact>,
            bool,
            &'a Contact,
            Duration,
            bool,
        );
        #[rustfmt::skip]
        let cases: Vec<Case> = vec![
            ("nothing written yet", None, false, &quiet, Duration::ZERO, true),
            ("the same but its time", Some(&quiet), false, &later, Duration::from_secs(60), false),
            ("the same, an hour on", Some(&quiet), false, &later, hour, true),
            ("an error now", Some(&quiet), false, &failing, Duration::from_secs(60), true),
            ("a refusal now", Some(&quiet), false, &refused, Duration::from_secs(60), true),
            ("the error gone", Some(&failing), false, &later, Duration::from_secs(60), true),
            ("new validators of the held", Some(&quiet), true, &later, Duration::from_secs(1), true),
        ];
        for (what, before, with_record, contact, after, stored) in cases {
            let mut h = Held {
                persisted: before.map(|c| (c.clone(), t0)),
                node: Some(record(1, 100, "k")),
                ..Held::default()
            };
            let mut new = record(1, 100, "k");
            new.etag = Some("\"e2\"".into());
            let given = with_record.then_some(&new);
            let w = h.contacted(given, contact, t0 + after);
            assert_eq!(w.is_some(), stored, "{what}");
            if let Some(w) = w {
                assert_eq!(&w.contact, contact, "{what}");
                assert_eq!(w.held.as_ref(), given, "{what}");
            }
            assert_eq!(&h.contact, contact, "{what}: kept in memory all the same");
            let etag = h.node.as_ref().and_then(|n| n.etag.clone());
            assert_eq!(etag.is_some(), with_record, "{what}");
        }
    }

    #[test]
    fn floors_judged_say_what_stands_and_count_from_the_newest_that_does() {
        let t0 = Instant::now();
        let (a, b) = (group("a"), group("b"));
        let base = || Held {
            node: Some(record(3, 300, "k")),
            groups: BTreeMap::from([
                (a.clone(), (record(1, 500, "k"), None)),
                (b.clone(), (record(1, 200, "k"), None)),
            ]),
            followed: Some((
                Poll {
                    interval: Duration::from_secs(60),
                    jitter: Duration::ZERO,
                },
                None,
            )),
            ..Held::default()
        };
        let why = || Some("no key trusted now signed it".to_string());
        let only = |g: &GroupName| BTreeMap::from([(g.clone(), "revoked".to_string())]);
        // (what, revoked before, revoked now, groups revoked now, newly,
        //  counted from, followed after)
        type Case<'a> = (
            &'a str,
            Option<String>,
            Option<String>,
            BTreeMap<GroupName, String>,
            bool,
            u64,
            bool,
        );
        #[rustfmt::skip]
        let cases: Vec<Case> = vec![
            ("all stand: the newest group's time", None, None, BTreeMap::new(), false, 500, true),
            ("group a revoked: the node's", None, None, only(&a), false, 300, true),
            ("the node's newly revoked", None, why(), BTreeMap::new(), true, 500, false),
            ("the node's revoked before", why(), why(), BTreeMap::new(), false, 500, true),
            ("the node's and a revoked", None, why(), only(&a), true, 200, false),
            ("the node's standing again", why(), None, BTreeMap::new(), false, 500, true),
        ];
        for (what, before, now, groups, newly, from, followed) in cases {
            let mut h = Held {
                revoked: before,
                ..base()
            };
            assert_eq!(h.floors_judged(now.clone(), groups, t0), newly, "{what}");
            assert_eq!(h.counted_from, Some((from, t0)), "{what}");
            assert_eq!(h.followed.is_some(), followed, "{what}");
            assert_eq!(h.standing().is_some(), now.is_none(), "{what}");
        }
        // Nothing held: "now" counts from 0.
        let mut h = Held::default();
        assert!(!h.floors_judged(None, BTreeMap::new(), t0));
        assert_eq!(h.counted_from, Some((0, t0)));
    }

    #[test]
    fn a_composition_gives_a_group_its_floor_again_only_for_another_document() {
        let t0 = Instant::now();
        let a = group("a");
        let stored = |r: Record| StoredGroup {
            held: r,
            envelope: vec![],
            took: None,
        };
        // (what, the record written, revoked after, counted from)
        #[rustfmt::skip]
        let cases: Vec<(&str, Record, bool, Option<u64>)> = vec![
            ("the same document (a took changed)", record(1, 100, "old"), true, None),
            ("the same payload under another key", record(1, 100, "new"), false, Some(100)),
            ("a new revision", record(2, 2_000, "new"), false, Some(2_000)),
            ("a new revision older than counted", record(2, 50, "new"), false, None),
        ];
        for (what, written, revoked, counted) in cases {
            let mut h = Held {
                groups: BTreeMap::from([(a.clone(), (record(1, 100, "old"), None))]),
                group_revoked: BTreeMap::from([(a.clone(), "revoked".into())]),
                counted_from: Some((60, t0)),
                ..Held::default()
            };
            let writes = [(a.clone(), stored(written.clone()))];
            h.composed(&writes, vec![], CLOCK, t0);
            assert_eq!(h.group_revoked.contains_key(&a), revoked, "{what}");
            assert_eq!(h.groups[&a].0, written, "{what}");
            let want = counted.map_or((60, t0), |c| (c, t0));
            assert_eq!(h.counted_from, Some(want), "{what}");
        }
    }

    #[test]
    fn an_adopted_document_is_the_floor_and_now_counts_on_from_it() {
        let t0 = Instant::now();
        let mut h = Held {
            node: Some(record(1, 100, "k")),
            revoked: Some("revoked".into()),
            counted_from: Some((100, t0)),
            ..Held::default()
        };
        let poll = Poll {
            interval: Duration::from_secs(30),
            jitter: Duration::ZERO,
        };
        let contact = Contact {
            at: Some(900),
            ..Contact::default()
        };
        let later = t0 + Duration::from_secs(10);
        h.adopted(
            record(2, 800, "k"),
            contact.clone(),
            Some("Tue".into()),
            (poll, Some("r".into())),
            vec![group("a")],
            CLOCK,
            later,
        );
        assert_eq!(h.standing().map(|r| r.revision), Some(2));
        assert_eq!(h.counted_from, Some((800, later)));
        assert_eq!(h.persisted, Some((contact.clone(), later)));
        assert_eq!(h.contacted(None, &contact, later), None, "kept as stored");
        assert_eq!(h.followed, Some((poll, Some("r".into()))));
        assert_eq!(h.node_groups, vec![group("a")]);
        // The clock counts on from there; a floor below what is counted
        // does not move it back.
        let c = h.clock(CLOCK, later + Duration::from_secs(5));
        assert_eq!(c.counted, 805);
        h.count_from(700, CLOCK, later + Duration::from_secs(5));
        assert_eq!(h.counted_from, Some((800, later)));
    }

    #[test]
    fn groups_looks_now_and_turns() {
        let t0 = Instant::now();
        let (a, b) = (group("a"), group("b"));
        let mut h = Held {
            node_groups: vec![a.clone(), b.clone()],
            groups: BTreeMap::from([
                (a.clone(), (record(4, 5_000, "k"), None)),
                (b.clone(), (record(1, 9_000, "k"), None)),
            ]),
            group_revoked: BTreeMap::from([(b.clone(), "revoked".into())]),
            ..Held::default()
        };
        // "Now": the groups that stand, the node's given, the clock.
        // (what, the node's, now)
        let node = record(1, 6_000, "k");
        #[rustfmt::skip]
        let cases: Vec<(&str, Option<&Record>, u64)> = vec![
            ("group a stands, b is revoked", None, 5_000),
            ("the node's is later", Some(&node), 6_000),
        ];
        for (what, n, now) in cases {
            assert_eq!(h.now(n, CLOCK, t0), now, "{what}");
        }
        // A look's error is kept until a look brings something.
        h.group_looked(&a, GroupLooked::Not("group a: HTTP 500".into(), None));
        assert!(h.group_errors.contains_key(&a));
        h.group_looked(&a, GroupLooked::Fine);
        assert!(h.group_errors.is_empty());
        // A refused composition names its group.
        h.groups_refused(&refusal("group b: over the limits"));
        assert_eq!(h.group_errors.keys().collect::<Vec<_>>(), vec![&b]);
        // Validators: a Last-Modified counts for its revision only.
        h.group_served_again(&a, "v", Some("\"e\"".into()), Some("Mon".into()));
        assert_eq!(h.groups[&a].0.etag.as_deref(), Some("\"e\""));
        assert_eq!(h.group_since(&a, 4).as_deref(), Some("Mon"));
        assert_eq!(h.group_since(&a, 5), None);
        h.group_fetched(&a, Some(5), None);
        assert_eq!(h.group_since(&a, 4), None);
        // The next turn is the earliest a rollout waits for.
        let standing = |until| GroupStanding {
            group: a.clone(),
            revision: 2,
            running: 1,
            take: Some(Take::Previous {
                why: Why::Turn,
                until,
            }),
            taken: None,
            ahead_edge: None,
            out: None,
        };
        h.standings = vec![standing(Some(700)), standing(None), standing(Some(600))];
        assert_eq!(h.next_turn(), Some(600));
        // A download window opening before it is looked at then.
        h.standings[1].ahead_edge = Some(550);
        assert_eq!(h.next_turn(), Some(550));
        // A plane without a root is asked again an hour on.
        h.root_forbidden = Some("HTTP 403".into());
        assert!(h.root_due(t0));
        assert_eq!(h.root_not_published(t0).as_deref(), Some("HTTP 403"));
        assert!(!h.root_due(t0 + Duration::from_secs(60)));
        assert!(h.root_due(t0 + ROOT_ABSENT_RECHECK));
    }
}
