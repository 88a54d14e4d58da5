//! [`DenyCacheBuilder`]: a [`DenyCache`]'s cap, wait and hold bounds, and clock.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use super::{Cache, DenyCache};
use crate::store::evict::Cap;
use crate::store::{Store, micros};
use crate::{Clock, SystemClock};

/// Sets a [`DenyCache`]'s cap, bounds or clock before wrapping a store.
#[derive(Debug, Clone)]
pub struct DenyCacheBuilder<C = SystemClock> {
    pub(super) max_keys: usize,
    pub(super) max_wait: Duration,
    pub(super) max_refusal_hold: Duration,
    pub(super) max_ban_hold: Duration,
    pub(super) clock: C,
}

impl<S: Store> DenyCache<S, SystemClock> {
    /// Wraps `store` with the default cap and the system clock.
    pub fn new(store: S) -> Self {
        DenyCache::builder().build(store)
    }
}

impl<C: Clock> DenyCacheBuilder<C> {
    /// The most keys remembered (at least 1); dropping one at the cap only sends the next
    /// check to the store.
    pub fn max_keys(mut self, max_keys: usize) -> Self {
        self.max_keys = max_keys;
        self
    }

    /// The longest a check waits for another check of its key in flight to the store
    /// before it goes itself; default [`DenyCache::DEFAULT_MAX_WAIT`]. Keep it at least the
    /// inner store's timeout. Zero turns waiting off; so does the lack of a timer
    /// ([guide](crate::guide::deny_cache#a-wait-is-bounded)).
    pub fn max_wait(mut self, max_wait: Duration) -> Self {
        self.max_wait = max_wait;
        self
    }

    /// The longest a refusal is answered locally before one check asks the store again
    /// (so a reset elsewhere reaches this cache within it); default
    /// [`DenyCache::DEFAULT_MAX_REFUSAL_HOLD`]. Zero holds no refusal (bans: see
    /// [`max_ban_hold`](Self::max_ban_hold)).
    pub fn max_refusal_hold(mut self, max_refusal_hold: Duration) -> Self {
        self.max_refusal_hold = max_refusal_hold;
        self
    }

    /// The longest a ban is answered locally before one check goes to the store again;
    /// default [`DenyCache::DEFAULT_MAX_BAN_HOLD`]. Zero holds no ban.
    pub fn max_ban_hold(mut self, max_ban_hold: Duration) -> Self {
        self.max_ban_hold = max_ban_hold;
        self
    }

    /// The clock local windows are measured with; it must advance at the store's rate.
    pub fn clock<C2: Clock>(self, clock: C2) -> DenyCacheBuilder<C2> {
        DenyCacheBuilder {
            max_keys: self.max_keys,
            max_wait: self.max_wait,
            max_refusal_hold: self.max_refusal_hold,
            max_ban_hold: self.max_ban_hold,
            clock,
        }
    }

    /// Wraps `store`.
    pub fn build<S: Store>(self, store: S) -> DenyCache<S, C> {
        DenyCache {
            store,
            cache: Arc::new(Cache {
                map: crate::store::new_map(),
                cap: Cap::new(self.max_keys),
                clock: self.clock,
                max_wait: micros(self.max_wait),
                max_refusal_hold: micros(self.max_refusal_hold),
                max_ban_hold: micros(self.max_ban_hold),
                resets: AtomicU64::new(0),
                store_calls: AtomicU64::new(0),
                denied_locally: AtomicU64::new(0),
                waited: AtomicU64::new(0),
                gave_up: AtomicU64::new(0),
            }),
        }
    }
}
