//! Waiting instead of refusing with two layers on two Redis stores sharing one
//! `redis-server`, on tokio's paused clock: requests leave at the policy's pace, never
//! faster, whichever store booked them; a dropped waiter's slot goes to the next request.
//!
//! The stores decide at the paused clock's time ([`Paced`]): Redis's own clock does not
//! pause. And their calls run on a second runtime, on real time, from a blocking task:
//! under a paused clock the test's runtime jumps to its next timer whenever it is idle,
//! which would fire a Redis call's own timeout while Redis is still answering (and move
//! the stores' time meanwhile). The layer's timers (the waits) stay on the paused runtime,
//! which is what the test reads.

use std::future::Future;
use std::sync::OnceLock;
use std::time::Duration;

use floodwall::core::Clock;
use floodwall::core::store::{Op, Reply};
use floodwall::redis::RedisStore;
use floodwall::tower::{RateLimitLayer, Wait};
use floodwall::{Error, Policy, Store, StoreExt};
use floodwall_test_support::{Seen, TokioClock, from, recording};
use http::StatusCode;
use redis_harness::RedisServer;
use tokio::runtime::{Handle, Runtime};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tower::{Layer, ServiceExt};

const IP: &str = "192.0.2.44";
/// The key of every request in the test of a dropped waiter.
const CLIENT: &[u8] = b"client";

/// A runtime on real time for the Redis calls; never dropped (dropping a runtime inside
/// another's task panics).
fn io() -> Handle {
    static IO: OnceLock<Runtime> = OnceLock::new();
    IO.get_or_init(|| Runtime::new().unwrap()).handle().clone()
}

/// Runs `call` on [`io`] from a blocking thread: while one runs, the paused runtime does
/// not move its clock (tokio holds auto-advance while blocking tasks run), so time stands
/// still while Redis answers.
async fn on_io<T: Send + 'static>(call: impl Future<Output = T> + Send + 'static) -> T {
    tokio::task::spawn_blocking(move || io().block_on(call))
        .await
        .unwrap()
}

/// A Redis store deciding at a clock's time (its `at` view), with every
/// call run on [`io`]: the small way, kept to this test, for a Redis store under a
/// paused tokio clock.
#[derive(Clone)]
struct Paced {
    redis: RedisStore,
    clock: TokioClock,
}

impl Paced {
    async fn connect(url: &str, clock: &TokioClock) -> Self {
        let url = url.to_owned();
        let redis = on_io(async move { RedisStore::connect(&url).await.unwrap() }).await;
        Self {
            redis,
            clock: clock.clone(),
        }
    }
}

impl Store for Paced {
    /// Checks and bookings at the tokio clock's time (`store.at(..)`); resets
    /// and cancels as they are.
    async fn call(&self, op: Op<'_>) -> Result<Reply, Error> {
        let now = self.clock.now_micros();
        match op {
            Op::Check { key, policy, cost } => {
                let (redis, key, policy) = (self.redis.clone(), key.to_vec(), policy.clone());
                on_io(async move { redis.at(now).check(&key, &policy, cost).await })
                    .await
                    .map(Reply::Decision)
            }
            Op::Reserve {
                key,
                policy,
                cost,
                max_wait,
            } => {
                let (redis, key, policy) = (self.redis.clone(), key.to_vec(), policy.clone());
                on_io(async move { redis.at(now).reserve(&key, &policy, cost, max_wait).await })
                    .await
                    .map(Reply::Reservation)
            }
            Op::Reset { key, policy } => {
                let (redis, key, policy) = (self.redis.clone(), key.to_vec(), policy.clone());
                on_io(async move { redis.reset(&key, &policy).await })
                    .await
                    .map(|()| Reply::Done)
            }
            Op::Cancel {
                key,
                policy,
                reservation,
            } => {
                let (redis, key, policy) = (self.redis.clone(), key.to_vec(), policy.clone());
                on_io(async move { redis.cancel(&key, &policy, &reservation).await })
                    .await
                    .map(Reply::Cancelled)
            }
            other => Err(other.unsupported()),
        }
    }
}

fn smooth() -> Policy {
    // One at once, then a slot every 100 ms.
    Policy::gcra("smooth", "10/s burst 1".parse().unwrap()).unwrap()
}

#[tokio::test(start_paused = true)]
async fn two_stores_on_one_redis_let_requests_leave_at_the_pace_never_faster() {
    let server = RedisServer::start();
    let clock = TokioClock::new();
    let seen = Seen::default();
    let layer = |store: Paced| {
        RateLimitLayer::new(store, smooth())
            .wait(Wait::up_to(Duration::from_secs(1)).unwrap())
            .unwrap()
            .layer(recording(seen.clone()))
    };
    let a = layer(Paced::connect(&server.url(), &clock).await);
    let b = layer(Paced::connect(&server.url(), &clock).await);
    let mut set = JoinSet::new();
    for i in 0..24 {
        let svc = if i % 2 == 0 { a.clone() } else { b.clone() };
        set.spawn(async move { svc.oneshot(from(IP)).await.unwrap().status() });
    }
    let statuses = set.join_all().await;
    let ok = statuses.iter().filter(|s| **s == StatusCode::OK).count();
    assert!(
        statuses
            .iter()
            .all(|s| *s == StatusCode::OK || *s == StatusCode::TOO_MANY_REQUESTS)
    );
    let mut times = seen.lock().unwrap().clone();
    times.sort();
    assert_eq!(times.len(), ok);
    // At least one at once and a slot every 100 ms for a second; more when time moved on
    // while Redis answered (the paused clock jumps to a waiter's slot whenever idle).
    assert!(ok >= 11, "{ok} passed");
    assert_eq!(times[0], clock.start());
    for pair in times.windows(2) {
        let gap = pair[1] - pair[0];
        assert!(
            gap >= Duration::from_millis(100),
            "{gap:?} apart: {times:?}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_dropped_waiter_gives_its_slot_to_the_next_through_redis() {
    let server = RedisServer::start();
    let clock = TokioClock::new();
    let seen = Seen::default();
    let store = Paced::connect(&server.url(), &clock).await;
    let svc = RateLimitLayer::new(store.clone(), smooth())
        .key(|_: &http::request::Parts| Some(CLIENT))
        .wait(Wait::up_to(Duration::from_secs(1)).unwrap())
        .unwrap()
        .layer(recording(seen.clone()));
    let t0 = clock.start();
    assert_eq!(
        svc.clone().oneshot(from(IP)).await.unwrap().status(),
        StatusCode::OK
    );
    let gone = tokio::time::timeout(Duration::from_millis(50), svc.clone().oneshot(from(IP))).await;
    assert!(gone.is_err(), "still waiting when dropped");
    // The cancellation runs on a task of its own (Redis must be waited for): wait until
    // Redis shows it, by what a peek says of the key.
    let policy = smooth();
    let mut cancelled = false;
    for _ in 0..200 {
        let peek = store.check(CLIENT, &policy, 0).await.unwrap();
        if peek.reset_after <= Duration::from_millis(100) {
            cancelled = true;
            break;
        }
        tokio::task::yield_now().await;
    }
    assert!(cancelled, "the dropped waiter's booking was given back");
    let next = svc.clone().oneshot(from(IP)).await.unwrap();
    assert_eq!(next.status(), StatusCode::OK);
    let times: Vec<Duration> = seen.lock().unwrap().iter().map(|t| *t - t0).collect();
    // The second request to reach the service took the slot at 100 ms, not 200 ms.
    assert_eq!(times, [Duration::ZERO, Duration::from_millis(100)]);
    assert!(Instant::now() - t0 >= Duration::from_millis(100));
}
