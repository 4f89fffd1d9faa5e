//! Update locks: a module holding off its own recreate, or every recreate
//! of its device, while it does what must not be cut short (a payment, a
//! robot's task). A lock is taken through the agent's API for the
//! module's running container and stands only for that container's
//! present life: once it stops, restarts or is replaced, the lock is gone,
//! so a module that crashed holding one holds nothing. A document may set
//! how long a recreate waits for a lock (`locks = {max, then}`), and what
//! it does after: go on waiting, or take the lock.
//!
//! Owns: the lock as kept ([`Lock`], its text form), whether it stands for
//! a container's life ([`Lock::stands`]), the documents' [`Policy`], and
//! the rule that says whether a module's recreate waits ([`hold`]).

use std::time::Duration;

use crate::model::names::ModuleName;
use crate::model::time::format_rfc3339;

/// The longest a lock's reason is, in characters.
pub const MAX_REASON: usize = 200;

/// What a lock holds off.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Its module's own recreate.
    Module,
    /// Every recreate of the device.
    Device,
}

impl Scope {
    /// As the API and the store write it.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Module => "module",
            Scope::Device => "device",
        }
    }

    /// Reads `module` or `device`.
    pub fn parse(s: &str) -> Result<Scope, String> {
        match s {
            "module" => Ok(Scope::Module),
            "device" => Ok(Scope::Device),
            _ => Err("must be \"module\" or \"device\"".into()),
        }
    }
}

/// A lock a module holds, for one life of its container.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lock {
    /// The module that holds it.
    pub module: ModuleName,
    /// Why, as the module said it (checked: [`check_reason`]).
    pub reason: String,
    /// What it holds off.
    pub scope: Scope,
    /// When it was taken, seconds since the epoch.
    pub taken_at: u64,
    /// The container it was taken for.
    pub container: String,
    /// When that container last started, nanoseconds since the epoch: the
    /// life the lock stands for.
    pub started_ns: i64,
    /// When a recreate first waited for it, seconds since the epoch.
    pub waited_since: Option<u64>,
    /// Taken by a lock file in the module's lock directory (`update_lock`),
    /// not through the API: it goes when the file does.
    pub file: bool,
}

/// The lock files a module's lock directory may hold, most holding first:
/// `device.lock` holds off every recreate of the device, `updates.lock`
/// (balena's name) the module's own.
pub const LOCK_FILES: [(&str, Scope); 2] = [
    ("device.lock", Scope::Device),
    ("updates.lock", Scope::Module),
];

/// A reason as a lock keeps it: trimmed, 1 to [`MAX_REASON`] characters,
/// no control character (it is one line of the store's record and of a
/// status).
pub fn check_reason(s: &str) -> Result<String, String> {
    let s = s.trim();
    if s.is_empty() {
        return Err("must say why (1 to 200 characters)".into());
    }
    if s.chars().count() > MAX_REASON {
        return Err(format!("longer than {MAX_REASON} characters"));
    }
    if s.chars().any(char::is_control) {
        return Err("has a control character (a reason is one line)".into());
    }
    Ok(s.to_string())
}

impl Lock {
    /// Whether the lock stands for a container `container` whose engine
    /// says it last started at `started_ns` and stopped at `finished_ns`
    /// (`restarting`: the engine is about to start it again). A container
    /// replaced, stopped or started again since ends it.
    pub fn stands(
        &self,
        container: &str,
        started_ns: i64,
        finished_ns: i64,
        restarting: bool,
    ) -> bool {
        container == self.container
            && started_ns == self.started_ns
            && finished_ns < started_ns
            && !restarting
    }

    /// Its key among the locks held: the module's name, `<module>#file` for
    /// its lock file's (a module may hold both).
    pub fn key(&self) -> String {
        if self.file {
            format!("{}#file", self.module)
        } else {
            self.module.to_string()
        }
    }

    /// The lock as the store keeps it: `key=value` lines.
    pub fn to_text(&self) -> String {
        let mut t = format!(
            "module={}\nscope={}\ntaken_at={}\ncontainer={}\nstarted_ns={}\nreason={}\n",
            self.module,
            self.scope.as_str(),
            self.taken_at,
            self.container,
            self.started_ns,
            self.reason
        );
        if let Some(w) = self.waited_since {
            t.push_str(&format!("waited_since={w}\n"));
        }
        if self.file {
            t.push_str("file=1\n");
        }
        t
    }

