//! `StoreExt::check_all` in Redis: one key under several policies in one script call,
//! admitted and charged in all or charged in none, exact under concurrency, on one server
//! and on a real 3-master cluster (the policies' keys share the user key's hash tag, so
//! one slot). Decisions and figures equal the memory store's, which is exact by its own
//! tests.

mod common;

use std::time::Duration;

use floodwall_core::{
    Algorithm, Decision, ManualClock, MemoryStore, Penalty, Policy, Source, StoreExt,
};
use floodwall_redis::RedisStore;
use proptest::prelude::*;
use redis_harness::{RedisCluster, RedisServer, key_slot};

use common::{
    Now, cached_scripts, command_calls, generic_store, policy, server_now, small_policy,
    uncached_store,
};

const NOW: u64 = 1_700_000_000_000_000;

/// A roomy first policy, a small second one: the second refuses long before the first.
fn pairs() -> Vec<[Policy; 2]> {
    vec![
        [
            policy(Policy::gcra, "roomy", "10000/day"),
            policy(Policy::fixed_window, "small", "50/day"),
        ],
        [
            policy(Policy::fixed_window, "roomy", "10000/day"),
            policy(Policy::token_bucket, "small", "50/day"),
        ],
        [
            policy(Policy::token_bucket, "roomy", "10000/day"),
            policy(Policy::leaky_bucket, "small", "50/day"),
        ],
        [
            policy(Policy::leaky_bucket, "roomy", "10000/day"),
            policy(Policy::gcra, "small", "50/day"),
        ],
    ]
}

