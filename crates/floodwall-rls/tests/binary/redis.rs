//! `--redis`: two processes of the binary on one Redis share each quota exactly.

use redis_harness::RedisServer;

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_on_one_redis_admit_exactly_the_quota() {
    const CALLS: usize = 200;
    const QUOTA: u32 = 50;
    let redis = RedisServer::start();
    let dir = TempDir::new();
    dir.write("api.yaml", &quota_config(QUOTA));
    let url = redis.url();
    let a = Rls::start(dir.path(), &["--redis", &url]);
    let b = Rls::start(dir.path(), &["--redis", &url]);
    assert!(a.log().contains("store=redis"), "{}", a.log());
    let mut clients = [a.client().await, b.client().await];
    // Both warm (connected, Redis scripts loaded) before the race, on a key of its own.
    for client in &mut clients {
        assert_eq!(
            ask(client, "api", &[("user", "warm-up")])
                .await
                .overall_code,
            OK
        );
    }

    // All at once, half through each process.
    let calls: Vec<_> = (0..CALLS)
        .map(|i| {
            let mut client = clients[i % 2].clone();
            tokio::spawn(async move { ask(&mut client, "api", &[("user", "shared")]).await })
        })
        .collect();
    let mut ok = [0usize; 2];
    // Each process answers its half; which one admits how many is a race, the total is
    // not.
    for (i, call) in calls.into_iter().enumerate() {
        let response = call.await.unwrap();
        assert!([OK, OVER].contains(&response.overall_code), "{response:?}");
        ok[i % 2] += usize::from(response.overall_code == OK);
    }
    assert_eq!(
        ok[0] + ok[1],
        QUOTA as usize,
        "admitted by each process: {ok:?}"
    );
    assert!(
        ok[0] > 0 && ok[1] > 0,
        "both processes admitted some: {ok:?}"
    );
}
