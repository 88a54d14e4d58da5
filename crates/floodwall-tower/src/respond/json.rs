//! JSON denial bodies: a plain JSON object, or RFC 9457 problem details.

use std::fmt::Write;

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode};

use super::{Denial, OnReject, response_with as response};

const APPLICATION_JSON: HeaderValue = HeaderValue::from_static("application/json");
const PROBLEM_JSON: HeaderValue = HeaderValue::from_static("application/problem+json");

/// `429` with an `application/json` body:
///
/// ```json
/// {"error":"rate_limited","message":"Too Many Requests","retry_after":3,"violated_policies":["per-ip"]}
/// ```
///
/// `retry_after` is whole seconds (as in `Retry-After`), `null` when the request's cost
/// can never pass. A banned key ([`Denial::banned`]) gets `"banned":true` at the end, with
/// `retry_after` the ban's remainder.
#[derive(Debug, Clone, Copy, Default)]
pub struct Json;

impl OnReject for Json {
    fn respond(&self, denial: &Denial) -> Response<Bytes> {
        let mut body = String::with_capacity(128);
        body.push_str(r#"{"error":"rate_limited","message":"Too Many Requests","retry_after":"#);
        push_retry_after(&mut body, denial);
        body.push_str(r#","violated_policies":"#);
        push_names(&mut body, denial);
        push_banned(&mut body, denial);
        body.push('}');
        response(StatusCode::TOO_MANY_REQUESTS, APPLICATION_JSON, body)
    }
}

/// `429` with an RFC 9457 `application/problem+json` body of the ratelimit-headers draft's
/// `quota-exceeded` problem type, which names the violated policies:
///
/// ```json
/// {"type":"https://iana.org/assignments/http-problem-types#quota-exceeded",
///  "title":"Request cannot be satisfied as assigned quota has been exceeded",
///  "status":429,"violated-policies":["per-ip"],"retry-after":3}
/// ```
///
/// A banned key ([`Denial::banned`]) gets the extension member `"banned":true` at the end.
#[derive(Debug, Clone, Copy, Default)]
pub struct ProblemJson;

impl OnReject for ProblemJson {
    fn respond(&self, denial: &Denial) -> Response<Bytes> {
        let mut body = String::with_capacity(256);
        body.push_str(concat!(
            r#"{"type":"https://iana.org/assignments/http-problem-types#quota-exceeded","#,
            r#""title":"Request cannot be satisfied as assigned quota has been exceeded","#,
            r#""status":429,"violated-policies":"#
        ));
        push_names(&mut body, denial);
        body.push_str(r#","retry-after":"#);
        push_retry_after(&mut body, denial);
        push_banned(&mut body, denial);
        body.push('}');
        response(StatusCode::TOO_MANY_REQUESTS, PROBLEM_JSON, body)
    }
}

fn push_retry_after(body: &mut String, denial: &Denial) {
    match denial.retry_after_secs() {
        Some(secs) => {
            let _ = write!(body, "{secs}");
        }
        None => body.push_str("null"),
    }
}

fn push_banned(body: &mut String, denial: &Denial) {
    if denial.banned() {
        body.push_str(r#","banned":true"#);
    }
}

/// Policy names are `[A-Za-z0-9_.:-]`, so they need no JSON escaping.
fn push_names(body: &mut String, denial: &Denial) {
    body.push('[');
    for (i, name) in denial.violated().enumerate() {
        if i > 0 {
            body.push(',');
        }
        let _ = write!(body, "\"{name}\"");
    }
    body.push(']');
}
