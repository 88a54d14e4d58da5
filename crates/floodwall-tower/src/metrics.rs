//! What the layer tells a [`metrics`] recorder (feature `metrics`): the names and labels
//! of its metrics, and the handles it keeps so that counting a request costs an increment,
//! not a lookup. The [metrics guide](crate::guide::metrics) says what each means; install
//! the recorder before serving, as handles are registered at a layer's first request.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use floodwall_core::resilience::{Breaker, BreakerState};
use floodwall_core::{Decision, Policy};
use metrics::{Counter, Histogram, Unit};

/// Counter: requests checked against a policy (or in-flight limit), by `policy` and
/// [`result`](Outcome); a request checked against two policies counts under each.
pub const REQUESTS: &str = "floodwall.rate_limiting.requests";
/// Counter: admitted requests that left a policy at least 80 % used, by `policy`.
pub const NEAR_LIMIT: &str = "floodwall.rate_limiting.near_limit";
/// Histogram, seconds: store calls the layer waited for (a Redis round trip), by
/// `policy`; answers given at once are not timed.
pub const STORE_DURATION: &str = "floodwall.rate_limiting.store.duration";
/// Gauge: a circuit breaker's state (0 closed, 1 half open, 2 open), by `store`.
pub const BREAKER_STATE: &str = "floodwall.breaker.state";
/// Counter: times a circuit breaker opened, by `store`.
pub const BREAKER_OPENED: &str = "floodwall.breaker.opened";
/// Counter: calls a circuit breaker refused without calling its store, by `store`.
pub const BREAKER_FAILED_FAST: &str = "floodwall.breaker.failed_fast";

/// The label naming the policy.
pub const POLICY_LABEL: &str = "policy";
/// The label naming the [`Outcome`].
pub const RESULT_LABEL: &str = "result";
/// The label naming a store (given by the caller of [`record_breaker`]).
pub const STORE_LABEL: &str = "store";

/// Describes every metric of this module (and its unit) to the installed recorder. The
/// layers call it at their first request; call it to have the descriptions sooner.
pub fn describe() {
    metrics::describe_counter!(
        REQUESTS,
        Unit::Count,
        "Requests checked against a rate-limit policy or in-flight limit, by its verdict: \
         allowed, refused, cache_refused, banned, shadow_refused, store_error, fallback."
    );
    metrics::describe_counter!(
        NEAR_LIMIT,
        Unit::Count,
        "Admitted requests that left their rate-limit policy at least 80% used."
    );
    metrics::describe_histogram!(
        STORE_DURATION,
        Unit::Seconds,
        "Seconds the rate limiter waited for its store (a Redis round trip); answers \
         given at once are not timed."
    );
    describe_breaker();
}

/// Describes the metrics of [`record_breaker`].
fn describe_breaker() {
    metrics::describe_gauge!(
        BREAKER_STATE,
        "Circuit breaker state, by store: 0 closed, 1 half open, 2 open."
    );
    metrics::describe_counter!(
        BREAKER_OPENED,
        Unit::Count,
        "Times the circuit breaker opened, by store."
    );
    metrics::describe_counter!(
        BREAKER_FAILED_FAST,
        Unit::Count,
        "Calls the circuit breaker refused without calling its store, by store."
    );
}

/// A policy's verdict on one request: the `result` label of [`REQUESTS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The policy admitted the request.
    Allowed,
    /// The policy refused the request (envoy's `over_limit`), as its store answered.
    Refused,
    /// The policy refused the request, answered by a [`DenyCache`](floodwall_core::DenyCache)
    /// without asking the store.
    CacheRefused,
    /// The policy would have refused it, but it is in
    /// [shadow mode](crate::Enforcement::Shadow): it went through.
    ShadowRefused,
    /// The store failed to answer; the layer then failed open or closed as configured.
    StoreError,
    /// A [`Fallback`](floodwall_core::resilience::Fallback) decided in the failing
    /// store's stead, admitting or refusing.
    Fallback,
    /// The policy refused the request because its key is banned
    /// ([`Penalty`](floodwall_core::Penalty)).
    Banned,
}

impl Outcome {
    /// Every outcome, in the order of [`as_str`](Self::as_str)'s index.
    pub const ALL: [Outcome; 7] = [
        Self::Allowed,
        Self::Refused,
        Self::CacheRefused,
        Self::ShadowRefused,
        Self::StoreError,
        Self::Fallback,
        Self::Banned,
    ];

