//! The default store-failure response: 503.

use std::time::Duration;

use bytes::Bytes;
use http::{Response, StatusCode};

use super::{OnStoreFailure, TEXT_PLAIN, response_with as response};

/// `503 Service Unavailable` with `Retry-After` (the default when the store cannot decide):
/// the configured delay, or an open [`Breaker`](floodwall_core::resilience::Breaker)'s next
/// probe if that is later. To fail open instead, see
/// [`RateLimitLayer::fail_mode`](crate::RateLimitLayer::fail_mode).
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
    /// A client retrying before an open breaker's next probe would only be refused again.
    fn respond(&self, error: &floodwall_core::Error) -> Response<Bytes> {
        let retry_after = match error {
            floodwall_core::Error::CircuitOpen { retry_in } => self.retry_after.max(*retry_in),
            _ => self.retry_after,
        };
        let mut res = response(
            StatusCode::SERVICE_UNAVAILABLE,
            TEXT_PLAIN,
            "Service Unavailable: the rate limiter cannot decide right now\n",
        );
        res.headers_mut().insert(
            http::header::RETRY_AFTER,
            crate::headers::retry_after_value(retry_after),
        );
        res
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use floodwall_core::Error;

    fn retry_after(error: &Error) -> String {
        let res = ServiceUnavailable::default().respond(error);
        assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
        res.headers()[http::header::RETRY_AFTER]
            .to_str()
            .unwrap()
            .to_owned()
    }

    #[test]
    fn an_open_breaker_sets_retry_after_to_its_next_probe() {
        let open = |ms| Error::CircuitOpen {
            retry_in: Duration::from_millis(ms),
        };
        assert_eq!(retry_after(&open(2_500)), "3");
        // A probe due now, or sooner than the configured second: the configured second.
        assert_eq!(retry_after(&open(0)), "1");
        assert_eq!(retry_after(&open(400)), "1");
        assert_eq!(retry_after(&Error::Timeout), "1");
    }
}
