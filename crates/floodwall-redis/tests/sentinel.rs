//! Redis Sentinel, against real processes (a primary, a replica, one sentinel with
//! `down-after-milliseconds` 500 and `failover-timeout` 2000): decisions are made on the
//! primary the sentinel names; once it is killed and the replica promoted, they are made
//! on the new primary within the bound `floodwall_redis::guide::redis` states (Sentinel failover), with
//! replicated state intact; every check in between fails as `Unavailable` or `Timeout`
//! (never a panic, a backend error or an allow), and a `Fallback` answers them all.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use floodwall_core::resilience::Fallback;
use floodwall_core::{Error, Policy, StoreExt};
use floodwall_redis::{BuildError, RedisStore};
use redis_harness::{RedisSentinel, RedisServer};

/// The store's timeout: the last term of the documented bound.
const TIMEOUT: Duration = Duration::from_millis(500);
/// How often the test asks again while it waits for the failover.
const POLL: Duration = Duration::from_millis(10);

/// Whether `key` (a store key) exists on `node`.
/// Whether `node` holds `key`; `false` while it cannot answer (sentinel drops a node's
/// client connections when it reconfigures it, so a probe can meet a reset connection).
fn exists(node: &RedisServer, key: &[u8]) -> bool {
    node.try_cmd(&[&b"EXISTS"[..], key])
        .is_ok_and(|reply| reply.as_integer() == Some(1))
}

