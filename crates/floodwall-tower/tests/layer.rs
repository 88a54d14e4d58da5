//! The service, driven with `tower::ServiceExt::oneshot`: decisions, headers, policies,
//! costs, shadow mode and keys. How it refuses and fails (responders, the error mode, the
//! body type, store failures, missing keys): `layer/refusals.rs`.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use floodwall_core::{Algorithm, Policy, StoreExt};
use floodwall_test_support::*;
use floodwall_tower::choose::{Choice, PolicyMap};
use floodwall_tower::extract::{ExtractKey, Global, HeaderKey, OnMissingKey};
use floodwall_tower::respond::{Denial, Grpc, Json, ProblemJson};
use floodwall_tower::{Enforcement, HeaderStyle, Modes, RateLimitLayer, RateLimited, Refusals};
use http::request::Parts;
use http::{Request, Response, StatusCode};
use tower::{Layer, ServiceExt};

#[path = "layer/refusals.rs"]
mod refusals;

#[tokio::test]
async fn allows_then_refuses_with_429_retry_after_and_ietf_headers() {
    let (store, clock) = store();
    let svc = RateLimitLayer::new(store, gcra("per-ip", "2/s")).layer(hello());

    let first = svc.clone().oneshot(from("203.0.113.1")).await.unwrap();
    assert_eq!(first.status(), StatusCode::OK);
    assert_eq!(first.headers()["ratelimit-policy"], "\"per-ip\";q=2;w=1");
    assert_eq!(first.headers()["ratelimit"], "\"per-ip\";r=1;t=1");
    assert!(first.headers().get("retry-after").is_none());
    assert_eq!(text(first).await, "hello");

    let second = svc.clone().oneshot(from("203.0.113.1")).await.unwrap();
    assert_eq!(second.headers()["ratelimit"], "\"per-ip\";r=0;t=1");

    let refused = svc.clone().oneshot(from("203.0.113.1")).await.unwrap();
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(refused.headers()["retry-after"], "1");
    assert_eq!(refused.headers()["ratelimit"], "\"per-ip\";r=0;t=1");
    assert_eq!(refused.headers()["ratelimit-policy"], "\"per-ip\";q=2;w=1");
    assert_eq!(
        refused.headers()["content-type"],
        "text/plain; charset=utf-8"
    );
    assert_eq!(text(refused).await, "Too Many Requests: retry after 1s\n");

    // Another client is not affected; time heals.
    let other = svc.clone().oneshot(from("203.0.113.2")).await.unwrap();
    assert_eq!(other.status(), StatusCode::OK);
    clock.advance(Duration::from_millis(500));
    let later = svc.oneshot(from("203.0.113.1")).await.unwrap();
    assert_eq!(later.status(), StatusCode::OK);
}

#[tokio::test]
async fn retry_after_is_whole_seconds_rounded_up() {
    let (store, _clock) = store();
    let svc = RateLimitLayer::new(store, gcra("slow", "1/90s")).layer(hello());
    svc.clone().oneshot(from("192.0.2.1")).await.unwrap();
    let refused = svc.oneshot(from("192.0.2.1")).await.unwrap();
    assert_eq!(refused.headers()["retry-after"], "90");
    assert_eq!(refused.headers()["ratelimit-policy"], "\"slow\";q=1;w=90");
}

#[tokio::test]
async fn github_and_no_headers() {
    let (store, _clock) = store();
    let layer = RateLimitLayer::new(store, gcra("p", "5/s"))
        .refusals(Refusals::new().headers(HeaderStyle::GitHub));
    let res = layer
        .layer(hello())
        .oneshot(from("192.0.2.1"))
        .await
        .unwrap();
    assert_eq!(res.headers()["x-ratelimit-limit"], "5");
    assert_eq!(res.headers()["x-ratelimit-remaining"], "4");
    assert!(res.headers().contains_key("x-ratelimit-reset"));
    assert!(!res.headers().contains_key("ratelimit"));

    let (store2, _clock) = floodwall_test_support::store();
    let layer = RateLimitLayer::new(store2, gcra("p", "1/s"))
        .refusals(Refusals::new().headers(HeaderStyle::None));
    let svc = layer.layer(hello());
    let res = svc.clone().oneshot(from("192.0.2.1")).await.unwrap();
    assert!(!res.headers().contains_key("ratelimit"));
    assert!(!res.headers().contains_key("x-ratelimit-limit"));
    let refused = svc.oneshot(from("192.0.2.1")).await.unwrap();
    assert_eq!(refused.headers()["retry-after"], "1");
}

