//! Waiting instead of refusing (`Wait`), on tokio's paused clock: the memory store
//! reads that clock too, so the instants a request reaches the inner service are exact.

use std::time::Duration;

use floodwall_core::{Algorithm, ConfigError, MemoryStore, Policy};
use floodwall_test_support::*;
use floodwall_tower::{RateLimitLayer, Wait};
use http::StatusCode;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tower::{Layer, ServiceExt};

const IP: &str = "203.0.113.9";

fn memory() -> (MemoryStore<TokioClock>, TokioClock) {
    let clock = TokioClock::new();
    (MemoryStore::builder().clock(clock.clone()).build(), clock)
}

fn policy(alg: Algorithm) -> Policy {
    // Slots 100 ms apart, one at once.
    Policy::new("smooth", alg, "10/s burst 1".parse().unwrap()).unwrap()
}

/// Sends `n` requests from `ip` at once; their statuses with the instant each was
/// answered, in the order sent.
async fn flood<S>(svc: S, ip: &'static str, n: usize) -> Vec<(StatusCode, Instant)>
where
    S: tower::Service<http::Request<axum::body::Body>, Response = http::Response<axum::body::Body>>
        + Clone
        + Send
        + 'static,
    S::Future: Send,
    S::Error: std::fmt::Debug,
{
    let mut set = JoinSet::new();
    for i in 0..n {
        let svc = svc.clone();
        set.spawn(async move {
            let res = svc.oneshot(from(ip)).await.unwrap();
            (i, res.status(), Instant::now())
        });
    }
    let mut out = set.join_all().await;
    out.sort_by_key(|(i, ..)| *i);
    out.into_iter().map(|(_, s, t)| (s, t)).collect()
}

#[tokio::test(start_paused = true)]
async fn requests_leave_at_the_pace_never_faster() {
    for alg in [
        Algorithm::Gcra,
        Algorithm::TOKEN_BUCKET,
        Algorithm::LeakyBucket,
    ] {
        let (store, clock) = memory();
        let seen = Seen::default();
        let inner = recording(seen.clone());
        let svc = RateLimitLayer::new(store, policy(alg))
            .wait(Wait::up_to(Duration::from_secs(1)).unwrap())
            .unwrap()
            .layer(inner);
        let t0 = clock.start();
        // 1 at once, then slots at 100 ms .. 1 s: 11 pass, the rest are refused at once.
        let answers = flood(svc, IP, 15).await;
        let passed = answers.iter().filter(|(s, _)| *s == StatusCode::OK).count();
        assert_eq!(passed, 11, "{alg}");
        for (status, at) in &answers {
            if *status != StatusCode::OK {
                assert_eq!(*status, StatusCode::TOO_MANY_REQUESTS, "{alg}");
                assert_eq!(*at, t0, "{alg}: refused at once, not after waiting");
            }
        }
        let mut times = seen.lock().unwrap().clone();
        times.sort();
        assert_eq!(times.len(), 11);
        assert_eq!(times[0], t0, "{alg}");
        for pair in times.windows(2) {
            assert!(
                pair[1] - pair[0] >= Duration::from_millis(100),
                "{alg}: {:?} apart",
                pair[1] - pair[0]
            );
        }
        // And no later than their slots: the last at 1 s.
        assert_eq!(times[10] - t0, Duration::from_secs(1), "{alg}");
    }
}

#[tokio::test(start_paused = true)]
async fn the_waiting_bound_holds_under_a_flood() {
    let (store, clock) = memory();
    let seen = Seen::default();
    let inner = recording(seen.clone());
    let layer = RateLimitLayer::new(store, policy(Algorithm::Gcra))
        .wait(
            Wait::up_to(Duration::from_secs(60))
                .unwrap()
                .max_waiting(1_000, 5),
        )
        .unwrap();
    let svc = layer.clone().layer(inner.clone());
    let t0 = clock.start();
    // Every slot of the next minute is within the wait, but only 5 may wait for one.
    let answers = flood(svc.clone(), IP, 200).await;
    let ok: Vec<_> = answers
        .iter()
        .filter(|(s, _)| *s == StatusCode::OK)
        .collect();
    assert_eq!(ok.len(), 1 + 5, "one at once, exactly the bound waited");
    for (status, at) in &answers {
        if *status == StatusCode::TOO_MANY_REQUESTS {
            assert_eq!(*at, t0, "refused at once");
        }
    }
    assert_eq!(seen.lock().unwrap().len(), 6);
    // The refused booked nothing: the slot after the 5 waiters' is free at 600 ms.
    let next = svc.clone().oneshot(from(IP)).await.unwrap();
    assert_eq!(next.status(), StatusCode::OK);
    assert_eq!(Instant::now() - t0, Duration::from_millis(600));
    assert_eq!(
        *seen.lock().unwrap().last().unwrap() - t0,
        Duration::from_millis(600)
    );

    // In all: 2 may wait, whatever their keys.
    let (store, _) = memory();
    let svc = RateLimitLayer::new(store, policy(Algorithm::Gcra))
        .wait(
            Wait::up_to(Duration::from_secs(60))
                .unwrap()
                .max_waiting(2, 5),
        )
        .unwrap()
        .layer(inner);
    let ips = [
        "198.51.100.1",
        "198.51.100.2",
        "198.51.100.3",
        "198.51.100.4",
    ];
    let mut set = JoinSet::new();
    for ip in ips {
        set.spawn(flood(svc.clone(), ip, 2));
    }
    let statuses: Vec<StatusCode> = set
        .join_all()
        .await
        .into_iter()
        .flatten()
        .map(|(s, _)| s)
        .collect();
    let ok = statuses.iter().filter(|s| **s == StatusCode::OK).count();
    assert_eq!(ok, 4 + 2, "each key's first at once, and 2 waiters in all");
}

#[tokio::test(start_paused = true)]
async fn a_dropped_waiter_gives_its_slot_to_the_next() {
    let (store, clock) = memory();
    let seen = Seen::default();
    let inner = recording(seen.clone());
    let svc = RateLimitLayer::new(store, policy(Algorithm::Gcra))
        .wait(Wait::up_to(Duration::from_secs(1)).unwrap())
        .unwrap()
        .layer(inner);
    let t0 = clock.start();
    assert_eq!(
        svc.clone().oneshot(from(IP)).await.unwrap().status(),
        StatusCode::OK
    );
    // The second waits for its slot at 100 ms; its client gives up at 50 ms.
    let gone = tokio::time::timeout(Duration::from_millis(50), svc.clone().oneshot(from(IP))).await;
    assert!(gone.is_err(), "still waiting when dropped");
    // The next request takes the slot it gave back: 100 ms, not 200 ms.
    let next = svc.clone().oneshot(from(IP)).await.unwrap();
    assert_eq!(next.status(), StatusCode::OK);
    let times = seen.lock().unwrap().clone();
    assert_eq!(
        times.iter().map(|t| *t - t0).collect::<Vec<_>>(),
        [Duration::ZERO, Duration::from_millis(100)]
    );
}

/// Jitter delays each waiter by up to its bound, never less than its slot, and spreads
/// them over it: of 99 waiters with a uniform delay in 0..=40 ms, some wake in its first
/// half and some in its second (all in one half has a chance of 2 in 2^99), so a jitter
/// never applied, or always the same, fails.
#[tokio::test(start_paused = true)]
async fn jitter_only_ever_delays_and_spreads_the_waiters() {
    let (store, clock) = memory();
    let seen = Seen::default();
    let inner = recording(seen.clone());
    let jitter = Duration::from_millis(40);
    let svc = RateLimitLayer::new(store, policy(Algorithm::Gcra))
        .wait(
            Wait::up_to(Duration::from_secs(10))
                .unwrap()
                .max_waiting(1_000, 100)
                .jitter(jitter),
        )
        .unwrap()
        .layer(inner);
    let t0 = clock.start();
    // One at once, then 99 waiters for the slots 100 ms apart.
    let answers = flood(svc, IP, 100).await;
    assert!(answers.iter().all(|(s, _)| *s == StatusCode::OK));
    let mut times: Vec<Duration> = seen.lock().unwrap().iter().map(|t| *t - t0).collect();
    times.sort();
    assert_eq!(times.len(), 100);
    assert_eq!(times[0], Duration::ZERO, "the first never waits");
    let mut halves = [0; 2];
    for (i, at) in times.iter().enumerate().skip(1) {
        let slot = Duration::from_millis(100) * i as u32;
        assert!(*at >= slot && *at <= slot + jitter, "request {i} at {at:?}");
        halves[usize::from(*at - slot >= jitter / 2)] += 1;
    }
    assert!(
        halves[0] > 0 && halves[1] > 0,
        "delays past the slot: {halves:?}"
    );
}

/// A jitter far longer than the waits (100 s against 100 ms to 400 ms) only delays:
/// each waiter still leaves no earlier than its slot, and within its slot and the jitter.
#[tokio::test(start_paused = true)]
async fn a_jitter_longer_than_the_wait_only_delays() {
    let (store, clock) = memory();
    let seen = Seen::default();
    let inner = recording(seen.clone());
    let jitter = Duration::from_secs(100);
    let svc = RateLimitLayer::new(store, policy(Algorithm::Gcra))
        .wait(Wait::up_to(Duration::from_secs(1)).unwrap().jitter(jitter))
        .unwrap()
        .layer(inner);
    let t0 = clock.start();
    let answers = flood(svc, IP, 5).await;
    assert!(answers.iter().all(|(s, _)| *s == StatusCode::OK));
    let mut times: Vec<Duration> = seen.lock().unwrap().iter().map(|t| *t - t0).collect();
    times.sort();
    assert_eq!(times.len(), 5);
    // The waiters may leave in any order: the i-th to leave, no earlier than the i-th slot.
    for (i, at) in times.iter().enumerate() {
        let slot = Duration::from_millis(100) * i as u32;
        assert!(*at >= slot, "the {i}th at {at:?}");
        assert!(
            *at <= Duration::from_millis(400) + jitter,
            "the {i}th at {at:?}"
        );
    }
}

#[test]
fn windows_cannot_wait_and_say_so_at_construction() {
    for alg in [
        Algorithm::FixedWindow,
        Algorithm::SLIDING_WINDOW,
        Algorithm::SlidingLog,
    ] {
        let p = Policy::new("w", alg, "10/s".parse().unwrap()).unwrap();
        let err = RateLimitLayer::new(MemoryStore::new(), p)
            .wait(Wait::up_to(Duration::from_secs(1)).unwrap())
            .unwrap_err();
        assert_eq!(
            err,
            ConfigError::WaitUnsupported {
                algorithm: alg.name()
            }
        );
    }
    // A window next to a paced policy is refused too.
    let layer = RateLimitLayer::new(MemoryStore::new(), policy(Algorithm::Gcra))
        .and_policy(Policy::fixed_window("daily", "1000/day".parse().unwrap()).unwrap());
    assert!(
        layer
            .wait(Wait::up_to(Duration::from_secs(1)).unwrap())
            .is_err()
    );
    // A wait of up to nothing is no wait.
    assert!(matches!(
        Wait::up_to(Duration::ZERO),
        Err(ConfigError::BadWait { .. })
    ));
}
