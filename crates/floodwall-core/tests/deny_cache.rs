//! The deny cache against the core model: it refuses locally only what the store would
//! refuse, for every algorithm, with other nodes admitting requests in between.

use std::future::Future;
use std::time::Duration;

use floodwall_core::{
    Algorithm, Decision, DenyCache, ManualClock, MemoryStore, Policy, Quota, State, Store, StoreExt,
};
use proptest::prelude::*;

mod common;
use common::{Now, now_or_never};
use floodwall_core::Source;
use floodwall_core::store::{Op, Reply};

#[path = "deny_cache/single_flight.rs"]
mod single_flight;

#[path = "deny_cache/hold.rs"]
mod hold;

const T0: u64 = 1_700_000_000_000_000;

/// A small policy of algorithm `alg` (0..6): counts 1..=5, periods of 10, 20 or 50 ms,
/// bursts 1..=6 for the algorithms that have one.
fn policy(alg: usize, count: u64, period_ms: u64, burst: u64) -> Policy {
    let algorithm = Algorithm::all()[alg];
    let mut quota = Quota::new(count, Duration::from_millis(period_ms)).unwrap();
    if algorithm.has_burst() {
        quota = quota.with_burst(burst).unwrap();
    }
    Policy::new(format!("p{alg}"), algorithm, quota).unwrap()
}

fn policies() -> impl Strategy<Value = Policy> {
    (
        0..6usize,
        1..=5u64,
        prop::sample::select(vec![10u64, 20, 50]),
        1..=6u64,
    )
        .prop_map(|(a, c, p, b)| policy(a, c, p, b))
}

/// [`policies`], and as often a policy rounded to whole seconds (`Policy::redis_cell`:
/// GCRA reporting whole seconds), which the cache reads the exact figures of.
fn policies_and_cells() -> impl Strategy<Value = Policy> {
    prop_oneof![
        6 => policies(),
        1 => (
            1..=5u64,
            prop::sample::select(vec![10u64, 20, 50]),
            1..=6u64
        )
            .prop_map(|(c, p, b)| {
                Policy::redis_cell("cell", b - 1, c, Duration::from_millis(p)).unwrap()
            }),
    ]
}

fn us(d: Duration) -> u64 {
    d.as_micros() as u64
}

/// Runs `test` on `cases` values of `strategy`; a failure is shrunk, reported and kept
/// in `deny_cache.proptest-regressions` as the `proptest!` macro would.
fn run_cases<S: Strategy>(
    cases: u32,
    strategy: S,
    test: impl Fn(S::Value) -> Result<(), TestCaseError>,
) {
    let config = ProptestConfig {
        cases,
        source_file: Some(file!()),
        ..ProptestConfig::default()
    };
    let mut runner = proptest::test_runner::TestRunner::new(config);
    if let Err(e) = runner.run(&strategy, test) {
        panic!("{e}");
    }
}

const CASES: u32 = 2_000;

/// The fact the cache relies on, on the model itself: once `Policy::decide` refuses a
/// cost `c` at `s` with `retry_after = d`, every cost `>= c` is refused at every time in
/// `[s, s + d)` however many other requests are admitted meanwhile, and the true wait is
/// never shorter than what the cache would report (`s + d - t`).
///
/// Every case reaches a refusal: at `s` the cost is asked again until it is refused, which
/// takes at most `limit` admissions at one instant.
#[test]
fn a_refusal_stays_true_whatever_others_admit() {
    let probes = std::cell::Cell::new(0u64);
    let strategy = (
        policies(),
        prop::collection::vec((0..30_000u64, 0..=6u64), 0..24),
        1..=6u64,
        prop::collection::vec((0..1_000u64, 0..=6u64, 0..=6u64), 1..16),
    );
    run_cases(CASES, strategy, |(policy, history, cost, others)| {
        let limit = policy.limit();
        let cost = cost.min(limit);
        let mut state = State::new();
        let mut now = T0;
        for (dt, c) in history {
            now += dt;
            policy.decide(&mut state, now, c.min(limit)).unwrap();
        }
        let s = now;
        let mut denied = policy.decide(&mut state, s, cost).unwrap();
        for _ in 0..limit {
            if !denied.is_allowed() {
                break;
            }
            denied = policy.decide(&mut state, s, cost).unwrap();
        }
        prop_assert!(
            !denied.is_allowed(),
            "{limit} admissions of {cost} at one instant"
        );
        let d = us(denied.retry_after.unwrap());
        prop_assert!(d > 0);
        let mut t = s;
        for (step, other, probe) in others {
            // Other nodes' admissions at times spread over [s, s + d).
            t = (t + step * d / 1_000).min(s + d - 1);
            policy.decide(&mut state, t, other.min(limit)).unwrap();
            let probe = probe.clamp(cost, limit);
            let again = policy.decide(&mut state.clone(), t, probe).unwrap();
            prop_assert!(
                !again.is_allowed(),
                "cost {probe} admitted at s + {} < s + {d}",
                t - s
            );
            prop_assert!(us(again.retry_after.unwrap()) >= s + d - t);
            probes.set(probes.get() + 1);
        }
        let last = policy.decide(&mut state.clone(), s + d - 1, cost).unwrap();
        prop_assert!(!last.is_allowed());
        Ok(())
    });
    // Every case probed its refusal at least once.
    assert!(probes.get() >= u64::from(CASES), "{} probes", probes.get());
}

