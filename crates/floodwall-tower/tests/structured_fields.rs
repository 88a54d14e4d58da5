//! Every IETF header floodwall writes is a valid structured field (RFC 9651), for every
//! algorithm, admitted and refused, through each way the layer builds the values: a
//! strict parser would otherwise drop the whole header. The largest quotas a policy takes
//! carry counts of 16 digits, past the 15 an sf-integer may have.

use axum::body::Body;
use floodwall_core::{Algorithm, Policy, Quota};
use floodwall_test_support::*;
use floodwall_tower::RateLimitLayer;
use floodwall_tower::choose::Choice;
use http::request::Parts;
use http::{Response, StatusCode};
use sfv::{BareItem, List, ListEntry, Parser};
use tower::{Layer, ServiceExt};

/// The largest integer a structured field may carry.
const SF_MAX: i64 = 999_999_999_999_999;

/// The largest quota each algorithm takes: one unit per microsecond over the longest span
/// (3.15 × 10^15, 16 digits), or the sliding log's most entries.
fn largest(algorithm: Algorithm) -> Policy {
    let span = floodwall_core::MAX_SPAN;
    let count = match algorithm {
        Algorithm::SlidingLog => Algorithm::SLIDING_LOG_MAX_ENTRIES,
        _ => u64::try_from(span.as_micros()).unwrap(),
    };
    let quota = Quota::new(count, span).unwrap();
    Policy::new(algorithm.name(), algorithm, quota)
        .unwrap_or_else(|e| panic!("{algorithm:?} takes {quota}: {e}"))
}

/// The header parsed as a list: each member's name and integer parameters.
fn parse(res: &Response<Body>, name: &str) -> Vec<(String, Vec<(String, i64)>)> {
    let value = res.headers()[name].as_bytes();
    let list: List = Parser::new(value)
        .parse()
        .unwrap_or_else(|e| panic!("{name}: {:?} is no sf-list: {e}", res.headers()[name]));
    list.iter()
        .map(|entry| {
            let ListEntry::Item(item) = entry else {
                panic!("{name}: an inner list")
            };
            let BareItem::String(policy) = &item.bare_item else {
                panic!("{name}: a member that is not a string")
            };
            let params = item
                .params
                .iter()
                .map(|(k, v)| {
                    let n = v.as_integer().expect("integer parameters");
                    (k.as_str().to_owned(), i64::from(n))
                })
                .collect();
            (policy.as_str().to_owned(), params)
        })
        .collect()
}

/// Both IETF headers of `res` parse, with every integer in range; returns `RateLimit`'s
/// `r` of each policy.
fn remaining(res: &Response<Body>) -> Vec<i64> {
    let policy = parse(res, "ratelimit-policy");
    assert!(!policy.is_empty());
    for (_, params) in &policy {
        assert!(params.iter().all(|(_, n)| (0..=SF_MAX).contains(n)));
    }
    parse(res, "ratelimit")
        .into_iter()
        .map(|(_, params)| {
            assert!(params.iter().all(|(_, n)| (0..=SF_MAX).contains(n)));
            params.iter().find(|(k, _)| k == "r").expect("an r").1
        })
        .collect()
}

/// A layer over `policy` (and a second policy, or chosen per request, as `how` says),
/// charging each request the cost in its `x-cost` header.
fn service(
    policy: Policy,
    how: &str,
) -> impl tower::Service<
    http::Request<Body>,
    Response = Response<Body>,
    Error = std::convert::Infallible,
    Future: Send,
> + Clone {
    let cost = |req: &Parts| {
        req.headers["x-cost"]
            .to_str()
            .unwrap()
            .parse::<u64>()
            .unwrap()
    };
    let layer = RateLimitLayer::new(store().0, policy.clone()).cost(cost);
    match how {
        "own" => layer.layer(hello()).boxed_clone(),
        "two" => layer
            .and_policy(
                Policy::new("other", Algorithm::Gcra, *largest(Algorithm::Gcra).quota()).unwrap(),
            )
            .layer(hello())
            .boxed_clone(),
        _ => layer
            .choose(move |_: &Parts, _: &[u8]| Choice::Policy(policy.clone()))
            .layer(hello())
            .boxed_clone(),
    }
}

fn costing(cost: u64) -> http::Request<Body> {
    let mut req = from("192.0.2.1");
    req.headers_mut().insert("x-cost", cost.into());
    req
}

#[tokio::test]
async fn every_ietf_header_is_a_valid_structured_field() {
    for algorithm in Algorithm::all() {
        let policy = largest(algorithm);
        // The most one request may cost, and then half of it.
        let most = policy.quota().burst().min(policy.limit());
        for how in ["own", "two", "chosen"] {
            let svc = service(policy.clone(), how);
            let what = format!("{algorithm:?}, {how}");
            let half = svc.clone().oneshot(costing(most / 2)).await.unwrap();
            assert_eq!(half.status(), StatusCode::OK, "{what}");
            let left = remaining(&half)[0];
            assert!(left > 0, "{what}: {left} left");
            let refused = svc.clone().oneshot(costing(most)).await.unwrap();
            assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS, "{what}");
            assert_eq!(
                remaining(&refused)[0],
                left,
                "{what}: a refusal spends nothing"
            );
        }
    }
}
