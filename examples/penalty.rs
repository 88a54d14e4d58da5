//! A login endpoint that bans brute-force clients: 5 attempts a minute per IP, and 3
//! refusals within a minute ban the IP for 1 minute, then 2, 4, ... up to an hour while
//! earlier bans are remembered (`floodwall::guide::penalties`).
//!
//! ```text
//! cargo run --example penalty
//! for i in $(seq 10); do curl -s -o /dev/null -w '%{http_code} ' -X POST http://127.0.0.1:3000/login; done
//! curl -i -X POST http://127.0.0.1:3000/login    # 429, Retry-After: the ban's remainder, "banned":true
//! curl -i -X DELETE http://127.0.0.1:3000/ban/127.0.0.1    # an operator lifts the ban
//! ```
//!
//! The limit goes on with `route_layer`: `curl -i http://127.0.0.1:3000/nope` is a 404
//! that never counts against `/login`.
//!
//! The unban route is here to show the call: guard such a route in a real service.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{delete, post};
use floodwall::tower::extract::PeerIp;
use floodwall::tower::respond::Json;
use floodwall::tower::{RateLimitLayer, Refusals};
use floodwall::{MemoryStore, Penalty, Policy, StoreExt};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let listen = std::env::var("LISTEN").unwrap_or_else(|_| "127.0.0.1:3000".into());
    let penalty = Penalty::new(3, Duration::from_secs(60), Duration::from_secs(60))?
        .growing(2, Duration::from_secs(3600))?;
    let login = Policy::gcra("login", "5/min".parse()?)?.with_penalty(penalty);
    let store = MemoryStore::new();

    // `route_layer`, not `layer`: only requests whose path matches a route are checked,
    // so a client probing for paths that do not exist (404s) spends nothing, earns no ban.
    let limited = Router::new()
        .route("/login", post(|| async { "wrong password\n" }))
        .route_layer(
            RateLimitLayer::new(store.clone(), login.clone())
                .key(PeerIp::new())
                .refusals(Refusals::new().respond(Json)),
        );
    let admin = Router::new()
        .route("/ban/{ip}", delete(unban))
        .with_state((store, login));
    let app = limited.merge(admin);

    let listener = tokio::net::TcpListener::bind(&listen).await?;
    let addr = listener.local_addr()?;
    println!("login with bans on http://{addr}");
    println!("  curl -i -X POST http://{addr}/login");
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .await?;
    Ok(())
}

/// Lifts an IP's ban. Its key is what the layer's extractor writes for that IP.
async fn unban(
    State((store, login)): State<(MemoryStore, Policy)>,
    Path(ip): Path<IpAddr>,
) -> StatusCode {
    let key = PeerIp::new().key_for(ip);
    match store.unban(key.as_bytes(), &login).await {
        Ok(()) => StatusCode::NO_CONTENT,
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR,
    }
}
