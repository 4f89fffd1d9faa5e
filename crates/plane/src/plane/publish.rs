//! `stead-plane publish`, decided: a fleet description (each group's
//! payload, each node's) against what the host serves now gives the
//! documents to sign, and only those ([`plan`]). Pure: the command reads
//! the files, signs and writes.
//!
//! A document is signed again only when what it says changed, or when it
//! would expire within the refresh margin; each one signed gets a revision
//! above the one published (the current unix time, as `stead-plane sign`
//! gives, or one more). A group's rollout may leave out `start`, `salt` and
//! `previous`: a new set of modules starts now, under a new salt, from the
//! modules published before; the same modules keep what was published. A
//! halt the host serves (the watcher's) stays until the fleet says
//! `halt = false`. Every node is checked against its groups as a device
//! composes them, before anything is signed. What the host serves is
//! read only as a device would take it ([`read_served`]).

use std::collections::BTreeMap;

use serde_json::{Map, Value as J};

use crate::model::fleet::GroupName;
use crate::model::names::NodeId;
use crate::model::time::format_rfc3339;
use crate::plane::document::{Budget, Desired, stamp};
use crate::plane::envelope::{Envelope, PAYLOAD_TYPE, PublicKey, verify_as};
use crate::plane::group::{GROUP_PAYLOAD_TYPE, GroupDesired, HeldGroup, compose, stamp_group};

/// The fields a signer sets: not what a document says.
const STAMPS: [&str; 3] = ["revision", "issued_at", "expires"];

/// A document the host serves now: its revision and payload.
#[derive(Clone, Debug)]
pub struct Published {
    pub revision: u64,
    pub expires: u64,
    pub payload: Map<String, J>,
}

/// What one document to sign is, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Write {
    /// Where the host serves it, relative to its base.
    pub path: String,
    /// Its revision.
    pub revision: u64,
    /// Why it is signed: `new`, `changed`, `expiring`.
    pub why: &'static str,
    /// The payload, stamped and checked, ready to sign.
    pub payload: Vec<u8>,
    /// Whether it is a group's (signed with the group payload type).
    pub group: bool,
}

/// Why nothing is published: the file and what is wrong with it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{place}: {message}")]
pub struct PublishError {
    pub place: String,
    pub message: String,
}

fn err(place: impl Into<String>, message: impl Into<String>) -> PublishError {
    PublishError {
        place: place.into(),
        message: message.into(),
    }
}

/// When documents are signed and for how long.
#[derive(Clone, Copy, Debug)]
pub struct Times {
    pub now: u64,
    /// How long a document signed now is good for.
    pub expires_in: u64,
    /// A document expiring within this is signed again.
    pub refresh_before: u64,
}

/// The host's path of a node's document.
pub fn node_path(node: &NodeId) -> String {
    format!("nodes/{node}/desired.json")
}

/// The host's path of a group's document.
pub fn group_path(group: &GroupName) -> String {
    format!("groups/{group}/desired.json")
}

/// The revision a group's document served at `path` states, read without
/// its signature checked (for a view that signs nothing): `None` when it
/// is not a group document of that path.
pub fn revision_served(path: &str, bytes: &[u8]) -> Option<u64> {
    let env = Envelope::parse(bytes).ok()?;
    let d = GroupDesired::parse(&env.payload).ok()?;
    (group_path(&d.group) == path).then_some(d.revision)
}

