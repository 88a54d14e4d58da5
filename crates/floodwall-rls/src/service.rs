//! The gRPC service: Envoy's `envoy.service.ratelimit.v3.RateLimitService`
//! (`ShouldRateLimit`) over any floodwall [`Store`], deciding with a [`Config`].
//!
//! ```no_run
//! use floodwall_core::MemoryStore;
//! use floodwall_rls::RateLimitService;
//! use floodwall_rls::config::Config;
//!
//! # async fn serve() -> Result<(), Box<dyn std::error::Error>> {
//! let config = Config::load("/etc/ratelimit/config")?;
//! let service = RateLimitService::new(config, MemoryStore::new());
//! tonic::transport::Server::builder()
//!     .add_service(service.clone().into_server())
//!     .serve("127.0.0.1:8081".parse()?)
//!     .await?;
//! # Ok(())
//! # }
//! ```
//!
//! # What a request gets
//!
//! Each descriptor's limit is found as [`Config::limit`] says, then the `replaces` between
//! them are applied ([`drop_replaced`]). Then, per descriptor, in order:
//!
//! - no limit (an unknown domain, a descriptor no limit matches, a replaced limit): `OK`,
//!   nothing else set, as the reference answers;
//! - `unlimited`: `OK` with `limit_remaining` at `u32::MAX`, as the reference answers; the
//!   store is not touched;
//! - `requests_per_unit: 0`: `OVER_LIMIT`, the store is not touched;
//! - a counted limit: the store decides a request of the descriptor's cost for the key
//!   made of the request's entries under the limit's policy.
//!
//! A descriptor's `limit` override, in a known domain, replaces the configured limit as
//! the reference's does (no name, `replaces` or shadow mode), counted with GCRA; one whose
//! unit is unknown or whose rate floodwall cannot enforce is an `INVALID_ARGUMENT`.
//!
//! The cost is the descriptor's `hits_addend` when set (0 then only reads the state, as
//! the reference's "check without incrementing"), else the request's `hits_addend`, 0
//! counting as 1 (as the reference does). A cost the limit can never admit (above its
//! burst, or its window's count) is `OVER_LIMIT`, never an error.
//!
//! A request's descriptors are all or nothing: if one is over its limit, none is charged
//! (the reference charges the others; its issue #185). The store decides them in one
//! atomic step ([`StoreExt::check_all_of`](floodwall_core::StoreExt::check_all_of)), so a
//! concurrent request never sees a charge that is not kept; where it cannot (on a Redis
//! Cluster, descriptors whose keys are in different slots), one by one, giving the
//! charges back on a refusal: never past a quota. `shadow_mode` descriptors are
//! decided and counted as usual but answered `OK`, with `limit_remaining` 0 when they
//! would have been refused (the reference's answer), and never make the request refused.
//! The overall code is `OVER_LIMIT` if any descriptor's is.
//!
//! A request without a domain or without descriptors is a gRPC `INVALID_ARGUMENT`, as is
//! one with `is_negative_hits` (not supported yet); a store that fails (Redis down, its
//! timeout) is a gRPC `UNAVAILABLE`, so that Envoy's filter applies its
//! `failure_mode_deny`. Nothing panics, whatever the request.

use std::fmt::Write as _;
use std::io::Write as _;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use envoy_types::pb::envoy::config::core::v3::HeaderValue;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{
    Code, DescriptorStatus, RateLimit as LimitMessage, rate_limit::Unit as UnitMessage,
};
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_server::{
    RateLimitService as RateLimitServiceTrait, RateLimitServiceServer,
};
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use envoy_types::pb::envoy::r#type::v3::RateLimitUnit as OverrideUnit;
use envoy_types::pb::google::protobuf::Duration as DurationMessage;
use floodwall_core::{Decision, Error, Policy, Store};
use tonic::{Request, Response, Status};

use crate::charge;
use crate::config::{Config, RateLimit, Rule, Unit, drop_replaced};

/// floodwall as Envoy's rate-limit service: decides each `ShouldRateLimit` request with
/// the current [`Config`] on store `S` (a [`MemoryStore`](floodwall_core::MemoryStore) for
/// one instance, `floodwall_redis::RedisStore` for a fleet).
///
/// Cloning is cheap and shares the store and the configuration: keep a clone to
/// [`set_config`](Self::set_config) while [`into_server`](Self::into_server)'s copy
/// serves. [`decide`](Self::decide) answers a request without gRPC.
pub struct RateLimitService<S> {
    config: Arc<ArcSwap<Config>>,
    store: Arc<S>,
    headers: bool,
}

impl<S> Clone for RateLimitService<S> {
    fn clone(&self) -> Self {
        Self {
            config: Arc::clone(&self.config),
            store: Arc::clone(&self.store),
            headers: self.headers,
        }
    }
}

