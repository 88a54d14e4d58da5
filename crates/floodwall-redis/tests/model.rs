//! Every script against the core model on random histories: the scripts answer with compact
//! replies (an integer, a string) and the sliding log counts units instead of reading its
//! entries, so each single check, through the scripts with the parameters written in and
//! through the generic ones, is compared with `Policy::decide` on the same times and costs,
//! clock steps back (where the model and the scripts agree on them) and peeks included.

mod common;

use floodwall_core::{Algorithm, State, StoreExt};
use floodwall_redis::RedisStore;
use proptest::prelude::*;
use redis_harness::RedisServer;

use common::small_policy;

const NOW: u64 = 1_700_000_000_000_000;

#[test]
fn single_checks_decide_as_the_core_model() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let server = RedisServer::start();
    let store = rt.block_on(RedisStore::connect(&server.url())).unwrap();
    // Every check also goes through the generic scripts, which read the parameters from
    // their arguments, on a key of its own.
    let generic = rt.block_on(common::generic_store(&server.url(), "generic:"));
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
        // Counts 1..=40 per 10, 20 or 50 ms: short histories cross windows, buckets and
        // log entries leaving.
        let algorithm = Algorithm::all()[alg];
        let policy = small_policy(format!("m{case}"), algorithm, count, period_ms, burst);
        let limit = policy.limit();
        let mut state = State::new();
        let mut now = NOW;
        rt.block_on(async {
            for (i, (dt, back, cost)) in steps.into_iter().enumerate() {
                // After a step back the memory store's sliding window may have tidied
                // buckets the script keeps (the crate docs: Redis is stricter there).
                if back && !matches!(algorithm, Algorithm::SlidingWindow { .. }) {
                    now -= dt.min(3_000);
                } else {
                    now += dt;
                }
                let cost = cost.min(limit);
                let got = store.at(now).check(b"k", &policy, cost).await.unwrap();
                let generic = generic.at(now).check(b"g", &policy, cost).await.unwrap();
                let want = policy.decide(&mut state, now, cost).unwrap();
                prop_assert_eq!(got, want, "step {} of {:?}: cost {} at {}", i, policy, cost, now);
                prop_assert_eq!(generic, want, "generic, step {} of {:?}", i, policy);
            }
            Ok(())
        })?;
    });
}
