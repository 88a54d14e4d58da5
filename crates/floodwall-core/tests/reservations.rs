//! Reservations (booking the next slot instead of refusing): exact in the memory store
//! under concurrency, and passed on rightly by every combinator in front of a store.

mod common;
use common::Now;

use std::collections::BTreeSet;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use floodwall_core::Source;
use floodwall_core::resilience::{Breaker, FailMode, Fallback};
use floodwall_core::store::{Op, Reply};
use floodwall_core::{
    Algorithm, Cancelled, DenyCache, DynStore, Error, LocalVerdicts, ManualClock, MemoryStore,
    Policy, Reservable, Reservation, Store, StoreExt,
};

const T0: u64 = 1_700_006_400_000_000;

fn memory() -> (MemoryStore<ManualClock>, ManualClock) {
    let clock = ManualClock::new(T0);
    (MemoryStore::builder().clock(clock.clone()).build(), clock)
}

fn paced(alg: Algorithm, quota: &str) -> Reservable {
    Policy::new("paced", alg, quota.parse().unwrap())
        .unwrap()
        .reservable()
        .unwrap()
}

/// Every algorithm that books, at 100/s with a burst of 1: slots 10 ms apart.
fn every_paced() -> [Reservable; 3] {
    [
        paced(Algorithm::Gcra, "100/s burst 1"),
        paced(Algorithm::TOKEN_BUCKET, "100/s burst 1"),
        paced(Algorithm::LeakyBucket, "100/s burst 1"),
    ]
}

/// A memory store that counts the calls reaching it.
#[derive(Clone)]
struct Counted {
    memory: MemoryStore<ManualClock>,
    calls: Arc<AtomicUsize>,
}

impl Store for Counted {
    fn call(&self, op: Op<'_>) -> impl Future<Output = Result<Reply, Error>> + Send {
        if !matches!(op, Op::Reset { .. }) {
            self.calls.fetch_add(1, Ordering::SeqCst);
        }
        self.memory.call(op)
    }
}

/// A store that can only check (and reset).
struct ChecksOnly(MemoryStore<ManualClock>);

impl Store for ChecksOnly {
    async fn call(&self, op: Op<'_>) -> Result<Reply, Error> {
        match op {
            Op::Check { .. } | Op::Reset { .. } => self.0.call(op).await,
            other => Err(other.unsupported()),
        }
    }
}

/// A store that is down.
struct Down;

impl Store for Down {
    async fn call(&self, _: Op<'_>) -> Result<Reply, Error> {
        Err(Error::unavailable("down"))
    }
}

