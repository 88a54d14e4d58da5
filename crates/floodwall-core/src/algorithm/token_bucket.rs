//! juju/ratelimit's token bucket: tokens are added in whole ticks.
//!
//! Every `tick`, `quantum` tokens are added, up to `capacity` (the burst). Ticks are aligned
//! to the Unix epoch, so every node agrees on them. A tick as long as the period refills the
//! whole bucket at once and behaves like a fixed window with a burst; the default tick (one
//! token per `period / count`) behaves like GCRA.
//!
//! The state is the tokens the bucket is short of full (owed) and the tick it was counted at.
//! A clock behind the state owes the tokens of the ticks it has not reached yet: the bucket
//! looks emptier, never fuller, and every wait ends at the same instant it would have on the
//! state's own clock. On a clock that counts tokens (`tick index × quantum` is how many
//! tokens the epoch-aligned ticks have added), the pair is one number, the count at which
//! the bucket is full again; the Redis script stores that single integer whenever it stays
//! below 2^53, where Lua's doubles are exact: for every bucket adding at most one token per
//! microsecond, until the year 2255 (parsing a pair costs Redis more than the decision's
//! arithmetic: BENCHMARKS.md §2 measures it).

use super::Raw;

/// Precomputed parameters, in microseconds and tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TokenBucket {
    pub(crate) capacity: u64,
    pub(crate) tick: u64,
    pub(crate) quantum: u64,
}

/// Tokens owed (short of full) as of a tick.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Owed {
    pub(crate) owed: u64,
    pub(crate) tick: u64,
}

impl TokenBucket {
    /// Decides on a stored state (`None` for a fresh key); returns the state to store when
    /// it changed.
    pub(crate) fn decide(&self, state: Option<Owed>, now: u64, cost: u64) -> (Raw, Option<Owed>) {
        let tick = now / self.tick;
        let owed = match state {
            None => 0,
            Some(s) if s.tick <= tick => s
                .owed
                .saturating_sub((tick - s.tick).saturating_mul(self.quantum)),
            // Behind the state: the ticks not reached yet are owed too.
            Some(s) => s
                .owed
                .saturating_add((s.tick - tick).saturating_mul(self.quantum)),
        };
        // When `missing` more tokens will have been added (0 when none are missing).
        let wait_for = |missing: u64| -> u64 {
            if missing == 0 {
                0
            } else {
                (tick + missing.div_ceil(self.quantum)).saturating_mul(self.tick) - now
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
            (raw, (cost > 0).then_some(Owed { owed, tick }))
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
        assert_eq!(s, Some(Owed { owed: 5, tick: 10 }));
        let (raw, _) = B.decide(s, 1_099, 1);
        assert_eq!((raw.allowed, raw.retry), (false, 1));
        let (raw, _) = B.decide(s, 1_100, 3);
        assert_eq!((raw.allowed, raw.remaining, raw.retry), (false, 2, 100));
        let (raw, s2) = B.decide(s, 1_200, 3);
        assert_eq!((raw.allowed, raw.remaining), (true, 1));
        assert_eq!(s2, Some(Owed { owed: 4, tick: 12 }));
        // Long after, the bucket is full and the state is spent.
        let (raw, _) = B.decide(s2, 9_000, 0);
        assert_eq!((raw.remaining, raw.reset), (5, 0));
    }

    #[test]
    fn a_clock_behind_the_state_is_stricter_and_waits_for_the_same_instant() {
        // Empty at tick 20 (2_000 µs), 5 short; full at tick 23.
        let s = Some(Owed { owed: 5, tick: 20 });
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
