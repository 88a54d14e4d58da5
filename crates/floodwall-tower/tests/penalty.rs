//! Penalties through the layer: a brute-force client is refused by its quota, then banned,
//! told so by `Retry-After` (the ban's remainder) and by a JSON body; the metrics count
//! the ban apart.

use std::time::Duration;

use floodwall_core::{Penalty, Policy, StoreExt};
use floodwall_test_support::*;
use floodwall_tower::extract::PeerIp;
use floodwall_tower::respond::Json;
use floodwall_tower::{RateLimitLayer, Refusals, Wait};
use http::StatusCode;
use tower::{Layer, ServiceExt};

/// 5 logins a minute; 3 refusals within a minute ban the client for 10 minutes.
fn login() -> Policy {
    gcra("login", "5/min")
        .with_penalty(Penalty::new(3, Duration::from_secs(60), Duration::from_secs(600)).unwrap())
}

#[tokio::test]
async fn a_brute_force_client_is_banned_with_retry_after_the_remainder() {
    let (store, clock) = store();
    let svc = RateLimitLayer::new(store, login())
        .refusals(Refusals::new().respond(Json))
        .layer(hello());
    let ip = "203.0.113.9";
    for _ in 0..5 {
        let res = svc.clone().oneshot(from(ip)).await.unwrap();
        assert_eq!(res.status(), StatusCode::OK);
    }
    for _ in 0..2 {
        let res = svc.clone().oneshot(from(ip)).await.unwrap();
        assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(res.headers()["retry-after"], "12");
        assert!(!text(res).await.contains("banned"));
    }
    let banned = svc.clone().oneshot(from(ip)).await.unwrap();
    assert_eq!(banned.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(banned.headers()["retry-after"], "600");
    assert_eq!(
        text(banned).await,
        r#"{"error":"rate_limited","message":"Too Many Requests","retry_after":600,"violated_policies":["login"],"banned":true}"#
    );
    // The quota alone would admit again after 12 s; the ban holds, and Retry-After counts
    // down (whole seconds, rounded up).
    clock.advance(Duration::from_millis(100_500));
    let still = svc.clone().oneshot(from(ip)).await.unwrap();
    assert_eq!(still.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(still.headers()["retry-after"], "500");
    // Another client is not affected.
    let other = svc.clone().oneshot(from("203.0.113.10")).await.unwrap();
    assert_eq!(other.status(), StatusCode::OK);
    // Once the ban is over, the quota decides again.
    clock.advance(Duration::from_millis(499_500));
    let free = svc.oneshot(from(ip)).await.unwrap();
    assert_eq!(free.status(), StatusCode::OK);
}

#[cfg(feature = "wait")]
#[tokio::test]
async fn a_problem_body_says_banned_and_a_waiting_layer_does_not_wait_out_a_ban() {
    let (store, _clock) = store();
    let policy = gcra("login", "1/s")
        .with_penalty(Penalty::new(1, Duration::from_secs(60), Duration::from_secs(2)).unwrap());
    // A wait longer than the ban: the layer still refuses a banned key at once.
    let svc = RateLimitLayer::new(store, policy)
        .refusals(Refusals::new().respond(floodwall_tower::respond::ProblemJson))
        .wait(Wait::up_to(Duration::from_secs(30)).unwrap())
        .unwrap()
        .layer(hello());
    let ip = "198.51.100.4";
    assert_eq!(
        svc.clone().oneshot(from(ip)).await.unwrap().status(),
        StatusCode::OK
    );
    // With waiting on, the quota's refusal would have been waited out; the strike's ban
    // is refused instead.
    let res = svc.oneshot(from(ip)).await.unwrap();
    assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(res.headers()["retry-after"], "2");
    assert!(
        text(res)
            .await
            .ends_with(r#","retry-after":2,"banned":true}"#)
    );
}

#[tokio::test]
async fn an_operator_unbans_a_client_by_its_address() {
    let (store, _clock) = store();
    let policy = login();
    let svc = RateLimitLayer::new(store.clone(), policy.clone()).layer(hello());
    let ip = "2001:db8::7";
    // Five admitted, three refused: the third refusal bans.
    for _ in 0..8 {
        svc.clone().oneshot(from(ip)).await.unwrap();
    }
    // The key the layer's extractor wrote for that client, from its address alone: the
    // whole /64, as the extractor keys IPv6.
    let key = PeerIp::new().key_for("2001:db8::1".parse().unwrap());
    assert_eq!(
        store
            .penalty_state(key.as_bytes(), &policy)
            .await
            .unwrap()
            .banned_for,
        Some(Duration::from_secs(600))
    );
    floodwall_core::StoreExt::unban(&store, key.as_bytes(), &policy)
        .await
        .unwrap();
    assert_eq!(
        store
            .penalty_state(key.as_bytes(), &policy)
            .await
            .unwrap()
            .banned_for,
        None
    );
    // Unbanned; the quota still remembers its five admissions.
    let res = svc.oneshot(from(ip)).await.unwrap();
    assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_ne!(res.headers()["retry-after"], "600");
}
