//! `StoreExt::check_all_of` in Redis: checks of different keys (a gateway's descriptors)
//! in one script call, charged in all or in none, exact under concurrency on one server
//! and on a real 3-master cluster when their keys share a slot; what one script cannot
//! hold together is `Unsupported`, with nothing written.

mod common;

use floodwall_core::store::Check;
use floodwall_core::{Error, Policy, StoreExt};
use floodwall_redis::RedisStore;
use redis_harness::{RedisCluster, RedisServer, key_slot};

use common::{policy, uncached_store};

const NOW: u64 = 1_700_000_000_000_000;

/// A roomy policy per user, a small one for everyone together, of several algorithms.
fn pairs() -> Vec<[Policy; 2]> {
    vec![
        [
            policy(Policy::gcra, "user", "10000/day"),
            policy(Policy::fixed_window, "everyone", "50/day"),
        ],
        [
            policy(Policy::token_bucket, "user", "10000/day"),
            policy(Policy::gcra, "everyone", "50/day"),
        ],
        [
            policy(Policy::fixed_window, "user", "10000/day"),
            policy(Policy::leaky_bucket, "everyone", "50/day"),
        ],
    ]
}

/// A task per user key (`users[t]`), 4 requests each (64 at least in all), each with the
/// shared key `all-<n>` of `pairs[n]`: exactly the small policy's 50 are admitted, and
/// each user key is charged for its own admitted requests only.
async fn hammer(store: &RedisStore, pairs: Vec<[Policy; 2]>, users: &[String]) {
    assert!(users.len() * 4 >= 64);
    for (n, [user, everyone]) in pairs.into_iter().enumerate() {
        let all = format!("all-{n}");
        let tasks: Vec<_> = users
            .iter()
            .map(|key| {
                let (store, user, everyone) = (store.clone(), user.clone(), everyone.clone());
                let (key, all) = (format!("{key}-{n}"), all.clone());
                tokio::spawn(async move {
                    let mut admitted = 0;
                    for _ in 0..4 {
                        let checks = [
                            Check {
                                key: key.as_bytes(),
                                policy: &user,
                                cost: 1,
                            },
                            Check {
                                key: all.as_bytes(),
                                policy: &everyone,
                                cost: 1,
                            },
                        ];
                        let d = store.at(NOW).check_all_of(&checks).await.unwrap();
                        let [Some(u), Some(e)] = d.as_slice() else {
                            panic!("one decision per check: {d:?}")
                        };
                        assert!(u.is_allowed(), "the user's policy never refuses here");
                        admitted += u64::from(e.is_allowed());
                    }
                    let left = store.at(NOW).check(key.as_bytes(), &user, 0).await;
                    assert_eq!(left.unwrap().remaining, 10_000 - admitted, "{key}");
                    admitted
                })
            })
            .collect();
        let mut admitted = 0;
        for t in tasks {
            admitted += t.await.unwrap();
        }
        assert_eq!(admitted, 50, "{user:?} / {everyone:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn checks_of_several_keys_are_all_or_nothing_under_concurrency() {
    let server = RedisServer::start();
    let store = uncached_store(&server.url()).await;
    let users: Vec<String> = (0..64).map(|t| format!("user-{t}")).collect();
    hammer(&store, pairs(), &users).await;
}

/// Different costs, or a sliding log beside another check: `Unsupported`, and neither
/// key is charged.
#[tokio::test]
async fn what_one_script_cannot_hold_is_unsupported_and_charges_nothing() {
    let server = RedisServer::start();
    let store = uncached_store(&server.url()).await;
    let [user, everyone] = pairs().swap_remove(0);
    let log = policy(Policy::sliding_log, "log", "5/min");
    let costs = [
        Check {
            key: b"a",
            policy: &user,
            cost: 2,
        },
        Check {
            key: b"b",
            policy: &everyone,
            cost: 1,
        },
    ];
    let with_log = [
        costs[0],
        Check {
            key: b"b",
            policy: &log,
            cost: 2,
        },
    ];
    for checks in [&costs, &with_log] {
        let err = store.at(NOW).check_all_of(checks).await.unwrap_err();
        assert!(matches!(err, Error::Unsupported { .. }), "{err:?}");
    }
    let a = store.at(NOW).check(b"a", &user, 0).await.unwrap();
    assert_eq!(a.remaining, 10_000);
    let b = store.at(NOW).check(b"b", &everyone, 0).await.unwrap();
    assert_eq!(b.remaining, 50);
}

/// On a real 3-master cluster a script runs on one node: keys in different slots are
/// `Unsupported` with nothing written, and keys that share a slot are decided together,
/// exactly.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn on_a_cluster_the_keys_must_share_a_slot() {
    let cluster = RedisCluster::start(3);
    let store = RedisStore::builder()
        .deny_cache(false)
        .cluster(cluster.urls())
        .await
        .unwrap();
    let [user, everyone] = pairs().swap_remove(0);
    let slot = |key: &str, p: &Policy| key_slot(&store.redis_key(key.as_bytes(), p));

    let apart = (0..)
        .map(|n| format!("apart-{n}"))
        .find(|k| slot(k, &user) != slot("all-0", &everyone))
        .unwrap();
    let checks = [
        Check {
            key: apart.as_bytes(),
            policy: &user,
            cost: 1,
        },
        Check {
            key: b"all-0",
            policy: &everyone,
            cost: 1,
        },
    ];
    let err = store.at(NOW).check_all_of(&checks).await.unwrap_err();
    assert!(matches!(err, Error::Unsupported { .. }), "{err:?}");
    let left = store.at(NOW).check(apart.as_bytes(), &user, 0).await;
    assert_eq!(left.unwrap().remaining, 10_000);

    // Users whose keys (`<user>-0`) share the slot of the shared key `all-0`.
    let users: Vec<String> = (0..)
        .map(|n| format!("near-{n}"))
        .filter(|k| slot(&format!("{k}-0"), &user) == slot("all-0", &everyone))
        .take(16)
        .collect();
    hammer(&store, vec![[user, everyone]], &users).await;
}
