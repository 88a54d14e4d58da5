//! Charging and refunding on a real `redis-server`: the scripts agree with floodwall-core's
//! pure algorithm step by step, a refund clears the store's cached refusal, and a login
//! endpoint counts only its failures, in each of its policies.

use axum::Router;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::get;
use floodwall::core::State;
use floodwall::redis::RedisStore;
use floodwall::tower::extract::Global;
use floodwall::tower::{RateLimitLayer, Settle};
use floodwall::{Adjustment, Algorithm, Error, Policy, StoreExt};
use floodwall_test_support::{http_get, serve};
use redis_harness::RedisServer;

const T0: u64 = 1_700_006_400_000_000;

/// One step of a sequence: a check of a cost, or an adjustment.
#[derive(Debug, Clone, Copy)]
enum Step {
    Check(u64),
    Adjust(Adjustment),
}

/// A fixed, varied sequence: checks, charges past the limit, refunds beyond what was
/// spent, with times moving by uneven steps.
fn steps() -> Vec<(u64, Step)> {
    let mut seed = 0x2545_f491_u64;
    let mut next = move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    let mut at = T0;
    (0..300)
        .map(|_| {
            at += next(4) * next(150_000);
            let step = match next(5) {
                0 | 1 => Step::Check(next(4)),
                2 | 3 => Step::Adjust(Adjustment::Charge(1 + next(12))),
                _ => Step::Adjust(Adjustment::Refund(1 + next(8))),
            };
            (at, step)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_scripts_charge_and_refund_as_the_pure_algorithm_does() {
    let redis = RedisServer::start();
    let store = RedisStore::builder()
        .deny_cache(false)
        .multiplexed(&redis.url())
        .await
        .unwrap();
    let quota = "8/s".parse().unwrap();
    for alg in [
        Algorithm::Gcra,
        Algorithm::TOKEN_BUCKET,
        Algorithm::LeakyBucket,
        Algorithm::FixedWindow,
    ] {
        let policy = Policy::new("adjust", alg, quota).unwrap();
        let mut state = State::new();
        let mut seen = [0; 2];
        for (i, (at, step)) in steps().into_iter().enumerate() {
            match step {
                Step::Check(cost) => {
                    let want = policy.decide(&mut state, at, cost).unwrap();
                    let got = store.at(at).check(b"k", &policy, cost).await.unwrap();
                    assert_eq!(
                        (got.is_allowed(), got.remaining),
                        (want.is_allowed(), want.remaining),
                        "{alg} step {i} {step:?}"
                    );
                    seen[usize::from(got.is_allowed())] += 1;
                }
                Step::Adjust(a) => {
                    policy.adjust(&mut state, at, a).unwrap();
                    store.at(at).adjust(b"k", &policy, a).await.unwrap();
                }
            }
        }
        // The sequence reaches both sides of the limit.
        assert!(seen[0] > 10 && seen[1] > 10, "{alg}: {seen:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sliding_kinds_say_they_cannot() {
    let redis = RedisServer::start();
    let store = RedisStore::connect(&redis.url()).await.unwrap();
    for alg in [Algorithm::SlidingLog, Algorithm::SLIDING_WINDOW] {
        let policy = Policy::new("p", alg, "8/s".parse().unwrap()).unwrap();
        let err = store
            .adjust(b"k", &policy, Adjustment::Refund(1))
            .await
            .unwrap_err();
        assert!(matches!(err, Error::Unsupported { .. }), "{alg}: {err}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refund_clears_the_deny_caches_refusal() {
    let redis = RedisServer::start();
    // The deny cache is on by default.
    let store = RedisStore::connect(&redis.url()).await.unwrap();
    let policy = Policy::gcra("login", "2/min".parse().unwrap()).unwrap();
    for _ in 0..2 {
        assert!(store.check(b"k", &policy, 1).await.unwrap().is_allowed());
    }
    assert!(!store.check(b"k", &policy, 1).await.unwrap().is_allowed());
    // Cached: refused again without a script call.
    let calls = store.stats().script_calls;
    assert!(!store.check(b"k", &policy, 1).await.unwrap().is_allowed());
    assert_eq!(store.stats().script_calls, calls);
    store
        .adjust(b"k", &policy, Adjustment::Refund(1))
        .await
        .unwrap();
    assert!(store.check(b"k", &policy, 1).await.unwrap().is_allowed());
}

/// What a login endpoint charges: its failures; a success is refunded.
fn failures_only(res: &mut http::response::Parts) -> Settle {
    match res.status {
        StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => Settle::Keep,
        _ => Settle::Refund,
    }
}

async fn login(headers: HeaderMap) -> StatusCode {
    match headers.get("x-password") {
        Some(p) if p == "hunter2" => StatusCode::OK,
        _ => StatusCode::UNAUTHORIZED,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_login_on_redis_counts_only_its_failures() {
    let redis = RedisServer::start();
    let store = RedisStore::connect(&redis.url()).await.unwrap();
    let policy = Policy::gcra("login", "5/10min".parse().unwrap()).unwrap();
    let layer = RateLimitLayer::new(store, policy).charge_by(failures_only);
    let addr = serve(Router::new().route("/login", get(login)).layer(layer)).await;
    let good = [("x-password", "hunter2")];
    let bad = [("x-password", "guess")];
    for round in 0..5 {
        for _ in 0..3 {
            assert_eq!(http_get(addr, "/login", &good).await.status, 200, "{round}");
        }
        assert_eq!(http_get(addr, "/login", &bad).await.status, 401, "{round}");
    }
    assert_eq!(http_get(addr, "/login", &bad).await.status, 429);
    let refused = http_get(addr, "/login", &good).await;
    assert_eq!(refused.status, 429);
    // Five failures of 5 per 10 minutes: the next one comes back in 2 minutes.
    assert_eq!(refused.header("retry-after"), "120");
}

/// A login checked against two policies at once (one script over both keys): a success
/// is refunded in each, a failure counts in each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refund_on_redis_reaches_every_policy_of_the_request() {
    let redis = RedisServer::start();
    let store = RedisStore::connect(&redis.url()).await.unwrap();
    let minute = Policy::gcra("minute", "3/min".parse().unwrap()).unwrap();
    let hour = Policy::gcra("hour", "5/hour".parse().unwrap()).unwrap();
    let layer = RateLimitLayer::new(store.clone(), minute)
        .and_policy(hour.clone())
        // One key, so that the test can read the store's count.
        .key(Global)
        .charge_by(failures_only);
    let addr = serve(Router::new().route("/login", get(login)).layer(layer)).await;
    let good = [("x-password", "hunter2")];
    let bad = [("x-password", "guess")];
    // Twice either quota of successes: each refunded in both policies.
    for i in 0..10 {
        assert_eq!(http_get(addr, "/login", &good).await.status, 200, "{i}");
    }
    // Failures count in both: `minute` runs out after 3, and `hour` has 2 left.
    for i in 0..3 {
        assert_eq!(http_get(addr, "/login", &bad).await.status, 401, "{i}");
    }
    let refused = http_get(addr, "/login", &good).await;
    assert_eq!(refused.status, 429);
    assert!(refused.header("ratelimit").contains("\"minute\";r=0;"));
    let peek = store.check(b"global", &hour, 0).await.unwrap();
    assert_eq!(peek.remaining, 2);
}
