//! Batches on a real 3-master Redis Cluster: checks of keys in different slots served by one
//! node share one call, decided as alone; and while a slot migrates from one node to
//! another (`CLUSTER SETSLOT` and `MIGRATE`), every check is answered once and charged
//! exactly when it was admitted, whichever node its batch reached.

mod common;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use floodwall_core::{Algorithm, Policy, State, StoreExt};
use floodwall_redis::RedisStore;
use redis_harness::{RedisCluster, key_slot};

use common::command_calls;

const NOW: u64 = 1_700_000_000_000_000;
/// Checks sent alone before the others queue for a batch: the first of a node's.
const ALONE: usize = 1;

/// A store on `cluster` without the deny cache: every check is a script call.
async fn store(cluster: &RedisCluster) -> RedisStore {
    RedisStore::builder()
        .deny_cache(false)
        .cluster(cluster.urls())
        .await
        .unwrap()
}

/// The index of the node serving each slot.
fn owners(cluster: &RedisCluster) -> Vec<usize> {
    let ports = cluster.ports();
    let mut owner = vec![usize::MAX; usize::from(redis_harness::SLOT_COUNT)];
    for (first, last, port) in cluster.slot_ranges() {
        let node = ports.iter().position(|&p| p == port).unwrap();
        owner[usize::from(first)..=usize::from(last)].fill(node);
    }
    owner
}

/// `n` user keys `<prefix><i>` whose Redis keys under `policy` are on `node`, in different
/// slots.
fn users_on(
    store: &RedisStore,
    policy: &Policy,
    owner: &[usize],
    node: usize,
    prefix: &str,
    n: usize,
) -> Vec<Vec<u8>> {
    let mut slots = Vec::new();
    (0..)
        .map(|i| format!("{prefix}{i}").into_bytes())
        .filter(|user| {
            let slot = key_slot(&store.redis_key(user, policy));
            let fresh = owner[usize::from(slot)] == node && !slots.contains(&slot);
            if fresh {
                slots.push(slot);
            }
            fresh
        })
        .take(n)
        .collect()
}

fn evalsha_calls(cluster: &RedisCluster, node: usize) -> u64 {
    command_calls(cluster.node(node))
        .into_iter()
        .find(|(c, _)| c == "evalsha")
        .map_or(0, |(_, n)| n)
}

/// Starts every check before awaiting any (on the current-thread runtime they run, and
/// queue, in that order).
async fn spread(
    store: &RedisStore,
    policy: &Policy,
    checks: &[(Vec<u8>, u64)],
) -> Vec<floodwall_core::Decision> {
    let handles: Vec<_> = checks
        .iter()
        .map(|(user, cost)| {
            let (store, policy, user, cost) = (store.clone(), policy.clone(), user.clone(), *cost);
            tokio::spawn(async move { store.at(NOW).check(&user, &policy, cost).await })
        })
        .collect();
    let mut out = Vec::new();
    for h in handles {
        out.push(h.await.unwrap().unwrap());
    }
    out
}

