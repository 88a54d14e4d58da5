//! Costs known only from the response: a login endpoint where only failed attempts count,
//! and an LLM-style endpoint charged by the tokens its answer used.
//!
//! ```text
//! cargo run --example charging --features charge
//! # Successes never count: as many as you like.
//! for i in $(seq 10); do curl -s -o /dev/null -w '%{http_code} ' -X POST -H 'x-password: hunter2' http://127.0.0.1:3000/login; done
//! # Failures do: the sixth within 10 minutes is refused.
//! for i in $(seq 6); do curl -s -o /dev/null -w '%{http_code} ' -X POST http://127.0.0.1:3000/login; done
//! # Each answer costs the tokens it used (here: the prompt's length); 1000 an hour.
//! curl -i -X POST -d 'write me a poem about rate limits' http://127.0.0.1:3000/complete
//! ```
//!
//! `floodwall::guide::charging` says what each algorithm does with a charge or a refund.

use std::net::SocketAddr;

use axum::Router;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::post;
use floodwall::tower::{RateLimitLayer, Settle};
use floodwall::{MemoryStore, Policy};

/// The header the completion handler writes its cost in; the layer removes it.
const TOKENS: &str = "x-llm-tokens";

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let listen = std::env::var("LISTEN").unwrap_or_else(|_| "127.0.0.1:3000".into());
    let store = MemoryStore::new();

    // 5 failed logins per 10 minutes per IP; a success gives its unit back.
    let failures = RateLimitLayer::new(store.clone(), Policy::gcra("login", "5/10min".parse()?)?)
        .charge_by(|res: &mut http::response::Parts| match res.status {
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => Settle::Keep,
            _ => Settle::Refund,
        });
    // 1000 tokens an hour per IP, burst 1000: charged what each answer used.
    let tokens = RateLimitLayer::new(store, Policy::gcra("tokens", "1000/h".parse()?)?).charge_by(
        |res: &mut http::response::Parts| {
            let used = res.headers.remove(TOKENS);
            match used.and_then(|v| v.to_str().ok()?.parse().ok()) {
                Some(used) => Settle::Cost(used),
                // No figure (an error answer): the check's unit stands.
                None => Settle::Keep,
            }
        },
    );

    let app = Router::new()
        .route("/login", post(login).layer(failures))
        .route("/complete", post(complete).layer(tokens));

    let listener = tokio::net::TcpListener::bind(&listen).await?;
    let addr = listener.local_addr()?;
    println!("charging by the response on http://{addr}");
    println!("  curl -i -X POST http://{addr}/login");
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .await?;
    Ok(())
}

async fn login(headers: HeaderMap) -> StatusCode {
    match headers.get("x-password") {
        Some(password) if password == "hunter2" => StatusCode::OK,
        _ => StatusCode::UNAUTHORIZED,
    }
}

/// Stands in for a model: the answer "costs" one token per byte of the prompt.
async fn complete(prompt: String) -> impl IntoResponse {
    let used = prompt.len().max(1).to_string();
    (
        [(TOKENS, used)],
        format!("{} bytes of poetry\n", prompt.len()),
    )
}
