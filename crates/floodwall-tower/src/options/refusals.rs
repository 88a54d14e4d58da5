//! What a refused request gets: the responders, the headers, and what a missing key means.
//! One value, taken by both layers (`RateLimitLayer::refusals`,
//! `ConcurrencyLimitLayer::refusals`).

use std::fmt;
use std::sync::Arc;

use crate::extract::OnMissingKey;
use crate::headers::HeaderStyle;
use crate::respond::{OnReject, OnStoreFailure, ServiceUnavailable, TooManyRequests};

/// How a layer answers what it refuses, and which headers it sends: taken by
/// [`RateLimitLayer::refusals`](crate::RateLimitLayer::refusals) and
/// [`ConcurrencyLimitLayer::refusals`](crate::ConcurrencyLimitLayer::refusals).
///
/// | what | default | change with |
/// |---|---|---|
/// | a denial | 429 + `Retry-After` ([`TooManyRequests`]) | [`respond`](Self::respond) |
/// | a store failure (fail closed) | 503 + `Retry-After` ([`ServiceUnavailable`]) | [`store_failure`](Self::store_failure) |
/// | no key | refused with the extractor's status (400 for a missing header), answered by the responder's [`OnReject::missing_key`] | [`missing_key`](Self::missing_key) |
/// | headers | IETF `RateLimit` / `RateLimit-Policy` | [`headers`](Self::headers) |
///
/// Whether a store failure is refused at all is the layer's
/// [`fail_mode`](crate::RateLimitLayer::fail_mode).
///
/// ```
/// use floodwall_core::{MemoryStore, Policy};
/// use floodwall_tower::extract::OnMissingKey;
/// use floodwall_tower::respond::Json;
/// use floodwall_tower::{HeaderStyle, RateLimitLayer, Refusals};
///
/// let layer = RateLimitLayer::new(MemoryStore::new(), Policy::gcra("per-ip", "10/s".parse()?)?)
///     .refusals(Refusals::new().respond(Json).headers(HeaderStyle::Ietf).missing_key(OnMissingKey::Skip));
/// # let _ = layer;
/// # Ok::<(), floodwall_core::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct Refusals {
    pub(crate) on_reject: Arc<dyn OnReject>,
    pub(crate) on_failure: Arc<dyn OnStoreFailure>,
    pub(crate) on_missing: OnMissingKey,
    pub(crate) headers: HeaderStyle,
}

impl Refusals {
    /// The defaults: 429 for a denial, 503 for a store failure, a missing key refused with
    /// its extractor's status, IETF headers.
    pub fn new() -> Self {
        Self {
            on_reject: Arc::new(TooManyRequests),
            on_failure: Arc::new(ServiceUnavailable::default()),
            on_missing: OnMissingKey::Reject,
            headers: HeaderStyle::Ietf,
        }
    }

    /// Builds denials with this responder (see [`respond`](crate::respond)); a request
    /// without a key is answered by its [`OnReject::missing_key`], never by its 429.
    pub fn respond(mut self, responder: impl OnReject) -> Self {
        self.on_reject = Arc::new(responder);
        self
    }

    /// Builds store-failure responses with this responder (see [`respond`](crate::respond)).
    pub fn store_failure(mut self, responder: impl OnStoreFailure) -> Self {
        self.on_failure = Arc::new(responder);
        self
    }

    /// What to do when the key extractor finds no key: see [`OnMissingKey`].
    pub fn missing_key(mut self, on_missing: OnMissingKey) -> Self {
        self.on_missing = on_missing;
        self
    }

    /// Which rate-limit headers to send, on refusals and admitted responses alike: see
    /// [`HeaderStyle`] (GitHub's style has no reset on an in-flight limit).
    pub fn headers(mut self, style: HeaderStyle) -> Self {
        self.headers = style;
        self
    }
}

impl Default for Refusals {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for Refusals {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Refusals")
            .field("missing_key", &self.on_missing)
            .field("headers", &self.headers)
            .finish_non_exhaustive()
    }
}
