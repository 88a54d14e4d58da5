//! The breaker and the fallback, driven by a manual clock over a store whose health the
//! test switches: no sleeps, no runtime (their futures are ready at once, or never).

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use floodwall_core::Source;
use floodwall_core::resilience::{Breaker, BreakerState, FailMode, Fallback};
use floodwall_core::store::{Op, Reply};
use floodwall_core::{
    Decision, DenyCache, Error, ManualClock, MemoryStore, Policy, Store, StoreExt,
};

#[path = "resilience/fallback.rs"]
mod fallback;
#[path = "resilience/fallback_ops.rs"]
mod fallback_ops;
#[path = "resilience/logging.rs"]
mod logging;

const T0: u64 = 1_700_006_400_000_000;

/// What the test store does on each call.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u8)]
enum Health {
    Up = 0,
    Down = 1,
    Slow = 2,
    Broken = 3,
    Hung = 4,
}

/// A memory store whose health the test switches, counting the calls that reach it.
#[derive(Clone)]
struct Flaky {
    memory: MemoryStore<ManualClock>,
    health: Arc<AtomicU8>,
    calls: Arc<AtomicUsize>,
    /// Whether `check_now` answers (a store without I/O) or defers to `check`.
    sync: bool,
    /// What the store's health is read with for operations other than a check.
    probe: Policy,
}

impl Flaky {
    fn new(clock: &ManualClock) -> Self {
        Self {
            memory: MemoryStore::builder().clock(clock.clone()).build(),
            health: Arc::new(AtomicU8::new(Health::Up as u8)),
            calls: Arc::new(AtomicUsize::new(0)),
            sync: false,
            probe: Policy::gcra("probe", "1/s".parse().unwrap()).unwrap(),
        }
    }

    fn set(&self, h: Health) {
        self.health.store(h as u8, Ordering::SeqCst);
    }

    fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    fn answer(&self, key: &[u8], policy: &Policy, cost: u64) -> Option<Result<Decision, Error>> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        match self.health.load(Ordering::SeqCst) {
            h if h == Health::Up as u8 => Some(self.memory.check_now(key, policy, cost).unwrap()),
            h if h == Health::Down as u8 => Some(Err(Error::unavailable("connection refused"))),
            h if h == Health::Slow as u8 => Some(Err(Error::Timeout)),
            h if h == Health::Broken as u8 => Some(Err(Error::backend("WRONGTYPE"))),
            _ => None,
        }
    }
}

impl Store for Flaky {
    fn call(&self, op: Op<'_>) -> impl Future<Output = Result<Reply, Error>> + Send {
        let mut answer = match op {
            Op::Check { key, policy, cost } => self
                .answer(key, policy, cost)
                .map(|r| r.map(Reply::Decision)),
            Op::Reset { .. } => self.memory.call_now(op),
            // Every other operation fails as a check would, or reaches the memory store.
            other => match self.answer(b"", &self.probe, 0) {
                Some(Ok(_)) => self.memory.call_now(other),
                failed => failed.map(|r| r.map(Reply::Decision)),
            },
        };
        // Ready at once with the answer, or pending for good without one.
        std::future::poll_fn(move |_| answer.take().map_or(Poll::Pending, Poll::Ready))
    }

    fn call_now(&self, op: Op<'_>) -> Option<Result<Reply, Error>> {
        match op {
            Op::Check { key, policy, cost } if self.sync => self
                .answer(key, policy, cost)
                .map(|r| r.map(Reply::Decision)),
            _ => None,
        }
    }
}

/// Polls once: these futures are ready at once or never.
fn now<F: Future>(f: F) -> Option<F::Output> {
    let mut f = pin!(f);
    match f.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(v) => Some(v),
        Poll::Pending => None,
    }
}

fn check<S: Store>(store: &S, key: &[u8], policy: &Policy) -> Result<Decision, Error> {
    now(store.check(key, policy, 1)).expect("a ready answer")
}

fn policy(quota: &str) -> Policy {
    Policy::gcra("p", quota.parse().unwrap()).unwrap()
}

