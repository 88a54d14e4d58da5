//! floodwall's main example: a small axum API, rate limited per client IP.
//!
//! ```text
//! cargo run --example axum
//! curl -i http://127.0.0.1:3000/
//! ```
//!
//! `LISTEN`, `RATE`, `ALGORITHM`, `TRUSTED_PROXIES`, `REDIS_URL` and `REDIS_CLUSTER_URLS`
//! configure it: `config.rs` beside this file lists them.
//!
//! With `POLICY_FILE`, the policies, the key and the routes come from a TOML file
//! instead, and `kill -HUP <pid>` reloads it without a restart:
//!
//! ```text
//! POLICY_FILE=examples/policies.toml cargo run --example axum
//! ```

mod config;

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;

use axum::Router;
use axum::extract::Path;
use axum::routing::{get, post};
use floodwall::Policy;
use floodwall::core::DynStore;
use floodwall::tower::RateLimitLayer;
use floodwall::tower::choose::Choice;
use floodwall::tower::extract::ClientIp;
use floodwall::tower::file::{FileLimits, PolicyFile};
use http::request::Parts;
use ipnet::IpNet;

use crate::config::Config;

/// The API: its routes behind one limit per client IP.
fn app(store: Arc<dyn DynStore>, policy: Policy, trusted_proxies: Vec<IpNet>) -> Router {
    let limit = RateLimitLayer::new(store, policy)
        // The peer's IP, or the client's from `X-Forwarded-For` when the peer is a trusted proxy.
        .key(ClientIp::new(trusted_proxies))
        // Health checks are never limited.
        .choose(|req: &Parts, _key: &[u8]| match req.uri.path() {
            "/health" => Choice::Skip,
            _ => Choice::Default,
        });

    routes().layer(limit)
}

/// The API with the policies, key and routes of a policy file, and the handle that
/// reloads it.
fn app_from_file(store: Arc<dyn DynStore>, file: &PolicyFile) -> (Router, FileLimits) {
    let (limit, limits) = file.layer(store);
    (routes().layer(limit), limits)
}

/// The routes, before any limit.
fn routes() -> Router {
    Router::new()
        .route("/", get(|| async { "hello from floodwall\n" }))
        .route(
            "/hello/{name}",
            get(|Path(name): Path<String>| async move { format!("hello, {name}\n") }),
        )
        .route("/login", post(|| async { "welcome\n" }))
        .route("/health", get(|| async { "ok\n" }))
}

/// Reloads the policy file on each `SIGHUP`, printing what changed or why nothing did.
/// (An app that logs through `tracing` can call `limits.reload_on_hangup(path)` instead.)
#[cfg(unix)]
fn reload_on_hangup(limits: FileLimits, path: std::path::PathBuf) -> std::io::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut hangups = signal(SignalKind::hangup())?;
    tokio::spawn(async move {
        while hangups.recv().await.is_some() {
            match limits.reload(&path) {
                Ok(changed) => println!("reloaded {}: changed {changed:?}", path.display()),
                Err(e) => println!("not reloaded, nothing changed: {e}"),
            }
        }
    });
    Ok(())
}

async fn serve(config: Config) -> Result<(), Box<dyn std::error::Error>> {
    let (store, store_name) = config.store.connect().await?;
    let listener = tokio::net::TcpListener::bind(config.listen).await?;
    let app = match &config.policy_file {
        Some(path) => {
            // A bad file stops the start with its line, field and what was expected.
            let file = PolicyFile::load(path)?;
            print_file_banner(listener.local_addr()?, &file, &store_name);
            let (app, limits) = app_from_file(store, &file);
            #[cfg(unix)]
            reload_on_hangup(limits, path.clone())?;
            #[cfg(not(unix))]
            let _ = limits;
            app
        }
        None => {
            print_banner(listener.local_addr()?, &config, &store_name);
            app(store, config.policy, config.trusted)
        }
    };
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
    println!("  routes:  GET /  GET /hello/{{name}}  POST /login  GET /health (not limited)");
    println!("try it:");
    println!("  curl -i http://{addr}/");
    println!(
        "  for i in $(seq 30); do curl -s -o /dev/null -w '%{{http_code}} ' http://{addr}/; done; echo"
    );
}

/// What is served with a policy file, and how to reload it.
fn print_file_banner(addr: SocketAddr, file: &PolicyFile, store_name: &str) {
    println!("floodwall axum example on http://{addr}, {store_name} store");
    for (policy, mode) in file.policies() {
        println!(
            "  policy:  {} = {} ({}, {:?})",
            policy.name(),
            policy.quota(),
            policy.algorithm().name(),
            mode.unwrap_or_default()
        );
    }
    let defaults: Vec<&str> = file.defaults().collect();
    println!("  default: {defaults:?} on routes the file does not name");
    println!(
        "  reload:  edit the file, then kill -HUP {}",
        std::process::id()
    );
    println!("try it:");
    println!(
        "  for i in $(seq 7); do curl -s -o /dev/null -w '%{{http_code}} ' -X POST http://{addr}/login; done; echo"
    );
}
