//! How each kind packs its answer to one check into one integer, read back.
//!
//! A single check answers with one integer, because a Lua table or a formatted string
//! costs Redis more to turn into a reply than the decision's arithmetic (BENCHMARKS.md §2
//! measures it): the two numbers that determine the decision, packed (GCRA needs one).
//! Each function here works out the rest from the policy's parameters and the cost, with
//! the same arithmetic as the algorithms in `floodwall-core` (`tests/model.rs` compares
//! the two on random histories); [`ScriptKind::spec`](crate::kind::ScriptKind::spec) names
//! each kind's, and `crate::reply` reads the reply it comes in. The sliding log packs its
//! admissions only.

/// A script's answer to one check, as it came: allowed (0/1), remaining, retry µs, reset
/// µs. The store checks it before it becomes a decision.
pub(crate) type ScriptAnswer = [u64; 4];

/// GCRA's (and so the leaky bucket's) answer, `[interval, tolerance]`: `reset_after` (µs),
/// the TAT's lead over now.
pub(crate) fn gcra(
    [interval, tolerance, _]: [u64; 3],
    cost: u64,
    allowed: bool,
    x: u64,
) -> Option<ScriptAnswer> {
    let left = |ttl: u64| (tolerance - ttl.min(tolerance)) / interval.max(1);
    if allowed {
        return Some([1, left(x), 0, x]);
    }
    let retry = x
        .checked_add(cost.checked_mul(interval)?)?
        .checked_sub(tolerance)
        .filter(|&r| r > 0)?;
    Some([0, left(x), retry, x])
}

/// The token bucket's answer, `[capacity, tick, quantum]`: `tokens × tick + (now − tick
/// start)`.
pub(crate) fn token_bucket(
    [capacity, tick, quantum]: [u64; 3],
    cost: u64,
    allowed: bool,
    x: u64,
) -> Option<ScriptAnswer> {
    let (tokens, off) = split(x, tick);
    // When `missing` more tokens will have been added.
    let wait = |missing: u64| match missing {
        0 => Some(0),
        m => m
            .div_ceil(quantum.max(1))
            .checked_mul(tick)?
            .checked_sub(off),
    };
    let reset = wait(capacity.checked_sub(tokens)?)?;
    if allowed {
        return Some([1, tokens, 0, reset]);
    }
    Some([
        0,
        tokens,
        wait(cost.checked_sub(tokens).filter(|&m| m > 0)?)?,
        reset,
    ])
}

/// The fixed window's answer, `[limit, period]`: `used × (period + 1) + µs to the window's
/// end`.
pub(crate) fn fixed_window(
    [limit, period, _]: [u64; 3],
    _cost: u64,
    allowed: bool,
    x: u64,
) -> Option<ScriptAnswer> {
    let (used, until) = split(x, period.checked_add(1)?);
    let remaining = limit.checked_sub(used)?;
    if until == 0 {
        return None;
    }
    if allowed {
        return Some([1, remaining, 0, if used == 0 { 0 } else { until }]);
    }
    Some([0, remaining, until, until])
}

/// The sliding window's answer, `[limit, precision, buckets]`: admissions as
/// [`sliding_log`]'s over the whole period; a refusal packs what remains and which buckets
/// its retry and reset wait for, counted back from the current one: `((remaining × n +
/// newest back) × n + retry's back) × (precision + 1) + µs to the current bucket's end`. A
/// bucket `k` back leaves the window `n − 1 − k` buckets after the current one ends.
pub(crate) fn sliding_window(
    [limit, precision, n]: [u64; 3],
    cost: u64,
    allowed: bool,
    x: u64,
) -> Option<ScriptAnswer> {
    if allowed {
        return sliding_log([limit, precision.checked_mul(n)?, 0], cost, allowed, x);
    }
    let (rest, end) = split(x, precision.checked_add(1)?);
    let (rest, retry_back) = split(rest, n);
    let (remaining, reset_back) = split(rest, n);
    let leaves = |back: u64| end.checked_add(n.checked_sub(back + 1)?.checked_mul(precision)?);
    (end > 0 && remaining <= limit).then_some([
        0,
        remaining,
        leaves(retry_back)?,
        leaves(reset_back)?,
    ])
}

/// The sliding log's answer, `[limit, period]`, admissions only (its refusals are
/// strings): `remaining × (period + 1) + reset_after`.
pub(crate) fn sliding_log(
    [limit, period, _]: [u64; 3],
    _cost: u64,
    allowed: bool,
    x: u64,
) -> Option<ScriptAnswer> {
    let (remaining, reset) = split(x, period.checked_add(1)?);
    (allowed && remaining <= limit).then_some([1, remaining, 0, reset])
}

/// `x` read as `high × base + low` (a `base` of 0 reads as 1), as the scripts pack two
/// numbers into one.
fn split(x: u64, base: u64) -> (u64, u64) {
    let base = base.max(1);
    (x / base, x % base)
}
