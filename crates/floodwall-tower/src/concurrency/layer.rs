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
use crate::options::Refusals;
use crate::{RejectWithError, RejectWithResponse};

/// Limits how many requests per key run at once:
/// `.layer(ConcurrencyLimitLayer::new(store, ConcurrencyLimit::new("reports", 2)?))`.
///
/// Unlike tower's `ConcurrencyLimitLayer`, this one is **keyed** (the
/// [extractors](crate::extract) of [`RateLimitLayer`](crate::RateLimitLayer)), can be
/// **shared by a fleet** (a Redis store keeps a lease per slot), and **refuses** a full
/// key at once, without `Retry-After`. A slot is held until the response body is done
/// ([`PermitBody`](crate::PermitBody)) and given back on every other way out (an error, a
/// panic, a dropped future). It is a layer of its own so that rate limits do not pay for
/// wrapping bodies; both stack on one route (`.layer(rate).layer(in_flight)`).
///
/// Defaults: key by peer IP ([`PeerIp`]), fail closed ([`fail_mode`](Self::fail_mode)),
/// [`Refusals`] as by default ([`refusals`](Self::refusals)), so IETF headers:
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
    /// `store`.
    pub fn new(store: St, limit: ConcurrencyLimit) -> Self {
        Self::with(InFlightConfig::new(store, PeerIp::new(), limit))
    }
}

impl<St, K, M> ConcurrencyLimitLayer<St, K, M> {
    fn with<St2, K2, M2>(config: InFlightConfig<St2, K2>) -> ConcurrencyLimitLayer<St2, K2, M2> {
        let _mode = PhantomData;
        ConcurrencyLimitLayer { config, _mode }
    }
}

impl<St: Store, K, M> ConcurrencyLimitLayer<St, K, M> {
    /// What to do while the store fails ([`FailMode`]; `local(nodes)` counts against
    /// `max / nodes`), behind a circuit breaker, as
    /// [`RateLimitLayer::fail_mode`](crate::RateLimitLayer::fail_mode) does.
    pub fn fail_mode(self, mode: FailMode) -> ConcurrencyLimitLayer<Fallback<Breaker<St>>, K, M> {
        let store = |store| Fallback::new(Breaker::new(store), mode);
        Self::with(self.config.rebuild(store, |key| key))
    }
}

impl<St, K, M> ConcurrencyLimitLayer<St, K, M> {
    /// Limits by another key: `.key(HeaderKey::bearer())`, `.key(Global)`, or any
    /// `|req: &Parts| -> Option<impl AsRef<[u8]>>`. See [`extract`](crate::extract).
    pub fn key<K2: ExtractKey>(self, key: K2) -> ConcurrencyLimitLayer<St, K2, M> {
        Self::with(self.config.rebuild(|store| store, |_| Arc::new(key)))
    }

    /// How refusals are answered and which headers are sent: see [`Refusals`]. A
    /// refusal's [`Denial`](crate::respond::Denial) says
    /// [`too_many_in_flight`](crate::respond::Denial::too_many_in_flight).
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
        self.config.set_refusals(refusals);
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
        Self::with(self.config)
    }

    /// The limit.
    pub fn limit(&self) -> &ConcurrencyLimit {
        &self.config.limit
    }
}

impl<S, St: Clone, K, M> Layer<S> for ConcurrencyLimitLayer<St, K, M> {
    type Service = ConcurrencyLimitService<S, St, K, M>;

    fn layer(&self, inner: S) -> Self::Service {
        ConcurrencyLimitService::from_shared(inner, Arc::new(self.config.clone()))
    }
}

impl<St: Clone, K, M> Clone for ConcurrencyLimitLayer<St, K, M> {
    fn clone(&self) -> Self {
        Self::with(self.config.clone())
    }
}

impl<St, K, M> fmt::Debug for ConcurrencyLimitLayer<St, K, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConcurrencyLimitLayer")
            .field("limit", &self.config.limit)
            .field("headers", &self.config.refusals.headers)
            .field("shadow", &self.config.shadow)
            .finish_non_exhaustive()
    }
}
