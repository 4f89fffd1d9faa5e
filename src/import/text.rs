//! Compose's rules for text: variable interpolation (`$VAR`, `${VAR}`, `${VAR:-default}`,
//! `${VAR-default}`, `${VAR:?error}`, `${VAR?error}`, `${VAR:+other}`,
//! `${VAR+other}`, `$$` for a literal `$`), the `.env` file Compose reads
//! next to the Compose file, and the command-line words Compose splits a
//! string `command` or `entrypoint` into (Python's `shlex.split`, not a
//! shell).

/// The deepest nesting of `${…}` inside a default or alternative
/// (`${A:-${B:-…}}`) that is interpolated; deeper is refused.
pub const MAX_NESTING: usize = 32;
/// The most bytes the interpolated strings of one Compose file may come
/// to, all together (a variable used a million times is as many copies).
pub const MAX_EXPANDED: usize = 16 << 20;

/// Interpolates one string into at most `max_len` bytes. `lookup` gives a
/// variable's value (`None`: unset); every variable used unset, without a
/// default, is pushed to `unset` (it reads as the empty string, as Compose
/// reads it).
pub fn interpolate(
    s: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
    unset: &mut Vec<String>,
    max_len: usize,
) -> Result<String, String> {
    interpolate_at(
        s,
        &mut Cx {
            lookup,
            unset,
            max_len,
        },
        0,
    )
}

/// What every level of one interpolation shares.
struct Cx<'a> {
    lookup: &'a dyn Fn(&str) -> Option<String>,
    unset: &'a mut Vec<String>,
    max_len: usize,
}

/// `out` with `more` added, within the bound.
fn push(out: &mut String, more: &str, max_len: usize) -> Result<(), String> {
    if out.len() + more.len() > max_len {
        return Err(format!("the variables expand to more than {max_len} bytes"));
    }
    out.push_str(more);
    Ok(())
}

fn interpolate_at(s: &str, cx: &mut Cx<'_>, depth: usize) -> Result<String, String> {
    let mut out = String::with_capacity(s.len().min(cx.max_len));
    let mut rest = s;
    while let Some(i) = rest.find('$') {
        push(&mut out, &rest[..i], cx.max_len)?;
        let after = &rest[i + 1..];
        if let Some(r) = after.strip_prefix('$') {
            push(&mut out, "$", cx.max_len)?;
            rest = r;
        } else if let Some(body) = after.strip_prefix('{') {
            if depth >= MAX_NESTING {
                return Err(format!("${{…}} nested deeper than {MAX_NESTING} levels"));
            }
            let end = closing_brace(body)
                .ok_or_else(|| "an unclosed ${: write $$ for a literal $".to_string())?;
            let v = braced(&body[..end], cx, depth)?;
            push(&mut out, &v, cx.max_len)?;
            rest = &body[end + 1..];
        } else {
            let n = name_len(after);
            if n == 0 {
                return Err(
                    "a $ not followed by a name, {…} or $: write $$ for a literal $".into(),
                );
            }
            match (cx.lookup)(&after[..n]) {
                Some(v) => push(&mut out, &v, cx.max_len)?,
                None => cx.unset.push(after[..n].to_string()),
            }
            rest = &after[n..];
        }
    }
    push(&mut out, rest, cx.max_len)?;
    Ok(out)
}

/// The length of the variable name `s` starts with (0: none).
fn name_len(s: &str) -> usize {
    s.bytes()
        .enumerate()
        .take_while(|(i, b)| {
            *b == b'_' || b.is_ascii_alphabetic() || (*i > 0 && b.is_ascii_digit())
        })
        .count()
}

/// Where the `}` closing a `${` is in `body` (the text after `${`), nested
/// braces counted.
fn closing_brace(body: &str) -> Option<usize> {
    let mut depth = 0usize;
    for (i, c) in body.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => return Some(i),
            '}' => depth -= 1,
            _ => {}
        }
    }
    None
}

