//! Live changes over the Redis store: a quota changed and a mode flipped through the
//! layer's `LiveLimits` while a real axum server on loopback serves from a real
//! `redis-server`.

use axum::Router;
use axum::routing::get;
use floodwall::Policy;
use floodwall::redis::RedisStore;
use floodwall::tower::{Enforcement, RateLimitLayer};
use floodwall_test_support::{http_get, serve};
use redis_harness::RedisServer;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quota_changed_live_is_enforced_from_redis() {
    let redis = RedisServer::start();
    let store = RedisStore::connect(&redis.url()).await.unwrap();
    let layer = RateLimitLayer::new(
        store,
        Policy::gcra("per-ip", "2/min".parse().unwrap()).unwrap(),
    );
    let live = layer.live();
    let app = Router::new()
        .route("/", get(|| async { "hello" }))
        .layer(layer);
    let addr = serve(app).await;

    assert_eq!(http_get(addr, "/", &[]).await.status, 200);
    assert_eq!(http_get(addr, "/", &[]).await.status, 200);
    assert_eq!(http_get(addr, "/", &[]).await.status, 429);

    // The same rate with the burst of the same span (5 per minute: a minute's worth of
    // time owed is still the whole burst): the key's state carries over, so the exhausted
    // client is still refused (`floodwall_core::guide::quota_changes`), and the headers name the new quota.
    live.set_quota("per-ip", "5/min".parse().unwrap()).unwrap();
    let owed = http_get(addr, "/", &[]).await;
    assert_eq!(owed.status, 429);
    assert_eq!(owed.header("ratelimit-policy"), "\"per-ip\";q=5;w=60");
    // A larger burst admits it again, as far as the minute it owes leaves room.
    live.set_quota("per-ip", "5/min burst 10".parse().unwrap())
        .unwrap();
    let again = http_get(addr, "/", &[]).await;
    assert_eq!(again.status, 200);
    assert_eq!(
        again.header("ratelimit-policy"),
        "\"per-ip\";q=5;w=60;floodwall-burst=10"
    );
    // ... and the new quota runs out in its turn: the 10 of its burst less the 5 the
    // minute owed, of which that request took one, leave 4. (Redis decides on its own
    // clock: these counts hold while the test takes less than the quota's 12 s interval.)
    let mut statuses = Vec::new();
    for _ in 0..5 {
        statuses.push(http_get(addr, "/", &[]).await.status);
    }
    assert_eq!(statuses, [200, 200, 200, 200, 429]);

    // In shadow mode the exhausted client goes through, headers still sent; enforced
    // again, it is refused.
    live.set_enforcement("per-ip", Enforcement::Shadow).unwrap();
    let shadowed = http_get(addr, "/", &[]).await;
    assert_eq!(shadowed.status, 200);
    assert_eq!(
        shadowed.header("ratelimit-policy"),
        "\"per-ip\";q=5;w=60;floodwall-burst=10"
    );
    live.set_enforcement("per-ip", Enforcement::Enforce)
        .unwrap();
    assert_eq!(http_get(addr, "/", &[]).await.status, 429);
    // Shadow mode charged nothing it refused: under a burst of 20, the key, which owes
    // 10 (two minutes), gets exactly 10 more (a request charged in shadow would leave 9).
    live.set_quota("per-ip", "5/min burst 20".parse().unwrap())
        .unwrap();
    let mut statuses = Vec::new();
    for _ in 0..11 {
        statuses.push(http_get(addr, "/", &[]).await.status);
    }
    assert_eq!(statuses[..10], [200; 10], "{statuses:?}");
    assert_eq!(statuses[10], 429, "{statuses:?}");

    // Smaller again: the next response names it.
    live.set_quota("per-ip", "1/min".parse().unwrap()).unwrap();
    let one = http_get(addr, "/", &[]).await;
    assert_eq!(one.header("ratelimit-policy"), "\"per-ip\";q=1;w=60");
}
