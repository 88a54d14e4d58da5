//! Every user key keeps all its Redis keys in one cluster slot, on a real 3-master Redis
//! Cluster: the empty one (which a closure extractor reading an empty header yields), binary
//! ones and ones with braces are limited and banned as any other, through a penalized check,
//! several policies at once and a penalized booking, each one script call in one slot.

use std::time::Duration;

use floodwall_core::{ConcurrencyLimit, Penalty, Policy, Reservable, StoreExt};
use floodwall_redis::RedisStore;
use redis_harness::{RedisCluster, key_slot};

const NOW: u64 = 1_700_000_000_000_000;
const SEC: Duration = Duration::from_secs(1);

/// User keys of every form `key.rs` writes: empty, raw, with braces (hex), binary (hex),
/// long (SHA-256).
fn user_keys() -> Vec<Vec<u8>> {
    vec![
        Vec::new(),
        b"alice".to_vec(),
        b"{}".to_vec(),
        b"x{y}".to_vec(),
        vec![0, 1, 0xff],
        vec![0xab; 40],
    ]
}

#[tokio::test]
async fn every_user_key_the_empty_one_included_is_limited_and_banned_on_a_cluster() {
    let cluster = RedisCluster::start(3);
    let store = RedisStore::builder()
        .deny_cache(false)
        .cluster(cluster.urls())
        .await
        .unwrap();
    // Banned at the second refusal within a minute, for 10 s.
    let penalty = Penalty::new(2, 60 * SEC, 10 * SEC).unwrap();
    let login = Policy::gcra("login", "2/min".parse().unwrap())
        .unwrap()
        .with_penalty(penalty);
    let daily = Policy::fixed_window("daily", "100/day".parse().unwrap()).unwrap();
    let both = [daily.clone(), login.clone()];
    let booking = Reservable::new(login.clone()).unwrap();
    for user in user_keys() {
        let slot = key_slot(&store.redis_key(&user, &login));
        let mut keys = vec![store.redis_key(&user, &daily)];
        keys.extend(store.penalty_keys(&user, &login));
        keys.push(store.lease_key(&user, &ConcurrencyLimit::new("login", 1).unwrap()));
        for k in &keys {
            assert_eq!(key_slot(k), slot, "{user:?}: {k:?}");
        }
        // Two admitted by both policies at once, then `login` refuses: a strike.
        for _ in 0..2 {
            let d = store.at(NOW).check_all(&user, &both, 1).await.unwrap();
            assert!(
                d.iter().flatten().all(|d| d.is_allowed()),
                "{user:?}: {d:?}"
            );
        }
        let d = store.at(NOW).check_all(&user, &both, 1).await.unwrap();
        let refused = d[1].unwrap();
        assert!(
            !refused.is_allowed() && !refused.is_banned(),
            "{user:?}: {d:?}"
        );
        // The second refusal, alone: the ban.
        let d = store.at(NOW).check(&user, &login, 1).await.unwrap();
        assert!(d.is_banned(), "{user:?}: {d:?}");
        let d = store.at(NOW + 1).check_all(&user, &both, 1).await.unwrap();
        assert!(d[1].unwrap().is_banned(), "{user:?}: {d:?}");
        let r = store
            .at(NOW + 1)
            .reserve(&user, &booking, 1, 60 * SEC)
            .await
            .unwrap();
        assert!(
            r.decision.is_banned() && r.ticket.is_none(),
            "{user:?}: {r:?}"
        );
        // `daily` was charged the two admissions only.
        let d = store.at(NOW + 1).check(&user, &daily, 0).await.unwrap();
        assert_eq!(d.remaining, 98, "{user:?}");
    }
}
