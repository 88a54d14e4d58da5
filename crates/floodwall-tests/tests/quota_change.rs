//! A quota changed live (a policy rebuilt with the same name and algorithm) keeps each
//! key's state where the algorithm reads it as it was meant, and starts afresh where it
//! would not (a window's period, a token bucket's tick): the same scenarios, the same
//! figures, on the memory store and on a real `redis-server` (`floodwall_core::guide::quota_changes`).

use floodwall::core::ManualClock;
use floodwall::{Adjustment, Decision, MemoryStore, Policy, StoreExt};
use floodwall_redis::RedisStore;
use redis_harness::RedisServer;

/// A second aligned to the hour (so also to every window and tick used here), in µs.
const T0: u64 = 1_699_999_200_000_000;
const MS: u64 = 1_000;

/// One of the two stores, checked at explicit times.
enum Under {
    Memory(MemoryStore<ManualClock>, ManualClock),
    Redis(RedisStore),
}

impl Under {
    async fn check(&self, key: &str, policy: &Policy, cost: u64, at: u64) -> Decision {
        match self {
            Under::Memory(store, clock) => {
                clock.set(at);
                store
                    .check_now(key.as_bytes(), policy, cost)
                    .unwrap()
                    .unwrap()
            }
            Under::Redis(store) => store
                .at(at)
                .check(key.as_bytes(), policy, cost)
                .await
                .unwrap(),
        }
    }

    async fn adjust(&self, key: &str, policy: &Policy, adjustment: Adjustment, at: u64) {
        match self {
            Under::Memory(store, clock) => {
                clock.set(at);
                store.adjust(key.as_bytes(), policy, adjustment).await
            }
            Under::Redis(store) => {
                store
                    .at(at)
                    .adjust(key.as_bytes(), policy, adjustment)
                    .await
            }
        }
        .unwrap()
    }

    /// What `key` has left under `policy` at `at` (a peek: nothing is written).
    async fn remaining(&self, key: &str, policy: &Policy, at: u64) -> u64 {
        self.check(key, policy, 0, at).await.remaining
    }
}

fn policy(algorithm: &str, quota: &str) -> Policy {
    let q = quota.parse().unwrap();
    match algorithm {
        "gcra" => Policy::gcra("api", q),
        "leaky" => Policy::leaky_bucket("api", q),
        "tokens" => Policy::token_bucket("api", q),
        "fixed" => Policy::fixed_window("api", q),
        "sliding" => Policy::sliding_window("api", q),
        "log" => Policy::sliding_log("api", q),
        other => panic!("{other}"),
    }
    .unwrap()
}

