//! A fleet's reports rolled up, one at a time (`stead-plane status
//! --reports`, `stead-plane rollout watch`): devices per revision, per
//! module state, failing devices with their reasons, devices not heard
//! from, and each group's rollout progress. Pure: the command streams the
//! reports in; nothing keeps a report once it is added (only each counted
//! node's id and `seq`, and a report is counted only for an enrolled
//! node), and every list and every table of counts is capped, so 100,000
//! reports (or forged ones naming a new state, revision or group each)
//! take the memory of a few.
//!
//! Only a report signed by the key enrolled for the node whose directory
//! it is in, and naming that node, is counted
//! ([`crate::views::signed::verify`], [`Rollup::take`]); the others (an
//! older agent's, one moved to another node's directory, one of another
//! key, a node's second in one reading) are listed as unverified, by
//! class, and never counted. A device's own report still claims what it
//! likes of a group: its claims are counted only within what the host
//! serves. Given the revision each group's document has on the host
//! ([`Rollup::served`]), a claim of a revision above it (one never
//! published) or of a group not served is named and not counted, so one
//! report cannot make the newest revision one no device can hold and blind
//! the watcher.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::model::clock::{SKEW_LIMIT, SkewTally};
use crate::model::fleet::Tally;
use crate::model::text::{clip, escape};
use crate::model::time::parse_rfc3339;
use crate::views::ReportView;
use crate::views::signed::Unverified;

/// The most devices each list names; the counts are whole.
pub const LISTED: usize = 50;
/// The most keys a table of counts has (states, revisions); what comes
/// after is counted under [`OTHER`] (or a group's `other`).
pub const MAX_KEYS: usize = 64;
/// The most groups counted when the host's documents are not known.
pub const MAX_GROUPS: usize = 1000;
/// The most reasons a failing device lists.
const MAX_REASONS: usize = 10;
/// Where a table's counts past [`MAX_KEYS`] go.
pub const OTHER: &str = "(other)";

/// A module state that counts a device as failing.
pub fn failing_state(state: &str) -> bool {
    matches!(state, "failed" | "crash-looping" | "quarantined")
}

/// The fleet as its reports tell it.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Rollup {
    /// Reports counted: each signed by the key enrolled for its node.
    pub devices: u64,
    /// Devices by the revision of their own document held (`none`).
    pub revisions: BTreeMap<String, u64>,
    /// Modules by state, over every device.
    pub module_states: BTreeMap<String, u64>,
    /// Devices with a module failing, crash-looping or quarantined.
    pub failing: u64,
    /// The first [`LISTED`] of them, with why.
    pub failing_listed: Vec<Failing>,
    /// Devices whose last report is older than the silence limit.
    pub silent: u64,
    /// The first [`LISTED`] of them, with when they last reported.
    pub silent_listed: Vec<Silent>,
    /// Per group, its rollout's progress.
    pub groups: BTreeMap<String, GroupRollup>,
    /// Whether the groups' revisions were checked against the documents
    /// the host serves.
    pub served_known: bool,
    /// Claims of a group's revision not counted: a revision above the one
    /// served, a group not served, groups past [`MAX_GROUPS`].
    pub not_counted: u64,
    /// The first [`LISTED`] of them, with why.
    pub not_counted_listed: Vec<NotCounted>,
    /// Reports that could not be read.
    pub unreadable: u64,
    /// The first [`LISTED`] of them, with why.
    pub unreadable_listed: Vec<Unreadable>,
    /// Reports read and not counted: not signed by the key enrolled for
    /// their node, or a node's second.
    pub unverified: u64,
    /// Of them, how many of each class ([`Unverified::class`]).
    pub unverified_by: BTreeMap<String, u64>,
    /// The first [`LISTED`] of them read, with why, by where they are.
    pub unverified_listed: Vec<Unreadable>,
    /// Enrolled nodes no report of which was counted (a report deleted, a
    /// device never heard from or not yet signing), when the enrolled keys
    /// were given ([`Rollup::missing`]).
    pub missing: u64,
    /// The first [`LISTED`] of them, by node.
    pub missing_listed: Vec<String>,
    /// The devices' clocks against the plane host's `Date`, as their
    /// reports say (absent when none says a skew: reports of agents
    /// before it was reported).
    #[serde(
        skip_serializing_if = "SkewTally::is_empty",
        serialize_with = "skew_summary"
    )]
    pub skew: SkewTally,
    /// What the devices say of their fetches (absent when no report says
    /// one: reports of agents before it was reported).
    #[serde(skip_serializing_if = "Fetches::is_empty")]
    pub fetches: Fetches,
    /// The devices by what they are (absent when no report says: reports
    /// of agents before facts were reported).
    #[serde(skip_serializing_if = "FactCounts::is_empty")]
    pub facts: FactCounts,
    /// The `seq` of each node's report counted: a node counts once.
    #[serde(skip)]
    counted: std::collections::HashMap<String, u64>,
}

/// The devices' fetches, summed over their reports.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Fetches {
    /// Devices fetching images now.
    pub fetching: u64,
    /// Bytes of those fetches here, and in all.
    pub bytes: u64,
    pub of: u64,
    /// Devices with images to fetch ahead of a coming rollout turn, and
    /// of them those that hold every one.
    pub ahead: u64,
    pub ahead_ready: u64,
    /// Devices that say what the last image they fetched brought, and its
    /// bytes summed by source: blobs from registries, chunks from the
    /// plane's host, bytes of rebuilt layers taken from layers held,
    /// blobs and chunks from the site's peers.
    pub brought: u64,
    pub registry: u64,
    pub chunks: u64,
    pub local: u64,
    pub peers: u64,
}

