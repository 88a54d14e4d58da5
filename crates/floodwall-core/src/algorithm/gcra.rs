//! GCRA, the generic cell rate algorithm: a leaky bucket kept as one timestamp.
//!
//! The state is the theoretical arrival time (TAT), when the bucket would be empty again:
//! cost `c` passes if TAT pushed by `c × interval` is at most `burst × interval` ahead of
//! now. This is redis-cell's `CL.THROTTLE` (`limit = burst = max_burst + 1`).

use super::Raw;
use crate::Error;

/// Precomputed GCRA parameters, all in microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Gcra {
    /// Time one unit takes to replenish (emission interval).
    pub(crate) interval: u64,
    /// How far ahead of now TAT may be: `burst × interval` (delay variation tolerance).
    pub(crate) tolerance: u64,
    pub(crate) burst: u64,
}

impl Gcra {
    /// `burst` units, one replenished every `interval` µs; `None` when `burst × interval`
    /// overflows. The funnel is this too (see `leaky_bucket.rs`).
    pub(crate) fn new(burst: u64, interval: u64) -> Option<Self> {
        Some(Self {
            interval,
            tolerance: burst.checked_mul(interval)?,
            burst,
        })
    }

    /// The engine's cost check, without its `match`.
    #[inline]
    pub(crate) fn check_cost(&self, cost: u64) -> Result<(), Error> {
        super::check_cost(cost, self.burst)
    }

    /// Decides on a stored TAT (0 for a fresh key); returns the TAT to store when it changed.
    #[inline]
    pub(crate) fn decide(&self, tat: u64, now: u64, cost: u64) -> (Raw, Option<u64>) {
        let (judgement, next) = self.judge(tat, now, cost);
        (self.raw(judgement), next)
    }

    /// [`decide`](Self::decide) without `remaining` (a division), which [`raw`](Self::raw)
    /// works out once the memory store's map is unpinned.
    #[inline]
    pub(crate) fn judge(&self, tat: u64, now: u64, cost: u64) -> (Judgement, Option<u64>) {
        let base = tat.max(now);
        let new_tat = base + cost * self.interval;
        let ahead = new_tat - now;
        if ahead <= self.tolerance {
            let judgement = Judgement {
                allowed: true,
                ttl: ahead,
                retry: 0,
            };
            (judgement, (cost > 0).then_some(new_tat))
        } else {
            let judgement = Judgement {
                allowed: false,
                ttl: base - now,
                retry: ahead - self.tolerance,
            };
            (judgement, None)
        }
    }

    /// The figures of a decision.
    #[inline]
    pub(crate) fn raw(&self, judgement: Judgement) -> Raw {
        let left = self.tolerance - judgement.ttl.min(self.tolerance);
        // Less than one interval left (every denial of a single unit): no need to divide.
        let remaining = if left < self.interval {
            0
        } else {
            left / self.interval
        };
        Raw {
            allowed: judgement.allowed,
            remaining,
            retry: judgement.retry,
            reset: judgement.ttl,
        }
    }
}

/// A GCRA decision before `remaining` is worked out.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Judgement {
    allowed: bool,
    /// How far TAT is ahead of now after this decision (µs): the `reset`.
    ttl: u64,
    retry: u64,
}
