//! Where a check goes ([`Route`]).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use papaya::{Compute, Operation};

use super::DenyCache;
use super::all::Answer;
use super::entry::{Entry, refusal};
use super::flight::{Flight, FlightEnd, Leading, Timer};
use crate::store::key::KeyBuf;
use crate::{Clock, Decision, Error, Policy};

/// What to do with a check.
pub(super) enum Route<'a, C> {
    /// Refused from the cache; for [`Mode::All`], with what the store said of the other
    /// policies (if a check of several taught it) and the instant of the refusal.
    Local(Decision, Option<(Arc<Answer>, u64)>),
    /// Ask the store; record its answer if the reset epoch is still `epoch`. With `lead`,
    /// this check leads the flight of a lapsed entry.
    Store {
        sent: u64,
        epoch: u64,
        lead: Option<Leading<'a, C>>,
    },
    /// Another check of the key is in flight after a lapse: wait for its answer.
    Wait(Arc<Flight>),
    /// Ask the store and record nothing (a peek, or a policy the cache cannot serve).
    Through,
}

/// How a check may route around a lapsed entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mode {
    /// `check`: lead a flight, or wait for one.
    Check,
    /// `check` after waiting once: lead a flight, never wait again.
    Retry,
    /// `check_now`: neither; a flight out is answered [`Route::Wait`] ("call `check`").
    Now,
    /// One policy of a `check_all`: as [`Now`](Mode::Now), a refusal with the others' figures.
    All,
}

impl<S, C: Clock> DenyCache<S, C> {
    pub(super) fn route(
        &self,
        key: &[u8],
        policy: &Policy,
        cost: u64,
        mode: Mode,
    ) -> Result<Route<'_, C>, Error> {
        policy.check_cost(cost)?;
        if cost == 0 || !DenyCache::caches(policy) {
            return Ok(Route::Through);
        }
        let cache = &self.cache;
        // Read the epoch before the clock: a reset after this point is seen by `record`.
        let epoch = cache.resets.load(Ordering::SeqCst);
        let now = cache.clock.now_micros();
        let buf = KeyBuf::new(key);
        let map_key = buf.as_ref(policy.namespace());
        let map = cache.map.pin();
        let store = Route::Store {
            sent: now,
            epoch,
            lead: None,
        };
        let Some(e) = map.get(&map_key) else {
            return Ok(store);
        };
        if now < e.until {
            if cost < e.cost {
                return Ok(store);
            }
            cache.denied_locally.fetch_add(1, Ordering::Relaxed);
            let others = match &e.others {
                Some(others) if mode == Mode::All => Some((Arc::clone(others), now)),
                _ => None,
            };
            return Ok(Route::Local(e.answer(policy, now), others));
        }
        // Lapsed: wait for the check in flight, or lead one (taking over from a leader out
        // past its deadline).
        if let Some(f) = &e.flight
            && !f.stuck(now)
        {
            return Ok(follow(f, cost, mode).unwrap_or(store));
        }
        // No flight where no check could wait for it (`Wait::new`): to the store at once.
        if matches!(mode, Mode::Now | Mode::All) || !Timer::available() {
            return Ok(store);
        }
        let flight = Arc::new(Flight::new(cost, now.saturating_add(cache.max_wait)));
        let claim = map.compute(map_key.to_owned(), |current| match current {
            Some((_, e)) if e.until <= now => match &e.flight {
                Some(f) if !f.stuck(now) => Operation::Abort(Some(Arc::clone(f))),
                _ => Operation::Insert(Entry {
                    flight: Some(Arc::clone(&flight)),
                    ..e.clone()
                }),
            },
            // Renewed or removed meanwhile: ask the store.
            _ => Operation::Abort(None),
        });
        Ok(match claim {
            Compute::Updated { old: (_, old), .. } => {
                // Whoever still waits for a stuck leader goes on now.
                if let Some(stuck) = &old.flight {
                    stuck.land(FlightEnd::Open);
                }
                Route::Store {
                    sent: now,
                    epoch,
                    lead: Some(Leading {
                        cache,
                        key: map_key.to_owned(),
                        flight,
                        end: FlightEnd::Open,
                    }),
                }
            }
            Compute::Aborted(Some(f)) => follow(&f, cost, mode).unwrap_or(store),
            _ => store,
        })
    }

    /// A waiting check's answer once its flight landed; `None`: decide again.
    pub(super) fn landed(&self, policy: &Policy, end: FlightEnd) -> Option<Decision> {
        let FlightEnd::Refused { until, reset_at } = end else {
            return None;
        };
        let now = self.cache.clock.now_micros();
        (now < until).then(|| {
            self.cache.denied_locally.fetch_add(1, Ordering::Relaxed);
            refusal(policy, now, until, reset_at, 0)
        })
    }
}

/// Waits for `flight` if its answer covers `cost` and `mode` allows; `None`: ask the store.
fn follow<'a, C>(flight: &Arc<Flight>, cost: u64, mode: Mode) -> Option<Route<'a, C>> {
    (mode != Mode::Retry && cost >= flight.cost).then(|| Route::Wait(Arc::clone(flight)))
}
