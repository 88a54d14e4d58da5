//! Penalties (`floodwall_core::guide::penalties`) in the memory store and through the deny cache: strikes
//! in their window, exact ban lengths, growth and forgetting, unban, and a key hammered by
//! many threads banned once. Time is a `ManualClock`: no sleeps.

use std::sync::Arc;
use std::time::Duration;

mod common;
use common::Now;
use common::now_or_never;

use floodwall_core::store::{Op, Reply};
use floodwall_core::{
    Decision, DenyCache, ManualClock, MemoryStore, Penalty, PenaltyState, Policy, Reservable,
    Store, StoreExt,
};

const T0: u64 = 1_700_000_000_000_000;
const S: Duration = Duration::from_secs(1);
const US: Duration = Duration::from_micros(1);

fn memory() -> (MemoryStore<ManualClock>, ManualClock) {
    let clock = ManualClock::new(T0);
    (MemoryStore::builder().clock(clock.clone()).build(), clock)
}

/// One request an hour: every check after the first is refused for the rest of the test.
fn hourly(penalty: Penalty) -> Policy {
    Policy::gcra("login", "1/h".parse().unwrap())
        .unwrap()
        .with_penalty(penalty)
}

fn check(store: &MemoryStore<ManualClock>, policy: &Policy) -> Decision {
    store.check_now(b"mallory", policy, 1).unwrap().unwrap()
}

/// Refuses the key `n` times (the first check of the hour is admitted), returning the last.
fn refuse(store: &MemoryStore<ManualClock>, policy: &Policy, n: u32) -> Decision {
    let mut last = None;
    for _ in 0..n {
        let d = check(store, policy);
        assert!(!d.is_allowed());
        last = Some(d);
    }
    last.unwrap()
}

#[test]
fn the_kth_refusal_bans_for_the_ban_and_not_one_microsecond_less() {
    let (store, clock) = memory();
    let policy = Policy::gcra("login", "1/min".parse().unwrap())
        .unwrap()
        .with_penalty(Penalty::new(3, 60 * S, 600 * S).unwrap());
    assert!(check(&store, &policy).is_allowed());
    for _ in 0..2 {
        let d = check(&store, &policy);
        assert!(
            !d.is_allowed() && !d.is_banned(),
            "two strikes are not a ban: {d:?}"
        );
        assert!(d.retry_after.unwrap() <= 60 * S);
    }
    let third = check(&store, &policy);
    assert!(
        third.is_banned(),
        "the third strike bans at once: {third:?}"
    );
    assert_eq!(third.retry_after, Some(600 * S));
    assert_eq!(third.remaining, 0);

    clock.advance(600 * S - US);
    let last = check(&store, &policy);
    assert!(last.is_banned());
    assert_eq!(last.retry_after, Some(US));
    // A peek of a banned key answers the ban too.
    assert!(
        store
            .check_now(b"mallory", &policy, 0)
            .unwrap()
            .unwrap()
            .is_banned()
    );
    clock.advance(US);
    let free = check(&store, &policy);
    assert!(
        free.is_allowed() && !free.is_banned(),
        "the ban is over: {free:?}"
    );
    assert_eq!(
        now_or_never(store.penalty_state(b"mallory", &policy))
            .unwrap()
            .banned_for,
        None
    );
}

#[test]
fn strikes_spread_over_windows_never_ban() {
    let (store, clock) = memory();
    let policy = hourly(Penalty::new(3, 10 * S, 60 * S).unwrap());
    assert!(check(&store, &policy).is_allowed());
    for _ in 0..50 {
        // Two strikes in each window of 10 s (the window opens at its first strike).
        refuse(&store, &policy, 1);
        clock.advance(9 * S);
        let d = refuse(&store, &policy, 1);
        assert!(!d.is_banned());
        clock.advance(S);
    }
    // Peeks never strike: a thousand of them, then two strikes, are no ban either.
    for _ in 0..1000 {
        assert!(
            !store
                .check_now(b"mallory", &policy, 0)
                .unwrap()
                .unwrap()
                .is_banned()
        );
    }
    assert!(!refuse(&store, &policy, 2).is_banned());
    assert!(
        refuse(&store, &policy, 1).is_banned(),
        "the third in one window bans"
    );
}

