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

const RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");
const RATELIMIT_POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
const X_RATELIMIT_LIMIT: HeaderName = HeaderName::from_static("x-ratelimit-limit");
const X_RATELIMIT_REMAINING: HeaderName = HeaderName::from_static("x-ratelimit-remaining");
const X_RATELIMIT_RESET: HeaderName = HeaderName::from_static("x-ratelimit-reset");

/// The rate-limit headers of one response, worked out when its request was decided: what
/// an allowed request's future carries to its response, instead of the policies and
/// decisions themselves.
pub(crate) enum Fields {
    /// `RateLimit-Policy`, and `RateLimit` (`None` only if it could not be a header value).
    Ietf {
        policy: HeaderValue,
        limit: Option<HeaderValue>,
    },
    /// The most restrictive decision's figures; `X-RateLimit-Reset` is Unix time, read
    /// when the headers are written.
    GitHub {
        limit: u64,
        remaining: u64,
        reset_after: Duration,
    },
}

impl Fields {
    /// The style's headers for these decisions, if any; `policy_value` is the
    /// `RateLimit-Policy` value when the caller already has it for these policies.
    pub(crate) fn new<'a, I>(
        style: HeaderStyle,
        policy_value: Option<HeaderValue>,
        decisions: I,
    ) -> Option<Self>
    where
        I: Iterator<Item = (&'a Policy, &'a Decision)> + Clone,
    {
        match style {
            HeaderStyle::Ietf => {
                // No decision (every policy found the cost too high): no fields.
                decisions.clone().next()?;
                let policy = policy_value
                    .unwrap_or_else(|| ietf_policy_value(decisions.clone().map(|(p, _)| p)));
                Some(Self::Ietf {
                    policy,
                    limit: ietf_limit_value(decisions),
                })
            }
            HeaderStyle::GitHub => {
                let (_, d) = decisions.min_by_key(|(_, d)| {
                    (d.allowed, d.remaining, std::cmp::Reverse(d.reset_after))
                })?;
                Some(Self::GitHub {
                    limit: d.limit,
                    remaining: d.remaining,
                    reset_after: d.reset_after,
                })
            }
            HeaderStyle::None => None,
        }
    }

    /// Adds the headers to a response's.
    pub(crate) fn write(self, headers: &mut HeaderMap) {
        match self {
            Self::Ietf { policy, limit } => {
                headers.insert(RATELIMIT_POLICY, policy);
                if let Some(limit) = limit {
                    headers.insert(RATELIMIT, limit);
                }
            }
            Self::GitHub {
                limit,
                remaining,
                reset_after,
            } => {
                let now = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .unwrap_or_default();
                let reset = ceil_secs(now.saturating_add(reset_after));
                headers.insert(X_RATELIMIT_LIMIT, HeaderValue::from(limit));
                headers.insert(X_RATELIMIT_REMAINING, HeaderValue::from(remaining));
                headers.insert(X_RATELIMIT_RESET, HeaderValue::from(reset));
            }
        }
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
    let decisions = decisions.iter().map(|(p, d)| (p, d));
    if let Some(fields) = Fields::new(style, policy_value, decisions) {
        fields.write(headers);
    }
}

/// `RateLimit-Policy`: one list member per policy. It depends only on the policies, so the
/// layer works it out once for its own.
pub(crate) fn ietf_policy_value<'a>(policies: impl IntoIterator<Item = &'a Policy>) -> HeaderValue {
    // Names, digits and punctuation only: always a valid header value.
    HeaderValue::try_from(ietf_policy_text(policies))
        .unwrap_or_else(|_| HeaderValue::from_static(""))
}

fn ietf_policy_text<'a>(policies: impl IntoIterator<Item = &'a Policy>) -> String {
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
    value
}

/// `RateLimit`: what remains now and when each policy is full again. This runs for every
/// allowed request, so it is formatted by hand (no `fmt` machinery) on the stack, and the
/// header value's bytes are the only allocation.
fn ietf_limit_value<'a, I>(decisions: I) -> Option<HeaderValue>
where
    I: Iterator<Item = (&'a Policy, &'a Decision)> + Clone,
{
    let mut buf = StackBuf::default();
    if format_limit(&mut buf, decisions.clone()).is_ok() {
        return HeaderValue::from_bytes(buf.as_bytes()).ok();
    }
    // Many policies with long names: the heap, then.
    let mut value = Vec::new();
    format_limit(&mut value, decisions).ok()?;
    HeaderValue::from_bytes(&value).ok()
}

fn format_limit<'a>(
    out: &mut impl Out,
    decisions: impl Iterator<Item = (&'a Policy, &'a Decision)>,
) -> Result<(), Full> {
    for (i, (p, d)) in decisions.enumerate() {
        if i > 0 {
            out.put(b", ")?;
        }
        out.put(b"\"")?;
        out.put(p.name().as_bytes())?;
        out.put(b"\";r=")?;
        out.put_decimal(d.remaining)?;
        out.put(b";t=")?;
        out.put_decimal(ceil_secs(d.reset_after))?;
    }
    Ok(())
}

