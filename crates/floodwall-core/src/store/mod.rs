//! Where state lives: the [`Store`] trait and its [`Op`]s, the embedded [`MemoryStore`],
//! and the combinators in front of any store ([`DenyCache`], [`LocalVerdicts`]).

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use crate::{
    Acquired, Adjustment, Cancelled, ConcurrencyLimit, Decision, Error, PenaltyState, Policy,
    Reservable, Reservation,
};

mod checks;
mod deny_cache;
mod evict;
pub(crate) mod key;
mod local_verdicts;
mod memory;
mod op;
mod parts;

pub use checks::{Check, Checks, Iter as ChecksIter};
pub use deny_cache::{DenyCache, DenyCacheBuilder, DenyCacheStats};
pub use local_verdicts::{LocalVerdicts, LocalVerdictsBuilder, LocalVerdictsStats};
pub use memory::{MemoryStore, MemoryStoreBuilder};
pub use op::{Op, Reply};
pub use parts::{ban_decision, decision_from_micros, penalty_state_from_micros, ticket};

/// A future boxed for [`DynStore`].
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Something that keeps rate-limit state and decides on it: in memory, in Redis, or a
/// combinator wrapping another store.
///
/// A store does one thing, [`call`](Self::call): it answers an [`Op`] (check, book a
/// slot, charge, …) with the matching [`Reply`]; callers use [`StoreExt`]'s typed methods.
/// A combinator matches the operations it changes and passes the rest on whole.
///
/// `key` is any bytes; the policy namespaces it. A denial is an `Ok` decision; `Err`
/// means no decision could be made. For a `dyn` store, use `Arc<dyn DynStore>`.
///
/// # Examples
///
/// ```
/// use floodwall_core::{MemoryStore, Policy, StoreExt};
///
/// # futures_lite_block_on(async {
/// let store = MemoryStore::new();
/// let policy = Policy::gcra("login", "3/min".parse()?)?;
/// for _ in 0..3 {
///     assert!(store.check(b"alice", &policy, 1).await?.is_allowed());
/// }
/// let denied = store.check(b"alice", &policy, 1).await?;
/// assert!(!denied.is_allowed());
/// assert!(store.check(b"bob", &policy, 1).await?.is_allowed());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// # fn futures_lite_block_on<F: std::future::Future>(f: F) -> F::Output {
/// #     // MemoryStore's futures are ready at once: one poll answers.
/// #     let mut f = std::pin::pin!(f);
/// #     let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
/// #     match f.as_mut().poll(&mut cx) { std::task::Poll::Ready(v) => v, _ => unreachable!() }
/// # }
/// ```
///
/// A store of your own answers what it can and refuses the rest:
///
/// ```
/// use floodwall_core::store::{Op, Reply};
/// use floodwall_core::{Decision, Error, Store};
/// use std::time::Duration;
///
/// /// Admits everything (a test double).
/// struct Open;
///
/// impl Store for Open {
///     async fn call(&self, op: Op<'_>) -> Result<Reply, Error> {
///         match op {
///             Op::Check { policy, .. } => {
///                 let limit = policy.limit();
///                 let d = Decision::new(true, limit, limit, Duration::ZERO, Duration::ZERO);
///                 Ok(Reply::Decision(d))
///             }
///             other => Err(other.unsupported()),
///         }
///     }
/// }
/// ```
pub trait Store: Send + Sync {
    /// Does `op` and answers its [`Reply`], or [`Op::unsupported`] if it cannot.
    fn call(&self, op: Op<'_>) -> impl Future<Output = Result<Reply, Error>> + Send;

    /// Does `op` without waiting, when this store can (the memory store always can):
    /// `Some` is what [`call`](Self::call) would have answered; `None` means nothing was
    /// done, use `call`. The default, for stores that do I/O, is `None`.
    fn call_now(&self, op: Op<'_>) -> Option<Result<Reply, Error>> {
        let _ = op;
        None
    }
}

/// The typed operations of every [`Store`], each an [`Op`] and its [`Reply`].
pub trait StoreExt: Store {
    /// Decides a request of `cost` for `key` under `policy`, and records it if allowed.
    /// A cost of 0 is a peek that changes nothing.
    fn check(
        &self,
        key: &[u8],
        policy: &Policy,
        cost: u64,
    ) -> impl Future<Output = Result<Decision, Error>> + Send {
        async move {
            self.call(Op::Check { key, policy, cost })
                .await?
                .into_decision()
        }
    }