    /// The label value.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Allowed => "allowed",
            Self::Refused => "refused",
            Self::CacheRefused => "cache_refused",
            Self::ShadowRefused => "shadow_refused",
            Self::StoreError => "store_error",
            Self::Fallback => "fallback",
            Self::Banned => "banned",
        }
    }

    /// What a policy's decision counts as.
    pub(crate) fn of(decision: &Decision, shadow: bool) -> Self {
        use floodwall_core::{Outcome as Verdict, Source};
        match (decision.source, decision.outcome, shadow) {
            (Source::Fallback, _, _) => Self::Fallback,
            (_, Verdict::Allowed, _) => Self::Allowed,
            (_, _, true) => Self::ShadowRefused,
            // A ban answered by a deny cache is still a ban.
            (_, Verdict::Banned, false) => Self::Banned,
            (Source::Cache, _, false) => Self::CacheRefused,
            (_, _, false) => Self::Refused,
        }
    }
}

/// Whether an admitted request left its policy at least 80 % used.
pub(crate) fn near_limit(decision: &Decision) -> bool {
    decision.is_allowed()
        && decision.source != floodwall_core::Source::Fallback
        && decision.remaining.saturating_mul(5) <= decision.limit
}

/// One policy's registered handles.
pub(crate) struct Handles {
    requests: [Counter; Outcome::ALL.len()],
    near_limit: Counter,
    duration: Histogram,
}

impl Handles {
    pub(crate) fn register(policy: &str) -> Self {
        let name = policy.to_owned();
        Self {
            requests: Outcome::ALL.map(|o| {
                metrics::counter!(REQUESTS, POLICY_LABEL => name.clone(), RESULT_LABEL => o.as_str())
            }),
            near_limit: metrics::counter!(NEAR_LIMIT, POLICY_LABEL => name.clone()),
            duration: metrics::histogram!(STORE_DURATION, POLICY_LABEL => name),
        }
    }

    pub(crate) fn count(&self, outcome: Outcome) {
        self.requests[outcome as usize].increment(1);
    }

    pub(crate) fn near_limit(&self) {
        self.near_limit.increment(1);
    }

    pub(crate) fn store_call(&self, took: Duration) {
        self.duration.record(took);
    }
}

/// The handles of a layer's own policies, registered on first use and shared by its
/// clones; any other policy gets handles per request (the recorder's lookup).
#[derive(Default, Clone)]
pub(crate) struct Cache(Arc<CacheInner>);

/// What [`Cache`] shares between a layer's clones.
#[derive(Default)]
pub(crate) struct CacheInner {
    own: OnceLock<Box<[Handles]>>,
    /// Whether the metrics were described to the recorder, for the requests that go to
    /// policies outside the layer's own.
    described: OnceLock<()>,
}

impl Cache {
    /// Calls `f` with the handles of `policies[i]`; `own` is the layer's policy list.
    pub(crate) fn with(
        &self,
        own: &[Policy],
        policies: &[Policy],
        i: usize,
        f: impl FnOnce(&Handles),
    ) {
        if std::ptr::eq(own, policies) {
            let all = self.0.own.get_or_init(|| {
                describe();
                own.iter().map(|p| Handles::register(p.name())).collect()
            });
            f(&all[i]);
        } else {
            self.0.described.get_or_init(describe);
            f(&Handles::register(policies[i].name()));
        }
    }
}

/// Sets (and describes) the breaker metrics for `breaker`, labelled `store`: call it where
/// the metrics are read (before rendering a scrape), as a breaker changes between requests.
pub fn record_breaker<S, C>(store: &'static str, breaker: &Breaker<S, C>) {
    describe_breaker();
    let state = match breaker.state() {
        BreakerState::Closed => 0.0,
        BreakerState::HalfOpen => 1.0,
        _ => 2.0,
    };
    metrics::gauge!(BREAKER_STATE, STORE_LABEL => store).set(state);
    let stats = breaker.stats();
    metrics::counter!(BREAKER_OPENED, STORE_LABEL => store).absolute(stats.opened);
    metrics::counter!(BREAKER_FAILED_FAST, STORE_LABEL => store).absolute(stats.failed_fast);
}
