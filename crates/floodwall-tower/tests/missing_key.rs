//! A request without its key is answered by the responder the layer was configured with
//! (plain text, JSON, problem+json, gRPC, one's own), through its `OnReject::missing_key`
//! that names what was missing, with the status `OnMissingKey` says: the same for the
//! rate and the in-flight layers. A responder written for refusals only (a closure,
//! axum's) answers a missing key with the provided plain text, never with its 429.

use axum::body::Body;
use axum::response::{Html, IntoResponse};
use floodwall_core::{ConcurrencyLimit, MemoryStore};
use floodwall_test_support::*;
use floodwall_tower::extract::{HeaderKey, KeyError, OnMissingKey};
use floodwall_tower::respond::{Axum, Denial, Grpc, Json, OnReject, ProblemJson};
use floodwall_tower::{ConcurrencyLimitLayer, RateLimitLayer, Refusals};
use http::{HeaderName, Request, StatusCode};
use tower::{Layer, ServiceExt};

/// What a refusal looked like: status, content type, body.
#[derive(Debug, PartialEq, Eq)]
struct Answer {
    status: StatusCode,
    content_type: String,
    body: String,
}

async fn answer<B>(res: http::Response<B>) -> Answer
where
    B: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    let content_type = res
        .headers()
        .get("content-type")
        .map_or("", |v| v.to_str().unwrap())
        .to_owned();
    Answer {
        status: res.status(),
        content_type,
        body: text(res).await,
    }
}

fn api_key() -> HeaderKey {
    HeaderKey::new(HeaderName::from_static("x-api-key"))
}

/// A request from a known peer, without the `x-api-key` header.
fn keyless() -> Request<Body> {
    from("203.0.113.7")
}

/// What the rate layer and the in-flight layer answer a keyless request with, each
/// configured with `responder` and `on_missing`.
async fn both_layers(
    responder: impl OnReject + Clone,
    on_missing: OnMissingKey,
) -> (Answer, Answer) {
    let (store, _clock) = store();
    let rate = RateLimitLayer::new(store, gcra("per-key", "10/s"))
        .key(api_key())
        .refusals(
            Refusals::new()
                .respond(responder.clone())
                .missing_key(on_missing),
        )
        .layer(hello());
    let in_flight = ConcurrencyLimitLayer::new(
        MemoryStore::new(),
        ConcurrencyLimit::new("jobs", 2).unwrap(),
    )
    .key(api_key())
    .refusals(Refusals::new().respond(responder).missing_key(on_missing))
    .layer(hello());
    let rate = answer(rate.oneshot(keyless()).await.unwrap()).await;
    let in_flight = answer(in_flight.oneshot(keyless()).await.unwrap()).await;
    (rate, in_flight)
}

/// Asserts both layers answered alike, and returns that answer.
#[track_caller]
fn alike((rate, in_flight): (Answer, Answer)) -> Answer {
    assert_eq!(
        rate, in_flight,
        "the rate and in-flight layers answer alike"
    );
    rate
}

#[tokio::test]
async fn the_default_responder_answers_400_in_plain_text_naming_the_header() {
    let (store, _clock) = store();
    // The default responder, as a layer that never calls `on_reject` has it.
    let rate = RateLimitLayer::new(store, gcra("per-key", "10/s"))
        .key(api_key())
        .layer(hello());
    let in_flight = ConcurrencyLimitLayer::new(
        MemoryStore::new(),
        ConcurrencyLimit::new("jobs", 2).unwrap(),
    )
    .key(api_key())
    .layer(hello());
    let got = alike((
        answer(rate.oneshot(keyless()).await.unwrap()).await,
        answer(in_flight.oneshot(keyless()).await.unwrap()).await,
    ));
    assert_eq!(
        got,
        Answer {
            status: StatusCode::BAD_REQUEST,
            content_type: "text/plain; charset=utf-8".into(),
            body: "no rate-limit key: the x-api-key header is missing or empty\n".into(),
        }
    );
}

#[tokio::test]
async fn json_answers_a_missing_key_object_naming_the_header() {
    let got = alike(both_layers(Json, OnMissingKey::Reject).await);
    assert_eq!(got.status, StatusCode::BAD_REQUEST);
    assert_eq!(got.content_type, "application/json");
    assert_eq!(
        got.body,
        concat!(
            r#"{"error":"missing_key","#,
            r#""message":"no rate-limit key: the x-api-key header is missing or empty","#,
            r#""missing":"x-api-key"}"#
        )
    );
}

#[tokio::test]
async fn problem_json_answers_a_problem_of_the_status_naming_the_header() {
    let got = alike(both_layers(ProblemJson, OnMissingKey::Reject).await);
    assert_eq!(got.status, StatusCode::BAD_REQUEST);
    assert_eq!(got.content_type, "application/problem+json");
    assert_eq!(
        got.body,
        concat!(
            r#"{"type":"about:blank","title":"Bad Request","status":400,"#,
            r#""detail":"no rate-limit key: the x-api-key header is missing or empty","#,
            r#""missing":"x-api-key"}"#
        )
    );
    // With another status, the problem is of that status.
    let got = alike(
        both_layers(
            ProblemJson,
            OnMissingKey::RejectWith(StatusCode::UNAUTHORIZED),
        )
        .await,
    );
    assert_eq!(got.status, StatusCode::UNAUTHORIZED);
    assert!(
        got.body
            .starts_with(r#"{"type":"about:blank","title":"Unauthorized","status":401,"#),
        "{}",
        got.body
    );
}

/// A responder of one's own that answers a missing key in its own format.
#[derive(Clone, Copy)]
struct HtmlResponder;

impl OnReject for HtmlResponder {
    fn respond(&self, _: &Denial) -> http::Response<bytes::Bytes> {
        let mut res = http::Response::new("slow down".into());
        *res.status_mut() = StatusCode::TOO_MANY_REQUESTS;
        res
    }

    fn missing_key(&self, error: &KeyError) -> http::Response<bytes::Bytes> {
        let mut res = http::Response::new(format!("<p>send your {}</p>", error.missing()).into());
        *res.status_mut() = error.status();
        res.headers_mut().insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("text/html; charset=utf-8"),
        );
        res
    }
}

