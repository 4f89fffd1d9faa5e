//! What an intention shows to a reader without the API's token: everything
//! but the values that may be secrets. The keys of `env`, `settings`, a
//! config's `defaults` and a settings overlay stay, each value reads
//! `null`; a literal file keeps its path, its `content` reads `null`. With
//! the token, the whole intention is shown. A value sealed to the device
//! reads `"(sealed)"` without the token, and its sealed text with it
//! (which only this device opens); its value is shown by neither.

use serde_json::Value as J;

/// Said in an entry whose values were hidden.
pub const HIDDEN: &str =
    "env, settings, config defaults and file contents are shown only with the API token";

/// Hides the values of an intention document (the intention-file schema,
/// as `Intention::to_json` writes it).
pub fn hide_intention(doc: &mut J) {
    for field in ["env", "settings"] {
        hide_map(doc.get_mut(field));
    }
    hide_map(doc.get_mut("config").and_then(|c| c.get_mut("defaults")));
    if let Some(J::Array(files)) = doc.get_mut("files") {
        for f in files {
            if let Some(c) = f.get_mut("content") {
                *c = hidden(c);
            }
        }
    }
}

/// Every value of a map (when it is one) reads `null`.
pub fn hide_map(map: Option<&mut J>) {
    if let Some(J::Object(m)) = map {
        for v in m.values_mut() {
            *v = hidden(v);
        }
    }
}

/// What a value reads as without the token.
fn hidden(v: &J) -> J {
    match crate::model::sealed::SealedText::from_json(v) {
        Some(Ok(_)) => J::from(crate::model::spec::SEALED_SHOWN),
        _ => J::Null,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn values_are_hidden_and_keys_stay() {
        let cases = [
            (json!({"env": {"A": "s"}}), json!({"env": {"A": null}})),
            (
                json!({"settings": {"db.pw": "s", "t": {"x": 1}}}),
                json!({"settings": {"db.pw": null, "t": null}}),
            ),
            (
                json!({"config": {"path": "/c", "defaults": {"pw": "s"}}}),
                json!({"config": {"path": "/c", "defaults": {"pw": null}}}),
            ),
            (
                json!({"files": [{"path": "/k", "content": "s"}]}),
                json!({"files": [{"path": "/k", "content": null}]}),
            ),
            (
                json!({"image": "i:1", "command": ["a"]}),
                json!({"image": "i:1", "command": ["a"]}),
            ),
            (json!({"env": "odd"}), json!({"env": "odd"})),
            (
                json!({"env": {"A": {"sealed": "YQ=="}}, "files": [{"path": "/k", "content": {"sealed": "Yg=="}}]}),
                json!({"env": {"A": "(sealed)"}, "files": [{"path": "/k", "content": "(sealed)"}]}),
            ),
        ];
        for (mut doc, want) in cases {
            hide_intention(&mut doc);
            assert_eq!(doc, want);
        }
    }
}
