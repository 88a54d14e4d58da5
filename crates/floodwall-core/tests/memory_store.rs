//! MemoryStore: exact under concurrency, bounded under a flood of keys, eviction that
//! keeps the state worth keeping, and sweeps of expired state that change no decision,
//! whatever the clock did.

mod common;
use common::Now;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use floodwall_core::{Algorithm, ManualClock, MemoryStore, Policy, Quota, State, StoreExt};
use proptest::prelude::*;

const T0: u64 = 1_700_000_000_000_000;

fn store(max_keys: usize) -> (MemoryStore<ManualClock>, ManualClock) {
    let clock = ManualClock::new(T0);
    let store = MemoryStore::builder()
        .max_keys(max_keys)
        .clock(clock.clone())
        .build();
    (store, clock)
}

#[test]
fn two_threads_on_one_key_admit_exactly_the_quota_for_every_algorithm() {
    for alg in Algorithm::all() {
        let quota = Quota::per_hour(1_000).unwrap();
        let policy = Policy::new("hot", alg, quota).unwrap();
        let (store, _clock) = store(1_000);
        let admitted = Arc::new(AtomicU64::new(0));
        std::thread::scope(|s| {
            for _ in 0..2 {
                let (store, policy, admitted) = (&store, &policy, &admitted);
                s.spawn(move || {
                    for _ in 0..5_000 {
                        if store
                            .check_now(b"one-key", policy, 1)
                            .unwrap()
                            .unwrap()
                            .is_allowed()
                        {
                            admitted.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                });
            }
        });
        assert_eq!(admitted.load(Ordering::Relaxed), 1_000, "{alg}");
    }
}

#[test]
fn a_million_distinct_keys_stay_under_the_cap() {
    let (store, clock) = store(MemoryStore::DEFAULT_MAX_KEYS);
    let policy = Policy::gcra("flood", Quota::per_minute(10).unwrap()).unwrap();
    let mut key = Vec::with_capacity(16);
    for i in 0..1_000_000u32 {
        if i % 1000 == 0 {
            clock.advance(Duration::from_micros(1));
        }
        key.clear();
        key.extend_from_slice(&i.to_be_bytes());
        assert!(
            store
                .check_now(&key, &policy, 1)
                .unwrap()
                .unwrap()
                .is_allowed()
        );
        assert!(
            store.len() <= store.max_keys(),
            "at key {i}: {}",
            store.len()
        );
    }
    // Every key is live (6 s to expire), so the cap was held by evicting live states.
    assert!(store.evicted() >= 900_000 - 100_000);
    assert!(store.len() > store.max_keys() / 2);
}

#[test]
fn eviction_keeps_the_most_penalised_keys() {
    let (store, clock) = store(100);
    let policy = Policy::gcra("p", Quota::per_minute(6).unwrap()).unwrap();
    // An abuser exhausts its limit: its state lasts a minute.
    while store
        .check_now(b"abuser", &policy, 1)
        .unwrap()
        .unwrap()
        .is_allowed()
    {}
    // Then 1,000 one-shot keys, each costing 10 s of state.
    for i in 0..1_000u32 {
        clock.advance(Duration::from_millis(1));
        store
            .check_now(&i.to_be_bytes(), &policy, 1)
            .unwrap()
            .unwrap();
    }
    assert!(store.len() <= 100);
    let d = store.check_now(b"abuser", &policy, 1).unwrap().unwrap();
    assert!(
        !d.is_allowed(),
        "the abuser's state was evicted before one-shot keys"
    );
}

#[test]
fn expired_state_is_swept_first_and_changes_no_decision() {
    let (store, clock) = store(50);
    let policy = Policy::gcra("p", Quota::per_second(1).unwrap()).unwrap();
    for i in 0..40u32 {
        store
            .check_now(&i.to_be_bytes(), &policy, 1)
            .unwrap()
            .unwrap();
    }
    clock.advance(Duration::from_secs(2));
    assert_eq!(store.sweep_expired(), 40);
    assert!(store.is_empty());
    // 50 live keys then 10 more: expired ones are gone, live ones evicted only as needed.
    for i in 100..160u32 {
        store
            .check_now(&i.to_be_bytes(), &policy, 1)
            .unwrap()
            .unwrap();
    }
    assert!(store.len() <= 50);
    // None of the 60 had expired: each is either still held or was evicted (in batches of
    // a tenth of the cap), and none of the 40 expired ones counts as evicted.
    assert_eq!(store.evicted() as usize, 60 - store.len());
    assert!(store.evicted() >= 10);
}

#[test]
fn peeks_and_unknown_keys_do_not_insert() {
    let (store, _) = store(10);
    let policy = Policy::gcra("p", Quota::per_second(1).unwrap()).unwrap();
    let d = store.check_now(b"nobody", &policy, 0).unwrap().unwrap();
    assert_eq!((d.is_allowed(), d.remaining), (true, 1));
    assert!(store.is_empty());
}

#[test]
fn policies_and_long_keys_never_share_state() {
    let (store, _) = store(100);
    let a = Policy::gcra("a", Quota::per_hour(1).unwrap()).unwrap();
    let b = Policy::gcra("b", Quota::per_hour(1).unwrap()).unwrap();
    let window = Policy::new("a", Algorithm::FixedWindow, Quota::per_hour(1).unwrap()).unwrap();
    assert!(store.check_now(b"k", &a, 1).unwrap().unwrap().is_allowed());
    assert!(store.check_now(b"k", &b, 1).unwrap().unwrap().is_allowed());
    // Same name, other algorithm: its own state, no mismatch error.
    assert!(
        store
            .check_now(b"k", &window, 1)
            .unwrap()
            .unwrap()
            .is_allowed()
    );
    assert!(!store.check_now(b"k", &a, 1).unwrap().unwrap().is_allowed());

    let long1 = vec![b'x'; 10_000];
    let mut long2 = long1.clone();
    long2[9_999] = b'y';
    assert!(
        store
            .check_now(&long1, &a, 1)
            .unwrap()
            .unwrap()
            .is_allowed()
    );
    assert!(
        store
            .check_now(&long2, &a, 1)
            .unwrap()
            .unwrap()
            .is_allowed()
    );
    assert!(
        !store
            .check_now(&long1, &a, 1)
            .unwrap()
            .unwrap()
            .is_allowed()
    );
    // Binary keys, CR/LF, braces: just bytes.
    for key in [&b"\r\n"[..], b"{tag}", b"\xff\x00", b""] {
        assert!(store.check_now(key, &a, 1).unwrap().unwrap().is_allowed());
        assert!(!store.check_now(key, &a, 1).unwrap().unwrap().is_allowed());
    }
}

#[test]
fn reset_forgets_one_key_under_one_policy() {
    let (store, _) = store(10);
    let policy = Policy::gcra("p", Quota::per_hour(1).unwrap()).unwrap();
    store.check_now(b"k", &policy, 1).unwrap().unwrap();
    store.check_now(b"other", &policy, 1).unwrap().unwrap();
    assert!(
        !store
            .check_now(b"k", &policy, 1)
            .unwrap()
            .unwrap()
            .is_allowed()
    );
    store.reset(b"k", &policy).now().unwrap();
    assert!(
        store
            .check_now(b"k", &policy, 1)
            .unwrap()
            .unwrap()
            .is_allowed()
    );
    assert!(
        !store
            .check_now(b"other", &policy, 1)
            .unwrap()
            .unwrap()
            .is_allowed()
    );
}

#[test]
fn the_store_trait_works_through_dyn_and_arc() {
    use floodwall_core::DynStore;
    let (store, _) = store(10);
    let policy = Policy::gcra("p", Quota::per_hour(2).unwrap()).unwrap();
    let shared: Arc<dyn DynStore> = Arc::new(store.clone());
    let fut = async {
        assert!(shared.check(b"k", &policy, 1).await.unwrap().is_allowed());
        shared.reset(b"k", &policy).await.unwrap();
        let d = shared.check(b"k", &policy, 1).await.unwrap();
        assert_eq!(d.remaining, 1);
        assert!(
            shared
                .check(b"k", &policy, 3)
                .await
                .unwrap_err()
                .is_cost_too_high()
        );
    };
    let mut fut = std::pin::pin!(fut);
    // The synchronous path survives type erasure: no future needed for a memory store.
    let now = shared
        .check_now(b"sync", &policy, 1)
        .expect("memory answers at once");
    assert_eq!(now.unwrap().remaining, 1);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    assert!(
        fut.as_mut().poll(&mut cx).is_ready(),
        "memory futures are ready at once"
    );
}

#[test]
fn eviction_racing_with_checks_never_admits_more_than_the_quota() {
    // A tiny cap and a flood of other keys force sweeps while two threads hammer one key
    // whose state must survive (it is the most penalised) or, if evicted, be retried.
    let (store, _clock) = store(64);
    let policy = Policy::gcra("race", Quota::per_hour(100).unwrap()).unwrap();
    let admitted = AtomicU64::new(0);
    std::thread::scope(|s| {
        for t in 0..2u32 {
            let (store, policy, admitted) = (&store, &policy, &admitted);
            s.spawn(move || {
                for i in 0..20_000u32 {
                    if store
                        .check_now(b"hot", policy, 1)
                        .unwrap()
                        .unwrap()
                        .is_allowed()
                    {
                        admitted.fetch_add(1, Ordering::Relaxed);
                    }
                    let other = format!("{t}-{i}");
                    store
                        .check_now(other.as_bytes(), policy, 1)
                        .unwrap()
                        .unwrap();
                }
            });
        }
    });
    assert_eq!(admitted.load(Ordering::Relaxed), 100);
}

#[test]
fn a_sliding_log_is_kept_while_an_entry_later_than_its_last_admission_counts() {
    let (store, clock) = store(10);
    let policy = Policy::new("log", Algorithm::SlidingLog, Quota::per_second(2).unwrap()).unwrap();
    let mut model = State::new();
    let mut both = |at: u64, cost: u64| {
        clock.set(T0 + at);
        let got = store.check_now(b"k", &policy, cost).unwrap().unwrap();
        let want = policy.decide(&mut model, T0 + at, cost).unwrap();
        assert_eq!(got, want, "cost {cost} at +{at} µs");
        got
    };
    assert!(both(5_000_000, 1).is_allowed());
    // The clock steps back 2 s: this admission's entry leaves at 4 s, the one at 5 s at 6 s.
    assert!(both(3_000_000, 1).is_allowed());
    clock.set(T0 + 4_500_000);
    assert_eq!(store.sweep_expired(), 0, "the entry at 5 s is live");
    // The entry at 5 s still counts: 2 more do not fit.
    assert!(!both(4_500_000, 2).is_allowed());
}

/// One step of a history: a check of one of a few keys after the clock moved (forwards or
/// back), or a sweep on request.
#[derive(Debug, Clone)]
enum Step {
    Check { key: usize, dt: i64, cost: u64 },
    Sweep,
}

fn steps() -> impl Strategy<Value = Vec<Step>> {
    let check = (0..KEYS, -1_500_000i64..1_500_000, 0u64..4)
        .prop_map(|(key, dt, cost)| Step::Check { key, dt, cost });
    prop::collection::vec(prop_oneof![6 => check, 1 => Just(Step::Sweep)], 1..100)
}

/// Keys in the histories below, one more than the store's cap: new keys meet the cap.
const KEYS: usize = 5;

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Dropping expired state (a sweep on request, or the first stage of making room when
    /// a new key meets the cap) never changes a decision, however the clock moved between
    /// checks: every check decides as the model, a state per key that is never dropped,
    /// until a live state is evicted for the cap (that one does change decisions, by
    /// design). A check is never earlier than a sweep before it: a clock stepped back
    /// behind a sweep may meet what it dropped, as with any expiry.
    #[test]
    fn sweeping_never_changes_a_decision(alg in 0..6usize, count in 1u64..5, steps in steps()) {
        let policy = Policy::new("sweep", Algorithm::all()[alg], Quota::per_second(count).unwrap())
            .unwrap();
        let (store, clock) = store(KEYS - 1);
        let mut models = vec![State::new(); KEYS];
        let (mut now, mut floor) = (T0, T0);
        for (i, step) in steps.into_iter().enumerate() {
            match step {
                Step::Sweep => {
                    clock.set(now);
                    store.sweep_expired();
                    floor = now;
                }
                Step::Check { key, dt, cost } => {
                    now = now.saturating_add_signed(dt).max(floor);
                    let cost = cost.min(policy.limit());
                    if cost > 0 && store.len() >= store.max_keys() {
                        // This check may make room, dropping what has expired by now.
                        floor = now;
                    }
                    clock.set(now);
                    let got = store.check_now(&[key as u8], &policy, cost).unwrap().unwrap();
                    let want = policy.decide(&mut models[key], now, cost).unwrap();
                    prop_assert_eq!(got, want, "step {} of {:?}: key {} cost {} at T0{:+} µs",
                        i, policy, key, cost, now as i128 - T0 as i128);
                    if store.evicted() > 0 {
                        return Ok(());
                    }
                }
            }
        }
    }
}
