//! Disk stewardship's rules, pure: how full a filesystem may get before it
//! is under pressure or critical, the room a pull must leave, what a pull
//! is estimated to need, and which of the engine's images may go ([`judge`],
//! every rule a row of its table test) and which of those go now
//! ([`choose`]). Its wire types (the disks in the status and the report,
//! what a collection did) keep their fields in alphabetical order, as
//! every view does.
//!
//! The thresholds follow kubelet's image collection (collect from 85 %
//! used down to 80 %, only images older than a minimum age); the reserve a
//! pull must leave, the factor from compressed to unpacked and the
//! critical level are stead's, stated in docs/operations.md ("Disk").

use std::collections::{BTreeMap, BTreeSet};

/// A mebibyte.
pub const MIB: u64 = 1 << 20;
/// A gibibyte.
pub const GIB: u64 = 1 << 30;

/// The unpacked size of an image is estimated at this many times its
/// compressed layers (as tenths: 2.5×), which also covers the compressed
/// layers while they are extracted. Typical gzip ratios of container
/// layers are 2 to 3.
pub const UNPACK_TENTHS: u64 = 25;

/// A filesystem's size and what is free on it for the engine, bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Space {
    /// Its size.
    pub total: u64,
    /// What an unprivileged writer may still use.
    pub free: u64,
}

impl Space {
    /// What is used, bytes.
    pub fn used(&self) -> u64 {
        self.total.saturating_sub(self.free)
    }

    /// What is used, in whole percent of the size (0 for an empty size).
    pub fn used_percent(&self) -> u64 {
        (self.used() * 100).checked_div(self.total).unwrap_or(0)
    }

    /// How full it is: critical under [`critical_free`], under pressure at
    /// or above `high_percent` used.
    pub fn level(&self, high_percent: u8) -> Level {
        if self.total == 0 {
            Level::Ok
        } else if self.free < critical_free(self.total) {
            Level::Critical
        } else if self.used_percent() >= u64::from(high_percent) {
            Level::Pressure
        } else {
            Level::Ok
        }
    }
}

/// How full a filesystem is, as the status says it.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Level {
    /// Below the high threshold.
    Ok,
    /// At or above the high threshold: unused images are collected.
    Pressure,
    /// Almost full: readiness says so.
    Critical,
}

impl Level {
    /// Its name, as the API spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Ok => "ok",
            Level::Pressure => "pressure",
            Level::Critical => "critical",
        }
    }
}

/// Below this much free a filesystem is critical: 2 % of it, but at least
/// 256 MiB (or a tenth of a filesystem smaller than 2.5 GiB).
pub fn critical_free(total: u64) -> u64 {
    (total / 50).max((256 * MIB).min(total / 10))
}

/// What a pull must leave free on the engine's data root: 10 % of the
/// filesystem or 1 GiB, whichever is less.
pub fn pull_reserve(total: u64) -> u64 {
    (total / 10).min(GIB)
}

/// Below this much free on stead's own data directory the store stops
/// writing events (it keeps the last ones) so that intentions can still be
/// written: 5 % of the filesystem or 64 MiB, whichever is less.
pub fn store_reserve(total: u64) -> u64 {
    (total / 20).min(64 * MIB)
}

/// A layer of an image, as its manifest names it: its digest and its
/// compressed size.
pub type Layer = (String, u64);

/// What a pull of these layers is estimated to need on disk, bytes: the
/// layers not already here, unpacked. The sizes are a registry's word: a
/// sum past `u64::MAX` is `u64::MAX` (never fits), not a wrapped small
/// number that would.
pub fn pull_need(layers: &[Layer], present: &BTreeSet<String>) -> u64 {
    let fetched = layers
        .iter()
        .filter(|(d, _)| !present.contains(d))
        .fold(0u64, |sum, (_, s)| sum.saturating_add(*s));
    (fetched / 10)
        .saturating_mul(UNPACK_TENTHS)
        .saturating_add((fetched % 10) * UNPACK_TENTHS / 10)
}

