//! Fleets, decided on each device: a device's place in a staged rollout and
//! whether it takes a group's new revision now ([`rollout`]), what a
//! group's modules and a node's own overrides compose to ([`compose`]), and
//! when a rollout's watcher halts it ([`halt`]). No server decides: the
//! host serves signed files, and every device computes the same answer from
//! them, its id and its clock. Pure; every rule is a line of a table test.

use std::collections::{BTreeMap, BTreeSet};

use crate::model::intention::Intention;
use crate::model::names::{ModuleName, NodeId, SettingKey};
use crate::model::value::Value;

/// A group's name: what node documents list and the host's
/// `groups/<name>/desired.json`; a node id's characters.
pub type GroupName = NodeId;

/// A group revision's staged rollout, as its document says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rollout {
    /// When the first devices take it (after the canaries), seconds since
    /// the epoch.
    pub start: u64,
    /// How long until every device has; 0 takes it everywhere at `start`.
    pub duration: u64,
    /// Mixed into each device's position: a new salt deals new places.
    pub salt: String,
    /// Devices that take it first, at once.
    pub canaries: BTreeSet<NodeId>,
    /// Stops the rollout where it is: a device that has not taken it
    /// keeps the previous revision.
    pub halt: bool,
    /// Every device runs the previous revision, those that took the new one
    /// too.
    pub revert: bool,
    /// When devices fetch the new revision's images ahead of their turn;
    /// none: as soon as they read it.
    pub download: Option<Window>,
}

/// A time of day, UTC, in which devices fetch ahead of their turn:
/// from `from` (included) to `to` (excluded), seconds since midnight; a
/// window that ends before it starts runs past midnight.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    pub from: u32,
    pub to: u32,
}

const DAY: u64 = 86_400;

impl Window {
    /// Reads `HH:MM-HH:MM` (UTC); the two ends must differ.
    pub fn parse(s: &str) -> Result<Window, String> {
        let bad = || format!("{s:?} is not a window of the day: say HH:MM-HH:MM, in UTC");
        let (from, to) = s.split_once('-').ok_or_else(bad)?;
        let at = |t: &str| crate::model::time::time_of_day(t, false);
        let (from, to) = (at(from).ok_or_else(bad)?, at(to).ok_or_else(bad)?);
        if from == to {
            return Err(format!(
                "{s:?} starts where it ends: leave the window out to fetch at any time"
            ));
        }
        Ok(Window { from, to })
    }

    /// Whether `now` (seconds since the epoch) is inside, and when that
    /// changes next.
    pub fn at(&self, now: u64) -> (bool, u64) {
        let midnight = now - now % DAY;
        let t = (now % DAY) as u32;
        let (from, to) = (u64::from(self.from), u64::from(self.to));
        let inside = if self.from < self.to {
            (self.from..self.to).contains(&t)
        } else {
            t >= self.from || t < self.to
        };
        let edge = if inside { to } else { from };
        let next = if u64::from(t) < edge {
            midnight + edge
        } else {
            midnight + DAY + edge
        };
        (inside, next)
    }
}

/// A device's place in a rollout: the first eight bytes of SHA-256(salt,
/// a zero byte, node id), as a fraction of 2^64 in [0, 1). Uniform over a
/// fleet, stable for a device and a salt, and computable by anyone (the
/// watcher, `stead plane status`) from the documents alone.
pub fn position(node: &NodeId, salt: &str) -> u64 {
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    ctx.update(salt.as_bytes());
    ctx.update(&[0]);
    ctx.update(node.as_str().as_bytes());
    let d = ctx.finish();
    let mut first = [0u8; 8];
    first.copy_from_slice(&d.as_ref()[..8]);
    u64::from_be_bytes(first)
}

/// A position as a fraction in [0, 1), for people.
pub fn fraction(position: u64) -> f64 {
    position as f64 / 18_446_744_073_709_551_616.0
}

/// Which of a group's two revisions a device runs, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Take {
    /// The new revision.
    New(Why),
    /// The previous revision, until `until` (seconds since the epoch) when
    /// its turn comes; `None` while halted or reverted.
    Previous { why: Why, until: Option<u64> },
}

/// Why a device runs the revision it runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Why {
    /// The document asks every device to go back.
    Reverted,
    /// It took the new revision before: a device never goes back by itself.
    TookBefore,
    /// Halted before its turn.
    Halted,
    /// One of the canaries.
    Canary,
    /// The rollout has not started.
    NotStarted,
    /// Its place in the rollout came (or did not yet).
    Turn,
}

