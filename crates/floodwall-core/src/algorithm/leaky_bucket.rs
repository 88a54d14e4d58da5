//! The funnel of seeds 000/001: a bucket of capacity `burst` that leaks one unit per
//! interval; a request pours its cost in and passes if it fits.
//!
//! The seeds' funnel truncated the leaked amount to an integer and reset its clock on every
//! call, so frequent callers stopped it leaking at all. Here the level leaks in whole units and
//! the clock advances by exactly the time those units took, keeping the remainder.
//! Admissions equal GCRA's; the state is a (level, time) pair instead of a timestamp.

use super::Raw;

/// Precomputed parameters: capacity in units, interval in microseconds per unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LeakyBucket {
    pub(crate) capacity: u64,
    pub(crate) interval: u64,
}

/// Water in the funnel, and the time from which the next unit's leak is counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Level {
    pub(crate) level: u64,
    pub(crate) since: u64,
}

impl LeakyBucket {
    pub(crate) fn decide(&self, state: Option<Level>, now: u64, cost: u64) -> (Raw, Option<Level>) {
        let Level { level, since } = match state {
            None => Level {
                level: 0,
                since: now,
            },
            Some(s) => {
                let at = now.max(s.since);
                let leaked = (at - s.since) / self.interval;
                if leaked >= s.level {
                    Level {
                        level: 0,
                        since: at,
                    }
                } else {
                    Level {
                        level: s.level - leaked,
                        since: s.since + leaked * self.interval,
                    }
                }
            }
        };
        // When `n` more units will have leaked (0 when none need to).
        let after = |n: u64| {
            if n == 0 {
                0
            } else {
                since + n * self.interval - now
            }
        };
        let fits = level + cost <= self.capacity;
        let level_after = if fits { level + cost } else { level };
        let raw = Raw {
            allowed: fits,
            remaining: self.capacity - level_after,
            retry: if fits {
                0
            } else {
                after(level + cost - self.capacity)
            },
            reset: after(level_after),
        };
        let write = fits && cost > 0;
        (
            raw,
            write.then_some(Level {
                level: level_after,
                since,
            }),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const F: LeakyBucket = LeakyBucket {
        capacity: 3,
        interval: 100,
    };

    #[test]
    fn leaks_one_unit_per_interval_keeping_the_remainder() {
        let (_, s) = F.decide(None, 1_000, 3);
        let s = s.unwrap();
        // Called every 60 µs: the seeds' funnel would never leak; this one leaks at 1_100.
        let (raw, _) = F.decide(Some(s), 1_060, 1);
        assert_eq!((raw.allowed, raw.retry), (false, 40));
        let (raw, s2) = F.decide(Some(s), 1_120, 1);
        assert!(raw.allowed);
        assert_eq!(
            s2,
            Some(Level {
                level: 3,
                since: 1_100
            })
        );
        assert_eq!(raw.reset, 280);
    }

    #[test]
    fn an_emptied_funnel_restarts_its_clock() {
        let s = Level { level: 1, since: 0 };
        let (raw, s2) = F.decide(Some(s), 10_050, 1);
        assert_eq!((raw.allowed, raw.remaining, raw.reset), (true, 2, 100));
        assert_eq!(
            s2,
            Some(Level {
                level: 1,
                since: 10_050
            })
        );
    }
}
