//! The fallback: each fail mode, over a breaker, and under a deny cache.

use super::*;

#[test]
fn fail_open_allows_with_the_policy_limit_and_counts() {
    let (_, flaky, _) = setup();
    let fallback = Fallback::new(flaky.clone(), FailMode::Open);
    let p = policy("2/min");
    flaky.set(Health::Down);
    for _ in 0..5 {
        let d = check(&fallback, b"k", &p).unwrap();
        assert!(d.is_allowed());
        assert_eq!((d.limit, d.remaining, d.retry_after), (2, 2, None));
        assert_eq!(d.reset_after, Duration::ZERO);
        assert!(d.source == Source::Fallback);
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
    assert!(d.is_allowed() && d.source != Source::Fallback);
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
    assert!(check(&fallback, b"k", &p).unwrap().is_allowed());
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
        .filter(|_| check(&fallback, b"k", &p).unwrap().is_allowed())
        .count();
    assert_eq!(admitted, 10, "a third of the quota on this node");
    let denied = check(&fallback, b"k", &p).unwrap();
    assert_eq!(denied.limit, 10);
    assert_eq!(denied.retry_after, Some(Duration::from_secs(6)));
    // Another key has its own share.
    assert!(check(&fallback, b"other", &p).unwrap().is_allowed());
    // A cost that fits the fleet's quota but not the share is charged as the whole share.
    let big = now(fallback.check(b"big", &p, 25)).unwrap().unwrap();
    assert!(big.is_allowed());
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
    assert_eq!((d.is_allowed(), d.limit, d.remaining), (true, 30, 29));
}

#[test]
fn check_now_of_a_fallback_answers_whenever_its_store_does() {
    let clock = ManualClock::new(T0);
    let mut flaky = Flaky::new(&clock);
    flaky.sync = true;
    let fallback = Fallback::local(flaky.clone(), 2);
    let p = policy("10/s");
    assert!(
        fallback
            .check_now(b"k", &p, 1)
            .unwrap()
            .unwrap()
            .is_allowed()
    );
    flaky.set(Health::Down);
    let d = fallback.check_now(b"k", &p, 1).unwrap().unwrap();
    assert_eq!((d.is_allowed(), d.limit), (true, 5));
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
        assert_eq!((d.is_allowed(), d.limit), (true, 10));
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
        .filter(|_| check(&cache, b"k", &p).unwrap().is_allowed())
        .count();
    assert_eq!(admitted, 10);
    let refused = check(&cache, b"k", &p).unwrap();
    assert_eq!((refused.is_allowed(), refused.limit), (false, 10));
    assert!(
        refused.source == Source::Fallback,
        "an answer in the store's stead says so"
    );
    assert_eq!(fallback.stats().decided_locally, 11);
    // The store is back a second later, knowing nothing of the share's decisions: the next
    // check is the store's to decide, and it admits (the share's refusal said 6 s).
    flaky.set(Health::Up);
    clock.advance(Duration::from_secs(1));
    let calls = flaky.calls();
    let d = check(&cache, b"k", &p).unwrap();
    assert_eq!(flaky.calls(), calls + 1, "the store was asked");
    assert_eq!((d.is_allowed(), d.limit, d.remaining), (true, 30, 29));
    assert!(d.source != Source::Fallback);
    assert_eq!(cache.stats().denied_locally, 0);
}
