//! A request's descriptors are all or nothing: a refused request charges none of them; a
//! store that fails answers UNAVAILABLE and leaves nothing charged either.

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use floodwall_core::store::{Op, Reply};
use floodwall_core::{Error, ManualClock, MemoryStore, Store};
use tokio::sync::Notify;

use super::{CONFIG, OK, OVER, Rls, T0, codes, descriptor, request, start, start_with};

#[tokio::test]
async fn a_refused_request_charges_nothing() {
    refused_charges_nothing(start(CONFIG).await.0).await;
    refused_charges_nothing(start_with(CONFIG, OneByOne(memory())).await).await;
}

async fn refused_charges_nothing<S: Store + 'static>(rls: Rls<S>) {
    for _ in 0..3 {
        rls.one(&[("user", "bob")]).await;
    }
    // alice is admitted first, then bob is refused: alice's unit is given back.
    let r = rls
        .several(&[&[("user", "alice")], &[("user", "bob")]])
        .await;
    assert_eq!(
        (r.overall_code, codes(&r)),
        (OVER, vec![(OK, 3), (OVER, 0)])
    );
    assert_eq!(codes(&rls.one(&[("user", "alice")]).await), [(OK, 2)]);

    // bob is refused first: carol, after it, is only read.
    let r = rls
        .several(&[&[("user", "bob")], &[("user", "carol")]])
        .await;
    assert_eq!(
        (r.overall_code, codes(&r)),
        (OVER, vec![(OVER, 0), (OK, 3)])
    );
    assert_eq!(codes(&rls.one(&[("user", "carol")]).await), [(OK, 2)]);
}

#[tokio::test]
async fn requests_per_unit_0_anywhere_charges_nothing() {
    let (rls, _clock) = start(CONFIG).await;
    let r = rls
        .several(&[&[("user", "alice")], &[("path", "/blocked")]])
        .await;
    assert_eq!(
        (r.overall_code, codes(&r)),
        (OVER, vec![(OK, 3), (OVER, 0)])
    );
    assert_eq!(codes(&rls.one(&[("user", "alice")]).await), [(OK, 2)]);
}

#[tokio::test]
async fn windows_and_shadow_limits_are_given_back_too() {
    given_back(start(CONFIG).await.0).await;
    given_back(start_with(CONFIG, OneByOne(memory())).await).await;
}

async fn given_back<S: Store + 'static>(rls: Rls<S>) {
    for _ in 0..3 {
        rls.one(&[("user", "bob")]).await;
    }
    let r = rls
        .several(&[
            &[("path", "/orders")],
            &[("trial", "t")],
            &[("user", "bob")],
        ])
        .await;
    assert_eq!(r.overall_code, OVER);
    assert_eq!(codes(&r), [(OK, 1000), (OK, 1), (OVER, 0)]);
    // The fixed window and the shadow limit were charged, then refunded.
    assert_eq!(codes(&rls.one(&[("path", "/orders")]).await), [(OK, 999)]);
    assert_eq!(codes(&rls.one(&[("trial", "t")]).await), [(OK, 0)]);
}

fn memory() -> MemoryStore<ManualClock> {
    MemoryStore::builder().clock(ManualClock::new(T0)).build()
}

/// A memory store that cannot decide several checks together, as a Redis Cluster cannot
/// when their keys are in different slots: the service checks them one by one and gives
/// the charges back on a refusal.
struct OneByOne<S>(S);

impl<S: Store> Store for OneByOne<S> {
    async fn call(&self, op: Op<'_>) -> Result<Reply, Error> {
        if let Op::CheckAll { .. } = op {
            return Err(op.unsupported());
        }
        self.0.call(op).await
    }
}

