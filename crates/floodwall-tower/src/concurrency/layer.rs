//! The in-flight layer: a cheap, cloneable configuration that wraps services in
//! [`ConcurrencyLimitService`].

use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

use floodwall_core::resilience::{Breaker, FailMode, Fallback};
use floodwall_core::{ConcurrencyLimit, Store};
use tower_layer::Layer;

use super::ConcurrencyLimitService;
use super::config::InFlightConfig;
use crate::extract::{ExtractKey, PeerIp};
use crate::headers::HeaderStyle;
use crate::options::Refusals;
use crate::{RejectWithError, RejectWithResponse};

/// Limits how many requests per key run at once:
/// `.layer(ConcurrencyLimitLayer::new(store, ConcurrencyLimit::new("reports", 2)?))`.
///
/// Unlike tower's `ConcurrencyLimitLayer`, which bounds one service's calls in this
/// process and makes the excess wait, this one is **keyed** (per client, API key, route:
/// the same [extractors](crate::extract) as [`RateLimitLayer`](crate::RateLimitLayer)),
/// can be **shared by a fleet** (a Redis store keeps a lease per slot), and **refuses** a
/// full key at once (429, or gRPC `RESOURCE_EXHAUSTED` through
/// [`Grpc`](crate::respond::Grpc)) without `Retry-After`, since when a slot comes free is
/// not known. A slot is held from admission until the response body is done
/// ([`PermitBody`](crate::PermitBody)), and given back on every other way out: an error,
/// a panic, a client that disconnects, a dropped future.
///
/// # A layer of its own, not an option of `RateLimitLayer`
///
/// An in-flight limit holds something across the whole response, where a rate check is
/// done before the handler runs: its responses must carry a body that holds the slot, so
/// every [`RateLimitLayer`](crate::RateLimitLayer) would pay for wrapping bodies it does
/// not need, and its store would have to count both. As a layer of its own, each reads as
/// what it limits, both can be stacked on one route (`.layer(rate).layer(in_flight)`: the
/// outer one decides first), and each takes the store it needs.
///
/// Defaults, each changed by one builder method: key by peer IP ([`PeerIp`]); store
/// failures fail closed ([`fail_mode`](Self::fail_mode)); refusals, missing keys and
/// headers as [`Refusals`] has them by default ([`refusals`](Self::refusals), the same
/// value the rate layer takes): 429 from
/// [`TooManyRequests`](crate::respond::TooManyRequests), 503 on a store failure, a
/// missing key refused with the extractor's status, IETF headers:
///
/// ```text
/// RateLimit-Policy: "reports";q=2;qu="concurrent-requests"
/// RateLimit: "reports";r=1
/// ```
///
/// ```
/// use floodwall_core::{ConcurrencyLimit, MemoryStore};
/// use floodwall_tower::ConcurrencyLimitLayer;
///
/// let layer = ConcurrencyLimitLayer::new(MemoryStore::new(), ConcurrencyLimit::new("reports", 2)?);
/// # let _ = layer;
/// # Ok::<(), floodwall_core::ConfigError>(())
/// ```
pub struct ConcurrencyLimitLayer<St, K = PeerIp, M = RejectWithResponse> {
    config: InFlightConfig<St, K>,
    _mode: PhantomData<fn() -> M>,
}

impl<St: Store + Clone> ConcurrencyLimitLayer<St> {
    /// At most `limit.max()` requests in flight per client (by peer IP), counted in
    /// `store`: a [`MemoryStore`](floodwall_core::MemoryStore) for one process, a Redis
    /// store for a fleet, or an `Arc` of a store of your own.
    pub fn new(store: St, limit: ConcurrencyLimit) -> Self {
        Self {
            config: InFlightConfig::new(store, PeerIp::new(), limit),
            _mode: PhantomData,
        }
    }
}

