//! Responders: the response a refused request gets.
//!
//! A denial (the quota is spent) goes to an [`OnReject`] responder; a store that could not
//! decide (Redis down, a timeout) goes to a separate [`OnStoreFailure`] responder, so
//! clients and dashboards can tell "slow down" (429) from "we are broken" (503).
//!
//! A request refused because its key is missing is the client's error, not a rate limit:
//! it goes to the responder's [`OnReject::missing_key`] (by default the [`KeyError`]'s
//! status, plain text; this crate's responders answer in their own format).
//!
//! | responder | for | answers |
//! |---|---|---|
//! | [`TooManyRequests`] (default) | HTTP | 429, plain text; a missing key: its status (400), plain text |
//! | [`Json`] | JSON APIs | 429, `application/json`; a missing key: its status, `{"error":"missing_key",..}` |
//! | [`ProblemJson`] | JSON APIs | 429, `application/problem+json` (RFC 9457, the draft's `quota-exceeded` type); a missing key: its status, an `about:blank` problem |
//! | [`Grpc`] | tonic | 200 trailers-only, `grpc-status: 8` (`RESOURCE_EXHAUSTED`); a missing key: the gRPC code of its status (see [`Grpc`]) |
//! | any `Fn(&Denial) -> Response<T>` | anything else | what it returns; a missing key: its status, plain text |
#![cfg_attr(
    feature = "axum",
    doc = "| [`Axum`] around any `Fn(&Denial) -> impl IntoResponse` | axum (feature `axum`) | what it returns |"
)]
//! | [`ServiceUnavailable`] (default) | store failures | 503, `Retry-After` |
//! | [`GrpcUnavailable`] | store failures, tonic | 200 trailers-only, `grpc-status: 14` (`UNAVAILABLE`); an open breaker's next probe as `retry-after` and `grpc-retry-pushback-ms` |
//! | any `Fn(&floodwall_core::Error) -> Response<T>` | store failures | what it returns |
#![cfg_attr(
    feature = "axum",
    doc = "| [`Axum`] around any `Fn(&floodwall_core::Error) -> impl IntoResponse` | store failures, axum (feature `axum`) | what it returns |"
)]
//!
//! The layer then adds `Retry-After` to a denial unless the responder set it, and the
//! rate-limit headers of the chosen [`HeaderStyle`](crate::HeaderStyle).
//!
//! ```
//! use bytes::Bytes;
//! use floodwall_tower::respond::Denial;
//! use http::{Response, StatusCode};
//!
//! let teapot = |denial: &Denial| {
//!     let mut res = Response::new(format!("slow down for {:?}\n", denial.retry_after()));
//!     *res.status_mut() = StatusCode::IM_A_TEAPOT;
//!     res
//! };
//! # fn is_responder(_: impl floodwall_tower::respond::OnReject) {}
//! # is_responder(teapot);
//! ```

use std::time::Duration;

use bytes::Bytes;
use floodwall_core::concurrency::{ConcurrencyLimit, Full};
use floodwall_core::{Decision, Policy};
use http::{HeaderValue, Response};
use smallvec::SmallVec;

use crate::extract::KeyError;

#[cfg(feature = "axum")]
mod axum;
mod failure;
mod grpc;
mod json;
mod plain;

#[cfg(feature = "axum")]
pub use self::axum::Axum;
pub use failure::ServiceUnavailable;
pub use grpc::{Grpc, GrpcUnavailable};
pub use json::{Json, ProblemJson};
pub use plain::TooManyRequests;

/// Every policy checked for one request, with its decision, in order.
pub(crate) type Decisions = SmallVec<[(Policy, Decision); 2]>;

/// Why a request was refused: which policies denied it and when it may retry, or which
/// in-flight limit was full ([`too_many_in_flight`](Self::too_many_in_flight)). A request
/// without a key is no denial: it goes to [`OnReject::missing_key`].
#[derive(Debug, Clone)]
pub struct Denial {
    decisions: Decisions,
    too_costly: Option<(Policy, u64, u64)>,
    /// A [`ConcurrencyLimitLayer`](crate::ConcurrencyLimitLayer)'s refusal.
    in_flight: Option<(ConcurrencyLimit, Full)>,
}

impl Denial {
    pub(crate) fn new(decisions: Decisions, too_costly: Option<(Policy, u64, u64)>) -> Self {
        Self {
            decisions,
            too_costly,
            in_flight: None,
        }
    }

    /// A refusal of an in-flight limit: no policy, no retry time.
    pub(crate) fn in_flight(limit: ConcurrencyLimit, full: Full) -> Self {
        Self {
            decisions: Decisions::new(),
            too_costly: None,
            in_flight: Some((limit, full)),
        }
    }

