//! Where stores get `now` from. Algorithms never read a clock: time is a parameter.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A source of the current time, in microseconds since the Unix epoch.
///
/// Redis's `TIME` speaks the same time. A clock may go backwards: every algorithm then
/// grants no more than the quota.
pub trait Clock: Send + Sync + 'static {
    /// Microseconds since the Unix epoch.
    fn now_micros(&self) -> u64;
}

/// The system's clock: a first wall-clock reading advanced by the CPU's timestamp counter
/// (through [`quanta`]), cheaper than a wall-clock read and never stepped back by NTP.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

struct Anchor {
    clock: quanta::Clock,
    raw: u64,
    wall_us: u64,
    /// Microseconds per raw tick, as a fraction of 2^64: one multiplication per reading,
    /// where quanta's nanoseconds and a division would take more on every check.
    us_per_tick: u64,
}

/// Ticks over which the conversion factor is measured (about 5 days at 2.6 GHz).
const SPAN_TICKS: u64 = 1 << 50;

impl Anchor {
    fn new() -> Self {
        let clock = quanta::Clock::new();
        let raw = clock.raw();
        let span_ns = clock.delta_as_nanos(0, SPAN_TICKS);
        // us_per_tick = span_ns / 1_000 / 2^50 × 2^64; saturated for a tick over 1 µs.
        let factor = (u128::from(span_ns) << 14) / 1_000;
        Self {
            clock,
            raw,
            wall_us: wall_micros(),
            us_per_tick: u64::try_from(factor).unwrap_or(u64::MAX),
        }
    }

    #[inline]
    fn now_micros(&self) -> u64 {
        // A counter read behind the anchor (another core's counter, slightly off) counts
        // as the anchor itself, as quanta's own deltas do.
        self.wall_us + self.ticks_to_micros(self.clock.raw().saturating_sub(self.raw))
    }

    /// Counter ticks to microseconds: one multiply by the precomputed 64.64 rate.
    #[inline]
    fn ticks_to_micros(&self, ticks: u64) -> u64 {
        ((u128::from(ticks) * u128::from(self.us_per_tick)) >> 64) as u64
    }
}

static ANCHOR: OnceLock<Anchor> = OnceLock::new();

fn wall_micros() -> u64 {
    // Before 1970 (a badly set clock) reads as 0 rather than panicking.
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

impl Clock for SystemClock {
    #[inline]
    fn now_micros(&self) -> u64 {
        ANCHOR.get_or_init(Anchor::new).now_micros()
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
        let by = crate::store::micros(by);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_system_clock_follows_the_wall_clock_and_never_steps_back() {
        let wall = wall_micros();
        let first = SystemClock.now_micros();
        // Anchored on the wall clock (possibly by an earlier test, a little while ago).
        assert!(first.abs_diff(wall) < 60_000_000, "{first} vs {wall}");
        let mut last = first;
        for _ in 0..100_000 {
            let now = SystemClock.now_micros();
            assert!(now >= last);
            last = now;
        }
        std::thread::sleep(Duration::from_millis(20));
        let elapsed = SystemClock.now_micros() - first;
        assert!((20_000..10_000_000).contains(&elapsed), "{elapsed}");
    }

    #[test]
    fn ticks_convert_as_quanta_converts_them() {
        let anchor = Anchor::new();
        for ticks in [0, 1, 999, 1 << 20, 1 << 32, 1 << 40, 1 << 48, SPAN_TICKS] {
            let ours = anchor.ticks_to_micros(ticks);
            let quanta = anchor.clock.delta_as_nanos(0, ticks) / 1_000;
            // Rounding differs by at most a microsecond, even days of ticks away.
            assert!(ours.abs_diff(quanta) <= 1, "{ticks}: {ours} vs {quanta}");
        }
    }
}