impl Why {
    pub fn as_str(self) -> &'static str {
        match self {
            Why::Reverted => "reverted",
            Why::TookBefore => "taken before",
            Why::Halted => "halted",
            Why::Canary => "canary",
            Why::NotStarted => "not started",
            Why::Turn => "its turn",
        }
    }
}

/// Whether device `node` runs the new revision at `now`: `took` says it
/// ran it before. `now` is the agent's "now" (never earlier than its build
/// or the newest document it accepted), so a clock in 1970 waits, keeping
/// what runs: never destructive. First rule first: revert, taken before,
/// halt, canary, not started, its turn.
pub fn rollout(r: &Rollout, node: &NodeId, now: u64, took: bool) -> Take {
    if r.revert {
        return Take::Previous {
            why: Why::Reverted,
            until: None,
        };
    }
    if took {
        return Take::New(Why::TookBefore);
    }
    if r.halt {
        return Take::Previous {
            why: Why::Halted,
            until: None,
        };
    }
    if r.canaries.contains(node) {
        return Take::New(Why::Canary);
    }
    let pos = position(node, &r.salt);
    // Its turn: start + pos × duration, rounded up to a whole second.
    let turn = r
        .start
        .saturating_add(((u128::from(pos) * u128::from(r.duration)).div_ceil(1u128 << 64)) as u64);
    if now < r.start {
        return Take::Previous {
            why: Why::NotStarted,
            until: Some(turn),
        };
    }
    // Taken once the elapsed fraction passes its place: elapsed × 2^64 >
    // pos × duration (exact, no floating point).
    let elapsed = u128::from(now - r.start);
    if r.duration == 0 || elapsed << 64 > u128::from(pos) * u128::from(r.duration) {
        Take::New(Why::Turn)
    } else {
        Take::Previous {
            why: Why::Turn,
            until: Some(turn),
        }
    }
}

/// What the watcher counts of a rollout's new revision from the devices'
/// reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// Devices that report running the new revision.
    pub on_new: u64,
    /// Of those, devices with a module failed or crash-looping.
    pub failing: u64,
}

/// When the watcher halts: at least `min_reports` devices on the new
/// revision, and at least `rate_permille` of them failing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Threshold {
    pub rate_permille: u64,
    pub min_reports: u64,
}

impl Default for Threshold {
    /// 5 % of at least 10 devices.
    fn default() -> Threshold {
        Threshold {
            rate_permille: 50,
            min_reports: 10,
        }
    }
}

/// Whether the rollout is halted, and the sentence that says why: the
/// watcher signs and publishes the halting revision with it.
pub fn halt(t: Tally, th: Threshold) -> Option<String> {
    if t.on_new == 0 || t.on_new < th.min_reports {
        return None;
    }
    let failing = t.failing.min(t.on_new);
    // failing / on_new ≥ rate / 1000, in integers.
    if u128::from(failing) * 1000 < u128::from(th.rate_permille) * u128::from(t.on_new) {
        return None;
    }
    Some(format!(
        "{failing} of {} devices on the new revision failing ({:.1} %, at or over {:.1} %)",
        t.on_new,
        failing as f64 * 100.0 / t.on_new as f64,
        th.rate_permille as f64 / 10.0
    ))
}

/// A group's modules, under its name, as its document gives them (moved
/// into what is composed, not copied).
#[derive(Clone, Debug)]
pub struct Group<'a> {
    pub name: &'a str,
    pub modules: BTreeMap<ModuleName, Intention>,
}

/// What a node's document says over its groups.
#[derive(Clone, Debug, Default)]
pub struct NodeOwn {
    /// Modules of its own, beside its groups'.
    pub modules: BTreeMap<ModuleName, Intention>,
    /// Group modules it does not run.
    pub remove: BTreeSet<ModuleName>,
    /// Per group module: settings laid over the group's (key by key, the
    /// node's winning) and an image pinned in place of the group's.
    pub overrides: BTreeMap<ModuleName, Override>,
}

/// A node's override of one group module.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Override {
    pub settings: BTreeMap<SettingKey, Value>,
    pub image: Option<String>,
}

/// Where a composed module came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// A group's, as it says.
    Group(String),
    /// A group's, with the node's override.
    Overridden(String),
    /// The node's own.
    Node,
}

/// Why a group and a node document do not compose: refused whole, naming
/// both places.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ComposeError(pub String);