#[tokio::test]
async fn a_responder_of_ones_own_tells_a_missing_key_from_a_refusal() {
    let responder = HtmlResponder;
    let got = alike(both_layers(responder, OnMissingKey::Reject).await);
    assert_eq!(
        got,
        Answer {
            status: StatusCode::BAD_REQUEST,
            content_type: "text/html; charset=utf-8".into(),
            body: "<p>send your x-api-key</p>".into(),
        }
    );
    // `RejectWith` is the status the responder is told.
    let got = alike(
        both_layers(
            responder,
            OnMissingKey::RejectWith(StatusCode::UNAUTHORIZED),
        )
        .await,
    );
    assert_eq!(got.status, StatusCode::UNAUTHORIZED);
    assert_eq!(got.body, "<p>send your x-api-key</p>");
}

#[tokio::test]
async fn a_responder_for_refusals_never_turns_a_missing_key_into_its_429() {
    let plain = Answer {
        status: StatusCode::UNAUTHORIZED,
        content_type: "text/plain; charset=utf-8".into(),
        body: "no rate-limit key: the x-api-key header is missing or empty\n".into(),
    };
    let teapot = |_: &Denial| {
        let mut res = http::Response::new("slow down");
        *res.status_mut() = StatusCode::TOO_MANY_REQUESTS;
        res
    };
    let unauthorized = OnMissingKey::RejectWith(StatusCode::UNAUTHORIZED);
    assert_eq!(alike(both_layers(teapot, unauthorized).await), plain);
    let axum =
        Axum(|_: &Denial| (StatusCode::TOO_MANY_REQUESTS, Html("slow down")).into_response());
    assert_eq!(alike(both_layers(axum, unauthorized).await), plain);
}

#[tokio::test]
async fn the_plain_responder_answers_reject_with_s_status() {
    let got = alike(
        both_layers(
            floodwall_tower::respond::TooManyRequests,
            OnMissingKey::RejectWith(StatusCode::UNAUTHORIZED),
        )
        .await,
    );
    assert_eq!(got.status, StatusCode::UNAUTHORIZED);
    assert_eq!(
        got.body,
        "no rate-limit key: the x-api-key header is missing or empty\n"
    );
}

#[tokio::test]
async fn grpc_answers_a_missing_key_with_the_status_s_grpc_code() {
    for (on_missing, code) in [
        (OnMissingKey::Reject, "3"), // INVALID_ARGUMENT
        (OnMissingKey::RejectWith(StatusCode::UNAUTHORIZED), "16"), // UNAUTHENTICATED
    ] {
        let (store, _clock) = store();
        let rate = RateLimitLayer::new(store, gcra("per-key", "10/s"))
            .key(api_key())
            .refusals(Refusals::new().respond(Grpc).missing_key(on_missing))
            .layer(hello());
        let res = rate.oneshot(keyless()).await.unwrap();
        assert_eq!(res.status(), StatusCode::OK, "gRPC answers in trailers");
        assert_eq!(res.headers()["content-type"], "application/grpc");
        assert_eq!(res.headers()["grpc-status"], code);
        assert_eq!(
            res.headers()["grpc-message"],
            "no rate-limit key: the x-api-key header is missing or empty"
        );
        assert!(res.headers().get("retry-after").is_none());
    }
}

#[tokio::test]
async fn a_bearer_token_and_the_peer_address_are_named_too() {
    let (store, _clock) = store();
    let bearer = RateLimitLayer::new(store.clone(), gcra("per-token", "10/s"))
        .key(HeaderKey::bearer())
        .refusals(Refusals::new().respond(Json))
        .layer(hello());
    let got = answer(bearer.oneshot(keyless()).await.unwrap()).await;
    assert_eq!(got.status, StatusCode::BAD_REQUEST);
    assert!(
        got.body.ends_with(r#""missing":"authorization"}"#),
        "{}",
        got.body
    );

    // No peer address: the server's misconfiguration, a 500 that says what is missing.
    let peer = RateLimitLayer::new(store, gcra("per-ip", "10/s"))
        .refusals(Refusals::new().respond(Json))
        .layer(hello());
    let got = answer(peer.oneshot(Request::new(Body::empty())).await.unwrap()).await;
    assert_eq!(got.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert!(
        got.body.ends_with(r#""missing":"peer address"}"#),
        "{}",
        got.body
    );
}

#[tokio::test]
async fn the_error_mode_hands_back_the_key_error_with_its_status() {
    let (store, _clock) = store();
    let svc = RateLimitLayer::new(store, gcra("per-key", "10/s"))
        .key(api_key())
        .refusals(Refusals::new().missing_key(OnMissingKey::RejectWith(StatusCode::UNAUTHORIZED)))
        .reject_with_error()
        .layer(hello());
    let err = svc.oneshot(keyless()).await.unwrap_err();
    let err = err.downcast_ref::<KeyError>().unwrap();
    assert_eq!(err.missing(), "x-api-key");
    assert_eq!(err.status(), StatusCode::UNAUTHORIZED);
}
