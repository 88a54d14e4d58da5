//! What a store of your own builds its answers from, so every store reports the same
//! figures the same way.

use std::time::Duration;

use crate::{Decision, PenaltyState, Policy, Ticket};

/// `policy`'s [`Decision`] from microsecond figures computed elsewhere (a Redis script),
/// with the policy's [`Rounding`](crate::Rounding) applied.
pub fn decision_from_micros(
    policy: &Policy,
    allowed: bool,
    remaining: u64,
    retry_after_us: u64,
    reset_after_us: u64,
) -> Decision {
    policy.decision_from_micros(allowed, remaining, retry_after_us, reset_after_us)
}

/// The refusal of a key `policy`'s [`Penalty`](crate::Penalty) has banned for
/// `remaining_micros` more ([`Outcome::Banned`](crate::Outcome::Banned)): every store that
/// holds bans answers with this, so they agree.
pub fn ban_decision(policy: &Policy, remaining_micros: u64) -> Decision {
    policy.ban_decision(remaining_micros)
}

/// A ticket for a booking of `cost` that left the key's state as `state` says.
pub fn ticket(cost: u64, state: [u64; 2]) -> Ticket {
    Ticket::new(cost, state)
}

/// A key's [`PenaltyState`] at `now` from the instants a store keeps (µs on its clock):
/// `strikes` counted until `strikes_until`, a ban until `ban_until` (0: none), `bans`
/// remembered until `bans_until`. What has lapsed reads as nothing.
pub fn penalty_state_from_micros(
    now: u64,
    strikes: u32,
    strikes_until: u64,
    ban_until: u64,
    bans: u32,
    bans_until: u64,
) -> PenaltyState {
    // A count that lapsed, or none: nothing, and nothing to wait for.
    let live = |count: u32, until: u64| {
        if until > now && count > 0 {
            (count, Duration::from_micros(until - now))
        } else {
            (0, Duration::ZERO)
        }
    };
    let (strikes, strikes_reset_after) = live(strikes, strikes_until);
    let (bans, bans_forgotten_after) = live(bans, bans_until);
    PenaltyState {
        strikes,
        strikes_reset_after,
        banned_for: (ban_until > now).then(|| Duration::from_micros(ban_until - now)),
        bans,
        bans_forgotten_after,
    }
}