fn setup() -> (ManualClock, Flaky, Breaker<Flaky, ManualClock>) {
    let clock = ManualClock::new(T0);
    let flaky = Flaky::new(&clock);
    let breaker = Breaker::builder()
        .failure_threshold(3)
        .probe_interval(Duration::from_millis(500))
        .clock(clock.clone())
        .build(flaky.clone());
    (clock, flaky, breaker)
}

#[test]
fn a_breaker_opens_after_consecutive_failures_and_then_spares_the_store() {
    let (clock, flaky, breaker) = setup();
    let p = policy("100/s");
    assert!(check(&breaker, b"k", &p).unwrap().is_allowed());
    flaky.set(Health::Down);
    for _ in 0..3 {
        assert!(check(&breaker, b"k", &p).unwrap_err().is_unavailable());
    }
    assert_eq!(breaker.state(), BreakerState::Open);
    let calls = flaky.calls();
    for _ in 0..100 {
        let err = check(&breaker, b"k", &p).unwrap_err();
        assert!(err.is_circuit_open() && err.is_store_failure(), "{err}");
        assert!(
            matches!(err, Error::CircuitOpen { retry_in } if retry_in == Duration::from_millis(500))
        );
    }
    assert_eq!(
        flaky.calls(),
        calls,
        "an open breaker does not call the store"
    );
    assert_eq!(breaker.stats().opened, 1);
    assert_eq!(breaker.stats().failed_fast, 100);

    // A probe per interval: exactly one call reaches the (still dead) store.
    clock.advance(Duration::from_millis(500));
    assert!(check(&breaker, b"k", &p).unwrap_err().is_unavailable());
    for _ in 0..10 {
        assert!(check(&breaker, b"k", &p).unwrap_err().is_circuit_open());
    }
    assert_eq!(flaky.calls(), calls + 1);
    assert_eq!(breaker.state(), BreakerState::Open);

    // Back: the next probe succeeds and closes it.
    flaky.set(Health::Up);
    clock.advance(Duration::from_millis(499));
    assert!(check(&breaker, b"k", &p).unwrap_err().is_circuit_open());
    clock.advance(Duration::from_millis(1));
    assert!(check(&breaker, b"k", &p).unwrap().is_allowed());
    assert_eq!(breaker.state(), BreakerState::Closed);
    assert!(check(&breaker, b"k", &p).unwrap().is_allowed());
    assert_eq!(breaker.stats().probes, 2);
}

#[test]
fn answers_reset_the_count_and_backend_errors_are_answers() {
    let (_clock, flaky, breaker) = setup();
    let p = policy("100/s");
    for _ in 0..10 {
        flaky.set(Health::Slow);
        assert!(check(&breaker, b"k", &p).unwrap_err().is_timeout());
        assert!(check(&breaker, b"k", &p).unwrap_err().is_timeout());
        flaky.set(Health::Broken);
        // A key of the wrong type: the store is alive, the error is the caller's to handle.
        assert!(matches!(
            check(&breaker, b"k", &p),
            Err(Error::Backend { .. })
        ));
    }
    assert_eq!(breaker.state(), BreakerState::Closed);
    // A cost that can never pass is not the store's fault either.
    flaky.set(Health::Down);
    for _ in 0..10 {
        assert!(
            now(breaker.check(b"k", &p, 1_000))
                .unwrap()
                .unwrap_err()
                .is_cost_too_high()
        );
    }
    assert_eq!(breaker.state(), BreakerState::Closed);
}

#[test]
fn calls_in_flight_are_bounded() {
    let clock = ManualClock::new(T0);
    let flaky = Flaky::new(&clock);
    let breaker = Breaker::builder()
        .max_in_flight(4)
        .clock(clock.clone())
        .build(flaky.clone());
    let p = policy("100/s");
    flaky.set(Health::Hung);
    let mut stuck: Vec<_> = (0..4)
        .map(|_| Box::pin(breaker.check(b"k", &p, 1)))
        .collect();
    for f in &mut stuck {
        assert!(now(f.as_mut()).is_none());
    }
    assert_eq!(breaker.in_flight(), 4);
    let err = check(&breaker, b"k", &p).unwrap_err();
    assert!(
        matches!(err, Error::Overloaded { max_in_flight: 4 }),
        "{err}"
    );
    assert!(err.is_overloaded() && err.is_store_failure());
    assert_eq!(
        flaky.calls(),
        4,
        "the overloaded call never reached the store"
    );
    // Cancelled calls free their slots; overload did not open the breaker.
    stuck.clear();
    assert_eq!(breaker.in_flight(), 0);
    flaky.set(Health::Up);
    assert!(check(&breaker, b"k", &p).unwrap().is_allowed());
    assert_eq!(breaker.stats().overloaded, 1);
    assert_eq!(breaker.state(), BreakerState::Closed);
}

