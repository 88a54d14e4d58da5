//! End to end with tonic: a real gRPC server behind the layer, a real tonic client, and
//! `RESOURCE_EXHAUSTED` reaching it with its retry metadata.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use floodwall_test_support::*;
use floodwall_tower::respond::{Grpc, GrpcUnavailable};
use floodwall_tower::{RateLimitLayer, Refusals};
use http::uri::PathAndQuery;
use tonic::body::Body;
use tonic::transport::Server;
use tonic::transport::server::TcpIncoming;
use tonic::{Code, Request, Response, Status};
use tonic_prost::ProstCodec;

#[derive(Clone, PartialEq, prost::Message)]
struct HelloRequest {
    #[prost(string, tag = "1")]
    name: String,
}

#[derive(Clone, PartialEq, prost::Message)]
struct HelloReply {
    #[prost(string, tag = "1")]
    message: String,
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// `hello.Greeter/SayHello`, written as tonic's generated code would be.
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
        let message = format!("hello {}", req.into_inner().name);
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

async fn say_hello(addr: std::net::SocketAddr, name: &str) -> Result<String, Status> {
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut client = tonic::client::Grpc::new(channel);
    client.ready().await.unwrap();
    let reply: Response<HelloReply> = client
        .unary(
            Request::new(HelloRequest { name: name.into() }),
            PathAndQuery::from_static("/hello.Greeter/SayHello"),
            ProstCodec::default(),
        )
        .await?;
    Ok(reply.into_inner().message)
}

async fn spawn<St>(layer: RateLimitLayer<St>) -> std::net::SocketAddr
where
    St: floodwall_core::Store + Clone + 'static,
{
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        Server::builder()
            .layer(layer)
            .add_service(Greeter)
            .serve_with_incoming(TcpIncoming::from(listener))
            .await
            .unwrap();
    });
    addr
}

#[tokio::test]
async fn resource_exhausted_reaches_the_client_with_retry_metadata() {
    let (store, _clock) = store();
    // Keyed by tonic's TcpConnectInfo (the default peer-IP key, feature `tonic`).
    let addr = spawn(
        RateLimitLayer::new(store, gcra("rpc", "2/min")).refusals(Refusals::new().respond(Grpc)),
    )
    .await;

    assert_eq!(say_hello(addr, "a").await.unwrap(), "hello a");
    assert_eq!(say_hello(addr, "b").await.unwrap(), "hello b");
    let status = say_hello(addr, "c").await.unwrap_err();
    assert_eq!(status.code(), Code::ResourceExhausted);
    assert_eq!(status.message(), "rate limit exceeded, retry after 30s");
    let md = status.metadata();
    assert_eq!(md.get("retry-after").unwrap(), "30");
    assert_eq!(md.get("grpc-retry-pushback-ms").unwrap(), "30000");
    assert_eq!(md.get("ratelimit").unwrap(), "\"rpc\";r=0;t=60");
}

#[tokio::test]
async fn a_store_failure_is_unavailable() {
    let layer = RateLimitLayer::new(Down, gcra("rpc", "2/min"))
        .refusals(Refusals::new().respond(Grpc).store_failure(GrpcUnavailable));
    let addr = spawn(layer).await;
    let status = say_hello(addr, "a").await.unwrap_err();
    assert_eq!(status.code(), Code::Unavailable);
    assert_eq!(status.message(), "the rate limiter cannot decide right now");
}
