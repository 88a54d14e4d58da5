//! What [`RateLimitService`](crate::RateLimitService) tells a [`metrics`] recorder (feature
//! `metrics`, on with `bin`): its decisions by domain, descriptor key and result, and how
//! long each request's store work took. The binary's `--metrics <addr>` serves them as
//! Prometheus text on `http://<addr>/metrics`; a program embedding the service installs any
//! recorder of its own. Without a recorder, or without the feature, nothing is recorded.
//!
//! | metric | kind | labels | Prometheus name |
//! |---|---|---|---|
//! | [`DECISIONS`] | counter | `domain`, `key`, `result` | `floodwall_rls_decisions` |
//! | [`STORE_DURATION`] | histogram, seconds | none | `floodwall_rls_store_duration` |
//!
//! # Decisions
//!
//! One count per descriptor that a limit applies to, under:
//!
//! - `domain`: the request's domain (one of the configuration's: a descriptor of an
//!   unknown domain has no limit);
//! - `key`: the descriptor's entry keys joined by dots (`remote_address`,
//!   `client_id.path`), never the request's values, so that the number of series stays
//!   that of the configuration (envoyproxy/ratelimit's issue #994). A limit with
//!   `detailed_metric: true` names each entry as `key_value` instead
//!   (`client_id_acme.path_/v1`), as the reference does: one series per value, asked for;
//! - `result`, an [`Outcome`]: `ok`, `over_limit`, `shadow_over_limit` (a `shadow_mode`
//!   limit that would have refused: answered `OK`), `unlimited` (`unlimited: true`, the
//!   store not asked) or `error` (the store failed: the request was answered
//!   `UNAVAILABLE`, or one of its descriptors `UNKNOWN`).
//!
//! A descriptor that no limit applies to (an unknown domain, no match, a limit replaced
//! by another) is not counted: its labels could only come from the request. Nor is a
//! request refused as `INVALID_ARGUMENT`. `requests_per_unit: 0` counts as `over_limit`
//! (or `shadow_over_limit`). A descriptor's result is the one its status says: one that
//! fit its limit in a request refused by another descriptor counts as `ok`, although it
//! was not charged (all or nothing). An `unlimited` limit is always named by its keys.
//!
//! # Store duration
//!
//! One observation per request that asked the store anything (a descriptor with a counted
//! limit), failed or not: the seconds from its first store call to its last, refunds
//! included. Its count is the number of such requests; the binary renders it with buckets
//! from 0.1 ms to 10 s.

use std::fmt;

use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::DescriptorStatus;
use floodwall_core::Decision;

use crate::service::Plan;

/// Counter: descriptors decided, by [`DOMAIN_LABEL`], [`KEY_LABEL`] and [`RESULT_LABEL`].
pub const DECISIONS: &str = "floodwall.rls.decisions";
/// Histogram, seconds: how long each request's store work took (see the
/// [module](self)).
pub const STORE_DURATION: &str = "floodwall.rls.store.duration";

/// The label naming the request's domain.
pub const DOMAIN_LABEL: &str = "domain";
/// The label naming the descriptor: its entry keys, or `key_value` pairs with
/// `detailed_metric`.
pub const KEY_LABEL: &str = "key";
/// The label naming the [`Outcome`].
pub const RESULT_LABEL: &str = "result";

/// What one descriptor's decision counts as: the `result` label of [`DECISIONS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// Answered `OK` by its limit.
    Ok,
    /// Answered `OVER_LIMIT`.
    OverLimit,
    /// A `shadow_mode` limit that would have refused it: answered `OK`.
    ShadowOverLimit,
    /// An `unlimited: true` limit: `OK`, the store not asked.
    Unlimited,
    /// The store failed to decide it.
    Error,
}

impl Outcome {
    /// Every outcome.
    pub const ALL: [Outcome; 5] = [
        Self::Ok,
        Self::OverLimit,
        Self::ShadowOverLimit,
        Self::Unlimited,
        Self::Error,
    ];

