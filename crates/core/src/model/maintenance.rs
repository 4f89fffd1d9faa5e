//! Maintenance windows: the times of the week a device may disrupt what
//! runs (recreate a container, land a reload), as a node or group
//! document's `maintenance` says them ([`Windows::parse_doc`]), in UTC or
//! in the device's local time; whether the device may disrupt now, every
//! document's windows considered ([`door`]); and the local time itself:
//! a time zone's rules as a TZif file (RFC 8536, what `/etc/localtime`
//! is) holds them, its transitions and, past the last, the POSIX TZ rule
//! of its footer. Whether a window is open at an instant, and when that
//! changes next, across midnight, a week's end and a daylight-saving
//! change ([`Windows::at`]). Pure; every rule is a line of a table test.

use crate::model::time::{civil_from_days, days_from_civil};

const DAY: i64 = 86_400;

/// A time zone: its offsets from UTC (seconds east) and when they change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Zone {
    /// The offset before the first transition.
    initial: i32,
    /// Each transition (UTC seconds) and the offset from then on, in
    /// order.
    transitions: Vec<(i64, i32)>,
    /// The rule past the last transition.
    rule: Option<Posix>,
}

/// A POSIX TZ rule (`CET-1CEST,M3.5.0,M10.5.0/3`): a standard offset and,
/// when the zone has daylight-saving time, its offset and when it starts
/// and ends each year.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Posix {
    std: i32,
    dst: Option<(i32, Day, Day)>,
}

/// A day of the year a POSIX rule names, and the local time on it
/// (seconds; may be negative or past a day).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Day {
    /// `Mm.w.d`: the w-th (5: last) weekday d (0: Sunday) of month m.
    Month { m: i64, w: i64, d: i64, at: i64 },
    /// `Jn`: day n of 1 to 365, February 29 never counted.
    Julian { n: i64, at: i64 },
    /// `n`: day n of 0 to 365, February 29 counted.
    Zero { n: i64, at: i64 },
}

/// The most transitions a TZif file may hold here.
const MAX_TRANSITIONS: usize = 4096;

impl Zone {
    /// UTC: no offset, ever.
    pub fn utc() -> Zone {
        Zone {
            initial: 0,
            transitions: Vec::new(),
            rule: None,
        }
    }

    /// Reads a TZif file (version 1, or 2 and later with 64-bit times and
    /// a footer); the error says what is wrong.
    pub fn parse_tzif(b: &[u8]) -> Result<Zone, String> {
        let (v1, rest) = block(b, 4)?;
        if v1.version == 0 {
            return v1.zone(None);
        }
        // Version 2 and later: the 64-bit block follows the first, and
        // the footer follows it.
        let (v2, footer) = block(rest, 8)?;
        let footer = std::str::from_utf8(footer).map_err(|_| "its footer is not text")?;
        let tz = footer
            .strip_prefix('\n')
            .and_then(|f| f.split('\n').next())
            .ok_or("its footer is not a line")?;
        let rule = if tz.is_empty() {
            None
        } else {
            Some(Posix::parse(tz)?)
        };
        v2.zone(rule)
    }

    /// The offset from UTC (seconds east) at `t` (UTC seconds).
    pub fn offset_at(&self, t: i64) -> i32 {
        match self.transitions.iter().rposition(|(at, _)| *at <= t) {
            None => self.initial,
            Some(i) if i + 1 < self.transitions.len() || self.rule.is_none() => {
                self.transitions[i].1
            }
            Some(i) => match &self.rule {
                Some(r) => r.offset_at(t),
                None => self.transitions[i].1,
            },
        }
    }

    /// Every instant in `(from, to]` at which the offset changes.
    fn changes(&self, from: i64, to: i64) -> Vec<i64> {
        let mut out: Vec<i64> = self
            .transitions
            .iter()
            .map(|(at, _)| *at)
            .filter(|at| *at > from && *at <= to)
            .collect();
        if let Some(r) = &self.rule {
            let last = self.transitions.last().map_or(i64::MIN, |(at, _)| *at);
            let (y0, _, _) = civil_from_days(from.div_euclid(DAY));
            for y in y0 - 1..=y0 + 1 {
                for at in r.changes_in(y) {
                    if at > from && at <= to && at > last {
                        out.push(at);
                    }
                }
            }
        }
        out
    }
}

/// One data block of a TZif file: its header's counts and what they
/// hold.
struct Block {
    version: u8,
    transitions: Vec<i64>,
    kinds: Vec<u8>,
    offsets: Vec<i32>,
}

