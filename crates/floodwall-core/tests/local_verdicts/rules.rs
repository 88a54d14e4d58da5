//! The verdict's rules one at a time: peeks, debts, failed and cancelled refreshes, resets,
//! long keys, the cap, threads sharing a node.

use super::*;

#[test]
fn a_new_key_costs_one_peek_then_admits_locally() {
    let (_, shared, node) = setup();
    let policy = Policy::gcra("new", "100/s burst 10".parse().unwrap()).unwrap();
    assert!(node.check_now(b"k", &policy, 1).is_none(), "no verdict yet");
    let first = check(&node, b"k", &policy, 1);
    assert!(first.is_allowed());
    assert_eq!((first.limit, first.remaining), (10, 9));
    for remaining in (0..9).rev() {
        assert_eq!(local(&node, b"k", &policy, 1).remaining, remaining);
    }
    let denied = local(&node, b"k", &policy, 1);
    assert!(!denied.is_allowed());
    assert_eq!(denied.retry_after, Some(T), "until the next refresh");
    // The peek recorded nothing; the 10 admissions are pending.
    assert_eq!(peek(&shared, b"k", &policy), 10);
    assert_eq!(node.get_ref().calls(), 1);
    assert_eq!(stats(node.stats()), (1, 1, 9, 1));
    // A local peek spends nothing.
    assert!(local(&node, b"k", &policy, 0).is_allowed());
}

#[test]
fn a_whole_seconds_policy_answers_in_whole_seconds_locally_too() {
    let (clock, _, node) = setup();
    // redis-cell's shape: 10 per second, burst 10, every duration rounded up to seconds.
    let policy = Policy::redis_cell("cell", 9, 10, Duration::from_secs(1)).unwrap();
    assert!(check(&node, b"k", &policy, 1).is_allowed());
    for _ in 0..9 {
        assert!(local(&node, b"k", &policy, 1).is_allowed());
    }
    clock.advance(Duration::from_millis(10));
    // Refused locally until the next refresh, 90 ms away: one second, as the policy
    // rounds every answer, the store's included.
    let refused = local(&node, b"k", &policy, 1);
    assert!(!refused.is_allowed());
    assert_eq!(refused.retry_after, Some(Duration::from_secs(1)));
    assert_eq!(refused.reset_after.subsec_nanos(), 0, "{refused:?}");
}

#[test]
fn a_refused_debt_is_answered_locally_until_the_store_would_take_it() {
    let (clock, shared, node) = setup();
    // One unit per 100 ms, burst 10.
    let policy = Policy::gcra("debt", "10/s burst 10".parse().unwrap()).unwrap();
    for _ in 0..10 {
        assert!(check(&node, b"k", &policy, 1).is_allowed());
    }
    // Another node spends the whole burst meanwhile.
    assert!(
        shared
            .check_now(b"k", &policy, 10)
            .unwrap()
            .unwrap()
            .is_allowed()
    );
    clock.advance(T);
    // The refresh offers 10: refused, 1 fits and is recorded (a second call), 9 are a
    // debt, and the store says the rest fits in 900 ms.
    let d = check(&node, b"k", &policy, 1);
    assert!(!d.is_allowed());
    assert_eq!(d.retry_after, Some(Duration::from_millis(900)));
    assert_eq!(node.get_ref().calls(), 3);
    assert_eq!(node.get_ref().recorded(), 1);
    // Refused locally for 900 ms, past the interval, without calling the store.
    for step in 1..18 {
        clock.set(T0 + 100_000 + step * 50_000);
        let d = local(&node, b"k", &policy, 1);
        assert!(!d.is_allowed());
        assert_eq!(
            d.retry_after,
            Some(Duration::from_micros(900_000 - step * 50_000))
        );
        assert!(!check(&node, b"k", &policy, 1).is_allowed());
    }
    assert_eq!(node.get_ref().calls(), 3);
    clock.set(T0 + 1_000_000);
    assert!(
        node.check_now(b"k", &policy, 1).is_none(),
        "a refresh is due"
    );
    // The debt fits now: recorded in one call; the burst is spent, so still refused.
    assert!(!check(&node, b"k", &policy, 1).is_allowed());
    assert_eq!(node.get_ref().calls(), 4);
    assert_eq!(node.get_ref().recorded(), 10, "every admitted unit, once");
}

