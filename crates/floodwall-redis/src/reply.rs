//! Reading a script's answer.
//!
//! A single check answers with one integer, negated (`-1 - x`) when refused, which its
//! kind's unpacking (`crate::unpack`, named by [`Spec::unpack`](crate::kind::Spec::unpack))
//! reads back into a [`ScriptAnswer`]. When the numbers do not pack below 2^53 (a clock
//! behind the state, huge parameters), and for the sliding log's refusals, the answer is
//! one string of four integers. A batch (`crate::coalesce`) answers with a table of such
//! answers, one per check; a penalized script answers a banned key with its ban.

use floodwall_core::Error;
use redis::Value;

use crate::error::UnexpectedReply;
use crate::kind::Layout;
use crate::unpack::ScriptAnswer;

/// A reply that does not read as the script's answer: the server's fault, told with it.
pub(crate) fn unexpected(reply: &Value) -> Error {
    Error::backend(UnexpectedReply(format!("{reply:?}")))
}

/// `{allowed, remaining, retry_after_us, reset_after_us}` of a single check of `cost`
/// under `layout`: its integer answer read by the kind's
/// [`unpack`](crate::kind::Spec::unpack), or the four-integer string any kind may answer.
pub(crate) fn single(layout: Layout, cost: u64, reply: &Value) -> Result<ScriptAnswer, Error> {
    match reply {
        Value::Int(v) => {
            // A refusal is `-1 - x`, which never overflows back.
            let allowed = *v >= 0;
            let x = if allowed { *v } else { -1 - *v }.unsigned_abs();
            (layout.kind.spec().unpack)(layout.args, cost, allowed, x)
                .ok_or_else(|| unexpected(reply))
        }
        Value::BulkString(bytes) => four(bytes).ok_or_else(|| unexpected(reply)),
        _ => Err(unexpected(reply)),
    }
}

/// The remainder (µs) of a ban, when `reply` is a penalized script's answer for a banned
/// key, `'ban <remainder>'` (`lua/penalty.lua`); `None` for any other reply.
pub(crate) fn banned(reply: &Value) -> Option<u64> {
    let Value::BulkString(bytes) = reply else {
        return None;
    };
    let left = std::str::from_utf8(bytes.strip_prefix(b"ban ")?).ok()?;
    left.parse().ok()
}

/// 'allowed remaining retry_after reset_after'.
fn four(bytes: &[u8]) -> Option<ScriptAnswer> {
    let mut out = [0u64; 4];
    let mut fields = bytes.split(|&b| b == b' ');
    for slot in &mut out {
        *slot = std::str::from_utf8(fields.next()?).ok()?.parse().ok()?;
    }
    fields.next().is_none().then_some(out)
}

/// A batch's answers, one per check of `costs` (in the order sent), each read as a single
/// check's; the whole reply is an error when it is not a table of as many answers.
pub(crate) fn batch(
    layout: Layout,
    costs: impl ExactSizeIterator<Item = u64>,
    reply: &Value,
) -> Result<Vec<Result<ScriptAnswer, Error>>, Error> {
    match reply {
        Value::Array(items) if items.len() == costs.len() => Ok(items
            .iter()
            .zip(costs)
            .map(|(item, cost)| single(layout, cost, item))
            .collect()),
        _ => Err(unexpected(reply)),
    }
}

/// One policy's answer in a check of several at once: its quota's, or its ban's remainder
/// (µs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Answer {
    Quota(ScriptAnswer),
    Banned(u64),
}

