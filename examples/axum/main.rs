//! floodwall's main example: a small axum API, rate limited per client IP.
//!
//! ```text
//! cargo run --example axum
//! curl -i http://127.0.0.1:3000/
//! ```
//!
//! `LISTEN`, `RATE`, `ALGORITHM`, `TRUSTED_PROXIES`, `REDIS_URL` and `REDIS_CLUSTER_URLS`
//! configure it: `config.rs` beside this file lists them.

mod config;

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;

use axum::Router;
use axum::extract::Path;
use axum::routing::get;
use floodwall::tower::RateLimitLayer;
use floodwall::tower::choose::Choice;
use floodwall::tower::extract::ClientIp;
use floodwall::{DynStore, Policy};
use http::request::Parts;
use ipnet::IpNet;

use crate::config::Config;

/// The API: three routes behind one limit per client IP.
fn app(store: Arc<dyn DynStore>, policy: Policy, trusted_proxies: Vec<IpNet>) -> Router {
    let limit = RateLimitLayer::new(store, policy)
        // The peer's IP, or the client's from `X-Forwarded-For` when the peer is a trusted proxy.
        .key(ClientIp::new(trusted_proxies))
        // Health checks are never limited.
        .choose(|req: &Parts, _key: &[u8]| match req.uri.path() {
            "/health" => Choice::Skip,
            _ => Choice::Default,
        });

    Router::new()
        .route("/", get(|| async { "hello from floodwall\n" }))
        .route(
            "/hello/{name}",
            get(|Path(name): Path<String>| async move { format!("hello, {name}\n") }),
        )
        .route("/health", get(|| async { "ok\n" }))
        .layer(limit)
}

async fn serve(config: Config) -> Result<(), Box<dyn std::error::Error>> {
    let (store, store_name) = config.store.connect().await?;
    let listener = tokio::net::TcpListener::bind(config.listen).await?;
    print_banner(listener.local_addr()?, &config, &store_name);

    let app = app(store, config.policy, config.trusted);
    // `ConnectInfo<SocketAddr>` is where the layer finds each request's peer address.
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .with_graceful_shutdown(async {
        let _ = tokio::signal::ctrl_c().await;
    })
    .await?;
    Ok(())
}

#[tokio::main]
async fn main() -> ExitCode {
    let outcome = match Config::from_env() {
        Ok(config) => serve(config).await,
        Err(message) => Err(message.into()),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

/// What is served, how it is limited, and how to try it.
fn print_banner(addr: SocketAddr, config: &Config, store_name: &str) {
    println!("floodwall axum example on http://{addr}");
    println!(
        "  limit:   {} per client IP, {} algorithm, {store_name} store",
        config.policy.quota(),
        config.policy.algorithm().name(),
    );
    if config.trusted.is_empty() {
        println!("  proxies: none trusted (X-Forwarded-For is ignored; set TRUSTED_PROXIES)");
    } else {
        let list: Vec<String> = config.trusted.iter().map(ToString::to_string).collect();
        println!(
            "  proxies: X-Forwarded-For believed from {}",
            list.join(", ")
        );
    }
    println!("  routes:  GET /  GET /hello/{{name}}  GET /health (not limited)");
    println!("try it:");
    println!("  curl -i http://{addr}/");
    println!(
        "  for i in $(seq 30); do curl -s -o /dev/null -w '%{{http_code}} ' http://{addr}/; done; echo"
    );
}
