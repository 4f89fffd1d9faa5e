//! Time as text, in one place, without a date crate and without the wall
//! clock (which `host/clock.rs` reads; here a "now" is always an argument):
//! - durations, one reader under a policy of units ([`DurationPolicy`]):
//!   the config's and the intentions' (`250ms`, `1m30s`, [`parse_duration`])
//!   and a signed document's lifetime (`30d`);
//! - civil (proleptic Gregorian) dates to and from days since 1970-01-01
//!   (Howard Hinnant's `days_from_civil` and `civil_from_days`, exact);
//! - RFC 3339, strict as the plane's documents are read and written
//!   ([`parse_rfc3339`], [`format_rfc3339`]), and lenient as the engine
//!   writes it ([`parse_engine_time_ns`]);
//! - HTTP dates (IMF-fixdate, [`parse_http_date`]) and `Retry-After`;
//! - the engine's human durations, as its status lines write them
//!   ([`parse_human_duration`]).

use std::time::Duration;

/// Which durations a reader takes, and what its refusals say. Every
/// policy reads a bare number as seconds and refuses zero.
#[derive(Debug)]
pub struct DurationPolicy {
    /// The units, each with its length in milliseconds.
    units: &'static [(&'static str, u64)],
    /// Go's and Compose's forms: a fraction (`1.5s`, in whole
    /// milliseconds) and several numbers with their units in a row
    /// (`1m30s`). Without them, one number and one unit.
    go_forms: bool,
    /// The longest duration taken.
    max: Duration,
    /// What a refusal says of a text that is no duration.
    expected: &'static str,
    /// What a refusal says of a duration over `max`.
    too_long: &'static str,
    /// What a refusal says of a zero duration.
    zero: &'static str,
}

/// The longest duration any setting takes: time arithmetic on it never
/// overflows.
pub const MAX_DURATION: Duration = Duration::from_secs(30 * 86_400);

impl DurationPolicy {
    /// The config's and the intentions' durations: `250ms`, `10s`, `5m`,
    /// `1h`, or several as Go and Compose write them (`1m30s`, `1.5s`,
    /// `1h30m`); at most [`MAX_DURATION`].
    pub const SETTING: DurationPolicy = DurationPolicy {
        units: &[("ms", 1), ("s", 1000), ("m", 60_000), ("h", 3_600_000)],
        go_forms: true,
        max: MAX_DURATION,
        expected: "expected e.g. 500ms, 10s, 5m, 1h or 1m30s",
        too_long: "must be at most 30 days",
        zero: "must be more than zero",
    };

    /// How long a signed document is good for: a number and one unit of
    /// `s`, `m`, `h` or `d`, from 1 s to 3650 days; every refusal but a
    /// unit's says the whole form.
    pub const LIFETIME: DurationPolicy = DurationPolicy {
        units: &[
            ("s", 1000),
            ("m", 60_000),
            ("h", 3_600_000),
            ("d", 86_400_000),
        ],
        go_forms: false,
        max: Duration::from_secs(3650 * 86_400),
        expected: LIFETIME_FORM,
        too_long: LIFETIME_FORM,
        zero: LIFETIME_FORM,
    };

    /// The unit names for a refusal: `ms, s, m or h`.
    fn unit_names(&self) -> String {
        let names: Vec<&str> = self.units.iter().map(|(name, _)| *name).collect();
        match names.split_last() {
            Some((last, [])) => last.to_string(),
            Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
            None => String::new(),
        }
    }

    /// A number of milliseconds checked against the bounds.
    fn within(&self, s: &str, ms: Option<u64>) -> Result<Duration, String> {
        let d = ms
            .map(Duration::from_millis)
            .filter(|d| *d <= self.max)
            .ok_or_else(|| refused(s, self.too_long))?;
        if d.is_zero() {
            return Err(refused(s, self.zero));
        }
        Ok(d)
    }
}

const LIFETIME_FORM: &str = "expected e.g. 30d or 12h, from 1s to 3650d";

