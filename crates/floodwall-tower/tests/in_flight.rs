//! `ConcurrencyLimitLayer` on the memory store: exact under 256 concurrent requests, the
//! slot held until the response body is done, and given back on every other way out (a
//! dropped future, a panicking handler, a client that disconnects over real HTTP).

use std::collections::VecDeque;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use axum::body::Body;
use bytes::Bytes;
use floodwall_core::resilience::FailMode;
use floodwall_core::store::{Op, Reply};
use floodwall_core::{ConcurrencyLimit, Error, MemoryStore, Store, StoreExt};
use floodwall_test_support::{Now, eventually, from, hello, http_get, serve, text};
use floodwall_tower::extract::Global;
use floodwall_tower::respond::Grpc;
use floodwall_tower::{ConcurrencyLimitLayer, HeaderStyle, PermitBody, RateLimited, Refusals};
use http::{Request, Response, StatusCode};
use http_body::Frame;
use http_body_util::BodyExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tower::{Layer, Service, ServiceExt, service_fn};

fn limit(max: u64) -> ConcurrencyLimit {
    ConcurrencyLimit::new("jobs", max).unwrap()
}

/// Whether the store has a free slot for `ip` under `limit` right now (taking none).
fn free(store: &MemoryStore, ip: &str, limit: &ConcurrencyLimit) -> bool {
    let key = match ip.parse::<std::net::IpAddr>().unwrap() {
        // PeerIp's key: a tag byte and the address.
        std::net::IpAddr::V4(v4) => [&[4u8][..], &v4.octets()].concat(),
        std::net::IpAddr::V6(_) => unreachable!(),
    };
    store.acquire(&key, limit).now().unwrap().is_granted()
}

