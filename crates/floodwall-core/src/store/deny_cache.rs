//! [`DenyCache`]: answers a key's repeated denials locally, without asking the store.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use papaya::{Compute, Operation};

use super::evict::{Cap, evict_soonest};
use super::key::{KeyBuf, MapKey};
use super::{Store, lock, micros};
use crate::{Clock, Decision, Error, Parameters, Policy, Rounding, SystemClock};

/// A fact learnt from the store: any cost `>= cost` is refused until `until` (local µs).
#[derive(Debug, Clone)]
struct Entry {
    until: u64,
    cost: u64,
    /// When the store said the key would be back to full, as a lower bound.
    reset_at: u64,
    /// Once the fact has lapsed: the one check of the key in flight to the store, whose
    /// answer checks of a cost `>=` its own wait for.
    flight: Option<Arc<Flight>>,
}

impl Entry {
    /// The same fact (a flight set on it since does not count).
    fn same_fact(&self, other: &Entry) -> bool {
        (self.until, self.cost, self.reset_at) == (other.until, other.cost, other.reset_at)
    }

    fn led_by(&self, flight: &Arc<Flight>) -> bool {
        self.flight.as_ref().is_some_and(|f| Arc::ptr_eq(f, flight))
    }
}

/// A check of a key whose cached refusal lapsed, in flight to the inner store: the
/// checks of that key arriving meanwhile with a cost `>= cost` wait for its outcome, until
/// `deadline` at the latest.
#[derive(Debug)]
struct Flight {
    cost: u64,
    /// Local µs from which the leader is deemed stuck (see [`DenyCacheBuilder::max_wait`]).
    deadline: u64,
    landing: Mutex<Landing>,
}

#[derive(Debug, Default)]
struct Landing {
    outcome: Option<Outcome>,
    /// One slot per waiting check, emptied when it stops waiting.
    waiters: Vec<Option<Waker>>,
}

/// How a [`Flight`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    /// The store refused: any cost `>=` the flight's is refused until `until`, as for an
    /// entry (local µs, from the flight's send).
    Refused { until: u64, reset_at: u64 },
    /// Admitted, failed, cancelled or reset meanwhile: each waiting check decides again.
    Open,
}

impl Flight {
    fn new(cost: u64, deadline: u64) -> Self {
        Self {
            cost,
            deadline,
            landing: Mutex::new(Landing::default()),
        }
    }

    /// Whether the leader has been out so long it may never be polled again: nobody waits
    /// for it any more, and the next check of the key leads a flight of its own.
    fn stuck(&self, now: u64) -> bool {
        now >= self.deadline
    }

    /// Sets the outcome (the first one set stays) and wakes every waiting check.
    fn land(&self, outcome: Outcome) {
        let waiters = {
            let mut l = lock(&self.landing);
            if l.outcome.is_some() {
                return;
            }
            l.outcome = Some(outcome);
            std::mem::take(&mut l.waiters)
        };
        for waker in waiters.into_iter().flatten() {
            waker.wake();
        }
    }
}

/// A check waiting for a [`Flight`] to land: `Some` outcome, or `None` once the flight's
/// deadline has passed (on the cache's clock, or on tokio's timer where there is one).
struct Wait<'a, C> {
    flight: Arc<Flight>,
    slot: Option<usize>,
    clock: &'a C,
    /// Wakes this check at the deadline, should neither the leader nor anything else.
    #[cfg(feature = "tokio")]
    timer: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<'a, C: Clock> Wait<'a, C> {
    fn new(flight: Arc<Flight>, clock: &'a C) -> Self {
        Self {
            flight,
            slot: None,
            clock,
            #[cfg(feature = "tokio")]
            timer: None,
        }
    }

    /// Whether tokio's timer says the deadline has passed; arms it on the first call, when
    /// in a tokio runtime (its timer enabled, as the Redis store's timeout needs too).
    #[cfg(feature = "tokio")]
    fn timed_out(&mut self, now: u64, cx: &mut Context<'_>) -> bool {
        if self.timer.is_none() && tokio::runtime::Handle::try_current().is_ok() {
            let left = Duration::from_micros(self.flight.deadline.saturating_sub(now));
            self.timer = Some(Box::pin(tokio::time::sleep(left)));
        }
        self.timer
            .as_mut()
            .is_some_and(|t| t.as_mut().poll(cx).is_ready())
    }

    /// Without a timer, the deadline is seen when this check is polled again, or when
    /// another check of the key arrives after it and takes the flight over.
    #[cfg(not(feature = "tokio"))]
    fn timed_out(&mut self, _now: u64, _cx: &mut Context<'_>) -> bool {
        false
    }
}

