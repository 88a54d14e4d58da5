//! A circuit breaker and in-flight bound around any store.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use crate::store::{Op, Reply, Store};
use crate::{Clock, Error, SystemClock};

/// Consecutive failures that open a breaker by default.
pub const DEFAULT_FAILURE_THRESHOLD: u32 = 5;

/// How often an open breaker lets one call through to the store, by default.
pub const DEFAULT_PROBE_INTERVAL: Duration = Duration::from_millis(500);

/// The most calls waiting on the store at once, by default: only a stalled store nears it.
pub const DEFAULT_MAX_IN_FLIGHT: usize = 1024;

/// Stops calling a store that keeps failing, and bounds the calls waiting on it.
///
/// After [`failure_threshold`](BreakerBuilder::failure_threshold) consecutive timeouts or
/// unreachable-store errors it opens: calls fail at once with [`Error::CircuitOpen`] but
/// for one probe per [`probe_interval`](BreakerBuilder::probe_interval). Past
/// [`max_in_flight`](BreakerBuilder::max_in_flight) calls waiting: [`Error::Overloaded`].
/// Clones share one state. In detail: the
/// [failures guide](crate::guide::failures#the-breaker-in-detail).
///
/// # Examples
///
/// ```
/// use floodwall_core::resilience::Breaker;
/// use floodwall_core::MemoryStore;
/// use std::time::Duration;
///
/// # let redis = MemoryStore::new();
/// let store = Breaker::builder()
///     .failure_threshold(3)
///     .probe_interval(Duration::from_millis(250))
///     .max_in_flight(256)
///     .build(redis);
/// # let _ = store;
/// ```
pub struct Breaker<S, C = SystemClock> {
    circuit: Arc<Circuit<S, C>>,
}

/// The guarded store and its circuit, shared by a breaker's clones.
struct Circuit<S, C> {
    store: S,
    clock: C,
    threshold: u32,
    probe_interval_us: u64,
    max_in_flight: usize,
    open: AtomicBool,
    failures: AtomicU32,
    /// While open: when the next probe may start (µs since the epoch).
    next_probe: AtomicU64,
    in_flight: AtomicUsize,
    probing: AtomicUsize,
    opened: AtomicU64,
    failed_fast: AtomicU64,
    probes: AtomicU64,
    overloaded: AtomicU64,
}

/// Configures a [`Breaker`]: thresholds, probe interval, in-flight bound, clock.
#[derive(Debug, Clone)]
pub struct BreakerBuilder<C = SystemClock> {
    threshold: u32,
    probe_interval: Duration,
    max_in_flight: usize,
    clock: C,
}

/// Where a [`Breaker`] stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BreakerState {
    /// Calls go to the store.
    Closed,
    /// Calls fail fast until the next probe.
    Open,
    /// Open, with a probe call in flight.
    HalfOpen,
}

/// What a [`Breaker`] has done since it was built, for metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct BreakerStats {
    /// Times it opened.
    pub opened: u64,
    /// Calls refused with [`Error::CircuitOpen`] without calling the store.
    pub failed_fast: u64,
    /// Probe calls let through while open.
    pub probes: u64,
    /// Calls refused with [`Error::Overloaded`].
    pub overloaded: u64,
}

impl<S> Breaker<S> {
    /// A breaker with the defaults (5 failures, 500 ms probes, 1024 in flight, system clock).
    pub fn new(store: S) -> Self {
        Breaker::builder().build(store)
    }
}

impl Breaker<()> {
    /// A builder, to change the defaults; [`BreakerBuilder::build`] takes the store.
    pub fn builder() -> BreakerBuilder {
        BreakerBuilder {
            threshold: DEFAULT_FAILURE_THRESHOLD,
            probe_interval: DEFAULT_PROBE_INTERVAL,
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
            clock: SystemClock,
        }
    }
}

impl<C> BreakerBuilder<C> {
    /// Consecutive failures that open the breaker (default 5, at least 1).
    pub fn failure_threshold(mut self, failures: u32) -> Self {
        self.threshold = failures.max(1);
        self
    }

    /// How often an open breaker probes the store (default 500 ms, at least 1 µs): the
    /// cost of a dead store, and the delay before decisions return to a recovered one.
    pub fn probe_interval(mut self, interval: Duration) -> Self {
        self.probe_interval = interval.max(Duration::from_micros(1));
        self
    }

