//! `--redis`, `--redis-cluster`, `--sentinel`: two processes of the binary on one Redis
//! deployment share each quota exactly.

use redis_harness::{RedisCluster, RedisSentinel, RedisServer};

use super::*;

/// Two processes started with `store` (the Redis options) answer `CALLS` concurrent calls
/// for one key, half each over a few connections, and admit exactly `QUOTA` of them
/// between them.
async fn two_processes_share_the_quota(store: &[&str]) {
    const CALLS: usize = 400;
    const QUOTA: u32 = 150;
    const CONNECTIONS: usize = 3;
    let dir = TempDir::new();
    dir.write("api.yaml", &quota_config(QUOTA));
    let a = Rls::start(dir.path(), store);
    let b = Rls::start(dir.path(), store);
    assert!(a.log().contains("store=redis"), "{}", a.log());
    let mut clients = Vec::new();
    for _ in 0..CONNECTIONS {
        clients.push(a.client().await);
        clients.push(b.client().await);
    }
    // Every connection warm (connected, Redis scripts loaded) before the race, on a key
    // of its own.
    for client in &mut clients {
        assert_eq!(
            ask(client, "api", &[("user", "warm-up")])
                .await
                .overall_code,
            OK
        );
    }

    // All at once, half through each process (even calls through `a`).
    let calls: Vec<_> = (0..CALLS)
        .map(|i| {
            let mut client = clients[i % clients.len()].clone();
            tokio::spawn(async move { ask(&mut client, "api", &[("user", "shared")]).await })
        })
        .collect();
    // Which process admits how many is a race; the total is not.
    let mut ok = 0;
    for call in calls {
        let response = call.await.unwrap();
        assert!([OK, OVER].contains(&response.overall_code), "{response:?}");
        ok += usize::from(response.overall_code == OK);
    }
    assert_eq!(ok, QUOTA as usize);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_on_one_redis_admit_exactly_the_quota() {
    let redis = RedisServer::start();
    two_processes_share_the_quota(&["--redis", &redis.url()]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_on_a_cluster_admit_exactly_the_quota() {
    let cluster = RedisCluster::start(3);
    let urls = cluster.urls().join(",");
    two_processes_share_the_quota(&["--redis-cluster", &urls]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_through_sentinel_admit_exactly_the_quota() {
    let deployment = RedisSentinel::start(1, 1);
    let urls = deployment.sentinel_urls().join(",");
    two_processes_share_the_quota(&["--sentinel", &urls, "--service", RedisSentinel::SERVICE])
        .await;
}