    /// Reads [`Lock::to_text`]; `None` when a line it needs is missing or
    /// wrong.
    pub fn from_text(text: &str) -> Option<Lock> {
        let (mut module, mut scope, mut taken_at, mut container, mut started_ns, mut reason) =
            (None, None, None, None, None, None);
        let mut waited_since = None;
        let mut file = false;
        for line in text.lines() {
            match line.split_once('=')? {
                ("module", m) => module = ModuleName::try_from(m).ok(),
                ("scope", s) => scope = Scope::parse(s).ok(),
                ("taken_at", t) => taken_at = t.parse().ok(),
                ("container", c) => container = Some(c.to_string()),
                ("started_ns", s) => started_ns = s.parse().ok(),
                ("reason", r) => reason = check_reason(r).ok(),
                ("waited_since", w) => waited_since = Some(w.parse().ok()?),
                ("file", "1") => file = true,
                _ => {}
            }
        }
        Some(Lock {
            module: module?,
            reason: reason?,
            scope: scope?,
            taken_at: taken_at?,
            container: container?,
            started_ns: started_ns?,
            waited_since,
            file,
        })
    }

    /// Who holds it and why, for a status: `the update lock of till
    /// ("taking a payment", since 2026-12-07T10:00:00Z)`.
    pub fn said(&self) -> String {
        let of = match self.scope {
            Scope::Module => format!("the update lock of {}", self.module),
            Scope::Device => format!("the device's update lock, held by {}", self.module),
        };
        let of = if self.file {
            format!("{of} (its lock file)")
        } else {
            of
        };
        format!(
            "{of} ({:?}, since {})",
            self.reason,
            format_rfc3339(self.taken_at)
        )
    }
}

/// What a recreate does once it has waited a document's `max` for a lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Then {
    /// Waits on, until the lock is gone.
    Wait,
    /// Goes ahead: the lock is taken from its module.
    Take,
}

/// How long a recreate waits for a lock, and then what: a document's
/// `locks`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Policy {
    /// The longest a recreate waits.
    pub max: Duration,
    /// What it does after.
    pub then: Then,
}

/// The longest `max` a document may set: a week.
pub const MAX_WAIT: Duration = Duration::from_secs(7 * 24 * 3600);

impl Policy {
    /// Reads a document's `locks`: `{"max": "2h", "then": "wait" |
    /// "take"}` (both said). The error names the field at fault.
    pub fn parse_doc(v: &serde_json::Value) -> Result<Policy, (String, String)> {
        let o = v
            .as_object()
            .ok_or_else(|| ("locks".to_string(), "not an object".to_string()))?;
        if let Some(k) = o.keys().find(|k| !["max", "then"].contains(&k.as_str())) {
            return Err(("locks".into(), format!("unknown field {k:?} (max, then)")));
        }
        let max = match o.get("max") {
            Some(serde_json::Value::String(s)) => {
                crate::model::time::parse_duration(s).map_err(|e| ("locks.max".to_string(), e))?
            }
            Some(_) => return Err(("locks.max".into(), "must be a duration (\"2h\")".into())),
            None => return Err(("locks.max".into(), "must be said".into())),
        };
        if max.is_zero() || max > MAX_WAIT {
            return Err((
                "locks.max".into(),
                "must be more than 0 and at most a week (168h)".into(),
            ));
        }
        let then = match o.get("then").and_then(|t| t.as_str()) {
            Some("wait") => Then::Wait,
            Some("take") => Then::Take,
            _ => {
                return Err(("locks.then".into(), "must be \"wait\" or \"take\"".into()));
            }
        };
        Ok(Policy { max, then })
    }

    /// As a document writes it.
    pub fn to_doc(&self) -> serde_json::Value {
        serde_json::json!({
            "max": crate::model::time::format_duration(self.max),
            "then": match self.then { Then::Wait => "wait", Then::Take => "take" },
        })
    }
}

/// The policy in force of several documents' (who set it, and it): the
/// shortest `max`, with the `then` of the document that set it (a tie:
/// `take` over `wait`, the first said otherwise).
pub fn strictest(policies: &[(String, Policy)]) -> Option<&(String, Policy)> {
    policies.iter().reduce(|a, b| {
        let later = (b.1.max, b.1.then == Then::Wait) < (a.1.max, a.1.then == Then::Wait);
        if later { b } else { a }
    })
}

/// Whether a module's recreate waits for the locks held.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Hold {
    /// No lock holds it off.
    Free,
    /// It waits: for which lock, until when at most (and when that is,
    /// seconds since the epoch, if the wait ends by itself).
    Waits(String, Option<u64>),
    /// It waited the document's `max` for every lock that held it off,
    /// and the document says take them: it goes ahead (why, for the event).
    Takes(String),
}

