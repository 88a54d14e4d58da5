//! Responders written in axum's terms (`respond::Axum`): an `impl IntoResponse` answers a
//! refusal with its status, headers and body, and the layer's headers are added; a body
//! that is not complete at once is cut where it stops, with a warning.

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use floodwall_test_support::*;
use floodwall_tower::respond::{Axum, Denial, OnReject, OnStoreFailure};
use floodwall_tower::{RateLimitLayer, Refusals};
use tower::{Layer, ServiceExt};

fn app() -> Router {
    Router::new().route("/", get(|| async { "hello" }))
}

#[tokio::test]
async fn a_denial_answers_what_the_closure_returns_and_the_layers_headers() {
    let (store, _clock) = store();
    let layer = RateLimitLayer::new(store, gcra("per-ip", "1/s")).refusals(
        Refusals::new().respond(Axum(|denial: &Denial| {
            let body = format!(
                r#"{{"error":"slow down","retry_after":{}}}"#,
                denial.retry_after_secs().unwrap()
            );
            (
                StatusCode::TOO_MANY_REQUESTS,
                [
                    (header::CONTENT_TYPE, "application/json"),
                    (header::CACHE_CONTROL, "no-store"),
                ],
                body,
            )
        })),
    );
    let addr = serve(app().layer(layer)).await;

    let ok = http_get(addr, "/", &[]).await;
    assert_eq!((ok.status, ok.body.as_str()), (200, "hello"));

    let refused = http_get(addr, "/", &[]).await;
    assert_eq!(refused.status, 429);
    assert_eq!(refused.body, r#"{"error":"slow down","retry_after":1}"#);
    assert_eq!(refused.header("content-type"), "application/json");
    assert_eq!(refused.header("cache-control"), "no-store");
    assert_eq!(
        refused.header("content-length"),
        refused.body.len().to_string()
    );
    // The layer's own, as for any responder.
    assert_eq!(refused.header("retry-after"), "1");
    assert_eq!(refused.header("ratelimit"), "\"per-ip\";r=0;t=1");
    assert_eq!(refused.header("ratelimit-policy"), "\"per-ip\";q=1;w=1");
}

#[tokio::test]
async fn a_retry_after_the_closure_sets_is_kept() {
    let (store, _clock) = store();
    let svc = RateLimitLayer::new(store, gcra("per-ip", "1/s"))
        .refusals(Refusals::new().respond(Axum(|_: &Denial| {
            let mut res = "later".into_response();
            *res.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
            res.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("120"));
            res
        })))
        .layer(hello());
    svc.clone().oneshot(from("192.0.2.1")).await.unwrap();
    let refused = svc.oneshot(from("192.0.2.1")).await.unwrap();
    assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(refused.headers()["retry-after"], "120");
    assert_eq!(
        refused.headers()["content-type"],
        "text/plain; charset=utf-8"
    );
    assert_eq!(text(refused).await, "later");
}

#[tokio::test]
async fn a_store_failure_answers_what_the_closure_returns() {
    let layer = RateLimitLayer::new(Down, gcra("per-ip", "1/s")).refusals(
        Refusals::new().store_failure(Axum(|error: &floodwall_core::Error| {
            assert!(error.is_unavailable());
            (StatusCode::BAD_GATEWAY, Html("<p>back soon</p>"))
        })),
    );
    let addr = serve(app().layer(layer)).await;
    let res = http_get(addr, "/", &[]).await;
    assert_eq!(res.status, 502);
    assert_eq!(res.header("content-type"), "text/html; charset=utf-8");
    assert_eq!(res.body, "<p>back soon</p>");
}

#[tokio::test(flavor = "current_thread")]
async fn a_streaming_body_is_cut_where_it_stops_and_warned_about() {
    let logs = Logs::default();
    let _guard = tracing::subscriber::set_default(logs.clone());
    let (store, _clock) = store();
    let svc = RateLimitLayer::new(store, gcra("per-ip", "1/s"))
        .refusals(Refusals::new().respond(Axum(|_: &Denial| {
            (
                StatusCode::TOO_MANY_REQUESTS,
                // Wrong once the body is cut: dropped.
                [(header::CONTENT_LENGTH, "1000")],
                Body::new(Partial::stalls(b"Too Many Requests")),
            )
        })))
        .layer(hello());
    svc.clone().oneshot(from("192.0.2.1")).await.unwrap();
    for _ in 0..2 {
        let refused = svc.clone().oneshot(from("192.0.2.1")).await.unwrap();
        assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
        assert!(refused.headers().get(header::CONTENT_LENGTH).is_none());
        assert_eq!(refused.headers()["retry-after"], "1");
        assert_eq!(text(refused).await, "Too Many Requests");
    }
    let warnings: Vec<_> = logs
        .recorded()
        .into_iter()
        .filter(|e| e.level == tracing::Level::WARN && e.target == "floodwall")
        .map(|e| e.message)
        .collect();
    assert_eq!(warnings.len(), 2, "one per refusal: {warnings:?}");
    assert!(
        warnings[0].contains("refusal body cut short: the body was not ready"),
        "{warnings:?}"
    );
}

/// With the `axum` feature on, a closure returning `http::Response<T: Into<Bytes>>` is a
/// responder as before, and both kinds go on one layer.
#[tokio::test]
async fn plain_closures_still_answer_beside_axum_ones() {
    fn is_reject(_: &impl OnReject) {}
    fn is_failure(_: &impl OnStoreFailure) {}
    let plain = |_: &Denial| {
        let mut res = Response::new("plain");
        *res.status_mut() = StatusCode::IM_A_TEAPOT;
        res
    };
    let plain_failure = |_: &floodwall_core::Error| Response::new(String::from("plain"));
    is_reject(&plain);
    is_failure(&plain_failure);

    let (store, _clock) = store();
    let svc = RateLimitLayer::new(store, gcra("per-ip", "1/s"))
        .refusals(
            Refusals::new()
                .respond(plain)
                .store_failure(Axum(|_: &floodwall_core::Error| StatusCode::BAD_GATEWAY)),
        )
        .layer(hello());
    svc.clone().oneshot(from("192.0.2.1")).await.unwrap();
    let refused = svc.oneshot(from("192.0.2.1")).await.unwrap();
    assert_eq!(refused.status(), StatusCode::IM_A_TEAPOT);
    assert_eq!(text(refused).await, "plain");
}
