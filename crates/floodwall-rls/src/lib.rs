//! floodwall as a rate-limit service for gateways: Envoy's `RateLimitService` (RLS v3,
//! `envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit`), meant as a drop-in for
//! envoyproxy/ratelimit that decides with every floodwall algorithm.
//!
//! - [`config`] reads envoyproxy/ratelimit's YAML files unchanged (plus floodwall's
//!   `algorithm`, `burst` and `penalty`) and finds the limit of each request descriptor.
//! - [`RateLimitService`] answers `ShouldRateLimit` with that configuration over any
//!   floodwall store, as a tonic service to add to a server of your own
//!   ([`into_server`](RateLimitService::into_server)).
//! - [`metrics`] names what the service records through the `metrics` facade (feature
//!   `metrics`): decisions by domain, descriptor key and result, and store latency.
//!
//! The binary `floodwall-rls` (feature `bin`, on by default) serves it: `floodwall-rls
//! --config <file or directory> [--listen 127.0.0.1:8081] [--redis <url> | --redis-cluster
//! <url,...> | --sentinel <url,...> --service <name>] [--redis-timeout <ms>]
//! [--redis-prefix <prefix>] [--fail-mode unavailable|local [--instances <n>]]
//! [--metrics <addr>] [--response-headers]`, with the standard gRPC health service, a
//! reload on SIGHUP and a graceful stop on SIGTERM (`floodwall-rls --help`). When Redis
//! fails, a request is answered `UNAVAILABLE` within `--redis-timeout` (Envoy's filter then
//! applies its `failure_mode_deny`), or, with `--fail-mode local`, decided in the process's
//! memory with `1/instances` of each quota until Redis answers again. `--metrics` serves
//! the [`metrics`] as Prometheus text on `http://<addr>/metrics`. A program that embeds the service depends on this crate with
//! `default-features = false` and builds none of the binary's dependencies.

mod charge;
pub mod config;
pub mod metrics;
pub mod service;

pub use service::RateLimitService;
