//! Which agent binary starts: the launcher's state file and its rule.
//!
//! The package's fixed entry point (`/usr/bin/stead`, the `stead-launch`
//! binary) reads one small text file, `<agent dir>/launch`, and picks the
//! binary to run: the package's own (`/usr/lib/stead/stead`), the version
//! the agent confirmed last (`current`), or a candidate an update landed.
//! It counts a candidate's starts and, after [`MAX_ATTEMPTS`] that never
//! confirmed, goes back to `current` and writes down why. The agent writes
//! the same file (a candidate it landed; itself as `current` once
//! confirmed), through the same reader and writer here.
//!
//! Std only and pure: the launcher links this module and nothing else of
//! the crate, so it has no network, no store and no dependency beyond the
//! standard library. Every case of [`decide`] is a line of its table test.
//!
//! The file: one `key value` per line, `#` comments, unknown keys kept and
//! ignored (a newer agent may say more than this launcher knows).
//! ```text
//! current 0.6.0
//! previous 0.5.0
//! candidate 0.7.0 1
//! failed 0.7.0 started 3 times and never confirmed
//! package 0.5.0-1
//! ```
//!
//! `package` is the package version (`/usr/lib/stead/package-version`,
//! shipped by the .deb) the launcher saw when it last started a
//! candidate. A package of another version installed since (by hand, an
//! operator's `dpkg -i`) takes over from the versions stead updated itself
//! to: installing a package is the operator's word on what runs. A
//! deliberate fleet downgrade below the package's version stays, as the
//! package did not change.

use std::fmt;

/// A candidate's starts, without confirming, after which the launcher
/// goes back to the version it replaced.
pub const MAX_ATTEMPTS: u32 = 3;

/// The file's bound: it is a few lines; a bigger one is not this file.
pub const MAX_BYTES: usize = 4096;

/// Where a reason is cut (it is one line of the file and of a report).
const MAX_WHY: usize = 512;

/// An agent version as the launcher keeps it: the name of its directory
/// (`<agent dir>/<version>/stead`), so a path component of SemVer's
/// characters, never `.` or `..`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct AgentVersion(String);

impl AgentVersion {
    pub fn parse(s: &str) -> Result<AgentVersion, String> {
        let ok = !s.is_empty()
            && s.len() <= 64
            && s.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'+' | b'_'));
        if ok {
            Ok(AgentVersion(s.to_string()))
        } else {
            Err(format!(
                "'{}' is not an agent version (1 to 64 letters, digits, '.', '-', '+', '_', from a letter or digit)",
                s.escape_debug()
            ))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for AgentVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A candidate and how many times the launcher started it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Candidate {
    pub version: AgentVersion,
    pub attempts: u32,
}

/// The last candidate given up on, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failed {
    pub version: AgentVersion,
    pub why: String,
}

/// The launcher's state. `current: None` is the package's binary.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct State {
    pub current: Option<AgentVersion>,
    pub previous: Option<AgentVersion>,
    pub candidate: Option<Candidate>,
    pub failed: Option<Failed>,
    /// The package version seen when a candidate was last started.
    pub package: Option<AgentVersion>,
    /// Lines of keys this reader does not know, kept as they were.
    pub other: Vec<String>,
}

/// One line of text, bounded: a reason is written on one line.
pub fn one_line(why: &str) -> String {
    let mut out: String = why
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if out.len() > MAX_WHY {
        let mut end = MAX_WHY;
        while !out.is_char_boundary(end) {
            end -= 1;
        }
        out.truncate(end);
        out.push('…');
    }
    out.trim().to_string()
}

