//! One check in flight after a lapse: the others wait for its answer, and a leader that
//! fails, is dropped or is stuck strands no one.

use super::*;

/// A shared store one round trip away: answers after `RTT` of tokio's (paused) time,
/// deciding at the manual clock's instant; counts its calls; fails while `failing`.
/// `check_now` answers at once (as if the store were in process), for the tests of
/// `DenyCache::check_now`.
#[derive(Clone)]
struct Remote {
    inner: MemoryStore<ManualClock>,
    calls: std::sync::Arc<std::sync::atomic::AtomicU64>,
    failing: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

const RTT: Duration = Duration::from_millis(10);

impl Remote {
    fn calls(&self) -> u64 {
        self.calls.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl Store for Remote {
    async fn call(&self, op: Op<'_>) -> Result<Reply, floodwall_core::Error> {
        match op {
            Op::Check { .. } => {
                self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                tokio::time::sleep(RTT).await;
                if self.failing.load(std::sync::atomic::Ordering::SeqCst) {
                    return Err(floodwall_core::Error::Timeout);
                }
                self.inner.call_now(op).unwrap()
            }
            Op::Reset { .. } => self.inner.call_now(op).unwrap(),
            other => Err(other.unsupported()),
        }
    }

    fn call_now(&self, op: Op<'_>) -> Option<Result<Reply, floodwall_core::Error>> {
        match op {
            Op::Check { .. } => {
                self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                self.inner.call_now(op)
            }
            _ => None,
        }
    }
}

type Remoted = std::sync::Arc<DenyCache<Remote, ManualClock>>;

fn remote_cache(max_wait: Duration) -> (ManualClock, Remote, Remoted) {
    let clock = ManualClock::new(T0);
    let remote = Remote {
        inner: MemoryStore::builder().clock(clock.clone()).build(),
        calls: Default::default(),
        failing: Default::default(),
    };
    let cache = DenyCache::builder()
        .max_wait(max_wait)
        .clock(clock.clone())
        .build(remote.clone());
    (clock, remote, std::sync::Arc::new(cache))
}

/// A cache whose fact on key `k` has just lapsed: one unit per 100 ms, burst 1, one
/// admission (one store call), then 100 ms.
async fn lapsed(max_wait: Duration) -> (ManualClock, Remote, Remoted, Policy) {
    let (clock, remote, cache) = remote_cache(max_wait);
    let policy = Policy::gcra("lapse", "10/s burst 1".parse().unwrap()).unwrap();
    assert!(cache.check(b"k", &policy, 1).await.unwrap().is_allowed());
    clock.advance(Duration::from_millis(100));
    (clock, remote, cache, policy)
}

/// Starts one check of key `k` per cost, in this order, as concurrent tasks.
fn spawn_checks(
    cache: &Remoted,
    policy: &Policy,
    costs: &[u64],
) -> Vec<tokio::task::JoinHandle<Result<Decision, floodwall_core::Error>>> {
    costs
        .iter()
        .map(|&cost| {
            let (cache, policy) = (cache.clone(), policy.clone());
            tokio::spawn(async move { cache.check(b"k", &policy, cost).await })
        })
        .collect()
}

/// Runs one check per cost concurrently; a check left waiting fails the test (the paused
/// clock jumps to the timeout as soon as nothing else can run).
async fn together(
    cache: &Remoted,
    policy: &Policy,
    costs: &[u64],
) -> Vec<Result<Decision, floodwall_core::Error>> {
    let mut out = Vec::new();
    for task in spawn_checks(cache, policy, costs) {
        out.push(finish(task).await);
    }
    out
}

/// A spawned check's answer; a check left waiting fails the test.
async fn finish(
    task: tokio::task::JoinHandle<Result<Decision, floodwall_core::Error>>,
) -> Result<Decision, floodwall_core::Error> {
    let joined = tokio::time::timeout(Duration::from_secs(60), task).await;
    joined.expect("a check was left waiting").expect("task")
}

/// Whether `store` admits `cost` of key `k` in a check answered at once.
#[cfg(feature = "tokio")] // Its callers wait on tokio's timer.
fn admits_now(store: &impl StoreExt, policy: &Policy, cost: u64) -> bool {
    let d = store.check_now(b"k", policy, cost);
    d.expect("answered at once").unwrap().is_allowed()
}

fn allowed(results: &[Result<Decision, floodwall_core::Error>]) -> Vec<bool> {
    results
        .iter()
        .map(|r| r.as_ref().unwrap().is_allowed())
        .collect()
}

#[cfg(feature = "tokio")] // Waiting needs tokio's timer (`a_wait_needs_a_timer_..`).
#[tokio::test(start_paused = true)]
async fn after_a_lapse_one_refusal_answers_every_check_in_flight() {
    let (clock, remote, cache, policy) = lapsed(DenyCache::DEFAULT_MAX_WAIT).await;
    assert_eq!(remote.calls(), 1);
    // The admission's fact ("refused until the next slot") lapsed; meanwhile another node
    // took that slot, so the store still refuses.
    assert!(admits_now(&remote.inner, &policy, 1));
    let results = together(&cache, &policy, &[1; 8]).await;
    assert_eq!(allowed(&results), [false; 8]);
    // One call for the eight (each went to the store before).
    assert_eq!(remote.calls(), 2, "store calls");
    for r in &results {
        let d = r.as_ref().unwrap();
        assert!(d.retry_after.unwrap() > Duration::ZERO);
        assert!(d.retry_after.unwrap() <= Duration::from_millis(100));
    }
    let stats = cache.stats();
    assert_eq!((stats.waited, stats.denied_locally), (7, 7));
    // The leader's refusal is cached as usual.
    assert!(!cache.check(b"k", &policy, 1).await.unwrap().is_allowed());
    assert_eq!(remote.calls(), 2);
    // Past it, the store is asked again and admits.
    clock.advance(Duration::from_millis(100));
    assert!(cache.check(b"k", &policy, 1).await.unwrap().is_allowed());
    assert_eq!(remote.calls(), 3);
}

#[cfg(feature = "tokio")] // Waiting needs tokio's timer (`a_wait_needs_a_timer_..`).
#[tokio::test(start_paused = true)]
async fn after_a_lapse_an_admission_that_uses_the_budget_answers_the_others() {
    let (_, remote, cache, policy) = lapsed(DenyCache::DEFAULT_MAX_WAIT).await;
    // The first is admitted; what its answer records refuses the seven that waited.
    let results = together(&cache, &policy, &[1; 8]).await;
    let mut expected = [false; 8];
    expected[0] = true;
    assert_eq!(allowed(&results), expected);
    assert_eq!(remote.calls(), 2, "store calls");
    assert_eq!(cache.stats().waited, 7);
}

#[cfg(feature = "tokio")] // Waiting needs tokio's timer (`a_wait_needs_a_timer_..`).
#[tokio::test(start_paused = true)]
async fn after_a_lapse_checks_an_admission_does_not_cover_go_to_the_store() {
    let (clock, remote, cache) = remote_cache(DenyCache::DEFAULT_MAX_WAIT);
    let policy = Policy::gcra("lapse", "10/s burst 5".parse().unwrap()).unwrap();
    // The burst at once: cost 1 is refused for the next 100 ms.
    assert!(cache.check(b"k", &policy, 5).await.unwrap().is_allowed());
    assert!(!cache.check(b"k", &policy, 1).await.unwrap().is_allowed());
    assert_eq!(remote.calls(), 1);
    // Full again: the leader (cost 2) is admitted with 3 left, which refuses only costs
    // of 4 or more, so the check of cost 2 that waited goes to the store, and is admitted.
    // The cheaper check (cost 1) never waited.
    clock.advance(Duration::from_secs(1));
    let results = together(&cache, &policy, &[2, 2, 1]).await;
    assert_eq!(allowed(&results), [true; 3]);
    assert_eq!(remote.calls(), 4, "store calls");
    assert_eq!(cache.stats().waited, 1);
    assert_eq!(
        remote
            .inner
            .check_now(b"k", &policy, 0)
            .unwrap()
            .unwrap()
            .remaining,
        0
    );
    // Four of cost 1 after the next lapse: the leader leaves 4, refusing nothing they
    // ask; the three that waited each go to the store.
    clock.advance(Duration::from_secs(1));
    let results = together(&cache, &policy, &[1; 4]).await;
    assert_eq!(allowed(&results), [true; 4]);
    assert_eq!(remote.calls(), 8, "store calls");
    assert_eq!(cache.stats().waited, 4);
}

#[cfg(feature = "tokio")] // Waiting needs tokio's timer (`a_wait_needs_a_timer_..`).
#[tokio::test(start_paused = true)]
async fn a_failed_leader_sends_the_others_to_the_store() {
    let (_, remote, cache, policy) = lapsed(DenyCache::DEFAULT_MAX_WAIT).await;
    remote
        .failing
        .store(true, std::sync::atomic::Ordering::SeqCst);
    // An error refuses no one: each check that waited tries the store itself.
    let results = together(&cache, &policy, &[1; 4]).await;
    assert!(results.iter().all(|r| r.as_ref().unwrap_err().is_timeout()));
    assert_eq!(remote.calls(), 5, "store calls");
    assert_eq!(cache.stats().waited, 3);
    assert_eq!(cache.stats().denied_locally, 0);
}

#[cfg(feature = "tokio")] // Waiting needs tokio's timer (`a_wait_needs_a_timer_..`).
#[tokio::test(start_paused = true)]
async fn a_dropped_leader_strands_no_one() {
    let (_, remote, cache, policy) = lapsed(DenyCache::DEFAULT_MAX_WAIT).await;
    let mut tasks = spawn_checks(&cache, &policy, &[1; 4]);
    // Every check has started: the first is in flight, three wait for it.
    tokio::time::sleep(RTT / 2).await;
    assert_eq!((remote.calls(), cache.stats().waited), (2, 3));
    // The leader is cancelled (a timeout around the cache, a client gone) before the
    // store answered: the others go on to the store.
    let leader = tasks.remove(0);
    leader.abort();
    assert!(leader.await.unwrap_err().is_cancelled());
    let mut admitted = 0;
    for task in tasks {
        admitted += u64::from(finish(task).await.unwrap().is_allowed());
    }
    // Each goes to the store, as without the cache: one is admitted.
    assert_eq!(admitted, 1);
    assert_eq!(remote.calls(), 5, "store calls");
    assert_eq!(cache.stats().denied_locally, 0);
}

// Without a timer no flight forms for `check_now` to defer to
// (`without_a_timer_check_now_during_a_check_after_a_lapse_is_answered_at_once`).
#[cfg(feature = "tokio")]
#[tokio::test(start_paused = true)]
async fn check_now_does_not_wait_for_a_check_in_flight() {
    let (clock, remote, cache) = remote_cache(DenyCache::DEFAULT_MAX_WAIT);
    let policy = Policy::gcra("lapse", "10/s burst 2".parse().unwrap()).unwrap();
    assert!(cache.check(b"k", &policy, 2).await.unwrap().is_allowed());
    assert!(!admits_now(&*cache, &policy, 1));
    clock.advance(Duration::from_millis(200));
    let tasks = spawn_checks(&cache, &policy, &[2]);
    tokio::time::sleep(RTT / 2).await;
    assert_eq!(remote.calls(), 2);
    // A check the answer in flight would cover: `check_now` would have to wait.
    assert!(cache.check_now(b"k", &policy, 2).is_none());
    // A cheaper one is the store's to answer, at once.
    assert!(admits_now(&*cache, &policy, 1));
    assert_eq!(remote.calls(), 3);
    for task in tasks {
        assert!(!task.await.unwrap().unwrap().is_allowed());
    }
    assert_eq!(cache.stats().waited, 0);
}

// -- A leader that stops being polled holds no one past the bound.

/// Polls `f` once, with a waker that does nothing: a future polled once and never again.
fn poll_once<F: Future>(f: std::pin::Pin<&mut F>) -> std::task::Poll<F::Output> {
    f.poll(&mut std::task::Context::from_waker(std::task::Waker::noop()))
}

#[cfg(feature = "tokio")] // Waiting needs tokio's timer (`a_wait_needs_a_timer_..`).
#[tokio::test(start_paused = true)]
async fn a_leader_dropped_mid_flight_releases_its_followers_at_once() {
    let (_, remote, cache, policy) = lapsed(DenyCache::DEFAULT_MAX_WAIT).await;
    // The leader, polled once: in flight to the store.
    let mut leader = Box::pin(cache.check(b"k", &policy, 1));
    assert!(poll_once(leader.as_mut()).is_pending());
    let follower = spawn_checks(&cache, &policy, &[1]).remove(0);
    tokio::time::sleep(RTT / 2).await;
    assert_eq!((remote.calls(), cache.stats().waited), (2, 1));
    // Dropped before the store answered (never decided there): the follower goes to the
    // store itself, at once rather than at any bound.
    let started = tokio::time::Instant::now();
    drop(leader);
    assert!(finish(follower).await.unwrap().is_allowed());
    assert_eq!(started.elapsed(), RTT, "one round trip of its own");
    assert_eq!(remote.calls(), 3);
}

#[tokio::test(start_paused = true)]
async fn a_leader_never_polled_again_holds_its_followers_no_longer_than_the_bound() {
    let (_, remote, cache, policy) = lapsed(DenyCache::DEFAULT_MAX_WAIT).await;
    // The leader is polled once, so it is in flight, then never again (a `select!` that
    // moved on, a task stuck elsewhere) and not dropped either.
    let mut leader = Box::pin(cache.check(b"k", &policy, 1));
    assert!(poll_once(leader.as_mut()).is_pending());
    assert_eq!(remote.calls(), 2);
    let started = tokio::time::Instant::now();
    let followers = spawn_checks(&cache, &policy, &[1, 1]);
    let mut admitted = 0;
    for follower in followers {
        admitted += u64::from(finish(follower).await.unwrap().is_allowed());
    }
    // Each goes to the store, as without the cache: the leader never decided there, so
    // exactly one of the two is admitted. With tokio's timer each waited until the bound;
    // without one (core's `tokio` feature off), none waited at all.
    assert_eq!(admitted, 1);
    assert_eq!(remote.calls(), 4, "store calls");
    let (waited, held) = if cfg!(feature = "tokio") {
        (2, DenyCache::DEFAULT_MAX_WAIT)
    } else {
        (0, Duration::ZERO)
    };
    assert_eq!(started.elapsed(), held + RTT);
    let stats = cache.stats();
    assert_eq!(
        (stats.waited, stats.gave_up, stats.denied_locally),
        (waited, waited, 0)
    );
    // The leader, dropped at last, lands nothing anyone still waits for.
    drop(leader);
    assert!(!cache.check(b"k", &policy, 1).await.unwrap().is_allowed());
}

#[tokio::test(start_paused = true)]
async fn a_check_arriving_after_the_bound_does_not_wait_for_a_stuck_leader() {
    let (clock, remote, cache, policy) = lapsed(DenyCache::DEFAULT_MAX_WAIT).await;
    let mut leader = Box::pin(cache.check(b"k", &policy, 1));
    assert!(poll_once(leader.as_mut()).is_pending());
    // The cache's clock passes the bound (tokio's timer has not moved): the next check
    // takes the flight over and asks the store at once, a round trip and no more.
    clock.advance(DenyCache::DEFAULT_MAX_WAIT);
    let started = tokio::time::Instant::now();
    let d = tokio::time::timeout(Duration::from_secs(60), cache.check(b"k", &policy, 1))
        .await
        .expect("the check waited for a leader past the bound");
    assert!(d.unwrap().is_allowed());
    assert_eq!(started.elapsed(), RTT);
    assert_eq!(remote.calls(), 3);
    assert_eq!(cache.stats().waited, 0);
    drop(leader);
}

#[cfg(feature = "tokio")] // Waiting needs tokio's timer (`a_wait_needs_a_timer_..`).
#[tokio::test(start_paused = true)]
async fn a_waiting_check_polled_past_the_bound_goes_to_the_store() {
    let (clock, remote, cache, policy) = lapsed(DenyCache::DEFAULT_MAX_WAIT).await;
    let mut leader = Box::pin(cache.check(b"k", &policy, 1));
    assert!(poll_once(leader.as_mut()).is_pending());
    let mut follower = Box::pin(cache.check(b"k", &policy, 1));
    assert!(poll_once(follower.as_mut()).is_pending());
    assert_eq!(cache.stats().waited, 1);
    // The cache's clock passes the bound before tokio's timer does: the next poll of the
    // waiting check sees it, and the check asks the store, a round trip and no more.
    clock.advance(DenyCache::DEFAULT_MAX_WAIT);
    let started = tokio::time::Instant::now();
    let d = tokio::time::timeout(Duration::from_secs(60), follower)
        .await
        .expect("the check kept waiting past the bound");
    assert!(d.unwrap().is_allowed());
    assert_eq!(started.elapsed(), RTT);
    assert_eq!((remote.calls(), cache.stats().gave_up), (3, 1));
    drop(leader);
}

/// A refusal that comes back after its hold would have ended is not recorded, but still
/// answers the checks that waited for it (each arrived before the store decided).
#[cfg(feature = "tokio")] // Waiting needs tokio's timer (`a_wait_needs_a_timer_..`).
#[tokio::test(start_paused = true)]
async fn a_refusal_back_after_its_hold_still_answers_the_checks_that_waited() {
    let (clock, remote, _) = remote_cache(DenyCache::DEFAULT_MAX_WAIT);
    let hold = Duration::from_millis(5);
    let cache = std::sync::Arc::new(
        DenyCache::builder()
            .max_refusal_hold(hold)
            .clock(clock.clone())
            .build(remote.clone()),
    );
    let policy = Policy::gcra("lapse", "10/s burst 1".parse().unwrap()).unwrap();
    // Answered at once: "refused until the next slot" (100 ms), held 5 ms.
    assert!(admits_now(&*cache, &policy, 1));
    clock.advance(hold);
    let tasks = spawn_checks(&cache, &policy, &[1; 8]);
    tokio::time::sleep(RTT / 2).await;
    assert_eq!((remote.calls(), cache.stats().waited), (2, 7));
    // The leader's refusal (95 ms) lands once its own hold has passed.
    clock.advance(hold);
    let mut results = Vec::new();
    for task in tasks {
        results.push(finish(task).await);
    }
    assert_eq!(allowed(&results), [false; 8]);
    assert_eq!(remote.calls(), 2, "store calls");
    assert_eq!(cache.stats().denied_locally, 7);
    assert!(
        cache.is_empty(),
        "nothing recorded: the flight answered them"
    );
}

#[tokio::test(start_paused = true)]
async fn a_zero_bound_turns_waiting_off() {
    let (_, remote, cache, policy) = lapsed(Duration::ZERO).await;
    assert_eq!(cache.max_wait(), Duration::ZERO);
    // Each goes to the store, as without the cache: one is admitted.
    let results = together(&cache, &policy, &[1; 4]).await;
    assert_eq!(allowed(&results).iter().filter(|&&a| a).count(), 1);
    assert_eq!(remote.calls(), 5, "store calls");
    assert_eq!(cache.stats().waited, 0);
}

// -- Where no timer could end a wait at the bound, no check waits.

/// A store answering at once, with no runtime, except while `held`: then its calls stay
/// pending for good (a leader stuck elsewhere).
#[derive(Clone)]
struct Held {
    inner: MemoryStore<ManualClock>,
    calls: std::sync::Arc<std::sync::atomic::AtomicU64>,
    held: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Store for Held {
    async fn call(&self, op: Op<'_>) -> Result<Reply, floodwall_core::Error> {
        match op {
            Op::Check { .. } => {
                self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                if self.held.load(std::sync::atomic::Ordering::SeqCst) {
                    std::future::pending::<()>().await;
                }
                self.inner.call_now(op).unwrap()
            }
            Op::Reset { .. } => self.inner.call_now(op).unwrap(),
            other => Err(other.unsupported()),
        }
    }

    fn call_now(&self, op: Op<'_>) -> Option<Result<Reply, floodwall_core::Error>> {
        match op {
            Op::Check { .. } => {
                self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                self.inner.call_now(op)
            }
            _ => None,
        }
    }
}

/// A cache over a [`Held`] store whose fact on key `k` has just lapsed (one admission,
/// then 100 ms), its store now holding every check: the next check leads for good.
fn held_lapsed() -> (Held, DenyCache<Held, ManualClock>, Policy) {
    let clock = ManualClock::new(T0);
    let store = Held {
        inner: MemoryStore::builder().clock(clock.clone()).build(),
        calls: Default::default(),
        held: Default::default(),
    };
    let cache = DenyCache::builder()
        .clock(clock.clone())
        .build(store.clone());
    let policy = Policy::gcra("lapse", "10/s burst 1".parse().unwrap()).unwrap();
    // An admission records "refused until the next slot", which lapses 100 ms later.
    assert!(
        now_or_never(cache.check(b"k", &policy, 1))
            .unwrap()
            .is_allowed()
    );
    clock.advance(Duration::from_millis(100));
    store.held.store(true, std::sync::atomic::Ordering::SeqCst);
    (store, cache, policy)
}

/// Outside a tokio runtime (and everywhere without core's `tokio` feature) nothing could
/// wake a waiting check at its bound, so a check arriving while a leader is out goes to the
/// store at once instead of waiting for a leader that may never land.
#[test]
fn a_wait_needs_a_timer_outside_a_runtime_a_check_goes_to_the_store() {
    let (store, cache, policy) = held_lapsed();
    let calls = || store.calls.load(std::sync::atomic::Ordering::SeqCst);
    // The leader is in flight for good, never landing.
    let mut leader = Box::pin(cache.check(b"k", &policy, 1));
    assert!(poll_once(leader.as_mut()).is_pending());
    assert_eq!(calls(), 2);
    store.held.store(false, std::sync::atomic::Ordering::SeqCst);
    // The next check, polled once, is answered by the store: it did not wait.
    let mut next = Box::pin(cache.check(b"k", &policy, 1));
    let std::task::Poll::Ready(d) = poll_once(next.as_mut()) else {
        panic!("a check waited where nothing could end its wait at the bound");
    };
    assert!(
        d.unwrap().is_allowed(),
        "the leader never decided in the store"
    );
    assert_eq!(calls(), 3);
    assert_eq!((cache.stats().waited, cache.stats().gave_up), (0, 0));
    drop(leader);
}

/// Where no check could wait, the first check after a lapse leads no flight: a
/// `check_now` arriving while it is out is the store's to answer at once (`None` would only
/// send it to `check`, which would go to the store without waiting).
#[test]
fn without_a_timer_check_now_during_a_check_after_a_lapse_is_answered_at_once() {
    let (store, cache, policy) = held_lapsed();
    let calls = || store.calls.load(std::sync::atomic::Ordering::SeqCst);
    let mut first = Box::pin(cache.check(b"k", &policy, 1));
    assert!(poll_once(first.as_mut()).is_pending());
    assert_eq!(calls(), 2);
    let d = cache.check_now(b"k", &policy, 1);
    let d = d.expect("check_now deferred to a flight no check could wait for");
    assert!(
        d.unwrap().is_allowed(),
        "the first check never decided in the store"
    );
    assert_eq!(calls(), 3);
    assert_eq!(cache.stats().waited, 0);
    drop(first);
}

/// Without core's `tokio` feature, checks after a lapse each go to the store: exact, and
/// bounded, at the cost of the round trips waiting saves (see the gated tests above).
#[cfg(not(feature = "tokio"))]
#[tokio::test(start_paused = true)]
async fn without_a_timer_the_checks_after_a_lapse_each_go_to_the_store() {
    let (_, remote, cache, policy) = lapsed(DenyCache::DEFAULT_MAX_WAIT).await;
    let started = tokio::time::Instant::now();
    let results = together(&cache, &policy, &[1; 8]).await;
    assert_eq!(allowed(&results).iter().filter(|&&a| a).count(), 1);
    assert_eq!(remote.calls(), 9, "store calls");
    assert_eq!(started.elapsed(), RTT, "no check waited for another");
    assert_eq!(cache.stats().waited, 0);
}

// -- Under a penalty every refusal is a strike the store counts.

#[cfg(feature = "tokio")] // Waiting needs tokio's timer (`a_wait_needs_a_timer_..`).
#[tokio::test(start_paused = true)]
async fn under_a_penalty_checks_waiting_behind_a_refused_leader_still_count_as_strikes() {
    let (clock, remote, cache) = remote_cache(DenyCache::DEFAULT_MAX_WAIT);
    // "3 strikes ban": three refusals within a minute ban the key for ten.
    let penalty =
        floodwall_core::Penalty::new(3, Duration::from_secs(60), Duration::from_secs(600)).unwrap();
    let policy = Policy::gcra("strikes", "1/h".parse().unwrap())
        .unwrap()
        .with_penalty(penalty);
    assert!(cache.check(b"k", &policy, 1).await.unwrap().is_allowed());
    let answers = together(&cache, &policy, &[1; 3]).await;
    assert!(answers[2].as_ref().unwrap().is_banned());
    // The ban is lifted through another node; once this cache's hold of it lapses, the
    // next checks form a flight behind one leader, which the store refuses (a strike).
    remote.inner.unban(b"k", &policy).now().unwrap();
    clock.advance(DenyCache::DEFAULT_MAX_BAN_HOLD);
    assert_eq!(
        cache.stats().waited,
        0,
        "no flight before the ban's hold lapsed"
    );
    let results = together(&cache, &policy, &[1; 8]).await;
    assert_eq!(allowed(&results), [false; 8]);
    // Seven waited behind the leader, then went to the store themselves.
    assert_eq!(cache.stats().waited, 7);
    // Each of the eight is a strike: the third bans, and the five after it meet the ban.
    let banned = results
        .iter()
        .filter(|r| r.as_ref().unwrap().is_banned())
        .count();
    assert_eq!(banned, 6, "{results:?}");
    assert!(
        now_or_never(remote.inner.penalty_state(b"k", &policy))
            .unwrap()
            .banned_for
            .is_some()
    );
}

/// A ban the leader meets is not handed on as a plain refusal: the checks that waited
/// look again and find it recorded, and answer the ban.
#[cfg(feature = "tokio")] // Waiting needs tokio's timer (`a_wait_needs_a_timer_..`).
#[tokio::test(start_paused = true)]
async fn checks_waiting_behind_a_leader_the_store_bans_answer_the_ban() {
    let (clock, remote, cache) = remote_cache(DenyCache::DEFAULT_MAX_WAIT);
    // The first refusal bans for ten minutes.
    let penalty =
        floodwall_core::Penalty::new(1, Duration::from_secs(60), Duration::from_secs(600)).unwrap();
    let policy = Policy::gcra("strikes", "1/h".parse().unwrap())
        .unwrap()
        .with_penalty(penalty);
    assert!(cache.check(b"k", &policy, 1).await.unwrap().is_allowed());
    assert!(cache.check(b"k", &policy, 1).await.unwrap().is_banned());
    // This cache's hold of the ban lapses; the store's ban does not.
    clock.advance(DenyCache::DEFAULT_MAX_BAN_HOLD);
    let results = together(&cache, &policy, &[1; 8]).await;
    assert!(
        results.iter().all(|r| r.as_ref().unwrap().is_banned()),
        "{results:?}"
    );
    assert_eq!(remote.calls(), 3, "store calls");
    assert_eq!(cache.stats().waited, 7);
}
