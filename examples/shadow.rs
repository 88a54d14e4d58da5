//! Shadow mode: try a limit on real traffic before enforcing it.
//!
//! ```text
//! cargo run --example shadow
//! for i in $(seq 5); do curl -si http://127.0.0.1:3000/ | grep -i -e '^HTTP' -e '^ratelimit:'; done
//! ```
//!
//! Every request is decided and gets the rate-limit headers, but none is refused: those
//! that would have been are logged (target `floodwall`, level `info`) so you can see what
//! the limit would do before enforcing it (drop the `modes` line). Here the log is printed
//! by a minimal `tracing` subscriber.

use std::net::SocketAddr;

use axum::Router;
use axum::routing::get;
use floodwall::tower::{Enforcement, Modes, RateLimitLayer};
use floodwall::{MemoryStore, Policy};

/// Prints floodwall's log events to stderr: enough to see shadow-mode decisions without
/// a logging framework.
struct PrintEvents;

impl tracing::Subscriber for PrintEvents {
    fn enabled(&self, metadata: &tracing::Metadata<'_>) -> bool {
        metadata.target().starts_with("floodwall")
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        struct Fields(String);
        impl tracing::field::Visit for Fields {
            fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
                self.0.push_str(&format!(" {}={value:?}", field.name()));
            }
        }
        let mut fields = Fields(String::new());
        event.record(&mut fields);
        eprintln!(
            "{} {}:{}",
            event.metadata().level(),
            event.metadata().target(),
            fields.0
        );
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing::subscriber::set_global_default(PrintEvents)?;
    let listen = std::env::var("LISTEN").unwrap_or_else(|_| "127.0.0.1:3000".into());
    let layer = RateLimitLayer::new(
        MemoryStore::new(),
        Policy::gcra("candidate", "2/min".parse()?)?,
    )
    .modes(Modes::new().all(Enforcement::Shadow))?;
    let app = Router::new()
        .route("/", get(|| async { "always served\n" }))
        .layer(layer);

    let listener = tokio::net::TcpListener::bind(&listen).await?;
    let addr = listener.local_addr()?;
    println!("shadow mode on http://{addr}: a 2/min limit, logged, never enforced");
    println!(
        "  for i in $(seq 5); do curl -si http://{addr}/ | grep -i -e '^HTTP' -e '^ratelimit:'; done"
    );
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .await?;
    Ok(())
}
