//! `RedisStore::record_metrics` against a real redis-server: the counters read back are
//! the store's own figures, the deny cache's savings exact after a known flood, and
//! coalescing's after checks known to share a batch.

use floodwall_core::{Policy, StoreExt};
use floodwall_redis::RedisStore;
use floodwall_redis::metrics::{STORE_CALLS, STORE_SAVED};
use metrics::{SharedString, Unit};
use metrics_util::CompositeKey;
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use redis_harness::RedisServer;

/// What a recorder holds; a snapshot takes the counters' values since the last one.
type Seen = Vec<(CompositeKey, Option<Unit>, Option<SharedString>, DebugValue)>;

fn take(snapshotter: &Snapshotter) -> Seen {
    snapshotter.snapshot().into_vec()
}

/// The counter `name` whose labels are exactly `labels` (in any order).
fn counter(seen: &Seen, name: &str, labels: &[(&str, &str)]) -> Option<u64> {
    seen.iter()
        .find(|(key, _, _, _)| {
            let key = key.key();
            let mut got: Vec<(&str, &str)> = key.labels().map(|l| (l.key(), l.value())).collect();
            let mut want = labels.to_vec();
            got.sort();
            want.sort();
            key.name() == name && got == want
        })
        .map(|(_, _, _, value)| match value {
            DebugValue::Counter(n) => *n,
            other => panic!("{name} is not a counter: {other:?}"),
        })
}

#[tokio::test(flavor = "current_thread")]
async fn recorded_counters_are_the_stores_figures() {
    let server = RedisServer::start();
    let store = RedisStore::connect(&server.url()).await.unwrap();
    let policy = Policy::gcra("flood", "5/min".parse().unwrap()).unwrap();
    for _ in 0..40 {
        store.check(b"mallory", &policy, 1).await.unwrap();
    }
    // Twelve checks of keys of their own at once: on this current-thread runtime the first
    // goes alone and the eleven queued behind it share one batch, which saves ten calls.
    let roomy = Policy::gcra("roomy", "1000/min".parse().unwrap()).unwrap();
    let checks: Vec<_> = (0..12)
        .map(|i| {
            let (store, roomy) = (store.clone(), roomy.clone());
            tokio::spawn(async move { store.check(format!("c{i}").as_bytes(), &roomy, 1).await })
        })
        .collect();
    for c in checks {
        assert!(c.await.unwrap().unwrap().is_allowed());
    }

    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || store.record_metrics("redis"));

    let seen = take(&snapshotter);
    let stats = store.stats();
    // Five admissions, one script call each, the other 35 refused by the deny cache; then
    // one call alone and one batch of eleven.
    assert_eq!((stats.script_calls, stats.coalesced), (7, 10), "{stats:?}");
    let calls = counter(&seen, STORE_CALLS, &[("store", "redis")]);
    assert_eq!(calls, Some(7));
    let saved =
        |seen: &Seen, reason| counter(seen, STORE_SAVED, &[("store", "redis"), ("reason", reason)]);
    assert_eq!(saved(&seen, "deny_cache"), Some(35));
    assert_eq!(saved(&seen, "coalesced"), Some(10));

    // Recorded again later, the counters move to the store's new figures.
    for _ in 0..10 {
        store.check(b"mallory", &policy, 1).await.unwrap();
    }
    metrics::with_local_recorder(&recorder, || store.record_metrics("redis"));
    assert_eq!(saved(&take(&snapshotter), "deny_cache"), Some(45));
}
