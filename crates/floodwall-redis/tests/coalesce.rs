//! Coalescing against a real redis-server: concurrent checks of one key become two EVALSHAs
//! (the first check alone, the others in one batch behind it) whose answers equal
//! sequential calls of the core model (`Policy::decide`) at one instant.

mod common;

use std::time::Duration;

use floodwall_core::{Algorithm, Decision, Policy, State};
use floodwall_redis::RedisStore;
use proptest::prelude::*;
use redis_harness::RedisServer;

use common::{command_calls, small_policy};

const NOW: u64 = 1_700_000_000_000_000;

/// The algorithms that coalesce.
fn coalescing() -> [Algorithm; 4] {
    [
        Algorithm::Gcra,
        Algorithm::TOKEN_BUCKET,
        Algorithm::LeakyBucket,
        Algorithm::FixedWindow,
    ]
}

fn evalsha_calls(server: &RedisServer) -> u64 {
    command_calls(server)
        .into_iter()
        .find(|(c, _)| c == "evalsha")
        .map_or(0, |(_, n)| n)
}

/// Without the deny cache: these tests count the script calls and batches coalescing
/// makes, and a cached refusal would answer some checks with no call at all.
async fn coalescing_store(server: &RedisServer) -> RedisStore {
    RedisStore::builder()
        .coalesce(true)
        .deny_cache(false)
        .multiplexed(&server.url())
        .await
        .unwrap()
}

/// Starts every check before awaiting any: on the current-thread runtime the tasks run in
/// spawn order, so they join the batch in that order, before its driver task runs.
async fn concurrently(
    store: &RedisStore,
    key: &[u8],
    policy: &Policy,
    costs: &[u64],
    now: Option<u64>,
) -> Vec<Decision> {
    let handles: Vec<_> = costs
        .iter()
        .map(|&cost| {
            let (store, policy, key) = (store.clone(), policy.clone(), key.to_vec());
            tokio::spawn(async move {
                match now {
                    Some(now) => store.check_at(&key, &policy, cost, now).await,
                    None => floodwall_core::Store::check(&store, &key, &policy, cost).await,
                }
            })
        })
        .collect();
    let mut out = Vec::new();
    for h in handles {
        out.push(h.await.unwrap().unwrap());
    }
    out
}

#[tokio::test]
async fn concurrent_checks_of_one_key_are_two_evalshas_with_sequential_answers() {
    let server = RedisServer::start();
    let store = coalescing_store(&server).await;
    for algorithm in coalescing() {
        let policy = Policy::new(
            format!("n-{algorithm}"),
            algorithm,
            "5/day".parse().unwrap(),
        )
        .unwrap();
        // Loads the single and the batch script (a check alone, one queued behind it), so
        // the measured calls are not NOSCRIPT retries.
        concurrently(&store, b"warm", &policy, &[1, 1], Some(NOW)).await;
        server.cmd(&["CONFIG", "RESETSTAT"]);
        let before = store.stats();
        let costs = [1, 2, 1, 1, 3, 1, 1, 0, 1, 1, 1, 1];
        let got = concurrently(&store, b"hot", &policy, &costs, Some(NOW)).await;
        // The first check goes alone; the 11 that queue behind it go as one batch.
        assert_eq!(
            evalsha_calls(&server),
            2,
            "{algorithm}: EVALSHAs for 12 checks"
        );
        let after = store.stats();
        assert_eq!(after.script_calls - before.script_calls, 2, "{algorithm}");
        assert_eq!(after.coalesced - before.coalesced, 10, "{algorithm}");
        let mut state = State::new();
        for (i, (&cost, d)) in costs.iter().zip(&got).enumerate() {
            let expected = policy.decide(&mut state, NOW, cost).unwrap();
            assert_eq!(*d, expected, "{algorithm}: check {i} (cost {cost})");
        }
        // On the server's clock too: two calls, exactly the quota admitted.
        server.cmd(&["CONFIG", "RESETSTAT"]);
        let got = concurrently(&store, b"hot-live", &policy, &[1; 20], None).await;
        assert_eq!(evalsha_calls(&server), 2, "{algorithm}");
        assert_eq!(got.iter().filter(|d| d.allowed).count(), 5, "{algorithm}");
        assert!(
            got[..5].iter().all(|d| d.allowed),
            "{algorithm}: arrival order"
        );
    }
}