/// The cache in lockstep with the same store without it: this node's checks go through
/// the cache, other nodes' straight to the shared store, and every check must be admitted
/// or refused exactly as it is without the cache. Covers both facts the cache records:
/// refusals, and what an admission says about the next request; and policies rounded to
/// whole seconds, whose local refusals are rounded as the store's are.
///
/// Checks come faster than any policy's quota refills (a step of at most 2 ms against
/// periods of 10 ms or more), so most cases see the cache refuse locally; the run counts
/// them and fails if too few did, so a cache that stopped refusing would not pass unseen.
#[test]
fn the_cache_decides_as_the_store_does() {
    let refusing_cases = std::cell::Cell::new(0u64);
    let strategy = (
        policies_and_cells(),
        prop::collection::vec((0..8u8, 0..2u8, 0..=6u64, 0..2_000u64), 1..80),
    );
    run_cases(CASES, strategy, |(policy, ops)| {
        let clock = ManualClock::new(T0);
        let shared = MemoryStore::builder().clock(clock.clone()).build();
        let cache = DenyCache::builder()
            .clock(clock.clone())
            .build(shared.clone());
        let reference = MemoryStore::builder().clock(clock.clone()).build();
        let limit = policy.limit();
        let mut through_cache = 0;
        for (who, key, cost, dt) in ops {
            clock.advance(Duration::from_micros(dt));
            let key = [b'k', key];
            let cost = cost.min(limit);
            let expected: Decision = reference.check_now(&key, &policy, cost).unwrap().unwrap();
            let got = match who {
                // This node, through the cache; most checks.
                0..=4 => {
                    through_cache += 1;
                    cache.check_now(&key, &policy, cost).unwrap().unwrap()
                }
                // Another node, straight to the shared store.
                5 | 6 => shared.check_now(&key, &policy, cost).unwrap().unwrap(),
                // This node resets the key (and the reference does too).
                _ => {
                    now_or_never(cache.reset(&key, &policy)).unwrap();
                    reference.reset(&key, &policy).now().unwrap();
                    continue;
                }
            };
            prop_assert_eq!(
                got.is_allowed(),
                expected.is_allowed(),
                "cost {} at +{}",
                cost,
                clock_now(&clock) - T0
            );
            if got.is_allowed() {
                prop_assert_eq!(got, expected);
            } else {
                prop_assert!(got.retry_after.unwrap() <= expected.retry_after.unwrap());
                prop_assert!(got.retry_after.unwrap() > Duration::ZERO);
                prop_assert_eq!(got.limit, expected.limit);
            }
        }
        // Every check through the cache was answered by it or by the store, once.
        let stats = cache.stats();
        prop_assert_eq!(stats.store_calls + stats.denied_locally, through_cache);
        if stats.denied_locally > 0 {
            refusing_cases.set(refusing_cases.get() + 1);
        }
        Ok(())
    });
    let refusing = refusing_cases.get();
    eprintln!("{refusing} of {CASES} cases refused from the cache");
    assert!(
        refusing * 2 >= u64::from(CASES),
        "only {refusing} of {CASES} cases refused anything from the cache"
    );
}

