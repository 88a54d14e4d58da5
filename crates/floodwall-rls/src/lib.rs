//! floodwall as a rate-limit service for gateways: Envoy's `RateLimitService` (RLS v3,
//! `envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit`), meant as a drop-in for
//! envoyproxy/ratelimit that decides with every floodwall algorithm.
//!
//! So far the crate holds its configuration: [`config`] reads envoyproxy/ratelimit's YAML
//! files unchanged (plus floodwall's `algorithm`, `burst` and `penalty`) and finds the
//! limit of each request descriptor. The gRPC service and its binary come next.

pub mod config;
