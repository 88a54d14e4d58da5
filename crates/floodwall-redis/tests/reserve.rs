//! Reservations against a real `redis-server`: the scripts book and give back exactly as
//! the memory store does (same histories, same answers), two stores booking one key at
//! once take each slot once, and on the server's clock through the deny cache a booking
//! costs one script call.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use floodwall_core::{
    Algorithm, Cancelled, ManualClock, MemoryStore, Policy, Reservable, Reservation, StoreExt,
};
use floodwall_redis::RedisStore;
use proptest::prelude::*;
use redis_harness::RedisServer;

use common::{Now, command_calls, uncached_store};

const NOW: u64 = 1_700_000_000_000_000;

/// The booking algorithms, with the token bucket's three state forms: one integer, the
/// pair (more than a token per µs), and ticks that overflow the capacity.
fn reservables() -> Vec<Reservable> {
    let tb = |tick_ms: u64| Algorithm::TokenBucket {
        tick: Some(Duration::from_millis(tick_ms)),
    };
    [
        (Algorithm::Gcra, "10/s burst 3"),
        (Algorithm::LeakyBucket, "10/s burst 3"),
        (Algorithm::TOKEN_BUCKET, "10/s burst 3"),
        (tb(1), "10000000/s burst 30000"),
        (tb(200), "10/s burst 1"),
    ]
    .into_iter()
    .enumerate()
    .map(|(i, (alg, quota))| {
        Policy::new(format!("r{i}"), alg, quota.parse().unwrap())
            .unwrap()
            .reservable()
            .unwrap()
    })
    .collect()
}

/// What a reservation says, without its ticket (each store words its own).
fn said(r: &Reservation) -> (bool, u64, u64, Option<Duration>, Duration, Duration) {
    let d = r.decision;
    (
        d.is_allowed(),
        d.limit,
        d.remaining,
        d.retry_after,
        d.reset_after,
        r.wait,
    )
}

#[derive(Debug, Clone)]
enum Step {
    /// Advance the clock (µs), then book `cost` waiting at most `max_wait_ms`.
    Book {
        after: u64,
        cost: u64,
        max_wait_ms: u64,
    },
    /// Cancel the `n`-th booking made so far (modulo how many there are).
    Cancel { n: usize },
    /// Advance, then check `cost`.
    Check { after: u64, cost: u64 },
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0..150_000u64, 0..=3u64, 0..800u64)
            .prop_map(|(after, cost, max_wait_ms)| Step::Book { after, cost, max_wait_ms }),
        1 => (0..64usize).prop_map(|n| Step::Cancel { n }),
        1 => (0..150_000u64, 0..=2u64).prop_map(|(after, cost)| Step::Check { after, cost }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn redis_books_and_gives_back_as_memory_does(steps in prop::collection::vec(step(), 1..40)) {
        let server = RedisServer::start();
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let redis = uncached_store(&server.url()).await;
            for policy in reservables() {
                let clock = ManualClock::new(NOW);
                let memory = MemoryStore::builder().clock(clock.clone()).build();
                let mut now = NOW;
                let mut booked: Vec<(Reservation, Reservation)> = Vec::new();
                let limit = policy.policy().limit();
                for (i, s) in steps.iter().enumerate() {
                    let at = format!("{} step {i} {s:?}", policy.policy().name());
                    match *s {
                        Step::Book { after, cost, max_wait_ms } => {
                            now += after;
                            clock.set(now);
                            let cost = cost.min(limit);
                            let wait = Duration::from_millis(max_wait_ms);
                            let m = memory.reserve(b"k", &policy, cost, wait).now().unwrap();
                            let r = redis.at(now).reserve(b"k", &policy, cost, wait).await.unwrap();
                            assert_eq!(said(&r), said(&m), "{at}");
                            assert_eq!(r.ticket.is_some(), m.ticket.is_some(), "{at}");
                            if m.ticket.is_some() {
                                booked.push((m, r));
                            }
                        }
                        Step::Cancel { n } => {
                            if booked.is_empty() {
                                continue;
                            }
                            let (m, r) = booked[n % booked.len()];
                            let mc = memory.cancel(b"k", &policy, &m).now().unwrap();
                            let rc = redis.cancel(b"k", &policy, &r).await.unwrap();
                            assert_eq!(rc, mc, "{at}");
                        }
                        Step::Check { after, cost } => {
                            now += after;
                            clock.set(now);
                            let cost = cost.min(limit);
                            let m = memory.check_now(b"k", policy.policy(), cost).unwrap().unwrap();
                            let r = redis.at(now).check(b"k", policy.policy(), cost).await.unwrap();
                            assert_eq!(r, m, "{at}");
                        }
                    }
                }
            }
        });
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_stores_booking_one_key_take_each_slot_once() {
    let server = RedisServer::start();
    let stores = [
        uncached_store(&server.url()).await,
        uncached_store(&server.url()).await,
    ];
    for policy in reservables().into_iter().take(3) {
        let max_wait = Duration::from_millis(1_000);
        let mut tasks = tokio::task::JoinSet::new();
        for t in 0..32 {
            let store = stores[t % 2].clone();
            let policy = policy.clone();
            tasks.spawn(async move {
                let mut out = Vec::new();
                for _ in 0..4 {
                    out.push(
                        store
                            .at(NOW)
                            .reserve(b"hot", &policy, 1, max_wait)
                            .await
                            .unwrap(),
                    );
                }
                out
            });
        }
        let all: Vec<Reservation> = tasks.join_all().await.into_iter().flatten().collect();
        let waits: Vec<Duration> = all
            .iter()
            .filter(|r| r.is_booked())
            .map(|r| r.wait)
            .collect();
        let distinct: BTreeSet<Duration> = waits.iter().copied().collect();
        // A burst of 3 at once, then a slot every 100 ms up to 1 s: 3 + 10 bookings.
        let name = policy.policy().name().to_owned();
        assert_eq!(waits.len(), 13, "{name}");
        let zero = waits.iter().filter(|w| w.is_zero()).count();
        assert_eq!(zero, 3, "{name}");
        let expected: BTreeSet<Duration> =
            (0..=10).map(|i| Duration::from_millis(100 * i)).collect();
        assert_eq!(distinct, expected, "{name}");
    }
}