#[tokio::test]
async fn headers_say_what_is_left_and_a_refusal_has_no_retry_after() {
    let store = MemoryStore::new();
    let svc = ConcurrencyLimitLayer::new(store.clone(), limit(2)).layer(hello());
    let first = svc.clone().oneshot(from("203.0.113.7")).await.unwrap();
    assert_eq!(first.status(), StatusCode::OK);
    assert_eq!(
        first.headers()["ratelimit-policy"],
        "\"jobs\";q=2;qu=\"concurrent-requests\""
    );
    assert_eq!(first.headers()["ratelimit"], "\"jobs\";r=1");
    // Every IETF value we write parses as a structured field.
    sfv::Parser::new(first.headers()["ratelimit-policy"].to_str().unwrap())
        .parse::<sfv::List>()
        .unwrap();
    let second = svc.clone().oneshot(from("203.0.113.7")).await.unwrap();
    assert_eq!(second.headers()["ratelimit"], "\"jobs\";r=0");
    // Both bodies unread: both slots held.
    let refused = svc.clone().oneshot(from("203.0.113.7")).await.unwrap();
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(refused.headers().get("retry-after").is_none());
    assert_eq!(refused.headers()["ratelimit"], "\"jobs\";r=0");
    assert!(!refused.body().holds_permit());
    assert_eq!(
        text(refused).await,
        "Too Many Requests: 2 in flight, the limit is 2\n"
    );
    // Another client has its own slots.
    assert_eq!(
        svc.clone()
            .oneshot(from("203.0.113.8"))
            .await
            .unwrap()
            .status(),
        StatusCode::OK
    );
    // Reading a body to its end gives its slot back.
    assert!(first.body().holds_permit());
    assert_eq!(text(first).await, "hello");
    let again = svc.clone().oneshot(from("203.0.113.7")).await.unwrap();
    assert_eq!(again.headers()["ratelimit"], "\"jobs\";r=0");
    drop((second, again));
    assert_eq!(
        store.in_flight_keys(),
        0,
        "dropped bodies gave their slots back"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exactly_n_in_flight_among_256_concurrent_requests() {
    const REQUESTS: usize = 256;
    const N: u64 = 8;
    let store = MemoryStore::new();
    let decided = Arc::new(AtomicUsize::new(0));
    let (current, peak) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let handler = {
        let (decided, current, peak) = (decided.clone(), current.clone(), peak.clone());
        service_fn(move |_req: Request<Body>| {
            let (decided, current, peak) = (decided.clone(), current.clone(), peak.clone());
            async move {
                let now = current.fetch_add(1, Ordering::SeqCst) + 1;
                peak.fetch_max(now, Ordering::SeqCst);
                decided.fetch_add(1, Ordering::SeqCst);
                // Running until every request has been admitted or refused: the handlers
                // overlap, so the peak is what the layer let in at once.
                while decided.load(Ordering::SeqCst) < REQUESTS {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                current.fetch_sub(1, Ordering::SeqCst);
                Ok::<_, Infallible>(Response::new(Body::from("done")))
            }
        })
    };
    let svc = ConcurrencyLimitLayer::new(store.clone(), limit(N))
        .key(Global)
        .layer(handler);
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..REQUESTS {
        let (svc, decided) = (svc.clone(), decided.clone());
        tasks.spawn(async move {
            let res = svc.oneshot(Request::new(Body::empty())).await.unwrap();
            if res.status() == StatusCode::TOO_MANY_REQUESTS {
                decided.fetch_add(1, Ordering::SeqCst);
                return false;
            }
            assert_eq!(text(res).await, "done");
            true
        });
    }
    let served = tasks.join_all().await.into_iter().filter(|&s| s).count();
    assert_eq!(peak.load(Ordering::SeqCst), N, "peak in flight");
    assert_eq!(served as u64, N);
    assert_eq!(store.in_flight_keys(), 0);
}

#[tokio::test]
async fn a_dropped_future_gives_its_slot_back() {
    let store = MemoryStore::new();
    let never = service_fn(|_req: Request<Body>| async {
        std::future::pending::<()>().await;
        Ok::<_, Infallible>(Response::new(Body::empty()))
    });
    let mut svc = ConcurrencyLimitLayer::new(store.clone(), limit(1)).layer(never);
    let mut future = Box::pin(svc.call(from("203.0.113.7")));
    // Polled once: admitted, its handler waiting.
    assert!(
        futures_poll(future.as_mut()).is_pending(),
        "the handler never answers"
    );
    assert!(!free(&store, "203.0.113.7", &limit(1)), "the slot is held");
    // The request is abandoned (a timeout, a client gone).
    drop(future);
    assert_eq!(store.in_flight_keys(), 0);
    assert!(free(&store, "203.0.113.7", &limit(1)));
}

fn futures_poll<F: std::future::Future>(f: Pin<&mut F>) -> Poll<F::Output> {
    f.poll(&mut Context::from_waker(Waker::noop()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_handler_gives_its_slot_back() {
    let store = MemoryStore::new();
    let panics = service_fn(|_req: Request<Body>| async {
        if true {
            panic!("handler bug");
        }
        Ok::<_, Infallible>(Response::new(Body::empty()))
    });
    let svc = ConcurrencyLimitLayer::new(store.clone(), limit(1)).layer(panics);
    let join = tokio::spawn(svc.clone().oneshot(from("203.0.113.7"))).await;
    assert!(join.unwrap_err().is_panic());
    assert_eq!(store.in_flight_keys(), 0);
    assert!(free(&store, "203.0.113.7", &limit(1)));
}

/// A response body fed by the test, chunk by chunk.
#[derive(Clone, Default)]
struct Drip(Arc<Mutex<Feed>>);

/// The chunks not yet read, whether the body has ended, and who waits for more.
type Feed = (VecDeque<Bytes>, bool, Option<Waker>);

impl Drip {
    fn send(&self, chunk: &'static str) {
        let mut s = self.0.lock().unwrap();
        s.0.push_back(Bytes::from_static(chunk.as_bytes()));
        if let Some(w) = s.2.take() {
            w.wake();
        }
    }

    fn end(&self) {
        let mut s = self.0.lock().unwrap();
        s.1 = true;
        if let Some(w) = s.2.take() {
            w.wake();
        }
    }
}

impl http_body::Body for Drip {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let mut s = self.0.lock().unwrap();
        match s.0.pop_front() {
            Some(chunk) => Poll::Ready(Some(Ok(Frame::data(chunk)))),
            None if s.1 => Poll::Ready(None),
            None => {
                s.2 = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

#[tokio::test]
async fn a_slow_streaming_body_holds_its_slot_until_its_last_chunk() {
    let store = MemoryStore::new();
    let drip = Drip::default();
    let streams = {
        let drip = drip.clone();
        service_fn(move |_req: Request<Body>| {
            let drip = drip.clone();
            async move { Ok::<_, Infallible>(Response::new(Body::new(drip))) }
        })
    };
    let svc = ConcurrencyLimitLayer::new(store.clone(), limit(1)).layer(streams);
    let res = svc.clone().oneshot(from("203.0.113.7")).await.unwrap();
    let mut body: PermitBody<Body> = res.into_body();
    for chunk in ["one ", "two ", "three"] {
        drip.send(chunk);
        let frame = body.frame().await.unwrap().unwrap();
        assert_eq!(frame.into_data().unwrap(), chunk);
        assert!(body.holds_permit(), "after {chunk:?}");
        let refused = svc.clone().oneshot(from("203.0.113.7")).await.unwrap();
        assert_eq!(
            refused.status(),
            StatusCode::TOO_MANY_REQUESTS,
            "after {chunk:?}"
        );
    }
    drip.end();
    assert!(body.frame().await.is_none());
    assert!(
        !body.holds_permit(),
        "the end of the body gives the slot back"
    );
    assert_eq!(store.in_flight_keys(), 0);
    assert_eq!(
        svc.oneshot(from("203.0.113.7")).await.unwrap().status(),
        StatusCode::OK
    );
}

#[tokio::test]
async fn grpc_refusals_and_error_mode_say_too_many_in_flight_without_a_wait() {
    let store = MemoryStore::new();
    let grpc = ConcurrencyLimitLayer::new(store.clone(), limit(1))
        .refusals(Refusals::new().respond(Grpc))
        .layer(hello());
    let held = grpc.clone().oneshot(from("203.0.113.7")).await.unwrap();
    let refused = grpc.oneshot(from("203.0.113.7")).await.unwrap();
    let h = refused.headers();
    assert_eq!(refused.status(), StatusCode::OK);
    assert_eq!(h["grpc-status"], "8");
    assert_eq!(h["grpc-message"], "too many requests in flight: 1 of 1");
    assert!(h.get("retry-after").is_none() && h.get("grpc-retry-pushback-ms").is_none());

    let errors = ConcurrencyLimitLayer::new(store.clone(), limit(1))
        .reject_with_error()
        .layer(hello());
    let err = errors.oneshot(from("203.0.113.7")).await.unwrap_err();
    let limited = err.downcast_ref::<RateLimited>().expect("a RateLimited");
    assert_eq!(limited.retry_after(), None);
    let full = limited.too_many_in_flight().unwrap();
    assert_eq!((full.in_flight, full.limit), (1, 1));
    assert_eq!(limited.to_string(), "too many requests in flight: 1 of 1");
    drop(held);
}

/// A concurrency store that is down.
#[derive(Clone, Copy)]
struct Down;

impl Store for Down {
    async fn call(&self, op: Op<'_>) -> Result<Reply, Error> {
        match op {
            Op::Acquire { .. } => Err(Error::unavailable("connection refused")),
            other => Err(other.unsupported()),
        }
    }
}

#[tokio::test]
async fn a_failing_store_is_answered_per_the_fail_mode() {
    let closed = ConcurrencyLimitLayer::new(Down, limit(1)).layer(hello());
    let res = closed.oneshot(from("203.0.113.7")).await.unwrap();
    assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(res.headers()["retry-after"], "1");

    let open = ConcurrencyLimitLayer::new(Down, limit(1))
        .fail_mode(FailMode::Open)
        .layer(hello());
    for _ in 0..3 {
        let res = open.clone().oneshot(from("203.0.113.7")).await.unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        // Nothing was counted: the breaker's fail-open grants an unheld slot, and the
        // headers say every slot is left.
        assert_eq!(
            res.headers()["ratelimit"],
            "\"jobs\";r=1",
            "nothing was counted"
        );
    }

    // Locally, with 4 / 2 slots per node.
    let local = ConcurrencyLimitLayer::new(Down, limit(4))
        .fail_mode(FailMode::local(2))
        .layer(hello());
    let a = local.clone().oneshot(from("203.0.113.7")).await.unwrap();
    let b = local.clone().oneshot(from("203.0.113.7")).await.unwrap();
    assert_eq!(b.headers()["ratelimit"], "\"jobs\";r=0");
    let c = local.clone().oneshot(from("203.0.113.7")).await.unwrap();
    assert_eq!(c.status(), StatusCode::TOO_MANY_REQUESTS);
    drop((a, b));
    assert_eq!(
        local.oneshot(from("203.0.113.7")).await.unwrap().status(),
        StatusCode::OK
    );
}

#[tokio::test]
async fn a_missing_key_headers_off_and_shadow_mode() {
    let store = MemoryStore::new();
    let svc = ConcurrencyLimitLayer::new(store.clone(), limit(1)).layer(hello());
    // No peer address: the extractor's 500, as in the rate layer.
    let res = svc.oneshot(Request::new(Body::empty())).await.unwrap();
    assert_eq!(res.status(), StatusCode::INTERNAL_SERVER_ERROR);

    let quiet = ConcurrencyLimitLayer::new(store.clone(), limit(1))
        .refusals(Refusals::new().headers(HeaderStyle::None))
        .layer(hello());
    let res = quiet.oneshot(from("203.0.113.9")).await.unwrap();
    assert!(res.headers().get("ratelimit").is_none());

    let github = ConcurrencyLimitLayer::new(store.clone(), limit(3))
        .refusals(Refusals::new().headers(HeaderStyle::GitHub))
        .layer(hello());
    let res = github.oneshot(from("203.0.113.10")).await.unwrap();
    assert_eq!(res.headers()["x-ratelimit-limit"], "3");
    assert_eq!(res.headers()["x-ratelimit-remaining"], "2");

    let shadow = ConcurrencyLimitLayer::new(store.clone(), limit(1))
        .shadow(true)
        .layer(hello());
    let held = shadow.clone().oneshot(from("203.0.113.11")).await.unwrap();
    let over = shadow.oneshot(from("203.0.113.11")).await.unwrap();
    assert_eq!(
        over.status(),
        StatusCode::OK,
        "never refused in shadow mode"
    );
    assert_eq!(over.headers()["ratelimit"], "\"jobs\";r=0");
    assert!(
        !over.body().holds_permit(),
        "the one over the limit is not counted"
    );
    drop(held);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_disconnects_gives_its_slot_back_over_real_http() {
    let store = MemoryStore::new();
    let entered = Arc::new(AtomicUsize::new(0));
    let app = {
        let entered = entered.clone();
        axum::Router::new()
            .route(
                "/slow",
                axum::routing::get(move || {
                    let entered = entered.clone();
                    async move {
                        entered.fetch_add(1, Ordering::SeqCst);
                        tokio::time::sleep(Duration::from_secs(3600)).await;
                        "never"
                    }
                }),
            )
            .route("/", axum::routing::get(|| async { "hello" }))
            .layer(ConcurrencyLimitLayer::new(store.clone(), limit(1)))
    };
    let addr = serve(app).await;
    let mut client = tokio::net::TcpStream::connect(addr).await.unwrap();
    client
        .write_all(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    eventually("the handler runs", || entered.load(Ordering::SeqCst) == 1).await;
    assert_eq!(
        http_get(addr, "/", &[]).await.status,
        429,
        "its slot is taken"
    );
    // The client gives up.
    drop(client);
    eventually("the slot is back", || store.in_flight_keys() == 0).await;
    let ok = http_get(addr, "/", &[]).await;
    assert_eq!((ok.status, ok.body.as_str()), (200, "hello"));
    // And a client reading a response to its end frees the slot too.
    let mut reader = tokio::net::TcpStream::connect(addr).await.unwrap();
    reader
        .write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut raw = Vec::new();
    reader.read_to_end(&mut raw).await.unwrap();
    eventually("the slot is back", || store.in_flight_keys() == 0).await;
}
