//! Rate-limit response headers: `Retry-After`, the IETF `RateLimit` / `RateLimit-Policy`
//! fields, or GitHub's `X-RateLimit-*`.

use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt::Write;
use std::sync::{LazyLock, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::{Bytes, BytesMut};
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
    /// full again, rounded up. Every integer is capped at 999,999,999,999,999, the most a
    /// structured field may carry (strict parsers drop a field with more digits). This is
    /// the default: it is on the standards track, and names each policy.
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
/// decisions themselves. Kept small (a few words), since every admitted request's future
/// holds one and moves it about.
///
/// The usual cases (one policy of the layer's own; GitHub's figures) carry numbers, and
/// their values are formatted when the headers are written, into this thread's buffer
/// ([`pooled`]). The others are formatted when the request is decided, each into an
/// allocation of its own: the value is held for the whole inner call, and a slice of the
/// shared buffer held that long would keep its whole chunk from being used again.
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
    /// The IETF fields of other policies (a chooser's, or a layer's own past the interning
    /// bound): both values built for this request (boxed: this keeps `Fields` small for
    /// the usual cases above).
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
                    return Some(Self::Ietf1 {
                        one,
                        remaining: sf_integer(first.remaining),
                        reset: sf_integer(ceil_secs(first.reset_after)),
                    });
                }
                Some(Self::Ietf {
                    consts,
                    limit: ietf_limit(decisions),
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

/// The IETF values that depend on nothing but a layer's own policies, worked out once per
/// layer ([`ietf_consts`]).
pub(crate) struct IetfConsts {
    /// `RateLimit-Policy`, a `'static` value.
    policy: HeaderValue,
    /// The values of a single policy; `None` for several.
    one: Option<IetfOne>,
}

/// The IETF values that depend on nothing but a layer's own single policy.
pub(crate) struct IetfOne {
    /// `RateLimit-Policy`, a `'static` value (the same as its [`IetfConsts`]').
    policy: HeaderValue,
    /// The start of its `RateLimit` value, `"name";r=`; what follows is two numbers,
    /// written with the response.
    limit_prefix: Box<[u8]>,
}

/// Every [`IetfConsts`] made so far, by `RateLimit-Policy` value.
static INTERNED: LazyLock<Mutex<HashMap<&'static str, &'static IetfConsts>>> =
    LazyLock::new(Default::default);

/// The most distinct lists of policies [`INTERNED`] keeps: what it leaks is bounded.
const MAX_INTERNED: usize = 1024;

/// The IETF values of a layer's own policies, kept for the life of the process; `None`
/// once [`MAX_INTERNED`] other lists are kept, and the layer builds its values for each
/// response instead (the same bytes).
///
/// Why `'static`: a header value that lives as long as the process is put on a response by
/// copying a pointer, while a value built at run time is reference-counted, and counting
/// it up and down for every response is two atomic operations on one cache line that every
/// thread serving the layer shares. So each distinct list of policies is formatted once and
/// kept (about a hundred bytes), deduplicated by value: layers built again with the same
/// policies (on each configuration reload, in each test) share it. Only a layer's own
/// policies are interned, never the ones a chooser picks per request; but a process can
/// still build layers with ever new policies (a reload per tenant, names or quotas made at
/// run time), so the number kept is bounded.
pub(crate) fn ietf_consts(policies: &[Policy]) -> Option<&'static IetfConsts> {
    let mut interned = INTERNED.lock().unwrap_or_else(PoisonError::into_inner);
    intern(&mut interned, MAX_INTERNED, policies)
}

/// [`ietf_consts`] in `interned`, keeping at most `max` lists.
fn intern(
    interned: &mut HashMap<&'static str, &'static IetfConsts>,
    max: usize,
    policies: &[Policy],
) -> Option<&'static IetfConsts> {
    let text = ietf_policy_text(policies);
    if let Some(consts) = interned.get(text.as_str()) {
        return Some(consts);
    }
    if interned.len() >= max {
        return None;
    }
    let text: &'static str = Box::leak(text.into_boxed_str());
    // Names, digits and punctuation only: always what `from_static` takes (which panics
    // on anything else, so this checks first).
    let visible = |b: u8| b == b'\t' || (32..127).contains(&b);
    let policy = if text.bytes().all(visible) {
        HeaderValue::from_static(text)
    } else {
        HeaderValue::from_static("")
    };
    let one = match policies {
        [one] => Some(IetfOne {
            policy: policy.clone(),
            limit_prefix: format!("\"{}\";r=", one.name()).into_bytes().into(),
        }),
        _ => None,
    };
    let consts: &'static IetfConsts = Box::leak(Box::new(IetfConsts { policy, one }));
    interned.insert(text, consts);
    Some(consts)
}

