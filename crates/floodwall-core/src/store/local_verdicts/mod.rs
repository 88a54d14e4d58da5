//! [`LocalVerdicts`]: each node decides from a local copy of a key's verdict and sends its
//! counts to the shared store in batches (`verdict.rs`, `refresh.rs`).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::evict::{Cap, evict_soonest};
use super::key::{KeyRef, MapKey};
use super::{Op, Reply, Store, lock};
use crate::{Clock, Decision, Error, Policy, SystemClock};

mod builder;
mod refresh;
mod verdict;

pub use builder::LocalVerdictsBuilder;
use refresh::{Refreshing, begin};
use verdict::KeyVerdict;

type Map = papaya::HashMap<MapKey, Arc<KeyVerdict>, ahash::RandomState>;

/// A store combinator that answers from a local copy of each key's verdict, refreshed at
/// most once per interval, sending what it admitted to the inner store in one call per key
/// per interval instead of one per request.
///
/// It is approximate, and opt-in: it delays counts without losing them, so it may admit
/// more than the quota; read [the local verdicts guide](crate::guide::local_verdicts)
/// before choosing the interval.
///
/// # Examples
///
/// ```
/// use floodwall_core::{LocalVerdicts, ManualClock, MemoryStore, Policy, StoreExt};
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
/// assert!(store.check(b"alice", &policy, 1).await?.is_allowed());
/// // For the next 100 ms alice is answered locally, without waiting...
/// for _ in 0..9 {
///     assert!(store.check_now(b"alice", &policy, 1).unwrap()?.is_allowed());
/// }
/// assert!(!store.check_now(b"alice", &policy, 1).unwrap()?.is_allowed());
/// // ...and the shared store has not heard of those 10 admissions yet.
/// assert_eq!(shared.check_now(b"alice", &policy, 0).unwrap()?.remaining, 10);
///
/// clock.advance(Duration::from_millis(100));
/// // A refresh is due: `check_now` cannot answer; `check` records the 10 in one call.
/// assert!(store.check_now(b"alice", &policy, 1).is_none());
/// assert!(!store.check(b"alice", &policy, 1).await?.is_allowed());
/// assert_eq!(shared.check_now(b"alice", &policy, 0).unwrap()?.remaining, 0);
///
/// let stats = store.stats();
/// assert_eq!((stats.store_calls, stats.refreshes), (2, 2));
/// assert_eq!((stats.allowed_locally, stats.denied_locally), (9, 1));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// [`flush`](Self::flush) it at shutdown. Its behaviour in detail: the
/// [guide](crate::guide::local_verdicts#behaviour-in-detail).
pub struct LocalVerdicts<S, C: Clock = SystemClock> {
    store: S,
    verdicts: Arc<Verdicts<C>>,
}

/// Every key's verdict, with the interval, cap and counters: shared by a store's clones.
struct Verdicts<C> {
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

/// What a [`LocalVerdicts`] has done since it was built.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LocalVerdictsStats {
    /// Calls to the inner store.
    pub store_calls: u64,
    /// Refreshes started, by checks and by [`flush`](LocalVerdicts::flush).
    pub refreshes: u64,
    /// Checks admitted from a local verdict without waiting for the store.
    pub allowed_locally: u64,
    /// Checks refused from a local verdict without waiting for the store.
    pub denied_locally: u64,
}

impl LocalVerdicts<(), SystemClock> {
    /// The default refresh interval.
    pub const DEFAULT_INTERVAL: Duration = Duration::from_millis(100);
    /// The longest refresh interval accepted.
    pub const MAX_INTERVAL: Duration = Duration::from_secs(3600);
    /// The default cap on keys (some tens of MB).
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

impl<S: Clone, C: Clock> Clone for LocalVerdicts<S, C> {
    fn clone(&self) -> Self {
        Self {
            store: self.store.clone(),
            verdicts: Arc::clone(&self.verdicts),
        }
    }
}

impl<S: std::fmt::Debug, C: Clock> std::fmt::Debug for LocalVerdicts<S, C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalVerdicts")
            .field("store", &self.store)
            .field("interval", &Duration::from_micros(self.verdicts.interval))
            .field("keys", &self.len())
            .field("max_keys", &self.verdicts.cap.max_keys())
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

impl<S, C: Clock> LocalVerdicts<S, C> {
    /// The wrapped store.
    pub fn get_ref(&self) -> &S {
        &self.store
    }

    /// Counters since it was built (shared by clones).
    pub fn stats(&self) -> LocalVerdictsStats {
        let vs = &self.verdicts;
        LocalVerdictsStats {
            store_calls: vs.store_calls.load(Ordering::Relaxed),
            refreshes: vs.refreshes.load(Ordering::Relaxed),
            allowed_locally: vs.allowed_locally.load(Ordering::Relaxed),
            denied_locally: vs.denied_locally.load(Ordering::Relaxed),
        }
    }

    /// Keys remembered now, stale ones not yet dropped included.
    pub fn len(&self) -> usize {
        self.verdicts.map.len()
    }

    /// Whether nothing is remembered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The cap on keys.
    pub fn max_keys(&self) -> usize {
        self.verdicts.cap.max_keys()
    }