/// Reads the header and data block at the start of `b`, times of `size`
/// bytes; returns it and what follows it.
fn block(b: &[u8], size: usize) -> Result<(Block, &[u8]), String> {
    if b.len() < 44 || &b[..4] != b"TZif" {
        return Err("not a TZif file (no `TZif` header)".into());
    }
    let version = match b[4] {
        0 => 0,
        b'2'..=b'9' => b[4] - b'0',
        v => return Err(format!("TZif version {v:?} is not known")),
    };
    let count = |i: usize| -> usize {
        u32::from_be_bytes([b[20 + 4 * i], b[21 + 4 * i], b[22 + 4 * i], b[23 + 4 * i]]) as usize
    };
    let (isut, isstd, leap, time, typ, chars) =
        (count(0), count(1), count(2), count(3), count(4), count(5));
    if time > MAX_TRANSITIONS || typ == 0 || typ > 256 {
        return Err(format!("{time} transitions of {typ} kinds: not a zone's"));
    }
    let len = time * size + time + typ * 6 + chars + leap * (size + 4) + isstd + isut;
    let data = b.get(44..44 + len).ok_or("it ends inside its data")?;
    let rest = &b[44 + len..];
    let mut transitions = Vec::with_capacity(time);
    for i in 0..time {
        let at = &data[i * size..(i + 1) * size];
        transitions.push(match size {
            4 => i64::from(i32::from_be_bytes([at[0], at[1], at[2], at[3]])),
            _ => i64::from_be_bytes([at[0], at[1], at[2], at[3], at[4], at[5], at[6], at[7]]),
        });
    }
    if transitions.windows(2).any(|w| w[0] >= w[1]) {
        return Err("its transitions are not in order".into());
    }
    let kinds = data[time * size..time * size + time].to_vec();
    if kinds.iter().any(|k| usize::from(*k) >= typ) {
        return Err("a transition names a kind it does not have".into());
    }
    let types = &data[time * size + time..time * size + time + typ * 6];
    let mut offsets = Vec::with_capacity(typ);
    for t in types.chunks(6) {
        let off = i32::from_be_bytes([t[0], t[1], t[2], t[3]]);
        if off.unsigned_abs() > 26 * 3600 {
            return Err(format!("an offset of {off} s is not a zone's"));
        }
        offsets.push(off);
    }
    Ok((
        Block {
            version,
            transitions,
            kinds,
            offsets,
        },
        rest,
    ))
}

impl Block {
    fn zone(self, rule: Option<Posix>) -> Result<Zone, String> {
        Ok(Zone {
            // RFC 8536: before the first transition, the first kind.
            initial: self.offsets[0],
            transitions: self
                .transitions
                .iter()
                .zip(&self.kinds)
                .map(|(at, k)| (*at, self.offsets[usize::from(*k)]))
                .collect(),
            rule,
        })
    }
}

impl Posix {
    /// Reads a POSIX TZ rule as a TZif footer holds it.
    pub fn parse(s: &str) -> Result<Posix, String> {
        let bad = |why: &str| format!("{s:?} is not a POSIX TZ rule: {why}");
        let mut r = Reader { s: s.as_bytes() };
        r.name().ok_or_else(|| bad("no zone name"))?;
        let std = -r
            .offset(24)
            .ok_or_else(|| bad("no offset after its name"))?;
        if r.s.is_empty() {
            return Ok(Posix { std, dst: None });
        }
        r.name().ok_or_else(|| bad("no daylight-saving name"))?;
        let dst = match r.s.first() {
            Some(b',') | None => std + 3600,
            _ => -r
                .offset(24)
                .ok_or_else(|| bad("no daylight-saving offset"))?,
        };
        if r.s.is_empty() {
            // No rule: the US rule, as POSIX says implementations may.
            let start = Day::Month {
                m: 3,
                w: 2,
                d: 0,
                at: 7200,
            };
            let end = Day::Month {
                m: 11,
                w: 1,
                d: 0,
                at: 7200,
            };
            return Ok(Posix {
                std,
                dst: Some((dst, start, end)),
            });
        }
        if !r.eat(b',') {
            return Err(bad("no rule after the daylight-saving name"));
        }
        let start = r.day().ok_or_else(|| bad("its start is not a day"))?;
        if !r.eat(b',') {
            return Err(bad("no end"));
        }
        let end = r.day().ok_or_else(|| bad("its end is not a day"))?;
        if !r.s.is_empty() {
            return Err(bad("something follows its end"));
        }
        Ok(Posix {
            std,
            dst: Some((dst, start, end)),
        })
    }

    /// The instants (UTC) daylight-saving time starts and ends in year
    /// `y`.
    fn changes_in(&self, y: i64) -> Vec<i64> {
        match self.dst {
            None => Vec::new(),
            Some((dst, start, end)) => vec![
                start.local(y) - i64::from(self.std),
                end.local(y) - i64::from(dst),
            ],
        }
    }

