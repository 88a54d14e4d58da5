//! The embedded store: state for every algorithm in a bounded, lock-free concurrent map.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::evict::{Cap, evict_soonest};
use super::key::{KeyBuf, KeyRef, MapKey};
use super::lock;
use crate::algorithm::gcra::{Gcra, Judgement};
use crate::algorithm::{Raw, clamp_now};
use crate::concurrency::memory::Slots;
use crate::{Clock, Decision, Error, Policy, State, SystemClock};

mod adjust;
mod all;
mod ops;
mod penalty;
mod reserve;

mod update;

/// The most keys the map is sized for when built: the default cap's table is 2.4 MB of
/// address space, of which a quarter MB (its control bytes) is written at once; a larger
/// cap grows past it as keys come.
const PRESIZED_KEYS: usize = MemoryStore::DEFAULT_MAX_KEYS;

/// Marks a GCRA key state that was evicted: whoever holds it looks the key up again.
const DEAD: u64 = u64::MAX;

/// Marks a GCRA key state held by a check of several policies (`all.rs`): wait it out.
const BUSY: u64 = u64::MAX - 1;

type Map = papaya::HashMap<MapKey, KeyState, ahash::RandomState>;

/// Rate-limit state in this process's memory: the default store, for a single server or as
/// the local fallback of a shared one.
///
/// Lock-free lookups; GCRA and the leaky bucket update their one timestamp by
/// compare-and-swap, the other algorithms lock only their own key. Exact however many
/// threads check a key. Clones share the same state.
///
/// # When the store is full
///
/// At most [`max_keys`](MemoryStoreBuilder::max_keys) keys are kept (plus one per thread
/// inserting at that instant). A new key at the cap makes its caller sweep: expired states
/// go (which changes no decision), then, down to 90% of the cap, the live states expiring
/// soonest, which hold the least unspent penalty; [`evicted`](Self::evicted) counts those.
/// User keys longer than 128 bytes are stored as their SHA-256.
///
/// # Examples
///
/// ```
/// use floodwall_core::{ManualClock, MemoryStore, Policy, StoreExt};
/// use std::time::Duration;
///
/// let clock = ManualClock::new(0);
/// let store = MemoryStore::builder().max_keys(10_000).clock(clock.clone()).build();
/// let policy = Policy::gcra("api", "1/s".parse()?)?;
/// // The memory store answers without waiting: `check_now` is always `Some`.
/// let mut check = || store.check_now(b"10.0.0.1", &policy, 1).expect("answers now");
///
/// assert!(check()?.is_allowed());
/// assert!(!check()?.is_allowed());
/// clock.advance(Duration::from_secs(1));
/// assert!(check()?.is_allowed());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct MemoryStore<C = SystemClock> {
    inner: Arc<Inner<C>>,
}

struct Inner<C> {
    map: Map,
    cap: Cap,
    clock: C,
    evicted: AtomicU64,
    /// Requests in flight per key, for [`ConcurrencyLimit`](crate::ConcurrencyLimit)s.
    slots: Arc<Slots>,
    /// Strikes and bans of the policies with a [`Penalty`](crate::Penalty) (`penalty.rs`).
    penalties: penalty::Records,
}

/// What one key holds: its algorithm state, in the form its algorithm updates it.
enum KeyState {
    /// GCRA's (or the funnel's) TAT (0 for none), updated by compare-and-swap.
    Gcra(AtomicU64),
    /// Any other algorithm's state behind its own lock (boxed: a GCRA key's state stays small).
    Locked(Box<Locked>),
}

/// A state behind its own lock (a key's algorithm state here, its strikes in `penalty.rs`).
struct Locked<T = State> {
    /// When the state becomes equal to no state (µs): the latest `now + reset` on it.
    expires: AtomicU64,
    /// `None` once evicted: whoever holds it looks the key up again.
    state: Mutex<Option<T>>,
}

impl<T> Locked<T> {
    fn new(state: T) -> Self {
        Self {
            expires: AtomicU64::new(0),
            state: Mutex::new(Some(state)),
        }
    }

    fn expires_at(&self) -> u64 {
        self.expires.load(Ordering::Acquire)
    }

    fn is_dead(&self) -> bool {
        lock(&self.state).is_none()
    }

    /// Marks it dead if it still expires by `by` (atomic with a decision); true if dead.
    fn kill(&self, by: u64) -> bool {
        let mut guard = lock(&self.state);
        if guard.is_some() && self.expires_at() <= by {
            *guard = None;
        }
        guard.is_none()
    }
}

/// Builds a [`MemoryStore`] with a cap or a clock other than the defaults.
#[derive(Debug, Clone)]
pub struct MemoryStoreBuilder<C = SystemClock> {
    max_keys: usize,
    clock: C,
}