/// A [`StackBuf`] had no room left.
struct Full;

/// Where a header value is formatted.
trait Out {
    /// Appends `n` bytes, written by `write` into a slice of that length.
    fn put_with(&mut self, n: usize, write: impl FnOnce(&mut [u8])) -> Result<(), Full>;

    fn put(&mut self, bytes: &[u8]) -> Result<(), Full> {
        self.put_with(bytes.len(), |dst| dst.copy_from_slice(bytes))
    }

    /// Appends `n` in decimal, written in place.
    fn put_decimal(&mut self, n: u64) -> Result<(), Full> {
        let digits = n.checked_ilog10().map_or(1, |log| log as usize + 1);
        self.put_with(digits, |dst| {
            let mut n = n;
            for digit in dst.iter_mut().rev() {
                *digit = b'0' + (n % 10) as u8;
                n /= 10;
            }
        })
    }
}

impl Out for Vec<u8> {
    fn put_with(&mut self, n: usize, write: impl FnOnce(&mut [u8])) -> Result<(), Full> {
        let start = self.len();
        self.resize(start + n, 0);
        write(&mut self[start..]);
        Ok(())
    }
}

/// A fixed buffer for one header value: one policy's `RateLimit` always fits.
struct StackBuf {
    bytes: [u8; 128],
    len: usize,
}

impl Default for StackBuf {
    fn default() -> Self {
        Self {
            bytes: [0; 128],
            len: 0,
        }
    }
}

impl StackBuf {
    fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

impl Out for StackBuf {
    #[inline]
    fn put_with(&mut self, n: usize, write: impl FnOnce(&mut [u8])) -> Result<(), Full> {
        let end = self.len + n;
        write(self.bytes.get_mut(self.len..end).ok_or(Full)?);
        self.len = end;
        Ok(())
    }
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

    #[test]
    fn ratelimit_too_long_for_the_stack_is_built_on_the_heap_the_same() {
        let policy = |c: char| {
            let name = format!("{c}-{}", "x".repeat(58));
            Policy::gcra(&name, "10/s".parse().unwrap()).unwrap()
        };
        let ds = [
            (policy('a'), decision(true, 10, 9, 1500)),
            (policy('b'), decision(false, 10, 0, 86_400_000)),
            (
                policy('c'),
                Decision::new(true, 10, u64::MAX, Duration::ZERO, Duration::MAX),
            ),
        ];
        let expected = format!(
            "\"{}\";r=9;t=2, \"{}\";r=0;t=86400, \"{}\";r={};t={}",
            ds[0].0.name(),
            ds[1].0.name(),
            ds[2].0.name(),
            u64::MAX,
            u64::MAX,
        );
        // Else this would not test the fallback.
        let decisions = || ds.iter().map(|(p, d)| (p, d));
        assert!(format_limit(&mut StackBuf::default(), decisions()).is_err());
        assert!(expected.len() > StackBuf::default().bytes.len());

        assert_eq!(ietf_limit_value(decisions()).unwrap(), expected.as_str());
        let mut h = HeaderMap::new();
        write(HeaderStyle::Ietf, None, &ds, &mut h);
        assert_eq!(h["ratelimit"], expected.as_str());
    }

    #[test]
    fn one_policy_always_fits_the_stack_buffer() {
        let name = "n".repeat(Policy::MAX_NAME_LEN);
        let p = Policy::gcra(&name, "10/s".parse().unwrap()).unwrap();
        let d = Decision::new(true, 10, u64::MAX, Duration::ZERO, Duration::MAX);
        let mut buf = StackBuf::default();
        assert!(format_limit(&mut buf, std::iter::once((&p, &d))).is_ok());
        let expected = format!("\"{name}\";r={};t={}", u64::MAX, u64::MAX);
        assert_eq!(buf.as_bytes(), expected.as_bytes());
    }

    #[test]
    fn put_decimal_writes_every_width_up_to_u64_max() {
        let mut ns = vec![0, 1, 11, 101, 1_000_000, u64::MAX - 1, u64::MAX];
        ns.extend((1..20).map(|e| 10_u64.pow(e) - 1));
        ns.extend((1..20).map(|e| 10_u64.pow(e)));
        for n in ns {
            let mut heap = Vec::new();
            assert!(heap.put_decimal(n).is_ok());
            assert_eq!(heap, n.to_string().as_bytes(), "{n}");
            let mut stack = StackBuf::default();
            assert!(stack.put_decimal(n).is_ok());
            assert_eq!(stack.as_bytes(), n.to_string().as_bytes(), "{n}");
        }
        // After what is already there; and nothing at all when it does not fit.
        let mut heap = b"r=".to_vec();
        assert!(heap.put_decimal(u64::MAX).is_ok());
        assert_eq!(heap, b"r=18446744073709551615");
        let mut stack = StackBuf::default();
        assert!(stack.put(&[b'.'; 110]).is_ok());
        assert!(stack.put_decimal(u64::MAX).is_err());
        assert_eq!(stack.as_bytes(), &[b'.'; 110][..]);
    }
}
