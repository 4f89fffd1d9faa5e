//! Counters the agent keeps and serves in the Prometheus text format: passes
//! and their duration, modules by state, recreates by the kind of input that
//! moved, engine reachability and engine API calls (counted by
//! [`crate::status::counted::Counted`]); with a central plane, its polls by
//! outcome, the revision held and reports by result; reload requests by
//! status; and the build itself (`stead_build_info`: version, commit,
//! target).

use crate::model::sort::Insert as _;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::status::{Board, ModuleState};

/// The agent's counters.
#[derive(Default)]
pub struct Metrics {
    passes: AtomicU64,
    pass_micros_total: AtomicU64,
    last_pass_micros: AtomicU64,
    engine_up: AtomicU64,
    pass_failures: AtomicU64,
    last_pass_ok: AtomicU64,
    calls: Mutex<BTreeMap<&'static str, u64>>,
    recreates: Mutex<BTreeMap<String, u64>>,
    plane_polls: Mutex<BTreeMap<&'static str, u64>>,
    plane_reports: Mutex<BTreeMap<&'static str, u64>>,
    plane_revision: AtomicU64,
    reloads: Mutex<Option<BTreeMap<&'static str, u64>>>,
    images_removed: AtomicU64,
    image_bytes_reclaimed: AtomicU64,
    disks: Mutex<Option<crate::model::disk::Disks>>,
    /// Images brought, by who fetched them (`agent`, `engine`).
    image_fetches: Mutex<BTreeMap<&'static str, u64>>,
    /// Blob bytes the agent's own pulls fetched, by source.
    fetch_bytes: Mutex<BTreeMap<&'static str, u64>>,
    /// Bytes served to the site's peers, by what (`blob`, `manifest`,
    /// `chunk`, `index`, `document`).
    site_served: Mutex<BTreeMap<&'static str, u64>>,
    /// Connections refused to addresses outside the site's networks.
    site_refused: AtomicU64,
    /// Peers found by mDNS and held now.
    site_found: AtomicU64,
    /// The nudge's hints, by what came of them.
    nudges: Mutex<BTreeMap<&'static str, u64>>,
}

impl Metrics {
    /// Counts a finished pass.
    pub fn pass_done(&self, took: std::time::Duration) {
        let us = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        self.passes.fetch_add(1, Ordering::Relaxed);
        self.pass_micros_total.fetch_add(us, Ordering::Relaxed);
        self.last_pass_micros.store(us, Ordering::Relaxed);
    }

    /// Records how a pass ended.
    pub fn pass_outcome(&self, ok: bool) {
        if !ok {
            self.pass_failures.fetch_add(1, Ordering::Relaxed);
        }
        self.last_pass_ok.store(u64::from(ok), Ordering::Relaxed);
    }

    /// Records whether the engine answers.
    pub fn engine_reachable(&self, up: bool) {
        self.engine_up.store(u64::from(up), Ordering::Relaxed);
    }

    /// Counts a recreate, once per kind of input that moved
    /// (`config`, `env_file`, `image`, …).
    pub fn recreated(&self, inputs: &[crate::model::spec::Moved]) {
        let mut kinds: Vec<&str> = inputs
            .iter()
            .map(|m| m.input.split(':').next().unwrap_or(""))
            .collect();
        kinds.dedup();
        let mut r = self.recreates.lock().expect("metrics lock");
        for k in kinds {
            *r.entry(k.to_string()).or_default() += 1;
        }
    }

    /// Counts a poll of the plane by its outcome (`not-modified`,
    /// `adopted`, `same`, `refused`, `failed`).
    pub fn plane_poll(&self, outcome: &'static str) {
        *self
            .plane_polls
            .lock()
            .expect("metrics lock")
            .entry(outcome)
            .or_default() += 1;
    }

    /// Records the revision of the plane's document held.
    pub fn plane_revision(&self, revision: u64) {
        self.plane_revision.store(revision, Ordering::Relaxed);
    }

    /// Counts an attempt to deliver a report (`delivered`, `failed`).
    pub fn plane_report(&self, result: &'static str) {
        *self
            .plane_reports
            .lock()
            .expect("metrics lock")
            .entry(result)
            .or_default() += 1;
    }

