//! Where state lives: the [`Store`] trait, its object-safe twin [`DynStore`], the embedded
//! [`MemoryStore`], and the combinators that answer some checks in front of any store
//! ([`DenyCache`], [`LocalVerdicts`]).

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use crate::{Adjustment, Cancelled, Decision, Error, Policy, Reservable, Reservation};

mod deny_cache;
mod evict;
pub(crate) mod key;
mod local_verdicts;
mod memory;

pub use deny_cache::{DenyCache, DenyCacheBuilder, DenyCacheStats};
pub use local_verdicts::{LocalVerdicts, LocalVerdictsBuilder, LocalVerdictsStats};
pub use memory::{MemoryStore, MemoryStoreBuilder};

/// A future boxed for [`DynStore`].
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Something that keeps rate-limit state and decides on it: in memory, in Redis, or a
/// combinator wrapping another store.
///
/// `key` is any bytes (an IP, a hashed API key, a user id); `policy` says which limit, and
/// namespaces the key, so one store serves many policies. A denial is an `Ok` decision;
/// `Err` means no decision could be made (see [`Error`]'s predicates).
///
/// The futures are `Send`, so a store can be used from any tokio task. For a `dyn` store,
/// use [`DynStore`] (every `Store` is one) through `Arc<dyn DynStore>`, which is a `Store`
/// again.
///
/// # Examples
///
/// ```
/// use floodwall_core::{MemoryStore, Policy, Store};
///
/// # futures_lite_block_on(async {
/// let store = MemoryStore::new();
/// let policy = Policy::gcra("login", "3/min".parse()?)?;
/// for _ in 0..3 {
///     assert!(store.check(b"alice", &policy, 1).await?.allowed);
/// }
/// let denied = store.check(b"alice", &policy, 1).await?;
/// assert!(!denied.allowed);
/// assert!(store.check(b"bob", &policy, 1).await?.allowed);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// # fn futures_lite_block_on<F: std::future::Future>(f: F) -> F::Output {
/// #     // MemoryStore's futures are ready at once: one poll answers.
/// #     let mut f = std::pin::pin!(f);
/// #     let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
/// #     match f.as_mut().poll(&mut cx) { std::task::Poll::Ready(v) => v, _ => unreachable!() }
/// # }
/// ```
pub trait Store: Send + Sync {
    /// Decides a request of `cost` for `key` under `policy`, and records it if allowed.
    /// A cost of 0 is a peek that changes nothing.
    fn check(
        &self,
        key: &[u8],
        policy: &Policy,
        cost: u64,
    ) -> impl Future<Output = Result<Decision, Error>> + Send;

    /// Forgets `key`'s state under `policy`, as if it had never been seen.
    fn reset(&self, key: &[u8], policy: &Policy) -> impl Future<Output = Result<(), Error>> + Send;

    /// Decides without waiting, when this store can: `Some` is what [`check`](Self::check)
    /// would have answered, already recorded; `None` means nothing was done and the caller
    /// must use `check`. The memory store always answers here, so a caller on the hot path
    /// (the tower layer) builds no future for it. The default, for stores that do I/O, is
    /// `None`.
    fn check_now(&self, key: &[u8], policy: &Policy, cost: u64) -> Option<Result<Decision, Error>> {
        let _ = (key, policy, cost);
        None
    }

    /// Decides a request of `cost` for `key` against every one of `policies` at once: the
    /// request passes only if all allow it, and then it is recorded in all; if any refuses,
    /// none records it. For a request under several limits (10/s and 1000/day): checked
    /// one by one, the limits that allowed would spend quota on a request another refused.
    ///
    /// The answer has one entry per policy, in order: that policy's decision, recorded
    /// only if all allowed. In a refusal, a policy that would have allowed the request
    /// answers as a peek (cost 0) would: its figures as its state stays. A [`DenyCache`]
    /// that refuses without asking the store answers the other policies with what the
    /// store last said of them (marked [`cached`](Decision::cached)); `None` only there,
    /// for a policy it knows nothing of. A cost one policy can never admit is
    /// [`Error::CostTooHigh`], and nothing is recorded.
    ///
    /// The memory and Redis stores decide atomically, however many checks run at once
    /// ([all or nothing](crate::guide::all_or_nothing)). The default cannot (it would have to undo what it
    /// recorded, and another request may have seen it meanwhile): it checks one policy
    /// alone and answers [`Error::Unsupported`] for several.
    fn check_all(
        &self,
        key: &[u8],
        policies: &[Policy],
        cost: u64,
    ) -> impl Future<Output = Result<Vec<Option<Decision>>, Error>> + Send {
        async move {
            match policies {
                [] => Ok(Vec::new()),
                [policy] => Ok(vec![Some(self.check(key, policy, cost).await?)]),
                _ => Err(Error::Unsupported {
                    what: "checking several policies at once (check_all)",
                }),
            }
        }
    }