fn refused(s: &str, why: &str) -> String {
    format!("invalid duration {s:?}: {why}")
}

/// A setting's duration ([`DurationPolicy::SETTING`]).
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    parse_duration_with(s, &DurationPolicy::SETTING)
}

/// Reads a duration as `policy` takes it, the whitespace around it trimmed.
pub fn parse_duration_with(s: &str, policy: &DurationPolicy) -> Result<Duration, String> {
    let s = s.trim();
    let bad = |why: &str| refused(s, why);
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
        return policy.within(s, s.parse::<u64>().ok().and_then(|n| n.checked_mul(1000)));
    }
    if s.is_empty() {
        return Err(bad(policy.expected));
    }
    let in_number = |c: char| c.is_ascii_digit() || policy.go_forms && c == '.';
    let mut rest = s;
    let mut total: u128 = 0;
    while !rest.is_empty() {
        let n = rest.find(|c: char| !in_number(c)).ok_or_else(|| {
            bad(&format!(
                "a number needs a unit ({}) after the first",
                policy.unit_names()
            ))
        })?;
        let (num, after) = rest.split_at(n);
        let u = if policy.go_forms {
            after.find(in_number).unwrap_or(after.len())
        } else {
            after.len()
        };
        let (unit, next) = after.split_at(u);
        let ms_per_unit = policy
            .units
            .iter()
            .find(|(name, _)| *name == unit)
            .map(|(_, ms)| u128::from(*ms))
            .ok_or_else(|| bad(&format!("unit must be {}", policy.unit_names())))?;
        let (whole, fraction) = num.split_once('.').unwrap_or((num, ""));
        if whole.is_empty() && fraction.is_empty() || fraction.contains('.') {
            return Err(bad(policy.expected));
        }
        let whole: u128 = if whole.is_empty() {
            0
        } else {
            whole.parse().map_err(|_| bad(policy.too_long))?
        };
        // The fraction in whole milliseconds, exactly.
        let digits = fraction.len().min(30) as u32;
        let frac: u128 = if fraction.is_empty() {
            0
        } else {
            fraction
                .get(..digits as usize)
                .and_then(|f| f.parse().ok())
                .ok_or_else(|| bad(policy.expected))?
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
            .ok_or_else(|| bad(policy.too_long))?;
        rest = next;
    }
    policy.within(s, u64::try_from(total).ok())
}

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