fn clock_now(clock: &ManualClock) -> u64 {
    floodwall_core::Clock::now_micros(clock)
}

/// Counts the inner store's calls: the cache must not call it for a cached refusal.
struct Counting {
    inner: MemoryStore<ManualClock>,
    calls: std::sync::atomic::AtomicU64,
}

impl Store for Counting {
    /// Checks (counted) and resets; nothing else.
    fn call(
        &self,
        op: Op<'_>,
    ) -> impl Future<Output = Result<Reply, floodwall_core::Error>> + Send {
        let answer = match op {
            Op::Check { .. } => {
                self.calls
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                self.inner.call_now(op).unwrap()
            }
            Op::Reset { .. } => self.inner.call_now(op).unwrap(),
            other => Err(other.unsupported()),
        };
        std::future::ready(answer)
    }
}

#[test]
fn a_flood_costs_one_store_call_per_admission() {
    let clock = ManualClock::new(T0);
    let inner = Counting {
        inner: MemoryStore::builder().clock(clock.clone()).build(),
        calls: 0.into(),
    };
    let cache = DenyCache::builder().clock(clock.clone()).build(inner);
    // 10/s, burst 1: one admission per 100 ms.
    let policy = Policy::gcra("flood", "10/s burst 1".parse().unwrap()).unwrap();
    let (mut admitted, mut cached) = (0, 0);
    // 100 requests per 100 ms for one second: 100× the quota.
    for _ in 0..1_000 {
        let d = now_or_never(cache.check(b"mallory", &policy, 1)).unwrap();
        admitted += u64::from(d.is_allowed());
        cached += u64::from(d.source == Source::Cache);
        assert!(
            !(d.is_allowed() && d.source == Source::Cache),
            "only refusals are answered from the cache"
        );
        if !d.is_allowed() {
            assert!(d.retry_after.unwrap() > Duration::ZERO);
            assert_eq!(d.remaining, 0);
        }
        clock.advance(Duration::from_millis(1));
    }
    assert_eq!(admitted, 10);
    let calls = inner_calls(&cache);
    // Each admission says the next request is refused until the next slot: nothing else
    // reaches the store.
    assert_eq!(calls, 10, "store calls");
    let stats = cache.stats();
    assert_eq!((stats.store_calls, stats.denied_locally), (10, 990));
    // Every refusal the cache answered itself says so (what metrics count apart).
    assert_eq!(cached, 990);
}

fn inner_calls(cache: &DenyCache<Counting, ManualClock>) -> u64 {
    cache
        .get_ref()
        .calls
        .load(std::sync::atomic::Ordering::Relaxed)
}

#[test]
fn peeks_cheaper_requests_and_other_keys_still_reach_the_store() {
    let clock = ManualClock::new(T0);
    let store = MemoryStore::builder().clock(clock.clone()).build();
    let cache = DenyCache::builder().clock(clock.clone()).build(store);
    let policy = Policy::new("w", Algorithm::FixedWindow, "5/s".parse().unwrap()).unwrap();
    assert!(
        cache
            .check_now(b"a", &policy, 3)
            .unwrap()
            .unwrap()
            .is_allowed()
    );
    assert!(
        !cache
            .check_now(b"a", &policy, 3)
            .unwrap()
            .unwrap()
            .is_allowed()
    );
    let before = cache.stats();
    // Refused locally: the same cost or more.
    assert!(
        !cache
            .check_now(b"a", &policy, 3)
            .unwrap()
            .unwrap()
            .is_allowed()
    );
    assert!(
        !cache
            .check_now(b"a", &policy, 5)
            .unwrap()
            .unwrap()
            .is_allowed()
    );
    assert_eq!(cache.stats().denied_locally, before.denied_locally + 2);
    // Cheaper: to the store, and admitted.
    assert!(
        cache
            .check_now(b"a", &policy, 2)
            .unwrap()
            .unwrap()
            .is_allowed()
    );
    // A peek: to the store.
    assert_eq!(
        cache
            .check_now(b"a", &policy, 0)
            .unwrap()
            .unwrap()
            .remaining,
        0
    );
    assert!(
        cache
            .check_now(b"b", &policy, 5)
            .unwrap()
            .unwrap()
            .is_allowed()
    );
    assert_eq!(cache.stats().denied_locally, before.denied_locally + 2);
    // A cost that can never pass is an error, not a cached refusal.
    assert!(
        cache
            .check_now(b"a", &policy, 6)
            .unwrap()
            .unwrap_err()
            .is_cost_too_high()
    );
}