impl<C: Clock> Future for Wait<'_, C> {
    type Output = Option<Outcome>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Outcome>> {
        let this = self.get_mut();
        let flight = Arc::clone(&this.flight);
        let mut l = lock(&flight.landing);
        if let Some(outcome) = l.outcome {
            this.slot = None;
            return Poll::Ready(Some(outcome));
        }
        let now = this.clock.now_micros();
        if flight.stuck(now) || this.timed_out(now, cx) {
            // `Drop` empties the slot.
            return Poll::Ready(None);
        }
        match this.slot {
            Some(i) => match &mut l.waiters[i] {
                Some(w) if w.will_wake(cx.waker()) => {}
                w => *w = Some(cx.waker().clone()),
            },
            None => {
                this.slot = Some(l.waiters.len());
                l.waiters.push(Some(cx.waker().clone()));
            }
        }
        Poll::Pending
    }
}

impl<C> Drop for Wait<'_, C> {
    fn drop(&mut self) {
        if let Some(i) = self.slot
            && let Some(w) = lock(&self.flight.landing).waiters.get_mut(i)
        {
            *w = None;
        }
    }
}

/// Held by the check that leads a [`Flight`]: lands it however that check ends (answered,
/// failed, or dropped while in flight), so no waiting check is left behind.
struct Leading<'a, C> {
    shared: &'a Shared<C>,
    key: MapKey,
    flight: Arc<Flight>,
    outcome: Outcome,
}

impl<C> Drop for Leading<'_, C> {
    fn drop(&mut self) {
        // The lapsed entry carrying the flight goes, unless an answer replaced it.
        let _ = self
            .shared
            .map
            .pin()
            .remove_if(&self.key, |_, e| e.led_by(&self.flight));
        self.flight.land(self.outcome);
    }
}

type Map = papaya::HashMap<MapKey, Entry, ahash::RandomState>;