#[tokio::test]
async fn checks_of_keys_in_different_slots_on_one_node_share_a_call() {
    let cluster = RedisCluster::start(3);
    let store = store(&cluster).await;
    let owner = owners(&cluster);
    for algorithm in [
        Algorithm::Gcra,
        Algorithm::TOKEN_BUCKET,
        Algorithm::LeakyBucket,
        Algorithm::FixedWindow,
    ] {
        let policy = Policy::new(
            format!("c-{algorithm}"),
            algorithm,
            "5/day".parse().unwrap(),
        )
        .unwrap();
        // Six keys on node 0, each in a slot of its own, two on node 1.
        let ours = users_on(&store, &policy, &owner, 0, "u", 6);
        let theirs = users_on(&store, &policy, &owner, 1, "v", 2);
        // Loads the scripts on both nodes.
        let warm: Vec<_> = (0..ALONE + 2)
            .flat_map(|i| [(ours[i].clone(), 0), (theirs[i % 2].clone(), 0)])
            .collect();
        spread(&store, &policy, &warm).await;
        for node in cluster.nodes() {
            node.cmd(&["CONFIG", "RESETSTAT"]);
        }
        // Node 0's keys, each twice, costs 1 and 2; then node 1's.
        let mut checks: Vec<(Vec<u8>, u64)> = (0..12)
            .map(|i| (ours[i % 6].clone(), 1 + (i / 6) as u64))
            .collect();
        checks.extend(theirs.iter().map(|u| (u.clone(), 1)));
        let got = spread(&store, &policy, &checks).await;
        // On node 0: the first checks alone, the other ten (six slots) in one call.
        assert_eq!(evalsha_calls(&cluster, 0), ALONE as u64 + 1, "{algorithm}");
        // Node 1's two checks are their own group: alone, as many as go alone.
        assert_eq!(evalsha_calls(&cluster, 1), 2, "{algorithm}");
        assert_eq!(evalsha_calls(&cluster, 2), 0, "{algorithm}");
        let mut states: HashMap<&[u8], State> = HashMap::new();
        for (i, ((user, cost), d)) in checks.iter().zip(&got).enumerate() {
            let state = states.entry(user).or_default();
            let expected = policy.decide(state, NOW, *cost).unwrap();
            assert_eq!(*d, expected, "{algorithm}: check {i}");
        }
        // Each key is where the cluster says, written once per check admitted.
        for user in &ours {
            let next = store.at(NOW).check(user, &policy, 0).await.unwrap();
            let state = states.get_mut(&user[..]).unwrap();
            assert_eq!(next, policy.decide(state, NOW, 0).unwrap(), "{algorithm}");
            let key = String::from_utf8(store.redis_key(user, &policy)).unwrap();
            assert_eq!(cluster.node(0).cmd(&["EXISTS", &key]), "1", "{algorithm}");
        }
    }
}

