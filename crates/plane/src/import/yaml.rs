//! One YAML document read into a [`serde_json::Value`], from the events of
//! the saphyr parser: anchors and aliases, merge keys (`<<`, which Compose
//! files use with `x-` fragments), the core schema's scalars. A plain
//! scalar becomes a JSON number only when the number writes back as the
//! same text (`0755`, `1e3` and `.5` stay strings, so no value changes on
//! its way through); map keys are strings. Refused, with the line: a
//! second document, a duplicate key, a key that is not a scalar, a tag
//! other than the core schema's, an alias to an unknown anchor, nesting
//! deeper than [`MAX_DEPTH`], more than [`MAX_NODES`] values or
//! [`MAX_BYTES`] of text (aliases counted as the copies they make).

use saphyr_parser::{Event, Parser, ScalarStyle, Span, Tag};
use serde_json::{Map, Number, Value as J};

/// The deepest nesting of mappings and sequences.
pub const MAX_DEPTH: usize = 64;
/// The most values a document may make, counting each alias's copy.
pub const MAX_NODES: usize = 1_000_000;
/// The most text (scalars and keys) a document may make, counting each
/// alias's copy: a few aliases of a long string are as many copies.
pub const MAX_BYTES: usize = 16 << 20;

/// A YAML document that cannot be read: where and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}, column {column}: {message}")]
pub struct YamlError {
    /// 1-based.
    pub line: usize,
    /// 1-based.
    pub column: usize,
    /// What is wrong.
    pub message: String,
}

/// An error at the start of `span`.
fn err(span: &Span, message: impl Into<String>) -> YamlError {
    YamlError {
        line: span.start.line(),
        column: span.start.col() + 1,
        message: message.into(),
    }
}

/// A mapping or sequence being read.
enum Frame {
    Seq {
        anchor: usize,
        items: Vec<J>,
    },
    Map {
        anchor: usize,
        map: Map<String, J>,
        /// The key read, waiting for its value; `None` for a merge key.
        key: Option<Option<String>>,
        /// Values of merge keys, in order.
        merges: Vec<J>,
    },
}

/// Reads one YAML document (an empty one is `null`).
pub fn load(text: &str) -> Result<J, YamlError> {
    let mut parser = Parser::new_from_str(text);
    let mut stack: Vec<Frame> = Vec::new();
    let mut anchors: std::collections::BTreeMap<usize, J> = Default::default();
    let mut nodes = 0usize;
    let mut bytes = 0usize;
    let mut root: Option<J> = None;
    let mut documents = 0;
    while let Some(next) = parser.next_event() {
        let (event, span) = next.map_err(|e| YamlError {
            line: e.marker().line(),
            column: e.marker().col() + 1,
            message: e.info().to_string(),
        })?;
        let starts_seq = matches!(event, Event::SequenceStart(..));
        // A finished value, the anchor it is known by (0: none), and
        // whether it is a plain `<<` (a merge key where a key is read).
        let (value, anchor, merge_key) = match event {
            Event::StreamStart | Event::DocumentEnd | Event::Nothing => continue,
            Event::StreamEnd => break,
            Event::DocumentStart(_) => {
                documents += 1;
                if documents > 1 {
                    return Err(err(&span, "a second YAML document: one is read"));
                }
                continue;
            }
            Event::Alias(id) => {
                let v = anchors
                    .get(&id)
                    .cloned()
                    .ok_or_else(|| err(&span, "an alias to an anchor not yet defined"))?;
                let (n, b) = size(&v);
                nodes += n;
                bytes += b;
                (v, 0, false)
            }
            Event::Scalar(text, style, anchor, tag) => {
                let merge = style == ScalarStyle::Plain && tag.is_none() && text == "<<";
                let v = scalar(&text, style, tag.as_deref()).map_err(|m| err(&span, m))?;
                nodes += 1;
                bytes += text.len();
                (v, anchor, merge)
            }
            Event::SequenceStart(anchor, tag) | Event::MappingStart(anchor, tag) => {
                check_tag(tag.as_deref(), if starts_seq { "seq" } else { "map" })
                    .map_err(|m| err(&span, m))?;
                if stack.len() >= MAX_DEPTH {
                    return Err(err(&span, format!("nested deeper than {MAX_DEPTH}")));
                }
                stack.push(if starts_seq {
                    Frame::Seq {
                        anchor,
                        items: Vec::new(),
                    }
                } else {
                    Frame::Map {
                        anchor,
                        map: Map::new(),
                        key: None,
                        merges: Vec::new(),
                    }
                });
                continue;
            }
            Event::SequenceEnd => match stack.pop() {
                Some(Frame::Seq { anchor, items }) => {
                    nodes += 1;
                    (J::Array(items), anchor, false)
                }
                _ => return Err(err(&span, "unbalanced sequence")),
            },
            Event::MappingEnd => match stack.pop() {
                Some(Frame::Map {
                    anchor,
                    mut map,
                    merges,
                    ..
                }) => {
                    // Keys written in the mapping win over merged ones; of
                    // the merged mappings, the first that has a key wins.
                    for m in merges {
                        for (k, v) in merged_maps(m).map_err(|m| err(&span, m))? {
                            map.entry(k).or_insert(v);
                        }
                    }
                    nodes += 1;
                    (J::Object(map), anchor, false)
                }
                _ => return Err(err(&span, "unbalanced mapping")),
            },
        };
        if nodes > MAX_NODES {
            return Err(err(
                &span,
                format!("more than {MAX_NODES} values (aliases counted as copies)"),
            ));
        }
        if bytes > MAX_BYTES {
            return Err(err(
                &span,
                format!("more than {MAX_BYTES} bytes of text (aliases counted as copies)"),
            ));
        }
        if anchor != 0 {
            anchors.insert(anchor, value.clone());
        }
        match stack.last_mut() {
            None => root = Some(value),
            Some(Frame::Seq { items, .. }) => items.push(value),
            Some(Frame::Map {
                map, key, merges, ..
            }) => match key.take() {
                None if merge_key => *key = Some(None),
                None => {
                    let k = key_string(&value).map_err(|m| err(&span, m))?;
                    if map.contains_key(&k) {
                        return Err(err(&span, format!("duplicate key {k:?}")));
                    }
                    *key = Some(Some(k));
                }
                Some(None) => merges.push(value),
                Some(Some(k)) => {
                    map.insert(k, value);
                }
            },
        }
    }
    Ok(root.unwrap_or(J::Null))
}