/// A change of `within` while a strike window is open (a live change, a reloaded policy
/// file), as `(µs after the first strike, the penalty's within in s, banned)` per strike,
/// after one admission: a window keeps the end it opened with (`guide::penalties`, rule
/// 2), and the new `within` applies from the next window. Redis runs the same scenarios
/// (`crates/floodwall-redis/tests/penalty_window.rs`) to the same outcome.
/// Shrunk from 10 s to 2 s after the first strike: the window still ends at 10 s.
const SHRUNK: [(u64, u64, bool); 3] = [(0, 10, false), (5_000_000, 2, false), (9_999_999, 2, true)];
/// Grown from 2 s to 10 s: the window opened with 2 s ends at 2 s; the next, opened then
/// with 10 s, at 12 s.
const GROWN: [(u64, u64, bool); 4] = [
    (0, 2, false),
    (2_000_000, 10, false),
    (2_000_000, 10, false),
    (11_999_999, 10, true),
];

#[test]
fn a_strike_window_keeps_its_end_when_within_changes() {
    for scenario in [&SHRUNK[..], &GROWN[..]] {
        let (store, clock) = memory();
        let policy = |within| hourly(Penalty::new(3, Duration::from_secs(within), 60 * S).unwrap());
        assert!(check(&store, &policy(scenario[0].1)).is_allowed());
        let banned: Vec<bool> = scenario
            .iter()
            .map(|&(at, within, _)| {
                clock.set(T0 + at);
                let d = check(&store, &policy(within));
                assert!(!d.is_allowed());
                d.is_banned()
            })
            .collect();
        let expected: Vec<bool> = scenario.iter().map(|s| s.2).collect();
        assert_eq!(banned, expected, "{scenario:?}");
    }
}

#[test]
fn bans_grow_while_remembered_up_to_the_cap() {
    let (store, clock) = memory();
    let penalty = Penalty::new(1, S, 10 * S)
        .unwrap()
        .growing(3, 60 * S)
        .unwrap();
    let policy = hourly(penalty);
    assert!(check(&store, &policy).is_allowed());
    for expected in [10, 30, 60, 60] {
        let d = check(&store, &policy);
        assert!(d.is_banned());
        assert_eq!(d.retry_after, Some(expected * S));
        clock.advance(expected * S);
    }
}

#[test]
fn bans_are_forgotten_after_remembered_for() {
    let (store, clock) = memory();
    let penalty = Penalty::new(1, S, 10 * S)
        .unwrap()
        .growing(3, 600 * S)
        .unwrap()
        .forget_after(100 * S)
        .unwrap();
    let policy = hourly(penalty);
    assert!(check(&store, &policy).is_allowed());
    assert_eq!(check(&store, &policy).retry_after, Some(10 * S));
    // Still remembered 1 µs before the bans are forgotten: the next one grows.
    clock.advance(10 * S + 100 * S - US);
    assert_eq!(check(&store, &policy).retry_after, Some(30 * S));
    // Forgotten exactly `remembered_for` after the last ban ended: a first ban again.
    clock.advance(30 * S + 100 * S);
    assert_eq!(check(&store, &policy).retry_after, Some(10 * S));
}

#[test]
fn unban_lifts_at_once_and_keeps_the_quota_state() {
    let (store, _clock) = memory();
    let penalty = Penalty::new(2, 60 * S, 600 * S)
        .unwrap()
        .growing(2, 3600 * S)
        .unwrap();
    let policy = hourly(penalty);
    assert!(check(&store, &policy).is_allowed());
    assert!(refuse(&store, &policy, 2).is_banned());
    now_or_never(store.unban(b"mallory", &policy)).unwrap();
    assert_eq!(store.penalized(), 0);
    // Unbanned, but the quota still remembers the admission: refused by it, not banned.
    let d = check(&store, &policy);
    assert!(!d.is_allowed() && !d.is_banned(), "{d:?}");
    assert!(d.retry_after.unwrap() > 3500 * S);
    // Strikes and bans were forgotten: that was a first strike, the next bans, and for a
    // first ban's length.
    let again = check(&store, &policy);
    assert!(again.is_banned());
    assert_eq!(again.retry_after, Some(600 * S));
    // A reset forgets the quota, not the ban.
    now_or_never(store.reset(b"mallory", &policy)).unwrap();
    assert!(check(&store, &policy).is_banned());
}

