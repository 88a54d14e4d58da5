//! floodwall's Redis store: rate-limit state shared by a fleet of servers, decided by one
//! atomic Lua script per check, on the Redis server's clock.
//!
//! ```no_run
//! use floodwall_core::{Policy, StoreExt};
//! use floodwall_redis::RedisStore;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let store = RedisStore::connect("redis://127.0.0.1:6379/").await?;
//! let per_ip = Policy::gcra("per-ip", "10/s burst 20".parse()?)?;
//!
//! let decision = store.check(b"203.0.113.7", &per_ip, 1).await?;
//! if !decision.is_allowed() {
//!     println!("retry after {:?}", decision.retry_after);
//! }
//! # Ok(()) }
//! ```
//!
//! `RedisStore` is a [`Store`](floodwall_core::Store): hand it to floodwall-tower's
//! `RateLimitLayer::new(store, policy)` as you would a `MemoryStore`. The connection kinds
//! are on [`RedisStore::builder`] (`.pool(url)`, `.cluster(urls)`, `.sentinel(..)`).
//!
//! - **Every algorithm** of [`floodwall_core`] runs as a script built from `src/lua/`, doing
//!   the same integer arithmetic as the Rust code (the same decision vectors run against
//!   both), on the server's clock (`TIME`), so clients' clocks never matter.
//! - **One key per decision**, whose hash tag is the user key, so every script runs on Redis
//!   Cluster; every key expires when its state is worthless (no `KEYS`, no `SCAN`).
//! - **Four connection kinds**: a multiplexed `ConnectionManager`, a `bb8-redis` pool, a
//!   cluster, and the primary Redis Sentinel names, followed through failovers.
//! - **Failures** map onto [`floodwall_core::Error`]: never a panic, never a silent allow.
//!
//! A check is one `EVALSHA` round trip, or none when the
//! [deny cache](RedisStoreBuilder::deny_cache) knows the answer. Keys
//! ([`RedisStore::redis_key`]), costs and coalescing: the [Redis store guide](guide::redis);
//! in-flight leases: the [in-flight guide](guide::in_flight).

mod adjust;
mod all;
mod at;
mod builder;
mod call;
mod coalesce;
mod connection;
mod deployment;
mod error;
pub mod guide;
mod key;
mod kind;
mod lease;
#[cfg(feature = "metrics")]
pub mod metrics;
mod op;
mod penalty_state;
mod renew;
mod reply;
mod reserve;
mod script;
mod sentinel;
mod slots;
mod stats;
mod store;
mod unpack;

pub use at::RedisStoreAt;
pub use builder::RedisStoreBuilder;
pub use deployment::Deployment;
pub use error::BuildError;
pub use key::{MAX_HEX_KEY_LEN, MAX_RAW_KEY_LEN};
pub use script::{penalized_script_for, script_for};
pub use stats::RedisStats;
pub use store::RedisStore;

/// The redis-rs crate (1.x) this store is built on, to configure a connection for
/// [`RedisStoreBuilder::from_connection_manager`] or [`RedisStoreBuilder::from_cluster`]:
/// using it ties your code to that major version, which the URL-based builders do not.
pub use redis;