impl MemoryStore {
    /// The default cap on keys: at 100–200 bytes a key, tens of megabytes.
    pub const DEFAULT_MAX_KEYS: usize = 100_000;

    /// A store with the system clock and the default cap.
    pub fn new() -> Self {
        Self::builder().build()
    }

    /// A builder, to set the cap or the clock.
    pub fn builder() -> MemoryStoreBuilder {
        MemoryStoreBuilder {
            max_keys: Self::DEFAULT_MAX_KEYS,
            clock: SystemClock,
        }
    }
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self::new()
    }
}

impl<C> MemoryStoreBuilder<C> {
    /// The most keys kept (at least 1). See [`MemoryStore`] for what happens at the cap.
    pub fn max_keys(mut self, max_keys: usize) -> Self {
        self.max_keys = max_keys;
        self
    }

    /// The clock to read `now` from; a [`ManualClock`](crate::ManualClock) in tests.
    pub fn clock<C2: Clock>(self, clock: C2) -> MemoryStoreBuilder<C2> {
        MemoryStoreBuilder {
            max_keys: self.max_keys,
            clock,
        }
    }

    /// The store.
    pub fn build(self) -> MemoryStore<C> {
        MemoryStore {
            inner: Arc::new(Inner {
                // Sized for the cap from the start: growing to it copies the table at every
                // doubling, 12 % of a new key's instructions (BENCHMARKS.md §1).
                map: super::map_with_capacity(self.max_keys.min(PRESIZED_KEYS)),
                cap: Cap::new(self.max_keys),
                clock: self.clock,
                evicted: AtomicU64::new(0),
                slots: Slots::new(self.max_keys),
                penalties: penalty::Records::new(self.max_keys),
            }),
        }
    }
}

impl<C> Clone for MemoryStore<C> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<C> std::fmt::Debug for MemoryStore<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryStore")
            .field("keys", &self.len())
            .field("max_keys", &self.inner.cap.max_keys())
            .finish()
    }
}

impl<C: Clock> MemoryStore<C> {
    /// A check without the future: the memory store never waits.
    // Inlined, GCRA's path keeps its values in registers rather than spilling them before
    // the map's unpinning, a full barrier (BENCHMARKS.md §1).
    #[inline(always)]
    pub(crate) fn check_sync(
        &self,
        key: &[u8],
        policy: &Policy,
        cost: u64,
    ) -> Result<Decision, Error> {
        let (raw, limit, banned) = match policy.engine().gcra() {
            // A penalty takes the path out of line, with the other algorithms. Every path
            // ends in one `to_decision_with_limit`: one returning a `Decision` of its own
            // made the compiler build GCRA's in a temporary.
            Some(gcra) if policy.penalty().is_none() => {
                // First: reading the counter is the slowest step, and the lookup overlaps it.
                let now = clamp_now(self.inner.clock.now_micros());
                let judgement = match KeyRef::short(policy.state_namespace(), key) {
                    Some(key) => self.check_gcra(key, gcra, cost, now)?,
                    None => self.check_gcra_long(key, policy.state_namespace(), gcra, cost, now)?,
                };
                (gcra.raw(judgement), gcra.burst, false)
            }
            _ => self.check_other(key, policy, cost)?,
        };
        let mut decision = policy.to_decision_with_limit(raw, limit);
        if banned {
            decision.outcome = crate::Outcome::Banned;
        }
        Ok(decision)
    }

    /// Every check but GCRA's without a penalty: the figures, the limit, whether banned.
    #[inline(never)]
    fn check_other(
        &self,
        key: &[u8],
        policy: &Policy,
        cost: u64,
    ) -> Result<(Raw, u64, bool), Error> {
        match policy.penalty() {
            Some(penalty) => self.check_penalized(key, policy, penalty, cost),
            None => {
                let (raw, limit) = self.quota_raw(key, policy, cost)?;
                Ok((raw, limit, false))
            }
        }
    }

    /// The quota's decision alone, penalty or not.
    fn check_quota(&self, key: &[u8], policy: &Policy, cost: u64) -> Result<Decision, Error> {
        let (raw, limit) = self.quota_raw(key, policy, cost)?;
        Ok(policy.to_decision_with_limit(raw, limit))
    }

    fn quota_raw(&self, key: &[u8], policy: &Policy, cost: u64) -> Result<(Raw, u64), Error> {
        Ok(match policy.engine().gcra() {
            Some(gcra) => {
                let now = clamp_now(self.inner.clock.now_micros());
                let judgement = match KeyRef::short(policy.state_namespace(), key) {
                    Some(key) => self.check_gcra(key, gcra, cost, now)?,
                    None => self.check_gcra_long(key, policy.state_namespace(), gcra, cost, now)?,
                };
                (gcra.raw(judgement), gcra.burst)
            }
            None => (self.check_locked(key, policy, cost)?, policy.limit()),
        })
    }