    /// Counts one engine call of this kind.
    pub fn call(&self, op: &'static str) {
        *self
            .calls
            .lock()
            .expect("metrics lock")
            .entry(op)
            .or_default() += 1;
    }

    /// Records the reload requests kept, by status (after each run of the
    /// executor).
    pub fn reloads(&self, statuses: impl IntoIterator<Item = crate::model::reload::Status>) {
        let mut by: BTreeMap<&'static str, u64> = crate::model::reload::Status::ALL
            .iter()
            .map(|s| (s.as_str(), 0))
            .into_map();
        for s in statuses {
            *by.entry(s.as_str()).or_default() += 1;
        }
        *self.reloads.lock().expect("metrics lock") = Some(by);
    }

    /// Counts images removed and the bytes they took (a dry run removes
    /// nothing).
    pub fn images_removed(&self, n: usize, bytes: u64, dry_run: bool) {
        if dry_run {
            return;
        }
        self.images_removed.fetch_add(n as u64, Ordering::Relaxed);
        self.image_bytes_reclaimed
            .fetch_add(bytes, Ordering::Relaxed);
    }

    /// Counts an image brought by `by` (`agent`, `engine`), with the
    /// blob bytes that came from `source` for it.
    pub fn image_fetched(&self, by: &'static str, source: &'static str, bytes: u64) {
        *self
            .image_fetches
            .lock()
            .expect("metrics lock")
            .entry(by)
            .or_default() += 1;
        self.fetched_bytes(source, bytes);
    }

    /// Counts bytes of an image that came from `source` (beside the
    /// fetch [`Metrics::image_fetched`] counted).
    pub fn fetched_bytes(&self, source: &'static str, bytes: u64) {
        if bytes > 0 {
            *self
                .fetch_bytes
                .lock()
                .expect("metrics lock")
                .entry(source)
                .or_default() += bytes;
        }
    }

    /// Counts bytes served to the site's peers.
    pub fn site_served(&self, what: &'static str, bytes: u64) {
        *self
            .site_served
            .lock()
            .expect("metrics lock")
            .entry(what)
            .or_default() += bytes;
    }

    /// Counts a connection refused: its address is not the site's.
    pub fn site_refused(&self) {
        self.site_refused.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts what came of a nudge's hint (`poll`, `held`, `not_mine`,
    /// `gated`, `unreadable`) or of its broker (`broker_away`).
    pub fn nudge(&self, outcome: &'static str) {
        *self
            .nudges
            .lock()
            .expect("metrics lock")
            .entry(outcome)
            .or_default() += 1;
    }

    /// Sets how many peers found by mDNS are held now.
    pub fn site_found(&self, n: usize) {
        self.site_found.store(n as u64, Ordering::Relaxed);
    }

    /// Records the filesystems as last measured.
    pub fn disks(&self, d: &crate::model::disk::Disks) {
        *self.disks.lock().expect("metrics lock") = Some(d.clone());
    }

    /// How many engine calls of each kind were made.
    pub fn calls(&self) -> BTreeMap<&'static str, u64> {
        self.calls.lock().expect("metrics lock").clone()
    }