/// Why a pull is not started.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NoRoom {
    /// The image.
    pub image: String,
    /// What it is estimated to need.
    pub need: u64,
    /// What is free.
    pub free: u64,
    /// What must stay free.
    pub reserve: u64,
    /// The filesystem's path (the engine's data root).
    pub path: String,
}

impl std::fmt::Display for NoRoom {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "no room for {}: needs ~{}, {} free on {} (and {} must stay free); not pulled",
            self.image,
            human(self.need),
            human(self.free),
            self.path,
            human(self.reserve)
        )
    }
}

/// Whether a pull that needs `need` fits, leaving the reserve free.
pub fn fits(need: u64, space: Space) -> bool {
    space.free.saturating_sub(need) >= pull_reserve(space.total) && space.free >= need
}

/// Bytes for people: `512 B`, `12.3 MiB`, `1.5 GiB`.
pub fn human(n: u64) -> String {
    if n < 1024 {
        return format!("{n} B");
    }
    let (unit, div) = if n >= GIB {
        ("GiB", GIB)
    } else if n >= MIB {
        ("MiB", MIB)
    } else {
        ("KiB", 1024)
    };
    let tenths = (n as u128 * 10 / div as u128) as u64;
    format!("{}.{} {unit}", tenths / 10, tenths % 10)
}

/// Which images the agent may remove (`[images] collect`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Collect {
    /// Only images this node pulled (the store records which).
    #[default]
    Pulled,
    /// Any image no rule keeps, whoever brought it.
    All,
}

/// How images are collected (`[images]` of stead.toml).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Policy {
    /// Which images may go.
    pub collect: Collect,
    /// Used percent of the data root at which collection starts.
    pub high: u8,
    /// Used percent it collects down to.
    pub low: u8,
    /// An image younger than this (since it came here), seconds, stays.
    pub min_age: u64,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            collect: Collect::Pulled,
            high: 85,
            low: 80,
            min_age: 600,
        }
    }
}

/// One image of the engine, as the decision reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Held {
    /// Its ID.
    pub id: String,
    /// Its names (tags, then repository digests).
    pub names: Vec<String>,
    /// Its size, bytes.
    pub size: u64,
    /// Since when it is here, seconds since the epoch: when this node
    /// pulled it, or when this agent first saw it.
    pub since: u64,
}

/// What every rule reads, by image ID.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Needs {
    /// Images a container uses (any container: managed or not, running or
    /// stopped), with one of its names.
    pub used: BTreeMap<String, String>,
    /// Images an intention names (by tag, digest or ID; a module held,
    /// waiting or backing off too), or an open reload landed, with the
    /// module.
    pub named: BTreeMap<String, String>,
    /// Each module's previous image (what a rollback goes back to), with
    /// the module.
    pub previous: BTreeMap<String, String>,
    /// Images this node pulled, with the reference it pulled each by.
    pub pulled: BTreeMap<String, String>,
    /// Images fetched ahead of a coming rollout turn, with the reference.
    pub ahead: BTreeMap<String, String>,
}

/// Why an image stays.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Kept {
    /// A container uses it.
    Used(String),
    /// An intention names it.
    Named(String),
    /// It is a module's previous image.
    Previous(String),
    /// It was fetched ahead of a group's coming rollout turn.
    Ahead(String),
    /// This node did not pull it (and `collect` is `pulled`).
    NotPulledHere,
    /// This node pulled it, but a name it did not pull points to it too
    /// (built or pulled by hand; and `collect` is `pulled`).
    OtherName(String),
    /// It came here less than the minimum age ago (seconds).
    Young(u64),
}

