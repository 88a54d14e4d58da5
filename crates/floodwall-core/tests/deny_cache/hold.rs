//! A cached refusal is held at most `max_refusal_hold` without asking the store, so a
//! reset elsewhere (another node, a `DEL`, an evicted key) reaches the cache within that
//! bound, while a flood still costs one store call per key per hold.

use super::*;

const S: Duration = Duration::from_secs(1);
const HOLD: Duration = S;

/// A cache with the default hold over a counting memory store, on one manual clock: the
/// inner store stands for the shared one, a reset on it for one through another node.
fn held() -> (ManualClock, DenyCache<Counting, ManualClock>) {
    let clock = ManualClock::new(T0);
    let inner = Counting {
        inner: MemoryStore::builder().clock(clock.clone()).build(),
        calls: 0.into(),
    };
    let cache = DenyCache::builder().clock(clock.clone()).build(inner);
    (clock, cache)
}

fn check(cache: &DenyCache<Counting, ManualClock>, policy: &Policy) -> Decision {
    now_or_never(cache.check(b"k", policy, 1)).unwrap()
}

#[test]
fn a_reset_elsewhere_reaches_the_cache_within_the_hold() {
    let (clock, cache) = held();
    let policy = Policy::gcra("daily", "1/day".parse().unwrap()).unwrap();
    assert!(check(&cache, &policy).is_allowed());
    // Refused for a day, answered here without the store.
    let d = check(&cache, &policy);
    assert!(!d.is_allowed() && d.source == Source::Cache);
    // An operator resets the key through another node: this cache does not know yet.
    cache.get_ref().inner.reset(b"k", &policy).now().unwrap();
    clock.advance(HOLD - Duration::from_micros(1));
    let d = check(&cache, &policy);
    assert!(!d.is_allowed() && d.source == Source::Cache);
    // What a held refusal reports is the refusal's remainder, not the hold's.
    assert_eq!(
        d.retry_after,
        Some(Duration::from_secs(86_400) - HOLD + Duration::from_micros(1))
    );
    assert_eq!(inner_calls(&cache), 1);
    // At the hold's end the store is asked, and admits.
    clock.advance(Duration::from_micros(1));
    let d = check(&cache, &policy);
    assert!(d.is_allowed() && d.source != Source::Cache);
    assert_eq!(inner_calls(&cache), 2);
}

#[test]
fn a_flood_costs_one_store_call_per_hold() {
    let (clock, cache) = held();
    let policy = Policy::gcra("hourly", "1/h".parse().unwrap()).unwrap();
    // 100 checks a second for 5 s, the first admitted: after it, the store is asked once
    // per hold (at 1 s, 2 s, 3 s and 4 s), and refuses each time.
    let mut admitted = 0;
    for _ in 0..500 {
        let d = check(&cache, &policy);
        admitted += u64::from(d.is_allowed());
        if !d.is_allowed() {
            // Whoever answered, the wait is the store's, never the hold's.
            assert!(d.retry_after.unwrap() > Duration::from_secs(3_500), "{d:?}");
        }
        clock.advance(Duration::from_millis(10));
    }
    assert_eq!(admitted, 1);
    assert_eq!(inner_calls(&cache), 5, "store calls");
    assert_eq!(cache.stats().denied_locally, 495);
}

#[test]
fn a_booking_that_cannot_wait_out_a_held_refusal_is_refused_here() {
    let (clock, cache) = held();
    let policy = Policy::gcra("hourly", "1/h".parse().unwrap()).unwrap();
    let reservable = floodwall_core::Reservable::new(policy.clone()).unwrap();
    assert!(check(&cache, &policy).is_allowed());
    clock.advance(HOLD / 2);
    // The next slot is an hour away, whatever the hold: a booking that may wait ten
    // minutes is refused without the store (which books nothing here: `Counting` does not
    // book, so asking it would be an error).
    let r = now_or_never(cache.reserve(b"k", &reservable, 1, 600 * S)).unwrap();
    assert!(!r.is_booked());
    assert_eq!(r.decision.retry_after, Some(3_600 * S - HOLD / 2));
    assert_eq!(inner_calls(&cache), 1);
    // One that may wait past the refusal's end is the store's to book.
    let r = now_or_never(cache.reserve(b"k", &reservable, 1, 3_600 * S));
    let asked = matches!(r, Err(floodwall_core::Error::Unsupported { .. }));
    assert!(asked, "asked the store: {r:?}");
}

#[test]
fn a_zero_hold_sends_every_refusal_to_the_store() {
    let (_, cache) = held();
    assert_eq!(
        cache.max_refusal_hold(),
        DenyCache::DEFAULT_MAX_REFUSAL_HOLD
    );
    assert_eq!(DenyCache::DEFAULT_MAX_REFUSAL_HOLD, HOLD);
    let clock = ManualClock::new(T0);
    let inner = Counting {
        inner: MemoryStore::builder().clock(clock.clone()).build(),
        calls: 0.into(),
    };
    let cache = DenyCache::builder()
        .max_refusal_hold(Duration::ZERO)
        .clock(clock.clone())
        .build(inner);
    assert_eq!(cache.max_refusal_hold(), Duration::ZERO);
    let policy = Policy::gcra("hourly", "1/h".parse().unwrap()).unwrap();
    for i in 0..10 {
        assert_eq!(check(&cache, &policy).is_allowed(), i == 0);
    }
    assert_eq!(inner_calls(&cache), 10);
    assert!(cache.is_empty());
}

#[test]
fn a_booking_cheaper_than_the_held_refusal_is_the_stores() {
    let (_, cache) = held();
    let policy = Policy::gcra("hourly", "1/h burst 2".parse().unwrap()).unwrap();
    let reservable = floodwall_core::Reservable::new(policy.clone()).unwrap();
    // One of two admitted: the cache holds "2 or more refused" for the next hour.
    assert!(check(&cache, &policy).is_allowed());
    let r = now_or_never(cache.reserve(b"k", &reservable, 2, S)).unwrap();
    assert!(!r.is_booked());
    assert_eq!(inner_calls(&cache), 1);
    // One unit is left: a booking of it is the store's (`Counting` books nothing).
    let r = now_or_never(cache.reserve(b"k", &reservable, 1, S));
    let asked = matches!(r, Err(floodwall_core::Error::Unsupported { .. }));
    assert!(asked, "asked the store: {r:?}");
}