#[test]
fn reset_forgets_the_cached_refusal() {
    let clock = ManualClock::new(T0);
    let store = MemoryStore::builder().clock(clock.clone()).build();
    let cache = DenyCache::builder().clock(clock.clone()).build(store);
    let policy = Policy::gcra("r", "1/hour".parse().unwrap()).unwrap();
    assert!(
        now_or_never(cache.check(b"k", &policy, 1))
            .unwrap()
            .is_allowed()
    );
    assert!(
        !now_or_never(cache.check(b"k", &policy, 1))
            .unwrap()
            .is_allowed()
    );
    assert!(!cache.is_empty());
    now_or_never(cache.reset(b"k", &policy)).unwrap();
    assert!(
        now_or_never(cache.check(b"k", &policy, 1))
            .unwrap()
            .is_allowed()
    );
}

#[test]
fn whole_second_policies_are_cached_from_their_exact_figures() {
    let clock = ManualClock::new(T0);
    let store = MemoryStore::builder().clock(clock.clone()).build();
    // Held for its whole window (not re-asked every second), to see where it ends.
    let cache = DenyCache::builder()
        .max_refusal_hold(Duration::from_secs(60))
        .clock(clock.clone())
        .build(store);
    // One request per 10 s, no burst beyond it: reported in whole seconds.
    let cell = Policy::redis_cell("cell", 0, 1, Duration::from_secs(10)).unwrap();
    assert!(DenyCache::caches(&cell));
    assert!(
        cache
            .check_now(b"k", &cell, 1)
            .unwrap()
            .unwrap()
            .is_allowed()
    );
    // 2.5 s later: the store's exact wait is 7.5 s, reported as 8 s.
    clock.advance(Duration::from_millis(2_500));
    for _ in 0..5 {
        let d = cache.check_now(b"k", &cell, 1).unwrap().unwrap();
        assert!(!d.is_allowed());
        assert_eq!(d.retry_after, Some(Duration::from_secs(8)));
        assert_eq!(d.reset_after, Duration::from_secs(8));
    }
    // The admission left no room: every refusal came from the cache.
    assert_eq!(cache.stats().denied_locally, 5);
    assert_eq!(cache.stats().store_calls, 1);
    // The exact window, not the rounded one: at 10 s the store admits, and so does the
    // cache (a window from a rounded-up figure would still refuse).
    clock.advance(Duration::from_millis(7_499));
    assert!(
        !cache
            .check_now(b"k", &cell, 1)
            .unwrap()
            .unwrap()
            .is_allowed()
    );
    clock.advance(Duration::from_micros(1_000));
    assert!(
        cache
            .check_now(b"k", &cell, 1)
            .unwrap()
            .unwrap()
            .is_allowed()
    );
}

#[test]
fn the_cache_stays_under_its_cap() {
    let clock = ManualClock::new(T0);
    let store = MemoryStore::builder().clock(clock.clone()).build();
    let cache = DenyCache::builder()
        .max_keys(50)
        .clock(clock.clone())
        .build(store);
    let policy = Policy::gcra("cap", "1/min burst 1".parse().unwrap()).unwrap();
    for i in 0..1_000u32 {
        let key = i.to_be_bytes();
        // The admission already caches "the next is refused".
        assert!(
            cache
                .check_now(&key, &policy, 1)
                .unwrap()
                .unwrap()
                .is_allowed()
        );
        assert!(cache.len() <= 50, "{} entries", cache.len());
        clock.advance(Duration::from_micros(10));
    }
    // The newest keys, lapsing last, were kept.
    assert!(
        !cache
            .check_now(&999u32.to_be_bytes(), &policy, 1)
            .unwrap()
            .unwrap()
            .is_allowed()
    );
}
