//! Staying up when the store is not: a [`Breaker`] that stops calling a dead store, a
//! [`Fallback`] that decides anyway (fail open, fail closed, or locally with a per-node
//! share of each quota), and, with the `tokio` feature, a `Timeout` on every call.
//!
//! A rate limiter must never be what takes a service down. When the shared store (Redis)
//! is slow or gone, every request still gets an answer, promptly, in the way you chose:
//!
//! | [`FailMode`] | while the store fails | trade-off |
//! |---|---|---|
//! | [`Local`](FailMode::Local) | decided by an in-process [`MemoryStore`](crate::MemoryStore) with `quota / nodes` | stays limited, roughly; each node enforces its share alone |
//! | [`Open`](FailMode::Open) | allowed (a warning when it starts, a counter) | availability over protection |
//! | [`Closed`](FailMode::Closed) | the error passes through (the tower layer answers 503 + `Retry-After`) | protection over availability |
//!
//! These are store combinators: each wraps any [`Store`](crate::Store) and is one again, so
//! they compose like tower layers, innermost first:
//!
//! ```text
//! Fallback::local(Breaker::new(redis), 3)     // the common case, one line
//! ```
//!
//! - The [`Breaker`] makes a dead store cost one timeout per probe interval, not one per
//!   request, and bounds the calls in flight so a stalled store cannot pile requests up.
//! - The [`Fallback`] turns every store failure (timeout, unreachable, backend error, open
//!   breaker, overload) into its [`FailMode`]'s answer, and counts them.
//! - Timeouts: a store that does I/O must bound its own calls, as
//!   `floodwall_redis::RedisStore` does (1 s by default). For any other store, the `tokio`
//!   feature adds `Timeout` (1 s by default). Without a bound, a hung store holds requests
//!   until the breaker's in-flight bound sheds the rest.
//!
//! Breakers and fallbacks read time from a [`Clock`](crate::Clock) and start no task or
//! timer: core stays runtime-free, and tests drive them with a
//! [`ManualClock`](crate::ManualClock).
//!
//! # Logging
//!
//! Each transition is logged once through `tracing` (target `floodwall`), never per
//! request: a breaker opening (`warn`), probing (`debug`) and closing (`info`); a fallback
//! engaging (`warn`) and disengaging (`info`).
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
