//! Policies per route, as axum users give routes anything else: a layer per route with
//! `route_layer`, each over a clone of one store. A chooser is kept for what depends on
//! the request itself: here the API's writes cost a stricter policy than its reads.
//!
//! ```text
//! cargo run --example routes
//! for i in $(seq 7); do curl -s -o /dev/null -w '%{http_code} ' -X POST http://127.0.0.1:3000/login; done; echo
//! for i in $(seq 5); do curl -s -o /dev/null -w '%{http_code} ' -X POST http://127.0.0.1:3000/api/items; done; echo
//! curl -i http://127.0.0.1:3000/health    # never limited
//! curl -i http://127.0.0.1:3000/nope      # a 404, counted by no policy
//! ```

use std::net::SocketAddr;

use axum::Router;
use axum::routing::{get, post};
use floodwall::tower::choose::Choice;
use floodwall::tower::respond::Json;
use floodwall::tower::{RateLimitLayer, Refusals};
use floodwall::{MemoryStore, Policy};
use http::Method;
use http::request::Parts;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let listen = std::env::var("LISTEN").unwrap_or_else(|_| "127.0.0.1:3000".into());
    // One store for every route: each layer holds a clone of the handle, and the policies'
    // names keep their counts apart.
    let store = MemoryStore::new();

    let login = Router::new()
        .route("/login", post(|| async { "welcome\n" }))
        .route_layer(RateLimitLayer::new(
            store.clone(),
            Policy::gcra("login", "5/min".parse()?)?,
        ));

    // The choice depends on the request (its method), not on the route: a chooser.
    let writes = Policy::gcra("api-writes", "3/min".parse()?)?;
    let api = Router::new()
        .route(
            "/api/items",
            get(|| async { "[]\n" }).post(|| async { "created\n" }),
        )
        .route_layer(
            RateLimitLayer::new(store.clone(), Policy::gcra("api-reads", "60/min".parse()?)?)
                .choose(move |req: &Parts, _key: &[u8]| match req.method {
                    Method::POST => Choice::Policy(writes.clone()),
                    _ => Choice::Default,
                })
                .refusals(Refusals::new().respond(Json)),
        );

    // Merged after their layers: `/health` is not limited, and an unknown path (a 404)
    // reaches no layer.
    let app = login.merge(api).route("/health", get(|| async { "ok\n" }));

    let listener = tokio::net::TcpListener::bind(&listen).await?;
    let addr = listener.local_addr()?;
    println!("per-route limits on http://{addr}: /login 5/min, /api/items 60/min (3/min writes)");
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .await?;
    Ok(())
}
