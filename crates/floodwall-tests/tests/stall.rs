//! A Redis stall under a burst on one hot key, through the layer over a coalescing
//! `RedisStore`: every request of the burst is refused (503), and the checks that queued
//! behind the stalled call are never sent, so the quota is whole for the requests that
//! come after the stall. Only checks already sent when their callers gave up may be
//! charged: those are counted and subtracted, never guessed.
//!
//! The store is built with `deny_cache(false)`: the script calls sent and the checks
//! queued behind the stalled call are what is counted, and the deny cache would answer
//! the burst's refusals with no call at all.

use std::future::poll_fn;
use std::time::Duration;

use floodwall::Policy;
use floodwall::redis::RedisStore;
use floodwall::tower::RateLimitLayer;
// A request from a peer IP, and a service answering 200 "hello".
use floodwall_test_support::{from, hello};
use redis_harness::RedisServer;
use tower::{Layer, Service};

/// The store's bound on a check: requests of the burst give up after it.
const TIMEOUT: Duration = Duration::from_millis(250);
/// How long Redis serves nobody: many times the timeout, so the whole burst is answered
/// while it lasts.
const PAUSE_MS: u64 = 3_000;
/// Concurrent requests of one client during the stall.
const BURST: usize = 800;
/// The client's quota: a day's, so nothing refills while the test runs.
const QUOTA: usize = 1_200;
const CLIENT: &str = "203.0.113.7";

/// The status the layer answers one request from `ip` with.
async fn status<S, B>(mut svc: S, ip: &str) -> u16
where
    S: Service<http::Request<axum::body::Body>, Response = http::Response<B>>,
    S::Error: std::fmt::Debug,
{
    poll_fn(|cx| svc.poll_ready(cx)).await.unwrap();
    svc.call(from(ip)).await.unwrap().status().as_u16()
}

/// `n` requests from `ip`, all in flight at once; their statuses.
async fn burst<S, B>(svc: &S, ip: &str, n: usize) -> Vec<u16>
where
    S: Service<http::Request<axum::body::Body>, Response = http::Response<B>>
        + Clone
        + Send
        + 'static,
    S::Error: std::fmt::Debug,
    S::Future: Send,
{
    let tasks: Vec<_> = (0..n)
        .map(|_| {
            let (svc, ip) = (svc.clone(), ip.to_owned());
            tokio::spawn(async move { status(svc, &ip).await })
        })
        .collect();
    let mut out = Vec::with_capacity(n);
    for t in tasks {
        out.push(t.await.unwrap());
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stall_charges_none_of_the_refused_requests_that_never_went_out() {
    let redis = RedisServer::start();
    let store = RedisStore::builder()
        .deny_cache(false)
        .timeout(TIMEOUT)
        .multiplexed(&redis.url())
        .await
        .unwrap();
    let policy = Policy::gcra("stall", format!("{QUOTA}/day").parse().unwrap()).unwrap();
    let svc = RateLimitLayer::new(store.clone(), policy).layer(hello());
    // Another client's burst loads the single and the batch script, so no NOSCRIPT
    // round trip hides in the stall.
    assert!(
        burst(&svc, "198.51.100.1", 8)
            .await
            .iter()
            .all(|&s| s == 200)
    );

    redis.pause(PAUSE_MS);
    let before = store.stats();
    let statuses = burst(&svc, CLIENT, BURST).await;
    let refused = statuses.iter().filter(|&&s| s == 503).count();
    assert_eq!(refused, BURST, "every request of the stall is refused");
    // The harness's PING waits out the pause; the calls stuck in Redis then run first,
    // as they are ahead of any later check on the store's one connection.
    redis.cmd(&["PING"]);
    let stalled = store.stats();
    let calls = stalled.script_calls - before.script_calls;
    let coalesced = stalled.coalesced - before.coalesced;

    // After the stall, one request at a time until the first refusal.
    let mut admitted = 0;
    for _ in 0..=QUOTA {
        match status(svc.clone(), CLIENT).await {
            200 => admitted += 1,
            429 => break,
            other => panic!("after the stall: {other}"),
        }
    }
    eprintln!(
        "stall of {PAUSE_MS} ms, {BURST} requests: {calls} script calls, {coalesced} checks \
         batched behind them; {admitted} of {QUOTA} admitted afterwards"
    );
    assert_eq!(
        coalesced, 0,
        "a check queued behind the stalled call was sent after its caller was refused"
    );
    // Each call of the stall carried one check, sent before its caller gave up (it was
    // in flight: Redis ran it on resuming). Nothing else was charged.
    assert_eq!(
        admitted,
        QUOTA - calls as usize,
        "{calls} checks went out during the stall"
    );
}