#[test]
fn policies_without_a_penalty_keep_no_records() {
    let (store, _clock) = memory();
    let policy = Policy::gcra("plain", "1/h".parse().unwrap()).unwrap();
    for _ in 0..100 {
        assert!(!check(&store, &policy).is_banned());
    }
    assert_eq!(store.penalized(), 0);
    // A store that does not hold bans says so.
    struct NoBans;
    impl Store for NoBans {
        async fn call(&self, op: Op<'_>) -> Result<Reply, floodwall_core::Error> {
            match op {
                Op::Reset { .. } => Ok(Reply::Done),
                Op::Check { .. } => unreachable!(),
                other => Err(other.unsupported()),
            }
        }
    }
    assert!(matches!(
        now_or_never(NoBans.unban(b"k", &policy)),
        Err(floodwall_core::Error::Unsupported { .. })
    ));
}

#[test]
fn a_key_hammered_by_eight_threads_is_banned_once() {
    let (store, clock) = memory();
    let penalty = Penalty::new(5, 60 * S, 100 * S)
        .unwrap()
        .growing(2, 1000 * S)
        .unwrap();
    let policy = hourly(penalty);
    let barrier = Arc::new(std::sync::Barrier::new(8));
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let (store, policy, barrier) = (store.clone(), policy.clone(), Arc::clone(&barrier));
            std::thread::spawn(move || {
                barrier.wait();
                (0..2000)
                    .filter(|_| {
                        store
                            .check_now(b"mallory", &policy, 1)
                            .unwrap()
                            .unwrap()
                            .is_allowed()
                    })
                    .count()
            })
        })
        .collect();
    let admitted: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
    assert_eq!(admitted, 1);
    assert_eq!(
        now_or_never(store.penalty_state(b"mallory", &policy))
            .unwrap()
            .banned_for,
        Some(100 * S)
    );
    // Had two bans started, the next would be the third (400 s), not the second.
    clock.advance(100 * S);
    let d = refuse(&store, &policy, 5);
    assert!(d.is_banned());
    assert_eq!(d.retry_after, Some(200 * S));
}

#[test]
fn a_ban_under_one_policy_refuses_all_and_records_nothing() {
    let (store, _clock) = memory();
    let banning = hourly(Penalty::new(1, S, 60 * S).unwrap());
    let roomy = Policy::gcra("roomy", "100/s".parse().unwrap()).unwrap();
    let both = [banning.clone(), roomy.clone()];
    assert!(
        store
            .check_all(b"mallory", &both, 1)
            .now()
            .unwrap()
            .iter()
            .flatten()
            .all(|d| d.is_allowed())
    );
    let roomy_before = store
        .check_now(b"mallory", &roomy, 0)
        .unwrap()
        .unwrap()
        .remaining;
    // Refused by `banning`'s quota: its strike bans, and the answer says so.
    let refused = store.check_all(b"mallory", &both, 1).now().unwrap();
    assert!(refused[0].unwrap().is_banned());
    assert!(refused[1].unwrap().is_allowed(), "the other answers a peek");
    // Banned: every check of the pair is refused, and `roomy` is charged nothing.
    for _ in 0..10 {
        let d = store.check_all(b"mallory", &both, 1).now().unwrap();
        assert_eq!(d[0].unwrap().retry_after, Some(60 * S));
        assert!(d[0].unwrap().is_banned());
    }
    assert_eq!(
        store
            .check_now(b"mallory", &roomy, 0)
            .unwrap()
            .unwrap()
            .remaining,
        roomy_before
    );
}

#[test]
fn a_banned_key_books_nothing() {
    let (store, _clock) = memory();
    let policy = Policy::gcra("paced", "1/s".parse().unwrap())
        .unwrap()
        .with_penalty(Penalty::new(1, S, 3600 * S).unwrap());
    assert!(check(&store, &policy).is_allowed());
    assert!(check(&store, &policy).is_banned());
    let reservable = Reservable::new(policy.clone()).unwrap();
    let r = store
        .reserve(b"mallory", &reservable, 1, 7200 * S)
        .now()
        .unwrap();
    assert!(!r.is_booked());
    assert!(r.decision.is_banned());
    assert_eq!(r.decision.retry_after, Some(3600 * S));
}

