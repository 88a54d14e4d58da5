//! Staying up when Redis is not: limits shared through Redis, and when Redis fails, a
//! circuit breaker plus a local fallback that enforces this node's share of the quota.
//!
//! The walk-through below stops and restarts a Redis of its own, on port 6380, so that no
//! other program's Redis is touched:
//!
//! ```text
//! redis-server --port 6380 --save '' --appendonly no &     # the example's own Redis
//! REDIS_URL=redis://127.0.0.1:6380/ cargo run --example fallback --features redis
//! curl -i http://127.0.0.1:3000/         # decided by Redis
//! redis-cli -p 6380 shutdown nosave      # now decided locally, with 1/NODES of the quota
//! curl -i http://127.0.0.1:3000/stats    # what the fallback and the breaker did
//! redis-server --port 6380 --save '' --appendonly no &     # back to Redis within ~0.5 s
//! ```
//!
//! | variable | default | meaning |
//! |---|---|---|
//! | `LISTEN` | `127.0.0.1:3000` | address to serve on |
//! | `REDIS_URL` | `redis://127.0.0.1:6379/` | the shared store |
//! | `RATE` | `30/s burst 60` | the fleet-wide quota per client |
//! | `NODES` | `3` | servers in the fleet: each enforces `1/NODES` of the quota alone |
//! | `FAIL_MODE` | `local` | `local`, `open` (allow) or `closed` (503 + `Retry-After`) |

use std::env;
use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use floodwall::Policy;
use floodwall::core::resilience::{Breaker, FailMode, Fallback};
use floodwall::redis::RedisStore;
use floodwall::tower::RateLimitLayer;

fn var(name: &str, default: &str) -> String {
    env::var(name).unwrap_or_else(|_| default.to_owned())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let listen: SocketAddr = var("LISTEN", "127.0.0.1:3000").parse()?;
    let url = var("REDIS_URL", "redis://127.0.0.1:6379/");
    let policy = Policy::gcra("per-ip", var("RATE", "30/s burst 60").parse()?)?;
    let nodes: u32 = var("NODES", "3").parse()?;
    let mode = match var("FAIL_MODE", "local").as_str() {
        "local" => FailMode::local(nodes),
        "open" => FailMode::Open,
        "closed" => FailMode::Closed,
        other => {
            return Err(format!("FAIL_MODE must be local, open or closed, not {other:?}").into());
        }
    };

    // Each call to Redis is bounded (250 ms here; 1 s by default).
    let redis = RedisStore::builder()
        .timeout(Duration::from_millis(250))
        .multiplexed(&url)
        .await?;
    // The common case in one line would be `Fallback::local(Breaker::new(redis), nodes)`,
    // or `.fail_mode(mode)` on the layer; spelled out here to show the knobs.
    let breaker = Breaker::builder()
        .failure_threshold(5)
        .probe_interval(Duration::from_millis(500))
        .max_in_flight(1024)
        .build(redis);
    let store = Fallback::new(breaker, mode);

    let stats = store.clone();
    let app = Router::new()
        .route("/", get(|| async { "hello\n" }))
        .layer(RateLimitLayer::new(store, policy))
        .route(
            "/stats",
            get(move || {
                let (fallback, breaker) = (stats.stats(), stats.get_ref().stats());
                let state = stats.get_ref().state();
                async move { format!("{fallback:?}\nbreaker {state:?}: {breaker:?}\n") }
            }),
        );
    println!(
        "listening on http://{listen}/ (Redis {url}, fail mode {})",
        mode.name()
    );
    let listener = tokio::net::TcpListener::bind(listen).await?;
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .await?;
    Ok(())
}
