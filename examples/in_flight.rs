//! In-flight limits: at most 2 reports running at once per client, however long each takes.
//!
//! ```text
//! cargo run --example in_flight
//! for i in 1 2 3; do curl -si http://127.0.0.1:3000/report & done; wait
//! ```
//!
//! Each report takes 3 s; the third one started while two run gets `429 Too Many Requests`
//! at once (no `Retry-After`: when a slot comes free depends on the reports running). A
//! response carries `RateLimit-Policy: "reports";q=2;qu="concurrent-requests"` and
//! `RateLimit: "reports";r=<slots left>`. `/stream` streams a report line by line: its slot
//! is held until the last line is sent, or the client hangs up.
//!
//! | variable | default | meaning |
//! |---|---|---|
//! | `LISTEN` | `127.0.0.1:3000` | address to serve on |
//! | `MAX_IN_FLIGHT` | `2` | reports running at once per client |
//!
//! A fleet shares the limit through Redis: the store becomes
//! `floodwall::redis::RedisStore::connect(url).await?` (feature `redis`), and each slot a
//! lease that expires if its server dies (`floodwall::guide::in_flight`).

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::routing::get;
use floodwall::tower::ConcurrencyLimitLayer;
use floodwall::{ConcurrencyLimit, MemoryStore};
use http_body::Frame;

/// A report that takes a while.
async fn report() -> &'static str {
    tokio::time::sleep(Duration::from_secs(3)).await;
    "report ready\n"
}

/// The same report streamed, a line a second: a streaming body keeps its slot until it ends.
async fn stream() -> Body {
    Body::new(Lines {
        sent: 0,
        next: Box::pin(tokio::time::sleep(Duration::from_secs(1))),
    })
}

/// Three lines, one a second.
struct Lines {
    sent: u32,
    next: Pin<Box<tokio::time::Sleep>>,
}

impl http_body::Body for Lines {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if self.sent == 3 {
            return Poll::Ready(None);
        }
        ready!(self.next.as_mut().poll(cx));
        self.sent += 1;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(1);
        self.next.as_mut().reset(deadline);
        let line = format!("line {}\n", self.sent);
        Poll::Ready(Some(Ok(Frame::data(Bytes::from(line)))))
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let listen = std::env::var("LISTEN").unwrap_or_else(|_| "127.0.0.1:3000".into());
    let max: u64 = std::env::var("MAX_IN_FLIGHT").map_or(Ok(2), |v| v.parse())?;
    let limit = ConcurrencyLimit::new("reports", max)?;
    let app = Router::new()
        .route("/report", get(report))
        .route("/stream", get(stream))
        .layer(ConcurrencyLimitLayer::new(MemoryStore::new(), limit));

    let listener = tokio::net::TcpListener::bind(&listen).await?;
    let addr = listener.local_addr()?;
    println!("at most {max} reports in flight per client on http://{addr}/report and /stream");
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .await?;
    Ok(())
}