    /// The label value: `ok`, `over_limit`, `shadow_over_limit`, `unlimited`, `error`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::OverLimit => "over_limit",
            Self::ShadowOverLimit => "shadow_over_limit",
            Self::Unlimited => "unlimited",
            Self::Error => "error",
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Describes both metrics (and their units) to the installed recorder: the binary calls
/// it once its recorder is in place; a program with its own recorder may too.
pub fn describe() {
    #[cfg(feature = "metrics")]
    {
        metrics::describe_counter!(
            DECISIONS,
            metrics::Unit::Count,
            "Rate limit descriptors decided, by domain, descriptor key and result: ok, \
             over_limit, shadow_over_limit, unlimited, error."
        );
        metrics::describe_histogram!(
            STORE_DURATION,
            metrics::Unit::Seconds,
            "Seconds each ShouldRateLimit request spent on its store calls."
        );
    }
}

/// When a request's store work started; nothing without the feature.
pub(crate) struct Stopwatch {
    #[cfg(feature = "metrics")]
    started: std::time::Instant,
}

impl Stopwatch {
    pub(crate) fn start() -> Self {
        Self {
            #[cfg(feature = "metrics")]
            started: std::time::Instant::now(),
        }
    }
}

/// Records a request the service answered: each descriptor's outcome, from its plan, its
/// status and the decision behind it; the store time if the store was asked.
pub(crate) fn decided(
    request: &RateLimitRequest,
    plans: &[Plan<'_>],
    statuses: &[DescriptorStatus],
    decisions: &[(usize, Decision)],
    watch: &Stopwatch,
) {
    #[cfg(feature = "metrics")]
    record(request, plans, watch, |i| {
        outcome(i, plans, statuses, decisions)
    });
    #[cfg(not(feature = "metrics"))]
    let _ = (request, plans, statuses, decisions, watch);
}

/// Records a request answered `UNAVAILABLE` because the store failed: each descriptor
/// with a limit counts as an error.
pub(crate) fn failed(request: &RateLimitRequest, plans: &[Plan<'_>], watch: &Stopwatch) {
    #[cfg(feature = "metrics")]
    record(request, plans, watch, |i| match plans[i] {
        Plan::Free => None,
        _ => Some(Outcome::Error),
    });
    #[cfg(not(feature = "metrics"))]
    let _ = (request, plans, watch);
}

#[cfg(feature = "metrics")]
fn record(
    request: &RateLimitRequest,
    plans: &[Plan<'_>],
    watch: &Stopwatch,
    outcome: impl Fn(usize) -> Option<Outcome>,
) {
    let mut store_asked = false;
    for (i, (plan, descriptor)) in plans.iter().zip(&request.descriptors).enumerate() {
        store_asked |= matches!(plan, Plan::Check { .. });
        let Some(outcome) = outcome(i) else { continue };
        let detailed = match plan {
            Plan::RefuseAll(limit) | Plan::Check { limit, .. } => limit.detailed_metric(),
            Plan::Free | Plan::Unlimited => false,
        };
        let mut key = String::new();
        for (n, entry) in descriptor.entries.iter().enumerate() {
            if n > 0 {
                key.push('.');
            }
            key.push_str(&entry.key);
            if detailed {
                key.push('_');
                key.push_str(&entry.value);
            }
        }
        metrics::counter!(
            DECISIONS,
            DOMAIN_LABEL => request.domain.clone(),
            KEY_LABEL => key,
            RESULT_LABEL => outcome.as_str(),
        )
        .increment(1);
    }
    if store_asked {
        metrics::histogram!(STORE_DURATION).record(watch.started.elapsed());
    }
}

/// Descriptor `i`'s outcome; `None` when no limit applies to it.
///
/// A shadow limit's status is `OK` either way, so whether it would have refused is read
/// from its decision: refused by the store, asked more than it can ever admit, or, in a
/// request another descriptor refused (where it was only read, or charged and given back),
/// asked more than remains.
#[cfg(feature = "metrics")]
fn outcome(
    i: usize,
    plans: &[Plan<'_>],
    statuses: &[DescriptorStatus],
    decisions: &[(usize, Decision)],
) -> Option<Outcome> {
    use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
    let over = |s: &DescriptorStatus| s.code == Code::OverLimit as i32;
    match &plans[i] {
        Plan::Free => None,
        Plan::Unlimited => Some(Outcome::Unlimited),
        Plan::RefuseAll(limit) if limit.shadow_mode() => Some(Outcome::ShadowOverLimit),
        Plan::RefuseAll(_) => Some(Outcome::OverLimit),
        Plan::Check { limit, cost, .. } => {
            let status = statuses.get(i)?;
            Some(if status.code == Code::Unknown as i32 {
                Outcome::Error
            } else if !limit.shadow_mode() {
                if over(status) {
                    Outcome::OverLimit
                } else {
                    Outcome::Ok
                }
            } else {
                let refused = statuses.iter().any(over);
                let decision = decisions.iter().find(|(j, _)| *j == i).map(|(_, d)| d);
                let would_refuse = decision.is_none_or(|d| {
                    !d.is_allowed() || *cost > d.limit || (refused && *cost > d.remaining)
                });
                if would_refuse {
                    Outcome::ShadowOverLimit
                } else {
                    Outcome::Ok
                }
            })
        }
    }
}
