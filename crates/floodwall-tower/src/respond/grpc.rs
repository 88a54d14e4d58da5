//! gRPC refusals for tonic: `RESOURCE_EXHAUSTED` and `UNAVAILABLE`, trailers-only.

use std::fmt::Write;

use bytes::Bytes;
use http::header::{CONTENT_TYPE, HeaderName, RETRY_AFTER};
use http::{HeaderValue, Response, StatusCode};

use super::{Denial, OnReject, OnStoreFailure};
use crate::extract::KeyError;

/// gRPC's `RESOURCE_EXHAUSTED` (code 8) as a trailers-only response, for tonic services:
/// HTTP 200, `grpc-status: 8`, a `grpc-message`, and the wait as `retry-after` and
/// `grpc-retry-pushback-ms` metadata (gRPC clients never see a 429: an HTTP error status
/// would reach them as `UNAVAILABLE` or `UNKNOWN`).
///
/// A request without a key ([`OnReject::missing_key`]) gets the gRPC code of its status:
/// `UNAUTHENTICATED` for 401, `PERMISSION_DENIED` for 403, `INVALID_ARGUMENT` for any other
/// 4xx, `INTERNAL` for a 5xx.
#[derive(Debug, Clone, Copy, Default)]
pub struct Grpc;

impl OnReject for Grpc {
    fn missing_key(&self, error: &KeyError) -> Response<Bytes> {
        trailers_only(missing_key_code(error.status()), &error.to_string())
    }

    fn respond(&self, denial: &Denial) -> Response<Bytes> {
        let mut message = String::with_capacity(48);
        match (denial.cost_too_high(), denial.retry_after()) {
            (Some((cost, max)), _) => {
                let _ = write!(message, "request cost {cost} exceeds the limit of {max}");
            }
            (None, Some(d)) => {
                let _ = write!(
                    message,
                    "rate limit exceeded, retry after {}s",
                    crate::headers::retry_after_secs(d)
                );
            }
            (None, None) => match denial.too_many_in_flight() {
                Some(full) => {
                    let _ = write!(
                        message,
                        "too many requests in flight: {} of {}",
                        full.in_flight, full.limit
                    );
                }
                None => message.push_str("rate limit exceeded"),
            },
        }
        let mut res = trailers_only(8, &message);
        if let Some(d) = denial.retry_after() {
            push_back(&mut res, d);
        }
        res
    }
}

/// The gRPC code of a missing key refused with this HTTP status.
fn missing_key_code(status: StatusCode) -> u16 {
    match status {
        StatusCode::UNAUTHORIZED => 16, // UNAUTHENTICATED
        StatusCode::FORBIDDEN => 7,     // PERMISSION_DENIED
        s if s.is_client_error() => 3,  // INVALID_ARGUMENT
        _ => 13,                        // INTERNAL
    }
}

/// gRPC's `UNAVAILABLE` (code 14) as a trailers-only response, for a store that cannot
/// decide: the tonic counterpart of [`ServiceUnavailable`](super::ServiceUnavailable),
/// with an open [`Breaker`](floodwall_core::resilience::Breaker)'s next probe as
/// `retry-after` and `grpc-retry-pushback-ms`.
#[derive(Debug, Clone, Copy, Default)]
pub struct GrpcUnavailable;

impl OnStoreFailure for GrpcUnavailable {
    fn respond(&self, error: &floodwall_core::Error) -> Response<Bytes> {
        let mut res = trailers_only(14, "the rate limiter cannot decide right now");
        if let floodwall_core::Error::CircuitOpen { retry_in } = error {
            push_back(&mut res, *retry_in);
        }
        res
    }
}

/// The wait as `retry-after` (seconds) and `grpc-retry-pushback-ms` (at least 1).
fn push_back(res: &mut Response<Bytes>, wait: std::time::Duration) {
    let headers = res.headers_mut();
    headers.insert(RETRY_AFTER, crate::headers::retry_after_value(wait));
    let ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX).max(1);
    headers.insert(
        HeaderName::from_static("grpc-retry-pushback-ms"),
        HeaderValue::from(ms),
    );
}

fn trailers_only(code: u16, message: &str) -> Response<Bytes> {
    let mut res = Response::new(Bytes::new());
    *res.status_mut() = StatusCode::OK;
    let headers = res.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
    headers.insert(
        HeaderName::from_static("grpc-status"),
        HeaderValue::from(code),
    );
    if let Ok(v) = HeaderValue::try_from(percent_encode(message)) {
        headers.insert(HeaderName::from_static("grpc-message"), v);
    }
    res
}

/// `grpc-message` is percent-encoded: printable ASCII but `%` passes, the rest is `%XX`.
fn percent_encode(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    for b in message.bytes() {
        if (0x20..=0x7e).contains(&b) && b != b'%' {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unavailable_pushes_back_until_an_open_breaker_probes() {
        let open = floodwall_core::Error::CircuitOpen {
            retry_in: std::time::Duration::from_millis(2_500),
        };
        let res = GrpcUnavailable.respond(&open);
        let h = res.headers();
        assert_eq!(h["grpc-status"], "14");
        assert_eq!(h["grpc-retry-pushback-ms"], "2500");
        assert_eq!(h[RETRY_AFTER], "3");
        // Any other failure: no wait is known, the client's retry policy decides.
        let res = GrpcUnavailable.respond(&floodwall_core::Error::Timeout);
        assert!(res.headers().get("grpc-retry-pushback-ms").is_none());
        assert!(res.headers().get(RETRY_AFTER).is_none());
    }

    #[test]
    fn a_missing_key_is_the_grpc_code_of_its_status() {
        let code = |status| {
            let error = crate::extract::KeyError::new(status, "the x-api-key header is missing");
            let res = Grpc.missing_key(&error);
            assert_eq!(res.status(), StatusCode::OK);
            assert!(res.headers().get(RETRY_AFTER).is_none());
            let message = "no rate-limit key: the x-api-key header is missing";
            assert_eq!(res.headers()["grpc-message"], message);
            res.headers()["grpc-status"].to_str().unwrap().to_owned()
        };
        assert_eq!(code(StatusCode::BAD_REQUEST), "3");
        assert_eq!(code(StatusCode::NOT_FOUND), "3");
        assert_eq!(code(StatusCode::UNAUTHORIZED), "16");
        assert_eq!(code(StatusCode::FORBIDDEN), "7");
        assert_eq!(code(StatusCode::INTERNAL_SERVER_ERROR), "13");
    }

    #[test]
    fn messages_are_percent_encoded() {
        assert_eq!(percent_encode("50% off\n"), "50%25 off%0A");
        assert_eq!(percent_encode("é"), "%C3%A9");
    }
}
