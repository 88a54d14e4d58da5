//! Rate-limit response headers: `Retry-After`, the IETF `RateLimit` / `RateLimit-Policy`
//! fields, or GitHub's `X-RateLimit-*`.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use floodwall_core::{Decision, Policy};
use http::header::{HeaderName, RETRY_AFTER};
use http::{HeaderMap, HeaderValue};

mod decimal;
mod ietf;
mod in_flight;

use decimal::{MAX_DIGITS, decimal_before, decimal_value, pooled};
pub(crate) use ietf::{IetfConsts, IetfOne, ietf_consts};
use ietf::{ietf_figures, ietf_limit, ietf_policy_value};
pub(crate) use in_flight::InFlightHeaders;

/// Which rate-limit headers go on responses (allowed and refused alike); `Retry-After` is
/// sent on every refusal whatever the style.
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
    /// scaled to one second); a burst other than the count is `floodwall-burst`. `r` is
    /// what remains and `t` the seconds until the limit is full again, rounded up. Integers
    /// are capped at 15 digits, the most a structured field may carry. The default.
    #[default]
    Ietf,
    /// GitHub's `X-RateLimit-Limit`, `-Remaining` and `-Reset` (Unix seconds) of the most
    /// restrictive policy: the one that refused, else the one with least remaining.
    GitHub,
    /// No rate-limit headers (still `Retry-After` on refusals).
    None,
}

