//! In-flight limits in the memory store, and through a breaker and a fallback: exact under
//! contention, nothing left behind, failures answered per the fail mode.

mod common;
use common::Now;

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Duration;

use floodwall_core::Store;
use floodwall_core::resilience::{Breaker, FailMode, Fallback};
use floodwall_core::store::{Op, Reply};
use floodwall_core::{
    Acquired, ConcurrencyLimit, Error, ManualClock, MemoryStore, Permit, StoreExt,
};

/// The largest value `current` reaches while permits are held.
fn note_peak(current: &AtomicU64, peak: &AtomicU64) -> u64 {
    let now = current.fetch_add(1, Ordering::SeqCst) + 1;
    peak.fetch_max(now, Ordering::SeqCst);
    now
}

#[test]
fn exactly_n_in_flight_among_256_threads_on_one_key() {
    const THREADS: usize = 256;
    const N: u64 = 7;
    let store = MemoryStore::new();
    let limit = ConcurrencyLimit::new("exact", N).unwrap();
    let start = Arc::new(Barrier::new(THREADS));
    let attempted = Arc::new(AtomicUsize::new(0));
    let (current, peak) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let threads: Vec<_> = (0..THREADS)
        .map(|_| {
            let (store, limit, start) = (store.clone(), limit.clone(), Arc::clone(&start));
            let (attempted, current, peak) = (
                Arc::clone(&attempted),
                Arc::clone(&current),
                Arc::clone(&peak),
            );
            std::thread::spawn(move || {
                start.wait();
                let acquired = store.acquire(b"hot", &limit).now().unwrap();
                attempted.fetch_add(1, Ordering::SeqCst);
                let Acquired::Granted(permit) = acquired else {
                    return false;
                };
                note_peak(&current, &peak);
                // Held until every thread has asked: the holders overlap, so the peak is
                // what the store let in at once, not an accident of scheduling.
                while attempted.load(Ordering::SeqCst) < THREADS {
                    std::thread::yield_now();
                }
                current.fetch_sub(1, Ordering::SeqCst);
                drop(permit);
                true
            })
        })
        .collect();
    let granted = threads
        .into_iter()
        .map(|t| t.join().unwrap())
        .filter(|&g| g)
        .count();
    assert_eq!(peak.load(Ordering::SeqCst), N, "peak in flight");
    assert_eq!(granted as u64, N, "every other thread was refused");
    assert_eq!(
        store.in_flight_keys(),
        0,
        "the key left with its last permit"
    );
    // And the slots are all free again.
    let again: Vec<Permit> = (0..N)
        .map(|_| {
            store
                .acquire(b"hot", &limit)
                .now()
                .unwrap()
                .permit()
                .unwrap()
        })
        .collect();
    assert_eq!(again.last().unwrap().in_flight(), N);
}

#[test]
fn churn_on_many_keys_leaves_nothing_behind() {
    let store = MemoryStore::builder().max_keys(64).build();
    let limit = ConcurrencyLimit::new("churn", 2).unwrap();
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let (store, limit) = (store.clone(), limit.clone());
            std::thread::spawn(move || {
                for i in 0..20_000u32 {
                    let key = (i % 16 + t * 16).to_be_bytes();
                    if let Acquired::Granted(p) = store.acquire(&key, &limit).now().unwrap() {
                        assert!(p.in_flight() <= 2);
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(store.in_flight_keys(), 0);
}

/// A concurrency store that cannot be reached.
struct Down;

impl Store for Down {
    async fn call(&self, op: Op<'_>) -> Result<Reply, Error> {
        match op {
            Op::Acquire { .. } => Err(Error::Timeout),
            other => Err(other.unsupported()),
        }
    }
}

#[tokio::test]
async fn a_fallback_answers_for_a_failing_store_per_its_mode() {
    let limit = ConcurrencyLimit::new("fb", 6).unwrap();
    // Open: a permit that holds nothing, as many as asked.
    let open = Fallback::new(Down, FailMode::Open);
    let permits: Vec<Permit> = (0..10)
        .map(|_| {
            futures_block(open.acquire(b"k", &limit))
                .unwrap()
                .permit()
                .unwrap()
        })
        .collect();
    assert!(permits.iter().all(Permit::is_fallback));
    assert_eq!(open.stats().failed_open, 10);
    // Closed: the error.
    let closed = Fallback::new(Down, FailMode::Closed);
    assert!(closed.acquire(b"k", &limit).await.unwrap_err().is_timeout());
    // Local on 3 nodes: this node's share, 6 / 3, counted in its own memory.
    let local = Fallback::local(Down, 3);
    let a = local.acquire(b"k", &limit).await.unwrap().permit().unwrap();
    let b = local.acquire(b"k", &limit).await.unwrap().permit().unwrap();
    assert!(a.is_fallback() && b.is_fallback());
    assert_eq!((b.in_flight(), b.limit()), (2, 2));
    let Acquired::Full(full) = local.acquire(b"k", &limit).await.unwrap() else {
        panic!("the share is 2");
    };
    assert_eq!((full.in_flight, full.limit), (2, 2));
    drop(a);
    assert!(local.acquire(b"k", &limit).await.unwrap().is_granted());
    assert_eq!(local.local_store().in_flight_keys(), 1);
}

#[tokio::test]
async fn a_breaker_opens_on_a_failing_concurrency_store() {
    let clock = ManualClock::new(1_000_000);
    let breaker = Breaker::builder()
        .failure_threshold(2)
        .probe_interval(Duration::from_secs(1))
        .clock(clock.clone())
        .build(Down);
    let limit = ConcurrencyLimit::new("br", 1).unwrap();
    assert!(
        breaker
            .acquire(b"k", &limit)
            .await
            .unwrap_err()
            .is_timeout()
    );
    assert!(
        breaker
            .acquire(b"k", &limit)
            .await
            .unwrap_err()
            .is_timeout()
    );
    // Open: failing fast, with no call, until the next probe.
    let err = breaker.acquire(b"k", &limit).await.unwrap_err();
    assert!(err.is_circuit_open(), "{err}");
    assert!(
        breaker
            .call_now(Op::Acquire {
                key: b"k",
                limit: &limit
            })
            .map(|r| r.and_then(Reply::into_acquired))
            .unwrap()
            .unwrap_err()
            .is_circuit_open()
    );
    clock.advance(Duration::from_secs(1));
    // Due: the probe goes to the store (which is still down).
    assert!(
        breaker
            .acquire(b"k", &limit)
            .await
            .unwrap_err()
            .is_timeout()
    );
    assert_eq!(breaker.stats().probes, 1);

    // Closed over the memory store, it answers without waiting, as the store does.
    let healthy = Breaker::new(MemoryStore::new());
    let held = healthy
        .call_now(Op::Acquire {
            key: b"k",
            limit: &limit,
        })
        .map(|r| r.and_then(Reply::into_acquired))
        .unwrap()
        .unwrap();
    assert!(held.is_granted());
    assert!(
        !healthy
            .call_now(Op::Acquire {
                key: b"k",
                limit: &limit
            })
            .map(|r| r.and_then(Reply::into_acquired))
            .unwrap()
            .unwrap()
            .is_granted()
    );
}

/// Polls a future that is ready at once (the fallback's answers need no waiting).
fn futures_block<F: std::future::Future>(f: F) -> F::Output {
    let mut f = std::pin::pin!(f);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match f.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(v) => v,
        std::task::Poll::Pending => panic!("not ready at once"),
    }
}
