//! Waiting instead of refusing: a policy that can book the next slot ([`Reservable`]),
//! what booking one answers ([`Reservation`]), and what cancelling it did
//! ([`Cancelled`]).

use std::time::Duration;

use crate::algorithm::reserve::Booked;
use crate::store::micros;
use crate::{ConfigError, Decision, Error, Policy, State};

/// A [`Policy`] whose algorithm can book a future slot exactly: GCRA, the token bucket and
/// the leaky bucket; made where waiting is configured, so a window algorithm is refused
/// there ([`ConfigError::WaitUnsupported`]), not at run time. See
/// [`StoreExt::reserve`](crate::StoreExt::reserve).
///
/// ```
/// use floodwall_core::{ManualClock, MemoryStore, Policy, Reservable, StoreExt};
/// use std::time::Duration;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let store = MemoryStore::builder().clock(ManualClock::new(1_700_000_000_000_000)).build();
/// let paced = Policy::gcra("paced", "10/s burst 1".parse()?)?.reservable()?;
/// let wait = Duration::from_millis(250);
///
/// let first = store.reserve(b"k", &paced, 1, wait).await?;
/// assert!(first.is_booked() && first.wait.is_zero());
/// // The next slots are 100 ms apart; the fourth is beyond 250 ms: refused, nothing booked.
/// let mut waits = Vec::new();
/// for _ in 0..3 {
///     waits.push(store.reserve(b"k", &paced, 1, wait).await?);
/// }
/// assert_eq!(waits[0].wait, Duration::from_millis(100));
/// assert_eq!(waits[1].wait, Duration::from_millis(200));
/// assert!(!waits[2].is_booked());
/// assert_eq!(waits[2].decision.retry_after, Some(Duration::from_millis(300)));
///
/// // A window cannot book a slot: the error comes here, not at the first request.
/// assert!(Policy::fixed_window("daily", "1000/day".parse()?)?.reservable().is_err());
/// # Ok(()) }
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct Reservable {
    policy: Policy,
}

impl Reservable {
    /// The longest wait a reservation books: longer waits are cut to it (an hour keeps
    /// every booked time where the stores compute exactly).
    pub const MAX_WAIT: Duration = Duration::from_secs(3600);

    /// `policy`, if its algorithm can book a future slot.
    pub fn new(policy: Policy) -> Result<Self, ConfigError> {
        if policy.engine().gcra().is_none()
            && !matches!(policy.algorithm(), crate::Algorithm::TokenBucket { .. })
        {
            return Err(ConfigError::WaitUnsupported {
                algorithm: policy.algorithm().name(),
            });
        }
        Ok(Self { policy })
    }

    /// The policy.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// Books the earliest slot for `cost` at `now` (µs since the epoch) in `state`, if it
    /// is at most `max_wait` away: the pure algorithm every store runs, as
    /// [`Policy::decide`] is for checks. A refusal or a cost of 0 leaves the state as it
    /// was.
    pub fn reserve(
        &self,
        state: &mut State,
        now: u64,
        cost: u64,
        max_wait: Duration,
    ) -> Result<Reservation, Error> {
        let (booked, ticket) =
            self.policy
                .engine()
                .reserve(state, now, cost, max_wait_micros(max_wait))?;
        Ok(self.reservation(booked, ticket.map(|state| Ticket { cost, state })))
    }

    /// Gives `reservation`'s slot back in `state` where it can (see [`Cancelled`]).
    pub fn cancel(&self, state: &mut State, reservation: &Reservation) -> Result<Cancelled, Error> {
        let Some(ticket) = reservation.ticket else {
            return Ok(Cancelled::Spent);
        };
        let back = self
            .policy
            .engine()
            .cancel(state, ticket.state, ticket.cost)?;
        Ok(Cancelled::from_returned(back))
    }

    /// The reservation a booking in µs stands for.
    pub(crate) fn reservation(&self, booked: Booked, ticket: Option<Ticket>) -> Reservation {
        Reservation {
            decision: self.policy.to_decision(booked.raw),
            wait: Duration::from_micros(booked.wait),
            ticket: ticket.filter(|_| booked.raw.allowed),
        }
    }
}

/// `max_wait` in µs, cut to [`Reservable::MAX_WAIT`].
pub(crate) fn max_wait_micros(max_wait: Duration) -> u64 {
    micros(max_wait.min(Reservable::MAX_WAIT))
}

impl std::fmt::Debug for Reservable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Reservable").field(&self.policy).finish()
    }
}

impl Policy {
    /// This policy as a [`Reservable`]; fails for the window algorithms.
    pub fn reservable(&self) -> Result<Reservable, ConfigError> {
        Reservable::new(self.clone())
    }
}

