//! `StoreExt::check_all_of`: checks that each have their own key and cost (a gateway's
//! descriptors) are recorded in all or in none, however many threads check at once, in
//! the memory store and through the deny cache.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use floodwall_core::store::Check;
use floodwall_core::{
    Algorithm, DenyCache, ManualClock, MemoryStore, Penalty, Policy, Quota, Source, StoreExt,
};

mod common;
use common::Now;

const T0: u64 = 1_700_000_000_000_000;
const THREADS: u64 = 8;
const PER_THREAD: u64 = 100;

fn policy(name: &str, algorithm: Algorithm, count: u64) -> Policy {
    let quota = Quota::new(count, Duration::from_secs(3600)).unwrap();
    Policy::new(name, algorithm, quota).unwrap()
}

fn check<'a>(key: &'a [u8], policy: &'a Policy, cost: u64) -> Check<'a> {
    Check { key, policy, cost }
}

fn remaining(store: &MemoryStore<ManualClock>, key: &[u8], policy: &Policy) -> u64 {
    store.check(key, policy, 0).now().unwrap().remaining
}

/// Threads, each its own user key at cost 2, share one global key at cost 1 (of every
/// pair of algorithms): the global key admits exactly its quota, and every user key is
/// charged for exactly the requests admitted, never for those the global key refused.
#[test]
fn a_refusal_of_one_key_charges_no_other_key_under_concurrency() {
    for per_user in Algorithm::all() {
        for global in Algorithm::all() {
            let store = MemoryStore::builder().clock(ManualClock::new(T0)).build();
            let user = policy("user", per_user, 10_000);
            let everyone = policy("everyone", global, 50);
            let admitted: Vec<AtomicU64> = (0..THREADS).map(|_| AtomicU64::new(0)).collect();
            std::thread::scope(|s| {
                for (t, admitted) in admitted.iter().enumerate() {
                    let (store, user, everyone) = (&store, &user, &everyone);
                    s.spawn(move || {
                        let key = format!("user-{t}");
                        for _ in 0..PER_THREAD {
                            let checks =
                                [check(key.as_bytes(), user, 2), check(b"all", everyone, 1)];
                            let d = store.check_all_of(&checks).now().unwrap();
                            let [Some(u), Some(g)] = d.as_slice() else {
                                panic!("one decision per check: {d:?}")
                            };
                            if u.is_allowed() && g.is_allowed() {
                                admitted.fetch_add(1, Ordering::Relaxed);
                            } else {
                                assert!(
                                    u.is_allowed() && !g.is_allowed(),
                                    "{per_user:?}/{global:?}"
                                );
                            }
                        }
                    });
                }
            });
            let total: u64 = admitted.iter().map(|a| a.load(Ordering::Relaxed)).sum();
            assert_eq!(total, 50, "{per_user:?}/{global:?}");
            assert_eq!(remaining(&store, b"all", &everyone), 0);
            for (t, admitted) in admitted.iter().enumerate() {
                let key = format!("user-{t}");
                assert_eq!(
                    remaining(&store, key.as_bytes(), &user),
                    10_000 - 2 * admitted.load(Ordering::Relaxed),
                    "{per_user:?}/{global:?} user {t}"
                );
            }
        }
    }
}

/// Each check spends its own cost on its own key, one policy serving two keys; a check of
/// cost 0 among them reads its key and charges nothing.
#[test]
fn each_check_spends_its_own_cost_on_its_own_key() {
    for algorithm in Algorithm::all() {
        let store = MemoryStore::builder().clock(ManualClock::new(T0)).build();
        let p = policy("p", algorithm, 100);
        let checks = [check(b"a", &p, 3), check(b"b", &p, 5), check(b"c", &p, 0)];
        let d = store.check_all_of(&checks).now().unwrap();
        assert!(d.iter().flatten().all(|d| d.is_allowed()), "{algorithm:?}");
        assert_eq!(d.len(), 3);
        assert_eq!(remaining(&store, b"a", &p), 97, "{algorithm:?}");
        assert_eq!(remaining(&store, b"b", &p), 95, "{algorithm:?}");
        assert_eq!(remaining(&store, b"c", &p), 100, "{algorithm:?}");
    }
}

