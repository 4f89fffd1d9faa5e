//! A group document: the modules common to many devices, at one revision,
//! with the staged rollout of that revision and the previous revision's
//! modules, which a device runs until its turn (`model::fleet::rollout`).
//! Checked all or nothing, as a node's document is
//! ([`crate::plane::document`]); its fields are named by place.
//!
//! ```json
//! { "group": "edge-eu", "revision": 7,
//!   "issued_at": "2026-12-01T10:00:00Z", "expires": "2027-01-01T10:00:00Z",
//!   "modules": [ { "name": "web", "image": "web:2" } ],
//!   "rollout": { "start": "2026-12-01T12:00:00Z", "duration": "6h",
//!                "salt": "r7", "canaries": ["edge-0001"],
//!                "halt": false, "revert": false },
//!   "previous": { "revision": 6, "modules": [ { "name": "web", "image": "web:1" } ] },
//!   "when": { "arch": "aarch64", "engine": "podman", "labels": { "board": "rev-b" } } }
//! ```
//!
//! A group with a `when` is for the devices whose facts it names
//! ([`crate::model::facts`]); the others are not in it.

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;

use crate::model::facts::{Facts, Member, When};
use crate::model::fleet::{self, ComposeError, NodeOwn, Rollout, Source, Take};
use crate::model::intention::Intention;
use crate::model::names::{Digest, ModuleName, NodeId};
use crate::model::time::{parse_duration, parse_rfc3339};
use crate::plane::document::{
    Desired, DocumentError, check_modules, check_revision, check_times, read,
};

/// A group document's DSSE payload type: a node's document
/// ([`crate::plane::envelope::PAYLOAD_TYPE`]) is never read as a group's,
/// nor the other way round.
pub const GROUP_PAYLOAD_TYPE: &str = "application/vnd.stead.group.v1+json";

/// The longest a rollout may take.
pub const MAX_ROLLOUT: u64 = 90 * 24 * 3600;

/// The most canaries a rollout may name.
pub const MAX_CANARIES: usize = 1000;

pub use crate::model::fleet::GroupName;

/// A checked group document.
#[derive(Clone, Debug, PartialEq)]
pub struct GroupDesired {
    pub group: GroupName,
    pub revision: u64,
    pub issued_at: u64,
    pub expires: u64,
    /// This revision's modules.
    pub modules: BTreeMap<ModuleName, Intention>,
    /// How devices come to this revision; without one, all at once.
    pub rollout: Option<Rollout>,
    /// The revision devices run until their turn: required with a
    /// rollout, below this revision.
    pub previous: Option<Previous>,
    /// Which images may run on the group's devices (`images`), whatever
    /// revision its rollout gives them.
    pub images: crate::model::image_policy::Rules,
    /// The site's peers its devices ask before the WAN (`peers`), as base
    /// URLs ([`crate::model::site::peer_url`]).
    pub peers: Vec<String>,
    /// Which devices the group is for (`when`); without one, every
    /// device whose node document lists it.
    pub when: Option<When>,
    /// When its devices may disrupt what runs (`maintenance`).
    pub maintenance: Option<crate::model::maintenance::Windows>,
    /// How long its devices' recreates wait for an update lock (`locks`).
    pub locks: Option<crate::model::lock::Policy>,
    /// One-shot actions asked of each of its devices (`actions`).
    pub actions: Vec<crate::model::action::Action>,
    /// How many of its devices of one site may disrupt at once
    /// (`budget`).
    pub budget: Option<crate::model::budget::Budget>,
}

