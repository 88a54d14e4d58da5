//! In-flight limits: [`ConcurrencyLimitLayer`], at most N requests running at once per
//! key, each holding its slot until its response body is done.
//!
//! The layer reuses the rate layer's parts: the [key extractors](crate::extract), the
//! [responders](crate::respond), [`OnMissingKey`](crate::extract::OnMissingKey), the
//! [refusal modes](crate::RefusalMode) and the fail modes of
//! [`floodwall_core::resilience`]. What is its own: the permit a request holds
//! ([`PermitBody`]), and headers in the `concurrent-requests` quota unit.

mod body;
mod config;
mod future;
mod layer;
mod service;

pub use body::PermitBody;
pub use future::ConcurrencyLimitFuture;
pub use layer::ConcurrencyLimitLayer;
pub use service::ConcurrencyLimitService;