    /// The most calls waiting on the store at once (default 1024, at least 1).
    pub fn max_in_flight(mut self, calls: usize) -> Self {
        self.max_in_flight = calls.max(1);
        self
    }

    /// The clock probe times are read from; a [`ManualClock`](crate::ManualClock) in tests.
    pub fn clock<C2: Clock>(self, clock: C2) -> BreakerBuilder<C2> {
        BreakerBuilder {
            threshold: self.threshold,
            probe_interval: self.probe_interval,
            max_in_flight: self.max_in_flight,
            clock,
        }
    }

    /// The breaker around `store`, closed.
    pub fn build<S>(self, store: S) -> Breaker<S, C> {
        Breaker {
            circuit: Arc::new(Circuit {
                store,
                clock: self.clock,
                threshold: self.threshold,
                probe_interval_us: crate::store::micros(self.probe_interval),
                max_in_flight: self.max_in_flight,
                open: AtomicBool::new(false),
                failures: AtomicU32::new(0),
                next_probe: AtomicU64::new(0),
                in_flight: AtomicUsize::new(0),
                probing: AtomicUsize::new(0),
                opened: AtomicU64::new(0),
                failed_fast: AtomicU64::new(0),
                probes: AtomicU64::new(0),
                overloaded: AtomicU64::new(0),
            }),
        }
    }
}

impl<S, C> Breaker<S, C> {
    /// The store it guards.
    pub fn get_ref(&self) -> &S {
        &self.circuit.store
    }

    /// Closed, open, or probing.
    pub fn state(&self) -> BreakerState {
        let s = &self.circuit;
        if !s.open.load(Ordering::Acquire) {
            BreakerState::Closed
        } else if s.probing.load(Ordering::Acquire) > 0 {
            BreakerState::HalfOpen
        } else {
            BreakerState::Open
        }
    }

    /// Calls waiting on the store now.
    pub fn in_flight(&self) -> usize {
        self.circuit.in_flight.load(Ordering::Acquire)
    }

    /// Counters since the breaker was built.
    pub fn stats(&self) -> BreakerStats {
        let s = &self.circuit;
        BreakerStats {
            opened: s.opened.load(Ordering::Relaxed),
            failed_fast: s.failed_fast.load(Ordering::Relaxed),
            probes: s.probes.load(Ordering::Relaxed),
            overloaded: s.overloaded.load(Ordering::Relaxed),
        }
    }
}

/// What a call's result says of the store's health.
enum Evidence {
    /// The store answered (a decision, or an error it replied with).
    Alive,
    /// The store timed out or could not be reached.
    Failed,
    /// Says nothing about the store (a cost that can never pass, an inner breaker's refusal).
    Neutral,
}

fn evidence<T>(result: &Result<T, Error>) -> Evidence {
    match result {
        Ok(_) => Evidence::Alive,
        Err(e) if e.is_timeout() || e.is_unavailable() => Evidence::Failed,
        Err(Error::Backend { .. }) => Evidence::Alive,
        Err(_) => Evidence::Neutral,
    }
}

impl<S, C: Clock> Circuit<S, C> {
    /// The error of a call an open breaker fails fast, counted; `next` is when it probes.
    fn refusal(&self, now: u64, next: u64) -> Error {
        self.failed_fast.fetch_add(1, Ordering::Relaxed);
        Error::CircuitOpen {
            retry_in: Duration::from_micros(next.saturating_sub(now)),
        }
    }