/// The revision a rollout moves devices from.
#[derive(Clone, Debug, PartialEq)]
pub struct Previous {
    pub revision: u64,
    pub modules: BTreeMap<ModuleName, Intention>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GroupDoc {
    group: String,
    revision: u64,
    issued_at: String,
    expires: String,
    modules: Vec<serde_json::Value>,
    #[serde(default)]
    rollout: Option<RolloutDoc>,
    #[serde(default)]
    previous: Option<PreviousDoc>,
    #[serde(default)]
    images: Option<serde_json::Value>,
    #[serde(default)]
    peers: Vec<String>,
    #[serde(default)]
    when: Option<serde_json::Value>,
    #[serde(default)]
    maintenance: Option<serde_json::Value>,
    #[serde(default)]
    locks: Option<serde_json::Value>,
    #[serde(default)]
    actions: Option<serde_json::Value>,
    #[serde(default)]
    budget: Option<serde_json::Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RolloutDoc {
    start: String,
    duration: String,
    salt: String,
    #[serde(default)]
    canaries: Vec<String>,
    #[serde(default)]
    halt: bool,
    #[serde(default)]
    revert: bool,
    /// Why it was halted, for people (the watcher says it here).
    #[serde(default)]
    reason: Option<String>,
    /// When devices fetch ahead of their turn: `HH:MM-HH:MM`, UTC.
    #[serde(default)]
    download: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PreviousDoc {
    revision: u64,
    modules: Vec<serde_json::Value>,
}

impl GroupDesired {
    /// Parses and checks a group document's payload (JSON). Any error
    /// refuses the whole document.
    pub fn parse(payload: &[u8]) -> Result<GroupDesired, DocumentError> {
        let doc: GroupDoc = read(payload)?;
        let group = GroupName::try_from(doc.group).map_err(|e| DocumentError::new("group", e.0))?;
        check_revision("revision", doc.revision)?;
        let (issued_at, expires) = check_times(&doc.issued_at, &doc.expires)?;
        let modules = check_modules("modules", doc.modules)?;
        no_sealed(&group, "modules", &modules)?;
        let previous = match doc.previous {
            None => None,
            Some(p) => {
                check_revision("previous.revision", p.revision)?;
                if p.revision >= doc.revision {
                    return Err(DocumentError::new(
                        "previous.revision",
                        format!(
                            "{} is not below this document's revision {}",
                            p.revision, doc.revision
                        ),
                    ));
                }
                let modules = check_modules("previous.modules", p.modules)?;
                no_sealed(&group, "previous.modules", &modules)?;
                Some(Previous {
                    revision: p.revision,
                    modules,
                })
            }
        };
        let rollout = match doc.rollout {
            None => None,
            Some(r) => {
                if previous.is_none() {
                    return Err(DocumentError::new(
                        "previous",
                        "a rollout needs the previous revision's modules, which devices run until their turn",
                    ));
                }
                Some(check_rollout(r)?)
            }
        };
        let peers = check_peers(doc.peers)?;
        let when = doc
            .when
            .map(When::parse)
            .transpose()
            .map_err(|(field, e)| DocumentError::new(field, e))?;
        Ok(GroupDesired {
            group,
            revision: doc.revision,
            issued_at,
            expires,
            modules,
            rollout,
            previous,
            images: crate::plane::document::check_images(doc.images)?,
            peers,
            when,
            maintenance: crate::plane::document::check_maintenance(doc.maintenance.as_ref())?,
            locks: crate::plane::document::check_locks(doc.locks.as_ref())?,
            actions: crate::plane::document::check_actions(doc.actions.as_ref())?,
            budget: doc
                .budget
                .as_ref()
                .map(crate::model::budget::Budget::parse_doc)
                .transpose()
                .map_err(|(field, e)| DocumentError::new(field, e))?,
        })
    }
}

/// The peers a group document names: at most
/// [`crate::model::site::MAX_PEERS`], each a host or host:port.
fn check_peers(peers: Vec<String>) -> Result<Vec<String>, DocumentError> {
    use crate::model::site::{MAX_PEERS, peer_url};
    if peers.len() > MAX_PEERS {
        return Err(DocumentError::new(
            "peers",
            format!(
                "{} peers, more than the {MAX_PEERS} a device asks",
                peers.len()
            ),
        ));
    }
    peers
        .iter()
        .enumerate()
        .map(|(i, p)| peer_url(p).map_err(|e| DocumentError::new(format!("peers[{i}]"), e)))
        .collect()
}

/// Refuses a sealed value in a group's modules: a group document is the
/// same for every device, and a value is sealed to one (it goes in a node
/// document's own modules or overrides).
fn no_sealed(
    group: &GroupName,
    field: &str,
    modules: &BTreeMap<ModuleName, Intention>,
) -> Result<(), DocumentError> {
    for (name, m) in modules {
        if let Some((sealed, _)) = m.sealed_fields().first() {
            return Err(DocumentError::new(
                format!("{field} ({name})"),
                format!(
                    "group {group}, module {name}, field {sealed}: a sealed value is sealed to one device, and a group document is the same for all; seal it in each node's document (its overrides)"
                ),
            ));
        }
    }
    Ok(())
}

/// Makes an operator's payload (a JSON object) into a group document:
/// sets `group`, `revision` and `issued_at`, and `expires` only when the
/// payload has none; keeps everything else. Checked as
/// [`GroupDesired::parse`] checks it; compact JSON, ready to sign. A
/// payload that names another group is refused.
pub fn stamp_group(
    payload: &[u8],
    group: &GroupName,
    revision: u64,
    issued_at: u64,
    expires_default: u64,
) -> Result<Vec<u8>, DocumentError> {
    crate::plane::document::stamp_as(
        payload,
        ("group", group.as_str()),
        (revision, issued_at, expires_default),
        |b| GroupDesired::parse(b).map(drop),
    )
}

/// A group document as a node holds it: what it says, whether this
/// node took its modules before (a rollout never takes them back by
/// itself, and a halting revision carries the same modules), and whether
/// it ran any revision of the group's modules (it was in the group: a
/// fact not known yet, or a free disk below the `when`'s, keeps it in).
#[derive(Clone, Debug)]
pub struct HeldGroup {
    pub desired: GroupDesired,
    pub took: bool,
    pub was_in: bool,
}

/// How one of a node's groups stands on it after a composition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupStanding {
    pub group: GroupName,
    /// The group document's revision.
    pub revision: u64,
    /// The revision whose modules the node runs: the document's, or the
    /// previous one while its rollout has not reached this node.
    pub running: u64,
    /// The rollout's decision for this node; `None` without a rollout.
    pub take: Option<Take>,
    /// The digest of the document's modules ([`modules_digest`]), when
    /// the node runs them.
    pub taken: Option<Digest>,
    /// While its turn is coming and the rollout sets a download window:
    /// when the window opens or closes next (what is fetched ahead
    /// changes then).
    pub ahead_edge: Option<u64>,
    /// Why the node is not in the group, when its `when` is not for it
    /// (the group gives it no modules).
    pub out: Option<String>,
}

/// What a node remembers of a group revision it took: the digest of its
/// modules, each as its canonical intention document, in name order. The
/// same modules under a later revision (a halt) are the same digest.
pub fn modules_digest(modules: &BTreeMap<ModuleName, Intention>) -> Digest {
    let docs: Vec<serde_json::Value> = modules.values().map(Intention::to_json).collect();
    Digest::of(serde_json::Value::Array(docs).to_string().as_bytes())
}

impl GroupStanding {
    /// Whether the node runs the document's own revision.
    pub fn took(&self) -> bool {
        self.running == self.revision
    }

    /// What the node remembers having taken of the group once composed,
    /// given what it remembered `before`: the modules it runs now when they
    /// are the document's; nothing once reverted (a later rollout of the
    /// same modules waits for this node's turn again); else what it
    /// remembered (a halt keeps it).
    pub fn remembered(&self, before: Option<&Digest>) -> Option<Digest> {
        if self.out.is_some() {
            return None;
        }
        if let Some(Take::Previous {
            why: fleet::Why::Reverted,
            ..
        }) = self.take
        {
            return None;
        }
        self.taken.clone().or_else(|| before.cloned())
    }
}

/// What a node runs: its modules, and how each of its groups stands.
#[derive(Clone, Debug)]
pub struct Composed {
    pub modules: BTreeMap<ModuleName, Intention>,
    pub groups: Vec<GroupStanding>,
    /// Which images may run: the node document's rules and each group's.
    pub images: crate::model::image_policy::Policy,
    /// The site's peers the groups name, each once, in the groups'
    /// order.
    pub peers: Vec<String>,
    /// Images to fetch ahead: those the node will run once a group's
    /// rollout reaches it (its turn is coming: not started, or its place
    /// not reached), as the node's overrides and removals leave them, and
    /// none it runs now. A halt or a revert names none.
    pub ahead: BTreeSet<String>,
    /// What disrupting what runs waits for: the maintenance windows and
    /// update locks' policies of the node document and of each group it
    /// is in, each with who set it (`node`, `group g`).
    pub maintenance: crate::model::maintenance::Disruption,
}

/// A node's modules from its document and its groups' (`groups`, by name:
/// every group the document lists must be there), at `now` (the agent's
/// now, never earlier than its build or a document it accepted), for a
/// device with `facts` (a group whose `when` is not for it gives it
/// nothing; `None`, the operator's check, takes every group in). Each
/// group gives the modules of the revision its rollout decides for `id`;
/// then [`fleet::compose`] lays the node's removals, overrides and own
/// modules over them, and every overridden module is checked again whole,
/// as its intention document. A node document without groups is its own
/// modules, as before groups were.
pub fn compose(
    node: Desired,
    groups: &BTreeMap<GroupName, HeldGroup>,
    id: &NodeId,
    now: u64,
    facts: Option<&Facts>,
) -> Result<Composed, ComposeError> {
    compose_owned(node, groups.clone(), id, now, facts)
}

/// [`compose`], the group documents moved into what is composed rather
/// than copied (a device composes with what it parsed, once).
pub fn compose_owned(
    node: Desired,
    mut groups: BTreeMap<GroupName, HeldGroup>,
    id: &NodeId,
    now: u64,
    facts: Option<&Facts>,
) -> Result<Composed, ComposeError> {
    let mut standings = Vec::with_capacity(node.groups.len());
    let mut taken = Vec::with_capacity(node.groups.len());
    let mut images = crate::model::image_policy::Policy::of_node(node.images.clone());
    let mut ahead = BTreeSet::new();
    let mut peers: Vec<String> = Vec::new();
    let mut maintenance = crate::model::maintenance::Disruption {
        windows: node
            .maintenance
            .iter()
            .map(|w| ("node".to_string(), w.clone()))
            .collect(),
        locks: node
            .locks
            .iter()
            .map(|p| ("node".to_string(), p.clone()))
            .collect(),
        actions: node
            .actions
            .iter()
            .map(|a| ("node".to_string(), a.clone()))
            .collect(),
        budgets: Vec::new(),
    };
    for name in &node.groups {
        let Some(held) = groups.remove(name) else {
            return Err(ComposeError(format!(
                "the node document lists group {name}, whose document this node does not hold"
            )));
        };
        let d = held.desired;
        let member = match (&d.when, facts) {
            (Some(w), Some(f)) => w.judge(f, held.was_in),
            _ => Member::In,
        };
        if let Member::Out(why) = member {
            standings.push(GroupStanding {
                group: name.clone(),
                revision: d.revision,
                running: 0,
                take: None,
                taken: None,
                ahead_edge: None,
                out: Some(why),
            });
            continue;
        }
        images.add_group(name.as_str(), d.images.clone());
        if let Some(w) = &d.maintenance {
            maintenance
                .windows
                .push((format!("group {name}"), w.clone()));
        }
        if let Some(p) = &d.locks {
            maintenance.locks.push((format!("group {name}"), p.clone()));
        }
        if let Some(b) = &d.budget {
            maintenance.budgets.push((name.to_string(), b.clone()));
        }
        maintenance.actions.extend(
            d.actions
                .iter()
                .map(|a| (format!("group {name}"), a.clone())),
        );
        for p in &d.peers {
            if !peers.contains(p) && peers.len() < crate::model::site::MAX_PEERS {
                peers.push(p.clone());
            }
        }
        let take = d
            .rollout
            .as_ref()
            .map(|r| fleet::rollout(r, id, now, held.took));
        let mut ahead_edge = None;
        if let Some(Take::Previous {
            why: fleet::Why::NotStarted | fleet::Why::Turn,
            until: Some(_),
        }) = take
        {
            let open = match d.rollout.as_ref().and_then(|r| r.download) {
                Some(w) => {
                    let (inside, next) = w.at(now);
                    ahead_edge = Some(next);
                    inside
                }
                None => true,
            };
            for (name, m) in d.modules.iter().filter(|_| open) {
                if node.remove.contains(name) {
                    continue;
                }
                let pinned = node.overrides.get(name).and_then(|o| o.image.as_ref());
                ahead.insert(pinned.unwrap_or(&m.image).clone());
            }
        }
        let (running, modules, digest) = match (&take, d.previous) {
            (Some(Take::Previous { .. }), Some(p)) => (p.revision, p.modules, None),
            _ => {
                let digest = modules_digest(&d.modules);
                (d.revision, d.modules, Some(digest))
            }
        };
        standings.push(GroupStanding {
            group: name.clone(),
            revision: d.revision,
            running,
            take,
            taken: digest,
            ahead_edge,
            out: None,
        });
        taken.push(fleet::Group {
            name: name.as_str(),
            modules,
        });
    }
    let own = NodeOwn {
        modules: node.modules,
        remove: node.remove,
        overrides: node.overrides,
    };
    let composed = fleet::compose(taken, own)?;
    let mut modules = BTreeMap::new();
    for (name, (intention, source)) in composed {
        let intention = match source {
            Source::Overridden(group) => {
                let origin = format!("the node document's override of module {name}");
                Intention::from_value(&intention.to_json(), &origin).map_err(|e| {
                    ComposeError(format!(
                        "the node document's override of module {name} (of group {group}) does not make a module: {}: {}",
                        e.field, e.message
                    ))
                })?
            }
            Source::Group(_) | Source::Node => intention,
        };
        modules.insert(name, intention);
    }
    for m in modules.values() {
        ahead.remove(&m.image);
    }
    Ok(Composed {
        modules,
        groups: standings,
        images,
        peers,
        ahead,
        maintenance,
    })
}

fn check_rollout(r: RolloutDoc) -> Result<Rollout, DocumentError> {
    let start = parse_rfc3339(&r.start).map_err(|e| DocumentError::new("rollout.start", e))?;
    let duration = parse_duration(&r.duration)
        .map_err(|e| DocumentError::new("rollout.duration", e))?
        .as_secs();
    if duration > MAX_ROLLOUT {
        return Err(DocumentError::new(
            "rollout.duration",
            "must be at most 90 days",
        ));
    }
    if r.salt.is_empty() || r.salt.len() > 128 {
        return Err(DocumentError::new("rollout.salt", "must be 1 to 128 bytes"));
    }
    if r.canaries.len() > MAX_CANARIES {
        return Err(DocumentError::new(
            "rollout.canaries",
            format!(
                "{} canaries, more than the {MAX_CANARIES} a rollout may name",
                r.canaries.len()
            ),
        ));
    }
    let mut canaries = std::collections::BTreeSet::new();
    for (i, c) in r.canaries.into_iter().enumerate() {
        let id = NodeId::try_from(c)
            .map_err(|e| DocumentError::new(format!("rollout.canaries[{i}]"), e.0))?;
        canaries.insert(id);
    }
    if r.reason.as_ref().is_some_and(|t| t.len() > 512) {
        return Err(DocumentError::new(
            "rollout.reason",
            "must be at most 512 bytes",
        ));
    }
    if r.revert && !r.halt {
        return Err(DocumentError::new(
            "rollout.revert",
            "a revert halts the rollout too: say halt = true with it",
        ));
    }
    let download = r
        .download
        .as_deref()
        .map(fleet::Window::parse)
        .transpose()
        .map_err(|e| DocumentError::new("rollout.download", e))?;
    Ok(Rollout {
        start,
        duration,
        salt: r.salt,
        canaries,
        halt: r.halt,
        revert: r.revert,
        download,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value as J, json};

    fn doc() -> J {
        json!({
            "group": "edge-eu",
            "revision": 7,
            "issued_at": "2026-12-01T10:00:00Z",
            "expires": "2027-01-01T10:00:00Z",
            "modules": [{"name": "web", "image": "web:2"}],
            "rollout": {"start": "2026-12-01T12:00:00Z", "duration": "6h", "salt": "r7",
                        "canaries": ["edge-0001"]},
            "previous": {"revision": 6, "modules": [{"name": "web", "image": "web:1"}]}
        })
    }

    fn with(f: impl FnOnce(&mut J)) -> J {
        let mut v = doc();
        f(&mut v);
        v
    }

    fn parse(v: &J) -> Result<GroupDesired, DocumentError> {
        GroupDesired::parse(v.to_string().as_bytes())
    }

    #[test]
    fn a_group_document_parses_whole() {
        let g = parse(&doc()).unwrap();
        assert_eq!(g.group.as_str(), "edge-eu");
        assert_eq!(g.revision, 7);
        let r = g.rollout.unwrap();
        assert_eq!(r.duration, 6 * 3600);
        assert_eq!(r.start, parse_rfc3339("2026-12-01T12:00:00Z").unwrap());
        assert!(r.canaries.contains(&NodeId::try_from("edge-0001").unwrap()));
        let p = g.previous.unwrap();
        assert_eq!(p.revision, 6);
        assert_eq!(
            p.modules[&ModuleName::try_from("web").unwrap()].image,
            "web:1"
        );
        // Without a rollout, a previous revision is not needed.
        let plain = parse(&with(|v| {
            let o = v.as_object_mut().unwrap();
            o.remove("rollout");
            o.remove("previous");
        }))
        .unwrap();
        assert_eq!(plain.rollout, None);
        assert!(plain.peers.is_empty());
        // The site's peers, as base URLs.
        let g = parse(&with(|v| v["peers"] = json!(["10.0.0.2", "till-3:7000"]))).unwrap();
        assert_eq!(g.peers, ["http://10.0.0.2:7412", "http://till-3:7000"]);
    }

    #[test]
    fn the_groups_peers_are_composed_each_once_in_the_groups_order() {
        let group = |name: &str, peers: J| HeldGroup {
            desired: parse(&with(|v| {
                v["group"] = json!(name);
                v["peers"] = peers;
                let o = v.as_object_mut().unwrap();
                o.remove("rollout");
                o.remove("previous");
                v["modules"] = json!([{"name": format!("m-{name}"), "image": "x:1"}]);
            }))
            .unwrap(),
            took: false,
            was_in: false,
        };
        let groups = BTreeMap::from([
            (
                GroupName::try_from("a").unwrap(),
                group("a", json!(["10.0.0.2", "10.0.0.3"])),
            ),
            (
                GroupName::try_from("b").unwrap(),
                group("b", json!(["10.0.0.3:7412", "10.0.0.4"])),
            ),
        ]);
        let node = node_doc(json!({"groups": ["b", "a"]}));
        let id = NodeId::try_from("edge-0002").unwrap();
        let c = compose(node, &groups, &id, 1_800_000_000, None).unwrap();
        assert_eq!(
            c.peers,
            [
                "http://10.0.0.3:7412",
                "http://10.0.0.4:7412",
                "http://10.0.0.2:7412"
            ]
        );
    }

    #[test]
    fn every_refusal_names_its_field() {
        // (change, the field named, words of the message)
        #[rustfmt::skip]
        type Change = Box<dyn Fn(&mut J)>;
        let cases: Vec<(Change, &str, &str)> = vec![
            (
                Box::new(|v| v["group"] = json!("../x")),
                "group",
                "invalid node id",
            ),
            (
                Box::new(|v| v["revision"] = json!(0)),
                "revision",
                "at least 1",
            ),
            (
                Box::new(|v| v["expires"] = json!("2026-11-01T00:00:00Z")),
                "expires",
                "not after",
            ),
            (
                Box::new(|v| v["modules"][0]["image"] = json!("")),
                "modules[0] (web): image",
                "",
            ),
            (
                Box::new(|v| {
                    v["modules"] =
                        json!([{"name": "web", "image": "a"}, {"name": "web", "image": "b"}])
                }),
                "modules[1] (web)",
                "a second module",
            ),
            (
                Box::new(|v| {
                    v.as_object_mut().unwrap().remove("previous");
                }),
                "previous",
                "needs the previous revision",
            ),
            (
                Box::new(|v| v["previous"]["revision"] = json!(7)),
                "previous.revision",
                "not below",
            ),
            (
                Box::new(|v| v["previous"]["modules"][0]["name"] = json!("Web")),
                "previous.modules[0]",
                "",
            ),
            (
                Box::new(|v| v["rollout"]["duration"] = json!("91d")),
                "rollout.duration",
                "",
            ),
            (
                Box::new(|v| v["rollout"]["duration"] = json!("soon")),
                "rollout.duration",
                "",
            ),
            (
                Box::new(|v| v["rollout"]["start"] = json!("today")),
                "rollout.start",
                "",
            ),
            (
                Box::new(|v| v["rollout"]["salt"] = json!("")),
                "rollout.salt",
                "1 to 128",
            ),
            (
                Box::new(|v| v["rollout"]["canaries"] = json!(["ok", "no/slash"])),
                "rollout.canaries[1]",
                "invalid node id",
            ),
            (
                Box::new(|v| v["rollout"]["revert"] = json!(true)),
                "rollout.revert",
                "halt = true",
            ),
            (
                Box::new(|v| v["rollout"]["download"] = json!("1am-5am")),
                "rollout.download",
                "HH:MM-HH:MM, in UTC",
            ),
            (
                Box::new(|v| v["rollout"]["speed"] = json!(2)),
                "rollout",
                "unknown field",
            ),
            (
                Box::new(|v| v["node"] = json!("edge-1")),
                "node",
                "unknown field",
            ),
            (
                Box::new(|v| v["peers"] = json!(["10.0.0.2", "http://10.0.0.3"])),
                "peers[1]",
                "host:port",
            ),
            (
                Box::new(|v| v["peers"] = json!(vec!["10.0.0.2"; 33])),
                "peers",
                "more than the 32",
            ),
            (
                Box::new(|v| v["modules"][0]["env"] = json!({"PW": {"sealed": "YWdl"}})),
                "modules (web)",
                "group edge-eu, module web, field env.PW: a sealed value",
            ),
            (
                Box::new(|v| {
                    v["previous"]["modules"][0]["files"] =
                        json!([{"path": "/k", "content": {"sealed": "YWdl"}}])
                }),
                "previous.modules (web)",
                "group edge-eu, module web, field files./k",
            ),
        ];
        for (change, field, words) in cases {
            let v = with(|v| change(v));
            let e = parse(&v).unwrap_err();
            assert!(
                e.field.starts_with(field) && e.message.contains(words),
                "{v}: {e}"
            );
        }
        let e = GroupDesired::parse(br#"{"group": "a", "group": "b"}"#).unwrap_err();
        assert!(e.message.contains("group"), "{e}");
        assert!(GroupDesired::parse(b"[]").is_err());
    }

    fn node_doc(extra: J) -> Desired {
        let mut v = json!({
            "node": "edge-0002", "revision": 3,
            "issued_at": "2026-12-01T10:00:00Z", "expires": "2027-01-01T10:00:00Z",
            "modules": [{"name": "own", "image": "own:1"}],
            "groups": ["edge-eu"]
        });
        for (k, x) in extra.as_object().unwrap() {
            v[k] = x.clone();
        }
        Desired::parse(v.to_string().as_bytes()).unwrap()
    }

    #[test]
    fn a_node_runs_the_revision_its_rollout_decides_with_its_own_over_it() {
        let id = NodeId::try_from("edge-0002").unwrap();
        let start = parse_rfc3339("2026-12-01T12:00:00Z").unwrap();
        let held = |v: J, took| {
            let g = parse(&v).unwrap();
            [(
                g.group.clone(),
                HeldGroup {
                    desired: g,
                    took,
                    was_in: took,
                },
            )]
            .into()
        };
        let images = |c: &Composed| {
            c.modules
                .values()
                .map(|m| format!("{}={}", m.name, m.image))
                .collect::<Vec<_>>()
                .join(" ")
        };
        // (what, group document, took before, now, node's extra fields, modules or refusal, running, fetched ahead)
        #[rustfmt::skip]
        type Case = (&'static str, J, bool, u64, J, Result<&'static str, &'static str>, u64, &'static str);
        let cases: Vec<Case> = vec![
            (
                "before the start: the previous revision",
                doc(),
                false,
                start - 1,
                json!({}),
                Ok("own=own:1 web=web:1"),
                6,
                "web:2",
            ),
            (
                "after the whole duration: the new",
                doc(),
                false,
                start + 6 * 3600,
                json!({}),
                Ok("own=own:1 web=web:2"),
                7,
                "",
            ),
            (
                "taken before: kept, even before the start",
                doc(),
                true,
                start - 1,
                json!({}),
                Ok("own=own:1 web=web:2"),
                7,
                "",
            ),
            (
                "halted, not taken: the previous",
                with(|v| v["rollout"]["halt"] = true.into()),
                false,
                start + 6 * 3600,
                json!({}),
                Ok("own=own:1 web=web:1"),
                6,
                "",
            ),
            (
                "reverted, taken: the previous",
                with(|v| {
                    v["rollout"]["halt"] = true.into();
                    v["rollout"]["revert"] = true.into()
                }),
                true,
                start + 6 * 3600,
                json!({}),
                Ok("own=own:1 web=web:1"),
                6,
                "",
            ),
            (
                "no rollout: the new at once",
                with(|v| {
                    v.as_object_mut().unwrap().remove("rollout");
                }),
                false,
                0,
                json!({}),
                Ok("own=own:1 web=web:2"),
                7,
                "",
            ),
            (
                "an override pins the image",
                doc(),
                false,
                start + 6 * 3600,
                json!({"overrides": {"web": {"image": "web:pinned"}}}),
                Ok("own=own:1 web=web:pinned"),
                7,
                "",
            ),
            (
                "a removal",
                doc(),
                false,
                start + 6 * 3600,
                json!({"remove": ["web"]}),
                Ok("own=own:1"),
                7,
                "",
            ),
            (
                "settings where the module has no config",
                doc(),
                false,
                start + 6 * 3600,
                json!({"overrides": {"web": {"settings": {"level": "debug"}}}}),
                Err("override of module web (of group edge-eu) does not make a module: settings"),
                7,
                "",
            ),
            (
                "a group not held",
                doc(),
                false,
                start,
                json!({"groups": ["edge-us"]}),
                Err("lists group edge-us, whose document this node does not hold"),
                0,
                "",
            ),
            (
                "its own module in the group",
                doc(),
                false,
                start,
                json!({"modules": [{"name": "web", "image": "w:9"}]}),
                Err("module web is in group edge-eu and in the node document"),
                0,
                "",
            ),
            (
                "its place not reached yet: the new image fetched ahead",
                doc(),
                false,
                start + 60,
                json!({}),
                Ok("own=own:1 web=web:1"),
                6,
                "web:2",
            ),
            (
                "before the start, its override pins the image: it runs already",
                doc(),
                false,
                start - 1,
                json!({"overrides": {"web": {"image": "web:pinned"}}}),
                Ok("own=own:1 web=web:pinned"),
                6,
                "",
            ),
            (
                "before the start, removed by the node: nothing ahead",
                doc(),
                false,
                start - 1,
                json!({"remove": ["web"]}),
                Ok("own=own:1"),
                6,
                "",
            ),
            (
                "before the start, inside its download window: fetched ahead",
                with(|v| v["rollout"]["download"] = "11:00-13:00".into()),
                false,
                start - 1,
                json!({}),
                Ok("own=own:1 web=web:1"),
                6,
                "web:2",
            ),
            (
                "before the start, outside its download window: not yet",
                with(|v| v["rollout"]["download"] = "13:00-11:00".into()),
                false,
                start - 1,
                json!({}),
                Ok("own=own:1 web=web:1"),
                6,
                "",
            ),
            (
                "before the start, halted: nothing ahead",
                with(|v| v["rollout"]["halt"] = true.into()),
                false,
                start - 1,
                json!({}),
                Ok("own=own:1 web=web:1"),
                6,
                "",
            ),
        ];
        for (what, g, took, now, extra, want, running, ahead) in cases {
            let got = compose(node_doc(extra), &held(g, took), &id, now, None);
            match (want, got) {
                (Ok(w), Ok(c)) => {
                    assert_eq!(images(&c), w, "{what}");
                    assert_eq!(c.groups[0].running, running, "{what}");
                    assert_eq!(c.groups[0].took(), running == 7, "{what}");
                    let got: Vec<&str> = c.ahead.iter().map(String::as_str).collect();
                    assert_eq!(got.join(" "), ahead, "{what}");
                }
                (Err(w), Err(e)) => assert!(e.0.contains(w), "{what}: {e}"),
                (w, g) => panic!("{what}: want {w:?}, got {g:?}"),
            }
        }
    }

    #[test]
    fn a_revert_forgets_what_was_taken_so_a_new_rollout_waits_for_the_turn() {
        let id = NodeId::try_from("edge-0002").unwrap();
        let start = parse_rfc3339("2026-12-01T12:00:00Z").unwrap();
        let new = modules_digest(&parse(&doc()).unwrap().modules);
        let other = Digest::of(b"other modules");
        let reverted = with(|v| {
            v["rollout"]["halt"] = true.into();
            v["rollout"]["revert"] = true.into()
        });
        let halted = with(|v| v["rollout"]["halt"] = true.into());
        // The same modules again under a new salt, starting in a day: its
        // turn has not come at `start`.
        let reroll = with(|v| {
            v["revision"] = 9.into();
            v["rollout"]["salt"] = "r9".into();
            v["rollout"]["canaries"] = json!([]);
            v["rollout"]["start"] = "2026-12-02T12:00:00Z".into()
        });
        // (what, group document, remembered before, now, remembered after)
        type Case<'a> = (&'a str, J, Option<&'a Digest>, u64, Option<Digest>);
        #[rustfmt::skip]
        let cases: Vec<Case> = vec![
            ("taken at its turn", doc(), None, start + 6 * 3600, Some(new.clone())),
            ("not its turn yet", doc(), None, start, None),
            ("not its turn, other modules remembered", doc(), Some(&other), start, Some(other.clone())),
            ("halted after taking: kept", halted, Some(&new), start, Some(new.clone())),
            ("reverted after taking: forgotten", reverted.clone(), Some(&new), start + 6 * 3600, None),
            ("reverted, never taken", reverted, None, start, None),
            ("re-rolled after the revert: waits", reroll.clone(), None, start, None),
            ("re-rolled, taken had it not been forgotten", reroll, Some(&new), start, Some(new.clone())),
        ];
        for (what, g, before, now, want) in cases {
            let took = before == Some(&new);
            let held = [(
                GroupName::try_from("edge-eu").unwrap(),
                HeldGroup {
                    desired: parse(&g).unwrap(),
                    took,
                    was_in: before.is_some(),
                },
            )]
            .into();
            let c = compose(node_doc(json!({})), &held, &id, now, None).unwrap();
            assert_eq!(c.groups[0].remembered(before), want, "{what}");
        }
    }

    #[test]
    fn the_windows_and_locks_in_force_are_the_node_documents_and_those_of_the_groups_it_is_in() {
        use crate::model::facts::Facts;
        let group = |name: &str, when: Option<J>, windows: Option<&str>| {
            let d = parse(&with(|v| {
                v["group"] = json!(name);
                if let Some(w) = &when {
                    v["when"] = w.clone();
                }
                if let Some(w) = windows {
                    v["maintenance"] = json!({"windows": [w], "zone": "UTC"});
                    v["locks"] = json!({"max": "1h", "then": "take"});
                    v["actions"] = json!([{"id": format!("a-{name}"), "kind": "restart", "module": format!("m-{name}"), "expires": "2030-01-01T00:00:00Z"}]);
                    v["budget"] = json!({"per": "site", "max_updating": 2});
                }
                let o = v.as_object_mut().unwrap();
                o.remove("rollout");
                o.remove("previous");
                v["modules"] = json!([{"name": format!("m-{name}"), "image": "app:1"}]);
            }))
            .unwrap();
            (
                d.group.clone(),
                HeldGroup {
                    desired: d,
                    took: false,
                    was_in: false,
                },
            )
        };
        let groups: BTreeMap<GroupName, HeldGroup> = [
            group("nights", None, Some("daily 22:00-06:00")),
            group(
                "arm-only",
                Some(json!({"arch": "arm64"})),
                Some("Sun 01:00-02:00"),
            ),
            group("any-time", None, None),
        ]
        .into();
        let id = NodeId::try_from("edge-0002").unwrap();
        let x86 = Facts {
            arch: "x86_64".into(),
            os: "linux".into(),
            ..Facts::default()
        };
        let who = |node: J, facts: Option<&Facts>| -> Vec<String> {
            let node = node_doc(node);
            let said = compose(node, &groups, &id, 1_800_000_000, facts)
                .unwrap()
                .maintenance;
            // Each document that sets windows here sets its locks' too.
            let locks: Vec<&String> = said.locks.iter().map(|(who, _)| who).collect();
            let windows: Vec<&String> = said.windows.iter().map(|(who, _)| who).collect();
            assert_eq!(locks, windows);
            // And its actions, each with who asked it: only a group's the
            // device is in.
            let actions: Vec<&String> = said.actions.iter().map(|(who, _)| who).collect();
            assert_eq!(actions, windows);
            for (who, a) in &said.actions {
                let by = who.strip_prefix("group ").unwrap_or(who);
                assert_eq!(a.id, format!("a-{by}"));
            }
            // And its budget, by the group's name: a node document sets
            // none.
            let budgets: Vec<String> = said
                .budgets
                .iter()
                .map(|(g, b)| format!("group {g}: {}", b.max_updating))
                .collect();
            let groups: Vec<String> = windows
                .iter()
                .filter(|w| w.starts_with("group "))
                .map(|w| format!("{w}: 2"))
                .collect();
            assert_eq!(budgets, groups);
            said.windows
                .into_iter()
                .map(|(who, w)| format!("{who}: {}", w.spans[0]))
                .collect()
        };
        let all = json!({"groups": ["nights", "arm-only", "any-time"]});
        let mut own = all.clone();
        own["maintenance"] = json!({"windows": ["Sat 10:00-12:00"]});
        own["locks"] = json!({"max": "30m", "then": "wait"});
        own["actions"] =
            json!([{"id": "a-node", "kind": "reboot", "expires": "2030-01-01T00:00:00Z"}]);
        assert_eq!(
            who(all.clone(), Some(&x86)),
            ["group nights: daily 22:00-06:00"]
        );
        assert_eq!(
            who(all, None),
            [
                "group nights: daily 22:00-06:00",
                "group arm-only: Sun 01:00-02:00"
            ]
        );
        assert_eq!(
            who(own, Some(&x86)),
            ["node: Sat 10:00-12:00", "group nights: daily 22:00-06:00"]
        );
        let e = parse(&with(|v| {
            v["maintenance"] = json!({"windows": ["Mon 9-5"]})
        }))
        .unwrap_err();
        assert_eq!(e.field, "maintenance.windows[0]");
        let e = parse(&with(|v| v["locks"] = json!({"max": "1h", "then": "soon"}))).unwrap_err();
        assert_eq!(e.field, "locks.then");
        let e = parse(&with(|v| {
            v["budget"] = json!({"per": "site", "max_updating": 0})
        }))
        .unwrap_err();
        assert_eq!(e.field, "budget.max_updating");
        let d = parse(&with(|v| {
            v["budget"] = json!({"per": "site", "max_updating": 1})
        }))
        .unwrap();
        assert_eq!(d.budget.map(|b| b.per), Some("site".to_string()));
    }

    #[test]
    fn a_group_whose_when_is_not_for_the_device_gives_it_nothing_and_says_why() {
        use crate::model::facts::Facts;
        let group = |name: &str, when: J, image: &str| {
            parse(&with(|v| {
                v["group"] = json!(name);
                v["when"] = when;
                let o = v.as_object_mut().unwrap();
                o.remove("rollout");
                o.remove("previous");
                v["modules"] = json!([{"name": "app", "image": image}]);
            }))
            .unwrap()
        };
        let arm = group("app-arm", json!({"arch": "arm64"}), "app:arm");
        let x86 = group("app-x86", json!({"arch": "amd64"}), "app:x86");
        let podman = group("tools-podman", json!({"engine": "podman"}), "tools:1");
        let held = |was_in: &[&str]| -> BTreeMap<GroupName, HeldGroup> {
            [&arm, &x86, &podman]
                .into_iter()
                .map(|d| {
                    (
                        d.group.clone(),
                        HeldGroup {
                            desired: if d.group.as_str() == "tools-podman" {
                                let mut d = (*d).clone();
                                d.modules = [(
                                    ModuleName::try_from("tools").unwrap(),
                                    d.modules.into_values().next().unwrap(),
                                )]
                                .into();
                                d
                            } else {
                                (*d).clone()
                            },
                            took: false,
                            was_in: was_in.contains(&d.group.as_str()),
                        },
                    )
                })
                .collect()
        };
        let node = || node_doc(json!({"groups": ["app-arm", "app-x86", "tools-podman"]}));
        let id = NodeId::try_from("edge-0002").unwrap();
        let facts = |arch: &str, engine: Option<&str>| Facts {
            arch: arch.into(),
            os: "linux".into(),
            engine: engine.map(str::to_string),
            ..Facts::default()
        };
        /// What, the facts, the groups it was in, the modules and images
        /// composed, and the groups not for it with why.
        type Case<'a> = (
            &'a str,
            Facts,
            &'a [&'a str],
            &'a [(&'a str, &'a str)],
            &'a [(&'a str, &'a str)],
        );
        #[rustfmt::skip]
        let cases: Vec<Case> = vec![
            ("an arm device on Podman: the arm group and the Podman one",
             facts("aarch64", Some("podman")), &[], &[("app", "app:arm"), ("tools", "tools:1")],
             &[("app-x86", "its arch is aarch64; the group is for x86_64")]),
            ("an x86 device on Docker: the x86 group only",
             facts("x86_64", Some("docker")), &[], &[("app", "app:x86")],
             &[("app-arm", "its arch is x86_64; the group is for aarch64"),
               ("tools-podman", "its engine is docker; the group is for podman")]),
            ("its engine not known yet: not joined",
             facts("x86_64", None), &[], &[("app", "app:x86")],
             &[("app-arm", "its arch is x86_64; the group is for aarch64"),
               ("tools-podman", "its engine is not known yet")]),
            ("its engine not known yet, was in: kept",
             facts("x86_64", None), &["tools-podman"], &[("app", "app:x86"), ("tools", "tools:1")],
             &[("app-arm", "its arch is x86_64; the group is for aarch64")]),
        ];
        for (what, f, was_in, want, outs) in cases {
            let c = compose(node(), &held(was_in), &id, 1_800_000_000, Some(&f)).unwrap();
            let got: Vec<(String, String)> = c
                .modules
                .iter()
                .filter(|(n, _)| n.as_str() != "own")
                .map(|(n, m)| (n.to_string(), m.image.clone()))
                .collect();
            let want: Vec<(String, String)> = want
                .iter()
                .map(|(n, i)| (n.to_string(), i.to_string()))
                .collect();
            assert_eq!(got, want, "{what}");
            let got_outs: Vec<(String, String)> = c
                .groups
                .iter()
                .filter_map(|g| g.out.clone().map(|o| (g.group.to_string(), o)))
                .collect();
            let outs: Vec<(String, String)> = outs
                .iter()
                .map(|(g, o)| (g.to_string(), o.to_string()))
                .collect();
            assert_eq!(got_outs, outs, "{what}");
            // A group the node is not in is remembered as not taken.
            for g in c.groups.iter().filter(|g| g.out.is_some()) {
                assert_eq!(g.remembered(Some(&Digest::of(b"x"))), None, "{what}");
            }
        }
        // The operator's check (no facts) takes every group in: two groups
        // with one module conflict there, as they would on a device both
        // were for.
        let err = compose(node(), &held(&[]), &id, 1_800_000_000, None).unwrap_err();
        assert!(err.0.contains("app"), "{}", err.0);
    }

    #[test]
    fn a_bad_when_refuses_the_group_document_naming_its_field() {
        let e = parse(&with(|v| v["when"] = json!({"arch": "sparc"}))).unwrap_err();
        assert_eq!(e.field, "when.arch[0]");
        let e = parse(&with(|v| v["when"] = json!({"colour": "red"}))).unwrap_err();
        assert_eq!(e.field, "when");
        let g = parse(&with(|v| v["when"] = json!({"engine": "podman"}))).unwrap();
        assert_eq!(g.when.unwrap().engine, ["podman"]);
    }
}
