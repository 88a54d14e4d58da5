//! floodwall: rate limiting for tower services (axum, tonic, hyper), in memory or shared
//! through Redis.
//!
//! ```no_run
//! use std::net::SocketAddr;
//! use axum::{Router, routing::get};
//! use floodwall::{MemoryStore, Policy};
//! use floodwall::tower::RateLimitLayer;
//!
//! # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // 10 requests a second per client IP, bursts of up to 20; the 21st in a burst gets 429.
//! let policy = Policy::gcra("per-ip", "10/s burst 20".parse()?)?;
//! let app = Router::new()
//!     .route("/", get(|| async { "hello" }))
//!     .layer(RateLimitLayer::new(MemoryStore::new(), policy));
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
//! // The peer address is what the layer keys by: serve with connect info.
//! axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>()).await?;
//! # Ok(()) }
//! ```
//!
//! `.layer` on a router limits its unknown paths too (a 404 counts); a limit for some
//! routes only goes on with `route_layer` (see `floodwall::tower`'s docs, "axum: `layer`
//! or `route_layer`").
//!
//! One `use floodwall::...` is enough: quotas, policies and the stores at the root, the
//! Redis store under `floodwall::redis` (feature `redis`) and the tower layer under
//! `floodwall::tower` (feature `tower`, on by default). The guides of every crate are
//! gathered in [`guide`].
//!
//! Features: `axum` / `tonic` let the layer read the peer address (and axum's matched
//! route) from those servers' connection info — enable the one you serve with; `redis`
//! adds the Redis store; `tokio` adds `resilience::Timeout` for any store, and lets a
//! `DenyCache`'s checks wait (bounded) for one of their key in flight; `metrics` counts
//! the layer's decisions through the `metrics` facade; `wait` lets a refused request wait
//! for its slot instead (`RateLimitLayer::wait`), `live` changes the layer's
//! policies and modes while it serves (`LiveLimits`), `charge` charges each request by
//! its response (`RateLimitLayer::charge_by`); `file` reads the layer's policies, key and
//! routes from a TOML file (`floodwall::tower::file`), and turns on `live`.
//!
//! # The root and `core`
//!
//! The root holds the names an application writes: policies, the memory store and the
//! store traits, decisions, errors, [`FailMode`]. Everything else of `floodwall-core` is
//! under [`core`]: clocks (`core::ManualClock` for tests), reservations, the caches in
//! front of a store (`core::DenyCache`, `core::LocalVerdicts`), `core::resilience`, and
//! what writing a store of your own takes ([`core::store::Op`], [`core::store::Reply`],
//! an algorithm's [`State`](core::State) and [`Parameters`](core::Parameters)).

// The names an application writes; the rest (clocks, reservations, the caches' builders
// and counters, what a store of your own needs) is under `core`.
pub use floodwall_core::resilience::FailMode;
pub use floodwall_core::{Adjustment, Algorithm, ConcurrencyLimit, Penalty, Policy, Quota};
pub use floodwall_core::{ConfigError, Decision, Error, Outcome};
pub use floodwall_core::{MemoryStore, Store, StoreExt};

/// Everything of `floodwall-core`, for what the root leaves out: writing a store of your
/// own, or deciding with an algorithm directly ([`Policy::decide`] on a
/// [`State`](core::State)).
pub use floodwall_core as core;

#[cfg(feature = "redis")]
pub use floodwall_redis as redis;

#[cfg(feature = "tower")]
pub use floodwall_tower as tower;

/// The guides: each crate's longer pages (what a feature promises, why it is exact, what it
/// costs), gathered from `floodwall_core::guide`, `floodwall_tower::guide` (feature `tower`)
/// and `floodwall_redis::guide` (feature `redis`).
pub mod guide {
    pub use floodwall_core::guide::*;
    #[cfg(feature = "redis")]
    pub use floodwall_redis::guide::*;
    #[cfg(feature = "tower")]
    pub use floodwall_tower::guide::*;
}

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