/// One check over its quota refuses the lot: the others are not charged and answer as a
/// peek of their key would.
#[test]
fn one_check_over_its_quota_charges_none() {
    for algorithm in Algorithm::all() {
        let store = MemoryStore::builder().clock(ManualClock::new(T0)).build();
        let roomy = policy("roomy", algorithm, 100);
        let tight = policy("tight", algorithm, 4);
        let checks = [check(b"a", &roomy, 1), check(b"b", &tight, 5)];
        // A cost above the tight quota can never pass: an error, nothing recorded.
        assert!(store.check_all_of(&checks).now().is_err(), "{algorithm:?}");
        assert_eq!(remaining(&store, b"a", &roomy), 100, "{algorithm:?}");

        let checks = [check(b"a", &roomy, 1), check(b"b", &tight, 3)];
        let first = store.check_all_of(&checks).now().unwrap();
        assert!(
            first.iter().flatten().all(|d| d.is_allowed()),
            "{algorithm:?}"
        );
        let second = store.check_all_of(&checks).now().unwrap();
        let [Some(a), Some(b)] = second.as_slice() else {
            panic!("{second:?}")
        };
        assert!(!b.is_allowed(), "{algorithm:?}");
        assert!(a.is_allowed(), "{algorithm:?}: a peek of a passing check");
        assert_eq!(a.remaining, 99, "{algorithm:?}");
        assert_eq!(remaining(&store, b"a", &roomy), 99, "{algorithm:?}");
        assert_eq!(remaining(&store, b"b", &tight), 1, "{algorithm:?}");
    }
}

/// A ban of one key refuses the lot and charges none; a refusal strikes only the key it
/// refused.
#[test]
fn a_ban_on_one_key_refuses_every_check() {
    let store = MemoryStore::builder().clock(ManualClock::new(T0)).build();
    let roomy = policy("roomy", Algorithm::Gcra, 100);
    let penalty = Penalty::new(1, Duration::from_secs(60), Duration::from_secs(600)).unwrap();
    let strict = policy("strict", Algorithm::Gcra, 1).with_penalty(penalty);
    let checks = [check(b"a", &roomy, 1), check(b"b", &strict, 1)];
    assert!(
        store.check_all_of(&checks).now().unwrap()[1]
            .unwrap()
            .is_allowed()
    );
    // Refused and struck: banned from now on.
    let refused = store.check_all_of(&checks).now().unwrap();
    assert!(refused[1].unwrap().is_banned());
    let banned = store.check_all_of(&checks).now().unwrap();
    assert!(banned[1].unwrap().is_banned());
    assert!(!banned[0].unwrap().is_banned());
    assert_eq!(remaining(&store, b"a", &roomy), 99);
    // The strike was of key "b" alone: "a" under the strict policy is not banned.
    assert!(store.check(b"a", &strict, 1).now().unwrap().is_allowed());
}

/// A refusal the deny cache keeps for one key answers a later check of several without
/// the store: the other keys' figures are not known there (`None`), and nothing is
/// charged.
#[test]
fn a_cached_refusal_speaks_only_for_its_own_key() {
    let clock = ManualClock::new(T0);
    let memory = MemoryStore::builder().clock(clock.clone()).build();
    let cache = DenyCache::builder().build(memory.clone());
    let roomy = policy("roomy", Algorithm::Gcra, 100);
    let tight = policy("tight", Algorithm::Gcra, 1);
    let checks = [check(b"a", &roomy, 1), check(b"b", &tight, 1)];
    // The store's answer (its last unit spent) tells the cache the next is refused.
    let first = cache.check_all_of(&checks).now().unwrap();
    assert!(first[1].unwrap().is_allowed());
    assert_eq!(first[1].unwrap().source, Source::Store);
    let cached = cache.check_all_of(&checks).now().unwrap();
    let [a, Some(b)] = cached.as_slice() else {
        panic!("{cached:?}")
    };
    assert_eq!(b.source, Source::Cache);
    assert!(!b.is_allowed());
    assert!(a.is_none(), "another key's figures: {a:?}");
    assert_eq!(remaining(&memory, b"a", &roomy), 99);
}

/// A refusal cached by a check of one key under both policies carries what the store
/// said of that key's other policy; a later check of several keys refused by it does not
/// pass those figures off as another key's.
#[test]
fn figures_cached_for_one_key_are_not_given_to_another() {
    let clock = ManualClock::new(T0);
    let memory = MemoryStore::builder().clock(clock.clone()).build();
    let cache = DenyCache::builder().build(memory.clone());
    let roomy = policy("roomy", Algorithm::Gcra, 100);
    let tight = policy("tight", Algorithm::Gcra, 1);
    let both = [tight.clone(), roomy.clone()];
    assert!(
        cache.check_all(b"b", &both, 1).now().unwrap()[0]
            .unwrap()
            .is_allowed()
    );
    // Refused from the cache, with the roomy policy's figures for "b" beside it.
    let again = cache.check_all(b"b", &both, 1).now().unwrap();
    assert_eq!(again[0].unwrap().source, Source::Cache);
    assert_eq!(again[1].unwrap().remaining, 99);

    let checks = [check(b"a", &roomy, 1), check(b"b", &tight, 1)];
    let cached = cache.check_all_of(&checks).now().unwrap();
    assert_eq!(cached[1].unwrap().source, Source::Cache);
    assert!(
        cached[0].is_none(),
        "b's figures given to a: {:?}",
        cached[0]
    );
    assert_eq!(remaining(&memory, b"a", &roomy), 100);
}
