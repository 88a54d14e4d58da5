//! A bound on every call of any store (feature `tokio`).

use std::time::Duration;

use crate::Error;
use crate::store::{Op, Reply, Store};

/// Bounds every call of the store it wraps: past the timeout, the call is dropped and
/// answers [`Error::Timeout`], which a [`Breaker`](super::Breaker) counts and a
/// [`Fallback`](super::Fallback) answers for.
///
/// For stores that do not bound their own calls (`RedisStore` does). Needs a tokio
/// runtime with its timer enabled.
///
/// ```
/// use floodwall_core::resilience::Timeout;
/// use floodwall_core::MemoryStore;
/// use std::time::Duration;
///
/// let store = Timeout::new(MemoryStore::new(), Duration::from_millis(200));
/// # let _ = store;
/// ```
#[derive(Debug, Clone)]
pub struct Timeout<S> {
    store: S,
    timeout: Duration,
}

impl<S> Timeout<S> {
    /// The bound used by [`with_default`](Self::with_default): 1 s, as the Redis store's.
    pub const DEFAULT: Duration = Duration::from_secs(1);

    /// Bounds each call of `store` by `timeout` (at least 1 ms).
    pub fn new(store: S, timeout: Duration) -> Self {
        Self {
            store,
            timeout: timeout.max(Duration::from_millis(1)),
        }
    }

    /// Bounds each call by [`Timeout::DEFAULT`].
    pub fn with_default(store: S) -> Self {
        Self::new(store, Self::DEFAULT)
    }

    /// The store it bounds.
    pub fn get_ref(&self) -> &S {
        &self.store
    }

    /// The bound.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }
}

impl<S: Store> Store for Timeout<S> {
    /// Bounded whatever the operation (a booking's store call, not the wait it answers).
    async fn call(&self, op: Op<'_>) -> Result<Reply, Error> {
        tokio::time::timeout(self.timeout, self.store.call(op))
            .await
            .unwrap_or(Err(Error::Timeout))
    }

    fn call_now(&self, op: Op<'_>) -> Option<Result<Reply, Error>> {
        self.store.call_now(op)
    }
}
