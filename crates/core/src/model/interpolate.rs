//! Compose's variable interpolation, the one reader of `$` in text
//! stead takes from Compose: a Compose file's values, the `.env` file next
//! to it, and env files read by Compose's rules ([`super::env_file`]).
//! `$VAR`, `${VAR}`, `${VAR:-default}`, `${VAR-default}`, `${VAR:?error}`,
//! `${VAR?error}`, `${VAR:+other}`, `${VAR+other}`, nested in a default or
//! alternative, and `$$` for a literal `$`.

/// The deepest nesting of `${…}` inside a default or alternative
/// (`${A:-${B:-…}}`) that is interpolated; deeper is refused.
pub const MAX_NESTING: usize = 32;
/// The most bytes the interpolated strings of one Compose file may come
/// to, all together (a variable used a million times is as many copies).
pub const MAX_EXPANDED: usize = 16 << 20;

/// Why a string does not interpolate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// The result would pass the bound (bytes).
    TooLong(usize),
    /// `${…}` nested deeper than [`MAX_NESTING`].
    TooDeep,
    /// A `${` with no `}`.
    Unclosed,
    /// A `$` followed by none of a name, `{` or `$`.
    BareDollar,
    /// `${…}` whose name is not a variable name (the text, clipped).
    BadName(String),
    /// `${NAME…}` whose operator is none of Compose's (the text, clipped).
    NotSubstitution(String),
    /// `${NAME:?message}` (or `?`) with the variable unset or empty.
    Required { name: String, message: String },
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::BadName(t) => write!(f, "${{{t}}}: a variable name is [A-Za-z_][A-Za-z0-9_]*"),
            Error::NotSubstitution(t) => write!(f, "${{{t}}}: not a variable substitution"),
            Error::Required { name, message } => {
                write!(f, "required variable {name} is missing a value: {message}")
            }
            e => f.write_str(&e.without_text()),
        }
    }
}

impl Error {
    /// What is wrong, saying nothing of the text but a variable's name (for
    /// a file that may hold secrets).
    pub fn without_text(&self) -> String {
        match self {
            Error::TooLong(max) => format!("the variables expand to more than {max} bytes"),
            Error::TooDeep => format!("${{…}} nested deeper than {MAX_NESTING} levels"),
            Error::Unclosed => "an unclosed ${: write $$ for a literal $".into(),
            Error::BareDollar => {
                "a $ not followed by a name, {…} or $: write $$ for a literal $".into()
            }
            Error::BadName(_) => "a ${…} whose name is not [A-Za-z_][A-Za-z0-9_]*".into(),
            Error::NotSubstitution(_) => "a ${…} that is not a variable substitution".into(),
            Error::Required { name, .. } => format!("required variable {name} is missing a value"),
        }
    }
}

/// Interpolates one string into at most `max_len` bytes. `lookup` gives a
/// variable's value (`None`: unset); every variable used unset, without a
/// default, is pushed to `unset` (it reads as the empty string, as Compose
/// reads it).
pub fn interpolate(
    s: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
    unset: &mut Vec<String>,
    max_len: usize,
) -> Result<String, Error> {
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
fn push(out: &mut String, more: &str, max_len: usize) -> Result<(), Error> {
    if out.len() + more.len() > max_len {
        return Err(Error::TooLong(max_len));
    }
    out.push_str(more);
    Ok(())
}

fn interpolate_at(s: &str, cx: &mut Cx<'_>, depth: usize) -> Result<String, Error> {
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
                return Err(Error::TooDeep);
            }
            let end = closing_brace(body).ok_or(Error::Unclosed)?;
            let v = braced(&body[..end], cx, depth)?;
            push(&mut out, &v, cx.max_len)?;
            rest = &body[end + 1..];
        } else {
            let n = name_len(after);
            if n == 0 {
                return Err(Error::BareDollar);
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
fn braced(inner: &str, cx: &mut Cx<'_>, depth: usize) -> Result<String, Error> {
    let n = name_len(inner);
    let name = &inner[..n];
    if n == 0 {
        return Err(Error::BadName(clip(inner)));
    }
    let op = &inner[n..];
    let value = (cx.lookup)(name);
    let set_nonempty = value.as_deref().is_some_and(|v| !v.is_empty());
    // The text after the operator is itself interpolated, when used.
    let mut word = |w: &str| interpolate_at(w, cx, depth + 1);
    let (ops, arg) = match op.char_indices().find(|(_, c)| "-?+".contains(*c)) {
        None if op.is_empty() => ("", ""),
        None => {
            return Err(Error::NotSubstitution(clip(inner)));
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
            return Err(Error::Required {
                name: name.to_string(),
                message: word(arg)?,
            });
        }
        ":+" if set_nonempty => word(arg)?,
        ":+" => String::new(),
        "+" if value.is_some() => word(arg)?,
        "+" => String::new(),
        _ => return Err(Error::NotSubstitution(clip(inner))),
    })
}

/// At most 64 characters of a piece of the file, for an error.
fn clip(s: &str) -> String {
    match s.char_indices().nth(64) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
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
            let e = interpolate(text, &env, &mut Vec::new(), 1 << 10)
                .unwrap_err()
                .to_string();
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
                    let e = e.to_string();
                    assert!(e.contains(w), "{e}");
                    assert!(e.len() < 200, "clipped: {e}");
                }
                (got, want) => panic!("{got:?}, not {want:?}"),
            }
        }
    }

    #[test]
    fn an_error_without_text_says_nothing_of_the_text() {
        for text in ["${pass:word}", "${1secret}", "${X:?the secret is 42}"] {
            let e = interpolate(text, &|_| None, &mut Vec::new(), 1 << 10).unwrap_err();
            let said = e.without_text();
            for word in ["pass", "word", "secret", "42"] {
                assert!(!said.contains(word), "{text}: {said}");
            }
        }
    }
}