/// Seconds since midnight of a time of day written `HH:MM` (two digits
/// each); `24:00` too when `end_of_day` (a window's end).
pub fn time_of_day(t: &str, end_of_day: bool) -> Option<u32> {
    let (h, m) = t.split_once(':')?;
    if h.len() != 2 || m.len() != 2 {
        return None;
    }
    let (h, m): (u32, u32) = (h.parse().ok()?, m.parse().ok()?);
    ((h < 24 && m < 60) || (end_of_day && h == 24 && m == 0)).then_some(h * 3600 + m * 60)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Hinnant's
/// `days_from_civil`); `month` is 1-12, `day` 1-31.
pub fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The proleptic Gregorian date `(year, month, day)` of a count of days
/// since 1970-01-01 (Hinnant's `civil_from_days`).
pub fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
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

/// Unix seconds (UTC) of an RFC 3339 timestamp, strictly, as the plane's
/// documents write them (`2026-11-30T10:00:00Z`):
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

/// Nanoseconds since the epoch of an RFC 3339 time as the engine writes it
/// (`2026-11-29T16:07:18.013585123Z`: up to 9 fraction digits, `Z` or an
/// offset, none read as UTC), leniently. The engine's zero time
/// (`0001-01-01T00:00:00Z`), a time before 1970 and anything unreadable
/// give 0.
pub fn parse_engine_time_ns(s: &str) -> i64 {
    let parse = || -> Option<i64> {
        let (date, time) = s.split_once('T')?;
        let mut d = date.splitn(3, '-').map(|p| p.parse::<i64>().ok());
        let (y, m, day) = (d.next()??, d.next()??, d.next()??);
        let (clock, offset) = match time.find(['Z', '+', '-']) {
            Some(i) => (&time[..i], &time[i..]),
            None => (time, "Z"),
        };
        let (clock, fraction) = clock.split_once('.').unwrap_or((clock, ""));
        if fraction.len() > 9 || !fraction.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let nanos: i64 = format!("{fraction:0<9}").parse().ok()?;
        let mut c = clock.splitn(3, ':').map(|p| p.parse::<i64>().ok());
        let (hh, mm, ss) = (c.next()??, c.next()??, c.next()??);
        let off = if offset == "Z" {
            0
        } else {
            let sign = if offset.starts_with('-') { -1 } else { 1 };
            let (oh, om) = offset[1..].split_once(':')?;
            sign * (oh.parse::<i64>().ok()? * 3600 + om.parse::<i64>().ok()? * 60)
        };
        let days = days_from_civil(y, m, day);
        let secs = days * 86_400 + hh * 3600 + mm * 60 + ss - off;
        secs.checked_mul(1_000_000_000)?.checked_add(nanos)
    };
    parse().filter(|t| *t > 0).unwrap_or(0)
}

/// Unix seconds of an HTTP date as an IMF-fixdate
/// (`Sun, 06 Nov 1994 08:49:37 GMT`), the form every current server sends.
pub fn parse_http_date(s: &str) -> Option<u64> {
    let mut it = s.split_whitespace();
    let _weekday = it.next()?;
    let day: u32 = it.next()?.parse().ok()?;
    let month = match it.next()? {
        "Jan" => 1,
        "Feb" => 2,
        "Mar" => 3,
        "Apr" => 4,
        "May" => 5,
        "Jun" => 6,
        "Jul" => 7,
        "Aug" => 8,
        "Sep" => 9,
        "Oct" => 10,
        "Nov" => 11,
        "Dec" => 12,
        _ => return None,
    };
    let year: u32 = it.next()?.parse().ok()?;
    let time = it.next()?;
    if it.next()? != "GMT" {
        return None;
    }
    parse_rfc3339(&format!("{year:04}-{month:02}-{day:02}T{time}Z")).ok()
}

/// What a `Retry-After` asks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RetryAfter {
    /// A wait of this many seconds.
    Seconds(u64),
    /// A wait until this HTTP date, in unix seconds.
    Date(u64),
}

/// The longest wait a `Retry-After` is followed for.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(24 * 3600);

/// A `Retry-After`: seconds, or an HTTP date ([`parse_http_date`]).
pub fn parse_retry_after(v: &str) -> Option<RetryAfter> {
    let v = v.trim();
    match v.parse::<u64>() {
        Ok(secs) => Some(RetryAfter::Seconds(secs)),
        Err(_) => parse_http_date(v).map(RetryAfter::Date),
    }
}

impl RetryAfter {
    /// The wait asked from `now` (unix seconds), at most [`MAX_RETRY_AFTER`].
    pub fn wait(self, now: u64) -> Duration {
        let secs = match self {
            RetryAfter::Seconds(secs) => secs,
            RetryAfter::Date(at) => at.saturating_sub(now),
        };
        Duration::from_secs(secs).min(MAX_RETRY_AFTER)
    }
}

