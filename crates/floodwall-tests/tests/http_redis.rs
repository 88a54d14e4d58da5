//! The tower layer over the Redis store, end to end: real axum servers on loopback ports,
//! real HTTP on the wire, a real `redis-server` shared by two "nodes" of a fleet.

// The tower crate's HTTP test helpers (a tiny HTTP/1.1 client, `serve`).

use axum::Router;
use axum::routing::get;
use floodwall::Policy;
use floodwall::redis::RedisStore;
use floodwall::tower::RateLimitLayer;
use floodwall_test_support::{http_get, serve};
use redis_harness::RedisServer;

fn app(store: RedisStore, policy: &Policy) -> Router {
    Router::new()
        .route("/", get(|| async { "hello" }))
        .layer(RateLimitLayer::new(store, policy.clone()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn headers_and_refusals_come_from_redis() {
    let redis = RedisServer::start();
    let store = RedisStore::connect(&redis.url()).await.unwrap();
    let policy = Policy::gcra("per-ip", "2/min".parse().unwrap()).unwrap();
    let addr = serve(app(store, &policy)).await;

    let ok = http_get(addr, "/", &[]).await;
    assert_eq!(ok.status, 200);
    assert_eq!(ok.body, "hello");
    assert_eq!(ok.header("ratelimit-policy"), "\"per-ip\";q=2;w=60");
    assert_eq!(ok.header("ratelimit"), "\"per-ip\";r=1;t=30");
    assert_eq!(http_get(addr, "/", &[]).await.status, 200);

    let refused = http_get(addr, "/", &[]).await;
    assert_eq!(refused.status, 429);
    assert_eq!(refused.header("retry-after"), "30");
    assert_eq!(refused.header("ratelimit"), "\"per-ip\";r=0;t=60");
    assert_eq!(refused.body, "Too Many Requests: retry after 30s\n");

    // The state is in Redis, under a key with a TTL: the 60 s its state needs, rounded
    // up to a cell of its TTL grid (a quarter of the 60 s tolerance) + 1 ms.
    assert_eq!(redis.cmd(&["DBSIZE"]).trim(), "1");
    let key = redis.cmd(&["RANDOMKEY"]);
    assert!(key.starts_with("floodwall:per-ip:gcra."), "{key}");
    let pttl: i64 = redis.cmd(&["PTTL", key.trim()]).trim().parse().unwrap();
    assert!(pttl > 0 && pttl <= 75_001, "pttl {pttl}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_nodes_of_a_fleet_share_one_limit() {
    let redis = RedisServer::start();
    let policy = Policy::gcra("fleet", "5/min".parse().unwrap()).unwrap();
    let a = serve(app(
        RedisStore::connect(&redis.url()).await.unwrap(),
        &policy,
    ))
    .await;
    let b = serve(app(
        RedisStore::connect(&redis.url()).await.unwrap(),
        &policy,
    ))
    .await;
    let mut admitted = 0;
    for i in 0..12 {
        let node = if i % 2 == 0 { a } else { b };
        if http_get(node, "/", &[]).await.status == 200 {
            admitted += 1;
        }
    }
    assert_eq!(
        admitted, 5,
        "the fleet admits the quota once, not once per node"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_redis_is_a_503_with_retry_after_not_an_allow() {
    let mut redis = RedisServer::start();
    let store = RedisStore::connect(&redis.url()).await.unwrap();
    let policy = Policy::gcra("per-ip", "100/min".parse().unwrap()).unwrap();
    let addr = serve(app(store, &policy)).await;
    assert_eq!(http_get(addr, "/", &[]).await.status, 200);

    redis.kill();
    let down = http_get(addr, "/", &[]).await;
    assert_eq!(down.status, 503);
    assert!(down.header("retry-after").parse::<u64>().unwrap() >= 1);
    assert!(
        down.get("ratelimit").is_none(),
        "no decision, no rate-limit headers"
    );

    redis.restart();
    // The multiplexed connection reconnects on its own; no restart of the app.
    let mut status = 0;
    for _ in 0..50 {
        status = http_get(addr, "/", &[]).await.status;
        if status == 200 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(status, 200, "decisions resume once Redis is back");
}