#[tokio::test]
async fn every_policy_must_pass_and_a_denial_consumes_none() {
    let (store, _clock) = store();
    let burst = gcra("burst", "2/s");
    let hourly = Policy::new("hourly", Algorithm::FixedWindow, "10/hour".parse().unwrap()).unwrap();
    let svc = RateLimitLayer::new(store.clone(), burst.clone())
        .and_policy(hourly.clone())
        .layer(hello());

    for _ in 0..2 {
        let ok = svc.clone().oneshot(from("192.0.2.9")).await.unwrap();
        assert_eq!(ok.status(), StatusCode::OK);
    }
    let refused = svc.clone().oneshot(from("192.0.2.9")).await.unwrap();
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(
        refused.headers()["ratelimit"],
        "\"burst\";r=0;t=1, \"hourly\";r=8;t=3600"
    );
    assert_eq!(
        refused.headers()["ratelimit-policy"],
        "\"burst\";q=2;w=1, \"hourly\";q=10;w=3600"
    );
    // The denied request did not count against "hourly": 2 spent, 8 left (a peek costs
    // nothing).
    let key = [4u8, 192, 0, 2, 9];
    let peek = store.check_now(&key, &hourly, 0).unwrap().unwrap();
    assert_eq!(peek.remaining, 8);
}

#[tokio::test]
async fn the_hourly_policy_refuses_when_it_is_spent() {
    let (store, clock) = store();
    let svc = RateLimitLayer::new(store, gcra("burst", "10/s"))
        .and_policy(
            Policy::new("hourly", Algorithm::FixedWindow, "2/hour".parse().unwrap()).unwrap(),
        )
        .refusals(Refusals::new().respond(Json))
        .layer(hello());
    for _ in 0..2 {
        svc.clone().oneshot(from("192.0.2.9")).await.unwrap();
        clock.advance(Duration::from_secs(1));
    }
    let refused = svc.oneshot(from("192.0.2.9")).await.unwrap();
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    // The hour's window started 2s ago.
    let retry = 3598;
    assert_eq!(refused.headers()["retry-after"], "3598");
    assert_eq!(refused.headers()["content-type"], "application/json");
    assert_eq!(
        text(refused).await,
        format!(
            r#"{{"error":"rate_limited","message":"Too Many Requests","retry_after":{retry},"violated_policies":["hourly"]}}"#
        )
    );
}

#[tokio::test]
async fn policies_are_chosen_per_route_and_routes_can_be_exempt() {
    let (store, _clock) = store();
    let strict = gcra("login", "1/min");
    let svc = RateLimitLayer::new(store, gcra("default", "100/s"))
        .choose(move |req: &Parts, _key: &[u8]| match req.uri.path() {
            "/login" => Choice::Policy(strict.clone()),
            "/health" => Choice::Skip,
            _ => Choice::Default,
        })
        .layer(hello());
    let get = |path: &str| {
        let mut req = from("192.0.2.1");
        *req.uri_mut() = path.parse().unwrap();
        req
    };
    let res = svc.clone().oneshot(get("/login")).await.unwrap();
    assert_eq!(res.headers()["ratelimit"], "\"login\";r=0;t=60");
    let res = svc.clone().oneshot(get("/login")).await.unwrap();
    assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
    let res = svc.clone().oneshot(get("/other")).await.unwrap();
    assert_eq!(res.headers()["ratelimit"], "\"default\";r=99;t=1");
    for _ in 0..3 {
        let res = svc.clone().oneshot(get("/health")).await.unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        assert!(!res.headers().contains_key("ratelimit"));
    }
}

#[tokio::test]
async fn tiers_by_key_prefix() {
    let (store, _clock) = store();
    let tier_key = |req: &Parts| {
        let user = req.headers.get("x-user")?.to_str().ok()?;
        let tier = if user.starts_with("vip") {
            "pro"
        } else {
            "free"
        };
        Some(format!("{tier}:{user}"))
    };
    let svc = RateLimitLayer::new(store, gcra("default", "1/s"))
        .key(tier_key)
        .choose(
            PolicyMap::new()
                .prefix("free:", gcra("free", "1/min"))
                .prefix("pro:", gcra("pro", "100/min")),
        )
        .layer(hello());
    let as_user = |user: &str| {
        Request::builder()
            .header("x-user", user)
            .body(Body::empty())
            .unwrap()
    };
    let res = svc.clone().oneshot(as_user("bob")).await.unwrap();
    assert_eq!(res.headers()["ratelimit"], "\"free\";r=0;t=60");
    let res = svc.clone().oneshot(as_user("vip-ann")).await.unwrap();
    assert_eq!(res.headers()["ratelimit"], "\"pro\";r=99;t=1");
}