#[test]
fn a_peek_while_the_store_refuses_is_answered_as_a_peek() {
    let (clock, shared, node) = setup();
    // One unit per 100 ms, burst 10.
    let policy = Policy::gcra("peek", "10/s burst 10".parse().unwrap()).unwrap();
    assert!(check(&node, b"k", &policy, 1).is_allowed());
    clock.advance(T);
    // Another node spends the whole burst; the refresh then offers 1: refused for 100 ms.
    assert!(
        shared
            .check_now(b"k", &policy, 10)
            .unwrap()
            .unwrap()
            .is_allowed()
    );
    let refused = check(&node, b"k", &policy, 1);
    assert_eq!(refused.retry_after, Some(T));
    let calls = node.get_ref().calls();
    clock.advance(T / 2);
    // A cost-0 check admits, as the store and the policy answer one: it asks for nothing.
    let store_peek = shared.check_now(b"k", &policy, 0).unwrap().unwrap();
    assert!(store_peek.is_allowed() && store_peek.retry_after.is_none());
    assert_eq!(local(&node, b"k", &policy, 0), store_peek);
    assert_eq!(check(&node, b"k", &policy, 0), store_peek);
    // Answered here, spending nothing: the refusal still holds, for what is left of it.
    assert_eq!(node.get_ref().calls(), calls);
    let d = local(&node, b"k", &policy, 1);
    assert_eq!((d.is_allowed(), d.retry_after), (false, Some(T / 2)));
}

#[test]
fn a_failed_refresh_returns_the_error_and_keeps_the_counts() {
    let (clock, shared, node) = setup();
    let policy = Policy::gcra("fail", "100/s burst 10".parse().unwrap()).unwrap();
    for _ in 0..5 {
        assert!(check(&node, b"k", &policy, 1).is_allowed());
    }
    clock.advance(T);
    node.get_ref().fail.store(true, Ordering::SeqCst);
    for _ in 0..2 {
        let e = now_or_never(node.check(b"k", &policy, 1)).unwrap_err();
        assert!(e.is_unavailable(), "{e}");
        assert!(node.check_now(b"k", &policy, 1).is_none(), "still due");
    }
    assert_eq!(peek(&shared, b"k", &policy), 10, "nothing recorded");
    node.get_ref().fail.store(false, Ordering::SeqCst);
    let d = check(&node, b"k", &policy, 1);
    assert!(d.is_allowed());
    // The 5 are recorded (the store has 5 left), and this admission spent one of them.
    assert_eq!(peek(&shared, b"k", &policy), 5);
    assert_eq!(d.remaining, 4);
    assert_eq!(node.get_ref().recorded(), 5);
    // flush sends the last one.
    now_or_never(node.flush()).unwrap();
    assert_eq!(node.get_ref().recorded(), 6);
}

#[test]
fn flush_reports_a_failure_and_keeps_the_counts() {
    let (_, _, node) = setup();
    let policy = Policy::gcra("flush", "100/s burst 10".parse().unwrap()).unwrap();
    for key in [&b"a"[..], b"b"] {
        for _ in 0..3 {
            assert!(check(&node, key, &policy, 1).is_allowed());
        }
    }
    node.get_ref().fail.store(true, Ordering::SeqCst);
    assert!(now_or_never(node.flush()).unwrap_err().is_unavailable());
    node.get_ref().fail.store(false, Ordering::SeqCst);
    now_or_never(node.flush()).unwrap();
    assert_eq!(node.get_ref().recorded(), 6);
    // Nothing left to send: no call.
    let calls = node.get_ref().calls();
    now_or_never(node.flush()).unwrap();
    assert_eq!(node.get_ref().calls(), calls);
}