#[test]
fn a_hung_or_cancelled_probe_does_not_wedge_the_breaker() {
    let (clock, flaky, breaker) = setup();
    let p = policy("100/s");
    flaky.set(Health::Down);
    for _ in 0..3 {
        let _ = check(&breaker, b"k", &p);
    }
    flaky.set(Health::Hung);
    clock.advance(Duration::from_millis(500));
    let mut probe = Box::pin(breaker.check(b"k", &p, 1));
    assert!(now(probe.as_mut()).is_none());
    assert_eq!(breaker.state(), BreakerState::HalfOpen);
    assert!(check(&breaker, b"k", &p).unwrap_err().is_circuit_open());
    // The hung probe still holds its slot, but the next interval lets another through.
    clock.advance(Duration::from_millis(500));
    flaky.set(Health::Up);
    assert!(check(&breaker, b"k", &p).unwrap().is_allowed());
    assert_eq!(breaker.state(), BreakerState::Closed);
    drop(probe);

    // A probe cancelled by its caller lets the next caller probe at once.
    flaky.set(Health::Down);
    for _ in 0..3 {
        let _ = check(&breaker, b"k", &p);
    }
    clock.advance(Duration::from_millis(500));
    flaky.set(Health::Hung);
    let mut probe = Box::pin(breaker.check(b"k", &p, 1));
    assert!(now(probe.as_mut()).is_none());
    drop(probe);
    flaky.set(Health::Up);
    assert!(check(&breaker, b"k", &p).unwrap().is_allowed());
}

#[test]
fn check_now_forwards_fails_fast_and_leaves_probes_to_check() {
    let clock = ManualClock::new(T0);
    let mut flaky = Flaky::new(&clock);
    flaky.sync = true;
    let breaker = Breaker::builder()
        .failure_threshold(2)
        .clock(clock.clone())
        .build(flaky.clone());
    let p = policy("100/s");
    assert!(
        breaker
            .check_now(b"k", &p, 1)
            .unwrap()
            .unwrap()
            .is_allowed()
    );
    flaky.set(Health::Down);
    for _ in 0..2 {
        assert!(
            breaker
                .check_now(b"k", &p, 1)
                .unwrap()
                .unwrap_err()
                .is_unavailable()
        );
    }
    assert!(
        breaker
            .check_now(b"k", &p, 1)
            .unwrap()
            .unwrap_err()
            .is_circuit_open()
    );
    clock.advance(Duration::from_millis(500));
    assert!(
        breaker.check_now(b"k", &p, 1).is_none(),
        "a due probe goes through check"
    );
    flaky.set(Health::Up);
    assert!(check(&breaker, b"k", &p).unwrap().is_allowed());
    assert!(
        breaker
            .check_now(b"k", &p, 1)
            .unwrap()
            .unwrap()
            .is_allowed()
    );

    // Over a store that cannot answer synchronously, neither can the breaker while closed.
    let (_, _, deferring) = setup();
    assert!(deferring.check_now(b"k", &p, 1).is_none());
}

#[cfg(feature = "tokio")]
#[tokio::test(start_paused = true)]
async fn a_timeout_bounds_a_store_that_never_answers() {
    use floodwall_core::resilience::Timeout;
    let (_, flaky, _) = setup();
    let store = Timeout::new(flaky.clone(), Duration::from_millis(200));
    let p = policy("1/s");
    assert!(store.check(b"k", &p, 1).await.unwrap().is_allowed());
    flaky.set(Health::Hung);
    let started = tokio::time::Instant::now();
    assert!(store.check(b"k", &p, 1).await.unwrap_err().is_timeout());
    assert_eq!(started.elapsed(), Duration::from_millis(200));
    assert_eq!(Timeout::with_default(()).timeout(), Duration::from_secs(1));
}
