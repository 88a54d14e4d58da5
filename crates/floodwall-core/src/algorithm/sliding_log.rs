//! The sliding log of seeds 000/001: one entry per admitted request, exact over any window.
//!
//! A request passes if the costs logged in the last period, plus its own, fit in `count`.
//! Unlike the seeds, a denied request is not logged (it consumed nothing), and requests of
//! the same microsecond share one entry (the seeds' members collided instead).
//!
//! Memory: up to `count` entries per key (16 bytes each in memory; in a Redis sorted set one
//! member of about 36 bytes per admitted unit), which is why counts above
//! [`Algorithm::SLIDING_LOG_MAX_ENTRIES`](crate::Algorithm::SLIDING_LOG_MAX_ENTRIES) are refused.

use std::collections::VecDeque;

use super::Raw;

/// Precomputed parameters: the limit and the period in microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SlidingLog {
    pub(crate) limit: u64,
    pub(crate) period: u64,
}

/// Admitted `(time, cost)` entries, oldest first, and the sum of their costs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Log {
    pub(crate) entries: VecDeque<(u64, u64)>,
    pub(crate) total: u64,
}

impl SlidingLog {
    /// Decides; `log` changes only when a cost is admitted (expired entries are dropped
    /// then). A denial or a peek writes nothing, as in the Redis script.
    pub(crate) fn decide(&self, log: &mut Log, now: u64, cost: u64) -> Raw {
        // A clock behind the newest entry counts as the newest entry's time, so entries are
        // never "in the future" and uncounted.
        let at = log.entries.back().map_or(now, |&(t, _)| now.max(t));
        // Entries are in time order: the expired ones are a prefix.
        let live_from = log.entries.partition_point(|&(t, _)| t + self.period <= at);
        let expired: u64 = log.entries.range(..live_from).map(|&(_, c)| c).sum();
        let used = log.total - expired;
        let fits = used + cost <= self.limit;
        let write = fits && cost > 0;
        // Entry `(t, _)` stops counting at `t + period`.
        let leaves = |t: u64| t + self.period - now;
        let retry = if fits {
            0
        } else {
            let mut left = used + cost;
            log.entries
                .range(live_from..)
                .find(|&&(_, c)| {
                    left -= c;
                    left <= self.limit
                })
                .map_or(0, |&(t, _)| leaves(t))
        };
        if write {
            log.entries.drain(..live_from);
            log.total = used + cost;
            match log.entries.back_mut() {
                Some((t, c)) if *t == at => *c += cost,
                _ => log.entries.push_back((at, cost)),
            }
        }
        let newest = log
            .entries
            .range(live_from.min(log.entries.len())..)
            .next_back();
        let reset = match (write, newest) {
            (true, _) => leaves(at),
            (false, Some(&(t, _))) => leaves(t),
            (false, None) => 0,
        };
        Raw {
            allowed: fits,
            remaining: self.limit - if fits { used + cost } else { used },
            retry,
            reset,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const L: SlidingLog = SlidingLog {
        limit: 3,
        period: 1_000,
    };

    #[test]
    fn exact_over_the_last_period_and_denials_are_not_logged() {
        let mut log = Log::default();
        assert!(L.decide(&mut log, 100, 1).allowed);
        assert!(L.decide(&mut log, 100, 1).allowed);
        assert_eq!(log.entries.len(), 1, "same microsecond, one entry");
        assert!(L.decide(&mut log, 600, 1).allowed);
        for _ in 0..5 {
            let raw = L.decide(&mut log, 1_099, 1);
            assert_eq!((raw.allowed, raw.retry), (false, 1));
        }
        assert_eq!(log.total, 3, "denials consumed nothing");
        let before = log.clone();
        // A peek long after writes nothing, not even dropping expired entries.
        assert_eq!(L.decide(&mut log, 9_000, 0).remaining, 3);
        assert_eq!(log, before);
        let raw = L.decide(&mut log, 1_100, 2);
        assert_eq!((raw.allowed, raw.remaining, raw.reset), (true, 0, 1_000));
        let raw = L.decide(&mut log, 1_100, 1);
        assert_eq!((raw.allowed, raw.retry), (false, 500));
    }
}