/// How many values `v` is, and how many bytes of text (keys included);
/// a number or boolean counts as the text it was read from, near enough.
fn size(v: &J) -> (usize, usize) {
    let add = |(n, b): (usize, usize), (m, c): (usize, usize)| (n + m, b + c);
    match v {
        J::Array(a) => a.iter().map(size).fold((1, 0), add),
        J::Object(m) => m
            .iter()
            .map(|(k, v)| add((0, k.len()), size(v)))
            .fold((1, 0), add),
        J::String(s) => (1, s.len()),
        J::Number(n) => (1, n.to_string().len()),
        _ => (1, 4),
    }
}

/// The entries a merge key brings: a mapping, or a sequence of mappings
/// (the first that has a key wins).
fn merged_maps(v: J) -> Result<Vec<(String, J)>, String> {
    let bad = || "a merge key (<<) takes a mapping or a list of mappings".to_string();
    match v {
        J::Object(m) => Ok(m.into_iter().collect()),
        J::Array(a) => {
            let mut out: Vec<(String, J)> = Vec::new();
            for m in a {
                let J::Object(m) = m else {
                    return Err(bad());
                };
                for (k, v) in m {
                    if !out.iter().any(|(o, _)| *o == k) {
                        out.push((k, v));
                    }
                }
            }
            Ok(out)
        }
        _ => Err(bad()),
    }
}

/// A mapping key as a string: scalars only.
fn key_string(v: &J) -> Result<String, String> {
    match v {
        J::String(s) => Ok(s.clone()),
        J::Number(n) => Ok(n.to_string()),
        J::Bool(b) => Ok(b.to_string()),
        J::Null => Ok(String::new()),
        _ => Err("a mapping key must be a scalar".into()),
    }
}

/// The core schema's tags: `!!str`, `!!int`, … Others are refused.
fn check_tag(tag: Option<&Tag>, expected: &str) -> Result<(), String> {
    match tag {
        None => Ok(()),
        Some(t) if t.is_yaml_core_schema() && t.suffix == expected => Ok(()),
        Some(t) => Err(format!("the tag {t} is not read here")),
    }
}

/// A scalar by the core schema: a quoted or block scalar is a string; a
/// plain one may be null, a boolean or a number.
fn scalar(text: &str, style: ScalarStyle, tag: Option<&Tag>) -> Result<J, String> {
    if let Some(t) = tag {
        if !t.is_yaml_core_schema() {
            return Err(format!("the tag {t} is not read here"));
        }
        return match t.suffix.as_str() {
            "str" => Ok(J::String(text.to_string())),
            "null" | "bool" | "int" | "float" => match plain(text) {
                v @ J::Null if t.suffix == "null" => Ok(v),
                v @ J::Bool(_) if t.suffix == "bool" => Ok(v),
                J::Number(n) if t.suffix == "int" && !n.is_f64() => Ok(J::Number(n)),
                J::Number(n) if t.suffix == "float" => Ok(J::Number(n)),
                _ => Err(format!("{text:?} is not a {}", t.suffix)),
            },
            _ => Err(format!("the tag {t} is not read here")),
        };
    }
    Ok(match style {
        ScalarStyle::Plain => plain(text),
        _ => J::String(text.to_string()),
    })
}