/// How long the engine's status line says, as a lower bound: `Less than a
/// second`, `About a minute`, `About an hour`, or a number and a unit
/// (`1 second`, `5 minutes`, `3 days`; a month is 30 days, a year 365).
/// `None` for anything else.
pub fn parse_human_duration(s: &str) -> Option<Duration> {
    match s {
        "Less than a second" => return Some(Duration::ZERO),
        "About a minute" => return Some(Duration::from_secs(60)),
        "About an hour" => return Some(Duration::from_secs(3600)),
        _ => {}
    }
    let (n, unit) = s.split_once(' ')?;
    let n: u64 = n.parse().ok()?;
    let secs = match unit.trim_end_matches('s') {
        "second" => 1,
        "minute" => 60,
        "hour" => 3600,
        "day" => 86_400,
        "week" => 7 * 86_400,
        "month" => 30 * 86_400,
        "year" => 365 * 86_400,
        _ => return None,
    };
    Some(Duration::from_secs(n * secs))
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

    #[test]
    fn setting_durations_as_the_config_reads_them() {
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("3").unwrap(), Duration::from_secs(3));
        assert_eq!(parse_duration("5m").unwrap(), Duration::from_secs(300));
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("1d").is_err());
        assert_eq!(parse_duration("720h").unwrap(), MAX_DURATION);
        for huge in ["721h", "18446744073709551615s", "18446744073709551615h"] {
            let e = parse_duration(huge).unwrap_err();
            assert!(e.contains("at most 30 days"), "{huge}: {e}");
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

    fn lifetime(s: &str) -> Result<Duration, String> {
        parse_duration_with(s, &DurationPolicy::LIFETIME)
    }

    #[test]
    fn lifetimes() {
        for (s, secs) in [
            ("30d", 30 * 86_400),
            ("3650d", 3650 * 86_400),
            ("12h", 12 * 3600),
            ("90m", 5400),
            ("3600s", 3600),
            ("1", 1),
            (" 2d ", 2 * 86_400),
            ("87600h", 3650 * 86_400),
        ] {
            assert_eq!(lifetime(s), Ok(Duration::from_secs(secs)), "{s}");
        }
        for (s, why) in [
            ("", "from 1s to 3650d"),
            ("0d", "from 1s to 3650d"),
            ("3651d", "from 1s to 3650d"),
            ("87601h", "from 1s to 3650d"),
            ("99999999999999999999d", "from 1s to 3650d"),
            ("d", "from 1s to 3650d"),
            ("1w", "unit must be s, m, h or d"),
            ("500ms", "unit must be s, m, h or d"),
            ("-1d", "unit must be s, m, h or d"),
        ] {
            let e = lifetime(s).unwrap_err();
            assert!(e.contains(why), "{s}: {e}");
        }
    }

    /// A signed document's lifetimes, exactly: what is read, and what is
    /// refused with which words.
    #[test]
    fn lifetimes_exactly() {
        for (s, secs) in [
            ("1s", 1),
            ("315360000", 3650 * 86_400),
            ("5256000m", 3650 * 86_400),
            ("\t7d\n", 7 * 86_400),
            ("0001h", 3600),
        ] {
            assert_eq!(lifetime(s), Ok(Duration::from_secs(secs)), "{s:?}");
        }
        let form = "expected e.g. 30d or 12h, from 1s to 3650d";
        let unit = "unit must be s, m, h or d";
        for (s, why) in [
            ("", form),
            ("  ", form),
            ("d", form),
            ("0", form),
            ("0d", form),
            ("0s", form),
            ("3651d", form),
            ("315360001", form),
            ("99999999999999999999", form),
            ("99999999999999999999d", form),
            ("18446744073709551615d", form),
            ("1w", unit),
            ("1D", unit),
            ("1 d", unit),
            ("1.5d", unit),
            (".5d", unit),
            ("1m30s", unit),
            ("1d1h", unit),
            ("500ms", unit),
            ("-1d", unit),
            ("+1d", unit),
            ("x", unit),
            ("99999999999999999999x", unit),
        ] {
            let trimmed = s.trim();
            assert_eq!(
                lifetime(s),
                Err(format!("invalid duration {trimmed:?}: {why}")),
                "{s:?}"
            );
        }
    }

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

    #[test]
    fn engine_times_parse() {
        let s = 1_000_000_000;
        assert_eq!(parse_engine_time_ns("1970-01-01T00:00:10Z"), 10 * s);
        assert_eq!(
            parse_engine_time_ns("2026-11-29T16:07:18.013585123Z"),
            1_795_968_438 * s + 13_585_123
        );
        assert_eq!(
            parse_engine_time_ns("2026-11-29T16:07:18.5Z"),
            1_795_968_438 * s + 500_000_000
        );
        assert_eq!(
            parse_engine_time_ns("2026-11-29T17:07:18+01:00"),
            1_795_968_438 * s
        );
        assert_eq!(parse_engine_time_ns("0001-01-01T00:00:00Z"), 0);
        assert_eq!(parse_engine_time_ns("garbage"), 0);
        assert_eq!(parse_engine_time_ns("2026-11-29T16:07:18.x1Z"), 0);
    }

    /// The engine's lenient form, exactly: what is read, and what gives 0.
    #[test]
    fn engine_times_exactly() {
        let s = 1_000_000_000;
        let t = 1_795_968_438 * s;
        for (text, ns) in [
            ("2026-11-29T16:07:18Z", t),
            ("2026-11-29T16:07:18.000000001Z", t + 1),
            ("2026-11-29T16:07:18.1Z", t + 100_000_000),
            ("2026-11-29T10:37:18-05:30", t),
            ("2026-11-29T16:07:18.25+00:00", t + 250_000_000),
            // No offset is UTC; a dot without digits is no fraction.
            ("2026-11-29T16:07:18", t),
            ("2026-11-29T16:07:18.Z", t),
            ("1970-01-01T00:00:00.000000001Z", 1),
            // Zero, before it, or unreadable: 0.
            ("1970-01-01T00:00:00Z", 0),
            ("1969-12-31T23:59:59Z", 0),
            ("0001-01-01T00:00:00Z", 0),
            ("2026-11-29T16:07:18.1234567891Z", 0),
            ("2026-11-29T16:07:18.-1Z", 0),
            ("2026-11-29t16:07:18Z", 0),
            ("2026-11-29 16:07:18Z", 0),
            ("2026-11-29T16:07Z", 0),
            ("2026-11-29T16:07:18+01", 0),
            ("2026-11-29T16:07:18+xx:00", 0),
            ("2026-11T16:07:18Z", 0),
            ("", 0),
        ] {
            assert_eq!(parse_engine_time_ns(text), ns, "{text:?}");
        }
    }

    #[test]
    fn the_strict_form_is_read_by_the_engine_reader_too() {
        assert_eq!(format_rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(format_rfc3339(1_795_968_438), "2026-11-29T16:07:18Z");
        assert_eq!(
            parse_engine_time_ns(&format_rfc3339(951_827_696)),
            951_827_696 * 1_000_000_000
        );
    }

    /// IMF-fixdates, exactly: what is read, and what is not.
    #[test]
    fn http_dates_exactly() {
        for (s, secs) in [
            ("Sun, 06 Nov 1994 08:49:37 GMT", Some(784_111_777)),
            ("Thu, 01 Jan 1970 00:00:00 GMT", Some(0)),
            ("Sun, 29 Nov 2026 16:07:18 GMT", Some(1_795_968_438)),
            ("Tue, 29 Feb 2000 00:00:00 GMT", Some(951_782_400)),
            // Lenient where no server differs: the weekday is not checked,
            // a day may have one digit, spaces are any whitespace, a
            // fraction is dropped, words after GMT are not read.
            ("Xyz, 06 Nov 1994 08:49:37 GMT", Some(784_111_777)),
            ("Sun, 6 Nov 1994 08:49:37 GMT", Some(784_111_777)),
            ("  Sun,\t06  Nov 1994 08:49:37 GMT ", Some(784_111_777)),
            ("Sun, 06 Nov 1994 08:49:37.5 GMT", Some(784_111_777)),
            ("Sun, 06 Nov 1994 08:49:37 GMT more", Some(784_111_777)),
            ("", None),
            ("yesterday", None),
            ("Sun, 06 Nov 1994 08:49:37 UTC", None),
            ("Sun, 06 Nov 1994 08:49:37", None),
            ("Sun, 06 nov 1994 08:49:37 GMT", None),
            ("Sun, 06 Nov 94 08:49:37 GMT", None),
            ("Sun, 06 Nov 1994 08:49 GMT", None),
            ("Sun, 06 Nov 1994 24:00:00 GMT", None),
            ("Sat, 29 Feb 2025 00:00:00 GMT", None),
            ("Wed, 31 Dec 1969 23:59:59 GMT", None),
            ("Sunday, 06-Nov-94 08:49:37 GMT", None),
            ("Sun Nov  6 08:49:37 1994", None),
        ] {
            assert_eq!(parse_http_date(s), secs, "{s:?}");
        }
    }

    fn wait(v: &str, now: u64) -> Option<Duration> {
        parse_retry_after(v).map(|r| r.wait(now))
    }

    #[test]
    fn http_dates_and_retry_after() {
        assert_eq!(
            parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT"),
            Some(784111777)
        );
        assert_eq!(parse_http_date("Sun, 06 Nov 1994 08:49:37 UTC"), None);
        assert_eq!(parse_http_date("yesterday"), None);
        assert_eq!(wait("5", 0), Some(Duration::from_secs(5)));
        assert_eq!(
            wait("Sun, 06 Nov 1994 08:50:37 GMT", 784111777),
            Some(Duration::from_secs(60))
        );
        assert_eq!(wait("999999999", 0), Some(MAX_RETRY_AFTER));
        assert_eq!(wait("soon", 0), None);
    }

    /// `Retry-After`: seconds or an HTTP date, at most a day.
    #[test]
    fn retry_after_exactly() {
        let now = 784_111_777;
        let secs = |s: u64| Some(Duration::from_secs(s));
        for (v, asked, waits) in [
            ("5", Some(RetryAfter::Seconds(5)), secs(5)),
            (" 5 ", Some(RetryAfter::Seconds(5)), secs(5)),
            ("0", Some(RetryAfter::Seconds(0)), secs(0)),
            ("86401", Some(RetryAfter::Seconds(86_401)), secs(86_400)),
            (
                "18446744073709551615",
                Some(RetryAfter::Seconds(u64::MAX)),
                secs(86_400),
            ),
            (
                "Sun, 06 Nov 1994 08:50:37 GMT",
                Some(RetryAfter::Date(now + 60)),
                secs(60),
            ),
            (
                "Sun, 06 Nov 1994 08:49:37 GMT",
                Some(RetryAfter::Date(now)),
                secs(0),
            ),
            (
                "Sun, 06 Nov 1994 08:48:37 GMT",
                Some(RetryAfter::Date(now - 60)),
                secs(0),
            ),
            (
                "Mon, 07 Nov 1994 08:49:38 GMT",
                Some(RetryAfter::Date(now + 86_401)),
                secs(86_400),
            ),
            ("-1", None, None),
            ("1.5", None, None),
            ("", None, None),
            ("Sun, 06 Nov 1994 08:50:37 UTC", None, None),
        ] {
            assert_eq!(parse_retry_after(v), asked, "{v:?}");
            assert_eq!(wait(v, now), waits, "{v:?}");
        }
    }

    #[test]
    fn human_durations_exactly() {
        let s = |x: u64| Some(Duration::from_secs(x));
        for (text, d) in [
            ("Less than a second", s(0)),
            ("1 second", s(1)),
            ("45 seconds", s(45)),
            ("About a minute", s(60)),
            ("5 minutes", s(300)),
            ("About an hour", s(3600)),
            ("2 hours", s(7200)),
            ("3 days", s(3 * 86_400)),
            ("2 weeks", s(14 * 86_400)),
            ("4 months", s(120 * 86_400)),
            ("1 year", s(365 * 86_400)),
            ("0 seconds", s(0)),
            ("about a minute", None),
            ("a while", None),
            ("5", None),
            ("5 fortnights", None),
            ("-5 minutes", None),
            ("5  minutes", None),
            ("", None),
        ] {
            assert_eq!(parse_human_duration(text), d, "{text:?}");
        }
    }
}
