//! Live changes through `LiveLimits`: quotas and modes changed while the service runs,
//! each request under one version, and modes sorting a request's policies.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use axum::body::Body;
use floodwall_core::{ConfigError, Policy, StoreExt};
use floodwall_test_support::*;
use floodwall_tower::choose::Choice;
use floodwall_tower::extract::{Global, OnMissingKey};
use floodwall_tower::{Enforcement, LiveError, LiveLimits, Modes, RateLimitLayer, Refusals, Wait};
use http::request::Parts;
use http::{Request, Response, StatusCode};
use tower::{Layer, Service, ServiceExt};

/// Sends `n` requests from `ip`; the statuses.
async fn send<S>(svc: &S, ip: &str, n: usize) -> Vec<u16>
where
    S: Service<Request<Body>, Response = Response<Body>> + Clone,
    S::Error: std::fmt::Debug,
{
    let mut statuses = Vec::new();
    for _ in 0..n {
        let res = svc.clone().oneshot(from(ip)).await.unwrap();
        statuses.push(res.status().as_u16());
    }
    statuses
}

/// One request's response.
async fn one<S>(svc: &S, ip: &str) -> Response<Body>
where
    S: Service<Request<Body>, Response = Response<Body>> + Clone,
    S::Error: std::fmt::Debug,
{
    svc.clone().oneshot(from(ip)).await.unwrap()
}

/// The status of `req`'s response.
async fn status<S>(svc: &S, req: Request<Body>) -> u16
where
    S: Service<Request<Body>, Response = Response<Body>> + Clone,
    S::Error: std::fmt::Debug,
{
    svc.clone().oneshot(req).await.unwrap().status().as_u16()
}

fn header(res: &Response<Body>, name: &str) -> Option<String> {
    res.headers()
        .get(name)
        .map(|v| v.to_str().unwrap().to_owned())
}

#[tokio::test]
async fn a_quota_set_live_applies_to_the_next_requests_and_their_headers() {
    let (store, _clock) = store();
    let layer = RateLimitLayer::new(store, gcra("per-ip", "2/min"));
    let live = layer.live();
    let svc = layer.layer(hello());

    let first = one(&svc, "10.0.0.1").await;
    assert_eq!(
        header(&first, "ratelimit-policy").unwrap(),
        "\"per-ip\";q=2;w=60"
    );
    assert_eq!(send(&svc, "10.0.0.1", 2).await, [200, 429]);

    live.set_quota("per-ip", "5/min".parse().unwrap()).unwrap();
    assert_eq!(live.policy("per-ip").unwrap().limit(), 5);

    // The service built before the change follows it: its interned headers too.
    let fresh = one(&svc, "10.0.0.2").await;
    assert_eq!(fresh.status(), StatusCode::OK);
    assert_eq!(
        header(&fresh, "ratelimit-policy").unwrap(),
        "\"per-ip\";q=5;w=60"
    );
    assert_eq!(header(&fresh, "ratelimit").unwrap(), "\"per-ip\";r=4;t=12");
    assert_eq!(send(&svc, "10.0.0.2", 5).await, [200, 200, 200, 200, 429]);
    // A key exhausted under 2/min keeps the minute it owes (`floodwall_core::guide::quota_changes`): under
    // 5/min, whose burst also spans a minute, it is still refused.
    assert_eq!(
        one(&svc, "10.0.0.1").await.status(),
        StatusCode::TOO_MANY_REQUESTS
    );

    // A service built afterwards, from a clone of the layer, reads the same version.
    let later = layer.clone().layer(hello());
    let res = one(&later, "10.0.0.3").await;
    assert_eq!(
        header(&res, "ratelimit-policy").unwrap(),
        "\"per-ip\";q=5;w=60"
    );

    // Back down: the next fresh key gets the smaller quota.
    live.set_policy(gcra("per-ip", "1/min")).unwrap();
    assert_eq!(send(&svc, "10.0.0.4", 2).await, [200, 429]);
}