/// Only `Unavailable` and `Timeout` may answer a check while the primary is gone.
fn assert_failover_error(err: &Error) {
    assert!(
        err.is_unavailable() || err.is_timeout(),
        "a check during the failover failed with {err:?}, not Unavailable or Timeout"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn decisions_reach_the_new_primary_within_the_documented_bound() {
    let mut deployment = RedisSentinel::start(1, 1);
    // The bound `floodwall_redis::guide::redis` states, from the settings passed here.
    let bound = deployment.down_after() + deployment.failover_timeout() + TIMEOUT;
    let store = RedisStore::builder()
        .timeout(TIMEOUT)
        .sentinel(deployment.sentinel_urls(), RedisSentinel::SERVICE)
        .await
        .unwrap();
    assert!(format!("{store:?}").contains("sentinel"), "{store:?}");
    // One node: the local fallback enforces the whole quota alone.
    let fallback = Fallback::local(store.clone(), 1);
    // 10 an hour: a unit comes back every 6 min, so the seconds this test takes return none.
    let policy = Policy::gcra("sentinel", "10/hour".parse().unwrap()).unwrap();
    // What the fallback answers during the gap: plenty, so each answer is an allow.
    let gap = Policy::gcra("gap", "1000/s".parse().unwrap()).unwrap();

    // Decisions go to the primary (node 0), and reach the replica by replication.
    for used in 1..=7 {
        let d = store.check(b"before", &policy, 1).await.unwrap();
        assert!(d.is_allowed());
        assert_eq!(d.remaining, 10 - used);
    }
    let before = store.redis_key(b"before", &policy);
    let old = deployment.primary_port();
    assert_eq!(old, deployment.nodes()[0].port());
    assert!(exists(&deployment.nodes()[0], &before));
    assert_eq!(
        deployment.wait_replicated(Duration::from_secs(5)),
        1,
        "the replica did not catch up"
    );
    assert!(exists(&deployment.nodes()[1], &before));

    // Concurrent checks all through the failover: each one answers, as a decision or as
    // Unavailable / Timeout, and each task ends on a decision made after the failover.
    let stop = Arc::new(AtomicBool::new(false));
    let mut hammers = tokio::task::JoinSet::new();
    for t in 0..4u8 {
        let (store, policy, stop) = (store.clone(), policy.clone(), stop.clone());
        hammers.spawn(async move {
            let mut failed = 0u32;
            loop {
                let after = stop.load(Ordering::Relaxed);
                match store.check(&[b'h', t], &policy, 0).await {
                    Ok(_) if after => return failed,
                    Ok(_) => {}
                    Err(e) => {
                        assert_failover_error(&e);
                        failed += 1;
                    }
                }
                tokio::time::sleep(POLL).await;
            }
        });
    }

    deployment.kill_primary();
    let killed = Instant::now();
    let deadline = killed + bound;
    let (mut failed, mut covered) = (0u32, 0u32);
    let recovered = loop {
        // Through the fallback, every check is answered.
        let d = fallback
            .check(b"gap", &gap, 1)
            .await
            .unwrap_or_else(|e| panic!("the fallback let a check fail during the failover: {e:?}"));
        assert!(d.is_allowed());
        covered += 1;
        match store.check(b"probe", &policy, 1).await {
            Ok(_) => break killed.elapsed(),
            Err(e) => {
                assert_failover_error(&e);
                failed += 1;
            }
        }
        assert!(
            Instant::now() < deadline,
            "no decision {bound:?} after the primary was killed ({failed} checks failed); \
             sentinel log:\n{}",
            deployment.sentinels()[0].log_tail()
        );
        tokio::time::sleep(POLL).await;
    };
    stop.store(true, Ordering::Relaxed);
    eprintln!(
        "first decision on the new primary {recovered:?} after the kill (bound {bound:?}); \
         {failed} checks failed meanwhile, the fallback answered {covered}"
    );
    assert!(
        recovered < bound,
        "{recovered:?} is past the bound {bound:?}"
    );
    assert!(failed > 0, "no check saw the failover");
    assert!(
        fallback.stats().decided_locally > 0,
        "the fallback decided nothing locally"
    );
    let mut hammered = 0;
    while let Some(joined) = tokio::time::timeout(bound, hammers.join_next())
        .await
        .expect("a concurrent check found no primary after the failover")
    {
        hammered += joined.expect("a concurrent check panicked");
    }
    assert!(hammered > 0, "no concurrent check saw the failover");

    // The sentinel names the replica, and the decision was made there.
    let new = deployment.primary_port();
    assert_ne!(new, old);
    assert_eq!(new, deployment.nodes()[1].port());
    assert!(exists(
        &deployment.nodes()[1],
        &store.redis_key(b"probe", &policy)
    ));
    // The state written before the kill had been replicated (wait_replicated above), so
    // the new primary continues from it: 7 used, this check the 8th, 2 left.
    let d = store.check(b"before", &policy, 1).await.unwrap();
    assert!(d.is_allowed());
    assert_eq!(d.remaining, 2);
    // The fallback hands back to the store once it answers.
    fallback.check(b"gap", &gap, 1).await.unwrap();
    assert!(!fallback.is_engaged());
}

#[tokio::test]
async fn a_manual_failover_moves_decisions_to_the_promoted_replica() {
    let deployment = RedisSentinel::start(1, 1);
    // No failure to detect: sentinel promotes and names the replica within its
    // failover-timeout, and the store's next background refresh (one a SENTINEL_REFRESH)
    // moves its checks there within its timeout, as RedisStoreBuilder::sentinel documents.
    let bound = deployment.failover_timeout() + RedisStore::SENTINEL_REFRESH + TIMEOUT;
    let store = RedisStore::builder()
        .timeout(TIMEOUT)
        .sentinel(deployment.sentinel_urls(), RedisSentinel::SERVICE)
        .await
        .unwrap();
    // 10 an hour: a key written stays for minutes, long enough to look for it.
    let policy = Policy::gcra("manual", "10/hour".parse().unwrap()).unwrap();
    store.check(b"before", &policy, 1).await.unwrap();
    assert!(exists(
        &deployment.nodes()[0],
        &store.redis_key(b"before", &policy)
    ));

    // The old primary stays up, and a primary, for seconds (sentinel demotes it later):
    // the store must not keep writing to it, since what it accepts then is discarded.
    deployment.failover();
    let started = Instant::now();
    for attempt in 0u32.. {
        // A key of its own per attempt, sent once node 1 is a primary: if node 1 then
        // holds it, node 1 decided it (a primary receives no replication).
        // A reset connection (sentinel reconfiguring node 1) means not known yet.
        let promoted = deployment.nodes()[1]
            .try_cmd(&["ROLE"])
            .is_ok_and(|role| role.to_string().starts_with("master"));
        let key = format!("after-{attempt}");
        let on_node_1 = || {
            exists(
                &deployment.nodes()[1],
                &store.redis_key(key.as_bytes(), &policy),
            )
        };
        match store.check(key.as_bytes(), &policy, 1).await {
            Ok(_) if promoted && on_node_1() => break,
            Ok(_) => {}
            Err(e) => assert_failover_error(&e),
        }
        assert!(
            started.elapsed() < bound,
            "decisions not on the promoted replica {bound:?} after SENTINEL FAILOVER"
        );
        tokio::time::sleep(POLL).await;
    }
    eprintln!(
        "manual failover: decisions on the new primary after {:?}",
        started.elapsed()
    );
    assert_eq!(deployment.primary_port(), deployment.nodes()[1].port());
}

#[tokio::test]
async fn an_unknown_service_or_a_bad_url_is_a_typed_build_error() {
    let deployment = RedisSentinel::start(1, 1);
    let built = RedisStore::builder()
        .timeout(TIMEOUT)
        .sentinel(deployment.sentinel_urls(), "no-such-service")
        .await;
    assert!(
        matches!(built, Err(BuildError::Connect { .. })),
        "{built:?}"
    );
    let built = RedisStore::builder()
        .sentinel(["not a url"], RedisSentinel::SERVICE)
        .await;
    assert!(
        matches!(built, Err(BuildError::InvalidUrl { .. })),
        "{built:?}"
    );
    let built = RedisStore::builder()
        .prefix("bad{prefix}")
        .sentinel(deployment.sentinel_urls(), RedisSentinel::SERVICE)
        .await;
    assert!(
        matches!(built, Err(BuildError::InvalidPrefix { .. })),
        "{built:?}"
    );

    // A client built by the caller connects on the first check.
    let client = floodwall_redis::redis::sentinel::SentinelClient::build(
        deployment.sentinel_urls(),
        RedisSentinel::SERVICE.to_owned(),
        None,
        floodwall_redis::redis::sentinel::SentinelServerType::Master,
    )
    .unwrap();
    let store = RedisStore::builder().from_sentinel_client(client).unwrap();
    let policy = Policy::gcra("own-client", "3/s".parse().unwrap()).unwrap();
    assert_eq!(store.check(b"k", &policy, 1).await.unwrap().remaining, 2);
    assert!(exists(
        &deployment.nodes()[0],
        &store.redis_key(b"k", &policy)
    ));
}