#[test]
fn concurrent_bookings_take_each_slot_once() {
    const THREADS: usize = 8;
    const PER_THREAD: usize = 40;
    for policy in every_paced() {
        let (store, _clock) = memory();
        let max_wait = Duration::from_millis(500);
        let waits: Vec<Reservation> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..THREADS)
                .map(|_| {
                    s.spawn(|| {
                        (0..PER_THREAD)
                            .map(|_| store.reserve(b"hot", &policy, 1, max_wait).now().unwrap())
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            handles
                .into_iter()
                .flat_map(|h| h.join().unwrap())
                .collect()
        });
        let booked: Vec<_> = waits.iter().filter(|r| r.is_booked()).collect();
        let slots: BTreeSet<Duration> = booked.iter().map(|r| r.wait).collect();
        // One at once, then one every 10 ms up to the 500 ms bound: 51, each once.
        let name = policy.policy().algorithm();
        assert_eq!(booked.len(), 51, "{name}");
        let expected: BTreeSet<Duration> =
            (0..=50).map(|i| Duration::from_millis(10 * i)).collect();
        assert_eq!(slots, expected, "{name}");
        for refused in waits.iter().filter(|r| !r.is_booked()) {
            assert!(refused.decision.retry_after.unwrap() > max_wait, "{name}");
            assert_eq!(refused.ticket, None);
        }
    }
}

#[test]
fn a_cancelled_latest_booking_goes_to_the_next_request() {
    for policy in every_paced() {
        let (store, clock) = memory();
        let wait = Duration::from_secs(1);
        let name = policy.policy().algorithm();
        store.reserve(b"k", &policy, 1, wait).now().unwrap();
        let first = store.reserve(b"k", &policy, 1, wait).now().unwrap();
        let second = store.reserve(b"k", &policy, 1, wait).now().unwrap();
        assert_eq!(second.wait, Duration::from_millis(20), "{name}");
        // The first is no longer the latest: its slot stays spent.
        assert_eq!(
            store.cancel(b"k", &policy, &first).now().unwrap(),
            Cancelled::Spent
        );
        clock.advance(Duration::from_millis(1));
        assert_eq!(
            store.cancel(b"k", &policy, &second).now().unwrap(),
            Cancelled::Returned,
            "{name}"
        );
        let next = store.reserve(b"k", &policy, 1, wait).now().unwrap();
        assert_eq!(
            next.wait,
            Duration::from_millis(19),
            "{name}: the slot given back"
        );
        // A plain check sees the same: refused until the booked slots are past.
        let p = policy.policy();
        assert!(!store.check_now(b"k", p, 1).unwrap().unwrap().is_allowed());
        clock.advance(Duration::from_millis(19));
        assert!(
            !store.check_now(b"k", p, 1).unwrap().unwrap().is_allowed(),
            "{name}: booked"
        );
        clock.advance(Duration::from_millis(10));
        assert!(
            store.check_now(b"k", p, 1).unwrap().unwrap().is_allowed(),
            "{name}"
        );
    }
}

#[test]
fn a_reset_key_has_nothing_to_give_back() {
    let (store, _) = memory();
    let policy = paced(Algorithm::Gcra, "1/s");
    store
        .reserve(b"k", &policy, 1, Duration::ZERO)
        .now()
        .unwrap();
    let booked = store
        .reserve(b"k", &policy, 1, Duration::from_secs(2))
        .now()
        .unwrap();
    assert!(booked.is_booked());
    store.reset(b"k", policy.policy()).now().unwrap();
    assert_eq!(
        store.cancel(b"k", &policy, &booked).now().unwrap(),
        Cancelled::Spent
    );
}

#[tokio::test]
async fn a_store_that_cannot_book_says_so() {
    let (memory, _) = memory();
    let store = ChecksOnly(memory);
    let policy = paced(Algorithm::Gcra, "1/s");
    let err = store
        .reserve(b"k", &policy, 1, Duration::ZERO)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Unsupported { .. }), "{err}");
    assert!(!err.is_store_failure());
    let booked = Reservation::refused(store.check(b"k", policy.policy(), 1).await.unwrap());
    let err = store.cancel(b"k", &policy, &booked).await.unwrap_err();
    assert!(matches!(err, Error::Unsupported { .. }));
}

#[tokio::test]
async fn the_deny_cache_refuses_a_booking_only_beyond_its_wait() {
    let (memory, clock) = memory();
    let calls = Arc::new(AtomicUsize::new(0));
    let inner = Counted {
        memory,
        calls: Arc::clone(&calls),
    };
    let store = DenyCache::builder().clock(clock.clone()).build(inner);
    let policy = paced(Algorithm::Gcra, "10/s burst 1");
    let p = policy.policy();
    assert!(store.check(b"k", p, 1).await.unwrap().is_allowed());
    // Refused, and remembered: refused until 100 ms from now.
    assert!(!store.check(b"k", p, 1).await.unwrap().is_allowed());
    let before = calls.load(Ordering::SeqCst);
    // A reservation that may not wait that long is refused here, without the store.
    let short = store
        .reserve(b"k", &policy, 1, Duration::from_millis(99))
        .await
        .unwrap();
    assert!(!short.is_booked());
    assert_eq!(short.decision.retry_after, Some(Duration::from_millis(100)));
    assert_eq!(calls.load(Ordering::SeqCst), before);
    // One that may wait past the cached refusal is the store's to book: not refused.
    let long = store
        .reserve(b"k", &policy, 1, Duration::from_millis(100))
        .await
        .unwrap();
    assert!(long.is_booked());
    assert_eq!(long.wait, Duration::from_millis(100));
    assert_eq!(calls.load(Ordering::SeqCst), before + 1);
    // The store refuses the next one beyond 150 ms (its slot is at 200 ms), and the cache
    // learns it: the next such reservation is refused without the store.
    let refused = store
        .reserve(b"k", &policy, 1, Duration::from_millis(150))
        .await
        .unwrap();
    assert_eq!(
        refused.decision.retry_after,
        Some(Duration::from_millis(200))
    );
    let again = store
        .reserve(b"k", &policy, 1, Duration::from_millis(150))
        .await
        .unwrap();
    assert!(!again.is_booked());
    assert_eq!(calls.load(Ordering::SeqCst), before + 2);
    // Cancelling gives the slot back in the store and forgets the cached refusal, which
    // no longer holds: a check 100 ms on passes, as the store says.
    let cancelled = store.cancel(b"k", &policy, &long).await.unwrap();
    assert_eq!(cancelled, Cancelled::Returned);
    clock.advance(Duration::from_millis(100));
    assert!(store.check(b"k", p, 1).await.unwrap().is_allowed());
}

