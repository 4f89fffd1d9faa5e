//! What was stated locally beyond the intention files (a module stated
//! through the API, settings layered over a file module), carried in one
//! label of the module's container ([`render`]) and taken back from it when
//! the store is new ([`rebuild`]): a store discarded on purpose, or lost,
//! restarts no container that still matches.
//!
//! The label never holds a value in clear: the statement is sealed with
//! the device-local key in the data directory (`sealed1:` and base64 of
//! [`LocalKey::seal`]), so whatever reads labels (`docker ps`, cAdvisor,
//! a log shipper) reads no env or settings value. A clear JSON label, as
//! 0.5.0 wrote it, is still taken back.

use crate::model::sort::Insert as _;
use std::collections::BTreeMap;

use base64::Engine as _;

use crate::model::intention::Intention;
use crate::model::labels::STATED_MAX;
use crate::model::names::{ModuleName, SettingKey, setting_field};
use crate::model::seal::LocalKey;
use crate::model::value::Value;
use crate::store::{Entry, EventKind, Restated, Source, Store, StoreError};

/// What a sealed label starts with.
const SEALED: &str = "sealed1:";
/// The longest sealed label: a [`STATED_MAX`] statement, its nonce and tag,
/// in base64.
const SEALED_MAX: usize = SEALED.len() + (STATED_MAX + 12 + 16).div_ceil(3) * 4;
const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::URL_SAFE_NO_PAD;

/// What a sealed label is bound to: its purpose and its module.
fn context(module: &ModuleName) -> Vec<u8> {
    format!("stead.stated\0{}", module.as_str()).into_bytes()
}

/// The label's text for a module's entry, sealed with `key`: the statement
/// is `{"api": <intention>}` for an API module, `{"overlay": {<key>:
/// <value>}}` for layered settings; `None` when nothing beyond the files
/// was stated, or it is larger than a label may be.
pub fn render(module: &ModuleName, entry: &Entry, key: &LocalKey) -> Option<String> {
    let clear = statement(entry)?;
    let sealed = key.seal(&context(module), clear.as_bytes())?;
    Some(format!("{SEALED}{}", B64.encode(sealed)))
}

/// The statement in clear, as JSON.
fn statement(entry: &Entry) -> Option<String> {
    let record = entry.record.as_ref()?;
    let doc = match record.source {
        Source::Api => serde_json::json!({ "api": record.intention.to_json() }),
        _ if !entry.overlay.is_empty() => {
            let o: serde_json::Map<String, serde_json::Value> = entry
                .overlay
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_json()))
                .into_object();
            serde_json::json!({ "overlay": o })
        }
        _ => return None,
    };
    let text = doc.to_string();
    (text.len() <= STATED_MAX).then_some(text)
}

/// Where a label's statement was read from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Carried {
    /// Sealed to this device.
    Sealed,
    /// In clear (a container made by 0.5.0).
    Clear,
}

/// Reads a label written by [`render`] (or a clear one, as 0.5.0 wrote
/// it) for `module`, checked as the API checks a request. The error names
/// the field, never its value.
pub fn parse(
    module: &ModuleName,
    text: &str,
    key: &LocalKey,
) -> Result<(Restated, Carried), String> {
    let Some(b64) = text.strip_prefix(SEALED) else {
        return parse_clear(module, text).map(|r| (r, Carried::Clear));
    };
    if text.len() > SEALED_MAX {
        return Err(format!("larger than {SEALED_MAX} bytes"));
    }
    let sealed = B64
        .decode(b64)
        .map_err(|_| "sealed, but not base64".to_string())?;
    let clear = key
        .open(&context(module), &sealed)
        .map_err(|e| format!("sealed, and {e}"))?;
    let clear = String::from_utf8(clear).map_err(|_| "sealed, but not UTF-8".to_string())?;
    parse_clear(module, &clear).map(|r| (r, Carried::Sealed))
}

