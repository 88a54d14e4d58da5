//! Answers per a [`FailMode`] when the store cannot decide.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use super::FailMode;
use crate::store::{Check, Checks, Op, Reply, Store};
use crate::{
    Cancelled, Clock, Decision, Error, MemoryStore, Policy, Reservable, Reservation, Source,
    SystemClock,
};

mod in_flight;

/// The most policies whose local share is remembered; past that, shares are recomputed.
const MAX_CACHED_SHARES: usize = 1024;

/// Decides when the store cannot: every store failure ([`Error::is_store_failure`]) is
/// answered per its [`FailMode`]; decisions and other errors pass through untouched.
///
/// In the local mode a cost that fits the policy but not its share is charged as the whole
/// share, and a policy that cannot be shared is enforced whole (with an error logged once).
/// Every answer given in the store's stead is marked [`Source::Fallback`], so a
/// [`DenyCache`](crate::DenyCache) in front does not remember it. Put a
/// [`Breaker`](super::Breaker) inside ([failures guide](crate::guide::failures)). Clones
/// share the same counters and local state.
///
/// # Examples
///
/// ```
/// use floodwall_core::resilience::{Fallback, FailMode};
/// use floodwall_core::{MemoryStore, Policy};
///
/// # let redis = MemoryStore::new();
/// let store = Fallback::new(redis, FailMode::Open);
/// # let _ = store;
/// ```
pub struct Fallback<S, C = SystemClock> {
    backstop: Arc<Backstop<S, C>>,
}

/// The store and what answers in its stead, shared by a fallback's clones.
struct Backstop<S, C> {
    store: S,
    mode: FailMode,
    local: MemoryStore<C>,
    /// Each policy's share, by policy namespace.
    shares: papaya::HashMap<u64, Policy, ahash::RandomState>,
    engaged: AtomicBool,
    failed_open: AtomicU64,
    failed_closed: AtomicU64,
    decided_locally: AtomicU64,
}

/// What a [`Fallback`] has answered in its store's stead since it was built, for metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct FallbackStats {
    /// Requests allowed because the store failed ([`FailMode::Open`]).
    pub failed_open: u64,
    /// Store failures passed on ([`FailMode::Closed`]).
    pub failed_closed: u64,
    /// Requests decided by the local store ([`FailMode::Local`]).
    pub decided_locally: u64,
}

impl<S> Fallback<S> {
    /// Answers store failures per `mode` (a local mode in a new [`MemoryStore`]).
    pub fn new(store: S, mode: FailMode) -> Self {
        Self::with_local_store(store, mode, MemoryStore::new())
    }

    /// Decides locally with `1 / nodes` of each quota while the store fails.
    pub fn local(store: S, nodes: u32) -> Self {
        Self::new(store, FailMode::local(nodes))
    }

    /// Allows every request while the store fails.
    pub fn fail_open(store: S) -> Self {
        Self::new(store, FailMode::Open)
    }

    /// Passes store failures on (the layer answers 503) and counts them.
    pub fn fail_closed(store: S) -> Self {
        Self::new(store, FailMode::Closed)
    }
}

impl<S, C> Fallback<S, C> {
    /// Like [`new`](Fallback::new), deciding locally in `local` (used in a local mode only).
    pub fn with_local_store(store: S, mode: FailMode, local: MemoryStore<C>) -> Self {
        let mode = match mode {
            FailMode::Local { nodes } => FailMode::local(nodes),
            other => other,
        };
        Self {
            backstop: Arc::new(Backstop {
                store,
                mode,
                local,
                shares: crate::store::new_map(),
                engaged: AtomicBool::new(false),
                failed_open: AtomicU64::new(0),
                failed_closed: AtomicU64::new(0),
                decided_locally: AtomicU64::new(0),
            }),
        }
    }

    /// The store it falls back from.
    pub fn get_ref(&self) -> &S {
        &self.backstop.store
    }

    /// The mode.
    pub fn mode(&self) -> FailMode {
        self.backstop.mode
    }

    /// The local store (used by [`FailMode::Local`]), e.g. to read its size.
    pub fn local_store(&self) -> &MemoryStore<C> {
        &self.backstop.local
    }

    /// Whether the last answer came from the fallback rather than the store.
    pub fn is_engaged(&self) -> bool {
        self.backstop.engaged.load(Ordering::Acquire)
    }

    /// Counters since it was built.
    pub fn stats(&self) -> FallbackStats {
        let s = &self.backstop;
        FallbackStats {
            failed_open: s.failed_open.load(Ordering::Relaxed),
            failed_closed: s.failed_closed.load(Ordering::Relaxed),
            decided_locally: s.decided_locally.load(Ordering::Relaxed),
        }
    }
}

