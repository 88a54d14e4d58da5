//! JSON denial bodies: a plain JSON object, or RFC 9457 problem details.

use std::fmt::Write;

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode};

use super::{Denial, OnReject, response_with as response};
use crate::extract::KeyError;

const APPLICATION_JSON: HeaderValue = HeaderValue::from_static("application/json");
const PROBLEM_JSON: HeaderValue = HeaderValue::from_static("application/problem+json");

/// `429` with an `application/json` body:
///
/// ```json
/// {"error":"rate_limited","message":"Too Many Requests","retry_after":3,"violated_policies":["per-ip"]}
/// ```
///
/// `retry_after` is whole seconds, `null` when the request's cost can never pass; a banned
/// key ([`Denial::banned`]) gets `"banned":true` at the end. A request without a key
/// ([`OnReject::missing_key`]) gets that error's status and what was missing:
///
/// ```json
/// {"error":"missing_key","message":"no rate-limit key: the x-api-key header is missing or empty","missing":"x-api-key"}
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct Json;

impl OnReject for Json {
    fn missing_key(&self, error: &KeyError) -> Response<Bytes> {
        let mut body = String::with_capacity(160);
        body.push_str(r#"{"error":"missing_key","message":"#);
        push_string(&mut body, &error.to_string());
        body.push_str(r#","missing":"#);
        push_string(&mut body, error.missing());
        body.push('}');
        response(error.status(), APPLICATION_JSON, body)
    }

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
///
/// A request without a key ([`OnReject::missing_key`]) gets that error's status and an
/// `about:blank` problem titled by it, with what was missing as an extension member:
///
/// ```json
/// {"type":"about:blank","title":"Bad Request","status":400,
///  "detail":"no rate-limit key: the x-api-key header is missing or empty","missing":"x-api-key"}
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct ProblemJson;

impl OnReject for ProblemJson {
    fn missing_key(&self, error: &KeyError) -> Response<Bytes> {
        let status = error.status();
        let mut body = String::with_capacity(192);
        body.push_str(r#"{"type":"about:blank","title":"#);
        push_string(&mut body, status.canonical_reason().unwrap_or("Error"));
        let _ = write!(body, r#","status":{},"detail":"#, status.as_u16());
        push_string(&mut body, &error.to_string());
        body.push_str(r#","missing":"#);
        push_string(&mut body, error.missing());
        body.push('}');
        response(status, PROBLEM_JSON, body)
    }

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

/// `text` as a JSON string: a custom extractor's error may say anything.
fn push_string(body: &mut String, text: &str) {
    body.push('"');
    for c in text.chars() {
        match c {
            '"' => body.push_str("\\\""),
            '\\' => body.push_str("\\\\"),
            c if u32::from(c) < 0x20 => {
                let _ = write!(body, "\\u{:04x}", u32::from(c));
            }
            c => body.push(c),
        }
    }
    body.push('"');
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_escaped_as_json_asks() {
        let mut body = String::new();
        push_string(&mut body, "a \"quoted\" \\ path\n\u{1}é");
        assert_eq!(body, r#""a \"quoted\" \\ path\u000a\u0001é""#);
    }
}