#[tokio::test]
async fn windows_of_buckets_and_logs_are_never_coalesced() {
    let server = RedisServer::start();
    let store = coalescing_store(&server).await;
    for algorithm in [Algorithm::SLIDING_WINDOW, Algorithm::SlidingLog] {
        let policy = Policy::new(
            format!("nc-{algorithm}"),
            algorithm,
            "5/day".parse().unwrap(),
        )
        .unwrap();
        let before = store.stats();
        let got = concurrently(&store, b"hot", &policy, &[1; 8], Some(NOW)).await;
        let after = store.stats();
        assert_eq!(after.script_calls - before.script_calls, 8, "{algorithm}");
        assert_eq!(after.coalesced, before.coalesced, "{algorithm}");
        assert_eq!(got.iter().filter(|d| d.allowed).count(), 5, "{algorithm}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_tasks_on_many_threads_admit_exactly_the_quota() {
    let server = RedisServer::start();
    let store = coalescing_store(&server).await;
    let policy = Policy::gcra("mt", "100/day".parse().unwrap()).unwrap();
    let before = store.stats();
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let (store, policy) = (store.clone(), policy.clone());
            tokio::spawn(async move {
                let mut admitted = 0;
                for _ in 0..40 {
                    let d = floodwall_core::Store::check(&store, b"hot", &policy, 1)
                        .await
                        .unwrap();
                    admitted += u64::from(d.allowed);
                }
                admitted
            })
        })
        .collect();
    let mut admitted = 0;
    for t in tasks {
        admitted += t.await.unwrap();
    }
    assert_eq!(admitted, 100);
    let after = store.stats();
    let calls = after.script_calls - before.script_calls;
    let saved = after.coalesced - before.coalesced;
    assert_eq!(
        calls + saved,
        320,
        "every check was sent alone or in a batch"
    );
    // Eight tasks on one key: checks arrive while another is in flight and share its
    // next call (with `coalesce(false)`, none would).
    assert!(saved > 0, "no call saved: {calls} calls for 320 checks");
}

#[test]
fn batches_decide_as_sequential_calls_of_the_core_model() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let server = RedisServer::start();
    let store = rt.block_on(coalescing_store(&server));
    let case = std::sync::atomic::AtomicU64::new(0);
    let config = ProptestConfig {
        cases: 96,
        failure_persistence: None,
        ..ProptestConfig::default()
    };
    proptest!(config, |(
        alg in 0..4usize,
        count in 1..=6u64,
        period_ms in prop::sample::select(vec![10u64, 20, 50]),
        burst in 1..=6u64,
        history in prop::collection::vec((0..20_000u64, 0..=6u64), 0..8),
        batch in prop::collection::vec(0..=6u64, 1..24),
        gap in 0..20_000u64,
        after in 0..=6u64,
    )| {
        let case = case.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // A coalescing algorithm: counts 1..=6 per 10, 20 or 50 ms, bursts 1..=6.
        let policy = small_policy(format!("pt{case}"), coalescing()[alg], count, period_ms, burst);
        let limit = policy.limit();
        let mut state = State::new();
        let mut now = NOW;
        rt.block_on(async {
            // A history, one check at a time: batches of one.
            for (dt, cost) in history {
                now += dt;
                let cost = cost.min(limit);
                let got = store.check_at(b"k", &policy, cost, now).await.unwrap();
                prop_assert_eq!(got, policy.decide(&mut state, now, cost).unwrap());
            }
            now += gap;
            let costs: Vec<u64> = batch.iter().map(|&c| c.min(limit)).collect();
            let before = store.stats();
            let got = concurrently(&store, b"k", &policy, &costs, Some(now)).await;
            // The first check alone, the rest in one batch behind it.
            let stats = store.stats();
            prop_assert_eq!(stats.script_calls - before.script_calls, costs.len().min(2) as u64);
            prop_assert_eq!(stats.coalesced - before.coalesced, costs.len().saturating_sub(2) as u64);
            for (i, (&cost, d)) in costs.iter().zip(&got).enumerate() {
                let expected = policy.decide(&mut state, now, cost).unwrap();
                prop_assert_eq!(*d, expected, "check {} of the batch (cost {})", i, cost);
            }
            // What the batch wrote is what the model holds.
            let cost = after.min(limit);
            let got = store.check_at(b"k", &policy, cost, now + 1).await.unwrap();
            prop_assert_eq!(got, policy.decide(&mut state, now + 1, cost).unwrap());
            Ok(())
        })?;
    });
}

#[tokio::test]
async fn a_leader_dropped_mid_call_hands_its_queue_on() {
    let server = RedisServer::start();
    let store = coalescing_store(&server).await;
    let policy = Policy::gcra("dropped", "5/day".parse().unwrap()).unwrap();
    // Load both scripts first, so the paused calls are the measured ones.
    concurrently(&store, b"warm", &policy, &[1, 1], Some(NOW)).await;
    // Redis holds every command for 300 ms: the leader's call hangs.
    server.cmd(&["CLIENT", "PAUSE", "300", "ALL"]);
    let leader = {
        let (store, policy) = (store.clone(), policy.clone());
        tokio::spawn(async move {
            tokio::time::timeout(
                Duration::from_millis(50),
                store.check_at(b"k", &policy, 1, NOW),
            )
            .await
        })
    };
    tokio::time::sleep(Duration::from_millis(10)).await;
    // Three checks queue behind the leader's call; then its caller gives up.
    let followers = concurrently(&store, b"k", &policy, &[1, 1, 1], Some(NOW));
    let (leader, followers) = tokio::join!(leader, followers);
    assert!(leader.unwrap().is_err(), "the leader's caller timed out");
    // The queue was sent by a driver once Redis resumed: sequential answers after the
    // leader's admission (which Redis still made).
    let remaining: Vec<u64> = followers.iter().map(|d| d.remaining).collect();
    assert_eq!(remaining, [3, 2, 1]);
}

