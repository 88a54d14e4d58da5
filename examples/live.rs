//! Live changes: change a quota, or flip a policy between enforced, shadow and off, while
//! the server runs, through the handle the app keeps (`LiveLimits`).
//!
//! ```text
//! cargo run --example live --features live
//! curl -si http://127.0.0.1:3000/                                   # the API: 5/min per IP
//! curl -s http://127.0.0.1:3001/policies                            # admin: what is in force
//! curl -s -X PUT -d '100/min' http://127.0.0.1:3001/policies/per-ip/quota
//! curl -s -X PUT -d 'shadow' http://127.0.0.1:3001/policies/per-ip/mode
//! ```
//!
//! The admin routes listen on another port, on loopback only, and are not rate limited:
//! whoever reaches them can lift every limit. A change applies from the next request on;
//! a request in flight finishes under the version it started with.

use std::net::SocketAddr;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, put};
use floodwall::tower::{Enforcement, LiveError, LiveLimits, RateLimitLayer};
use floodwall::{MemoryStore, Policy};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let listen = std::env::var("LISTEN").unwrap_or_else(|_| "127.0.0.1:3000".into());
    let admin = std::env::var("ADMIN").unwrap_or_else(|_| "127.0.0.1:3001".into());

    let layer = RateLimitLayer::new(
        MemoryStore::new(),
        Policy::gcra("per-ip", "5/min".parse()?)?,
    );
    // The handle: every service the layer builds follows it.
    let live = layer.live();

    let api = Router::new()
        .route("/", get(|| async { "hello\n" }))
        .layer(layer);
    let admin_app = Router::new()
        .route("/policies", get(policies))
        .route("/policies/{name}/quota", put(set_quota))
        .route("/policies/{name}/mode", put(set_mode))
        .with_state(live);

    let api_listener = tokio::net::TcpListener::bind(&listen).await?;
    let admin_listener = tokio::net::TcpListener::bind(&admin).await?;
    println!("API on http://{listen}/, admin on http://{admin}/policies");
    let api = axum::serve(
        api_listener,
        api.into_make_service_with_connect_info::<SocketAddr>(),
    );
    let admin = axum::serve(admin_listener, admin_app);
    tokio::try_join!(async { api.await }, async { admin.await },)?;
    Ok(())
}

/// `GET /policies`: each policy, its quota and its mode, one a line.
async fn policies(State(live): State<LiveLimits>) -> String {
    live.policies()
        .iter()
        .map(|(p, mode)| format!("{} {} {mode:?}\n", p.name(), p.quota()))
        .collect()
}

/// `PUT /policies/{name}/quota` with a quota (`100/min`, `10/s burst 20`) as the body.
async fn set_quota(
    State(live): State<LiveLimits>,
    Path(name): Path<String>,
    body: String,
) -> (StatusCode, String) {
    let quota = match body.trim().parse() {
        Ok(quota) => quota,
        Err(e) => return (StatusCode::BAD_REQUEST, format!("{e}\n")),
    };
    answer(live.set_quota(&name, quota))
}

/// `PUT /policies/{name}/mode` with `enforce`, `shadow` or `off` as the body.
async fn set_mode(
    State(live): State<LiveLimits>,
    Path(name): Path<String>,
    body: String,
) -> (StatusCode, String) {
    let mode = match body.trim() {
        "enforce" => Enforcement::Enforce,
        "shadow" => Enforcement::Shadow,
        "off" => Enforcement::Off,
        other => {
            let text = format!("mode `{other}`: expected enforce, shadow or off\n");
            return (StatusCode::BAD_REQUEST, text);
        }
    };
    answer(live.set_enforcement(&name, mode))
}

fn answer(result: Result<(), LiveError>) -> (StatusCode, String) {
    match result {
        Ok(()) => (StatusCode::OK, "changed\n".into()),
        Err(e @ LiveError::UnknownPolicy { .. }) => (StatusCode::NOT_FOUND, format!("{e}\n")),
        Err(e) => (StatusCode::BAD_REQUEST, format!("{e}\n")),
    }
}