    /// [`check_all`](Self::check_all) without waiting, when this store can (as
    /// [`check_now`](Self::check_now)); the default is `None`.
    fn check_all_now(
        &self,
        key: &[u8],
        policies: &[Policy],
        cost: u64,
    ) -> Option<Result<Vec<Option<Decision>>, Error>> {
        let _ = (key, policies, cost);
        None
    }

    /// Books the earliest slot at which a request of `cost` for `key` passes under
    /// `policy`, if it is at most `max_wait` away (cut to
    /// [`Reservable::MAX_WAIT`]), atomically with every other check of the key; a booking
    /// beyond `max_wait` changes nothing and is a refusal (see [`Reservation`]). For
    /// waiting instead of refusing: the tower layer's `wait_up_to`.
    ///
    /// The default, for stores that cannot book, is [`Error::Unsupported`]: the memory
    /// and Redis stores implement it, and every combinator of this crate passes it on.
    fn reserve(
        &self,
        key: &[u8],
        policy: &Reservable,
        cost: u64,
        max_wait: Duration,
    ) -> impl Future<Output = Result<Reservation, Error>> + Send {
        let _ = (key, policy, cost, max_wait);
        std::future::ready(Err(Error::Unsupported {
            what: "booking a slot (reserve)",
        }))
    }

    /// Gives a reservation's slot back, where the algorithm allows it ([`Cancelled`] says
    /// when it cannot): for a request that booked a slot and will not use it (its client
    /// went away). `reservation` must come from this store's [`reserve`](Self::reserve)
    /// on the same key and policy. The default is [`Error::Unsupported`].
    fn cancel(
        &self,
        key: &[u8],
        policy: &Reservable,
        reservation: &Reservation,
    ) -> impl Future<Output = Result<Cancelled, Error>> + Send {
        let _ = (key, policy, reservation);
        std::future::ready(Err(Error::Unsupported {
            what: "cancelling a reservation",
        }))
    }

    /// Charges or refunds `key` under `policy` after its request was decided: for a cost
    /// known only from the response (a failed login, the tokens an LLM answer used) or a
    /// request that turned out not to count. A charge is applied even past the limit where
    /// the algorithm can carry debt; see [`Adjustment`] for what each algorithm does. The
    /// default, for stores that cannot, is [`Error::Unsupported`].
    fn adjust(
        &self,
        key: &[u8],
        policy: &Policy,
        adjustment: Adjustment,
    ) -> impl Future<Output = Result<(), Error>> + Send {
        let _ = (key, policy, adjustment);
        std::future::ready(Err(Error::Unsupported {
            what: "charging or refunding (adjust)",
        }))
    }

    /// Lifts `key`'s ban under `policy` and forgets its refusals and earlier bans, as if
    /// it had never been penalized (see [`Penalty`](crate::Penalty)); the key's quota
    /// state is kept. For an operator who banned the wrong client. A key that is not
    /// banned is left as it is. The default, for stores without penalties, is
    /// [`Error::Unsupported`].
    fn unban(&self, key: &[u8], policy: &Policy) -> impl Future<Output = Result<(), Error>> + Send {
        let _ = (key, policy);
        std::future::ready(Err(Error::Unsupported {
            what: "lifting a ban (unban)",
        }))
    }
}