/// What the host serves at `path` (a group's document under `groups/`, a
/// node's under `nodes/`), taken only once it verifies as a device would
/// take it: a signed envelope of the path's payload type, signed by one of
/// `keys` (the document keys the devices trust), whose payload checks whole
/// and names the group or node of its path. What is signed on top of it
/// (a revision above it, its rollout and halt kept, its modules as the
/// previous ones) is then what a trusted key signed; anything else (a file
/// planted on the host, a document of another path) refuses the run.
pub fn read_served(path: &str, bytes: &[u8], keys: &[PublicKey]) -> Result<Published, String> {
    let env = Envelope::parse(bytes).map_err(|e| format!("not a signed document: {e}"))?;
    let group = path.starts_with("groups/");
    let (payload_type, what) = if group {
        (GROUP_PAYLOAD_TYPE, "stead group document")
    } else {
        (PAYLOAD_TYPE, "stead desired-state document")
    };
    verify_as(&env, keys, payload_type, what)
        .map_err(|e| format!("not taken, nothing is signed on top of it: {e}"))?;
    let refused = |e: crate::plane::document::DocumentError| format!("its payload is refused: {e}");
    let (at, revision, expires) = if group {
        let d = GroupDesired::parse(&env.payload).map_err(refused)?;
        (group_path(&d.group), d.revision, d.expires)
    } else {
        let d = Desired::parse(&env.payload).map_err(refused)?;
        (node_path(&d.node), d.revision, d.expires)
    };
    if at != path {
        return Err(format!("a signed document of {at}, served at {path}"));
    }
    let payload = serde_json::from_slice(&env.payload)
        .map_err(|e| format!("its payload is not a JSON object: {e}"))?;
    Ok(Published {
        revision,
        expires,
        payload,
    })
}

/// The documents to sign: every group's, then every node's, that changed
/// or is expiring. `published` gives what the host serves at a path (an
/// error: it is there and cannot be read, which refuses the publish: its
/// revision is not known).
/// Every document is checked whole, and every node against its groups,
/// before anything is returned: one error refuses the publish.
pub fn plan(
    groups: &BTreeMap<GroupName, Map<String, J>>,
    nodes: &BTreeMap<NodeId, Map<String, J>>,
    mut published: impl FnMut(&str) -> Result<Option<Published>, String>,
    t: Times,
) -> Result<Vec<Write>, PublishError> {
    let mut writes = Vec::new();
    // Each group as devices will read it, for the nodes' check.
    let mut checked: BTreeMap<GroupName, (GroupDesired, usize)> = BTreeMap::new();
    for (name, file) in groups {
        let path = group_path(name);
        let place = format!("groups/{name}.json");
        let old = published(&path).map_err(|m| err(&path, m))?;
        let revision = next_revision(old.as_ref(), t.now);
        let payload =
            fill_rollout(file, old.as_ref(), revision, t.now).map_err(|m| err(&place, m))?;
        let (why, revision) = match decide(&payload, old.as_ref(), t) {
            Some(why) => (Some(why), revision),
            None => (None, old.as_ref().map_or(revision, |o| o.revision)),
        };
        let bytes = serde_json::to_vec(&payload).expect("a JSON object serialises");
        let stamped = stamp_group(&bytes, name, revision, t.now, t.now + t.expires_in)
            .map_err(|e| err(&place, e.to_string()))?;
        let desired = GroupDesired::parse(&stamped).map_err(|e| err(&place, e.to_string()))?;
        checked.insert(name.clone(), (desired, stamped.len()));
        if let Some(why) = why {
            writes.push(Write {
                path,
                revision,
                why,
                payload: stamped,
                group: true,
            });
        }
    }
    for (id, file) in nodes {
        let path = node_path(id);
        let place = format!("node {id}");
        let old = published(&path).map_err(|m| err(&path, m))?;
        let revision = next_revision(old.as_ref(), t.now);
        let why = decide(file, old.as_ref(), t);
        let revision = match why {
            Some(_) => revision,
            None => old.as_ref().map_or(revision, |o| o.revision),
        };
        let bytes = serde_json::to_vec(file).expect("a JSON object serialises");
        let stamped = stamp(&bytes, id, revision, t.now, t.now + t.expires_in)
            .map_err(|e| err(&place, e.to_string()))?;
        check_node(&stamped, id, &checked).map_err(|m| err(&place, m))?;
        if let Some(why) = why {
            writes.push(Write {
                path,
                revision,
                why,
                payload: stamped,
                group: false,
            });
        }
    }
    Ok(writes)
}

