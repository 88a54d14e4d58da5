//! In-flight limits in Redis against real `redis-server` processes: exact from two stores,
//! renewed while held, released on drop, and every failure a typed error.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use floodwall_core::{Acquired, ConcurrencyLimit, StoreExt};
use floodwall_redis::RedisStore;
use redis_harness::{RedisCluster, RedisServer};

use common::server_now;

async fn connect(url: &str) -> RedisStore {
    RedisStore::connect(url).await.unwrap()
}

/// `ZCARD` of a lease key: leases held in Redis, expired or not.
fn zcard(server: &RedisServer, key: &[u8]) -> i64 {
    server
        .try_cmd(&[&b"ZCARD"[..], key])
        .unwrap()
        .as_integer()
        .unwrap()
}

/// The expiry (µs, server clock) of the one lease in `key`.
fn lease_expiry(redis: &RedisServer, key: &[u8]) -> u64 {
    let members = redis.try_cmd(&[&b"ZRANGE"[..], key, b"0", b"-1", b"WITHSCORES"]);
    match members.unwrap() {
        redis_harness::Reply::Array(m) if m.len() == 2 => m[1].to_string().parse().unwrap(),
        other => panic!("{other:?}"),
    }
}

/// Waits (5 s at most) for what a permit's drop sends in the background to land.
async fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    for _ in 0..500 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("never happened: {what}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exactly_n_in_flight_among_256_requests_from_two_stores() {
    const REQUESTS: usize = 256;
    const N: u64 = 5;
    let redis = RedisServer::start();
    let stores = [connect(&redis.url()).await, connect(&redis.url()).await];
    let limit = ConcurrencyLimit::new("exact", N).unwrap();
    let attempted = Arc::new(AtomicUsize::new(0));
    let (current, peak) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..REQUESTS {
        let (store, limit) = (stores[i % 2].clone(), limit.clone());
        let (attempted, current, peak) = (
            Arc::clone(&attempted),
            Arc::clone(&current),
            Arc::clone(&peak),
        );
        tasks.spawn(async move {
            let acquired = store.acquire(b"hot", &limit).await.unwrap();
            attempted.fetch_add(1, Ordering::SeqCst);
            let Acquired::Granted(permit) = acquired else {
                return false;
            };
            let now = current.fetch_add(1, Ordering::SeqCst) + 1;
            peak.fetch_max(now, Ordering::SeqCst);
            // Held until all 256 have asked: the holders overlap, so the peak measures
            // what the two stores let in together.
            while attempted.load(Ordering::SeqCst) < REQUESTS {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            current.fetch_sub(1, Ordering::SeqCst);
            drop(permit);
            true
        });
    }
    let granted = tasks.join_all().await.into_iter().filter(|&g| g).count();
    assert_eq!(peak.load(Ordering::SeqCst), N, "peak in flight");
    assert_eq!(
        granted as u64,
        N,
        "the other {} refused",
        REQUESTS as u64 - N
    );
    let key = stores[0].lease_key(b"hot", &limit);
    eventually("every lease released", || zcard(&redis, &key) == 0).await;
    assert_eq!(
        redis.cmd(&["DBSIZE"]),
        "0",
        "the key left with its last lease"
    );
    assert_eq!(stores[0].leases_held() + stores[1].leases_held(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_outliving_its_lease_keeps_its_slot_while_renewed() {
    let redis = RedisServer::start();
    let (a, b) = (connect(&redis.url()).await, connect(&redis.url()).await);
    // A 1 s lease, renewed every 250 ms.
    let limit = ConcurrencyLimit::new("renewed", 1)
        .unwrap()
        .with_lease(Duration::from_secs(1))
        .unwrap()
        .with_renewal(Duration::from_millis(250))
        .unwrap();
    let held = a.acquire(b"k", &limit).await.unwrap().permit().unwrap();
    let key = a.lease_key(b"k", &limit);
    let first = lease_expiry(&redis, &key);
    // Three lease times: without renewals, the lease would have expired twice over.
    for _ in 0..15 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let Acquired::Full(full) = b.acquire(b"k", &limit).await.unwrap() else {
            panic!("the slot was given away while its request ran");
        };
        assert_eq!((full.in_flight, full.limit), (1, 1));
    }
    assert!(
        lease_expiry(&redis, &key) > first + 2_000_000,
        "the lease was pushed back"
    );
    assert_eq!(a.leases_held(), 1);
    drop(held);
    eventually("the slot is free", || zcard(&redis, &key) == 0).await;
    assert!(b.acquire(b"k", &limit).await.unwrap().is_granted());
    assert_eq!(a.leases_held(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_key_lives_as_long_as_its_latest_lease_and_leaves_with_it() {
    let redis = RedisServer::start();
    let store = connect(&redis.url()).await;
    let limit = ConcurrencyLimit::new("ttl", 3)
        .unwrap()
        .with_lease(Duration::from_secs(20))
        .unwrap();
    // Binary and long keys take the rate keys' forms (hex, SHA-256).
    for user_key in [&b"alice"[..], &[0, 1, 2, 0xff], &[0xab; 10_000]] {
        let p1 = store
            .acquire(user_key, &limit)
            .await
            .unwrap()
            .permit()
            .unwrap();
        let p2 = store
            .acquire(user_key, &limit)
            .await
            .unwrap()
            .permit()
            .unwrap();
        assert_eq!((p1.in_flight(), p2.in_flight(), p2.remaining()), (1, 2, 1));
        let key = store.lease_key(user_key, &limit);
        let pttl = redis.try_cmd(&[&b"PTTL"[..], &key]).unwrap();
        let pttl = pttl.as_integer().unwrap();
        assert!(pttl > 15_000 && pttl <= 20_001, "pttl {pttl}");
        drop((p1, p2));
        eventually("the key is gone", || zcard(&redis, &key) == 0).await;
    }
    assert_eq!(redis.cmd(&["DBSIZE"]), "0");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_of_another_type_is_a_clear_error_and_a_flushed_script_is_reloaded() {
    let redis = RedisServer::start();
    let store = connect(&redis.url()).await;
    let limit = ConcurrencyLimit::new("typed", 2).unwrap();
    let key = store.lease_key(b"k", &limit);
    redis
        .try_cmd(&[&b"SET"[..], &key, b"not a sorted set"])
        .unwrap();
    let err = store.acquire(b"k", &limit).await.unwrap_err();
    assert!(err.is_store_failure() && !err.is_unavailable(), "{err}");
    let text = err.to_string();
    assert!(
        text.contains("WRONGTYPE") && text.contains("\"typed\"") && text.contains("sorted set"),
        "{text}"
    );
    redis.try_cmd(&[&b"DEL"[..], &key]).unwrap();

    assert!(store.acquire(b"k", &limit).await.unwrap().is_granted());
    redis.cmd(&["SCRIPT", "FLUSH"]);
    // NOSCRIPT: loaded again and run, transparently.
    assert!(store.acquire(b"k", &limit).await.unwrap().is_granted());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_redis_times_out_and_a_dead_one_is_unavailable() {
    let mut redis = RedisServer::start();
    let store = RedisStore::builder()
        .timeout(Duration::from_millis(200))
        .multiplexed(&redis.url())
        .await
        .unwrap();
    let limit = ConcurrencyLimit::new("stall", 1).unwrap();
    // Loaded before the stall, so the stalled call is the acquisition itself.
    drop(store.acquire(b"warm", &limit).await.unwrap());
    redis.pause(800);
    let err = store.acquire(b"k", &limit).await.unwrap_err();
    assert!(err.is_timeout(), "{err}");
    // Redis runs the acquisition once it wakes; the store gave the lease back behind it
    // rather than let it hold the only slot for a lease time.
    let key = store.lease_key(b"k", &limit);
    eventually("the timed-out lease released", || zcard(&redis, &key) == 0).await;
    assert!(store.acquire(b"k", &limit).await.unwrap().is_granted());

    redis.kill();
    let err = store.acquire(b"k", &limit).await.unwrap_err();
    assert!(err.is_unavailable() || err.is_timeout(), "{err}");
    assert!(err.is_store_failure());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_run_on_a_cluster_one_slot_per_user_key() {
    let cluster = RedisCluster::start(3);
    let store = RedisStore::builder().cluster(cluster.urls()).await.unwrap();
    let limit = ConcurrencyLimit::new("spread", 2).unwrap();
    let mut held = Vec::new();
    for i in 0..30 {
        let user = format!("user-{i}");
        held.push(
            store
                .acquire(user.as_bytes(), &limit)
                .await
                .unwrap()
                .permit()
                .unwrap(),
        );
        held.push(
            store
                .acquire(user.as_bytes(), &limit)
                .await
                .unwrap()
                .permit()
                .unwrap(),
        );
        assert!(
            !store
                .acquire(user.as_bytes(), &limit)
                .await
                .unwrap()
                .is_granted()
        );
    }
    let per_node = cluster.keys_per_node();
    assert_eq!(per_node.iter().sum::<u64>(), 30);
    assert!(
        per_node.iter().filter(|&&n| n > 0).count() > 1,
        "{per_node:?}"
    );
    drop(held);
    eventually("every lease released", || {
        cluster.keys_per_node().iter().sum::<u64>() == 0
    })
    .await;
}

/// A store's renewer runs on the runtime of the acquisition that started it. When that
/// runtime shuts down mid-lease, the renewer dies with it: the next acquisition, from
/// another runtime, starts a new one, so its permit is renewed and stays counted however
/// long its request runs.
#[test]
fn the_renewer_starts_again_after_its_runtime_shut_down() {
    let redis = RedisServer::start();
    // The store's connection is driven by `b`, which outlives `a`.
    let b = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let store = b.block_on(connect(&redis.url()));
    let limit = ConcurrencyLimit::new("revived", 1)
        .unwrap()
        .with_lease(Duration::from_millis(800))
        .unwrap()
        .with_renewal(Duration::from_millis(100))
        .unwrap();
    let a = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    // Held across `a`'s end: its renewer was running, asleep until the renewal is due.
    let orphan = a
        .block_on(store.acquire(b"a", &limit))
        .unwrap()
        .permit()
        .unwrap();
    drop(a);
    b.block_on(async {
        let held = store.acquire(b"b", &limit).await.unwrap().permit().unwrap();
        let key = store.lease_key(b"b", &limit);
        let first = lease_expiry(&redis, &key);
        // Until the lease as first taken has lapsed on the server's clock.
        while server_now(&redis) <= first {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let again = store.acquire(b"b", &limit).await.unwrap();
        assert!(
            !again.is_granted(),
            "the held request's lease lapsed unrenewed: a second one was let in"
        );
        assert!(lease_expiry(&redis, &key) > first, "renewed");
        drop(held);
    });
    drop(orphan);
}
