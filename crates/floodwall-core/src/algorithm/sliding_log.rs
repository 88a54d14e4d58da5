//! The sliding log (the classic Redis sorted set of request timestamps): one entry per
//! admitted request, exact over any window.
//!
//! A request passes if the costs logged in the last period, plus its own, fit in `count`.
//! Unlike the classic log, a denied request is not logged (it consumed nothing), and
//! requests of the same microsecond share one entry (where timestamp members collide).
//!
//! Memory: up to about twice `count` entries per key, which is why counts above
//! [`Algorithm::SLIDING_LOG_MAX_ENTRIES`](crate::Algorithm::SLIDING_LOG_MAX_ENTRIES) are refused.

use std::collections::VecDeque;

use super::Raw;

/// Precomputed parameters: the limit and the period in microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SlidingLog {
    pub(crate) limit: u64,
    pub(crate) period: u64,
}

/// Admitted `(time, cost)` entries, in time order, and the sum of their costs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Log {
    pub(crate) entries: VecDeque<(u64, u64)>,
    pub(crate) total: u64,
}

impl SlidingLog {
    /// The grid on which entries that left the window are dropped (a quarter period in
    /// whole ms), the Redis script's too: both hold the same entries after a clock step.
    fn grid(&self) -> u64 {
        (self.period / 4_000).max(1) * 1_000
    }

    /// The cell of [`grid`](Self::grid) holding the end of an entry's stay in the window
    /// (the newest entry's is the Redis script's marker).
    fn cell(&self, t: u64) -> u64 {
        t.saturating_add(self.period) / self.grid()
    }

    /// Decides; `log` changes only when a cost is admitted (a denial or a peek writes
    /// nothing, as in the Redis script).
    ///
    /// Entries after `now - period` count, later ones too (after a clock stepped back:
    /// stricter, never looser); the admission is logged at `now`, in time order. An
    /// admission reaching a later cell of [`grid`](Self::grid) drops the entries that left
    /// the window. An admission's `reset` takes it as the newest entry, as the Redis script
    /// does; stores keep the latest `reset` of their decisions.
    pub(crate) fn decide(&self, log: &mut Log, now: u64, cost: u64) -> Raw {
        // Entries are in time order: the expired ones are a prefix.
        let live_from = log
            .entries
            .partition_point(|&(t, _)| t + self.period <= now);
        let expired: u64 = log.entries.range(..live_from).map(|&(_, c)| c).sum();
        let used = log.total - expired;
        let fits = used + cost <= self.limit;
        // Entry `(t, _)` stops counting at `t + period`, after now for a live entry.
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
        let newest = log.entries.range(live_from..).next_back().map(|&(t, _)| t);
        let write = fits && cost > 0;
        let reset = if write {
            self.period
        } else {
            newest.map_or(0, leaves)
        };
        if write {
            let latest = log.entries.back().map(|&(t, _)| self.cell(t));
            if latest.is_none_or(|c| self.cell(now) > c) {
                log.entries.drain(..live_from);
                log.total = used;
            }
            let at = log.entries.partition_point(|&(t, _)| t <= now);
            match at.checked_sub(1).and_then(|i| log.entries.get_mut(i)) {
                Some((t, c)) if *t == now => *c += cost,
                _ => log.entries.insert(at, (now, cost)),
            }
            log.total += cost;
        }
        Raw {
            allowed: fits,
            // After a clock stepped back, the entries counted may pass the limit.
            remaining: self
                .limit
                .saturating_sub(if fits { used + cost } else { used }),
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

    #[test]
    fn a_clock_behind_counts_later_entries_and_logs_in_time_order() {
        let mut log = Log::default();
        assert!(L.decide(&mut log, 5_000, 2).allowed);
        // 2 ms back: the entry at 5 ms is in the future and still counts.
        let raw = L.decide(&mut log, 3_000, 1);
        assert_eq!((raw.allowed, raw.remaining, raw.reset), (true, 0, 1_000));
        assert_eq!(log.entries, [(3_000, 1), (5_000, 2)]);
        // Room when the 3 ms entry leaves; full again when the 5 ms one does.
        let raw = L.decide(&mut log, 3_500, 1);
        assert_eq!((raw.allowed, raw.retry, raw.reset), (false, 500, 2_500));
        // The grid is 1 ms here: 3 ms's admission reached no later cell than 5 ms's, so
        // nothing was dropped; 6.5 ms's does, and drops what has left the window.
        assert!(L.decide(&mut log, 6_500, 1).allowed);
        assert_eq!(log.entries, [(6_500, 1)]);
        assert_eq!(log.total, 1);
    }
}
