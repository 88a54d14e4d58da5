//! A sliding window of sub-buckets (precision buckets): the period is cut into `precision`-wide
//! buckets, and a request passes if the buckets of the last period, plus its cost, fit.
//!
//! Any span of `period - precision` admits at most `count`; finer buckets cost more
//! counters per key. `precision == period` is a fixed window.

use super::Raw;

/// Precomputed parameters: limit, bucket width (µs) and bucket count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SlidingWindow {
    pub(crate) limit: u64,
    pub(crate) precision: u64,
    pub(crate) buckets: u64,
}

/// Bucket counters in a ring (`bucket index % buckets`) and the newest bucket index written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Buckets {
    pub(crate) counts: Box<[u64]>,
    pub(crate) newest: u64,
}

impl SlidingWindow {
    /// Decides; `state` changes only when a cost is admitted (not even tidying otherwise,
    /// as the Redis script cannot afford the write).
    pub(crate) fn decide(&self, state: &mut Option<Buckets>, now: u64, cost: u64) -> Raw {
        let n = self.buckets;
        // A clock behind the state counts against the newest bucket.
        let bucket = state.as_ref().map_or(now / self.precision, |s| {
            (now / self.precision).max(s.newest)
        });
        // What bucket `i` holds as seen from `bucket`: stored, and still in the window.
        let view = state.as_ref();
        let slot = |i: u64| -> u64 {
            match view {
                Some(s) if i <= s.newest && i + n > bucket => s.counts[(i % n) as usize],
                _ => 0,
            }
        };
        let oldest = (bucket + 1).saturating_sub(n);
        let sum: u64 = (oldest..=bucket).map(&slot).sum();
        let fits = sum + cost <= self.limit;
        let write = fits && cost > 0;
        let sum_after = if fits { sum + cost } else { sum };
        // Bucket `i` leaves the window at `(i + n) × precision`.
        let leaves = |i: u64| (i + n) * self.precision - now;
        let retry = if fits {
            0
        } else {
            let mut left = sum + cost;
            (oldest..=bucket)
                .find(|&i| {
                    left -= slot(i);
                    left <= self.limit
                })
                .map_or(leaves(bucket), leaves)
        };
        let reset = if write {
            leaves(bucket)
        } else {
            (oldest..=bucket)
                .rev()
                .find(|&i| slot(i) > 0)
                .map_or(0, leaves)
        };
        if write {
            let s = state.get_or_insert_with(|| Buckets {
                counts: vec![0; n as usize].into_boxed_slice(),
                newest: bucket,
            });
            if bucket - s.newest >= n {
                s.counts.fill(0);
            } else {
                for old in s.newest + 1..=bucket {
                    s.counts[(old % n) as usize] = 0;
                }
            }
            s.newest = bucket;
            s.counts[(bucket % n) as usize] += cost;
        }
        Raw {
            allowed: fits,
            // Buckets counted under a larger limit may hold more than this one.
            remaining: self.limit.saturating_sub(sum_after),
            retry,
            reset,
        }
    }
}
