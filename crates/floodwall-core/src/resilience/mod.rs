//! Staying up when the store is not: a [`Breaker`] that stops calling a dead store, a
//! [`Fallback`] that decides anyway (fail open, fail closed, or locally with a per-node
//! share of each quota), and, with the `tokio` feature, a `Timeout` on every call.
//!
//! Each wraps any [`Store`](crate::Store) and is one again, composing innermost first:
//! `Fallback::local(Breaker::new(redis), 3)`. The [failures guide](crate::guide::failures)
//! weighs them.
//!
//! # Examples
//!
//! ```
//! use floodwall_core::resilience::{Breaker, Fallback, FailMode};
//! use floodwall_core::{MemoryStore, Policy, StoreExt};
//!
//! # let shared = MemoryStore::new(); // stands for a RedisStore
//! // 3 nodes share the quota; alone, each enforces a third of it.
//! let store = Fallback::local(Breaker::new(shared), 3);
//! let policy = Policy::gcra("per-ip", "30/s".parse()?)?;
//! let decision = store.check_now(b"203.0.113.7", &policy, 1).unwrap()?;
//! assert!(decision.is_allowed());
//! assert_eq!(store.stats().decided_locally, 0);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod breaker;
mod fail_mode;
mod fallback;
#[cfg(feature = "tokio")]
mod timeout;

pub use breaker::{
    Breaker, BreakerBuilder, BreakerState, BreakerStats, DEFAULT_FAILURE_THRESHOLD,
    DEFAULT_MAX_IN_FLIGHT, DEFAULT_PROBE_INTERVAL,
};
pub use fail_mode::FailMode;
pub use fallback::{Fallback, FallbackStats};
#[cfg(feature = "tokio")]
pub use timeout::Timeout;
