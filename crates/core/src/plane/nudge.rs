//! A nudge: a hint, carried by an operator's MQTT broker, that the plane
//! has something new. It is never a second source of truth: all it can
//! do is start the normal signed poll sooner, at a jittered moment, and
//! at most once per jitter window ([`Gate`]), so a forged, replayed or
//! flooding nudge costs at most one conditional GET per window. The
//! device subscribes and polls (`stead::plane::nudge`); this module owns
//! what a hint says ([`read`]), whether it is worth a poll ([`judge`]),
//! and when that poll may be ([`Gate`]).

use std::collections::BTreeMap;

use crate::model::fleet::GroupName;

/// The most bytes of a hint read.
pub const MAX_HINT: usize = 1024;

/// What a hint says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Hint {
    /// "Poll" (the payload `poll`, or an empty one).
    Poll,
    /// The node's document is at `revision` (`{"revision": N}`).
    Node { revision: u64 },
    /// `group`'s document is at `revision` (`{"group": "g", "revision":
    /// N}`).
    Group { group: GroupName, revision: u64 },
}

/// Reads a hint; the error says what is wrong with it.
pub fn read(payload: &[u8]) -> Result<Hint, String> {
    if payload.len() > MAX_HINT {
        return Err(format!(
            "a hint of {} bytes is over the {MAX_HINT} read",
            payload.len()
        ));
    }
    let text = std::str::from_utf8(payload).map_err(|_| "a hint is not UTF-8".to_string())?;
    let text = text.trim();
    if text.is_empty() || text == "poll" {
        return Ok(Hint::Poll);
    }
    // Read as a JSON value (the parser the agent holds already), its
    // keys then taken one by one.
    let shape = "a hint is \"poll\" or {\"revision\": N, \"group\": \"g\"}";
    let Ok(serde_json::Value::Object(doc)) = serde_json::from_str(text) else {
        return Err(shape.into());
    };
    if let Some(k) = doc
        .keys()
        .find(|k| !matches!(k.as_str(), "revision" | "group"))
    {
        return Err(format!("{shape}: unknown field {k:?}"));
    }
    let revision = doc
        .get("revision")
        .and_then(serde_json::Value::as_u64)
        .ok_or_else(|| format!("{shape}: revision is a whole number"))?;
    let group = match doc.get("group") {
        None => return Ok(Hint::Node { revision }),
        Some(serde_json::Value::String(g)) => g.clone(),
        Some(_) => return Err("a hint's group is a name".into()),
    };
    Ok(Hint::Group {
        group: GroupName::try_from(group).map_err(|e| format!("a hint's group: {}", e.0))?,
        revision,
    })
}

/// What a hint is worth, against what the node holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Worth {
    /// A poll: the hint may be right.
    Poll,
    /// Nothing: the node holds that revision or a later one.
    Held,
    /// Nothing: the node's document does not list that group.
    NotMine,
}

/// Whether `hint` is worth a poll, for a node holding its document at
/// `node` (none: nothing held yet) and `groups` (each listed group's
/// revision held, 0 for one not held yet).
pub fn judge(hint: &Hint, node: Option<u64>, groups: &BTreeMap<GroupName, u64>) -> Worth {
    match hint {
        Hint::Poll => Worth::Poll,
        Hint::Node { revision } => match node {
            Some(held) if held >= *revision => Worth::Held,
            _ => Worth::Poll,
        },
        Hint::Group { group, revision } => match groups.get(group) {
            None if node.is_some() => Worth::NotMine,
            // Nothing held yet: the node's first document may list it.
            None => Worth::Poll,
            Some(held) if *held >= *revision => Worth::Held,
            Some(_) => Worth::Poll,
        },
    }
}

/// When a hint's poll may be: at most one per jitter window, each at a
/// random moment inside its window (a fleet nudged at once does not poll
/// at once), and never sooner than a window after the last one.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Gate {
    /// Milliseconds (the caller's clock) before which no poll is taken.
    closed_until: u64,
}

