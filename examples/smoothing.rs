//! Waiting instead of refusing: bursts are smoothed into the policy's pace.
//!
//! ```text
//! cargo run --example smoothing --features wait
//! # 15 requests at once: two go through at once, ten leave 200 ms apart (the last at 2 s),
//! # and the three whose turn is more than 2 s away are refused (429) at once.
//! for i in $(seq 15); do curl -s -o /dev/null -w '%{http_code} %{time_total}s\n' http://127.0.0.1:3000/ & done; wait
//! ```
//!
//! - `Wait::up_to(2 s)`: a request refused with a `Retry-After` of at most 2 s books the next
//!   slot and waits for it on tokio's timer, then reaches the handler.
//! - `.max_waiting(256, 16)`: at most 256 requests wait at once, 16 per client; past either
//!   a request is refused at once, so waiting cannot pile up memory.
//! - `.jitter(20 ms)`: each wait gets up to 20 ms more, never less, so requests booked
//!   for one instant do not all wake together.
//! - A client that hangs up while waiting gives its slot back to the next request.

use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use floodwall::tower::{RateLimitLayer, Wait};
use floodwall::{MemoryStore, Policy};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let listen = std::env::var("LISTEN").unwrap_or_else(|_| "127.0.0.1:3000".into());
    // 5 per second per client, 2 at once: the rest of a burst leaves 200 ms apart.
    let policy = Policy::gcra("smooth", "5/s burst 2".parse()?)?;
    let layer = RateLimitLayer::new(MemoryStore::new(), policy)
        // Only GCRA and the buckets can book a slot: a window policy is refused here.
        .wait(
            Wait::up_to(Duration::from_secs(2))?
                .max_waiting(256, 16)
                .jitter(Duration::from_millis(20)),
        )?;

    let app = Router::new()
        .route("/", get(|| async { "hello\n" }))
        .layer(layer);

    let listener = tokio::net::TcpListener::bind(&listen).await?;
    let addr = listener.local_addr()?;
    println!("smoothing bursts to 5/s per client on http://{addr}");
    println!(
        "  for i in $(seq 15); do curl -s -o /dev/null -w '%{{http_code}} %{{time_total}}s\\n' http://{addr}/ & done; wait"
    );
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .await?;
    Ok(())
}
