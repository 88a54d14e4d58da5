//! What the service records through the `metrics` facade (feature `metrics`), read from a
//! debugging recorder: the cases where a `shadow_mode` limit's answer (always `OK`) does
//! not say by itself whether it would have refused.

#![cfg(feature = "metrics")]

use std::collections::BTreeMap;

use floodwall_rls::metrics::{DECISIONS, KEY_LABEL, RESULT_LABEL, STORE_DURATION};
use metrics_util::debugging::{DebugValue, DebuggingRecorder};

use super::*;

/// Decides `requests` one after another on a memory store with `CONFIG`; returns each
/// `(key, result)` count and how many store durations were recorded.
fn record(requests: Vec<RateLimitRequest>) -> (BTreeMap<(String, String), u64>, usize) {
    let config = Config::from_yaml("test.yaml", CONFIG).unwrap();
    let store = MemoryStore::builder().clock(ManualClock::new(T0)).build();
    let service = RateLimitService::new(config, store);
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    ::metrics::with_local_recorder(&recorder, || {
        runtime.block_on(async {
            for request in &requests {
                service.decide(request).await.unwrap();
            }
        })
    });
    let mut counts = BTreeMap::new();
    let mut durations = 0;
    for (key, _, _, value) in snapshotter.snapshot().into_vec() {
        let key = key.key();
        match value {
            DebugValue::Counter(n) if key.name() == DECISIONS => {
                let label = |name: &str| {
                    key.labels()
                        .find(|l| l.key() == name)
                        .map(|l| l.value().to_owned())
                        .unwrap()
                };
                counts.insert((label(KEY_LABEL), label(RESULT_LABEL)), n);
            }
            DebugValue::Histogram(values) if key.name() == STORE_DURATION => {
                durations += values.len();
            }
            other => panic!("unexpected {key:?}: {other:?}"),
        }
    }
    (counts, durations)
}

#[test]
fn shadow_limits_count_what_they_would_have_done() {
    let trial = |value: &str, hits: u64| {
        request("api", vec![costing(descriptor(&[("trial", value)]), hits)])
    };
    let (counts, durations) = record(vec![
        // 1 a minute: the first fits, leaving 0 (ok), the second would not.
        trial("a", 1),
        trial("a", 1),
        // A read (cost 0) of the used-up key fits; a cost above the limit never would.
        trial("a", 0),
        trial("b", 2),
        // In a request refused by another descriptor, only read: a fresh key fits, a
        // used-up one would not.
        request(
            "api",
            vec![
                descriptor(&[("trial", "c")]),
                descriptor(&[("path", "/blocked")]),
            ],
        ),
        request(
            "api",
            vec![
                descriptor(&[("trial", "a")]),
                descriptor(&[("path", "/blocked")]),
            ],
        ),
        // Charged, then given back when a later descriptor refuses: it fitted.
        request(
            "api",
            vec![
                descriptor(&[("trial", "d")]),
                costing(descriptor(&[("user", "u")]), 4),
            ],
        ),
    ]);
    let expected: BTreeMap<(String, String), u64> = [
        ("trial", "ok", 4),
        ("trial", "shadow_over_limit", 3),
        ("path", "over_limit", 2),
        ("user", "over_limit", 1),
    ]
    .into_iter()
    .map(|(k, r, n)| ((k.to_owned(), r.to_owned()), n))
    .collect();
    assert_eq!(counts, expected);
    // Every request asked the store something.
    assert_eq!(durations, 7);
}
