//! The core of floodwall: rate-limiting algorithms as pure functions, the quotas and
//! policies they enforce, clocks, the [`Store`] trait, and the embedded [`MemoryStore`].
//!
//! ```
//! use floodwall_core::{MemoryStore, Policy, StoreExt};
//!
//! let store = MemoryStore::new();
//! let per_ip = Policy::gcra("per-ip", "10/s burst 20".parse()?)?;
//!
//! // The memory store answers at once (`check_now` is always `Some`); any store has the
//! // async `check`.
//! let decision = store.check_now(b"203.0.113.7", &per_ip, 1).expect("answers now")?;
//! assert!(decision.is_allowed());
//! assert_eq!((decision.limit, decision.remaining), (20, 19));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Nothing here does I/O or needs an async runtime. Time is a parameter: algorithms take
//! `now` (microseconds since the Unix epoch) and stores read it from a [`Clock`] or, in Redis,
//! from the server. The tower layer (floodwall-tower) and the Redis store (floodwall-redis)
//! build on this crate; most applications use all three through the `floodwall` facade.
//!
//! - [`Policy`] binds a [`Quota`] (`"10/s burst 20"`, `"1000/day"`) to an [`Algorithm`]
//!   (GCRA, token bucket, leaky bucket, fixed window, sliding window, sliding log).
//! - A [`Store`] keeps each key's state and decides: [`MemoryStore`] in this process,
//!   `floodwall_redis::RedisStore` for a fleet. [`DenyCache`] and [`LocalVerdicts`] answer
//!   some checks in front of any store; [`resilience`] keeps deciding while it fails.
//! - A [`Penalty`] bans a key that keeps coming back; [`ConcurrencyLimit`] caps the
//!   requests in flight per key.
//!
//! The [`guide`] module holds the longer arguments: all or nothing, charging, the deny
//! cache, failures, local verdicts, penalties, quota changes.

pub mod algorithm;
mod clock;
pub mod concurrency;
mod decision;
mod error;
pub mod guide;
mod penalty;
mod policy;
mod quota;
mod reservation;
pub mod resilience;
pub mod store;

pub use algorithm::{Adjustment, Algorithm, Parameters, State};
pub use clock::{Clock, ManualClock, SystemClock};
pub use concurrency::{Acquired, ConcurrencyLimit, Full, Permit};
pub use decision::{Decision, Outcome, Source};
pub use error::{BoxError, ConfigError, Error};
pub use penalty::{Penalty, PenaltyState};
pub use policy::{Policy, Rounding};
pub use quota::{MAX_SPAN, Quota, parse_duration};
pub use reservation::{Cancelled, Reservable, Reservation, Ticket};
pub use store::{DenyCache, DenyCacheBuilder, DenyCacheStats};
pub use store::{DynStore, MemoryStore, MemoryStoreBuilder, Store, StoreExt};
pub use store::{LocalVerdicts, LocalVerdictsBuilder, LocalVerdictsStats};