/// The answers of a check of one key under each of `layouts` at once (`crate::all`), one
/// per policy: read with `cost`, except that in a refusal (a quota's or a ban) a policy
/// that allowed answered as a peek, so it is read with cost 0.
pub(crate) fn all(layouts: &[Layout], cost: u64, reply: &Value) -> Result<Vec<Answer>, Error> {
    let Value::Array(items) = reply else {
        return Err(unexpected(reply));
    };
    if items.len() != layouts.len() {
        return Err(unexpected(reply));
    }
    let read = |item: &Value, layout: Layout, cost: u64| match banned(item) {
        Some(left) => Ok(Answer::Banned(left)),
        None => single(layout, cost, item).map(Answer::Quota),
    };
    let mut answers = items
        .iter()
        .zip(layouts)
        .map(|(item, layout)| read(item, *layout, cost))
        .collect::<Result<Vec<_>, _>>()?;
    let allowed = |a: &Answer| matches!(a, Answer::Quota(q) if q[0] == 1);
    if !answers.iter().all(allowed) {
        for ((answer, item), layout) in answers.iter_mut().zip(items).zip(layouts) {
            if allowed(answer) {
                *answer = read(item, *layout, 0)?;
            }
        }
    }
    Ok(answers)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kind::ScriptKind;

    fn layout(kind: ScriptKind, args: [u64; 3]) -> Layout {
        Layout { kind, args }
    }

    /// A single check's integer answer `v`, read.
    fn int(layout: Layout, cost: u64, v: i64) -> Result<ScriptAnswer, Error> {
        single(layout, cost, &Value::Int(v))
    }

    /// 1 per 100 µs, burst 3.
    const G: Layout = Layout {
        kind: ScriptKind::Gcra,
        args: [100, 300, 0],
    };

    #[test]
    fn gcra_integers_give_what_the_algorithm_gives() {
        // As algorithm/gcra.rs's unit test: 1 per 100 µs, burst 3.
        assert_eq!(int(G, 1, 100).unwrap(), [1, 2, 0, 100]);
        assert_eq!(int(G, 1, 300).unwrap(), [1, 0, 0, 300]);
        assert_eq!(int(G, 0, 0).unwrap(), [1, 3, 0, 0]);
        // Denied with TAT 300 µs ahead: retry after 100, reset after 300.
        assert_eq!(int(G, 1, -301).unwrap(), [0, 0, 100, 300]);
        assert_eq!(int(G, 2, -251).unwrap(), [0, 0, 150, 250]);
    }

    #[test]
    fn packed_pairs_give_what_the_algorithms_give() {
        // Capacity 3, a token per 100 µs.
        let tb = layout(ScriptKind::TokenBucket, [3, 100, 1]);
        // 2 tokens left, 30 µs into the tick: the next token in 70 µs.
        assert_eq!(int(tb, 1, 230).unwrap(), [1, 2, 0, 70]);
        // 1 token, cost 2: one more in 70 µs, full in 170.
        assert_eq!(int(tb, 2, -131).unwrap(), [0, 1, 70, 170]);
        let fw = layout(ScriptKind::FixedWindow, [5, 1000, 0]);
        assert_eq!(int(fw, 1, 3 * 1001 + 400).unwrap(), [1, 2, 0, 400]);
        assert_eq!(int(fw, 0, 400).unwrap(), [1, 5, 0, 0]);
        assert_eq!(int(fw, 1, -1 - (5 * 1001 + 400)).unwrap(), [0, 0, 400, 400]);
        // Numbers no state can have: more tokens than the capacity, a window ending now,
        // a denial the cost would fit, an integer for the sliding algorithms.
        assert!(int(tb, 1, 430).is_err());
        assert!(int(fw, 1, 1001).is_err());
        assert!(int(tb, 1, -131).is_err());
        let sliding = layout(ScriptKind::SlidingLog, [10, 1000, 0]);
        assert_eq!(int(sliding, 1, 7 * 1001 + 250).unwrap(), [1, 7, 0, 250]);
        assert!(int(sliding, 1, 11 * 1001).is_err());
        assert!(int(sliding, 1, -5).is_err());
        // 10 per 4 buckets of 100 µs, 30 µs left in the current bucket; 2 remaining,
        // the newest count 1 bucket back (leaves in 2 more: 230 µs), the retry's 3 back
        // (the oldest: leaves when the current one ends, 30 µs).
        let window = layout(ScriptKind::SlidingWindow, [10, 100, 4]);
        let x = ((2 * 4 + 1) * 4 + 3) * 101 + 30;
        assert_eq!(int(window, 3, -1 - x).unwrap(), [0, 2, 30, 230]);
        // Admissions read as the other sliding algorithm's, over the whole period.
        assert_eq!(int(window, 1, 7 * 401 + 250).unwrap(), [1, 7, 0, 250]);
        // A bucket that has ended, more remaining than the limit.
        assert!(int(window, 1, -1 - (7 * 101)).is_err());
        assert!(int(window, 1, -1 - (11 * 16 * 101 + 5)).is_err());
    }

    #[test]
    fn anything_else_is_an_unexpected_reply_not_a_panic() {
        let text = |s: &str| Value::BulkString(s.as_bytes().to_vec());
        let strings = ["1 2 3", "1 2 3 4 5", "1 2 x 4", "1 -2 3 4"].map(text);
        // A string reads the same under every kind, so `G` serves for all of these.
        for v in [Value::Int(-1), Value::Nil].iter().chain(&strings) {
            assert!(single(G, 1, v).is_err(), "{v:?}");
        }
        assert_eq!(single(G, 1, &text("0 5 10 20")).unwrap(), [0, 5, 10, 20]);
        assert!(batch(G, [1, 1].into_iter(), &Value::Array(vec![Value::Int(1)])).is_err());
        let two = Value::Array(vec![Value::Int(100); 2]);
        assert_eq!(batch(G, [1, 1].into_iter(), &two).unwrap().len(), 2);
        // A ban reads only as a ban.
        assert_eq!(banned(&text("ban 1500")), Some(1500));
        for v in ["ban -1", "ban", "ban 1 2", "0 5 10 20"] {
            assert_eq!(banned(&text(v)), None, "{v:?}");
            if v.starts_with("ban") {
                assert!(single(G, 1, &text(v)).is_err());
            }
        }
        assert_eq!(banned(&Value::Int(5)), None);
        // The extreme is read without overflowing.
        assert!(int(G, 1, i64::MIN).is_ok());
        assert!(int(G, u64::MAX, i64::MIN).is_err());
    }
}
