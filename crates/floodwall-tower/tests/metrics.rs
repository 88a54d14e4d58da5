//! The `metrics` feature: what the layer counts after a known sequence of requests, read
//! back from a recorder.

use std::collections::BTreeMap;

use axum::body::Body;
use floodwall_core::{DenyCache, ManualClock, MemoryStore, StoreExt};
use floodwall_test_support::*;
use floodwall_tower::metrics::{NEAR_LIMIT, REQUESTS, STORE_DURATION};
use floodwall_tower::{Enforcement, Modes, RateLimitLayer};
use http::Request;
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use tower::{Layer, Service, ServiceExt};

/// What a recorder holds: (name, sorted labels) → value.
type Seen = BTreeMap<(String, Vec<(String, String)>), DebugValue>;

fn seen(snapshotter: &Snapshotter) -> Seen {
    snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .map(|(key, _, _, value)| {
            let key = key.key();
            let mut labels: Vec<(String, String)> = key
                .labels()
                .map(|l| (l.key().to_owned(), l.value().to_owned()))
                .collect();
            labels.sort();
            ((key.name().to_owned(), labels), value)
        })
        .collect()
}

/// A counter's value, 0 when it was never registered.
fn counter(seen: &Seen, name: &str, labels: &[(&str, &str)]) -> u64 {
    let mut labels: Vec<(String, String)> = labels
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    labels.sort();
    match seen.get(&(name.to_owned(), labels)) {
        Some(DebugValue::Counter(n)) => *n,
        None => 0,
        Some(other) => panic!("{name} is not a counter: {other:?}"),
    }
}

fn requests(seen: &Seen, policy: &str, result: &str) -> u64 {
    counter(seen, REQUESTS, &[("policy", policy), ("result", result)])
}

/// Sends `n` requests from `ip`; the statuses.
async fn send<S>(svc: &mut S, ip: &str, n: usize) -> Vec<u16>
where
    S: Service<Request<Body>, Response = http::Response<Body>>,
    S::Error: std::fmt::Debug,
{
    let mut statuses = Vec::new();
    for _ in 0..n {
        let res = svc.ready().await.unwrap().call(from(ip)).await.unwrap();
        statuses.push(res.status().as_u16());
    }
    statuses
}

#[tokio::test(flavor = "current_thread")]
async fn five_allowed_three_refused_counted_exactly_by_policy_and_result() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _local = metrics::set_default_local_recorder(&recorder);
    let (store, _clock) = store();
    let mut svc = RateLimitLayer::new(store, gcra("api", "5/min")).layer(hello());

    let statuses = send(&mut svc, "203.0.113.7", 8).await;
    assert_eq!(statuses, [200, 200, 200, 200, 200, 429, 429, 429]);

    let seen = seen(&snapshotter);
    assert_eq!(requests(&seen, "api", "allowed"), 5);
    assert_eq!(requests(&seen, "api", "refused"), 3);
    for other in ["cache_refused", "shadow_refused", "store_error", "fallback"] {
        assert_eq!(requests(&seen, "api", other), 0, "{other}");
    }
    // 5 of 5: the 4th request left 1 (80 % used), the 5th left 0.
    assert_eq!(counter(&seen, NEAR_LIMIT, &[("policy", "api")]), 2);
    // A store that answers at once is not timed.
    assert!(seen.iter().all(|((name, _), value)| name != STORE_DURATION
        || matches!(value, DebugValue::Histogram(samples) if samples.is_empty())));
    // Bounded labels: policy and result only, never the client.
    for (name, labels) in seen.keys() {
        for (k, v) in labels {
            assert!(k == "policy" || k == "result", "{name} has label {k}");
            assert!(
                !v.contains("203.0.113.7"),
                "{name} has the client in {k}={v}"
            );
        }
    }
}

