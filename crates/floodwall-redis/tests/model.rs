//! Every script against the core model on random histories: the scripts answer with compact
//! replies (an integer, a string) and the sliding log reads two entries instead of the whole
//! log, so each single check is compared with `Policy::decide` on the same times and costs,
//! clock steps back (where the model and the scripts agree on them) and peeks included.

use std::time::Duration;

use floodwall_core::{Algorithm, Policy, Quota, State};
use floodwall_redis::RedisStore;
use proptest::prelude::*;
use redis_harness::RedisServer;

const NOW: u64 = 1_700_000_000_000_000;

fn algorithms() -> [Algorithm; 6] {
    [
        Algorithm::Gcra,
        Algorithm::TOKEN_BUCKET,
        Algorithm::LeakyBucket,
        Algorithm::FixedWindow,
        Algorithm::SLIDING_WINDOW,
        Algorithm::SlidingLog,
    ]
}

/// A small policy: counts 1..=40 per 10, 20 or 50 ms (bursts for GCRA and the buckets), so
/// short histories cross windows, buckets and log entries leaving.
fn policy(alg: usize, count: u64, period_ms: u64, burst: u64, case: u64) -> Policy {
    let algorithm = algorithms()[alg];
    let mut quota = Quota::new(count, Duration::from_millis(period_ms)).unwrap();
    if algorithm.has_burst() {
        quota = quota.with_burst(burst).unwrap();
    }
    Policy::new(format!("m{case}"), algorithm, quota).unwrap()
}

#[test]
fn single_checks_decide_as_the_core_model() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let server = RedisServer::start();
    let store = rt.block_on(RedisStore::connect(&server.url())).unwrap();
    let case = std::sync::atomic::AtomicU64::new(0);
    let config = ProptestConfig {
        cases: 192,
        failure_persistence: None,
        ..ProptestConfig::default()
    };
    proptest!(config, |(
        alg in 0..6usize,
        count in 1..=40u64,
        period_ms in prop::sample::select(vec![10u64, 20, 50]),
        burst in 1..=40u64,
        // Steps of up to 8 ms, a tenth of them back in time by up to 3 ms.
        steps in prop::collection::vec((0..8_000u64, prop::bool::weighted(0.1), 0..=12u64), 1..120),
    )| {
        let case = case.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let policy = policy(alg, count, period_ms, burst, case);
        let limit = policy.limit();
        let mut state = State::new();
        let mut now = NOW;
        rt.block_on(async {
            for (i, (dt, back, cost)) in steps.into_iter().enumerate() {
                // After a step back the memory store's sliding window and log may have
                // tidied what the scripts keep (the crate docs: Redis is stricter there).
                if back && alg < 4 {
                    now -= dt.min(3_000);
                } else {
                    now += dt;
                }
                let cost = cost.min(limit);
                let got = store.check_at(b"k", &policy, cost, now).await.unwrap();
                let want = policy.decide(&mut state, now, cost).unwrap();
                prop_assert_eq!(got, want, "step {} of {:?}: cost {} at {}", i, policy, cost, now);
            }
            Ok(())
        })?;
    });
}
