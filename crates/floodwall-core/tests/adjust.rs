//! Charging and refunding after the fact (`StoreExt::adjust`): exact in the memory store under
//! concurrency, and passed on rightly by every combinator in front of a store.

mod common;
use common::Now;

use std::sync::Arc;
use std::time::Duration;

use floodwall_core::Source;
use floodwall_core::resilience::{Breaker, FailMode, Fallback};
use floodwall_core::store::{Op, Reply};
use floodwall_core::{
    Adjustment, Algorithm, Decision, DenyCache, DynStore, Error, LocalVerdicts, ManualClock,
    MemoryStore, Policy, Store, StoreExt,
};

const T0: u64 = 1_700_006_400_000_000;

fn memory() -> (MemoryStore<ManualClock>, ManualClock) {
    let clock = ManualClock::new(T0);
    (MemoryStore::builder().clock(clock.clone()).build(), clock)
}

/// Every algorithm at 1000 per hour: with the clock stopped nothing comes back.
fn every_policy() -> Vec<Policy> {
    Algorithm::all()
        .into_iter()
        .map(|alg| Policy::new("p", alg, "1000/h".parse().unwrap()).unwrap())
        .collect()
}

/// A store that is down for everything.
struct Down;

impl Store for Down {
    async fn call(&self, _: Op<'_>) -> Result<Reply, Error> {
        Err(Error::unavailable("down"))
    }
}

/// A store that keeps no spend of its own to change.
struct Plain;

impl Store for Plain {
    async fn call(&self, op: Op<'_>) -> Result<Reply, Error> {
        match op {
            Op::Check { policy, .. } => {
                let limit = policy.limit();
                Ok(Reply::Decision(Decision::new(
                    true,
                    limit,
                    limit,
                    Duration::ZERO,
                    Duration::ZERO,
                )))
            }
            Op::Reset { .. } => Ok(Reply::Done),
            other => Err(other.unsupported()),
        }
    }
}

#[test]
fn concurrent_charges_and_refunds_add_up_exactly() {
    const THREADS: u64 = 8;
    const ROUNDS: u64 = 50;
    for policy in every_policy() {
        let (store, _) = memory();
        std::thread::scope(|s| {
            for _ in 0..THREADS {
                s.spawn(|| {
                    for _ in 0..ROUNDS {
                        assert!(
                            store
                                .check_now(b"k", &policy, 2)
                                .unwrap()
                                .unwrap()
                                .is_allowed()
                        );
                        store
                            .adjust(b"k", &policy, Adjustment::Refund(1))
                            .now()
                            .unwrap();
                    }
                });
            }
        });
        // 2 spent and 1 given back, 400 times, however the threads interleaved.
        let left = store
            .check_now(b"k", &policy, 0)
            .unwrap()
            .unwrap()
            .remaining;
        assert_eq!(left, 1000 - THREADS * ROUNDS, "{policy:?}");
        std::thread::scope(|s| {
            for _ in 0..THREADS {
                s.spawn(|| {
                    for _ in 0..ROUNDS {
                        store
                            .adjust(b"k", &policy, Adjustment::Charge(1))
                            .now()
                            .unwrap();
                    }
                });
            }
        });
        let left = store
            .check_now(b"k", &policy, 0)
            .unwrap()
            .unwrap()
            .remaining;
        assert_eq!(left, 1000 - 2 * THREADS * ROUNDS, "{policy:?}");
    }
}

#[test]
fn a_charge_past_the_limit_is_debt_paid_off_over_time() {
    let (store, clock) = memory();
    // 10 tokens a second; an LLM answer used 15.
    let policy = Policy::gcra("tokens", "10/s".parse().unwrap()).unwrap();
    assert!(
        store
            .check_now(b"k", &policy, 1)
            .unwrap()
            .unwrap()
            .is_allowed()
    );
    store
        .adjust(b"k", &policy, Adjustment::Charge(15))
        .now()
        .unwrap();
    let refused = store.check_now(b"k", &policy, 1).unwrap().unwrap();
    assert!(!refused.is_allowed());
    // 16 spent of 10: 7 must come back before one more fits, 700 ms.
    assert_eq!(refused.retry_after, Some(Duration::from_millis(700)));
    clock.advance(Duration::from_millis(699));
    assert!(
        !store
            .check_now(b"k", &policy, 1)
            .unwrap()
            .unwrap()
            .is_allowed()
    );
    clock.advance(Duration::from_millis(1));
    assert!(
        store
            .check_now(b"k", &policy, 1)
            .unwrap()
            .unwrap()
            .is_allowed()
    );
}