    /// [`check_gcra`](Self::check_gcra) for a key stored as its digest.
    fn check_gcra_long(
        &self,
        key: &[u8],
        ns: u64,
        gcra: &Gcra,
        cost: u64,
        now: u64,
    ) -> Result<Judgement, Error> {
        let buf = KeyBuf::new(key);
        self.check_gcra(buf.as_ref(ns), gcra, cost, now)
    }

    /// GCRA, the default, and the funnel: one timestamp per key, updated by compare-and-swap.
    #[inline(always)]
    fn check_gcra(
        &self,
        key: KeyRef<'_>,
        gcra: &Gcra,
        cost: u64,
        now: u64,
    ) -> Result<Judgement, Error> {
        gcra.check_cost(cost)?;
        // The guard is dropped before the decision is built: unpinning is a full barrier,
        // which would otherwise wait for that arithmetic too.
        let map = self.inner.map.pin();
        loop {
            let entry = match map.get(&key) {
                Some(entry) => entry,
                // A peek on an unknown key must not create one.
                None if cost == 0 => return Ok(gcra.judge(0, now, 0).0),
                None => self.insert(&map, key, KeyState::Gcra(AtomicU64::new(0)), now),
            };
            let KeyState::Gcra(tat) = entry else {
                return Err(Error::StateMismatch);
            };
            match decide_gcra(tat, gcra, now, cost) {
                Some(raw) => return Ok(raw),
                // Evicted under our feet: help remove it, then look again.
                None => {
                    let _ = map.remove_if(&key, |_, s| s.is_dead());
                }
            }
        }
    }

    /// Every other algorithm: the key's state behind its own lock.
    fn check_locked(&self, key: &[u8], policy: &Policy, cost: u64) -> Result<Raw, Error> {
        policy.check_cost(cost)?;
        let now = clamp_now(self.inner.clock.now_micros());
        let buf = KeyBuf::new(key);
        let key = buf.as_ref(policy.state_namespace());
        let map = self.inner.map.pin();
        loop {
            let entry = match map.get(&key) {
                Some(entry) => entry,
                // A peek on an unknown key must not create one.
                None if cost == 0 => return policy.engine().decide(&mut State::new(), now, 0),
                None => self.insert(&map, key, KeyState::fresh(policy), now),
            };
            match entry.decide(policy, now, cost) {
                Some(result) => return result,
                // Evicted under our feet: help remove it, then look again.
                None => {
                    let _ = map.remove_if(&key, |_, s| s.is_dead());
                }
            }
        }
    }

    /// Inserts `entry` under `key` (making room first), or finds another thread's.
    fn insert<'g>(
        &self,
        map: &'g papaya::HashMapRef<
            '_,
            MapKey,
            KeyState,
            ahash::RandomState,
            papaya::LocalGuard<'_>,
        >,
        key: KeyRef<'_>,
        entry: KeyState,
        now: u64,
    ) -> &'g KeyState {
        self.make_room(now);
        match map.try_insert(key.to_owned(), entry) {
            Ok(entry) => entry,
            Err(occupied) => occupied.current,
        }
    }

    /// Forgets `key`'s quota state under `policy` (a ban stays: see `unban_sync`).
    pub(crate) fn reset_sync(&self, key: &[u8], policy: &Policy) {
        let buf = KeyBuf::new(key);
        let key = buf.as_ref(policy.state_namespace());
        let map = self.inner.map.pin();
        if let Some(entry) = map.get(&key) {
            entry.kill(u64::MAX);
            let _ = map.remove_if(&key, |_, s| s.is_dead());
        }
    }

    /// Drops every expired state (and penalty record) now; returns how many.
    pub fn sweep_expired(&self) -> usize {
        let _sweeping = self.inner.cap.exclusive();
        let now = clamp_now(self.inner.clock.now_micros());
        self.drop_expired(now) + self.inner.penalties.drop_expired(now)
    }

    fn drop_expired(&self, now: u64) -> usize {
        let map = self.inner.map.pin();
        let before = map.len();
        map.retain(|_, entry| !(entry.expires_at() <= now && entry.kill(now)));
        before.saturating_sub(map.len())
    }

    /// Called before inserting a key: sweeps when the cap is reached.
    fn make_room(&self, now: u64) {
        let inner = &self.inner;
        inner.cap.make_room(
            || inner.map.len(),
            |target| {
                self.drop_expired(now);
                let seed = now ^ inner.evicted.load(Ordering::Relaxed);
                let evicted = evict_soonest(
                    &inner.map,
                    target,
                    seed,
                    KeyState::expires_at,
                    KeyState::kill,
                );
                inner.evicted.fetch_add(evicted as u64, Ordering::Relaxed);
            },
        );
    }
}