impl<St: Store, K, M> ConcurrencyLimitLayer<St, K, M> {
    /// What to do while the store fails, behind a circuit breaker, as
    /// [`RateLimitLayer::fail_mode`](crate::RateLimitLayer::fail_mode) does: the store
    /// becomes `Fallback<Breaker<St>>`. [`FailMode::local(nodes)`](FailMode::local) counts
    /// in this process against `max / nodes`; [`FailMode::Open`] lets requests through
    /// uncounted; [`FailMode::Closed`] answers with the store-failure responder of
    /// [`refusals`](Self::refusals). Without it, store failures are refused with no
    /// breaker.
    pub fn fail_mode(self, mode: FailMode) -> ConcurrencyLimitLayer<Fallback<Breaker<St>>, K, M> {
        ConcurrencyLimitLayer {
            config: self
                .config
                .rebuild(|store| Fallback::new(Breaker::new(store), mode), |key| key),
            _mode: PhantomData,
        }
    }
}

impl<St, K, M> ConcurrencyLimitLayer<St, K, M> {
    /// Limits by another key: `.key(HeaderKey::bearer())`, `.key(Global)`, or any
    /// `|req: &Parts| -> Option<impl AsRef<[u8]>>`. See [`extract`](crate::extract).
    pub fn key<K2: ExtractKey>(self, key: K2) -> ConcurrencyLimitLayer<St, K2, M> {
        ConcurrencyLimitLayer {
            config: self.config.rebuild(|store| store, |_| Arc::new(key)),
            _mode: PhantomData,
        }
    }

    /// How refusals are answered and which headers are sent, the same [`Refusals`] as
    /// [`RateLimitLayer::refusals`](crate::RateLimitLayer::refusals) takes. A refusal's
    /// [`Denial`](crate::respond::Denial) says
    /// [`too_many_in_flight`](crate::respond::Denial::too_many_in_flight), and has no
    /// `retry_after`; GitHub's header style has no reset here.
    ///
    /// ```
    /// use floodwall_core::{ConcurrencyLimit, MemoryStore};
    /// use floodwall_tower::respond::Json;
    /// use floodwall_tower::{ConcurrencyLimitLayer, Refusals};
    ///
    /// let layer = ConcurrencyLimitLayer::new(MemoryStore::new(), ConcurrencyLimit::new("reports", 2)?)
    ///     .refusals(Refusals::new().respond(Json));
    /// # let _ = layer;
    /// # Ok::<(), floodwall_core::ConfigError>(())
    /// ```
    pub fn refusals(mut self, refusals: Refusals) -> Self {
        self.config.on_reject = refusals.on_reject;
        self.config.on_failure = refusals.on_failure;
        self.config.on_missing = refusals.on_missing;
        self.config.set_style(refusals.headers);
        self
    }

    /// Shadow mode: count, log what would have been refused, never refuse.
    pub fn shadow(mut self, shadow: bool) -> Self {
        self.config.shadow = shadow;
        self
    }

    /// Reports refusals as errors ([`RateLimited`](crate::RateLimited), with
    /// [`too_many_in_flight`](crate::RateLimited::too_many_in_flight)) instead of responses.
    pub fn reject_with_error(self) -> ConcurrencyLimitLayer<St, K, RejectWithError> {
        ConcurrencyLimitLayer {
            config: self.config,
            _mode: PhantomData,
        }
    }

    /// The limit.
    pub fn limit(&self) -> &ConcurrencyLimit {
        &self.config.limit
    }
}

impl<S, St: Clone, K, M> Layer<S> for ConcurrencyLimitLayer<St, K, M> {
    type Service = ConcurrencyLimitService<S, St, K, M>;

    fn layer(&self, inner: S) -> Self::Service {
        ConcurrencyLimitService::from_config(inner, Arc::new(self.config.clone()))
    }
}

impl<St: Clone, K, M> Clone for ConcurrencyLimitLayer<St, K, M> {
    fn clone(&self) -> Self {
        Self {
            config: self.config.clone(),
            _mode: PhantomData,
        }
    }
}

impl<St, K, M> fmt::Debug for ConcurrencyLimitLayer<St, K, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConcurrencyLimitLayer")
            .field("limit", &self.config.limit)
            .field(
                "headers",
                &self
                    .config
                    .headers
                    .as_ref()
                    .map_or(HeaderStyle::None, |h| h.style()),
            )
            .field("shadow", &self.config.shadow)
            .finish_non_exhaustive()
    }
}
