//! The one holder of the node's trust, as TUF's `TrustedMetadataSet`: the
//! root held ([`crate::plane::root`]: the config's `trusted_keys` as version
//! 0 until the plane's is taken), the document keys it names, the keys
//! that sign release statements besides them (`[update] trusted_keys`),
//! and the floors they imply ([`accept::still_stands`]). It is the only
//! thing that verifies a node's document, a group's document, a release
//! statement or a next root; the plane's poller and the updater are handed
//! it and do the I/O, and the operator's tool (`stead-plane root verify`,
//! `publish`, `rollout watch`) takes each root of a site's chain by it
//! too, so the publisher's check and the device's walk are one rule. Pure: no clock is read (times and the agent's
//! [`Clock`] are passed in), no file or network is touched; the walk of
//! the root chain ([`TrustedSet::walk`]) is handed its fetches and its
//! keeping as functions, and is bounded per poll ([`MAX_ROOTS_PER_POLL`]).

use std::future::Future;

use crate::model::names::NodeId;
use crate::model::release::{self, Release};
use crate::model::time::format_rfc3339;
use crate::plane::accept::{self, Authority, Clock, Floor, Held, Verdict};
use crate::plane::allowlist::{self, AllowList, AllowListError};
use crate::plane::document::Desired;
use crate::plane::envelope::{self, Envelope, PublicKey};
use crate::plane::group::{GroupDesired, GroupName};
use crate::plane::root::{self, Root, RootError};

/// The most roots one poll walks: a plane many versions ahead is followed
/// over several polls, never by one unbounded run of fetches.
pub const MAX_ROOTS_PER_POLL: u64 = 16;

/// What the node trusts, and nothing else does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TrustedSet {
    /// The root held.
    root: Root,
    /// Keys that sign release statements only (`[update] trusted_keys`),
    /// besides the root's document keys.
    release_keys: Vec<PublicKey>,
    /// The allow-list taken under the root's allow-list role, with its
    /// envelope (kept in the store as fetched).
    allow_list: Option<(AllowList, Vec<u8>)>,
}

/// What one walk of the root chain did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Walked {
    /// The set after it (the one it started from when nothing was taken).
    pub trusted: TrustedSet,
    /// The roots taken, in order (each kept before the next was looked at).
    pub taken: Vec<Root>,
    /// Why it stopped short of the plane's newest root, when it did for a
    /// fault (what was taken before stays taken).
    pub error: Option<String>,
    /// Whether it reached the plane's newest root (false when it stopped
    /// for an error or at [`MAX_ROOTS_PER_POLL`]: walked on at the next
    /// poll).
    pub complete: bool,
}

/// What the walk does next, from the version held, the version the plane's
/// newest root says and how many were taken this poll.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WalkStep {
    /// Nothing newer: the walk is done.
    Done,
    /// The next version is the newest: the bytes in hand are it.
    Newest(u64),
    /// The next version is `roots/<version>.json`, to be fetched.
    Fetch(u64),
    /// As many as one poll walks were taken: the rest at the next.
    Paused,
}

/// The walk's next step ([`WalkStep`]): one version at a time, never
/// skipping one, never going back, at most [`MAX_ROOTS_PER_POLL`] a poll.
pub fn walk_step(held: u64, said: u64, taken: u64) -> WalkStep {
    if held >= said {
        WalkStep::Done
    } else if taken >= MAX_ROOTS_PER_POLL {
        WalkStep::Paused
    } else if held + 1 == said {
        WalkStep::Newest(said)
    } else {
        WalkStep::Fetch(held + 1)
    }
}

/// What the status says of the root after a look at the plane's: the
/// walk's error as it stands (`said`), then the expiry (`expired`,
/// [`TrustedSet::expiry`]) when nothing else is wrong; an expiry said
/// before is cleared once the root held is no longer expired.
pub fn root_error(said: Option<String>, expired: Option<String>) -> Option<String> {
    match (expired, said) {
        (Some(e), None) => Some(e),
        (None, Some(e)) if e.contains(" expired at ") => None,
        (_, said) => said,
    }
}

impl TrustedSet {
    /// The first set: the config's `trusted_keys` as root version 0.
    pub fn new(config_keys: &[PublicKey]) -> TrustedSet {
        TrustedSet {
            root: Root::initial(config_keys),
            release_keys: Vec::new(),
            allow_list: None,
        }
    }

    /// With `keys` trusted for release statements besides the root's
    /// document keys.
    pub fn with_release_keys(mut self, keys: Vec<PublicKey>) -> TrustedSet {
        self.release_keys = keys;
        self
    }

