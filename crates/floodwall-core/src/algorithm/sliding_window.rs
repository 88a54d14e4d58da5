//! A sliding window of sub-buckets (seed 004): the period is cut into `precision`-wide
//! buckets, and a request passes if the buckets of the last period, plus its cost, fit.
//!
//! Any span of `period - precision` admits at most `count`; the finer the precision, the
//! closer to an exact sliding window, and the more counters per key (one per bucket).
//! `precision == period` is a fixed window.

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
    /// Decides in place: `state` is brought up to date (old buckets zeroed, which changes no
    /// decision) and the cost added only when admitted.
    pub(crate) fn decide(&self, state: &mut Option<Buckets>, now: u64, cost: u64) -> Raw {
        let n = self.buckets;
        let mut bucket = now / self.precision;
        if let Some(s) = state.as_mut() {
            // A clock behind the state counts against the newest bucket.
            bucket = bucket.max(s.newest);
            if bucket - s.newest >= n {
                s.counts.fill(0);
            } else {
                for old in s.newest + 1..=bucket {
                    s.counts[(old % n) as usize] = 0;
                }
            }
            s.newest = bucket;
        }
        let counts: &[u64] = state.as_ref().map_or(&[], |s| &s.counts);
        let slot = |i: u64| counts.get((i % n) as usize).copied().unwrap_or(0);
        let sum: u64 = counts.iter().sum();
        let fits = sum + cost <= self.limit;
        let sum_after = if fits { sum + cost } else { sum };
        // The bucket `bucket - n + j` leaves the window at `(bucket + j) × precision`.
        let leaves = |j: u64| (bucket + j) * self.precision - now;
        let retry = if fits {
            0
        } else {
            let mut dropped = 0;
            (1..=n)
                .find(|&j| {
                    dropped += slot(bucket + j);
                    sum - dropped + cost <= self.limit
                })
                .map_or(leaves(n), leaves)
        };
        let reset = if sum_after == 0 {
            0
        } else {
            // Empty once the newest non-zero bucket leaves.
            let newest_used = (0..n)
                .find(|&back| {
                    let count = slot(bucket + n - back);
                    count > 0 || (back == 0 && fits && cost > 0)
                })
                .unwrap_or(0);
            leaves(n - newest_used)
        };
        if fits && cost > 0 {
            let s = state.get_or_insert_with(|| Buckets {
                counts: vec![0; n as usize].into_boxed_slice(),
                newest: bucket,
            });
            s.counts[(bucket % n) as usize] += cost;
        }
        Raw {
            allowed: fits,
            remaining: self.limit - sum_after,
            retry,
            reset,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // 4 per 1_000 µs in 4 buckets of 250.
    const S: SlidingWindow = SlidingWindow {
        limit: 4,
        precision: 250,
        buckets: 4,
    };

    #[test]
    fn old_buckets_slide_out() {
        let mut st = None;
        assert!(S.decide(&mut st, 1_000, 1).allowed); // bucket 4
        assert!(S.decide(&mut st, 1_300, 3).allowed); // bucket 5
        let raw = S.decide(&mut st, 1_900, 1); // bucket 7: window 4..=7 holds 4
        // Bucket 4 leaves at 2_000.
        assert_eq!((raw.allowed, raw.retry, raw.remaining), (false, 100, 0));
        let raw = S.decide(&mut st, 2_000, 1);
        assert_eq!((raw.allowed, raw.remaining), (true, 0));
        // Now buckets 5 (3) and 8 (1): all gone when bucket 8 leaves, at 3_000.
        assert_eq!(raw.reset, 1_000);
        let raw = S.decide(&mut st, 2_000, 3);
        // Bucket 5 (3) leaves at 2_250.
        assert_eq!((raw.allowed, raw.retry), (false, 250));
    }

    #[test]
    fn peek_on_empty_and_a_long_gap() {
        let mut st = None;
        let raw = S.decide(&mut st, 10, 0);
        assert_eq!((raw.allowed, raw.remaining, raw.reset), (true, 4, 0));
        assert!(st.is_none());
        S.decide(&mut st, 10, 4);
        let raw = S.decide(&mut st, 1_000_000, 4);
        assert!(raw.allowed);
        assert_eq!(raw.reset, 1_000);
    }
}