/// A plain scalar: null, a boolean, a number that writes back as the same
/// text, or else the string.
fn plain(text: &str) -> J {
    match text {
        "" | "~" | "null" | "Null" | "NULL" => return J::Null,
        "true" | "True" | "TRUE" => return J::Bool(true),
        "false" | "False" | "FALSE" => return J::Bool(false),
        _ => {}
    }
    let number = if let Ok(i) = text.parse::<i64>() {
        Some(Number::from(i))
    } else if let Ok(u) = text.parse::<u64>() {
        Some(Number::from(u))
    } else if text.contains('.') {
        text.parse::<f64>().ok().and_then(Number::from_f64)
    } else {
        None
    };
    match number {
        Some(n) if n.to_string() == text => J::Number(n),
        _ => J::String(text.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn documents_read_as_json() {
        let cases: &[(&str, J)] = &[
            ("", J::Null),
            (
                "a: 1\nb: [x, 'y', \"z\"]\n",
                json!({"a": 1, "b": ["x", "y", "z"]}),
            ),
            (
                "a: ~\nb: true\nc: False\nd: 0.5\ne: -3\n",
                json!({"a": null, "b": true, "c": false, "d": 0.5, "e": -3}),
            ),
            // Numbers that would not write back as written stay text.
            (
                "a: 0755\nb: 1e3\nc: .5\nd: 0.50\ne: +1\nf: 0x1F\ng: 8080:80\n",
                json!({"a": "0755", "b": "1e3", "c": ".5", "d": "0.50", "e": "+1", "f": "0x1F", "g": "8080:80"}),
            ),
            // YAML 1.1's yes/no are strings (1.2), as are quoted scalars.
            (
                "a: yes\nb: 'true'\nc: \"1\"\n",
                json!({"a": "yes", "b": "true", "c": "1"}),
            ),
            ("1: a\ntrue: b\n", json!({"1": "a", "true": "b"})),
            (
                "a: |\n  one\n  two\nb: >\n  x\n  y\n",
                json!({"a": "one\ntwo\n", "b": "x y\n"}),
            ),
            (
                "x: &d {a: 1, b: 2}\ny: *d\n",
                json!({"x": {"a": 1, "b": 2}, "y": {"a": 1, "b": 2}}),
            ),
            // Merge keys: written keys win; the first merged mapping wins.
            (
                "x: &d {a: 1, b: 2}\ny:\n  <<: *d\n  b: 3\n",
                json!({"x": {"a": 1, "b": 2}, "y": {"a": 1, "b": 3}}),
            ),
            (
                "p: &p {a: 1}\nq: &q {a: 2, c: 3}\nr:\n  <<: [*p, *q]\n",
                json!({"p": {"a": 1}, "q": {"a": 2, "c": 3}, "r": {"a": 1, "c": 3}}),
            ),
            // A quoted "<<" is a key like any other.
            ("'<<': 1\n", json!({"<<": 1})),
            ("a: !!str 1\nb: !!int 2\n", json!({"a": "1", "b": 2})),
        ];
        for (text, want) in cases {
            assert_eq!(&load(text).unwrap(), want, "{text}");
        }
    }

    #[test]
    fn bad_documents_say_where_and_why() {
        let cases: &[(&str, usize, &str)] = &[
            ("a: 1\na: 2\n", 2, "duplicate key \"a\""),
            ("a: [1\n", 2, ""),
            ("a: 1\n---\nb: 2\n", 2, "a second YAML document"),
            ("a: *nope\n", 1, "unknown anchor"),
            ("a: &x [*x]\n", 1, "an alias to an anchor not yet defined"),
            ("a: !reset []\n", 1, "the tag !reset is not read"),
            ("? [a]\n: 1\n", 1, "must be a scalar"),
            ("a:\n  <<: 1\n", 3, "merge key"),
            ("a: !!int x\n", 1, "is not a int"),
        ];
        for (text, line, needle) in cases {
            let e = load(text).unwrap_err();
            assert_eq!(e.line, *line, "{text}: {e}");
            assert!(e.message.contains(needle), "{text}: {e}");
        }
        let deep = format!(
            "{}1{}",
            "[".repeat(MAX_DEPTH + 1),
            "]".repeat(MAX_DEPTH + 1)
        );
        assert!(load(&deep).unwrap_err().message.contains("nested deeper"));
        // Aliases that double at each level cannot make a billion values.
        let mut bomb = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..9 {
            let p = i - 1;
            bomb.push_str(&format!(
                "a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
            ));
        }
        assert!(load(&bomb).unwrap_err().message.contains("more than"));
        // A long string aliased a few times at each level: few values,
        // many bytes (a 300 KB file that would make 1.6 GB).
        let mut strings = format!("s0: &s0 {}\n", "x".repeat(100_000));
        for i in 1..6 {
            let p = i - 1;
            strings.push_str(&format!(
                "s{i}: &s{i} [*s{p}, *s{p}, *s{p}, *s{p}, *s{p}, *s{p}, *s{p}, *s{p}, *s{p}, *s{p}]\n"
            ));
        }
        let e = load(&strings).unwrap_err();
        assert!(e.message.contains("bytes of text"), "{e}");
        assert!(e.line <= 4, "refused as soon as it is too much: {e}");
        // Long keys count too.
        let keys = format!(
            "k: &k {{{}: 1}}\nl: [{}]\n",
            "y".repeat(1 << 20),
            "*k, ".repeat(20)
        );
        assert!(load(&keys).unwrap_err().message.contains("bytes of text"));
    }
}
