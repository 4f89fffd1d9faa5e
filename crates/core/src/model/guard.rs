//! The crash guard: what the agent was about to act on when it died, counted
//! across restarts, and what it holds back after dying a few times in a row
//! on the same input. Nothing a document, a file or a registry says should
//! crash the agent; this is for what does anyway, so that one bad input
//! never keeps a node (or a fleet) down.
//!
//! Pure data and decisions: the store keeps a [`Guard`] (written before a
//! start's first pass and before a plane document is judged, cleared after),
//! the agent folds what the last run left into it at start
//! ([`Guard::on_start`]) and asks each pass what is held
//! ([`Quarantine::holds`]).
//!
//! What is held, by how much is known of the crash:
//! - a module a panic named (the agent notes which module it is acting on;
//!   a panic records it): that module, if a file or the API states it;
//! - a plane module a panic named, or a death no panic named while the node
//!   holds a plane revision: that whole revision (a document is adopted
//!   whole; its modules are held together);
//! - a death that names nothing and no revision to blame, or deaths that go
//!   on while something is held: everything (no pass runs; the API and the
//!   plane's poller still do, so a fixed revision is still taken);
//! - a plane document whose judgement the agent died in (a node's or a
//!   group's, and the fetches of a node document's groups while it is
//!   judged), or a composition of a node's document with its groups' (by
//!   the digest of the documents composed): that document, or that
//!   composition, never tried again; another revision of any of them is
//!   judged anew. The note is stored before the step and cleared after, so
//!   a death no hook sees (an out-of-memory kill) counts too.
//!
//! Held means never run and never removed: its containers stay as they are.
//! A hold is lifted when what it holds changes: the module's intention, the
//! plane revision, any intention (for everything), another document.
//! A death after a reboot of the machine (a power cut) is not counted.

use std::collections::BTreeMap;

use crate::model::names::{Digest, ModuleName};

/// Deaths in a row, on the same input, that quarantine it.
pub const CRASHES: u32 = 3;

/// What the agent was about to act on.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Attempt {
    /// The machine's boot when it started (a death across a reboot is a
    /// power cut, not a crash).
    pub boot: String,
    /// The plane revision the node held.
    pub plane: Option<u64>,
    /// The module the agent was acting on when it died, as its panic note
    /// says (filled in at the next start).
    pub module: Option<ModuleName>,
}

impl Attempt {
    /// Whether two deaths were on the same input.
    fn same_input(&self, other: &Attempt) -> bool {
        self.plane == other.plane && self.module == other.module
    }
}

/// One thing held, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hold {
    /// What it held when it was held: a different key lifts it (the
    /// module's entry, the set of all entries).
    pub key: Digest,
    /// Deaths in a row that held it.
    pub crashes: u32,
    /// When, seconds since the epoch.
    pub since: u64,
    /// The last death: where the panic was, or that no panic was recorded.
    pub cause: String,
}

/// What is held.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Quarantine {
    /// Modules held, each with its entry's key.
    pub modules: BTreeMap<ModuleName, Hold>,
    /// A plane revision held (every module the plane states): the key is
    /// unused; the revision itself is what a new one lifts.
    pub revision: Option<(u64, Hold)>,
    /// Everything held: no pass runs.
    pub everything: Option<Hold>,
    /// A plane document never judged again, by its digest.
    pub document: Option<(Digest, Hold)>,
}

/// The guard as the store keeps it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Guard {
    /// A start's first pass under way: set before it, cleared after.
    pub open: Option<Attempt>,
    /// Deaths in a row on the same input...
    pub crashes: u32,
    /// ...and that input.
    pub last: Option<Attempt>,
    /// A plane document being judged, or documents being composed (their
    /// digest), and the boot.
    pub judging: Option<(Digest, String)>,
    /// Deaths in a row while judging the same document, and its digest.
    pub document_crashes: Option<(Digest, u32)>,
    /// What is held.
    pub quarantine: Quarantine,
}

/// What a start knows when it folds in what the last run left.
pub struct Start<'a> {
    /// This boot of the machine.
    pub boot: &'a str,
    /// Now, seconds since the epoch.
    pub now: u64,
    /// What the last run's panic note says: the module it was acting on,
    /// and where it panicked. `None`: no panic was recorded (a kill, an
    /// out-of-memory kill, a fault).
    pub panic: Option<(Option<ModuleName>, String)>,
    /// Whether the plane states this module.
    pub from_plane: &'a dyn Fn(&ModuleName) -> bool,
    /// The key of a module's entry now (`None`: no such module).
    pub module_key: &'a dyn Fn(&ModuleName) -> Option<Digest>,
    /// The key of every entry together.
    pub all_key: Digest,
}

