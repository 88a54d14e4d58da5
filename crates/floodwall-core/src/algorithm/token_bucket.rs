//! The token bucket of juju/ratelimit (seed 003): tokens are added in whole ticks.
//!
//! Every `tick`, `quantum` tokens are added, up to `capacity` (the burst). Ticks are aligned
//! to the Unix epoch, so every node agrees on them. A tick as long as the period refills the
//! whole bucket at once and behaves like a fixed window with a burst; the default tick (one
//! token per `period / count`) behaves like GCRA.

use super::Raw;

/// Precomputed parameters, in microseconds and tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TokenBucket {
    pub(crate) capacity: u64,
    pub(crate) tick: u64,
    pub(crate) quantum: u64,
}

/// Tokens left and the tick they were counted at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Tokens {
    pub(crate) tokens: u64,
    pub(crate) tick: u64,
}

impl TokenBucket {
    pub(crate) fn decide(
        &self,
        state: Option<Tokens>,
        now: u64,
        cost: u64,
    ) -> (Raw, Option<Tokens>) {
        let mut tick = now / self.tick;
        let tokens = match state {
            None => self.capacity,
            Some(s) => {
                // A clock behind the state adds nothing and never moves the anchor back,
                // or the same ticks would be refilled twice.
                tick = tick.max(s.tick);
                let added = (tick - s.tick).saturating_mul(self.quantum);
                s.tokens.saturating_add(added).min(self.capacity)
            }
        };
        let wait_for = |missing: u64| -> u64 {
            if missing == 0 {
                0
            } else {
                (tick + missing.div_ceil(self.quantum)) * self.tick - now
            }
        };
        if cost <= tokens {
            let left = tokens - cost;
            let raw = Raw {
                allowed: true,
                remaining: left,
                retry: 0,
                reset: wait_for(self.capacity - left),
            };
            (raw, (cost > 0).then_some(Tokens { tokens: left, tick }))
        } else {
            let raw = Raw {
                allowed: false,
                remaining: tokens,
                retry: wait_for(cost - tokens),
                reset: wait_for(self.capacity - tokens),
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
        let s = s.unwrap();
        let (raw, _) = B.decide(Some(s), 1_099, 1);
        assert_eq!((raw.allowed, raw.retry), (false, 1));
        let (raw, _) = B.decide(Some(s), 1_100, 3);
        assert_eq!((raw.allowed, raw.remaining, raw.retry), (false, 2, 100));
        let (raw, s2) = B.decide(Some(s), 1_200, 3);
        assert_eq!((raw.allowed, raw.remaining), (true, 1));
        assert_eq!(
            s2,
            Some(Tokens {
                tokens: 1,
                tick: 12
            })
        );
    }

    #[test]
    fn clock_going_back_adds_nothing() {
        let s = Tokens {
            tokens: 0,
            tick: 20,
        };
        let (raw, _) = B.decide(Some(s), 1_000, 1);
        assert!(!raw.allowed);
        assert_eq!(raw.retry, 1_100);
    }
}
