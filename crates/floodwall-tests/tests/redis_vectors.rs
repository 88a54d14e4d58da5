//! The decision vectors of every algorithm, and redis-cell's recorded replies, against the
//! Redis store on real `redis-server` processes: one node through each connection kind, and
//! a 3-master cluster. Same files, same expectations as the memory store (`vectors.rs`): the
//! Lua scripts and the Rust algorithms are one algorithm.

mod support;

use floodwall::{Policy, StoreExt};
use floodwall_redis::RedisStore;
use redis_harness::{RedisCluster, RedisServer};
use support::vectors;

/// Runs every vector file through `store` (explicit times, so runs are deterministic).
async fn run_vector_files(store: &RedisStore) -> usize {
    vectors::run_all(|policy, step| async move {
        store
            .at(step.at)
            .check(step.key.as_bytes(), &policy, step.cost)
            .await
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_vector_file_on_one_node_through_each_connection_kind() {
    let server = RedisServer::start();
    let url = server.url();
    let manager = RedisStore::builder()
        .prefix("mux:")
        .multiplexed(&url)
        .await
        .unwrap();
    let pool = RedisStore::builder()
        .prefix("pool:")
        .pool_size(2)
        .pool(&url)
        .await
        .unwrap();
    let a = run_vector_files(&manager).await;
    let b = run_vector_files(&pool).await;
    assert_eq!(a, b);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_cell_replies_are_reproduced() {
    let server = RedisServer::start();
    let store = RedisStore::connect(&server.url()).await.unwrap();
    let now = 1_700_000_000_000_000;
    vectors::run_cell(|policy, key, cost| {
        let store = &store;
        async move { store.at(now).check(key.as_bytes(), &policy, cost).await }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_vector_file_on_a_three_master_cluster_and_keys_spread() {
    let cluster = RedisCluster::start(3);
    let store = RedisStore::builder().cluster(cluster.urls()).await.unwrap();
    run_vector_files(&store).await;

    // Users are the hash tag: 300 of them land on every master, each key where its slot is.
    let policy = Policy::gcra("spread", "10/s".parse().unwrap()).unwrap();
    for i in 0..300 {
        let user = format!("user-{i}");
        assert!(
            floodwall::StoreExt::check(&store, user.as_bytes(), &policy, 1)
                .await
                .unwrap()
                .is_allowed()
        );
        if i % 50 == 0 {
            let key = store.redis_key(user.as_bytes(), &policy);
            let node = cluster.node_for_key(&key);
            let exists = cluster
                .node(node)
                .cmd(&["EXISTS", std::str::from_utf8(&key).unwrap()]);
            assert_eq!(exists, "1", "{user} on node {node}");
        }
    }
    let per_node = cluster.keys_per_node();
    assert!(
        per_node.iter().all(|&n| n >= 50),
        "keys per master: {per_node:?}"
    );
}
