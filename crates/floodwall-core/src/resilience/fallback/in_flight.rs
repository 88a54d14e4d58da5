//! A [`Fallback`](super::Fallback)'s answer to an acquisition: while the store fails, requests in flight
//! are let through uncounted (open), refused (closed), or counted in this process against
//! its share of the limit (local), with the same counters and logs as rate checks.

use std::sync::atomic::Ordering;

use super::Backstop;
use crate::{Acquired, Clock, ConcurrencyLimit, Error, Permit};

impl<S, C: Clock> Backstop<S, C> {
    /// The store's answer, or the fallback's in its place.
    pub(super) fn settle_acquire(
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