/// Moves `slot` from node `from` to node `to` as `redis-cli --cluster reshard` does: the
/// slot importing on one and migrating on the other, its keys moved one by one (with a
/// pause between, so checks run meanwhile), then the slot given to `to` everywhere.
fn migrate(cluster: &RedisCluster, slot: u16, from: usize, to: usize) -> usize {
    let id = |i: usize| cluster.node(i).cmd(&["CLUSTER", "MYID"]);
    let slot = slot.to_string();
    let (source, target) = (cluster.node(from), cluster.node(to));
    let target_port = target.port().to_string();
    target.cmd(&["CLUSTER", "SETSLOT", &slot, "IMPORTING", &id(from)]);
    source.cmd(&["CLUSTER", "SETSLOT", &slot, "MIGRATING", &id(to)]);
    let mut moved = 0;
    loop {
        let keys = source
            .try_cmd(&["CLUSTER", "GETKEYSINSLOT", &slot, "1"])
            .unwrap();
        let Some(key) = keys.as_array().and_then(|k| k.first()).cloned() else {
            break;
        };
        let redis_harness::Reply::Bulk(key) = key else {
            panic!("GETKEYSINSLOT answered {keys:?}");
        };
        let key = String::from_utf8(key).unwrap();
        let reply = source
            .try_cmd(&["MIGRATE", "127.0.0.1", &target_port, &key, "0", "5000"])
            .unwrap();
        assert!(!reply.is_error(), "MIGRATE {key}: {reply:?}");
        moved += 1;
        std::thread::sleep(Duration::from_millis(30));
    }
    for node in [to, from]
        .into_iter()
        .chain((0..3).filter(|&n| n != from && n != to))
    {
        cluster
            .node(node)
            .cmd(&["CLUSTER", "SETSLOT", &slot, "NODE", &id(to)]);
    }
    moved
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slot_migrating_while_batches_run_charges_each_check_exactly_once() {
    let cluster = Arc::new(RedisCluster::start(3));
    // A long timeout: a check that timed out may have been decided, and this test counts
    // what was decided from what was answered.
    let store = RedisStore::builder()
        .deny_cache(false)
        .timeout(Duration::from_secs(10))
        .cluster(cluster.urls())
        .await
        .unwrap();
    let owner = owners(&cluster);
    // Never refuses here: each admission takes one unit, so what a key has spent counts
    // the checks Redis decided on it.
    const LIMIT: u64 = 1_000_000;
    let policy = Policy::gcra("moving", format!("{LIMIT}/day").parse().unwrap()).unwrap();
    // Six keys in one slot of node 0, the one that moves; twenty more on node 0 in other
    // slots, sharing its batches; four on node 1.
    let slot_of = |user: &[u8]| key_slot(&store.redis_key(user, &policy));
    let moving = slot_of(b"m0");
    assert_eq!(owner[usize::from(moving)], 0, "m0's slot is node 0's");
    let mut users: Vec<Vec<u8>> = (0..)
        .map(|i| format!("m{i}").into_bytes())
        .filter(|u| slot_of(u) == moving)
        .take(6)
        .collect();
    users.extend(users_on(&store, &policy, &owner, 0, "n", 20));
    users.extend(users_on(&store, &policy, &owner, 1, "o", 4));
    let users = Arc::new(users);

    // Before the move: every key exists on its node, so the migration has keys to move.
    for user in users.iter() {
        store.at(NOW).check(user, &policy, 1).await.unwrap();
    }
    let done = Arc::new(AtomicBool::new(false));
    let tasks: Vec<_> = (0..32)
        .map(|t| {
            let (store, policy, users, done) =
                (store.clone(), policy.clone(), users.clone(), done.clone());
            tokio::spawn(async move {
                let (mut admitted, mut failed) = (vec![0u64; users.len()], 0u64);
                // Until the migration is over, and at most this many checks.
                for i in 0..20_000 {
                    if done.load(Ordering::Acquire) {
                        break;
                    }
                    let k = (t * 7 + i) % users.len();
                    match store.at(NOW).check(&users[k], &policy, 1).await {
                        Ok(d) => {
                            assert!(d.is_allowed());
                            admitted[k] += 1;
                        }
                        // redis-rs sends ASKING apart from the call it is for, on a
                        // connection shared with other calls: one of those may take it,
                        // and the call fails with MOVED (`floodwall_redis::guide::redis`). A check that
                        // failed was not decided, and the count below holds it to that.
                        Err(_) => failed += 1,
                    }
                }
                (admitted, failed)
            })
        })
        .collect();
    let moved = {
        let (cluster, done) = (cluster.clone(), done.clone());
        tokio::task::spawn_blocking(move || {
            // Let the checks get going, then move the slot to node 1.
            std::thread::sleep(Duration::from_millis(100));
            let moved = migrate(&cluster, moving, 0, 1);
            std::thread::sleep(Duration::from_millis(200));
            done.store(true, Ordering::Release);
            moved
        })
        .await
        .unwrap()
    };
    let (mut admitted, mut failed) = (vec![1u64; users.len()], 0);
    for t in tasks {
        let (a, f) = t.await.unwrap();
        for (total, n) in admitted.iter_mut().zip(a) {
            *total += n;
        }
        failed += f;
    }
    assert_eq!(moved, 6, "the slot's six keys moved");
    let stats = store.stats();
    println!(
        "{} checks answered, {failed} failed, {} script calls, {} checks batched",
        admitted.iter().sum::<u64>(),
        stats.script_calls,
        stats.coalesced
    );
    assert!(stats.coalesced > 0, "checks shared batches");
    // Each key has spent exactly what was admitted on it: no check answered was lost, none
    // was decided twice, and none that failed was charged.
    for (user, n) in users.iter().zip(&admitted) {
        let next = store.at(NOW).check(user, &policy, 0).await.unwrap();
        assert_eq!(
            next.remaining,
            LIMIT - n,
            "{}: {n} admitted",
            String::from_utf8_lossy(user)
        );
    }
    for (user, n) in users[..6].iter().zip(&admitted) {
        let key = store.redis_key(user, &policy);
        assert_eq!(cluster.node_for_key(&key), 1, "moved to node 1");
        assert!(*n > 1, "checks of the moving slot were answered");
    }
}