#[test]
fn checks_during_a_refresh_spend_the_old_budget_and_the_new_one_counts_them() {
    let (clock, shared, node) = setup();
    let policy = Policy::gcra("flight", "100/s burst 10".parse().unwrap()).unwrap();
    for _ in 0..4 {
        assert!(check(&node, b"k", &policy, 1).is_allowed());
    }
    clock.advance(T);
    node.get_ref().hold.store(true, Ordering::SeqCst);
    let mut refreshing = std::pin::pin!(node.check(b"k", &policy, 1));
    assert!(
        poll_once(&mut refreshing).is_none(),
        "the refresh is in flight"
    );
    // Meanwhile: decided from the old budget (6 left), no second refresh.
    for remaining in [5, 4, 3] {
        assert_eq!(local(&node, b"k", &policy, 1).remaining, remaining);
    }
    assert_eq!(check(&node, b"k", &policy, 1).remaining, 2);
    assert_eq!(node.get_ref().calls(), 2);
    node.get_ref().hold.store(false, Ordering::SeqCst);
    let d = poll_once(&mut refreshing).unwrap().unwrap();
    // The store recorded 4 and has 6 left; 4 of those went while it answered.
    assert_eq!(peek(&shared, b"k", &policy), 6);
    assert!(d.is_allowed());
    assert_eq!(d.remaining, 1);
    assert!(local(&node, b"k", &policy, 1).is_allowed());
    assert!(!local(&node, b"k", &policy, 1).is_allowed());
    // Ten admitted in all since the refresh was sent, as the store allows.
    now_or_never(node.flush()).unwrap();
    assert_eq!(node.get_ref().recorded(), 10);
}

#[test]
fn a_cancelled_refresh_puts_its_counts_back() {
    let (clock, _, node) = setup();
    let policy = Policy::gcra("cancel", "100/s burst 10".parse().unwrap()).unwrap();
    for _ in 0..3 {
        assert!(check(&node, b"k", &policy, 1).is_allowed());
    }
    clock.advance(T);
    node.get_ref().hold.store(true, Ordering::SeqCst);
    {
        let mut refreshing = std::pin::pin!(node.check(b"k", &policy, 1));
        assert!(poll_once(&mut refreshing).is_none());
    } // dropped: a timeout around the store, or a client gone
    node.get_ref().hold.store(false, Ordering::SeqCst);
    assert!(node.check_now(b"k", &policy, 1).is_none(), "still due");
    assert!(check(&node, b"k", &policy, 1).is_allowed());
    assert_eq!(node.get_ref().recorded(), 3);
}

#[test]
fn checks_during_a_first_refresh_go_to_the_store() {
    let (_, shared, node) = setup();
    let policy = Policy::gcra("first", "100/s burst 10".parse().unwrap()).unwrap();
    node.get_ref().hold.store(true, Ordering::SeqCst);
    let mut first = std::pin::pin!(node.check(b"k", &policy, 1));
    assert!(poll_once(&mut first).is_none());
    assert!(
        node.check_now(b"k", &policy, 1).is_none(),
        "no verdict to spend"
    );
    let mut second = std::pin::pin!(node.check(b"k", &policy, 2));
    assert!(poll_once(&mut second).is_none());
    node.get_ref().hold.store(false, Ordering::SeqCst);
    // Passed through: decided and counted by the store at once.
    assert!(poll_once(&mut second).unwrap().unwrap().is_allowed());
    assert_eq!(node.get_ref().recorded(), 2);
    let d = poll_once(&mut first).unwrap().unwrap();
    assert!(d.is_allowed());
    assert_eq!(d.remaining, 7);
    assert_eq!(peek(&shared, b"k", &policy), 8);
    assert_eq!(node.stats().store_calls, 2);
}