/// A store combinator that answers repeated denials locally until they lapse.
///
/// Wraps any [`Store`]; the wrapper is a `Store` again. Clones share the cache (and clone
/// the inner store), so one cache serves every clone of a tower layer.
///
/// A client hammering a shared store (Redis) well past its quota costs a round trip and a
/// script per request, every one of them a denial. Those denials are predictable: once the
/// store has said "no for this cost, retry after `d`", the answer stays "no" for at least
/// `d`, whatever anyone else does meanwhile. This combinator remembers that fact per
/// (policy, key) and answers from memory until it lapses.
///
/// ```
/// use floodwall_core::{DenyCache, ManualClock, MemoryStore, Policy, Store};
/// use std::time::Duration;
///
/// let clock = ManualClock::new(1_700_000_000_000_000);
/// // Any store works; in production the inner store is the shared one (Redis).
/// let shared = MemoryStore::builder().clock(clock.clone()).build();
/// let store = DenyCache::builder().clock(clock.clone()).build(shared);
/// let policy = Policy::gcra("login", "2/s burst 1".parse()?)?;
///
/// assert!(store.check_now(b"mallory", &policy, 1).unwrap()?.allowed);
/// // That admission used the burst up: until the next slot (500 ms later) mallory's
/// // checks are refused without reaching the inner store.
/// for _ in 0..100 {
///     let denied = store.check_now(b"mallory", &policy, 1).unwrap()?;
///     assert!(!denied.allowed);
/// }
/// clock.advance(Duration::from_millis(500));
/// assert!(store.check_now(b"mallory", &policy, 1).unwrap()?.allowed);
/// let stats = store.stats();
/// assert_eq!((stats.store_calls, stats.denied_locally), (2, 100));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Exactness
///
/// The cache never answers "yes": it can only refuse locally, and it refuses a request
/// only when the store would refuse it too. Two facts make that true.
///
/// 1. **A refusal stays true.** For every algorithm of this crate, if the store refuses a
///    cost `c` at time `s` with `retry_after = d`, it refuses every cost `≥ c` at every
///    time in `[s, s + d)`, whatever other requests it admits meanwhile: admissions only
///    add to a key's state (a later TAT, fewer tokens, a fuller funnel, higher counters,
///    more log entries), and time only drains it at the rate `retry_after` was computed
///    with. `tests/deny_cache.rs` checks this property against [`Policy::decide`] on random
///    states with other nodes' admissions interleaved, for all six algorithms.
///    For GCRA, the buckets and the fixed window an *admission* also tells when the next
///    request would be refused (`remaining` + 1 units are refused until a time worked out
///    from `reset_after` and the policy's [`Parameters`]); the cache records that too, so
///    a flood costs one store call per admitted request instead of two.
/// 2. **The local window sits inside the store's.** The cache records the local time at
///    which the request was *sent*, plus `retry_after`. The store decided at some instant
///    after the send, so the local window ends no later than the store's; and an entry
///    exists only after the answer came back, so it starts no earlier.
///
/// **One check in flight when a refusal lapses.** Once a cached fact has lapsed, the next
/// check of the key goes to the store (the *leader*), and the checks of that key arriving
/// before its answer with a cost `>=` the leader's wait for that answer instead of going
/// to the store too (a flood's requests arrive together: without this, each lapse cost a
/// store call per request in flight). If the store refused the leader, they are refused
/// too, which is exact in the sense any two concurrent requests are: the store refused
/// cost `c` at an instant `t` between the leader's send `s` and its answer, and by fact 1
/// every cost `>= c` stays refused from `t` until `s + retry_after`. A waiting check is in
/// progress from its arrival `a` until after the leader's answer, so the later of `a` and
/// `t` is an instant inside its own request at which the store refuses it, provided that
/// instant is before `s + retry_after`; the cache checks this when the check wakes
/// (`a` is earlier), reports `retry_after` until `s + retry_after`, and otherwise lets the
/// check decide again. If the leader was admitted, failed or was dropped (cancelled), or
/// the key was reset meanwhile, each waiting check decides again, once, as a check
/// arriving after the answer would: refused from a fact the leader's admission recorded
/// (the cost it leaves no room for), or sent to the store. [`check_now`](Store::check_now)
/// never waits: it returns `None` while a leader is out. Checks cheaper than the leader's
/// go to the store at once.
///
/// **A wait is bounded** by [`max_wait`](DenyCacheBuilder::max_wait) (1 s by default),
/// counted on the cache's clock from the leader's send. A leader that is answered, fails
/// or is dropped lands its flight at once; but one that is never polled again and not
/// dropped either (a `select!` that moved on, a task stuck elsewhere) would hold its
/// followers forever. Past the bound, a waiting check stops waiting and goes to the store
/// itself (counted in [`DenyCacheStats::gave_up`]), and a check arriving afterwards leads
/// a flight of its own instead of following the stuck one. Going to the store, rather than
/// failing with an error, keeps the cache exact: the check is then decided as it would be
/// without the cache, where an error would refuse (or fail open on) a request the store
/// was never asked about. With the `tokio` feature, inside a tokio runtime, tokio's timer
/// wakes a waiting check at the bound; without it, the bound is seen the next time the
/// check is polled or another check of the key arrives.
///
/// **Fallback answers are not remembered.** A [`Decision::fallback`] (a
/// [`Fallback`](crate::resilience::Fallback)'s answer while the store fails: this node's
/// share of the quota, or fail-open) says nothing of the shared state, and a refusal from
/// a share read with the policy's own numbers would outlast the outage. They pass through
/// unrecorded and refuse no waiting check, so the first check after the store is back is
/// the store's to decide.
///
/// What this assumes, and where it is not exact:
/// - **Nobody resets or deletes the key elsewhere.** [`reset`](Store::reset) through this
///   cache forgets the local entry; a reset through another node, a `DEL` in Redis or an
///   evicted key in the store makes the state fresh again, and this cache keeps refusing
///   until `retry_after` lapses.
/// - **Time moves at one rate.** The local clock must measure elapsed time as the store's
///   does ([`SystemClock`] is monotonic); a local clock running slow by a few parts per
///   million ends a window of `d` that many parts per million of `d` late.
/// - **Policies rounded to whole seconds** ([`Rounding::WholeSeconds`],
///   [`Policy::redis_cell`]) are never cached: their `retry_after` is rounded up, so a
///   window built from it could outlast the store's.
/// - A local refusal reports `remaining` 0 (the store may still hold units, fewer than the
///   cost asked for), `retry_after` until the local window ends (the store's own answer
///   could be later, never earlier) and a `reset_after` recorded from the store's answer.
///
/// Peeks (cost 0) and requests cheaper than the cost refused always go to the store.
///
/// # Bounded
///
/// At most [`max_keys`](DenyCacheBuilder::max_keys) entries are kept. An entry that
/// reaches the cap first drops every lapsed entry; if more than 90% of the cap is still
/// live, the entries that lapse soonest (those saving the fewest round trips) are dropped
/// until 90% remain. Dropping an entry never changes a decision, it only sends the next
/// request to the store.
pub struct DenyCache<S, C: Clock = SystemClock> {
    store: S,
    shared: Arc<Shared<C>>,
}