impl Fetches {
    /// Whether no report said anything of its fetches.
    pub fn is_empty(&self) -> bool {
        self.fetching == 0 && self.ahead == 0 && self.brought == 0
    }

    fn add(&mut self, r: &ReportView) {
        if let Some(f) = &r.fetching {
            if !f.images.is_empty() {
                self.fetching += 1;
                for p in f.images.values() {
                    self.bytes = self.bytes.saturating_add(p.bytes);
                    self.of = self.of.saturating_add(p.of);
                }
            }
            if let Some(a) = &f.ahead {
                self.ahead += 1;
                if a.here >= a.images {
                    self.ahead_ready += 1;
                }
            }
        }
        if let Some(b) = &r.fetched {
            self.brought += 1;
            self.registry = self.registry.saturating_add(b.registry);
            self.chunks = self.chunks.saturating_add(b.chunks);
            self.local = self.local.saturating_add(b.local);
            self.peers = self.peers.saturating_add(b.peers);
        }
    }

    /// `fetching  2 devices, 41.0 MiB of 96.0 MiB; …`.
    fn line(&self) -> String {
        use crate::model::disk::human;
        let mut parts = Vec::new();
        if self.fetching > 0 {
            parts.push(format!(
                "{} devices fetching, {} of {}",
                self.fetching,
                human(self.bytes),
                human(self.of)
            ));
        }
        if self.ahead > 0 {
            parts.push(format!(
                "{} ahead of a rollout turn ({} with every image here)",
                self.ahead, self.ahead_ready
            ));
        }
        if self.brought > 0 {
            parts.push(format!(
                "the last image of {} devices: {} from registries, {} of chunks, {} from the sites' peers, {} from layers held",
                self.brought,
                human(self.registry),
                human(self.chunks),
                human(self.peers),
                human(self.local)
            ));
        }
        parts.join("; ")
    }
}

/// The skews' summary, as the JSON says them.
fn skew_summary<S: serde::Serializer>(t: &SkewTally, s: S) -> Result<S::Ok, S::Error> {
    t.summary().serialize(s)
}

/// A failing device.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Failing {
    pub node: String,
    /// `module: state: last error`, for each failing module.
    pub reasons: Vec<String>,
}

/// A device not heard from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Silent {
    pub node: String,
    /// Its last report's time (RFC 3339), as it said it.
    pub sent_at: String,
}

/// A report that could not be read.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Unreadable {
    pub source: String,
    pub error: String,
}

/// A claim of a group's revision that is not counted.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct NotCounted {
    pub node: String,
    pub group: String,
    pub why: String,
}

/// One group across the fleet.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct GroupRollup {
    /// The revision of its document the host serves, when known.
    pub served: Option<u64>,
    /// Devices in it, by the revision of its document they hold.
    pub held: BTreeMap<u64, u64>,
    /// Devices by the revision whose modules they run.
    pub running: BTreeMap<u64, u64>,
    /// Devices past [`MAX_KEYS`] revisions in `held` or `running`.
    pub other: u64,
    /// Devices that hold the newest revision and run it.
    pub on_newest: u64,
    /// Of those, failing.
    pub failing_on_newest: u64,
    /// Devices that hold the newest revision and wait for their turn, or
    /// for what defers their change (a window, a lock, the site's
    /// budget).
    pub waiting: u64,
    /// The newest revision: the one served when known, else the newest
    /// any device claims.
    pub newest: u64,
    /// Devices whose node document lists the group and that it is not
    /// for (its `when`): counted nowhere else in it.
    #[serde(skip_serializing_if = "is_zero")]
    pub not_for: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The devices counted by what they are, as their reports' facts say
/// (each table capped at [`MAX_KEYS`], then [`OTHER`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct FactCounts {
    /// Devices that say their facts.
    pub devices: u64,
    /// By architecture (`aarch64`).
    pub arch: BTreeMap<String, u64>,
    /// By engine and its version to the minor (`docker 26.1`).
    pub engine: BTreeMap<String, u64>,
    /// By label, as `key=value`.
    pub labels: BTreeMap<String, u64>,
}

impl FactCounts {
    fn is_empty(&self) -> bool {
        self.devices == 0
    }

    fn add(&mut self, f: &crate::model::facts::Facts) {
        self.devices += 1;
        bump_or_other(&mut self.arch, clip(&f.arch, 32).as_ref());
        let engine = match (&f.engine, &f.engine_version) {
            (None, _) => "not known yet".to_string(),
            (Some(e), v) => {
                let v = v
                    .as_deref()
                    .and_then(crate::model::facts::engine_version)
                    .map_or("?".to_string(), |v| format!("{}.{}", v.major, v.minor));
                format!("{} {v}", clip(e, 16))
            }
        };
        bump_or_other(&mut self.engine, &engine);
        for (k, v) in f.labels.iter().take(crate::model::facts::MAX_LABELS) {
            bump_or_other(&mut self.labels, clip(&format!("{k}={v}"), 128).as_ref());
        }
    }

