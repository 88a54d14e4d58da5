//! The breaker and the fallback, driven by a manual clock over a store whose health the
//! test switches: no sleeps, no runtime (their futures are ready at once, or never).

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use floodwall_core::resilience::{Breaker, BreakerState, FailMode, Fallback};
use floodwall_core::{Decision, DenyCache, Error, ManualClock, MemoryStore, Policy, Store};

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
}

impl Flaky {
    fn new(clock: &ManualClock) -> Self {
        Self {
            memory: MemoryStore::builder().clock(clock.clone()).build(),
            health: Arc::new(AtomicU8::new(Health::Up as u8)),
            calls: Arc::new(AtomicUsize::new(0)),
            sync: false,
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
            h if h == Health::Up as u8 => Some(self.memory.check_sync(key, policy, cost)),
            h if h == Health::Down as u8 => Some(Err(Error::unavailable("connection refused"))),
            h if h == Health::Slow as u8 => Some(Err(Error::Timeout)),
            h if h == Health::Broken as u8 => Some(Err(Error::backend("WRONGTYPE"))),
            _ => None,
        }
    }
}

impl Store for Flaky {
    fn check(
        &self,
        key: &[u8],
        policy: &Policy,
        cost: u64,
    ) -> impl Future<Output = Result<Decision, Error>> + Send {
        let answer = self.answer(key, policy, cost);
        std::future::poll_fn(move |_| match &answer {
            Some(Ok(d)) => Poll::Ready(Ok(*d)),
            Some(Err(e)) => Poll::Ready(Err(copy(e))),
            None => Poll::Pending,
        })
    }

    fn reset(&self, key: &[u8], policy: &Policy) -> impl Future<Output = Result<(), Error>> + Send {
        self.memory.reset_sync(key, policy);
        std::future::ready(Ok(()))
    }

    fn check_now(&self, key: &[u8], policy: &Policy, cost: u64) -> Option<Result<Decision, Error>> {
        if !self.sync {
            return None;
        }
        self.answer(key, policy, cost)
    }
}

