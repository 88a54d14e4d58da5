//! The core of floodwall: rate-limiting algorithms as pure functions, the quotas and
//! policies they enforce, clocks, the [`Store`] trait, and the embedded [`MemoryStore`].
//!
//! Nothing here does I/O or needs an async runtime. Time is a parameter: algorithms take
//! `now` (microseconds since the Unix epoch) and stores read it from a [`Clock`] or, in Redis,
//! from the server.
//!
//! ```
//! use floodwall_core::{Algorithm, MemoryStore, Policy, StoreExt};
//!
//! let store = MemoryStore::new();
//! let per_ip = Policy::new("per-ip", Algorithm::Gcra, "10/s burst 20".parse()?)?;
//!
//! // The memory store answers at once (`check_now` is always `Some`); any store has the
//! // async `check`.
//! let decision = store.check_now(b"203.0.113.7", &per_ip, 1).expect("answers now")?;
//! assert!(decision.allowed);
//! assert_eq!((decision.limit, decision.remaining), (20, 19));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod algorithm;
mod clock;
pub mod concurrency;
mod decision;
mod error;
mod penalty;
mod policy;
mod quota;
mod reservation;
pub mod resilience;
pub mod store;

pub use algorithm::{Adjustment, Algorithm, Parameters, State};
pub use clock::{Clock, ManualClock, SystemClock};
pub use concurrency::{Acquired, ConcurrencyLimit, Full, Permit};
pub use decision::Decision;
pub use error::{BoxError, ConfigError, Error};
pub use penalty::Penalty;
pub use policy::{Policy, Rounding};
pub use quota::{MAX_SPAN, Quota, parse_duration};
pub use reservation::{Cancelled, Reservable, Reservation, Ticket};
pub use store::{DenyCache, DenyCacheBuilder, DenyCacheStats};
pub use store::{DynStore, MemoryStore, MemoryStoreBuilder, Store, StoreExt};
pub use store::{LocalVerdicts, LocalVerdictsBuilder, LocalVerdictsStats};
