//! The device's time floor and what it decides, pure: the floor kept in
//! the store (the newest time the device knows has passed: its build and
//! every accepted document's `issued_at`) and when it is raised
//! ([`raised`]), the time a server's TLS certificate is checked at
//! ([`verify_at`]), when the system clock is stepped and to what
//! ([`step_to`]), the clock's skew against a plane host's `Date` ([`skew`])
//! and a fleet's skews summed up in bounded memory ([`SkewTally`],
//! [`FleetSkew`]). No clock is read here.

/// How far behind a time it knows the system clock must be before the
/// agent steps it (`[clock] step = true`): smaller differences are the
/// rounding of a `Date` header to the second and the time an answer took.
pub const STEP_THRESHOLD: u64 = 2;

/// How far a device's clock may be from its plane host's before the
/// roll-up counts it as skewed, in seconds either way.
pub const SKEW_LIMIT: u64 = 60;

/// The floor to store when a time known to have passed (`seen`: a
/// document's `issued_at`, the build) is later than the floor held: the
/// floor is raised, never lowered; `None` when nothing changes (nothing
/// is written).
pub fn raised(floor: u64, seen: u64) -> Option<u64> {
    (seen > floor).then_some(seen)
}

/// The time a TLS certificate is checked at: the clock, or the floor when
/// the clock is earlier (a device booted in 1970 checks at the floor). A
/// certificate that expired before the floor stays expired.
pub fn verify_at(clock: u64, floor: u64) -> u64 {
    clock.max(floor)
}

/// The time to step the system clock to, when `target` (the floor, or a
/// plane host's `Date` read over verified TLS) is more than
/// [`STEP_THRESHOLD`] seconds ahead of `clock`: only ever forward.
pub fn step_to(clock: u64, target: u64) -> Option<u64> {
    (target > clock.saturating_add(STEP_THRESHOLD)).then_some(target)
}

/// How far past the time floor a plane host's `Date` may step the clock:
/// a day, as far as signed time may lead the node's clocks (the plane's
/// `accept::MAX_SKEW`). A host is trusted for
/// transport, not for time: one that answers a date years ahead (taken
/// over, or a cache gone wrong) could otherwise step a device's clock so
/// far that its plane's certificate and documents read as expired, and
/// nothing steps a clock back.
pub const DATE_LEAD: u64 = 24 * 3600;

/// The time a plane host's `Date` may step the clock to: the date, at
/// most [`DATE_LEAD`] past the `floor` (signed time).
pub fn date_target(date: u64, floor: u64) -> u64 {
    date.min(floor.saturating_add(DATE_LEAD))
}

/// The device's clock skew against a plane host's `Date`, in seconds:
/// positive when the device is ahead.
pub fn skew(clock: u64, date: u64) -> i64 {
    let d = i128::from(clock) - i128::from(date);
    i64::try_from(d).unwrap_or(if d < 0 { i64::MIN } else { i64::MAX })
}

/// The furthest from zero a skew is counted at for the median: a
/// median past a day either way reads as a day.
pub const SKEW_CLAMP: i64 = 86_400;

/// A fleet's clock skews, as the roll-up shows them.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct FleetSkew {
    /// Devices whose report says a skew.
    pub devices: u64,
    /// Of them, those more than [`SKEW_LIMIT`] seconds off either way.
    pub beyond: u64,
    /// The skew furthest from zero (the positive one on a tie).
    pub worst: Option<i64>,
    /// The median skew (the lower of the two middle ones on an even
    /// count), within [`SKEW_CLAMP`] either way.
    pub median: Option<i64>,
}

/// A fleet's skews taken one device at a time, in bounded memory: a count
/// per second of skew within [`SKEW_CLAMP`] (a skew past it counted at
/// it), the count past [`SKEW_LIMIT`] and the worst exact.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SkewTally {
    counts: std::collections::BTreeMap<i64, u64>,
    beyond: u64,
    worst: Option<i64>,
}

impl SkewTally {
    /// Takes one device's skew.
    pub fn add(&mut self, skew: i64) {
        *self
            .counts
            .entry(skew.clamp(-SKEW_CLAMP, SKEW_CLAMP))
            .or_insert(0) += 1;
        if skew.unsigned_abs() > SKEW_LIMIT {
            self.beyond += 1;
        }
        let key = |s: i64| (s.unsigned_abs(), s >= 0);
        if self.worst.is_none_or(|w| key(skew) > key(w)) {
            self.worst = Some(skew);
        }
    }

