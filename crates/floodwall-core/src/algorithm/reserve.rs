//! Booking a future slot: the earliest instant a request of `cost` would pass, taken now
//! if it is at most `max_wait` away, and given back on cancellation where that stays exact.
//!
//! GCRA (and the funnel) and the token bucket keep a position on a timeline (the TAT, or
//! the tokens owed as of a tick): booking moves it as the admission at the slot would, so
//! later requests queue behind it. Windows cannot book a slot in a window to come. Why a
//! cancellation gives back only the latest booking: [`Cancelled`](crate::Cancelled).

use super::Raw;
use super::gcra::Gcra;
use super::token_bucket::{Owed, TokenBucket};

/// A booking's outcome in µs: the decision's figures, and how long after `now` the slot is
/// (0 when the request may go at once; meaningless when refused).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Booked {
    pub(crate) raw: Raw,
    pub(crate) wait: u64,
}

impl Gcra {
    /// Books the earliest slot for `cost` on a stored TAT if it is at most `max_wait` µs
    /// away; returns the TAT to store when it changed. Beyond `max_wait` it is
    /// [`decide`](Self::decide)'s refusal, and nothing changes.
    pub(crate) fn reserve(
        &self,
        tat: u64,
        now: u64,
        cost: u64,
        max_wait: u64,
    ) -> (Booked, Option<u64>) {
        let base = tat.max(now);
        let new_tat = base + cost * self.interval;
        let ahead = new_tat - now;
        let wait = ahead.saturating_sub(self.tolerance);
        // A peek books nothing: it is a check.
        if wait == 0 || wait > max_wait || cost == 0 {
            let (raw, next) = self.decide(tat, now, cost);
            return (Booked { raw, wait: 0 }, next);
        }
        // Booked at `now + wait`: the admission there (its base is still `tat`, which the
        // slot does not pass) leaves the same TAT.
        let raw = Raw {
            allowed: true,
            remaining: 0,
            retry: 0,
            reset: ahead,
        };
        (Booked { raw, wait }, Some(new_tat))
    }

    /// The TAT once a booking of `cost` that left `booked` is cancelled, if still the latest.
    pub(crate) fn cancel(&self, tat: u64, booked: u64, cost: u64) -> Option<u64> {
        (tat == booked && cost > 0).then(|| self.give_back(booked, cost))
    }
}

impl TokenBucket {
    /// Books the earliest slot for `cost` if it is at most `max_wait` µs away, stored as
    /// the admission at the slot's tick (which a clock before it reads as empty until
    /// then). Beyond `max_wait` it is [`decide`](Self::decide)'s refusal.
    pub(crate) fn reserve(
        &self,
        state: Option<Owed>,
        now: u64,
        cost: u64,
        max_wait: u64,
    ) -> (Booked, Option<Owed>) {
        let (raw, next) = self.decide(state, now, cost);
        if raw.allowed || raw.retry > max_wait || cost == 0 {
            return (Booked { raw, wait: 0 }, next);
        }
        let wait = raw.retry;
        let (at_slot, next) = self.decide(state, now + wait, cost);
        debug_assert!(
            at_slot.allowed,
            "a slot admits the request it was worked out for"
        );
        let raw = Raw {
            allowed: true,
            remaining: 0,
            retry: 0,
            reset: at_slot.reset + wait,
        };
        (Booked { raw, wait }, next)
    }

    /// The state once a booking of `cost` that left `booked` is cancelled, when it is
    /// still the latest: the state means what `booked` meant (the same count of tokens at
    /// which the bucket is full again, whatever tick each is counted at, so a booking
    /// cancelled after it leaves the one before it the latest again).
    pub(crate) fn cancel(&self, state: Owed, booked: Owed, cost: u64) -> Option<Owed> {
        let full = |s: Owed| u128::from(s.tick) * u128::from(self.quantum) + u128::from(s.owed);
        (full(state) == full(booked) && cost > 0 && booked.owed >= cost).then(|| Owed {
            owed: booked.owed - cost,
            tick: booked.tick,
        })
    }
}