impl Guard {
    /// Folds in a death the last run left (an attempt or a judgement still
    /// open), counts it, and holds what it died on after [`CRASHES`] in a
    /// row. Returns what was newly held, for the log.
    pub fn on_start(&mut self, s: &Start<'_>) -> Vec<String> {
        let mut said = Vec::new();
        let (panic_module, cause) = match &s.panic {
            Some((m, at)) => (m.clone(), format!("a panic at {at}")),
            None => (None, "killed, no panic recorded".to_string()),
        };
        if let Some(mut attempt) = self.open.take() {
            if attempt.boot == s.boot {
                attempt.module = panic_module;
                let again = self.last.as_ref().is_some_and(|l| l.same_input(&attempt));
                self.crashes = if again { self.crashes + 1 } else { 1 };
                if self.crashes >= CRASHES {
                    if let Some(what) = self.hold(&attempt, s, cause.clone()) {
                        said.push(what);
                    }
                    self.crashes = 0;
                    self.last = None;
                } else {
                    self.last = Some(attempt);
                }
            }
        }
        if let Some((doc, boot)) = self.judging.take() {
            if boot == s.boot {
                let n = match &self.document_crashes {
                    Some((d, n)) if *d == doc => n + 1,
                    _ => 1,
                };
                if n >= CRASHES {
                    said.push(format!(
                        "plane document {} (died {n} times in a row judging or composing it)",
                        doc.hex().get(..16).unwrap_or_default()
                    ));
                    self.quarantine.document = Some((
                        doc,
                        Hold {
                            key: s.all_key.clone(),
                            crashes: n,
                            since: s.now,
                            cause,
                        },
                    ));
                    self.document_crashes = None;
                } else {
                    self.document_crashes = Some((doc, n));
                }
            }
        }
        said
    }

    /// Holds what an attempt died on, by how much is known of it.
    fn hold(&mut self, a: &Attempt, s: &Start<'_>, cause: String) -> Option<String> {
        let hold = |key: Digest| Hold {
            key,
            crashes: CRASHES,
            since: s.now,
            cause: cause.clone(),
        };
        let q = &mut self.quarantine;
        if q.everything.is_some() {
            return None;
        }
        if let Some(m) = &a.module {
            if !(s.from_plane)(m) && !q.modules.contains_key(m) {
                if let Some(key) = (s.module_key)(m) {
                    q.modules.insert(m.clone(), hold(key));
                    return Some(format!("module {m}"));
                }
            }
        }
        let blamed = a.module.as_ref().is_none_or(|m| (s.from_plane)(m));
        if let Some(r) = a.plane.filter(|_| blamed) {
            if q.revision.as_ref().is_none_or(|(held, _)| *held != r) {
                q.revision = Some((r, hold(s.all_key.clone())));
                return Some(format!("plane revision {r}"));
            }
        }
        q.everything = Some(hold(s.all_key.clone()));
        Some("every module (no pass runs)".into())
    }

    /// A start's first pass begins: what it acts on, before it acts.
    pub fn begin(&mut self, boot: &str, plane: Option<u64>) {
        self.open = Some(Attempt {
            boot: boot.to_string(),
            plane,
            module: None,
        });
    }

    /// The first pass completed: the deaths before it were not on this
    /// input (what is held stays held).
    pub fn passed(&mut self) {
        self.open = None;
        self.crashes = 0;
        self.last = None;
    }
}

impl Quarantine {
    /// Whether anything is held.
    pub fn is_empty(&self) -> bool {
        self.modules.is_empty()
            && self.revision.is_none()
            && self.everything.is_none()
            && self.document.is_none()
    }

    /// Lifts what changed since it was held: a module whose entry's key
    /// moved (or that is gone), a revision once another is held,
    /// everything once any entry moved. Returns what was lifted.
    pub fn lift(
        &mut self,
        plane: Option<u64>,
        module_key: &dyn Fn(&ModuleName) -> Option<Digest>,
        all_key: &Digest,
    ) -> Vec<String> {
        let mut lifted = Vec::new();
        self.modules.retain(|m, h| {
            let keep = module_key(m).as_ref() == Some(&h.key);
            if !keep {
                lifted.push(format!("module {m}"));
            }
            keep
        });
        if let Some((r, _)) = &self.revision {
            if plane != Some(*r) {
                lifted.push(format!("plane revision {r}"));
                self.revision = None;
            }
        }
        if self.everything.as_ref().is_some_and(|h| h.key != *all_key) {
            lifted.push("every module".into());
            self.everything = None;
        }
        lifted
    }