    /// Whether no device said a skew.
    pub fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }

    /// What the skews taken come to.
    pub fn summary(&self) -> FleetSkew {
        let devices: u64 = self.counts.values().sum();
        let mut left = devices.saturating_sub(1) / 2;
        let mut median = None;
        for (s, n) in &self.counts {
            if left < *n {
                median = Some(*s);
                break;
            }
            left -= n;
        }
        FleetSkew {
            devices,
            beyond: self.beyond,
            worst: self.worst,
            median,
        }
    }

    /// [`SkewTally::summary`] of `skews`, taken in their order.
    pub fn of(skews: &[i64]) -> FleetSkew {
        let mut t = SkewTally::default();
        for s in skews {
            t.add(*s);
        }
        t.summary()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_floor_is_raised_never_lowered() {
        for (floor, seen, want) in [
            (0, 0, None),
            (0, 1_700_000_000, Some(1_700_000_000)),
            (1_700_000_000, 1_700_000_000, None),
            (1_700_000_000, 1_600_000_000, None),
            (1_700_000_000, 1_700_000_001, Some(1_700_000_001)),
            (u64::MAX, 0, None),
        ] {
            assert_eq!(raised(floor, seen), want, "floor {floor}, seen {seen}");
        }
    }

    #[test]
    fn tls_is_checked_at_the_clock_or_the_floor_whichever_is_later() {
        for (clock, floor, want) in [
            (0, 0, 0),
            (0, 1_700_000_000, 1_700_000_000),
            (1_800_000_000, 1_700_000_000, 1_800_000_000),
            (1_700_000_000, 1_700_000_000, 1_700_000_000),
            (86_400, u64::MAX, u64::MAX),
        ] {
            assert_eq!(verify_at(clock, floor), want, "{clock} {floor}");
        }
    }

    #[test]
    fn the_clock_is_stepped_only_forward_and_past_the_threshold() {
        for (clock, target, want) in [
            (0, 1_700_000_000, Some(1_700_000_000)),
            (1_700_000_000, 1_700_000_000, None),
            (1_700_000_000, 1_700_000_002, None),
            (1_700_000_000, 1_700_000_003, Some(1_700_000_003)),
            (1_700_000_003, 1_700_000_000, None),
            (1_800_000_000, 1_700_000_000, None),
            (u64::MAX, u64::MAX, None),
            (u64::MAX - 1, u64::MAX, None),
        ] {
            assert_eq!(step_to(clock, target), want, "{clock} → {target}");
        }
    }

    #[test]
    fn a_host_s_date_steps_the_clock_at_most_a_day_past_signed_time() {
        const F: u64 = 1_700_000_000;
        for (date, floor, want) in [
            (F + 3600, F, F + 3600),
            (F + DATE_LEAD, F, F + DATE_LEAD),
            (F + DATE_LEAD + 1, F, F + DATE_LEAD),
            (4_000_000_000, F, F + DATE_LEAD),
            (F - 10, F, F - 10),
            (u64::MAX, u64::MAX - 1, u64::MAX),
        ] {
            assert_eq!(date_target(date, floor), want, "{date} over {floor}");
        }
    }

    #[test]
    fn skew_is_the_clock_less_the_date_signed() {
        for (clock, date, want) in [
            (100, 100, 0),
            (160, 100, 60),
            (100, 160, -60),
            (0, 1_700_000_000, -1_700_000_000),
            (u64::MAX, 0, i64::MAX),
            (0, u64::MAX, i64::MIN),
        ] {
            assert_eq!(skew(clock, date), want, "{clock} {date}");
        }
    }

    #[test]
    fn a_fleets_skews_are_counted_past_the_limit_with_the_worst_and_the_median() {
        let s = |devices, beyond, worst, median| FleetSkew {
            devices,
            beyond,
            worst,
            median,
        };
        for (skews, want) in [
            (vec![], s(0, 0, None, None)),
            (vec![0], s(1, 0, Some(0), Some(0))),
            (vec![60, -60], s(2, 0, Some(60), Some(-60))),
            (vec![61, -1, 2], s(3, 1, Some(61), Some(2))),
            (vec![-61, 3, 1, 0], s(4, 1, Some(-61), Some(0))),
            (vec![-90, 90], s(2, 2, Some(90), Some(-90))),
            (
                vec![i64::MIN, i64::MAX],
                s(2, 2, Some(i64::MIN), Some(-SKEW_CLAMP)),
            ),
            (vec![90, -90], s(2, 2, Some(90), Some(-90))),
            (
                vec![200_000, 100_000, 0],
                s(3, 2, Some(200_000), Some(SKEW_CLAMP)),
            ),
            (
                vec![-1_700_000_000, 5, 4, 3],
                s(4, 1, Some(-1_700_000_000), Some(3)),
            ),
        ] {
            assert_eq!(SkewTally::of(&skews), want, "{skews:?}");
        }
    }
}
