//! Where desired state comes from: the intentions directory ([`dir`]), the
//! local HTTP API ([`api`]) and the central plane ([`plane`]); and the one rule
//! that says which of them may state, replace or delete a module
//! ([`may_write`]). Every write of an intention goes through here, as one
//! store transaction per module.

use crate::model::names::ModuleName;
use crate::store::Source;

pub mod api;
pub mod dir;
pub mod labels;
pub mod plane;

/// Why a source may not write a module.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct NotYours(pub String);

/// The ownership rule, for every source alike: a module belongs to the kind
/// of source that stated it. A file may take over a module from another
/// file (a renamed file); the API replaces its own modules; the plane its
/// own. Nobody else replaces or deletes it, so two sources never silently
/// fight over one module. Settings may still be layered over any module
/// through the API (see [`api::patch_settings`]).
pub fn may_write(
    module: &ModuleName,
    existing: Option<&Source>,
    writer: &Source,
) -> Result<(), NotYours> {
    let Some(owner) = existing else {
        return Ok(());
    };
    let m = module.as_str();
    match (owner, writer) {
        (Source::File(_), Source::File(_)) | (Source::Api, Source::Api) => Ok(()),
        (Source::Plane, Source::Plane) => Ok(()),
        (Source::File(p), _) => Err(NotYours(format!(
            "module {m:?} is defined by the file {p}; edit or remove that file (its settings can be layered with PATCH …/settings)"
        ))),
        (Source::Api, _) => Err(NotYours(format!(
            "module {m:?} is stated through the API; delete it there (stead rm {m}) before defining it elsewhere"
        ))),
        (Source::Plane, _) => Err(NotYours(format!(
            "module {m:?} is stated by the central plane; change it there"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ownership_table() {
        let m = ModuleName::try_from("m").unwrap();
        let file = |p: &str| Source::File(p.into());
        let cases: Vec<(Option<Source>, Source, Result<(), &str>)> = vec![
            (None, file("/i/m.toml"), Ok(())),
            (None, Source::Api, Ok(())),
            (None, Source::Plane, Ok(())),
            (Some(file("/i/a.toml")), file("/i/a.toml"), Ok(())),
            (Some(file("/i/a.toml")), file("/i/b.toml"), Ok(())),
            (
                Some(file("/i/a.toml")),
                Source::Api,
                Err("defined by the file /i/a.toml"),
            ),
            (
                Some(file("/i/a.toml")),
                Source::Plane,
                Err("defined by the file /i/a.toml"),
            ),
            (Some(Source::Api), Source::Api, Ok(())),
            (
                Some(Source::Api),
                file("/i/m.toml"),
                Err("stated through the API; delete it there (stead rm m)"),
            ),
            (
                Some(Source::Api),
                Source::Plane,
                Err("stated through the API"),
            ),
            (Some(Source::Plane), Source::Plane, Ok(())),
            (Some(Source::Plane), Source::Api, Err("central plane")),
            (Some(Source::Plane), file("/i/m.toml"), Err("central plane")),
        ];
        for (existing, writer, want) in cases {
            let got = may_write(&m, existing.as_ref(), &writer);
            match (got, want) {
                (Ok(()), Ok(())) => {}
                (Err(e), Err(needle)) => {
                    assert!(e.0.contains(needle), "{existing:?} ← {writer:?}: {e}")
                }
                (got, want) => panic!("{existing:?} ← {writer:?}: got {got:?}, want {want:?}"),
            }
        }
    }
}