#[test]
fn a_cost_that_can_never_pass_is_refused_without_a_call() {
    let (_, _, node) = setup();
    let policy = Policy::gcra("cost", "100/s burst 10".parse().unwrap()).unwrap();
    let e = now_or_never(node.check(b"k", &policy, 11)).unwrap_err();
    assert!(matches!(e, Error::CostTooHigh { cost: 11, max: 10 }), "{e}");
    assert!(
        node.check_now(b"k", &policy, 11)
            .unwrap()
            .unwrap_err()
            .is_cost_too_high()
    );
    assert_eq!(node.get_ref().calls(), 0);
    assert!(node.is_empty());
    // With a verdict in place too.
    check(&node, b"k", &policy, 1);
    assert!(
        node.check_now(b"k", &policy, 11)
            .unwrap()
            .unwrap_err()
            .is_cost_too_high()
    );
    assert_eq!(node.get_ref().calls(), 1);
}

#[test]
fn check_now_answers_exactly_while_the_verdict_is_fresh() {
    let (clock, _, node) = setup();
    let policy = Policy::gcra("fresh", "1000/s burst 100".parse().unwrap()).unwrap();
    assert!(node.check_now(b"k", &policy, 1).is_none());
    check(&node, b"k", &policy, 1);
    for at in [0, 1, 50_000, 99_999] {
        clock.set(T0 + at);
        assert!(node.check_now(b"k", &policy, 1).is_some(), "+{at} µs");
    }
    clock.set(T0 + 100_000);
    assert!(node.check_now(b"k", &policy, 1).is_none());
    assert!(node.check_now(b"other", &policy, 1).is_none());
    check(&node, b"k", &policy, 1);
    assert!(node.check_now(b"k", &policy, 1).is_some());
    assert_eq!(node.stats().refreshes, 2);
}

#[test]
fn reset_forgets_the_verdict_and_resets_the_store() {
    let (_, shared, node) = setup();
    let policy = Policy::gcra("reset", "100/s burst 10".parse().unwrap()).unwrap();
    for _ in 0..10 {
        check(&node, b"k", &policy, 1);
    }
    assert!(!local(&node, b"k", &policy, 1).is_allowed());
    shared.check_now(b"k", &policy, 5).unwrap().unwrap();
    now_or_never(node.reset(b"k", &policy)).unwrap();
    assert!(node.is_empty());
    assert_eq!(peek(&shared, b"k", &policy), 10);
    assert!(node.check_now(b"k", &policy, 1).is_none());
    let d = check(&node, b"k", &policy, 1);
    assert_eq!((d.is_allowed(), d.remaining), (true, 9));
    assert_eq!(node.get_ref().calls(), 2);
    // The forgotten admissions are never sent.
    now_or_never(node.flush()).unwrap();
    assert_eq!(node.get_ref().recorded(), 1);
}

#[test]
fn the_interval_is_checked() {
    let store = MemoryStore::new();
    for bad in [
        Duration::ZERO,
        Duration::from_nanos(999),
        Duration::from_secs(3601),
    ] {
        let e = LocalVerdicts::new(store.clone(), bad).unwrap_err();
        assert_eq!(e, ConfigError::BadRefreshInterval { interval: bad });
        assert!(e.to_string().contains("refresh interval"), "{e}");
    }
    for good in [Duration::from_micros(1), LocalVerdicts::MAX_INTERVAL] {
        let lv = LocalVerdicts::new(store.clone(), good).unwrap();
        assert_eq!(lv.interval(), good);
    }
    let lv = LocalVerdicts::builder().build(store).unwrap();
    assert_eq!(lv.interval(), LocalVerdicts::DEFAULT_INTERVAL);
    assert_eq!(lv.max_keys(), LocalVerdicts::DEFAULT_MAX_KEYS);
}

