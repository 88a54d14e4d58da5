//! The default denial response: 429 in plain text.

use std::fmt::Write;

use bytes::Bytes;
use http::{Response, StatusCode};

use super::{Denial, OnReject, TEXT_PLAIN, response_with as response};

/// `429 Too Many Requests` with a one-line plain-text body and `Retry-After` (the default).
/// A request whose cost can never pass gets no `Retry-After` and a body that says so.
#[derive(Debug, Clone, Copy, Default)]
pub struct TooManyRequests;

impl OnReject for TooManyRequests {
    fn respond(&self, denial: &Denial) -> Response<Bytes> {
        let mut body = String::with_capacity(64);
        match (denial.cost_too_high(), denial.retry_after_secs()) {
            (Some((cost, max)), _) => {
                let _ = writeln!(
                    body,
                    "Too Many Requests: this request costs {cost}, more than the limit of {max}"
                );
            }
            (None, Some(secs)) => {
                let _ = writeln!(body, "Too Many Requests: retry after {secs}s");
            }
            (None, None) => match denial.too_many_in_flight() {
                Some(full) => {
                    let _ = writeln!(
                        body,
                        "Too Many Requests: {} in flight, the limit is {}",
                        full.in_flight, full.limit
                    );
                }
                None => body.push_str("Too Many Requests\n"),
            },
        }
        response(StatusCode::TOO_MANY_REQUESTS, TEXT_PLAIN, body)
    }
}