/// The inside of `${…}`, at `depth` levels of nesting.
fn braced(inner: &str, cx: &mut Cx<'_>, depth: usize) -> Result<String, String> {
    let n = name_len(inner);
    let name = &inner[..n];
    if n == 0 {
        return Err(format!(
            "${{{}}}: a variable name is [A-Za-z_][A-Za-z0-9_]*",
            clip(inner)
        ));
    }
    let op = &inner[n..];
    let value = (cx.lookup)(name);
    let set_nonempty = value.as_deref().is_some_and(|v| !v.is_empty());
    // The text after the operator is itself interpolated, when used.
    let mut word = |w: &str| interpolate_at(w, cx, depth + 1);
    let (ops, arg) = match op.char_indices().find(|(_, c)| "-?+".contains(*c)) {
        None if op.is_empty() => ("", ""),
        None => {
            return Err(format!("${{{}}}: not a variable substitution", clip(inner)));
        }
        Some((j, c)) => (&op[..j + c.len_utf8()], &op[j + c.len_utf8()..]),
    };
    Ok(match ops {
        "" => match value {
            Some(v) => v,
            None => {
                cx.unset.push(name.to_string());
                String::new()
            }
        },
        ":-" if set_nonempty => value.unwrap_or_default(),
        ":-" => word(arg)?,
        "-" => match value {
            Some(v) => v,
            None => word(arg)?,
        },
        ":?" if set_nonempty => value.unwrap_or_default(),
        "?" if value.is_some() => value.unwrap_or_default(),
        ":?" | "?" => {
            return Err(format!(
                "required variable {name} is missing a value: {}",
                word(arg)?
            ));
        }
        ":+" if set_nonempty => word(arg)?,
        ":+" => String::new(),
        "+" if value.is_some() => word(arg)?,
        "+" => String::new(),
        _ => {
            return Err(format!("${{{}}}: not a variable substitution", clip(inner)));
        }
    })
}

/// At most 64 characters of a piece of the file, for an error.
fn clip(s: &str) -> String {
    match s.char_indices().nth(64) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

/// A `.env` file's variables, in order: `KEY=VALUE` lines (an `export `
/// before the key is allowed), blank lines and `#` comments skipped. A
/// value in single quotes is literal; one in double quotes takes `\n`,
/// `\t`, `\"` and `\\`; an unquoted one ends before ` #`. `${VAR}` and
/// `${VAR:-default}` in an unquoted or double-quoted value are expanded
/// from `lookup` and the file's own earlier variables, as Compose's
/// reader does; a `$` in any other form is kept as written.
pub fn dotenv(
    text: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<(String, String)>, String> {
    let mut out: Vec<(String, String)> = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let line = line.strip_prefix("export ").unwrap_or(line).trim_start();
        let Some((key, value)) = line.split_once('=') else {
            return Err(format!("line {}: not KEY=VALUE", n + 1));
        };
        let key = key.trim();
        if name_len(key) != key.len() || key.is_empty() {
            return Err(format!("line {}: {key:?} is not a variable name", n + 1));
        }
        let value = value.trim();
        let expand = |v: &str| {
            expand_braced(v, &|name: &str| {
                lookup(name).or_else(|| {
                    out.iter()
                        .rev()
                        .find(|(k, _)| k == name)
                        .map(|(_, v)| v.clone())
                })
            })
        };
        let value = if let Some(q) = value.strip_prefix('\'') {
            q.strip_suffix('\'')
                .ok_or_else(|| format!("line {}: an unclosed '", n + 1))?
                .to_string()
        } else if let Some(q) = value.strip_prefix('"') {
            let q = q
                .strip_suffix('"')
                .ok_or_else(|| format!("line {}: an unclosed \"", n + 1))?;
            expand(&unescape(q))
        } else {
            let v = match value.find(" #") {
                Some(i) => value[..i].trim_end(),
                None => value,
            };
            expand(v)
        };
        out.push((key.to_string(), value));
    }
    Ok(out)
}

/// A double-quoted `.env` value's escapes.
fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some(c @ ('"' | '\\')) => out.push(c),
            Some(c) => {
                out.push('\\');
                out.push(c);
            }
            None => out.push('\\'),
        }
    }
    out
}

