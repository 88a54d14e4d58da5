//! The decision vectors of every algorithm, and redis-cell's recorded replies, against the
//! memory store driven by a manual clock.

mod support;

use floodwall::core::ManualClock;
use floodwall::{MemoryStore, StoreExt};
use support::vectors;

#[tokio::test(flavor = "current_thread")]
async fn memory_store_matches_every_vector_file() {
    let clock = ManualClock::new(0);
    let store = MemoryStore::builder().clock(clock.clone()).build();
    vectors::run_all(|policy, step| {
        clock.set(step.at);
        std::future::ready(
            store
                .check_now(step.key.as_bytes(), &policy, step.cost)
                .unwrap(),
        )
    })
    .await;
}

#[tokio::test(flavor = "current_thread")]
async fn redis_cell_replies_are_reproduced() {
    let store = MemoryStore::builder()
        .clock(ManualClock::new(1_700_000_000_000_000))
        .build();
    vectors::run_cell(|policy, key, cost| {
        std::future::ready(store.check_now(key.as_bytes(), &policy, cost).unwrap())
    })
    .await;
}
