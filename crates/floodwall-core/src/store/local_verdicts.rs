//! [`LocalVerdicts`]: the opt-in, approximate "async verdict mode". Each node decides from
//! a local copy of a key's verdict and sends its counts to the shared store in batches.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::evict::{Cap, evict_soonest};
use super::key::{KeyRef, MapKey};
use super::{Store, lock, micros};
use crate::{Clock, ConfigError, Decision, Error, Policy, SystemClock};

type Map = papaya::HashMap<MapKey, Arc<Slot>, ahash::RandomState>;

/// A store combinator that answers from a local copy of each key's verdict, refreshed at
/// most once per interval, and sends the counts it admitted to the inner store in one call
/// per key per interval.
///
/// Wraps any [`Store`]; the wrapper is a `Store` again. Clones share the verdicts (and
/// clone the inner store), so one map serves every clone of a tower layer.
///
/// # What it trades
///
/// A hot key behind a shared store (Redis) costs a round trip per request. Here a node asks
/// the store about a key at most once per [`interval`](LocalVerdictsBuilder::interval): the
/// answer's `remaining` becomes a local budget, requests spend it without a round trip, and
/// the next refresh records what was spent in one call (two when it no longer fits: one
/// refused, one recording the part that does). In exchange:
///
/// - **It may admit more than the quota**, by a bounded amount (below): nodes spend budgets
///   the store has not been told about yet.
/// - **It never loses a count**, only delays it. Counts that no longer fit are kept as a
///   debt and sent again at each refresh (the node refuses locally meanwhile); a refresh
///   that fails or is cancelled puts its counts back. The one exception is the cap on keys
///   (see *Bounded*).
/// - **It can admit less than the quota**: counts are booked when sent, not when admitted,
///   and while the store's bucket looks full to it, what the quota refills is lost. A
///   single node flooding a key gets the full rate, less one burst, only if the interval is
///   at most half the time the burst takes to refill (`T ≤ burst × emission interval / 2`);
///   past that it gets `burst / (2 × rate × T)` of the rate. Four nodes flooding 100/s
///   burst 10 with a 100 ms interval get 7% under the quota over 10 s; with burst 20 they
///   get it all.
/// - Other nodes' admissions are seen one interval late, so a key's refusals start up to an
///   interval late too.
///
/// # How far over the quota
///
/// For `N` nodes sharing a key, each with arrival rate `λ` for it (units/s), interval `T`,
/// and a refresh taking `L` (a round trip to the store), over any span `[0, D]`:
///
/// ```text
/// admitted(0..D) ≤ allowance(D) + N × min(⌈λ·T⌉ + ⌈λ·L⌉, limit)
/// ```
///
/// where `limit` is [`Policy::limit`] and `allowance(D)` is what the quota admits over `D`
/// (GCRA: `burst + D / emission interval`; a fixed window: `count` per window touched).
/// With an in-process store (`L` = 0) that is `N × min(⌈λ·T⌉, limit)`. Why:
///
/// 1. The inner store records a count only when it fits (a debt is offered again, never
///    forced), so what it has recorded by `D` is within `allowance(D)`.
/// 2. Every admitted unit is recorded eventually (see above), so `admitted(0..D)` is what
///    the store recorded plus what each node holds unrecorded at `D`.
/// 3. A node's unrecorded units are at most `limit`: it keeps `pending + in flight +
///    budget ≤ limit` at all times, because a refresh grants the store's `remaining` minus
///    what the node admitted while that refresh was in flight (those are pending for the
///    next refresh, and the store's answer did not count them).
/// 4. They are also at most its arrivals over `T + L`: everything admitted before the
///    *send* of the last refresh that recorded all it carried is recorded; after that send,
///    the node admits only while that verdict is fresh (`T` from the send) and while the next
///    refresh is in flight (`L`); a refresh that cannot record everything leaves a budget of
///    0 until one that can.
///
/// `tests/local_verdicts.rs` measures this with four simulated nodes. While the store
/// fails, every failing refresh's time in flight adds to `L` (requests meanwhile spend the
/// old budget); the `limit` cap holds regardless. A refresh cancelled after the store
/// recorded its counts (a timeout around this store) records them twice on retry: the
/// error is towards refusing, never towards admitting more.
///
/// # Examples
///
/// ```
/// use floodwall_core::{LocalVerdicts, ManualClock, MemoryStore, Policy, Store};
/// use std::time::Duration;
/// # fn block_on<F: std::future::Future>(f: F) -> F::Output {
/// #     // MemoryStore's futures are ready at once: one poll answers.
/// #     let mut f = std::pin::pin!(f);
/// #     let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
/// #     match f.as_mut().poll(&mut cx) { std::task::Poll::Ready(v) => v, _ => unreachable!() }
/// # }
///
/// let clock = ManualClock::new(1_700_000_000_000_000);
/// // The shared store; in production, Redis.
/// let shared = MemoryStore::builder().clock(clock.clone()).build();
/// let store = LocalVerdicts::builder()
///     .interval(Duration::from_millis(100))
///     .clock(clock.clone())
///     .build(shared.clone())?;
/// let policy = Policy::gcra("api", "100/s burst 10".parse()?)?;
/// # block_on(async {
/// // No verdict yet: `check` asks the shared store (a peek), then decides here.
/// assert!(store.check(b"alice", &policy, 1).await?.allowed);
/// // For the next 100 ms alice is answered locally, without waiting...
/// for _ in 0..9 {
///     assert!(store.check_now(b"alice", &policy, 1).unwrap()?.allowed);
/// }
/// assert!(!store.check_now(b"alice", &policy, 1).unwrap()?.allowed);
/// // ...and the shared store has not heard of those 10 admissions yet.
/// assert_eq!(shared.check_sync(b"alice", &policy, 0)?.remaining, 10);
///
/// clock.advance(Duration::from_millis(100));
/// // A refresh is due: `check_now` cannot answer; `check` records the 10 in one call.
/// assert!(store.check_now(b"alice", &policy, 1).is_none());
/// assert!(!store.check(b"alice", &policy, 1).await?.allowed);
/// assert_eq!(shared.check_sync(b"alice", &policy, 0)?.remaining, 0);
///
/// let stats = store.stats();
/// assert_eq!((stats.store_calls, stats.refreshes), (2, 2));
/// assert_eq!((stats.allowed_locally, stats.denied_locally), (9, 1));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Details
///
/// - A key's first check waits for its first refresh. Checks of that key arriving while the
///   first refresh is in flight have no verdict to spend, so they go to the inner store
///   as plain checks (exact, counted at once) rather than being refused.
/// - A later check that finds a refresh in flight decides from the verdict it has.
/// - [`check_now`](Store::check_now) answers whenever a verdict is usable and returns `None`
///   when a refresh is due, so the caller's `check` does it. A cost of 0 is a local peek,
///   admitted even while a refusal holds, as any store admits one.
/// - A local refusal reports `retry_after` until the refusal the store gave lapses, or
///   until the next refresh when the local budget is spent.
/// - [`reset`](Store::reset) forgets the local verdict, and the counts not yet sent with it.
/// - [`flush`](Self::flush) sends every key's pending counts now: call it at shutdown.
/// - Keys longer than 128 bytes go straight to the inner store: a verdict must keep its
///   key to send counts with it, and a cache of attacker-chosen long keys would make memory
///   per entry unbounded.
/// - What [`DenyCache`](super::DenyCache) assumes of time and of resets elsewhere applies
///   here too: a refusal is kept for the `retry_after` the store gave.
///
/// # Bounded
///
/// At most [`max_keys`](LocalVerdictsBuilder::max_keys) keys are kept. A new key at the cap
/// first drops every stale key with nothing pending; if more than 90% of the cap remains,
/// keys with nothing pending go before keys with counts, the ones going stale soonest
/// first, down to 90%. **A dropped key's pending counts are lost**: the store then sees up
/// to `limit` fewer units for that key (the budget they came from), so the bound above
/// grows by `limit` per key dropped with counts. Size the cap above the keys active per
/// interval. A key whose refresh is in flight is never dropped, so the map can pass the
/// cap by the number of refreshes in flight.
pub struct LocalVerdicts<S, C: Clock = SystemClock> {
    store: S,
    shared: Arc<Shared<C>>,
}

