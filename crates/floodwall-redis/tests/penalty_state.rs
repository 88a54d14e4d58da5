//! `StoreExt::penalty_state` in Redis: the strikes, the ban and the remembered bans read
//! as the penalty's script keeps them, equal to the memory store's after the same history,
//! at an explicit time and on the server's clock; a key of the wrong contents is an error.

mod common;

use std::time::Duration;

use floodwall_core::{Error, ManualClock, MemoryStore, Penalty, PenaltyState, Policy, StoreExt};
use redis_harness::RedisServer;

use common::uncached_store;

const NOW: u64 = 1_700_000_000_000_000;
const SEC: Duration = Duration::from_secs(1);

fn login() -> Policy {
    Policy::gcra("login", "1/min".parse().unwrap())
        .unwrap()
        .with_penalty(Penalty::new(3, 60 * SEC, 10 * SEC).unwrap())
}

#[tokio::test]
async fn redis_reads_the_penalty_as_the_memory_store_does() {
    let server = RedisServer::start();
    let store = uncached_store(&server.url()).await;
    let clock = ManualClock::new(NOW);
    let memory = MemoryStore::builder().clock(clock.clone()).build();
    let policy = login();
    let micros = |d: Duration| u64::try_from(d.as_micros()).unwrap();

    let mut at = NOW;
    // One admitted, two strikes, then (5 s on) the read; then the ban, and 4 s into it.
    let history: [(u64, bool); 5] = [(0, true), (1, true), (1, true), (5, false), (1, true)];
    for (step, check) in history {
        at += step * 1_000_000;
        clock.set(at);
        if check {
            store.at(at).check(b"mallory", &policy, 1).await.unwrap();
            memory.check(b"mallory", &policy, 1).await.unwrap();
        }
        let redis = store
            .at(at)
            .penalty_state(b"mallory", &policy)
            .await
            .unwrap();
        let local = memory.penalty_state(b"mallory", &policy).await.unwrap();
        assert_eq!(redis, local, "at +{} s", (at - NOW) / 1_000_000);
    }
    let read = store
        .at(at)
        .penalty_state(b"mallory", &policy)
        .await
        .unwrap();
    assert_eq!(read.banned_for, Some(10 * SEC));
    assert_eq!(read.bans, 1);
    let later = at + micros(4 * SEC);
    let read = store
        .at(later)
        .penalty_state(b"mallory", &policy)
        .await
        .unwrap();
    assert_eq!(read.banned_for, Some(6 * SEC));
    // On the server's clock: the ban that ended long ago in the explicit times is over.
    let now = store.penalty_state(b"mallory", &policy).await.unwrap();
    assert_eq!(now.banned_for, None);
    assert_eq!(
        store.penalty_state(b"alice", &policy).await.unwrap(),
        PenaltyState::default()
    );
}

#[tokio::test]
async fn a_penalty_key_of_other_contents_is_an_error() {
    let server = RedisServer::start();
    let store = uncached_store(&server.url()).await;
    let policy = login();
    let [_, strikes, _] = store.penalty_keys(b"mallory", &policy);
    let client = redis::Client::open(server.url()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let _: () = redis::cmd("SET")
        .arg(&strikes)
        .arg("not a count")
        .query_async(&mut conn)
        .await
        .unwrap();
    let err = store.penalty_state(b"mallory", &policy).await.unwrap_err();
    assert!(matches!(err, Error::Backend { .. }), "{err:?}");
}
