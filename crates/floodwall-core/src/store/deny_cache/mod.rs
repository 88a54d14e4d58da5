//! [`DenyCache`]: answers a key's repeated denials locally, without asking the store
//! ([`crate::guide::deny_cache`] says why it is exact).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::evict::Cap;
use super::{Checks, Op, Reply, Store, StoreExt};
use crate::{Clock, Decision, Error, Parameters, Policy, SystemClock};

mod all;
mod builder;
mod entry;
mod flight;
mod reserve;
mod route;

pub use builder::DenyCacheBuilder;
use entry::Map;
use flight::Wait;
use route::{Mode, Route};

/// A store combinator that answers repeated denials locally until they lapse: a client
/// hammering a shared store (Redis) past its quota then costs no round trip per request.
///
/// Once the inner store refuses a cost for a key, the same or a larger cost is refused
/// here until the refusal's `retry_after` has passed, held at most
/// [`max_refusal_hold`](DenyCacheBuilder::max_refusal_hold) before one check asks the
/// store again. It never answers "yes", and refuses only what the store would refuse
/// ([why](crate::guide::deny_cache)). Clones share the cache.
///
/// ```
/// use floodwall_core::{DenyCache, ManualClock, MemoryStore, Policy, StoreExt};
/// use std::time::Duration;
///
/// let clock = ManualClock::new(1_700_000_000_000_000);
/// // Any store works; in production the inner store is the shared one (Redis).
/// let shared = MemoryStore::builder().clock(clock.clone()).build();
/// let store = DenyCache::builder().clock(clock.clone()).build(shared);
/// let policy = Policy::gcra("login", "2/s burst 1".parse()?)?;
///
/// assert!(store.check_now(b"mallory", &policy, 1).unwrap()?.is_allowed());
/// // That admission used the burst up: until the next slot (500 ms later) mallory's
/// // checks are refused without reaching the inner store.
/// for _ in 0..100 {
///     let denied = store.check_now(b"mallory", &policy, 1).unwrap()?;
///     assert!(!denied.is_allowed());
/// }
/// clock.advance(Duration::from_millis(500));
/// assert!(store.check_now(b"mallory", &policy, 1).unwrap()?.is_allowed());
/// let stats = store.stats();
/// assert_eq!((stats.store_calls, stats.denied_locally), (2, 100));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// Its behaviour in detail: the [guide](crate::guide::deny_cache#behaviour-in-detail).
pub struct DenyCache<S, C: Clock = SystemClock> {
    store: S,
    cache: Arc<Cache<C>>,
}

/// The remembered refusals with their bounds and counters, shared by a cache's clones.
struct Cache<C> {
    map: Map,
    cap: Cap,
    clock: C,
    /// How long a check waits for another's answer, in µs.
    max_wait: u64,
    /// How long a refusal (not a ban) is answered locally without asking the store, in µs.
    max_refusal_hold: u64,
    /// How long a ban is answered locally, in µs.
    max_ban_hold: u64,
    /// Bumped by every reset: an answer to a check sent before a reset is not recorded.
    resets: AtomicU64,
    store_calls: AtomicU64,
    denied_locally: AtomicU64,
    waited: AtomicU64,
    gave_up: AtomicU64,
}

/// How much work the [`DenyCache`] saved.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct DenyCacheStats {
    /// Checks passed to the inner store (each one a round trip for a remote store).
    pub store_calls: u64,
    /// Checks refused from the cache, without calling the inner store.
    pub denied_locally: u64,
    /// Checks that waited for another check of their key in flight to the inner store
    /// after a cached refusal lapsed.
    pub waited: u64,
    /// Of those that `waited`, the checks that stopped at the bound
    /// ([`max_wait`](DenyCacheBuilder::max_wait)) and went to the store themselves.
    pub gave_up: u64,
}

impl DenyCache<(), SystemClock> {
    /// The default cap on cached keys: at ~100 bytes an entry, about 10 MB.
    pub const DEFAULT_MAX_KEYS: usize = 100_000;

    /// The default bound on a wait for another check's answer: 1 s (the Redis timeout).
    pub const DEFAULT_MAX_WAIT: Duration = Duration::from_secs(1);

    /// The default bound on holding a refusal locally without asking the store: 1 s.
    pub const DEFAULT_MAX_REFUSAL_HOLD: Duration = Duration::from_secs(1);

    /// The default bound on holding a ban locally: 1 s.
    pub const DEFAULT_MAX_BAN_HOLD: Duration = Duration::from_secs(1);

