//! Timestamps as the plane's documents write them: RFC 3339 (`2026-11-30T10:00:00Z`)
//! to and from unix seconds, without a date crate. The civil-date arithmetic
//! is Howard Hinnant's (`days_from_civil`, `civil_from_days`), exact over the
//! proleptic Gregorian calendar.

pub use crate::model::civil::{civil_from_days, days_from_civil};

/// Unix seconds (UTC) of an RFC 3339 timestamp:
/// `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`, `t` and `z` also in lower
/// case. The fraction is dropped (the time is rounded down to its second);
/// a leap second (`:60`) and a time before 1970 are refused.
pub fn parse_rfc3339(s: &str) -> Result<u64, String> {
    let bad = |why: &str| {
        // Not quoted back whole: the text may be anything.
        let shown: String = s.chars().take(40).collect();
        let more = if s.chars().count() > 40 { "…" } else { "" };
        format!("invalid timestamp {shown:?}{more}: {why}")
    };
    let form = "expected YYYY-MM-DDTHH:MM:SSZ or an offset such as +02:00";
    let b = s.as_bytes();
    // The fixed part: `YYYY-MM-DDTHH:MM:SS`, 19 bytes.
    if b.len() < 20
        || b[4] != b'-'
        || b[7] != b'-'
        || !matches!(b[10], b'T' | b't')
        || b[13] != b':'
        || b[16] != b':'
    {
        return Err(bad(form));
    }
    let num = |range: std::ops::Range<usize>| -> Result<i64, String> {
        let part = &b[range];
        if part.iter().all(u8::is_ascii_digit) {
            Ok(part.iter().fold(0i64, |n, d| n * 10 + i64::from(d - b'0')))
        } else {
            Err(bad(form))
        }
    };
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
    let mut rest = &b[19..];
    if let Some(fraction) = rest.strip_prefix(b".") {
        let digits = fraction.iter().take_while(|c| c.is_ascii_digit()).count();
        if digits == 0 {
            return Err(bad("a fraction of a second needs a digit after the dot"));
        }
        rest = &fraction[digits..];
    }
    let offset = match rest {
        b"Z" | b"z" => 0,
        [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2] => {
            let digits = [*h1, *h2, *m1, *m2];
            if !digits.iter().all(u8::is_ascii_digit) {
                return Err(bad(form));
            }
            let (oh, om) = (
                i64::from((h1 - b'0') * 10 + (h2 - b'0')),
                i64::from((m1 - b'0') * 10 + (m2 - b'0')),
            );
            if oh > 23 || om > 59 {
                return Err(bad("the offset must be at most 23:59"));
            }
            let secs = oh * 3600 + om * 60;
            if *sign == b'-' { -secs } else { secs }
        }
        _ => return Err(bad(form)),
    };
    if !(1..=12).contains(&month) {
        return Err(bad("the month must be 01-12"));
    }
    if day < 1 || day > days_in_month(year, month) {
        return Err(bad(&format!("{year:04}-{month:02} has no day {day:02}")));
    }
    if hour > 23 || minute > 59 || second > 59 {
        return Err(bad(
            "the time must be 00:00:00-23:59:59 (leap seconds are not taken)",
        ));
    }
    let secs =
        days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second - offset;
    u64::try_from(secs).map_err(|_| bad("before 1970-01-01T00:00:00Z"))
}

