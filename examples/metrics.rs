//! Metrics: the layer's counters as Prometheus text on `/metrics`.
//!
//! ```text
//! cargo run --example metrics --features metrics,axum
//! for i in $(seq 8); do curl -s -o /dev/null -w '%{http_code}\n' http://127.0.0.1:3000/; done
//! curl -s http://127.0.0.1:3000/metrics | grep floodwall
//! ```
//!
//! With the `metrics` feature the layer counts each request by policy and result
//! (`floodwall_rate_limiting_requests`), the admitted ones that left a policy at least
//! 80 % used (`floodwall_rate_limiting_near_limit`), and times the store calls it waits
//! for, through the `metrics` facade: any exporter reads them. Here it is
//! `metrics-exporter-prometheus`, whose text this app serves itself on `/metrics`, outside
//! the limit. Install the recorder before serving: the layer registers its counters with
//! the recorder there is at its first request, and describes each (the `# HELP` lines).
//! The memory store answers without a call to wait for, so the store-call histogram's
//! count stays 0 here; with a `RedisStore` each round trip is timed.

use std::net::SocketAddr;

use axum::Router;
use axum::routing::get;
use floodwall::tower::RateLimitLayer;
use floodwall::{MemoryStore, Policy};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

/// The app: `/` limited to 5 requests a minute per client IP (policy `api`), `/metrics`
/// the Prometheus text of what `prometheus` recorded, unlimited.
pub(crate) fn app(prometheus: PrometheusHandle) -> Result<Router, Box<dyn std::error::Error>> {
    let limited = Router::new()
        .route("/", get(|| async { "hello\n" }))
        .layer(RateLimitLayer::new(
            MemoryStore::new(),
            Policy::gcra("api", "5/min".parse()?)?,
        ));
    let metrics = Router::new().route("/metrics", get(move || async move { prometheus.render() }));
    Ok(limited.merge(metrics))
}

/// The Prometheus recorder, installed as the process's: everything the layer counts from
/// now on goes to it.
pub(crate) fn install() -> Result<PrometheusHandle, Box<dyn std::error::Error>> {
    let handle = PrometheusBuilder::new()
        // The store-call histogram as buckets (seconds): without them, the exporter
        // renders a summary, whose quantiles cannot be added up across nodes.
        .set_buckets(&[0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1])?
        .install_recorder()?;
    // The layer describes its metrics at its first request; this has them from the start.
    floodwall::tower::metrics::describe();
    Ok(handle)
}

// tests/metrics_example.rs builds this file as a module, for `app` and `install`.
#[allow(dead_code)]
#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let prometheus = install()?;
    let listen = std::env::var("LISTEN").unwrap_or_else(|_| "127.0.0.1:3000".into());
    let listener = tokio::net::TcpListener::bind(&listen).await?;
    println!("listening on http://{}", listener.local_addr()?);
    axum::serve(
        listener,
        app(prometheus)?.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .await?;
    Ok(())
}
