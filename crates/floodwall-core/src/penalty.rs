//! A policy's optional penalty: after repeated refusals, a ban of the key.

use std::time::Duration;

use crate::{ConfigError, MAX_SPAN};

/// Bans a key that keeps coming back past its limit: after `after` refusals within
/// `within`, every check of the key is refused for `ban`, whatever the quota says. A key
/// banned again while its earlier bans are remembered ([`forget_after`](Self::forget_after))
/// is banned [`growth`](Self::growing) times longer each time, up to `max_ban`.
///
/// Attach it with [`Policy::with_penalty`](crate::Policy::with_penalty); the rules in
/// detail: [penalties](crate::guide::penalties).
///
/// ```
/// use floodwall_core::{Penalty, Policy};
/// use std::time::Duration;
///
/// // 5 refusals within a minute ban the key for 10 minutes, then 20, 40, ... up to a day.
/// let penalty = Penalty::new(5, Duration::from_secs(60), Duration::from_secs(600))?
///     .growing(2, Duration::from_secs(86_400))?;
/// let login = Policy::gcra("login", "5/min".parse()?)?.with_penalty(penalty);
/// assert_eq!(login.penalty().map(|p| p.after()), Some(5));
/// # Ok::<(), floodwall_core::ConfigError>(())
/// ```
// `Debug` is part of `Policy::namespace`'s digest: keep the fields' names and order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Penalty {
    after: u32,
    within: Duration,
    ban: Duration,
    growth: u32,
    max_ban: Duration,
    forget_after: Duration,
}

impl Penalty {
    /// The largest growth factor accepted.
    pub const MAX_GROWTH: u32 = 1000;

    /// How long earlier bans are remembered unless [`forget_after`](Self::forget_after)
    /// says otherwise: a day, or the longest ban if that is longer.
    pub const DEFAULT_FORGET_AFTER: Duration = Duration::from_secs(24 * 3600);

    /// Bans a key for `ban` once it was refused `after` (at least 1) times within
    /// `within`; both spans 1 ms ..= [`MAX_SPAN`].
    pub fn new(after: u32, within: Duration, ban: Duration) -> Result<Self, ConfigError> {
        if after == 0 {
            return Err(bad(
                "after is 0: a key would be banned before it was ever refused",
            ));
        }
        check_span("within", within)?;
        check_span("ban", ban)?;
        Ok(Self {
            after,
            within,
            ban,
            growth: 1,
            max_ban: ban,
            forget_after: Self::DEFAULT_FORGET_AFTER.max(ban),
        })
    }

    /// Makes each further ban `factor` (1 ..= [`MAX_GROWTH`](Self::MAX_GROWTH)) times longer
    /// than the last while remembered, up to `max_ban` (at least the first ban).
    pub fn growing(mut self, factor: u32, max_ban: Duration) -> Result<Self, ConfigError> {
        if factor == 0 || factor > Self::MAX_GROWTH {
            return Err(bad(format!(
                "growth factor {factor} is outside 1 ..= {}",
                Self::MAX_GROWTH
            )));
        }
        check_span("max_ban", max_ban)?;
        if max_ban < self.ban {
            return Err(bad(format!(
                "max_ban {max_ban:?} is shorter than the first ban {:?}",
                self.ban
            )));
        }
        self.growth = factor;
        self.max_ban = max_ban;
        self.forget_after = self.forget_after.max(max_ban);
        Ok(self)
    }

    /// How long a key's bans are remembered after its last one ends, for the next to grow
    /// (at most [`MAX_SPAN`]).
    pub fn forget_after(mut self, forget_after: Duration) -> Result<Self, ConfigError> {
        check_span("forget_after", forget_after)?;
        self.forget_after = forget_after;
        Ok(self)
    }

    /// How many refusals within [`within`](Self::within) ban a key.
    pub fn after(&self) -> u32 {
        self.after
    }

    /// The span in which refusals are counted.
    pub fn within(&self) -> Duration {
        self.within
    }

    /// The first ban's length.
    pub fn ban(&self) -> Duration {
        self.ban
    }

    /// Each further ban's factor over the last (1: no growth).
    pub fn growth(&self) -> u32 {
        self.growth
    }

    /// The longest a ban grows to.
    pub fn max_ban(&self) -> Duration {
        self.max_ban
    }

    /// How long a key's bans are remembered after the last one ends.
    pub fn remembered_for(&self) -> Duration {
        self.forget_after
    }

    /// The length of a key's ban number `n` (1 for its first while remembered): `ban ×
    /// growth^(n-1)`, cut to `max_ban`. Every store computes bans with this, so they agree.
    pub fn nth_ban(&self, n: u32) -> Duration {
        let mut length = self.ban;
        for _ in 1..n {
            length = length.saturating_mul(self.growth);
            if length >= self.max_ban {
                return self.max_ban;
            }
        }
        length.min(self.max_ban)
    }
}

fn bad(reason: impl Into<String>) -> ConfigError {
    ConfigError::BadPenalty {
        reason: reason.into(),
    }
}