impl std::fmt::Display for Kept {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Kept::Used(c) => write!(f, "container {c} uses it"),
            Kept::Named(m) => write!(f, "module {m} names it"),
            Kept::Previous(m) => write!(
                f,
                "module {m} ran it before its last image change (kept for a rollback)"
            ),
            Kept::Ahead(r) => write!(f, "{r} was fetched ahead of a rollout's coming turn"),
            Kept::NotPulledHere => f.write_str("this node did not pull it (collect = \"pulled\")"),
            Kept::OtherName(n) => write!(
                f,
                "{n} names it, a name this node did not pull (collect = \"pulled\")"
            ),
            Kept::Young(s) => write!(f, "it came here {s}s ago, under the minimum age"),
        }
    }
}

/// Whether an image may go, by the rules in order: used, named, a
/// previous image, fetched ahead of a rollout turn, not pulled here, too
/// young. `None`: no rule keeps it.
pub fn judge(image: &Held, needs: &Needs, policy: &Policy, now: u64) -> Option<Kept> {
    if let Some(c) = needs.used.get(&image.id) {
        return Some(Kept::Used(c.clone()));
    }
    if let Some(m) = needs.named.get(&image.id) {
        return Some(Kept::Named(m.clone()));
    }
    if let Some(m) = needs.previous.get(&image.id) {
        return Some(Kept::Previous(m.clone()));
    }
    if let Some(r) = needs.ahead.get(&image.id) {
        return Some(Kept::Ahead(r.clone()));
    }
    if policy.collect == Collect::Pulled {
        let Some(pulled) = needs.pulled.get(&image.id) else {
            return Some(Kept::NotPulledHere);
        };
        if let Some(n) = image.names.iter().find(|n| !came_with(n, pulled)) {
            return Some(Kept::OtherName(n.clone()));
        }
    }
    let age = now.saturating_sub(image.since);
    if age < policy.min_age {
        return Some(Kept::Young(age));
    }
    None
}

/// Since when an image counts as here, for [`judge`]'s age: when this
/// node pulled it (`pulled`, its record), else when this agent first saw
/// it listed (`first_seen`). A pull recorded in the future (pulled under a
/// clock that was ahead, in 2100, and corrected since) is not believed: it
/// would keep the image young until then. The first sighting under
/// today's clock stands for it.
pub fn since(pulled: Option<u64>, first_seen: u64, now: u64) -> u64 {
    match pulled {
        Some(at) if at <= now => at,
        _ => first_seen.min(now),
    }
}

/// Whether the engine's name `name` for an image (a tag, or a repository
/// digest) came with this node's pull by `pulled`: the same repository,
/// and the tag pulled, or a digest (which a pull by tag adds; the agent's
/// own pull adds it as the tag `sha256-<hex>`). A name that
/// does not read as a reference came with no pull; an older engine's
/// placeholder for no name (`<none>:<none>`) is no name.
pub fn came_with(name: &str, pulled: &str) -> bool {
    use crate::model::reference::Reference;
    if name.starts_with("<none>") {
        return true;
    }
    let (Ok(n), Ok(p)) = (Reference::parse(name), Reference::parse(pulled)) else {
        return false;
    };
    (n.registry == p.registry && n.repository == p.repository)
        && match (&n.tag, &n.digest) {
            (Some(t), _) => {
                p.tag.as_ref() == Some(t) || crate::model::reference::tag_digest(t).is_some()
            }
            (None, digest) => digest.is_some(),
        }
}

/// Why images are collected now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trigger {
    /// A change held (a reload done, an image change converged): every
    /// image no rule keeps goes.
    Changed,
    /// Asked (`stead images prune`): every image no rule keeps goes.
    Asked,
    /// The data root is at or above the high threshold: the oldest go
    /// until it is at the low one.
    Pressure,
    /// A pull needs this much room: the oldest go until it fits.
    Room(u64),
}

impl Trigger {
    /// Why, for the event.
    pub fn why(&self, policy: &Policy) -> String {
        match self {
            Trigger::Changed => "after a change held".into(),
            Trigger::Asked => "asked to prune".into(),
            Trigger::Pressure => format!(
                "the engine's data root is {}% used or more (collecting down to {}%)",
                policy.high, policy.low
            ),
            Trigger::Room(n) => format!("a pull needs ~{}", human(*n)),
        }
    }
}

