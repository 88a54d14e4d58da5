//! Exactness under concurrency: 4 connections x 64 tasks in this process and a second OS
//! process, all hammering the same four keys, admit exactly each key's quota, for every
//! algorithm. Each check is decided atomically, alone or in a batch of checks of several
//! keys, so no interleaving can admit more (or fewer).
//!
//! Every store here is built with `deny_cache(false)`, so every check is a script call:
//! the deny cache would answer most refusals locally and leave fewer calls racing in
//! Redis than this test means to race.
//!
//! The second process is this test binary again, running the same test with
//! [`CHILD_URL`] set: the test then plays the second process's part ([`hammer_beside`])
//! instead of its own. No test exists only to be that entry point.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use floodwall_core::{Policy, StoreExt};
use floodwall_redis::RedisStore;
use redis_harness::RedisServer;

use common::every_algorithm;

/// Set in the second process only: the URL to hammer.
const CHILD_URL: &str = "FLOODWALL_REDIS_HAMMER_URL";
/// One instant for every check: refills can never blur the count.
const NOW: u64 = 1_700_000_000_000_000;
/// Each key's quota.
const QUOTA: u64 = 125;
/// The keys every task goes round, each from its own.
const KEYS: usize = 4;

fn policies() -> Vec<Policy> {
    every_algorithm("hammer", &format!("{QUOTA}/day"))
}

/// Starts `tasks` tasks on `store`, each trying `tries` times, going round the keys from
/// its own; each answers how many of its tries were admitted, per key.
fn spawn_hammer(
    store: &RedisStore,
    policy: &Policy,
    tasks: usize,
    tries: usize,
) -> Vec<tokio::task::JoinHandle<[u64; KEYS]>> {
    (0..tasks)
        .map(|t| {
            let (store, policy) = (store.clone(), policy.clone());
            tokio::spawn(async move {
                let mut admitted = [0; KEYS];
                for i in 0..tries {
                    let k = (t + i) % KEYS;
                    let key = format!("hot-{k}");
                    let d = store
                        .at(NOW)
                        .check(key.as_bytes(), &policy, 1)
                        .await
                        .unwrap();
                    admitted[k] += u64::from(d.is_allowed());
                }
                admitted
            })
        })
        .collect()
}

async fn admitted(handles: Vec<tokio::task::JoinHandle<[u64; KEYS]>>) -> [u64; KEYS] {
    let mut total = [0; KEYS];
    for h in handles {
        for (sum, n) in total.iter_mut().zip(h.await.unwrap()) {
            *sum += n;
        }
    }
    total
}

/// The second process's side: hammers `url` for each policy when told to on stdin, and
/// reports each policy's admissions on stdout.
async fn hammer_beside(url: &str) {
    let store = common::uncached_store(url).await;
    println!("ready");
    for policy in policies() {
        // Start each algorithm when the first process does, so both hammer together.
        let mut go = String::new();
        std::io::stdin().read_line(&mut go).unwrap();
        let n = admitted(spawn_hammer(&store, &policy, 32, 10)).await;
        let n: Vec<String> = n.iter().map(u64::to_string).collect();
        println!("admitted {} {}", policy.name(), n.join(" "));
    }
}

/// This test's name, which the second process runs (as itself, with [`CHILD_URL`] set).
const TEST: &str = "many_tasks_and_a_second_process_admit_exactly_the_quota";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_tasks_and_a_second_process_admit_exactly_the_quota() {
    if let Ok(url) = std::env::var(CHILD_URL) {
        return hammer_beside(&url).await;
    }
    let server = RedisServer::start();
    let url = server.url();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([TEST, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_URL, &url)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    // libtest prints `test <name> ... ` before the test's own output.
    while !lines
        .next()
        .expect("second process exited")
        .unwrap()
        .ends_with("ready")
    {}

    // Four connections: two multiplexed connections and a pool of two.
    let stores = [
        common::uncached_store(&url).await,
        common::uncached_store(&url).await,
        RedisStore::builder()
            .deny_cache(false)
            .pool_size(2)
            .pool(&url)
            .await
            .unwrap(),
    ];
    let tasks = [64, 64, 128];

    let mut go = child.stdin.take().unwrap();
    let mut ours = Vec::new();
    for policy in policies() {
        writeln!(go, "go").unwrap();
        // Every task is spawned before any is awaited: all 256 run at once.
        let handles: Vec<_> = stores
            .iter()
            .zip(tasks)
            .flat_map(|(store, n)| spawn_hammer(store, &policy, n, 3))
            .collect();
        ours.push(admitted(handles).await);
    }
    let theirs: Vec<Vec<u64>> = lines
        .map(|l| l.unwrap())
        .filter_map(|l| {
            let counts = l.split_once("admitted ")?.1.split(' ').skip(1);
            Some(counts.map(|n| n.parse().unwrap()).collect())
        })
        .collect();
    assert!(child.wait().unwrap().success());
    assert_eq!(theirs.len(), 6, "the second process reported {theirs:?}");
    println!("admitted here {ours:?}, in the second process {theirs:?}");
    for (i, policy) in policies().iter().enumerate() {
        for k in 0..KEYS {
            assert_eq!(
                ours[i][k] + theirs[i][k],
                QUOTA,
                "{policy:?}, key {k}: {} here + {} in the second process",
                ours[i][k],
                theirs[i][k]
            );
        }
    }
}
