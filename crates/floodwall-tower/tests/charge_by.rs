//! Charging by the response, end to end over axum: a login endpoint that counts only
//! failures, and an endpoint whose handler sets the request's cost in a header; with two
//! policies, each is settled.

use std::time::Duration;

use axum::Router;
use axum::extract::Path;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::get;
use floodwall_core::{Algorithm, Policy};
use floodwall_test_support::*;
use floodwall_tower::{RateLimitLayer, Settle};

/// A login handler as a user writes it: 200 for the right password, 401 otherwise.
async fn login(headers: HeaderMap) -> StatusCode {
    match headers.get("x-password") {
        Some(p) if p == "hunter2" => StatusCode::OK,
        _ => StatusCode::UNAUTHORIZED,
    }
}

/// Only failed logins count.
fn failures_only(res: &mut http::response::Parts) -> Settle {
    match res.status {
        StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => Settle::Keep,
        _ => Settle::Refund,
    }
}

#[tokio::test]
async fn a_login_allows_five_failures_per_ten_minutes_and_successes_never_count() {
    for alg in [
        Algorithm::SlidingLog,
        Algorithm::Gcra,
        Algorithm::FixedWindow,
    ] {
        let (store, clock) = store();
        let policy = Policy::new("login", alg, "5/10min".parse().unwrap()).unwrap();
        let layer = RateLimitLayer::new(store, policy).charge_by(failures_only);
        let addr = serve(Router::new().route("/login", get(login)).layer(layer)).await;
        let good = [("x-password", "hunter2")];
        let bad = [("x-password", "guess")];
        for round in 0..5 {
            // Successes in between never count.
            for _ in 0..3 {
                assert_eq!(http_get(addr, "/login", &good).await.status, 200, "{alg}");
            }
            assert_eq!(
                http_get(addr, "/login", &bad).await.status,
                401,
                "{alg} {round}"
            );
        }
        // Five failures: the sixth attempt is refused before the handler runs, even with
        // the right password.
        assert_eq!(http_get(addr, "/login", &bad).await.status, 429, "{alg}");
        assert_eq!(http_get(addr, "/login", &good).await.status, 429, "{alg}");
        clock.advance(Duration::from_secs(600));
        assert_eq!(http_get(addr, "/login", &good).await.status, 200, "{alg}");
    }
}

#[tokio::test]
async fn a_cost_header_the_handler_sets_is_charged_exactly_and_stripped() {
    let (store, _clock) = store();
    // 100 tokens a minute, as an LLM gateway might sell them.
    let policy = gcra("tokens", "100/min");
    let layer = RateLimitLayer::new(store, policy).charge_by(|res: &mut http::response::Parts| {
        let used = res.headers.remove("x-llm-tokens");
        match used.and_then(|v| v.to_str().ok()?.parse().ok()) {
            Some(tokens) => Settle::Cost(tokens),
            None => Settle::Keep,
        }
    });
    let app = Router::new()
        .route(
            "/complete/{tokens}",
            get(|Path(tokens): Path<u64>| async move {
                ([("x-llm-tokens", tokens.to_string())], "answer")
            }),
        )
        .layer(layer);
    let addr = serve(app).await;
    let first = http_get(addr, "/complete/40", &[]).await;
    assert_eq!(first.status, 200);
    assert!(
        first.get("x-llm-tokens").is_none(),
        "the header is stripped"
    );
    // The check before the handler spends 1; the answer cost 40 in all.
    let second = http_get(addr, "/complete/40", &[]).await;
    assert!(
        second.header("ratelimit").contains(";r=59;"),
        "{}",
        second.header("ratelimit")
    );
    let third = http_get(addr, "/complete/50", &[]).await;
    assert!(
        third.header("ratelimit").contains(";r=19;"),
        "{}",
        third.header("ratelimit")
    );
    // 130 spent of 100: the debt of 30, and one more token, take 31 × 600 ms to come back.
    let refused = http_get(addr, "/complete/1", &[]).await;
    assert_eq!(refused.status, 429);
    assert_eq!(refused.header("retry-after"), "19");
}

#[tokio::test]
async fn a_layer_without_a_rule_charges_the_check_only() {
    let (store, _clock) = store();
    let layer = RateLimitLayer::new(store, gcra("login", "2/min"));
    let addr = serve(Router::new().route("/login", get(login)).layer(layer)).await;
    let good = [("x-password", "hunter2")];
    assert_eq!(http_get(addr, "/login", &good).await.status, 200);
    assert_eq!(http_get(addr, "/login", &good).await.status, 200);
    assert_eq!(http_get(addr, "/login", &good).await.status, 429);
}

/// `charge_by` settles each policy the request was checked against, not the first only:
/// a refund gives back what every policy charged, and a cost is charged in each.
#[tokio::test]
async fn a_settlement_reaches_every_policy_of_the_request() {
    let (memory, _clock) = store();
    let layer = RateLimitLayer::new(memory, gcra("minute", "3/min"))
        .and_policy(gcra("hour", "5/hour"))
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
    let ratelimit = refused.header("ratelimit");
    assert!(
        ratelimit.contains("\"minute\";r=0;") && ratelimit.contains("\"hour\";r=2;"),
        "{ratelimit}"
    );

    // A cost is charged in each policy too.
    let (fresh, _clock) = store();
    let layer = RateLimitLayer::new(fresh, gcra("minute", "100/min"))
        .and_policy(gcra("hour", "1000/hour"))
        .charge_by(|_: &mut http::response::Parts| Settle::Cost(40));
    let addr = serve(
        Router::new()
            .route("/", get(|| async { "answer" }))
            .layer(layer),
    )
    .await;
    assert_eq!(http_get(addr, "/", &[]).await.status, 200);
    // The first cost 40 in all; this check spends 1 more in each.
    let second = http_get(addr, "/", &[]).await;
    let ratelimit = second.header("ratelimit");
    assert!(
        ratelimit.contains("\"minute\";r=59;") && ratelimit.contains("\"hour\";r=959;"),
        "{ratelimit}"
    );
}
