//! Waiting instead of refusing ([`Wait`](crate::Wait)): booking the next slot and sleeping
//! until it, bounded per key and in all ([`Waiters`]); a waiter dropped before its slot
//! cancels its booking ([`Bookings`]). How it ended ([`Waited`]) is the decider's to answer.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Waker};
use std::time::Duration;

use floodwall_core::{Decision, Policy, Reservable, Reservation, Store, StoreExt};
use smallvec::SmallVec;

use crate::key::Key;

/// What a layer's waiting is configured with (copied into each service's configuration;
/// the counters are shared).
#[derive(Clone, Default)]
pub(crate) struct Waiting {
    /// `None`: refuse as usual (the default), and `waiters` is never entered.
    pub(crate) max_wait: Option<Duration>,
    /// Added to each wait: uniform in `0..=jitter`, never earlier than the slot.
    pub(crate) jitter: Duration,
    pub(crate) waiters: Arc<Waiters>,
}

impl Waiting {
    /// How long a refused request may wait for its slot; `None`: it may not.
    pub(crate) fn max_wait(&self) -> Option<Duration> {
        self.max_wait
    }
}

/// How many requests wait, per key and in all, against their bounds: a request past
/// either is refused at once rather than held, so waiting cannot pile up memory.
#[derive(Default)]
pub(crate) struct Waiters {
    max_total: usize,
    max_per_key: usize,
    total: AtomicUsize,
    /// Keys with at least one request waiting, and how many.
    per_key: Mutex<HashMap<Box<[u8]>, usize>>,
}

impl Waiters {
    pub(crate) fn new(max_total: usize, max_per_key: usize) -> Self {
        Self {
            max_total,
            max_per_key,
            total: AtomicUsize::new(0),
            per_key: Mutex::new(HashMap::new()),
        }
    }

    fn keys(&self) -> MutexGuard<'_, HashMap<Box<[u8]>, usize>> {
        // Every write is one assignment: a poisoned lock still holds consistent counts.
        self.per_key.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A place to wait for `key`, or `None` when either bound is reached.
    fn enter(self: &Arc<Self>, key: &[u8]) -> Option<Waiter> {
        let max = self.max_total;
        self.total
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            })
            .ok()?;
        let mut keys = self.keys();
        let taken = match keys.get_mut(key) {
            Some(n) if *n >= self.max_per_key => false,
            Some(n) => {
                *n += 1;
                true
            }
            None if self.max_per_key == 0 => false,
            None => {
                keys.insert(key.into(), 1);
                true
            }
        };
        drop(keys);
        if !taken {
            self.total.fetch_sub(1, Ordering::AcqRel);
            return None;
        }
        Some(Waiter {
            waiters: Arc::clone(self),
            key: key.into(),
        })
    }

    /// Requests waiting now, in all.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.total.load(Ordering::Acquire)
    }
}

/// One request's place among the waiters, given up when dropped.
struct Waiter {
    waiters: Arc<Waiters>,
    key: Box<[u8]>,
}

impl Drop for Waiter {
    fn drop(&mut self) {
        let mut keys = self.waiters.keys();
        if let Some(n) = keys.get_mut(&self.key) {
            *n -= 1;
            if *n == 0 {
                keys.remove(&self.key);
            }
        }
        drop(keys);
        self.waiters.total.fetch_sub(1, Ordering::AcqRel);
    }
}

/// What holds the store slots are booked in: the layer's configuration, shared.
pub(crate) type Holder<St> = Arc<dyn AsRef<St> + Send + Sync>;

/// The slots one request booked, cancelled if it is dropped before it proceeds (its
/// client went away): each slot then goes back where the algorithm allows it.
struct Bookings<St: Store + 'static> {
    store: Holder<St>,
    key: Key,
    held: SmallVec<[(Reservable, Reservation); 1]>,
}

