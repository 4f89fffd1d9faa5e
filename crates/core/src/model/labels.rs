//! The labels a managed container carries: the node that manages it, its
//! module, its spec digest and one digest per input. Written once when the
//! spec is made ([`Labels::to_map`]) and parsed once when the engine lists
//! the container ([`Labels::parse`]); nothing else reads label strings.

use crate::model::sort::Insert as _;
use std::collections::BTreeMap;

use crate::model::names::{Digest, InputName, ModuleName, NodeId};

/// Label: the node that manages this container.
pub const MANAGED_BY: &str = "stead.managed-by";
/// Label: the module this container runs.
pub const MODULE: &str = "stead.module";
/// Label: the spec digest this container was created from.
pub const DIGEST: &str = "stead.digest";
/// Label: the agent (one store, one id) that created this container, so an
/// agent can tell when another one shares its node id.
pub const AGENT: &str = "stead.agent";
/// Label: what was stated locally for this module beyond the intention
/// files (an API module's whole intention, or the settings layered over a
/// file module), as JSON, so a store that was discarded can be rebuilt
/// from the containers without restarting them.
pub const STATED: &str = "stead.stated";
/// The largest [`STATED`] label written; a larger statement is not carried
/// (the engine lists every label on every pass).
pub const STATED_MAX: usize = 64 * 1024;
/// Label prefix: one digest per input, `stead.input.<input name>`.
pub const INPUT_PREFIX: &str = "stead.input.";
/// Label: how the digests were made, when not plain: `keyed` (HMAC-SHA256
/// under the device's key, `keyed_digests = true`).
pub const DIGESTS: &str = "stead.digests";
/// [`DIGESTS`] of a container whose digests are keyed.
pub const KEYED: &str = "keyed";

/// What a container's labels say about it, typed. A label that does not
/// parse (hand-made, or from another tool) reads as absent.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Labels {
    /// The node that manages it, as its label says (any string: another
    /// node's id need not be valid here).
    pub managed_by: Option<String>,
    /// The module it runs, as its label says (kept as text: an orphan's
    /// label is reported even when it is not a valid module name).
    pub module: Option<String>,
    /// The spec digest it was created from.
    pub digest: Option<Digest>,
    /// The agent that created it, when it says.
    pub agent: Option<String>,
    /// The digest of each input it was created from.
    pub inputs: BTreeMap<InputName, Digest>,
    /// What was stated for its module beyond the files (JSON), when it
    /// says; read only when a new store is rebuilt.
    pub stated: Option<String>,
    /// Whether its digests are keyed ([`DIGESTS`]).
    pub keyed: bool,
}

/// Whether this agent knows `name` as an input: one of its fields (the
/// intention's own and the runtime fields), or a kind of path it composes,
/// reads or mounts.
pub fn known(name: &InputName) -> bool {
    let s = name.as_str();
    matches!(
        s,
        "image" | "command" | "env" | "ports" | "restart" | "live"
    ) || crate::model::runtime::FIELDS.contains(&s)
        || ["config:/", "file:/", "env_file:/", "mount:/"]
            .iter()
            .any(|p| s.starts_with(p))
}

impl Labels {
    /// Parses the engine's label map.
    pub fn parse(map: &BTreeMap<String, String>) -> Labels {
        Labels {
            managed_by: map.get(MANAGED_BY).cloned(),
            module: map.get(MODULE).cloned(),
            digest: map
                .get(DIGEST)
                .and_then(|d| Digest::try_from(d.as_str()).ok()),
            agent: map.get(AGENT).cloned(),
            stated: map.get(STATED).cloned(),
            keyed: map.get(DIGESTS).is_some_and(|d| d == KEYED),
            inputs: map
                .iter()
                .filter_map(|(k, v)| {
                    let name = InputName::try_from(k.strip_prefix(INPUT_PREFIX)?).ok()?;
                    // An input a newer agent added is not this one's to weigh.
                    if !known(&name) {
                        return None;
                    }
                    let d = Digest::try_from(v.as_str()).ok()?;
                    Some((name, d))
                })
                .into_map(),
        }
    }

    /// The labels of a container made by `node` for `module` from a spec
    /// with this digest and these inputs.
    pub fn to_map(
        node: &NodeId,
        module: &ModuleName,
        digest: &Digest,
        inputs: &BTreeMap<InputName, Digest>,
    ) -> BTreeMap<String, String> {
        let mut labels = BTreeMap::new();
        labels.insert(MANAGED_BY.to_string(), node.to_string());
        labels.insert(MODULE.to_string(), module.to_string());
        labels.insert(DIGEST.to_string(), digest.to_string());
        for (k, v) in inputs {
            labels.insert(format!("{INPUT_PREFIX}{k}"), v.to_string());
        }
        labels
    }

    /// The labels as a container made with keyed digests would carry
    /// them: each input's digest keyed from its plain one
    /// ([`crate::model::spec::keyed_inputs`]), the spec digest over them
    /// (when it was the one over the plain inputs; else it is kept, and
    /// matches no target, as it did not before). So a node that turns
    /// keyed digests on compares its running containers in the new terms,
    /// and recreates none for it.
    pub fn keyed_with(mut self, key: &crate::model::names::DigestKey) -> Labels {
        if self.keyed {
            return self;
        }
        let consistent =
            self.digest.as_ref() == Some(&crate::model::spec::spec_digest(&self.inputs));
        self.inputs = crate::model::spec::keyed_inputs(key, &self.inputs);
        if consistent {
            self.digest = Some(crate::model::spec::spec_digest(&self.inputs));
        }
        self.keyed = true;
        self
    }

    /// Whether `node` manages the container.
    pub fn managed_by(&self, node: &NodeId) -> bool {
        self.managed_by.as_deref() == Some(node.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_labels_parse_back_and_foreign_ones_read_as_absent() {
        let node = NodeId::try_from("n1").unwrap();
        let module = ModuleName::try_from("m").unwrap();
        let digest = Digest::of(b"spec");
        let mut inputs = BTreeMap::new();
        inputs.insert(InputName::try_from("image").unwrap(), Digest::of(b"img"));
        inputs.insert(InputName::try_from("config:/c").unwrap(), Digest::of(b"c"));
        let mut map = Labels::to_map(&node, &module, &digest, &inputs);
        // An input of a newer agent: a name, but not one this agent weighs.
        map.insert("stead.input.bogus".into(), Digest::of(b"x").to_string());
        map.insert(
            "stead.input.mount_x:/a".into(),
            Digest::of(b"x").to_string(),
        );
        map.insert("stead.input.env".into(), "not a digest".into());
        map.insert("com.example.other".into(), "x".into());
        let l = Labels::parse(&map);
        assert!(l.managed_by(&node));
        assert!(!l.managed_by(&NodeId::try_from("n2").unwrap()));
        assert_eq!(l.module.as_deref(), Some("m"));
        assert_eq!(l.digest, Some(digest));
        assert_eq!(l.inputs, inputs);
        let mut bad = BTreeMap::new();
        bad.insert(DIGEST.to_string(), "sha256:short".to_string());
        assert_eq!(Labels::parse(&bad), Labels::default());
    }
}
