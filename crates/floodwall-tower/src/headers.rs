//! Rate-limit response headers: `Retry-After`, the IETF `RateLimit` / `RateLimit-Policy`
//! fields, or GitHub's `X-RateLimit-*`.

use std::fmt::Write;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use floodwall_core::{Decision, Policy};
use http::header::{HeaderName, RETRY_AFTER};
use http::{HeaderMap, HeaderValue};

/// Which rate-limit headers go on responses (allowed and refused alike).
///
/// `Retry-After` is sent on every refusal whatever the style.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum HeaderStyle {
    /// The IETF httpapi fields of
    /// [draft-ietf-httpapi-ratelimit-headers-11](https://datatracker.ietf.org/doc/draft-ietf-httpapi-ratelimit-headers/11/)
    /// (May 2026), in structured-field syntax, one list member per policy checked:
    ///
    /// ```text
    /// RateLimit-Policy: "per-ip";q=10;w=1;floodwall-burst=20
    /// RateLimit: "per-ip";r=19;t=1
    /// ```
    ///
    /// `q` is the quota's count and `w` its period in whole seconds (a sub-second period is
    /// scaled to one second); a burst other than the count is the vendor parameter
    /// `floodwall-burst`. `r` is what remains now and `t` the seconds until the limit is
    /// full again, rounded up. This is the default: it is on the standards track, and
    /// names each policy.
    #[default]
    Ietf,
    /// GitHub's `X-RateLimit-Limit`, `X-RateLimit-Remaining` and `X-RateLimit-Reset` (Unix
    /// time in seconds when the limit is full again), for the most restrictive policy
    /// checked: the one that refused, else the one with least remaining.
    GitHub,
    /// No rate-limit headers (still `Retry-After` on refusals).
    None,
}

/// Seconds to wait as `Retry-After` says them: whole seconds, rounded up, never 0.
pub fn retry_after_secs(d: Duration) -> u64 {
    d.as_secs()
        .saturating_add(u64::from(d.subsec_nanos() > 0))
        .max(1)
}

fn ceil_secs(d: Duration) -> u64 {
    d.as_secs().saturating_add(u64::from(d.subsec_nanos() > 0))
}

pub(crate) fn retry_after_value(d: Duration) -> HeaderValue {
    HeaderValue::from(retry_after_secs(d))
}

/// Sets `Retry-After` unless the responder already did.
pub(crate) fn ensure_retry_after(headers: &mut HeaderMap, retry_after: Option<Duration>) {
    if let Some(d) = retry_after {
        headers
            .entry(RETRY_AFTER)
            .or_insert_with(|| retry_after_value(d));
    }
}

/// Writes the style's headers for these decisions; `policy_value` is the
/// `RateLimit-Policy` value when the caller already has it for these policies.
pub(crate) fn write(
    style: HeaderStyle,
    policy_value: Option<HeaderValue>,
    decisions: &[(Policy, Decision)],
    headers: &mut HeaderMap,
) {
    if decisions.is_empty() {
        return;
    }
    match style {
        HeaderStyle::Ietf => {
            let policy_value =
                policy_value.unwrap_or_else(|| ietf_policy_value(decisions.iter().map(|(p, _)| p)));
            headers.insert(HeaderName::from_static("ratelimit-policy"), policy_value);
            if let Some(value) = ietf_limit_value(decisions) {
                headers.insert(HeaderName::from_static("ratelimit"), value);
            }
        }
        HeaderStyle::GitHub => write_github(decisions, headers),
        HeaderStyle::None => {}
    }
}

/// `RateLimit-Policy`: one list member per policy. It depends only on the policies, so the
/// layer works it out once for its own.
pub(crate) fn ietf_policy_value<'a>(policies: impl IntoIterator<Item = &'a Policy>) -> HeaderValue {
    let mut value = String::with_capacity(48);
    for (i, p) in policies.into_iter().enumerate() {
        if i > 0 {
            value.push_str(", ");
        }
        let quota = p.quota();
        let period_us = quota.period_micros().max(1);
        // `w` is whole seconds and never 0: scale a sub-second quota up to one second.
        let window = ceil_secs(quota.period()).max(1);
        let q = if period_us % 1_000_000 == 0 {
            quota.count()
        } else {
            let scaled =
                u128::from(quota.count()) * u128::from(window) * 1_000_000 / u128::from(period_us);
            u64::try_from(scaled).unwrap_or(u64::MAX)
        };
        // Policy names are [A-Za-z0-9_.:-]: valid inside an sf-string as they are.
        let _ = write!(value, "\"{}\";q={q};w={window}", p.name());
        if quota.burst() != quota.count() && p.algorithm().has_burst() {
            let _ = write!(value, ";floodwall-burst={}", quota.burst());
        }
    }
    // Names, digits and punctuation only: always a valid header value.
    HeaderValue::try_from(value).unwrap_or_else(|_| HeaderValue::from_static(""))
}