/// Whether `module`'s recreate waits, at `now` (seconds), for the `locks`
/// held (each already found to stand for its container's life), under the
/// documents' `policy` (who set it, and it; none: a lock holds with no
/// limit). A lock holds off its module's recreate, and a device lock every
/// one; the time waited counts from when a recreate first waited for it.
pub fn hold(
    locks: &[Lock],
    module: &ModuleName,
    policy: Option<&(String, Policy)>,
    now: u64,
) -> Hold {
    let mut taken = Vec::new();
    for l in locks
        .iter()
        .filter(|l| l.scope == Scope::Device || &l.module == module)
    {
        let Some((who, p)) = policy else {
            return Hold::Waits(format!("waits for {}", l.said()), None);
        };
        let until = l.waited_since.unwrap_or(now) + p.max.as_secs();
        let max = crate::model::time::format_duration(p.max);
        match p.then {
            _ if now < until => {
                return Hold::Waits(
                    format!(
                        "waits for {} until at most {} ({who}'s locks: max {max}, then {})",
                        l.said(),
                        format_rfc3339(until),
                        match p.then {
                            Then::Wait => "wait",
                            Then::Take => "take",
                        }
                    ),
                    Some(until),
                );
            }
            Then::Wait => {
                return Hold::Waits(
                    format!(
                        "waits for {}, over {who}'s max of {max} (then wait)",
                        l.said()
                    ),
                    None,
                );
            }
            Then::Take => taken.push(format!(
                "{} taken after {max} ({who}'s locks: then take)",
                l.said()
            )),
        }
    }
    if taken.is_empty() {
        Hold::Free
    } else {
        Hold::Takes(taken.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lock(module: &str, scope: Scope, waited_since: Option<u64>) -> Lock {
        Lock {
            module: ModuleName::try_from(module).unwrap(),
            reason: "taking a payment".into(),
            scope,
            taken_at: 1_000,
            container: "c1".into(),
            started_ns: 500,
            waited_since,
            file: false,
        }
    }

    fn policy(max: u64, then: Then) -> (String, Policy) {
        (
            "node".into(),
            Policy {
                max: Duration::from_secs(max),
                then,
            },
        )
    }

    #[test]
    fn a_lock_holds_its_module_or_its_device_until_the_documents_max() {
        use Scope::*;
        use Then::*;
        let till = ModuleName::try_from("till").unwrap();
        type Case = (Vec<Lock>, Option<(String, Policy)>, u64, fn(&Hold) -> bool);
        let cases: Vec<Case> = vec![
            (vec![], None, 2_000, |h| *h == Hold::Free),
            (vec![lock("other", Module, None)], None, 2_000, |h| {
                *h == Hold::Free
            }),
            (
                vec![lock("till", Module, None)],
                None,
                2_000,
                |h| matches!(h, Hold::Waits(w, _) if w.contains("the update lock of till (\"taking a payment\"")),
            ),
            (
                vec![lock("other", Device, None)],
                None,
                2_000,
                |h| matches!(h, Hold::Waits(w, _) if w.contains("the device's update lock, held by other")),
            ),
            // Not yet waited: the max counts from now.
            (
                vec![lock("till", Module, None)],
                Some(policy(60, Take)),
                2_000,
                |h| matches!(h, Hold::Waits(w, _) if w.contains("until at most 1970-01-01T00:34:20Z")),
            ),
            (
                vec![lock("till", Module, Some(1_950))],
                Some(policy(60, Take)),
                2_000,
                |h| matches!(h, Hold::Waits(_, Some(2_010))),
            ),
            (
                vec![lock("till", Module, Some(1_940))],
                Some(policy(60, Take)),
                2_000,
                |h| matches!(h, Hold::Takes(w) if w.contains("taken after 1m")),
            ),
            (
                vec![lock("till", Module, Some(1_940))],
                Some(policy(60, Wait)),
                2_000,
                |h| matches!(h, Hold::Waits(w, _) if w.contains("over node's max of 1m (then wait)")),
            ),
            // Two locks: both must be over the max to take.
            (
                vec![
                    lock("till", Module, Some(1_000)),
                    lock("other", Device, Some(1_990)),
                ],
                Some(policy(60, Take)),
                2_000,
                |h| matches!(h, Hold::Waits(w, _) if w.contains("held by other")),
            ),
            (
                vec![
                    lock("till", Module, Some(1_000)),
                    lock("other", Device, Some(1_000)),
                ],
                Some(policy(60, Take)),
                2_000,
                |h| matches!(h, Hold::Takes(w) if w.contains("; ")),
            ),
        ];
        for (i, (locks, p, now, ok)) in cases.iter().enumerate() {
            let got = hold(locks, &till, p.as_ref(), *now);
            assert!(ok(&got), "case {i}: {got:?}");
        }
    }

    #[test]
    fn a_lock_stands_for_one_life_of_one_container() {
        let l = lock("till", Scope::Module, None);
        for (container, started, finished, restarting, stands) in [
            ("c1", 500, 0, false, true),
            ("c1", 500, 400, false, true),
            // Stopped since.
            ("c1", 500, 600, false, false),
            // Started again (a crash the engine restarted).
            ("c1", 700, 600, false, false),
            ("c1", 500, 0, true, false),
            // Replaced.
            ("c2", 500, 0, false, false),
        ] {
            assert_eq!(
                l.stands(container, started, finished, restarting),
                stands,
                "{container} {started} {finished} {restarting}"
            );
        }
    }

    #[test]
    fn a_lock_reads_back_as_it_was_kept_and_a_bad_record_is_none() {
        let mut l = lock("till", Scope::Device, None);
        assert_eq!(Lock::from_text(&l.to_text()), Some(l.clone()));
        assert!(!l.to_text().contains("file="));
        l.waited_since = Some(1_500);
        l.reason = "a = b".into();
        assert_eq!(Lock::from_text(&l.to_text()), Some(l.clone()));
        assert_eq!(l.key(), "till");
        l.file = true;
        assert_eq!(Lock::from_text(&l.to_text()), Some(l.clone()));
        assert_eq!(l.key(), "till#file");
        for bad in [
            "",
            "module=till\n",
            &l.to_text().replace("scope=device", "scope=site"),
            &l.to_text().replace("module=till", "module=Till"),
            &l.to_text().replace("waited_since=1500", "waited_since=x"),
            "no equals sign",
        ] {
            assert_eq!(Lock::from_text(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_reason_is_one_line_of_at_most_200_characters() {
        for (given, want) in [
            ("  taking a payment ", Ok("taking a payment")),
            ("", Err("must say why")),
            ("   ", Err("must say why")),
            ("a\nb", Err("control character")),
            ("a\u{7}", Err("control character")),
        ] {
            match (check_reason(given), want) {
                (Ok(got), Ok(w)) => assert_eq!(got, w),
                (Err(got), Err(w)) => assert!(got.contains(w), "{given:?}: {got}"),
                (got, w) => panic!("{given:?}: {got:?}, wanted {w:?}"),
            }
        }
        assert!(check_reason(&"é".repeat(200)).is_ok());
        assert!(check_reason(&"é".repeat(201)).is_err());
    }

    #[test]
    fn a_documents_policy_is_read_and_refused_naming_its_field() {
        use serde_json::json;
        let p = Policy::parse_doc(&json!({"max": "2h", "then": "take"})).unwrap();
        assert_eq!((p.max, p.then), (Duration::from_secs(7200), Then::Take));
        assert_eq!(Policy::parse_doc(&p.to_doc()), Ok(p));
        for (doc, field) in [
            (json!([]), "locks"),
            (json!({"max": "2h", "then": "take", "x": 1}), "locks"),
            (json!({"then": "take"}), "locks.max"),
            (json!({"max": 5, "then": "take"}), "locks.max"),
            (json!({"max": "0s", "then": "take"}), "locks.max"),
            (json!({"max": "169h", "then": "take"}), "locks.max"),
            (json!({"max": "soon", "then": "take"}), "locks.max"),
            (json!({"max": "2h"}), "locks.then"),
            (json!({"max": "2h", "then": "break"}), "locks.then"),
        ] {
            let e = Policy::parse_doc(&doc).unwrap_err();
            assert_eq!(e.0, field, "{doc}: {}", e.1);
        }
    }

    #[test]
    fn the_strictest_policy_is_the_shortest_max() {
        use Then::*;
        let (a, b, c) = (policy(60, Wait), policy(30, Wait), policy(30, Take));
        assert_eq!(strictest(&[]), None);
        assert_eq!(strictest(&[a.clone(), b.clone()]), Some(&b));
        assert_eq!(strictest(&[a.clone(), b.clone(), c.clone()]), Some(&c));
        assert_eq!(strictest(&[c.clone(), b.clone()]), Some(&c));
    }
}
