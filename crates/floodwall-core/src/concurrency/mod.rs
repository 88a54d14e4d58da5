//! In-flight limits: at most N requests running at once per key, as a
//! [`ConcurrencyLimit`] next to the rate [`Policy`](crate::Policy)s.
//!
//! A rate says how often requests may start; it says nothing of how long each holds a
//! worker. This counts a request up when it is admitted and down when its [`Permit`] drops,
//! so an expensive endpoint (a report, an upload, a model call) never has more than N
//! running per key, whatever they last.
//!
//! - [`ConcurrencyStore`] acquires a slot: the [`MemoryStore`](crate::MemoryStore) in this
//!   process, `floodwall_redis::RedisStore` for a fleet (a lease per slot, renewed while
//!   the request runs, expiring if its process dies).
//! - A refusal is [`Acquired::Full`]: how many are in flight and the limit. It has no retry
//!   time: when a slot comes free depends on how long the running requests take, which no
//!   store knows.
//! - [`Breaker`](crate::resilience::Breaker) and [`Fallback`](crate::resilience::Fallback)
//!   wrap a concurrency store as they wrap a rate store: open, closed, or a local share of
//!   N while the shared store fails.
//!
//! ```
//! use floodwall_core::{Acquired, ConcurrencyLimit, ConcurrencyStore, MemoryStore};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let store = MemoryStore::new();
//! let reports = ConcurrencyLimit::new("reports", 1)?;
//! let running = match store.acquire(b"tenant-7", &reports).await? {
//!     Acquired::Granted(permit) => permit,
//!     Acquired::Full(full) => return Err(format!("{} already running", full.in_flight).into()),
//! };
//! assert!(!store.acquire(b"tenant-7", &reports).await?.is_granted());
//! drop(running); // the report is done
//! assert!(store.acquire(b"tenant-7", &reports).await?.is_granted());
//! # Ok(()) }
//! ```

use std::future::Future;
use std::sync::Arc;

use crate::Error;

mod limit;
pub(crate) mod memory;
mod permit;

pub use limit::ConcurrencyLimit;
pub use permit::Permit;

/// What an acquisition found: a slot, or a key already at its limit.
#[derive(Debug)]
#[must_use = "a granted permit holds its slot only until it is dropped"]
pub enum Acquired {
    /// A slot, held until the permit drops.
    Granted(Permit),
    /// Every slot is taken.
    Full(Full),
}

impl Acquired {
    /// The permit, if a slot was granted.
    pub fn permit(self) -> Option<Permit> {
        match self {
            Self::Granted(permit) => Some(permit),
            Self::Full(_) => None,
        }
    }

    /// Whether a slot was granted.
    pub fn is_granted(&self) -> bool {
        matches!(self, Self::Granted(_))
    }
}

/// A refusal: the key is at its limit. No retry time, because none can be known: a slot
/// comes free when a running request ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Full {
    /// Requests in flight on the key, as the store counted them (at least `limit`, more
    /// when the limit was lowered while they ran).
    pub in_flight: u64,
    /// The limit it refused under.
    pub limit: u64,
}

impl Full {
    /// A refusal with `in_flight` holders of `limit`, for a store of your own.
    pub fn new(in_flight: u64, limit: u64) -> Self {
        Self { in_flight, limit }
    }
}

/// Something that counts requests in flight per key and hands out [`Permit`]s: in memory,
/// in Redis, or a combinator around another store.
///
/// `acquire` either grants a slot (held until the permit drops) or answers
/// [`Acquired::Full`]; `Err` means no answer could be had (see [`Error`]'s predicates), as
/// for [`Store::check`](crate::Store::check). A store implements it next to
/// [`Store`](crate::Store): one store serves rate policies and in-flight limits alike.
pub trait ConcurrencyStore: Send + Sync {
    /// A slot for `key` under `limit`, or how full the key is.
    fn acquire(
        &self,
        key: &[u8],
        limit: &ConcurrencyLimit,
    ) -> impl Future<Output = Result<Acquired, Error>> + Send;

    /// Acquires without waiting, when this store can: `Some` is what
    /// [`acquire`](Self::acquire) would have answered; `None` means nothing was done and the
    /// caller must use `acquire`. The memory store always answers here; the default, for
    /// stores that do I/O, is `None`.
    fn acquire_now(&self, key: &[u8], limit: &ConcurrencyLimit) -> Option<Result<Acquired, Error>> {
        let _ = (key, limit);
        None
    }
}

impl<S: ConcurrencyStore + ?Sized> ConcurrencyStore for Arc<S> {
    fn acquire(
        &self,
        key: &[u8],
        limit: &ConcurrencyLimit,
    ) -> impl Future<Output = Result<Acquired, Error>> + Send {
        (**self).acquire(key, limit)
    }

    fn acquire_now(&self, key: &[u8], limit: &ConcurrencyLimit) -> Option<Result<Acquired, Error>> {
        (**self).acquire_now(key, limit)
    }
}

impl<S: ConcurrencyStore + ?Sized> ConcurrencyStore for &S {
    fn acquire(
        &self,
        key: &[u8],
        limit: &ConcurrencyLimit,
    ) -> impl Future<Output = Result<Acquired, Error>> + Send {
        (**self).acquire(key, limit)
    }

    fn acquire_now(&self, key: &[u8], limit: &ConcurrencyLimit) -> Option<Result<Acquired, Error>> {
        (**self).acquire_now(key, limit)
    }
}