    /// Lets a call through, or refuses it (open and not the probe, or overloaded).
    fn admit(&self) -> Result<Permit<'_, S, C>, Error> {
        let max = self.max_in_flight;
        let taken = self
            .in_flight
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            });
        if taken.is_err() {
            self.overloaded.fetch_add(1, Ordering::Relaxed);
            return Err(Error::Overloaded { max_in_flight: max });
        }
        let mut permit = Permit {
            circuit: self,
            probe: false,
            finished: false,
        };
        if !self.open.load(Ordering::Acquire) {
            return Ok(permit);
        }
        let now = self.clock.now_micros();
        let next = self.next_probe.load(Ordering::Acquire);
        let won = now >= next
            && self
                .next_probe
                .compare_exchange(
                    next,
                    now.saturating_add(self.probe_interval_us),
                    Ordering::AcqRel,
                    Ordering::Acquire,
                )
                .is_ok();
        if !won {
            drop(permit);
            return Err(self.refusal(now, next));
        }
        self.probes.fetch_add(1, Ordering::Relaxed);
        self.probing.fetch_add(1, Ordering::AcqRel);
        tracing::debug!(target: "floodwall", "store circuit half-open: probing the store");
        permit.probe = true;
        Ok(permit)
    }

    /// Records what a call found.
    fn record(&self, evidence: Evidence, probe: bool) {
        match evidence {
            Evidence::Alive => {
                if self.failures.load(Ordering::Relaxed) != 0 {
                    self.failures.store(0, Ordering::Relaxed);
                }
                if self.open.load(Ordering::Relaxed) && self.open.swap(false, Ordering::AcqRel) {
                    tracing::info!(
                        target: "floodwall",
                        "store circuit closed: the store answers again"
                    );
                }
            }
            Evidence::Failed => {
                if self.open.load(Ordering::Acquire) {
                    if probe {
                        tracing::debug!(
                            target: "floodwall",
                            "store probe failed; circuit stays open"
                        );
                    }
                    return;
                }
                let failures = self.failures.fetch_add(1, Ordering::AcqRel) + 1;
                if failures >= self.threshold {
                    let now = self.clock.now_micros();
                    self.next_probe.store(
                        now.saturating_add(self.probe_interval_us),
                        Ordering::Release,
                    );
                    if !self.open.swap(true, Ordering::AcqRel) {
                        self.failures.store(0, Ordering::Relaxed);
                        self.opened.fetch_add(1, Ordering::Relaxed);
                        tracing::warn!(
                            target: "floodwall",
                            failures,
                            probe_interval_ms = self.probe_interval_us / 1000,
                            "store circuit open: not calling the store until a probe succeeds"
                        );
                    }
                }
            }
            // A probe that proved nothing lets the next caller probe at once.
            Evidence::Neutral if probe => {
                self.next_probe
                    .fetch_min(self.clock.now_micros(), Ordering::AcqRel);
            }
            Evidence::Neutral => {}
        }
    }
}

/// One admitted call: releases its in-flight slot when dropped, and a probe dropped before
/// it finished (its request was cancelled) lets the next caller probe at once.
struct Permit<'a, S, C: Clock> {
    circuit: &'a Circuit<S, C>,
    probe: bool,
    finished: bool,
}

impl<S, C: Clock> Permit<'_, S, C> {
    fn finish<T>(mut self, result: &Result<T, Error>) {
        self.finished = true;
        self.circuit.record(evidence(result), self.probe);
    }
}

impl<S, C: Clock> Drop for Permit<'_, S, C> {
    fn drop(&mut self) {
        self.circuit.in_flight.fetch_sub(1, Ordering::AcqRel);
        if self.probe {
            self.circuit.probing.fetch_sub(1, Ordering::AcqRel);
            if !self.finished {
                self.circuit.record(Evidence::Neutral, true);
            }
        }
    }
}

impl<S: Store, C: Clock> Store for Breaker<S, C> {
    /// Every operation is a call, failing fast while open (but for a probe): a cancel
    /// refused then leaves its slot spent, never admitting more than the quota.
    async fn call(&self, op: Op<'_>) -> Result<Reply, Error> {
        op.check_cost()?;
        let permit = self.circuit.admit()?;
        let result = self.circuit.store.call(op).await;
        permit.finish(&result);
        result
    }

    /// Fails fast while open, forwards while closed; leaves a due probe to `call`.
    fn call_now(&self, op: Op<'_>) -> Option<Result<Reply, Error>> {
        let s = &self.circuit;
        if let Err(e) = op.check_cost() {
            return Some(Err(e));
        }
        if s.open.load(Ordering::Acquire) {
            let now = s.clock.now_micros();
            let next = s.next_probe.load(Ordering::Acquire);
            return (now < next).then(|| Err(s.refusal(now, next)));
        }
        let result = s.store.call_now(op)?;
        s.record(evidence(&result), false);
        Some(result)
    }
}

impl<S, C> Clone for Breaker<S, C> {
    fn clone(&self) -> Self {
        Self {
            circuit: Arc::clone(&self.circuit),
        }
    }
}

impl<S: fmt::Debug, C> fmt::Debug for Breaker<S, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Breaker")
            .field("store", &self.circuit.store)
            .field("state", &self.state())
            .field("threshold", &self.circuit.threshold)
            .field(
                "probe_interval",
                &Duration::from_micros(self.circuit.probe_interval_us),
            )
            .field("max_in_flight", &self.circuit.max_in_flight)
            .finish()
    }
}
