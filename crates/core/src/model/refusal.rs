//! Why a plane document is not adopted, in a class: the one list of them,
//! named by the plane's judgement and its poller, the store, the API and
//! the reports alike, and checked against the docs that list them. Pure
//! data, so every folder that names a class can reach it.

use serde::{Deserialize, Serialize};

/// A refusal's class: a short stable word that a plane and its operators
/// read in the status and the reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RefusalClass {
    /// Over the document size limit.
    TooLarge,
    /// Not a signed envelope.
    Malformed,
    /// An envelope of another payload type.
    PayloadType,
    /// No signature.
    Unsigned,
    /// A trusted key's signature that does not verify.
    BadSignature,
    /// Signed by no trusted key.
    UnknownKey,
    /// For another node.
    OtherNode,
    /// A payload that does not read as a document.
    Invalid,
    /// A revision over 2^53.
    RevisionTooLarge,
    /// Older than the revision held.
    Rollback,
    /// The revision held, with another payload.
    Equivocation,
    /// Issued further ahead than every clock allows.
    IssuedInFuture,
    /// Expired (or the clock is wrong).
    StaleOrClock,
    /// The agent died judging it, a few times in a row.
    Quarantined,
    /// A node's document and its groups' do not compose (a module in two
    /// places, a removal or override of what no group names).
    Conflict,
    /// Signed only by a delegation, naming what it may not sign (another
    /// group, a module outside its prefix).
    OutOfScope,
    /// An image not pinned by digest, or not in the allow-list the root
    /// asks for (or no allow-list held, or one expired).
    UnlistedImage,
}

impl RefusalClass {
    /// Every class, in the order the docs list them.
    pub const ALL: [RefusalClass; 17] = [
        RefusalClass::TooLarge,
        RefusalClass::Malformed,
        RefusalClass::PayloadType,
        RefusalClass::Unsigned,
        RefusalClass::BadSignature,
        RefusalClass::UnknownKey,
        RefusalClass::OtherNode,
        RefusalClass::Invalid,
        RefusalClass::RevisionTooLarge,
        RefusalClass::Rollback,
        RefusalClass::Equivocation,
        RefusalClass::IssuedInFuture,
        RefusalClass::StaleOrClock,
        RefusalClass::Quarantined,
        RefusalClass::Conflict,
        RefusalClass::OutOfScope,
        RefusalClass::UnlistedImage,
    ];

    /// Its word.
    pub fn as_str(self) -> &'static str {
        match self {
            RefusalClass::TooLarge => "too-large",
            RefusalClass::Malformed => "malformed",
            RefusalClass::PayloadType => "payload-type",
            RefusalClass::Unsigned => "unsigned",
            RefusalClass::BadSignature => "bad-signature",
            RefusalClass::UnknownKey => "unknown-key",
            RefusalClass::OtherNode => "other-node",
            RefusalClass::Invalid => "invalid",
            RefusalClass::RevisionTooLarge => "revision-too-large",
            RefusalClass::Rollback => "rollback",
            RefusalClass::Equivocation => "equivocation",
            RefusalClass::IssuedInFuture => "issued-in-future",
            RefusalClass::StaleOrClock => "stale-or-clock",
            RefusalClass::Quarantined => "quarantined",
            RefusalClass::Conflict => "conflict",
            RefusalClass::OutOfScope => "out-of-scope",
            RefusalClass::UnlistedImage => "unlisted-image",
        }
    }

    /// The class a word names.
    pub fn parse(word: &str) -> Option<RefusalClass> {
        RefusalClass::ALL.into_iter().find(|c| c.as_str() == word)
    }
}

impl std::fmt::Display for RefusalClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn each_class_is_its_word_on_the_wire() {
        for c in RefusalClass::ALL {
            assert_eq!(serde_json::to_value(c).unwrap(), c.as_str());
            assert_eq!(RefusalClass::parse(c.as_str()), Some(c));
            let back: RefusalClass = serde_json::from_value(c.as_str().into()).unwrap();
            assert_eq!(back, c);
        }
        assert_eq!(RefusalClass::parse("stale"), None);
    }

    /// The classes a doc lists in the paragraph or table row that holds
    /// `marker`: every backquoted word there that looks like a class.
    fn documented(doc: &str, marker: &str) -> BTreeSet<String> {
        let text =
            std::fs::read_to_string(format!("{}/../../docs/{doc}", env!("CARGO_MANIFEST_DIR")))
                .unwrap();
        let block = text
            .split("\n\n")
            .flat_map(|p| p.split("\n|"))
            .find(|p| p.contains(marker))
            .unwrap_or_else(|| panic!("docs/{doc} has no {marker:?}"));
        let list = &block[block.find(marker).unwrap_or(0)..];
        list.split('`')
            .skip(1)
            .step_by(2)
            .filter(|w| !w.is_empty() && w.bytes().all(|b| b.is_ascii_lowercase() || b == b'-'))
            .map(str::to_string)
            .collect()
    }

    #[test]
    fn the_docs_list_every_class_and_no_other() {
        let all: BTreeSet<String> = RefusalClass::ALL
            .iter()
            .map(|c| c.as_str().to_string())
            .collect();
        for (doc, marker) in [
            ("fleet.md", "the refusal is shown in"),
            ("api.md", "the last document not adopted, by class"),
        ] {
            let listed = documented(doc, marker);
            let missing: Vec<_> = all.difference(&listed).collect();
            let unknown: Vec<_> = listed.difference(&all).collect();
            assert!(
                missing.is_empty() && unknown.is_empty(),
                "docs/{doc}: classes not listed {missing:?}, listed but not classes {unknown:?}"
            );
        }
    }
}
