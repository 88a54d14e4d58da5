//! Reservations through the cache.

use std::sync::atomic::Ordering;
use std::time::Duration;

use super::DenyCache;
use crate::reservation::max_wait_micros;
use crate::store::key::KeyBuf;
use crate::{Cancelled, Clock, Decision, Error, Policy, Reservable, Reservation, Store, StoreExt};

impl<S: Store, C: Clock> DenyCache<S, C> {
    /// [`StoreExt::reserve`] through the cache: refused here when it may not wait until a
    /// cached refusal ends, else the store's; a refused booking is learnt as a check's
    /// refusal (a booked one only moves slots later: what the cache knew stays true).
    pub(super) async fn reserve_through(
        &self,
        key: &[u8],
        policy: &Reservable,
        cost: u64,
        max_wait: Duration,
    ) -> Result<Reservation, Error> {
        let p = policy.policy();
        p.check_cost(cost)?;
        let cache = &self.cache;
        if cost == 0 || !DenyCache::caches(p) {
            cache.store_calls.fetch_add(1, Ordering::Relaxed);
            return self.store.reserve(key, policy, cost, max_wait).await;
        }
        // Read the epoch before the clock, as `route` does.
        let epoch = cache.resets.load(Ordering::SeqCst);
        let now = cache.clock.now_micros();
        if let Some(d) = self.refused_beyond(key, p, cost, now, max_wait_micros(max_wait)) {
            return Ok(Reservation::refused(d));
        }
        cache.store_calls.fetch_add(1, Ordering::Relaxed);
        let result = self.store.reserve(key, policy, cost, max_wait).await;
        if let Ok(r) = &result
            && !r.is_booked()
        {
            self.record(key, p, cost, now, epoch, &r.decision);
        }
        result
    }

    /// The local refusal of a booking that may not wait out a cached refusal.
    fn refused_beyond(
        &self,
        key: &[u8],
        policy: &Policy,
        cost: u64,
        now: u64,
        max_wait: u64,
    ) -> Option<Decision> {
        let buf = KeyBuf::new(key);
        let map = self.cache.map.pin();
        let e = map.get(&buf.as_ref(policy.namespace()))?;
        // A ban refuses a booking whatever the wait; a refusal, one that may not wait
        // until it ends (while held, the fact stands until its end).
        if now >= e.until || cost < e.cost || (!e.banned && e.end - now <= max_wait) {
            return None;
        }
        self.cache.denied_locally.fetch_add(1, Ordering::Relaxed);
        Some(e.answer(policy, now))
    }

    /// [`StoreExt::cancel`] through the cache: a slot given back forgets the key's entry.
    pub(super) async fn cancel_through(
        &self,
        key: &[u8],
        policy: &Reservable,
        reservation: &Reservation,
    ) -> Result<Cancelled, Error> {
        let result = self.store.cancel(key, policy, reservation).await;
        if let Ok(Cancelled::Returned) = result {
            self.forget(key, policy.policy());
        }
        result
    }
}
