//! A change of a penalty's `within` while a strike window is open (a live change, a
//! reloaded file), in Redis beside the memory store: the window keeps the end it opened
//! with (`floodwall_core::guide::penalties`, rule 2), and the new `within` applies from the next window.

mod common;

use std::time::Duration;

use floodwall_core::{ManualClock, MemoryStore, Penalty, Policy, StoreExt};
use redis_harness::RedisServer;

use common::uncached_store;

const NOW: u64 = 1_700_000_000_000_000;
const S: u64 = 1_000_000;

/// `(µs after the first strike, within in s, banned)` per strike after one admission: the
/// scenarios of floodwall-core's `a_strike_window_keeps_its_end_when_within_changes`, with
/// their outcomes, which both stores must reach.
/// Shrunk from 10 s to 2 s after the first strike: the window still ends at 10 s.
const SHRUNK: [(u64, u64, bool); 3] = [(0, 10, false), (5 * S, 2, false), (10 * S - 1, 2, true)];
/// Grown from 2 s to 10 s: the window opened with 2 s ends at 2 s; the next, opened then
/// with 10 s, at 12 s.
const GROWN: [(u64, u64, bool); 4] = [
    (0, 2, false),
    (2 * S, 10, false),
    (2 * S, 10, false),
    (12 * S - 1, 10, true),
];

#[tokio::test]
async fn a_strike_window_keeps_its_end_when_within_changes() {
    let server = RedisServer::start();
    let store = uncached_store(&server.url()).await;
    for (key, scenario) in [(b"shrunk", &SHRUNK[..]), (b"grown!", &GROWN[..])] {
        let policy = |within| {
            Policy::gcra("window", "1/h".parse().unwrap())
                .unwrap()
                .with_penalty(
                    Penalty::new(3, Duration::from_secs(within), Duration::from_secs(60)).unwrap(),
                )
        };
        let clock = ManualClock::new(NOW);
        let memory = MemoryStore::builder().clock(clock.clone()).build();
        let first = policy(scenario[0].1);
        assert!(
            store
                .at(NOW)
                .check(key, &first, 1)
                .await
                .unwrap()
                .is_allowed()
        );
        assert!(memory.check(key, &first, 1).await.unwrap().is_allowed());
        let mut banned = Vec::new();
        for &(at, within, _) in scenario {
            clock.set(NOW + at);
            let want = memory.check(key, &policy(within), 1).await.unwrap();
            let d = store
                .at(NOW + at)
                .check(key, &policy(within), 1)
                .await
                .unwrap();
            assert!(!d.is_allowed());
            // The whole decision, `banned` included, as the memory store's.
            assert_eq!(d, want, "{scenario:?} at {at}");
            banned.push(d.is_banned());
        }
        let expected: Vec<bool> = scenario.iter().map(|s| s.2).collect();
        assert_eq!(banned, expected, "{scenario:?}");
    }
}
