//! The publisher's list of its devices' keys (`device-keys.csv` in a
//! fleet's description: `node,age1…,report-key` lines), and how the keys
//! the devices' reports name are taken into it. Pure.
//!
//! Each device has two keys, both derived from the secret in its data
//! directory: its age key (`age1…`), what values for it are sealed to, and
//! its report key (Ed25519, since 0.7.0), what it signs its reports with
//! ([`crate::views::signed`]). A report key is taken only from a report
//! that key signed. Neither proves which device holds it: the first keys a
//! node's report names are taken on trust (as SSH takes a host key), and
//! after that a report counts only signed by the enrolled report key, and
//! keys that differ from the enrolled ones are never taken silently: they
//! are refused unless the operator replaces them, knowing that every value
//! sealed to the old key must be sealed again (a device whose data
//! directory was lost or replaced has new keys; so would a forged report).
//! A node enrolled from an unsigned report (an agent before 0.7.0) has no
//! report key: the first signed report of it with the same age key adds
//! one (on trust, as the first enrolment was), and an unsigned report of a
//! node enrolled with a report key takes nothing. One key is never enrolled
//! for two nodes (a cloned data directory, or a report naming a node not
//! its own, would have one device read what is sealed for another, or
//! speak for it), and a key of low order is no key ([`Recipient::parse`]).
//! A file without report keys (0.6.0's, `node,age1…` lines) reads as it
//! did, and is written as it was while no node has one.

use std::collections::{BTreeMap, HashMap};

use crate::model::age::Recipient;
use crate::model::names::NodeId;
use crate::plane::envelope::PublicKey;
use crate::views::signed::Claim;

/// The file in a fleet's description.
pub const FILE: &str = "device-keys.csv";

/// A node's enrolled keys.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Enrolled {
    /// Its age key: what values for it are sealed to.
    pub age: Recipient,
    /// Its report key, when it was enrolled from a signed report.
    pub report: Option<PublicKey>,
}

/// The enrolled keys, by node.
pub type Keys = BTreeMap<NodeId, Enrolled>;

/// The enrolled keys by node name, for reading many reports: found in
/// constant time, where [`Keys`] is ordered for writing the file.
pub struct Index<'k>(HashMap<&'k str, &'k Enrolled>);

impl<'k> Index<'k> {
    /// `keys`, indexed.
    pub fn new(keys: &'k Keys) -> Index<'k> {
        Index(keys.iter().map(|(n, e)| (n.as_str(), e)).collect())
    }

    /// What is enrolled for the node whose directory is `dir` (its name),
    /// as [`crate::views::signed::verify`] takes it.
    pub fn enrolled(&self, dir: Option<&str>) -> crate::views::signed::Enrolled<'k> {
        use crate::views::signed::Enrolled as E;
        match dir.and_then(|d| self.0.get(d)) {
            None => E::NotEnrolled,
            Some(Enrolled { report: None, .. }) => E::NoReportKey,
            Some(Enrolled {
                report: Some(k), ..
            }) => E::Key(k),
        }
    }
}

/// Reads `device-keys.csv`: `node,age1…` lines, with the node's report key
/// (the standard base64 of its 32 bytes) after a second comma when it has
/// one; blank lines and `#` comments are passed over. An error names the
/// line (a key given for two nodes among them).
pub fn parse(text: &str) -> Result<Keys, String> {
    use std::collections::btree_map::Entry;
    let mut keys = Keys::new();
    // Which node each key was given to, borrowed from `text`: a fleet's
    // file is read for every question asked of its million reports.
    let mut owners: HashMap<[u8; 32], &str> = HashMap::new();
    let mut report_owners: HashMap<[u8; 32], &str> = HashMap::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let at = |m: String| format!("{FILE} line {}: {m}", n + 1);
        let (name, rest) = line
            .split_once(',')
            .ok_or_else(|| at("give node,age1… (the node id, a comma, its key)".into()))?;
        let (key, report) = match rest.split_once(',') {
            Some((k, r)) => (k, Some(r)),
            None => (rest, None),
        };
        let name = name.trim();
        let node = NodeId::try_from(name).map_err(|e| at(e.0))?;
        let key = Recipient::parse(key.trim()).map_err(at)?;
        let report = report
            .map(|r| PublicKey::parse(r).map_err(|e| at(format!("its report key: {e}"))))
            .transpose()?;
        if let Some(other) = owners.insert(*key.as_bytes(), name) {
            return Err(at(format!(
                "node {node} is given the key of node {other}: one key is one device's"
            )));
        }
        if let Some(r) = &report
            && let Some(other) = report_owners.insert(*r.as_bytes(), name)
        {
            return Err(at(format!(
                "node {node} is given the report key of node {other}: one key is one device's"
            )));
        }
        match keys.entry(node) {
            Entry::Vacant(v) => {
                v.insert(Enrolled { age: key, report });
            }
            Entry::Occupied(o) => {
                return Err(at(format!("node {} is given twice", o.key())));
            }
        }
    }
    Ok(keys)
}

