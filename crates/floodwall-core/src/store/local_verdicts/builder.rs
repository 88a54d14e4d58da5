//! [`LocalVerdictsBuilder`]: a [`LocalVerdicts`]'s interval, cap and clock.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use super::{LocalVerdicts, Verdicts};
use crate::store::evict::Cap;
use crate::store::{Store, micros};
use crate::{Clock, ConfigError, SystemClock};

/// Sets a [`LocalVerdicts`]'s interval, cap or clock before wrapping a store.
#[derive(Debug, Clone)]
pub struct LocalVerdictsBuilder<C = SystemClock> {
    pub(super) interval: Duration,
    pub(super) max_keys: usize,
    pub(super) clock: C,
}

impl<S: Store> LocalVerdicts<S, SystemClock> {
    /// Wraps `store`, refreshing each key at most once per `interval` (see
    /// [`LocalVerdictsBuilder::build`] for the errors).
    pub fn new(store: S, interval: Duration) -> Result<Self, ConfigError> {
        LocalVerdicts::builder().interval(interval).build(store)
    }
}

impl<C: Clock> LocalVerdictsBuilder<C> {
    /// How long a verdict is used before the next check refreshes it (default 100 ms, at
    /// most [`LocalVerdicts::MAX_INTERVAL`]): longer saves round trips and admits more.
    pub fn interval(mut self, interval: Duration) -> Self {
        self.interval = interval;
        self
    }

    /// The most keys remembered (at least 1). **A dropped key's pending counts are lost**:
    /// size it above the keys active per interval ([guide](crate::guide::local_verdicts#bounded)).
    pub fn max_keys(mut self, max_keys: usize) -> Self {
        self.max_keys = max_keys;
        self
    }

    /// The clock verdicts are timed with: a [`ManualClock`](crate::ManualClock) in tests.
    pub fn clock<C2: Clock>(self, clock: C2) -> LocalVerdictsBuilder<C2> {
        LocalVerdictsBuilder {
            interval: self.interval,
            max_keys: self.max_keys,
            clock,
        }
    }

    /// Wraps `store`, or refuses an interval outside 1 µs ..= 1 hour
    /// ([`ConfigError::BadRefreshInterval`]).
    pub fn build<S: Store>(self, store: S) -> Result<LocalVerdicts<S, C>, ConfigError> {
        let interval = micros(self.interval);
        if interval == 0 || self.interval > LocalVerdicts::MAX_INTERVAL {
            return Err(ConfigError::BadRefreshInterval {
                interval: self.interval,
            });
        }
        Ok(LocalVerdicts {
            store,
            verdicts: Arc::new(Verdicts {
                map: crate::store::new_map(),
                cap: Cap::new(self.max_keys),
                interval,
                clock: self.clock,
                store_calls: AtomicU64::new(0),
                refreshes: AtomicU64::new(0),
                allowed_locally: AtomicU64::new(0),
                denied_locally: AtomicU64::new(0),
            }),
        })
    }
}