// Booking a slot per interval, giving back only the latest booking, and the next request
// taking a slot given back: tests/reservations.rs, for every algorithm that books.
#[cfg(test)]
mod tests {
    use super::*;

    // 1 per 100 µs, burst 2: tolerance 200.
    const G: Gcra = Gcra {
        interval: 100,
        tolerance: 200,
        burst: 2,
    };

    // 2 tokens every 100 µs, up to 4.
    const B: TokenBucket = TokenBucket {
        capacity: 4,
        tick: 100,
        quantum: 2,
    };

    #[test]
    fn gcra_with_no_wait_is_decide() {
        for tat in [0, 900, 1_000, 1_150, 1_200, 1_250, 1_500] {
            for cost in [0, 1, 2] {
                let (b, next) = G.reserve(tat, 1_000, cost, 0);
                assert_eq!((b.raw, next), G.decide(tat, 1_000, cost), "{tat} {cost}");
                assert_eq!(b.wait, 0);
            }
        }
    }

    #[test]
    fn bucket_books_into_debt_and_pays_it_tick_by_tick() {
        let now = 1_050;
        let (b, s) = B.reserve(None, now, 4, 0);
        assert_eq!((b.raw.allowed, b.wait), (true, 0));
        // Empty: 2 tokens come at 1_100, 2 more at 1_200.
        let (b, s) = B.reserve(s, now, 2, 100);
        assert_eq!((b.raw.allowed, b.wait), (true, 50));
        let (b, s2) = B.reserve(s, now, 2, 100);
        assert_eq!((b.raw.allowed, b.raw.retry, s2), (false, 150, None));
        let (b, s) = B.reserve(s, now, 2, 150);
        assert_eq!((b.raw.allowed, b.wait, b.raw.reset), (true, 150, 350));
        // Stored as of the last slot's tick (12): full again two ticks later.
        assert_eq!(s, Some(Owed { owed: 4, tick: 12 }));
        // A plain check at the last slot: the tokens are booked, none left.
        assert!(!B.decide(s, 1_200, 1).0.allowed);
        assert!(B.decide(s, 1_300, 2).0.allowed);
    }

    #[test]
    fn bucket_with_no_wait_is_decide() {
        let states = [
            None,
            Some(Owed { owed: 3, tick: 10 }),
            Some(Owed { owed: 6, tick: 11 }),
        ];
        for s in states {
            for cost in 0..=4 {
                let (b, next) = B.reserve(s, 1_050, cost, 0);
                assert_eq!((b.raw, next), B.decide(s, 1_050, cost), "{s:?} {cost}");
            }
        }
    }

    #[test]
    fn bucket_booking_is_the_admission_at_its_slot_even_when_ticks_overflow() {
        // 2 tokens a tick, up to 1: a tick refills it whatever it owed.
        let small = TokenBucket {
            capacity: 1,
            tick: 100,
            quantum: 2,
        };
        let (_, s) = small.reserve(None, 1_000, 1, 0);
        let (b, s) = small.reserve(s, 1_000, 1, 100);
        assert_eq!((b.raw.allowed, b.wait), (true, 100));
        // At the slot the booking took the tick's token: nothing left until the next.
        assert!(!small.decide(s, 1_100, 1).0.allowed);
        assert!(!small.decide(s, 1_050, 1).0.allowed);
        assert!(small.decide(s, 1_200, 1).0.allowed);
    }

    #[test]
    fn bucket_gives_back_the_one_before_once_the_latest_is_cancelled() {
        let (_, s1) = B.reserve(Some(Owed { owed: 4, tick: 10 }), 1_000, 2, 500);
        let s1 = s1.unwrap();
        let (_, s2) = B.reserve(Some(s1), 1_000, 1, 500);
        let back = B.cancel(s2.unwrap(), s2.unwrap(), 1).unwrap();
        // Counted at another tick than `s1`, but the same state: `s1` is the latest again.
        assert_ne!(back, s1);
        assert!(B.cancel(back, s1, 2).is_some());
    }
}
