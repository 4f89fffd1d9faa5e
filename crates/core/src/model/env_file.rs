//! Env files: host files of variables a module's environment takes, read
//! in one of two formats (an intention's `env_file_format`, one parser
//! each):
//!
//! - [`Format::Raw`]: `KEY=VALUE` lines, each value verbatim to the end
//!   of its line, as `docker run --env-file` and Compose's `format: raw`
//!   read them. Stead 0.5.0's only reading, and the default: an intention
//!   that does not name a format reads its files as it always did.
//! - [`Format::Compose`]: Compose's own dotenv rules, as it reads a
//!   service's `env_file` and the `.env` beside a Compose file. `export`
//!   before a key, blanks around the `=` (or a `:`), `#` comments and
//!   inline comments after a blank, single-quoted values taken literally,
//!   double-quoted values with escapes, both spanning lines; variables
//!   interpolated as in the Compose file ([`super::interpolate`]), from
//!   the lookup first, then the keys before; a key on its own takes its
//!   value from the lookup, or is none.
//!
//! An error names the line and what is wrong, never a value: an env file
//! holds secrets.

use serde::{Deserialize, Serialize};

use super::interpolate;
use super::names::EnvName;

/// How an env file is read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// `KEY=VALUE` lines, values verbatim.
    #[default]
    Raw,
    /// Compose's dotenv rules.
    Compose,
}

impl Format {
    /// Its name in intention files.
    pub fn as_str(self) -> &'static str {
        match self {
            Format::Raw => "raw",
            Format::Compose => "compose",
        }
    }
}

/// An env file's variables, in the file's order (a key given again: the
/// later value is the one applied).
pub type Vars = Vec<(String, String)>;

/// The most bytes the values of one env file read by Compose's rules may
/// come to after interpolation (a variable used many times is as many
/// copies).
pub const MAX_EXPANDED: usize = 2 << 20;

/// Variables already known, by name.
pub type Known = std::collections::BTreeMap<String, String>;

/// Reads an env file in `format`. By Compose's rules a referenced variable
/// is looked for in `lookup`, then in the file's earlier keys, then in
/// `earlier` (what the files before it set), as Compose looks for it; a
/// key on its own is looked for in `lookup` only.
pub fn read(
    bytes: &[u8],
    format: Format,
    lookup: &dyn Fn(&str) -> Option<String>,
    earlier: &Known,
) -> Result<Vars, String> {
    let text = std::str::from_utf8(bytes).map_err(|_| "not UTF-8 text".to_string())?;
    match format {
        Format::Raw => raw(text),
        Format::Compose => compose(text, lookup, earlier),
    }
}

/// `KEY=VALUE` lines, the value taken verbatim to the end of the line;
/// blank lines and lines starting with `#` are skipped.
fn raw(text: &str) -> Result<Vars, String> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let Some((k, v)) = trimmed.split_once('=') else {
            return Err(format!("line {}: expected KEY=VALUE", n + 1));
        };
        let k = EnvName::try_from(k.trim_end()).map_err(|_| bad_key(n + 1, k.trim_end()))?;
        if v.contains('\0') {
            return Err(format!("line {}: the value contains a NUL byte", n + 1));
        }
        out.push((k.to_string(), v.trim_end_matches('\r').to_string()));
    }
    Ok(out)
}

/// The most of a bad key an error shows.
const KEY_SHOWN: usize = 16;

/// Why a key of a raw env file is not a variable name, naming the line and
/// the key's valid start (clipped), never the rest of the line: a line
/// that is not `KEY=VALUE` may be a value (a password) on its own.
fn bad_key(line: usize, key: &str) -> String {
    let bad = key
        .char_indices()
        .find(|&(_, c)| c.is_whitespace() || c.is_control());
    let Some((at, c)) = bad else {
        return format!("line {line}: no key before the =");
    };
    let mut shown: String = key[..at].chars().take(KEY_SHOWN).collect();
    if at > KEY_SHOWN {
        shown.push('…');
    }
    let place = if at == 0 {
        format!("starts with {}", what_char(c))
    } else {
        format!("{shown:?} is followed by {}", what_char(c))
    };
    format!("line {line}: the key {place}: a key has no blank or control character")
}

