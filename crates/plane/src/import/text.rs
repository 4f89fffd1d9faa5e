//! The command-line words Compose splits a string `command` or
//! `entrypoint` into (Python's `shlex.split`, not a shell). Its other rules
//! for text, variable interpolation and the `.env` file, are the agent's
//! too: `model::interpolate` and `model::env_file`.

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