    /// Why a module is held, if it is: `from_plane` says whether the plane
    /// states it.
    pub fn holds(&self, module: &ModuleName, from_plane: bool) -> Option<String> {
        let said = |what: String, h: &Hold| {
            format!(
                "quarantined: the agent died {} times in a row acting on {what} ({}); held, neither run nor removed, until it changes",
                h.crashes, h.cause
            )
        };
        if let Some(h) = &self.everything {
            return Some(said("this node's modules".into(), h));
        }
        if let Some((r, h)) = self.revision.as_ref().filter(|_| from_plane) {
            return Some(said(format!("plane revision {r}"), h));
        }
        self.modules
            .get(module)
            .map(|h| said(format!("module {module}"), h))
    }

    /// What is held, in a line: `plane revision 2, module a`.
    pub fn summary(&self) -> String {
        let mut parts = Vec::new();
        if self.everything.is_some() {
            parts.push("every module (no pass runs)".to_string());
        }
        if let Some((r, _)) = &self.revision {
            parts.push(format!("plane revision {r}"));
        }
        parts.extend(self.modules.keys().map(|m| format!("module {m}")));
        if let Some((d, _)) = &self.document {
            parts.push(format!("plane document {}", d.short()));
        }
        parts.join(", ")
    }

    /// Whether a fetched plane document is one never judged again.
    pub fn holds_document(&self, digest: &Digest) -> bool {
        self.document.as_ref().is_some_and(|(d, _)| d == digest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(s: &str) -> ModuleName {
        ModuleName::try_from(s).unwrap()
    }

    /// Starts after a death: `panic` names the module (or none), `plane`
    /// the revision held; modules whose name begins with `p` are the
    /// plane's.
    fn die(g: &mut Guard, boot: &str, plane: Option<u64>, panic: Option<&str>) -> Vec<String> {
        g.begin("b1", plane);
        let from_plane = |n: &ModuleName| n.as_str().starts_with('p');
        let key = |n: &ModuleName| Some(Digest::of(n.as_str().as_bytes()));
        g.on_start(&Start {
            boot,
            now: 7,
            panic: panic.map(|p| (Some(m(p)), "src/x.rs:1:1".to_string())),
            from_plane: &from_plane,
            module_key: &key,
            all_key: Digest::of(b"all"),
        })
    }

    #[test]
    fn deaths_in_a_row_hold_what_they_died_on() {
        // (deaths: revision held, module the panic named; what is held after)
        type Case = (
            &'static str,
            Vec<(Option<u64>, Option<&'static str>)>,
            &'static str,
        );
        let cases: Vec<Case> = vec![
            ("two deaths hold nothing", vec![(Some(2), Some("a")); 2], ""),
            ("a local module", vec![(None, Some("a")); 3], "module a"),
            (
                "a local module, a revision held",
                vec![(Some(2), Some("a")); 3],
                "module a",
            ),
            (
                "a plane module: its revision",
                vec![(Some(2), Some("pb")); 3],
                "plane revision 2",
            ),
            (
                "no panic: the revision",
                vec![(Some(2), None); 3],
                "plane revision 2",
            ),
            (
                "no panic, no plane: everything",
                vec![(None, None); 3],
                "every module (no pass runs)",
            ),
            (
                "another module breaks the row",
                vec![(None, Some("a")), (None, Some("b")), (None, Some("a"))],
                "",
            ),
            (
                "another revision breaks the row",
                vec![(Some(1), None), (Some(2), None), (Some(2), None)],
                "",
            ),
            (
                "deaths go on past a module: escalate",
                vec![(None, Some("a")); 3]
                    .into_iter()
                    .chain(vec![(None, None); 3])
                    .collect(),
                "every module (no pass runs)",
            ),
        ];
        for (what, deaths, held) in cases {
            let mut g = Guard::default();
            let mut said = Vec::new();
            for (plane, panic) in deaths {
                said.extend(die(&mut g, "b1", plane, panic));
            }
            assert_eq!(said.last().map_or("", String::as_str), held, "{what}");
        }
    }

    #[test]
    fn a_death_across_a_reboot_is_a_power_cut_and_a_pass_ends_the_row() {
        let mut g = Guard::default();
        for _ in 0..5 {
            assert!(die(&mut g, "b2", Some(2), None).is_empty());
        }
        assert_eq!(g.crashes, 0);
        die(&mut g, "b1", Some(2), None);
        die(&mut g, "b1", Some(2), None);
        g.begin("b1", Some(2));
        g.passed();
        assert!(
            die(&mut g, "b1", Some(2), None).is_empty(),
            "counted from one again"
        );
        assert!(g.quarantine.is_empty());
    }

    #[test]
    fn what_is_held_is_lifted_when_it_changes() {
        let mut g = Guard::default();
        for _ in 0..3 {
            die(&mut g, "b1", Some(2), Some("a"));
        }
        for _ in 0..3 {
            die(&mut g, "b1", Some(2), Some("pb"));
        }
        let q = &mut g.quarantine;
        assert!(
            q.holds(&m("a"), false)
                .is_some_and(|r| r.contains("module a"))
        );
        assert!(
            q.holds(&m("pb"), true)
                .is_some_and(|r| r.contains("plane revision 2"))
        );
        assert_eq!(q.holds(&m("c"), false), None);
        let same = |n: &ModuleName| Some(Digest::of(n.as_str().as_bytes()));
        assert!(q.lift(Some(2), &same, &Digest::of(b"all")).is_empty());
        let lifted = q.lift(
            Some(3),
            &|_| Some(Digest::of(b"edited")),
            &Digest::of(b"all"),
        );
        assert_eq!(lifted, vec!["module a", "plane revision 2"]);
        assert!(q.is_empty());
    }

    #[test]
    fn a_document_judged_three_times_to_a_death_is_not_judged_again() {
        let mut g = Guard::default();
        let doc = Digest::of(b"doc");
        for n in 0..3 {
            g.judging = Some((doc.clone(), "b1".into()));
            let said = g.on_start(&Start {
                boot: "b1",
                now: 1,
                panic: None,
                from_plane: &|_| false,
                module_key: &|_| None,
                all_key: Digest::of(b"all"),
            });
            assert_eq!(said.is_empty(), n < 2);
        }
        assert!(g.quarantine.holds_document(&doc));
        assert!(!g.quarantine.holds_document(&Digest::of(b"other")));
    }

    #[test]
    fn deaths_noted_on_documents_hold_the_one_died_on_three_times_in_a_row() {
        // (the notes each death left uncleared: the document (a node's, a
        // group's, or a composition's digest) and the boot; then what is
        // held)
        type Case = (
            &'static str,
            Vec<(&'static str, &'static str)>,
            Option<&'static str>,
        );
        #[rustfmt::skip]
        let cases: Vec<Case> = vec![
            ("three deaths on one", vec![("node-r2", "b1"); 3], Some("node-r2")),
            ("two are not enough", vec![("group-g-r5", "b1"); 2], None),
            ("a group's, three times", vec![("group-g-r5", "b1"); 3], Some("group-g-r5")),
            ("a composition, three times", vec![("node-r2+groups", "b1"); 3], Some("node-r2+groups")),
            ("another document breaks the row", vec![("node-r2", "b1"), ("group-g-r5", "b1"), ("node-r2", "b1")], None),
            ("a power cut is not counted", vec![("node-r2", "b1"), ("node-r2", "b0"), ("node-r2", "b1")], None),
            ("the last of two quarantined", vec![("a", "b1"), ("a", "b1"), ("a", "b1"), ("b", "b1"), ("b", "b1"), ("b", "b1")], Some("b")),
        ];
        for (what, deaths, held) in cases {
            let mut g = Guard::default();
            for (doc, boot) in deaths {
                g.judging = Some((Digest::of(doc.as_bytes()), boot.into()));
                g.on_start(&Start {
                    boot: "b1",
                    now: 1,
                    panic: None,
                    from_plane: &|_| false,
                    module_key: &|_| None,
                    all_key: Digest::of(b"all"),
                });
                assert_eq!(g.judging, None, "{what}: a note is taken once");
            }
            let got = g.quarantine.document.as_ref().map(|(d, _)| d.clone());
            assert_eq!(got, held.map(|d| Digest::of(d.as_bytes())), "{what}");
            if let Some((_, h)) = &g.quarantine.document {
                assert_eq!(
                    (h.crashes, h.cause.as_str()),
                    (3, "killed, no panic recorded"),
                    "{what}"
                );
            }
        }
    }
}
