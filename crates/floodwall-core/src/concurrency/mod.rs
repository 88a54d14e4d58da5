//! In-flight limits: at most N requests running at once per key, as a
//! [`ConcurrencyLimit`] next to the rate [`Policy`](crate::Policy)s.
//!
//! A rate says how often requests may start; this bounds how many run at once, whatever
//! each lasts: a request counts from its admission until its [`Permit`] drops. Stores
//! acquire slots ([`StoreExt::acquire`](crate::StoreExt::acquire)); a refusal is
//! [`Acquired::Full`], with no retry time (no store knows when a running request ends).
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

/// A refusal: the key is at its limit (no retry time: a slot frees when a request ends).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Full {
    /// Requests in flight on the key, as the store counted them (at least `limit`).
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
