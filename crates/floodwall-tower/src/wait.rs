//! Waiting instead of refusing ([`RateLimitLayer::wait_up_to`](crate::RateLimitLayer::wait_up_to)):
//! a request refused with a `retry_after` within the bound books the next slot in the
//! store, waits for it on tokio's timer, then proceeds. What waits is bounded per key and
//! in all ([`Waiters`]); a waiting request dropped before its slot cancels its booking
//! ([`Bookings`]).

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Waker};
use std::time::Duration;

use floodwall_core::{Policy, Reservable, Reservation, Store, StoreExt};
use smallvec::SmallVec;

use crate::Key;
use crate::config::Config;
use crate::decide::{Admission, PolicyList, Tally};
use crate::mode::sealed::Refuse;

/// What a layer's waiting is configured with (copied into each service's configuration;
/// the counters are shared).
#[derive(Clone)]
pub(crate) struct Waiting {
    /// `None`: refuse as usual (the default).
    pub(crate) max_wait: Option<Duration>,
    /// Added to each wait: uniform in `0..=jitter`, never earlier than the slot.
    pub(crate) jitter: Duration,
    pub(crate) waiters: Arc<Waiters>,
}

impl Default for Waiting {
    fn default() -> Self {
        Self {
            max_wait: None,
            jitter: Duration::ZERO,
            waiters: Arc::new(Waiters::new(
                crate::RateLimitLayer::<()>::DEFAULT_MAX_WAITING,
                crate::RateLimitLayer::<()>::DEFAULT_MAX_WAITING_PER_KEY,
            )),
        }
    }
}

impl Waiting {
    /// Whether a refusal recorded in `tally` may wait: waiting is on, and every policy
    /// that refused says when within the bound (a cost that can never pass never waits).
    pub(crate) fn may_wait(&self, tally: &Tally) -> bool {
        let Some(max) = self.max_wait else {
            return false;
        };
        tally.refused_within(max)
    }
}

/// How many requests wait, per key and in all, against their bounds: a request past
/// either is refused at once rather than held, so waiting cannot pile up memory.
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

/// The slots one request booked, cancelled if it is dropped before it proceeds (its
/// client went away): each slot then goes back where the algorithm allows it.
struct Bookings<St: Store + 'static, K: Send + Sync + 'static> {
    config: Arc<Config<St, K>>,
    key: Key,
    held: SmallVec<[(Reservable, Reservation); 1]>,
}

impl<St: Store + 'static, K: Send + Sync + 'static> Bookings<St, K> {
    /// Cancels every booking, at once where the store answers without waiting (the memory
    /// store), else on a task of its own: a dropped future cannot wait.
    fn cancel_all(&mut self) {
        for (policy, reservation) in self.held.drain(..) {
            let (config, key) = (Arc::clone(&self.config), self.key.clone());
            let mut cancel = Box::pin(async move {
                let _ = config
                    .store
                    .cancel(key.as_bytes(), &policy, &reservation)
                    .await;
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

impl<St: Store + 'static, K: Send + Sync + 'static> Drop for Bookings<St, K> {
    fn drop(&mut self) {
        self.cancel_all();
    }
}

/// A request that some policies refused with a `retry_after` within the layer's bound:
/// books a slot in each of them (in each policy, when several counted none of it), waits for the latest on tokio's timer, and admits it; or
/// refuses it as without waiting when it cannot wait (a bound reached, a slot now beyond
/// the bound, a policy that cannot book).
pub(crate) async fn book_and_wait<St, K, M>(
    config: Arc<Config<St, K>>,
    key: Key,
    policies: PolicyList,
    cost: u64,
    mut tally: Tally,
) -> Admission<M::Refusal>
where
    St: Store + 'static,
    K: Send + Sync + 'static,
    M: Refuse,
{
    let waiting = &config.waiting;
    let Some(max_wait) = waiting.max_wait else {
        return config.refuse::<M>(&tally, policies.as_slice());
    };
    let Some(waiter) = waiting.waiters.enter(key.as_bytes()) else {
        return config.refuse::<M>(&tally, policies.as_slice());
    };
    let mut bookings = Bookings {
        config: Arc::clone(&config),
        key,
        held: SmallVec::new(),
    };
    // Several policies counted none of the refusal (all or nothing): every one books.
    let refused: SmallVec<[usize; 2]> = match policies.as_slice().len() {
        1 => tally.refused().collect(),
        n => (0..n).collect(),
    };
    let mut wait = Duration::ZERO;
    for i in refused {
        let policy: &Policy = &policies.as_slice()[i];
        let Ok(reservable) = Reservable::new(policy.clone()) else {
            return config.refuse::<M>(&tally, policies.as_slice());
        };
        let booked = config
            .store
            .reserve(bookings.key.as_bytes(), &reservable, cost, max_wait)
            .await;
        match booked {
            Ok(r) => {
                tally.set(i, r.decision);
                if !r.is_booked() {
                    return config.refuse::<M>(&tally, policies.as_slice());
                }
                wait = wait.max(r.wait);
                bookings.held.push((reservable, r));
            }
            Err(e) if e.is_store_failure() => {
                crate::observe::store_error(&config, policies.as_slice(), i);
                return config.store_failed::<M>(e);
            }
            Err(_) => return config.refuse::<M>(&tally, policies.as_slice()),
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
    let policies = policies.as_slice();
    config.admit_after_wait::<M>(&tally, policies)
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
        assert!(
            waiters.keys().is_empty(),
            "no key is kept once nobody waits"
        );
        let none = Arc::new(Waiters::new(10, 0));
        assert!(none.enter(b"a").is_none());
        assert_eq!(none.len(), 0);
    }
}