fn copy(e: &Error) -> Error {
    match e {
        Error::Timeout => Error::Timeout,
        Error::Unavailable { .. } => Error::unavailable(e.to_string()),
        _ => Error::backend(e.to_string()),
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
    assert!(check(&breaker, b"k", &p).unwrap().allowed);
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
    assert!(check(&breaker, b"k", &p).unwrap().allowed);
    assert_eq!(breaker.state(), BreakerState::Closed);
    assert!(check(&breaker, b"k", &p).unwrap().allowed);
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
    assert!(check(&breaker, b"k", &p).unwrap().allowed);
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
    assert!(check(&breaker, b"k", &p).unwrap().allowed);
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
    assert!(check(&breaker, b"k", &p).unwrap().allowed);
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
    assert!(breaker.check_now(b"k", &p, 1).unwrap().unwrap().allowed);
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
    assert!(check(&breaker, b"k", &p).unwrap().allowed);
    assert!(breaker.check_now(b"k", &p, 1).unwrap().unwrap().allowed);

    // Over a store that cannot answer synchronously, neither can the breaker while closed.
    let (_, _, deferring) = setup();
    assert!(deferring.check_now(b"k", &p, 1).is_none());
}

#[test]
fn fail_open_allows_with_the_policy_limit_and_counts() {
    let (_, flaky, _) = setup();
    let fallback = Fallback::new(flaky.clone(), FailMode::Open);
    let p = policy("2/min");
    flaky.set(Health::Down);
    for _ in 0..5 {
        let d = check(&fallback, b"k", &p).unwrap();
        assert!(d.allowed);
        assert_eq!((d.limit, d.remaining, d.retry_after), (2, 2, None));
        assert_eq!(d.reset_after, Duration::ZERO);
        assert!(d.fallback);
    }
    assert!(fallback.is_engaged());
    assert_eq!(fallback.stats().failed_open, 5);
    // A cost that can never pass is still refused.
    assert!(
        now(fallback.check(b"k", &p, 3))
            .unwrap()
            .unwrap_err()
            .is_cost_too_high()
    );
    flaky.set(Health::Up);
    let d = check(&fallback, b"k", &p).unwrap();
    assert!(d.allowed && !d.fallback);
    assert!(!fallback.is_engaged());
}

#[test]
fn fail_closed_passes_the_error_on_and_counts() {
    let (_, flaky, _) = setup();
    let fallback = Fallback::fail_closed(flaky.clone());
    let p = policy("2/min");
    flaky.set(Health::Slow);
    assert!(check(&fallback, b"k", &p).unwrap_err().is_timeout());
    assert_eq!(fallback.stats().failed_closed, 1);
    flaky.set(Health::Up);
    assert!(check(&fallback, b"k", &p).unwrap().allowed);
    assert_eq!(fallback.stats().failed_closed, 1);
}

#[test]
fn local_fallback_enforces_a_per_node_share() {
    let (clock, flaky, _) = setup();
    let local = MemoryStore::builder().clock(clock.clone()).build();
    let fallback = Fallback::with_local_store(flaky.clone(), FailMode::local(3), local);
    let p = policy("30/min");
    flaky.set(Health::Down);
    let admitted = (0..30)
        .filter(|_| check(&fallback, b"k", &p).unwrap().allowed)
        .count();
    assert_eq!(admitted, 10, "a third of the quota on this node");
    let denied = check(&fallback, b"k", &p).unwrap();
    assert_eq!(denied.limit, 10);
    assert_eq!(denied.retry_after, Some(Duration::from_secs(6)));
    // Another key has its own share.
    assert!(check(&fallback, b"other", &p).unwrap().allowed);
    // A cost that fits the fleet's quota but not the share is charged as the whole share.
    let big = now(fallback.check(b"big", &p, 25)).unwrap().unwrap();
    assert!(big.allowed);
    assert_eq!(big.remaining, 0);
    assert!(
        now(fallback.check(b"big", &p, 31))
            .unwrap()
            .unwrap_err()
            .is_cost_too_high()
    );
    assert_eq!(fallback.stats().decided_locally, 33);
    assert_eq!(fallback.local_store().len(), 3);

    // Back to the shared store, whose state knows nothing of the local decisions.
    flaky.set(Health::Up);
    let d = check(&fallback, b"k", &p).unwrap();
    assert_eq!((d.allowed, d.limit, d.remaining), (true, 30, 29));
}

#[test]
fn check_now_of_a_fallback_answers_whenever_its_store_does() {
    let clock = ManualClock::new(T0);
    let mut flaky = Flaky::new(&clock);
    flaky.sync = true;
    let fallback = Fallback::local(flaky.clone(), 2);
    let p = policy("10/s");
    assert!(fallback.check_now(b"k", &p, 1).unwrap().unwrap().allowed);
    flaky.set(Health::Down);
    let d = fallback.check_now(b"k", &p, 1).unwrap().unwrap();
    assert_eq!((d.allowed, d.limit), (true, 5));
    let (_, _, deferring) = setup();
    assert!(
        Fallback::fail_open(deferring)
            .check_now(b"k", &p, 1)
            .is_none()
    );
}

#[test]
fn local_fallback_over_a_breaker_recovers_within_a_probe_interval() {
    let (clock, flaky, breaker) = setup();
    let store = Fallback::with_local_store(
        breaker.clone(),
        FailMode::local(4),
        MemoryStore::builder().clock(clock.clone()).build(),
    );
    let p = policy("40/s");
    flaky.set(Health::Down);
    for i in 0..1_000u32 {
        let d = check(&store, &i.to_be_bytes(), &p).unwrap();
        assert_eq!((d.allowed, d.limit), (true, 10));
    }
    assert_eq!(
        flaky.calls(),
        3,
        "three failures opened the breaker; then no more calls"
    );
    flaky.set(Health::Up);
    // Still local until the probe time...
    assert_eq!(check(&store, b"k", &p).unwrap().limit, 10);
    clock.advance(Duration::from_millis(500));
    // ... then the first caller's probe succeeds and decisions are shared again.
    assert_eq!(check(&store, b"k", &p).unwrap().limit, 40);
    assert!(!store.is_engaged());
    assert_eq!(breaker.state(), BreakerState::Closed);
}

/// Records `tracing` events by thread, level and message. Installed once as the global
/// subscriber of this test binary: a subscriber scoped to one test can miss events when
/// another test's thread registers a callsite while it is being installed.
#[derive(Default)]
struct Events(Mutex<Vec<(std::thread::ThreadId, tracing::Level, String)>>);

struct Message<'a>(&'a mut String);

impl tracing::field::Visit for Message<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            *self.0 = format!("{value:?}");
        }
    }
}

impl tracing::Subscriber for &'static Events {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        let mut message = String::new();
        event.record(&mut Message(&mut message));
        let level = *event.metadata().level();
        let thread = std::thread::current().id();
        self.0.lock().unwrap().push((thread, level, message));
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