/// A character as an error says it.
fn what_char(c: char) -> String {
    match c {
        ' ' => "a space".to_string(),
        '\t' => "a tab".to_string(),
        c if c.is_control() => "a control character".to_string(),
        c if c.is_ascii() => format!("{c:?}"),
        _ => "a non-ASCII character".to_string(),
    }
}

/// A blank within a line (Compose's: not a line break).
fn blank(c: char) -> bool {
    matches!(
        c,
        '\t' | '\u{b}' | '\u{c}' | '\r' | ' ' | '\u{85}' | '\u{a0}'
    )
}

/// Compose's dotenv rules (its reader, statement by statement).
fn compose(
    text: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
    earlier: &Known,
) -> Result<Vars, String> {
    let mut out: Vars = Vec::new();
    let mut rest = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut line = 1usize;
    let mut budget = MAX_EXPANDED;
    loop {
        // The next statement: past blank space and comment lines.
        let start = rest.trim_start();
        line += rest[..rest.len() - start.len()].matches('\n').count();
        rest = start;
        if rest.is_empty() {
            return Ok(out);
        }
        // The statement's first line, which its errors name.
        let at = line;
        if rest.starts_with('#') {
            rest = rest.find('\n').map_or("", |i| &rest[i..]);
            continue;
        }
        if let Some(r) = rest.strip_prefix("export")
            && r.starts_with(blank)
        {
            rest = r.trim_start_matches(blank);
        }
        // The key: up to `=`, `:` or the line's end (a key on its own).
        let mut end = None;
        for (i, c) in rest.char_indices() {
            match c {
                '=' | ':' | '\n' => {
                    end = Some((i, c));
                    break;
                }
                c if blank(c) => {}
                '_' | '.' | '-' | '[' | ']' => {}
                c if c.is_alphanumeric() => {}
                c => {
                    return Err(format!(
                        "line {at}: the key has {}: a key is letters, digits and _ . - [ ]",
                        what_char(c)
                    ));
                }
            }
        }
        let (key, sep) = match end {
            Some((i, c)) => (&rest[..i], Some(c)),
            None => (rest, None),
        };
        let key = key.trim_end_matches(blank);
        if key.contains(blank) {
            return Err(format!("line {at}: a key cannot contain a blank"));
        }
        if key.is_empty() {
            return Err(format!(
                "line {at}: no key before the {}",
                sep.unwrap_or('=')
            ));
        }
        let inherited = !matches!(sep, Some('=' | ':'));
        let after = match end {
            Some((i, c)) => &rest[i + c.len_utf8()..],
            None => "",
        };
        if inherited {
            // `KEY` alone: its value from the lookup, or none.
            if let Some(v) = lookup(key) {
                out.push((key.to_string(), v));
            }
            line += 1;
            rest = after;
            continue;
        }
        let after = after.trim_start_matches(blank);
        let (raw_value, quote, next) = match after.chars().next() {
            Some(q @ ('"' | '\'')) => {
                let (v, used, lines) = quoted(&after[1..], q)
                    .ok_or_else(|| format!("line {at}: an unterminated quoted value"))?;
                line += lines;
                (v, Some(q), &after[1 + used..])
            }
            _ => {
                let (v, next) = after.split_once('\n').unwrap_or((after, ""));
                line += 1;
                let v = v.split_once(" #").map_or(v, |(v, _)| v);
                (v.trim_end().to_string(), None, next)
            }
        };
        let value = match quote {
            Some('\'') => raw_value,
            Some(_) => expand(&escapes(&raw_value), &out, lookup, earlier, &mut budget)
                .map_err(|e| format!("line {at}: {e}"))?,
            None => expand(&raw_value, &out, lookup, earlier, &mut budget)
                .map_err(|e| format!("line {at}: {e}"))?,
        };
        if value.contains('\0') {
            return Err(format!("line {at}: the value contains a NUL byte"));
        }
        out.push((key.to_string(), value));
        rest = next;
    }
}