struct Shared<C> {
    map: Map,
    cap: Cap,
    /// The refresh interval, µs (at least 1).
    interval: u64,
    clock: C,
    store_calls: AtomicU64,
    refreshes: AtomicU64,
    allowed_locally: AtomicU64,
    denied_locally: AtomicU64,
}

/// One key's verdict, with what the node needs to send its counts without a request.
struct Slot {
    key: Box<[u8]>,
    policy: Policy,
    verdict: Mutex<Verdict>,
}

/// Local microseconds throughout. Invariant: `pending + taken + budget ≤ limit`, where
/// `taken` is what a refresh in flight carries.
#[derive(Debug, Default)]
struct Verdict {
    /// When the last refresh that got an answer was sent; `None` before the first.
    refreshed_at: Option<u64>,
    /// Units this node may still admit before the next refresh.
    budget: u64,
    /// Units admitted here and not yet recorded by the store (a debt included).
    pending: u64,
    /// Refused until then, as the store said; 0 if it did not refuse.
    denied_until: u64,
    /// When the store said the key would be back to full, as of the last refresh.
    reset_at: u64,
    in_flight: bool,
    /// Dropped from the map (reset or evicted): whoever holds it looks the key up again.
    removed: bool,
}

/// What a [`LocalVerdicts`] has done since it was built: `store_calls` against the checks
/// answered locally shows what the mode saves for a workload.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LocalVerdictsStats {
    /// Calls to the inner store (refreshes, a second call when counts overflow, first
    /// checks passed through).
    pub store_calls: u64,
    /// Refreshes started, by checks and by [`flush`](LocalVerdicts::flush).
    pub refreshes: u64,
    /// Checks admitted from a local verdict without waiting for the store.
    pub allowed_locally: u64,
    /// Checks refused from a local verdict without waiting for the store.
    pub denied_locally: u64,
}

