//! `StoreExt::check_all`: a request checked against several policies is recorded in all of
//! them or in none, however many threads check the key at once, in the memory store and
//! through the deny cache.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use floodwall_core::Source;
use floodwall_core::Store;
use floodwall_core::store::{Checks, Op, Reply};
use floodwall_core::{Algorithm, DenyCache, ManualClock, MemoryStore, Policy, Quota, StoreExt};

mod common;
use common::Now;
use common::now_or_never;

const T0: u64 = 1_700_000_000_000_000;
const THREADS: usize = 8;
const PER_THREAD: usize = 200;

fn policy(name: &str, algorithm: Algorithm, count: u64) -> Policy {
    Policy::new(name, algorithm, hourly(count)).unwrap()
}

fn hourly(count: u64) -> Quota {
    Quota::new(count, Duration::from_secs(3600)).unwrap()
}

/// Many threads check one key against a roomy first policy and a small second one (of
/// every pair of algorithms): the second admits its limit, and the first is charged for
/// exactly those, never for the requests the second refused.
#[test]
fn a_refusal_by_one_policy_charges_none_under_concurrency() {
    for first in Algorithm::all() {
        for second in Algorithm::all() {
            let store = MemoryStore::builder().clock(ManualClock::new(T0)).build();
            let roomy = policy("roomy", first, 10_000);
            let small = policy("small", second, 50);
            let policies = [roomy.clone(), small.clone()];
            let admitted = AtomicU64::new(0);
            let refused_by_small = AtomicU64::new(0);
            std::thread::scope(|s| {
                for _ in 0..THREADS {
                    s.spawn(|| {
                        for _ in 0..PER_THREAD {
                            let d = store.check_all(b"k", &policies, 1).now().unwrap();
                            let [Some(r), Some(m)] = d.as_slice() else {
                                panic!("one decision per policy: {d:?}")
                            };
                            if r.is_allowed() && m.is_allowed() {
                                admitted.fetch_add(1, Ordering::Relaxed);
                            } else {
                                assert!(r.is_allowed() && !m.is_allowed(), "{first:?}/{second:?}");
                                refused_by_small.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                    });
                }
            });
            let admitted = admitted.into_inner();
            assert_eq!(admitted, 50, "{first:?}/{second:?}");
            assert_eq!(
                refused_by_small.into_inner(),
                (THREADS * PER_THREAD) as u64 - 50
            );
            // The first policy's quota: spent by the admitted requests only.
            let peek = store.check_now(b"k", &roomy, 0).unwrap().unwrap();
            assert_eq!(peek.remaining, 10_000 - admitted, "{first:?}/{second:?}");
        }
    }
}

/// Checks of several policies and single checks of one of them, together on one key:
/// the quota is never exceeded, and the single checks see the shared state.
#[test]
fn single_checks_and_checks_of_all_share_one_exact_state() {
    let store = MemoryStore::builder().clock(ManualClock::new(T0)).build();
    let shared = Policy::gcra("shared", hourly(300)).unwrap();
    let other = Policy::sliding_log("other", hourly(10_000)).unwrap();
    let both = [other.clone(), shared.clone()];
    let admitted = AtomicU64::new(0);
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (store, both, shared, admitted) = (&store, &both, &shared, &admitted);
            s.spawn(move || {
                for _ in 0..PER_THREAD {
                    let allowed = if t % 2 == 0 {
                        let d = store.check_all(b"k", both, 1).now().unwrap();
                        d.iter().flatten().all(|d| d.is_allowed())
                    } else {
                        store
                            .check_now(b"k", shared, 1)
                            .unwrap()
                            .unwrap()
                            .is_allowed()
                    };
                    if allowed {
                        admitted.fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
        }
    });
    assert_eq!(admitted.into_inner(), 300);
    let other_left = store.check_now(b"k", &other, 0).unwrap().unwrap().remaining;
    let by_all = 10_000 - other_left;
    assert!(
        by_all <= 300,
        "the other policy charged only with the shared one"
    );
}

/// The same policy twice is two checks on one state, not a deadlock.
#[test]
fn one_policy_twice_is_charged_twice() {
    let store = MemoryStore::builder().clock(ManualClock::new(T0)).build();
    let p = Policy::gcra("p", hourly(3)).unwrap();
    let d = store
        .check_all(b"k", &[p.clone(), p.clone()], 1)
        .now()
        .unwrap();
    assert!(d.iter().flatten().all(|d| d.is_allowed()));
    assert_eq!(d[1].unwrap().remaining, 1);
    let d = store
        .check_all(b"k", &[p.clone(), p.clone()], 1)
        .now()
        .unwrap();
    assert!(d[0].unwrap().is_allowed() && !d[1].unwrap().is_allowed());
    assert_eq!(store.check_now(b"k", &p, 0).unwrap().unwrap().remaining, 1);
}

/// A cost one policy can never admit is an error, and charges no policy.
#[test]
fn a_cost_too_high_for_one_charges_none() {
    let store = MemoryStore::builder().clock(ManualClock::new(T0)).build();
    let big = Policy::token_bucket("big", hourly(100)).unwrap();
    let small = Policy::gcra("small", hourly(5)).unwrap();
    let err = store
        .check_all(b"k", &[big.clone(), small], 6)
        .now()
        .unwrap_err();
    assert!(err.is_cost_too_high());
    assert_eq!(
        store.check_now(b"k", &big, 0).unwrap().unwrap().remaining,
        100
    );
}

/// Through the deny cache: once the second policy is spent, its cached refusal refuses
/// the next checks without asking the store, and the first policy is never charged.
#[test]
fn a_cached_refusal_of_one_policy_refuses_all_without_the_store() {
    let clock = ManualClock::new(T0);
    let memory = MemoryStore::builder().clock(clock.clone()).build();
    let cache = DenyCache::builder()
        .clock(clock.clone())
        .build(Arc::new(memory.clone()));
    let roomy = Policy::gcra("roomy", hourly(100)).unwrap();
    let small = Policy::fixed_window("small", hourly(2)).unwrap();
    let both = [roomy.clone(), small];
    for _ in 0..2 {
        let d = now_or_never(cache.check_all(b"k", &both, 1)).unwrap();
        assert!(d.iter().flatten().all(|d| d.is_allowed()));
    }
    // The second admission spent the window: the cache knows the next is refused.
    let calls = cache.stats().store_calls;
    assert_eq!(calls, 2);
    for _ in 0..5 {
        let d = now_or_never(cache.check_all(b"k", &both, 1)).unwrap();
        // The first policy was not asked: its figures are the store's last answer's.
        assert_eq!(d[0].unwrap().remaining, 98);
        assert!(d[0].unwrap().is_allowed() && d[0].unwrap().source == Source::Cache);
        assert!(!d[1].unwrap().is_allowed());
    }
    assert_eq!(
        cache.stats().store_calls,
        calls,
        "refused without the store"
    );
    assert_eq!(
        memory
            .check_now(b"k", &roomy, 0)
            .unwrap()
            .unwrap()
            .remaining,
        98
    );
    // Through a `dyn` store too.
    let dynamic: Arc<dyn floodwall_core::DynStore> = Arc::new(cache);
    let d = dynamic
        .call_now(Op::CheckAll {
            checks: Checks::OneKey {
                key: b"k",
                policies: &both,
                cost: 1,
            },
        })
        .map(|r| r.and_then(Reply::into_decisions))
        .unwrap()
        .unwrap();
    assert!(!d[1].unwrap().is_allowed());
}

/// A refusal the cache answers repeats what the store said of every policy, brought to
/// the time it answers: the store's own refusal at that instant, but for a `remaining`
/// that time gave back since, so the headers built from them list the same policies.
#[test]
fn a_cached_refusal_answers_for_every_policy_as_the_store_would() {
    let clock = ManualClock::new(T0);
    let memory = MemoryStore::builder().clock(clock.clone()).build();
    let cache = DenyCache::builder()
        .max_refusal_hold(Duration::from_secs(60))
        .clock(clock.clone())
        .build(memory.clone());
    let roomy = Policy::gcra("roomy", hourly(100)).unwrap();
    let small = Policy::fixed_window("small", hourly(2)).unwrap();
    let both = [roomy, small];
    // Spent through another node: this cache knows nothing of the key.
    for _ in 0..2 {
        assert!(
            now_or_never(memory.check_all(b"k", &both, 1)).unwrap()[1]
                .unwrap()
                .is_allowed()
        );
    }
    let by_store = now_or_never(cache.check_all(b"k", &both, 1)).unwrap();
    assert!(by_store.iter().all(|d| d.unwrap().source != Source::Cache));
    assert!(!by_store[1].unwrap().is_allowed());
    let by_cache = now_or_never(cache.check_all(b"k", &both, 1)).unwrap();
    assert_eq!(cache.stats().store_calls, 1);
    assert!(by_cache.iter().all(|d| d.unwrap().source == Source::Cache));
    assert_eq!(by_cache, by_store);
    // Later, the durations ran down as the store's did.
    clock.advance(Duration::from_secs(10));
    let by_cache = now_or_never(cache.check_all(b"k", &both, 1)).unwrap();
    assert_eq!(cache.stats().store_calls, 1);
    assert_eq!(
        by_cache,
        now_or_never(memory.check_all(b"k", &both, 1)).unwrap()
    );
    // Past one interval of the GCRA policy (100/h) the store has a unit back: the cache
    // repeats `remaining` as the store's answer gave it, never more than the store's now,
    // and the rest as the store would answer.
    clock.advance(Duration::from_secs(3600 / 100));
    let by_cache = now_or_never(cache.check_all(b"k", &both, 1)).unwrap();
    let by_store = now_or_never(memory.check_all(b"k", &both, 1)).unwrap();
    assert_eq!(cache.stats().store_calls, 1);
    assert_eq!(by_cache[1], by_store[1]);
    let (cached, stored) = (by_cache[0].unwrap(), by_store[0].unwrap());
    assert!(
        cached.remaining <= stored.remaining,
        "{cached:?} {stored:?}"
    );
    assert_eq!(
        (cached.is_allowed(), cached.retry_after, cached.reset_after),
        (stored.is_allowed(), stored.retry_after, stored.reset_after)
    );
}

/// A policy the store refused for less time than the cached refusal of another lasts is
/// repeated until its own refusal ends, and not after: what the store would then say of
/// it is not known to the cache.
#[test]
fn a_repeated_refusal_ends_with_its_own_wait() {
    let clock = ManualClock::new(T0);
    let memory = MemoryStore::builder().clock(clock.clone()).build();
    let cache = DenyCache::builder()
        .max_refusal_hold(Duration::from_secs(60))
        .clock(clock.clone())
        .build(memory.clone());
    let hourly = Policy::fixed_window("hourly", hourly(1)).unwrap();
    let ten_s = Policy::gcra("ten-s", "1/10s".parse().unwrap()).unwrap();
    let both = [hourly, ten_s];
    assert!(
        now_or_never(memory.check_all(b"k", &both, 1)).unwrap()[1]
            .unwrap()
            .is_allowed()
    );
    // Both refuse: the hourly window for the rest of its hour, the other for 10 s.
    let by_store = now_or_never(cache.check_all(b"k", &both, 1)).unwrap();
    assert!(by_store.iter().all(|d| !d.unwrap().is_allowed()));
    clock.advance(Duration::from_secs(10) - Duration::from_micros(1));
    let by_cache = now_or_never(cache.check_all(b"k", &both, 1)).unwrap();
    assert_eq!(
        by_cache,
        now_or_never(memory.check_all(b"k", &both, 1)).unwrap()
    );
    assert_eq!(
        by_cache[1].unwrap().retry_after,
        Some(Duration::from_micros(1))
    );
    clock.advance(Duration::from_micros(1));
    let by_cache = now_or_never(cache.check_all(b"k", &both, 1)).unwrap();
    assert!(!by_cache[0].unwrap().is_allowed());
    assert_eq!(by_cache[1], None, "its refusal ended: not known here");
    assert_eq!(cache.stats().store_calls, 1);
}

/// A repeated refusal of another policy gives the `remaining` the store gave it (the
/// refused policy's own local refusal says 0, as for a single check).
#[test]
fn a_repeated_refusal_gives_the_stores_remaining() {
    let clock = ManualClock::new(T0);
    let memory = MemoryStore::builder().clock(clock.clone()).build();
    let cache = DenyCache::builder()
        .clock(clock.clone())
        .build(memory.clone());
    let both = [
        Policy::fixed_window("a", hourly(2)).unwrap(),
        Policy::fixed_window("b", hourly(2)).unwrap(),
    ];
    assert!(
        now_or_never(memory.check_all(b"k", &both, 1)).unwrap()[1]
            .unwrap()
            .is_allowed()
    );
    // One unit left in each: a cost of two is refused by both.
    let by_store = now_or_never(cache.check_all(b"k", &both, 2)).unwrap();
    assert!(by_store.iter().all(|d| d.unwrap().remaining == 1));
    let by_cache = now_or_never(cache.check_all(b"k", &both, 2)).unwrap();
    assert_eq!(cache.stats().store_calls, 1);
    assert!(
        by_cache
            .iter()
            .all(|d| !d.unwrap().is_allowed() && d.unwrap().source == Source::Cache)
    );
    assert_eq!(by_cache[1], by_store[1]);
    assert_eq!(by_cache[1].unwrap().remaining, 1);
}

/// A ban of another policy is repeated as the ban, run down to now, until it ends.
#[test]
fn a_repeated_ban_reads_as_the_stores() {
    let clock = ManualClock::new(T0);
    let memory = MemoryStore::builder().clock(clock.clone()).build();
    let cache = DenyCache::builder()
        .max_refusal_hold(Duration::from_secs(60))
        .clock(clock.clone())
        .build(memory.clone());
    let small = Policy::fixed_window("small", hourly(1)).unwrap();
    // Its first refusal bans for ten minutes.
    let penalty =
        floodwall_core::Penalty::new(1, Duration::from_secs(60), Duration::from_secs(600));
    let banning = policy("banning", Algorithm::Gcra, 1).with_penalty(penalty.unwrap());
    let both = [small, banning];
    assert!(
        now_or_never(memory.check_all(b"k", &both, 1)).unwrap()[1]
            .unwrap()
            .is_allowed()
    );
    let by_store = now_or_never(cache.check_all(b"k", &both, 1)).unwrap();
    assert!(by_store[1].unwrap().is_banned());
    // Refused from the first policy's cached refusal; the ban repeated, run down.
    clock.advance(Duration::from_secs(10));
    let by_cache = now_or_never(cache.check_all(b"k", &both, 1)).unwrap();
    assert_eq!(cache.stats().store_calls, 1);
    let repeated = by_cache[1].unwrap();
    assert!(repeated.is_banned() && repeated.source == Source::Cache);
    assert_eq!(
        Some(repeated),
        now_or_never(memory.check_all(b"k", &both, 1)).unwrap()[1]
    );
}

/// Charges and refunds of one policy (`adjust`), racing checks of several that hold its
/// state: each pair of a charge and its refund leaves the quota as it was, so the policy
/// ends charged for the admitted requests only (an adjustment written over a held state,
/// or lost under it, would show here).
#[test]
fn adjustments_wait_for_a_held_state() {
    use floodwall_core::Adjustment;
    let store = MemoryStore::builder().clock(ManualClock::new(T0)).build();
    let roomy = Policy::gcra("roomy", hourly(100_000)).unwrap();
    let small = Policy::token_bucket("small", hourly(50)).unwrap();
    let both = [roomy.clone(), small];
    let admitted = AtomicU64::new(0);
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (store, both, roomy, admitted) = (&store, &both, &roomy, &admitted);
            s.spawn(move || {
                for _ in 0..PER_THREAD {
                    if t % 2 == 0 {
                        let d = store.check_all(b"k", both, 1).now().unwrap();
                        if d.iter().flatten().all(|d| d.is_allowed()) {
                            admitted.fetch_add(1, Ordering::Relaxed);
                        }
                    } else {
                        store
                            .adjust(b"k", roomy, Adjustment::Charge(3))
                            .now()
                            .unwrap();
                        store
                            .adjust(b"k", roomy, Adjustment::Refund(3))
                            .now()
                            .unwrap();
                    }
                }
            });
        }
    });
    let admitted = admitted.into_inner();
    assert_eq!(admitted, 50);
    let left = store.check_now(b"k", &roomy, 0).unwrap().unwrap().remaining;
    assert_eq!(left, 100_000 - admitted);
}
