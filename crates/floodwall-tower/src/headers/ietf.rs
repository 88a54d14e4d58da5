//! The IETF `RateLimit` and `RateLimit-Policy` values: a layer's own policies formatted
//! once and kept, and the per-request figures in structured-field syntax.

use std::collections::HashMap;
use std::fmt::Write;
use std::sync::{LazyLock, Mutex, PoisonError};

use bytes::{Bytes, BytesMut};
use floodwall_core::{Decision, Policy};
use http::HeaderValue;

use super::ceil_secs;
use super::decimal::{MAX_DIGITS, put_decimal};

/// The IETF values that depend on nothing but a layer's own policies, worked out once per
/// layer ([`ietf_consts`]).
pub(crate) struct IetfConsts {
    /// `RateLimit-Policy`, a `'static` value.
    pub(super) policy: HeaderValue,
    /// The values of a single policy; `None` for several.
    pub(super) one: Option<IetfOne>,
}

/// The IETF values that depend on nothing but a layer's own single policy.
pub(crate) struct IetfOne {
    /// `RateLimit-Policy`, a `'static` value (the same as its [`IetfConsts`]').
    pub(super) policy: HeaderValue,
    /// The start of its `RateLimit` value, `"name";r=`; what follows is two numbers,
    /// written with the response.
    pub(super) limit_prefix: Box<[u8]>,
}

/// Every [`IetfConsts`] made so far, by `RateLimit-Policy` value.
pub(super) static INTERNED: LazyLock<Mutex<HashMap<&'static str, &'static IetfConsts>>> =
    LazyLock::new(Default::default);

/// The most distinct lists of policies [`INTERNED`] keeps: what it leaks is bounded.
pub(super) const MAX_INTERNED: usize = 1024;

/// The IETF values of a layer's own policies, kept for the life of the process and shared
/// by layers with the same policies; `None` past [`MAX_INTERNED`] lists (the values are
/// then built per response). `'static` because a reference-counted value costs every
/// response two atomic operations on a cache line all threads share (the
/// `http_instructions` bench).
pub(crate) fn ietf_consts(policies: &[Policy]) -> Option<&'static IetfConsts> {
    let mut interned = INTERNED.lock().unwrap_or_else(PoisonError::into_inner);
    intern(&mut interned, MAX_INTERNED, policies)
}

/// [`ietf_consts`] in `interned`, keeping at most `max` lists.
pub(super) fn intern(
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
pub(super) fn ietf_policy_text<'a>(policies: impl IntoIterator<Item = &'a Policy>) -> String {
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
pub(super) fn ietf_limit<'a, I>(decisions: I) -> Bytes
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
        let (remaining, reset) = ietf_figures(d);
        put_decimal(&mut out, remaining);
        out.extend_from_slice(b";t=");
        put_decimal(&mut out, reset);
    }
    out.freeze()
}

/// A decision's `RateLimit` figures, `r` (what remains) and `t` (seconds until the limit is
/// full again, rounded up), as a structured field may carry them.
pub(super) fn ietf_figures(d: &Decision) -> (u64, u64) {
    (
        sf_integer(d.remaining),
        sf_integer(ceil_secs(d.reset_after)),
    )
}

/// The largest integer a structured field carries (RFC 9651: at most 15 digits).
pub(super) const SF_INTEGER_MAX: u64 = 999_999_999_999_999;

/// `n` as an IETF field may say it: larger counts (up to 2^53) are written as the largest
/// integer a structured field carries, since a strict parser drops a field with a longer
/// one whole. Clients lose nothing they could act on: it is still more than they can use.
pub(super) fn sf_integer(n: u64) -> u64 {
    n.min(SF_INTEGER_MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_policies_are_interned_once() {
        let a = || Policy::gcra("interned-a", "10/s".parse().unwrap()).unwrap();
        let b = || Policy::gcra("interned-b", "5/min".parse().unwrap()).unwrap();
        let ietf_consts = |policies: &[Policy]| ietf_consts(policies).expect("interned");
        let same = |x: &[Policy], y: &[Policy]| std::ptr::eq(ietf_consts(x), ietf_consts(y));
        assert!(same(&[a()], &[a()]));
        assert!(same(&[a(), b()], &[a(), b()]));
        assert!(!same(&[a()], &[b()]));
        assert!(!same(&[a(), b()], &[b(), a()]));
        // Another quota under the same name is another value.
        let a2 = Policy::gcra("interned-a", "11/s".parse().unwrap()).unwrap();
        assert_eq!(ietf_consts(&[a2]).policy, "\"interned-a\";q=11;w=1");
    }

    #[test]
    fn a_quota_over_a_period_of_no_whole_seconds_is_scaled_to_whole_seconds() {
        let text = |quota: &str| {
            let policy = Policy::gcra("p", quota.parse().unwrap()).unwrap();
            ietf_policy_text([&policy])
        };
        // Whole seconds: as written.
        assert_eq!(text("10/s"), "\"p\";q=10;w=1");
        assert_eq!(text("100/min"), "\"p\";q=100;w=60");
        // Under a second: what the rate lets through in one second.
        assert_eq!(text("5/500ms"), "\"p\";q=10;w=1");
        assert_eq!(text("1/300ms"), "\"p\";q=3;w=1");
        // Over a second but not whole seconds: the window rounded up, the count with it.
        assert_eq!(text("3/1500ms"), "\"p\";q=4;w=2");
        assert_eq!(text("10/2500ms"), "\"p\";q=12;w=3");
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
}
