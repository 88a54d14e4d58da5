//! floodwall: rate limiting for tower services (axum, tonic, hyper), in memory or shared
//! through Redis.
//!
//! One `use floodwall::...` is enough: quotas, policies and the stores at the root, the
//! Redis store under `floodwall::redis` (feature `redis`) and the tower layer under
//! `floodwall::tower` (feature `tower`, on by default).
//!
//! Features: `axum` / `tonic` let the layer read the peer address (and axum's matched
//! route) from those servers' connection info — enable the one you serve with; `redis`
//! adds the Redis store; `tokio` adds `resilience::Timeout` for any store, and lets a
//! `DenyCache`'s checks wait (bounded) for one of their key in flight; `wait` lets a refused
//! request wait for its slot instead (`RateLimitLayer::wait_up_to`), `live` changes the
//! layer's policies and modes while it serves (`LiveLimits`), `charge` charges each
//! request by its response (`RateLimitLayer::charge_by`); `file` reads the layer's
//! policies, key and routes from a TOML file (`floodwall::tower::file`), and turns on
//! `live`.
//!
//! # Writing a store of your own
//!
//! [`Store`] is here; what implementing one takes beyond it (an algorithm's
//! [`State`](core::State) and [`Parameters`](core::Parameters), [`BoxError`](core::BoxError))
//! is in [`core`], which is all of `floodwall-core`.

pub use floodwall_core::resilience;
pub use floodwall_core::{Acquired, ConcurrencyLimit, Full, Permit};
pub use floodwall_core::{Adjustment, Algorithm, Decision, MAX_SPAN, Policy, Quota, Rounding};
pub use floodwall_core::{Cancelled, Reservable, Reservation, Ticket};
pub use floodwall_core::{Clock, ManualClock, SystemClock};
pub use floodwall_core::{ConfigError, Error};
pub use floodwall_core::{DenyCache, DenyCacheBuilder, DenyCacheStats};
pub use floodwall_core::{DynStore, MemoryStore, MemoryStoreBuilder, Store, StoreExt};
pub use floodwall_core::{LocalVerdicts, LocalVerdictsBuilder, LocalVerdictsStats};
pub use floodwall_core::{Penalty, parse_duration};

/// Everything of `floodwall-core`, for what the root leaves out: writing a store of your
/// own, or deciding with an algorithm directly ([`Policy::decide`] on a
/// [`State`](core::State)).
pub use floodwall_core as core;

#[cfg(feature = "redis")]
pub use floodwall_redis as redis;

#[cfg(feature = "tower")]
pub use floodwall_tower as tower;

/// The README's Rust blocks, compiled as doc-tests so they cannot drift from the API. They
/// use the axum layer, the Redis store, waiting, live changes and charging, hence the
/// features.
#[cfg(all(
    doctest,
    feature = "axum",
    feature = "redis",
    feature = "wait",
    feature = "live",
    feature = "charge"
))]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