    /// `arch aarch64: 3, x86_64: 2; engine docker 26.1: 4, …; labels …`.
    fn line(&self) -> String {
        let list = |m: &BTreeMap<String, u64>| {
            m.iter()
                .map(|(k, v)| format!("{}: {v}", escape(k)))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut parts = vec![
            format!("arch {}", list(&self.arch)),
            format!("engine {}", list(&self.engine)),
        ];
        if !self.labels.is_empty() {
            parts.push(format!("labels {}", list(&self.labels)));
        }
        format!("{} devices say: {}", self.devices, parts.join("; "))
    }
}

impl GroupRollup {
    /// What the watcher counts of revision `revision`: the devices that
    /// run it, and those of them failing.
    pub fn tally(&self, revision: u64) -> Tally {
        if revision != self.newest {
            return Tally::default();
        }
        Tally {
            on_new: self.on_newest,
            failing: self.failing_on_newest,
        }
    }
}

/// Counts one more under `key`, unless the table is full and `key` new.
fn bump<K: Ord>(table: &mut BTreeMap<K, u64>, key: K) -> bool {
    if table.len() >= MAX_KEYS && !table.contains_key(&key) {
        return false;
    }
    *table.entry(key).or_default() += 1;
    true
}

/// Counts one more under `key`, or under [`OTHER`] when the table is full.
fn bump_or_other(table: &mut BTreeMap<String, u64>, key: &str) {
    if !bump(table, key.to_string()) {
        *table.entry(OTHER.to_string()).or_default() += 1;
    }
}

impl Rollup {
    /// A roll-up that counts a group's claims only within `served`: each
    /// group's revision on the host (from its signed document).
    pub fn served(served: &BTreeMap<String, u64>) -> Rollup {
        let groups = served
            .iter()
            .map(|(name, &revision)| {
                let g = GroupRollup {
                    served: Some(revision),
                    newest: revision,
                    ..GroupRollup::default()
                };
                (name.clone(), g)
            })
            .collect();
        Rollup {
            groups,
            served_known: true,
            ..Rollup::default()
        }
    }

    /// Why a claim of `group` holding `held` and running `running` is not
    /// counted, if it is not.
    fn claim_refused(&self, group: &str, held: u64, running: Option<u64>) -> Option<String> {
        if !self.served_known {
            return (!self.groups.contains_key(group) && self.groups.len() >= MAX_GROUPS)
                .then(|| format!("more than {MAX_GROUPS} groups claimed"));
        }
        let Some(served) = self.groups.get(group).and_then(|g| g.served) else {
            return Some("a group the host does not serve".into());
        };
        let claimed = held.max(running.unwrap_or(0));
        (claimed > served).then(|| {
            format!(
                "revision {claimed} claimed, above the {served} the host serves: never published"
            )
        })
    }

    /// Adds one report; `now` and `silent_after` (seconds) say which
    /// devices are not heard from.
    pub fn add(&mut self, r: &ReportView, now: u64, silent_after: u64) {
        self.devices += 1;
        let revision = r
            .plane
            .held
            .as_ref()
            .map_or("none".to_string(), |h| h.revision.to_string());
        bump_or_other(&mut self.revisions, &revision);
        let node = || clip(&r.node, 256).into_owned();
        let mut reasons = Vec::new();
        let mut more = 0;
        for (name, m) in &r.modules {
            bump_or_other(&mut self.module_states, clip(&m.state, 64).as_ref());
            if failing_state(&m.state) {
                if reasons.len() == MAX_REASONS {
                    more += 1;
                    continue;
                }
                let error = m.last_error.as_ref().map_or("", |e| e.message.as_str());
                reasons.push(clip(&format!("{name}: {}: {error}", m.state), 300).into_owned());
            }
        }
        if more > 0 {
            reasons.push(format!("and {more} more"));
        }
        let failing = !reasons.is_empty();
        let deferred = r.modules.values().any(|m| m.state == "deferred");
        if failing {
            self.failing += 1;
            if self.failing_listed.len() < LISTED {
                self.failing_listed.push(Failing {
                    node: node(),
                    reasons,
                });
            }
        }
        if let Some(skew) = r.clock.skew {
            self.skew.add(skew);
        }
        self.fetches.add(r);
        if let Some(f) = &r.facts {
            self.facts.add(f);
        }
        let sent = parse_rfc3339(&r.sent_at).unwrap_or(0);
        if sent.saturating_add(silent_after) < now {
            self.silent += 1;
            if self.silent_listed.len() < LISTED {
                self.silent_listed.push(Silent {
                    node: node(),
                    sent_at: clip(&r.sent_at, 64).into_owned(),
                });
            }
        }
        for g in &r.plane.groups {
            let Some(held) = g.revision else { continue };
            if let Some(why) = self.claim_refused(&g.group, held, g.running) {
                self.not_counted += 1;
                if self.not_counted_listed.len() < LISTED {
                    self.not_counted_listed.push(NotCounted {
                        node: node(),
                        group: clip(&g.group, 100).into_owned(),
                        why,
                    });
                }
                continue;
            }
            let e = self.groups.entry(g.group.clone()).or_default();
            if g.not_for.is_some() {
                e.not_for += 1;
                continue;
            }
            let mut counted = bump(&mut e.held, held);
            if let Some(running) = g.running {
                counted &= bump(&mut e.running, running);
            }
            if !counted {
                e.other += 1;
            }
            if held > e.newest {
                // A newer revision: what was counted for the older one
                // is not its.
                e.newest = held;
                e.on_newest = 0;
                e.failing_on_newest = 0;
                e.waiting = 0;
            }
            if held == e.newest {
                // A device whose change waits (for a window, a lock, its
                // site's budget) runs the revision's modules only once it
                // is made: not there yet.
                if g.running == Some(held) && !deferred {
                    e.on_newest += 1;
                    if failing {
                        e.failing_on_newest += 1;
                    }
                } else if deferred || g.rollout.as_ref().is_some_and(|r| r.until.is_some()) {
                    e.waiting += 1;
                }
            }
        }
    }

