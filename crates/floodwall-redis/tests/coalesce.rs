//! Coalescing against a real redis-server: concurrent checks, of one key or of many, become
//! two EVALSHAs (the first check alone, the others in one batch behind it) whose answers equal sequential calls of the core model
//! (`Policy::decide`) at one instant, key by key; a batch leaves each key's state as those
//! calls one after another would.

mod common;

use std::time::Duration;

use floodwall_core::{Algorithm, Decision, Policy, State, StoreExt};
use floodwall_redis::RedisStore;
use proptest::prelude::*;
use redis_harness::{RedisServer, Reply};

use common::{command_calls, small_policy};

const NOW: u64 = 1_700_000_000_000_000;
/// Checks sent alone before the others queue for a batch: the first, when nothing of its
/// policy is in flight.
const ALONE: usize = 1;

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
    let checks: Vec<(&[u8], u64)> = costs.iter().map(|&c| (key, c)).collect();
    spread(store, policy, &checks, now)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect()
}

/// As [`concurrently`], each check on its own key.
async fn spread(
    store: &RedisStore,
    policy: &Policy,
    checks: &[(&[u8], u64)],
    now: Option<u64>,
) -> Vec<Result<Decision, floodwall_core::Error>> {
    let handles: Vec<_> = checks
        .iter()
        .map(|&(key, cost)| {
            let (store, policy, key) = (store.clone(), policy.clone(), key.to_vec());
            tokio::spawn(async move {
                match now {
                    Some(now) => store.at(now).check(&key, &policy, cost).await,
                    None => StoreExt::check(&store, &key, &policy, cost).await,
                }
            })
        })
        .collect();
    let mut out = Vec::new();
    for h in handles {
        out.push(h.await.unwrap());
    }
    out
}

/// The value and whether a TTL is set, of `store`'s key for `user` under `policy`.
fn stored(server: &RedisServer, store: &RedisStore, user: &[u8], policy: &Policy) -> (Reply, bool) {
    let key = String::from_utf8(store.redis_key(user, policy)).unwrap();
    let value = server.try_cmd(&["GET", &key]).unwrap();
    let ttl = server
        .try_cmd(&["PTTL", &key])
        .unwrap()
        .as_integer()
        .unwrap();
    (value, ttl > 0)
}