/// Writes the keys as [`parse`] reads them, sorted by node (0.6.0's file,
/// byte for byte, while no node has a report key).
pub fn render(keys: &Keys) -> String {
    let mut out = if keys.values().any(|e| e.report.is_some()) {
        String::from("# node,device key,report key (stead-plane enroll)\n")
    } else {
        String::from("# node,device key (stead plane enroll)\n")
    };
    for (node, e) in keys {
        out.push_str(&format!("{node},{}", e.age.encode()));
        if let Some(r) = &e.report {
            out.push_str(&format!(",{}", r.to_base64()));
        }
        out.push('\n');
    }
    out
}

/// What a report said of its node's keys, against what is enrolled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Seen {
    /// A node not enrolled before: taken.
    New(NodeId),
    /// A node whose keys differ from the enrolled ones: taken only when
    /// replacing.
    Changed { node: NodeId, replaced: bool },
    /// A report whose key is not a key (named, never taken).
    Unreadable { node: String, why: String },
    /// A key enrolled (or taken in this run) for another node: never taken
    /// for a second one.
    Shared { node: NodeId, with: NodeId },
    /// A node enrolled without a report key (from an unsigned report)
    /// whose signed report names the same age key: its report key taken.
    ReportKey(NodeId),
    /// An unsigned report of a node enrolled with a report key: nothing
    /// taken, not even when replacing (an older agent put back, or a
    /// report not its own).
    Unsigned(NodeId),
}

