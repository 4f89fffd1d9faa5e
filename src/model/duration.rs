//! Durations as the config and intentions write them: `250ms`, `10s`,
//! `5m`, `1h` (a bare number is seconds), bounded so that time arithmetic
//! on them never overflows.

use std::time::Duration;

/// Parses `250ms`, `10s`, `5m`, `1h` (a bare number is seconds).
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (num, unit) = s
        .find(|c: char| !c.is_ascii_digit())
        .map_or((s, "s"), |i| (&s[..i], &s[i..]));
    let n: u64 = num
        .parse()
        .map_err(|_| format!("invalid duration {s:?}: expected e.g. 500ms, 10s, 5m, 1h"))?;
    let ms_per_unit: u64 = match unit {
        "ms" => 1,
        "s" => 1000,
        "m" => 60_000,
        "h" => 3_600_000,
        _ => {
            return Err(format!(
                "invalid duration {s:?}: unit must be ms, s, m or h"
            ));
        }
    };
    let d = n
        .checked_mul(ms_per_unit)
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
}
