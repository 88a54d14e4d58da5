//! A gRPC server behind the rate limiter: the standard `grpc.health.v1.Health` service
//! (tonic-health's generated code), 3 calls per minute per client IP. A refused call is
//! `RESOURCE_EXHAUSTED`, with `retry-after` (seconds) and `grpc-retry-pushback-ms` in its
//! trailers.
//!
//! ```text
//! LISTEN=127.0.0.1:50051 cargo run --example tonic --features tonic   # serves until stopped
//! cargo run --example tonic --features tonic                          # calls itself until refused
//! ```
//!
//! Any gRPC client can call the standalone server: `grpcurl -plaintext 127.0.0.1:50051
//! grpc.health.v1.Health/Check`, or Python's `grpcio` as `tests/grpc/health_client.py` does.

use std::net::SocketAddr;

use floodwall::tower::respond::{Grpc, GrpcUnavailable};
use floodwall::tower::{RateLimitLayer, Refusals};
use floodwall::{MemoryStore, Policy};
use tokio::net::TcpListener;
use tonic::transport::server::TcpIncoming;
use tonic::transport::{Channel, Server};
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The limit: 3 calls per minute per client IP (the `tonic` feature reads the peer's
    // address from tonic's `TcpConnectInfo`). Refusals and store failures answer as gRPC
    // statuses rather than HTTP 429 / 503.
    let policy = Policy::gcra("rpc", "3/min".parse()?)?;
    let limit = RateLimitLayer::new(MemoryStore::new(), policy)
        .refusals(Refusals::new().respond(Grpc).store_failure(GrpcUnavailable));

    // The service: any tonic service works the same; this one reports the server as SERVING.
    let (_reporter, health) = tonic_health::server::health_reporter();
    let server = Server::builder().layer(limit).add_service(health);

    let listen: Option<SocketAddr> = match std::env::var("LISTEN") {
        Ok(text) if !text.trim().is_empty() => Some(text.trim().parse()?),
        _ => None,
    };
    let listener = TcpListener::bind(listen.unwrap_or(([127, 0, 0, 1], 0).into())).await?;
    let addr = listener.local_addr()?;
    // The first line says where it listens (LISTEN may end in port 0): tests read it.
    println!("gRPC health service on {addr}, limited to 3 calls per minute per client IP");
    let incoming = TcpIncoming::from(listener);

    if listen.is_some() {
        server
            .serve_with_incoming_shutdown(incoming, async {
                let _ = tokio::signal::ctrl_c().await;
            })
            .await?;
        return Ok(());
    }

    // No LISTEN: serve in the background and call it until the limit refuses.
    let running = tokio::spawn(server.serve_with_incoming(incoming));
    let channel = Channel::from_shared(format!("http://{addr}"))?
        .connect()
        .await?;
    let mut client = HealthClient::new(channel);
    for i in 1..=5 {
        match client.check(HealthCheckRequest::default()).await {
            Ok(reply) => println!("call {i}: {:?}", reply.into_inner().status()),
            Err(status) => {
                let trailer = |name| status.metadata().get(name).and_then(|v| v.to_str().ok());
                println!(
                    "call {i}: {:?} {:?} (retry-after: {}s, grpc-retry-pushback-ms: {})",
                    status.code(),
                    status.message(),
                    trailer("retry-after").unwrap_or("?"),
                    trailer("grpc-retry-pushback-ms").unwrap_or("?"),
                );
            }
        }
    }
    running.abort();
    Ok(())
}
