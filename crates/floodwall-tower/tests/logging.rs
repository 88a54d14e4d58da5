//! A store outage is logged once when it starts and once when it ends, not per request;
//! a refusal in shadow mode is logged, an enforced one is not.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use floodwall_core::store::{Op, Reply};
use floodwall_core::{Error, MemoryStore, Store};
use floodwall_test_support::*;
use floodwall_tower::RateLimitLayer;
use tower::{Layer, ServiceExt};

/// A memory store that can be switched off.
#[derive(Clone, Default)]
struct Switch {
    down: Arc<AtomicBool>,
    store: MemoryStore,
}

impl Store for Switch {
    async fn call(&self, op: Op<'_>) -> Result<Reply, Error> {
        match op {
            Op::Check { .. } if self.down.load(Ordering::SeqCst) => {
                Err(Error::unavailable("switched off"))
            }
            Op::Check { .. } | Op::Reset { .. } => self.store.call(op).await,
            other => Err(other.unsupported()),
        }
    }
}

#[tokio::test(flavor = "current_thread")]
async fn an_outage_is_logged_once_each_way() {
    let events = Logs::default();
    let _guard = tracing::subscriber::set_default(events.clone());
    let store = Switch::default();
    let svc = RateLimitLayer::new(store.clone(), gcra("p", "1000/s")).layer(hello());

    assert_eq!(
        svc.clone()
            .oneshot(from("10.0.0.1"))
            .await
            .unwrap()
            .status(),
        200
    );
    store.down.store(true, Ordering::SeqCst);
    for _ in 0..50 {
        let res = svc.clone().oneshot(from("10.0.0.1")).await.unwrap();
        assert_eq!(res.status(), 503);
    }
    store.down.store(false, Ordering::SeqCst);
    for _ in 0..50 {
        assert_eq!(
            svc.clone()
                .oneshot(from("10.0.0.1"))
                .await
                .unwrap()
                .status(),
            200
        );
    }
    let events = events.recorded();
    let errors: Vec<_> = events
        .iter()
        .filter(|e| e.level == tracing::Level::ERROR)
        .collect();
    assert_eq!(errors.len(), 1, "{events:?}");
    assert!(
        errors[0]
            .message
            .contains("refusing requests (fail closed)")
    );
    let back = events
        .iter()
        .filter(|e| e.level == tracing::Level::INFO && e.message.contains("answers again"))
        .count();
    assert_eq!(back, 1, "{events:?}");
}

#[tokio::test(flavor = "current_thread")]
async fn the_services_of_one_layer_log_an_outage_once() {
    let events = Logs::default();
    let _guard = tracing::subscriber::set_default(events.clone());
    let store = Switch::default();
    let layer = RateLimitLayer::new(store.clone(), gcra("p", "1000/s"));
    // As axum's `Router::layer` does: a clone of the layer per route.
    let routes = [layer.clone().layer(hello()), layer.layer(hello())];

    store.down.store(true, Ordering::SeqCst);
    for svc in &routes {
        for _ in 0..5 {
            let res = svc.clone().oneshot(from("10.0.0.1")).await.unwrap();
            assert_eq!(res.status(), 503);
        }
    }
    store.down.store(false, Ordering::SeqCst);
    for svc in &routes {
        let res = svc.clone().oneshot(from("10.0.0.1")).await.unwrap();
        assert_eq!(res.status(), 200);
    }
    let events = events.recorded();
    let errors = events
        .iter()
        .filter(|e| e.level == tracing::Level::ERROR)
        .count();
    assert_eq!(errors, 1, "{events:?}");
    let back = events
        .iter()
        .filter(|e| e.level == tracing::Level::INFO && e.message.contains("answers again"))
        .count();
    assert_eq!(back, 1, "{events:?}");
}

/// Here rather than in tests/live.rs: every test of this file sets its subscriber before
/// it logs. In a file whose other tests log the same line with no subscriber, on threads
/// of their own, tracing may settle that line's interest as "never" while this test's
/// subscriber is being set, and the line goes unrecorded (seen there about 1 run in 13).
#[cfg(feature = "live")]
#[tokio::test(flavor = "current_thread")]
async fn a_shadow_refusal_is_logged_and_an_enforced_one_is_not() {
    let logs = Logs::default();
    let _subscriber = tracing::subscriber::set_default(logs.clone());
    let (store, _clock) = store();
    let layer = RateLimitLayer::new(store, gcra("trial", "1/min"));
    let live = layer.live();
    live.set_enforcement("trial", floodwall_tower::Enforcement::Shadow)
        .unwrap();
    let svc = layer.layer(hello());
    let mut statuses = Vec::new();
    for _ in 0..3 {
        if statuses.len() == 2 {
            live.set_enforcement("trial", floodwall_tower::Enforcement::Enforce)
                .unwrap();
        }
        let res = svc.clone().oneshot(from("10.0.0.1")).await.unwrap();
        statuses.push(res.status().as_u16());
    }
    assert_eq!(statuses, [200, 200, 429]);

    let shadow: Vec<_> = logs
        .recorded()
        .into_iter()
        .filter(|l| l.message.contains("would have been rate limited"))
        .collect();
    assert_eq!(shadow.len(), 1, "{shadow:?}");
    assert_eq!(shadow[0].target, "floodwall");
    assert_eq!(shadow[0].level, tracing::Level::INFO);
}