/// Of the images no rule keeps, those to remove now, oldest first (and by
/// ID among equals): all of them when a change held or when asked; under
/// pressure, until the data root would be at the low threshold; for a
/// pull, until it would fit. A freed size is the image's own, an estimate
/// (layers shared with kept images are not freed).
pub fn choose<'a>(
    removable: &[&'a Held],
    trigger: Trigger,
    space: Space,
    policy: &Policy,
) -> Vec<&'a Held> {
    let mut by_age: Vec<&Held> = removable.to_vec();
    super::sort::sort_by(&mut by_age, |a, b| {
        a.since.cmp(&b.since).then(a.id.cmp(&b.id))
    });
    let goal_used = match trigger {
        Trigger::Changed | Trigger::Asked => return by_age,
        Trigger::Pressure => space.total / 100 * u64::from(policy.low),
        Trigger::Room(need) => space
            .total
            .saturating_sub(need)
            .saturating_sub(pull_reserve(space.total)),
    };
    let mut used = space.used();
    let mut out = Vec::new();
    for i in by_age {
        if used <= goal_used {
            break;
        }
        used = used.saturating_sub(i.size);
        out.push(i);
    }
    out
}

/// One filesystem that matters to the node, as the status says it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Filesystem {
    /// What is free on it, bytes.
    pub free_bytes: u64,
    /// How full it is.
    pub level: Level,
    /// A path on it (the first of its roles').
    pub path: String,
    /// What is on it: `images` (the engine's data root), `store` (stead's
    /// data directory), `logs` (the log directory).
    pub roles: Vec<String>,
    /// Its size, bytes.
    pub size_bytes: u64,
}

/// What the logs of the modules may take at most.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Logs {
    /// The most the rotated logs of every module take together, bytes.
    pub bound_bytes: u64,
    /// Modules whose logs have no bound stead knows (a driver other than
    /// `local` or `json-file`, or `json-file` without `max-size`).
    pub unbounded: Vec<String>,
}

/// The node's disks, as the status, the metrics and the report say them.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Disks {
    /// Whether the store has stopped writing events to keep room for
    /// intentions (its filesystem is below its reserve).
    pub events_paused: bool,
    /// Each filesystem once.
    pub filesystems: Vec<Filesystem>,
    /// The worst level of the filesystems.
    pub level: Level,
    /// The modules' logs.
    pub logs: Logs,
}

impl Default for Disks {
    fn default() -> Self {
        Disks {
            level: Level::Ok,
            filesystems: Vec::new(),
            logs: Logs::default(),
            events_paused: false,
        }
    }
}

impl Disks {
    /// Why readiness is false, when a filesystem is critical.
    pub fn critical(&self) -> Option<String> {
        let bad: Vec<String> = self
            .filesystems
            .iter()
            .filter(|f| f.level == Level::Critical)
            .map(|f| {
                format!(
                    "{} ({}) has {} free of {}",
                    f.path,
                    f.roles.join(", "),
                    human(f.free_bytes),
                    human(f.size_bytes)
                )
            })
            .collect();
        (!bad.is_empty()).then(|| format!("disk critical: {}", bad.join("; ")))
    }
}

/// The most a container's logs take with these log options, bytes; `None`
/// when stead knows no bound (Docker's own defaults: `local` keeps 5 files
/// of 20 MB; `json-file` without `max-size` grows without end).
pub fn log_bound(driver: &str, options: &BTreeMap<String, String>) -> Option<u64> {
    let size = |s: &String| {
        crate::model::runtime::parse_bytes(&crate::model::runtime::Bytes::Text(s.clone()))
            .ok()
            .and_then(|n| u64::try_from(n).ok())
    };
    let files = |d: u64| {
        options
            .get("max-file")
            .and_then(|n| n.parse::<u64>().ok())
            .unwrap_or(d)
    };
    match driver {
        "local" => Some(options.get("max-size").map_or(Some(20 * 1_000_000), size)? * files(5)),
        "json-file" | "k8s-file" => Some(size(options.get("max-size")?)? * files(1)),
        "none" => Some(0),
        _ => None,
    }
}

