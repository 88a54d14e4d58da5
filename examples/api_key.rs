//! Limiting per API key, with a per-IP fallback for requests without one.
//!
//! ```text
//! cargo run --example api_key
//! curl -i http://127.0.0.1:3000/ -H 'x-api-key: demo-key-1'   # 5/min for this key
//! curl -i http://127.0.0.1:3000/                              # 2/min per IP without a key
//! ```
//!
//! The key is hashed (SHA-256, salted) before it reaches the store or a log: the limiter
//! never holds an API key in clear. Responses are JSON.

use std::net::SocketAddr;

use axum::Router;
use axum::routing::get;
use floodwall::tower::choose::Choice;
use floodwall::tower::extract::{ExtractKey, HeaderKey, PeerIp};
use floodwall::tower::respond::Json;
use floodwall::tower::{RateLimitLayer, Refusals};
use floodwall::{MemoryStore, Policy};
use http::HeaderName;
use http::request::Parts;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let listen = std::env::var("LISTEN").unwrap_or_else(|_| "127.0.0.1:3000".into());
    let per_key = Policy::gcra("per-key", "5/min".parse()?)?;
    let anonymous = Policy::gcra("anonymous", "2/min".parse()?)?;

    let layer = RateLimitLayer::new(MemoryStore::new(), per_key)
        // The API key if there is one, else the peer IP.
        .key(
            HeaderKey::new(HeaderName::from_static("x-api-key"))
                .salt("change-me: one secret per deployment")
                .or(PeerIp::new()),
        )
        // Requests without a key get the stricter anonymous policy.
        .choose(move |req: &Parts, _key: &[u8]| {
            if req.headers.contains_key("x-api-key") {
                Choice::Default
            } else {
                Choice::Policy(anonymous.clone())
            }
        })
        .refusals(Refusals::new().respond(Json));

    let app = Router::new()
        .route("/", get(|| async { "hello, API user\n" }))
        .layer(layer);

    let listener = tokio::net::TcpListener::bind(&listen).await?;
    let addr = listener.local_addr()?;
    println!("API-key limiting on http://{addr}");
    println!("  curl -i http://{addr}/ -H 'x-api-key: demo-key-1'");
    println!("  curl -i http://{addr}/");
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .await?;
    Ok(())
}