    /// Takes one report read at `source` as [`crate::views::signed::verify`]
    /// judged it: counted when verified and its node's first in this
    /// reading (a replay of an older report of the node beside its own
    /// counts once, whichever is read first), listed otherwise.
    pub fn take(
        &mut self,
        source: &str,
        verdict: Result<ReportView, Unverified>,
        now: u64,
        silent_after: u64,
    ) {
        match verdict {
            Ok(r) => match self.counted.get(&r.node) {
                Some(&counted) => self.unverified(
                    source,
                    &Unverified::Duplicate {
                        seq: r.seq,
                        counted,
                    },
                ),
                None => {
                    self.counted.insert(r.node.clone(), r.seq);
                    self.add(&r, now, silent_after);
                }
            },
            Err(Unverified::Unreadable(e)) => self.unreadable(source, &e),
            Err(why) => self.unverified(source, &why),
        }
    }

    /// Once every report is taken: counts the `enrolled` nodes (in order)
    /// no report of which was counted.
    pub fn missing<'n>(&mut self, enrolled: impl IntoIterator<Item = &'n str>) {
        for node in enrolled {
            if !self.counted.contains_key(node) {
                self.missing += 1;
                if self.missing_listed.len() < LISTED {
                    self.missing_listed.push(clip(node, 256).into_owned());
                }
            }
        }
    }

    /// Lists a report read and not counted.
    pub fn unverified(&mut self, source: &str, why: &Unverified) {
        self.unverified += 1;
        *self
            .unverified_by
            .entry(why.class().to_string())
            .or_default() += 1;
        if self.unverified_listed.len() < LISTED {
            let u = Unreadable {
                source: clip(source, 300).into_owned(),
                error: clip(&why.to_string(), 300).into_owned(),
            };
            // In the order of their paths, whatever order they were read in.
            let at = self
                .unverified_listed
                .partition_point(|l| l.source <= u.source);
            self.unverified_listed.insert(at, u);
        }
    }

    /// Counts a report that could not be read.
    pub fn unreadable(&mut self, source: &str, error: &str) {
        self.unreadable += 1;
        if self.unreadable_listed.len() < LISTED {
            self.unreadable_listed.push(Unreadable {
                source: clip(source, 300).into_owned(),
                error: clip(error, 300).into_owned(),
            });
        }
    }