struct Shared<C> {
    map: Map,
    cap: Cap,
    clock: C,
    /// How long a check waits for another's answer, in µs.
    max_wait: u64,
    /// Bumped by every reset: an answer to a check sent before a reset is not recorded.
    resets: AtomicU64,
    store_calls: AtomicU64,
    denied_locally: AtomicU64,
    waited: AtomicU64,
    gave_up: AtomicU64,
}

/// How much work the [`DenyCache`] saved: read it to see whether caching pays for a
/// workload (a flood of one key should be nearly all `denied_locally`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct DenyCacheStats {
    /// Checks passed to the inner store (each one a round trip for a remote store).
    pub store_calls: u64,
    /// Checks refused from the cache, without calling the inner store (including those
    /// refused by the answer they waited for).
    pub denied_locally: u64,
    /// Checks that waited for another check of their key in flight to the inner store
    /// after a cached refusal lapsed (see *Exactness* in [`DenyCache`]): those refused by
    /// its answer are in `denied_locally` too, the others went on as usual.
    pub waited: u64,
    /// Of those that `waited`, the checks that stopped at the bound
    /// ([`max_wait`](DenyCacheBuilder::max_wait)) and went to the store themselves: a
    /// leader was out that long. Not 0 means a check of the cache was left unpolled
    /// midway (or the inner store's calls outlast the bound).
    pub gave_up: u64,
}

/// Sets a [`DenyCache`]'s cap or clock before wrapping a store.
#[derive(Debug, Clone)]
pub struct DenyCacheBuilder<C = SystemClock> {
    max_keys: usize,
    max_wait: Duration,
    clock: C,
}

impl DenyCache<(), SystemClock> {
    /// The default cap on cached keys: at ~100 bytes an entry, about 10 MB.
    pub const DEFAULT_MAX_KEYS: usize = 100_000;

    /// The default bound on a wait for another check's answer: 1 s, the Redis store's
    /// default timeout (and `resilience::Timeout`'s), so a leader that is polled answers
    /// or fails before it.
    pub const DEFAULT_MAX_WAIT: Duration = Duration::from_secs(1);