    fn offset_at(&self, t: i64) -> i32 {
        let Some((dst, start, end)) = self.dst else {
            return self.std;
        };
        let (y, _, _) = civil_from_days((t + i64::from(self.std)).div_euclid(DAY));
        let (s, e) = (
            start.local(y) - i64::from(self.std),
            end.local(y) - i64::from(dst),
        );
        let inside = if s < e {
            t >= s && t < e
        } else {
            // The southern hemisphere's: from the start to the year's end,
            // and from its start to the end.
            t >= s || t < e
        };
        if inside { dst } else { self.std }
    }
}

impl Day {
    /// The local time (seconds since the epoch, as if UTC) this day and
    /// time fall on in year `y`.
    fn local(self, y: i64) -> i64 {
        let leap = y % 4 == 0 && (y % 100 != 0 || y % 400 == 0);
        let (days, at) = match self {
            Day::Month { m, w, d, at } => {
                let first = days_from_civil(y, m, 1);
                // 1970-01-01 was a Thursday (4).
                let wd = (first + 4).rem_euclid(7);
                let mut day = (d - wd).rem_euclid(7) + (w - 1) * 7;
                let next = if m == 12 {
                    days_from_civil(y + 1, 1, 1)
                } else {
                    days_from_civil(y, m + 1, 1)
                };
                while first + day >= next {
                    day -= 7;
                }
                (first + day, at)
            }
            Day::Julian { n, at } => {
                let n = if leap && n >= 60 { n } else { n - 1 };
                (days_from_civil(y, 1, 1) + n, at)
            }
            Day::Zero { n, at } => (days_from_civil(y, 1, 1) + n, at),
        };
        days * DAY + at
    }
}

/// Reads a POSIX TZ rule from its start.
struct Reader<'a> {
    s: &'a [u8],
}

impl Reader<'_> {
    fn eat(&mut self, c: u8) -> bool {
        if self.s.first() == Some(&c) {
            self.s = &self.s[1..];
            true
        } else {
            false
        }
    }

    /// A zone name: three or more letters, or `<…>`.
    fn name(&mut self) -> Option<()> {
        if self.eat(b'<') {
            let end = self.s.iter().position(|c| *c == b'>')?;
            self.s = &self.s[end + 1..];
            return Some(());
        }
        let n = self
            .s
            .iter()
            .take_while(|c| c.is_ascii_alphabetic())
            .count();
        (n >= 3).then(|| self.s = &self.s[n..])
    }

    fn number(&mut self) -> Option<i64> {
        let n = self.s.iter().take_while(|c| c.is_ascii_digit()).count();
        if n == 0 || n > 3 {
            return None;
        }
        let v = std::str::from_utf8(&self.s[..n]).ok()?.parse().ok()?;
        self.s = &self.s[n..];
        Some(v)
    }

    /// `[+-]hh[:mm[:ss]]`, hours at most `max`, as seconds, signed as
    /// written (a zone's offset is positive west of Greenwich).
    fn offset(&mut self, max: i64) -> Option<i32> {
        let sign = if self.eat(b'-') {
            -1
        } else {
            self.eat(b'+');
            1
        };
        let h = self.number()?;
        let m = if self.eat(b':') { self.number()? } else { 0 };
        let s = if self.eat(b':') { self.number()? } else { 0 };
        (h <= max && m < 60 && s < 60).then(|| (sign * (h * 3600 + m * 60 + s)) as i32)
    }

    /// `Mm.w.d`, `Jn` or `n`, then an optional `/time` (02:00 if none).
    fn day(&mut self) -> Option<Day> {
        let day = if self.eat(b'M') {
            let m = self.number()?;
            self.eat(b'.').then_some(())?;
            let w = self.number()?;
            self.eat(b'.').then_some(())?;
            let d = self.number()?;
            ((1..=12).contains(&m) && (1..=5).contains(&w) && d <= 6).then_some(Day::Month {
                m,
                w,
                d,
                at: 0,
            })?
        } else if self.eat(b'J') {
            let n = self.number()?;
            (1..=365).contains(&n).then_some(Day::Julian { n, at: 0 })?
        } else {
            let n = self.number()?;
            (n <= 365).then_some(Day::Zero { n, at: 0 })?
        };
        // A time from -167 to 167 hours (RFC 8536's extension).
        let at = if self.eat(b'/') {
            i64::from(self.offset(167)?)
        } else {
            7200
        };
        Some(match day {
            Day::Month { m, w, d, .. } => Day::Month { m, w, d, at },
            Day::Julian { n, .. } => Day::Julian { n, at },
            Day::Zero { n, .. } => Day::Zero { n, at },
        })
    }
}

/// A time of the week a window is open: on each of `days` (bit 0 is
/// Monday), from `from` to `to` (seconds of the local day); a window that
/// ends before it starts runs past midnight into the next day.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    pub days: u8,
    pub from: u32,
    pub to: u32,
}