/// The object-safe form of [`Store`], for `Arc<dyn DynStore>` when the store's type is
/// chosen at run time (memory or Redis from configuration). Implemented for every `Store`;
/// `Arc<dyn DynStore>` and `Box<dyn DynStore>` are `Store`s again.
pub trait DynStore: Send + Sync {
    /// [`Store::check`], boxed.
    fn check_boxed<'a>(
        &'a self,
        key: &'a [u8],
        policy: &'a Policy,
        cost: u64,
    ) -> BoxFuture<'a, Result<Decision, Error>>;

    /// [`Store::reset`], boxed.
    fn reset_boxed<'a>(
        &'a self,
        key: &'a [u8],
        policy: &'a Policy,
    ) -> BoxFuture<'a, Result<(), Error>>;

    /// [`Store::check_now`].
    fn check_now_dyn(
        &self,
        key: &[u8],
        policy: &Policy,
        cost: u64,
    ) -> Option<Result<Decision, Error>>;

    /// [`Store::check_all`], boxed.
    fn check_all_boxed<'a>(
        &'a self,
        key: &'a [u8],
        policies: &'a [Policy],
        cost: u64,
    ) -> BoxFuture<'a, Result<Vec<Option<Decision>>, Error>>;

    /// [`Store::check_all_now`].
    fn check_all_now_dyn(
        &self,
        key: &[u8],
        policies: &[Policy],
        cost: u64,
    ) -> Option<Result<Vec<Option<Decision>>, Error>>;

    /// [`Store::reserve`], boxed.
    fn reserve_boxed<'a>(
        &'a self,
        key: &'a [u8],
        policy: &'a Reservable,
        cost: u64,
        max_wait: Duration,
    ) -> BoxFuture<'a, Result<Reservation, Error>>;

    /// [`Store::cancel`], boxed.
    fn cancel_boxed<'a>(
        &'a self,
        key: &'a [u8],
        policy: &'a Reservable,
        reservation: &'a Reservation,
    ) -> BoxFuture<'a, Result<Cancelled, Error>>;

    /// [`Store::adjust`], boxed.
    fn adjust_boxed<'a>(
        &'a self,
        key: &'a [u8],
        policy: &'a Policy,
        adjustment: Adjustment,
    ) -> BoxFuture<'a, Result<(), Error>>;

    /// [`Store::unban`], boxed.
    fn unban_boxed<'a>(
        &'a self,
        key: &'a [u8],
        policy: &'a Policy,
    ) -> BoxFuture<'a, Result<(), Error>>;
}

impl<S: Store> DynStore for S {
    fn check_boxed<'a>(
        &'a self,
        key: &'a [u8],
        policy: &'a Policy,
        cost: u64,
    ) -> BoxFuture<'a, Result<Decision, Error>> {
        Box::pin(self.check(key, policy, cost))
    }

    fn reset_boxed<'a>(
        &'a self,
        key: &'a [u8],
        policy: &'a Policy,
    ) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(self.reset(key, policy))
    }

    fn check_now_dyn(
        &self,
        key: &[u8],
        policy: &Policy,
        cost: u64,
    ) -> Option<Result<Decision, Error>> {
        self.check_now(key, policy, cost)
    }

    fn check_all_boxed<'a>(
        &'a self,
        key: &'a [u8],
        policies: &'a [Policy],
        cost: u64,
    ) -> BoxFuture<'a, Result<Vec<Option<Decision>>, Error>> {
        Box::pin(self.check_all(key, policies, cost))
    }

    fn check_all_now_dyn(
        &self,
        key: &[u8],
        policies: &[Policy],
        cost: u64,
    ) -> Option<Result<Vec<Option<Decision>>, Error>> {
        self.check_all_now(key, policies, cost)
    }

    fn reserve_boxed<'a>(
        &'a self,
        key: &'a [u8],
        policy: &'a Reservable,
        cost: u64,
        max_wait: Duration,
    ) -> BoxFuture<'a, Result<Reservation, Error>> {
        Box::pin(self.reserve(key, policy, cost, max_wait))
    }

    fn cancel_boxed<'a>(
        &'a self,
        key: &'a [u8],
        policy: &'a Reservable,
        reservation: &'a Reservation,
    ) -> BoxFuture<'a, Result<Cancelled, Error>> {
        Box::pin(self.cancel(key, policy, reservation))
    }

    fn adjust_boxed<'a>(
        &'a self,
        key: &'a [u8],
        policy: &'a Policy,
        adjustment: Adjustment,
    ) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(self.adjust(key, policy, adjustment))
    }

    fn unban_boxed<'a>(
        &'a self,
        key: &'a [u8],
        policy: &'a Policy,
    ) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(self.unban(key, policy))
    }
}

impl Store for dyn DynStore {
    // `async fn` names each borrow's lifetime; returning the boxed future alone would not.
    async fn check(&self, key: &[u8], policy: &Policy, cost: u64) -> Result<Decision, Error> {
        self.check_boxed(key, policy, cost).await
    }