#[test]
fn long_keys_go_straight_to_the_store() {
    let (_, _, node) = setup();
    let policy = Policy::gcra("long", "100/s burst 10".parse().unwrap()).unwrap();
    let key = vec![b'x'; 200];
    for _ in 0..3 {
        assert!(node.check_now(&key, &policy, 1).is_none());
        assert!(check(&node, &key, &policy, 1).is_allowed());
    }
    assert_eq!(node.get_ref().recorded(), 3);
    assert!(node.is_empty());
}

#[test]
fn the_map_stays_under_its_cap() {
    let clock = ManualClock::new(T0);
    let shared = MemoryStore::builder().clock(clock.clone()).build();
    let link = Link::new(&shared, &Arc::default());
    let node = LocalVerdicts::builder()
        .interval(T)
        .max_keys(50)
        .clock(clock.clone())
        .build(link)
        .unwrap();
    let policy = Policy::gcra("cap", "100/s burst 10".parse().unwrap()).unwrap();
    // Ten keys flushed: nothing pending, still fresh.
    for i in 0..10u32 {
        assert!(check(&node, &i.to_be_bytes(), &policy, 1).is_allowed());
    }
    now_or_never(node.flush()).unwrap();
    for i in 10..1_000u32 {
        assert!(check(&node, &i.to_be_bytes(), &policy, 1).is_allowed());
        assert!(node.len() <= 50, "{} keys", node.len());
        clock.advance(Duration::from_micros(10));
    }
    // Keys with nothing pending were dropped before any key with counts: every key left
    // has counts, and only the dropped keys' counts are missing.
    let dropped_with_counts = 1_000 - 10 - node.len() as u64;
    now_or_never(node.flush()).unwrap();
    assert_eq!(
        node.get_ref().recorded(),
        1_000 - dropped_with_counts,
        "counts of dropped keys are lost, the others' are not"
    );
    assert!(node.check_now(&999u32.to_be_bytes(), &policy, 1).is_some());
}

#[test]
fn threads_sharing_one_node_lose_no_count() {
    let clock = ManualClock::new(T0);
    let shared = MemoryStore::builder().clock(clock.clone()).build();
    let recorded = Arc::new(AtomicU64::new(0));
    let node = node(&clock, Link::new(&shared, &recorded));
    // 1 per ms, burst 200 (refilled in two intervals), for each of four keys.
    let policy = Policy::gcra("threads", "1000/s burst 200".parse().unwrap()).unwrap();
    let keys: [&[u8]; 4] = [b"a", b"b", b"c", b"d"];
    let admitted: Vec<[u64; 4]> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..4)
            .map(|w| {
                let (node, clock, policy) = (&node, &clock, &policy);
                s.spawn(move || {
                    let mut admitted = [0u64; 4];
                    for i in 0..20_000usize {
                        clock.advance(Duration::from_micros(10));
                        let k = (i + w) % 4;
                        let d = match node.check_now(keys[k], policy, 1) {
                            Some(d) => d.unwrap(),
                            None => now_or_never(node.check(keys[k], policy, 1)).unwrap(),
                        };
                        admitted[k] += u64::from(d.is_allowed());
                    }
                    admitted
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    let elapsed = floodwall_core::Clock::now_micros(&clock) - T0;
    let per_key: Vec<u64> = (0..4)
        .map(|k| admitted.iter().map(|a| a[k]).sum())
        .collect();
    // One node: at most `limit` unrecorded per key.
    let allowance = 200 + elapsed / 1_000;
    println!("admitted per key {per_key:?}, allowance {allowance} each");
    for &n in &per_key {
        assert!(n <= allowance + 200, "{n} admitted, allowance {allowance}");
        // At least the first burst; how much more depends on how the threads interleave.
        assert!(n >= 200, "{n} admitted");
    }
    let total: u64 = per_key.iter().sum();
    for _ in 0..1_000 {
        if recorded.load(Ordering::SeqCst) >= total {
            break;
        }
        clock.advance(T);
        now_or_never(node.flush()).unwrap();
    }
    assert_eq!(recorded.load(Ordering::SeqCst), total);
}
