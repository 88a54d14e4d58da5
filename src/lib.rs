//! floodwall: rate limiting for tower services (axum, tonic, hyper), in memory or shared
//! through Redis.
//!
//! This crate re-exports the family, so one `use floodwall::...` is enough: the algorithms,
//! quotas, policies and stores of [`floodwall_core`] at the root, the Redis store under
//! `floodwall::redis` (feature `redis`) and the tower layer under `floodwall::tower`
//! (feature `tower`, on by default).
//!
//! Features: `axum` / `tonic` let the layer read the peer address (and axum's matched
//! route) from those servers' connection info — enable the one you serve with; `redis`
//! adds the Redis store; `tokio` adds `resilience::Timeout` for any store.

pub use floodwall_core::*;

#[cfg(feature = "redis")]
pub use floodwall_redis as redis;

#[cfg(feature = "tower")]
pub use floodwall_tower as tower;