impl<C> MemoryStore<C> {
    /// Quota states held now.
    pub fn len(&self) -> usize {
        self.inner.map.len()
    }

    /// Penalty records held now (keys with strikes, a ban or remembered bans).
    pub fn penalized(&self) -> usize {
        self.inner.penalties.len()
    }

    /// Whether no key is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The cap on keys.
    pub fn max_keys(&self) -> usize {
        self.inner.cap.max_keys()
    }

    /// How many live states were evicted to respect the cap (non-zero: the cap is small).
    pub fn evicted(&self) -> u64 {
        self.inner.evicted.load(Ordering::Relaxed)
    }

    /// The clock this store reads.
    pub fn clock(&self) -> &C {
        &self.inner.clock
    }

    /// The in-flight counts (`crate::concurrency::memory`).
    pub(crate) fn slots(&self) -> &Arc<Slots> {
        &self.inner.slots
    }
}

impl KeyState {
    /// A fresh entry for `policy`'s algorithm (`check_gcra` makes its own).
    fn fresh(policy: &Policy) -> Self {
        match policy.engine().gcra() {
            Some(_) => Self::Gcra(AtomicU64::new(0)),
            None => Self::Locked(Box::new(Locked::new(State::new()))),
        }
    }

    /// Decides for a policy of any algorithm but GCRA; `None` when the entry was evicted.
    #[inline]
    fn decide(&self, policy: &Policy, now: u64, cost: u64) -> Option<Result<Raw, Error>> {
        match self {
            // GCRA policies take `check_gcra`: this is another algorithm's policy.
            Self::Gcra(_) => Some(Err(Error::StateMismatch)),
            Self::Locked(l) => {
                let mut guard = lock(&l.state);
                let state = guard.as_mut()?;
                let result = policy.engine().decide(state, now, cost);
                if let Ok(raw) = &result {
                    // The latest `now + reset`: `now` can go back (see `Raw::reset`).
                    l.expires.fetch_max(now + raw.reset, Ordering::AcqRel);
                }
                Some(result)
            }
        }
    }

    /// When the state becomes equal to no state at all.
    fn expires_at(&self) -> u64 {
        match self {
            Self::Gcra(tat) => tat.load(Ordering::Acquire),
            Self::Locked(l) => l.expires_at(),
        }
    }

    fn is_dead(&self) -> bool {
        match self {
            Self::Gcra(tat) => tat.load(Ordering::Acquire) == DEAD,
            Self::Locked(l) => l.is_dead(),
        }
    }

    /// Marks the entry dead if it still expires by `by` (atomic with a decision); true if dead.
    fn kill(&self, by: u64) -> bool {
        match self {
            Self::Gcra(tat) => {
                let mut t = tat.load(Ordering::Acquire);
                loop {
                    // Held by a check of several policies: its write comes first.
                    if t == BUSY {
                        t = wait_while_busy(tat);
                        continue;
                    }
                    if !(t <= by || t == DEAD) {
                        return false;
                    }
                    match tat.compare_exchange_weak(t, DEAD, Ordering::AcqRel, Ordering::Acquire) {
                        Ok(_) => return true,
                        Err(seen) => t = seen,
                    }
                }
            }
            Self::Locked(l) => l.kill(by),
        }
    }
}

/// GCRA on an entry's TAT by compare-and-swap; `None` when the entry was evicted.
#[inline]
fn decide_gcra(tat: &AtomicU64, gcra: &Gcra, now: u64, cost: u64) -> Option<Judgement> {
    let mut current = tat.load(Ordering::Acquire);
    loop {
        // One comparison for both marks, the rest out of line: the hot path pays nothing
        // for `BUSY` (measured by the `http_instructions` bench).
        if current >= BUSY {
            current = settled(tat)?;
        }
        let (judgement, next) = gcra.judge(current, now, cost);
        let Some(next) = next else {
            return Some(judgement);
        };
        match tat.compare_exchange_weak(current, next, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return Some(judgement),
            Err(seen) => current = seen,
        }
    }
}

/// Waits until a check of several policies writes back the state it holds (`all.rs`).
#[cold]
#[inline(never)]
fn wait_while_busy(tat: &AtomicU64) -> u64 {
    let mut spins = 0_u32;
    loop {
        let t = tat.load(Ordering::Acquire);
        if t != BUSY {
            return t;
        }
        // Spin briefly, then let the holder run: it may have been preempted.
        if spins < 64 {
            spins += 1;
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }
}

/// The TAT once no check of several policies holds it; `None` if the entry is dead.
#[cold]
#[inline(never)]
fn settled(tat: &AtomicU64) -> Option<u64> {
    match wait_while_busy(tat) {
        DEAD => None,
        t => Some(t),
    }
}