#[tokio::test]
async fn off_checks_nothing_and_shadow_charges_without_refusing() {
    let (store, clock) = store();
    let layer = RateLimitLayer::new(store, gcra("per-ip", "2/min"));
    let live = layer.live();
    let svc = layer.layer(hello());
    assert_eq!(live.enforcement("per-ip"), Some(Enforcement::Enforce));

    assert_eq!(send(&svc, "10.0.0.1", 1).await, [200]);

    live.set_enforcement("per-ip", Enforcement::Off).unwrap();
    for _ in 0..3 {
        let res = one(&svc, "10.0.0.1").await;
        assert_eq!(res.status(), StatusCode::OK);
        assert!(header(&res, "ratelimit").is_none(), "off: no headers");
        assert!(header(&res, "ratelimit-policy").is_none());
    }

    // Nothing was charged while off: one unit of two left.
    live.set_enforcement("per-ip", Enforcement::Shadow).unwrap();
    let res = one(&svc, "10.0.0.1").await;
    assert_eq!(header(&res, "ratelimit").unwrap(), "\"per-ip\";r=0;t=60");
    // Past the quota, shadow lets the request through with the headers.
    let over = one(&svc, "10.0.0.1").await;
    assert_eq!(over.status(), StatusCode::OK);
    assert_eq!(header(&over, "ratelimit").unwrap(), "\"per-ip\";r=0;t=60");

    // Shadow charged what it admitted, and nothing it refused: enforced again, the key
    // is refused, and one interval (30 s) on, exactly one request passes.
    live.set_enforcement("per-ip", Enforcement::Enforce)
        .unwrap();
    assert_eq!(send(&svc, "10.0.0.1", 1).await, [429]);
    clock.advance(std::time::Duration::from_secs(30));
    assert_eq!(send(&svc, "10.0.0.1", 2).await, [200, 429]);
    assert_eq!(
        live.policies(),
        [(gcra("per-ip", "2/min"), Enforcement::Enforce)]
    );
}

#[tokio::test]
async fn a_shadow_refusal_leaves_the_enforced_admission_counted() {
    let (store, clock) = store();
    let layer = RateLimitLayer::new(store, gcra("minute", "10/min"))
        .and_policy(gcra("trial", "1/min"))
        .modes(Modes::new().policy("trial", Enforcement::Shadow))
        .unwrap();
    let live = layer.live();
    let svc = layer.layer(hello());

    // `trial` would refuse the 2nd and 3rd: only logged.
    let res = one(&svc, "10.0.0.1").await;
    // The headers are the enforced policy's.
    assert_eq!(
        header(&res, "ratelimit-policy").unwrap(),
        "\"minute\";q=10;w=60"
    );
    assert_eq!(send(&svc, "10.0.0.1", 2).await, [200, 200]);

    // `minute` counted all three, although `trial` refused two of them.
    live.set_enforcement("trial", Enforcement::Off).unwrap();
    let statuses = send(&svc, "10.0.0.1", 8).await;
    assert_eq!(statuses[..7], [200; 7]);
    assert_eq!(statuses[7], 429);

    // `trial` counted its one admission only, none of its two refusals: enforced, it
    // refuses the key, and a minute on admits exactly one request.
    live.set_enforcement("minute", Enforcement::Off).unwrap();
    live.set_enforcement("trial", Enforcement::Enforce).unwrap();
    assert_eq!(send(&svc, "10.0.0.1", 1).await, [429]);
    clock.advance(std::time::Duration::from_secs(60));
    assert_eq!(send(&svc, "10.0.0.1", 2).await, [200, 429]);
}

#[tokio::test]
async fn an_enforced_refusal_charges_no_shadow_policy() {
    let (store, _clock) = store();
    let layer = RateLimitLayer::new(store, gcra("strict", "1/min"))
        .and_policy(gcra("trial", "5/min"))
        .modes(Modes::new().policy("trial", Enforcement::Shadow))
        .unwrap();
    let live = layer.live();
    let svc = layer.layer(hello());

    assert_eq!(send(&svc, "10.0.0.1", 3).await, [200, 429, 429]);

    // `trial` was charged by the admitted request only: 4 of 5 left.
    live.set_enforcement("strict", Enforcement::Off).unwrap();
    live.set_enforcement("trial", Enforcement::Enforce).unwrap();
    assert_eq!(send(&svc, "10.0.0.1", 5).await, [200, 200, 200, 200, 429]);
}

