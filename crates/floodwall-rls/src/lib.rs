//! floodwall as a rate-limit service for gateways: Envoy's `RateLimitService` (RLS v3,
//! `envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit`), meant as a drop-in for
//! envoyproxy/ratelimit that decides with every floodwall algorithm.
//!
//! - [`config`] reads envoyproxy/ratelimit's YAML files unchanged (plus floodwall's
//!   `algorithm`, `burst` and `penalty`) and finds the limit of each request descriptor.
//! - [`RateLimitService`] answers `ShouldRateLimit` with that configuration over any
//!   floodwall store, as a tonic service to add to a server of your own
//!   ([`into_server`](RateLimitService::into_server)).
//!
//! The binary comes next.

pub mod config;
pub mod service;

pub use service::RateLimitService;