const DAYS: [&str; 7] = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"];

impl Span {
    /// Reads `Mon-Fri 22:00-06:00`, `Sat,Sun 00:00-24:00`, `daily
    /// 02:00-04:00`.
    pub fn parse(s: &str) -> Result<Span, String> {
        let bad = |why: &str| {
            format!(
                "{s:?} is not a window: {why} (say `Mon-Fri 22:00-06:00`, or `daily 02:00-04:00`)"
            )
        };
        let (days, hours) = s.trim().split_once(' ').ok_or_else(|| bad("no days"))?;
        let day = |d: &str| DAYS.iter().position(|n| n.eq_ignore_ascii_case(d));
        let mut mask = 0u8;
        if days.eq_ignore_ascii_case("daily") {
            mask = 0x7f;
        } else {
            for part in days.split(',') {
                match part.split_once('-') {
                    Some((a, b)) => {
                        let (a, b) = (
                            day(a).ok_or_else(|| bad("a day is not Mon to Sun"))?,
                            day(b).ok_or_else(|| bad("a day is not Mon to Sun"))?,
                        );
                        let mut i = a;
                        loop {
                            mask |= 1 << i;
                            if i == b {
                                break;
                            }
                            i = (i + 1) % 7;
                        }
                    }
                    None => mask |= 1 << day(part).ok_or_else(|| bad("a day is not Mon to Sun"))?,
                }
            }
        }
        let (from, to) = hours
            .trim()
            .split_once('-')
            .ok_or_else(|| bad("no hours"))?;
        let at = crate::model::time::time_of_day;
        let from = at(from, false).ok_or_else(|| bad("its start is not HH:MM"))?;
        let to = at(to, true).ok_or_else(|| bad("its end is not HH:MM (24:00 at most)"))?;
        if from == to {
            return Err(bad("it starts where it ends"));
        }
        Ok(Span {
            days: mask,
            from,
            to,
        })
    }

    /// Whether local time `day` (days since 1970-01-01), second `s` of
    /// it, is inside.
    fn holds(&self, day: i64, s: u32) -> bool {
        // 1970-01-01 was a Thursday: Monday is 0.
        let on = |d: i64| self.days & (1 << (d + 3).rem_euclid(7)) != 0;
        if self.from < self.to {
            on(day) && s >= self.from && s < self.to
        } else {
            (on(day) && s >= self.from) || (on(day - 1) && s < self.to)
        }
    }
}

/// A device's maintenance windows: open when any is, in UTC or in the
/// device's local time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Windows {
    pub spans: Vec<Span>,
    pub local: bool,
}

impl Windows {
    /// Whether a window is open at `now` (UTC seconds) in `zone` (the
    /// device's, for local windows), and when that changes next within a
    /// week and a day (`None`: not within it).
    pub fn at(&self, now: i64, zone: &Zone) -> (bool, Option<i64>) {
        let utc = Zone::utc();
        let zone = if self.local { zone } else { &utc };
        let open = |t: i64| {
            let l = t + i64::from(zone.offset_at(t));
            let (day, s) = (l.div_euclid(DAY), l.rem_euclid(DAY) as u32);
            self.spans.iter().any(|sp| sp.holds(day, s))
        };
        let now_open = open(now);
        let horizon = now + 8 * DAY;
        // The state moves only at a window's edge in local time or at a
        // change of the zone's offset: every such instant is a candidate.
        let mut offsets: Vec<i32> = vec![zone.offset_at(now)];
        let changes = zone.changes(now, horizon);
        for c in &changes {
            offsets.push(zone.offset_at(*c));
        }
        offsets.sort_unstable();
        offsets.dedup();
        let today = (now + i64::from(zone.offset_at(now))).div_euclid(DAY);
        let mut candidates = changes;
        for day in today - 1..=today + 8 {
            for sp in &self.spans {
                for edge in [sp.from, sp.to] {
                    let local = day * DAY + i64::from(edge);
                    for o in &offsets {
                        candidates.push(local - i64::from(*o));
                    }
                }
            }
        }
        candidates.retain(|c| *c > now && *c <= horizon);
        candidates.sort_unstable();
        let next = candidates.into_iter().find(|c| open(*c) != now_open);
        (now_open, next)
    }
}

/// What the documents in force say of disrupting what runs, each with who
/// set it (`node`, `group g`): their maintenance windows, how long a
/// recreate waits for an update lock (`locks`), and the one-shot actions
/// they ask (`actions`, the node document's first).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Disruption {
    /// The maintenance windows.
    pub windows: Vec<(String, Windows)>,
    /// The update locks' policies.
    pub locks: Vec<(String, crate::model::lock::Policy)>,
    /// The one-shot actions.
    pub actions: Vec<(String, crate::model::action::Action)>,
    /// The site disruption budgets, by the group that set each.
    pub budgets: Vec<(String, crate::model::budget::Budget)>,
}

