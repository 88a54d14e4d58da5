//! How the layer refuses and fails: the responders (problem+json, closures, gRPC), the
//! error mode, the inner service's body type kept, a store that is down (503, fail-open,
//! fail modes) and a missing key.

use super::*;

#[tokio::test]
async fn a_store_failure_is_a_503_not_a_429_unless_failing_open() {
    let svc = RateLimitLayer::new(Down, gcra("p", "1/s")).layer(hello());
    let res = svc.oneshot(from("192.0.2.1")).await.unwrap();
    assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(res.headers()["retry-after"], "1");
    assert!(!res.headers().contains_key("ratelimit"));
    assert_eq!(
        text(res).await,
        "Service Unavailable: the rate limiter cannot decide right now\n"
    );

    let open = RateLimitLayer::new(Down, gcra("p", "1/s"))
        .fail_mode(floodwall_core::resilience::FailMode::Open)
        .layer(hello());
    let res = open.oneshot(from("192.0.2.1")).await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(text(res).await, "hello");

    let custom = RateLimitLayer::new(Down, gcra("p", "1/s"))
        .refusals(Refusals::new().store_failure(|e: &floodwall_core::Error| {
            assert!(e.is_unavailable());
            let mut res = Response::new("down");
            *res.status_mut() = StatusCode::BAD_GATEWAY;
            res
        }))
        .layer(hello());
    let res = custom.oneshot(from("192.0.2.1")).await.unwrap();
    assert_eq!(res.status(), StatusCode::BAD_GATEWAY);
}

#[tokio::test]
async fn fail_mode_serves_each_mode_while_the_store_is_down() {
    use floodwall_core::resilience::FailMode;
    // Local: this process decides with half the quota (two nodes); `RateLimit` counts
    // down that share, `RateLimit-Policy` still names the fleet's quota.
    let local = RateLimitLayer::new(Down, gcra("p", "4/s"))
        .fail_mode(FailMode::local(2))
        .layer(hello());
    let mut answers = Vec::new();
    for _ in 0..3 {
        let res = local.clone().oneshot(from("192.0.2.1")).await.unwrap();
        let limit = res.headers().get("ratelimit").cloned();
        answers.push((res.status(), limit));
        assert_eq!(res.headers()["ratelimit-policy"], "\"p\";q=4;w=1");
    }
    let limit = |v: &str| Some(http::HeaderValue::from_str(v).unwrap());
    assert_eq!(
        answers,
        [
            (StatusCode::OK, limit("\"p\";r=1;t=1")),
            (StatusCode::OK, limit("\"p\";r=0;t=1")),
            (StatusCode::TOO_MANY_REQUESTS, limit("\"p\";r=0;t=1")),
        ]
    );
    // Open: every request goes through.
    let open = RateLimitLayer::new(Down, gcra("p", "1/s"))
        .fail_mode(FailMode::Open)
        .layer(hello());
    for _ in 0..3 {
        let res = open.clone().oneshot(from("192.0.2.1")).await.unwrap();
        assert_eq!(res.status(), StatusCode::OK);
    }
    // Closed: the store-failure response, with when to come back.
    let closed = RateLimitLayer::new(Down, gcra("p", "1/s"))
        .fail_mode(FailMode::Closed)
        .layer(hello());
    let res = closed.oneshot(from("192.0.2.1")).await.unwrap();
    assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(res.headers().contains_key("retry-after"));
}

#[tokio::test]
async fn a_missing_key_is_refused_skipped_or_falls_back() {
    let (store, _clock) = store();
    let no_peer = || Request::new(Body::empty());

    let svc = RateLimitLayer::new(store.clone(), gcra("p", "1/s")).layer(hello());
    let res = svc.oneshot(no_peer()).await.unwrap();
    assert_eq!(res.status(), StatusCode::INTERNAL_SERVER_ERROR);
    assert!(
        text(res)
            .await
            .starts_with("no rate-limit key: no peer address")
    );

    let api_key = HeaderKey::new(http::HeaderName::from_static("x-api-key"));
    let svc = RateLimitLayer::new(store.clone(), gcra("p", "1/s"))
        .key(api_key.clone())
        .refusals(Refusals::new().missing_key(OnMissingKey::RejectWith(StatusCode::UNAUTHORIZED)))
        .layer(hello());
    assert_eq!(
        svc.oneshot(no_peer()).await.unwrap().status(),
        StatusCode::UNAUTHORIZED
    );

    let svc = RateLimitLayer::new(store.clone(), gcra("p", "1/s"))
        .key(api_key.clone())
        .refusals(Refusals::new().missing_key(OnMissingKey::Skip))
        .layer(hello());
    for _ in 0..3 {
        let res = svc.clone().oneshot(no_peer()).await.unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        assert!(!res.headers().contains_key("ratelimit"));
    }

    // Falling back to one global key: the second keyless request is limited.
    let svc = RateLimitLayer::new(store, gcra("p", "1/s"))
        .key(api_key.or(Global))
        .layer(hello());
    assert_eq!(
        svc.clone().oneshot(no_peer()).await.unwrap().status(),
        StatusCode::OK
    );
    assert_eq!(
        svc.clone().oneshot(no_peer()).await.unwrap().status(),
        StatusCode::TOO_MANY_REQUESTS
    );
    let mut keyed = no_peer();
    keyed
        .headers_mut()
        .insert("x-api-key", "k1".parse().unwrap());
    assert_eq!(svc.oneshot(keyed).await.unwrap().status(), StatusCode::OK);
}

