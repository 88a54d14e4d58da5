//! Penalties in Redis against the memory store on random histories: strikes, bans, growth,
//! forgetting, `unban` and several policies at once decide exactly as
//! `docs/penalties.md` says the memory store does, through the scripts with the numbers
//! written in and through the generic ones.

mod common;

use std::time::Duration;

use floodwall_core::{Algorithm, ManualClock, MemoryStore, Penalty, Store};
use floodwall_redis::RedisStore;
use proptest::prelude::*;
use redis_harness::RedisServer;

use common::small_policy;

const NOW: u64 = 1_700_000_000_000_000;

/// What a step of a history does.
#[derive(Debug, Clone, Copy)]
enum Op {
    Check(u64),
    Unban,
    /// The penalized policy with a plain one, at once.
    Both(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        16 => (0..=6u64).prop_map(Op::Check),
        1 => Just(Op::Unban),
        3 => (0..=3u64).prop_map(Op::Both),
    ]
}

#[test]
fn penalties_decide_as_the_memory_store() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let server = RedisServer::start();
    let store = rt.block_on(common::uncached_store(&server.url()));
    let generic = rt
        .block_on(
            RedisStore::builder()
                .deny_cache(false)
                .written_scripts(0)
                .prefix("generic:")
                .multiplexed(&server.url()),
        )
        .unwrap();
    let case = std::sync::atomic::AtomicU64::new(0);
    // How many checks the memory store answered as a ban: the histories must reach bans.
    let bans = std::sync::atomic::AtomicU64::new(0);
    let config = ProptestConfig {
        cases: 96,
        failure_persistence: None,
        ..ProptestConfig::default()
    };
    let us = Duration::from_micros;
    proptest!(config, |(
        alg in 0..6usize,
        count in 1..=6u64,
        period_ms in prop::sample::select(vec![10u64, 20, 50]),
        after in 1..=4u32,
        within in 1_000..40_000u64,
        ban in 1_000..20_000u64,
        growth in 1..=3u32,
        cap in 1..=4u64,
        forget in 1_000..60_000u64,
        steps in prop::collection::vec((0..6_000u64, op()), 1..100),
    )| {
        let case = case.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let algorithm = Algorithm::all()[alg];
        let penalty = Penalty::new(after, us(within), us(ban))
            .unwrap()
            .growing(growth, us(ban * cap))
            .unwrap()
            .forget_after(us(forget))
            .unwrap();
        let policy = small_policy(format!("p{case}"), algorithm, count, period_ms, count)
            .with_penalty(penalty);
        let plain = small_policy(format!("q{case}"), Algorithm::Gcra, 5, 20, 5);
        let both = [plain, policy.clone()];
        let clock = ManualClock::new(NOW);
        let memory = MemoryStore::builder().clock(clock.clone()).build();
        let mut now = NOW;
        rt.block_on(async {
            for (i, (dt, op)) in steps.into_iter().enumerate() {
                now += dt;
                clock.set(now);
                match op {
                    Op::Check(cost) => {
                        let cost = cost.min(policy.limit());
                        let want = memory.check(b"k", &policy, cost).await.unwrap();
                        bans.fetch_add(u64::from(want.banned), std::sync::atomic::Ordering::Relaxed);
                        for (name, s) in [("written", &store), ("generic", &generic)] {
                            let got = s.check_at(b"k", &policy, cost, now).await.unwrap();
                            prop_assert_eq!(got, want, "{} step {}: {:?} cost {}", name, i, policy, cost);
                        }
                    }
                    Op::Unban => {
                        memory.unban(b"k", &policy).await.unwrap();
                        store.unban(b"k", &policy).await.unwrap();
                        generic.unban(b"k", &policy).await.unwrap();
                    }
                    Op::Both(cost) => {
                        let cost = cost.min(policy.limit());
                        let want = memory.check_all(b"k", &both, cost).await.unwrap();
                        for (name, s) in [("written", &store), ("generic", &generic)] {
                            match s.check_all_at(b"k", &both, cost, now).await {
                                // Redis does not combine sliding windows and logs: the
                                // memory store has decided alone, so the history ends.
                                Err(floodwall_core::Error::Unsupported { .. }) => {
                                    let sliding = matches!(algorithm, Algorithm::SlidingWindow { .. } | Algorithm::SlidingLog);
                                    prop_assert!(sliding, "{:?}", algorithm);
                                    return Ok(());
                                }
                                got => prop_assert_eq!(got.unwrap(), want.clone(), "{} all, step {}", name, i),
                            }
                        }
                    }
                }
            }
            Ok(())
        })?;
    });
    let bans = bans.into_inner();
    assert!(bans > 100, "{bans} bans");
}