/// Sets a [`LocalVerdicts`]'s interval, cap or clock before wrapping a store.
#[derive(Debug, Clone)]
pub struct LocalVerdictsBuilder<C = SystemClock> {
    interval: Duration,
    max_keys: usize,
    clock: C,
}

impl LocalVerdicts<(), SystemClock> {
    /// The default refresh interval.
    pub const DEFAULT_INTERVAL: Duration = Duration::from_millis(100);
    /// The longest refresh interval accepted.
    pub const MAX_INTERVAL: Duration = Duration::from_secs(3600);
    /// The default cap on keys: at a few hundred bytes a key (short keys are kept twice,
    /// in the map and with the verdict), some tens of MB.
    pub const DEFAULT_MAX_KEYS: usize = 100_000;

    /// A builder with the default interval and cap and the system clock.
    pub fn builder() -> LocalVerdictsBuilder {
        LocalVerdictsBuilder {
            interval: Self::DEFAULT_INTERVAL,
            max_keys: Self::DEFAULT_MAX_KEYS,
            clock: SystemClock,
        }
    }
}

impl<S: Store> LocalVerdicts<S, SystemClock> {
    /// Wraps `store`, refreshing each key at most once per `interval`; fails as
    /// [`LocalVerdictsBuilder::build`] does.
    pub fn new(store: S, interval: Duration) -> Result<Self, ConfigError> {
        LocalVerdicts::builder().interval(interval).build(store)
    }
}

impl<C: Clock> LocalVerdictsBuilder<C> {
    /// How long a verdict is used before the next check refreshes it (default 100 ms).
    /// Longer saves more round trips and admits more over the quota (see
    /// [`LocalVerdicts`]); it must be 1 µs to [`LocalVerdicts::MAX_INTERVAL`].
    pub fn interval(mut self, interval: Duration) -> Self {
        self.interval = interval;
        self
    }

    /// The most keys remembered (at least 1); see [`LocalVerdicts`] for what happens at
    /// the cap.
    pub fn max_keys(mut self, max_keys: usize) -> Self {
        self.max_keys = max_keys;
        self
    }

    /// The clock verdicts are timed with: a [`ManualClock`](crate::ManualClock) in tests.
    pub fn clock<C2: Clock>(self, clock: C2) -> LocalVerdictsBuilder<C2> {
        LocalVerdictsBuilder {
            interval: self.interval,
            max_keys: self.max_keys,
            clock,
        }
    }

    /// Wraps `store`, or refuses an interval outside 1 µs ..= 1 hour
    /// ([`ConfigError::BadRefreshInterval`]).
    pub fn build<S: Store>(self, store: S) -> Result<LocalVerdicts<S, C>, ConfigError> {
        let interval = micros(self.interval);
        if interval == 0 || self.interval > LocalVerdicts::MAX_INTERVAL {
            return Err(ConfigError::BadRefreshInterval {
                interval: self.interval,
            });
        }
        Ok(LocalVerdicts {
            store,
            shared: Arc::new(Shared {
                map: papaya::HashMap::builder()
                    .hasher(ahash::RandomState::new())
                    .build(),
                cap: Cap::new(self.max_keys),
                interval,
                clock: self.clock,
                store_calls: AtomicU64::new(0),
                refreshes: AtomicU64::new(0),
                allowed_locally: AtomicU64::new(0),
                denied_locally: AtomicU64::new(0),
            }),
        })
    }
}

