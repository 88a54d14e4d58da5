//! How much may pass: `count` per `period`, with a `burst`.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use crate::ConfigError;

/// The longest span floodwall computes with: 100 years.
///
/// Redis scripts compute in Lua doubles, exact up to 2^53 µs (about 285 years after 1970):
/// capping spans at 100 years keeps `now + span` exact there.
pub const MAX_SPAN: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// `count` units per `period`, of which up to `burst` may pass at once.
///
/// Valid by construction: a zero count or burst, or a period under 1 µs or over
/// [`MAX_SPAN`], is refused.
///
/// # Examples
///
/// ```
/// use floodwall_core::Quota;
/// use std::time::Duration;
///
/// let q = Quota::per_second(10)?.with_burst(20)?;
/// assert_eq!((q.count(), q.period(), q.burst()), (10, Duration::from_secs(1), 20));
///
/// // The same, as people write it in configuration:
/// assert_eq!("10/s burst 20".parse::<Quota>()?, q);
/// assert_eq!("100/min".parse::<Quota>()?, Quota::per_minute(100)?);
/// assert_eq!("10/30s".parse::<Quota>()?, Quota::new(10, Duration::from_secs(30))?);
///
/// assert!("0/s".parse::<Quota>().is_err());
/// # Ok::<(), floodwall_core::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Quota {
    count: u64,
    period_us: u64,
    burst: u64,
}

impl Quota {
    /// The largest count or burst: 2^53 - 1. Redis scripts do their arithmetic in Lua
    /// doubles, exact up to 2^53, and every store must count the same.
    pub const MAX_COUNT: u64 = (1 << 53) - 1;

    /// `count` per `period`, with a burst equal to `count`.
    pub fn new(count: u64, period: Duration) -> Result<Self, ConfigError> {
        if count == 0 {
            return Err(ConfigError::ZeroCount);
        }
        if count > Self::MAX_COUNT {
            return Err(ConfigError::CountTooLarge {
                what: "count",
                value: count,
            });
        }
        if period > MAX_SPAN {
            return Err(ConfigError::SpanTooLong { what: "period" });
        }
        if period.as_nanos() < 1000 {
            return Err(ConfigError::PeriodTooShort { period });
        }
        // Round a fraction of a microsecond up: a longer period is the stricter quota.
        let period_us = period.as_nanos().div_ceil(1000) as u64;
        Ok(Self {
            count,
            period_us,
            burst: count,
        })
    }

    /// `count` per second.
    pub fn per_second(count: u64) -> Result<Self, ConfigError> {
        Self::new(count, Duration::from_secs(1))
    }

    /// `count` per minute.
    pub fn per_minute(count: u64) -> Result<Self, ConfigError> {
        Self::new(count, Duration::from_secs(60))
    }

    /// `count` per hour.
    pub fn per_hour(count: u64) -> Result<Self, ConfigError> {
        Self::new(count, Duration::from_secs(3600))
    }

    /// `count` per day.
    pub fn per_day(count: u64) -> Result<Self, ConfigError> {
        Self::new(count, Duration::from_secs(86_400))
    }

    /// The same rate, letting up to `burst` pass at once (GCRA and the buckets; window
    /// algorithms refuse a burst that differs from the count).
    pub fn with_burst(self, burst: u64) -> Result<Self, ConfigError> {
        if burst == 0 {
            return Err(ConfigError::ZeroBurst);
        }
        if burst > Self::MAX_COUNT {
            return Err(ConfigError::CountTooLarge {
                what: "burst",
                value: burst,
            });
        }
        Ok(Self { burst, ..self })
    }

    /// Units per period.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The period, at microsecond resolution.
    pub fn period(&self) -> Duration {
        Duration::from_micros(self.period_us)
    }

    /// How many units may pass at once.
    pub fn burst(&self) -> u64 {
        self.burst
    }

    /// The period in microseconds, the unit all algorithms compute in.
    pub fn period_micros(&self) -> u64 {
        self.period_us
    }

    /// The time one unit takes to replenish, in microseconds, rounded up so the limiter never
    /// admits more than the quota; an error when it would be under one microsecond.
    pub fn interval_micros(&self) -> Result<u64, ConfigError> {
        if self.count > self.period_us {
            return Err(ConfigError::RateTooHigh {
                count: self.count,
                period: self.period(),
            });
        }
        Ok(self.period_us.div_ceil(self.count))
    }
}

impl fmt::Display for Quota {
    /// Writes the quota in the syntax [`FromStr`] reads, e.g. `10/1s burst 20`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/", self.count)?;
        write_period(f, self.period_us)?;
        if self.burst != self.count {
            write!(f, " burst {}", self.burst)?;
        }
        Ok(())
    }
}

