//! The deny cache a `RedisStore` has by default, against a real redis-server: a flood of
//! refusals costs a few script calls, a reset through the store forgets what it knew,
//! A store `at` an explicit time and `deny_cache(false)` send every check to Redis.

mod common;

use floodwall_core::{Policy, StoreExt};
use floodwall_redis::RedisStore;
use redis_harness::RedisServer;

use common::command_calls;

const NOW: u64 = 1_700_000_000_000_000;

fn evalsha_calls(server: &RedisServer) -> u64 {
    command_calls(server)
        .into_iter()
        .find(|(c, _)| c == "evalsha")
        .map_or(0, |(_, n)| n)
}

/// `n` checks of one key, one after the other: how many were admitted.
async fn flood(store: &RedisStore, key: &[u8], policy: &Policy, n: usize) -> usize {
    let mut admitted = 0;
    for _ in 0..n {
        admitted += usize::from(store.check(key, policy, 1).await.unwrap().is_allowed());
    }
    admitted
}

#[tokio::test]
async fn a_default_store_answers_a_flood_of_refusals_with_a_few_script_calls() {
    let server = RedisServer::start();
    let store = RedisStore::connect(&server.url()).await.unwrap();
    let policy = Policy::gcra("flood", "5/min".parse().unwrap()).unwrap();
    let before = evalsha_calls(&server);

    assert_eq!(flood(&store, b"mallory", &policy, 400).await, 5);

    let stats = store.stats();
    let evalsha = evalsha_calls(&server) - before;
    eprintln!("400 checks at 5/min: {stats:?}, {evalsha} EVALSHA");
    // One call per admission; the fifth leaves no room, so the rest are refused here.
    // (Redis counts the first call twice: its NOSCRIPT, then the call once loaded.)
    assert_eq!(stats.script_calls, 5, "{stats:?}");
    assert!(evalsha <= 6, "{evalsha} EVALSHA");
    assert_eq!(stats.script_calls + stats.denied_locally, 400);
    let deny = store.deny_cache_stats().expect("on by default");
    assert_eq!(deny.denied_locally, stats.denied_locally);
    assert_eq!(deny.store_calls, stats.script_calls);
    // Another key is not refused by mallory's entry.
    assert!(
        store
            .check(b"alice", &policy, 1)
            .await
            .unwrap()
            .is_allowed()
    );
}

#[tokio::test]
async fn a_reset_through_the_store_forgets_the_cached_refusal() {
    let server = RedisServer::start();
    let store = RedisStore::connect(&server.url()).await.unwrap();
    let policy = Policy::gcra("reset", "1/min".parse().unwrap()).unwrap();
    assert_eq!(flood(&store, b"k", &policy, 10).await, 1);
    assert_eq!(store.stats().script_calls, 1);
    // A clone shares the cache: its reset forgets the entry too.
    store.clone().reset(b"k", &policy).await.unwrap();
    assert!(store.check(b"k", &policy, 1).await.unwrap().is_allowed());
    assert_eq!(store.stats().script_calls, 2);
}

#[tokio::test]
async fn an_explicit_time_and_a_store_without_the_cache_send_every_check() {
    let server = RedisServer::start();
    let store = RedisStore::connect(&server.url()).await.unwrap();
    let policy = Policy::gcra("explicit", "1/min".parse().unwrap()).unwrap();
    for i in 0..10 {
        let d = store.at(NOW).check(b"k", &policy, 1).await.unwrap();
        assert_eq!(d.is_allowed(), i == 0);
    }
    assert_eq!(store.stats().script_calls, 10);
    assert_eq!(store.stats().denied_locally, 0);

    let direct = common::uncached_store(&server.url()).await;
    assert_eq!(direct.deny_cache_stats(), None);
    assert_eq!(flood(&direct, b"k2", &policy, 10).await, 1);
    assert_eq!(direct.stats().script_calls, 10);
    assert_eq!(direct.stats().denied_locally, 0);
}

#[tokio::test]
async fn every_algorithm_refuses_from_the_cache_only_what_redis_refuses() {
    let server = RedisServer::start();
    let store = RedisStore::connect(&server.url()).await.unwrap();
    let direct = common::uncached_store(&server.url()).await;
    for policy in common::every_algorithm("every", "3/min") {
        // The cached store admits exactly the quota, as the direct one does.
        assert_eq!(flood(&store, b"a", &policy, 50).await, 3, "{policy:?}");
        assert_eq!(flood(&direct, b"b", &policy, 50).await, 3, "{policy:?}");
    }
    let stats = store.stats();
    assert!(stats.denied_locally > 0, "{stats:?}");
    assert_eq!(direct.stats().script_calls, 6 * 50);
}

#[tokio::test]
async fn a_redis_cell_policy_is_cached_and_reports_whole_seconds() {
    let server = RedisServer::start();
    let store = RedisStore::connect(&server.url()).await.unwrap();
    let cell = Policy::redis_cell("cell", 4, 5, std::time::Duration::from_secs(60)).unwrap();
    assert_eq!(flood(&store, b"mallory", &cell, 400).await, 5);
    let stats = store.stats();
    assert_eq!(stats.script_calls, 5, "{stats:?}");
    assert_eq!(stats.denied_locally, 395);
    // A local refusal is reported in whole seconds, as the script's answer is.
    let d = store.check(b"mallory", &cell, 1).await.unwrap();
    let retry = d.retry_after.unwrap();
    assert_eq!(retry.subsec_nanos(), 0, "{retry:?}");
    assert!(retry.as_secs() >= 11 && retry.as_secs() <= 12, "{retry:?}");
    assert_eq!(d.reset_after.subsec_nanos(), 0);
}
