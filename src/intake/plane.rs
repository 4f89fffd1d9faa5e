//! Intentions stated by the central plane: a whole accepted document
//! brought into the store at once ([`adopt`]). Every module it names
//! becomes (or stays) a plane module unless another source owns it (the
//! one ownership rule, which names the conflict); every plane module it no
//! longer names is removed. The document and its intentions are written in
//! one transaction.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::intake::{NotYours, may_write};
use crate::model::fleet::GroupName;
use crate::model::intention::Intention;
use crate::model::names::ModuleName;
use crate::store::plane::{Contact, Held, StoredGroup};
use crate::store::{Entry, EventKind, IntentionRecord, Source, Store, StoreError};

/// What bringing a document in did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Adoption {
    /// Modules the plane states for the first time.
    pub stated: Vec<ModuleName>,
    /// Plane modules whose intention changed.
    pub replaced: Vec<ModuleName>,
    /// Plane modules the document no longer names.
    pub removed: Vec<ModuleName>,
    /// Modules the document names that another source owns: left as they
    /// are, each with the reason.
    pub conflicts: Vec<(ModuleName, NotYours)>,
}

impl Adoption {
    /// Whether any intention changed.
    pub fn changed(&self) -> bool {
        !(self.stated.is_empty() && self.replaced.is_empty() && self.removed.is_empty())
    }
}

/// Brings the stored entries in line with a document's modules (pure: the
/// store calls it inside its transaction).
pub fn bring_in_line(
    entries: &mut BTreeMap<ModuleName, Entry>,
    modules: &BTreeMap<ModuleName, Intention>,
    revision: u64,
) -> Adoption {
    let mut out = Adoption::default();
    for (name, intention) in modules {
        let entry = entries.entry(name.clone()).or_default();
        if let Err(e) = may_write(
            name,
            entry.record.as_ref().map(|r| &r.source),
            &Source::Plane,
        ) {
            out.conflicts.push((name.clone(), e));
            continue;
        }
        match &entry.record {
            Some(r) if *r.intention == *intention => {}
            Some(r) => {
                entry.record = Some(IntentionRecord {
                    source: Source::Plane,
                    revision: r.revision + 1,
                    plane_revision: Some(revision),
                    intention: Arc::new(intention.clone()),
                });
                out.replaced.push(name.clone());
            }
            None => {
                entry.record = Some(IntentionRecord {
                    source: Source::Plane,
                    revision: 1,
                    plane_revision: Some(revision),
                    intention: Arc::new(intention.clone()),
                });
                out.stated.push(name.clone());
            }
        }
    }
    // An entry made above for a module another source owns holds nothing.
    entries.retain(|_, e| e.record.is_some() || !e.overlay.is_empty());
    for (name, entry) in entries.iter_mut() {
        let is_plane = entry
            .record
            .as_ref()
            .is_some_and(|r| r.source == Source::Plane);
        if is_plane && !modules.contains_key(name) {
            entry.record = None;
            entry.overlay.clear();
            out.removed.push(name.clone());
        }
    }
    out
}