#[tokio::test]
async fn a_chooser_gets_the_live_policy_and_its_mode() {
    let (store, _clock) = store();
    let layer = RateLimitLayer::new(store, gcra("default", "100/min"))
        .modes(Modes::new().register(gcra("login", "1/min")))
        .unwrap();
    let live = layer.live();
    let chooser = live.clone();
    let layer = layer.choose(move |req: &Parts, _key: &[u8]| {
        if req.uri.path() == "/login" {
            Choice::Policy(chooser.policy("login").unwrap())
        } else {
            Choice::Default
        }
    });
    // `choose` kept the handle: it still drives the layer.
    let svc = layer.layer(hello());
    let login = || {
        let mut req = from("10.0.0.1");
        *req.uri_mut() = "/login".parse().unwrap();
        req
    };
    assert_eq!(status(&svc, login()).await, 200);
    assert_eq!(status(&svc, login()).await, 429);

    // Its mode applies to what the chooser returns.
    live.set_enforcement("login", Enforcement::Shadow).unwrap();
    assert_eq!(status(&svc, login()).await, 200);
    live.set_enforcement("login", Enforcement::Enforce).unwrap();
    live.set_quota("login", "3/min".parse().unwrap()).unwrap();
    let res = svc.clone().oneshot(login()).await.unwrap();
    assert_eq!(
        header(&res, "ratelimit-policy").unwrap(),
        "\"login\";q=3;w=60"
    );
    assert_eq!(
        live.policies()
            .iter()
            .map(|(p, m)| (p.name().to_owned(), *m))
            .collect::<Vec<_>>(),
        [
            ("default".to_owned(), Enforcement::Enforce),
            ("login".to_owned(), Enforcement::Enforce)
        ]
    );
}

#[tokio::test]
async fn the_layer_wide_shadow_is_every_policy_in_shadow() {
    let (store, _clock) = store();
    let layer = RateLimitLayer::new(store, gcra("a", "1/min"))
        .and_policy(gcra("b", "1/min"))
        .refusals(Refusals::new().missing_key(OnMissingKey::Reject))
        .modes(Modes::new().all(Enforcement::Shadow))
        .unwrap();
    let live = layer.live();
    assert_eq!(live.enforcement("b"), Some(Enforcement::Shadow));
    let svc = layer.layer(hello());
    assert_eq!(send(&svc, "10.0.0.1", 3).await, [200, 200, 200]);
    // A missing key is let through, as before modes.
    let no_peer = svc
        .clone()
        .oneshot(Request::new(Body::empty()))
        .await
        .unwrap();
    assert_eq!(no_peer.status(), StatusCode::OK);

    // One policy enforced again: the key is refused by it, and a missing key too.
    live.set_enforcement("a", Enforcement::Enforce).unwrap();
    assert_eq!(send(&svc, "10.0.0.1", 1).await, [429]);
    let no_peer = svc.oneshot(Request::new(Body::empty())).await.unwrap();
    assert_ne!(no_peer.status(), StatusCode::OK);
}

#[test]
fn unknown_names_and_bad_quotas_are_typed_errors() {
    let (store, _clock) = store();
    let layer = RateLimitLayer::new(
        store,
        Policy::sliding_log("log", "5/s".parse().unwrap()).unwrap(),
    );
    let unknown = || LiveError::UnknownPolicy {
        name: "nope".into(),
    };
    assert_eq!(
        layer
            .clone()
            .modes(Modes::new().policy("nope", Enforcement::Off))
            .unwrap_err(),
        unknown()
    );
    let live = layer.live();
    assert_eq!(
        live.set_enforcement("nope", Enforcement::Off),
        Err(unknown())
    );
    assert_eq!(
        live.set_quota("nope", "1/s".parse().unwrap()),
        Err(unknown())
    );
    assert_eq!(live.set_policy(gcra("nope", "1/s")), Err(unknown()));
    // A sliding log has no burst: the algorithm refuses the quota, nothing changes.
    let err = live
        .set_quota("log", "5/s burst 10".parse().unwrap())
        .unwrap_err();
    assert!(matches!(
        err,
        LiveError::Config(ConfigError::BurstUnsupported { .. })
    ));
    assert_eq!(live.policy("log").unwrap().limit(), 5);
    assert!(err.to_string().contains("burst"), "{err}");
    assert!(live.policy("nope").is_none() && live.enforcement("nope").is_none());
}

