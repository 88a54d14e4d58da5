//! Where stores get `now` from. Algorithms never read a clock: time is a parameter.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A source of the current time, in microseconds since the Unix epoch.
///
/// Microseconds since the epoch are what Redis's `TIME` returns, so a local store and a
/// shared one speak the same time. A clock may go backwards (a wall clock stepped back,
/// another node's skew): every algorithm tolerates it without panicking and without
/// granting more than the quota.
pub trait Clock: Send + Sync + 'static {
    /// Microseconds since the Unix epoch.
    fn now_micros(&self) -> u64;
}

/// The system's wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_micros(&self) -> u64 {
        // Before 1970 (a badly set clock) reads as 0 rather than panicking.
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as u64)
    }
}

/// A clock that moves only when told to: for tests and simulations.
///
/// Clones share the same time, so a test can keep one handle and give another to a store.
///
/// ```
/// use floodwall_core::{Clock, ManualClock};
/// use std::time::Duration;
///
/// let clock = ManualClock::new(1_000);
/// let handle = clock.clone();
/// handle.advance(Duration::from_millis(2));
/// assert_eq!(clock.now_micros(), 3_000);
/// handle.set(500); // backwards is allowed
/// assert_eq!(clock.now_micros(), 500);
/// ```
#[derive(Debug, Clone, Default)]
pub struct ManualClock(Arc<AtomicU64>);

impl ManualClock {
    /// A clock reading `micros` microseconds since the epoch.
    pub fn new(micros: u64) -> Self {
        Self(Arc::new(AtomicU64::new(micros)))
    }

    /// Moves the clock forward (saturating at `u64::MAX`).
    pub fn advance(&self, by: Duration) {
        let by = u64::try_from(by.as_micros()).unwrap_or(u64::MAX);
        let _ = self
            .0
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |t| {
                Some(t.saturating_add(by))
            });
    }

    /// Sets the clock to `micros`, forwards or backwards.
    pub fn set(&self, micros: u64) {
        self.0.store(micros, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_micros(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

impl<C: Clock + ?Sized> Clock for Arc<C> {
    fn now_micros(&self) -> u64 {
        (**self).now_micros()
    }
}