    /// The refresh interval.
    pub fn interval(&self) -> Duration {
        Duration::from_micros(self.verdicts.interval)
    }

    /// Decides from the key's verdict when usable, else says how to get one. With `start`
    /// false (`check_now`) nothing is started: `None` means "call `check`".
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
        let vs = &self.verdicts;
        loop {
            let map = vs.map.pin();
            let kv = match map.get(&map_key) {
                Some(kv) => kv,
                None if !start => return None,
                None => {
                    self.make_room(now);
                    let kv = || Arc::new(KeyVerdict::new(key, policy));
                    map.get_or_insert_with(map_key.to_owned(), kv)
                }
            };
            let mut v = lock(&kv.verdict);
            if v.removed {
                continue;
            }
            if v.in_flight && v.refreshed_at.is_none() {
                return start.then_some(Route::Through);
            }
            if v.in_flight || v.fresh(now, vs.interval) {
                let d = v.decide(now, cost, policy, vs.interval);
                let counter = if d.is_allowed() {
                    &vs.allowed_locally
                } else {
                    &vs.denied_locally
                };
                counter.fetch_add(1, Ordering::Relaxed);
                return Some(Route::Local(d));
            }
            if !start {
                return None;
            }
            return Some(Route::Refresh(begin(kv, &mut v, now)));
        }
    }

    fn forget(&self, key: &[u8], policy: &Policy) {
        // Keys too long to keep are never stored (see `route`): nothing to hash or drop.
        let Some(map_key) = KeyRef::short(policy.namespace(), key) else {
            return;
        };
        if let Some(kv) = self.verdicts.map.pin().remove(&map_key) {
            lock(&kv.verdict).removed = true;
        }
    }

    /// Called before a new key goes in: at the cap, drops the keys least worth keeping.
    fn make_room(&self, now: u64) {
        let vs = &self.verdicts;
        let interval = vs.interval;
        vs.cap.make_room(
            || vs.map.len(),
            |target| {
                vs.map.pin().retain(|_, kv| {
                    let mut v = lock(&kv.verdict);
                    let idle = !v.in_flight && v.pending == 0 && !v.fresh(now, interval);
                    v.removed |= idle;
                    !idle
                });
                evict_soonest(
                    &vs.map,
                    target,
                    now,
                    |kv: &Arc<KeyVerdict>| lock(&kv.verdict).keep_until(interval),
                    |kv, threshold| {
                        let mut v = lock(&kv.verdict);
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
    /// A check: a usable verdict answers here; else a refresh, or the store.
    async fn decide(&self, key: &[u8], policy: &Policy, cost: u64) -> Result<Decision, Error> {
        policy.check_cost(cost)?;
        loop {
            let now = self.verdicts.clock.now_micros();
            let refreshing = match self.route(key, policy, cost, now, true) {
                Some(Route::Local(d)) => return Ok(d),
                Some(Route::Refresh(r)) => r,
                Some(Route::Through) | None => return self.check_through(key, policy, cost).await,
            };
            let kv = Arc::clone(&refreshing.kv);
            self.refresh(refreshing).await?;
            let now = self.verdicts.clock.now_micros();
            let mut v = lock(&kv.verdict);
            if !v.removed {
                return Ok(v.decide(now, cost, policy, self.verdicts.interval));
            }
            // Reset while refreshing: start again on a new entry.
        }
    }

    /// Answers from a usable verdict; `None` when `check` must refresh first.
    fn decide_now(
        &self,
        key: &[u8],
        policy: &Policy,
        cost: u64,
    ) -> Option<Result<Decision, Error>> {
        if let Err(e) = policy.check_cost(cost) {
            return Some(Err(e));
        }
        let now = self.verdicts.clock.now_micros();
        match self.route(key, policy, cost, now, false)? {
            Route::Local(d) => Some(Ok(d)),
            Route::Through | Route::Refresh(_) => None,
        }
    }
}

impl<S: Store, C: Clock> Store for LocalVerdicts<S, C> {
    /// Checks answer from the verdicts; every other operation goes to the inner store. A
    /// charge or refund forgets the key's verdict after it; a reset or an unban before
    /// and after (a refresh sent meanwhile may have read the old state).
    async fn call(&self, op: Op<'_>) -> Result<Reply, Error> {
        match op {
            Op::Check { key, policy, cost } => {
                return self.decide(key, policy, cost).await.map(Reply::Decision);
            }
            Op::Reset { key, policy } | Op::Unban { key, policy } => {
                self.forget(key, policy);
                let result = self.store.call(op).await;
                self.forget(key, policy);
                return result;
            }
            _ => {}
        }
        self.verdicts.store_calls.fetch_add(1, Ordering::Relaxed);
        let result = self.store.call(op).await;
        if let Op::Adjust { key, policy, .. } = op {
            self.forget(key, policy);
        }
        result
    }

    /// A check from a usable verdict; `None` otherwise: `call` does it.
    fn call_now(&self, op: Op<'_>) -> Option<Result<Reply, Error>> {
        match op {
            Op::Check { key, policy, cost } => {
                Some(self.decide_now(key, policy, cost)?.map(Reply::Decision))
            }
            _ => None,
        }
    }
}