/// Adopts a document's modules with the document itself (`held`), the
/// contact that brought it and the group documents they were composed
/// with (`groups`, those that changed), in one transaction; then says what changed in
/// the event log. With `held` `None`, the held document's modules are
/// taken again (a module another source released since).
pub fn adopt(
    store: &Store,
    held: Option<(&Held, &[u8])>,
    contact: Option<&Contact>,
    groups: &[(GroupName, StoredGroup)],
    modules: &BTreeMap<ModuleName, Intention>,
    revision: u64,
) -> Result<Adoption, StoreError> {
    let adoption = store.adopt_plane(held, contact, groups, |entries| {
        bring_in_line(entries, modules, revision)
    })?;
    for (verb, names) in [
        ("stated", &adoption.stated),
        ("replaced", &adoption.replaced),
        ("removed", &adoption.removed),
    ] {
        for name in names {
            store.append_event(
                Some(name.as_str()),
                EventKind::Intention,
                format!("intention {verb} by the central plane (revision {revision})"),
            )?;
        }
    }
    if held.is_some() {
        for (name, why) in &adoption.conflicts {
            store.append_event(
                Some(name.as_str()),
                EventKind::Intention,
                format!(
                    "the central plane's revision {revision} names this module; not taken: {why}"
                ),
            )?;
        }
    }
    Ok(adoption)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn intention(name: &str, image: &str) -> Intention {
        Intention::parse_json(
            format!(r#"{{"name": "{name}", "image": "{image}"}}"#).as_bytes(),
            "test",
        )
        .unwrap()
    }

    fn entry(source: Source, i: Intention) -> Entry {
        Entry {
            record: Some(IntentionRecord {
                source,
                revision: 1,
                plane_revision: None,
                intention: i.into(),
            }),
            overlay: Default::default(),
        }
    }

    fn name(s: &str) -> ModuleName {
        ModuleName::try_from(s).unwrap()
    }

    /// One line per module: its source, revision, plane revision and image.
    fn show(entries: &BTreeMap<ModuleName, Entry>) -> String {
        entries
            .iter()
            .map(|(n, e)| {
                let r = e.record.as_ref().unwrap();
                format!(
                    "{n} {:?} r{} p{:?} {}",
                    r.source, r.revision, r.plane_revision, r.intention.image
                )
            })
            .collect::<Vec<_>>()
            .join("; ")
    }

    #[test]
    fn a_document_states_replaces_removes_and_names_conflicts() {
        let mut entries = BTreeMap::new();
        entries.insert(
            name("file"),
            entry(
                Source::File("/i/file.toml".into()),
                intention("file", "a:1"),
            ),
        );
        entries.insert(name("api"), entry(Source::Api, intention("api", "a:1")));
        entries.insert(name("same"), entry(Source::Plane, intention("same", "a:1")));
        entries.insert(
            name("moved"),
            entry(Source::Plane, intention("moved", "a:1")),
        );
        entries.insert(name("gone"), entry(Source::Plane, intention("gone", "a:1")));
        let doc: BTreeMap<_, _> = [
            ("file", "b:2"),
            ("api", "b:2"),
            ("same", "a:1"),
            ("moved", "a:2"),
            ("new", "n:1"),
        ]
        .into_iter()
        .map(|(n, img)| (name(n), intention(n, img)))
        .collect();
        let a = bring_in_line(&mut entries, &doc, 7);
        assert_eq!(a.stated, vec![name("new")]);
        assert_eq!(a.replaced, vec![name("moved")]);
        assert_eq!(a.removed, vec![name("gone")]);
        let conflicts: Vec<String> = a
            .conflicts
            .iter()
            .map(|(n, e)| format!("{n}: {e}"))
            .collect();
        assert_eq!(conflicts.len(), 2, "{conflicts:?}");
        assert!(
            conflicts[0].starts_with("api: ") && conflicts[0].contains("stated through the API")
        );
        assert!(conflicts[1].starts_with("file: ") && conflicts[1].contains("/i/file.toml"));
        entries.retain(|_, e| e.record.is_some());
        assert_eq!(
            show(&entries),
            "api Api r1 pNone a:1; file File(\"/i/file.toml\") r1 pNone a:1; \
             moved Plane r2 pSome(7) a:2; new Plane r1 pSome(7) n:1; same Plane r1 pNone a:1"
        );
        assert!(a.changed());
    }

    #[test]
    fn the_same_document_again_changes_nothing() {
        let mut entries = BTreeMap::new();
        let doc: BTreeMap<_, _> = [(name("m"), intention("m", "a:1"))].into_iter().collect();
        assert!(bring_in_line(&mut entries, &doc, 1).changed());
        let before = entries.clone();
        let again = bring_in_line(&mut entries, &doc, 2);
        assert!(!again.changed());
        assert_eq!(entries, before);
    }

    #[test]
    fn an_empty_document_removes_every_plane_module_and_nothing_else() {
        let mut entries = BTreeMap::new();
        entries.insert(name("p"), entry(Source::Plane, intention("p", "a:1")));
        entries.insert(name("api"), entry(Source::Api, intention("api", "a:1")));
        let a = bring_in_line(&mut entries, &BTreeMap::new(), 3);
        assert_eq!(a.removed, vec![name("p")]);
        assert!(entries[&name("p")].record.is_none());
        assert!(entries[&name("api")].record.is_some());
    }
}