impl<S> std::fmt::Debug for RateLimitService<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimitService")
            .field("domains", &self.config.load().domains().count())
            .field("response_headers", &self.headers)
            .finish_non_exhaustive()
    }
}

/// What one descriptor of a request asks of the store, once its limit is known (read by
/// [`metrics`](crate::metrics) too).
pub(crate) enum Plan<'a> {
    /// No limit applies: `OK`, nothing else said.
    Free,
    /// `unlimited: true`.
    Unlimited,
    /// `requests_per_unit: 0`.
    RefuseAll(&'a RateLimit),
    /// Counted: the store decides `cost` for `key` under `policy`.
    Check {
        limit: &'a RateLimit,
        policy: &'a Policy,
        key: Vec<u8>,
        cost: u64,
    },
}

impl<S: Store + 'static> RateLimitService<S> {
    /// A service deciding with `config` on `store`, without response headers.
    pub fn new(config: Config, store: S) -> Self {
        Self {
            config: Arc::new(ArcSwap::from_pointee(config)),
            store: Arc::new(store),
            headers: false,
        }
    }

    /// Whether responses carry `response_headers_to_add`: the IETF `RateLimit-Policy` and
    /// `RateLimit` fields (one list member per counted limit, named after its policy;
    /// `q`, `w`, `r`, `t` as the tower layer writes them) and, when the request is over
    /// its limit, `Retry-After` in whole seconds. Off by default.
    pub fn response_headers(mut self, on: bool) -> Self {
        self.headers = on;
        self
    }

    /// The configuration requests are decided with now.
    pub fn config(&self) -> Arc<Config> {
        self.config.load_full()
    }

    /// Decides every request from now on with `config` (a reload); requests being decided
    /// finish with the one they started with. A key keeps its state across a reload as
    /// long as its limit keeps its domain and descriptor path (see
    /// [`RateLimit::policy`]).
    pub fn set_config(&self, config: Config) {
        self.config.store(Arc::new(config));
    }

    /// The store decisions are made on.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// The tonic service, for `Server::builder().add_service(..)`.
    pub fn into_server(self) -> RateLimitServiceServer<Self> {
        RateLimitServiceServer::new(self)
    }

    /// Decides one request, as `ShouldRateLimit` answers it (see the [module](self)).
    pub async fn decide(&self, request: &RateLimitRequest) -> Result<RateLimitResponse, Status> {
        if request.domain.is_empty() {
            return Err(Status::invalid_argument(
                "the rate limit request has no domain: every request names the domain its limits are in",
            ));
        }
        if request.descriptors.is_empty() {
            return Err(Status::invalid_argument(
                "the rate limit request has no descriptors: there is nothing to decide",
            ));
        }
        if let Some(at) = request.descriptors.iter().position(|d| d.is_negative_hits) {
            return Err(Status::invalid_argument(format!(
                "descriptor {at} has is_negative_hits, which this service does not support yet"
            )));
        }
        let config = self.config.load_full();
        let overrides = overrides(&config, request)?;
        let plans = plan(&config, &overrides, request);

        let watch = crate::metrics::Stopwatch::start();
        let charged = charge::all_or_nothing(&*self.store, &plans).await;
        let (statuses, decided) =
            charged.inspect_err(|_| crate::metrics::failed(request, &plans, &watch))?;

        let over = statuses.iter().any(|s| s.code == Code::OverLimit as i32);
        let mut response = RateLimitResponse {
            overall_code: if over { Code::OverLimit } else { Code::Ok } as i32,
            statuses,
            ..RateLimitResponse::default()
        };
        if self.headers {
            response.response_headers_to_add = headers(&plans, &decided, over);
        }
        crate::metrics::decided(request, &plans, &response.statuses, &decided, &watch);
        Ok(response)
    }
}

#[tonic::async_trait]
impl<S: Store + 'static> RateLimitServiceTrait for RateLimitService<S> {
    async fn should_rate_limit(
        &self,
        request: Request<RateLimitRequest>,
    ) -> Result<Response<RateLimitResponse>, Status> {
        self.decide(request.get_ref()).await.map(Response::new)
    }
}