/// Reads a statement in clear.
fn parse_clear(module: &ModuleName, text: &str) -> Result<Restated, String> {
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
    key: &LocalKey,
) -> Result<Vec<ModuleName>, StoreError> {
    let mut restated = Vec::new();
    let mut clear = Vec::new();
    let mut refused = Vec::new();
    for (module, container, text) in found {
        match parse(module, text, key) {
            Ok((r, how)) => {
                if how == Carried::Clear {
                    clear.push(module.clone());
                }
                restated.push((module.clone(), r))
            }
            Err(e) => refused.push((module, container, e)),
        }
    }
    let taken = store.rebuild(&restated)?;
    for m in &taken {
        let said = if clear.contains(m) {
            "the store is new: what was stated through the API was taken back from the container's labels (in clear, as stead 0.5.0 wrote them: the values stay readable in the label until the container is next recreated, which seals them)"
        } else {
            "the store is new: what was stated through the API was taken back from the container's labels"
        };
        store.append_event(Some(m.as_str()), EventKind::Intention, said)?;
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

    fn key() -> LocalKey {
        LocalKey::from_bytes([1; 32])
    }

    #[test]
    fn what_is_rendered_is_sealed_and_parses_back() {
        let m = ModuleName::try_from("m").unwrap();
        let api = Entry {
            record: Some(IntentionRecord::new(Source::Api, 3, intention("m"))),
            overlay: BTreeMap::new(),
        };
        let text = render(&m, &api, &key()).unwrap();
        assert!(text.starts_with("sealed1:"), "{text}");
        for value in ["img:1", "debug", "8080", "level"] {
            assert!(!text.contains(value), "{value} in clear: {text}");
        }
        assert_eq!(
            parse(&m, &text, &key()),
            Ok((Restated::Api(Box::new(intention("m"))), Carried::Sealed))
        );
        // As 0.5.0 wrote it, in clear: still taken back.
        let clear = statement(&api).unwrap();
        assert_eq!(
            parse(&m, &clear, &key()),
            Ok((Restated::Api(Box::new(intention("m"))), Carried::Clear))
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
        let text = render(&m, &file, &key()).unwrap();
        assert!(!text.contains("a.b"), "{text}");
        assert_eq!(
            parse(&m, &text, &key()),
            Ok((Restated::Overlay(overlay), Carried::Sealed))
        );
        // A file module with nothing layered says nothing.
        let plain = Entry {
            overlay: BTreeMap::new(),
            ..file
        };
        assert_eq!(render(&m, &plain, &key()), None);
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
            let e = parse(&m, text, &key()).unwrap_err();
            assert!(e.contains(says), "{text}: {e}");
            assert!(!e.contains("secret"), "{e}");
            // Sealed, the same statement is refused for the same reason.
            let sealed = key().seal(&context(&m), text.as_bytes()).unwrap();
            let sealed = format!("{SEALED}{}", B64.encode(sealed));
            let e = parse(&m, &sealed, &key()).unwrap_err();
            assert!(e.contains(says), "{text}: {e}");
        }
        // Sealed with another key, for another module, or not sealed text.
        let other = ModuleName::try_from("other").unwrap();
        let entry = Entry {
            record: Some(IntentionRecord::new(Source::Api, 1, intention("m"))),
            overlay: BTreeMap::new(),
        };
        let text = render(&m, &entry, &key()).unwrap();
        let sealed_cases = [
            (
                &m,
                text.clone(),
                LocalKey::from_bytes([2; 32]),
                "another key",
            ),
            (&other, text.clone(), key(), "another module"),
            (&m, "sealed1:!!".to_string(), key(), "not base64"),
            (&m, "sealed1:AAAA".to_string(), key(), "too short"),
            (
                &m,
                format!("sealed1:{}", "A".repeat(SEALED_MAX)),
                key(),
                "larger than",
            ),
        ];
        for (module, text, k, says) in sealed_cases {
            let e = parse(module, &text, &k).unwrap_err();
            assert!(e.contains(says), "{says}: {e}");
        }
    }
}