#[tokio::test]
async fn on_the_server_clock_a_booking_is_one_script_call_and_gives_back() {
    let server = RedisServer::start();
    // The default store: deny cache on.
    let store = RedisStore::connect(&server.url()).await.unwrap();
    let policy = Policy::gcra("srv", "10/s burst 1".parse().unwrap())
        .unwrap()
        .reservable()
        .unwrap();
    let wait = Duration::from_secs(1);
    let evalsha = |server: &RedisServer| {
        command_calls(server)
            .into_iter()
            .find(|(c, _)| c == "evalsha")
            .map_or(0, |(_, n)| n)
    };
    assert!(
        store
            .check(b"k", policy.policy(), 1)
            .await
            .unwrap()
            .is_allowed()
    );
    // The first call of a script loads it (NOSCRIPT, SCRIPT LOAD, EVALSHA again).
    store.reserve(b"warm", &policy, 1, wait).await.unwrap();
    let before = evalsha(&server);
    let booked = store.reserve(b"k", &policy, 1, wait).await.unwrap();
    assert!(booked.is_booked());
    assert!(booked.wait > Duration::from_millis(50) && booked.wait <= Duration::from_millis(100));
    assert_eq!(evalsha(&server) - before, 1, "one script call");
    // The key lives at least until the booked slot's state expires.
    let pttl: i64 = server
        .cmd(&[
            "PTTL",
            std::str::from_utf8(&store.redis_key(b"k", policy.policy())).unwrap(),
        ])
        .trim()
        .parse()
        .unwrap();
    assert!(pttl >= 150, "{pttl} ms");
    assert_eq!(
        store.cancel(b"k", &policy, &booked).await.unwrap(),
        Cancelled::Returned
    );
    assert_eq!(
        store.cancel(b"k", &policy, &booked).await.unwrap(),
        Cancelled::Spent
    );
    // A flushed script is loaded again, transparently.
    server.cmd(&["SCRIPT", "FLUSH"]);
    let again = store.reserve(b"k", &policy, 1, wait).await.unwrap();
    assert!(again.is_booked());
}