/// `${VAR}` and `${VAR:-default}` expanded; everything else as written.
fn expand_braced(s: &str, lookup: &dyn Fn(&str) -> Option<String>) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find("${") {
        out.push_str(&rest[..i]);
        let body = &rest[i + 2..];
        let n = name_len(body);
        let Some(end) = body.find('}') else {
            out.push_str(&rest[i..]);
            return out;
        };
        let (name, op) = body[..end].split_at(n.min(end));
        let value = lookup(name).filter(|v| !v.is_empty());
        match (n > 0, op) {
            (true, "") => out.push_str(&value.unwrap_or_default()),
            (true, o) if o.starts_with(":-") => {
                out.push_str(&value.unwrap_or_else(|| o[2..].to_string()))
            }
            _ => out.push_str(&rest[i..i + 2 + end + 1]),
        }
        rest = &body[end + 1..];
    }
    out.push_str(rest);
    out
}

/// Splits a command line into words as Python's `shlex.split` does (what
/// Compose does with a string `command` or `entrypoint`): blanks separate
/// words; `'…'` is literal; in `"…"` a backslash escapes only `"` and `\`;
/// outside quotes a backslash escapes any character. No variables, globs
/// or comments: this is not a shell.
pub fn split_words(s: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut word = String::new();
    // Whether a word is under way (`''` is an empty word).
    let mut in_word = false;
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => word.push(c),
                        None => return Err("no closing quotation (')".into()),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c @ ('"' | '\\')) => word.push(c),
                            Some(c) => {
                                word.push('\\');
                                word.push(c);
                            }
                            None => return Err("no closing quotation (\")".into()),
                        },
                        Some(c) => word.push(c),
                        None => return Err("no closing quotation (\")".into()),
                    }
                }
            }
            '\\' => {
                in_word = true;
                match chars.next() {
                    Some(c) => word.push(c),
                    None => return Err("no escaped character after the last \\".into()),
                }
            }
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        words.push(word);
    }
    Ok(words)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "SET" => Some("v".into()),
            "EMPTY" => Some(String::new()),
            "PORT" => Some("8080".into()),
            _ => None,
        }
    }

    #[test]
    fn variables_interpolate_as_compose_does() {
        let cases: &[(&str, &str, &[&str])] = &[
            ("plain", "plain", &[]),
            ("$SET/${SET}", "v/v", &[]),
            ("$$SET $$", "$SET $", &[]),
            ("a${UNSET}b$UNSET", "ab", &["UNSET", "UNSET"]),
            ("${SET:-d} ${EMPTY:-d} ${UNSET:-d}", "v d d", &[]),
            ("${SET-d} ${EMPTY-d} ${UNSET-d}", "v  d", &[]),
            ("${SET:+alt} ${EMPTY:+alt} ${UNSET:+alt}", "alt  ", &[]),
            ("${SET+alt} ${EMPTY+alt} ${UNSET+alt}", "alt alt ", &[]),
            ("${SET:?boom} ${EMPTY?boom}", "v ", &[]),
            ("${UNSET:-${PORT:-80}}", "8080", &[]),
            ("${UNSET:-${NOPE}}", "", &["NOPE"]),
            ("127.0.0.1:${PORT}:80", "127.0.0.1:8080:80", &[]),
            ("${SET}_x", "v_x", &[]),
            ("$SET_x", "", &["SET_x"]),
        ];
        for (text, want, want_unset) in cases {
            let mut unset = Vec::new();
            let got = interpolate(text, &env, &mut unset, 1 << 10)
                .unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(&got, want, "{text}");
            assert_eq!(&unset, want_unset, "{text}");
        }
        for (text, needle) in [
            (
                "${UNSET:?set it}",
                "required variable UNSET is missing a value: set it",
            ),
            ("${EMPTY:?}", "required variable EMPTY"),
            ("${UNSET?no}", "required variable UNSET"),
            ("a $ b", "write $$"),
            ("$1", "write $$"),
            ("${SET", "unclosed"),
            ("${1x}", "variable name"),
            ("${SET/x/y}", "not a variable substitution"),
        ] {
            let e = interpolate(text, &env, &mut Vec::new(), 1 << 10).unwrap_err();
            assert!(e.contains(needle), "{text}: {e}");
        }
    }

    #[test]
    fn nesting_and_expansion_are_bounded() {
        let nested =
            |levels: usize| format!("{}x{}", "${UNSET:-".repeat(levels), "}".repeat(levels));
        let big = |n: usize| "$PORT".repeat(n);
        // (text, within the bound, the error)
        let cases: Vec<(String, usize, Result<String, &str>)> = vec![
            (nested(MAX_NESTING), 64, Ok("x".into())),
            (
                nested(MAX_NESTING + 1),
                64,
                Err("nested deeper than 32 levels"),
            ),
            (nested(50_000), 64, Err("nested deeper than 32 levels")),
            (big(4), 16, Ok("8080".repeat(4))),
            (big(5), 16, Err("expand to more than 16 bytes")),
            (
                "${UNSET:-$PORT$PORT$PORT}".into(),
                8,
                Err("more than 8 bytes"),
            ),
            (
                format!("${{{}!}}", "A".repeat(100)),
                64,
                Err("not a variable substitution"),
            ),
        ];
        for (text, max, want) in cases {
            let got = interpolate(&text, &env, &mut Vec::new(), max);
            match (got, want) {
                (Ok(g), Ok(w)) => assert_eq!(g, w),
                (Err(e), Err(w)) => {
                    assert!(e.contains(w), "{e}");
                    assert!(e.len() < 200, "clipped: {e}");
                }
                (got, want) => panic!("{got:?}, not {want:?}"),
            }
        }
    }

    #[test]
    fn dotenv_files_read_as_compose_reads_them() {
        let text = "# comment\n\nA=1\nexport B = two words \nC='single ${A} $x'\nD=\"dq \\\"x\\\" \\n ${A}\"\nE=x #comment\nF=${A}-${NOPE:-d}-${SET}-$A\nG=\n";
        let got = dotenv(text, &env).unwrap();
        let want: Vec<(String, String)> = [
            ("A", "1"),
            ("B", "two words"),
            ("C", "single ${A} $x"),
            ("D", "dq \"x\" \n 1"),
            ("E", "x"),
            ("F", "1-d-v-$A"),
            ("G", ""),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert_eq!(got, want);
        for (text, needle) in [
            ("A\n", "line 1: not KEY=VALUE"),
            ("1A=x\n", "not a variable name"),
            ("A='x\n", "unclosed '"),
        ] {
            let e = dotenv(text, &env).unwrap_err();
            assert!(e.contains(needle), "{text}: {e}");
        }
    }

    #[test]
    fn command_lines_split_as_shlex_splits_them() {
        let cases: &[(&str, &[&str])] = &[
            ("", &[]),
            ("  ", &[]),
            ("echo hello", &["echo", "hello"]),
            (
                "sh -c 'echo \"a b\"; exit 1'",
                &["sh", "-c", "echo \"a b\"; exit 1"],
            ),
            ("a\"b c\"d", &["ab cd"]),
            ("a '' b", &["a", "", "b"]),
            ("x\\ y \\'z", &["x y", "'z"]),
            ("\"a\\\"b\\\\c\\n$HOME\"", &["a\"b\\c\\n$HOME"]),
            (
                "echo # not a comment",
                &["echo", "#", "not", "a", "comment"],
            ),
            ("a\tb\nc", &["a", "b", "c"]),
        ];
        for (text, want) in cases {
            assert_eq!(&split_words(text).unwrap(), want, "{text}");
        }
        for text in ["'open", "\"open", "end\\"] {
            assert!(split_words(text).is_err(), "{text}");
        }
    }
}
