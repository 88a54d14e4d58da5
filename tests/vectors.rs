//! The decision vectors of every algorithm, and redis-cell's recorded replies, against the
//! memory store driven by a manual clock.

mod support;

use floodwall::{ManualClock, MemoryStore, Policy};
use std::time::Duration;
use support::vectors::{self, cell_reply};

#[tokio::test(flavor = "current_thread")]
async fn memory_store_matches_every_vector_file() {
    let clock = ManualClock::new(0);
    let store = MemoryStore::builder().clock(clock.clone()).build();
    vectors::run_all(|policy, step| {
        clock.set(step.at);
        std::future::ready(store.check_sync(step.key.as_bytes(), &policy, step.cost))
    })
    .await;
}

#[test]
fn redis_cell_replies_are_reproduced() {
    let groups = vectors::load_cell();
    assert_eq!(groups.len(), 5, "groups A, B, C, D, F");
    for g in groups {
        let policy = Policy::redis_cell(
            "cell",
            g.max_burst,
            g.count,
            Duration::from_secs(g.period_s),
        )
        .unwrap();
        // All calls of a group happened within a few milliseconds: one instant.
        let store = MemoryStore::builder()
            .clock(ManualClock::new(1_700_000_000_000_000))
            .build();
        for (i, expected) in g.replies.iter().enumerate() {
            let got = store.check_sync(b"k", &policy, g.quantity);
            let reply = cell_reply(&got, || store.check_sync(b"k", &policy, 0).unwrap());
            assert_eq!(&reply, expected, "group {} call {}", g.name, i + 1);
        }
    }
}
