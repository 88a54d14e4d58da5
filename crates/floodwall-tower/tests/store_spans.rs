//! The span around a store call the layer waits for: the decision as fields, the key only
//! as a keyed hash, never in clear. One test in this binary, with the process's
//! subscriber: a subscriber set per thread can miss a callsite another test's thread
//! registered first.

use std::sync::{Arc, Mutex};

use axum::body::Body;
use floodwall_core::store::{Op, Reply};
use floodwall_core::{Error, ManualClock, MemoryStore, Store};
use floodwall_test_support::*;
use floodwall_tower::RateLimitLayer;
use http::Request;
use http::request::Parts;
use tower::{Layer, Service, ServiceExt};

/// A memory store reached as a remote one is: every check waits (no `check_now`), so
/// the layer takes its store-call path, with its span.
#[derive(Clone)]
struct Remote(MemoryStore<ManualClock>);

impl Store for Remote {
    async fn call(&self, op: Op<'_>) -> Result<Reply, Error> {
        match op {
            Op::Check { .. } | Op::Reset { .. } => self.0.call(op).await,
            other => Err(other.unsupported()),
        }
    }
}

/// Every span and event of target `floodwall`, at any level, written out with all its
/// fields (`name field=value ...`), as a logging subscriber would print them.
#[derive(Clone, Default)]
struct Everything(Arc<Mutex<Vec<String>>>);

struct Fields(String);

impl tracing::field::Visit for Fields {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0.push_str(&format!(" {}={value:?}", field.name()));
    }
}

impl tracing::Subscriber for Everything {
    fn enabled(&self, meta: &tracing::Metadata<'_>) -> bool {
        meta.target().starts_with("floodwall")
    }
    fn new_span(&self, span: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        let mut fields = Fields(span.metadata().name().to_owned());
        span.record(&mut fields);
        let mut all = self.0.lock().unwrap();
        all.push(fields.0);
        tracing::span::Id::from_u64(all.len() as u64)
    }
    fn record(&self, id: &tracing::span::Id, values: &tracing::span::Record<'_>) {
        let mut fields = Fields(String::new());
        values.record(&mut fields);
        let mut all = self.0.lock().unwrap();
        let line = &mut all[id.into_u64() as usize - 1];
        line.push_str(&fields.0);
    }
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        let mut fields = Fields(event.metadata().name().to_owned());
        event.record(&mut fields);
        self.0.lock().unwrap().push(fields.0);
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

/// The `key=` field of a span line.
fn key_field(line: &str) -> &str {
    let start = line.find(" key=").expect("a key field") + 5;
    line[start..].split(' ').next().unwrap()
}

#[tokio::test(flavor = "current_thread")]
async fn store_spans_carry_the_decision_and_only_a_hash_of_the_key() {
    let logs = Everything::default();
    tracing::subscriber::set_global_default(logs.clone()).unwrap();
    let (store, _clock) = store();
    // The key in clear, as a user's extractor may give it: the user's e-mail.
    let user = |req: &Parts| req.headers.get("x-user").map(|v| v.as_bytes().to_vec());
    let mut svc = RateLimitLayer::new(Remote(store), gcra("api", "2/min"))
        .key(user)
        .layer(hello());
    let mut statuses = Vec::new();
    for who in [
        "alice@example.com",
        "alice@example.com",
        "alice@example.com",
        "bob@example.com",
    ] {
        let req = Request::get("/")
            .header("x-user", who)
            .body(Body::empty())
            .unwrap();
        let res = svc.ready().await.unwrap().call(req).await.unwrap();
        statuses.push(res.status().as_u16());
    }
    assert_eq!(statuses, [200, 200, 429, 200]);

    let lines = logs.0.lock().unwrap().clone();
    let spans: Vec<&String> = lines
        .iter()
        .filter(|l| l.starts_with("floodwall.store.check"))
        .collect();
    assert_eq!(spans.len(), 4, "{lines:#?}");
    // The decision is on the span.
    assert!(spans[0].contains("policy=\"api\"") && spans[0].contains("allowed=true"));
    assert!(spans[0].contains("remaining=1"), "{}", spans[0]);
    assert!(spans[2].contains("allowed=false") && spans[2].contains("retry_after_ms="));
    // The key, hashed: the same for the same user, another for another, 16 hex digits.
    let keys: Vec<&str> = spans.iter().map(|l| key_field(l)).collect();
    assert_eq!(keys[0], keys[1]);
    assert_eq!(keys[0], keys[2]);
    assert_ne!(keys[0], keys[3]);
    assert!(
        keys.iter()
            .all(|k| k.len() == 16 && k.bytes().all(|b| b.is_ascii_hexdigit()))
    );
    // Never in clear, anywhere.
    for line in &lines {
        assert!(!line.contains("alice") && !line.contains("bob"), "{line}");
    }
}