    /// A builder with the default cap and bound, and the system clock.
    pub fn builder() -> DenyCacheBuilder {
        DenyCacheBuilder {
            max_keys: Self::DEFAULT_MAX_KEYS,
            max_wait: Self::DEFAULT_MAX_WAIT,
            max_refusal_hold: Self::DEFAULT_MAX_REFUSAL_HOLD,
            max_ban_hold: Self::DEFAULT_MAX_BAN_HOLD,
            clock: SystemClock,
        }
    }

    /// Whether a policy's answers may be cached: the algorithms whose refusals are shown
    /// to stay true (all of this crate's).
    pub fn caches(policy: &Policy) -> bool {
        // No wildcard: a new algorithm must be shown to keep its refusals true
        // (tests/deny_cache.rs) before it is cached, so adding one stops the build here.
        match policy.parameters() {
            Parameters::Gcra { .. }
            | Parameters::TokenBucket { .. }
            | Parameters::LeakyBucket { .. }
            | Parameters::FixedWindow { .. }
            | Parameters::SlidingWindow { .. }
            | Parameters::SlidingLog { .. } => true,
        }
    }
}

impl<S, C: Clock> DenyCache<S, C> {
    /// The wrapped store.
    pub fn get_ref(&self) -> &S {
        &self.store
    }

    /// Counters since the cache was built (shared by clones).
    pub fn stats(&self) -> DenyCacheStats {
        DenyCacheStats {
            store_calls: self.cache.store_calls.load(Ordering::Relaxed),
            denied_locally: self.cache.denied_locally.load(Ordering::Relaxed),
            waited: self.cache.waited.load(Ordering::Relaxed),
            gave_up: self.cache.gave_up.load(Ordering::Relaxed),
        }
    }

    /// Keys remembered now, lapsed entries not yet dropped included.
    pub fn len(&self) -> usize {
        self.cache.map.len()
    }

    /// Whether nothing is remembered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The cap on keys.
    pub fn max_keys(&self) -> usize {
        self.cache.cap.max_keys()
    }

    /// The bound on a wait for another check's answer.
    pub fn max_wait(&self) -> Duration {
        Duration::from_micros(self.cache.max_wait)
    }

    /// The bound on holding a refusal locally without asking the store.
    pub fn max_refusal_hold(&self) -> Duration {
        Duration::from_micros(self.cache.max_refusal_hold)
    }

    /// The bound on holding a ban locally.
    pub fn max_ban_hold(&self) -> Duration {
        Duration::from_micros(self.cache.max_ban_hold)
    }
}

impl<S: Clone, C: Clock> Clone for DenyCache<S, C> {
    fn clone(&self) -> Self {
        Self {
            store: self.store.clone(),
            cache: Arc::clone(&self.cache),
        }
    }
}

impl<S: std::fmt::Debug, C: Clock> std::fmt::Debug for DenyCache<S, C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DenyCache")
            .field("store", &self.store)
            .field("keys", &self.len())
            .field("max_keys", &self.cache.cap.max_keys())
            .field("stats", &self.stats())
            .finish()
    }
}