#[tokio::test]
async fn checks_whose_callers_left_the_queue_are_never_sent() {
    let server = RedisServer::start();
    let store = coalescing_store(&server).await;
    let policy = Policy::gcra("left", "5/day".parse().unwrap()).unwrap();
    concurrently(&store, b"warm", &policy, &[1, 1], Some(NOW)).await;
    // Redis holds every command for 300 ms (well within the store's 1 s timeout): the
    // leader's call hangs, and three checks queue behind it.
    server.cmd(&["CLIENT", "PAUSE", "300", "ALL"]);
    let before = store.stats();
    let leader = {
        let (store, policy) = (store.clone(), policy.clone());
        tokio::spawn(async move { store.check_at(b"k", &policy, 1, NOW).await })
    };
    tokio::task::yield_now().await;
    let followers: Vec<_> = (0..3)
        .map(|_| {
            let (store, policy) = (store.clone(), policy.clone());
            tokio::spawn(async move { store.check_at(b"k", &policy, 1, NOW).await })
        })
        .collect();
    tokio::task::yield_now().await;
    // Their callers go away (a client hung up) while the leader's call is in flight.
    for f in &followers {
        f.abort();
    }
    for f in followers {
        assert!(f.await.unwrap_err().is_cancelled());
    }
    let leader = leader.await.unwrap().unwrap();
    assert_eq!(leader.remaining, 4, "the leader was answered");
    let after = store.stats();
    assert_eq!(
        after.script_calls - before.script_calls,
        1,
        "only the leader's call"
    );
    assert_eq!(after.coalesced, before.coalesced, "no batch was sent");
    // Only the leader's unit is spent.
    let next = store.check_at(b"k", &policy, 1, NOW).await.unwrap();
    assert_eq!(next.remaining, 3);
}

#[tokio::test]
async fn a_full_queue_refuses_as_overloaded_and_its_timed_out_checks_are_not_sent() {
    let server = RedisServer::start();
    // Without the deny cache: the queue and the calls sent are what is counted.
    let store = RedisStore::builder()
        .timeout(Duration::from_millis(200))
        .deny_cache(false)
        .multiplexed(&server.url())
        .await
        .unwrap();
    let limit = RedisStore::MAX_QUEUED_PER_KEY as u64 + 100;
    let policy = Policy::gcra("full", format!("{limit}/day").parse().unwrap()).unwrap();
    concurrently(&store, b"warm", &policy, &[1, 1], Some(NOW)).await;
    // Redis serves nobody for 1.5 s: the leader's call times out, and every check
    // queued behind it gives up too.
    server.cmd(&["CLIENT", "PAUSE", "1500", "ALL"]);
    let before = store.stats();
    let checks: Vec<_> = (0..RedisStore::MAX_QUEUED_PER_KEY + 2)
        .map(|_| {
            let (store, policy) = (store.clone(), policy.clone());
            tokio::spawn(async move { store.check_at(b"k", &policy, 1, NOW).await })
        })
        .collect();
    let mut timeouts = 0;
    let mut overloaded = Vec::new();
    for c in checks {
        match c.await.unwrap() {
            Err(e) if e.is_timeout() => timeouts += 1,
            Err(e) if e.is_overloaded() => overloaded.push(e),
            other => panic!("during the pause: {other:?}"),
        }
    }
    // The leader and a full queue time out; the check past the bound is refused at once.
    assert_eq!(timeouts, RedisStore::MAX_QUEUED_PER_KEY + 1);
    assert_eq!(overloaded.len(), 1);
    assert!(
        matches!(
            overloaded[0],
            floodwall_core::Error::Overloaded { max_in_flight } if max_in_flight == RedisStore::MAX_QUEUED_PER_KEY
        ),
        "{:?}",
        overloaded[0]
    );
    // Once Redis serves again, only the leader's check (sent before the pause ended) is
    // charged: the queued ones were never sent.
    server.cmd(&["PING"]);
    let after = store.stats();
    assert_eq!(after.script_calls - before.script_calls, 1);
    assert_eq!(after.coalesced, before.coalesced);
    let next = store.check_at(b"k", &policy, 1, NOW).await.unwrap();
    assert_eq!(next.remaining, limit - 2);
}