#[tokio::test]
async fn a_local_fallback_books_in_its_share_and_cancels_there() {
    let (local, _) = memory();
    let store = Fallback::with_local_store(Down, FailMode::local(2), local.clone());
    let policy = paced(Algorithm::Gcra, "20/s burst 2");
    let wait = Duration::from_secs(1);
    // The share is 10/s burst 1: the second booking waits 100 ms.
    let first = store.reserve(b"k", &policy, 1, wait).await.unwrap();
    let second = store.reserve(b"k", &policy, 1, wait).await.unwrap();
    assert!(
        first.decision.source == Source::Fallback && second.decision.source == Source::Fallback
    );
    assert_eq!(
        (first.wait, second.wait),
        (Duration::ZERO, Duration::from_millis(100))
    );
    assert_eq!(store.stats().decided_locally, 2);
    assert_eq!(
        store.cancel(b"k", &policy, &second).await.unwrap(),
        Cancelled::Returned
    );
    let third = store.reserve(b"k", &policy, 1, wait).await.unwrap();
    assert_eq!(third.wait, Duration::from_millis(100));

    // Failing open books nothing and lets the request go; failing closed passes the error.
    let open = Fallback::fail_open(Down);
    let r = open.reserve(b"k", &policy, 1, wait).await.unwrap();
    assert!(
        r.is_booked()
            && r.wait.is_zero()
            && r.decision.source == Source::Fallback
            && r.ticket.is_none()
    );
    let closed = Fallback::fail_closed(Down);
    assert!(
        closed
            .reserve(b"k", &policy, 1, wait)
            .await
            .unwrap_err()
            .is_unavailable()
    );
}

#[tokio::test]
async fn breakers_local_verdicts_and_dyn_stores_pass_bookings_on() {
    let policy = paced(Algorithm::TOKEN_BUCKET, "10/s burst 1");
    let wait = Duration::from_secs(1);
    let (memory, clock) = memory();
    let verdicts = LocalVerdicts::builder()
        .clock(clock.clone())
        .build(memory.clone())
        .unwrap();
    let stores: Vec<Arc<dyn DynStore>> = vec![
        Arc::new(memory.clone()),
        Arc::new(Breaker::new(memory.clone())),
        Arc::new(verdicts),
    ];
    for (i, store) in stores.iter().enumerate() {
        let key = [i as u8];
        store.reserve(&key, &policy, 1, wait).await.unwrap();
        let booked = store.reserve(&key, &policy, 1, wait).await.unwrap();
        assert_eq!(booked.wait, Duration::from_millis(100), "store {i}");
        // Booked in the one memory store behind them all.
        let seen = memory.check_now(&key, policy.policy(), 0).unwrap().unwrap();
        assert_eq!(seen.remaining, 0, "store {i}");
        assert_eq!(
            store.cancel(&key, &policy, &booked).await.unwrap(),
            Cancelled::Returned,
            "store {i}"
        );
    }
    // An open breaker fails a booking fast, as a check.
    let breaker = Breaker::builder().failure_threshold(1).build(Down);
    assert!(breaker.reserve(b"k", &policy, 1, wait).await.is_err());
    let err = breaker.reserve(b"k", &policy, 1, wait).await.unwrap_err();
    assert!(err.is_circuit_open(), "{err}");
}
