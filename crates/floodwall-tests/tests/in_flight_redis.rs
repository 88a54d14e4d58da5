//! In-flight limits shared through a real `redis-server`: two axum nodes admitting exactly N
//! of 256 concurrent requests, a client that disconnects giving its slot back, and a process
//! killed with SIGKILL whose leases expire on the server's clock.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use floodwall::core::Acquired;
use floodwall::redis::RedisStore;
use floodwall::tower::ConcurrencyLimitLayer;
use floodwall::{ConcurrencyLimit, StoreExt};
use floodwall_test_support::{eventually, http_get, serve};
use redis_harness::{RedisServer, Reply};
use tokio::io::AsyncWriteExt;

/// `ZCARD` of a lease key.
fn zcard(server: &RedisServer, key: &[u8]) -> i64 {
    server
        .try_cmd(&[&b"ZCARD"[..], key])
        .unwrap()
        .as_integer()
        .unwrap()
}

/// The server's clock, in µs.
fn server_now(server: &RedisServer) -> u64 {
    match server.try_cmd(&["TIME"]).unwrap() {
        Reply::Array(t) => {
            t[0].as_integer().unwrap() as u64 * 1_000_000 + t[1].as_integer().unwrap() as u64
        }
        other => panic!("TIME answered {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_nodes_admit_exactly_n_of_256_concurrent_requests() {
    const REQUESTS: usize = 256;
    const N: u64 = 6;
    let redis = RedisServer::start();
    let limit = ConcurrencyLimit::new("exports", N).unwrap();
    let decided = Arc::new(AtomicUsize::new(0));
    let (current, peak) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    // The handlers of both nodes count into one pair of atomics: what runs at once in the
    // fleet.
    let node = |store: RedisStore| {
        let (decided, current, peak) = (decided.clone(), current.clone(), peak.clone());
        Router::new()
            .route(
                "/export",
                get(move || {
                    let (decided, current, peak) = (decided.clone(), current.clone(), peak.clone());
                    async move {
                        let now = current.fetch_add(1, Ordering::SeqCst) + 1;
                        peak.fetch_max(now, Ordering::SeqCst);
                        decided.fetch_add(1, Ordering::SeqCst);
                        // Running until all 256 are admitted or refused: the handlers
                        // overlap, so the peak is what the fleet let in at once.
                        while decided.load(Ordering::SeqCst) < REQUESTS {
                            tokio::time::sleep(Duration::from_millis(2)).await;
                        }
                        current.fetch_sub(1, Ordering::SeqCst);
                        "exported"
                    }
                }),
            )
            .layer(ConcurrencyLimitLayer::new(store, limit.clone()))
    };
    let a = serve(node(RedisStore::connect(&redis.url()).await.unwrap())).await;
    let b = serve(node(RedisStore::connect(&redis.url()).await.unwrap())).await;
    let mut clients = tokio::task::JoinSet::new();
    for i in 0..REQUESTS {
        let (addr, decided) = (if i % 2 == 0 { a } else { b }, decided.clone());
        clients.spawn(async move {
            let res = http_get(addr, "/export", &[]).await;
            if res.status == 429 {
                assert!(res.get("retry-after").is_none());
                assert_eq!(res.header("ratelimit"), "\"exports\";r=0");
                decided.fetch_add(1, Ordering::SeqCst);
                return false;
            }
            assert_eq!((res.status, res.body.as_str()), (200, "exported"));
            true
        });
    }
    let served = clients.join_all().await.into_iter().filter(|&s| s).count();
    assert_eq!(
        peak.load(Ordering::SeqCst),
        N,
        "peak in flight over both nodes"
    );
    assert_eq!(
        served as u64,
        N,
        "the other {} refused",
        REQUESTS as u64 - N
    );
    let store = RedisStore::connect(&redis.url()).await.unwrap();
    let key = store.lease_key(&[4, 127, 0, 0, 1], &limit);
    eventually("every lease released", || zcard(&redis, &key) == 0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_disconnects_gives_its_lease_back() {
    let redis = RedisServer::start();
    let limit = ConcurrencyLimit::new("slow", 1).unwrap();
    let store = RedisStore::connect(&redis.url()).await.unwrap();
    let entered = Arc::new(AtomicUsize::new(0));
    let app = {
        let entered = entered.clone();
        Router::new()
            .route(
                "/slow",
                get(move || {
                    let entered = entered.clone();
                    async move {
                        entered.fetch_add(1, Ordering::SeqCst);
                        tokio::time::sleep(Duration::from_secs(3600)).await;
                        "never"
                    }
                }),
            )
            .route("/", get(|| async { "hello" }))
            .layer(ConcurrencyLimitLayer::new(store.clone(), limit.clone()))
    };
    let addr = serve(app).await;
    let mut client = tokio::net::TcpStream::connect(addr).await.unwrap();
    client
        .write_all(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    eventually("the handler runs", || entered.load(Ordering::SeqCst) == 1).await;
    let key = store.lease_key(&[4, 127, 0, 0, 1], &limit);
    assert_eq!(zcard(&redis, &key), 1);
    assert_eq!(http_get(addr, "/", &[]).await.status, 429);
    drop(client);
    eventually("the lease is released", || zcard(&redis, &key) == 0).await;
    assert_eq!(http_get(addr, "/", &[]).await.status, 200);
    assert_eq!(store.leases_held(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_process_killed_holding_leases_frees_them_within_the_lease_time() {
    const LEASE_MS: u64 = 1_000;
    let redis = RedisServer::start();
    let mut child = Command::new(env!("CARGO_BIN_EXE_hold_leases"))
        .args([&redis.url(), "crash", "3", &LEASE_MS.to_string(), "3"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("start hold_leases");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "held 3");

    let limit = ConcurrencyLimit::new("crash", 3)
        .unwrap()
        .with_lease(Duration::from_millis(LEASE_MS))
        .unwrap();
    let store = RedisStore::connect(&redis.url()).await.unwrap();
    let key = store.lease_key(b"k", &limit);
    // Alive, the child renews its leases: past two lease times they are still its.
    tokio::time::sleep(Duration::from_millis(2 * LEASE_MS)).await;
    let Acquired::Full(full) = store.acquire(b"k", &limit).await.unwrap() else {
        panic!("the live process's slots were given away");
    };
    assert_eq!(full.in_flight, 3);

    // SIGKILL (`Child::kill` on Unix), by its PID: no drop, no release, no goodbye.
    let pid = child.id();
    child.kill().unwrap();
    child.wait().unwrap();
    let killed_at = server_now(&redis);
    assert!(
        !store.acquire(b"k", &limit).await.unwrap().is_granted(),
        "its slots outlive it for a while (pid {pid})"
    );
    // Its leases expire by the server's clock within one lease time of the kill.
    let expiries: Vec<u64> = match redis
        .try_cmd(&[&b"ZRANGE"[..], &key, b"0", b"-1", b"WITHSCORES"])
        .unwrap()
    {
        Reply::Array(m) => m
            .chunks(2)
            .map(|pair| pair[1].to_string().parse().unwrap())
            .collect(),
        other => panic!("{other:?}"),
    };
    assert_eq!(expiries.len(), 3);
    let last = *expiries.iter().max().unwrap();
    assert!(
        last <= killed_at + LEASE_MS * 1000,
        "a lease ends {} µs after the kill",
        last - killed_at
    );
    while server_now(&redis) <= last {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // All three slots are free again (held together, so none is counted twice).
    let mut held = Vec::new();
    for _ in 0..3 {
        let permit = store.acquire(b"k", &limit).await.unwrap().permit();
        held.push(permit.expect("a dead process's slot is free again"));
    }
    assert_eq!(held.last().unwrap().in_flight(), 3);
}