#[tokio::test]
async fn cost_is_per_request_and_an_impossible_cost_is_refused_without_retry_after() {
    let (store, _clock) = store();
    let svc = RateLimitLayer::new(store, gcra("bytes", "10/s"))
        .cost(|req: &Parts| {
            req.headers
                .get("x-cost")
                .and_then(|v| v.to_str().ok()?.parse().ok())
                .unwrap_or(1)
        })
        .layer(hello());
    let costing = |n: &str| {
        let mut req = from("192.0.2.1");
        req.headers_mut().insert("x-cost", n.parse().unwrap());
        req
    };
    let res = svc.clone().oneshot(costing("7")).await.unwrap();
    assert_eq!(res.headers()["ratelimit"], "\"bytes\";r=3;t=1");
    let res = svc.clone().oneshot(costing("4")).await.unwrap();
    assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(res.headers().contains_key("retry-after"));
    let res = svc.clone().oneshot(costing("11")).await.unwrap();
    assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(!res.headers().contains_key("retry-after"));
    assert_eq!(
        text(res).await,
        "Too Many Requests: this request costs 11, more than the limit of 10\n"
    );
}

#[tokio::test]
async fn shadow_mode_never_refuses_but_reports() {
    let (store, _clock) = store();
    let svc = RateLimitLayer::new(store, gcra("p", "1/s"))
        .modes(Modes::new().all(Enforcement::Shadow))
        .unwrap()
        .layer(hello());
    svc.clone().oneshot(from("192.0.2.1")).await.unwrap();
    let over = svc.clone().oneshot(from("192.0.2.1")).await.unwrap();
    assert_eq!(over.status(), StatusCode::OK);
    assert_eq!(over.headers()["ratelimit"], "\"p\";r=0;t=1");
    assert!(!over.headers().contains_key("retry-after"));
    // No key and a broken store do not refuse either.
    let no_peer = svc.oneshot(Request::new(Body::empty())).await.unwrap();
    assert_eq!(no_peer.status(), StatusCode::OK);
    let down = RateLimitLayer::new(Down, gcra("p", "1/s"))
        .modes(Modes::new().all(Enforcement::Shadow))
        .unwrap()
        .layer(hello());
    assert_eq!(
        down.oneshot(from("192.0.2.1")).await.unwrap().status(),
        StatusCode::OK
    );
}

#[tokio::test]
async fn api_keys_are_limited_apart() {
    let (store, _clock) = store();
    let svc = RateLimitLayer::new(store, gcra("per-key", "1/min"))
        .key(HeaderKey::bearer())
        .layer(hello());
    let with = |token: &str| {
        Request::builder()
            .header("authorization", format!("Bearer {token}"))
            .body(Body::empty())
            .unwrap()
    };
    assert_eq!(
        svc.clone().oneshot(with("a")).await.unwrap().status(),
        StatusCode::OK
    );
    assert_eq!(
        svc.clone().oneshot(with("b")).await.unwrap().status(),
        StatusCode::OK
    );
    assert_eq!(
        svc.oneshot(with("a")).await.unwrap().status(),
        StatusCode::TOO_MANY_REQUESTS
    );
}

#[tokio::test]
async fn a_dyn_store_chosen_at_run_time_works() {
    let (store, _clock) = store();
    let dynamic: Arc<dyn floodwall_core::DynStore> = Arc::new(store);
    let svc = RateLimitLayer::new(dynamic, gcra("p", "1/s")).layer(hello());
    assert_eq!(
        svc.clone()
            .oneshot(from("192.0.2.1"))
            .await
            .unwrap()
            .status(),
        StatusCode::OK
    );
    assert_eq!(
        svc.oneshot(from("192.0.2.1")).await.unwrap().status(),
        StatusCode::TOO_MANY_REQUESTS
    );
}

