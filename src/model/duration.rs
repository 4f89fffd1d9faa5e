//! Durations as the config and intentions write them: `250ms`, `10s`,
//! `5m`, `1h` (a bare number is seconds), bounded so that time arithmetic
//! on them never overflows.

use std::time::Duration;

/// Parses `250ms`, `10s`, `5m`, `1h`, or several as Go and Compose write
/// them (`1m30s`, `1.5s`, `1h30m`); a bare number is seconds. Whole
/// milliseconds, more than zero, at most [`MAX_DURATION`].
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let bad = |why: &str| format!("invalid duration {s:?}: {why}");
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
        return within(s, s.parse::<u64>().ok().and_then(|n| n.checked_mul(1000)));
    }
    let mut rest = s;
    let mut total: u128 = 0;
    if rest.is_empty() {
        return Err(bad("expected e.g. 500ms, 10s, 5m, 1h or 1m30s"));
    }
    while !rest.is_empty() {
        let n = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(|| bad("a number needs a unit (ms, s, m or h) after the first"))?;
        let (num, after) = rest.split_at(n);
        let u = after
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after.len());
        let (unit, next) = after.split_at(u);
        let ms_per_unit: u128 = match unit {
            "ms" => 1,
            "s" => 1000,
            "m" => 60_000,
            "h" => 3_600_000,
            _ => return Err(bad("unit must be ms, s, m or h")),
        };
        let (whole, fraction) = num.split_once('.').unwrap_or((num, ""));
        if whole.is_empty() && fraction.is_empty() || fraction.contains('.') {
            return Err(bad("expected e.g. 500ms, 10s, 5m, 1h or 1m30s"));
        }
        let whole: u128 = if whole.is_empty() {
            0
        } else {
            whole.parse().map_err(|_| bad("must be at most 30 days"))?
        };
        // The fraction in whole milliseconds, exactly.
        let digits = fraction.len().min(30) as u32;
        let frac: u128 = if fraction.is_empty() {
            0
        } else {
            fraction
                .get(..digits as usize)
                .and_then(|f| f.parse().ok())
                .ok_or_else(|| bad("expected e.g. 500ms, 10s, 5m, 1h or 1m30s"))?
        };
        let scaled = frac * ms_per_unit;
        let ten = 10u128.pow(digits);
        if scaled % ten != 0 {
            return Err(bad("must be whole milliseconds"));
        }
        total = whole
            .checked_mul(ms_per_unit)
            .and_then(|w| w.checked_add(scaled / ten))
            .and_then(|w| w.checked_add(total))
            .ok_or_else(|| bad("must be at most 30 days"))?;
        rest = next;
    }
    within(s, u64::try_from(total).ok())
}

/// A parsed number of milliseconds, checked against the bounds.
fn within(s: &str, ms: Option<u64>) -> Result<Duration, String> {
    let d = ms
        .map(Duration::from_millis)
        .filter(|d| *d <= MAX_DURATION)
        .ok_or_else(|| format!("invalid duration {s:?}: must be at most 30 days"))?;
    if d.is_zero() {
        return Err(format!("invalid duration {s:?}: must be more than zero"));
    }
    Ok(d)
}

/// The longest duration any setting takes: time arithmetic on it never
/// overflows.
pub const MAX_DURATION: Duration = Duration::from_secs(30 * 86_400);

