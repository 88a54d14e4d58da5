//! A store deciding at a time the caller gives instead of the server's clock.

use floodwall_core::store::{Op, Reply};
use floodwall_core::{Error, Store};

use crate::store::{RedisStore, explicit};

impl RedisStore {
    /// This store deciding at `now_us` (microseconds since the Unix epoch) instead of the
    /// server's clock: every operation of [`StoreExt`](floodwall_core::StoreExt)
    /// (`store.at(t).check(key, &policy, 1)`), each one script call or command, never
    /// through the [deny cache](crate::RedisStoreBuilder::deny_cache).
    ///
    /// For tests and simulations only: it makes runs deterministic (the decision vectors
    /// run through it), but a fleet passing its own clocks loses what server time gives.
    /// Keys written this way live one minute longer than their state needs, since their
    /// time is not the clock Redis expires keys by. Times after the year 2155 are clamped
    /// to it, so that a time plus the longest span floodwall computes with (100 years) stays
    /// below 2^53 µs, where Lua's numbers are exact.
    pub fn at(&self, now_us: u64) -> RedisStoreAt<'_> {
        RedisStoreAt {
            store: self,
            now: explicit(now_us),
        }
    }
}

/// A [`RedisStore`] deciding at a given time: see [`RedisStore::at`].
#[derive(Debug, Clone, Copy)]
pub struct RedisStoreAt<'a> {
    store: &'a RedisStore,
    now: Option<u64>,
}

impl Store for RedisStoreAt<'_> {
    async fn call(&self, op: Op<'_>) -> Result<Reply, Error> {
        self.store.direct(op, self.now).await
    }
}