    /// The Prometheus text exposition.
    pub fn render(&self, board: &Board) -> String {
        let mut o = String::new();
        let _ = writeln!(
            o,
            "# HELP stead_build_info The running binary: its version, commit and target (always 1).\n# TYPE stead_build_info gauge\nstead_build_info{{version=\"{}\",commit=\"{}\",target=\"{}\"}} 1",
            env!("CARGO_PKG_VERSION"),
            crate::COMMIT,
            crate::TARGET
        );
        let passes = self.passes.load(Ordering::Relaxed);
        let _ = writeln!(
            o,
            "# HELP stead_passes_total Reconcile passes completed.\n# TYPE stead_passes_total counter\nstead_passes_total {passes}"
        );
        let total = self.pass_micros_total.load(Ordering::Relaxed) as f64 / 1e6;
        let last = self.last_pass_micros.load(Ordering::Relaxed) as f64 / 1e6;
        let _ = writeln!(
            o,
            "# HELP stead_pass_duration_seconds_total Time spent in passes.\n# TYPE stead_pass_duration_seconds_total counter\nstead_pass_duration_seconds_total {total}"
        );
        let _ = writeln!(
            o,
            "# HELP stead_last_pass_duration_seconds Duration of the last pass.\n# TYPE stead_last_pass_duration_seconds gauge\nstead_last_pass_duration_seconds {last}"
        );
        let _ = writeln!(
            o,
            "# HELP stead_modules Modules by state.\n# TYPE stead_modules gauge"
        );
        for st in ModuleState::ALL {
            let n = board.values().filter(|m| m.state == st).count();
            let _ = writeln!(o, "stead_modules{{state=\"{}\"}} {n}", st.as_str());
        }
        let _ = writeln!(
            o,
            "# HELP stead_recreates_total Containers recreated, by the kind of input that moved.\n# TYPE stead_recreates_total counter"
        );
        for (k, n) in self.recreates.lock().expect("metrics lock").iter() {
            let _ = writeln!(o, "stead_recreates_total{{reason=\"{k}\"}} {n}");
        }
        let _ = writeln!(
            o,
            "# HELP stead_pass_failures_total Passes that could not complete.\n# TYPE stead_pass_failures_total counter\nstead_pass_failures_total {}",
            self.pass_failures.load(Ordering::Relaxed)
        );
        let _ = writeln!(
            o,
            "# HELP stead_last_pass_ok Whether the last pass completed.\n# TYPE stead_last_pass_ok gauge\nstead_last_pass_ok {}",
            self.last_pass_ok.load(Ordering::Relaxed)
        );
        let up = self.engine_up.load(Ordering::Relaxed);
        let _ = writeln!(
            o,
            "# HELP stead_engine_reachable Whether the container engine answers.\n# TYPE stead_engine_reachable gauge\nstead_engine_reachable {up}"
        );
        let _ = writeln!(
            o,
            "# HELP stead_engine_api_calls_total Engine API calls, by operation.\n# TYPE stead_engine_api_calls_total counter"
        );
        for (op, n) in self.calls() {
            let _ = writeln!(o, "stead_engine_api_calls_total{{op=\"{op}\"}} {n}");
        }
        if let Some(by) = self.reloads.lock().expect("metrics lock").as_ref() {
            let _ = writeln!(
                o,
                "# HELP stead_reloads Reload requests kept, by status.\n# TYPE stead_reloads gauge"
            );
            for (k, n) in by {
                let _ = writeln!(o, "stead_reloads{{status=\"{k}\"}} {n}");
            }
        }
        let _ = writeln!(
            o,
            "# HELP stead_images_removed_total Images removed because no module needed them.\n# TYPE stead_images_removed_total counter\nstead_images_removed_total {}\n# HELP stead_image_bytes_reclaimed_total Bytes the removed images took.\n# TYPE stead_image_bytes_reclaimed_total counter\nstead_image_bytes_reclaimed_total {}",
            self.images_removed.load(Ordering::Relaxed),
            self.image_bytes_reclaimed.load(Ordering::Relaxed)
        );
        for (name, help, label, by) in [
            (
                "stead_image_fetches_total",
                "Images brought for a module, by who fetched them (agent: its own pull, resumed; engine: the engine's pull).",
                "by",
                &self.image_fetches,
            ),
            (
                "stead_image_fetch_bytes_total",
                "Blob bytes the agent's own pulls fetched, by where they came from.",
                "source",
                &self.fetch_bytes,
            ),
            (
                "stead_site_served_bytes_total",
                "Bytes served to the site's peers, by what (blob, manifest, chunk, index, document).",
                "what",
                &self.site_served,
            ),
            (
                "stead_plane_nudges_total",
                "The nudge's hints by what came of them (poll, held, not_mine, gated, unreadable), and its broker found away (broker_away).",
                "outcome",
                &self.nudges,
            ),
        ] {
            let _ = writeln!(o, "# HELP {name} {help}\n# TYPE {name} counter");
            for (k, n) in by.lock().expect("metrics lock").iter() {
                let _ = writeln!(o, "{name}{{{label}=\"{k}\"}} {n}");
            }
        }
        let _ = writeln!(
            o,
            "# HELP stead_site_refused_total Connections to the peers' listener refused: their address is not in site.allow.\n# TYPE stead_site_refused_total counter\nstead_site_refused_total {}",
            self.site_refused.load(Ordering::Relaxed)
        );
        let _ = writeln!(
            o,
            "# HELP stead_site_mdns_peers Peers found by mDNS (site.mdns) and held now: their records have not run out.\n# TYPE stead_site_mdns_peers gauge\nstead_site_mdns_peers {}",
            self.site_found.load(Ordering::Relaxed)
        );
        if let Some(d) = self.disks.lock().expect("metrics lock").as_ref() {
            type Of = fn(&crate::model::disk::Filesystem) -> u64;
            let gauges: [(&str, &str, Of); 2] = [
                (
                    "stead_disk_free_bytes",
                    "Free bytes of each filesystem that matters (the engine's data root, the store, the logs).",
                    |f| f.free_bytes,
                ),
                (
                    "stead_disk_size_bytes",
                    "Size of each filesystem that matters.",
                    |f| f.size_bytes,
                ),
            ];
            for (name, help, of) in gauges {
                let _ = writeln!(o, "# HELP {name} {help}\n# TYPE {name} gauge");
                for f in &d.filesystems {
                    let _ = writeln!(
                        o,
                        "{name}{{path=\"{}\",roles=\"{}\"}} {}",
                        label(&f.path),
                        f.roles.join(","),
                        of(f)
                    );
                }
            }
            let _ = writeln!(
                o,
                "# HELP stead_disk_level The worst filesystem's level: 0 ok, 1 pressure, 2 critical.\n# TYPE stead_disk_level gauge\nstead_disk_level {}\n# HELP stead_logs_bound_bytes The most the modules' rotated logs take together.\n# TYPE stead_logs_bound_bytes gauge\nstead_logs_bound_bytes {}",
                d.level as u8, d.logs.bound_bytes
            );
        }
        let polls = self.plane_polls.lock().expect("metrics lock").clone();
        if !polls.is_empty() {
            let _ = writeln!(
                o,
                "# HELP stead_plane_polls_total Polls of the central plane, by outcome.\n# TYPE stead_plane_polls_total counter"
            );
            for (k, n) in polls {
                let _ = writeln!(o, "stead_plane_polls_total{{outcome=\"{k}\"}} {n}");
            }
            let _ = writeln!(
                o,
                "# HELP stead_plane_revision The revision of the plane's document held (0: none).\n# TYPE stead_plane_revision gauge\nstead_plane_revision {}",
                self.plane_revision.load(Ordering::Relaxed)
            );
            let _ = writeln!(
                o,
                "# HELP stead_plane_reports_total Reports to the plane, by result.\n# TYPE stead_plane_reports_total counter"
            );
            for (k, n) in self.plane_reports.lock().expect("metrics lock").iter() {
                let _ = writeln!(o, "stead_plane_reports_total{{result=\"{k}\"}} {n}");
            }
        }
        o
    }
}

/// A label value as Prometheus reads it: `\\` and `"` escaped, no newline.
fn label(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_build_is_a_metric_of_its_own() {
        let text = Metrics::default().render(&Board::default());
        let line = format!(
            "stead_build_info{{version=\"{}\",commit=\"{}\",target=\"{}\"}} 1\n",
            env!("CARGO_PKG_VERSION"),
            crate::COMMIT,
            crate::TARGET
        );
        assert!(text.starts_with(&format!(
            "# HELP stead_build_info The running binary: its version, commit and target (always 1).\n# TYPE stead_build_info gauge\n{line}"
        )), "{text}");
        // The same three as `stead --version` says.
        assert!(crate::VERSION.starts_with(env!("CARGO_PKG_VERSION")));
        assert!(crate::VERSION.contains(crate::COMMIT));
        assert!(crate::VERSION.contains(crate::TARGET));
        // Label values Prometheus can read unescaped.
        for v in [crate::COMMIT, crate::TARGET] {
            assert!(!v.is_empty() && !v.contains(['"', '\\', '\n']), "{v:?}");
        }
    }
}