fn write_period(f: &mut fmt::Formatter<'_>, us: u64) -> fmt::Result {
    const UNITS: [(u64, &str); 6] = [
        (86_400_000_000, "d"),
        (3_600_000_000, "h"),
        (60_000_000, "min"),
        (1_000_000, "s"),
        (1_000, "ms"),
        (1, "us"),
    ];
    for (size, name) in UNITS {
        if us.is_multiple_of(size) {
            return write!(f, "{}{name}", us / size);
        }
    }
    unreachable!("every period is a whole number of microseconds")
}

impl FromStr for Quota {
    type Err = ConfigError;

    /// Reads `COUNT/[N]UNIT [burst B]` (`10/30s burst 20`; whitespace around parts ignored),
    /// units `us`, `ms`, `s`/`sec`/`second(s)`, `m`/`min`/`minute(s)`, `h`/`hour(s)`, `d`/`day(s)`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = |reason: &str| ConfigError::Parse {
            input: s.to_owned(),
            reason: reason.to_owned(),
        };
        let (rate, burst) = match s.split_once("burst") {
            Some((rate, burst)) => (rate, Some(burst.trim())),
            None => (s, None),
        };
        let (count, period) = rate
            .split_once('/')
            .ok_or_else(|| err("expected COUNT/PERIOD, e.g. 10/s"))?;
        let count: u64 = parse_number(count.trim()).ok_or_else(|| err("count is not a number"))?;
        let period = parse_period(period.trim()).map_err(err)?;
        let quota = Quota::new(count, period)?;
        match burst {
            None => Ok(quota),
            Some(b) => {
                let b = parse_number(b).ok_or_else(|| err("burst is not a number"))?;
                quota.with_burst(b)
            }
        }
    }
}

fn parse_number(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit() || b == b'_') {
        return None;
    }
    s.replace('_', "").parse().ok()
}

/// Reads a duration as quotas write their periods (`500ms`, `30s`, `10min`, `1h`, `1day`;
/// no number means one), for spans configured beside quotas (a ban).
///
/// ```
/// use std::time::Duration;
/// assert_eq!(floodwall_core::parse_duration("10min")?, Duration::from_secs(600));
/// assert!(floodwall_core::parse_duration("10 parsecs").is_err());
/// # Ok::<(), floodwall_core::ConfigError>(())
/// ```
pub fn parse_duration(s: &str) -> Result<Duration, ConfigError> {
    parse_period(s.trim()).map_err(|reason| ConfigError::Parse {
        input: s.to_owned(),
        reason: reason.to_owned(),
    })
}