/// The limit of each descriptor's `limit` override, where it has one and the domain is
/// known (the reference ignores an override in an unknown domain), by descriptor; empty
/// when no descriptor has one. An override the service cannot apply is an
/// `INVALID_ARGUMENT`.
fn overrides(
    config: &Config,
    request: &RateLimitRequest,
) -> Result<Vec<Option<RateLimit>>, Status> {
    // The usual request has no override: no list to allocate.
    let known = config.domain(&request.domain).is_some();
    if !known || request.descriptors.iter().all(|d| d.limit.is_none()) {
        return Ok(Vec::new());
    }
    let mut out = Vec::with_capacity(request.descriptors.len());
    for (i, descriptor) in request.descriptors.iter().enumerate() {
        let Some(asked) = descriptor.limit else {
            out.push(None);
            continue;
        };
        let unit = match OverrideUnit::try_from(asked.unit) {
            Ok(OverrideUnit::Second) => Unit::Second,
            Ok(OverrideUnit::Minute) => Unit::Minute,
            Ok(OverrideUnit::Hour) => Unit::Hour,
            Ok(OverrideUnit::Day) => Unit::Day,
            Ok(OverrideUnit::Month) => Unit::Month,
            Ok(OverrideUnit::Year) => Unit::Year,
            _ => {
                return Err(Status::invalid_argument(format!(
                    "descriptor {i}'s limit override has no unit this service knows (unit {})",
                    asked.unit
                )));
            }
        };
        let limit = RateLimit::from_override(&request.domain, asked.requests_per_unit, unit)
            .map_err(|e| {
                Status::invalid_argument(format!(
                    "descriptor {i}'s limit override of {} per {unit} cannot be enforced: {e}",
                    asked.requests_per_unit
                ))
            })?;
        out.push(Some(limit));
    }
    Ok(out)
}

/// Each descriptor's plan: its override's limit, else its limit as the configuration
/// finds it; `replaces` applied.
fn plan<'a>(
    config: &'a Config,
    overrides: &'a [Option<RateLimit>],
    request: &RateLimitRequest,
) -> Vec<Plan<'a>> {
    let mut limits: Vec<Option<&RateLimit>> = request
        .descriptors
        .iter()
        .enumerate()
        .map(|(i, d)| {
            overrides.get(i).and_then(Option::as_ref).or_else(|| {
                let entries = d.entries.iter().map(|e| (e.key.as_str(), e.value.as_str()));
                config.limit(&request.domain, entries)
            })
        })
        .collect();
    drop_replaced(&mut limits);
    let request_cost = u64::from(request.hits_addend.max(1));
    limits
        .into_iter()
        .zip(&request.descriptors)
        .map(|(limit, descriptor)| match limit.map(|l| (l, l.rule())) {
            None => Plan::Free,
            Some((_, Rule::Unlimited)) => Plan::Unlimited,
            Some((limit, Rule::RefuseAll)) => Plan::RefuseAll(limit),
            Some((limit, Rule::Limited(policy))) => Plan::Check {
                limit,
                policy,
                key: store_key(descriptor),
                cost: descriptor
                    .hits_addend
                    .map_or(request_cost, |addend| addend.value),
            },
        })
        .collect()
}

/// A descriptor's store key: each entry's key and value, each preceded by its length in
/// decimal and a `:` (`4:user10:user-01234`), so that no two lists of entries share a key,
/// whatever bytes they hold, and a printable descriptor makes a printable key, which the
/// Redis store keeps as it is rather than in hexadecimal or hashed. The domain and the
/// descriptor path are in the policy's name already.
fn store_key(descriptor: &RateLimitDescriptor) -> Vec<u8> {
    let mut key = Vec::new();
    for entry in &descriptor.entries {
        for part in [&entry.key, &entry.value] {
            // Writing to a Vec cannot fail.
            let _ = write!(key, "{}:", part.len());
            key.extend_from_slice(part.as_bytes());
        }
    }
    key
}

/// The status of a descriptor under `limit`: `OK` or `OVER_LIMIT`, the limit as
/// configured, and what remains and when it is full again from `decision`.
pub(crate) fn limit_status(
    limit: &RateLimit,
    ok: bool,
    decision: Option<&Decision>,
) -> DescriptorStatus {
    DescriptorStatus {
        code: if ok { Code::Ok } else { Code::OverLimit } as i32,
        current_limit: Some(LimitMessage {
            name: limit.name().unwrap_or_default().to_owned(),
            requests_per_unit: limit.requests_per_unit(),
            unit: limit.unit().map_or(UnitMessage::Unknown, unit_message) as i32,
        }),
        limit_remaining: decision.map_or(0, |d| saturate(d.remaining)),
        duration_until_reset: decision.map(|d| duration_message(d.reset_after)),
        quota: None,
    }
}

fn unit_message(unit: Unit) -> UnitMessage {
    match unit {
        Unit::Second => UnitMessage::Second,
        Unit::Minute => UnitMessage::Minute,
        Unit::Hour => UnitMessage::Hour,
        Unit::Day => UnitMessage::Day,
        Unit::Week => UnitMessage::Week,
        Unit::Month => UnitMessage::Month,
        Unit::Year => UnitMessage::Year,
    }
}

pub(crate) fn saturate(n: u64) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

fn duration_message(d: Duration) -> DurationMessage {
    DurationMessage {
        seconds: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        nanos: d.subsec_nanos() as i32,
    }
}