/// A revision above the one published: now, or one more.
fn next_revision(old: Option<&Published>, now: u64) -> u64 {
    old.map_or(now, |o| now.max(o.revision.saturating_add(1)))
}

/// Why a document is signed, if it is.
fn decide(payload: &Map<String, J>, old: Option<&Published>, t: Times) -> Option<&'static str> {
    let Some(old) = old else {
        return Some("new");
    };
    if !same(payload, &old.payload) {
        return Some("changed");
    }
    (old.expires <= t.now.saturating_add(t.refresh_before)).then_some("expiring")
}

/// Whether two payloads say the same, their stamps and their name (`node`,
/// `group`, which the path says) aside.
fn same(a: &Map<String, J>, b: &Map<String, J>) -> bool {
    let strip = |m: &Map<String, J>| -> Map<String, J> {
        m.iter()
            .filter(|(k, _)| !STAMPS.contains(&k.as_str()) && *k != "node" && *k != "group")
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    };
    strip(a) == strip(b)
}

/// A group's payload with its rollout's `start`, `salt` and `previous`
/// filled where the fleet file leaves them out, and the host's halt kept.
fn fill_rollout(
    file: &Map<String, J>,
    old: Option<&Published>,
    revision: u64,
    now: u64,
) -> Result<Map<String, J>, String> {
    let mut out = file.clone();
    let Some(J::Object(rollout)) = file.get("rollout") else {
        return Ok(out);
    };
    let mut rollout = rollout.clone();
    let old_rollout = old
        .and_then(|o| o.payload.get("rollout"))
        .and_then(J::as_object);
    let same_modules = old.is_some_and(|o| o.payload.get("modules") == file.get("modules"));
    let kept = |key: &str| {
        old_rollout
            .filter(|_| same_modules)
            .and_then(|r| r.get(key))
            .cloned()
    };
    if !rollout.contains_key("start") {
        let start = kept("start").unwrap_or_else(|| format_rfc3339(now).into());
        rollout.insert("start".into(), start);
    }
    if !rollout.contains_key("salt") {
        let salt = kept("salt").unwrap_or_else(|| format!("r{revision}").into());
        rollout.insert("salt".into(), salt);
    }
    if !rollout.contains_key("halt") && kept("halt") == Some(J::Bool(true)) {
        rollout.insert("halt".into(), true.into());
        if let Some(reason) = kept("reason") {
            rollout.entry("reason").or_insert(reason);
        }
    }
    out.insert("rollout".into(), J::Object(rollout));
    if !file.contains_key("previous") {
        let previous = match old {
            Some(o) if same_modules => o.payload.get("previous").cloned().unwrap_or_else(
                || serde_json::json!({"revision": o.revision, "modules": o.payload.get("modules")}),
            ),
            Some(o) => {
                serde_json::json!({"revision": o.revision, "modules": o.payload.get("modules")})
            }
            None => {
                return Err(
                    "a rollout moves devices from the modules published before, and none are: \
                     publish the group once without a rollout, or give previous"
                        .into(),
                );
            }
        };
        out.insert("previous".into(), previous);
    }
    Ok(out)
}

/// The most bytes a payload of `len` bytes takes once signed: its base64
/// in a DSSE envelope with up to two signatures (what a device counts
/// against its limits).
pub fn signed_len(len: usize) -> usize {
    len.div_ceil(3) * 4 + 512
}