/// The node's modules: each group's in the order the node lists them,
/// then the node's removals, overrides and own modules. A module two
/// groups name, or a group and the node, is a conflict; a removal or an
/// override of a module no group names is a mistake; each is refused,
/// naming both places, and nothing is composed.
pub fn compose(
    groups: Vec<Group>,
    node: NodeOwn,
) -> Result<BTreeMap<ModuleName, (Intention, Source)>, ComposeError> {
    let mut out: BTreeMap<ModuleName, (Intention, Source)> = BTreeMap::new();
    for g in groups {
        for (name, m) in g.modules {
            if let Some((_, Source::Group(other))) = out.get(&name) {
                return Err(ComposeError(format!(
                    "module {name} is in group {other} and in group {}: a module comes from one group",
                    g.name
                )));
            }
            out.insert(name, (m, Source::Group(g.name.to_string())));
        }
    }
    for name in &node.remove {
        if out.remove(name).is_none() {
            return Err(ComposeError(format!(
                "the node document removes module {name}, which none of its groups names"
            )));
        }
    }
    for (name, o) in &node.overrides {
        if node.remove.contains(name) {
            return Err(ComposeError(format!(
                "the node document both removes and overrides module {name}"
            )));
        }
        let Some((m, source)) = out.get_mut(name) else {
            return Err(ComposeError(format!(
                "the node document overrides module {name}, which none of its groups names"
            )));
        };
        for (k, v) in &o.settings {
            m.settings.insert(k.clone(), v.clone());
        }
        if let Some(image) = &o.image {
            m.image = image.clone();
        }
        // Only groups' modules are in the map before the node's own.
        if let Source::Group(g) = source {
            *source = Source::Overridden(std::mem::take(g));
        }
    }
    for (name, m) in node.modules {
        if let Some((_, Source::Group(g) | Source::Overridden(g))) = out.get(&name) {
            return Err(ComposeError(format!(
                "module {name} is in group {g} and in the node document: override it there, or remove it from the group"
            )));
        }
        out.insert(name, (m, Source::Node));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(s: &str) -> NodeId {
        NodeId::try_from(s).unwrap()
    }

    fn r(start: u64, duration: u64) -> Rollout {
        Rollout {
            start,
            duration,
            salt: "s1".into(),
            canaries: [node("canary-1")].into_iter().collect(),
            halt: false,
            revert: false,
            download: None,
        }
    }

    #[test]
    fn a_download_window_is_read_and_says_when_it_opens_and_closes() {
        let day = 86_400u64;
        let d0 = 20_000 * day;
        let hm = |h: u64, m: u64| d0 + h * 3600 + m * 60;
        // (window, now, inside, next change)
        #[rustfmt::skip]
        let cases: Vec<(&str, u64, bool, u64)> = vec![
            ("01:00-05:00", hm(0, 59), false, hm(1, 0)),
            ("01:00-05:00", hm(1, 0), true, hm(5, 0)),
            ("01:00-05:00", hm(4, 59), true, hm(5, 0)),
            ("01:00-05:00", hm(5, 0), false, hm(1, 0) + day),
            ("01:00-05:00", hm(23, 0), false, hm(1, 0) + day),
            ("22:00-06:00", hm(21, 0), false, hm(22, 0)),
            ("22:00-06:00", hm(23, 30), true, hm(6, 0) + day),
            ("22:00-06:00", hm(0, 0), true, hm(6, 0)),
            ("22:00-06:00", hm(6, 0), false, hm(22, 0)),
            ("00:00-23:59", hm(23, 59), false, hm(0, 0) + day),
        ];
        for (w, now, inside, next) in cases {
            let w = Window::parse(w).unwrap();
            assert_eq!(w.at(now), (inside, next), "{w:?} at {}", now - d0);
        }
        for (bad, says) in [
            ("01:00", "HH:MM-HH:MM"),
            ("1:00-05:00", "HH:MM-HH:MM"),
            ("24:00-05:00", "HH:MM-HH:MM"),
            ("01:60-05:00", "HH:MM-HH:MM"),
            ("01:00-01:00", "starts where it ends"),
            ("aa:bb-cc:dd", "HH:MM-HH:MM"),
        ] {
            let e = Window::parse(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn positions_are_stable_uniform_and_dealt_again_by_a_new_salt() {
        let a = position(&node("dev-1"), "s1");
        assert_eq!(a, position(&node("dev-1"), "s1"));
        assert_ne!(a, position(&node("dev-1"), "s2"));
        assert_ne!(a, position(&node("dev-2"), "s1"));
        // 10,000 devices: each tenth of [0, 1) holds about a tenth.
        let mut tenths = [0u32; 10];
        for i in 0..10_000 {
            let f = fraction(position(&node(&format!("dev-{i}")), "s1"));
            assert!((0.0..1.0).contains(&f));
            tenths[(f * 10.0) as usize] += 1;
        }
        for t in tenths {
            assert!((880..=1120).contains(&t), "{tenths:?}");
        }
    }

    #[test]
    fn rollout_table() {
        let dev = node("dev-7");
        let pos = position(&dev, "s1");
        let day = 86_400u64;
        let turn = 1000 + ((u128::from(pos) * u128::from(day)).div_ceil(1 << 64)) as u64;
        let halted = Rollout {
            halt: true,
            ..r(1000, day)
        };
        let reverted = Rollout {
            revert: true,
            ..r(1000, day)
        };
        let prev = |why, until| Take::Previous { why, until };
        // (rollout, device, now, took before, what it runs)
        #[rustfmt::skip]
        let cases: Vec<(Rollout, NodeId, u64, bool, Take)> = vec![
            (r(1000, day), dev.clone(), 999, false, prev(Why::NotStarted, Some(turn))),
            // A clock in 1970 waits: never destructive.
            (r(1000, day), dev.clone(), 0, false, prev(Why::NotStarted, Some(turn))),
            (r(1000, day), dev.clone(), turn - 1, false, prev(Why::Turn, Some(turn))),
            (r(1000, day), dev.clone(), turn, false, Take::New(Why::Turn)),
            (r(1000, day), dev.clone(), 1000 + day, false, Take::New(Why::Turn)),
            // A clock far ahead takes it: it is the newest anyway.
            (r(1000, day), dev.clone(), u64::MAX, false, Take::New(Why::Turn)),
            (r(1000, 0), dev.clone(), 1000, false, Take::New(Why::Turn)),
            (r(1000, 0), dev.clone(), 999, false, prev(Why::NotStarted, Some(1000))),
            (r(1000, day), node("canary-1"), 0, false, Take::New(Why::Canary)),
            (r(1000, day), dev.clone(), 999, true, Take::New(Why::TookBefore)),
            (halted.clone(), dev.clone(), 1000 + day, false, prev(Why::Halted, None)),
            (halted.clone(), node("canary-1"), 1000, false, prev(Why::Halted, None)),
            (halted, dev.clone(), 1000 + day, true, Take::New(Why::TookBefore)),
            (reverted.clone(), dev.clone(), 1000 + day, true, prev(Why::Reverted, None)),
            (reverted, node("canary-1"), 1000, false, prev(Why::Reverted, None)),
        ];
        for (ro, n, now, took, want) in cases {
            assert_eq!(
                rollout(&ro, &n, now, took),
                want,
                "{n} at {now} took={took} {ro:?}"
            );
        }
    }

    #[test]
    fn over_a_window_the_fleet_takes_it_as_the_hash_predicts() {
        let ro = r(0, 1000);
        let fleet: Vec<NodeId> = (0..2000).map(|i| node(&format!("dev-{i}"))).collect();
        for now in [0u64, 100, 500, 900, 1000] {
            let took = fleet
                .iter()
                .filter(|n| matches!(rollout(&ro, n, now, false), Take::New(_)))
                .count();
            let want = 2000.0 * now as f64 / 1000.0;
            assert!((took as f64 - want).abs() <= 80.0, "{now}: {took}");
        }
    }

    #[test]
    fn halt_table() {
        let th = Threshold::default();
        let t = |on_new, failing| Tally { on_new, failing };
        // (tally, halted?)
        #[rustfmt::skip]
        let cases = [
            (t(0, 0), false),
            (t(9, 9), false),      // too few reports to judge
            (t(10, 0), false),
            (t(100, 4), false),
            (t(100, 5), true),     // 5 % is the threshold
            (t(20, 1), true),
            (t(21, 1), false),
            (t(10, 50), true),     // more failing than on it: all of them
        ];
        for (tally, want) in cases {
            assert_eq!(halt(tally, th).is_some(), want, "{tally:?}");
        }
        assert_eq!(
            halt(t(40, 3), th).unwrap(),
            "3 of 40 devices on the new revision failing (7.5 %, at or over 5.0 %)"
        );
    }

    fn module(name: &str, image: &str) -> (ModuleName, Intention) {
        let text = format!(
            "name = \"{name}\"\nimage = \"{image}\"\n[config]\npath = \"/etc/a.json\"\nformat = \"json\"\ndefaults = {{ level = \"info\" }}\n"
        );
        let i = Intention::parse(&text, crate::model::intention::DocFormat::Toml, "test").unwrap();
        (i.name.clone(), i)
    }

    #[test]
    fn compose_table() {
        let base: BTreeMap<_, _> = [module("web", "web:1"), module("db", "db:1")].into();
        let other: BTreeMap<_, _> = [module("web", "web:2")].into();
        let extra: BTreeMap<_, _> = [module("metrics", "m:1")].into();
        let g = |name, modules| Group { name, modules };
        let own = |f: &dyn Fn(&mut NodeOwn)| {
            let mut n = NodeOwn::default();
            f(&mut n);
            n
        };
        let key = |k: &str| SettingKey::try_from(k).unwrap();
        // (groups, node, modules and where each came from, or the refusal)
        #[rustfmt::skip]
        let cases: Vec<(Vec<Group>, NodeOwn, Result<&str, &str>)> = vec![
            (vec![g("base", base.clone())], NodeOwn::default(), Ok("db:base web:base")),
            (vec![g("base", base.clone()), g("extra", extra.clone())], NodeOwn::default(), Ok("db:base metrics:extra web:base")),
            (vec![g("base", base.clone()), g("other", other.clone())], NodeOwn::default(),
                Err("module web is in group base and in group other")),
            (vec![g("base", base.clone())], own(&|n| { n.remove.insert(ModuleName::try_from("db").unwrap()); }), Ok("web:base")),
            (vec![g("base", base.clone())], own(&|n| { n.remove.insert(ModuleName::try_from("cache").unwrap()); }),
                Err("removes module cache, which none of its groups names")),
            (vec![g("base", base.clone())], own(&|n| { n.overrides.insert(ModuleName::try_from("web").unwrap(), Override { image: Some("web:pinned".into()), ..Override::default() }); }),
                Ok("db:base web:base*")),
            (vec![g("base", base.clone())], own(&|n| { n.overrides.insert(ModuleName::try_from("cache").unwrap(), Override::default()); }),
                Err("overrides module cache, which none of its groups names")),
            (vec![g("base", base.clone())], own(&|n| {
                n.remove.insert(ModuleName::try_from("web").unwrap());
                n.overrides.insert(ModuleName::try_from("web").unwrap(), Override::default());
            }), Err("both removes and overrides module web")),
            (vec![g("base", base.clone())], own(&|n| { n.modules.extend(extra.clone()); }), Ok("db:base metrics:node web:base")),
            (vec![g("base", base.clone())], own(&|n| { n.modules.extend(other.clone()); }),
                Err("module web is in group base and in the node document")),
            // A node document alone (today's form).
            (vec![], own(&|n| { n.modules.extend(base.clone()); }), Ok("db:node web:node")),
        ];
        for (groups, n, want) in cases {
            let got = compose(groups, n);
            match (want, got) {
                (Ok(w), Ok(m)) => {
                    let said: Vec<String> = m
                        .iter()
                        .map(|(k, (_, s))| match s {
                            Source::Group(g) => format!("{k}:{g}"),
                            Source::Overridden(g) => format!("{k}:{g}*"),
                            Source::Node => format!("{k}:node"),
                        })
                        .collect();
                    assert_eq!(said.join(" "), w);
                }
                (Err(w), Err(e)) => assert!(e.0.contains(w), "{e}"),
                (w, g) => panic!("want {w:?}, got {g:?}"),
            }
        }
        // An override lays settings over the group's and pins the image.
        let n = own(&|n| {
            n.overrides.insert(
                ModuleName::try_from("web").unwrap(),
                Override {
                    settings: [(key("level"), Value::String("debug".into()))].into(),
                    image: Some("web@sha256:".to_string() + &"a".repeat(64)),
                },
            );
        });
        let m = compose(vec![g("base", base.clone())], n).unwrap();
        let web = &m[&ModuleName::try_from("web").unwrap()].0;
        assert_eq!(web.settings[&key("level")], Value::String("debug".into()));
        assert!(web.image.starts_with("web@sha256:"));
        assert_eq!(m[&ModuleName::try_from("db").unwrap()].0.image, "db:1");
    }
}
