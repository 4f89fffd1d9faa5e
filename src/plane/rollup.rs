//! A fleet's reports rolled up, one at a time (`stead plane status
//! --reports`, `stead plane rollout watch`): devices per revision, per
//! module state, failing devices with their reasons, devices not heard
//! from, and each group's rollout progress. Pure: the command streams the
//! reports in; nothing keeps a report once it is added, and every list
//! shown is capped, so 100,000 reports take the memory of a few.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::model::fleet::Tally;
use crate::model::time::parse_rfc3339;
use crate::views::ReportView;

/// The most devices each list names; the counts are whole.
pub const LISTED: usize = 50;

/// A module state that counts a device as failing.
pub fn failing_state(state: &str) -> bool {
    matches!(state, "failed" | "crash-looping" | "quarantined")
}

/// The fleet as its reports tell it.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Rollup {
    /// Reports read.
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
    /// Reports that could not be read.
    pub unreadable: u64,
    /// The first [`LISTED`] of them, with why.
    pub unreadable_listed: Vec<Unreadable>,
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

/// One group across the fleet.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct GroupRollup {
    /// Devices in it, by the revision of its document they hold.
    pub held: BTreeMap<u64, u64>,
    /// Devices by the revision whose modules they run.
    pub running: BTreeMap<u64, u64>,
    /// Devices that hold the newest revision seen and run it.
    pub on_newest: u64,
    /// Of those, failing.
    pub failing_on_newest: u64,
    /// Devices that hold the newest revision and wait for their turn.
    pub waiting: u64,
    /// The newest revision any device holds.
    pub newest: u64,
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

impl Rollup {
    /// Adds one report; `now` and `silent_after` (seconds) say which
    /// devices are not heard from.
    pub fn add(&mut self, r: &ReportView, now: u64, silent_after: u64) {
        self.devices += 1;
        let revision = r
            .plane
            .held
            .as_ref()
            .map_or("none".to_string(), |h| h.revision.to_string());
        *self.revisions.entry(revision).or_default() += 1;
        let mut reasons = Vec::new();
        for (name, m) in &r.modules {
            *self.module_states.entry(m.state.clone()).or_default() += 1;
            if failing_state(&m.state) {
                let error = m.last_error.as_ref().map_or("", |e| e.message.as_str());
                reasons.push(
                    crate::model::text::clip(&format!("{name}: {}: {error}", m.state), 300)
                        .into_owned(),
                );
            }
        }
        let failing = !reasons.is_empty();
        if failing {
            self.failing += 1;
            if self.failing_listed.len() < LISTED {
                self.failing_listed.push(Failing {
                    node: r.node.clone(),
                    reasons,
                });
            }
        }
        let sent = parse_rfc3339(&r.sent_at).unwrap_or(0);
        if sent.saturating_add(silent_after) < now {
            self.silent += 1;
            if self.silent_listed.len() < LISTED {
                self.silent_listed.push(Silent {
                    node: r.node.clone(),
                    sent_at: r.sent_at.clone(),
                });
            }
        }
        for g in &r.plane.groups {
            let Some(held) = g.revision else { continue };
            let e = self.groups.entry(g.group.clone()).or_default();
            *e.held.entry(held).or_default() += 1;
            if let Some(running) = g.running {
                *e.running.entry(running).or_default() += 1;
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
                if g.running == Some(held) {
                    e.on_newest += 1;
                    if failing {
                        e.failing_on_newest += 1;
                    }
                } else if g.rollout.as_ref().is_some_and(|r| r.until.is_some()) {
                    e.waiting += 1;
                }
            }
        }
    }

    /// Counts a report that could not be read.
    pub fn unreadable(&mut self, source: &str, error: &str) {
        self.unreadable += 1;
        if self.unreadable_listed.len() < LISTED {
            self.unreadable_listed.push(Unreadable {
                source: source.to_string(),
                error: crate::model::text::clip(error, 300).into_owned(),
            });
        }
    }

    /// The roll-up as text, for people.
    pub fn text(&self, silent_after: u64) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        let list = |m: &BTreeMap<String, u64>| {
            m.iter()
                .map(|(k, v)| format!("{k}: {v}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let _ = writeln!(out, "devices {}", self.devices);
        let _ = writeln!(out, "revisions held  {}", list(&self.revisions));
        let _ = writeln!(out, "modules  {}", list(&self.module_states));
        for (name, g) in &self.groups {
            let total: u64 = g.held.values().sum();
            let _ = writeln!(
                out,
                "group {name}  newest revision {} held by {} of {total}; running it {} ({} failing); waiting for their turn {}",
                g.newest,
                g.held.get(&g.newest).copied().unwrap_or(0),
                g.on_newest,
                g.failing_on_newest,
                g.waiting
            );
        }
        let _ = writeln!(out, "failing {}", self.failing);
        for f in &self.failing_listed {
            let _ = writeln!(out, "  {}  {}", f.node, f.reasons.join("; "));
        }
        let _ = writeln!(
            out,
            "not heard from in {} {}",
            crate::model::time::format_duration(std::time::Duration::from_secs(silent_after)),
            self.silent
        );
        for s in &self.silent_listed {
            let _ = writeln!(out, "  {}  last report {}", s.node, s.sent_at);
        }
        if self.unreadable > 0 {
            let _ = writeln!(out, "unreadable reports {}", self.unreadable);
            for u in &self.unreadable_listed {
                let _ = writeln!(out, "  {}  {}", u.source, u.error);
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
            text.contains("group eu  newest revision 6 held by 1 of 5"),
            "{text}"
        );
        assert!(text.contains("unreadable reports 1"), "{text}");
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
}