/// An extractor of this crate and a closure make one key: requests are limited by the
/// pair, so each method of the one global key has its own quota.
#[tokio::test]
async fn extractors_and_closures_compose() {
    let (store, _clock) = store();
    let by_method = Global.and(|req: &Parts| Some(req.method.as_str().to_owned()));
    let svc = RateLimitLayer::new(store, gcra("per-method", "1/min"))
        .key(by_method)
        .layer(hello());
    let with = |method: &str, ip: &str| {
        let mut req = from(ip);
        *req.method_mut() = method.parse().unwrap();
        req
    };
    let status = |req| {
        let svc = svc.clone();
        async move { svc.oneshot(req).await.unwrap().status() }
    };
    assert_eq!(status(with("GET", "192.0.2.1")).await, StatusCode::OK);
    // Another client, the same method: the same key (the global part ignores the IP).
    assert_eq!(
        status(with("GET", "192.0.2.2")).await,
        StatusCode::TOO_MANY_REQUESTS
    );
    // Another method: another key.
    assert_eq!(status(with("POST", "192.0.2.1")).await, StatusCode::OK);
}

/// A layer reads the key from the whole request unless it needs the request's parts (for a
/// cost, a chooser or a closure extractor): both ways must answer alike, admitted and
/// refused, in every header style and with several policies.
#[tokio::test]
async fn the_whole_request_and_its_parts_get_the_same_answers() {
    let styles = [HeaderStyle::Ietf, HeaderStyle::GitHub, HeaderStyle::None];
    for style in styles {
        for policies in [1, 2] {
            let layer = |store| {
                let layer = RateLimitLayer::new(store, gcra("per-ip", "3/s burst 4"))
                    .refusals(Refusals::new().headers(style));
                if policies == 2 {
                    layer.and_policy(gcra("slow", "5/min"))
                } else {
                    layer
                }
            };
            let whole = layer(store().0).layer(hello());
            let parts = layer(store().0).cost(|_: &Parts| 1).layer(hello());
            let closure = layer(store().0)
                .key(|req: &Parts| {
                    req.extensions
                        .get::<std::net::SocketAddr>()
                        .map(|a| [vec![4], a.ip().to_string().into_bytes()].concat())
                })
                .layer(hello());
            for _ in 0..7 {
                let a = whole.clone().oneshot(from("192.0.2.1")).await.unwrap();
                let b = parts.clone().oneshot(from("192.0.2.1")).await.unwrap();
                let c = closure.clone().oneshot(from("192.0.2.1")).await.unwrap();
                for other in [&b, &c] {
                    assert_eq!(a.status(), other.status(), "{style:?}, {policies} policies");
                    let mut headers = a.headers().clone();
                    let mut other_headers = other.headers().clone();
                    // Unix time, read as each response is written.
                    headers.remove("x-ratelimit-reset");
                    other_headers.remove("x-ratelimit-reset");
                    assert_eq!(headers, other_headers, "{style:?}, {policies} policies");
                }
                assert_eq!(text(a).await, text(b).await);
            }
        }
    }
}

/// A chooser's several policies, under concurrent requests: admitted only while both
/// admit, the refusal names the policy that refused and the headers list both, and the
/// refused requests never count against the daily quota.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_choice_of_several_policies_is_all_or_nothing_under_concurrency() {
    let (store, _clock) = store();
    let per_second = gcra("per-second", "20/s");
    let daily = Policy::new("daily", Algorithm::FixedWindow, "1000/day".parse().unwrap()).unwrap();
    let both: Arc<[Policy]> = Arc::from([daily.clone(), per_second]);
    let svc = RateLimitLayer::new(store.clone(), gcra("unused", "1/s"))
        .choose(move |_: &Parts, _: &[u8]| Choice::Policies(Arc::clone(&both)))
        .refusals(Refusals::new().respond(|d: &Denial| {
            let mut res = Response::new(d.violated().collect::<Vec<_>>().join(","));
            *res.status_mut() = StatusCode::TOO_MANY_REQUESTS;
            res
        }))
        .layer(hello());
    let tasks: Vec<_> = (0..200)
        .map(|_| tokio::spawn(svc.clone().oneshot(from("192.0.2.7"))))
        .collect();
    let mut admitted = 0;
    for task in tasks {
        let res = task.await.unwrap().unwrap();
        if res.status() == StatusCode::OK {
            admitted += 1;
            continue;
        }
        assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
        let listed = res.headers()["ratelimit"].to_str().unwrap().to_owned();
        assert!(
            listed.starts_with("\"daily\";r=980;") && listed.contains("\"per-second\";r=0"),
            "{listed}"
        );
        assert_eq!(text(res).await, "per-second");
    }
    assert_eq!(admitted, 20);
    let key = [4u8, 192, 0, 2, 7];
    assert_eq!(
        store.check_now(&key, &daily, 0).unwrap().unwrap().remaining,
        980
    );
}
