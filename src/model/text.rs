//! Text a foreign party wrote, made fit to keep and say: clipped to a
//! bound at a character boundary, saying how much was cut.

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

#[cfg(test)]
mod tests {
    use super::clip;

    #[test]
    fn clipping_keeps_short_text_and_cuts_long_text_at_a_character() {
        assert_eq!(clip("short", 64), "short");
        let long = "é".repeat(100);
        let c = clip(&long, 64);
        assert!(c.len() <= 64, "{c}");
        assert!(c.ends_with("bytes cut)"), "{c}");
    }
}