/// A duration as [`parse_duration`] reads it back.
pub fn format_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms % 3_600_000 == 0 {
        format!("{}h", ms / 3_600_000)
    } else if ms % 60_000 == 0 {
        format!("{}m", ms / 60_000)
    } else if ms % 1000 == 0 {
        format!("{}s", ms / 1000)
    } else {
        format!("{ms}ms")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formatted_durations_parse_back() {
        for s in ["250ms", "10s", "5m", "6h", "90s", "1500ms", "720h"] {
            let d = parse_duration(s).unwrap();
            assert_eq!(parse_duration(&format_duration(d)).unwrap(), d, "{s}");
        }
        assert_eq!(format_duration(Duration::from_secs(90)), "90s");
        assert_eq!(format_duration(Duration::from_secs(7200)), "2h");
    }

    #[test]
    fn several_units_and_fractions_as_compose_writes_them() {
        let ms = Duration::from_millis;
        for (s, d) in [
            ("1m30s", ms(90_000)),
            ("1h30m", ms(5_400_000)),
            ("1h2m3s4ms", ms(3_723_004)),
            ("1.5s", ms(1500)),
            ("0.25m", ms(15_000)),
            (".5s", ms(500)),
            ("2m0s", ms(120_000)),
            ("90", ms(90_000)),
            (" 10s ", ms(10_000)),
        ] {
            assert_eq!(parse_duration(s), Ok(d), "{s}");
        }
        for (s, why) in [
            ("", "expected"),
            ("0s", "more than zero"),
            ("0m0s", "more than zero"),
            ("1.0005s", "whole milliseconds"),
            ("1d", "unit must be"),
            ("10us", "unit must be"),
            ("1m30", "needs a unit"),
            ("1..5s", "expected"),
            ("s", "expected"),
            ("721h", "at most 30 days"),
            ("99999999999999999999999999999h", "at most 30 days"),
        ] {
            let e = parse_duration(s).unwrap_err();
            assert!(e.contains(why), "{s}: {e}");
        }
    }

    /// The config's and the intentions' durations, exactly: what is read,
    /// and what is refused with which words.
    #[test]
    fn setting_durations_exactly() {
        let ms = Duration::from_millis;
        for (s, d) in [
            ("250ms", ms(250)),
            ("1ms", ms(1)),
            ("10s", ms(10_000)),
            ("5m", ms(300_000)),
            ("1h", ms(3_600_000)),
            ("720h", MAX_DURATION),
            ("2592000", MAX_DURATION),
            ("1", ms(1000)),
            ("0.001s", ms(1)),
            ("1.5m", ms(90_000)),
            ("1.ms", ms(1)),
            ("30s30s", ms(60_000)),
            ("1m1h", ms(3_660_000)),
            ("\t5m\n", ms(300_000)),
            // Fraction digits past the 30th are not read.
            ("1.0000000000000000000000000000001s", ms(1000)),
        ] {
            assert_eq!(parse_duration(s), Ok(d), "{s:?}");
        }
        let form = "expected e.g. 500ms, 10s, 5m, 1h or 1m30s";
        let unit = "unit must be ms, s, m or h";
        let needs = "a number needs a unit (ms, s, m or h) after the first";
        let (long, zero) = ("must be at most 30 days", "must be more than zero");
        let whole = "must be whole milliseconds";
        for (s, why) in [
            ("", form),
            ("   ", form),
            ("s", form),
            (".s", form),
            ("1..5s", form),
            ("1s.s", form),
            ("1d", unit),
            ("1w", unit),
            ("10us", unit),
            ("1µs", unit),
            ("1S", unit),
            ("1 s", unit),
            ("-1s", unit),
            ("+1s", unit),
            ("x", unit),
            ("1s1d", unit),
            ("1m30", needs),
            ("1.5", needs),
            (".", needs),
            ("1.0005s", whole),
            ("0.5ms", whole),
            ("1.0005s1d", whole),
            ("721h", long),
            ("2592001", long),
            ("720h1ms", long),
            ("18446744073709551615", long),
            ("18446744073709551615s", long),
            ("999999999999999999999999999999999999999999h", long),
            ("0", zero),
            ("0s", zero),
            ("0m0s", zero),
            ("0.0001s", whole),
        ] {
            let trimmed = s.trim();
            assert_eq!(
                parse_duration(s),
                Err(format!("invalid duration {trimmed:?}: {why}")),
                "{s:?}"
            );
        }
    }
}