/// `RateLimit-Policy` for policies that are not a layer's own (chosen per request).
pub(crate) fn ietf_policy_value<'a>(policies: impl IntoIterator<Item = &'a Policy>) -> HeaderValue {
    // Names, digits and punctuation only: always a valid header value.
    HeaderValue::try_from(ietf_policy_text(policies))
        .unwrap_or_else(|_| HeaderValue::from_static(""))
}

/// `RateLimit-Policy`: one list member per policy.
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
        let (q, window) = (sf_integer(q), sf_integer(window));
        let _ = write!(value, "\"{}\";q={q};w={window}", p.name());
        if quota.burst() != quota.count() && p.algorithm().has_burst() {
            let _ = write!(value, ";floodwall-burst={}", sf_integer(quota.burst()));
        }
    }
    value
}

/// `RateLimit`: what remains now and when each policy is full again, one list member per
/// decision. In an allocation of its own, not [`pooled`]: it is formatted when the request
/// is decided and held through the inner call.
fn ietf_limit<'a, I>(decisions: I) -> Bytes
where
    I: Iterator<Item = (&'a Policy, &'a Decision)> + Clone,
{
    let len: usize = decisions
        .clone()
        .map(|(p, _)| p.name().len() + 10 + 2 * MAX_DIGITS)
        .sum();
    let mut out = BytesMut::with_capacity(len);
    for (i, (p, d)) in decisions.enumerate() {
        if i > 0 {
            out.extend_from_slice(b", ");
        }
        out.extend_from_slice(b"\"");
        out.extend_from_slice(p.name().as_bytes());
        out.extend_from_slice(b"\";r=");
        put_decimal(&mut out, sf_integer(d.remaining));
        out.extend_from_slice(b";t=");
        put_decimal(&mut out, sf_integer(ceil_secs(d.reset_after)));
    }
    out.freeze()
}

/// The largest integer a structured field carries (RFC 9651: at most 15 digits).
const SF_INTEGER_MAX: u64 = 999_999_999_999_999;

/// `n` as an IETF field may say it: larger counts (up to 2^53) are written as the largest
/// integer a structured field carries, since a strict parser drops a field with a longer
/// one whole. Clients lose nothing they could act on: it is still more than they can use.
fn sf_integer(n: u64) -> u64 {
    n.min(SF_INTEGER_MAX)
}

/// A number as a header value.
fn decimal_value(n: u64) -> HeaderValue {
    HeaderValue::from_maybe_shared(pooled(MAX_DIGITS, |out| put_decimal(out, n)))
        .unwrap_or_else(|_| HeaderValue::from(n))
}

thread_local! {
    /// Where this thread writes the header values it formats per response. Each value is
    /// a slice of a shared buffer, so formatting one allocates nothing: a buffer of its own
    /// would cost an allocation, and later its freeing, on every response. The buffer is
    /// reused from the start once every value cut from it has been dropped (responses are
    /// sent and dropped quickly), and replaced by a new one when some are still held.
    static VALUES: RefCell<BytesMut> = RefCell::new(BytesMut::new());
}

/// What [`VALUES`] allocates at a time: room for a hundred-odd values.
const VALUES_CHUNK: usize = 4096;

/// The most digits a `u64` has.
const MAX_DIGITS: usize = 20;

/// The bytes `write` appends (about `max` of them at most), for a header value written
/// onto a response at once: cut from this thread's [`VALUES`]. (A value held longer would
/// keep the chunk it was cut from alive: it gets an allocation of its own.)
fn pooled(max: usize, write: impl Fn(&mut BytesMut)) -> Bytes {
    let cut = VALUES.try_with(|values| {
        let mut values = values.borrow_mut();
        if values.capacity() < max {
            values.reserve(VALUES_CHUNK.max(max));
        }
        write(&mut values);
        values.split().freeze()
    });
    cut.unwrap_or_else(|_| {
        // The thread is exiting and its buffer is gone: a buffer of the value's own.
        let mut own = BytesMut::with_capacity(max);
        write(&mut own);
        own.freeze()
    })
}

/// Two decimal digits for each number below 100: `00`, `01`, ..., `99`.
const DIGIT_PAIRS: [u8; 200] = {
    let mut pairs = [0; 200];
    let mut i = 0;
    while i < 100 {
        pairs[2 * i] = b'0' + (i / 10) as u8;
        pairs[2 * i + 1] = b'0' + (i % 10) as u8;
        i += 1;
    }
    pairs
};

/// Appends `n` in decimal.
fn put_decimal(out: &mut BytesMut, n: u64) {
    let mut buf = [0u8; MAX_DIGITS];
    let at = decimal_before(&mut buf, MAX_DIGITS, n);
    out.extend_from_slice(&buf[at..]);
}