/// What the documents say of disruption; `None` until they are read.
pub type InForce = Option<std::sync::Arc<Disruption>>;

/// The most windows one document may set.
pub const MAX_WINDOWS: usize = 32;

impl Windows {
    /// Reads a document's `maintenance`: `{"windows": ["Mon-Fri
    /// 22:00-06:00", …], "zone": "local" | "UTC"}` (local when unsaid).
    /// The error names the field at fault.
    pub fn parse_doc(v: &serde_json::Value) -> Result<Windows, (String, String)> {
        let o = v
            .as_object()
            .ok_or_else(|| ("maintenance".to_string(), "not an object".to_string()))?;
        if let Some(k) = o
            .keys()
            .find(|k| !["windows", "zone"].contains(&k.as_str()))
        {
            return Err((
                "maintenance".into(),
                format!("unknown field {k:?} (windows, zone)"),
            ));
        }
        let local = match o.get("zone").map(|z| z.as_str()) {
            None | Some(Some("local")) => true,
            Some(Some("UTC")) => false,
            Some(_) => {
                return Err((
                    "maintenance.zone".into(),
                    "say \"local\" (the device's time zone) or \"UTC\"".into(),
                ));
            }
        };
        let list = o.get("windows").and_then(|w| w.as_array()).ok_or_else(|| {
            (
                "maintenance.windows".to_string(),
                "a list of windows is needed".to_string(),
            )
        })?;
        if list.is_empty() || list.len() > MAX_WINDOWS {
            return Err((
                "maintenance.windows".into(),
                format!(
                    "{} windows: between 1 and {MAX_WINDOWS} (without `maintenance`, a device disrupts at any time)",
                    list.len()
                ),
            ));
        }
        let spans = list
            .iter()
            .enumerate()
            .map(|(i, w)| {
                let at = || format!("maintenance.windows[{i}]");
                w.as_str()
                    .ok_or_else(|| (at(), "not a string".to_string()))
                    .and_then(|w| Span::parse(w).map_err(|e| (at(), e)))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Windows { spans, local })
    }

    /// The document form [`Windows::parse_doc`] reads.
    pub fn to_doc(&self) -> serde_json::Value {
        let spans: Vec<String> = self.spans.iter().map(Span::to_string).collect();
        serde_json::json!({"windows": spans, "zone": if self.local { "local" } else { "UTC" }})
    }
}

impl std::fmt::Display for Span {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let hm = |s: u32| format!("{:02}:{:02}", s / 3600, s % 3600 / 60);
        if self.days == 0x7f {
            f.write_str("daily")?;
        } else {
            let on: Vec<&str> = (0..7)
                .filter(|d| self.days & (1 << d) != 0)
                .map(|d| DAYS[d])
                .collect();
            f.write_str(&on.join(","))?;
        }
        write!(f, " {}-{}", hm(self.from), hm(self.to))
    }
}

