//! In-flight limits: at most N requests running at once per key, as a
//! [`ConcurrencyLimit`] next to the rate [`Policy`](crate::Policy)s.
//!
//! A rate says how often requests may start; it says nothing of how long each holds a
//! worker. This counts a request up when it is admitted and down when its [`Permit`] drops,
//! so an expensive endpoint (a report, an upload, a model call) never has more than N
//! running per key, whatever they last.
//!
//! - A store acquires a slot ([`StoreExt::acquire`](crate::StoreExt::acquire), the
//!   operation [`Op::Acquire`](crate::store::Op::Acquire)): the
//!   [`MemoryStore`](crate::MemoryStore) in this process, `floodwall_redis::RedisStore`
//!   for a fleet (a lease per slot, renewed while the request runs, expiring if its
//!   process dies). A store that does not count answers
//!   [`Error::Unsupported`](crate::Error::Unsupported).
//! - A refusal is [`Acquired::Full`]: how many are in flight and the limit. It has no retry
//!   time: when a slot comes free depends on how long the running requests take, which no
//!   store knows.
//! - [`Breaker`](crate::resilience::Breaker) and [`Fallback`](crate::resilience::Fallback)
//!   wrap a concurrency store as they wrap a rate store: open, closed, or a local share of
//!   N while the shared store fails.
//!
//! ```
//! use floodwall_core::{Acquired, ConcurrencyLimit, MemoryStore, StoreExt};
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
