//! The layer's hooks into metrics: one call where a request's outcome is known. Without
//! the `metrics` feature every hook is empty and inlined away, so the layer compiles as
//! it would without them (the `http_instructions` bench checks it).

use floodwall_core::{Acquired, ConcurrencyLimit, Decision, Error, Policy};

/// Whether the hooks do anything: a loop that only calls hooks is skipped when they do not.
pub(crate) const ON: bool = cfg!(feature = "metrics");

/// What a layer keeps for its metrics: its policies' handles (nothing without the
/// feature).
#[cfg(feature = "metrics")]
pub(crate) type Cache = crate::metrics::Cache;
/// What a layer keeps for its metrics: nothing without the feature.
#[cfg(not(feature = "metrics"))]
#[derive(Default, Clone)]
pub(crate) struct Cache;

/// What the hooks read of a rate layer's configuration: its metrics handles, its own
/// policies (whose handles are cached) and whether it is in shadow mode.
#[derive(Clone, Copy)]
// Without the feature the hooks are empty and read none of it.
#[cfg_attr(not(feature = "metrics"), allow(dead_code))]
pub(crate) struct Meter<'a> {
    pub(crate) cache: &'a Cache,
    pub(crate) own: &'a [Policy],
    pub(crate) shadow: bool,
}

/// What an in-flight layer keeps for its metrics: its limit's handles, registered at its
/// first request (nothing without the feature).
#[cfg(feature = "metrics")]
pub(crate) type InFlightCache = std::sync::Arc<std::sync::OnceLock<crate::metrics::Handles>>;
/// What an in-flight layer keeps for its metrics: nothing without the feature.
#[cfg(not(feature = "metrics"))]
pub(crate) type InFlightCache = Cache;

/// Counts an in-flight limit's answer to a request.
#[inline(always)]
pub(crate) fn in_flight(
    cache: &InFlightCache,
    limit: &ConcurrencyLimit,
    shadow: bool,
    result: &Result<Acquired, Error>,
) {
    #[cfg(feature = "metrics")]
    {
        use crate::metrics::{Handles, Outcome};
        let outcome = match result {
            Ok(Acquired::Granted(_)) => Outcome::Allowed,
            Ok(Acquired::Full(_)) if shadow => Outcome::ShadowRefused,
            Ok(Acquired::Full(_)) => Outcome::Refused,
            Err(_) => Outcome::StoreError,
        };
        cache
            .get_or_init(|| {
                crate::metrics::describe();
                Handles::register(limit.name())
            })
            .count(outcome);
    }
    #[cfg(not(feature = "metrics"))]
    let _ = (cache, limit, shadow, result);
}

/// Counts policy `policies[i]`'s decision on a request whose outcome is final.
#[inline(always)]
pub(crate) fn decided(meter: Meter<'_>, policies: &[Policy], i: usize, d: &Decision) {
    #[cfg(feature = "metrics")]
    {
        use crate::metrics::{Outcome, near_limit};
        let outcome = Outcome::of(d, meter.shadow);
        meter.cache.with(meter.own, policies, i, |h| {
            h.count(outcome);
            if near_limit(d) {
                h.near_limit();
            }
        });
    }
    #[cfg(not(feature = "metrics"))]
    let _ = (meter, policies, i, d);
}

/// Counts a request whose cost `policies[i]` can never pass: a refusal.
#[inline(always)]
pub(crate) fn too_costly(meter: Meter<'_>, policies: &[Policy], i: usize) {
    #[cfg(feature = "metrics")]
    {
        use crate::metrics::Outcome;
        let outcome = if meter.shadow {
            Outcome::ShadowRefused
        } else {
            Outcome::Refused
        };
        meter
            .cache
            .with(meter.own, policies, i, |h| h.count(outcome));
    }
    #[cfg(not(feature = "metrics"))]
    let _ = (meter, policies, i);
}

/// Counts a store failure while checking `policies[i]`.
#[inline(always)]
pub(crate) fn store_error(meter: Meter<'_>, policies: &[Policy], i: usize) {
    #[cfg(feature = "metrics")]
    meter.cache.with(meter.own, policies, i, |h| {
        h.count(crate::metrics::Outcome::StoreError)
    });
    #[cfg(not(feature = "metrics"))]
    let _ = (meter, policies, i);
}

/// Times a store call the layer waits for (nothing without the feature).
pub(crate) struct Timer {
    #[cfg(feature = "metrics")]
    start: std::time::Instant,
}

impl Timer {
    #[inline(always)]
    pub(crate) fn start() -> Self {
        Self {
            #[cfg(feature = "metrics")]
            start: std::time::Instant::now(),
        }
    }

    /// Records the call's duration under `policies[i]`.
    #[inline(always)]
    pub(crate) fn stop(self, meter: Meter<'_>, policies: &[Policy], i: usize) {
        #[cfg(feature = "metrics")]
        {
            let took = self.start.elapsed();
            meter
                .cache
                .with(meter.own, policies, i, |h| h.store_call(took));
        }
        #[cfg(not(feature = "metrics"))]
        let _ = (self, meter, policies, i);
    }
}
