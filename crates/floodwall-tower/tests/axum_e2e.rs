//! End to end: a real axum server on a loopback port, real HTTP/1.1 on the wire.

use axum::Router;
use axum::routing::get;
use floodwall_test_support::*;
use floodwall_tower::extract::{ExtractKey, MethodRoute, PeerIp};
use floodwall_tower::respond::ProblemJson;
use floodwall_tower::{HeaderStyle, RateLimitLayer, Refusals};

fn app() -> Router {
    Router::new()
        .route("/", get(|| async { "hello" }))
        .route("/users/{id}", get(|| async { "user" }))
}

#[tokio::test]
async fn allowed_and_refused_responses_carry_every_header() {
    let (store, _clock) = store();
    let addr =
        serve(app().layer(RateLimitLayer::new(store, gcra("per-ip", "2/min burst 2")))).await;

    let ok = http_get(addr, "/", &[]).await;
    assert_eq!(ok.status, 200);
    assert_eq!(ok.body, "hello");
    assert_eq!(ok.header("ratelimit-policy"), "\"per-ip\";q=2;w=60");
    assert_eq!(ok.header("ratelimit"), "\"per-ip\";r=1;t=30");
    assert_eq!(ok.header("content-type"), "text/plain; charset=utf-8");
    assert!(ok.get("retry-after").is_none());

    let ok = http_get(addr, "/users/1", &[]).await;
    assert_eq!(ok.header("ratelimit"), "\"per-ip\";r=0;t=60");

    let refused = http_get(addr, "/", &[]).await;
    assert_eq!(refused.status, 429);
    assert_eq!(refused.header("retry-after"), "30");
    assert_eq!(refused.header("ratelimit"), "\"per-ip\";r=0;t=60");
    assert_eq!(refused.header("ratelimit-policy"), "\"per-ip\";q=2;w=60");
    assert_eq!(refused.header("content-type"), "text/plain; charset=utf-8");
    assert_eq!(
        refused.header("content-length"),
        refused.body.len().to_string()
    );
    assert_eq!(refused.body, "Too Many Requests: retry after 30s\n");
}

#[tokio::test]
async fn github_headers_and_problem_json_over_http() {
    let (store, _clock) = store();
    let layer = RateLimitLayer::new(store, gcra("per-ip", "1/s")).refusals(
        Refusals::new()
            .headers(HeaderStyle::GitHub)
            .respond(ProblemJson),
    );
    let addr = serve(app().layer(layer)).await;

    let ok = http_get(addr, "/", &[]).await;
    assert_eq!(ok.status, 200);
    assert_eq!(ok.header("x-ratelimit-limit"), "1");
    assert_eq!(ok.header("x-ratelimit-remaining"), "0");
    let reset: u64 = ok.header("x-ratelimit-reset").parse().unwrap();
    assert!(reset > 1_600_000_000);
    assert!(ok.get("ratelimit").is_none());

    let refused = http_get(addr, "/", &[]).await;
    assert_eq!(refused.status, 429);
    assert_eq!(refused.header("retry-after"), "1");
    assert_eq!(refused.header("x-ratelimit-remaining"), "0");
    assert_eq!(refused.header("content-type"), "application/problem+json");
    assert!(
        refused.body.contains(r#""violated-policies":["per-ip"]"#),
        "{}",
        refused.body
    );
    assert!(refused.body.contains(r#""status":429"#));
}

#[tokio::test]
async fn a_store_failure_is_a_503_with_retry_after() {
    let addr = serve(app().layer(RateLimitLayer::new(Down, gcra("per-ip", "1/s")))).await;
    let res = http_get(addr, "/", &[]).await;
    assert_eq!(res.status, 503);
    assert_eq!(res.header("retry-after"), "1");
    assert_eq!(res.header("content-type"), "text/plain; charset=utf-8");
    assert!(res.get("ratelimit").is_none());
    assert_eq!(
        res.body,
        "Service Unavailable: the rate limiter cannot decide right now\n"
    );
}

#[tokio::test]
async fn routes_are_keyed_by_their_matched_path() {
    let (store, _clock) = store();
    let layer = RateLimitLayer::new(store, gcra("per-route", "1/min"))
        .key(PeerIp::new().and(MethodRoute::new()));
    // `route_layer` runs after routing, where `MatchedPath` is known.
    let addr = serve(app().route_layer(layer)).await;
    assert_eq!(http_get(addr, "/users/1", &[]).await.status, 200);
    // The same route template, another id: the same key.
    assert_eq!(http_get(addr, "/users/2", &[]).await.status, 429);
    assert_eq!(http_get(addr, "/", &[]).await.status, 200);
}

#[tokio::test]
async fn without_connect_info_the_default_key_is_a_clear_500() {
    let (store, _clock) = store();
    let app = app().layer(RateLimitLayer::new(store, gcra("per-ip", "1/s")));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let res = http_get(addr, "/", &[]).await;
    assert_eq!(res.status, 500);
    assert!(
        res.body.contains("into_make_service_with_connect_info"),
        "{}",
        res.body
    );
}