pub(crate) fn unavailable(e: &Error) -> Status {
    Status::unavailable(format!("the rate limit store could not decide: {e}"))
}

/// `RateLimit-Policy`, `RateLimit` and, when the request is over its limit, `Retry-After`.
/// Descriptors under one limit (values of one key) share its list member, which carries
/// the figures of the one with the least remaining: what a client must respect.
fn headers(plans: &[Plan<'_>], decided: &[(usize, Decision)], over: bool) -> Vec<HeaderValue> {
    // Each member's `RateLimit-Policy` text, its name and the decision it reports.
    let mut members: Vec<(String, &str, &Decision)> = Vec::with_capacity(decided.len());
    let mut retry: Option<Duration> = None;
    for (i, d) in decided {
        let Plan::Check { limit, policy, .. } = &plans[*i] else {
            continue;
        };
        if let Some(r) = d.retry_after {
            retry = Some(retry.map_or(r, |before| before.max(r)));
        }
        let window = limit.unit().map_or(1, Unit::seconds);
        let name = policy.name();
        // Writing to a String cannot fail.
        let mut text = String::new();
        let _ = write!(
            text,
            "\"{name}\";q={};w={window}",
            limit.requests_per_unit()
        );
        if policy.limit() != u64::from(limit.requests_per_unit()) {
            let _ = write!(text, ";floodwall-burst={}", policy.limit());
        }
        match members.iter_mut().find(|(t, _, _)| *t == text) {
            Some(member) if tighter(d, member.2) => member.2 = d,
            Some(_) => {}
            None => members.push((text, name, d)),
        }
    }
    let mut policy_field = String::new();
    let mut limit_field = String::new();
    for (text, name, d) in members {
        let sep = if policy_field.is_empty() { "" } else { ", " };
        policy_field.push_str(sep);
        policy_field.push_str(&text);
        let remaining = d.remaining.min(SF_INTEGER_MAX);
        let reset = ceil_secs(d.reset_after).min(SF_INTEGER_MAX);
        let _ = write!(limit_field, "{sep}\"{name}\";r={remaining};t={reset}");
    }
    let mut out = Vec::new();
    let mut add = |key: &str, value: String| {
        out.push(HeaderValue {
            key: key.to_owned(),
            value,
            raw_value: Vec::new(),
        });
    };
    if !policy_field.is_empty() {
        add("RateLimit-Policy", policy_field);
        add("RateLimit", limit_field);
    }
    if over {
        // Refused by `requests_per_unit: 0` alone, no decision says when: its unit.
        let refuse_all = plans.iter().filter_map(|p| match p {
            Plan::RefuseAll(limit) if !limit.shadow_mode() => limit.unit().map(Unit::duration),
            _ => None,
        });
        let wait = retry
            .or_else(|| refuse_all.max())
            .unwrap_or(Duration::from_secs(1));
        add("Retry-After", ceil_secs(wait).max(1).to_string());
    }
    out
}

/// Whether `a` leaves a client less than `b`: fewer remaining, or as many for longer.
fn tighter(a: &Decision, b: &Decision) -> bool {
    (a.remaining, std::cmp::Reverse(a.reset_after))
        < (b.remaining, std::cmp::Reverse(b.reset_after))
}

/// The largest integer a structured field carries.
const SF_INTEGER_MAX: u64 = 999_999_999_999_999;

fn ceil_secs(d: Duration) -> u64 {
    d.as_secs().saturating_add(u64::from(d.subsec_nanos() > 0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;

    fn descriptor(entries: &[(&str, &str)]) -> RateLimitDescriptor {
        RateLimitDescriptor {
            entries: entries
                .iter()
                .map(|(k, v)| Entry {
                    key: (*k).to_owned(),
                    value: (*v).to_owned(),
                })
                .collect(),
            ..RateLimitDescriptor::default()
        }
    }

    #[test]
    fn a_printable_descriptor_makes_a_printable_key() {
        let key = store_key(&descriptor(&[("user", "user-01234"), ("path", "/v1")]));
        assert_eq!(key, b"4:user10:user-012344:path3:/v1");
    }

    #[test]
    fn store_keys_are_unambiguous() {
        let keys = [
            store_key(&descriptor(&[("a", "bc")])),
            store_key(&descriptor(&[("ab", "c")])),
            store_key(&descriptor(&[("a", ""), ("b", "c")])),
            store_key(&descriptor(&[("a", "b"), ("", "c")])),
            store_key(&descriptor(&[])),
            store_key(&descriptor(&[("1:a", "")])),
            store_key(&descriptor(&[("", "1:a")])),
            store_key(&descriptor(&[("", ""), ("", "")])),
            store_key(&descriptor(&[("", "")])),
        ];
        for (i, a) in keys.iter().enumerate() {
            for b in &keys[i + 1..] {
                assert_ne!(a, b);
            }
        }
    }
}
