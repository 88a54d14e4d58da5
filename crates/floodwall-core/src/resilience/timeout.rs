//! A bound on every call of any store (feature `tokio`).

use std::time::Duration;

use crate::{Cancelled, Decision, Error, Policy, Reservable, Reservation, Store};

/// Bounds every call of the store it wraps: past the timeout, the call is dropped and
/// answers [`Error::Timeout`], which a [`Breaker`](super::Breaker) counts and a
/// [`Fallback`](super::Fallback) answers for.
///
/// For stores that do not bound their own calls. `floodwall_redis::RedisStore` already
/// does (its `timeout`, 1 s by default), so it needs none. Synchronous answers
/// ([`check_now`](Store::check_now)) are not bounded: they do not wait. Needs a tokio
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
    async fn check(&self, key: &[u8], policy: &Policy, cost: u64) -> Result<Decision, Error> {
        tokio::time::timeout(self.timeout, self.store.check(key, policy, cost))
            .await
            .unwrap_or(Err(Error::Timeout))
    }

    async fn reset(&self, key: &[u8], policy: &Policy) -> Result<(), Error> {
        tokio::time::timeout(self.timeout, self.store.reset(key, policy))
            .await
            .unwrap_or(Err(Error::Timeout))
    }

    fn check_now(&self, key: &[u8], policy: &Policy, cost: u64) -> Option<Result<Decision, Error>> {
        self.store.check_now(key, policy, cost)
    }

    async fn check_all(
        &self,
        key: &[u8],
        policies: &[Policy],
        cost: u64,
    ) -> Result<Vec<Option<Decision>>, Error> {
        tokio::time::timeout(self.timeout, self.store.check_all(key, policies, cost))
            .await
            .unwrap_or(Err(Error::Timeout))
    }

    fn check_all_now(
        &self,
        key: &[u8],
        policies: &[Policy],
        cost: u64,
    ) -> Option<Result<Vec<Option<Decision>>, Error>> {
        self.store.check_all_now(key, policies, cost)
    }

    /// Bounded as a check is (the store's call, not the wait it answers).
    async fn reserve(
        &self,
        key: &[u8],
        policy: &Reservable,
        cost: u64,
        max_wait: Duration,
    ) -> Result<Reservation, Error> {
        tokio::time::timeout(
            self.timeout,
            self.store.reserve(key, policy, cost, max_wait),
        )
        .await
        .unwrap_or(Err(Error::Timeout))
    }

    async fn cancel(
        &self,
        key: &[u8],
        policy: &Reservable,
        reservation: &Reservation,
    ) -> Result<Cancelled, Error> {
        tokio::time::timeout(self.timeout, self.store.cancel(key, policy, reservation))
            .await
            .unwrap_or(Err(Error::Timeout))
    }

    async fn adjust(
        &self,
        key: &[u8],
        policy: &Policy,
        adjustment: crate::Adjustment,
    ) -> Result<(), Error> {
        tokio::time::timeout(self.timeout, self.store.adjust(key, policy, adjustment))
            .await
            .unwrap_or(Err(Error::Timeout))
    }

    async fn unban(&self, key: &[u8], policy: &Policy) -> Result<(), Error> {
        tokio::time::timeout(self.timeout, self.store.unban(key, policy))
            .await
            .unwrap_or(Err(Error::Timeout))
    }
}