impl<S: Store, C: Clock> DenyCache<S, C> {
    /// A check: a cached refusal answers here; else the store, its refusal learnt.
    async fn decide(&self, key: &[u8], policy: &Policy, cost: u64) -> Result<Decision, Error> {
        let mut route = self.route(key, policy, cost, Mode::Check)?;
        if let Route::Wait(flight) = route {
            let cache = &self.cache;
            // No wait where no timer could end it at the bound: to the store instead.
            if let Some(wait) = Wait::new(flight, &cache.clock) {
                cache.waited.fetch_add(1, Ordering::Relaxed);
                match wait.await {
                    Some(end) => {
                        if let Some(d) = self.landed(policy, end) {
                            return Ok(d);
                        }
                    }
                    None => {
                        cache.gave_up.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            route = self.route(key, policy, cost, Mode::Retry)?;
        }
        // Recorded when asked as `Route::Store`; its `lead`, dropped here or with this
        // future, lands its flight.
        let mut asked = match route {
            Route::Local(d, _) => return Ok(d),
            Route::Store { sent, epoch, lead } => Some((sent, epoch, lead)),
            Route::Wait(_) | Route::Through => None,
        };
        self.cache.store_calls.fetch_add(1, Ordering::Relaxed);
        let result = self.store.check(key, policy, cost).await;
        if let (Some((sent, epoch, lead)), Ok(d)) = (&mut asked, &result) {
            let end = self.record(key, policy, cost, *sent, *epoch, d);
            if let Some(lead) = lead {
                lead.end = end;
            }
        }
        drop(asked);
        result
    }

    /// Resets, unbans or refunds in the inner store, forgetting what the cache knew of the
    /// key (a refund may let the store admit sooner; a charge goes through untouched).
    async fn reset_through(&self, op: Op<'_>, key: &[u8], policy: &Policy) -> Result<Reply, Error> {
        self.forget(key, policy);
        let result = self.store.call(op).await;
        // A check sent meanwhile may have been answered from the old state: forget again,
        // and refuse to record answers to checks sent before now.
        self.forget(key, policy);
        result
    }

    /// `check_now`: as `decide`, but `None` while another check of the key is in flight
    /// after a lapse (`check` waits for it).
    fn decide_now(
        &self,
        key: &[u8],
        policy: &Policy,
        cost: u64,
    ) -> Option<Result<Decision, Error>> {
        // `Mode::Now` never leads a flight: no `Leading` to carry along.
        let sent = match self.route(key, policy, cost, Mode::Now) {
            Ok(Route::Local(d, _)) => return Some(Ok(d)),
            Ok(Route::Wait(_)) => return None,
            Ok(Route::Store { sent, epoch, .. }) => Some((sent, epoch)),
            Ok(Route::Through) => None,
            Err(e) => return Some(Err(e)),
        };
        let result = self.store.check_now(key, policy, cost)?;
        self.cache.store_calls.fetch_add(1, Ordering::Relaxed);
        if let (Some((sent, epoch)), Ok(d)) = (sent, &result) {
            self.record(key, policy, cost, sent, epoch, d);
        }
        Some(result)
    }

    /// Refused here when any policy has a cached refusal (`all.rs`); else the store
    /// decides all at once, and its refusals are cached.
    async fn decide_all(&self, checks: Checks<'_>) -> Result<Vec<Option<Decision>>, Error> {
        let sent = match self.route_all(&checks)? {
            Ok(local) => return Ok(local),
            Err(sent) => sent,
        };
        self.cache.store_calls.fetch_add(1, Ordering::Relaxed);
        let result = self.store.call(Op::CheckAll { checks }).await;
        let result = result.and_then(Reply::into_decisions);
        self.record_all(&checks, &sent, &result);
        result
    }

    fn decide_all_now(&self, checks: Checks<'_>) -> Option<Result<Vec<Option<Decision>>, Error>> {
        let sent = match self.route_all(&checks) {
            Ok(Ok(local)) => return Some(Ok(local)),
            Ok(Err(sent)) => sent,
            Err(e) => return Some(Err(e)),
        };
        let result = self
            .store
            .call_now(Op::CheckAll { checks })
            .map(|r| r?.into_decisions())?;
        self.cache.store_calls.fetch_add(1, Ordering::Relaxed);
        self.record_all(&checks, &sent, &result);
        Some(result)
    }
}

impl<S: Store, C: Clock> Store for DenyCache<S, C> {
    async fn call(&self, op: Op<'_>) -> Result<Reply, Error> {
        match op {
            Op::Check { key, policy, cost } => {
                self.decide(key, policy, cost).await.map(Reply::Decision)
            }
            Op::CheckAll { checks } => self.decide_all(checks).await.map(Reply::Decisions),
            Op::Reserve {
                key,
                policy,
                cost,
                max_wait,
            } => self
                .reserve_through(key, policy, cost, max_wait)
                .await
                .map(Reply::Reservation),
            Op::Cancel {
                key,
                policy,
                reservation,
            } => self
                .cancel_through(key, policy, &reservation)
                .await
                .map(Reply::Cancelled),
            Op::Adjust {
                key,
                policy,
                adjustment: crate::Adjustment::Refund(_),
            }
            | Op::Reset { key, policy }
            | Op::Unban { key, policy } => self.reset_through(op, key, policy).await,
            other => self.store.call(other).await,
        }
    }

    /// Checks as `call` would, but `None` while another check of the key is in flight
    /// after a lapse; operations other than checks go through `call`.
    fn call_now(&self, op: Op<'_>) -> Option<Result<Reply, Error>> {
        match op {
            Op::Check { key, policy, cost } => {
                Some(self.decide_now(key, policy, cost)?.map(Reply::Decision))
            }
            Op::CheckAll { checks } => Some(self.decide_all_now(checks)?.map(Reply::Decisions)),
            Op::Acquire { .. } => self.store.call_now(op),
            _ => None,
        }
    }
}