/// Whether a device may disrupt what runs at `now`: only while every
/// document that sets windows has one open (`sets`: who set them, and
/// them). `Ok(next)`: it may, until `next` (when one closes), if within a
/// week and a day. `Err((until, who))`: not before `until` (the last of
/// the closed ones' openings: the earliest all may be open, looked at
/// again then; `None`: none opens within a week and a day), `who` naming
/// a document whose windows are closed.
pub fn door(
    sets: &[(String, Windows)],
    now: i64,
    zone: &Zone,
) -> Result<Option<i64>, (Option<i64>, String)> {
    let mut next: Option<i64> = None;
    let mut closed: Option<(Option<i64>, String)> = None;
    for (who, w) in sets {
        let (open, change) = w.at(now, zone);
        if open {
            next = match (next, change) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
        } else {
            closed = Some(match closed {
                None => (change, who.clone()),
                Some((until, first)) => (
                    match (until, change) {
                        (Some(a), Some(b)) => Some(a.max(b)),
                        _ => None,
                    },
                    first,
                ),
            });
        }
    }
    match closed {
        Some(c) => Err(c),
        None => Ok(next),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::time::{format_rfc3339, parse_rfc3339};

    const BERLIN: &[u8] = include_bytes!("../../testdata/tz/Europe-Berlin");
    const SYDNEY: &[u8] = include_bytes!("../../testdata/tz/Australia-Sydney");

    fn t(s: &str) -> i64 {
        parse_rfc3339(s).unwrap() as i64
    }

    #[test]
    fn a_zone_s_offset_comes_from_its_transitions_and_past_them_its_rule() {
        let berlin = Zone::parse_tzif(BERLIN).unwrap();
        let sydney = Zone::parse_tzif(SYDNEY).unwrap();
        // Only the footer: the rule alone decides, every year.
        let rule_only = |tz: &str| Zone {
            initial: 0,
            transitions: vec![(i64::MIN / 2, 0)],
            rule: Some(Posix::parse(tz).unwrap()),
        };
        let berlin_rule = rule_only("CET-1CEST,M3.5.0,M10.5.0/3");
        let sydney_rule = rule_only("AEST-10AEDT,M10.1.0,M4.1.0/3");
        let dublin_rule = rule_only("IST-1GMT0,M10.5.0,M3.5.0/1");
        let utc = Zone::utc();
        #[rustfmt::skip]
        let cases: Vec<(&str, &Zone, &str, i32)> = vec![
            ("Berlin in winter", &berlin, "2026-01-15T12:00:00Z", 3600),
            ("Berlin in summer", &berlin, "2026-07-15T12:00:00Z", 7200),
            ("Berlin, a second before spring forward (01:00 UTC)", &berlin, "2026-03-29T00:59:59Z", 3600),
            ("Berlin, at spring forward", &berlin, "2026-03-29T01:00:00Z", 7200),
            ("Berlin, a second before fall back", &berlin, "2026-10-25T00:59:59Z", 7200),
            ("Berlin, at fall back", &berlin, "2026-10-25T01:00:00Z", 3600),
            ("Berlin past its file's last transition, by its rule", &berlin, "2040-07-01T00:00:00Z", 7200),
            ("Berlin past it, in winter", &berlin, "2040-12-01T00:00:00Z", 3600),
            ("Berlin's rule alone, 2026 summer", &berlin_rule, "2026-03-29T01:00:00Z", 7200),
            ("Berlin's rule alone, a second before", &berlin_rule, "2026-03-29T00:59:59Z", 3600),
            ("Berlin's rule alone, fall back", &berlin_rule, "2026-10-25T01:00:00Z", 3600),
            ("Berlin's rule alone, a second before fall back", &berlin_rule, "2026-10-25T00:59:59Z", 7200),
            ("Sydney in its summer (January)", &sydney, "2026-01-15T00:00:00Z", 39600),
            ("Sydney in its winter (July)", &sydney, "2026-07-15T00:00:00Z", 36000),
            ("Sydney's rule alone, January", &sydney_rule, "2026-01-15T00:00:00Z", 39600),
            ("Sydney's rule alone, July", &sydney_rule, "2026-07-15T00:00:00Z", 36000),
            ("Sydney's rule, at its fall back (03:00 AEDT, 5 April)", &sydney_rule, "2026-04-04T16:00:00Z", 36000),
            ("Sydney's rule, a second before", &sydney_rule, "2026-04-04T15:59:59Z", 39600),
            ("Sydney's rule, its spring forward (02:00 AEST, 4 October)", &sydney_rule, "2026-10-03T16:00:00Z", 39600),
            ("Dublin's negative rule: winter is its 'summer'", &dublin_rule, "2026-01-15T12:00:00Z", 0),
            ("Dublin's negative rule: July", &dublin_rule, "2026-07-15T12:00:00Z", 3600),
            ("UTC", &utc, "2026-07-15T12:00:00Z", 0),
        ];
        for (what, zone, at, want) in cases {
            assert_eq!(zone.offset_at(t(at)), want, "{what}");
        }
    }

    #[test]
    fn a_bad_zone_file_or_rule_is_refused_saying_why() {
        let mut cut = BERLIN.to_vec();
        cut.truncate(100);
        #[rustfmt::skip]
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (b"not a zone".to_vec(), "no `TZif` header"),
            (cut, "ends inside its data"),
            ([b"TZif3".as_slice(), &[0; 39]].concat(), "transitions of 0 kinds"),
        ];
        for (bytes, says) in cases {
            let e = Zone::parse_tzif(&bytes).unwrap_err();
            assert!(e.contains(says), "{e}");
        }
        for bad in [
            "",
            "C",
            "CET",
            "CET-1CEST,M3.5.0",
            "CET-1CEST,M13.5.0,M10.5.0",
            "CET-1CEST,M3.5.0,M10.5.0/3x",
            "CET-99",
        ] {
            assert!(Posix::parse(bad).is_err(), "{bad:?}");
        }
        for good in [
            "UTC0",
            "<+0330>-3:30",
            "EST5EDT,M3.2.0,M11.1.0",
            "<-03>3<-02>,M3.5.0/-2,M10.5.0/-1",
            "XXX3YYY,J60/2,300/25",
        ] {
            assert!(Posix::parse(good).is_ok(), "{good:?}");
        }
    }

    #[test]
    fn a_window_s_days_and_hours_are_read_or_refused() {
        /// A window as written, and its days, start and end, or what the
        /// refusal says.
        type Case<'a> = (&'a str, Result<(u8, u32, u32), &'a str>);
        #[rustfmt::skip]
        let cases: Vec<Case> = vec![
            ("Mon-Fri 22:00-06:00", Ok((0b001_1111, 22 * 3600, 6 * 3600))),
            ("Sat,Sun 00:00-24:00", Ok((0b110_0000, 0, 24 * 3600))),
            ("daily 02:00-04:30", Ok((0x7f, 7200, 4 * 3600 + 1800))),
            ("Fri-Mon 20:00-23:00", Ok((0b111_0001, 20 * 3600, 23 * 3600))),
            ("mon 01:00-02:00", Ok((1, 3600, 7200))),
            ("Mon 02:00-02:00", Err("starts where it ends")),
            ("Funday 01:00-02:00", Err("not Mon to Sun")),
            ("Mon 24:00-02:00", Err("start is not HH:MM")),
            ("Mon 1:00-02:00", Err("start is not HH:MM")),
            ("Mon 01:00-25:00", Err("end is not HH:MM")),
            ("01:00-02:00", Err("no days")),
        ];
        for (s, want) in cases {
            match (Span::parse(s), want) {
                (Ok(sp), Ok((d, f, to))) => {
                    assert_eq!((sp.days, sp.from, sp.to), (d, f, to), "{s}")
                }
                (Err(e), Err(says)) => assert!(e.contains(says), "{s}: {e}"),
                (got, want) => panic!("{s}: {got:?}, wanted {want:?}"),
            }
        }
    }

    #[test]
    fn a_window_is_open_or_not_and_says_when_that_changes_across_midnight_and_dst() {
        let berlin = Zone::parse_tzif(BERLIN).unwrap();
        let w = |spans: &[&str], local: bool| Windows {
            spans: spans.iter().map(|s| Span::parse(s).unwrap()).collect(),
            local,
        };
        let nights = w(&["Mon-Fri 22:00-06:00"], true);
        let utc_nights = w(&["Mon-Fri 22:00-06:00"], false);
        let early = w(&["daily 02:00-03:00"], true);
        let fall = w(&["daily 02:00-03:00"], true);
        let weekend = w(&["Sat,Sun 00:00-24:00"], true);
        #[rustfmt::skip]
        let cases: Vec<(&str, &Windows, &str, bool, Option<&str>)> = vec![
            // 2026-12-07 is a Monday; Berlin is UTC+1 in December.
            ("Monday noon: closed until 22:00 local", &nights, "2026-12-07T11:00:00Z", false, Some("2026-12-07T21:00:00Z")),
            ("Monday 23:00 local: open past midnight until 06:00", &nights, "2026-12-07T22:00:00Z", true, Some("2026-12-08T05:00:00Z")),
            ("Tuesday 03:00 local: Monday's night, still open", &nights, "2026-12-08T02:00:00Z", true, Some("2026-12-08T05:00:00Z")),
            ("Saturday 03:00 local: Friday's night runs into it", &nights, "2026-12-12T02:00:00Z", true, Some("2026-12-12T05:00:00Z")),
            ("Saturday 07:00 local: no window until Monday night", &nights, "2026-12-12T06:00:00Z", false, Some("2026-12-14T21:00:00Z")),
            ("Sunday 23:00 local: Sunday is not a night", &nights, "2026-12-13T22:00:00Z", false, Some("2026-12-14T21:00:00Z")),
            ("the same in UTC", &utc_nights, "2026-12-07T21:30:00Z", false, Some("2026-12-07T22:00:00Z")),
            ("in UTC, open", &utc_nights, "2026-12-07T22:30:00Z", true, Some("2026-12-08T06:00:00Z")),
            // Spring forward, 2026-03-29: 02:00 local does not happen.
            ("the day before spring forward, 02:30 local", &early, "2026-03-28T01:30:00Z", true, Some("2026-03-28T02:00:00Z")),
            ("spring forward's day: 02:00-03:00 never comes, the next is Monday's", &early, "2026-03-28T22:00:00Z", false, Some("2026-03-30T00:00:00Z")),
            // Fall back, 2026-10-25: 02:00 to 03:00 local happens twice.
            ("fall back: 02:30 local the first time (CEST)", &fall, "2026-10-25T00:30:00Z", true, Some("2026-10-25T02:00:00Z")),
            ("fall back: 02:30 local the second time (CET)", &fall, "2026-10-25T01:30:00Z", true, Some("2026-10-25T02:00:00Z")),
            ("a weekend, Saturday's start", &weekend, "2026-12-11T22:59:59Z", false, Some("2026-12-11T23:00:00Z")),
            ("a weekend through Sunday to Monday's midnight", &weekend, "2026-12-12T10:00:00Z", true, Some("2026-12-13T23:00:00Z")),
        ];
        for (what, windows, at, open, next) in cases {
            let (got_open, got_next) = windows.at(t(at), &berlin);
            assert_eq!(got_open, open, "{what}");
            assert_eq!(
                got_next.map(|n| format_rfc3339(n as u64)),
                next.map(str::to_string),
                "{what}"
            );
        }
        // No window: never open, nothing changes.
        assert_eq!(
            w(&[], true).at(t("2026-12-07T11:00:00Z"), &berlin),
            (false, None)
        );
    }

    #[test]
    fn a_documents_maintenance_reads_or_is_refused_naming_its_field() {
        use serde_json::json;
        let w =
            Windows::parse_doc(&json!({"windows": ["Mon-Fri 22:00-06:00", "daily 02:00-03:00"]}))
                .unwrap();
        assert!(w.local);
        assert_eq!(w.spans.len(), 2);
        assert_eq!(Windows::parse_doc(&w.to_doc()).unwrap(), w);
        assert_eq!(w.spans[0].to_string(), "Mon,Tue,Wed,Thu,Fri 22:00-06:00");
        assert_eq!(w.spans[1].to_string(), "daily 02:00-03:00");
        let utc = Windows::parse_doc(&json!({"windows": ["Sat,Sun 00:00-24:00"], "zone": "UTC"}))
            .unwrap();
        assert!(!utc.local);
        assert_eq!(utc.spans[0].to_string(), "Sat,Sun 00:00-24:00");
        #[rustfmt::skip]
        let cases: Vec<(serde_json::Value, &str, &str)> = vec![
            (json!("Mon 01:00-02:00"), "maintenance", "not an object"),
            (json!({"windows": ["Mon 01:00-02:00"], "tz": "UTC"}), "maintenance", "unknown field \"tz\""),
            (json!({"windows": ["Mon 01:00-02:00"], "zone": "Europe/Berlin"}), "maintenance.zone", "\"local\""),
            (json!({}), "maintenance.windows", "a list of windows is needed"),
            (json!({"windows": []}), "maintenance.windows", "0 windows"),
            (json!({"windows": ["Mon 01:00-02:00", 3]}), "maintenance.windows[1]", "not a string"),
            (json!({"windows": ["Mon 01:00-02:00", "Mon 25:00-26:00"]}), "maintenance.windows[1]", "its start is not HH:MM"),
            (json!({"windows": ["Funday 01:00-02:00"]}), "maintenance.windows[0]", "a day is not Mon to Sun"),
        ];
        for (v, field, says) in cases {
            let (f, e) = Windows::parse_doc(&v).unwrap_err();
            assert_eq!(f, field, "{v}");
            assert!(e.contains(says), "{v}: {e}");
        }
    }

    #[test]
    fn the_door_is_open_only_while_every_documents_windows_are() {
        let utc = Zone::utc();
        let w = |s: &str| Windows {
            spans: vec![Span::parse(s).unwrap()],
            local: false,
        };
        let set = |who: &str, s: &str| (who.to_string(), w(s));
        // 2026-12-07 is a Monday.
        let mon = |hm: &str| t(&format!("2026-12-07T{hm}:00Z"));
        let nights = set("node", "daily 22:00-06:00");
        let early = set("group g", "daily 01:00-03:00");
        /// What, the documents' windows, the time (Monday, UTC), the door.
        type Case<'a> = (
            &'a str,
            Vec<(String, Windows)>,
            &'a str,
            Result<Option<i64>, (Option<i64>, &'a str)>,
        );
        #[rustfmt::skip]
        let cases: Vec<Case> = vec![
            ("no windows: open, nothing to wait for", vec![], "12:00", Ok(None)),
            ("inside the only window: open until it closes", vec![nights.clone()], "23:00", Ok(Some(t("2026-12-08T06:00:00Z")))),
            ("outside it: closed until it opens", vec![nights.clone()], "12:00", Err((Some(mon("22:00")), "node"))),
            ("both open: until the first closes", vec![nights.clone(), early.clone()], "02:00", Ok(Some(mon("03:00")))),
            ("one open, one closed: closed, until the later opening", vec![nights.clone(), early.clone()], "23:00", Err((Some(t("2026-12-08T01:00:00Z")), "group g"))),
            ("both closed: until the later of their openings", vec![nights.clone(), early.clone()], "12:00", Err((Some(t("2026-12-08T01:00:00Z")), "node"))),
            ("a window on another day only", vec![set("node", "Sun 01:00-02:00")], "12:00", Err((Some(t("2026-12-13T01:00:00Z")), "node"))),
        ];
        for (what, sets, at, want) in cases {
            let got = door(&sets, mon(at), &utc);
            let want = want.map_err(|(u, who)| (u, who.to_string()));
            assert_eq!(got, want, "{what}");
        }
    }
}
