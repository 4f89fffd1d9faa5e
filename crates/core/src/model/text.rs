//! Text a foreign party wrote, made fit to keep and say: clipped to a
//! bound at a character boundary, saying how much was cut; and escaped for
//! a terminal, so that what a report says cannot move the cursor, colour,
//! rewrite or add a line of what the operator reads.

/// `s`, cut to at most `max` bytes at a character boundary, saying how much
/// was cut.
pub fn clip(s: &str, max: usize) -> std::borrow::Cow<'_, str> {
    if s.len() <= max {
        return s.into();
    }
    let mut end = max.saturating_sub(32);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes cut)", &s[..end], s.len() - end).into()
}

/// `s` as a terminal shows it safely, on one line: control characters
/// (C0, DEL, C1: ESC, CR, LF, tab among them) and the marks that reorder
/// text (bidi overrides and isolates) written as escapes (`\e`, `\r`,
/// `\n`, `\t`, `\u{…}`), and a backslash doubled so that no escape can be
/// faked. Text with none of them is given back as it is.
pub fn escape(s: &str) -> std::borrow::Cow<'_, str> {
    let unsafe_char = |c: char| {
        c.is_control()
            || c == '\\'
            || matches!(c, '\u{61c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
    };
    if !s.contains(unsafe_char) {
        return s.into();
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{1b}' => out.push_str("\\e"),
            c if unsafe_char(c) => out.push_str(&format!("\\u{{{:x}}}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.into()
}

#[cfg(test)]
mod tests {
    use super::{clip, escape};

    #[test]
    fn text_for_a_terminal_is_escaped_on_one_line() {
        // (text, as shown)
        #[rustfmt::skip]
        let cases = [
            ("edge-1", "edge-1"),
            ("édge ✓", "édge ✓"),
            ("\u{1b}[31mred\u{1b}[0m", "\\e[31mred\\e[0m"),
            ("ok\rfailing 0", "ok\\rfailing 0"),
            ("a\nfailing 0\n", "a\\nfailing 0\\n"),
            ("tab\there", "tab\\there"),
            ("bell\u{7}nul\u{0}del\u{7f}", "bell\\u{7}nul\\u{0}del\\u{7f}"),
            ("csi\u{9b}2J", "csi\\u{9b}2J"),                 // C1's CSI
            ("abc\u{202e}fed", "abc\\u{202e}fed"),           // a right-to-left override
            ("\u{2066}x\u{2069}", "\\u{2066}x\\u{2069}"),
            ("a\\nb", "a\\\\nb"),                           // a backslash: no escape faked
        ];
        for (text, shown) in cases {
            assert_eq!(escape(text), shown, "{text:?}");
        }
    }

    #[test]
    fn clipping_keeps_short_text_and_cuts_long_text_at_a_character() {
        assert_eq!(clip("short", 64), "short");
        let long = "é".repeat(100);
        let c = clip(&long, 64);
        assert!(c.len() <= 64, "{c}");
        assert!(c.ends_with("bytes cut)"), "{c}");
    }
}