    /// With the root kept in the store (its envelope, taken and so
    /// verified before it was kept): read again, not verified again. The
    /// error says why it does not read; the set is then unchanged.
    pub fn resume(&mut self, kept: &[u8]) -> Result<(), String> {
        let env = Envelope::parse(kept).map_err(|e| e.to_string())?;
        self.root = Root::parse(&env.payload).map_err(|e| e.to_string())?;
        Ok(())
    }

    /// The root held.
    pub fn root(&self) -> &Root {
        &self.root
    }

    /// The keys documents are signed by now: the root's.
    pub fn document_keys(&self) -> &[PublicKey] {
        &self.root.documents
    }

    /// The keys trusted for release statements only.
    pub fn release_keys(&self) -> &[PublicKey] {
        &self.release_keys
    }

    /// The keys release statements are signed by: `[update] trusted_keys`
    /// and the root's document keys.
    fn statement_keys(&self) -> Vec<PublicKey> {
        let mut keys = self.release_keys.clone();
        keys.extend(self.root.documents.iter().cloned());
        keys
    }

    /// Who signs documents and what their images must be in: the root's
    /// document keys, its delegations, and the allow-list held when the
    /// root asks for one.
    pub fn authority(&self) -> Authority<'_> {
        Authority {
            documents: &self.root.documents,
            delegations: &self.root.delegations,
            allow_list: self
                .root
                .allow_list
                .as_ref()
                .map(|_| self.allow_list.as_ref().map(|(l, _)| l)),
        }
    }

    /// The allow-list held, when one is.
    pub fn allow_list(&self) -> Option<&AllowList> {
        self.allow_list.as_ref().map(|(l, _)| l)
    }

    /// Judges this node's fetched document ([`accept::judge_by`]) by the
    /// root's authority.
    pub fn verify_document(
        &self,
        body: &[u8],
        node: &NodeId,
        held: Option<&Held>,
        clock: Clock,
    ) -> Verdict<Desired> {
        accept::judge_by(body, node, self.authority(), held, clock)
    }

    /// Judges a group's fetched document ([`accept::judge_group_by`]) by
    /// the root's authority.
    pub fn verify_group(
        &self,
        body: &[u8],
        group: &GroupName,
        held: Option<&Held>,
        clock: Clock,
    ) -> Verdict<GroupDesired> {
        accept::judge_group_by(body, group, self.authority(), held, clock)
    }

    /// The set with `bytes` (an allow-list's envelope, `allow-list.json`)
    /// taken after the list held ([`allowlist::next`]: signed by a
    /// threshold of the root's allow-list role, not older, not expired at
    /// `now`); `Ok(None)` when it is the list held. The set is unchanged
    /// when it is not taken.
    pub fn next_allow_list(
        &self,
        bytes: &[u8],
        now: u64,
    ) -> Result<Option<TrustedSet>, AllowListError> {
        let Some(role) = &self.root.allow_list else {
            return Err(AllowListError::NotAsked(self.root.version));
        };
        Ok(
            allowlist::next(role, self.allow_list(), bytes, now)?.map(|l| TrustedSet {
                allow_list: Some((l, bytes.to_vec())),
                ..self.clone()
            }),
        )
    }

    /// The allow-list's envelope held, as it was taken (for the store).
    pub fn allow_list_envelope(&self) -> Option<&[u8]> {
        self.allow_list.as_ref().map(|(_, b)| b.as_slice())
    }

    /// With the allow-list kept in the store read again: taken only while
    /// the root held still names an allow-list role whose threshold
    /// signed it (its version is its floor; its expiry is judged with
    /// each document). The error says why it is not; the set is then
    /// unchanged.
    pub fn resume_allow_list(&mut self, kept: &[u8]) -> Result<(), String> {
        let Some(role) = &self.root.allow_list else {
            return Err(AllowListError::NotAsked(self.root.version).to_string());
        };
        let l = allowlist::verified(role, kept).map_err(|e| e.to_string())?;
        self.allow_list = Some((l, kept.to_vec()));
        Ok(())
    }

    /// Reads a release statement (its envelope, within
    /// [`release::MAX_STATEMENT`]) signed by a key trusted for statements;
    /// what it says is not judged against the agent here.
    pub fn verify_release(&self, statement: &[u8]) -> Result<Release, String> {
        if statement.len() > release::MAX_STATEMENT {
            return Err(format!(
                "the release statement is {} bytes, over the {} allowed",
                statement.len(),
                release::MAX_STATEMENT
            ));
        }
        let env = Envelope::parse(statement).map_err(|e| format!("release statement: {e}"))?;
        let keys = self.statement_keys();
        if keys.is_empty() {
            return Err(
                "no key is trusted for release statements: set [plane] trusted_keys or [update] trusted_keys".into(),
            );
        }
        envelope::verify_as(
            &env,
            &keys,
            release::PAYLOAD_TYPE,
            "stead release statement",
        )
        .map_err(|e| format!("release statement: {e}"))?;
        Release::parse(&env.payload)
    }

    /// Whether a document held (a node's or a group's, by `payload_type`;
    /// its envelope as kept) still stands as a floor under the document
    /// keys ([`accept::still_stands`]), or a threshold of a delegation's
    /// keys still signed it; the error says why not.
    pub fn document_stands(
        &self,
        envelope: &[u8],
        payload_type: &'static str,
        held: &Held,
    ) -> Result<(), String> {
        let by_keys = accept::still_stands(
            Floor::held(envelope, payload_type, held),
            self.document_keys(),
        );
        let Err(why) = by_keys else {
            return Ok(());
        };
        if self.root.delegations.is_empty() {
            return Err(why);
        }
        let delegated = Envelope::parse(envelope)
            .ok()
            .filter(|env| env.payload_type == payload_type)
            .and_then(|env| {
                accept::delegated(&env, &self.root.delegations)
                    .ok()
                    .flatten()
            });
        match delegated {
            // The delegation's threshold signed it: judged as by the keys
            // (the revision bound) with the keys that did.
            Some(_) if held.revision <= accept::MAX_REVISION => Ok(()),
            _ => Err(why),
        }
    }

    /// Whether the release statement the running version came from still
    /// stands as its floor under the keys trusted for statements.
    pub fn release_stands(&self, statement: &[u8]) -> Result<(), String> {
        let floor = Floor {
            envelope: statement,
            payload_type: release::PAYLOAD_TYPE,
            revision: 0,
            key_id: "",
        };
        accept::still_stands(floor, &self.statement_keys())
    }

    /// The set with `bytes` (a root's envelope) taken as the root after
    /// the one held ([`root::next`]: the next version, signed by a
    /// threshold of the held root's root keys and of its own); the set is
    /// unchanged when it is not.
    pub fn next_root(&self, bytes: &[u8]) -> Result<TrustedSet, RootError> {
        let root = root::next(&self.root, bytes)?;
        // The allow-list held stays only while the new root's role still
        // signs it (a role whose keys moved asks for a list they signed).
        let allow_list = match (&root.allow_list, &self.allow_list) {
            (Some(role), Some((_, b))) => allowlist::verified(role, b).ok().map(|l| (l, b.clone())),
            _ => None,
        };
        Ok(TrustedSet {
            root,
            release_keys: self.release_keys.clone(),
            allow_list,
        })
    }

    /// That the root held has expired at `now`, when it has (documents
    /// are still judged by it: a device is not frozen by a root nobody
    /// signed again, and each document carries its own expiry).
    pub fn expiry(&self, now: u64) -> Option<String> {
        let r = &self.root;
        r.expired(now).then(|| {
            format!(
                "root version {} expired at {}: publish a newer root",
                r.version,
                format_rfc3339(r.expires)
            )
        })
    }

    /// Walks the chain from the root held to the plane's newest (`newest`,
    /// `root.json`'s bytes), one version at a time, at most
    /// [`MAX_ROOTS_PER_POLL`]: `fetch(v)` brings `roots/<v>.json` (or says
    /// why not, in a sentence), and `keep(v, bytes)` keeps each root taken
    /// before the next is looked at. A root that is not taken stops the
    /// walk; what was taken before stays. Its expiry is not judged: a root
    /// that expired on the way is still a step of the chain.
    pub async fn walk<F, FF, K, KF>(&self, newest: &[u8], mut fetch: F, mut keep: K) -> Walked
    where
        F: FnMut(u64) -> FF,
        FF: Future<Output = Result<Vec<u8>, String>>,
        K: FnMut(u64, Vec<u8>) -> KF,
        KF: Future<Output = Result<(), String>>,
    {
        let said = root::version_said(newest).unwrap_or(0);
        let mut walked = Walked {
            trusted: self.clone(),
            taken: Vec::new(),
            error: None,
            complete: false,
        };
        loop {
            let held = walked.trusted.root.version;
            let bytes = match walk_step(held, said, walked.taken.len() as u64) {
                WalkStep::Done => {
                    walked.complete = true;
                    return walked;
                }
                WalkStep::Paused => return walked,
                WalkStep::Newest(_) => newest.to_vec(),
                WalkStep::Fetch(v) => match fetch(v).await {
                    Ok(b) => b,
                    Err(e) => {
                        walked.error = Some(e);
                        return walked;
                    }
                },
            };
            let next = match walked.trusted.next_root(&bytes) {
                Ok(n) => n,
                Err(e) => {
                    walked.error = Some(e.to_string());
                    return walked;
                }
            };
            let version = next.root.version;
            if let Err(e) = keep(version, bytes).await {
                walked.error = Some(format!("cannot keep root version {version}: {e}"));
                return walked;
            }
            walked.taken.push(next.root.clone());
            walked.trusted = next;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::pin::pin;
    use std::task::{Context, Poll, Waker};

    use super::*;
    use crate::model::names::Digest;
    use crate::plane::envelope::SecretKey;
    use crate::plane::root::{PAYLOAD_TYPE, Role};

    /// Runs a future whose every await is ready (the walk's, here).
    fn ready<T>(f: impl Future<Output = T>) -> T {
        let mut f = pin!(f);
        match f.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
            Poll::Ready(t) => t,
            Poll::Pending => panic!("the walk waited on nothing"),
        }
    }

    fn key() -> SecretKey {
        SecretKey::generate().unwrap()
    }

    fn root(version: u64, root: &[&SecretKey], threshold: usize, docs: &[&SecretKey]) -> Root {
        Root {
            version,
            expires: 2_000_000_000,
            root: Role {
                keys: root.iter().map(|k| k.public()).collect(),
                threshold,
            },
            documents: docs.iter().map(|k| k.public()).collect(),
            delegations: Vec::new(),
            allow_list: None,
        }
    }

    fn signed(r: &Root, by: &[&SecretKey]) -> Vec<u8> {
        let (first, more) = by.split_first().unwrap();
        let mut env = first.sign(PAYLOAD_TYPE, &r.to_payload());
        for k in more {
            env.countersign(k);
        }
        env.to_json()
    }

    fn word(r: &Result<TrustedSet, RootError>) -> String {
        match r {
            Ok(t) => format!("v{}", t.root().version),
            Err(RootError::Malformed(_)) => "malformed".into(),
            Err(RootError::Invalid { field, .. }) => format!("invalid {field}"),
            Err(RootError::NotNext { .. }) => "not-next".into(),
            Err(RootError::ShortOfHeld { signed, .. }) => format!("short-of-held {signed}"),
            Err(RootError::ShortOfOwn { signed, .. }) => format!("short-of-own {signed}"),
        }
    }

    #[test]
    fn a_next_root_is_taken_by_every_rule_of_the_walk_and_changes_nothing_else() {
        let (cfg, a, b, c, d, online) = (key(), key(), key(), key(), key(), key());
        let config = TrustedSet::new(&[cfg.public()]).with_release_keys(vec![d.public()]);
        let v1 = root(1, &[&a, &b, &c], 2, &[&online]);
        let at1 = config.next_root(&signed(&v1, &[&cfg, &a, &b])).unwrap();
        let v2 = root(2, &[&b, &c, &d], 2, &[&online]);
        let v2_by = |by: &[&SecretKey]| signed(&v2, by);
        let mut expired = v2.clone();
        expired.expires = 1;
        // (what, the set held, the envelope, what is said)
        #[rustfmt::skip]
        let cases: Vec<(&str, &TrustedSet, Vec<u8>, &str)> = vec![
            ("the config's key moves to a first root", &config, signed(&v1, &[&cfg, &a, &b]), "v1"),
            ("a first root not signed by the config's key", &config, signed(&v1, &[&a, &b]), "short-of-held 0"),
            ("a first root short of its own threshold", &config, signed(&v1, &[&cfg, &a]), "short-of-own 1"),
            ("two old and two new", &at1, v2_by(&[&b, &c]), "v2"),
            ("one old and two new", &at1, v2_by(&[&a, &d]), "short-of-held 1"),
            ("two old, one of them new", &at1, v2_by(&[&a, &b]), "short-of-own 1"),
            ("the same key twice counts once", &at1, v2_by(&[&b, &b, &a]), "short-of-own 1"),
            ("the online document key alone", &at1, v2_by(&[&online]), "short-of-held 0"),
            ("expired on the way: still a step", &at1, signed(&expired, &[&b, &c]), "v2"),
            ("a version skipped", &at1, signed(&root(3, &[&b, &c, &d], 2, &[&online]), &[&b, &c]), "not-next"),
            ("the held version again", &at1, signed(&root(1, &[&b, &c, &d], 2, &[&online]), &[&b, &c]), "not-next"),
            ("an older version", &at1, signed(&root(0, &[&b, &c], 1, &[&online]), &[&b, &c]), "invalid version"),
            ("a threshold over its keys", &at1, signed(&root(2, &[&b], 2, &[&online]), &[&b, &c]), "invalid root.threshold"),
            ("a key listed twice", &at1, signed(&root(2, &[&b, &b, &c], 2, &[&online]), &[&b, &c]), "invalid root.keys[1]"),
            ("no document key", &at1, signed(&root(2, &[&b, &c], 1, &[]), &[&b, &c]), "invalid documents.keys"),
            ("a document's payload type", &at1, b.sign(crate::plane::envelope::PAYLOAD_TYPE, &v2.to_payload()).to_json(), "malformed"),
            ("over the size of a root", &at1, vec![b' '; root::MAX_ROOT + 1], "malformed"),
            ("not an envelope", &at1, b"{}".to_vec(), "malformed"),
        ];
        for (what, held, bytes, says) in cases {
            let r = held.next_root(&bytes);
            assert_eq!(word(&r), says, "{what}");
            if let Ok(t) = r {
                // The release keys stay; the document keys are the new root's.
                assert_eq!(t.release_keys, vec![d.public()], "{what}");
                assert_eq!(t.document_keys(), &[online.public()], "{what}");
            }
        }
    }

    /// A plane: its roots by version, which of them are not there, which
    /// version the store fails to keep.
    struct Plane {
        roots: BTreeMap<u64, Vec<u8>>,
        newest: u64,
        missing: Vec<u64>,
        unkept: Option<u64>,
    }

    fn walk(from: &TrustedSet, plane: &Plane) -> (Walked, Vec<u64>, Vec<u64>) {
        let (mut fetched, mut kept) = (Vec::new(), Vec::new());
        let newest = plane.roots.get(&plane.newest).cloned().unwrap_or_default();
        let walked = ready(from.walk(
            &newest,
            |v| {
                fetched.push(v);
                let r = match plane.roots.get(&v) {
                    Some(b) if !plane.missing.contains(&v) => Ok(b.clone()),
                    _ => Err(format!("roots/{v}.json is not there")),
                };
                std::future::ready(r)
            },
            |v, _| {
                let r = if plane.unkept == Some(v) {
                    Err("disk full".to_string())
                } else {
                    kept.push(v);
                    Ok(())
                };
                std::future::ready(r)
            },
        ));
        (walked, fetched, kept)
    }

    #[test]
    fn the_chain_is_walked_one_version_at_a_time_bounded_per_poll() {
        let (cfg, r, other, online) = (key(), key(), key(), key());
        let config = TrustedSet::new(&[cfg.public()]);
        // A chain of 40 roots, each signed by the one key r (v1 by the
        // config's key too).
        let chain = |n: u64| -> BTreeMap<u64, Vec<u8>> {
            (1..=n)
                .map(|v| {
                    let by: &[&SecretKey] = if v == 1 { &[&cfg, &r] } else { &[&r] };
                    (v, signed(&root(v, &[&r], 1, &[&online]), by))
                })
                .collect()
        };
        let forged = |mut roots: BTreeMap<u64, Vec<u8>>, v: u64| {
            roots.insert(v, signed(&root(v, &[&other], 1, &[&other]), &[&other]));
            roots
        };
        let plane = |roots, newest, missing: &[u64], unkept| Plane {
            roots,
            newest,
            missing: missing.to_vec(),
            unkept,
        };
        let max = MAX_ROOTS_PER_POLL;
        // (what, the plane, the version held after, error said, complete,
        //  versions fetched from roots/)
        type Case<'a> = (&'a str, Plane, u64, Option<&'a str>, bool, Vec<u64>);
        #[rustfmt::skip]
        let cases: Vec<Case> = vec![
            ("none newer: nothing fetched", plane(chain(0), 0, &[], None), 0, None, true, vec![]),
            ("the next one is root.json itself", plane(chain(1), 1, &[], None), 1, None, true, vec![]),
            ("three ahead: two walked, the third in hand", plane(chain(3), 3, &[], None), 3, None, true, vec![1, 2]),
            ("a missing step stops the walk", plane(chain(3), 3, &[2], None), 1, Some("roots/2.json is not there"), false, vec![1, 2]),
            ("a forged step stops it; the ones before stay", plane(forged(chain(4), 3), 4, &[], None), 2, Some("short-of-held"), false, vec![1, 2, 3]),
            ("a forged newest is not taken", plane(forged(chain(2), 2), 2, &[], None), 1, Some("short-of-held"), false, vec![1]),
            ("a root not kept is not taken", plane(chain(3), 3, &[], Some(2)), 1, Some("cannot keep root version 2: disk full"), false, vec![1, 2]),
            ("far ahead: bounded per poll", plane(chain(40), 40, &[], None), max, None, false, (1..=max).collect()),
            ("exactly the bound ahead", plane(chain(max), max, &[], None), max, None, true, (1..max).collect()),
            ("not an envelope: no newer version said", plane(BTreeMap::from([(1, b"{}".to_vec())]), 1, &[], None), 0, None, true, vec![]),
        ];
        for (what, p, held_after, error, complete, fetched_want) in cases {
            let (w, fetched, kept) = walk(&config, &p);
            assert_eq!(w.trusted.root().version, held_after, "{what}");
            assert_eq!(w.complete, complete, "{what}");
            assert_eq!(fetched, fetched_want, "{what}");
            // Each root taken was kept first, in order.
            let taken: Vec<u64> = w.taken.iter().map(|r| r.version).collect();
            assert_eq!(taken, kept, "{what}");
            assert_eq!(taken, (1..=held_after).collect::<Vec<_>>(), "{what}");
            match (error, &w.error) {
                (None, None) => {}
                (Some(want), Some(got)) => {
                    let got = got.replace("signed by 0 of the root keys", "short-of-held");
                    assert!(got.contains(want), "{what}: {got}");
                }
                (want, got) => panic!("{what}: error {got:?}, wanted {want:?}"),
            }
        }
        // A walk paused at the bound goes on from there at the next poll.
        let p = plane(chain(40), 40, &[], None);
        let (first, ..) = walk(&config, &p);
        let (second, fetched, _) = walk(&first.trusted, &p);
        assert_eq!(second.trusted.root().version, 2 * max);
        assert_eq!(fetched, (max + 1..=2 * max).collect::<Vec<_>>());
    }

    #[test]
    fn a_walk_steps_next_newest_paused_or_done() {
        let max = MAX_ROOTS_PER_POLL;
        // (held, said, taken this poll, step)
        #[rustfmt::skip]
        let cases = [
            (0, 0, 0, WalkStep::Done),
            (5, 3, 0, WalkStep::Done),
            (3, 3, 2, WalkStep::Done),
            (0, 1, 0, WalkStep::Newest(1)),
            (0, 2, 0, WalkStep::Fetch(1)),
            (1, 2, 1, WalkStep::Newest(2)),
            (4, 9, max - 1, WalkStep::Fetch(5)),
            (4, 9, max, WalkStep::Paused),
            (8, 9, max, WalkStep::Paused),
        ];
        for (held, said, taken, step) in cases {
            assert_eq!(walk_step(held, said, taken), step, "{held} {said} {taken}");
        }
    }

    #[test]
    fn the_root_s_expiry_is_said_when_nothing_else_is_wrong() {
        let r = key();
        let mut set = TrustedSet::new(&[r.public()]);
        assert_eq!(set.expiry(u64::MAX - 1), None, "the config's never expires");
        set.root = root(3, &[&r], 1, &[&r]);
        let expired = set.expiry(2_000_000_000);
        assert_eq!(
            expired.as_deref(),
            Some("root version 3 expired at 2033-05-18T03:33:20Z: publish a newer root")
        );
        assert_eq!(set.expiry(1_999_999_999), None);
        let e = || expired.clone();
        let walk_err = || Some("root version 4 is not the next one".to_string());
        // (what was said, the expiry now, what is said)
        #[rustfmt::skip]
        let cases = [
            (None, None, None),
            (None, e(), e()),
            (walk_err(), e(), walk_err()),
            (walk_err(), None, walk_err()),
            (e(), None, None),
            (e(), e(), e()),
        ];
        for (said, now, want) in cases {
            assert_eq!(
                root_error(said.clone(), now.clone()),
                want,
                "{said:?} {now:?}"
            );
        }
    }

    #[test]
    fn documents_statements_and_floors_are_judged_by_the_keys_in_force() {
        let (cfg, r, online, update) = (key(), key(), key(), key());
        let config = TrustedSet::new(&[cfg.public()]).with_release_keys(vec![update.public()]);
        let moved = config
            .next_root(&signed(&root(1, &[&r], 1, &[&online]), &[&cfg, &r]))
            .unwrap();
        let none = TrustedSet::new(&[]);
        let statement = |k: &SecretKey| {
            let payload = format!(
                r#"{{"version": "9.0.0", "schema": 1, "binaries": {{"x86_64-unknown-linux-musl": {{"url": "b", "sha256": "{}", "size": 1}}}}}}"#,
                "a".repeat(64)
            );
            k.sign(release::PAYLOAD_TYPE, payload.as_bytes()).to_json()
        };
        let held = Held {
            url: String::new(),
            revision: 1,
            payload_digest: Digest::of(b""),
            etag: None,
            issued_at: 0,
            expires: 0,
            newest_issued_at: 0,
            accepted_at: 0,
            key_id: String::new(),
        };
        let doc = |k: &SecretKey| {
            k.sign(crate::plane::envelope::PAYLOAD_TYPE, b"{}")
                .to_json()
        };
        let ok = |r: Result<(), String>| r.map_err(|e| e.chars().take(24).collect::<String>());
        let stmt = |set: &TrustedSet, k: &SecretKey| match set.verify_release(&statement(k)) {
            Ok(r) => {
                assert_eq!(r.version, "9.0.0");
                None
            }
            Err(e) => e.split(':').next().map(str::to_string),
        };
        // (what, the set, the signer, the statement's verdict, the
        //  release floor's, the document floor's)
        type Case<'a> = (
            &'a str,
            &'a TrustedSet,
            &'a SecretKey,
            Option<&'a str>,
            bool,
            bool,
        );
        #[rustfmt::skip]
        let cases: Vec<Case> = vec![
            ("the config's key, before a root", &config, &cfg, None, true, true),
            ("the update key: statements only", &config, &update, None, true, false),
            ("the config's key, revoked by root 1", &moved, &cfg, Some("release statement"), false, false),
            ("root 1's document key", &moved, &online, None, true, true),
            ("the update key stays", &moved, &update, None, true, false),
            ("a root key signs no document", &moved, &r, Some("release statement"), false, false),
            ("no key at all", &none, &cfg, Some("no key is trusted for release statements"), false, false),
        ];
        for (what, set, k, says, release_floor, doc_floor) in cases {
            assert_eq!(stmt(set, k).as_deref(), says, "{what}");
            assert_eq!(
                ok(set.release_stands(&statement(k))).is_ok(),
                release_floor,
                "{what}"
            );
            let floor = set.document_stands(&doc(k), crate::plane::envelope::PAYLOAD_TYPE, &held);
            assert_eq!(ok(floor).is_ok(), doc_floor, "{what}");
        }
        let big = vec![b' '; release::MAX_STATEMENT + 1];
        assert!(
            config
                .verify_release(&big)
                .unwrap_err()
                .contains("over the")
        );
        // A kept root is read again as it was taken; one that does not
        // read changes nothing.
        let mut resumed = config.clone();
        let kept = signed(moved.root(), &[&r]);
        assert_eq!(resumed.resume(&kept), Ok(()));
        assert_eq!(resumed, moved);
        assert!(resumed.resume(b"{}").is_err());
        assert_eq!(resumed, moved);
    }

    #[test]
    fn the_allow_list_is_taken_under_the_root_s_role_and_follows_it() {
        use crate::plane::allowlist::{self, Listed};
        let (cfg, r, online, o1, o2, o3) = (key(), key(), key(), key(), key(), key());
        let config = TrustedSet::new(&[cfg.public()]);
        let with_role = |v: u64, keys: &[&SecretKey]| {
            let mut x = root(v, &[&r], 1, &[&online]);
            x.allow_list = Some(Role {
                keys: keys.iter().map(|k| k.public()).collect(),
                threshold: 2,
            });
            x
        };
        let at1 = config
            .next_root(&signed(&with_role(1, &[&o1, &o2, &o3]), &[&cfg, &r]))
            .unwrap();
        let d = format!("sha256:{}", "a".repeat(64));
        let list = |v: u64, by: &[&SecretKey]| {
            let p = allowlist::AllowList::payload(v, 2_000_000_000, &[Listed::parse(&d).unwrap()]);
            let (first, more) = by.split_first().unwrap();
            let mut env = first.sign(allowlist::PAYLOAD_TYPE, &p);
            for k in more {
                env.countersign(k);
            }
            env.to_json()
        };
        let now = 1_900_000_000;
        // Before a list: asked for, none held.
        assert!(matches!(at1.authority().allow_list, Some(None)));
        assert!(config.authority().allow_list.is_none());
        let v3 = at1
            .next_allow_list(&list(3, &[&o1, &o2]), now)
            .unwrap()
            .unwrap();
        assert_eq!(v3.allow_list().map(|l| l.version), Some(3));
        assert!(matches!(v3.authority().allow_list, Some(Some(_))));
        // (what, the set, the list, what is said)
        #[rustfmt::skip]
        let cases: Vec<(&str, &TrustedSet, Vec<u8>, &str)> = vec![
            ("no role named", &config, list(3, &[&o1, &o2]), "names no allow-list role"),
            ("the online key alone", &at1, list(3, &[&online]), "signed by 0 of"),
            ("one offline key", &at1, list(3, &[&o1]), "signed by 1 of"),
            ("a stale version", &v3, list(2, &[&o1, &o2]), "older than version 3"),
            ("the same again", &v3, list(3, &[&o2, &o1]), "same"),
            ("the next", &v3, list(4, &[&o2, &o3]), "v4"),
        ];
        for (what, set, bytes, says) in cases {
            let got = match set.next_allow_list(&bytes, now) {
                Ok(Some(t)) => format!("v{}", t.allow_list().unwrap().version),
                Ok(None) => "same".into(),
                Err(e) => e.to_string(),
            };
            assert!(got.contains(says), "{what}: {got}");
        }
        // Kept and read again as taken, under the root held.
        let mut resumed = at1.clone();
        assert_eq!(
            resumed.resume_allow_list(v3.allow_list_envelope().unwrap()),
            Ok(())
        );
        assert_eq!(resumed, v3);
        let mut none = config.clone();
        assert!(
            none.resume_allow_list(v3.allow_list_envelope().unwrap())
                .is_err()
        );
        assert_eq!(none, config);
        // A next root with the same role keeps the list; one whose role's
        // keys moved drops it (asked for again); one without a role
        // asks for none.
        let same = v3
            .next_root(&signed(&with_role(2, &[&o1, &o2, &o3]), &[&r]))
            .unwrap();
        assert_eq!(same.allow_list(), v3.allow_list());
        let moved = v3
            .next_root(&signed(&with_role(2, &[&o3, &cfg, &online]), &[&r]))
            .unwrap();
        assert_eq!(moved.allow_list(), None);
        assert!(matches!(moved.authority().allow_list, Some(None)));
        let dropped = v3
            .next_root(&signed(&root(2, &[&r], 1, &[&online]), &[&r]))
            .unwrap();
        assert!(dropped.authority().allow_list.is_none());
    }

    #[test]
    fn a_delegation_s_document_stands_while_its_threshold_signed_it() {
        use crate::plane::root::Delegation;
        let (cfg, r, online, ci, other) = (key(), key(), key(), key(), key());
        let delegated = |keys: &[&SecretKey]| {
            let mut x = root(1, &[&r], 1, &[&online]);
            x.delegations = vec![Delegation {
                name: "team-a".into(),
                role: Role {
                    keys: keys.iter().map(|k| k.public()).collect(),
                    threshold: 1,
                },
                groups: vec![GroupName::try_from("edge-eu").unwrap()],
                modules: None,
            }];
            x
        };
        let config = TrustedSet::new(&[cfg.public()]);
        let with_ci = config
            .next_root(&signed(&delegated(&[&ci]), &[&cfg, &r]))
            .unwrap();
        let without = config
            .next_root(&signed(&delegated(&[&other]), &[&cfg, &r]))
            .unwrap();
        let g = ci
            .sign(crate::plane::group::GROUP_PAYLOAD_TYPE, b"{}")
            .to_json();
        let held = |revision| Held {
            url: String::new(),
            revision,
            payload_digest: Digest::of(b""),
            etag: None,
            issued_at: 0,
            expires: 0,
            newest_issued_at: 0,
            accepted_at: 0,
            key_id: String::new(),
        };
        let gt = crate::plane::group::GROUP_PAYLOAD_TYPE;
        // (what, the set, the payload type held as, the revision, stands)
        #[rustfmt::skip]
        let cases: Vec<(&str, &TrustedSet, &'static str, u64, bool)> = vec![
            ("its delegation names its key", &with_ci, gt, 7, true),
            ("its key no longer delegated", &without, gt, 7, false),
            ("held as another kind", &with_ci, crate::plane::envelope::PAYLOAD_TYPE, 7, false),
            ("over 2^53", &with_ci, gt, u64::MAX, false),
            ("no delegation at all", &config, gt, 7, false),
        ];
        for (what, set, t, revision, stands) in cases {
            assert_eq!(
                set.document_stands(&g, t, &held(revision)).is_ok(),
                stands,
                "{what}"
            );
        }
    }
}