    /// [`check`](Self::check) without waiting, when the store can ([`Store::call_now`]).
    // Inlined, the memory store's check builds only what the caller reads; as a call it
    // built the whole decision (BENCHMARKS.md §3 has the counts).
    #[inline(always)]
    fn check_now(&self, key: &[u8], policy: &Policy, cost: u64) -> Option<Result<Decision, Error>> {
        self.call_now(Op::Check { key, policy, cost })
            .map(|reply| reply?.into_decision())
    }

    /// Decides a request of `cost` for `key` against every one of `policies` at once,
    /// atomically: it is recorded in all if all allow it, else in none
    /// ([all or nothing](crate::guide::all_or_nothing)).
    ///
    /// One entry per policy, in order. In a refusal, a policy that would have allowed
    /// answers as a peek would. `None` only from a [`DenyCache`] refusing locally, for a
    /// policy it knows nothing of. A cost one policy can never admit is
    /// [`Error::CostTooHigh`], and nothing is recorded.
    fn check_all(
        &self,
        key: &[u8],
        policies: &[Policy],
        cost: u64,
    ) -> impl Future<Output = Result<Vec<Option<Decision>>, Error>> + Send {
        async move {
            let checks = Checks::OneKey {
                key,
                policies,
                cost,
            };
            self.call(Op::CheckAll { checks }).await?.into_decisions()
        }
    }

    /// [`check_all`](Self::check_all) for checks that each have their own key and cost
    /// (an Envoy request's descriptors): all recorded if all allow, else none.
    ///
    /// One entry per check, in order, as `check_all` answers. The memory store holds any
    /// checks together. A store that cannot hold these together answers
    /// [`Error::Unsupported`] and records nothing (`RedisStore`: keys in different slots
    /// of a cluster, different costs, a sliding window or log beside other policies); the
    /// caller then decides them some other way.
    fn check_all_of(
        &self,
        checks: &[Check<'_>],
    ) -> impl Future<Output = Result<Vec<Option<Decision>>, Error>> + Send {
        async move {
            let checks = Checks::Each(checks);
            self.call(Op::CheckAll { checks }).await?.into_decisions()
        }
    }

    /// Books the earliest slot at which a request of `cost` for `key` passes under
    /// `policy`, if it is at most `max_wait` away (cut to [`Reservable::MAX_WAIT`]);
    /// beyond that it changes nothing and is a refusal (see [`Reservation`]).
    fn reserve(
        &self,
        key: &[u8],
        policy: &Reservable,
        cost: u64,
        max_wait: Duration,
    ) -> impl Future<Output = Result<Reservation, Error>> + Send {
        async move {
            self.call(Op::Reserve {
                key,
                policy,
                cost,
                max_wait,
            })
            .await?
            .into_reservation()
        }
    }

    /// Gives a reservation's slot back where the algorithm allows it (see [`Cancelled`]).
    /// `reservation` must come from this store's [`reserve`](Self::reserve) on the same
    /// key and policy.
    fn cancel(
        &self,
        key: &[u8],
        policy: &Reservable,
        reservation: &Reservation,
    ) -> impl Future<Output = Result<Cancelled, Error>> + Send {
        async move {
            self.call(Op::Cancel {
                key,
                policy,
                reservation: *reservation,
            })
            .await?
            .into_cancelled()
        }
    }

    /// Charges or refunds `key` under `policy` after its request was decided, for a cost
    /// known only from the response ([charging](crate::guide::charging); see [`Adjustment`]).
    fn adjust(
        &self,
        key: &[u8],
        policy: &Policy,
        adjustment: Adjustment,
    ) -> impl Future<Output = Result<(), Error>> + Send {
        async move {
            self.call(Op::Adjust {
                key,
                policy,
                adjustment,
            })
            .await?
            .into_done()
        }
    }

    /// Lifts `key`'s ban under `policy` and forgets its strikes and earlier bans; its
    /// quota state is kept ([penalties](crate::guide::penalties)).
    fn unban(&self, key: &[u8], policy: &Policy) -> impl Future<Output = Result<(), Error>> + Send {
        async move { self.call(Op::Unban { key, policy }).await?.into_done() }
    }

    /// `key`'s strikes and ban under `policy`'s penalty, read without changing anything
    /// (all zero for a policy without one, or a key it never struck).
    fn penalty_state(
        &self,
        key: &[u8],
        policy: &Policy,
    ) -> impl Future<Output = Result<PenaltyState, Error>> + Send {
        async move {
            self.call(Op::PenaltyState { key, policy })
                .await?
                .into_penalty_state()
        }
    }

    /// Forgets `key`'s state under `policy`, as if it had never been seen.
    fn reset(&self, key: &[u8], policy: &Policy) -> impl Future<Output = Result<(), Error>> + Send {
        async move { self.call(Op::Reset { key, policy }).await?.into_done() }
    }

    /// A slot for `key` under the in-flight `limit`, or how full the key is.
    fn acquire(
        &self,
        key: &[u8],
        limit: &ConcurrencyLimit,
    ) -> impl Future<Output = Result<Acquired, Error>> + Send {
        async move { self.call(Op::Acquire { key, limit }).await?.into_acquired() }
    }
}

impl<S: Store + ?Sized> StoreExt for S {}

/// The object-safe form of [`Store`], for a store chosen at run time. Every `Store` is
/// one, and `Arc<dyn DynStore>` and `Box<dyn DynStore>` are `Store`s again.
pub trait DynStore: Send + Sync {
    /// [`Store::call`], boxed.
    fn call_boxed<'a>(&'a self, op: Op<'a>) -> BoxFuture<'a, Result<Reply, Error>>;