    /// A builder with the default cap and bound, and the system clock.
    pub fn builder() -> DenyCacheBuilder {
        DenyCacheBuilder {
            max_keys: Self::DEFAULT_MAX_KEYS,
            max_wait: Self::DEFAULT_MAX_WAIT,
            clock: SystemClock,
        }
    }

    /// Whether a policy's answers may be cached: exact microseconds only, and the
    /// algorithms whose refusals are shown to stay true (all of this crate's).
    pub fn caches(policy: &Policy) -> bool {
        matches!(policy.rounding(), Rounding::Micros)
            // No wildcard: a new algorithm must be shown to keep its refusals true
            // (tests/deny_cache.rs) before it is cached, so adding one stops the build here.
            && match policy.parameters() {
                Parameters::Gcra { .. }
                | Parameters::TokenBucket { .. }
                | Parameters::LeakyBucket { .. }
                | Parameters::FixedWindow { .. }
                | Parameters::SlidingWindow { .. }
                | Parameters::SlidingLog { .. } => true,
            }
    }
}

impl<S: Store> DenyCache<S, SystemClock> {
    /// Wraps `store` with the default cap and the system clock.
    pub fn new(store: S) -> Self {
        DenyCache::builder().build(store)
    }
}

impl<C: Clock> DenyCacheBuilder<C> {
    /// The most keys remembered (at least 1); see [`DenyCache`] for what happens at the cap.
    pub fn max_keys(mut self, max_keys: usize) -> Self {
        self.max_keys = max_keys;
        self
    }

    /// The longest a check waits for another check of its key in flight to the store
    /// (see *Exactness* in [`DenyCache`]) before it goes to the store itself; default
    /// [`DenyCache::DEFAULT_MAX_WAIT`]. Keep it at least the inner store's own timeout, or
    /// checks stop waiting for leaders that are merely slow (exact still, but they cost a
    /// store call each). Zero turns waiting off.
    pub fn max_wait(mut self, max_wait: Duration) -> Self {
        self.max_wait = max_wait;
        self
    }

    /// The clock local windows are measured with: a [`ManualClock`](crate::ManualClock)
    /// in tests. It must advance at the store's rate (see [`DenyCache`]).
    pub fn clock<C2: Clock>(self, clock: C2) -> DenyCacheBuilder<C2> {
        DenyCacheBuilder {
            max_keys: self.max_keys,
            max_wait: self.max_wait,
            clock,
        }
    }

    /// Wraps `store`.
    pub fn build<S: Store>(self, store: S) -> DenyCache<S, C> {
        DenyCache {
            store,
            shared: Arc::new(Shared {
                map: papaya::HashMap::builder()
                    .hasher(ahash::RandomState::new())
                    .build(),
                cap: Cap::new(self.max_keys),
                clock: self.clock,
                max_wait: micros(self.max_wait),
                resets: AtomicU64::new(0),
                store_calls: AtomicU64::new(0),
                denied_locally: AtomicU64::new(0),
                waited: AtomicU64::new(0),
                gave_up: AtomicU64::new(0),
            }),
        }
    }
}

impl<S: Clone, C: Clock> Clone for DenyCache<S, C> {
    fn clone(&self) -> Self {
        Self {
            store: self.store.clone(),
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<S: std::fmt::Debug, C: Clock> std::fmt::Debug for DenyCache<S, C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DenyCache")
            .field("store", &self.store)
            .field("keys", &self.len())
            .field("max_keys", &self.shared.cap.max_keys())
            .field("stats", &self.stats())
            .finish()
    }
}

/// What to do with a check.
enum Route<'a, C> {
    /// Refused from the cache.
    Local(Decision),
    /// Ask the store; record its answer if the reset epoch is still `epoch`. With `lead`,
    /// this check leads the flight of a lapsed entry.
    Store {
        sent: u64,
        epoch: u64,
        lead: Option<Leading<'a, C>>,
    },
    /// Another check of the key is in flight after a lapse: wait for its answer.
    Wait(Arc<Flight>),
    /// Ask the store and record nothing (a peek, or a policy the cache cannot serve).
    Through,
}