impl<S, C: Clock> Backstop<S, C> {
    /// The store's answer, or the fallback's in its place: on a store failure, once
    /// `cost_ok` passes (a store may fail before it checks the cost, and a cost too high
    /// stays an error), `open()` when failing open, `local(nodes)` in a local mode.
    fn settle<T>(
        &self,
        result: Result<T, Error>,
        cost_ok: impl FnOnce() -> Result<(), Error>,
        open: impl FnOnce() -> T,
        local: impl FnOnce(u32) -> Result<T, Error>,
    ) -> Result<T, Error> {
        let error = match result {
            Ok(answer) => {
                self.disengage();
                return Ok(answer);
            }
            Err(e) if !e.is_store_failure() => return Err(e),
            Err(e) => e,
        };
        cost_ok()?;
        self.engage(&error);
        match self.mode {
            FailMode::Open => {
                self.failed_open.fetch_add(1, Ordering::Relaxed);
                Ok(open())
            }
            FailMode::Closed => {
                self.failed_closed.fetch_add(1, Ordering::Relaxed);
                Err(error)
            }
            FailMode::Local { nodes } => {
                self.decided_locally.fetch_add(1, Ordering::Relaxed);
                local(nodes)
            }
        }
    }

    /// A check's answer: the local mode decides in the share.
    fn settle_check(
        &self,
        key: &[u8],
        policy: &Policy,
        cost: u64,
        result: Result<Decision, Error>,
    ) -> Result<Decision, Error> {
        let local = |nodes| {
            self.with_share(policy, nodes, |share| {
                self.local.check_sync(key, share, cost.min(share.limit()))
            })
            .map(Decision::by_fallback)
        };
        self.settle(result, || policy.check_cost(cost), || open(policy), local)
    }

    /// A check of several's answer: the local mode decides all the shares at once.
    fn settle_all(
        &self,
        checks: &Checks<'_>,
        result: Result<Vec<Option<Decision>>, Error>,
    ) -> Result<Vec<Option<Decision>>, Error> {
        let local = |nodes| {
            let shares: Vec<Policy> = (checks.iter())
                .map(|c| self.with_share(c.policy, nodes, Policy::clone))
                .collect();
            let local: Vec<Check<'_>> = (checks.iter().zip(&shares))
                .map(|(c, share)| Check {
                    key: c.key,
                    policy: share,
                    cost: c.cost.min(share.limit()),
                })
                .collect();
            let decisions = self.local.check_all_sync(Checks::Each(&local))?;
            Ok(decisions
                .into_iter()
                .map(|d| d.map(Decision::by_fallback))
                .collect())
        };
        let open_all = || checks.iter().map(|c| Some(open(c.policy))).collect();
        self.settle(result, || checks.check_costs(), open_all, local)
    }

    /// A reservation's answer: failing open books nothing; a local mode books in the share.
    fn settle_reservation(
        &self,
        key: &[u8],
        policy: &Reservable,
        cost: u64,
        max_wait: Duration,
        result: Result<Reservation, Error>,
    ) -> Result<Reservation, Error> {
        let p = policy.policy();
        let local = |nodes| {
            let mut r = self.with_share(p, nodes, |share| {
                // A share keeps a reservable algorithm (a bucket's tick may go, never
                // the bucket): the error is for a policy made some other way.
                let share = share.reservable().map_err(|_| Error::StateMismatch)?;
                (self.local).reserve_sync(key, &share, cost.min(share.policy().limit()), max_wait)
            })?;
            r.decision = r.decision.by_fallback();
            Ok(r)
        };
        let booked = || Reservation::booked(open(p), Duration::ZERO, None);
        self.settle(result, || p.check_cost(cost), booked, local)
    }

    /// Runs `f` on this node's share of `policy`, borrowed from the cache (a clone would
    /// bounce its reference count between cores on every request of an outage).
    fn with_share<R>(&self, policy: &Policy, nodes: u32, f: impl FnOnce(&Policy) -> R) -> R {
        let shares = self.shares.pin();
        if let Some(share) = shares.get(&policy.namespace()) {
            return f(share);
        }
        let share = policy.share(nodes).unwrap_or_else(|error| {
            tracing::error!(
                target: "floodwall",
                policy = policy.name(),
                %error,
                "cannot split this policy's quota between nodes; enforcing it whole locally"
            );
            policy.clone()
        });
        if shares.len() < MAX_CACHED_SHARES {
            shares.insert(policy.namespace(), share.clone());
        }
        f(&share)
    }