/// A memory store whose checks under the policies starting with `prefix` time out.
struct FailOn(MemoryStore<ManualClock>, &'static str);

impl Store for FailOn {
    async fn call(&self, op: Op<'_>) -> Result<Reply, Error> {
        let fails = match &op {
            Op::Check { policy, .. } => policy.name().starts_with(self.1),
            Op::CheckAll { checks } => checks.iter().any(|c| c.policy.name().starts_with(self.1)),
            _ => false,
        };
        if fails {
            return Err(Error::Timeout);
        }
        self.0.call(op).await
    }
}

/// A memory store that holds a single check charging a key containing `held` until
/// `go`, after saying so on `reached`: the moment a request checked one descriptor at a
/// time would have charged the ones before it.
struct Gate {
    store: MemoryStore<ManualClock>,
    held: &'static [u8],
    armed: AtomicBool,
    reached: Notify,
    go: Notify,
}

impl Store for Gate {
    async fn call(&self, op: Op<'_>) -> Result<Reply, Error> {
        if let Op::Check { key, cost, .. } = &op
            && *cost > 0
            && self.armed.load(Ordering::SeqCst)
            && key.windows(self.held.len()).any(|w| w == self.held)
        {
            self.reached.notify_one();
            self.go.notified().await;
        }
        self.store.call(op).await
    }
}

/// While a request is being refused (bob is over), alice's own requests never see the
/// unit it would have charged her: she gets all three of hers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_request_sees_the_charge_of_a_refused_one() {
    let gate = Arc::new(Gate {
        store: MemoryStore::builder().clock(ManualClock::new(T0)).build(),
        held: b"bob",
        armed: AtomicBool::new(false),
        reached: Notify::new(),
        go: Notify::new(),
    });
    let rls = Arc::new(start_with(CONFIG, Arc::clone(&gate)).await);
    for _ in 0..3 {
        rls.one(&[("user", "bob")]).await;
    }
    gate.armed.store(true, Ordering::SeqCst);
    let mut refused = tokio::spawn({
        let rls = Arc::clone(&rls);
        async move {
            rls.several(&[&[("user", "alice")], &[("user", "bob")]])
                .await
        }
    });
    // Either the refused request is held at bob's check (alice charged before it, if the
    // descriptors were checked one by one), or it ended without one.
    let done = tokio::select! {
        () = gate.reached.notified() => None,
        r = &mut refused => Some(r.unwrap()),
    };
    let mut alice = Vec::new();
    for _ in 0..3 {
        alice.extend(codes(&rls.one(&[("user", "alice")]).await));
    }
    gate.go.notify_one();
    let r = match done {
        Some(r) => r,
        None => refused.await.unwrap(),
    };
    assert_eq!(r.overall_code, OVER);
    assert_eq!(alice, [(OK, 2), (OK, 1), (OK, 0)]);
}

#[tokio::test]
async fn a_failing_store_is_unavailable_and_charges_nothing() {
    let fails = FailOn(memory(), "api.ip");
    failing_charges_nothing(start_with(CONFIG, fails).await).await;
    let one_by_one = OneByOne(FailOn(memory(), "api.ip"));
    failing_charges_nothing(start_with(CONFIG, one_by_one).await).await;
}

async fn failing_charges_nothing<S: Store + 'static>(rls: Rls<S>) {
    let status = rls
        .call(request(
            "api",
            vec![
                descriptor(&[("user", "alice")]),
                descriptor(&[("ip", "192.0.2.1")]),
            ],
        ))
        .await
        .expect_err("the store failed");
    assert_eq!(status.code(), tonic::Code::Unavailable);
    assert!(
        status.message().contains("timed out"),
        "{}",
        status.message()
    );
    // alice's unit was given back.
    assert_eq!(codes(&rls.one(&[("user", "alice")]).await), [(OK, 2)]);
}

#[tokio::test]
async fn a_store_failing_after_a_refusal_leaves_the_refusal() {
    let store = MemoryStore::builder().clock(ManualClock::new(T0)).build();
    let rls = start_with(CONFIG, FailOn(store, "api.ip")).await;
    let r = rls
        .several(&[&[("path", "/blocked")], &[("ip", "192.0.2.1")]])
        .await;
    assert_eq!(r.overall_code, OVER);
    assert_eq!(r.statuses[1].code, Code::Unknown as i32);
}

#[tokio::test]
async fn concurrent_requests_get_exactly_the_quota() {
    let (rls, _clock) = start(CONFIG).await;
    let rls = std::sync::Arc::new(rls);
    let calls: Vec<_> = (0..60)
        .map(|_| {
            let rls = std::sync::Arc::clone(&rls);
            tokio::spawn(async move { rls.one(&[("user", "crowd")]).await.overall_code })
        })
        .collect();
    let mut admitted = 0;
    for call in calls {
        admitted += usize::from(call.await.unwrap() == OK);
    }
    assert_eq!(admitted, 3);
}

/// A shadow limit over its quota in a request another limit refuses still answers `OK`
/// (with nothing remaining), and the request is refused for the other one.
#[tokio::test]
async fn a_shadow_limit_over_beside_a_refusal_still_answers_ok() {
    let (rls, _clock) = start(CONFIG).await;
    rls.one(&[("trial", "t")]).await;
    for _ in 0..3 {
        rls.one(&[("user", "bob")]).await;
    }
    let r = rls.several(&[&[("trial", "t")], &[("user", "bob")]]).await;
    assert_eq!(
        (r.overall_code, codes(&r)),
        (OVER, vec![(OK, 0), (OVER, 0)])
    );
}
