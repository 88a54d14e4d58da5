//! The service from outside: a real tonic server on 127.0.0.1:0 called through
//! envoy-types' generated client, on the memory store with a manual clock (time moves only
//! when a test moves it). decisions.rs: what each kind of limit answers, with every
//! status field; all_or_nothing.rs: a refused request charges nothing, a failing store
//! answers UNAVAILABLE; hostile.rs: hostile requests get a clear status and charge nothing;
//! metrics.rs: what the service records (feature `metrics`).

use std::time::Duration;

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::DescriptorStatus;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use envoy_types::pb::google::protobuf::UInt64Value;
use floodwall_core::{ManualClock, MemoryStore, Store};
use floodwall_rls::RateLimitService;
use floodwall_rls::config::Config;
use tonic::transport::server::TcpIncoming;
use tonic::transport::{Channel, Server};

#[path = "../common/envoy.rs"]
mod envoy;
use envoy::{OK, OVER, descriptor, request};

mod all_or_nothing;
mod decisions;
mod hostile;
mod metrics;

/// A Unix time in µs, on a whole day.
const T0: u64 = 1_700_006_400_000_000;

/// The configuration most tests use: one limit of each kind.
const CONFIG: &str = "domain: api
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 3}
  - key: ip
    rate_limit: {unit: second, requests_per_unit: 10, name: per_ip}
  - key: path
    value: /health
    rate_limit: {unlimited: true}
  - key: path
    value: /blocked
    rate_limit: {unit: hour, requests_per_unit: 0}
  - key: path
    value: /retired
    shadow_mode: true
    rate_limit: {unit: hour, requests_per_unit: 0}
  - key: path
    rate_limit: {unit: day, requests_per_unit: 1000, algorithm: fixed_window}
  - key: tenant
    descriptors:
      - key: plan
        value: gold
        rate_limit: {unit: hour, requests_per_unit: 10}
      - key: plan
        rate_limit: {unit: hour, requests_per_unit: 2}
  - key: trial
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: app
    rate_limit:
      unit: minute
      requests_per_unit: 5
      replaces:
        - name: per_ip
";

/// A server and a client to it.
struct Rls<S> {
    addr: std::net::SocketAddr,
    client: RateLimitServiceClient<Channel>,
    service: RateLimitService<S>,
    server: tokio::task::JoinHandle<()>,
}

impl<S> Drop for Rls<S> {
    fn drop(&mut self) {
        self.server.abort();
    }
}

/// The service on `config`, on a memory store whose time is `clock`'s.
async fn start(config: &str) -> (Rls<MemoryStore<ManualClock>>, ManualClock) {
    let clock = ManualClock::new(T0);
    let store = MemoryStore::builder().clock(clock.clone()).build();
    (start_with(config, store).await, clock)
}

/// The service on `config` and `store`, behind a tonic server on a free port.
async fn start_with<S: Store + 'static>(config: &str, store: S) -> Rls<S> {
    let config = Config::from_yaml("test.yaml", config).unwrap_or_else(|e| panic!("{e}"));
    start_service(RateLimitService::new(config, store)).await
}

async fn start_service<S: Store + 'static>(service: RateLimitService<S>) -> Rls<S> {
    let incoming = TcpIncoming::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = incoming.local_addr().unwrap();
    let router = Server::builder().add_service(service.clone().into_server());
    let server = tokio::spawn(async move {
        router.serve_with_incoming(incoming).await.unwrap();
    });
    let client = RateLimitServiceClient::connect(format!("http://{addr}"))
        .await
        .unwrap();
    Rls {
        addr,
        client,
        service,
        server,
    }
}

impl<S> Rls<S> {
    /// The service's answer, or its gRPC status.
    async fn call(&self, request: RateLimitRequest) -> Result<RateLimitResponse, tonic::Status> {
        let mut client = self.client.clone();
        client
            .should_rate_limit(request)
            .await
            .map(tonic::Response::into_inner)
    }

    /// The service's answer, which must be one.
    async fn ask(&self, request: RateLimitRequest) -> RateLimitResponse {
        self.call(request).await.unwrap_or_else(|s| panic!("{s:?}"))
    }

    /// The answer to several descriptors of domain `api`, each of `entries`, cost 1.
    async fn several(&self, entries: &[&[(&str, &str)]]) -> RateLimitResponse {
        let descriptors = entries.iter().map(|e| descriptor(e)).collect();
        self.ask(request("api", descriptors)).await
    }

    /// The answer to one descriptor of domain `api`, cost 1.
    async fn one(&self, entries: &[(&str, &str)]) -> RateLimitResponse {
        self.ask(request("api", vec![descriptor(entries)])).await
    }
}

/// `descriptor` with its own `hits_addend`.
fn costing(mut descriptor: RateLimitDescriptor, hits: u64) -> RateLimitDescriptor {
    descriptor.hits_addend = Some(UInt64Value { value: hits });
    descriptor
}

/// `(code, limit_remaining)` of each status.
fn codes(response: &RateLimitResponse) -> Vec<(i32, u32)> {
    response
        .statuses
        .iter()
        .map(|s| (s.code, s.limit_remaining))
        .collect()
}

/// A status's `duration_until_reset`.
fn reset(status: &DescriptorStatus) -> Option<Duration> {
    status
        .duration_until_reset
        .map(|d| Duration::new(d.seconds as u64, d.nanos as u32))
}