#[tokio::test(flavor = "current_thread")]
async fn shadow_mode_counts_what_it_would_have_refused() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _local = metrics::set_default_local_recorder(&recorder);
    let (store, _clock) = store();
    let mut svc = RateLimitLayer::new(store, gcra("trial", "1/min"))
        .modes(Modes::new().all(Enforcement::Shadow))
        .unwrap()
        .layer(hello());

    assert_eq!(send(&mut svc, "10.0.0.1", 3).await, [200, 200, 200]);

    let seen = seen(&snapshotter);
    assert_eq!(requests(&seen, "trial", "allowed"), 1);
    assert_eq!(requests(&seen, "trial", "shadow_refused"), 2);
    assert_eq!(requests(&seen, "trial", "refused"), 0);
}

#[tokio::test(flavor = "current_thread")]
async fn each_policy_counts_its_own_verdict() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _local = metrics::set_default_local_recorder(&recorder);
    let (store, _clock) = store();
    let mut svc = RateLimitLayer::new(store, gcra("burst", "10/min"))
        .and_policy(gcra("daily", "2/min"))
        .layer(hello());

    assert_eq!(send(&mut svc, "10.0.0.2", 3).await, [200, 200, 429]);

    let seen = seen(&snapshotter);
    assert_eq!(requests(&seen, "daily", "allowed"), 2);
    assert_eq!(requests(&seen, "daily", "refused"), 1);
    // The other policy saw the three requests and refused none of them.
    let burst: u64 = ["allowed", "refused", "fallback"]
        .iter()
        .map(|r| requests(&seen, "burst", r))
        .sum();
    assert_eq!(burst, 3);
    assert_eq!(requests(&seen, "burst", "refused"), 0);
}

