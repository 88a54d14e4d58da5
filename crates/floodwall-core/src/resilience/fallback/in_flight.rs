//! A [`Fallback`] around a [`ConcurrencyStore`]: while the store fails, requests in flight
//! are let through uncounted (open), refused (closed), or counted in this process against
//! its share of the limit (local), with the same counters and logs as rate checks.

use std::sync::atomic::Ordering;

use super::{Backstop, Fallback};
use crate::{Acquired, Clock, ConcurrencyLimit, ConcurrencyStore, Error, Permit};

impl<S, C: Clock> Backstop<S, C> {
    /// The store's answer, or the fallback's in its place.
    fn settle_acquire(
        &self,
        key: &[u8],
        limit: &ConcurrencyLimit,
        result: Result<Acquired, Error>,
    ) -> Result<Acquired, Error> {
        let error = match result {
            Ok(acquired) => {
                self.disengage();
                return Ok(acquired);
            }
            Err(e) if !e.is_store_failure() => return Err(e),
            Err(e) => e,
        };
        self.engage(&error);
        match self.mode {
            crate::resilience::FailMode::Open => {
                self.failed_open.fetch_add(1, Ordering::Relaxed);
                Ok(Acquired::Granted(Permit::unheld(limit.max())))
            }
            crate::resilience::FailMode::Closed => {
                self.failed_closed.fetch_add(1, Ordering::Relaxed);
                Err(error)
            }
            crate::resilience::FailMode::Local { nodes } => {
                self.decided_locally.fetch_add(1, Ordering::Relaxed);
                Ok(match self.local.acquire_sync(key, &limit.share(nodes))? {
                    Acquired::Granted(permit) => Acquired::Granted(permit.by_fallback()),
                    full => full,
                })
            }
        }
    }
}

impl<S: ConcurrencyStore, C: Clock> ConcurrencyStore for Fallback<S, C> {
    async fn acquire(&self, key: &[u8], limit: &ConcurrencyLimit) -> Result<Acquired, Error> {
        let result = self.backstop.store.acquire(key, limit).await;
        self.backstop.settle_acquire(key, limit, result)
    }

    fn acquire_now(&self, key: &[u8], limit: &ConcurrencyLimit) -> Option<Result<Acquired, Error>> {
        let result = self.backstop.store.acquire_now(key, limit)?;
        Some(self.backstop.settle_acquire(key, limit, result))
    }
}