/// What a store answered to [`StoreExt::reserve`](crate::StoreExt::reserve).
///
/// Booked ([`is_booked`](Self::is_booked)): the request may proceed after `wait`, its
/// slot taken until [cancelled](crate::StoreExt::cancel). Refused: `decision` is a check's
/// refusal, and nothing was booked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Reservation {
    /// The decision: allowed when booked, with the figures after the booking.
    pub decision: Decision,
    /// How long after the store's decision the slot is: exact microseconds, whatever the
    /// policy's [`Rounding`](crate::Rounding). Zero when refused.
    pub wait: Duration,
    /// What [`StoreExt::cancel`](crate::StoreExt::cancel) needs to give the slot back; `None`
    /// when nothing was booked.
    pub ticket: Option<Ticket>,
}

impl Reservation {
    /// A booking admitted by `decision`, after `wait`, cancelled with `ticket`.
    pub fn booked(decision: Decision, wait: Duration, ticket: Option<Ticket>) -> Self {
        Self {
            decision,
            wait,
            ticket: ticket.filter(|_| decision.is_allowed()),
        }
    }

    /// A refusal (or any decision that booked nothing): the request does not wait.
    pub fn refused(decision: Decision) -> Self {
        Self {
            decision,
            wait: Duration::ZERO,
            ticket: None,
        }
    }

    /// Whether a slot was booked (now or after [`wait`](Self::wait)).
    pub fn is_booked(&self) -> bool {
        self.decision.is_allowed()
    }
}

/// What a cancellation compares the key's state with: the booking's cost and the state it
/// left, in the words of the store that booked it (only that store can read it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ticket {
    cost: u64,
    state: [u64; 2],
}

impl Ticket {
    /// A ticket for a booking of `cost` that left the key's state as `state` says.
    pub(crate) fn new(cost: u64, state: [u64; 2]) -> Self {
        Self { cost, state }
    }

    /// The booking's cost.
    pub fn cost(&self) -> u64 {
        self.cost
    }

    /// The state the booking left, as its store wrote it.
    pub fn state(&self) -> [u64; 2] {
        self.state
    }
}

/// What cancelling a reservation did.
///
/// The algorithms keep one position per key, not a list of slots: a booking goes back only
/// while the key's state is still what it left, and the next request gets its slot.
/// Otherwise later requests were placed behind it, and moving the position back would
/// admit more than the rate at one instant: the slot stays spent, as if the request ran.
/// (A bucket whose ticks overflowed is given back a little stricter, never looser.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Cancelled {
    /// The slot is free again: the next request can take it.
    Returned,
    /// Nothing was given back: something came after the booking, the key was reset or
    /// forgotten, or nothing was booked.
    Spent,
}

impl Cancelled {
    /// `Returned` when `returned`, else `Spent`.
    pub fn from_returned(returned: bool) -> Self {
        if returned {
            Self::Returned
        } else {
            Self::Spent
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Which algorithms are reservable: floodwall-tower's tests/wait.rs
    // (`windows_cannot_wait_and_say_so_at_construction`) and tests/reservations.rs.

    // A booking's wait, and the next request taking a slot given back:
    // tests/reservations.rs (`a_cancelled_latest_booking_goes_to_the_next_request`).
    #[test]
    fn a_cancel_gives_back_once_and_a_huge_wait_is_cut_to_an_hour() {
        let p = Policy::leaky_bucket("lb", "10/s burst 1".parse().unwrap())
            .unwrap()
            .reservable()
            .unwrap();
        let mut s = State::new();
        let now = 1_000_000;
        p.reserve(&mut s, now, 1, Duration::ZERO).unwrap();
        let second = p.reserve(&mut s, now, 1, Duration::from_secs(1)).unwrap();
        assert!(second.ticket.is_some());
        assert_eq!(p.cancel(&mut s, &second).unwrap(), Cancelled::Returned);
        // Once only: the state no longer is what the booking left.
        assert_eq!(p.cancel(&mut s, &second).unwrap(), Cancelled::Spent);
        // A huge wait is cut to an hour, not an overflow.
        let far = p.reserve(&mut s, now, 1, Duration::MAX).unwrap();
        assert_eq!(far.wait, Duration::from_millis(100));
    }

    #[test]
    fn a_refusal_books_nothing_and_has_nothing_to_cancel() {
        let p = Policy::token_bucket("tb", "1/s".parse().unwrap())
            .unwrap()
            .reservable()
            .unwrap();
        let mut s = State::new();
        p.reserve(&mut s, 0, 1, Duration::ZERO).unwrap();
        let before = s.clone();
        let refused = p.reserve(&mut s, 0, 1, Duration::from_millis(999)).unwrap();
        assert!(!refused.is_booked());
        assert_eq!(refused.ticket, None);
        assert_eq!(refused.decision.retry_after, Some(Duration::from_secs(1)));
        assert_eq!(s, before);
        assert_eq!(p.cancel(&mut s, &refused).unwrap(), Cancelled::Spent);
        assert!(
            p.reserve(&mut s, 0, 2, Duration::ZERO)
                .unwrap_err()
                .is_cost_too_high()
        );
    }
}