impl State {
    pub fn parse(text: &str) -> Result<State, String> {
        if text.len() > MAX_BYTES {
            return Err(format!(
                "{} bytes, over the {MAX_BYTES} a launch state holds",
                text.len()
            ));
        }
        let mut st = State::default();
        for (i, line) in text.lines().enumerate() {
            let n = i + 1;
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (key, rest) = line.split_once(' ').unwrap_or((line, ""));
            let rest = rest.trim();
            let version = |v: &str| AgentVersion::parse(v).map_err(|e| format!("line {n}: {e}"));
            match key {
                "current" => st.current = Some(version(rest)?),
                "previous" => st.previous = Some(version(rest)?),
                "candidate" => {
                    let (v, a) = rest.split_once(' ').unwrap_or((rest, "0"));
                    let attempts = a.trim().parse::<u32>().map_err(|_| {
                        format!(
                            "line {n}: a candidate's starts are a number, not '{}'",
                            a.escape_debug()
                        )
                    })?;
                    st.candidate = Some(Candidate {
                        version: version(v)?,
                        attempts,
                    });
                }
                "failed" => {
                    let (v, why) = rest.split_once(' ').unwrap_or((rest, ""));
                    st.failed = Some(Failed {
                        version: version(v)?,
                        why: one_line(why),
                    });
                }
                "package" => st.package = Some(version(rest)?),
                _ => st.other.push(line.to_string()),
            }
        }
        Ok(st)
    }

    pub fn render(&self) -> String {
        let mut out = String::from(
            "# stead's launcher state: which agent binary /usr/bin/stead starts.\n\
             # Written by the agent and the launcher; see docs/operations.md.\n",
        );
        if let Some(v) = &self.current {
            out.push_str(&format!("current {v}\n"));
        }
        if let Some(v) = &self.previous {
            out.push_str(&format!("previous {v}\n"));
        }
        if let Some(c) = &self.candidate {
            out.push_str(&format!("candidate {} {}\n", c.version, c.attempts));
        }
        if let Some(f) = &self.failed {
            out.push_str(&format!("failed {} {}\n", f.version, one_line(&f.why)));
        }
        if let Some(v) = &self.package {
            out.push_str(&format!("package {v}\n"));
        }
        for l in &self.other {
            out.push_str(l);
            out.push('\n');
        }
        out
    }
}

/// Which binary runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Slot {
    /// The package's own binary.
    Package,
    /// `<agent dir>/<version>/stead`, confirmed.
    Current(AgentVersion),
    /// `<agent dir>/<version>/stead`, not confirmed yet.
    Candidate(AgentVersion),
}

impl Slot {
    /// What the agent is told it runs as (`STEAD_LAUNCH_SLOT`).
    pub fn name(&self) -> &'static str {
        match self {
            Slot::Package => "package",
            Slot::Current(_) => "current",
            Slot::Candidate(_) => "candidate",
        }
    }
}

/// What the launcher does: run `slot`, after writing `write` (durably)
/// when it is given, saying `note` on its standard error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Launch {
    pub slot: Slot,
    pub write: Option<State>,
    pub note: Option<String>,
}