/// One image in what a collection did or would do.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ImageLine {
    /// Its ID.
    pub id: String,
    /// Its names.
    pub names: Vec<String>,
    /// Its size, bytes.
    pub size_bytes: u64,
    /// Why it went (or would), or why it stays.
    pub why: String,
}

/// What a collection of images did (or, as a dry run, would do): the wire
/// format of `POST /v1/images/prune`, shared with the CLI.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Pruned {
    /// Nothing was removed: this is what would be.
    pub dry_run: bool,
    /// Why it ran.
    pub trigger: String,
    /// What went (or would).
    pub removed: Vec<ImageLine>,
    /// What stays, and why.
    pub kept: Vec<ImageLine>,
    /// What the engine would not remove, and why.
    pub failed: Vec<ImageLine>,
    /// The bytes the removed images took.
    pub reclaimed_bytes: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(id: &str, since: u64) -> Held {
        let mut names = vec![format!("{id}:1")];
        if id == "renamed" {
            names.push("mine:dev".into());
        }
        Held {
            id: id.into(),
            names,
            size: 100 * MIB,
            since,
        }
    }

    #[test]
    fn every_rule_keeps_what_it_says_and_nothing_else() {
        let mut needs = Needs::default();
        needs.used.insert("used".into(), "stead-a".into());
        needs.named.insert("named".into(), "b".into());
        needs.previous.insert("prev".into(), "c".into());
        needs.ahead.insert("next".into(), "next:2".into());
        for id in [
            "used", "named", "prev", "next", "old", "young", "both", "renamed",
        ] {
            needs.pulled.insert(id.into(), format!("{id}:1"));
        }
        // Used and named: the first rule says why.
        needs.used.insert("both".into(), "stead-d".into());
        needs.named.insert("both".into(), "d".into());
        let now = 10_000;
        let pulled = Policy::default();
        let all = Policy {
            collect: Collect::All,
            ..Policy::default()
        };
        for (id, since, policy, kept) in [
            ("used", 0, pulled, Some(Kept::Used("stead-a".into()))),
            ("named", 0, pulled, Some(Kept::Named("b".into()))),
            ("prev", 0, pulled, Some(Kept::Previous("c".into()))),
            ("next", 0, pulled, Some(Kept::Ahead("next:2".into()))),
            ("next", 0, all, Some(Kept::Ahead("next:2".into()))),
            ("both", 0, pulled, Some(Kept::Used("stead-d".into()))),
            ("old", 0, pulled, None),
            ("young", now - 599, pulled, Some(Kept::Young(599))),
            ("young", now - 600, pulled, None),
            // Not pulled here: kept unless collect = "all".
            ("theirs", 0, pulled, Some(Kept::NotPulledHere)),
            ("theirs", 0, all, None),
            // collect = "all" still keeps what a rule keeps.
            ("used", 0, all, Some(Kept::Used("stead-a".into()))),
            ("prev", 0, all, Some(Kept::Previous("c".into()))),
            ("theirs", now - 10, all, Some(Kept::Young(10))),
            // Pulled here, and named by hand too (`docker tag`, or built
            // to the same ID): kept unless collect = "all".
            (
                "renamed",
                0,
                pulled,
                Some(Kept::OtherName("mine:dev".into())),
            ),
            ("renamed", 0, all, None),
            // A clock behind the record reads as young, never as old.
            ("old", now + 50, pulled, Some(Kept::Young(0))),
        ] {
            assert_eq!(
                judge(&held(id, since), &needs, &policy, now),
                kept,
                "{id} since {since}"
            );
        }
    }

    #[test]
    fn an_image_counts_from_its_pull_unless_the_record_is_in_the_future() {
        let now = 10_000;
        for (pulled, first_seen, want) in [
            (Some(5_000), 9_000, 5_000),    // pulled here: from the pull
            (None, 9_000, 9_000),           // not pulled here: first seen
            (Some(now), 9_000, now),        // pulled this second
            (Some(now + 1), 9_000, 9_000),  // pulled under a clock ahead
            (Some(u64::MAX), 9_000, 9_000), // ... far ahead (2100)
            (None, now + 5, now),           // never later than now
        ] {
            assert_eq!(
                since(pulled, first_seen, now),
                want,
                "{pulled:?} {first_seen}"
            );
        }
    }

    #[test]
    fn a_name_came_with_a_pull_of_its_repository_by_its_tag_or_as_a_digest() {
        let d = format!("sha256:{}", "a".repeat(64));
        // (the engine's name, the reference pulled, came with it)
        #[rustfmt::skip]
        let cases = [
            ("app:1", "app:1", true),
            ("app:1", "docker.io/library/app:1", true),
            ("app:latest", "app", true),
            (&*format!("app@{d}"), "app:1", true),
            (&*format!("reg.io:5000/x/app@{d}"), "reg.io:5000/x/app:1", true),
            (&*format!("app@{d}"), &*format!("app@{d}"), true),
            // The agent's own pull names a digest as a tag.
            (&*format!("app:sha256-{}", "a".repeat(64)), &*format!("app@{d}"), true),
            (&*format!("app:sha256-{}", "a".repeat(64)), "app:1", true),
            (&*format!("other:sha256-{}", "a".repeat(64)), "app:1", false),
            ("app:sha256-abc", "app:1", false),
            // Another tag, another repository, another registry.
            ("app:2", "app:1", false),
            ("app:1", &*format!("app@{d}"), false),
            ("mine:dev", "app:1", false),
            ("reg.io/app:1", "app:1", false),
            (&*format!("other@{d}"), "app:1", false),
            // No name; not a reference.
            ("<none>:<none>", "app:1", true),
            ("<none>@<none>", "app:1", true),
            ("APP:1", "app:1", false),
        ];
        for (name, pulled, want) in cases {
            assert_eq!(came_with(name, pulled), want, "{name} pulled as {pulled}");
        }
    }

    #[test]
    fn the_oldest_go_first_and_only_as_many_as_the_trigger_needs() {
        let (a, b, c) = (held("a", 30), held("b", 10), held("c", 20));
        let all = [&a, &b, &c];
        let policy = Policy::default();
        let ids = |v: Vec<&Held>| v.iter().map(|h| h.id.clone()).collect::<Vec<_>>();
        let gib = Space {
            total: 1000 * MIB,
            free: 100 * MIB,
        };
        for (trigger, space, want) in [
            (Trigger::Changed, gib, vec!["b", "c", "a"]),
            (Trigger::Asked, gib, vec!["b", "c", "a"]),
            // 90 % used, 80 % is 800 MiB: one of 100 MiB goes.
            (Trigger::Pressure, gib, vec!["b"]),
            // Already at the low threshold: none.
            (
                Trigger::Pressure,
                Space {
                    total: 1000 * MIB,
                    free: 200 * MIB,
                },
                vec![],
            ),
            // 150 MiB more and 100 MiB reserve: 150 MiB to free, two go.
            (Trigger::Room(150 * MIB), gib, vec!["b", "c"]),
            // More than every image frees: all go (and the pull is still
            // refused by `fits`).
            (Trigger::Room(900 * MIB), gib, vec!["b", "c", "a"]),
        ] {
            assert_eq!(
                ids(choose(&all, trigger, space, &policy)),
                want,
                "{trigger:?}"
            );
        }
    }

    #[test]
    fn levels_reserves_and_the_need_of_a_pull() {
        let s = |total, free| Space { total, free };
        for (space, level) in [
            (s(16 * GIB, 8 * GIB), Level::Ok),
            (s(100 * GIB, 16 * GIB), Level::Ok),
            (s(100 * GIB, 15 * GIB), Level::Pressure),
            (s(100 * GIB, 2 * GIB), Level::Pressure),
            (s(100 * GIB, 2 * GIB - 1), Level::Critical),
            // A small filesystem: critical under a tenth of it.
            (s(400 * MIB, 41 * MIB), Level::Pressure),
            (s(400 * MIB, 39 * MIB), Level::Critical),
            // 16 GiB: 2 % is more than 256 MiB.
            (s(16 * GIB, 300 * MIB), Level::Critical),
            (s(0, 0), Level::Ok),
        ] {
            assert_eq!(space.level(85), level, "{space:?}");
        }
        assert_eq!(pull_reserve(16 * GIB), GIB);
        assert_eq!(pull_reserve(4 * GIB), 4 * GIB / 10);
        assert_eq!(store_reserve(16 * GIB), 64 * MIB);
        assert_eq!(store_reserve(400 * MIB), 20 * MIB);
        let layers = vec![("a".to_string(), 40 * MIB), ("b".to_string(), 4 * MIB)];
        let none = BTreeSet::new();
        assert_eq!(pull_need(&layers, &none), 110 * MIB);
        let a: BTreeSet<String> = ["a".to_string()].into();
        assert_eq!(pull_need(&layers, &a), 10 * MIB);
        // Sizes that overflow when summed (a registry's word) never fit.
        let huge = vec![
            ("a".to_string(), u64::MAX / 2 + 1),
            ("b".to_string(), u64::MAX / 2 + 1),
        ];
        assert_eq!(pull_need(&huge, &none), u64::MAX);
        assert!(!fits(pull_need(&huge, &none), s(u64::MAX, u64::MAX)));
        // Large, not overflowing: the estimate is 2.5× still (saturating
        // before dividing read u64::MAX / 10 here).
        let big = vec![("a".to_string(), u64::MAX / 3)];
        assert_eq!(pull_need(&big, &none), u64::MAX / 30 * 25 + 12);
        assert_eq!(pull_need(&[("a".to_string(), 9)], &none), 22);
        // 1 GiB free of 4: the reserve is 409.6 MiB.
        let four = s(4 * GIB, GIB);
        assert!(fits(600 * MIB, four));
        assert!(!fits(700 * MIB, four));
        assert!(!fits(2 * GIB, four));
        assert_eq!(human(512), "512 B");
        assert_eq!(human(1536), "1.5 KiB");
        assert_eq!(human(110 * MIB), "110.0 MiB");
        assert_eq!(human(3 * GIB / 2), "1.5 GiB");
        let no = NoRoom {
            image: "app:2".into(),
            need: 110 * MIB,
            free: 90 * MIB,
            reserve: 40 * MIB,
            path: "/var/lib/docker".into(),
        };
        let o = |kv: &[(&str, &str)]| {
            kv.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>()
        };
        for (driver, options, bound) in [
            (
                "local",
                o(&[("max-size", "10m"), ("max-file", "3")]),
                Some(30 * MIB),
            ),
            ("local", o(&[]), Some(100_000_000)),
            ("json-file", o(&[("max-size", "10m")]), Some(10 * MIB)),
            (
                "json-file",
                o(&[("max-size", "1m"), ("max-file", "4")]),
                Some(4 * MIB),
            ),
            ("json-file", o(&[]), None),
            ("journald", o(&[]), None),
            ("none", o(&[]), Some(0)),
        ] {
            assert_eq!(log_bound(driver, &options), bound, "{driver} {options:?}");
        }
        assert_eq!(
            no.to_string(),
            "no room for app:2: needs ~110.0 MiB, 90.0 MiB free on /var/lib/docker (and 40.0 MiB must stay free); not pulled"
        );
    }
}