/// How a check may route around a lapsed entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// `check`: lead a flight, or wait for one.
    Check,
    /// `check` after waiting once: lead a flight, never wait again.
    Retry,
    /// `check_now`: neither (leading is for calls that wait for the store); a flight
    /// out is answered [`Route::Wait`], which means "call `check`".
    Now,
}

impl<S, C: Clock> DenyCache<S, C> {
    /// The wrapped store.
    pub fn get_ref(&self) -> &S {
        &self.store
    }

    /// Counters since the cache was built (shared by clones).
    pub fn stats(&self) -> DenyCacheStats {
        DenyCacheStats {
            store_calls: self.shared.store_calls.load(Ordering::Relaxed),
            denied_locally: self.shared.denied_locally.load(Ordering::Relaxed),
            waited: self.shared.waited.load(Ordering::Relaxed),
            gave_up: self.shared.gave_up.load(Ordering::Relaxed),
        }
    }

    /// Keys remembered now, lapsed entries not yet dropped included.
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

    /// The bound on a wait for another check's answer.
    pub fn max_wait(&self) -> Duration {
        Duration::from_micros(self.shared.max_wait)
    }

    fn route(
        &self,
        key: &[u8],
        policy: &Policy,
        cost: u64,
        mode: Mode,
    ) -> Result<Route<'_, C>, Error> {
        policy.check_cost(cost)?;
        if cost == 0 || !DenyCache::caches(policy) {
            return Ok(Route::Through);
        }
        let sh = &self.shared;
        // Read the epoch before the clock: a reset after this point is seen by `record`.
        let epoch = sh.resets.load(Ordering::SeqCst);
        let now = sh.clock.now_micros();
        let buf = KeyBuf::new(key);
        let map_key = buf.as_ref(policy.namespace());
        let map = sh.map.pin();
        let store = Route::Store {
            sent: now,
            epoch,
            lead: None,
        };
        let Some(e) = map.get(&map_key) else {
            return Ok(store);
        };
        if now < e.until {
            if cost < e.cost {
                return Ok(store);
            }
            sh.denied_locally.fetch_add(1, Ordering::Relaxed);
            return Ok(Route::Local(refusal(policy, now, e.until, e.reset_at)));
        }
        // Lapsed: wait for the check in flight, or lead one (taking over from a leader out
        // past its deadline).
        if let Some(f) = &e.flight
            && !f.stuck(now)
        {
            return Ok(follow(f, cost, mode).unwrap_or(store));
        }
        if mode == Mode::Now {
            return Ok(store);
        }
        let flight = Arc::new(Flight::new(cost, now.saturating_add(sh.max_wait)));
        let claim = map.compute(map_key.to_owned(), |current| match current {
            Some((_, e)) if e.until <= now => match &e.flight {
                Some(f) if !f.stuck(now) => Operation::Abort(Some(Arc::clone(f))),
                _ => Operation::Insert(Entry {
                    flight: Some(Arc::clone(&flight)),
                    ..e.clone()
                }),
            },
            // Renewed or removed meanwhile: ask the store.
            _ => Operation::Abort(None),
        });
        Ok(match claim {
            Compute::Updated { old: (_, old), .. } => {
                // Whoever still waits for a stuck leader goes on now.
                if let Some(stuck) = &old.flight {
                    stuck.land(Outcome::Open);
                }
                Route::Store {
                    sent: now,
                    epoch,
                    lead: Some(Leading {
                        shared: sh,
                        key: map_key.to_owned(),
                        flight,
                        outcome: Outcome::Open,
                    }),
                }
            }
            Compute::Aborted(Some(f)) => follow(&f, cost, mode).unwrap_or(store),
            _ => store,
        })
    }

    /// A waiting check's answer once its flight landed: `Some` refusal, or `None` to
    /// decide again.
    fn landed(&self, policy: &Policy, outcome: Outcome) -> Option<Decision> {
        let Outcome::Refused { until, reset_at } = outcome else {
            return None;
        };
        let now = self.shared.clock.now_micros();
        (now < until).then(|| {
            self.shared.denied_locally.fetch_add(1, Ordering::Relaxed);
            refusal(policy, now, until, reset_at)
        })
    }

    /// Learns from the store's answer to a check of `cost` sent at `sent`.
    fn record(&self, key: &[u8], policy: &Policy, cost: u64, sent: u64, epoch: u64, d: &Decision) {
        // A fallback's answer (a node's share of the quota, fail-open) is no fact about the
        // shared state: remembered, it would outlast the outage, read with the policy's
        // numbers rather than the share's.
        let fact = if d.fallback {
            None
        } else if d.allowed {
            exhausted(policy, d)
        } else {
            d.retry_after.map(|r| (cost, micros(r)))
        };
        let Some((cost, wait)) = fact else { return };
        let sh = &self.shared;
        let now = sh.clock.now_micros();
        let until = sent.saturating_add(wait);
        if until <= now || sh.resets.load(Ordering::SeqCst) != epoch {
            return;
        }
        let entry = Entry {
            until,
            cost,
            reset_at: sent.saturating_add(micros(d.reset_after)),
            flight: None,
        };
        let buf = KeyBuf::new(key);
        let map_key = buf.as_ref(policy.namespace());
        let map = sh.map.pin();
        if map.get(&map_key).is_none() {
            self.make_room(now);
        }
        map.insert(map_key.to_owned(), entry.clone());
        // A reset that ran between the epoch check and the insert must not be undone.
        if sh.resets.load(Ordering::SeqCst) != epoch {
            let _ = map.remove_if(&map_key, |_, e| e.same_fact(&entry));
        }
    }

    /// What a leader's answer tells the checks waiting for it.
    fn outcome(&self, sent: u64, epoch: u64, d: &Decision) -> Outcome {
        match d.retry_after {
            Some(r)
                if !d.allowed
                    && !d.fallback
                    && self.shared.resets.load(Ordering::SeqCst) == epoch =>
            {
                Outcome::Refused {
                    until: sent.saturating_add(micros(r)),
                    reset_at: sent.saturating_add(micros(d.reset_after)),
                }
            }
            _ => Outcome::Open,
        }
    }

    fn forget(&self, key: &[u8], policy: &Policy) {
        let sh = &self.shared;
        sh.resets.fetch_add(1, Ordering::SeqCst);
        let buf = KeyBuf::new(key);
        let _ = sh.map.pin().remove(&buf.as_ref(policy.namespace()));
    }

    /// Called before a new key goes in: at the cap, drops lapsed entries, then the ones
    /// lapsing soonest down to 90% of the cap.
    fn make_room(&self, now: u64) {
        let sh = &self.shared;
        sh.cap.make_room(
            || sh.map.len(),
            |target| {
                sh.map.pin().retain(|_, e| e.until > now);
                evict_soonest(&sh.map, target, now, |e: &Entry| e.until, |_, _| true);
            },
        );
    }
}

