//! The rate-limit headers of an in-flight limit: the IETF fields with the
//! `concurrent-requests` quota unit, or GitHub's without a reset.

use bytes::Bytes;
use floodwall_core::ConcurrencyLimit;
use http::{HeaderMap, HeaderValue};

use super::decimal::{MAX_DIGITS, pooled, put_decimal};
use super::ietf::sf_integer;
use super::{
    HeaderStyle, RATELIMIT, RATELIMIT_POLICY, X_RATELIMIT_LIMIT, X_RATELIMIT_REMAINING,
    decimal_value,
};

/// What an in-flight limit's responses carry, worked out once per layer; only the number
/// of slots left changes per response.
///
/// ```text
/// RateLimit-Policy: "uploads";q=4;qu="concurrent-requests"
/// RateLimit: "uploads";r=3
/// ```
///
/// No `w` (a count in flight has no window) and no `t` (when a slot comes free depends on
/// the requests running, which no one knows); GitHub's style has no `X-RateLimit-Reset`
/// for the same reason.
pub(crate) struct InFlightHeaders {
    style: HeaderStyle,
    limit: u64,
    /// `RateLimit-Policy`.
    policy: HeaderValue,
    /// The start of `RateLimit`, `"name";r=`.
    prefix: Bytes,
}

impl InFlightHeaders {
    pub(crate) fn new(style: HeaderStyle, limit: &ConcurrencyLimit) -> Self {
        let text = format!(
            "\"{}\";q={};qu=\"concurrent-requests\"",
            limit.name(),
            sf_integer(limit.max())
        );
        Self {
            style,
            limit: limit.max(),
            // Names and digits only: always a valid value.
            policy: HeaderValue::try_from(text).unwrap_or_else(|_| HeaderValue::from_static("")),
            prefix: Bytes::from(format!("\"{}\";r=", limit.name())),
        }
    }

    /// Adds the style's headers, with `remaining` slots left on the key.
    pub(crate) fn write(&self, remaining: u64, headers: &mut HeaderMap) {
        match self.style {
            HeaderStyle::Ietf => {
                headers.insert(RATELIMIT_POLICY, self.policy.clone());
                let prefix = &self.prefix;
                let value = pooled(prefix.len() + MAX_DIGITS, |out| {
                    out.extend_from_slice(prefix);
                    put_decimal(out, sf_integer(remaining));
                });
                if let Ok(value) = HeaderValue::from_maybe_shared(value) {
                    headers.insert(RATELIMIT, value);
                }
            }
            HeaderStyle::GitHub => {
                headers.insert(X_RATELIMIT_LIMIT, decimal_value(self.limit));
                headers.insert(X_RATELIMIT_REMAINING, decimal_value(remaining));
            }
            HeaderStyle::None => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_style_writes_its_fields_and_none_says_when() {
        let limit = ConcurrencyLimit::new("uploads", 4).unwrap();
        let mut h = HeaderMap::new();
        InFlightHeaders::new(HeaderStyle::Ietf, &limit).write(3, &mut h);
        let policy = "\"uploads\";q=4;qu=\"concurrent-requests\"";
        assert_eq!(h["ratelimit-policy"], policy);
        assert_eq!(h["ratelimit"], "\"uploads\";r=3");
        assert_eq!(h.len(), 2);
        let mut g = HeaderMap::new();
        InFlightHeaders::new(HeaderStyle::GitHub, &limit).write(0, &mut g);
        assert_eq!(g["x-ratelimit-limit"], "4");
        assert_eq!(g["x-ratelimit-remaining"], "0");
        assert!(g.get("x-ratelimit-reset").is_none());
        let mut none = HeaderMap::new();
        InFlightHeaders::new(HeaderStyle::None, &limit).write(1, &mut none);
        assert!(none.is_empty());
    }
}
