//! Penalties in Redis against the memory store on random histories: strikes, bans, growth,
//! forgetting, `unban` and several policies at once decide exactly as
//! `floodwall_core::guide::penalties` says the memory store does, through the scripts with the numbers
//! written in and through the generic ones. A sliding window or log, which Redis does not
//! check with other policies at once, is checked policy by policy at such a step, as the
//! tower layer does, and its history goes on.

mod common;

use std::time::Duration;

use floodwall_core::{Algorithm, ManualClock, MemoryStore, Penalty, StoreExt};
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
    let generic = rt.block_on(common::generic_store(&server.url(), "generic:"));
    let case = std::sync::atomic::AtomicU64::new(0);
    // How many checks the memory store answered as a ban: the histories must reach bans.
    let bans = std::sync::atomic::AtomicU64::new(0);
    // Histories begun and run to their end, and two-policy steps compared, by algorithm:
    // every history runs through its two-policy steps to its end.
    let [begun, ended, pairs]: [[std::sync::atomic::AtomicU64; 6]; 3] = Default::default();
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
        begun[alg].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        rt.block_on(async {
            for (i, (dt, op)) in steps.into_iter().enumerate() {
                now += dt;
                clock.set(now);
                match op {
                    Op::Check(cost) => {
                        let cost = cost.min(policy.limit());
                        let want = memory.check(b"k", &policy, cost).await.unwrap();
                        bans.fetch_add(u64::from(want.is_banned()), std::sync::atomic::Ordering::Relaxed);
                        for (name, s) in [("written", &store), ("generic", &generic)] {
                            let got = s.at(now).check(b"k", &policy, cost).await.unwrap();
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
                        pairs[alg].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let sliding = matches!(algorithm, Algorithm::SlidingWindow { .. } | Algorithm::SlidingLog);
                        if !sliding {
                            let want = memory.check_all(b"k", &both, cost).await.unwrap();
                            for (name, s) in [("written", &store), ("generic", &generic)] {
                                let got = s.at(now).check_all(b"k", &both, cost).await.unwrap();
                                prop_assert_eq!(got, want.clone(), "{} all, step {}", name, i);
                            }
                            continue;
                        }
                        // Redis does not combine a sliding window or log with other
                        // policies (their scripts are whole, with no sections to paste): it
                        // answers `Unsupported` having written nothing, and the tower layer
                        // then checks the policies one by one. So does the model, on both
                        // stores: what follows compares the states Redis kept.
                        for (name, s) in [("written", &store), ("generic", &generic)] {
                            let got = s.at(now).check_all(b"k", &both, cost).await;
                            let unsupported = matches!(got, Err(floodwall_core::Error::Unsupported { .. }));
                            prop_assert!(unsupported, "{} all, step {}: {:?}", name, i, got);
                        }
                        for p in &both {
                            let want = memory.check(b"k", p, cost).await.unwrap();
                            bans.fetch_add(u64::from(want.is_banned()), std::sync::atomic::Ordering::Relaxed);
                            for (name, s) in [("written", &store), ("generic", &generic)] {
                                let got = s.at(now).check(b"k", p, cost).await.unwrap();
                                prop_assert_eq!(got, want, "{} one by one, step {}: {:?}", name, i, p);
                            }
                        }
                    }
                }
            }
            ended[alg].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            Ok(())
        })?;
    });
    let bans = bans.into_inner();
    assert!(bans > 100, "{bans} bans");
    let [begun, ended, pairs] = [begun, ended, pairs].map(|n| n.map(|n| n.into_inner()));
    assert_eq!(ended, begun, "histories run to their end, by algorithm");
    assert!(
        pairs.iter().all(|&n| n > 0),
        "two-policy steps by algorithm: {pairs:?}"
    );
}