impl<S: Clone, C: Clock> Clone for LocalVerdicts<S, C> {
    fn clone(&self) -> Self {
        Self {
            store: self.store.clone(),
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<S: std::fmt::Debug, C: Clock> std::fmt::Debug for LocalVerdicts<S, C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalVerdicts")
            .field("store", &self.store)
            .field("interval", &Duration::from_micros(self.shared.interval))
            .field("keys", &self.len())
            .field("max_keys", &self.shared.cap.max_keys())
            .field("stats", &self.stats())
            .finish()
    }
}

/// What to do with a check.
enum Route {
    /// Decided from the local verdict.
    Local(Decision),
    /// The key's first refresh is in flight, or the key is too long to keep: ask the store.
    Through,
    /// Refresh the verdict, then decide locally.
    Refresh(Refreshing),
}

/// A refresh in flight: its counts go back to `pending` if it is dropped unfinished (a
/// timeout around this store, a client gone), so a cancelled refresh loses nothing.
struct Refreshing {
    slot: Arc<Slot>,
    taken: u64,
    sent: u64,
    done: bool,
}

impl Drop for Refreshing {
    fn drop(&mut self) {
        if !self.done {
            let mut v = lock(&self.slot.verdict);
            v.in_flight = false;
            if !v.removed {
                v.pending = v.pending.saturating_add(self.taken);
            }
        }
    }
}

/// What a refresh learnt.
struct Answer {
    /// Units it carried that the store did not record: the new debt.
    left: u64,
    /// The store's `remaining` after recording (0 unless all was recorded).
    budget: u64,
    /// How long the store refused for, µs; 0 if it did not.
    retry: u64,
    reset: u64,
}

impl Verdict {
    fn fresh(&self, now: u64, interval: u64) -> bool {
        self.refreshed_at
            .is_some_and(|at| at <= now && now < at.saturating_add(interval).max(self.denied_until))
    }

    /// Decides `cost` from this verdict, spending the budget. The decision is built as the
    /// policy builds its own (a whole-seconds policy answers in whole seconds here too).
    /// A peek (cost 0) asks for nothing, so it fits even while the store's refusal holds,
    /// as it does in every store and in [`Policy::decide`].
    fn decide(&mut self, now: u64, cost: u64, policy: &Policy, interval: u64) -> Decision {
        let reset = self.reset_at.saturating_sub(now);
        let retry = if cost > 0 && now < self.denied_until {
            self.denied_until - now
        } else if cost <= self.budget {
            self.budget -= cost;
            self.pending = self.pending.saturating_add(cost);
            return policy.decision_from_micros(true, self.budget, 0, reset);
        } else {
            let due = self.refreshed_at.unwrap_or(0).saturating_add(interval);
            due.saturating_sub(now)
        };
        let retry = retry.max(1);
        policy.decision_from_micros(false, self.budget, retry, reset.max(retry))
    }

    /// Takes in the answer of a refresh sent at `sent`.
    fn apply(&mut self, a: Answer, sent: u64, limit: u64) {
        // What is pending now was admitted while the refresh ran, from the old budget: the
        // store's `remaining` did not count it, so the new budget must.
        let meanwhile = self.pending;
        self.pending = self.pending.saturating_add(a.left);
        self.budget = a
            .budget
            .saturating_sub(meanwhile)
            .min(limit.saturating_sub(self.pending));
        self.denied_until = if a.retry > 0 {
            sent.saturating_add(a.retry)
        } else {
            0
        };
        self.refreshed_at = Some(sent);
        self.reset_at = sent.saturating_add(a.reset);
    }

    /// How long the entry is worth keeping, for eviction: stale and idle entries go first,
    /// entries with counts last, entries in flight never.
    fn keep_until(&self, interval: u64) -> u64 {
        if self.in_flight {
            u64::MAX
        } else if self.pending > 0 {
            u64::MAX - 1
        } else {
            let fresh_until = self
                .refreshed_at
                .map_or(0, |at| at.saturating_add(interval));
            fresh_until.max(self.denied_until).min(u64::MAX - 2)
        }
    }
}

impl<S, C: Clock> LocalVerdicts<S, C> {
    /// The wrapped store.
    pub fn get_ref(&self) -> &S {
        &self.store
    }

