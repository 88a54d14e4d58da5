//! The token bucket of juju/ratelimit (seed 003): tokens are added in whole ticks.
//!
//! Every `tick`, `quantum` tokens are added, up to `capacity` (the burst). Ticks are aligned
//! to the Unix epoch, so every node agrees on them. A tick as long as the period refills the
//! whole bucket at once and behaves like a fixed window with a burst; the default tick (one
//! token per `period / count`) behaves like GCRA.
//!
//! The state is one integer, as GCRA's is, on a clock that counts tokens instead of
//! microseconds: `tick index × quantum` is how many tokens the epoch-aligned ticks have added
//! so far, and the state is that count at which the bucket is full again (the last tick
//! counted plus the tokens it was short). The tokens owed now are the state minus the
//! current count; nothing is owed once the ticks have caught up. One number is what a Redis
//! script can read and write without parsing (`BENCHMARKS.md`, section 1).
//!
//! A clock behind the state owes the tokens of the ticks it has not reached yet: the bucket
//! looks emptier, never fuller, and every wait ends at the same instant it would have on the
//! state's own clock.

use super::Raw;

/// Precomputed parameters, in microseconds and tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TokenBucket {
    pub(crate) capacity: u64,
    pub(crate) tick: u64,
    /// At most `tick` (the engine refuses more than one token per microsecond), so that
    /// `tick index × quantum` never exceeds the time in microseconds: below 2^53, where a
    /// Lua script's doubles are exact, until the year 2255.
    pub(crate) quantum: u64,
}

impl TokenBucket {
    /// Decides on a stored "full at" count (`None` for a fresh key); returns the count to
    /// store when it changed.
    pub(crate) fn decide(&self, state: Option<u64>, now: u64, cost: u64) -> (Raw, Option<u64>) {
        let tick = now / self.tick;
        let added = tick * self.quantum;
        let owed = state.map_or(0, |full_at| full_at.saturating_sub(added));
        // When `missing` more tokens will have been added (0 when none are missing).
        let wait_for = |missing: u64| -> u64 {
            if missing == 0 {
                0
            } else {
                (tick + missing.div_ceil(self.quantum)) * self.tick - now
            }
        };
        let tokens = self.capacity.saturating_sub(owed);
        if cost <= tokens {
            let owed = owed + cost;
            let raw = Raw {
                allowed: true,
                remaining: tokens - cost,
                retry: 0,
                reset: wait_for(owed),
            };
            (raw, (cost > 0).then_some(added + owed))
        } else {
            let raw = Raw {
                allowed: false,
                remaining: tokens,
                retry: wait_for(owed + cost - self.capacity),
                reset: wait_for(owed),
            };
            (raw, None)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // 2 tokens every 100 µs, up to 5.
    const B: TokenBucket = TokenBucket {
        capacity: 5,
        tick: 100,
        quantum: 2,
    };

    #[test]
    fn refills_in_whole_ticks() {
        let (raw, s) = B.decide(None, 1_050, 5);
        assert!(raw.allowed);
        assert_eq!(raw.remaining, 0);
        // Tick 10 ends at 1_100: 2 tokens; 1_200: 4; 1_300: 5 (capped).
        assert_eq!(raw.reset, 250);
        // Ticks 0..=10 have added 20 tokens; the bucket is 5 short of full.
        assert_eq!(s, Some(25));
        let (raw, _) = B.decide(s, 1_099, 1);
        assert_eq!((raw.allowed, raw.retry), (false, 1));
        let (raw, _) = B.decide(s, 1_100, 3);
        assert_eq!((raw.allowed, raw.remaining, raw.retry), (false, 2, 100));
        let (raw, s2) = B.decide(s, 1_200, 3);
        assert_eq!((raw.allowed, raw.remaining), (true, 1));
        // Tick 12: 24 added, 4 owed.
        assert_eq!(s2, Some(28));
        // Long after, the bucket is full and the state is spent.
        let (raw, _) = B.decide(s2, 9_000, 0);
        assert_eq!((raw.remaining, raw.reset), (5, 0));
    }

    #[test]
    fn a_clock_behind_the_state_is_stricter_and_waits_for_the_same_instant() {
        // Empty at tick 20 (2_000 µs); full at tick 23, when 46 tokens have been added.
        let s = Some(45);
        let (raw, _) = B.decide(s, 2_000, 1);
        assert_eq!((raw.allowed, raw.retry, raw.reset), (false, 100, 300));
        // At 1_000 (tick 10) the 20 tokens of ticks 11..=20 are owed too: still empty, and
        // the token and the full bucket come at the same instants as above.
        let (raw, s2) = B.decide(s, 1_000, 1);
        assert_eq!(
            (raw.allowed, raw.remaining, raw.retry, raw.reset, s2),
            (false, 0, 1_100, 1_300, None)
        );
        let (raw, _) = B.decide(s, 1_000, 0);
        assert_eq!((raw.allowed, raw.remaining), (true, 0));
    }
}