    /// When an in-flight limit refused the request: how many of its key's requests were
    /// in flight, and the limit ([`retry_after`](Self::retry_after) is then `None`).
    pub fn too_many_in_flight(&self) -> Option<Full> {
        self.in_flight.as_ref().map(|(_, full)| *full)
    }

    /// How long until the same request would pass every policy that denied it; `None` when
    /// it never can (too costly) or no one can tell (an in-flight limit is full).
    pub fn retry_after(&self) -> Option<Duration> {
        if self.too_costly.is_some() {
            return None;
        }
        self.decisions
            .iter()
            .filter_map(|(_, d)| d.retry_after)
            .max()
    }

    /// [`retry_after`](Self::retry_after) in `Retry-After`'s whole seconds, never 0.
    pub fn retry_after_secs(&self) -> Option<u64> {
        self.retry_after().map(crate::headers::retry_after_secs)
    }

    /// Every policy checked, with its decision (the denying ones have `allowed == false`).
    pub fn decisions(&self) -> &[(Policy, Decision)] {
        &self.decisions
    }

    /// The names of the policies (or the in-flight limit) that refused the request.
    pub fn violated(&self) -> impl Iterator<Item = &str> {
        self.decisions
            .iter()
            .filter(|(_, d)| !d.is_allowed())
            .map(|(p, _)| p.name())
            .chain(self.too_costly.iter().map(|(p, _, _)| p.name()))
            .chain(self.in_flight.iter().map(|(l, _)| l.name()))
    }

    /// Whether a policy refused because the key is banned
    /// ([`Penalty`](floodwall_core::Penalty)); the retry is then the ban's remainder.
    pub fn banned(&self) -> bool {
        self.decisions.iter().any(|(_, d)| d.is_banned())
    }

    /// When the request's cost can never pass: `(cost, the policy's limit)`.
    pub fn cost_too_high(&self) -> Option<(u64, u64)> {
        self.too_costly.as_ref().map(|(_, cost, max)| (*cost, *max))
    }
}

/// Builds the response to a denied request, and to one whose key is missing.
///
/// Implemented for every `Fn(&Denial) -> Response<T>` with `T: Into<Bytes>`; such a closure
/// answers denials, and a missing key gets the provided [`missing_key`](Self::missing_key).
#[cfg_attr(
    feature = "axum",
    doc = "A closure returning axum's `impl IntoResponse` goes in [`Axum`]."
)]
pub trait OnReject: Send + Sync + 'static {
    /// The response for this denial.
    fn respond(&self, denial: &Denial) -> Response<Bytes>;

    /// The response to a request refused because its key is missing, with
    /// [`KeyError::status`]. By default that status with the error's text as plain text
    /// (no `Retry-After`: a client's error, not a rate limit).
    fn missing_key(&self, error: &KeyError) -> Response<Bytes> {
        response_with(error.status(), TEXT_PLAIN, format!("{error}\n"))
    }
}

impl<F, T> OnReject for F
where
    F: Fn(&Denial) -> Response<T> + Send + Sync + 'static,
    T: Into<Bytes>,
{
    fn respond(&self, denial: &Denial) -> Response<Bytes> {
        self(denial).map(Into::into)
    }
}

/// Builds the response when the store could not decide (unreachable, timed out, failed).
///
/// Implemented for every `Fn(&floodwall_core::Error) -> Response<T>` with `T: Into<Bytes>`.
/// Do not send the error's text to clients: it may name internal hosts.
#[cfg_attr(
    feature = "axum",
    doc = "A closure returning axum's `impl IntoResponse` goes in [`Axum`]."
)]
pub trait OnStoreFailure: Send + Sync + 'static {
    /// The response for this failure.
    fn respond(&self, error: &floodwall_core::Error) -> Response<Bytes>;
}

impl<F, T> OnStoreFailure for F
where
    F: Fn(&floodwall_core::Error) -> Response<T> + Send + Sync + 'static,
    T: Into<Bytes>,
{
    fn respond(&self, error: &floodwall_core::Error) -> Response<Bytes> {
        self(error).map(Into::into)
    }
}

/// `Content-Type` of the plain-text refusals.
pub(crate) const TEXT_PLAIN: HeaderValue = HeaderValue::from_static("text/plain; charset=utf-8");

/// A response with a status, a content type (a constant: `from_static` on a parameter
/// would check its bytes on every refusal) and a body.
pub(crate) fn response_with(
    status: http::StatusCode,
    content_type: HeaderValue,
    body: impl Into<Bytes>,
) -> Response<Bytes> {
    let mut res = Response::new(body.into());
    *res.status_mut() = status;
    res.headers_mut()
        .insert(http::header::CONTENT_TYPE, content_type);
    res
}