/// The rule. `agent` is whether the agent itself is being started (`stead
/// run`): only those starts count toward a candidate's attempts; any other
/// command (the CLI) runs the binary the agent runs as now and writes
/// nothing. `present` says whether a version's binary is there;
/// `installed` is the package's version (`None` when it cannot be read:
/// nothing is taken over then).
pub fn decide(
    state: &State,
    agent: bool,
    present: &dyn Fn(&AgentVersion) -> bool,
    installed: Option<&AgentVersion>,
    max_attempts: u32,
) -> Launch {
    let max_attempts = max_attempts.max(1);
    if let Some(taken) = taken_over(state, agent, installed) {
        return taken;
    }
    // What runs when no candidate does: the confirmed version, or the
    // package's binary when that one is gone.
    let settled = |note: Option<String>| match &state.current {
        Some(v) if present(v) => (Slot::Current(v.clone()), note),
        Some(v) => (
            Slot::Package,
            Some(format!(
                "{}current {v} has no binary; running the package's",
                note.map(|n| format!("{n}; ")).unwrap_or_default()
            )),
        ),
        None => (Slot::Package, note),
    };
    let Some(c) = &state.candidate else {
        let (slot, note) = settled(None);
        return Launch {
            slot,
            write: None,
            note,
        };
    };
    let give_up = |why: String| {
        let mut next = state.clone();
        next.candidate = None;
        next.failed = Some(Failed {
            version: c.version.clone(),
            why: why.clone(),
        });
        let (slot, note) = settled(Some(format!("candidate {}: {why}; going back", c.version)));
        Launch {
            slot,
            write: agent.then_some(next),
            note,
        }
    };
    if !present(&c.version) {
        return give_up("its binary is missing".to_string());
    }
    if !agent {
        // The CLI runs what the agent runs now: the candidate once started.
        if c.attempts > 0 && c.attempts <= max_attempts {
            return Launch {
                slot: Slot::Candidate(c.version.clone()),
                write: None,
                note: None,
            };
        }
        let (slot, note) = settled(None);
        return Launch {
            slot,
            write: None,
            note,
        };
    }
    if c.attempts >= max_attempts {
        return give_up(format!("started {} times and never confirmed", c.attempts));
    }
    let mut next = state.clone();
    next.candidate = Some(Candidate {
        version: c.version.clone(),
        attempts: c.attempts + 1,
    });
    if let Some(p) = installed {
        next.package = Some(p.clone());
    }
    Launch {
        slot: Slot::Candidate(c.version.clone()),
        write: Some(next),
        note: Some(format!(
            "candidate {}: start {} of {max_attempts}",
            c.version,
            c.attempts + 1
        )),
    }
}

