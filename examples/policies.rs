//! Per-route and per-tier policies on one layer.
//!
//! ```text
//! cargo run --example policies
//! curl -i -X POST http://127.0.0.1:3000/login                  # 5 per minute per client
//! curl -i http://127.0.0.1:3000/search -H 'x-plan: free'       # costs 5 of the free tier's 60/min
//! curl -i http://127.0.0.1:3000/search -H 'x-plan: pro'        # the pro tier's 6000/min
//! ```
//!
//! - `/login` has its own strict policy (per route, chosen by a closure).
//! - Everything else is limited per tier: the key is `tier:client-ip`, and a
//!   [`PolicyMap`] picks the tier's policy by key prefix. In a real service the tier comes
//!   from your authentication, not from a header the client sets.
//! - Every request must also pass a global per-client ceiling (`and_policy`): all
//!   policies must pass, and a denied request still counts against the others.
//! - `/search` costs 5.

use std::net::SocketAddr;

use axum::Router;
use axum::routing::{get, post};
use floodwall::tower::RateLimitLayer;
use floodwall::tower::choose::{Choice, PolicyMap};
use floodwall::tower::extract::peer_addr;
use floodwall::{MemoryStore, Policy};
use http::request::Parts;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let listen = std::env::var("LISTEN").unwrap_or_else(|_| "127.0.0.1:3000".into());
    let login = Policy::gcra("login", "5/min".parse()?)?;
    let tiers = PolicyMap::new()
        .prefix("free:", Policy::gcra("free", "60/min".parse()?)?)
        .prefix("pro:", Policy::gcra("pro", "6000/min".parse()?)?);

    let layer = RateLimitLayer::new(
        MemoryStore::new(),
        Policy::gcra("anonymous", "30/min".parse()?)?,
    )
    .and_policy(Policy::gcra("ceiling", "100/s".parse()?)?)
    // The key: the client's tier and address.
    .key(|req: &Parts| {
        let tier = match req.headers.get("x-plan").map(|v| v.as_bytes()) {
            Some(b"pro") => "pro",
            Some(b"free") => "free",
            _ => "anon",
        };
        Some(format!("{tier}:{}", peer_addr(req)?))
    })
    // The policies: per route first, then per tier (unknown tiers get the defaults).
    .choose(move |req: &Parts, key: &[u8]| {
        if req.uri.path() == "/login" {
            return Choice::Policy(login.clone());
        }
        floodwall::tower::choose::ChoosePolicy::choose(&tiers, req, key)
    })
    .cost(|req: &Parts| if req.uri.path() == "/search" { 5 } else { 1 });

    let app = Router::new()
        .route("/", get(|| async { "hello\n" }))
        .route("/search", get(|| async { "results\n" }))
        .route("/login", post(|| async { "welcome\n" }))
        .layer(layer);

    let listener = tokio::net::TcpListener::bind(&listen).await?;
    let addr = listener.local_addr()?;
    println!("per-route and per-tier policies on http://{addr}");
    println!("  curl -i -X POST http://{addr}/login");
    println!("  curl -i http://{addr}/search -H 'x-plan: free'");
    println!("  curl -i http://{addr}/search -H 'x-plan: pro'");
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .await?;
    Ok(())
}
