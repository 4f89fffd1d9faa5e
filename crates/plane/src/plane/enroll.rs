//! The publisher's list of its devices' keys (`device-keys.csv` in a
//! fleet's description: `node,age1…` lines), and how the keys the
//! devices' reports name are taken into it. Pure.
//!
//! A report is not signed by its device, so the first key a node's report
//! names is taken on trust (as SSH takes a host key), and a key that
//! differs from the one enrolled is never taken silently: it is refused
//! unless the operator replaces it, knowing that every value sealed to the
//! old key must be sealed again (a device whose data directory was lost or
//! replaced has a new key; so would a forged report). One key is never
//! enrolled for two nodes (a cloned data directory, or a report naming a
//! node not its own, would have one device read what is sealed for
//! another), and a key of low order is no key ([`Recipient::parse`]).

use std::collections::BTreeMap;

use crate::model::age::Recipient;
use crate::model::names::NodeId;

/// The file in a fleet's description.
pub const FILE: &str = "device-keys.csv";

/// The enrolled keys, by node.
pub type Keys = BTreeMap<NodeId, Recipient>;

/// Reads `device-keys.csv`: `node,age1…` lines; blank lines and `#`
/// comments are passed over. An error names the line (a key given for two
/// nodes among them).
pub fn parse(text: &str) -> Result<Keys, String> {
    let mut keys = Keys::new();
    let mut owners = std::collections::HashMap::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let at = |m: String| format!("{FILE} line {}: {m}", n + 1);
        let (node, key) = line
            .split_once(',')
            .ok_or_else(|| at("give node,age1… (the node id, a comma, its key)".into()))?;
        let node = NodeId::try_from(node.trim()).map_err(|e| at(e.0))?;
        let key = Recipient::parse(key.trim()).map_err(at)?;
        if let Some(other) = owners.insert(key.clone(), node.clone()) {
            return Err(at(format!(
                "node {node} is given the key of node {other}: one key is one device's"
            )));
        }
        if keys.insert(node.clone(), key).is_some() {
            return Err(at(format!("node {node} is given twice")));
        }
    }
    Ok(keys)
}

/// Writes the keys as [`parse`] reads them, sorted by node.
pub fn render(keys: &Keys) -> String {
    let mut out = String::from("# node,device key (stead plane enroll)\n");
    for (node, key) in keys {
        out.push_str(&format!("{node},{}\n", key.encode()));
    }
    out
}

/// What a report said of its node's key, against what is enrolled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Seen {
    /// A node not enrolled before: taken.
    New(NodeId),
    /// A node whose key differs from the enrolled one: taken only when
    /// replacing.
    Changed { node: NodeId, replaced: bool },
    /// A report whose key is not a key (named, never taken).
    Unreadable { node: String, why: String },
    /// A key enrolled (or taken in this run) for another node: never taken
    /// for a second one.
    Shared { node: NodeId, with: NodeId },
}

/// Takes the keys reports name (node id and key text, in the order read)
/// into `keys`; a key that changed only with `replace`, a key another node
/// holds never. A node reported twice with two keys counts its last. Says
/// what moved; an unchanged key says nothing.
pub fn take(keys: &mut Keys, reported: &[(String, String)], replace: bool) -> Vec<Seen> {
    let mut owners: std::collections::HashMap<Recipient, NodeId> =
        keys.iter().map(|(n, k)| (k.clone(), n.clone())).collect();
    let mut seen = Vec::new();
    for (node, key) in reported {
        let parsed = NodeId::try_from(node.as_str())
            .map_err(|e| e.0)
            .and_then(|n| Recipient::parse(key).map(|k| (n, k)));
        let (node_id, key) = match parsed {
            Ok(p) => p,
            Err(why) => {
                seen.push(Seen::Unreadable {
                    node: node.clone(),
                    why,
                });
                continue;
            }
        };
        match (keys.get(&node_id), owners.get(&key)) {
            (Some(k), _) if *k == key => {}
            (_, Some(other)) => seen.push(Seen::Shared {
                node: node_id,
                with: other.clone(),
            }),
            (Some(old), None) => {
                if replace {
                    owners.remove(old);
                    owners.insert(key.clone(), node_id.clone());
                    keys.insert(node_id.clone(), key);
                }
                seen.push(Seen::Changed {
                    node: node_id,
                    replaced: replace,
                });
            }
            (None, None) => {
                owners.insert(key.clone(), node_id.clone());
                keys.insert(node_id.clone(), key);
                seen.push(Seen::New(node_id));
            }
        }
    }
    seen
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::age::Identity;

    fn key(n: u8) -> String {
        Identity::from_bytes([n; 32]).recipient().encode()
    }

    fn node(s: &str) -> NodeId {
        NodeId::try_from(s).unwrap()
    }

    #[test]
    fn the_first_key_is_taken_and_a_changed_one_only_when_replacing() {
        let enrolled = || Keys::from([(node("a"), Recipient::parse(&key(1)).unwrap())]);
        let r = |n: &str, k: String| (n.to_string(), k);
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
        ];
        for (reported, replace, said, after) in cases {
            let mut keys = enrolled();
            assert_eq!(take(&mut keys, &reported, replace), said, "{reported:?}");
            assert_eq!(keys[&node("a")].encode(), after, "{reported:?}");
        }
    }

    #[test]
    fn the_file_reads_back_and_a_bad_line_is_named() {
        let keys = Keys::from([
            (node("edge-2"), Recipient::parse(&key(2)).unwrap()),
            (node("edge-1"), Recipient::parse(&key(1)).unwrap()),
        ]);
        assert_eq!(parse(&render(&keys)).unwrap(), keys);
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
        ] {
            let e = parse(text).unwrap_err();
            assert!(e.contains(says), "{text}: {e}");
        }
    }
}