/// Takes the keys reports claim ([`crate::views::signed::claim`], in the
/// order read) into `keys`; keys that changed only with `replace`, a key
/// another node holds never. A node reported twice with two keys counts
/// its last. Says what moved; unchanged keys say nothing.
pub fn take(keys: &mut Keys, reported: &[Claim], replace: bool) -> Vec<Seen> {
    let mut owners: std::collections::HashMap<Recipient, NodeId> = keys
        .iter()
        .map(|(n, e)| (e.age.clone(), n.clone()))
        .collect();
    let mut report_owners: std::collections::HashMap<String, NodeId> = keys
        .iter()
        .filter_map(|(n, e)| Some((e.report.as_ref()?.to_base64(), n.clone())))
        .collect();
    let mut seen = Vec::new();
    for claim in reported {
        let Some(key) = &claim.device_key else {
            continue;
        };
        let parsed = NodeId::try_from(claim.node.as_str())
            .map_err(|e| e.0)
            .and_then(|n| Recipient::parse(key).map(|k| (n, k)));
        let (node_id, key) = match parsed {
            Ok(p) => p,
            Err(why) => {
                seen.push(Seen::Unreadable {
                    node: claim.node.clone(),
                    why,
                });
                continue;
            }
        };
        let report = claim.report_key.clone();
        let report_text = report.as_ref().map(PublicKey::to_base64);
        let shared = [
            owners.get(&key),
            report_text.as_ref().and_then(|r| report_owners.get(r)),
        ]
        .into_iter()
        .flatten()
        .find(|other| **other != node_id)
        .cloned();
        if let Some(with) = shared {
            seen.push(Seen::Shared {
                node: node_id,
                with,
            });
            continue;
        }
        let new = Enrolled {
            age: key.clone(),
            report,
        };
        let said = match keys.get(&node_id) {
            None => Seen::New(node_id.clone()),
            Some(e) if *e == new => continue,
            Some(e) if e.report.is_some() && new.report.is_none() => {
                Seen::Unsigned(node_id.clone())
            }
            Some(e) if e.age == key && e.report.is_none() => Seen::ReportKey(node_id.clone()),
            Some(_) => Seen::Changed {
                node: node_id.clone(),
                replaced: replace,
            },
        };
        let taken = match said {
            Seen::Unsigned(_) => false,
            Seen::Changed { replaced, .. } => replaced,
            _ => true,
        };
        seen.push(said);
        if !taken {
            continue;
        }
        if let Some(old) = keys.insert(node_id.clone(), new) {
            owners.remove(&old.age);
            if let Some(r) = old.report {
                report_owners.remove(&r.to_base64());
            }
        }
        owners.insert(key, node_id.clone());
        if let Some(r) = report_text {
            report_owners.insert(r, node_id);
        }
    }
    seen
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::age::Identity;
    use crate::plane::envelope::SecretKey;

    fn key(n: u8) -> String {
        Identity::from_bytes([n; 32]).recipient().encode()
    }

    fn report_key(n: u8) -> PublicKey {
        SecretKey::from_seed([n; 32]).public()
    }

    fn node(s: &str) -> NodeId {
        NodeId::try_from(s).unwrap()
    }

    fn age(n: u8) -> Enrolled {
        Enrolled {
            age: Recipient::parse(&key(n)).unwrap(),
            report: None,
        }
    }

    fn both(n: u8) -> Enrolled {
        Enrolled {
            report: Some(report_key(n)),
            ..age(n)
        }
    }

    /// A plain report's claim (an agent before 0.7.0).
    fn r(n: &str, k: String) -> Claim {
        Claim {
            node: n.into(),
            device_key: Some(k),
            report_key: None,
        }
    }

    /// A signed report's claim: its report key verified.
    fn s(n: &str, k: u8, rk: u8) -> Claim {
        Claim {
            report_key: Some(report_key(rk)),
            ..r(n, key(k))
        }
    }

    #[test]
    fn the_first_key_is_taken_and_a_changed_one_only_when_replacing() {
        let enrolled = || Keys::from([(node("a"), age(1))]);
        let zero = "age1qqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqq5cu47z".to_string();
        // (reported, replace, what is said, a's key after)
        #[rustfmt::skip]
        let cases = [
            (vec![r("a", key(1))], false, vec![], key(1)),
            (vec![r("b", key(2))], false, vec![Seen::New(node("b"))], key(1)),
            (vec![r("a", key(3))], false, vec![Seen::Changed { node: node("a"), replaced: false }], key(1)),
            (vec![r("a", key(3))], true, vec![Seen::Changed { node: node("a"), replaced: true }], key(3)),
            (vec![r("a", "age1nope".into())], true, vec![Seen::Unreadable { node: "a".into(), why: "not Bech32".into() }], key(1)),
            (vec![r("BAD!", key(2))], false, vec![Seen::Unreadable { node: "BAD!".into(), why: "invalid node id \"BAD!\": must match [A-Za-z0-9][A-Za-z0-9._-]{0,62}".into() }], key(1)),
            // One key for two nodes: never, enrolled or taken in this run.
            (vec![r("b", key(1))], true, vec![Seen::Shared { node: node("b"), with: node("a") }], key(1)),
            (vec![r("b", key(2)), r("c", key(2))], false, vec![Seen::New(node("b")), Seen::Shared { node: node("c"), with: node("b") }], key(1)),
            (vec![r("b", key(2)), r("a", key(2))], true, vec![Seen::New(node("b")), Seen::Shared { node: node("a"), with: node("b") }], key(1)),
            // A key replaced is free for another node after.
            (vec![r("a", key(3)), r("b", key(1))], true, vec![Seen::Changed { node: node("a"), replaced: true }, Seen::New(node("b"))], key(3)),
            // A key of low order is no key (the all-zero one).
            (vec![r("b", zero.clone())], false, vec![Seen::Unreadable { node: "b".into(), why: "a key of low order: what is sealed to it opens for anyone".into() }], key(1)),
            // A report without a key (an agent before 0.6.0) says nothing.
            (vec![Claim { device_key: None, ..r("b", key(2)) }], false, vec![], key(1)),
        ];
        for (reported, replace, said, after) in cases {
            let mut keys = enrolled();
            assert_eq!(take(&mut keys, &reported, replace), said, "{reported:?}");
            assert_eq!(keys[&node("a")].age.encode(), after, "{reported:?}");
        }
    }

    #[test]
    fn a_report_key_is_taken_from_a_signed_report_and_kept_from_everything_else() {
        // (enrolled for a, reported, replace, what is said, a's keys after)
        #[rustfmt::skip]
        let cases = [
            (None, vec![s("a", 1, 1)], false, vec![Seen::New(node("a"))], Some(both(1))),
            (Some(both(1)), vec![s("a", 1, 1)], false, vec![], Some(both(1))),
            // Enrolled from an older agent's report: the same age key adds its report key.
            (Some(age(1)), vec![s("a", 1, 1)], false, vec![Seen::ReportKey(node("a"))], Some(both(1))),
            (Some(age(1)), vec![s("a", 2, 2)], false, vec![Seen::Changed { node: node("a"), replaced: false }], Some(age(1))),
            (Some(age(1)), vec![s("a", 2, 2)], true, vec![Seen::Changed { node: node("a"), replaced: true }], Some(both(2))),
            // Another report key (another device, or a forged report): kept out unless replacing.
            (Some(both(1)), vec![s("a", 1, 3)], false, vec![Seen::Changed { node: node("a"), replaced: false }], Some(both(1))),
            (Some(both(1)), vec![s("a", 2, 2)], true, vec![Seen::Changed { node: node("a"), replaced: true }], Some(both(2))),
            // An unsigned report of a node enrolled signed: nothing, even replacing.
            (Some(both(1)), vec![r("a", key(1))], false, vec![Seen::Unsigned(node("a"))], Some(both(1))),
            (Some(both(1)), vec![r("a", key(2))], true, vec![Seen::Unsigned(node("a"))], Some(both(1))),
            // One report key is one device's, enrolled or taken in this run.
            (Some(both(1)), vec![s("b", 2, 1)], true, vec![Seen::Shared { node: node("b"), with: node("a") }], Some(both(1))),
            (None, vec![s("b", 2, 2), s("a", 1, 2)], false, vec![Seen::New(node("b")), Seen::Shared { node: node("a"), with: node("b") }], None),
            // A report key replaced is free for another node after.
            (Some(both(1)), vec![s("a", 3, 3), s("b", 2, 1)], true, vec![Seen::Changed { node: node("a"), replaced: true }, Seen::New(node("b"))], Some(both(3))),
        ];
        for (before, reported, replace, said, after) in cases {
            let mut keys: Keys = before.into_iter().map(|e| (node("a"), e)).collect();
            assert_eq!(take(&mut keys, &reported, replace), said, "{reported:?}");
            assert_eq!(keys.get(&node("a")), after.as_ref(), "{reported:?}");
        }
    }

    #[test]
    fn what_the_path_s_node_has_enrolled_is_what_a_report_is_checked_with() {
        use crate::views::signed::Enrolled as E;
        let keys = Keys::from([(node("a"), age(1)), (node("b"), both(2))]);
        let index = Index::new(&keys);
        assert!(matches!(index.enrolled(Some("a")), E::NoReportKey));
        assert!(matches!(index.enrolled(Some("b")), E::Key(k) if *k == report_key(2)));
        assert!(matches!(index.enrolled(Some("c")), E::NotEnrolled));
        assert!(matches!(index.enrolled(Some("BAD!")), E::NotEnrolled));
        assert!(matches!(index.enrolled(None), E::NotEnrolled));
    }

    #[test]
    fn the_file_reads_back_and_a_bad_line_is_named() {
        let old = Keys::from([(node("edge-2"), age(2)), (node("edge-1"), age(1))]);
        // Without report keys, 0.6.0's file, byte for byte.
        assert_eq!(
            render(&old),
            format!(
                "# node,device key (stead plane enroll)\nedge-1,{}\nedge-2,{}\n",
                key(1),
                key(2)
            )
        );
        assert_eq!(parse(&render(&old)).unwrap(), old);
        let new = Keys::from([(node("edge-2"), both(2)), (node("edge-1"), age(1))]);
        let text = render(&new);
        assert!(
            text.starts_with("# node,device key,report key (stead-plane enroll)\n"),
            "{text}"
        );
        assert!(
            text.contains(&format!(
                "edge-2,{},{}\n",
                key(2),
                report_key(2).to_base64()
            )),
            "{text}"
        );
        assert_eq!(parse(&text).unwrap(), new);
        let rk = report_key(1).to_base64();
        for (text, says) in [
            ("edge-1", "line 1: give node,age1…"),
            ("# c\n\nedge-1,age1x", "line 3: "),
            (
                &format!("a,{}\na,{}", key(1), key(2)),
                "line 2: node a is given twice",
            ),
            (&format!("a b,{}", key(1)), "line 1: invalid node id"),
            (
                &format!("a,{}\nb,{}", key(1), key(1)),
                "line 2: node b is given the key of node a",
            ),
            (
                &format!("a,{},AAAA", key(1)),
                "line 1: its report key: not an Ed25519 public key",
            ),
            (&format!("a,{},", key(1)), "line 1: its report key"),
            (
                &format!("a,{},{rk}\nb,{},{rk}", key(1), key(2)),
                "line 2: node b is given the report key of node a",
            ),
        ] {
            let e = parse(text).unwrap_err();
            assert!(e.contains(says), "{text}: {e}");
        }
    }
}