/// The deny cache over the memory store, on one clock: the inner store stands for the
/// shared one, `unban` on it for an operator's call through another node.
fn cached() -> (
    DenyCache<MemoryStore<ManualClock>, ManualClock>,
    ManualClock,
) {
    let (store, clock) = memory();
    let cache = DenyCache::builder()
        .clock(clock.clone())
        .max_ban_hold(2 * S)
        .build(store);
    (cache, clock)
}

fn cached_check(
    cache: &DenyCache<MemoryStore<ManualClock>, ManualClock>,
    policy: &Policy,
) -> Decision {
    cache.check_now(b"mallory", policy, 1).unwrap().unwrap()
}

#[test]
fn the_deny_cache_answers_a_ban_without_the_store_for_its_hold() {
    let (cache, clock) = cached();
    let policy = hourly(Penalty::new(1, S, 600 * S).unwrap());
    assert!(cached_check(&cache, &policy).is_allowed());
    assert!(cached_check(&cache, &policy).is_banned());
    let calls = cache.stats().store_calls;
    for i in 0..100 {
        clock.advance(Duration::from_millis(10));
        let d = cached_check(&cache, &policy);
        assert!(d.is_banned());
        // The ban's remainder, not the hold's.
        assert_eq!(
            d.retry_after,
            Some(600 * S - (i + 1) * Duration::from_millis(10))
        );
    }
    assert_eq!(cache.stats().store_calls, calls);
    assert_eq!(cache.stats().denied_locally, 100);
    // Past the hold, one check asks the store, which answers the ban again.
    clock.advance(S);
    assert!(cached_check(&cache, &policy).is_banned());
    assert_eq!(cache.stats().store_calls, calls + 1);
    // A ban in a reservation through the cache is answered locally too.
    let r = now_or_never(cache.reserve(
        b"mallory",
        &Reservable::new(policy.clone()).unwrap(),
        1,
        3600 * S,
    ))
    .unwrap();
    assert!(r.decision.is_banned() && !r.is_booked());
    assert_eq!(cache.stats().store_calls, calls + 1);
}

#[test]
fn an_unban_elsewhere_reaches_the_deny_cache_within_its_hold() {
    let (cache, clock) = cached();
    let policy = hourly(Penalty::new(2, 60 * S, 600 * S).unwrap());
    assert!(cached_check(&cache, &policy).is_allowed());
    assert!(!cached_check(&cache, &policy).is_banned());
    assert!(cached_check(&cache, &policy).is_banned());
    // Lifted in the shared store by another node: this cache does not know yet.
    cache.get_ref().unban(b"mallory", &policy).now().unwrap();
    clock.advance(2 * S - US);
    assert!(cached_check(&cache, &policy).is_banned());
    // At the hold's end the store is asked, and says the quota's refusal (a first
    // strike, no ban).
    clock.advance(US);
    let d = cached_check(&cache, &policy);
    assert!(!d.is_allowed() && !d.is_banned(), "{d:?}");
}

#[test]
fn an_unban_through_the_deny_cache_is_seen_at_once() {
    let (cache, _clock) = cached();
    let policy = Policy::gcra("login", "1/h".parse().unwrap())
        .unwrap()
        .with_penalty(Penalty::new(2, 60 * S, 600 * S).unwrap());
    assert!(cached_check(&cache, &policy).is_allowed());
    cached_check(&cache, &policy);
    assert!(cached_check(&cache, &policy).is_banned());
    now_or_never(cache.unban(b"mallory", &policy)).unwrap();
    let d = cached_check(&cache, &policy);
    assert!(!d.is_banned(), "{d:?}");
    assert_eq!(
        now_or_never(cache.get_ref().penalty_state(b"mallory", &policy))
            .unwrap()
            .banned_for,
        None
    );
}

