//! Charging and refunding after the fact: what each algorithm does and why is in the
//! [charging guide](crate::guide::charging); a cancel is a guarded refund
//! ([`Gcra::give_back`]).

use super::fixed_window::{FixedWindow, Window};
use super::gcra::Gcra;
use super::sliding_log::{Log, SlidingLog};
use super::sliding_window::{Buckets, SlidingWindow};
use super::token_bucket::{Owed, TokenBucket};

/// A change to a key's spend made after its request was decided: see
/// [`StoreExt::adjust`](crate::StoreExt::adjust).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Adjustment {
    /// Spend `n` units whatever is left: into debt (up to one more burst) where the
    /// algorithm can carry it, else up to the limit.
    Charge(u64),
    /// Give `n` units back: never more than was spent, never before now.
    Refund(u64),
}

impl Gcra {
    /// `tat` with `cost` units taken off, not below 0: a refund's and a cancellation's
    /// arithmetic.
    pub(crate) fn give_back(&self, tat: u64, cost: u64) -> u64 {
        tat.saturating_sub(cost.saturating_mul(self.interval))
    }

    /// The TAT after `adjustment` at `now`; `None` when it does not change.
    pub(crate) fn adjust(&self, tat: u64, now: u64, adjustment: Adjustment) -> Option<u64> {
        match adjustment {
            Adjustment::Charge(0) | Adjustment::Refund(0) => None,
            Adjustment::Charge(cost) => {
                let ceiling = now + 2 * self.tolerance;
                let base = tat.max(now);
                let next = base
                    .saturating_add(cost.min(2 * self.burst) * self.interval)
                    .min(ceiling.max(base));
                (next != tat).then_some(next)
            }
            Adjustment::Refund(cost) => (tat > now).then(|| self.give_back(tat, cost).max(now)),
        }
    }
}

impl TokenBucket {
    /// The state after `adjustment` at `now`, as of now's tick (or the state's, on a
    /// clock behind it); `None` when it does not change.
    pub(crate) fn adjust(
        &self,
        state: Option<Owed>,
        now: u64,
        adjustment: Adjustment,
    ) -> Option<Owed> {
        let tick = now / self.tick;
        // What the bucket owes as of `tick`, as `decide` reads it.
        let (owed, tick) = match state {
            None => (0, tick),
            Some(s) if s.tick <= tick => (
                s.owed
                    .saturating_sub((tick - s.tick).saturating_mul(self.quantum)),
                tick,
            ),
            Some(s) => (s.owed, s.tick),
        };
        let next = match adjustment {
            Adjustment::Charge(cost) => owed.saturating_add(cost).min(owed.max(2 * self.capacity)),
            Adjustment::Refund(cost) => owed.saturating_sub(cost),
        };
        (next != owed).then_some(Owed { owed: next, tick })
    }
}

impl FixedWindow {
    /// The window after `adjustment` at `now`; `None` when it does not change.
    pub(crate) fn adjust(
        &self,
        state: Option<Window>,
        now: u64,
        adjustment: Adjustment,
    ) -> Option<Window> {
        let index = now / self.period;
        // A clock behind the state counts against the newer window, as `decide` does.
        let (index, used) = match state {
            Some(s) if s.index >= index => (s.index, s.used),
            _ => (index, 0),
        };
        let next = match adjustment {
            Adjustment::Charge(cost) => used.saturating_add(cost).min(self.limit.max(used)),
            Adjustment::Refund(cost) => used.saturating_sub(cost),
        };
        (next != used).then_some(Window { index, used: next })
    }
}

impl SlidingWindow {
    /// Applies `adjustment` at `now` to the buckets; whether they changed.
    pub(crate) fn adjust(
        &self,
        state: &mut Option<Buckets>,
        now: u64,
        adjustment: Adjustment,
    ) -> bool {
        match adjustment {
            Adjustment::Charge(cost) => {
                // What still fits, admitted as a check of that cost would be.
                let left = self.decide(state, now, 0).remaining;
                let fits = cost.min(left);
                fits > 0 && self.decide(state, now, fits).allowed
            }
            Adjustment::Refund(mut cost) => {
                let Some(s) = state.as_mut() else {
                    return false;
                };
                let n = self.buckets;
                let bucket = (now / self.precision).max(s.newest);
                let oldest = (bucket + 1).saturating_sub(n);
                let mut changed = false;
                // Oldest live bucket first (see the module's docs).
                for i in oldest..=s.newest {
                    let slot = &mut s.counts[(i % n) as usize];
                    let take = cost.min(*slot);
                    if take > 0 {
                        *slot -= take;
                        cost -= take;
                        changed = true;
                    }
                    if cost == 0 {
                        break;
                    }
                }
                changed
            }
        }
    }
}

