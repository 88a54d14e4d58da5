//! Penalties end to end: two axum "nodes" sharing one real `redis-server`. A brute-force
//! client banned through node A is refused by node B with `Retry-After` the ban's
//! remainder, and an operator's unban on node B lets it through node A at once.

use std::time::Duration;

use axum::Router;
use axum::routing::get;
use floodwall::redis::RedisStore;
use floodwall::tower::RateLimitLayer;
use floodwall::{Penalty, Policy, StoreExt};
use floodwall_test_support::{http_get, serve};
use redis_harness::RedisServer;

/// 5 a minute; 3 refusals within a minute ban for 10 minutes.
fn login() -> Policy {
    Policy::gcra("login", "5/min".parse().unwrap())
        .unwrap()
        .with_penalty(Penalty::new(3, Duration::from_secs(60), Duration::from_secs(600)).unwrap())
}

fn app(store: RedisStore) -> Router {
    Router::new()
        .route("/", get(|| async { "hello" }))
        .layer(RateLimitLayer::new(store, login()))
}

fn retry_after(res: &floodwall_test_support::Wire) -> u64 {
    res.header("retry-after").parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ban_through_one_node_holds_on_every_node_until_an_operator_lifts_it() {
    let redis = RedisServer::start();
    // Node A holds no ban locally, so it sees an unban elsewhere at its next request;
    // node B has the default deny cache.
    let store_a = RedisStore::builder()
        .deny_cache_max_ban_hold(Duration::ZERO)
        .multiplexed(&redis.url())
        .await
        .unwrap();
    let store_b = RedisStore::connect(&redis.url()).await.unwrap();
    let a = serve(app(store_a)).await;
    let b = serve(app(store_b.clone())).await;

    for _ in 0..5 {
        assert_eq!(http_get(a, "/", &[]).await.status, 200);
    }
    for _ in 0..2 {
        let refused = http_get(a, "/", &[]).await;
        assert_eq!(refused.status, 429);
        assert!(retry_after(&refused) <= 12, "the quota's wait");
    }
    let banned = http_get(a, "/", &[]).await;
    assert_eq!(banned.status, 429);
    assert_eq!(retry_after(&banned), 600, "the whole ban");
    // Node B never saw the client: Redis tells it of the ban.
    let elsewhere = http_get(b, "/", &[]).await;
    assert_eq!(elsewhere.status, 429);
    let left = retry_after(&elsewhere);
    assert!(left > 12 && left <= 600, "the ban's remainder, {left}");
    // The ban is in Redis, beside the quota's key.
    // (The layer's key for a peer at 127.0.0.1: 4, then its octets.)
    let ban_key = "floodwall:login:ban:x{047f000001}";
    assert_eq!(
        redis.cmd(&["EXISTS", ban_key]),
        "1",
        "{}",
        redis.cmd(&["KEYS", "*"])
    );

    // An operator unbans through node B's store: both nodes let the quota decide again
    // (still refused by 5/min, but for the quota's wait, not the ban's).
    store_b.unban(&[4, 127, 0, 0, 1], &login()).await.unwrap();
    for node in [b, a] {
        let res = http_get(node, "/", &[]).await;
        assert_eq!(res.status, 429);
        assert!(retry_after(&res) <= 12, "{}", res.header("retry-after"));
    }
    assert_eq!(redis.cmd(&["EXISTS", ban_key]), "0");
}
