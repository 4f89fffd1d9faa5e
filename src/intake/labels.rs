//! What was stated locally beyond the intention files (a module stated
//! through the API, settings layered over a file module), carried in one
//! label of the module's container ([`render`]) and taken back from it when
//! the store is new ([`rebuild`]): a store discarded on purpose, or lost,
//! restarts no container that still matches.

use std::collections::BTreeMap;

use crate::model::intention::Intention;
use crate::model::labels::STATED_MAX;
use crate::model::names::{ModuleName, SettingKey, setting_field};
use crate::model::value::Value;
use crate::store::{Entry, EventKind, Restated, Source, Store, StoreError};

/// The label's text for a module's entry: `{"api": <intention>}` for an API
/// module, `{"overlay": {<key>: <value>}}` for layered settings; `None` when
/// nothing beyond the files was stated, or it is larger than a label may be.
pub fn render(entry: &Entry) -> Option<String> {
    let record = entry.record.as_ref()?;
    let doc = match record.source {
        Source::Api => serde_json::json!({ "api": record.intention.to_json() }),
        _ if !entry.overlay.is_empty() => {
            let o: serde_json::Map<String, serde_json::Value> = entry
                .overlay
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_json()))
                .collect();
            serde_json::json!({ "overlay": o })
        }
        _ => return None,
    };
    let text = doc.to_string();
    (text.len() <= STATED_MAX).then_some(text)
}

/// Reads a label written by [`render`] for `module`, checked as the API
/// checks a request. The error names the field, never its value.
pub fn parse(module: &ModuleName, text: &str) -> Result<Restated, String> {
    if text.len() > STATED_MAX {
        return Err(format!("larger than {STATED_MAX} bytes"));
    }
    let doc: serde_json::Value = serde_json::from_str(text)
        .map_err(|e| format!("not JSON (line {}, column {})", e.line(), e.column()))?;
    let serde_json::Value::Object(mut doc) = doc else {
        return Err("not a JSON object".into());
    };
    if let Some(i) = doc.remove("api") {
        let bytes = serde_json::to_vec(&i).map_err(|e| e.to_string())?;
        let i = Intention::parse_json(&bytes, "label").map_err(|e| e.to_string())?;
        if &i.name != module {
            return Err(format!("names module {:?}", i.name.as_str()));
        }
        return Ok(Restated::Api(Box::new(i)));
    }
    if let Some(serde_json::Value::Object(o)) = doc.remove("overlay") {
        let mut overlay = BTreeMap::new();
        for (k, v) in o {
            let field = setting_field(&k);
            let key = SettingKey::try_from(k.as_str()).map_err(|e| format!("{field}: {}", e.0))?;
            let v = Value::from_json(v, &field).map_err(|m| format!("{field}: {m}"))?;
            overlay.insert(key, v);
        }
        return Ok(Restated::Overlay(overlay));
    }
    Err("says neither \"api\" nor \"overlay\"".into())
}

/// Takes back into a new store what the containers' labels say was stated:
/// `found` holds each module, the container that says it, and the label.
/// One transaction, which also ends the rebuild; one event per module taken
/// back or refused. Returns the modules taken back.
pub fn rebuild(
    store: &Store,
    found: &[(ModuleName, String, String)],
) -> Result<Vec<ModuleName>, StoreError> {
    let mut restated = Vec::new();
    let mut refused = Vec::new();
    for (module, container, text) in found {
        match parse(module, text) {
            Ok(r) => restated.push((module.clone(), r)),
            Err(e) => refused.push((module, container, e)),
        }
    }
    let taken = store.rebuild(&restated)?;
    for m in &taken {
        store.append_event(
            Some(m.as_str()),
            EventKind::Intention,
            "the store is new: what was stated through the API was taken back from the container's labels",
        )?;
    }
    for (module, container, e) in refused {
        store.append_event(
            Some(module.as_str()),
            EventKind::Error,
            format!("the store is new, and the stead.stated label of container {container} cannot be taken back: {e}"),
        )?;
    }
    Ok(taken)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::intention::DocFormat;
    use crate::store::IntentionRecord;

    fn intention(name: &str) -> Intention {
        Intention::parse(
            &format!(
                "name = \"{name}\"\nimage = \"img:1\"\nenv = {{ A = \"1\" }}\nports = [\"8080:80\"]\n[config]\npath = \"/c.json\"\nformat = \"json\"\ndefaults = {{ level = \"info\" }}\n[settings]\nlevel = \"debug\"\n"
            ),
            DocFormat::Toml,
            "t",
        )
        .unwrap()
    }

    #[test]
    fn what_is_rendered_parses_back() {
        let m = ModuleName::try_from("m").unwrap();
        let api = Entry {
            record: Some(IntentionRecord::new(Source::Api, 3, intention("m"))),
            overlay: BTreeMap::new(),
        };
        let text = render(&api).unwrap();
        assert_eq!(
            parse(&m, &text),
            Ok(Restated::Api(Box::new(intention("m"))))
        );
        let mut overlay = BTreeMap::new();
        overlay.insert(
            SettingKey::try_from("a.b").unwrap(),
            Value::from_json(serde_json::json!({"c": [1, 2]}), "a.b").unwrap(),
        );
        let file = Entry {
            record: Some(IntentionRecord::new(
                Source::File("m.toml".into()),
                1,
                intention("m"),
            )),
            overlay: overlay.clone(),
        };
        let text = render(&file).unwrap();
        assert_eq!(parse(&m, &text), Ok(Restated::Overlay(overlay)));
        // A file module with nothing layered says nothing.
        let plain = Entry {
            overlay: BTreeMap::new(),
            ..file
        };
        assert_eq!(render(&plain), None);
    }

    #[test]
    fn labels_that_do_not_check_are_refused_by_field() {
        let m = ModuleName::try_from("m").unwrap();
        let cases = [
            ("{", "not JSON"),
            ("[]", "not a JSON object"),
            ("{}", "neither"),
            (
                r#"{"api":{"name":"other","image":"i:1"}}"#,
                "names module \"other\"",
            ),
            (
                r#"{"api":{"name":"m","image":"i:1","env":{"A":"se\u0000cret"}}}"#,
                "env",
            ),
            (r#"{"overlay":{"a..b":1}}"#, "settings"),
        ];
        for (text, says) in cases {
            let e = parse(&m, text).unwrap_err();
            assert!(e.contains(says), "{text}: {e}");
            assert!(!e.contains("secret"), "{e}");
        }
    }
}