/// A package of another version than the one the state was written under
/// runs instead of `current` and any candidate: they are set aside
/// (`current` becomes `previous`; a candidate is written down as failed,
/// so the update that landed it ends saying why).
fn taken_over(state: &State, agent: bool, installed: Option<&AgentVersion>) -> Option<Launch> {
    let (was, now) = (state.package.as_ref()?, installed?);
    if was == now || (state.current.is_none() && state.candidate.is_none()) {
        return None;
    }
    let why = format!("package {now} was installed over package {was}");
    let mut next = state.clone();
    next.package = None;
    if let Some(cur) = next.current.take() {
        next.previous = Some(cur);
    }
    if let Some(c) = next.candidate.take() {
        next.failed = Some(Failed {
            version: c.version,
            why: format!("{why}: the package's binary runs instead"),
        });
    }
    let set_aside: Vec<String> = state
        .current
        .iter()
        .map(|v| format!("current {v}"))
        .chain(
            state
                .candidate
                .iter()
                .map(|c| format!("candidate {}", c.version)),
        )
        .collect();
    Some(Launch {
        slot: Slot::Package,
        write: agent.then_some(next),
        note: Some(format!(
            "{why}: running the package's binary, not {}",
            set_aside.join(" or ")
        )),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> AgentVersion {
        AgentVersion::parse(s).unwrap()
    }

    fn st(text: &str) -> State {
        State::parse(text).unwrap()
    }

    #[test]
    fn versions_are_path_components() {
        for ok in ["0.6.0", "1.0.0-rc.1", "1.0.0+build.5", "a_b"] {
            assert!(AgentVersion::parse(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            ".",
            "..",
            "../x",
            "a/b",
            "-1",
            ".hidden",
            "a b",
            &"1".repeat(65),
        ] {
            assert!(AgentVersion::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_file_reads_back_what_it_writes_and_keeps_what_it_does_not_know() {
        let s = State {
            current: Some(v("0.6.0")),
            previous: Some(v("0.5.0")),
            candidate: Some(Candidate {
                version: v("0.7.0"),
                attempts: 2,
            }),
            failed: Some(Failed {
                version: v("0.6.1"),
                why: "started 3 times and never confirmed".into(),
            }),
            package: Some(v("0.5.0-1")),
            other: vec!["window 300".into()],
        };
        assert_eq!(State::parse(&s.render()).unwrap(), s);
        assert_eq!(State::parse("").unwrap(), State::default());
        assert_eq!(st("candidate 0.7.0").candidate.unwrap().attempts, 0);
    }

    #[test]
    fn a_bad_file_is_refused_naming_the_line() {
        for (text, says) in [
            ("current ../etc\n", "line 1"),
            (
                "# c\ncandidate 0.7.0 many\n",
                "line 2: a candidate's starts are a number",
            ),
            ("previous\n", "line 1"),
        ] {
            let e = State::parse(text).unwrap_err();
            assert!(e.contains(says), "{text:?}: {e}");
        }
        assert!(
            State::parse(&"# x\n".repeat(2000))
                .unwrap_err()
                .contains("over")
        );
    }

    #[test]
    fn a_reason_is_one_bounded_line() {
        assert_eq!(one_line("a\nb\tc"), "a b c");
        let long = one_line(&"é".repeat(600));
        assert!(long.len() <= MAX_WHY + '…'.len_utf8(), "{}", long.len());
        assert!(long.ends_with('…'));
    }

    #[test]
    fn decide_table() {
        let all = |_: &AgentVersion| true;
        let none = |_: &AgentVersion| false;
        let only_06 = |x: &AgentVersion| x.as_str() == "0.6.0";
        let cur = |s: &str| Slot::Current(v(s));
        let cand = |s: &str| Slot::Candidate(v(s));
        type Case<'a> = (
            &'a str,
            bool,
            &'a dyn Fn(&AgentVersion) -> bool,
            Slot,
            Option<&'a str>,
        );
        // (state file, the agent starts?, binaries present, runs, state written)
        #[rustfmt::skip]
        let cases: Vec<Case> = vec![
            ("", true, &all, Slot::Package, None),
            ("current 0.6.0", true, &all, cur("0.6.0"), None),
            ("current 0.6.0", true, &none, Slot::Package, None),
            ("current 0.6.0\ncandidate 0.7.0 0", true, &all, cand("0.7.0"), Some("candidate 0.7.0 1")),
            ("current 0.6.0\ncandidate 0.7.0 2", true, &all, cand("0.7.0"), Some("candidate 0.7.0 3")),
            ("current 0.6.0\ncandidate 0.7.0 3", true, &all, cur("0.6.0"), Some("failed 0.7.0 started 3 times and never confirmed")),
            ("current 0.6.0\ncandidate 0.7.0 9", true, &all, cur("0.6.0"), Some("failed 0.7.0 started 9 times")),
            ("current 0.6.0\ncandidate 0.7.0 0", true, &only_06, cur("0.6.0"), Some("failed 0.7.0 its binary is missing")),
            ("candidate 0.7.0 3", true, &all, Slot::Package, Some("failed 0.7.0")),
            ("current 0.6.0\ncandidate 0.7.0 0", false, &all, cur("0.6.0"), None),
            ("current 0.6.0\ncandidate 0.7.0 1", false, &all, cand("0.7.0"), None),
            ("current 0.6.0\ncandidate 0.7.0 3", false, &all, cand("0.7.0"), None),
            ("current 0.6.0\ncandidate 0.7.0 4", false, &all, cur("0.6.0"), None),
            ("current 0.6.0\ncandidate 0.7.0 1", false, &only_06, cur("0.6.0"), None),
        ];
        for (text, agent, present, runs, writes) in cases {
            let got = decide(&st(text), agent, present, Some(&v("0.5.0-1")), MAX_ATTEMPTS);
            assert_eq!(got.slot, runs, "{text:?} agent={agent}");
            match (writes, &got.write) {
                (None, None) => {}
                (Some(line), Some(w)) => {
                    assert!(w.render().contains(line), "{text:?}: wrote {}", w.render())
                }
                (want, got) => panic!("{text:?} agent={agent}: want {want:?}, wrote {got:?}"),
            }
        }
    }

    #[test]
    fn a_package_installed_since_takes_over_table() {
        let all = |_: &AgentVersion| true;
        type Case<'a> = (
            &'a str,
            Option<&'a str>,
            bool,
            Slot,
            Option<(&'a [&'a str], &'a [&'a str])>,
        );
        // (state file, the package installed, the agent starts?, runs,
        // state written: lines it holds, lines it does not)
        #[rustfmt::skip]
        let cases: Vec<Case> = vec![
            // The same package: what stead updated itself to runs.
            ("current 0.7.0\npackage 0.5.0-1", Some("0.5.0-1"), true, Slot::Current(v("0.7.0")), None),
            // A fleet downgrade below the package stays while the package does.
            ("current 0.4.0\npackage 0.5.0-1", Some("0.5.0-1"), true, Slot::Current(v("0.4.0")), None),
            // Another package, newer or older: it runs, current set aside.
            ("current 0.7.0\nprevious 0.6.0\npackage 0.5.0-1", Some("0.8.0-1"), true, Slot::Package,
                Some((&["previous 0.7.0"], &["current", "package"]))),
            ("current 0.7.0\npackage 0.5.0-1", Some("0.5.0-2"), true, Slot::Package,
                Some((&["previous 0.7.0"], &["current"]))),
            // A candidate on trial is given up on, saying why.
            ("current 0.7.0\ncandidate 0.8.0 1\npackage 0.5.0-1", Some("0.9.0-1"), true, Slot::Package,
                Some((&["previous 0.7.0", "failed 0.8.0 package 0.9.0-1 was installed over package 0.5.0-1"], &["candidate", "current"]))),
            // The CLI runs the package's binary too, and writes nothing.
            ("current 0.7.0\npackage 0.5.0-1", Some("0.8.0-1"), false, Slot::Package, None),
            // Nothing to compare: no takeover.
            ("current 0.7.0", Some("0.8.0-1"), true, Slot::Current(v("0.7.0")), None),
            ("current 0.7.0\npackage 0.5.0-1", None, true, Slot::Current(v("0.7.0")), None),
            // Nothing set aside when the package's binary runs already.
            ("previous 0.7.0\npackage 0.5.0-1", Some("0.8.0-1"), true, Slot::Package, None),
        ];
        for (text, installed, agent, runs, writes) in cases {
            let installed = installed.map(v);
            let got = decide(&st(text), agent, &all, installed.as_ref(), MAX_ATTEMPTS);
            assert_eq!(got.slot, runs, "{text:?} {installed:?} agent={agent}");
            match (writes, &got.write) {
                (None, None) => {}
                (Some((has, lacks)), Some(w)) => {
                    let w = w.render();
                    for l in has {
                        assert!(w.contains(l), "{text:?}: wrote {w}");
                    }
                    for l in lacks {
                        assert!(!w.lines().any(|x| x.starts_with(l)), "{text:?}: wrote {w}");
                    }
                }
                (want, got) => panic!("{text:?}: want {want:?}, wrote {got:?}"),
            }
        }
        // A candidate's start records the package it started under.
        let got = decide(
            &st("current 0.6.0\ncandidate 0.7.0 0"),
            true,
            &all,
            Some(&v("0.5.0-1")),
            3,
        );
        assert_eq!(got.write.unwrap().package, Some(v("0.5.0-1")));
    }

    #[test]
    fn going_back_keeps_current_and_previous_and_forgets_the_candidate() {
        let got = decide(
            &st("current 0.6.0\nprevious 0.5.0\ncandidate 0.7.0 3\nwindow 300"),
            true,
            &|_| true,
            None,
            3,
        );
        let w = got.write.unwrap();
        assert_eq!(w.current, Some(v("0.6.0")));
        assert_eq!(w.previous, Some(v("0.5.0")));
        assert_eq!(w.candidate, None);
        assert_eq!(w.other, vec!["window 300".to_string()]);
        assert!(got.note.unwrap().contains("going back"));
    }

    #[test]
    fn at_least_one_start_whatever_the_limit() {
        let got = decide(&st("candidate 0.7.0 0"), true, &|_| true, None, 0);
        assert_eq!(got.slot, Slot::Candidate(v("0.7.0")));
    }
}