/// Seconds to wait as `Retry-After` says them: whole seconds, rounded up, never 0.
pub fn retry_after_secs(d: Duration) -> u64 {
    ceil_secs(d).max(1)
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

/// The rate-limit headers of one response, worked out when its request was decided and
/// kept small, since every admitted request's future holds one. The usual cases carry
/// numbers, formatted into this thread's buffer ([`pooled`]) when the headers are written;
/// the others are formatted at once into an allocation of their own (a slice of the shared
/// buffer held through the inner call would keep its chunk from reuse).
pub(crate) enum Fields {
    /// The IETF fields of a layer's own single policy: `RateLimit` is its interned prefix
    /// and these two figures.
    Ietf1 {
        one: &'static IetfOne,
        remaining: u64,
        reset: u64,
    },
    /// The IETF fields of a layer's own policies: `RateLimit` formatted.
    Ietf {
        consts: &'static IetfConsts,
        limit: Bytes,
    },
    /// The IETF fields of other policies (a chooser's, or past the interning bound): both
    /// values built for this request, boxed.
    IetfBuilt(Box<(HeaderValue, Option<HeaderValue>)>),
    /// The most restrictive decision's figures; `X-RateLimit-Reset` is Unix time, read
    /// when the headers are written.
    GitHub {
        limit: u64,
        remaining: u64,
        reset_after: Duration,
    },
}

impl Fields {
    /// The style's headers for these decisions, if any; `consts` are the IETF values of
    /// these policies when they are a layer's own.
    pub(crate) fn new<'a, I>(
        style: HeaderStyle,
        consts: Option<&'static IetfConsts>,
        decisions: I,
    ) -> Option<Self>
    where
        I: Iterator<Item = (&'a Policy, &'a Decision)> + Clone,
    {
        match style {
            HeaderStyle::Ietf => {
                let mut rest = decisions.clone();
                // No decision (every policy found the cost too high): no fields.
                let (_, first) = rest.next()?;
                let Some(consts) = consts else {
                    let policy = ietf_policy_value(decisions.clone().map(|(p, _)| p));
                    let limit = HeaderValue::from_maybe_shared(ietf_limit(decisions)).ok();
                    return Some(Self::IetfBuilt(Box::new((policy, limit))));
                };
                if let (Some(one), None) = (&consts.one, rest.next()) {
                    let (remaining, reset) = ietf_figures(first);
                    return Some(Self::Ietf1 {
                        one,
                        remaining,
                        reset,
                    });
                }
                Some(Self::Ietf {
                    consts,
                    limit: ietf_limit(decisions),
                })
            }
            HeaderStyle::GitHub => {
                let (_, d) = decisions.min_by_key(|(_, d)| {
                    (
                        d.is_allowed(),
                        d.remaining,
                        std::cmp::Reverse(d.reset_after),
                    )
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
            Self::Ietf1 {
                one,
                remaining,
                reset,
            } => {
                headers.insert(RATELIMIT_POLICY, one.policy.clone());
                let prefix = &*one.limit_prefix;
                // The figures are written backwards into one buffer, then appended at once.
                let mut figures = [0u8; 2 * MAX_DIGITS + 3];
                let mut at = decimal_before(&mut figures, 2 * MAX_DIGITS + 3, reset);
                at -= 3;
                figures[at..at + 3].copy_from_slice(b";t=");
                at = decimal_before(&mut figures, at, remaining);
                let limit = pooled(prefix.len() + figures.len(), |out| {
                    out.extend_from_slice(prefix);
                    out.extend_from_slice(&figures[at..]);
                });
                if let Ok(limit) = HeaderValue::from_maybe_shared(limit) {
                    headers.insert(RATELIMIT, limit);
                }
            }
            Self::Ietf { consts, limit } => {
                headers.insert(RATELIMIT_POLICY, consts.policy.clone());
                if let Ok(limit) = HeaderValue::from_maybe_shared(limit) {
                    headers.insert(RATELIMIT, limit);
                }
            }
            Self::IetfBuilt(values) => {
                let (policy, limit) = *values;
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
                headers.insert(X_RATELIMIT_LIMIT, decimal_value(limit));
                headers.insert(X_RATELIMIT_REMAINING, decimal_value(remaining));
                headers.insert(X_RATELIMIT_RESET, decimal_value(reset));
            }
        }
    }
}

/// Writes the style's headers for these decisions; `consts` are the IETF values of these
/// policies when they are a layer's own.
pub(crate) fn write(
    style: HeaderStyle,
    consts: Option<&'static IetfConsts>,
    decisions: &[(Policy, Decision)],
    headers: &mut HeaderMap,
) {
    let decisions = decisions.iter().map(|(p, d)| (p, d));
    if let Some(fields) = Fields::new(style, consts, decisions) {
        fields.write(headers);
    }
}

#[cfg(test)]
mod tests {
    use super::ietf::{SF_INTEGER_MAX, sf_integer};
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
        let policy =
            "\"per-ip\";q=10;w=1;floodwall-burst=20, \"daily\";q=1000;w=86400, \"fast\";q=50;w=1";
        assert_eq!(h["ratelimit-policy"], policy);
        let limit = "\"per-ip\";r=19;t=1, \"daily\";r=0;t=86400, \"fast\";r=5;t=0";
        assert_eq!(h["ratelimit"], limit);
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
        let soon = (before..=before + 2).contains(&reset);
        assert!(soon, "{reset} vs {before}");
        let mut none = HeaderMap::new();
        write(HeaderStyle::None, None, &ds, &mut none);
        assert!(none.is_empty());
    }

    #[test]
    fn long_ratelimit_values_are_written_whole_up_to_15_digits() {
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
            SF_INTEGER_MAX,
            SF_INTEGER_MAX,
        );
        let mut h = HeaderMap::new();
        write(HeaderStyle::Ietf, None, &ds, &mut h);
        assert_eq!(h["ratelimit"], expected.as_str());

        // The same from the layer's own (interned) policies.
        let policies: Vec<Policy> = ds.iter().map(|(p, _)| p.clone()).collect();
        let mut own = HeaderMap::new();
        write(
            HeaderStyle::Ietf,
            Some(ietf_consts(&policies).expect("interned")),
            &ds,
            &mut own,
        );
        assert_eq!(own, h);
    }

    #[test]
    fn one_policy_of_its_own_is_written_as_any_other() {
        let name = "n".repeat(Policy::MAX_NAME_LEN);
        let p = Policy::gcra(&name, "10/s burst 12".parse().unwrap()).unwrap();
        let consts = ietf_consts(std::slice::from_ref(&p)).expect("interned");
        for (remaining, reset) in [
            (0, Duration::ZERO),
            (7, Duration::from_millis(1)),
            (u64::MAX, Duration::MAX),
        ] {
            let ds = [(
                p.clone(),
                Decision::new(true, 12, remaining, Duration::ZERO, reset),
            )];
            let mut own = HeaderMap::new();
            write(HeaderStyle::Ietf, Some(consts), &ds, &mut own);
            let mut built = HeaderMap::new();
            write(HeaderStyle::Ietf, None, &ds, &mut built);
            assert_eq!(own, built);
            let (r, t) = (sf_integer(remaining), sf_integer(ceil_secs(reset)));
            let expected = format!("\"{name}\";r={r};t={t}");
            assert_eq!(own["ratelimit"], expected.as_str());
            let policy = format!("\"{name}\";q=10;w=1;floodwall-burst=12");
            assert_eq!(own["ratelimit-policy"], policy.as_str());
        }
    }
}