impl Gate {
    /// The moment (milliseconds, the caller's clock) of the poll a hint
    /// at `now` asks for, `r` a random number; `None` while a poll asked
    /// for earlier is still to come or less than `window` ms passed since
    /// it. A window of 0 polls at once, still one at a time.
    pub fn admit(&mut self, now: u64, window: u64, r: u64) -> Option<u64> {
        if now < self.closed_until {
            return None;
        }
        let at = now.saturating_add(r % window.max(1));
        self.closed_until = at.saturating_add(window.max(1));
        Some(at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn g(name: &str) -> GroupName {
        GroupName::try_from(name.to_string()).unwrap()
    }

    #[test]
    fn hints_are_read_and_a_bad_one_is_named() {
        for (payload, want) in [
            (&b"poll"[..], Ok(Hint::Poll)),
            (b" poll\n", Ok(Hint::Poll)),
            (b"", Ok(Hint::Poll)),
            (b"{\"revision\": 7}", Ok(Hint::Node { revision: 7 })),
            (
                b"{\"group\": \"tills\", \"revision\": 12}",
                Ok(Hint::Group {
                    group: g("tills"),
                    revision: 12,
                }),
            ),
            (b"reboot", Err("\"poll\" or")),
            (b"{\"revision\": -1}", Err("\"poll\" or")),
            (b"{\"revision\": 1, \"run\": \"rm\"}", Err("unknown field")),
            (b"{\"group\": \"../x\", \"revision\": 1}", Err("group")),
            (b"\xff", Err("UTF-8")),
        ] {
            match (read(payload), want) {
                (Ok(h), Ok(w)) => assert_eq!(h, w),
                (Err(e), Err(says)) => assert!(e.contains(says), "{e}"),
                (got, want) => panic!("{payload:?}: {got:?}, wanted {want:?}"),
            }
        }
        assert!(read(&[b' '; MAX_HINT + 1]).unwrap_err().contains("over"));
    }

    #[test]
    fn a_hint_is_worth_a_poll_only_when_it_may_be_news() {
        let groups: BTreeMap<GroupName, u64> = [(g("tills"), 12), (g("new"), 0)].into();
        let node = |revision| Hint::Node { revision };
        let group = |name: &str, revision| Hint::Group {
            group: g(name),
            revision,
        };
        // (hint, node held, what it is worth)
        for (hint, held, want) in [
            (Hint::Poll, Some(5), Worth::Poll),
            (node(6), Some(5), Worth::Poll),
            (node(5), Some(5), Worth::Held),
            (node(4), Some(5), Worth::Held),
            (node(1), None, Worth::Poll),
            (group("tills", 13), Some(5), Worth::Poll),
            (group("tills", 12), Some(5), Worth::Held),
            (group("new", 1), Some(5), Worth::Poll),
            (group("other", 99), Some(5), Worth::NotMine),
            (group("other", 99), None, Worth::Poll),
        ] {
            assert_eq!(judge(&hint, held, &groups), want, "{hint:?} {held:?}");
        }
    }

    #[test]
    fn the_gate_takes_one_poll_per_window_at_a_random_moment_in_it() {
        let mut gate = Gate::default();
        // (now, r, the poll's moment)
        for (now, r, want) in [
            (1_000, 7_000, Some(8_000)),
            // Flooded: nothing until a window after that poll.
            (1_001, 0, None),
            (8_000, 0, None),
            (37_999, 0, None),
            (38_000, 45_000, Some(53_000)),
            (60_000, 0, None),
            (83_000, 0, Some(83_000)),
        ] {
            assert_eq!(gate.admit(now, 30_000, r), want, "{now}");
        }
        // A window of 0: at once, one a millisecond.
        let mut gate = Gate::default();
        assert_eq!(gate.admit(5, 0, 99), Some(5));
        assert_eq!(gate.admit(5, 0, 99), None);
        assert_eq!(gate.admit(6, 0, 99), Some(6));
    }
}
