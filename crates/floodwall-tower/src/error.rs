//! The error of [`RejectWithError`](crate::RejectWithError) mode.

use std::fmt;
use std::time::Duration;

use floodwall_core::Full;

use crate::respond::Denial;

/// A request refused by the rate limiter, as an error rather than a response: what
/// [`RateLimitLayer::reject_with_error`](crate::RateLimitLayer::reject_with_error) yields,
/// boxed (find it with `err.is::<RateLimited>()`). Store failures are the store's own
/// [`floodwall_core::Error`], requests without a key a [`KeyError`](crate::extract::KeyError).
#[derive(Debug, Clone)]
pub struct RateLimited {
    retry_after: Option<Duration>,
    in_flight: Option<Full>,
}

impl RateLimited {
    pub(crate) fn new(denial: &Denial) -> Self {
        Self {
            retry_after: denial.retry_after(),
            in_flight: denial.too_many_in_flight(),
        }
    }

    /// How long until the same request would pass; `None` when it never can (its cost
    /// exceeds a policy's limit) or no one can tell (an in-flight limit is full).
    pub fn retry_after(&self) -> Option<Duration> {
        self.retry_after
    }

    /// When an in-flight limit refused the request: how many were in flight, and the
    /// limit (see [`Denial::too_many_in_flight`]).
    pub fn too_many_in_flight(&self) -> Option<Full> {
        self.in_flight
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
            None => match self.in_flight {
                Some(full) => write!(
                    f,
                    "too many requests in flight: {} of {}",
                    full.in_flight, full.limit
                ),
                None => f.write_str("rate limit exceeded; the request's cost can never pass"),
            },
        }
    }
}

impl std::error::Error for RateLimited {}