#[test]
fn every_combinator_passes_unban_on() {
    use floodwall_core::resilience::{Breaker, FailMode, Fallback};
    use floodwall_core::{DynStore, LocalVerdicts};

    let policy = hourly(Penalty::new(1, S, 600 * S).unwrap());
    let ban = |store: &MemoryStore<ManualClock>| {
        store.check_now(b"mallory", &policy, 1).unwrap().unwrap();
        assert!(check(store, &policy).is_banned());
    };
    let (memory, _clock) = memory();
    let stores: Vec<(&str, Arc<dyn DynStore>)> = vec![
        ("breaker", Arc::new(Breaker::new(memory.clone()))),
        ("fallback", Arc::new(Fallback::fail_closed(memory.clone()))),
        (
            "local verdicts",
            Arc::new(LocalVerdicts::new(memory.clone(), S).unwrap()),
        ),
        ("deny cache", Arc::new(DenyCache::new(memory.clone()))),
        ("boxed", Arc::new(Box::new(memory.clone()))),
    ];
    for (name, store) in stores {
        ban(&memory);
        now_or_never(store.unban(b"mallory", &policy)).unwrap();
        assert_eq!(
            now_or_never(memory.penalty_state(b"mallory", &policy))
                .unwrap()
                .banned_for,
            None,
            "{name}"
        );
        now_or_never(memory.reset(b"mallory", &policy)).unwrap();
    }
    // A local fallback lifts the ban it holds too, beside the store's.
    let local = MemoryStore::new();
    let share = policy.share(2).unwrap();
    local.check_now(b"mallory", &share, 1).unwrap().unwrap();
    assert!(
        local
            .check_now(b"mallory", &share, 1)
            .unwrap()
            .unwrap()
            .is_banned()
    );
    let fallback = Fallback::with_local_store(memory.clone(), FailMode::local(2), local.clone());
    ban(&memory);
    now_or_never(fallback.unban(b"mallory", &policy)).unwrap();
    assert_eq!(
        now_or_never(memory.penalty_state(b"mallory", &policy))
            .unwrap()
            .banned_for,
        None
    );
    assert_eq!(
        now_or_never(local.penalty_state(b"mallory", &share))
            .unwrap()
            .banned_for,
        None
    );
}

#[test]
fn records_are_dropped_once_they_say_nothing() {
    let (store, clock) = memory();
    let penalty = Penalty::new(2, 10 * S, 60 * S)
        .unwrap()
        .forget_after(100 * S)
        .unwrap();
    let policy = hourly(penalty);
    let other = Policy::gcra("other", "1/h".parse().unwrap())
        .unwrap()
        .with_penalty(Penalty::new(5, 10 * S, 60 * S).unwrap());
    assert!(check(&store, &policy).is_allowed());
    assert!(refuse(&store, &policy, 2).is_banned());
    // One strike elsewhere: its record lasts its window.
    store.check_now(b"eve", &other, 1).unwrap().unwrap();
    store.check_now(b"eve", &other, 1).unwrap().unwrap();
    assert_eq!(store.penalized(), 2);
    clock.advance(10 * S);
    store.sweep_expired();
    assert_eq!(store.penalized(), 1, "the window ended: eve's record goes");
    // The ban (60 s) and its memory (100 s more) keep mallory's until then, exactly.
    clock.advance(50 * S + 100 * S - US);
    store.sweep_expired();
    assert_eq!(store.penalized(), 1);
    clock.advance(US);
    store.sweep_expired();
    assert_eq!(store.penalized(), 0);
}

#[test]
fn a_ban_earned_on_one_node_holds_on_every_node_sharing_the_store() {
    let (shared, clock) = memory();
    let node = |store: &MemoryStore<ManualClock>| {
        DenyCache::builder()
            .clock(clock.clone())
            .build(store.clone())
    };
    let (a, b) = (node(&shared), node(&shared));
    let policy = hourly(Penalty::new(3, 60 * S, 600 * S).unwrap());
    assert!(cached_check(&a, &policy).is_allowed());
    // The brute force alternates between the nodes: the strikes add up in the store.
    assert!(!cached_check(&b, &policy).is_banned());
    assert!(!cached_check(&a, &policy).is_banned());
    assert!(cached_check(&b, &policy).is_banned());
    clock.advance(S / 2);
    let on_a = cached_check(&a, &policy);
    assert!(on_a.is_banned());
    assert_eq!(on_a.retry_after, Some(600 * S - S / 2));
    // An unban through node b: b sees it at once, a within its hold (1 s by default).
    now_or_never(b.unban(b"mallory", &policy)).unwrap();
    assert!(!cached_check(&b, &policy).is_banned());
    assert!(cached_check(&a, &policy).is_banned());
    clock.advance(S);
    assert!(!cached_check(&a, &policy).is_banned());
}

