//! floodwall as a user first writes it: an axum app limited per tenant by an extractor of
//! its own, on Redis, with a second (daily) policy, a local fail mode and its own 429 body,
//! in the most natural code. If this stops compiling, an API a user reaches for first has
//! regressed: named constructors per algorithm, extractors that need no `Clone`, axum
//! responders (`respond::Axum`), and `and_policy`/`fail_mode` on the same layer.

use axum::Router;
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use floodwall::Policy;
use floodwall::core::resilience::FailMode;
use floodwall::redis::RedisStore;
use floodwall::tower::extract::{ExtractKey, KeyError};
use floodwall::tower::respond::{Axum, Denial};
use floodwall::tower::{Key, RateLimitLayer, Refusals};
use floodwall_test_support::{http_get, serve};
use redis_harness::RedisServer;

/// The tenant an auth layer in front names in `x-tenant`. Not `Clone`, on purpose: the
/// layer must not need it to be.
struct Tenant;

impl ExtractKey for Tenant {
    fn extract(&self, req: &Parts, key: &mut Key) -> Result<(), KeyError> {
        let tenant = req.headers.get("x-tenant").ok_or(KeyError::new(
            StatusCode::UNAUTHORIZED,
            "no x-tenant header",
        ))?;
        key.extend_from_slice(tenant.as_bytes());
        Ok(())
    }
}

/// Our own 429 body, in axum's terms; a request without a tenant is no refusal of ours:
/// it gets the extractor's status (401) from the responder's provided `missing_key`.
fn over_quota(denial: &Denial) -> Response {
    let policies: Vec<&str> = denial.violated().collect();
    let body = format!("tenant over quota ({})\n", policies.join(", "));
    (StatusCode::TOO_MANY_REQUESTS, body).into_response()
}

async fn app(redis_url: &str) -> Result<Router, Box<dyn std::error::Error>> {
    let store = RedisStore::connect(redis_url).await?;
    let limit = RateLimitLayer::new(store, Policy::gcra("per-tenant", "100/s".parse()?)?)
        .and_policy(Policy::fixed_window("per-tenant-daily", "3/day".parse()?)?)
        .key(Tenant)
        .fail_mode(FailMode::local(3))
        .refusals(Refusals::new().respond(Axum(over_quota)));
    Ok(Router::new()
        .route("/", get(|| async { "hello" }))
        .layer(limit))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_app_on_redis_as_a_user_writes_it() {
    let mut redis = RedisServer::start();
    let addr = serve(app(&redis.url()).await.unwrap()).await;
    let get =
        |tenant: &'static str| async move { http_get(addr, "/", &[("x-tenant", tenant)]).await };

    // The daily policy refuses the fourth request, with our body and both policies' headers.
    for _ in 0..3 {
        assert_eq!(get("acme").await.status, 200);
    }
    let refused = get("acme").await;
    assert_eq!(refused.status, 429);
    assert_eq!(refused.body, "tenant over quota (per-tenant-daily)\n");
    assert!(refused.get("retry-after").is_some(), "{refused:?}");
    let policy = refused.header("ratelimit-policy");
    assert!(policy.contains("\"per-tenant\"") && policy.contains("\"per-tenant-daily\""));
    // Another tenant has its own quota; no tenant is the extractor's 401.
    assert_eq!(get("globex").await.status, 200);
    assert_eq!(http_get(addr, "/", &[]).await.status, 401);

    // Redis gone: each of the 3 nodes enforces its share alone (a daily share of 1).
    redis.kill();
    assert_eq!(get("initech").await.status, 200);
    let local = get("initech").await;
    assert_eq!(local.status, 429);
    assert_eq!(local.body, "tenant over quota (per-tenant-daily)\n");
}