impl<St: Store + 'static> Drop for Bookings<St> {
    /// Cancels every booking, at once where the store answers without waiting (the memory
    /// store), else on a task of its own: a dropped future cannot wait.
    fn drop(&mut self) {
        for (policy, reservation) in self.held.drain(..) {
            let (store, key) = (Arc::clone(&self.store), self.key.clone());
            let mut cancel = Box::pin(async move {
                let store: &St = (*store).as_ref();
                let _ = store.cancel(key.as_bytes(), &policy, &reservation).await;
            });
            if cancel
                .as_mut()
                .poll(&mut Context::from_waker(Waker::noop()))
                .is_pending()
                && let Ok(runtime) = tokio::runtime::Handle::try_current()
            {
                runtime.spawn(cancel);
            }
        }
    }
}

/// The decisions booking gave, each with its policy's index: they replace the refusals
/// in the request's tally.
pub(crate) type Booked = SmallVec<[(usize, Decision); 2]>;

/// How a request that set out to wait ended.
pub(crate) enum Waited {
    /// Every slot booked and its time come: admit it, with these decisions.
    Admitted(Booked),
    /// It could not wait: refuse it as without waiting, with the decisions booked so far.
    Refused(Booked),
    /// The store failed booking policy `i`.
    Failed(usize, floodwall_core::Error),
}

/// Books a slot in each policy of `refused` (indexes into `policies`) and waits for the
/// latest on tokio's timer; or says why it could not.
pub(crate) async fn book_and_wait<St: Store + 'static>(
    waiting: &Waiting,
    store: Holder<St>,
    key: Key,
    policies: &[Policy],
    refused: &[usize],
    cost: u64,
) -> Waited {
    let mut booked = Booked::new();
    let Some(max_wait) = waiting.max_wait else {
        return Waited::Refused(booked);
    };
    let Some(waiter) = waiting.waiters.enter(key.as_bytes()) else {
        return Waited::Refused(booked);
    };
    let held = SmallVec::new();
    let mut bookings = Bookings { store, key, held };
    let mut wait = Duration::ZERO;
    for &i in refused {
        let Ok(reservable) = Reservable::new(policies[i].clone()) else {
            return Waited::Refused(booked);
        };
        let store: &St = (*bookings.store).as_ref();
        let result = store
            .reserve(bookings.key.as_bytes(), &reservable, cost, max_wait)
            .await;
        match result {
            Ok(r) => {
                booked.push((i, r.decision));
                if !r.is_booked() {
                    return Waited::Refused(booked);
                }
                wait = wait.max(r.wait);
                bookings.held.push((reservable, r));
            }
            Err(e) if e.is_store_failure() => return Waited::Failed(i, e),
            Err(_) => return Waited::Refused(booked),
        }
    }
    let jitter = match waiting.jitter.as_micros() {
        0 => Duration::ZERO,
        max => Duration::from_micros(fastrand::u64(0..=u64::try_from(max).unwrap_or(u64::MAX))),
    };
    if !(wait + jitter).is_zero() {
        tokio::time::sleep_until(tokio::time::Instant::now() + wait + jitter).await;
    }
    // Proceeding: the slots are used, nothing to cancel.
    bookings.held.clear();
    drop(waiter);
    Waited::Admitted(booked)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waiters_are_bounded_per_key_and_in_all() {
        let waiters = Arc::new(Waiters::new(3, 2));
        let a1 = waiters.enter(b"a").unwrap();
        let a2 = waiters.enter(b"a").unwrap();
        assert!(waiters.enter(b"a").is_none(), "per key");
        let b1 = waiters.enter(b"b").unwrap();
        assert!(waiters.enter(b"c").is_none(), "in all");
        assert_eq!(waiters.len(), 3);
        drop(a1);
        let a3 = waiters.enter(b"a").unwrap();
        drop((a2, a3, b1));
        assert_eq!(waiters.len(), 0);
        let kept = waiters.keys().len();
        assert_eq!(kept, 0, "no key is kept once nobody waits");
        let none = Arc::new(Waiters::new(10, 0));
        assert!(none.enter(b"a").is_none());
        assert_eq!(none.len(), 0);
    }
}