/// A quoted value after its opening quote `q`: its text (an escaped quote
/// unescaped, every other escape kept for [`escapes`]), the bytes up to
/// and with the closing quote, and the line breaks within; `None` if it is
/// never closed.
fn quoted(s: &str, q: char) -> Option<(String, usize, usize)> {
    let mut v = String::new();
    let mut escaped = false;
    let mut lines = 0;
    for (i, c) in s.char_indices() {
        if c == '\n' {
            lines += 1;
        }
        if c == q && !escaped {
            return Some((v, i + c.len_utf8(), lines));
        }
        if c == '\\' && !escaped {
            escaped = true;
            continue;
        }
        if escaped && c != q {
            v.push('\\');
        }
        escaped = false;
        v.push(c);
    }
    None
}

/// A double-quoted value's escapes: `\a \b \f \n \r \t \v`, `\\`, `\"`,
/// `\$` (a literal `$`) and `\0` with three octal digits; any other
/// backslash is kept, as Compose keeps it.
fn escapes(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('\\') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        let mut chars = after.chars();
        let Some(c) = chars.next() else {
            out.push('\\');
            return out;
        };
        let plain = match c {
            'a' => Some("\u{7}"),
            'b' => Some("\u{8}"),
            'f' => Some("\u{c}"),
            'n' => Some("\n"),
            'r' => Some("\r"),
            't' => Some("\t"),
            'v' => Some("\u{b}"),
            '\\' => Some("\\"),
            '"' => Some("\""),
            // `$$`: the interpolation's literal `$`.
            '$' => Some("$$"),
            _ => None,
        };
        if let Some(p) = plain {
            out.push_str(p);
            rest = &after[1..];
            continue;
        }
        if c == '0' {
            // Up to three digits: three octal ones up to 0377 are that
            // byte's character; otherwise the 0 goes, the rest is kept.
            let digits: String = after[1..]
                .chars()
                .take(3)
                .take_while(char::is_ascii_digit)
                .collect();
            let code = (digits.len() == 3)
                .then(|| u32::from_str_radix(&digits, 8).ok())
                .flatten()
                .filter(|v| *v <= 0o377)
                .and_then(char::from_u32);
            match code {
                Some(ch) => out.push(ch),
                None => {
                    out.push('\\');
                    out.push_str(&digits);
                }
            }
            rest = &after[1 + digits.len()..];
            continue;
        }
        out.push('\\');
        rest = after;
    }
    out.push_str(rest);
    out
}