/// Waits for `flight` if its answer covers `cost` and `mode` allows; `None`: ask the store.
fn follow<'a, C>(flight: &Arc<Flight>, cost: u64, mode: Mode) -> Option<Route<'a, C>> {
    (mode != Mode::Retry && cost >= flight.cost).then(|| Route::Wait(Arc::clone(flight)))
}

/// A refusal answered locally at `now` from a fact lasting until `until`.
fn refusal(policy: &Policy, now: u64, until: u64, reset_at: u64) -> Decision {
    let retry = until - now;
    let reset = reset_at.saturating_sub(now).max(retry);
    Decision::new(
        false,
        policy.limit(),
        0,
        Duration::from_micros(retry),
        Duration::from_micros(reset),
    )
}

/// After an admission: the smallest cost now refused, and for how long after the check
/// was sent, worked out from the answer (see [`DenyCache`]). `None` when the algorithm
/// keeps too little in a decision to tell.
fn exhausted(policy: &Policy, d: &Decision) -> Option<(u64, u64)> {
    let next = d.remaining.checked_add(1)?;
    if next > policy.limit() {
        return None;
    }
    let reset = micros(d.reset_after);
    // GCRA and the funnel, which is GCRA underneath: refused while
    // `tat + next × interval - now > tolerance`, and `reset` is `tat - now`.
    let wait = if let Some(g) = policy.engine().gcra() {
        reset
            .checked_add(next.checked_mul(g.interval)?)?
            .checked_sub(g.tolerance)?
    } else {
        match policy.parameters() {
            // Refused until the next tick adds a token; `reset` is when the bucket is full.
            Parameters::TokenBucket {
                capacity,
                tick,
                quantum,
            } => {
                let to_full = (capacity - d.remaining).div_ceil(quantum);
                let to_next = (next - d.remaining).div_ceil(quantum);
                reset.checked_sub((to_full - to_next).checked_mul(tick)?)?
            }
            // Refused until the window ends, which is `reset` once anything was counted.
            Parameters::FixedWindow { .. } => reset,
            _ => return None,
        }
    };
    (wait > 0).then_some((next, wait))
}