fn parse_period(s: &str) -> Result<Duration, &'static str> {
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (n, unit) = s.split_at(split);
    let n: u64 = if n.is_empty() {
        1
    } else {
        n.parse().map_err(|_| "period count is too large")?
    };
    let unit_us: u64 = match unit.trim() {
        "us" | "µs" => 1,
        "ms" => 1_000,
        "s" | "sec" | "second" | "seconds" => 1_000_000,
        "m" | "min" | "minute" | "minutes" => 60_000_000,
        "h" | "hour" | "hours" => 3_600_000_000,
        "d" | "day" | "days" => 86_400_000_000,
        "" => return Err("period has no unit (us, ms, s, min, hour, day)"),
        _ => return Err("unknown period unit (use us, ms, s, min, hour, day)"),
    };
    let us = n.checked_mul(unit_us).ok_or("period overflows")?;
    Ok(Duration::from_micros(us))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> Result<Quota, ConfigError> {
        s.parse()
    }

    /// The error, for a `matches!` on one line.
    fn err(r: Result<impl fmt::Debug, ConfigError>) -> ConfigError {
        r.expect_err("refused")
    }

    #[test]
    fn parses_the_forms_people_write() {
        assert_eq!(q("10/s").unwrap(), Quota::per_second(10).unwrap());
        assert_eq!(q("100/min").unwrap(), Quota::per_minute(100).unwrap());
        assert_eq!(q("5000/hour").unwrap(), Quota::per_hour(5000).unwrap());
        assert_eq!(q("1/day").unwrap(), Quota::per_day(1).unwrap());
        let thirty = Quota::new(10, Duration::from_secs(30)).unwrap();
        assert_eq!(q("10/30s").unwrap(), thirty);
        let b = q(" 10 / s  burst 20 ").unwrap();
        assert_eq!((b.count(), b.burst()), (10, 20));
        let ms = Duration::from_millis(250);
        assert_eq!(q("1_000/250ms").unwrap().period(), ms);
    }

    #[test]
    fn refuses_nonsense_with_a_reason() {
        assert_eq!(q("0/s"), Err(ConfigError::ZeroCount));
        assert_eq!(q("10/s burst 0"), Err(ConfigError::ZeroBurst));
        assert!(matches!(
            err(q("10/0s")),
            ConfigError::PeriodTooShort { .. }
        ));
        assert!(q("10/s").is_ok());
        let overflows = [
            "1/99999999999999999999d",
            "1/18446744073709d",
            "18446744073709551616/s",
        ];
        for bad in ["10", "ten/s", "10/fortnight", "-1/s", "10/s burst x"]
            .iter()
            .chain(&overflows)
        {
            assert!(matches!(err(q(bad)), ConfigError::Parse { .. }), "{bad}");
        }
        assert!(matches!(
            err(q("1/36600d")),
            ConfigError::SpanTooLong { .. }
        ));
    }

    #[test]
    fn signs_and_missing_units_are_refused_with_a_reason() {
        let reason = |s: &str| match q(s) {
            Err(ConfigError::Parse { reason, .. }) => reason,
            other => panic!("{s}: expected a parse error, got {other:?}"),
        };
        // Counts are digits (and `_`) only: `u64`'s own parser would take a `+`.
        assert_eq!(reason("+5/s"), "count is not a number");
        assert_eq!(reason("5/s burst +9"), "burst is not a number");
        assert_eq!(reason("/s"), "count is not a number");
        assert!(reason("10/5").contains("no unit"), "{}", reason("10/5"));
        assert!(reason("10/").contains("no unit"));
        assert!(reason("10/5 fortnights").contains("unknown period unit"));
    }

    /// Redis scripts compute `now + span` (µs since the epoch) in Lua doubles, which hold
    /// integers exactly only up to 2^53: every span at most `MAX_SPAN` keeps that sum exact
    /// for any `now` up to the year 2150. And `MAX_SPAN` is the century the docs promise: a
    /// quota of one per century is accepted, one a microsecond longer is not.
    #[test]
    fn max_span_keeps_now_plus_a_span_exact_in_a_lua_double() {
        const YEAR_US: u64 = 31_557_600_000_000; // 365.25 days
        let year_2150 = 180 * YEAR_US;
        let latest = year_2150 + MAX_SPAN.as_micros() as u64;
        assert!(latest < 1 << 53, "{latest} is past 2^53");
        let century = Duration::from_secs(100 * 365 * 24 * 3600);
        assert!(Quota::new(1, century).is_ok());
        let past = Quota::new(1, century + Duration::from_micros(1));
        assert!(matches!(err(past), ConfigError::SpanTooLong { .. }));
    }

    /// Counts are added and compared in Lua doubles (`used + cost > limit`): at the largest
    /// count, one unit more must still be told apart from it. `MAX_COUNT` is the largest
    /// count for which that holds, and it is accepted while one more is not.
    #[test]
    fn max_count_is_the_largest_a_lua_double_counts_past_exactly() {
        let exact_past = |n: u64| {
            let f = n as f64;
            f as u64 == n && f + 1.0 > f && (f + 1.0) as u64 == n + 1
        };
        assert!(exact_past(Quota::MAX_COUNT));
        assert!(!exact_past(Quota::MAX_COUNT + 1));
        let most = Quota::new(Quota::MAX_COUNT, Duration::from_secs(1)).unwrap();
        let burst = most.with_burst(Quota::MAX_COUNT).unwrap().burst();
        assert_eq!(burst, Quota::MAX_COUNT);
        let past = most.with_burst(Quota::MAX_COUNT + 1);
        assert!(matches!(
            err(past),
            ConfigError::CountTooLarge { what: "burst", .. }
        ));
    }

    #[test]
    fn sub_microsecond_periods_are_refused() {
        let short = Quota::new(1, Duration::from_nanos(999));
        assert!(matches!(err(short), ConfigError::PeriodTooShort { .. }));
        assert!(Quota::new(1, Duration::from_micros(1)).is_ok());
    }

    #[test]
    fn intervals_round_up_and_refuse_sub_microsecond_rates() {
        assert_eq!(q("10/s").unwrap().interval_micros(), Ok(100_000));
        assert_eq!(q("3/s").unwrap().interval_micros(), Ok(333_334));
        let fast = q("2000000/s").unwrap().interval_micros();
        assert!(matches!(err(fast), ConfigError::RateTooHigh { .. }));
        let most = Quota::per_second(Quota::MAX_COUNT).unwrap();
        assert!(most.interval_micros().is_err());
        let past = Quota::per_second(Quota::MAX_COUNT + 1);
        assert!(matches!(
            err(past),
            ConfigError::CountTooLarge { what: "count", .. }
        ));
        let past = most.with_burst(u64::MAX);
        assert!(matches!(
            err(past),
            ConfigError::CountTooLarge { what: "burst", .. }
        ));
    }

    #[test]
    fn display_round_trips() {
        for s in [
            "10/1s",
            "100/1min",
            "7/30s burst 9",
            "1/250ms",
            "3/1d",
            "5/7us",
        ] {
            let quota = q(s).unwrap();
            assert_eq!(quota.to_string(), s);
            assert_eq!(q(&quota.to_string()).unwrap(), quota);
        }
    }
}
