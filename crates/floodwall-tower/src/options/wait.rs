//! Waiting for the next slot instead of refusing (feature `wait`): how long at most, how
//! many may wait, and the jitter on their waits.

use std::sync::Arc;
use std::time::Duration;

use floodwall_core::{ConfigError, Reservable};

use crate::wait::{Waiters, Waiting};

/// Waits for the next slot instead of refusing, up to a bound (feature `wait`): a request
/// refused with a `retry_after` within it books the next slot in the store and waits for
/// it; one whose slot is further away, or past [`max_waiting`](Self::max_waiting), is
/// refused at once. A waiter dropped before its slot cancels its booking. Set with
/// [`RateLimitLayer::wait`](crate::RateLimitLayer::wait); see the
/// [waiting guide](crate::guide::waiting).
///
/// ```
/// use floodwall_core::{MemoryStore, Policy};
/// use floodwall_tower::{RateLimitLayer, Wait};
/// use std::time::Duration;
///
/// // Bursts of up to 5 go through at once; the rest leave 100 ms apart, or are refused
/// // when their turn is more than a second away.
/// let layer = RateLimitLayer::new(MemoryStore::new(), Policy::gcra("smooth", "10/s burst 5".parse()?)?)
///     .wait(Wait::up_to(Duration::from_secs(1))?.max_waiting(256, 8).jitter(Duration::from_millis(5)))?;
/// # let _ = layer;
/// # Ok::<(), floodwall_core::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wait {
    max_wait: Duration,
    in_all: usize,
    per_key: usize,
    jitter: Duration,
}

impl Wait {
    /// How many requests may wait at once, over all keys, unless
    /// [`max_waiting`](Self::max_waiting) says otherwise.
    pub const DEFAULT_MAX_WAITING: usize = 1024;

    /// How many requests of one key may wait at once unless
    /// [`max_waiting`](Self::max_waiting) says otherwise.
    pub const DEFAULT_MAX_WAITING_PER_KEY: usize = 32;

    /// Waits up to `max_wait` for the next slot, cut to
    /// [`Reservable::MAX_WAIT`](floodwall_core::Reservable::MAX_WAIT) (an hour). Zero is
    /// an error ([`ConfigError::BadWait`]): no request would ever wait.
    pub fn up_to(max_wait: Duration) -> Result<Self, ConfigError> {
        if max_wait.is_zero() {
            return Err(ConfigError::BadWait {
                reason: "a wait of up to zero never waits; leave waiting off instead".into(),
            });
        }
        Ok(Self {
            max_wait: max_wait.min(Reservable::MAX_WAIT),
            in_all: Self::DEFAULT_MAX_WAITING,
            per_key: Self::DEFAULT_MAX_WAITING_PER_KEY,
            jitter: Duration::ZERO,
        })
    }

    /// Bounds the requests waiting for their slot: at most `in_all` at once, and `per_key`
    /// of one key. Past either, a request is refused at once.
    pub fn max_waiting(mut self, in_all: usize, per_key: usize) -> Self {
        self.in_all = in_all;
        self.per_key = per_key;
        self
    }

    /// Adds a uniform random delay of up to `jitter` to every wait (never earlier than the
    /// slot), so that requests booked at one instant do not all wake at once. Off by
    /// default; cut to [`Reservable::MAX_WAIT`](floodwall_core::Reservable::MAX_WAIT).
    pub fn jitter(mut self, jitter: Duration) -> Self {
        self.jitter = jitter.min(Reservable::MAX_WAIT);
        self
    }

    /// What the layer's services hold: the bound, the jitter, and counters of their own.
    pub(crate) fn waiting(self) -> Waiting {
        Waiting {
            max_wait: Some(self.max_wait),
            jitter: self.jitter,
            waiters: Arc::new(Waiters::new(self.in_all, self.per_key)),
        }
    }
}
