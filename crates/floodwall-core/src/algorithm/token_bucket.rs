//! juju/ratelimit's token bucket: tokens are added in whole ticks.
//!
//! Every `tick`, `quantum` tokens are added, up to `capacity` (the burst). Ticks are aligned
//! to the Unix epoch, so every node agrees on them. A tick as long as the period refills the
//! whole bucket at once and behaves like a fixed window with a burst; the default tick (one
//! token per `period / count`) behaves like GCRA.
//!
//! The state is the tokens the bucket is short of full (owed) and the tick it was counted at.
//! A clock behind the state owes the tokens of the ticks it has not reached yet: the bucket
//! looks emptier, never fuller, and every wait ends when it would have on the state's clock.
//! (The Redis script stores the pair as one number, `tick × quantum + owed`, below 2^53.)

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