    async fn reset(&self, key: &[u8], policy: &Policy) -> Result<(), Error> {
        self.reset_boxed(key, policy).await
    }

    fn check_now(&self, key: &[u8], policy: &Policy, cost: u64) -> Option<Result<Decision, Error>> {
        self.check_now_dyn(key, policy, cost)
    }

    async fn check_all(
        &self,
        key: &[u8],
        policies: &[Policy],
        cost: u64,
    ) -> Result<Vec<Option<Decision>>, Error> {
        self.check_all_boxed(key, policies, cost).await
    }

    fn check_all_now(
        &self,
        key: &[u8],
        policies: &[Policy],
        cost: u64,
    ) -> Option<Result<Vec<Option<Decision>>, Error>> {
        self.check_all_now_dyn(key, policies, cost)
    }

    async fn reserve(
        &self,
        key: &[u8],
        policy: &Reservable,
        cost: u64,
        max_wait: Duration,
    ) -> Result<Reservation, Error> {
        self.reserve_boxed(key, policy, cost, max_wait).await
    }

    async fn cancel(
        &self,
        key: &[u8],
        policy: &Reservable,
        reservation: &Reservation,
    ) -> Result<Cancelled, Error> {
        self.cancel_boxed(key, policy, reservation).await
    }

    async fn adjust(
        &self,
        key: &[u8],
        policy: &Policy,
        adjustment: Adjustment,
    ) -> Result<(), Error> {
        self.adjust_boxed(key, policy, adjustment).await
    }

    async fn unban(&self, key: &[u8], policy: &Policy) -> Result<(), Error> {
        self.unban_boxed(key, policy).await
    }
}

/// `Store` for the pointers to a store (`Arc`, `Box`, `&`): every method is the pointee's,
/// so a shared or borrowed store works wherever a store does.
macro_rules! store_through_pointer {
    ($($pointer:ty),+) => {$(
        impl<S: Store + ?Sized> Store for $pointer {
            fn check(
                &self,
                key: &[u8],
                policy: &Policy,
                cost: u64,
            ) -> impl Future<Output = Result<Decision, Error>> + Send {
                (**self).check(key, policy, cost)
            }

            fn reset(
                &self,
                key: &[u8],
                policy: &Policy,
            ) -> impl Future<Output = Result<(), Error>> + Send {
                (**self).reset(key, policy)
            }

            fn check_now(
                &self,
                key: &[u8],
                policy: &Policy,
                cost: u64,
            ) -> Option<Result<Decision, Error>> {
                (**self).check_now(key, policy, cost)
            }

            fn check_all(
                &self,
                key: &[u8],
                policies: &[Policy],
                cost: u64,
            ) -> impl Future<Output = Result<Vec<Option<Decision>>, Error>> + Send {
                (**self).check_all(key, policies, cost)
            }

            fn check_all_now(
                &self,
                key: &[u8],
                policies: &[Policy],
                cost: u64,
            ) -> Option<Result<Vec<Option<Decision>>, Error>> {
                (**self).check_all_now(key, policies, cost)
            }

            fn reserve(
                &self,
                key: &[u8],
                policy: &Reservable,
                cost: u64,
                max_wait: Duration,
            ) -> impl Future<Output = Result<Reservation, Error>> + Send {
                (**self).reserve(key, policy, cost, max_wait)
            }

            fn cancel(
                &self,
                key: &[u8],
                policy: &Reservable,
                reservation: &Reservation,
            ) -> impl Future<Output = Result<Cancelled, Error>> + Send {
                (**self).cancel(key, policy, reservation)
            }

            fn adjust(
                &self,
                key: &[u8],
                policy: &Policy,
                adjustment: Adjustment,
            ) -> impl Future<Output = Result<(), Error>> + Send {
                (**self).adjust(key, policy, adjustment)
            }

            fn unban(
                &self,
                key: &[u8],
                policy: &Policy,
            ) -> impl Future<Output = Result<(), Error>> + Send {
                (**self).unban(key, policy)
            }
        }
    )+};
}

store_through_pointer!(Arc<S>, Box<S>, &S);

/// Locks `m`. A panic elsewhere while holding one of the stores' locks leaves the data
/// consistent (every write is a single assignment), so a poisoned lock is still usable.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// `d` in whole microseconds, saturating.
pub(crate) fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}
