//! The default store-failure response: 503.

use std::time::Duration;

use bytes::Bytes;
use http::{Response, StatusCode};

use super::{OnStoreFailure, response_with as response};

/// `503 Service Unavailable` with `Retry-After` (the default when the store cannot decide).
///
/// This fails closed: while the store is down, requests are refused rather than let
/// through unlimited. To fail open instead, use
/// [`RateLimitLayer::fail_open`](crate::RateLimitLayer::fail_open).
#[derive(Debug, Clone, Copy)]
pub struct ServiceUnavailable {
    retry_after: Duration,
}

impl ServiceUnavailable {
    /// Suggests clients retry after `retry_after` (rounded up to whole seconds, at least 1).
    pub fn new(retry_after: Duration) -> Self {
        Self { retry_after }
    }
}

impl Default for ServiceUnavailable {
    /// Retry after one second.
    fn default() -> Self {
        Self::new(Duration::from_secs(1))
    }
}

impl OnStoreFailure for ServiceUnavailable {
    fn respond(&self, _error: &floodwall_core::Error) -> Response<Bytes> {
        let mut res = response(
            StatusCode::SERVICE_UNAVAILABLE,
            "text/plain; charset=utf-8",
            "Service Unavailable: the rate limiter cannot decide right now\n",
        );
        res.headers_mut().insert(
            http::header::RETRY_AFTER,
            crate::headers::retry_after_value(self.retry_after),
        );
        res
    }
}
