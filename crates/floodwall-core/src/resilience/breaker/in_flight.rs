//! A [`Breaker`] around a [`ConcurrencyStore`]: the same circuit and the same bound on
//! calls in flight as for rate checks, so a dead store costs one timeout per probe
//! interval whether it counts rates or requests in flight.

use std::sync::atomic::Ordering;

use super::{Breaker, evidence};
use crate::{Acquired, Clock, ConcurrencyLimit, ConcurrencyStore, Error};

impl<S: ConcurrencyStore, C: Clock> ConcurrencyStore for Breaker<S, C> {
    /// Fails fast while open (but for a probe); bounds the acquisitions waiting on the store.
    /// Only the acquisition is a call: the permit's release is the store's own business.
    async fn acquire(&self, key: &[u8], limit: &ConcurrencyLimit) -> Result<Acquired, Error> {
        let call = self.circuit.admit()?;
        let result = self.circuit.store.acquire(key, limit).await;
        call.finish(&result);
        result
    }

    /// As [`Store::check_now`](crate::Store::check_now): fails fast while open, forwards
    /// while closed, leaves a due probe to [`acquire`](ConcurrencyStore::acquire).
    fn acquire_now(&self, key: &[u8], limit: &ConcurrencyLimit) -> Option<Result<Acquired, Error>> {
        let s = &self.circuit;
        if s.open.load(Ordering::Acquire) {
            let now = s.clock.now_micros();
            let next = s.next_probe.load(Ordering::Acquire);
            return (now < next).then(|| Err(s.refusal(now, next)));
        }
        let result = s.store.acquire_now(key, limit)?;
        s.record(evidence(&result), false);
        Some(result)
    }
}
