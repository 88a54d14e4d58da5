//! The deny cache of `RedisStore` as other nodes and operators meet it, on a real
//! `redis-server`: a reset elsewhere (another node's `reset`, `FLUSHALL`) reaches a node
//! holding a cached refusal within its hold.

use std::time::Duration;

use floodwall::redis::RedisStore;
use floodwall::{Policy, Store};
use redis_harness::RedisServer;

/// The smallest hold a test waits for: nothing here measures how long anything took.
const HOLD: Duration = Duration::from_millis(50);

async fn node(redis: &RedisServer) -> RedisStore {
    RedisStore::builder()
        .deny_cache_max_refusal_hold(HOLD)
        .multiplexed(&redis.url())
        .await
        .unwrap()
}

/// Spends `key`'s three a hour through `node`, then checks until `node`'s deny cache
/// answers a refusal itself (each check Redis answers is held again).
async fn exhaust_until_cached(node: &RedisStore, key: &[u8], policy: &Policy) {
    for _ in 0..3 {
        assert!(node.check(key, policy, 1).await.unwrap().allowed);
    }
    loop {
        let d = node.check(key, policy, 1).await.unwrap();
        assert!(!d.allowed, "{d:?}");
        if d.cached {
            return;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_elsewhere_reaches_a_cached_refusal_within_the_hold() {
    let redis = RedisServer::start();
    let (a, b) = (node(&redis).await, node(&redis).await);
    let policy = Policy::gcra("hourly", "3/h".parse().unwrap()).unwrap();

    // An operator resets the customer's quota through node B.
    exhaust_until_cached(&a, b"customer", &policy).await;
    b.reset(b"customer", &policy).await.unwrap();
    tokio::time::sleep(HOLD).await;
    assert!(a.check(b"customer", &policy, 1).await.unwrap().allowed);

    // Or empties Redis.
    exhaust_until_cached(&a, b"other", &policy).await;
    redis.cmd(&["FLUSHALL"]);
    tokio::time::sleep(HOLD).await;
    assert!(a.check(b"other", &policy, 1).await.unwrap().allowed);
}