/// The events this thread logged while running `f`.
fn events_of(f: impl FnOnce()) -> Vec<(tracing::Level, String)> {
    static EVENTS: std::sync::OnceLock<&'static Events> = std::sync::OnceLock::new();
    let events = *EVENTS.get_or_init(|| {
        let events: &'static Events = Box::leak(Box::default());
        tracing::subscriber::set_global_default(events).expect("the only global subscriber");
        events
    });
    let thread = std::thread::current().id();
    f();
    let all = events.0.lock().unwrap();
    all.iter()
        .filter(|(t, _, _)| *t == thread)
        .map(|(_, l, m)| (*l, m.clone()))
        .collect()
}

#[test]
fn each_transition_is_logged_once_not_per_request() {
    let (clock, flaky, breaker) = setup();
    let store = Fallback::fail_open(breaker);
    let p = policy("100/s");
    let events = events_of(|| {
        flaky.set(Health::Down);
        for _ in 0..500 {
            check(&store, b"k", &p).unwrap();
        }
        for _ in 0..3 {
            clock.advance(Duration::from_millis(500));
            for _ in 0..100 {
                check(&store, b"k", &p).unwrap();
            }
        }
        flaky.set(Health::Up);
        clock.advance(Duration::from_millis(500));
        for _ in 0..100 {
            check(&store, b"k", &p).unwrap();
        }
    });
    let count = |level: tracing::Level, text: &str| {
        events
            .iter()
            .filter(|(l, m)| *l == level && m.contains(text))
            .count()
    };
    assert_eq!(count(tracing::Level::WARN, "circuit open"), 1, "{events:?}");
    assert_eq!(
        count(tracing::Level::WARN, "fallback engaged"),
        1,
        "{events:?}"
    );
    assert_eq!(
        count(tracing::Level::INFO, "circuit closed"),
        1,
        "{events:?}"
    );
    assert_eq!(
        count(tracing::Level::INFO, "fallback disengaged"),
        1,
        "{events:?}"
    );
    assert_eq!(
        count(tracing::Level::DEBUG, "half-open"),
        4,
        "one per probe"
    );
    let loud = events
        .iter()
        .filter(|(l, _)| *l <= tracing::Level::INFO)
        .count();
    assert_eq!(loud, 4, "{events:?}");
}

#[cfg(feature = "tokio")]
#[tokio::test(start_paused = true)]
async fn a_timeout_bounds_a_store_that_never_answers() {
    use floodwall_core::resilience::Timeout;
    let (_, flaky, _) = setup();
    let store = Timeout::new(flaky.clone(), Duration::from_millis(200));
    let p = policy("1/s");
    assert!(store.check(b"k", &p, 1).await.unwrap().allowed);
    flaky.set(Health::Hung);
    let started = tokio::time::Instant::now();
    assert!(store.check(b"k", &p, 1).await.unwrap_err().is_timeout());
    assert_eq!(started.elapsed(), Duration::from_millis(200));
    assert_eq!(Timeout::with_default(()).timeout(), Duration::from_secs(1));
}

#[test]
fn a_deny_cache_in_front_of_a_local_fallback_does_not_outlive_the_outage() {
    let (clock, flaky, _) = setup();
    let local = MemoryStore::builder().clock(clock.clone()).build();
    let fallback = Fallback::with_local_store(flaky.clone(), FailMode::local(3), local);
    let cache = DenyCache::builder()
        .clock(clock.clone())
        .build(fallback.clone());
    let p = policy("30/min");
    // The store is down: the fallback decides with this node's share, 10 of the 30.
    flaky.set(Health::Down);
    let admitted = (0..10)
        .filter(|_| check(&cache, b"k", &p).unwrap().allowed)
        .count();
    assert_eq!(admitted, 10);
    let refused = check(&cache, b"k", &p).unwrap();
    assert_eq!((refused.allowed, refused.limit), (false, 10));
    assert!(refused.fallback, "an answer in the store's stead says so");
    assert_eq!(fallback.stats().decided_locally, 11);
    // The store is back a second later, knowing nothing of the share's decisions: the next
    // check is the store's to decide, and it admits (the share's refusal said 6 s).
    flaky.set(Health::Up);
    clock.advance(Duration::from_secs(1));
    let calls = flaky.calls();
    let d = check(&cache, b"k", &p).unwrap();
    assert_eq!(flaky.calls(), calls + 1, "the store was asked");
    assert_eq!((d.allowed, d.limit, d.remaining), (true, 30, 29));
    assert!(!d.fallback);
    assert_eq!(cache.stats().denied_locally, 0);
}
