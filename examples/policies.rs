//! Per-route and per-plan policies on one layer, under a per-client ceiling.
//!
//! ```text
//! cargo run --example policies
//! curl -i -X POST http://127.0.0.1:3000/login                          # 5 per minute per client
//! curl -i http://127.0.0.1:3000/search -H 'x-api-key: demo-free-key'   # costs 5 of the free plan's 60/min
//! curl -i http://127.0.0.1:3000/search -H 'x-api-key: demo-pro-key'    # the pro plan's 6000/min
//! curl -i http://127.0.0.1:3000/                                       # no key: 30/min per IP
//! ```
//!
//! - The client is the account its API key belongs to, and the account's plan decides its
//!   quota. Both are looked up on the server ([`ACCOUNTS`] stands for your database or
//!   your authentication layer): a client can send any key, but only a real one earns a
//!   plan. A request without a known key is limited per IP, as anonymous.
//! - `/login` has its own strict policy (per route, chosen by a closure); elsewhere a
//!   [`PolicyMap`] picks the plan's policy by the key's prefix.
//! - Every request must also pass a ceiling of 20 requests per second per client, whatever
//!   its plan: each choice names the ceiling beside its own policy, and all of a request's
//!   policies must admit it (a refused request counts in none of them).
//! - `/search` costs 5.

use std::net::SocketAddr;

use axum::Router;
use axum::routing::{get, post};
use floodwall::tower::RateLimitLayer;
use floodwall::tower::choose::{Choice, ChoosePolicy, PolicyMap};
use floodwall::tower::extract::peer_addr;
use floodwall::{MemoryStore, Policy};
use http::request::Parts;

/// The accounts, by API key: `(key, account, plan)`. A real service looks the key up in its
/// own store (and keeps only a hash of it).
const ACCOUNTS: &[(&str, &str, &str)] = &[
    ("demo-free-key", "alice", "free"),
    ("demo-pro-key", "acme", "pro"),
];

/// The rate-limit key of a request: `plan:account` for a known API key, else `anon:ip`.
fn client(req: &Parts) -> Option<String> {
    let sent = req.headers.get("x-api-key").map(|v| v.as_bytes());
    match ACCOUNTS
        .iter()
        .find(|(key, ..)| Some(key.as_bytes()) == sent)
    {
        Some((_, account, plan)) => Some(format!("{plan}:{account}")),
        None => Some(format!("anon:{}", peer_addr(req)?)),
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let listen = std::env::var("LISTEN").unwrap_or_else(|_| "127.0.0.1:3000".into());
    let ceiling = Policy::gcra("ceiling", "20/s".parse()?)?;
    let login = Choice::from(vec![
        Policy::gcra("login", "5/min".parse()?)?,
        ceiling.clone(),
    ]);
    let plans = PolicyMap::new()
        .prefix(
            "free:",
            vec![Policy::gcra("free", "60/min".parse()?)?, ceiling.clone()],
        )
        .prefix(
            "pro:",
            vec![Policy::gcra("pro", "6000/min".parse()?)?, ceiling.clone()],
        );

    // The layer's own policies serve anonymous clients (the map's `Choice::Default`).
    let layer = RateLimitLayer::new(
        MemoryStore::new(),
        Policy::gcra("anonymous", "30/min".parse()?)?,
    )
    .and_policy(ceiling)
    .key(client)
    .choose(move |req: &Parts, key: &[u8]| {
        if req.uri.path() == "/login" {
            return login.clone();
        }
        plans.choose(req, key)
    })
    .cost(|req: &Parts| if req.uri.path() == "/search" { 5 } else { 1 });

    let app = Router::new()
        .route("/", get(|| async { "hello\n" }))
        .route("/search", get(|| async { "results\n" }))
        .route("/login", post(|| async { "welcome\n" }))
        .layer(layer);

    let listener = tokio::net::TcpListener::bind(&listen).await?;
    let addr = listener.local_addr()?;
    println!("per-route and per-plan policies on http://{addr}");
    println!("  curl -i -X POST http://{addr}/login");
    println!("  curl -i http://{addr}/search -H 'x-api-key: demo-free-key'");
    println!("  curl -i http://{addr}/search -H 'x-api-key: demo-pro-key'");
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .await?;
    Ok(())
}