/// Checks a node's document against its groups as a device composes them:
/// within the limits a node's document and its groups' share
/// ([`Budget`]: their signed bytes, their modules and previous modules),
/// with every group's new modules, and with every group's previous ones.
fn check_node(
    stamped: &[u8],
    id: &NodeId,
    groups: &BTreeMap<GroupName, (GroupDesired, usize)>,
) -> Result<(), String> {
    let desired = Desired::parse(stamped).map_err(|e| e.to_string())?;
    let mut budget = Budget::default();
    budget.take(
        "the node's document",
        signed_len(stamped.len()),
        desired.modules.len(),
    )?;
    for g in &desired.groups {
        let Some((d, len)) = groups.get(g) else {
            return Err(format!("lists group {g}, which the fleet does not have"));
        };
        let modules = d.modules.len() + d.previous.as_ref().map_or(0, |p| p.modules.len());
        budget.take(&format!("group {g}'s document"), signed_len(*len), modules)?;
    }
    let groups: BTreeMap<GroupName, GroupDesired> = groups
        .iter()
        .map(|(g, (d, _))| (g.clone(), d.clone()))
        .collect();
    // A group with a `when` is for some devices only: the node is checked
    // with the groups for every device, and with each of those one at a
    // time (two groups for one class of devices that give the same module
    // are refused on the devices of that class, which say why).
    let every: Vec<GroupName> = desired
        .groups
        .iter()
        .filter(|g| groups.get(*g).is_some_and(|d| d.when.is_none()))
        .cloned()
        .collect();
    let mut sets = vec![every.clone()];
    for g in desired.groups.iter().filter(|g| !every.contains(g)) {
        let mut set = every.clone();
        set.push(g.clone());
        sets.push(set);
    }
    for set in sets {
        let mut node = desired.clone();
        node.groups.retain(|g| set.contains(g));
        for took in [true, false] {
            let held: BTreeMap<GroupName, HeldGroup> = node
                .groups
                .iter()
                .filter_map(|g| groups.get(g).map(|d| (g.clone(), d)))
                .map(|(g, d)| {
                    let mut d = d.clone();
                    // Taken, or not started: the two sets of modules a
                    // device may run.
                    if let Some(r) = d.rollout.as_mut() {
                        r.halt = !took;
                    }
                    let held = HeldGroup {
                        desired: d,
                        took,
                        was_in: took,
                    };
                    (g, held)
                })
                .collect();
            compose(node.clone(), &held, id, 0, None).map_err(|e| e.0)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::collections::HashMap;

    fn obj(v: J) -> Map<String, J> {
        match v {
            J::Object(m) => m,
            _ => panic!("not an object"),
        }
    }

    fn web(image: &str) -> J {
        json!([{"name": "web", "image": image}])
    }

    /// A host: what was written, served back.
    #[derive(Default)]
    struct Host(HashMap<String, Published>);

    impl Host {
        fn take(&mut self, writes: &[Write]) {
            for w in writes {
                let payload = obj(serde_json::from_slice(&w.payload).unwrap());
                let expires =
                    crate::model::time::parse_rfc3339(payload["expires"].as_str().unwrap())
                        .unwrap();
                self.0.insert(
                    w.path.clone(),
                    Published {
                        revision: w.revision,
                        expires,
                        payload,
                    },
                );
            }
        }

        fn get(&self, path: &str) -> Result<Option<Published>, String> {
            Ok(self.0.get(path).cloned())
        }
    }

    fn times(now: u64) -> Times {
        Times {
            now,
            expires_in: 30 * 86_400,
            refresh_before: 7 * 86_400,
        }
    }

    fn said(writes: &[Write]) -> Vec<String> {
        writes
            .iter()
            .map(|w| format!("{} {} {}", w.why, w.path, w.revision))
            .collect()
    }

    const T0: u64 = 1_800_000_000;

    #[test]
    fn only_what_changed_is_signed_each_above_the_revision_published() {
        let g = |image| -> BTreeMap<GroupName, Map<String, J>> {
            [(
                GroupName::try_from("eu").unwrap(),
                obj(json!({"modules": web(image)})),
            )]
            .into()
        };
        let nodes: BTreeMap<NodeId, Map<String, J>> = [
            (
                NodeId::try_from("n1").unwrap(),
                obj(json!({"groups": ["eu"], "modules": []})),
            ),
            (
                NodeId::try_from("n2").unwrap(),
                obj(json!({"groups": ["eu"], "modules": [], "remove": ["web"]})),
            ),
        ]
        .into();
        let mut host = Host::default();
        let w = plan(&g("web:1"), &nodes, |p| host.get(p), times(T0)).unwrap();
        assert_eq!(
            said(&w),
            [
                "new groups/eu/desired.json 1800000000",
                "new nodes/n1/desired.json 1800000000",
                "new nodes/n2/desired.json 1800000000"
            ]
        );
        host.take(&w);
        // Nothing changed: nothing signed, a second or a day later.
        assert!(
            plan(&g("web:1"), &nodes, |p| host.get(p), times(T0 + 1))
                .unwrap()
                .is_empty()
        );
        assert!(
            plan(&g("web:1"), &nodes, |p| host.get(p), times(T0 + 86_400))
                .unwrap()
                .is_empty()
        );
        // The group changed within the same second: one more revision, for it alone.
        let w = plan(&g("web:2"), &nodes, |p| host.get(p), times(T0)).unwrap();
        assert_eq!(said(&w), ["changed groups/eu/desired.json 1800000001"]);
        host.take(&w);
        // Within a week of expiring: signed again, a revision on.
        let late = T0 + 24 * 86_400;
        let w = plan(&g("web:2"), &nodes, |p| host.get(p), times(late)).unwrap();
        assert_eq!(
            said(&w),
            [
                format!("expiring groups/eu/desired.json {late}"),
                format!("expiring nodes/n1/desired.json {late}"),
                format!("expiring nodes/n2/desired.json {late}")
            ]
        );
    }

    #[test]
    fn a_rollout_is_filled_from_what_was_published_and_a_hosted_halt_stays() {
        let group = |modules: J, rollout: J| -> BTreeMap<GroupName, Map<String, J>> {
            [(
                GroupName::try_from("eu").unwrap(),
                obj(json!({"modules": modules, "rollout": rollout})),
            )]
            .into()
        };
        let nodes = BTreeMap::new();
        let mut host = Host::default();
        // A rollout with nothing published before: refused.
        let e = plan(
            &group(web("web:1"), json!({"duration": "1h"})),
            &nodes,
            |p| host.get(p),
            times(T0),
        )
        .unwrap_err();
        assert!(
            e.message
                .contains("publish the group once without a rollout"),
            "{e}"
        );
        let first: BTreeMap<GroupName, Map<String, J>> = [(
            GroupName::try_from("eu").unwrap(),
            obj(json!({"modules": web("web:1")})),
        )]
        .into();
        host.take(&plan(&first, &nodes, |p| host.get(p), times(T0)).unwrap());
        // New modules with a rollout: it starts now, under a new salt, from
        // the modules published.
        let w = plan(
            &group(web("web:2"), json!({"duration": "1h"})),
            &nodes,
            |p| host.get(p),
            times(T0 + 10),
        )
        .unwrap();
        host.take(&w);
        let p = &host.0["groups/eu/desired.json"].payload;
        assert_eq!(
            p["rollout"]["start"],
            crate::model::time::format_rfc3339(T0 + 10)
        );
        assert_eq!(p["rollout"]["salt"], format!("r{}", T0 + 10));
        assert_eq!(
            p["previous"],
            json!({"revision": T0, "modules": web("web:1")})
        );
        // Published again unchanged later: nothing to sign.
        assert!(
            plan(
                &group(web("web:2"), json!({"duration": "1h"})),
                &nodes,
                |p| host.get(p),
                times(T0 + 500)
            )
            .unwrap()
            .is_empty()
        );
        // The watcher's halt on the host stays while the fleet says nothing of it.
        let hosted = host.0.get_mut("groups/eu/desired.json").unwrap();
        hosted.payload["rollout"]["halt"] = true.into();
        hosted.payload["rollout"]["reason"] = "3 of 10 failing".into();
        assert!(
            plan(
                &group(web("web:2"), json!({"duration": "1h"})),
                &nodes,
                |p| host.get(p),
                times(T0 + 600)
            )
            .unwrap()
            .is_empty()
        );
        // halt = false lifts it.
        let w = plan(
            &group(web("web:2"), json!({"duration": "1h", "halt": false})),
            &nodes,
            |p| host.get(p),
            times(T0 + 700),
        )
        .unwrap();
        assert_eq!(
            said(&w),
            [format!("changed groups/eu/desired.json {}", T0 + 700)]
        );
    }

    #[test]
    fn only_a_served_document_a_trusted_key_signed_for_its_path_is_read() {
        use crate::plane::envelope::SecretKey;
        let (key, other, second) = (
            SecretKey::generate().unwrap(),
            SecretKey::generate().unwrap(),
            SecretKey::generate().unwrap(),
        );
        let trusted = [second.public(), key.public()];
        let group = |name: &str, v: J| -> Vec<u8> {
            let mut p = json!({"group": name, "revision": 7,
                "issued_at": "2026-12-01T10:00:00Z", "expires": "2027-01-01T10:00:00Z",
                "modules": web("web:1")});
            for (k, x) in v.as_object().unwrap() {
                p[k] = x.clone();
            }
            serde_json::to_vec(&p).unwrap()
        };
        let node = serde_json::to_vec(&json!({"node": "n1", "revision": 5,
            "issued_at": "2026-12-01T10:00:00Z", "expires": "2027-01-01T10:00:00Z",
            "modules": []}))
        .unwrap();
        let eu = group("eu", json!({}));
        let signed = |k: &SecretKey, t: &str, p: &[u8]| k.sign(t, p).to_json();
        let mut unsigned = key.sign(GROUP_PAYLOAD_TYPE, &eu);
        unsigned.signatures.clear();
        let mut changed = key.sign(GROUP_PAYLOAD_TYPE, &eu);
        changed.payload = group("eu", json!({"modules": web("evil:1")}));
        let g = "groups/eu/desired.json";
        let n = "nodes/n1/desired.json";
        // (what, path, bytes served, its revision or why it is refused)
        type Case<'a> = (&'a str, &'a str, Vec<u8>, Result<u64, &'a str>);
        #[rustfmt::skip]
        let cases: Vec<Case> = vec![
            ("a group signed by a trusted key", g, signed(&key, GROUP_PAYLOAD_TYPE, &eu), Ok(7)),
            ("by the other trusted key", g, signed(&second, GROUP_PAYLOAD_TYPE, &eu), Ok(7)),
            ("a node's", n, signed(&key, PAYLOAD_TYPE, &node), Ok(5)),
            ("a bare payload, planted", g, eu.clone(), Err("not a signed document")),
            ("no signature", g, unsigned.to_json(), Err("carries no signature")),
            ("a key not trusted", g, signed(&other, GROUP_PAYLOAD_TYPE, &eu), Err("signed only by keys")),
            ("changed after signing", g, changed.to_json(), Err("does not verify")),
            ("a node's payload type at a group's path", g, signed(&key, PAYLOAD_TYPE, &eu), Err("payload type")),
            ("a group's at a node's path", n, signed(&key, GROUP_PAYLOAD_TYPE, &node), Err("payload type")),
            ("another group's, signed", g, signed(&key, GROUP_PAYLOAD_TYPE, &group("us", json!({}))), Err("a signed document of groups/us/desired.json, served at groups/eu/desired.json")),
            ("another node's, signed", "nodes/n2/desired.json", signed(&key, PAYLOAD_TYPE, &node), Err("a signed document of nodes/n1/desired.json")),
            ("signed, but a device refuses it", g, signed(&key, GROUP_PAYLOAD_TYPE, &group("eu", json!({"rollout": {"duration": "1h"}}))), Err("its payload is refused: rollout")),
            ("a sealed value in a group, signed", g, signed(&key, GROUP_PAYLOAD_TYPE, &group("eu", json!({"modules": [{"name": "web", "image": "w:1", "env": {"PW": {"sealed": "YWdl"}}}]}))), Err("group eu, module web, field env.PW")),
        ];
        for (what, path, bytes, want) in cases {
            match (read_served(path, &bytes, &trusted), want) {
                (Ok(p), Ok(r)) => {
                    assert_eq!(p.revision, r, "{what}");
                    assert_eq!(p.payload["revision"], r, "{what}");
                }
                (Err(e), Err(w)) => assert!(e.contains(w), "{what}: {e}"),
                (got, want) => panic!("{what}: want {want:?}, got {got:?}"),
            }
        }
    }

    #[test]
    fn a_node_that_does_not_compose_with_its_groups_refuses_the_publish() {
        let groups: BTreeMap<GroupName, Map<String, J>> = [(
            GroupName::try_from("eu").unwrap(),
            obj(json!({"modules": web("web:1")})),
        )]
        .into();
        for (node, want) in [
            (
                json!({"groups": ["us"], "modules": []}),
                "node n1: lists group us, which the fleet does not have",
            ),
            (
                json!({"groups": ["eu"], "modules": [{"name": "web", "image": "x:1"}]}),
                "node n1: module web is in group eu and in the node document",
            ),
            (
                json!({"groups": ["eu"], "modules": [], "remove": ["db"]}),
                "removes module db, which none of its groups names",
            ),
            (
                json!({"groups": ["eu"], "modules": [], "node": "n2"}),
                "the payload is for node",
            ),
            (json!({"groups": ["eu"]}), "modules"),
        ] {
            let nodes: BTreeMap<NodeId, Map<String, J>> =
                [(NodeId::try_from("n1").unwrap(), obj(node))].into();
            let e = plan(&groups, &nodes, |_| Ok(None), times(T0)).unwrap_err();
            assert!(e.to_string().contains(want), "{e}");
        }
        // An unreadable document on the host: its revision is not known.
        let e = plan(
            &groups,
            &BTreeMap::new(),
            |_| Err("not a signed document".into()),
            times(T0),
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "groups/eu/desired.json: not a signed document"
        );
        // Within one document's limits each, past what a node's document
        // and its groups' may list together: refused as a device would
        // refuse it (plane::document::Budget), naming the group.
        let many = |n: usize, at: usize| {
            (0..n)
                .map(|i| json!({"name": format!("m{}", at + i), "image": "x:1"}))
                .collect::<Vec<_>>()
        };
        let big: BTreeMap<GroupName, Map<String, J>> = [
            (
                GroupName::try_from("a").unwrap(),
                obj(json!({"modules": many(800, 0)})),
            ),
            (
                GroupName::try_from("b").unwrap(),
                obj(json!({"modules": many(800, 800)})),
            ),
        ]
        .into();
        let nodes = |groups: J| -> BTreeMap<NodeId, Map<String, J>> {
            [(
                NodeId::try_from("n1").unwrap(),
                obj(json!({"groups": groups, "modules": []})),
            )]
            .into()
        };
        assert!(plan(&big, &nodes(json!(["a"])), |_| Ok(None), times(T0)).is_ok());
        let e = plan(&big, &nodes(json!(["a", "b"])), |_| Ok(None), times(T0)).unwrap_err();
        assert_eq!(e.place, "node n1");
        assert!(
            e.message
                .contains("group b's document (800 modules) passes"),
            "{e}"
        );
        // A group carrying a sealed value: refused, naming it.
        let sealed: BTreeMap<GroupName, Map<String, J>> = [(
            GroupName::try_from("eu").unwrap(),
            obj(json!({"modules": [{"name": "web", "image": "w:1",
                "env": {"PW": {"sealed": "YWdl"}}}]})),
        )]
        .into();
        let e = plan(&sealed, &BTreeMap::new(), |_| Ok(None), times(T0)).unwrap_err();
        assert_eq!(e.place, "groups/eu.json");
        assert!(
            e.message.contains("group eu, module web, field env.PW"),
            "{e}"
        );
    }
}