    /// Counters since it was built (shared by clones).
    pub fn stats(&self) -> LocalVerdictsStats {
        let sh = &self.shared;
        LocalVerdictsStats {
            store_calls: sh.store_calls.load(Ordering::Relaxed),
            refreshes: sh.refreshes.load(Ordering::Relaxed),
            allowed_locally: sh.allowed_locally.load(Ordering::Relaxed),
            denied_locally: sh.denied_locally.load(Ordering::Relaxed),
        }
    }

    /// Keys remembered now, stale ones not yet dropped included.
    pub fn len(&self) -> usize {
        self.shared.map.len()
    }

    /// Whether nothing is remembered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The cap on keys.
    pub fn max_keys(&self) -> usize {
        self.shared.cap.max_keys()
    }

    /// The refresh interval.
    pub fn interval(&self) -> Duration {
        Duration::from_micros(self.shared.interval)
    }

    /// Decides from the key's verdict when it is usable, else says how to get one. With
    /// `start` false (for `check_now`), nothing is inserted or started: `None` means "call
    /// `check`".
    fn route(
        &self,
        key: &[u8],
        policy: &Policy,
        cost: u64,
        now: u64,
        start: bool,
    ) -> Option<Route> {
        let Some(map_key) = KeyRef::short(policy.namespace(), key) else {
            return start.then_some(Route::Through);
        };
        let sh = &self.shared;
        loop {
            let map = sh.map.pin();
            let slot = match map.get(&map_key) {
                Some(slot) => slot,
                None if !start => return None,
                None => {
                    self.make_room(now);
                    let slot = || Arc::new(Slot::new(key, policy));
                    map.get_or_insert_with(map_key.to_owned(), slot)
                }
            };
            let mut v = lock(&slot.verdict);
            if v.removed {
                continue;
            }
            if v.in_flight && v.refreshed_at.is_none() {
                return start.then_some(Route::Through);
            }
            if v.in_flight || v.fresh(now, sh.interval) {
                let d = v.decide(now, cost, policy, sh.interval);
                let counter = if d.allowed {
                    &sh.allowed_locally
                } else {
                    &sh.denied_locally
                };
                counter.fetch_add(1, Ordering::Relaxed);
                return Some(Route::Local(d));
            }
            if !start {
                return None;
            }
            return Some(Route::Refresh(begin(slot, &mut v, now)));
        }
    }

    fn forget(&self, key: &[u8], policy: &Policy) {
        // Keys too long to keep are never stored (see `route`): nothing to hash or drop.
        let Some(map_key) = KeyRef::short(policy.namespace(), key) else {
            return;
        };
        if let Some(slot) = self.shared.map.pin().remove(&map_key) {
            lock(&slot.verdict).removed = true;
        }
    }

    /// Called before a new key goes in: at the cap, drops stale idle keys, then the least
    /// worth keeping down to 90% of the cap (see [`LocalVerdicts`]).
    fn make_room(&self, now: u64) {
        let sh = &self.shared;
        let interval = sh.interval;
        sh.cap.make_room(
            || sh.map.len(),
            |target| {
                sh.map.pin().retain(|_, slot| {
                    let mut v = lock(&slot.verdict);
                    let idle = !v.in_flight && v.pending == 0 && !v.fresh(now, interval);
                    v.removed |= idle;
                    !idle
                });
                evict_soonest(
                    &sh.map,
                    target,
                    now,
                    |slot: &Arc<Slot>| lock(&slot.verdict).keep_until(interval),
                    |slot, threshold| {
                        let mut v = lock(&slot.verdict);
                        let go = !v.in_flight && v.keep_until(interval) <= threshold;
                        v.removed |= go;
                        go
                    },
                );
            },
        );
    }
}

impl<S: Store, C: Clock> LocalVerdicts<S, C> {
    /// Sends every key's pending counts to the inner store now, by the same rule as a
    /// refresh (counts that do not fit stay as a debt), and takes in the new verdicts.
    /// Call it at shutdown, so the store hears of the last interval's admissions.
    ///
    /// Keys whose refresh is already in flight are skipped (that refresh records what it
    /// carries). On errors, the first is returned after every key was tried, and the
    /// failed keys keep their counts.
    pub async fn flush(&self) -> Result<(), Error> {
        let slots: Vec<Arc<Slot>> = self.shared.map.pin().values().cloned().collect();
        let mut first = None;
        for slot in slots {
            let refreshing = {
                let mut v = lock(&slot.verdict);
                if v.removed || v.in_flight || v.pending == 0 {
                    continue;
                }
                begin(&slot, &mut v, self.shared.clock.now_micros())
            };
            if let Err(e) = self.refresh(refreshing).await {
                first.get_or_insert(e);
            }
        }
        first.map_or(Ok(()), Err)
    }