/// The heart of "no request lost or double-charged": many tasks send requests while
/// another flips the mode Enforce → Shadow → Off → Enforce. The clock never moves and the
/// quota never runs out, so the store's count is exactly the number of requests charged;
/// each response says how it was handled (checked: with headers; off: without).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_flips_lose_no_request_and_charge_each_at_most_once() {
    const TASKS: u64 = 8;
    const EACH: u64 = 400;
    const BURST: u64 = 100_000;
    let (store, _clock) = store();
    let policy = gcra("p", &format!("1/hour burst {BURST}"));
    let layer = RateLimitLayer::new(store.clone(), policy.clone()).key(Global);
    let live: LiveLimits = layer.live();
    let svc = layer.layer(hello());

    // Requests answered, and flips made: the flipper flips after every 50 answers, on a
    // thread of its own; a sender waits rather than run more than 25 answers ahead of it,
    // so flips land among requests in flight whatever the scheduling.
    let done = Arc::new(AtomicU64::new(0));
    let flips = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let flipper = {
        let (live, done, flips, stop) = (
            live.clone(),
            Arc::clone(&done),
            Arc::clone(&flips),
            Arc::clone(&stop),
        );
        std::thread::spawn(move || {
            let modes = [Enforcement::Shadow, Enforcement::Off, Enforcement::Enforce];
            while !stop.load(Ordering::Acquire) {
                let made = flips.load(Ordering::Acquire);
                if done.load(Ordering::Acquire) >= 50 * (made + 1) {
                    live.set_enforcement("p", modes[(made % 3) as usize])
                        .unwrap();
                    flips.store(made + 1, Ordering::Release);
                }
                std::thread::yield_now();
            }
        })
    };
    let senders: Vec<_> = (0..TASKS)
        .map(|_| {
            let (svc, done, flips) = (svc.clone(), Arc::clone(&done), Arc::clone(&flips));
            tokio::spawn(async move {
                let (mut checked, mut off) = (0u64, 0u64);
                for _ in 0..EACH {
                    while done.load(Ordering::Acquire)
                        >= 50 * (flips.load(Ordering::Acquire) + 1) + 25
                    {
                        tokio::task::yield_now().await;
                    }
                    let res = svc.clone().oneshot(from("10.0.0.1")).await.unwrap();
                    assert_eq!(res.status(), StatusCode::OK);
                    match res.headers().get("ratelimit") {
                        Some(_) => checked += 1,
                        None => off += 1,
                    }
                    done.fetch_add(1, Ordering::AcqRel);
                }
                (checked, off)
            })
        })
        .collect();
    let (mut checked, mut off) = (0, 0);
    for sender in senders {
        let (c, o) = sender.await.unwrap();
        checked += c;
        off += o;
    }
    stop.store(true, Ordering::Release);
    flipper.join().unwrap();
    let flips = flips.load(Ordering::Acquire);

    // Every request was answered, once.
    assert_eq!(checked + off, TASKS * EACH);
    assert!(flips >= 60, "a flip per 50 answers: {flips}");
    assert!(checked > 0 && off > 0, "checked {checked}, off {off}");
    // The store charged exactly the requests that were checked: none twice, none off.
    let now = live.policy("p").unwrap();
    let peek = store.check(b"global", &now, 0).await.unwrap();
    assert_eq!(BURST - peek.remaining, checked);
}

#[test]
fn a_quota_change_keeps_the_algorithm_and_the_penalty() {
    use floodwall_core::{Algorithm, Penalty};
    use std::time::Duration;
    let (store, _clock) = store();
    let penalty = Penalty::new(3, Duration::from_secs(60), Duration::from_secs(600)).unwrap();
    let bucket = Policy::token_bucket("uploads", "10/s".parse().unwrap())
        .unwrap()
        .with_penalty(penalty);
    let layer = RateLimitLayer::new(store, bucket);
    let live = layer.live();
    live.set_quota("uploads", "20/s burst 50".parse().unwrap())
        .unwrap();
    let now = live.policy("uploads").unwrap();
    assert_eq!(now.algorithm(), Algorithm::TOKEN_BUCKET);
    assert_eq!(now.limit(), 50);
    assert_eq!(now.penalty(), Some(&penalty));
}

