//! The deny cache of `RedisStore` as other nodes and operators meet it, on a real
//! `redis-server`: a reset elsewhere (another node's `reset`, `FLUSHALL`) reaches a node
//! holding a cached refusal within its hold, and a refusal of a layer with two policies
//! carries the same rate-limit fields whether Redis or the cache answered it.

use std::time::Duration;

use floodwall::core::Source;
use floodwall::redis::RedisStore;
use floodwall::tower::RateLimitLayer;
use floodwall::{Policy, StoreExt};
use floodwall_test_support::{from, hello};
use http::{HeaderMap, StatusCode};
use redis_harness::RedisServer;
use tower::{Layer, ServiceExt};

/// The smallest hold a test waits for: nothing here measures how long anything took.
const HOLD: Duration = Duration::from_millis(50);

/// A node on `redis` whose deny cache holds a refusal for `hold` at most.
async fn node(redis: &RedisServer, hold: Duration) -> RedisStore {
    RedisStore::builder()
        .deny_cache_max_refusal_hold(hold)
        .multiplexed(&redis.url())
        .await
        .unwrap()
}

/// Spends `key`'s three a hour through `node`, then checks until `node`'s deny cache
/// answers a refusal itself (each check Redis answers is held again), 100 checks at most.
async fn exhaust_until_cached(node: &RedisStore, key: &[u8], policy: &Policy) {
    for _ in 0..3 {
        assert!(node.check(key, policy, 1).await.unwrap().is_allowed());
    }
    for _ in 0..100 {
        let d = node.check(key, policy, 1).await.unwrap();
        assert!(!d.is_allowed(), "{d:?}");
        if d.source == Source::Cache {
            return;
        }
    }
    panic!("never cached: 100 refusals of {key:?}, every one from Redis");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_elsewhere_reaches_a_cached_refusal_within_the_hold() {
    let redis = RedisServer::start();
    let (a, b) = (node(&redis, HOLD).await, node(&redis, HOLD).await);
    let policy = Policy::gcra("hourly", "3/h".parse().unwrap()).unwrap();

    // An operator resets the customer's quota through node B.
    exhaust_until_cached(&a, b"customer", &policy).await;
    b.reset(b"customer", &policy).await.unwrap();
    tokio::time::sleep(HOLD).await;
    assert!(a.check(b"customer", &policy, 1).await.unwrap().is_allowed());

    // Or empties Redis.
    exhaust_until_cached(&a, b"other", &policy).await;
    redis.cmd(&["FLUSHALL"]);
    tokio::time::sleep(HOLD).await;
    assert!(a.check(b"other", &policy, 1).await.unwrap().is_allowed());
}

/// Each member of a `RateLimit` value: its policy's name, `r` and `t`.
fn members(headers: &HeaderMap) -> Vec<(String, u64, u64)> {
    let value = headers["ratelimit"].to_str().unwrap();
    value
        .split(", ")
        .map(|member| {
            let mut parts = member.split(';');
            let name = parts.next().unwrap().trim_matches('"').to_owned();
            let mut figure = |key: &str| {
                let part = parts.next().unwrap();
                part.strip_prefix(key).unwrap().parse().unwrap()
            };
            let (r, t) = (figure("r="), figure("t="));
            (name, r, t)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_lists_every_policy_whether_redis_or_the_deny_cache_answered() {
    let redis = RedisServer::start();
    // Node A holds its refusals an hour, so its second refusal is the cache's whatever
    // the time between the two.
    let (a, b) = (
        node(&redis, Duration::from_secs(3_600)).await,
        node(&redis, HOLD).await,
    );
    let layer = |store: RedisStore| {
        RateLimitLayer::new(
            store,
            Policy::gcra("burst", "1/h".parse().unwrap()).unwrap(),
        )
        .and_policy(Policy::fixed_window("daily", "100/day".parse().unwrap()).unwrap())
        .layer(hello())
    };
    let (on_a, on_b) = (layer(a.clone()), layer(b));
    const IP: &str = "192.0.2.7";

    // The client's one request an hour goes through node B; node A has cached nothing.
    let admitted = on_b.clone().oneshot(from(IP)).await.unwrap();
    assert_eq!(admitted.status(), StatusCode::OK);
    let by_redis = on_a.clone().oneshot(from(IP)).await.unwrap();
    let stats = a.deny_cache_stats().unwrap();
    assert_eq!((stats.store_calls, stats.denied_locally), (1, 0));
    let by_cache = on_a.clone().oneshot(from(IP)).await.unwrap();
    let stats = a.deny_cache_stats().unwrap();
    assert_eq!((stats.store_calls, stats.denied_locally), (1, 1));

    for res in [&by_redis, &by_cache] {
        assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
    }
    let (redis_said, cache_said) = (by_redis.headers(), by_cache.headers());
    assert_eq!(
        redis_said["ratelimit-policy"],
        cache_said["ratelimit-policy"]
    );
    let (redis_members, cache_members) = (members(redis_said), members(cache_said));
    let names = |m: &[(String, u64, u64)]| m.iter().map(|(n, ..)| n.clone()).collect::<Vec<_>>();
    assert_eq!(names(&redis_members), ["burst", "daily"]);
    assert_eq!(names(&cache_members), ["burst", "daily"]);
    for ((_, r_redis, t_redis), (name, r_cache, t_cache)) in
        redis_members.iter().zip(&cache_members)
    {
        // What remains is the same; the time to a full quota only ran down meanwhile.
        assert_eq!(r_redis, r_cache, "{name}");
        assert!(t_cache <= t_redis, "{name}: {t_cache} after {t_redis}");
    }
    assert_eq!(redis_members[1].1, 99, "the daily quota's remainder");
}