#[tokio::test(flavor = "current_thread")]
async fn store_failures_are_counted_and_store_calls_timed() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _local = metrics::set_default_local_recorder(&recorder);
    // Failing closed: the store's errors reach the layer (under `FailMode::Open` the
    // fallback would answer for the store, and nothing would be a store error).
    let mut svc = RateLimitLayer::new(Down, gcra("api", "5/min")).layer(hello());

    assert_eq!(send(&mut svc, "10.0.0.3", 2).await, [503, 503]);

    let seen = seen(&snapshotter);
    assert_eq!(requests(&seen, "api", "store_error"), 2);
    assert_eq!(requests(&seen, "api", "allowed"), 0);
    let durations = seen
        .get(&(
            STORE_DURATION.to_owned(),
            vec![("policy".to_owned(), "api".to_owned())],
        ))
        .expect("store calls timed");
    match durations {
        DebugValue::Histogram(samples) => assert_eq!(samples.len(), 2),
        other => panic!("not a histogram: {other:?}"),
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_breakers_state_and_counts_are_recorded_when_asked() {
    use floodwall_core::resilience::Breaker;
    use floodwall_tower::metrics::{
        BREAKER_FAILED_FAST, BREAKER_OPENED, BREAKER_STATE, record_breaker,
    };

    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _local = metrics::set_default_local_recorder(&recorder);
    let clock = ManualClock::new(TokioClock::START);
    let breaker = Breaker::builder()
        .failure_threshold(1)
        .clock(clock)
        .build(Down);
    let policy = gcra("api", "5/min");
    let state = |seen: &Seen| match seen.get(&(
        BREAKER_STATE.to_owned(),
        vec![("store".to_owned(), "redis".to_owned())],
    )) {
        Some(DebugValue::Gauge(v)) => v.into_inner(),
        other => panic!("no breaker gauge: {other:?}"),
    };

    record_breaker("redis", &breaker);
    assert_eq!(state(&seen(&snapshotter)), 0.0);

    // One failure opens it; the next call fails fast.
    assert!(breaker.check(b"k", &policy, 1).await.is_err());
    assert!(breaker.check(b"k", &policy, 1).await.is_err());
    record_breaker("redis", &breaker);
    let seen = seen(&snapshotter);
    assert_eq!(state(&seen), 2.0);
    assert_eq!(counter(&seen, BREAKER_OPENED, &[("store", "redis")]), 1);
    assert_eq!(
        counter(&seen, BREAKER_FAILED_FAST, &[("store", "redis")]),
        1
    );
}

#[tokio::test(flavor = "current_thread")]
async fn an_in_flight_limit_counts_under_its_name() {
    use floodwall_core::ConcurrencyLimit;
    use floodwall_tower::ConcurrencyLimitLayer;

    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _local = metrics::set_default_local_recorder(&recorder);
    let limit = ConcurrencyLimit::new("jobs", 2).unwrap();
    let svc = ConcurrencyLimitLayer::new(MemoryStore::new(), limit).layer(hello());

    // Both bodies unread: both slots held, the third is refused.
    let first = svc.clone().oneshot(from("203.0.113.7")).await.unwrap();
    let second = svc.clone().oneshot(from("203.0.113.7")).await.unwrap();
    let third = svc.clone().oneshot(from("203.0.113.7")).await.unwrap();
    assert_eq!(third.status(), 429);
    drop((first, second));
    // Slots given back: admitted again.
    let fourth = svc.clone().oneshot(from("203.0.113.7")).await.unwrap();
    assert_eq!(fourth.status(), 200);

    let seen = seen(&snapshotter);
    assert_eq!(requests(&seen, "jobs", "allowed"), 3);
    assert_eq!(requests(&seen, "jobs", "refused"), 1);
}

#[cfg(feature = "live")]
#[tokio::test(flavor = "current_thread")]
async fn a_policy_in_shadow_counts_shadow_refused_and_one_off_counts_nothing() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _local = metrics::set_default_local_recorder(&recorder);
    let (store, _clock) = store();
    let layer = RateLimitLayer::new(store, gcra("enforced", "10/min"))
        .and_policy(gcra("trial", "1/min"))
        .and_policy(gcra("unused", "1/min"));
    let live = layer.live();
    live.set_enforcement("trial", floodwall_tower::Enforcement::Shadow)
        .unwrap();
    live.set_enforcement("unused", floodwall_tower::Enforcement::Off)
        .unwrap();
    let mut svc = layer.layer(hello());

    assert_eq!(send(&mut svc, "10.0.0.3", 3).await, [200, 200, 200]);

    let seen = seen(&snapshotter);
    assert_eq!(requests(&seen, "enforced", "allowed"), 3);
    assert_eq!(requests(&seen, "trial", "allowed"), 1);
    assert_eq!(requests(&seen, "trial", "shadow_refused"), 2);
    assert_eq!(requests(&seen, "trial", "refused"), 0);
    for result in ["allowed", "refused", "shadow_refused"] {
        assert_eq!(requests(&seen, "unused", result), 0, "{result}");
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_banned_key_is_counted_as_banned_not_refused() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _local = metrics::set_default_local_recorder(&recorder);
    let (store, _clock) = store();
    let penalty = floodwall_core::Penalty::new(
        2,
        std::time::Duration::from_secs(60),
        std::time::Duration::from_secs(600),
    )
    .unwrap();
    let policy = gcra("login", "1/min").with_penalty(penalty);
    let mut svc = RateLimitLayer::new(store, policy).layer(hello());

    let statuses = send(&mut svc, "203.0.113.7", 5).await;
    assert_eq!(statuses, [200, 429, 429, 429, 429]);
    let seen = seen(&snapshotter);
    assert_eq!(requests(&seen, "login", "allowed"), 1);
    // The first strike is a plain refusal; the second bans, and the ban answers the rest.
    assert_eq!(requests(&seen, "login", "refused"), 1);
    assert_eq!(requests(&seen, "login", "banned"), 3);
}

#[tokio::test(flavor = "current_thread")]
async fn refusals_a_deny_cache_answers_count_apart_from_the_stores() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _local = metrics::set_default_local_recorder(&recorder);
    let (store, clock) = store();
    let cache = DenyCache::builder().clock(clock).build(store);
    let mut svc = RateLimitLayer::new(cache.clone(), gcra("api", "2/min")).layer(hello());

    assert_eq!(
        send(&mut svc, "10.0.0.3", 5).await,
        [200, 200, 429, 429, 429]
    );

    // The second admission left nothing: the cache knew the next three were refused and
    // never asked the store.
    let stats = cache.stats();
    assert_eq!((stats.store_calls, stats.denied_locally), (2, 3));
    let seen = seen(&snapshotter);
    assert_eq!(requests(&seen, "api", "allowed"), 2);
    assert_eq!(requests(&seen, "api", "cache_refused"), 3);
    assert_eq!(requests(&seen, "api", "refused"), 0);
}