/// GCRA and the funnel keep the time owed: 8 of a burst of 10 at 10/s is 800 ms owed.
async fn gcra_keeps_the_time_owed(s: &Under, algorithm: &str) {
    let old = policy(algorithm, "10/s burst 10");
    assert!(s.check("up", &old, 8, T0).await.is_allowed());
    // A larger burst: the 8 spent stay spent, 12 of 20 remain (not 20).
    let bigger = policy(algorithm, "10/s burst 20");
    assert_eq!(s.remaining("up", &bigger, T0).await, 12, "{algorithm}");

    // A smaller burst than what is owed: refused until the owed time drains below it.
    assert!(s.check("down", &old, 8, T0).await.is_allowed());
    let smaller = policy(algorithm, "10/s burst 5");
    let d = s.check("down", &smaller, 1, T0).await;
    // 800 ms owed + 100 for this unit, against 500 tolerated.
    assert_eq!((d.is_allowed(), d.remaining), (false, 0), "{algorithm}");
    assert_eq!(d.retry_after.unwrap().as_micros(), 400 * u128::from(MS));
    assert!(
        !s.check("down", &smaller, 1, T0 + 399 * MS)
            .await
            .is_allowed()
    );
    assert!(
        s.check("down", &smaller, 1, T0 + 400 * MS)
            .await
            .is_allowed()
    );

    // A faster rate reads the same time owed as more units: 800 ms is 16 at 20/s.
    assert!(s.check("rate", &old, 8, T0).await.is_allowed());
    let faster = policy(algorithm, "20/s burst 20");
    assert_eq!(s.remaining("rate", &faster, T0).await, 4, "{algorithm}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_algorithm_on_the_memory_store() {
    let clock = ManualClock::new(T0);
    let store = MemoryStore::builder().clock(clock.clone()).build();
    every_scenario(&Under::Memory(store, clock)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_algorithm_on_redis() {
    let server = RedisServer::start();
    let store = RedisStore::builder()
        .deny_cache(false)
        .multiplexed(&server.url())
        .await
        .unwrap();
    every_scenario(&Under::Redis(store)).await;
}

async fn every_scenario(s: &Under) {
    for algorithm in ["gcra", "leaky"] {
        // Keys of one algorithm's scenarios never meet another's: their policies differ
        // in algorithm, so in namespace.
        gcra_keeps_the_time_owed(s, algorithm).await;
    }
    token_bucket_keeps_the_tokens_owed(s).await;
    for algorithm in ["fixed", "sliding", "log"] {
        windows_keep_the_count(s, algorithm).await;
    }
    fixed_window_keeps_counts_past_what_packs(s).await;
    the_policy_name_still_separates(s).await;
}

/// The token bucket keeps the tokens it is short of full; a new tick starts afresh.
async fn token_bucket_keeps_the_tokens_owed(s: &Under) {
    let old = policy("tokens", "10/s burst 10");
    assert!(s.check("up", &old, 8, T0).await.is_allowed());
    assert_eq!(
        s.remaining("up", &policy("tokens", "10/s burst 20"), T0)
            .await,
        12
    );

    // Short of more than the new capacity: empty until refilled past the debt.
    assert!(s.check("down", &old, 8, T0).await.is_allowed());
    let smaller = policy("tokens", "10/s burst 5");
    let d = s.check("down", &smaller, 1, T0).await;
    // 8 owed + 1 wanted against 5: 4 tokens to come, one every 100 ms.
    assert_eq!((d.is_allowed(), d.remaining), (false, 0));
    assert_eq!(d.retry_after.unwrap().as_micros(), 400 * u128::from(MS));
    assert!(
        s.check("down", &smaller, 1, T0 + 400 * MS)
            .await
            .is_allowed()
    );

    // 20/s ticks every 50 ms: what the old state counted means nothing there.
    assert!(s.check("rate", &old, 8, T0).await.is_allowed());
    assert_eq!(
        s.remaining("rate", &policy("tokens", "20/s burst 10"), T0)
            .await,
        10
    );
}

/// Windows keep what they counted within the window; a new period starts afresh.
async fn windows_keep_the_count(s: &Under, algorithm: &str) {
    let old = policy(algorithm, "10/s");
    assert!(s.check("up", &old, 8, T0).await.is_allowed());
    let more = policy(algorithm, "20/s");
    assert_eq!(
        s.remaining("up", &more, T0 + 10 * MS).await,
        12,
        "{algorithm}"
    );
    assert!(s.check("up", &more, 12, T0 + 10 * MS).await.is_allowed());
    assert!(!s.check("up", &more, 1, T0 + 10 * MS).await.is_allowed());

    // More counted than the new limit: refused, nothing remains, until the units leave.
    assert!(s.check("down", &old, 8, T0).await.is_allowed());
    let fewer = policy(algorithm, "5/s");
    let d = s.check("down", &fewer, 1, T0 + 10 * MS).await;
    assert_eq!((d.is_allowed(), d.remaining), (false, 0), "{algorithm}");
    assert_eq!(d.retry_after.unwrap().as_micros(), 990 * u128::from(MS));
    assert!(
        s.check("down", &fewer, 5, T0 + 1_000 * MS)
            .await
            .is_allowed()
    );

    // Another period is another window (or log): afresh.
    assert!(s.check("period", &old, 8, T0).await.is_allowed());
    let longer = policy(algorithm, "10/min");
    assert_eq!(s.remaining("period", &longer, T0).await, 10, "{algorithm}");
}

/// A byte quota's window counts more units than its period has µs, which Redis keeps as a
/// pair rather than one integer; a lower limit still reads it, and a refund back under the
/// period packs it again.
async fn fixed_window_keeps_counts_past_what_packs(s: &Under) {
    let bytes = policy("fixed", "2000000/s");
    assert!(s.check("bytes", &bytes, 5, T0).await.is_allowed());
    assert!(
        s.check("bytes", &bytes, 1_500_000, T0 + MS)
            .await
            .is_allowed()
    );
    let less = policy("fixed", "1000/s");
    let d = s.check("bytes", &less, 1, T0 + 2 * MS).await;
    assert_eq!((d.is_allowed(), d.remaining), (false, 0));
    s.adjust("bytes", &less, Adjustment::Refund(1_500_000), T0 + 3 * MS)
        .await;
    assert_eq!(s.remaining("bytes", &less, T0 + 4 * MS).await, 995);
    assert!(s.check("bytes", &less, 10, T0 + 5 * MS).await.is_allowed());
    assert_eq!(s.remaining("bytes", &bytes, T0 + 6 * MS).await, 1_999_985);
}

/// Another name is another limit, whatever the quota.
async fn the_policy_name_still_separates(s: &Under) {
    let a = Policy::gcra("a", "10/s".parse().unwrap()).unwrap();
    let b = Policy::gcra("b", "10/s".parse().unwrap()).unwrap();
    assert!(s.check("k", &a, 10, T0).await.is_allowed());
    assert_eq!(s.remaining("k", &b, T0).await, 10);
}