/// 64 tasks on one key against each pair: the small policy admits its 50, and the roomy
/// one is charged those 50 only.
async fn hammer(store: &RedisStore) {
    for (n, pair) in pairs().into_iter().enumerate() {
        let user = format!("hammered-{n}");
        let tasks: Vec<_> = (0..64)
            .map(|_| {
                let (store, pair, user) = (store.clone(), pair.clone(), user.clone());
                tokio::spawn(async move {
                    let mut admitted = 0;
                    for _ in 0..4 {
                        let d = store
                            .at(NOW)
                            .check_all(user.as_bytes(), &pair, 1)
                            .await
                            .unwrap();
                        let [Some(roomy), Some(small)] = d.as_slice() else {
                            panic!("one decision per policy: {d:?}")
                        };
                        assert!(roomy.is_allowed(), "the roomy policy never refuses here");
                        admitted += u64::from(small.is_allowed());
                    }
                    admitted
                })
            })
            .collect();
        let mut admitted = 0;
        for t in tasks {
            admitted += t.await.unwrap();
        }
        assert_eq!(admitted, 50, "{pair:?}");
        let roomy = store
            .at(NOW)
            .check(user.as_bytes(), &pair[0], 0)
            .await
            .unwrap();
        assert_eq!(roomy.remaining, 10_000 - 50, "{pair:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn several_policies_are_all_or_nothing_under_concurrency() {
    let server = RedisServer::start();
    let store = uncached_store(&server.url()).await;
    hammer(&store).await;
}

/// The same histories in Redis and in the memory store give the same decisions, figures
/// included: the refused requests' peeks of the policies that would have allowed too.
#[tokio::test]
async fn redis_decides_as_the_memory_store_does() {
    let server = RedisServer::start();
    let store = uncached_store(&server.url()).await;
    let memory = MemoryStore::builder().clock(ManualClock::new(NOW)).build();
    let costs = [1, 3, 0, 7, 2, 9, 1, 1, 4, 0, 5];
    for (n, pair) in pairs().into_iter().enumerate() {
        let pair = [
            pair[1].clone(),
            policy(Policy::gcra, "mid", "20/min burst 12"),
        ];
        let user = format!("model-{n}");
        for &cost in costs.iter().cycle().take(40) {
            let redis = store
                .at(NOW)
                .check_all(user.as_bytes(), &pair, cost)
                .await
                .unwrap();
            let mem = memory
                .check_all(user.as_bytes(), &pair, cost)
                .now()
                .unwrap();
            let figures = |d: &[Option<Decision>]| {
                d.iter()
                    .map(|d| d.map(|d| (d.is_allowed(), d.remaining, d.retry_after, d.reset_after)))
                    .collect::<Vec<_>>()
            };
            assert_eq!(figures(&redis), figures(&mem), "{pair:?} cost {cost}");
        }
    }
}

/// Through the deny cache (the default): a refusal by the small policy is then answered
/// without Redis, and still charges neither policy; the roomy policy answers what Redis
/// last said of it.
#[tokio::test]
async fn the_deny_cache_refuses_all_on_one_cached_refusal() {
    let server = RedisServer::start();
    // Held an hour rather than a second: none of the refusals below is Redis's to answer,
    // however slowly the test runs.
    let store = RedisStore::builder()
        .deny_cache_max_refusal_hold(std::time::Duration::from_secs(3_600))
        .multiplexed(&server.url())
        .await
        .unwrap();
    let pair = &pairs()[0];
    for _ in 0..50 {
        let d = store.check_all(b"cached", pair, 1).await.unwrap();
        assert!(d.iter().flatten().all(|d| d.is_allowed()));
    }
    let calls = || {
        command_calls(&server)
            .into_iter()
            .filter(|(c, _)| c.contains("evalsha") || c.contains("eval"))
            .map(|(_, n)| n)
            .sum::<u64>()
    };
    let before = calls();
    for _ in 0..10 {
        let d = store.check_all(b"cached", pair, 1).await.unwrap();
        // The roomy policy was not asked: its figures are Redis's last answer's.
        let roomy = d[0].expect("the roomy policy's figures");
        assert!(roomy.is_allowed() && roomy.source == Source::Cache);
        assert_eq!(roomy.remaining, 10_000 - 50);
        assert!(!d[1].unwrap().is_allowed());
    }
    assert_eq!(calls(), before, "refused without a script call");
    let roomy = store.check(b"cached", &pair[0], 0).await.unwrap();
    assert_eq!(roomy.remaining, 10_000 - 50);
}

/// A key of another type under one policy fails the call before anything is written: the
/// other policy is not charged. A sliding log among several policies is unsupported (the
/// tower layer then checks them one by one).
#[tokio::test]
async fn a_failing_or_unsupported_check_charges_nothing() {
    let server = RedisServer::start();
    let store = uncached_store(&server.url()).await;
    let pair = &pairs()[0];
    let client = redis::Client::open(server.url()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let _: () = redis::cmd("HSET")
        .arg(store.redis_key(b"typed", &pair[1]))
        .arg("f")
        .arg("v")
        .query_async(&mut conn)
        .await
        .unwrap();
    let err = store
        .at(NOW)
        .check_all(b"typed", pair, 1)
        .await
        .unwrap_err();
    assert!(
        matches!(err, floodwall_core::Error::Backend { .. }),
        "{err:?}"
    );
    let roomy = store.at(NOW).check(b"typed", &pair[0], 0).await.unwrap();
    assert_eq!(roomy.remaining, 10_000);

    let log = policy(Policy::sliding_log, "log", "5/min");
    let err = store
        .check_all(b"typed", &[pair[0].clone(), log], 1)
        .await
        .unwrap_err();
    assert!(
        matches!(err, floodwall_core::Error::Unsupported { .. }),
        "{err:?}"
    );
}

/// On a real 3-master cluster: every policy's key of one user is in one slot, so one
/// script call runs there; all or nothing holds under concurrency.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn several_policies_run_in_one_slot_on_a_cluster() {
    let cluster = RedisCluster::start(3);
    let store = RedisStore::builder()
        .deny_cache(false)
        .cluster(cluster.urls())
        .await
        .unwrap();
    let mut nodes = std::collections::HashSet::new();
    for n in 0..64 {
        let user = format!("hammered-{n}");
        for pair in pairs() {
            let slots: Vec<u16> = pair
                .iter()
                .map(|p| key_slot(&store.redis_key(user.as_bytes(), p)))
                .collect();
            assert_eq!(slots[0], slots[1], "{user}");
            nodes.insert(cluster.node_for_key(&store.redis_key(user.as_bytes(), &pair[0])));
        }
    }
    assert_eq!(nodes.len(), 3, "the users spread over every node");
    hammer(&store).await;
}

/// A quota per tenant: past the `written_scripts` bound, checks of several policies run
/// scripts that read the parameters (and penalties' numbers) from their arguments, one per
/// combination of algorithms and penalties, instead of loading a script per tenant into
/// Redis's script cache, which nothing empties. Each decision stays exact.
#[tokio::test]
async fn past_the_bound_several_policies_leave_a_handful_of_scripts() {
    const BOUND: usize = 2;
    const TENANTS: u64 = 300;
    let server = RedisServer::start();
    let store = RedisStore::builder()
        .deny_cache(false)
        .written_scripts(BOUND)
        .multiplexed(&server.url())
        .await
        .unwrap();
    let before = cached_scripts(&server);
    let global = policy(Policy::gcra, "global", "1000000/s");
    let sec = Duration::from_secs(1);
    for tenant in 0..TENANTS {
        let limit = 100 + tenant;
        let mut quota = policy(Policy::fixed_window, "tenant", &format!("{limit}/min"));
        // Every other tenant with a penalty of its own numbers.
        if tenant % 2 == 1 {
            let after = u32::try_from(2 + tenant % 7).unwrap();
            quota = quota.with_penalty(
                Penalty::new(after, 60 * sec, Duration::from_secs(tenant + 1)).unwrap(),
            );
        }
        let key = format!("t{tenant}");
        let d = store
            .at(NOW)
            .check_all(key.as_bytes(), &[global.clone(), quota], 3)
            .await
            .unwrap();
        let [Some(global), Some(quota)] = d[..] else {
            panic!("{tenant}: {d:?}")
        };
        assert!(global.is_allowed() && quota.is_allowed(), "{tenant}: {d:?}");
        assert_eq!(
            (global.remaining, quota.remaining),
            (1_000_000 - 3, limit - 3)
        );
    }
    let scripts = cached_scripts(&server) - before;
    // The bound's two, and one without a penalty and one with past it.
    assert!(
        scripts <= BOUND as u64 + 2,
        "{scripts} scripts for {TENANTS} tenants"
    );
    // On the server's clock, past the bound: no time follows the numbers, and the script
    // reads `TIME`. The fixed window stores its window's start (µs) + what it used.
    const MINUTE: u64 = 60_000_000;
    let quota = policy(Policy::fixed_window, "tenant", "7/min");
    let earliest = server_now(&server);
    let d = store
        .check_all(b"clock", &[global.clone(), quota.clone()], 2)
        .await
        .unwrap();
    assert!(
        d.iter().all(|d| d.as_ref().is_some_and(|d| d.is_allowed())),
        "{d:?}"
    );
    let latest = server_now(&server);
    let key = store.redis_key(b"clock", &quota);
    let stored: u64 = server
        .try_cmd(&[&b"GET"[..], &key])
        .unwrap()
        .to_string()
        .parse()
        .unwrap();
    let start = stored - 2;
    assert_eq!((start % MINUTE, stored % MINUTE), (0, 2));
    assert!(start + MINUTE > earliest && start <= latest, "{stored}");
}

/// Several policies through the scripts with the parameters written in, through those
/// that read them from their arguments (a bound of 0), and in the memory store: the same
/// decisions, figures included, on random histories of two or three policies of every
/// algorithm that combines, with and without penalties.
#[test]
fn written_and_argument_scripts_of_several_policies_decide_as_the_memory_store() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let server = RedisServer::start();
    let written = rt.block_on(uncached_store(&server.url()));
    let generic = rt.block_on(generic_store(&server.url(), "generic:"));
    let case = std::sync::atomic::AtomicU64::new(0);
    // Refusals and bans the memory store answered: the histories must reach both.
    let (refused, banned) = (
        std::sync::atomic::AtomicU64::new(0),
        std::sync::atomic::AtomicU64::new(0),
    );
    let config = ProptestConfig {
        cases: 64,
        failure_persistence: None,
        ..ProptestConfig::default()
    };
    let combining = [
        Algorithm::Gcra,
        Algorithm::TOKEN_BUCKET,
        Algorithm::LeakyBucket,
        Algorithm::FixedWindow,
    ];
    let us = Duration::from_micros;
    proptest!(config, |(
        shapes in prop::collection::vec(
            (0..4usize, 1..=8u64, prop::sample::select(vec![10u64, 20, 50]), 1..=8u64, prop::option::of((1..=3u32, 1_000..20_000u64))),
            2..=3,
        ),
        steps in prop::collection::vec((0..6_000u64, 0..=4u64), 1..80),
    )| {
        let case = case.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let policies: Vec<Policy> = shapes
            .iter()
            .enumerate()
            .map(|(i, &(alg, count, period_ms, burst, penalty))| {
                let p = small_policy(format!("c{case}-{i}"), combining[alg], count, period_ms, burst);
                match penalty {
                    Some((after, ban)) => p.with_penalty(Penalty::new(after, us(40_000), us(ban)).unwrap()),
                    None => p,
                }
            })
            .collect();
        let clock = ManualClock::new(NOW);
        let memory = MemoryStore::builder().clock(clock.clone()).build();
        let most = policies.iter().map(Policy::limit).min().unwrap();
        let mut now = NOW;
        rt.block_on(async {
            for (i, (dt, cost)) in steps.into_iter().enumerate() {
                let cost = cost.min(most);
                now += dt;
                clock.set(now);
                let want = memory.check_all(b"k", &policies, cost).await.unwrap();
                for d in want.iter().flatten() {
                    refused.fetch_add(u64::from(!d.is_allowed()), std::sync::atomic::Ordering::Relaxed);
                    banned.fetch_add(u64::from(d.is_banned()), std::sync::atomic::Ordering::Relaxed);
                }
                for (name, s) in [("written", &written), ("generic", &generic)] {
                    let got = s.at(now).check_all(b"k", &policies, cost).await.unwrap();
                    prop_assert_eq!(&got, &want, "{} step {}: {:?} cost {}", name, i, policies, cost);
                }
            }
            Ok(())
        })?;
    });
    let (refused, banned) = (refused.into_inner(), banned.into_inner());
    assert!(
        refused > 200 && banned > 50,
        "{refused} refused, {banned} banned"
    );
}