/// Every metric a recorder holds, by name: its unit and description.
fn described(snapshotter: &Snapshotter) -> BTreeMap<String, (Option<metrics::Unit>, String)> {
    snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .map(|(key, unit, description, _)| {
            let description = description.map(|d| d.to_string()).unwrap_or_default();
            (key.key().name().to_owned(), (unit, description))
        })
        .collect()
}

#[tokio::test(flavor = "current_thread")]
async fn every_metric_is_described_once_recorded() {
    use floodwall_core::ConcurrencyLimit;
    use floodwall_core::resilience::Breaker;
    use floodwall_tower::ConcurrencyLimitLayer;
    use floodwall_tower::choose::Choice;
    use floodwall_tower::metrics::{
        BREAKER_FAILED_FAST, BREAKER_OPENED, BREAKER_STATE, record_breaker,
    };

    // What a rate layer, an in-flight layer and `record_breaker` record.
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _local = metrics::set_default_local_recorder(&recorder);
    let (memory, _clock) = store();
    let mut svc = RateLimitLayer::new(memory, gcra("api", "5/min")).layer(hello());
    assert_eq!(send(&mut svc, "10.0.0.1", 1).await, [200]);
    let jobs = ConcurrencyLimit::new("jobs", 2).unwrap();
    let in_flight = ConcurrencyLimitLayer::new(MemoryStore::new(), jobs).layer(hello());
    assert_eq!(
        in_flight.oneshot(from("10.0.0.1")).await.unwrap().status(),
        200
    );
    record_breaker("memory", &Breaker::new(MemoryStore::new()));

    let all = described(&snapshotter);
    let names: Vec<&str> = all.keys().map(String::as_str).collect();
    let mut expected = [
        REQUESTS,
        NEAR_LIMIT,
        STORE_DURATION,
        BREAKER_STATE,
        BREAKER_OPENED,
        BREAKER_FAILED_FAST,
    ];
    expected.sort_unstable();
    assert_eq!(names, expected);
    for (name, (_, description)) in &all {
        assert!(!description.is_empty(), "{name} has no description");
    }
    assert_eq!(all[STORE_DURATION].0, Some(metrics::Unit::Seconds));

    // A layer whose requests only ever go to a policy a chooser returns from outside its
    // own list describes what it records too.
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _local = metrics::set_default_local_recorder(&recorder);
    let (memory, _clock) = store();
    let other = gcra("other", "5/min");
    let mut svc = RateLimitLayer::new(memory, gcra("api", "5/min"))
        .choose(move |_: &http::request::Parts, _: &[u8]| Choice::Policy(other.clone()))
        .layer(hello());
    assert_eq!(send(&mut svc, "10.0.0.1", 1).await, [200]);
    assert_eq!(requests(&seen(&snapshotter), "other", "allowed"), 1);
    let all = described(&snapshotter);
    assert!(!all[REQUESTS].1.is_empty(), "{all:?}");
}

#[test]
fn describe_tells_an_installed_recorder_every_metric_before_any_request() {
    use floodwall_tower::metrics::{BREAKER_FAILED_FAST, BREAKER_OPENED, BREAKER_STATE, describe};
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        describe();
        // Registered (with nothing counted), so the snapshot lists them.
        for name in [REQUESTS, NEAR_LIMIT, BREAKER_OPENED, BREAKER_FAILED_FAST] {
            let _ = metrics::counter!(name);
        }
        let _ = metrics::histogram!(STORE_DURATION);
        let _ = metrics::gauge!(BREAKER_STATE);
    });
    let all = described(&snapshotter);
    assert_eq!(all.len(), 6);
    for (name, (_, description)) in &all {
        assert!(!description.is_empty(), "{name} has no description");
    }
}