#[tokio::test]
async fn error_mode_returns_rate_limited_and_store_errors() {
    let (store, _clock) = store();
    let svc = RateLimitLayer::new(store, gcra("p", "1/s"))
        .reject_with_error()
        .layer(hello());
    assert!(svc.clone().oneshot(from("192.0.2.1")).await.is_ok());
    let err = svc.clone().oneshot(from("192.0.2.1")).await.unwrap_err();
    assert!(err.is::<RateLimited>());
    let limited = err.downcast_ref::<RateLimited>().unwrap();
    assert_eq!(limited.retry_after(), Some(Duration::from_secs(1)));

    let err = svc.oneshot(Request::new(Body::empty())).await.unwrap_err();
    assert!(err.is::<floodwall_tower::extract::KeyError>());

    let down = RateLimitLayer::new(Down, gcra("p", "1/s"))
        .reject_with_error()
        .layer(hello());
    let err = down.oneshot(from("192.0.2.1")).await.unwrap_err();
    let store_err = err.downcast_ref::<floodwall_core::Error>().unwrap();
    assert!(store_err.is_unavailable());
}

#[tokio::test]
async fn responses_keep_the_inner_services_body_type() {
    // axum's `Body` in, axum's `Body` out: axum and tonic take it through without boxing it
    // again, in both modes.
    fn answers_with_axum_bodies<S: tower::Service<Request<Body>, Response = Response<Body>>>(
        svc: S,
    ) -> S {
        svc
    }
    let (memory, _clock) = store();
    let svc =
        answers_with_axum_bodies(RateLimitLayer::new(memory, gcra("p", "1/s")).layer(hello()));
    assert_eq!(
        text(svc.clone().oneshot(from("192.0.2.1")).await.unwrap()).await,
        "hello"
    );
    let refused = svc.oneshot(from("192.0.2.1")).await.unwrap();
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(text(refused).await, "Too Many Requests: retry after 1s\n");
    let (memory, _clock) = store();
    let errors = answers_with_axum_bodies(
        RateLimitLayer::new(memory, gcra("p", "1/s"))
            .reject_with_error()
            .layer(hello()),
    );
    assert!(errors.oneshot(from("192.0.2.1")).await.is_ok());

    // A `String` body: the refusal is written into one.
    let (memory, _clock) = store();
    let svc = RateLimitLayer::new(memory, gcra("p", "1/s")).layer(tower::service_fn(
        |_req: Request<Body>| async {
            Ok::<_, std::convert::Infallible>(Response::new(String::from("hi")))
        },
    ));
    let ok: Response<String> = svc.clone().oneshot(from("192.0.2.1")).await.unwrap();
    assert_eq!(ok.body(), "hi");
    let refused: Response<String> = svc.oneshot(from("192.0.2.1")).await.unwrap();
    assert_eq!(refused.body(), "Too Many Requests: retry after 1s\n");
}

#[tokio::test]
async fn problem_json_and_closure_responders() {
    let (store, _clock) = store();
    let svc = RateLimitLayer::new(store.clone(), gcra("per-ip", "1/s"))
        .refusals(Refusals::new().respond(ProblemJson))
        .layer(hello());
    svc.clone().oneshot(from("192.0.2.1")).await.unwrap();
    let res = svc.oneshot(from("192.0.2.1")).await.unwrap();
    assert_eq!(res.headers()["content-type"], "application/problem+json");
    assert_eq!(
        text(res).await,
        concat!(
            r#"{"type":"https://iana.org/assignments/http-problem-types#quota-exceeded","#,
            r#""title":"Request cannot be satisfied as assigned quota has been exceeded","#,
            r#""status":429,"violated-policies":["per-ip"],"retry-after":1}"#
        )
    );

    let svc = RateLimitLayer::new(store, gcra("other", "1/s"))
        .refusals(Refusals::new().respond(|d: &Denial| {
            let mut res = Response::new(format!("{:?}", d.violated().collect::<Vec<_>>()));
            *res.status_mut() = StatusCode::IM_A_TEAPOT;
            res
        }))
        .layer(hello());
    svc.clone().oneshot(from("192.0.2.1")).await.unwrap();
    let res = svc.oneshot(from("192.0.2.1")).await.unwrap();
    assert_eq!(res.status(), StatusCode::IM_A_TEAPOT);
    // The layer adds what the closure left out.
    assert_eq!(res.headers()["retry-after"], "1");
    assert_eq!(res.headers()["ratelimit"], "\"other\";r=0;t=1");
    assert_eq!(text(res).await, r#"["other"]"#);
}

#[tokio::test]
async fn grpc_refusals_are_trailers_only_resource_exhausted() {
    let (store, _clock) = store();
    let svc = RateLimitLayer::new(store, gcra("rpc", "1/s"))
        .refusals(Refusals::new().respond(Grpc))
        .layer(hello());
    svc.clone().oneshot(from("192.0.2.1")).await.unwrap();
    let res = svc.oneshot(from("192.0.2.1")).await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let h = res.headers();
    assert_eq!(h["content-type"], "application/grpc");
    assert_eq!(h["grpc-status"], "8");
    assert_eq!(h["grpc-message"], "rate limit exceeded, retry after 1s");
    assert_eq!(h["retry-after"], "1");
    assert_eq!(h["grpc-retry-pushback-ms"], "1000");
    assert_eq!(text(res).await, "");
}