/// A quota changed back and forth under concurrent traffic: each response's headers come
/// from one version, its `RateLimit-Policy` and its `RateLimit` alike. Under the smaller
/// quota (100,000 an hour) a key's remaining is below 100,000, under the larger (200,000)
/// above it, whether a change keeps the key's state or starts it afresh; a response mixing
/// the versions would break that.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_response_is_of_one_version_while_the_quota_changes() {
    const TASKS: u64 = 4;
    const EACH: u64 = 300;
    let (store, _clock) = store();
    let small = "100000/hour";
    let large = "200000/hour";
    let layer = RateLimitLayer::new(store, gcra("p", small)).key(Global);
    let live = layer.live();
    let svc = layer.layer(hello());

    let done = Arc::new(AtomicU64::new(0));
    let changes = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let changer = {
        let (live, done, changes, stop) = (
            live.clone(),
            Arc::clone(&done),
            Arc::clone(&changes),
            Arc::clone(&stop),
        );
        std::thread::spawn(move || {
            while !stop.load(Ordering::Acquire) {
                let made = changes.load(Ordering::Acquire);
                if done.load(Ordering::Acquire) >= 50 * (made + 1) {
                    let quota = if made % 2 == 0 { large } else { small };
                    live.set_quota("p", quota.parse().unwrap()).unwrap();
                    changes.store(made + 1, Ordering::Release);
                }
                std::thread::yield_now();
            }
        })
    };
    let senders: Vec<_> = (0..TASKS)
        .map(|_| {
            let (svc, done, changes) = (svc.clone(), Arc::clone(&done), Arc::clone(&changes));
            tokio::spawn(async move {
                let mut seen = [0u64; 2];
                for _ in 0..EACH {
                    while done.load(Ordering::Acquire)
                        >= 50 * (changes.load(Ordering::Acquire) + 1) + 25
                    {
                        tokio::task::yield_now().await;
                    }
                    let res = svc.clone().oneshot(from("10.0.0.1")).await.unwrap();
                    let policy = header(&res, "ratelimit-policy").unwrap();
                    let limit = header(&res, "ratelimit").unwrap();
                    let r: u64 = limit
                        .split(";r=")
                        .nth(1)
                        .and_then(|rest| rest.split(';').next())
                        .unwrap()
                        .parse()
                        .unwrap();
                    let q = policy
                        .split(";q=")
                        .nth(1)
                        .and_then(|rest| rest.split(';').next());
                    match q.unwrap() {
                        "100000" => {
                            assert!(r < 100_000, "{policy} with {limit}");
                            seen[0] += 1;
                        }
                        "200000" => {
                            assert!(r >= 100_000, "{policy} with {limit}");
                            seen[1] += 1;
                        }
                        other => panic!("unexpected RateLimit-Policy {other}"),
                    }
                    done.fetch_add(1, Ordering::AcqRel);
                }
                seen
            })
        })
        .collect();
    let mut seen = [0u64; 2];
    for sender in senders {
        let s = sender.await.unwrap();
        seen[0] += s[0];
        seen[1] += s[1];
    }
    stop.store(true, Ordering::Release);
    changer.join().unwrap();
    assert_eq!(seen[0] + seen[1], TASKS * EACH);
    assert!(
        seen[0] > 0 && seen[1] > 0,
        "both versions answered: {seen:?}"
    );
    assert!(changes.load(Ordering::Acquire) >= 20);
}

/// Waiting (`Wait`) with a policy in shadow: the enforced policy's refusal within
/// the wait waits for its slot; the shadow policy is checked once the request is
/// admitted, and only logs its refusal.
#[tokio::test(start_paused = true)]
async fn an_enforced_policy_waits_and_a_shadow_one_is_checked_after() {
    let clock = TokioClock::new();
    let store = floodwall_core::MemoryStore::builder()
        .clock(clock.clone())
        .build();
    let layer = RateLimitLayer::new(store, gcra("smooth", "10/s burst 1"))
        .and_policy(gcra("trial", "1/min"))
        .modes(Modes::new().policy("trial", Enforcement::Shadow))
        .unwrap()
        .wait(Wait::up_to(std::time::Duration::from_secs(1)).unwrap())
        .unwrap();
    let live = layer.live();
    let svc = layer.layer(hello());
    let t0 = clock.start();

    assert_eq!(send(&svc, "10.0.0.1", 2).await, [200, 200]);
    // The second waited for its slot, 100 ms on.
    assert_eq!(
        tokio::time::Instant::now() - t0,
        std::time::Duration::from_millis(100)
    );

    // `trial` counted only its one admission, not its refusal: enforced now, the key is
    // refused at once, and a minute after that admission exactly one request passes.
    live.set_enforcement("smooth", Enforcement::Off).unwrap();
    live.set_enforcement("trial", Enforcement::Enforce).unwrap();
    assert_eq!(send(&svc, "10.0.0.1", 1).await, [429]);
    tokio::time::advance(std::time::Duration::from_secs(60) - (tokio::time::Instant::now() - t0))
        .await;
    assert_eq!(send(&svc, "10.0.0.1", 2).await, [200, 429]);
}