    async fn refresh(&self, mut r: Refreshing) -> Result<(), Error> {
        self.shared.refreshes.fetch_add(1, Ordering::Relaxed);
        let answer = self.record(&r.slot, r.taken).await;
        r.done = true;
        let mut v = lock(&r.slot.verdict);
        v.in_flight = false;
        if v.removed {
            // Reset meanwhile: what was carried belongs to the forgotten state.
            return answer.map(drop);
        }
        match answer {
            Ok(a) => {
                v.apply(a, r.sent, r.slot.policy.limit());
                Ok(())
            }
            Err(e) => {
                v.pending = v.pending.saturating_add(r.taken);
                Err(e)
            }
        }
    }

    /// Records `taken` units in the inner store, or as much of them as fits.
    async fn record(&self, slot: &Slot, taken: u64) -> Result<Answer, Error> {
        let (key, policy) = (&*slot.key, &slot.policy);
        // `taken ≤ limit` by the invariant; never send a cost the store must refuse.
        let send = taken.min(policy.limit());
        let d = self.call(key, policy, send).await?;
        let reset = micros(d.reset_after);
        if d.allowed {
            let left = taken - send;
            let budget = if left == 0 { d.remaining } else { 0 };
            return Ok(Answer {
                left,
                budget,
                retry: 0,
                reset,
            });
        }
        let retry = d.retry_after.map_or(1, micros).max(1);
        let mut left = taken;
        let fits = d.remaining.min(send);
        if fits > 0 && self.call(key, policy, fits).await?.allowed {
            left -= fits;
        }
        Ok(Answer {
            left,
            budget: 0,
            retry,
            reset,
        })
    }

    async fn call(&self, key: &[u8], policy: &Policy, cost: u64) -> Result<Decision, Error> {
        self.shared.store_calls.fetch_add(1, Ordering::Relaxed);
        self.store.check(key, policy, cost).await
    }
}

impl Slot {
    fn new(key: &[u8], policy: &Policy) -> Self {
        Self {
            key: key.into(),
            policy: policy.clone(),
            verdict: Mutex::new(Verdict::default()),
        }
    }
}

/// Marks `v` (the verdict of `slot`) as refreshing and takes its pending counts.
fn begin(slot: &Arc<Slot>, v: &mut Verdict, now: u64) -> Refreshing {
    v.in_flight = true;
    Refreshing {
        slot: Arc::clone(slot),
        taken: std::mem::take(&mut v.pending),
        sent: now,
        done: false,
    }
}

impl<S: Store, C: Clock> Store for LocalVerdicts<S, C> {
    async fn check(&self, key: &[u8], policy: &Policy, cost: u64) -> Result<Decision, Error> {
        policy.check_cost(cost)?;
        loop {
            let now = self.shared.clock.now_micros();
            let refreshing = match self.route(key, policy, cost, now, true) {
                Some(Route::Local(d)) => return Ok(d),
                Some(Route::Refresh(r)) => r,
                Some(Route::Through) | None => return self.call(key, policy, cost).await,
            };
            let slot = Arc::clone(&refreshing.slot);
            self.refresh(refreshing).await?;
            let now = self.shared.clock.now_micros();
            let mut v = lock(&slot.verdict);
            if !v.removed {
                return Ok(v.decide(now, cost, policy, self.shared.interval));
            }
            // Reset while refreshing: start again on a new entry.
        }
    }

    /// Resets the inner store's key and forgets the local verdict, pending counts included.
    async fn reset(&self, key: &[u8], policy: &Policy) -> Result<(), Error> {
        self.forget(key, policy);
        let result = self.store.reset(key, policy).await;
        // A refresh sent while the reset was in flight may have read the old state.
        self.forget(key, policy);
        result
    }

    /// Answers from a usable verdict; `None` when a refresh is due (or the key has no
    /// verdict yet), which `check` then does.
    fn check_now(&self, key: &[u8], policy: &Policy, cost: u64) -> Option<Result<Decision, Error>> {
        if let Err(e) = policy.check_cost(cost) {
            return Some(Err(e));
        }
        let now = self.shared.clock.now_micros();
        match self.route(key, policy, cost, now, false)? {
            Route::Local(d) => Some(Ok(d)),
            Route::Through | Route::Refresh(_) => None,
        }
    }
}