#[tokio::test]
async fn concurrent_checks_of_one_key_share_a_batch_with_sequential_answers() {
    let server = RedisServer::start();
    let store = coalescing_store(&server).await;
    for algorithm in coalescing() {
        let policy = Policy::new(
            format!("n-{algorithm}"),
            algorithm,
            "5/day".parse().unwrap(),
        )
        .unwrap();
        // Loads the single and the batch script (checks alone, one queued behind them), so
        // the measured calls are not NOSCRIPT retries.
        concurrently(&store, b"warm", &policy, &[1; ALONE + 1], Some(NOW)).await;
        server.cmd(&["CONFIG", "RESETSTAT"]);
        let before = store.stats();
        let costs = [1, 2, 1, 1, 3, 1, 1, 0, 1, 1, 1, 1];
        let got = concurrently(&store, b"hot", &policy, &costs, Some(NOW)).await;
        // The first checks go alone; those that queue behind them go as one batch.
        let calls = ALONE as u64 + 1;
        assert_eq!(
            evalsha_calls(&server),
            calls,
            "{algorithm}: EVALSHAs for 12 checks"
        );
        let after = store.stats();
        assert_eq!(
            after.script_calls - before.script_calls,
            calls,
            "{algorithm}"
        );
        assert_eq!(
            after.coalesced - before.coalesced,
            12 - calls,
            "{algorithm}"
        );
        let mut state = State::new();
        for (i, (&cost, d)) in costs.iter().zip(&got).enumerate() {
            let expected = policy.decide(&mut state, NOW, cost).unwrap();
            assert_eq!(*d, expected, "{algorithm}: check {i} (cost {cost})");
        }
        // On the server's clock too: the same calls, exactly the quota admitted.
        server.cmd(&["CONFIG", "RESETSTAT"]);
        let got = concurrently(&store, b"hot-live", &policy, &[1; 20], None).await;
        assert_eq!(evalsha_calls(&server), calls, "{algorithm}");
        assert_eq!(
            got.iter().filter(|d| d.is_allowed()).count(),
            5,
            "{algorithm}"
        );
        assert!(
            got[..5].iter().all(|d| d.is_allowed()),
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
        assert_eq!(
            got.iter().filter(|d| d.is_allowed()).count(),
            5,
            "{algorithm}"
        );
    }
}

#[tokio::test]
async fn concurrent_checks_of_many_keys_share_one_batch_with_sequential_answers() {
    let server = RedisServer::start();
    let store = coalescing_store(&server).await;
    let users: [&[u8]; 4] = [b"a", b"b", b"c", b"d"];
    for algorithm in coalescing() {
        let policy = Policy::new(
            format!("m-{algorithm}"),
            algorithm,
            "5/day".parse().unwrap(),
        )
        .unwrap();
        concurrently(&store, b"warm", &policy, &[1; 3], Some(NOW)).await;
        server.cmd(&["CONFIG", "RESETSTAT"]);
        let before = store.stats();
        // Keys in arrival order, with repeats; costs of 0 to 3.
        let order = [0, 1, 0, 2, 1, 0, 2, 2, 0, 3, 0, 1, 0, 3];
        let checks: Vec<(&[u8], u64)> = order
            .iter()
            .enumerate()
            .map(|(i, &k)| (users[k], [1, 2, 1, 0, 3][i % 5]))
            .collect();
        let got = spread(&store, &policy, &checks, Some(NOW)).await;
        // The first checks go alone; the rest, of four keys, as one batch.
        let calls = ALONE as u64 + 1;
        assert_eq!(evalsha_calls(&server), calls, "{algorithm}");
        let after = store.stats();
        assert_eq!(
            after.script_calls - before.script_calls,
            calls,
            "{algorithm}"
        );
        assert_eq!(
            after.coalesced - before.coalesced,
            checks.len() as u64 - calls,
            "{algorithm}"
        );
        let mut states: Vec<State> = users.iter().map(|_| State::new()).collect();
        for (i, ((&k, &(_, cost)), d)) in order.iter().zip(&checks).zip(&got).enumerate() {
            let expected = policy.decide(&mut states[k], NOW, cost).unwrap();
            assert_eq!(*d.as_ref().unwrap(), expected, "{algorithm}: check {i}");
        }
        // On the server's clock: ten checks of each key, exactly its first five admitted.
        let checks: Vec<(&[u8], u64)> = (0..40).map(|i| (users[i % 4], 1)).collect();
        let live = Policy::new(
            format!("m-live-{algorithm}"),
            algorithm,
            "5/day".parse().unwrap(),
        )
        .unwrap();
        let got = spread(&store, &live, &checks, None).await;
        for (k, user) in users.iter().enumerate() {
            let admitted: Vec<bool> = got
                .iter()
                .skip(k)
                .step_by(4)
                .map(|d| d.as_ref().unwrap().is_allowed())
                .collect();
            assert_eq!(
                admitted,
                [[true; 5], [false; 5]].concat(),
                "{algorithm}: {user:?}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_tasks_on_many_threads_admit_exactly_the_quota_of_each_key() {
    let server = RedisServer::start();
    let store = coalescing_store(&server).await;
    let policy = Policy::gcra("mt", "50/day".parse().unwrap()).unwrap();
    let before = store.stats();
    // 96 tasks, each going round four keys from its own: 960 checks of each key. With more
    // than 32 checks waiting behind a batch, a second call goes out beside it.
    let tasks: Vec<_> = (0..96)
        .map(|t| {
            let (store, policy) = (store.clone(), policy.clone());
            tokio::spawn(async move {
                let mut admitted = [0u64; 4];
                for i in 0..40 {
                    let k = (t + i) % 4;
                    let key = format!("key-{k}");
                    let d = StoreExt::check(&store, key.as_bytes(), &policy, 1)
                        .await
                        .unwrap();
                    admitted[k] += u64::from(d.is_allowed());
                }
                admitted
            })
        })
        .collect();
    let mut admitted = [0u64; 4];
    for t in tasks {
        for (total, n) in admitted.iter_mut().zip(t.await.unwrap()) {
            *total += n;
        }
    }
    assert_eq!(admitted, [50; 4]);
    let after = store.stats();
    let calls = after.script_calls - before.script_calls;
    let saved = after.coalesced - before.coalesced;
    assert_eq!(
        calls + saved,
        3840,
        "every check was sent alone or in a batch"
    );
    // 96 tasks, four keys: checks arrive while calls are in flight and share the next
    // (with `coalesce(false)`, none would).
    assert!(saved > 0, "no call saved: {calls} calls for 3840 checks");
}

#[tokio::test]
async fn a_batch_with_a_key_of_another_type_answers_every_other_check_once() {
    let server = RedisServer::start();
    let store = coalescing_store(&server).await;
    for algorithm in coalescing() {
        let policy = Policy::new(
            format!("wt-{algorithm}"),
            algorithm,
            "5/day".parse().unwrap(),
        )
        .unwrap();
        concurrently(&store, b"warm", &policy, &[1; 3], Some(NOW)).await;
        // Someone else's hash where one user's state would be.
        let bad = String::from_utf8(store.redis_key(b"bad", &policy)).unwrap();
        server.cmd(&["HSET", &bad, "field", "1"]);
        let before = store.stats();
        let mut checks: Vec<(&[u8], u64)> = vec![(b"lead", 1); ALONE];
        checks.extend([(&b"x"[..], 1), (b"bad", 1), (b"y", 2), (b"x", 1)]);
        let got = spread(&store, &policy, &checks, Some(NOW)).await;
        // The batch failed on the hash before writing anything; each of its checks was
        // then sent alone: the hash's fails, the others are decided once each.
        let err = got[ALONE + 1].as_ref().unwrap_err();
        assert!(err.to_string().contains("WRONGTYPE"), "{algorithm}: {err}");
        let after = store.stats();
        assert_eq!(
            after.script_calls - before.script_calls,
            ALONE as u64 + 1 + 4,
            "{algorithm}: the lone checks, the batch, then its four checks one by one"
        );
        // x's and y's states, in the model.
        let mut states = [State::new(), State::new()];
        for (i, k, cost) in [(ALONE, 0, 1), (ALONE + 2, 1, 2), (ALONE + 3, 0, 1)] {
            let expected = policy.decide(&mut states[k], NOW, cost).unwrap();
            assert_eq!(
                *got[i].as_ref().unwrap(),
                expected,
                "{algorithm}: check {i}"
            );
        }
        for (user, state) in [&b"x"[..], b"y"].into_iter().zip(&mut states) {
            let next = store.at(NOW).check(user, &policy, 1).await.unwrap();
            assert_eq!(
                next,
                policy.decide(state, NOW, 1).unwrap(),
                "{algorithm}: {user:?}"
            );
        }
        assert_eq!(
            server.cmd(&["TYPE", &bad]),
            "hash",
            "{algorithm}: left alone"
        );
    }
}

#[test]
fn batches_decide_and_write_as_sequential_calls_of_the_core_model() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let server = RedisServer::start();
    let store = rt.block_on(coalescing_store(&server));
    // The same checks one after another, on keys of their own (a twin policy's).
    let sequential = rt.block_on(async {
        RedisStore::builder()
            .coalesce(false)
            .deny_cache(false)
            .multiplexed(&server.url())
            .await
            .unwrap()
    });
    let users: [&[u8]; 4] = [b"k0", b"k1", b"k2", b"k3"];
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
        history in prop::collection::vec((0..4usize, 0..20_000u64, 0..=6u64), 0..12),
        batch in prop::collection::vec((0..4usize, 0..=6u64), 1..32),
        gap in 0..20_000u64,
        after in 0..=6u64,
    )| {
        let case = case.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // A coalescing algorithm: counts 1..=6 per 10, 20 or 50 ms, bursts 1..=6.
        let policy = small_policy(format!("pt{case}"), coalescing()[alg], count, period_ms, burst);
        let twin = small_policy(format!("pt{case}-seq"), coalescing()[alg], count, period_ms, burst);
        let limit = policy.limit();
        let mut states: Vec<State> = users.iter().map(|_| State::new()).collect();
        let mut now = NOW;
        rt.block_on(async {
            // A history, one check at a time: each alone.
            for (k, dt, cost) in history {
                now += dt;
                let cost = cost.min(limit);
                let expected = policy.decide(&mut states[k], now, cost).unwrap();
                let got = store.at(now).check(users[k], &policy, cost).await.unwrap();
                prop_assert_eq!(got, expected);
                let got = sequential.at(now).check(users[k], &twin, cost).await.unwrap();
                prop_assert_eq!(got, expected);
            }
            now += gap;
            let checks: Vec<(&[u8], u64)> =
                batch.iter().map(|&(k, c)| (users[k], c.min(limit))).collect();
            let before = store.stats();
            let got = spread(&store, &policy, &checks, Some(now)).await;
            // The first checks alone, the rest in one batch behind them.
            let stats = store.stats();
            let calls = checks.len().min(ALONE) + usize::from(checks.len() > ALONE);
            prop_assert_eq!(stats.script_calls - before.script_calls, calls as u64);
            prop_assert_eq!(stats.coalesced - before.coalesced, (checks.len() - calls) as u64);
            for (i, (&(k, _), &(user, cost))) in batch.iter().zip(&checks).enumerate() {
                let expected = policy.decide(&mut states[k], now, cost).unwrap();
                prop_assert_eq!(got[i].as_ref().unwrap(), &expected, "check {} (cost {})", i, cost);
                let alone = sequential.at(now).check(user, &twin, cost).await.unwrap();
                prop_assert_eq!(alone, expected, "check {} sent alone", i);
            }
            // What the batch wrote is what the calls one after another wrote, and what the
            // model holds.
            for (k, &user) in users.iter().enumerate() {
                prop_assert_eq!(
                    stored(&server, &store, user, &policy),
                    stored(&server, &sequential, user, &twin),
                    "key {}", k
                );
                let cost = after.min(limit);
                let got = store.at(now + 1).check(user, &policy, cost).await.unwrap();
                prop_assert_eq!(got, policy.decide(&mut states[k], now + 1, cost).unwrap());
            }
            Ok(())
        })?;
    });
}

#[tokio::test]
async fn a_leader_dropped_mid_call_hands_its_queue_on() {
    let server = RedisServer::start();
    let store = coalescing_store(&server).await;
    let policy = Policy::gcra("dropped", "10/day".parse().unwrap()).unwrap();
    // Load both scripts first, so the paused calls are the measured ones.
    concurrently(&store, b"warm", &policy, &[1; ALONE + 1], Some(NOW)).await;
    // Redis holds every command for 300 ms: the leader's call hangs.
    server.cmd(&["CLIENT", "PAUSE", "300", "ALL"]);
    let leader = {
        let (store, policy) = (store.clone(), policy.clone());
        tokio::spawn(async move {
            tokio::time::timeout(
                Duration::from_millis(50),
                store.at(NOW).check(b"k", &policy, 1),
            )
            .await
        })
    };
    tokio::time::sleep(Duration::from_millis(10)).await;
    // Checks take the other places in flight, then two queue behind the calls; then the
    // leader's caller gives up.
    let followers = concurrently(&store, b"k", &policy, &[1; ALONE + 1], Some(NOW));
    let (leader, followers) = tokio::join!(leader, followers);
    assert!(leader.unwrap().is_err(), "the leader's caller timed out");
    // The queue was sent by a driver once Redis resumed: sequential answers after the
    // leader's admission (which Redis still made).
    let remaining: Vec<u64> = followers.iter().map(|d| d.remaining).collect();
    let expected: Vec<u64> = (0..=ALONE as u64).map(|i| 8 - i).collect();
    assert_eq!(remaining, expected);
}

#[tokio::test]
async fn checks_whose_callers_left_the_queue_are_never_sent() {
    let server = RedisServer::start();
    let store = coalescing_store(&server).await;
    let policy = Policy::gcra("left", "10/day".parse().unwrap()).unwrap();
    concurrently(&store, b"warm", &policy, &[1; ALONE + 1], Some(NOW)).await;
    // Redis holds every command for 300 ms (well within the store's 1 s timeout): the
    // leaders' calls hang, and three checks queue behind them.
    server.cmd(&["CLIENT", "PAUSE", "300", "ALL"]);
    let before = store.stats();
    let leaders: Vec<_> = (0..ALONE)
        .map(|_| {
            let (store, policy) = (store.clone(), policy.clone());
            tokio::spawn(async move { store.at(NOW).check(b"k", &policy, 1).await })
        })
        .collect();
    tokio::task::yield_now().await;
    let followers: Vec<_> = (0..3)
        .map(|_| {
            let (store, policy) = (store.clone(), policy.clone());
            tokio::spawn(async move { store.at(NOW).check(b"k", &policy, 1).await })
        })
        .collect();
    tokio::task::yield_now().await;
    // Their callers go away (a client hung up) while the leaders' calls are in flight.
    for f in &followers {
        f.abort();
    }
    for f in followers {
        assert!(f.await.unwrap_err().is_cancelled());
    }
    let mut remaining = Vec::new();
    for leader in leaders {
        remaining.push(leader.await.unwrap().unwrap().remaining);
    }
    let expected: Vec<u64> = (0..ALONE as u64).map(|i| 9 - i).collect();
    assert_eq!(remaining, expected, "the leaders were answered");
    let after = store.stats();
    assert_eq!(
        after.script_calls - before.script_calls,
        ALONE as u64,
        "only the leaders' calls"
    );
    assert_eq!(after.coalesced, before.coalesced, "no batch was sent");
    // Only the leaders' units are spent.
    let next = store.at(NOW).check(b"k", &policy, 1).await.unwrap();
    assert_eq!(next.remaining, 9 - ALONE as u64);
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
    let limit = RedisStore::MAX_QUEUED_PER_GROUP as u64 + 100;
    let policy = Policy::gcra("full", format!("{limit}/day").parse().unwrap()).unwrap();
    concurrently(&store, b"warm", &policy, &[1; ALONE + 1], Some(NOW)).await;
    // Redis serves nobody for 1.5 s: the leaders' calls time out, and every check
    // queued behind them gives up too.
    server.cmd(&["CLIENT", "PAUSE", "1500", "ALL"]);
    let before = store.stats();
    let checks: Vec<_> = (0..RedisStore::MAX_QUEUED_PER_GROUP + ALONE + 1)
        .map(|_| {
            let (store, policy) = (store.clone(), policy.clone());
            tokio::spawn(async move { store.at(NOW).check(b"k", &policy, 1).await })
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
    // The leaders and a full queue time out; the check past the bound is refused at once.
    assert_eq!(timeouts, RedisStore::MAX_QUEUED_PER_GROUP + ALONE);
    assert_eq!(overloaded.len(), 1);
    assert!(
        matches!(
            overloaded[0],
            floodwall_core::Error::Overloaded { max_in_flight } if max_in_flight == RedisStore::MAX_QUEUED_PER_GROUP
        ),
        "{:?}",
        overloaded[0]
    );
    // Once Redis serves again, only the leaders' checks (sent before the pause ended) are
    // charged: the queued ones were never sent.
    server.cmd(&["PING"]);
    let after = store.stats();
    assert_eq!(after.script_calls - before.script_calls, ALONE as u64);
    assert_eq!(after.coalesced, before.coalesced);
    let next = store.at(NOW).check(b"k", &policy, 1).await.unwrap();
    assert_eq!(next.remaining, limit - ALONE as u64 - 1);
}