/// `RateLimit`: what remains now and when each policy is full again. Formatted on the
/// stack, so the header value is the only allocation.
fn ietf_limit_value(decisions: &[(Policy, Decision)]) -> Option<HeaderValue> {
    let mut buf = StackBuf::default();
    if format_limit(&mut buf, decisions).is_ok() {
        return HeaderValue::from_bytes(buf.as_bytes()).ok();
    }
    // Many policies with long names: the heap, then.
    let mut value = String::new();
    format_limit(&mut value, decisions).ok()?;
    HeaderValue::try_from(value).ok()
}

fn format_limit(out: &mut impl Write, decisions: &[(Policy, Decision)]) -> std::fmt::Result {
    for (i, (p, d)) in decisions.iter().enumerate() {
        if i > 0 {
            out.write_str(", ")?;
        }
        let reset = ceil_secs(d.reset_after);
        write!(out, "\"{}\";r={};t={reset}", p.name(), d.remaining)?;
    }
    Ok(())
}

/// A fixed buffer for one header value.
struct StackBuf {
    bytes: [u8; 192],
    len: usize,
}

impl Default for StackBuf {
    fn default() -> Self {
        Self {
            bytes: [0; 192],
            len: 0,
        }
    }
}

impl StackBuf {
    fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

impl Write for StackBuf {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let end = self.len + s.len();
        if end > self.bytes.len() {
            return Err(std::fmt::Error);
        }
        self.bytes[self.len..end].copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

fn write_github(decisions: &[(Policy, Decision)], headers: &mut HeaderMap) {
    let Some((_, d)) = decisions
        .iter()
        .min_by_key(|(_, d)| (d.allowed, d.remaining, std::cmp::Reverse(d.reset_after)))
    else {
        return;
    };
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let reset = ceil_secs(now.saturating_add(d.reset_after));
    headers.insert(
        HeaderName::from_static("x-ratelimit-limit"),
        HeaderValue::from(d.limit),
    );
    headers.insert(
        HeaderName::from_static("x-ratelimit-remaining"),
        HeaderValue::from(d.remaining),
    );
    headers.insert(
        HeaderName::from_static("x-ratelimit-reset"),
        HeaderValue::from(reset),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use floodwall_core::Algorithm;

    fn decision(allowed: bool, limit: u64, remaining: u64, reset_ms: u64) -> Decision {
        Decision::new(
            allowed,
            limit,
            remaining,
            Duration::from_millis(300),
            Duration::from_millis(reset_ms),
        )
    }

    #[test]
    fn retry_after_rounds_up_and_is_never_zero() {
        assert_eq!(retry_after_secs(Duration::ZERO), 1);
        assert_eq!(retry_after_secs(Duration::from_micros(1)), 1);
        assert_eq!(retry_after_secs(Duration::from_secs(2)), 2);
        assert_eq!(retry_after_secs(Duration::from_millis(2001)), 3);
        assert_eq!(retry_after_secs(Duration::MAX), u64::MAX);
    }

    #[test]
    fn ietf_fields_list_every_policy() {
        let a = Policy::gcra("per-ip", "10/s burst 20".parse().unwrap()).unwrap();
        let b = Policy::new("daily", Algorithm::FixedWindow, "1000/day".parse().unwrap()).unwrap();
        let c = Policy::gcra("fast", "5/100ms".parse().unwrap()).unwrap();
        let mut h = HeaderMap::new();
        let ds = [
            (a, decision(true, 20, 19, 100)),
            (b, decision(false, 1000, 0, 86_400_000)),
            (c, decision(true, 5, 5, 0)),
        ];
        write(HeaderStyle::Ietf, None, &ds, &mut h);
        assert_eq!(
            h["ratelimit-policy"],
            "\"per-ip\";q=10;w=1;floodwall-burst=20, \"daily\";q=1000;w=86400, \"fast\";q=50;w=1"
        );
        assert_eq!(
            h["ratelimit"],
            "\"per-ip\";r=19;t=1, \"daily\";r=0;t=86400, \"fast\";r=5;t=0"
        );
    }

    #[test]
    fn github_reports_the_most_restrictive() {
        let a = Policy::gcra("a", "10/s".parse().unwrap()).unwrap();
        let b = Policy::gcra("b", "100/s".parse().unwrap()).unwrap();
        let mut h = HeaderMap::new();
        let ds = [
            (a, decision(true, 10, 3, 700)),
            (b, decision(false, 100, 50, 400)),
        ];
        let before = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs();
        write(HeaderStyle::GitHub, None, &ds, &mut h);
        assert_eq!(h["x-ratelimit-limit"], "100");
        assert_eq!(h["x-ratelimit-remaining"], "50");
        let reset: u64 = h["x-ratelimit-reset"].to_str().unwrap().parse().unwrap();
        assert!(
            reset >= before && reset <= before + 2,
            "{reset} vs {before}"
        );
        let mut none = HeaderMap::new();
        write(HeaderStyle::None, None, &ds, &mut none);
        assert!(none.is_empty());
    }
}