#[test]
fn a_refund_on_an_unknown_key_creates_nothing() {
    let (store, _) = memory();
    for policy in every_policy() {
        store
            .adjust(b"nobody", &policy, Adjustment::Refund(5))
            .now()
            .unwrap();
    }
    assert!(store.is_empty());
}

#[tokio::test]
async fn a_refund_through_the_deny_cache_forgets_its_cached_refusal() {
    let (memory, clock) = memory();
    let store = DenyCache::builder()
        .clock(clock.clone())
        .build(memory.clone());
    let policy = Policy::gcra("login", "2/min".parse().unwrap()).unwrap();
    for _ in 0..2 {
        assert!(store.check(b"k", &policy, 1).await.unwrap().is_allowed());
    }
    assert!(!store.check(b"k", &policy, 1).await.unwrap().is_allowed());
    // Cached: the next refusal comes from the cache, without the store.
    assert!(!store.check(b"k", &policy, 1).await.unwrap().is_allowed());
    assert!(store.stats().denied_locally >= 1);
    store
        .adjust(b"k", &policy, Adjustment::Refund(1))
        .await
        .unwrap();
    // The refusal cached for 30 s no longer holds: the store admits.
    assert!(store.check(b"k", &policy, 1).await.unwrap().is_allowed());
    assert!(!store.check(b"k", &policy, 1).await.unwrap().is_allowed());
}

#[tokio::test]
async fn every_combinator_passes_adjustments_on() {
    let policy = Policy::gcra("p", "3/min".parse().unwrap()).unwrap();
    let (memory, clock) = memory();
    let verdicts = LocalVerdicts::builder()
        .clock(clock.clone())
        .build(memory.clone())
        .unwrap();
    let stores: Vec<Arc<dyn DynStore>> = vec![
        Arc::new(memory.clone()),
        Arc::new(Breaker::new(memory.clone())),
        Arc::new(DenyCache::builder().clock(clock).build(memory.clone())),
        Arc::new(verdicts),
        Arc::new(Fallback::fail_closed(memory.clone())),
    ];
    for (i, store) in stores.iter().enumerate() {
        let key = [i as u8];
        store
            .adjust(&key, &policy, Adjustment::Charge(3))
            .await
            .unwrap();
        assert!(
            !store.check(&key, &policy, 1).await.unwrap().is_allowed(),
            "{i}"
        );
        store
            .adjust(&key, &policy, Adjustment::Refund(1))
            .await
            .unwrap();
        assert!(
            store.check(&key, &policy, 1).await.unwrap().is_allowed(),
            "{i}"
        );
    }
}

#[tokio::test]
async fn a_store_that_cannot_adjust_says_so_and_an_outage_falls_back_locally() {
    let policy = Policy::gcra("p", "4/min".parse().unwrap()).unwrap();
    let err = Plain
        .adjust(b"k", &policy, Adjustment::Charge(1))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Unsupported { .. }));
    // Failing closed passes the outage on; a local mode charges its share instead.
    let closed = Fallback::fail_closed(Down);
    let err = closed
        .adjust(b"k", &policy, Adjustment::Charge(1))
        .await
        .unwrap_err();
    assert!(err.is_store_failure());
    let (local, _) = memory();
    let store = Fallback::with_local_store(Down, FailMode::local(2), local.clone());
    // The share is 2/min: one charge of 2 uses it up.
    store
        .adjust(b"k", &policy, Adjustment::Charge(2))
        .await
        .unwrap();
    let d = store.check(b"k", &policy, 1).await.unwrap();
    assert!(!d.is_allowed() && d.source == Source::Fallback);
}