    /// The roll-up as text, for people on a terminal: everything a report
    /// said is escaped ([`escape`]).
    pub fn text(&self, silent_after: u64) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        let list = |m: &BTreeMap<String, u64>| {
            m.iter()
                .map(|(k, v)| format!("{}: {v}", escape(k)))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let _ = writeln!(
            out,
            "devices {} (reports signed by their enrolled keys)",
            self.devices
        );
        let _ = writeln!(out, "revisions held  {}", list(&self.revisions));
        let _ = writeln!(out, "modules  {}", list(&self.module_states));
        for (name, g) in &self.groups {
            let total: u64 = g.held.values().sum::<u64>() + g.other;
            let newest = match g.served {
                Some(_) => "revision served",
                None => "newest revision claimed",
            };
            let not_for = if g.not_for > 0 {
                format!("; not for {} devices listing it", g.not_for)
            } else {
                String::new()
            };
            let _ = writeln!(
                out,
                "group {}  {newest} {} held by {} of {total}; running it {} ({} failing); waiting for their turn {}{not_for}",
                escape(name),
                g.newest,
                g.held.get(&g.newest).copied().unwrap_or(0),
                g.on_newest,
                g.failing_on_newest,
                g.waiting
            );
        }
        if !self.facts.is_empty() {
            let _ = writeln!(out, "facts  {}", self.facts.line());
        }
        if !self.skew.is_empty() {
            let k = self.skew.summary();
            let secs = |s: Option<i64>| s.map_or("-".to_string(), |s| format!("{s:+} s"));
            let _ = writeln!(
                out,
                "clock skew  {} of {} reporting beyond ±{SKEW_LIMIT} s; worst {}, median {}",
                k.beyond,
                k.devices,
                secs(k.worst),
                secs(k.median)
            );
        }
        if !self.fetches.is_empty() {
            let _ = writeln!(out, "fetches  {}", self.fetches.line());
        }
        let _ = writeln!(out, "failing {}", self.failing);
        for f in &self.failing_listed {
            let reasons: Vec<_> = f.reasons.iter().map(|r| escape(r)).collect();
            let _ = writeln!(out, "  {}  {}", escape(&f.node), reasons.join("; "));
        }
        let _ = writeln!(
            out,
            "not heard from in {} {}",
            crate::model::time::format_duration(std::time::Duration::from_secs(silent_after)),
            self.silent
        );
        for s in &self.silent_listed {
            let _ = writeln!(
                out,
                "  {}  last report {}",
                escape(&s.node),
                escape(&s.sent_at)
            );
        }
        if self.not_counted > 0 {
            let _ = writeln!(
                out,
                "group claims not counted {} (claims are counted within what the host serves)",
                self.not_counted
            );
            for c in &self.not_counted_listed {
                let _ = writeln!(
                    out,
                    "  {}  group {}: {}",
                    escape(&c.node),
                    escape(&c.group),
                    escape(&c.why)
                );
            }
        }
        if self.missing > 0 {
            let _ = writeln!(out, "enrolled, no report counted {}", self.missing);
            for m in &self.missing_listed {
                let _ = writeln!(out, "  {}", escape(m));
            }
        }
        if self.unverified > 0 {
            let _ = writeln!(
                out,
                "unverified reports {}, not counted ({})",
                self.unverified,
                list(&self.unverified_by)
            );
            for u in &self.unverified_listed {
                let _ = writeln!(out, "  {}  {}", escape(&u.source), escape(&u.error));
            }
        }
        if self.unreadable > 0 {
            let _ = writeln!(out, "unreadable reports {}", self.unreadable);
            for u in &self.unreadable_listed {
                let _ = writeln!(out, "  {}  {}", escape(&u.source), escape(&u.error));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A report of `node` at `sent` with modules in `states`, in group
    /// `eu` holding `held` and running `running`.
    fn report(node: &str, sent: u64, states: &[&str], held: u64, running: u64) -> ReportView {
        let modules: serde_json::Map<String, J> = states
            .iter()
            .enumerate()
            .map(|(i, s)| {
                (
                    format!("m{i}"),
                    json!({"desired_digest": null, "health": null, "image_id": null,
                           "last_error": if failing_state(s) { json!({"class": s, "message": "exited 3"}) } else { J::Null },
                           "restart_count": null, "running_digest": null, "state": s}),
                )
            })
            .collect();
        let until = (held != running).then_some("2026-12-01T00:00:00Z");
        let v = json!({
            "agent_version": "0.6.0", "clock": {"plane_date": null, "status": "ok", "system": "x"},
            "engine": "reachable", "modules": modules, "node": node, "passing": true,
            "plane": {"conflicts": [], "error": null, "held": {"accepted_at": "x", "expires": "x", "floor": true, "issued_at": "x", "key_id": "k", "revision": 3, "revoked": null},
                      "groups": [{"error": null, "group": "eu", "revision": held, "running": running,
                                  "rollout": {"taken": held == running, "until": until, "why": "its turn"}}],
                      "last_contact": null, "refusal": null, "url": "u"},
            "quarantine": null, "sent_at": crate::model::time::format_rfc3339(sent), "seq": 1, "undelivered": 0
        });
        serde_json::from_value(v).unwrap()
    }

    use serde_json::Value as J;

    #[test]
    fn reports_roll_up_into_counts_lists_and_each_group_s_rollout() {
        let now = 1_800_000_000;
        let mut r = Rollup::default();
        r.add(&report("a", now, &["converged"], 5, 5), now, 3600);
        r.add(
            &report("b", now, &["crash-looping", "converged"], 5, 5),
            now,
            3600,
        );
        r.add(&report("c", now - 7200, &["converged"], 5, 4), now, 3600);
        // An older revision seen after the newer one counts for the older.
        r.add(&report("d", now, &["failed"], 4, 4), now, 3600);
        r.unreadable("nodes/e/status.json", "expected value at line 1");
        assert_eq!(r.devices, 4);
        assert_eq!(r.revisions["3"], 4);
        assert_eq!(r.module_states["converged"], 3);
        assert_eq!(r.failing, 2);
        assert_eq!(r.failing_listed[0].reasons, ["m0: crash-looping: exited 3"]);
        assert_eq!(r.silent, 1);
        assert_eq!(r.silent_listed[0].node, "c");
        let g = &r.groups["eu"];
        assert_eq!(
            (g.newest, g.on_newest, g.failing_on_newest, g.waiting),
            (5, 2, 1, 1)
        );
        assert_eq!(
            g.tally(5),
            Tally {
                on_new: 2,
                failing: 1
            }
        );
        assert_eq!(g.tally(4), Tally::default());
        // A device whose change waits (a window, a lock, its site's
        // budget) is not on the revision yet: it waits.
        r.add(
            &report("g", now, &["deferred", "converged"], 5, 5),
            now,
            3600,
        );
        let g = &r.groups["eu"];
        assert_eq!((g.on_newest, g.waiting), (2, 2));
        assert_eq!(g.tally(5).on_new, 2);
        // A newer revision seen later starts its own count.
        r.add(&report("f", now, &["converged"], 6, 6), now, 3600);
        assert_eq!(
            r.groups["eu"].tally(6),
            Tally {
                on_new: 1,
                failing: 0
            }
        );
        let text = r.text(3600);
        assert!(
            text.contains("group eu  newest revision claimed 6 held by 1 of 6"),
            "{text}"
        );
        assert!(text.contains("unreadable reports 1"), "{text}");
    }

    #[test]
    fn the_fleet_s_clock_skew_is_shown_only_when_reports_say_one() {
        let now = 1_800_000_000;
        let mut r = Rollup::default();
        // An older agent's report says none: nothing is shown.
        r.add(&report("old", now, &["converged"], 1, 1), now, 3600);
        assert!(!r.text(3600).contains("clock skew"), "{}", r.text(3600));
        let json = serde_json::to_value(&r).unwrap();
        assert!(json.get("skew").is_none(), "{json}");
        for (node, skew) in [("a", 0), ("b", -3), ("c", 61), ("d", -900), ("e", 2)] {
            let mut rep = report(node, now, &["converged"], 1, 1);
            rep.clock.skew = Some(skew);
            r.add(&rep, now, 3600);
        }
        let text = r.text(3600);
        assert!(
            text.contains("clock skew  2 of 5 reporting beyond ±60 s; worst -900 s, median +0 s"),
            "{text}"
        );
        assert_eq!(
            serde_json::to_value(&r).unwrap()["skew"],
            json!({"devices": 5, "beyond": 2, "worst": -900, "median": 0})
        );
    }

    #[test]
    fn the_devices_are_counted_by_their_facts_and_a_group_not_for_them_apart() {
        use crate::model::facts::Facts;
        let now = 1_800_000_000;
        let mut r = Rollup::default();
        r.add(&report("old", now, &["converged"], 1, 1), now, 3600);
        assert!(!r.text(3600).contains("facts"), "{}", r.text(3600));
        assert!(serde_json::to_value(&r).unwrap().get("facts").is_none());
        let facts = |arch: &str, engine: Option<(&str, &str)>, board: &str| Facts {
            arch: arch.into(),
            os: "linux".into(),
            engine: engine.map(|(e, _)| e.to_string()),
            engine_version: engine.map(|(_, v)| v.to_string()),
            labels: [("board".to_string(), board.to_string())].into(),
            ..Facts::default()
        };
        #[rustfmt::skip]
        let devices = [
            (facts("aarch64", Some(("podman", "4.3.1")), "rev-b"), false),
            (facts("aarch64", Some(("podman", "4.3.2")), "rev-b"), false),
            (facts("x86_64", Some(("docker", "26.1.5+dfsg1")), "rev-a"), true),
            (facts("x86_64", None, "rev-a"), true),
        ];
        for (i, (f, not_for)) in devices.into_iter().enumerate() {
            let mut rep = report(&format!("n{i}"), now, &["converged"], 1, 1);
            rep.facts = Some(f);
            if not_for {
                rep.plane.groups[0].not_for =
                    Some("its arch is x86_64; the group is for aarch64".into());
                rep.plane.groups[0].running = None;
            }
            r.add(&rep, now, 3600);
        }
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(
            v["facts"],
            json!({"devices": 4,
                   "arch": {"aarch64": 2, "x86_64": 2},
                   "engine": {"docker 26.1": 1, "not known yet": 1, "podman 4.3": 2},
                   "labels": {"board=rev-a": 2, "board=rev-b": 2}})
        );
        // Devices the group is not for are counted apart, never as waiting
        // or running.
        assert_eq!(r.groups["eu"].not_for, 2);
        assert_eq!(r.groups["eu"].on_newest, 3);
        assert_eq!(r.groups["eu"].held.get(&1), Some(&3));
        let text = r.text(3600);
        assert!(
            text.contains("facts  4 devices say: arch aarch64: 2, x86_64: 2; engine docker 26.1: 1, not known yet: 1, podman 4.3: 2; labels board=rev-a: 2, board=rev-b: 2"),
            "{text}"
        );
        assert!(text.contains("; not for 2 devices listing it"), "{text}");
    }

    #[test]
    fn the_fleet_s_fetches_are_summed_and_shown_only_when_reports_say_some() {
        use crate::model::fetch::{Ahead, Brought, Fetching, Progress};
        let now = 1_800_000_000;
        let mut r = Rollup::default();
        r.add(&report("old", now, &["converged"], 1, 1), now, 3600);
        assert!(!r.text(3600).contains("fetches"), "{}", r.text(3600));
        assert!(serde_json::to_value(&r).unwrap().get("fetches").is_none());
        let fetching = |images: &[(u64, u64)], ahead: Option<(u64, u64)>| Fetching {
            images: images
                .iter()
                .enumerate()
                .map(|(k, &(bytes, of))| (format!("reg/app:{k}"), Progress { bytes, of }))
                .collect(),
            ahead: ahead.map(|(images, here)| Ahead { images, here }),
        };
        let brought = |registry, chunks, local| Brought {
            image: "reg/app:2".into(),
            registry,
            chunks,
            local,
            peers: chunks / 2,
            ..Brought::default()
        };
        // (fetching, brought) per device
        let devices = [
            (
                Some(fetching(&[(1 << 20, 4 << 20), (0, 2 << 20)], None)),
                None,
            ),
            (Some(fetching(&[], Some((3, 3)))), Some(brought(100, 0, 0))),
            (
                Some(fetching(&[], Some((3, 1)))),
                Some(brought(0, 2 << 10, 5 << 20)),
            ),
            (None, Some(brought(u64::MAX, 1, 1))),
        ];
        for (k, (f, b)) in devices.into_iter().enumerate() {
            let mut rep = report(&format!("d{k}"), now, &["converged"], 1, 1);
            rep.fetching = f;
            rep.fetched = b;
            r.add(&rep, now, 3600);
        }
        assert_eq!(
            serde_json::to_value(&r).unwrap()["fetches"],
            json!({"fetching": 1, "bytes": 1 << 20, "of": 6 << 20, "ahead": 2, "ahead_ready": 1,
                   "brought": 3, "registry": u64::MAX, "chunks": (2 << 10) + 1, "local": (5 << 20) + 1,
                   "peers": 1 << 10})
        );
        let text = r.text(3600);
        assert!(
            text.contains("fetches  1 devices fetching, 1.0 MiB of 6.0 MiB; 2 ahead of a rollout turn (1 with every image here); the last image of 3 devices: "),
            "{text}"
        );
    }

    #[test]
    fn lists_are_capped_and_counts_are_whole() {
        let now = 1_800_000_000;
        let mut r = Rollup::default();
        for i in 0..(LISTED + 25) {
            r.add(&report(&format!("n{i}"), 0, &["failed"], 1, 1), now, 60);
        }
        assert_eq!(r.failing, (LISTED + 25) as u64);
        assert_eq!(r.failing_listed.len(), LISTED);
        assert_eq!(r.silent_listed.len(), LISTED);
    }

    #[test]
    fn a_claim_is_counted_only_within_what_the_host_serves() {
        let now = 1_800_000_000;
        let served = BTreeMap::from([("eu".to_string(), 5)]);
        // (held, running, counted?): in group eu, served at revision 5.
        #[rustfmt::skip]
        let cases = [
            (5, 5, true),
            (5, 4, true),                 // waiting for its turn
            (4, 4, true),                 // an older revision
            (6, 6, false),                // never published
            (u64::MAX, u64::MAX, false),  // the forged huge revision
            (5, 6, false),                // runs what was never published
        ];
        for (held, running, counted) in cases {
            let mut r = Rollup::served(&served);
            r.add(&report("a", now, &["failed"], held, running), now, 60);
            assert_eq!(r.not_counted == 0, counted, "{held} {running}");
            let g = &r.groups["eu"];
            assert_eq!(
                g.newest, 5,
                "{held} {running}: the newest stays the one served"
            );
            assert_eq!(g.held.values().sum::<u64>(), u64::from(counted));
            if !counted {
                assert!(r.not_counted_listed[0].why.contains("never published"));
            }
        }
        // A forged report first does not blind the count of the others.
        let mut r = Rollup::served(&served);
        r.add(
            &report("forged", now, &["converged"], u64::MAX, u64::MAX),
            now,
            60,
        );
        for n in ["a", "b"] {
            r.add(&report(n, now, &["failed"], 5, 5), now, 60);
        }
        assert_eq!(
            r.groups["eu"].tally(5),
            Tally {
                on_new: 2,
                failing: 2
            }
        );
        // A group the host does not serve is not counted.
        let mut r = Rollup::served(&BTreeMap::from([("us".to_string(), 5)]));
        r.add(&report("a", now, &["failed"], 5, 5), now, 60);
        assert_eq!((r.not_counted, r.groups.len()), (1, 1));
        assert!(!r.groups.contains_key("eu"));
        assert!(r.text(60).contains("group claims not counted 1"));
    }

    #[test]
    fn tables_of_counts_are_capped_whatever_reports_claim() {
        let now = 1_800_000_000;
        let mut r = Rollup::default();
        for i in 0..(MAX_KEYS as u64 + 10) {
            let state = format!("state-{i}");
            r.add(&report("a", now, &[state.as_str()], i + 1, i + 1), now, 60);
        }
        assert_eq!(r.module_states.len(), MAX_KEYS + 1);
        assert_eq!(r.module_states[OTHER], 10);
        let g = &r.groups["eu"];
        assert_eq!((g.held.len(), g.other), (MAX_KEYS, 10));
        // A device failing in many modules lists a few.
        let states = ["failed"; 40];
        r.add(&report("b", now, &states, 1, 1), now, 60);
        let listed = &r.failing_listed[0].reasons;
        assert_eq!(listed.len(), MAX_REASONS + 1);
        assert_eq!(listed.last().unwrap(), "and 30 more");
    }

    #[test]
    fn only_reports_signed_by_their_node_s_enrolled_key_count_and_a_node_once() {
        use crate::plane::envelope::SecretKey;
        use crate::views::signed::{self, Enrolled, Read};
        let now = 1_800_000_000;
        let (a, b, other) = (
            SecretKey::from_seed([1; 32]),
            SecretKey::from_seed([2; 32]),
            SecretKey::from_seed([3; 32]),
        );
        let (ka, kb) = (a.public(), b.public());
        // A failing report of `node` at `seq` carrying `carries`' key.
        let view = |node: &str, seq: u64, carries: &SecretKey| {
            let mut r = report(node, now, &["failed"], 5, 5);
            r.seq = seq;
            r.report_key = Some(carries.public().to_base64());
            r
        };
        // Signed as a device signs it.
        let sig = |node: &str, seq: u64, by: &SecretKey, carries: &SecretKey| {
            signed::sign(&serde_json::to_vec(&view(node, seq, carries)).unwrap(), by)
        };
        let plain = |node: &str| serde_json::to_vec(&report(node, now, &["failed"], 5, 5)).unwrap();
        type Reading<'a> = Vec<(&'a str, Vec<u8>)>;
        // (what, the reports read: the directory each is in and its bytes,
        // devices counted (all failing), the unverified by class)
        #[rustfmt::skip]
        type Case<'a> = (&'a str, Reading<'a>, u64, Vec<(&'a str, u64)>);
        let cases: Vec<Case> = vec![
            ("a good one", vec![("a", sig("a", 9, &a, &a))], 1, vec![]),
            (
                "two nodes",
                vec![("a", sig("a", 9, &a, &a)), ("b", sig("b", 4, &b, &b))],
                2,
                vec![],
            ),
            (
                "moved to another node's path",
                vec![("b", sig("a", 9, &a, &a))],
                0,
                vec![("moved", 1)],
            ),
            (
                "moved beside the other's own",
                vec![("b", sig("b", 4, &b, &b)), ("b", sig("a", 9, &a, &a))],
                1,
                vec![("moved", 1)],
            ),
            (
                "replayed: an older report beside the newer",
                vec![("a", sig("a", 9, &a, &a)), ("a", sig("a", 3, &a, &a))],
                1,
                vec![("duplicate", 1)],
            ),
            (
                "replayed: the older read first counts, once",
                vec![("a", sig("a", 3, &a, &a)), ("a", sig("a", 9, &a, &a))],
                1,
                vec![("duplicate", 1)],
            ),
            (
                "another key, carrying itself",
                vec![("a", sig("a", 9, &other, &other))],
                0,
                vec![("other-key", 1)],
            ),
            (
                "another key, carrying the enrolled one",
                vec![("a", sig("a", 9, &other, &a))],
                0,
                vec![("other-key", 1)],
            ),
            (
                "unsigned: an older agent's plain report",
                vec![("a", plain("a"))],
                0,
                vec![("unsigned", 1)],
            ),
            (
                "a node not enrolled",
                vec![("c", sig("c", 1, &other, &other))],
                0,
                vec![("not-enrolled", 1)],
            ),
            (
                "a mixed fleet",
                vec![
                    ("a", sig("a", 9, &a, &a)),
                    ("b", plain("b")),
                    ("c", plain("c")),
                ],
                1,
                vec![("unsigned", 2)],
            ),
        ];
        for (what, reading, counted, unverified) in cases {
            let mut r = Rollup::served(&BTreeMap::from([("eu".to_string(), 5)]));
            for (dir, bytes) in reading {
                let enrolled = match dir {
                    "a" => Enrolled::Key(&ka),
                    "b" => Enrolled::Key(&kb),
                    _ => Enrolled::NotEnrolled,
                };
                let read = Read::parse(&bytes).unwrap();
                let source = format!("nodes/{dir}/status.json");
                r.take(&source, signed::verify(read, Some(dir), enrolled), now, 60);
            }
            assert_eq!(r.devices, counted, "{what}");
            assert_eq!(r.failing, counted, "{what}: only what is counted fails");
            assert_eq!(
                r.groups["eu"].tally(5),
                Tally {
                    on_new: counted,
                    failing: counted
                },
                "{what}: the watcher counts what is counted"
            );
            let by: Vec<(&str, u64)> = r
                .unverified_by
                .iter()
                .map(|(k, v)| (k.as_str(), *v))
                .collect();
            assert_eq!(by, unverified, "{what}");
            assert_eq!(
                r.unverified,
                unverified.iter().map(|(_, n)| n).sum::<u64>(),
                "{what}"
            );
            assert_eq!(r.unverified_listed.len() as u64, r.unverified, "{what}");
            assert_eq!(r.unreadable, 0, "{what}");
        }
        // Listed with why, and said in the text.
        let mut r = Rollup::default();
        let dup = |seq| Ok(view("a", seq, &a));
        r.take("nodes/a/status.json", dup(9), now, 60);
        r.take("x/a/status.json", dup(3), now, 60);
        assert_eq!(
            r.unverified_listed[0],
            Unreadable {
                source: "x/a/status.json".into(),
                error: "a second report of its node in this reading (seq 3; the one counted has seq 9): a node counts once".into()
            }
        );
        let text = r.text(60);
        assert!(
            text.contains("unverified reports 1, not counted (duplicate: 1)\n  x/a/status.json  a second report"),
            "{text}"
        );
        // Enrolled nodes with no report counted are named.
        r.missing(["a", "b", "c"]);
        assert_eq!(
            (r.missing, r.missing_listed.clone()),
            (2, vec!["b".to_string(), "c".to_string()])
        );
        assert!(
            r.text(60)
                .contains("enrolled, no report counted 2\n  b\n  c\n"),
            "{}",
            r.text(60)
        );
        // A payload that does not read is unreadable, not unverified.
        r.take(
            "nodes/b/status.json",
            Err(Unverified::Unreadable("EOF".into())),
            now,
            60,
        );
        assert_eq!((r.unreadable, r.unverified), (1, 1));
    }

    #[test]
    fn what_reports_say_reaches_the_terminal_escaped() {
        let now = 1_800_000_000;
        let mut r = Rollup::default();
        let mut bad = report("evil\u{1b}[2J\rfailing 0\nnode", now, &["failed"], 1, 1);
        bad.modules
            .get_mut("m0")
            .unwrap()
            .last_error
            .as_mut()
            .unwrap()
            .message = "\u{1b}]0;title\u{7}".into();
        r.add(&bad, now, 60);
        r.unreadable("nodes/\u{1b}x/status.json", "bad\r\nline");
        let text = r.text(60);
        assert!(!text.contains(['\u{1b}', '\r', '\u{7}']), "{text:?}");
        assert!(text.contains("evil\\e[2J\\rfailing 0\\nnode"), "{text}");
        assert!(text.contains("\\e]0;title\\u{7}"), "{text}");
        assert!(text.contains("bad\\r\\nline"), "{text}");
        // Every line is one the roll-up wrote.
        assert_eq!(text.lines().count(), 9, "{text}");
    }
}