/// Writes `n` in decimal so that it ends where `buf[end..]` starts (at least
/// [`MAX_DIGITS`] bytes must be free before `end`); returns where it starts. Header values
/// are formatted for every admitted request, so this does without `fmt`, two digits per
/// division.
#[inline]
fn decimal_before(buf: &mut [u8], end: usize, n: u64) -> usize {
    let mut at = end;
    let mut n = n;
    while n >= 100 {
        let pair = (n % 100) as usize * 2;
        n /= 100;
        at -= 2;
        buf[at..at + 2].copy_from_slice(&DIGIT_PAIRS[pair..pair + 2]);
    }
    if n >= 10 {
        let pair = n as usize * 2;
        at -= 2;
        buf[at..at + 2].copy_from_slice(&DIGIT_PAIRS[pair..pair + 2]);
    } else {
        at -= 1;
        buf[at] = b'0' + n as u8;
    }
    at
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
            assert_eq!(
                own["ratelimit-policy"],
                format!("\"{name}\";q=10;w=1;floodwall-burst=12").as_str()
            );
        }
    }

    #[test]
    fn the_same_policies_are_interned_once() {
        let a = || Policy::gcra("interned-a", "10/s".parse().unwrap()).unwrap();
        let b = || Policy::gcra("interned-b", "5/min".parse().unwrap()).unwrap();
        let ietf_consts = |policies: &[Policy]| ietf_consts(policies).expect("interned");
        assert!(std::ptr::eq(ietf_consts(&[a()]), ietf_consts(&[a()])));
        assert!(std::ptr::eq(
            ietf_consts(&[a(), b()]),
            ietf_consts(&[a(), b()])
        ));
        assert!(!std::ptr::eq(ietf_consts(&[a()]), ietf_consts(&[b()])));
        assert!(!std::ptr::eq(
            ietf_consts(&[a(), b()]),
            ietf_consts(&[b(), a()])
        ));
        // Another quota under the same name is another value.
        let a2 = Policy::gcra("interned-a", "11/s".parse().unwrap()).unwrap();
        assert_eq!(ietf_consts(&[a2]).policy, "\"interned-a\";q=11;w=1");
    }

    #[test]
    fn values_cut_from_the_buffer_stay_intact_while_held() {
        // Far more than one buffer's worth, all held at once, then some dropped and more
        // cut: every value keeps its own bytes.
        let mut held: Vec<(u64, HeaderValue)> =
            (0..2_000).map(|n| (n, decimal_value(n * 7_919))).collect();
        held.retain(|(n, _)| n % 3 == 0);
        held.extend((2_000..3_000).map(|n| (n, decimal_value(n * 7_919))));
        for (n, value) in &held {
            assert_eq!(value, (n * 7_919).to_string().as_str());
        }
        drop(held);
        // And once all are dropped, the buffer is used again from its start.
        assert_eq!(decimal_value(42), "42");
        // Where a chunk starts: the first value not cut right after the one before.
        let at = |v: &HeaderValue| v.as_bytes().as_ptr();
        let mut held = vec![decimal_value(1_000_000)];
        let start = loop {
            let value = decimal_value(1_000_000);
            let contiguous = at(&value) == at(&held[held.len() - 1]).wrapping_add(7);
            held.push(value);
            if !contiguous {
                break at(&held[held.len() - 1]);
            }
        };
        drop(held);
        // Values dropped as soon as cut come back round to that start.
        let reused = (0..2 * VALUES_CHUNK).any(|_| at(&decimal_value(1_000_000)) == start);
        assert!(reused, "the buffer was not used again from its start");
    }

    #[test]
    fn interning_stops_at_its_bound() {
        let policy = |name: &str| Policy::gcra(name, "10/s".parse().unwrap()).unwrap();
        let mut interned = HashMap::new();
        let a = intern(&mut interned, 2, &[policy("bound-a")]).unwrap();
        let b = intern(&mut interned, 2, &[policy("bound-a"), policy("bound-b")]).unwrap();
        // Past the bound: nothing new, but what is kept is still found.
        assert!(intern(&mut interned, 2, &[policy("bound-c")]).is_none());
        assert_eq!(interned.len(), 2);
        let again = intern(&mut interned, 2, &[policy("bound-a")]).unwrap();
        assert!(std::ptr::eq(a, again));
        let again = intern(&mut interned, 2, &[policy("bound-a"), policy("bound-b")]).unwrap();
        assert!(std::ptr::eq(b, again));
    }

    #[test]
    fn put_decimal_writes_every_width_up_to_u64_max() {
        let mut ns = vec![0, 1, 11, 101, 1_000_000, u64::MAX - 1, u64::MAX];
        ns.extend((1..20).map(|e| 10_u64.pow(e) - 1));
        ns.extend((1..20).map(|e| 10_u64.pow(e)));
        for n in ns {
            let mut out = BytesMut::new();
            put_decimal(&mut out, n);
            assert_eq!(&out[..], n.to_string().as_bytes(), "{n}");
            assert_eq!(decimal_value(n), n.to_string().as_str());
        }
        // After what is already there.
        let mut out = BytesMut::from(&b"r="[..]);
        put_decimal(&mut out, u64::MAX);
        assert_eq!(&out[..], b"r=18446744073709551615");
    }
}