    fn engage(&self, error: &Error) {
        if !self.engaged.load(Ordering::Relaxed) && !self.engaged.swap(true, Ordering::AcqRel) {
            tracing::warn!(
                target: "floodwall",
                %error,
                mode = self.mode.name(),
                "rate-limit store failing; fallback engaged until it answers again"
            );
        }
    }

    fn disengage(&self) {
        if self.engaged.load(Ordering::Relaxed) && self.engaged.swap(false, Ordering::AcqRel) {
            tracing::info!(
                target: "floodwall",
                "rate-limit store answers again; fallback disengaged"
            );
        }
    }
}

/// Failing open's answer: allowed, nothing counted.
fn open(policy: &Policy) -> Decision {
    let limit = policy.limit();
    Decision::new(true, limit, limit, Duration::ZERO, Duration::ZERO).by_fallback()
}

impl<S, C: Clock> Backstop<S, C> {
    /// What is done before the store is asked: a local mode resets or unbans locally too,
    /// and a fallback's booking ([`Source::Fallback`]) is cancelled where it was booked.
    fn before(&self, op: Op<'_>) -> Option<Result<Reply, Error>> {
        match (op, self.mode) {
            (Op::Reset { key, policy }, FailMode::Local { nodes }) => {
                self.with_share(policy, nodes, |share| self.local.reset_sync(key, share));
                None
            }
            (Op::Unban { key, policy }, FailMode::Local { nodes }) => {
                self.with_share(policy, nodes, |share| self.local.unban_sync(key, share));
                None
            }
            (
                Op::Cancel {
                    key,
                    policy,
                    reservation,
                },
                FailMode::Local { nodes },
            ) if reservation.decision.source == Source::Fallback => Some(
                self.with_share(policy.policy(), nodes, |share| match share.reservable() {
                    Ok(share) => self.local.cancel_sync(key, &share, &reservation),
                    Err(_) => Ok(Cancelled::Spent),
                })
                .map(Reply::Cancelled),
            ),
            // Failing open booked nothing.
            (Op::Cancel { reservation, .. }, _)
                if reservation.decision.source == Source::Fallback =>
            {
                Some(Ok(Reply::Cancelled(Cancelled::Spent)))
            }
            _ => None,
        }
    }

    /// The store's answer to `op`, or the fallback's in its place. A charge or refund the
    /// store failed to make is made locally in a local mode, else the error passes on.
    fn after(&self, op: Op<'_>, result: Result<Reply, Error>) -> Result<Reply, Error> {
        match op {
            Op::Check { key, policy, cost } => self
                .settle_check(key, policy, cost, result.and_then(Reply::into_decision))
                .map(Reply::Decision),
            Op::CheckAll { checks } => self
                .settle_all(&checks, result.and_then(Reply::into_decisions))
                .map(Reply::Decisions),
            Op::Reserve {
                key,
                policy,
                cost,
                max_wait,
            } => self
                .settle_reservation(
                    key,
                    policy,
                    cost,
                    max_wait,
                    result.and_then(Reply::into_reservation),
                )
                .map(Reply::Reservation),
            Op::Acquire { key, limit } => self
                .settle_acquire(key, limit, result.and_then(Reply::into_acquired))
                .map(Reply::Acquired),
            Op::Adjust {
                key,
                policy,
                adjustment,
            } => match (result, self.mode) {
                (Err(e), FailMode::Local { nodes }) if e.is_store_failure() => {
                    self.with_share(policy, nodes, |share| {
                        self.local.adjust_sync(key, share, adjustment)
                    })?;
                    Ok(Reply::Done)
                }
                (result, _) => result,
            },
            _ => result,
        }
    }
}

impl<S: Store, C: Clock> Store for Fallback<S, C> {
    async fn call(&self, op: Op<'_>) -> Result<Reply, Error> {
        let s = &self.backstop;
        if let Some(answer) = s.before(op) {
            return answer;
        }
        let result = s.store.call(op).await;
        s.after(op, result)
    }

    fn call_now(&self, op: Op<'_>) -> Option<Result<Reply, Error>> {
        let s = &self.backstop;
        if let Some(answer) = s.before(op) {
            return Some(answer);
        }
        let result = s.store.call_now(op)?;
        Some(s.after(op, result))
    }
}

impl<S, C> Clone for Fallback<S, C> {
    fn clone(&self) -> Self {
        Self {
            backstop: Arc::clone(&self.backstop),
        }
    }
}

impl<S: fmt::Debug, C> fmt::Debug for Fallback<S, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Fallback")
            .field("store", &self.backstop.store)
            .field("mode", &self.backstop.mode)
            .field("engaged", &self.is_engaged())
            .finish()
    }
}
