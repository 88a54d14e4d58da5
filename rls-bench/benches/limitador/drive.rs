//! The limiters compared, each ready to decide one workload, and the 64 tokio tasks that
//! drive them: one code path for every row but the call itself.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use floodwall_bench as support;
use floodwall_core::{Policy, StoreExt};
use floodwall_redis::RedisStore;
use floodwall_rls::RateLimitService;
use limitador::AsyncRateLimiter;
use limitador::limit::{Context, Namespace};
use tokio::runtime::Runtime;

use crate::rls::Client;
use crate::workload::Workload;

/// What decides.
#[derive(Clone)]
pub(crate) enum Limiter {
    /// The floodwall-rls process over gRPC: task `t` calls on connection `t % len`.
    Rls {
        clients: Vec<Client>,
        domain: &'static str,
    },
    /// limitador's library in this process, as limitador-server calls it for an Envoy
    /// request.
    Limitador {
        limiter: Arc<AsyncRateLimiter>,
        namespace: Namespace,
    },
    /// floodwall's `RedisStore` in this process, under the policy the service uses.
    Store {
        store: RedisStore,
        policy: Arc<Policy>,
    },
    /// floodwall-rls's service in this process (`RateLimitService::decide`): the binary's
    /// decisions without gRPC.
    Service {
        service: RateLimitService<RedisStore>,
        domain: &'static str,
    },
}

/// A limiter and the workload it decides.
#[derive(Clone)]
pub(crate) struct Target {
    /// The row and workload, for a hung call's message.
    name: Arc<str>,
    limiter: Limiter,
    entry_key: &'static str,
    values: Arc<Vec<String>>,
}

impl Target {
    pub(crate) fn new(name: &str, limiter: Limiter, w: &Workload) -> Self {
        Target {
            name: format!("{name}, {}", w.label).into(),
            limiter,
            entry_key: w.entry_key,
            values: Arc::clone(&w.values),
        }
    }

    /// The request Envoy sends for one descriptor `[(entry_key, value)]` of `domain`.
    fn request(&self, domain: &str, value: &str) -> RateLimitRequest {
        RateLimitRequest {
            domain: domain.to_owned(),
            descriptors: vec![RateLimitDescriptor {
                entries: vec![Entry {
                    key: self.entry_key.to_owned(),
                    value: value.to_owned(),
                }],
                ..RateLimitDescriptor::default()
            }],
            hits_addend: 0,
        }
    }

    /// One decision on the workload's value `i`, from task `t`: whether it was admitted.
    pub(crate) async fn check(&self, t: usize, i: usize) -> bool {
        let value = &self.values[i];
        match &self.limiter {
            Limiter::Rls { clients, domain } => {
                // A clone shares the connection; the generated client needs `&mut`.
                let mut client = clients[t % clients.len()].clone();
                let response = client
                    .should_rate_limit(self.request(domain, value))
                    .await
                    .unwrap_or_else(|e| panic!("ShouldRateLimit failed: {e}"));
                response.get_ref().overall_code == Code::Ok as i32
            }
            Limiter::Service { service, domain } => {
                let response = service
                    .decide(&self.request(domain, value))
                    .await
                    .unwrap_or_else(|e| panic!("decide failed: {e}"));
                response.overall_code == Code::Ok as i32
            }
            Limiter::Limitador { limiter, namespace } => {
                // limitador-server's context for a request of one descriptor.
                let mut ctx = Context::default();
                let entries = HashMap::from([(self.entry_key.to_owned(), value.clone())]);
                ctx.list_binding("descriptors".to_owned(), vec![entries]);
                let result = limiter
                    .check_rate_limited_and_update(namespace, &ctx, 1)
                    .await
                    .unwrap_or_else(|e| panic!("limitador failed: {e}"));
                !result.limited
            }
            Limiter::Store { store, policy } => store
                .check(value.as_bytes(), policy, 1)
                .await
                .unwrap_or_else(|e| panic!("RedisStore failed: {e}"))
                .is_allowed(),
        }
    }
}

/// A decision that takes this long never ends: the drive stops with the cell's name
/// rather than wait forever.
const HUNG: Duration = Duration::from_secs(20);

/// What one drive measured.
#[derive(Debug, Default)]
pub(crate) struct Outcome {
    pub(crate) wall: Duration,
    pub(crate) allowed: u64,
}

/// Runs `iters` decisions split over `tasks` tasks; call `i` (from `start`) decides the
/// workload's value `i % len`.
pub(crate) fn drive(
    rt: &Runtime,
    target: &Target,
    tasks: usize,
    iters: u64,
    start: u64,
) -> Outcome {
    let n = tasks as u64;
    let (wall, allowed) = support::split_over_tasks(rt, tasks, iters, |t, count| {
        let target = target.clone();
        async move {
            let len = target.values.len() as u64;
            let mut allowed = 0u64;
            for j in 0..count {
                let i = ((start + t + j * n) % len) as usize;
                let check = target.check(t as usize, i);
                let Ok(admitted) = tokio::time::timeout(HUNG, check).await else {
                    panic!("{}: a decision took more than {HUNG:?}: hung", target.name);
                };
                allowed += u64::from(admitted);
            }
            allowed
        }
    });
    Outcome {
        wall,
        allowed: allowed.into_iter().sum(),
    }
}