impl SlidingLog {
    /// Applies `adjustment` at `now` to the log; whether it changed.
    pub(crate) fn adjust(&self, log: &mut Log, now: u64, adjustment: Adjustment) -> bool {
        match adjustment {
            Adjustment::Charge(cost) => {
                let left = self.decide(log, now, 0).remaining;
                let fits = cost.min(left);
                fits > 0 && self.decide(log, now, fits).allowed
            }
            Adjustment::Refund(mut cost) => {
                let live_from = log
                    .entries
                    .partition_point(|&(t, _)| t + self.period <= now);
                let mut changed = false;
                // Oldest live entry first; emptied entries go.
                let mut i = live_from;
                while cost > 0 && i < log.entries.len() {
                    let (_, c) = &mut log.entries[i];
                    let take = cost.min(*c);
                    *c -= take;
                    cost -= take;
                    log.total -= take;
                    changed |= take > 0;
                    if *c == 0 {
                        log.entries.remove(i);
                    } else {
                        i += 1;
                    }
                }
                changed
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Algorithm, Policy, State};

    // 1 per 100 µs, burst 2: tolerance 200.
    const G: Gcra = Gcra {
        interval: 100,
        tolerance: 200,
        burst: 2,
    };

    #[test]
    fn gcra_refund_moves_the_tat_back_but_never_before_now() {
        let refund = |tat, now, n| G.adjust(tat, now, Adjustment::Refund(n));
        // Two spent at 1_000: TAT 1_200.
        assert_eq!(refund(1_200, 1_000, 1), Some(1_100));
        assert_eq!(refund(1_200, 1_050, 2), Some(1_050));
        // Nothing spent that has not been paid back already: nothing to refund, and a TAT
        // at now (the last spend just paid off) is no exception.
        assert_eq!(refund(900, 1_000, 1), None);
        assert_eq!(refund(1_000, 1_000, 1), None);
        assert_eq!(refund(1_001, 1_000, 1), Some(1_000));
        assert_eq!(refund(1_200, 1_000, u64::MAX), Some(1_000));
    }

    #[test]
    fn gcra_charge_goes_into_debt_up_to_one_more_burst() {
        let charge = |tat, n| G.adjust(tat, 1_000, Adjustment::Charge(n));
        // From empty, 3 units at 1_000: 100 µs beyond the tolerance.
        assert_eq!(charge(0, 3), Some(1_300));
        let (raw, _) = G.decide(1_300, 1_000, 1);
        assert_eq!((raw.allowed, raw.retry), (false, 200));
        // A huge charge stops at twice the tolerance.
        assert_eq!(charge(1_300, u64::MAX), Some(1_400));
        assert_eq!(charge(1_400, 1), None);
    }

    const B: TokenBucket = TokenBucket {
        capacity: 4,
        tick: 100,
        quantum: 2,
    };

    /// What the bucket owes at `tick`, as a state.
    fn owes(owed: u64, tick: u64) -> Option<Owed> {
        Some(Owed { owed, tick })
    }

    #[test]
    fn bucket_refund_adds_tokens_up_to_capacity_and_charge_owes_past_it() {
        let s = owes(4, 10);
        // At tick 11 two came back; a refund of 1 owes 1.
        assert_eq!(B.adjust(s, 1_150, Adjustment::Refund(1)), owes(1, 11));
        assert_eq!(B.adjust(s, 1_150, Adjustment::Refund(9)), owes(0, 11));
        let owing = B.adjust(s, 1_000, Adjustment::Charge(3));
        assert_eq!(owing, owes(7, 10));
        // Refused until 4 more tokens came: two ticks (at 1_200).
        let (raw, _) = B.decide(owing, 1_000, 1);
        assert_eq!((raw.allowed, raw.retry), (false, 200));
        assert_eq!(B.adjust(owing, 1_000, Adjustment::Charge(99)), owes(8, 10));
    }

    #[test]
    fn bucket_adjusted_on_a_clock_behind_its_state_counts_as_of_the_states_tick() {
        // Saved at tick 10 by a node whose clock is ahead; this one reads tick 8: nothing
        // came back since the state's tick, and the state keeps it.
        let s = owes(3, 10);
        assert_eq!(B.adjust(s, 850, Adjustment::Charge(1)), owes(4, 10));
        assert_eq!(B.adjust(s, 850, Adjustment::Refund(2)), owes(1, 10));
    }

    const W: FixedWindow = FixedWindow {
        limit: 3,
        period: 1_000,
    };

    #[test]
    fn window_refund_stays_in_its_window_and_charge_fills_it() {
        let used = |used| Some(Window { index: 5, used });
        assert_eq!(W.adjust(used(3), 5_500, Adjustment::Refund(2)), used(1));
        // The window ended: what it counted is forgotten, nothing to give back.
        assert_eq!(W.adjust(used(3), 6_000, Adjustment::Refund(2)), None);
        // No debt past a window: a charge fills it.
        assert_eq!(W.adjust(used(1), 5_500, Adjustment::Charge(9)), used(3));
        assert_eq!(W.adjust(used(3), 5_500, Adjustment::Charge(1)), None);
    }

    #[test]
    fn log_refund_removes_the_oldest_live_entries() {
        let l = SlidingLog {
            limit: 3,
            period: 1_000,
        };
        let mut log = Log::default();
        l.decide(&mut log, 100, 1);
        l.decide(&mut log, 200, 2);
        assert!(l.adjust(&mut log, 300, Adjustment::Refund(2)));
        assert_eq!(log.entries, [(200, 1)]);
        assert_eq!(log.total, 1);
        assert!(l.adjust(&mut log, 300, Adjustment::Charge(5)));
        assert_eq!(log.total, 3);
        assert!(!l.decide(&mut log, 300, 1).allowed);
    }

    #[test]
    fn sliding_window_refund_takes_the_oldest_live_bucket_first() {
        let w = SlidingWindow {
            limit: 4,
            precision: 250,
            buckets: 4,
        };
        let mut st = None;
        w.decide(&mut st, 1_000, 1);
        w.decide(&mut st, 1_300, 3);
        assert!(w.adjust(&mut st, 1_400, Adjustment::Refund(2)));
        let s = st.as_ref().unwrap();
        assert_eq!((s.counts[0], s.counts[1]), (0, 2));
        assert!(w.adjust(&mut st, 1_400, Adjustment::Charge(9)));
        assert_eq!(w.decide(&mut st, 1_400, 0).remaining, 0);
        // Full: a charge has nothing left to fill, and says it changed nothing.
        let full = st.clone();
        assert!(!w.adjust(&mut st, 1_400, Adjustment::Charge(1)));
        assert!(!w.adjust(&mut st, 1_400, Adjustment::Charge(0)));
        assert_eq!(st, full);
    }

    #[test]
    fn log_charge_of_a_full_log_changes_nothing() {
        let l = SlidingLog {
            limit: 2,
            period: 1_000,
        };
        let mut log = Log::default();
        l.decide(&mut log, 100, 2);
        let full = log.clone();
        assert!(!l.adjust(&mut log, 300, Adjustment::Charge(1)));
        assert!(!l.adjust(&mut log, 300, Adjustment::Charge(0)));
        assert_eq!(log, full);
    }

    fn exact(alg: Algorithm) -> bool {
        !matches!(alg, Algorithm::SlidingWindow { .. } | Algorithm::SlidingLog)
    }

    /// Admitting `cost` then refunding it, with no other request between, leaves every
    /// exact algorithm deciding as if the request had never come, at every later instant;
    /// the others never looser.
    #[test]
    fn a_refund_right_after_an_admission_undoes_it() {
        let quota = "4/ms burst 4".parse().unwrap();
        let windowed = "4/ms".parse().unwrap();
        for alg in Algorithm::all() {
            let q = if alg.has_burst() { quota } else { windowed };
            let p = Policy::new("p", alg, q).unwrap();
            for (first, cost, at) in [(1, 2, 10_100), (3, 1, 10_999), (0, 4, 10_000)] {
                let mut with = State::new();
                p.decide(&mut with, 10_000, first).unwrap();
                let mut without = with.clone();
                assert!(p.decide(&mut with, at, cost).unwrap().is_allowed(), "{alg}");
                p.adjust(&mut with, at, Adjustment::Refund(cost)).unwrap();
                for later in [at, at + 1, at + 250, at + 999, at + 5_000] {
                    let a = p.decide(&mut with.clone(), later, 1).unwrap();
                    let b = p.decide(&mut without.clone(), later, 1).unwrap();
                    let at_later = format!("{alg} {first} {cost} {at} {later}");
                    if exact(alg) {
                        assert_eq!(a.is_allowed(), b.is_allowed(), "{at_later}");
                        assert_eq!(a.remaining, b.remaining, "{at_later}");
                    } else {
                        // Oldest first: stricter than the exact refund, never looser.
                        assert!(!a.is_allowed() || b.is_allowed(), "{at_later}");
                        assert!(a.remaining <= b.remaining, "{at_later}");
                    }
                }
                // A peek on both keeps the comparison honest (nothing written).
                p.decide(&mut without, at, 0).unwrap();
            }
        }
    }
}