impl<S: Store, C: Clock> Store for DenyCache<S, C> {
    async fn check(&self, key: &[u8], policy: &Policy, cost: u64) -> Result<Decision, Error> {
        let mut route = self.route(key, policy, cost, Mode::Check)?;
        if let Route::Wait(flight) = route {
            let sh = &self.shared;
            sh.waited.fetch_add(1, Ordering::Relaxed);
            match Wait::new(flight, &sh.clock).await {
                Some(outcome) => {
                    if let Some(d) = self.landed(policy, outcome) {
                        return Ok(d);
                    }
                }
                None => {
                    sh.gave_up.fetch_add(1, Ordering::Relaxed);
                }
            }
            route = self.route(key, policy, cost, Mode::Retry)?;
        }
        let (sent, epoch, mut lead) = match route {
            Route::Local(d) => return Ok(d),
            Route::Store { sent, epoch, lead } => (sent, epoch, lead),
            Route::Wait(_) | Route::Through => {
                self.shared.store_calls.fetch_add(1, Ordering::Relaxed);
                return self.store.check(key, policy, cost).await;
            }
        };
        self.shared.store_calls.fetch_add(1, Ordering::Relaxed);
        // Dropping `lead` (here or if this future is dropped) lands its flight.
        let result = self.store.check(key, policy, cost).await;
        if let Ok(d) = &result {
            self.record(key, policy, cost, sent, epoch, d);
            if let Some(lead) = &mut lead {
                lead.outcome = self.outcome(sent, epoch, d);
            }
        }
        drop(lead);
        result
    }

    /// Resets the inner store's key and forgets what the cache knew about it.
    async fn reset(&self, key: &[u8], policy: &Policy) -> Result<(), Error> {
        self.forget(key, policy);
        let result = self.store.reset(key, policy).await;
        // A check sent while the reset was in flight may have been answered from the old
        // state: forget again, and refuse to record answers to checks sent before now.
        self.forget(key, policy);
        result
    }

    /// Answers cached refusals here; anything else is whatever the inner store's
    /// `check_now` answers (recorded as `check` would). `None` too while another check of
    /// the key is in flight after a lapse: `check` waits for it.
    fn check_now(&self, key: &[u8], policy: &Policy, cost: u64) -> Option<Result<Decision, Error>> {
        // `Mode::Now` never leads a flight: no `Leading` to carry along.
        let sent = match self.route(key, policy, cost, Mode::Now) {
            Ok(Route::Local(d)) => return Some(Ok(d)),
            Ok(Route::Wait(_)) => return None,
            Ok(Route::Store { sent, epoch, .. }) => Some((sent, epoch)),
            Ok(Route::Through) => None,
            Err(e) => return Some(Err(e)),
        };
        let result = self.store.check_now(key, policy, cost)?;
        self.shared.store_calls.fetch_add(1, Ordering::Relaxed);
        if let (Some((sent, epoch)), Ok(d)) = (sent, &result) {
            self.record(key, policy, cost, sent, epoch, d);
        }
        Some(result)
    }
}