    /// [`Store::call_now`].
    fn call_now_dyn(&self, op: Op<'_>) -> Option<Result<Reply, Error>>;
}

impl<S: Store> DynStore for S {
    fn call_boxed<'a>(&'a self, op: Op<'a>) -> BoxFuture<'a, Result<Reply, Error>> {
        Box::pin(self.call(op))
    }

    fn call_now_dyn(&self, op: Op<'_>) -> Option<Result<Reply, Error>> {
        self.call_now(op)
    }
}

impl Store for dyn DynStore {
    // `async fn` names the borrows' common lifetime; returning the boxed future would not.
    async fn call(&self, op: Op<'_>) -> Result<Reply, Error> {
        self.call_boxed(op).await
    }

    fn call_now(&self, op: Op<'_>) -> Option<Result<Reply, Error>> {
        self.call_now_dyn(op)
    }
}

/// `Store` for the pointers to a store (`Arc`, `Box`, `&`): the pointee's.
macro_rules! store_through_pointer {
    ($($pointer:ty),+) => {$(
        impl<S: Store + ?Sized> Store for $pointer {
            fn call(&self, op: Op<'_>) -> impl Future<Output = Result<Reply, Error>> + Send {
                (**self).call(op)
            }

            #[inline]
            fn call_now(&self, op: Op<'_>) -> Option<Result<Reply, Error>> {
                (**self).call_now(op)
            }
        }
    )+};
}

store_through_pointer!(Arc<S>, Box<S>, &S);

/// Locks `m`, poisoned or not: every write under these locks is a single assignment.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// An empty concurrent map with the hasher every map of this crate uses.
pub(crate) fn new_map<K, V>() -> papaya::HashMap<K, V, ahash::RandomState> {
    papaya::HashMap::builder()
        .hasher(ahash::RandomState::new())
        .build()
}

/// [`new_map`] with room for `keys` keys before it grows.
pub(crate) fn map_with_capacity<K, V>(keys: usize) -> papaya::HashMap<K, V, ahash::RandomState> {
    papaya::HashMap::builder()
        .hasher(ahash::RandomState::new())
        .capacity(keys)
        .build()
}

/// `d` in whole microseconds, saturating.
pub(crate) fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}
