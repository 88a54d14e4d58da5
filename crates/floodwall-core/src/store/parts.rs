//! What a store of your own builds its answers from, so every store reports the same
//! figures the same way.

use crate::{Decision, Policy, Ticket};

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