fn check_span(what: &str, d: Duration) -> Result<(), ConfigError> {
    if d < Duration::from_millis(1) || d > MAX_SPAN {
        return Err(bad(format!(
            "{what} {d:?} is outside 1 ms ..= {} years",
            MAX_SPAN.as_secs() / (365 * 24 * 3600)
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    // Bans growing by the factor up to the cap: tests/penalties.rs
    // (`bans_grow_while_remembered_up_to_the_cap`).
    #[test]
    fn the_last_ban_is_the_cap_without_counting_to_it() {
        let p = Penalty::new(3, 60 * S, 10 * S).unwrap();
        assert_eq!(p.nth_ban(u32::MAX), 10 * S);
        let p = p.growing(3, 200 * S).unwrap();
        assert_eq!(p.nth_ban(u32::MAX), 200 * S);
    }

    #[test]
    fn nonsense_is_refused_with_a_reason() {
        let refused = |r: Result<Penalty, ConfigError>| match r {
            Err(ConfigError::BadPenalty { reason }) => reason,
            other => panic!("expected BadPenalty, got {other:?}"),
        };
        assert!(refused(Penalty::new(0, S, S)).contains("after is 0"));
        assert!(refused(Penalty::new(1, Duration::ZERO, S)).contains("within"));
        assert!(refused(Penalty::new(1, S, Duration::from_micros(999))).contains("ban"));
        assert!(refused(Penalty::new(1, S, MAX_SPAN + S)).contains("ban"));
        let p = Penalty::new(1, S, 10 * S).unwrap();
        assert!(refused(p.growing(0, 10 * S)).contains("growth factor 0"));
        assert!(refused(p.growing(1001, 10 * S)).contains("1001"));
        assert!(refused(p.growing(2, S)).contains("shorter than the first ban"));
        assert!(refused(p.forget_after(Duration::ZERO)).contains("forget_after"));
    }

    #[test]
    fn the_bounds_themselves_are_accepted() {
        // The shortest span (a Redis key's expiry resolution) and the longest (MAX_SPAN).
        let ms = Duration::from_millis(1);
        let p = Penalty::new(1, ms, MAX_SPAN).unwrap();
        assert_eq!((p.within(), p.ban()), (ms, MAX_SPAN));
        let p = Penalty::new(1, MAX_SPAN, ms).unwrap();
        assert_eq!((p.within(), p.ban()), (MAX_SPAN, ms));
        assert_eq!(p.forget_after(ms).unwrap().remembered_for(), ms);
        assert!(p.forget_after(ms - Duration::from_nanos(1)).is_err());
        // The largest factor, and a cap equal to the first ban (a flat ban, spelt out).
        let p = Penalty::new(1, S, 10 * S).unwrap();
        let fastest = p.growing(Penalty::MAX_GROWTH, MAX_SPAN).unwrap();
        assert_eq!(fastest.nth_ban(2), 10_000 * S);
        let flat = p.growing(2, 10 * S).unwrap();
        assert_eq!((flat.nth_ban(1), flat.nth_ban(9)), (10 * S, 10 * S));
        assert!(p.growing(2, 10 * S - Duration::from_nanos(1)).is_err());
    }

    /// The Redis scripts get a penalty's figures from its accessors, and grow bans in Lua
    /// as `nth_ban` does (`ban × growth` while below `max_ban`, then cut to it): from the
    /// accessors alone, that loop must give every ban `nth_ban` gives.
    #[test]
    fn the_accessors_give_a_store_every_ban_nth_ban_gives() {
        let p = Penalty::new(4, 30 * S, 10 * S)
            .unwrap()
            .growing(3, 200 * S)
            .unwrap();
        assert_eq!((p.after(), p.within()), (4, 30 * S));
        let as_a_script = |n: u32| {
            let mut length = p.ban();
            for _ in 2..=n {
                if length >= p.max_ban() || p.growth() == 1 {
                    break;
                }
                length *= p.growth();
            }
            length.min(p.max_ban())
        };
        for n in 1..=6 {
            assert_eq!(as_a_script(n), p.nth_ban(n), "ban {n}");
        }
    }

    #[test]
    fn bans_are_remembered_at_least_as_long_as_the_longest() {
        let week = 7 * 24 * 3600 * S;
        let p = Penalty::new(1, S, S).unwrap().growing(2, week).unwrap();
        assert_eq!(p.remembered_for(), week);
        assert_eq!(
            Penalty::new(1, S, S).unwrap().remembered_for(),
            24 * 3600 * S
        );
    }
}

/// What a key's refusals have earned it under a policy's penalty, as the store holds it:
/// read by [`StoreExt::penalty_state`](crate::StoreExt::penalty_state) without charging
/// anything, for an operator asking why a client is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PenaltyState {
    /// Strikes counted in the window open now (0 when none is).
    pub strikes: u32,
    /// How long until those strikes are forgotten (zero without any).
    pub strikes_reset_after: Duration,
    /// The rest of the key's ban, if it is banned.
    pub banned_for: Option<Duration>,
    /// Earlier bans remembered: the next ban grows with them.
    pub bans: u32,
    /// How long until they are forgotten (zero without any).
    pub bans_forgotten_after: Duration,
}