/// A value interpolated: a variable from `lookup`, then the file's
/// keys so far (the last given), then the earlier files'; within what is
/// left of the budget.
fn expand(
    v: &str,
    so_far: &Vars,
    lookup: &dyn Fn(&str) -> Option<String>,
    earlier: &Known,
    budget: &mut usize,
) -> Result<String, String> {
    let find = |name: &str| {
        lookup(name)
            .or_else(|| {
                so_far
                    .iter()
                    .rev()
                    .find(|(k, _)| k == name)
                    .map(|(_, v)| v.clone())
            })
            .or_else(|| earlier.get(name).cloned())
    };
    let got = interpolate::interpolate(v, &find, &mut Vec::new(), *budget)
        .map_err(|e| e.without_text())?;
    *budget -= got.len();
    Ok(got)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(v: &[(&str, &str)]) -> Vars {
        v.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn read_raw(text: &[u8]) -> Result<Vars, String> {
        read(text, Format::Raw, &env, &Known::new())
    }

    fn read_compose(text: &[u8]) -> Result<Vars, String> {
        read(text, Format::Compose, &env, &Known::new())
    }

    fn env(name: &str) -> Option<String> {
        match name {
            "SET" => Some("v".into()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    #[test]
    fn raw_files_take_each_value_to_the_end_of_its_line() {
        let got =
            read_raw(b"# c\n\nA=1\nB= two words \r\nC=x=y\nD=\"q\" # not a comment\n").unwrap();
        assert_eq!(
            got,
            pairs(&[
                ("A", "1"),
                ("B", " two words "),
                ("C", "x=y"),
                ("D", "\"q\" # not a comment")
            ])
        );
        let vars = read_raw(b"VAR.WITH.DOTS=1\nVAR-WITH-DASHES=2\n9LIVES=3\n").unwrap();
        assert_eq!(vars.len(), 3);
        for (text, needle) in [
            ("A=1\nnovalue\n", "line 2: expected KEY=VALUE"),
            ("A=1\nB=x\0y\n", "line 2: the value contains a NUL byte"),
            ("A=1\n=hunter2\n", "line 2: no key before the ="),
            ("A=1\nexport B=2\n", "\"export\" is followed by a space"),
        ] {
            let e = read_raw(text.as_bytes()).unwrap_err();
            assert!(e.contains(needle), "{text:?}: {e}");
        }
    }

    #[test]
    fn a_bad_env_key_is_named_clipped_and_its_line_never_echoed() {
        let k = ": a key has no blank or control character";
        let cases = [
            (
                "DB_PASS hunter2=x",
                "the key \"DB_PASS\" is followed by a space",
            ),
            (
                "export PW=hunter2",
                "the key \"export\" is followed by a space",
            ),
            (
                "ABCDEFGHIJKLMNOPQRSThunter2 x=1",
                "the key \"ABCDEFGHIJKLMNOP…\" is followed by a space",
            ),
            (
                "pw\x01hunter2=x",
                "the key \"pw\" is followed by a control character",
            ),
        ];
        for (line, says) in cases {
            let e = read_raw(format!("A=1\n{line}\n").as_bytes()).unwrap_err();
            assert_eq!(e, format!("line 2: {says}{k}"), "{line}");
        }
        let e = read_raw(b"A=1\n=hunter2\n").unwrap_err();
        assert_eq!(e, "line 2: no key before the =");
        // Names Compose and the engine take: dots, dashes, a digit first.
        let vars = read_raw(b"VAR.WITH.DOTS=1\nVAR-WITH-DASHES=2\n9LIVES=3\n").unwrap();
        let names: Vec<&str> = vars.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(names, ["VAR.WITH.DOTS", "VAR-WITH-DASHES", "9LIVES"]);
    }

    #[test]
    fn compose_files_read_as_compose_reads_them() {
        // (file, the variables), one rule a line.
        let cases: &[(&str, &[(&str, &str)])] = &[
            ("A=1\n", &[("A", "1")]),
            ("# comment\n\n  A=1\n", &[("A", "1")]),
            ("export A=1\n", &[("A", "1")]),
            ("exported=1\n", &[("exported", "1")]),
            ("A = 1 \n", &[("A", "1")]),
            ("KEY= 3\n", &[("KEY", "3")]),
            ("A: yaml\n", &[("A", "yaml")]),
            ("A=v # comment\n", &[("A", "v")]),
            ("A=v#no\n", &[("A", "v#no")]),
            ("A= #c\n", &[("A", "#c")]),
            ("A=\n", &[("A", "")]),
            ("A='lit ${SET} \\n'\n", &[("A", "lit ${SET} \\n")]),
            ("A='it\\'s'\n", &[("A", "it's")]),
            ("A=\"dq \\\"x\\\" \\n ${SET}\"\n", &[("A", "dq \"x\" \n v")]),
            ("A=\"\\$SET \\\\ \\0101 \\q\"\n", &[("A", "$SET \\ A \\q")]),
            (
                "A=\"two\nlines\"\nB=2\n",
                &[("A", "two\nlines"), ("B", "2")],
            ),
            ("A='two\nlines'\n", &[("A", "two\nlines")]),
            ("A=\"x\" # after\n", &[("A", "x")]),
            ("A=x\\0101\n", &[("A", "x\\0101")]),
            (
                "A=1\nB=${A}-$A-${NOPE:-d}-${SET}\n",
                &[("A", "1"), ("B", "1-1-d-v")],
            ),
            ("SET=file\nB=${SET}\n", &[("SET", "file"), ("B", "v")]),
            ("A=${EMPTY:+x}${EMPTY+y}${SET:+z}\n", &[("A", "yz")]),
            ("A=$$literal\n", &[("A", "$literal")]),
            ("A=1\nA=2\n", &[("A", "1"), ("A", "2")]),
            ("SET\nNOPE\n", &[("SET", "v")]),
            ("SET", &[("SET", "v")]),
            (
                "VAR.WITH.DOTS=1\nVAR-WITH-DASHES=2\nA[0]=3\n",
                &[
                    ("VAR.WITH.DOTS", "1"),
                    ("VAR-WITH-DASHES", "2"),
                    ("A[0]", "3"),
                ],
            ),
            ("\u{feff}A=1\r\nB=2\r\n", &[("A", "1"), ("B", "2")]),
        ];
        for (text, want) in cases {
            let got = read_compose(text.as_bytes()).unwrap_or_else(|e| panic!("{text:?}: {e}"));
            assert_eq!(got, pairs(want), "{text:?}");
        }
    }

    #[test]
    fn a_reference_looks_in_the_lookup_then_the_file_then_the_files_before() {
        let earlier: Known = [("E", "earlier"), ("F", "earlier"), ("SET", "earlier")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let got = read(
            b"F=file\nA=${SET}/${F}/${E}/${NONE}\nE\n",
            Format::Compose,
            &env,
            &earlier,
        )
        .unwrap();
        // A key on its own is not taken from the files before.
        assert_eq!(got, pairs(&[("F", "file"), ("A", "v/file/earlier/")]));
    }

    #[test]
    fn a_compose_file_s_errors_name_the_line_and_never_a_value() {
        for (text, needle) in [
            ("A=1\nB='hunter2\n", "line 2: an unterminated quoted value"),
            (
                "A=1\n\nB=\"hunter2\n",
                "line 3: an unterminated quoted value",
            ),
            ("A=\"x\ny\"\nB=${hunter2\n", "line 3: an unclosed ${"),
            ("A=1\nhunter 2=x\n", "line 2: a key cannot contain a blank"),
            ("A=1\nhunter2!=x\n", "line 2: the key has '!'"),
            ("=hunter2\n", "line 1: no key before the ="),
            (
                "A=${X:?hunter2}\n",
                "line 1: required variable X is missing a value",
            ),
            ("A=pass$\n", "line 1: a $ not followed by a name"),
        ] {
            let e = read_compose(text.as_bytes()).unwrap_err();
            assert!(e.contains(needle), "{text:?}: {e}");
            assert!(!e.contains("hunter"), "{text:?}: {e}");
        }
        let e = read_compose(b"A=\xff\n").unwrap_err();
        assert_eq!(e, "not UTF-8 text");
        // Interpolation is bounded.
        let doubling: String = (0..30)
            .map(|i| format!("V{}=${{V{i}}}${{V{i}}}\n", i + 1))
            .collect();
        let e = read_compose(format!("V0=xxxxxxxx\n{doubling}").as_bytes()).unwrap_err();
        assert!(e.contains("expand to more than"), "{e}");
    }

    #[test]
    fn formats_are_named_as_intentions_name_them() {
        for f in [Format::Raw, Format::Compose] {
            let j = serde_json::to_value(f).unwrap();
            assert_eq!(j, f.as_str());
            assert_eq!(serde_json::from_value::<Format>(j).unwrap(), f);
        }
        assert_eq!(Format::default(), Format::Raw);
    }
}
