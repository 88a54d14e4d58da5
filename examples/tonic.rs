//! A gRPC server behind the rate limiter, and a client in the same program that calls it
//! until the limit answers `RESOURCE_EXHAUSTED`.
//!
//! ```text
//! cargo run --example tonic
//! ```
//!
//! No `protoc` is needed: the messages are written by hand with `#[derive(prost::Message)]`
//! and the service with tonic's generic `tonic::server::Grpc`, as generated code would be.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use floodwall::tower::RateLimitLayer;
use floodwall::tower::respond::{Grpc, GrpcUnavailable};
use floodwall::{MemoryStore, Policy};
use tonic::body::Body;
use tonic::transport::server::TcpIncoming;
use tonic::transport::{Endpoint, Server};
use tonic::{Request, Response, Status};
use tonic_prost::ProstCodec;

/// `message HelloRequest { string name = 1; }`
#[derive(Clone, PartialEq, prost::Message)]
struct HelloRequest {
    #[prost(string, tag = "1")]
    name: String,
}

/// `message HelloReply { string message = 1; }`
#[derive(Clone, PartialEq, prost::Message)]
struct HelloReply {
    #[prost(string, tag = "1")]
    message: String,
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// `service Greeter { rpc SayHello(HelloRequest) returns (HelloReply); }`
#[derive(Clone)]
struct Greeter;

impl tonic::server::NamedService for Greeter {
    const NAME: &'static str = "hello.Greeter";
}

struct SayHello;

impl tonic::server::UnaryService<HelloRequest> for SayHello {
    type Response = HelloReply;
    type Future = BoxFuture<Result<Response<HelloReply>, Status>>;

    fn call(&mut self, req: Request<HelloRequest>) -> Self::Future {
        let message = format!("hello, {}", req.into_inner().name);
        Box::pin(async move { Ok(Response::new(HelloReply { message })) })
    }
}

impl tower::Service<http::Request<Body>> for Greeter {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        if req.uri().path() != "/hello.Greeter/SayHello" {
            return Box::pin(async { Ok(Status::unimplemented("no such method").into_http()) });
        }
        Box::pin(async move {
            let mut grpc = tonic::server::Grpc::new(ProstCodec::default());
            Ok(grpc.unary(SayHello, req).await)
        })
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // 3 calls per minute per client IP (tonic's TcpConnectInfo gives the peer).
    let policy = Policy::gcra("rpc", "3/min".parse()?)?;
    let layer = RateLimitLayer::new(MemoryStore::new(), policy)
        .on_reject(Grpc)
        .on_store_failure(GrpcUnavailable);

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let server = tokio::spawn(
        Server::builder()
            .layer(layer)
            .add_service(Greeter)
            .serve_with_incoming(TcpIncoming::from(listener)),
    );
    println!("gRPC server on {addr}, limited to 3 calls per minute per client");

    let channel = Endpoint::from_shared(format!("http://{addr}"))?
        .connect_timeout(Duration::from_secs(5))
        .connect()
        .await?;
    let mut client = tonic::client::Grpc::new(channel);
    for i in 1..=5 {
        client.ready().await?;
        let reply: Result<Response<HelloReply>, Status> = client
            .unary(
                Request::new(HelloRequest {
                    name: format!("call {i}"),
                }),
                http::uri::PathAndQuery::from_static("/hello.Greeter/SayHello"),
                ProstCodec::default(),
            )
            .await;
        match reply {
            Ok(reply) => println!("call {i}: OK {:?}", reply.into_inner().message),
            Err(status) => {
                let retry = status
                    .metadata()
                    .get("retry-after")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("?");
                println!(
                    "call {i}: {:?} {:?} (retry-after: {retry}s)",
                    status.code(),
                    status.message()
                );
            }
        }
    }
    server.abort();
    Ok(())
}