/// The RFC 3339 form of unix seconds, in UTC: `YYYY-MM-DDTHH:MM:SSZ`.
/// [`parse_rfc3339`] reads it back for every year up to 9999.
pub fn format_rfc3339(secs: u64) -> String {
    // Whole days fit an i64 for every u64 of seconds.
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

fn days_in_month(year: i64, month: i64) -> i64 {
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    match month {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_parse_to_unix_seconds() {
        for (s, secs) in [
            ("1970-01-01T00:00:00Z", 0),
            ("1970-01-01t00:00:01z", 1),
            ("2000-02-29T00:00:00Z", 951_782_400),
            ("2000-03-01T00:00:00Z", 951_868_800),
            ("2024-02-29T12:00:00Z", 1_709_208_000),
            ("2026-11-29T16:07:18Z", 1_795_968_438),
            ("2026-11-29T16:07:18.999999999Z", 1_795_968_438),
            ("2026-11-29T17:07:18+01:00", 1_795_968_438),
            ("2026-11-29T10:37:18-05:30", 1_795_968_438),
            ("1970-01-01T01:00:00+01:00", 0),
            ("1969-12-31T23:00:00-01:00", 0),
            ("2100-03-01T00:00:00Z", 4_107_542_400),
            ("9999-12-31T23:59:59Z", 253_402_300_799),
        ] {
            assert_eq!(parse_rfc3339(s), Ok(secs), "{s}");
        }
    }

    #[test]
    fn bad_timestamps_are_refused_saying_why() {
        for (s, why) in [
            ("", "expected YYYY-MM-DD"),
            ("2026-11-29", "expected YYYY-MM-DD"),
            ("2026-11-29T16:07:18", "expected YYYY-MM-DD"),
            ("2026-11-29 16:07:18Z", "expected YYYY-MM-DD"),
            ("2026-11-29T16:07:18+0100", "expected YYYY-MM-DD"),
            ("2026-11-29T16:07:18Z ", "expected YYYY-MM-DD"),
            ("2026-1a-29T16:07:18Z", "expected YYYY-MM-DD"),
            ("+026-11-29T16:07:18Z", "expected YYYY-MM-DD"),
            ("2026-11-29T16:07:18.Z", "a digit after the dot"),
            ("2026-13-01T00:00:00Z", "month must be 01-12"),
            ("2026-00-01T00:00:00Z", "month must be 01-12"),
            ("2025-02-29T00:00:00Z", "2025-02 has no day 29"),
            ("1900-02-29T00:00:00Z", "1900-02 has no day 29"),
            ("2026-04-31T00:00:00Z", "2026-04 has no day 31"),
            ("2026-04-00T00:00:00Z", "has no day 00"),
            ("2026-04-01T24:00:00Z", "00:00:00-23:59:59"),
            ("2016-12-31T23:59:60Z", "leap seconds"),
            ("2026-04-01T00:00:00+24:00", "at most 23:59"),
            ("1969-12-31T23:59:59Z", "before 1970"),
            ("1970-01-01T00:00:00+00:01", "before 1970"),
            ("0000-01-01T00:00:00Z", "before 1970"),
        ] {
            let e = parse_rfc3339(s).unwrap_err();
            assert!(e.contains(why), "{s}: {e}");
        }
        let e = parse_rfc3339(&"x".repeat(10_000)).unwrap_err();
        assert!(e.len() < 200, "not quoted back whole: {e}");
    }

    #[test]
    fn refusals_say_exactly() {
        let form = "expected YYYY-MM-DDTHH:MM:SSZ or an offset such as +02:00";
        let long = "x".repeat(41);
        let shown = format!("{:?}…", "x".repeat(40));
        for (s, e) in [
            ("", format!("invalid timestamp \"\": {form}")),
            (
                "2025-02-29T00:00:00Z",
                "invalid timestamp \"2025-02-29T00:00:00Z\": 2025-02 has no day 29".into(),
            ),
            (
                "1969-12-31T23:59:59Z",
                "invalid timestamp \"1969-12-31T23:59:59Z\": before 1970-01-01T00:00:00Z".into(),
            ),
            (&long, format!("invalid timestamp {shown}: {form}")),
        ] {
            assert_eq!(parse_rfc3339(s), Err(e), "{s:?}");
        }
    }

    #[test]
    fn seconds_format_as_utc() {
        for (secs, s) in [
            (0, "1970-01-01T00:00:00Z"),
            (951_782_400, "2000-02-29T00:00:00Z"),
            (1_795_968_438, "2026-11-29T16:07:18Z"),
            (253_402_300_799, "9999-12-31T23:59:59Z"),
        ] {
            assert_eq!(format_rfc3339(secs), s, "{secs}");
        }
        // The largest input formats (a year far past 9999) without panicking.
        assert!(format_rfc3339(u64::MAX).ends_with('Z'));
    }

    #[test]
    fn civil_days_round_trip_across_leap_years() {
        for days in -800_000..800_000 {
            let (y, m, d) = civil_from_days(days);
            assert!((1..=12).contains(&m) && (1..=days_in_month(y, m)).contains(&d));
            assert_eq!(days_from_civil(y, m, d), days);
        }
    }

    proptest::proptest! {
        #[test]
        fn formatted_timestamps_parse_back(secs in 0u64..253_402_300_800) {
            proptest::prop_assert_eq!(parse_rfc3339(&format_rfc3339(secs)), Ok(secs));
        }

        #[test]
        fn an_offset_names_the_same_instant(secs in 86_400u64..253_402_214_400, off in -1439i64..1440) {
            let local = secs as i64 + off * 60;
            let s = format_rfc3339(local as u64);
            let sign = if off < 0 { '-' } else { '+' };
            let s = format!("{}{sign}{:02}:{:02}", &s[..19], off.abs() / 60, off.abs() % 60);
            proptest::prop_assert_eq!(parse_rfc3339(&s), Ok(secs));
        }
    }
}
