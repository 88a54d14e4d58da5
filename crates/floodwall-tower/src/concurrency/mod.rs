//! In-flight limits: [`ConcurrencyLimitLayer`], at most N requests running at once per
//! key, each holding its slot until its response body is done. The extractors, responders,
//! refusal modes and fail modes are the rate layer's.

mod body;
mod config;
mod future;
mod layer;
mod service;

pub use body::PermitBody;
pub use future::ConcurrencyLimitFuture;
pub use layer::ConcurrencyLimitLayer;
pub use service::ConcurrencyLimitService;