#[test]
fn a_ban_outlives_a_change_of_the_policys_quota() {
    let (store, _clock) = memory();
    let penalty = Penalty::new(2, 60 * S, 600 * S).unwrap();
    let policy = hourly(penalty);
    assert!(check(&store, &policy).is_allowed());
    assert!(refuse(&store, &policy, 2).is_banned());
    // The operator raises the quota live: the ban is the key's, not the quota's.
    let raised = Policy::fixed_window("login", "100/min".parse().unwrap())
        .unwrap()
        .with_penalty(penalty);
    let d = check(&store, &raised);
    assert!(d.is_banned(), "{d:?}");
    assert_eq!(d.retry_after, Some(600 * S));
    now_or_never(store.unban(b"mallory", &raised)).unwrap();
    assert!(check(&store, &raised).is_allowed());
}

#[test]
fn local_verdicts_answer_a_ban_as_a_ban_and_see_an_unban_within_one_interval() {
    let (shared, clock) = memory();
    let policy = hourly(Penalty::new(2, 60 * S, 600 * S).unwrap());
    // Another node gets the key banned in the shared store.
    assert!(check(&shared, &policy).is_allowed());
    assert!(refuse(&shared, &policy, 2).is_banned());

    let interval = Duration::from_millis(100);
    let node = floodwall_core::LocalVerdicts::builder()
        .interval(interval)
        .clock(clock.clone())
        .build(shared.clone())
        .unwrap();
    let first = now_or_never(node.check(b"mallory", &policy, 1)).unwrap();
    assert!(first.is_banned(), "{first:?}");
    clock.advance(Duration::from_millis(50));
    let local = node
        .check_now(b"mallory", &policy, 1)
        .expect("a fresh verdict")
        .unwrap();
    assert!(local.is_banned() && !local.is_allowed(), "{local:?}");
    assert_eq!(local.retry_after, Some(600 * S - Duration::from_millis(50)));

    // Lifted elsewhere: this node still holds the ban until its interval is over, then
    // asks the store again, which answers the quota alone.
    now_or_never(shared.unban(b"mallory", &policy)).unwrap();
    let held = now_or_never(node.check(b"mallory", &policy, 1)).unwrap();
    assert!(held.is_banned(), "{held:?}");
    clock.advance(Duration::from_millis(50));
    let after = now_or_never(node.check(b"mallory", &policy, 1)).unwrap();
    assert!(!after.is_banned(), "{after:?}");
}

/// `penalty_state` reads the strikes, the ban and the remembered bans, and changes none.
#[test]
fn the_penalty_state_is_read_without_changing_it() {
    let (store, clock) = memory();
    let policy = hourly(Penalty::new(3, 60 * S, 600 * S).unwrap());
    let state = || store.penalty_state(b"mallory", &policy).now().unwrap();
    assert_eq!(state(), PenaltyState::default());
    assert!(check(&store, &policy).is_allowed());
    refuse(&store, &policy, 2);
    clock.advance(10 * S);
    let s = state();
    assert_eq!(
        (s.strikes, s.strikes_reset_after, s.banned_for, s.bans),
        (2, 50 * S, None, 0)
    );
    assert_eq!(state(), s, "a read changes nothing");
    // Still two strikes: the third bans.
    assert!(check(&store, &policy).is_banned());
    let s = state();
    assert_eq!((s.strikes, s.banned_for, s.bans), (0, Some(600 * S), 1));
    assert_eq!(
        s.bans_forgotten_after,
        600 * S + Penalty::DEFAULT_FORGET_AFTER
    );
    clock.advance(600 * S);
    let s = state();
    assert_eq!((s.banned_for, s.bans), (None, 1));
    // The ban's policy without its penalty, and another key: nothing recorded.
    let plain = Policy::gcra("other", "1/h".parse().unwrap()).unwrap();
    assert_eq!(
        store.penalty_state(b"mallory", &plain).now().unwrap(),
        PenaltyState::default()
    );
    assert_eq!(
        store.penalty_state(b"alice", &policy).now().unwrap(),
        PenaltyState::default()
    );
}
