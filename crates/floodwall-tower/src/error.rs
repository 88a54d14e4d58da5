//! The error of [`RejectWithError`](crate::RejectWithError) mode.

use std::fmt;
use std::time::Duration;

/// A request refused by the rate limiter, as an error rather than a response.
///
/// Only [`RateLimitLayer::reject_with_error`](crate::RateLimitLayer::reject_with_error)
/// produces it, for services that turn errors into responses further out (axum's
/// `HandleErrorLayer`, a tower `MapErr`). The service's error is then a boxed error; find
/// this one with `err.is::<RateLimited>()` or `err.downcast_ref::<RateLimited>()`.
///
/// Store failures in that mode surface as the store's own [`floodwall_core::Error`], and
/// requests without a key as [`KeyError`](crate::extract::KeyError), so each can be told
/// apart.
#[derive(Debug, Clone)]
pub struct RateLimited {
    retry_after: Option<Duration>,
}

impl RateLimited {
    pub(crate) fn new(retry_after: Option<Duration>) -> Self {
        Self { retry_after }
    }

    /// How long until the same request would pass; `None` when it never can (its cost
    /// exceeds a policy's limit).
    pub fn retry_after(&self) -> Option<Duration> {
        self.retry_after
    }
}

impl fmt::Display for RateLimited {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.retry_after {
            Some(d) => write!(
                f,
                "rate limit exceeded; retry after {}s",
                crate::headers::retry_after_secs(d)
            ),
            None => f.write_str("rate limit exceeded; the request's cost can never pass"),
        }
    }
}

impl std::error::Error for RateLimited {}
