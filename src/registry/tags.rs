//! A tag list read as it streams (pure): the tags of
//! `{"name": …, "tags": ["a", "b", …]}` are handed on one by one as their
//! bytes arrive, so a page of any size costs one tag's bytes of memory.
//! Only the structure is checked (brackets balanced, strings closed, one
//! top-level object); a string with an escape or longer than a tag can be
//! is no tag and is passed over.

/// The longest tag (the Distribution spec's 128, with room).
const MAX_TAG: usize = 255;
/// The deepest nesting read.
const MAX_DEPTH: u32 = 32;

/// The scanner's state between chunks.
#[derive(Debug, Default)]
pub struct TagScan {
    depth: u32,
    seen_top: bool,
    in_string: bool,
    escape: bool,
    /// The string being read, up to [`MAX_TAG`] bytes.
    buf: Vec<u8>,
    /// Whether the string being read is no tag (too long, an escape).
    spoilt: bool,
    /// At depth 1: a key is expected next (not a value).
    expect_key: bool,
    /// At depth 1: the last key read was `tags`.
    key_is_tags: bool,
    /// Inside the `tags` array.
    in_tags: bool,
    error: Option<&'static str>,
}

impl TagScan {
    /// Reads a chunk, handing every complete tag to `tag`.
    pub fn feed(&mut self, chunk: &[u8], tag: &mut dyn FnMut(&str)) {
        for &b in chunk {
            if self.error.is_some() {
                return;
            }
            if self.in_string {
                self.string_byte(b, tag);
                continue;
            }
            match b {
                b'"' => {
                    self.in_string = true;
                    self.buf.clear();
                    self.spoilt = false;
                }
                b'{' | b'[' => {
                    if self.depth == 0 {
                        if self.seen_top || b != b'{' {
                            self.error = Some("not one JSON object");
                            return;
                        }
                        self.seen_top = true;
                        self.expect_key = true;
                    }
                    if self.depth == 1 && b == b'[' && !self.expect_key && self.key_is_tags {
                        self.in_tags = true;
                    }
                    self.depth += 1;
                    if self.depth > MAX_DEPTH {
                        self.error = Some("nested too deep");
                    }
                }
                b'}' | b']' => {
                    if self.depth == 0 {
                        self.error = Some("a bracket closes what was never opened");
                        return;
                    }
                    self.depth -= 1;
                    if self.depth == 1 {
                        self.in_tags = false;
                    }
                }
                b',' if self.depth == 1 => self.expect_key = true,
                b':' if self.depth == 1 => self.expect_key = false,
                b' ' | b'\t' | b'\r' | b'\n' => {}
                _ if self.depth == 0 => {
                    self.error = Some("not one JSON object");
                    return;
                }
                _ => {}
            }
        }
    }

    fn string_byte(&mut self, b: u8, tag: &mut dyn FnMut(&str)) {
        if self.escape {
            self.escape = false;
            return;
        }
        match b {
            b'\\' => {
                self.escape = true;
                self.spoilt = true;
            }
            b'"' => {
                self.in_string = false;
                if self.depth == 1 && self.expect_key {
                    self.key_is_tags = !self.spoilt && self.buf == b"tags";
                } else if self.depth == 2 && self.in_tags && !self.spoilt {
                    if let Ok(t) = std::str::from_utf8(&self.buf) {
                        tag(t);
                    }
                }
            }
            _ if self.buf.len() < MAX_TAG => self.buf.push(b),
            _ => self.spoilt = true,
        }
    }

    /// Says whether what was read is a whole tag list.
    pub fn finish(&self) -> Result<(), &'static str> {
        if let Some(e) = self.error {
            return Err(e);
        }
        if !self.seen_top || self.depth != 0 || self.in_string {
            return Err("it ends before its JSON does");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan(chunks: &[&str]) -> Result<Vec<String>, &'static str> {
        let mut s = TagScan::default();
        let mut out = Vec::new();
        for c in chunks {
            s.feed(c.as_bytes(), &mut |t| out.push(t.to_string()));
        }
        s.finish().map(|()| out)
    }

    #[test]
    fn tags_are_read_as_they_stream() {
        let long = format!(r#"{{"tags": ["{}", "1.0.0"]}}"#, "a".repeat(300));
        let ok = |v: &[&str]| Ok(v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        for (chunks, want) in [
            (
                vec![r#"{"name":"a/b","tags":["1.0.0","v2"]}"#],
                ok(&["1.0.0", "v2"]),
            ),
            (
                vec![r#"{"name":"a/b","ta"#, r#"gs":["1.0"#, r#".0","2"]}"#],
                ok(&["1.0.0", "2"]),
            ),
            (vec![r#"{"tags": null, "name": "x"}"#], ok(&[])),
            (vec![r#"{"name": "tags", "tags": ["x"]}"#], ok(&["x"])),
            (vec![r#"{"other": ["no"], "tags": ["yes"]}"#], ok(&["yes"])),
            (
                vec![r#"{"meta": {"tags": ["deep"]}, "tags": ["top"]}"#],
                ok(&["top"]),
            ),
            (
                vec![r#"{"tags": ["a\"b", "c\\d", "ok", {"x": "y"}, ["z"]]}"#],
                ok(&["ok"]),
            ),
            (vec![r#"{"t\u0061gs": ["escaped key"]}"#], ok(&[])),
            (vec![&long], ok(&["1.0.0"])),
            (
                vec![r#"{"tags": ["1.0.0""#],
                Err("it ends before its JSON does"),
            ),
            (
                vec![r#"{"tags": ["1.0.0"]"#],
                Err("it ends before its JSON does"),
            ),
            (vec![""], Err("it ends before its JSON does")),
            (vec![r#"["1.0.0"]"#], Err("not one JSON object")),
            (vec![r#"{} {}"#], Err("not one JSON object")),
            (vec![r#"{}x"#], Err("not one JSON object")),
            (
                vec![r#"{}]"#],
                Err("a bracket closes what was never opened"),
            ),
            (
                vec![&format!("{{\"a\":{}", "[".repeat(40))],
                Err("nested too deep"),
            ),
        ] {
            assert_eq!(scan(&chunks), want, "{chunks:?}");
        }
    }
}
