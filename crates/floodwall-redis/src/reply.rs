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
            let (allowed, x) = match u64::try_from(*v) {
                Ok(x) => (true, x),
                Err(_) => (
                    false,
                    u64::try_from(-(v + 1)).map_err(|_| unexpected(reply))?,
                ),
            };
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
    std::str::from_utf8(bytes.strip_prefix(b"ban ")?)
        .ok()?
        .parse()
        .ok()
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

    /// 1 per 100 µs, burst 3.
    const G: Layout = Layout {
        kind: ScriptKind::Gcra,
        args: [100, 300, 0],
    };

    #[test]
    fn gcra_integers_give_what_the_algorithm_gives() {
        // As algorithm/gcra.rs's unit test: 1 per 100 µs, burst 3.
        assert_eq!(single(G, 1, &Value::Int(100)).unwrap(), [1, 2, 0, 100]);
        assert_eq!(single(G, 1, &Value::Int(300)).unwrap(), [1, 0, 0, 300]);
        assert_eq!(single(G, 0, &Value::Int(0)).unwrap(), [1, 3, 0, 0]);
        // Denied with TAT 300 µs ahead: retry after 100, reset after 300.
        assert_eq!(single(G, 1, &Value::Int(-301)).unwrap(), [0, 0, 100, 300]);
        assert_eq!(single(G, 2, &Value::Int(-251)).unwrap(), [0, 0, 150, 250]);
    }

    #[test]
    fn packed_pairs_give_what_the_algorithms_give() {
        // Capacity 3, a token per 100 µs.
        let tb = layout(ScriptKind::TokenBucket, [3, 100, 1]);
        // 2 tokens left, 30 µs into the tick: the next token in 70 µs.
        assert_eq!(single(tb, 1, &Value::Int(230)).unwrap(), [1, 2, 0, 70]);
        // 1 token, cost 2: one more in 70 µs, full in 170.
        assert_eq!(single(tb, 2, &Value::Int(-131)).unwrap(), [0, 1, 70, 170]);
        let fw = layout(ScriptKind::FixedWindow, [5, 1000, 0]);
        assert_eq!(
            single(fw, 1, &Value::Int(3 * 1001 + 400)).unwrap(),
            [1, 2, 0, 400]
        );
        assert_eq!(single(fw, 0, &Value::Int(400)).unwrap(), [1, 5, 0, 0]);
        assert_eq!(
            single(fw, 1, &Value::Int(-1 - (5 * 1001 + 400))).unwrap(),
            [0, 0, 400, 400]
        );
        // Numbers no state can have: more tokens than the capacity, a window ending now,
        // a denial the cost would fit, an integer for the sliding algorithms.
        assert!(single(tb, 1, &Value::Int(430)).is_err());
        assert!(single(fw, 1, &Value::Int(1001)).is_err());
        assert!(single(tb, 1, &Value::Int(-131)).is_err());
        let sliding = layout(ScriptKind::SlidingLog, [10, 1000, 0]);
        assert_eq!(
            single(sliding, 1, &Value::Int(7 * 1001 + 250)).unwrap(),
            [1, 7, 0, 250]
        );
        assert!(single(sliding, 1, &Value::Int(11 * 1001)).is_err());
        assert!(single(sliding, 1, &Value::Int(-5)).is_err());
        // 10 per 4 buckets of 100 µs, 30 µs left in the current bucket; 2 remaining,
        // the newest count 1 bucket back (leaves in 2 more: 230 µs), the retry's 3 back
        // (the oldest: leaves when the current one ends, 30 µs).
        let window = layout(ScriptKind::SlidingWindow, [10, 100, 4]);
        let x = ((2 * 4 + 1) * 4 + 3) * 101 + 30;
        assert_eq!(
            single(window, 3, &Value::Int(-1 - x)).unwrap(),
            [0, 2, 30, 230]
        );
        // Admissions read as the other sliding algorithm's, over the whole period.
        assert_eq!(
            single(window, 1, &Value::Int(7 * 401 + 250)).unwrap(),
            [1, 7, 0, 250]
        );
        // A bucket that has ended, more remaining than the limit.
        assert!(single(window, 1, &Value::Int(-1 - (7 * 101))).is_err());
        assert!(single(window, 1, &Value::Int(-1 - (11 * 16 * 101 + 5))).is_err());
    }

    #[test]
    fn anything_else_is_an_unexpected_reply_not_a_panic() {
        let bad = [
            Value::Int(-1),
            Value::Nil,
            Value::BulkString(b"1 2 3".to_vec()),
            Value::BulkString(b"1 2 3 4 5".to_vec()),
            Value::BulkString(b"1 2 x 4".to_vec()),
            Value::BulkString(b"1 -2 3 4".to_vec()),
        ];
        // A string reads the same under every kind, so `G` serves for all of these.
        for v in &bad {
            assert!(single(G, 1, v).is_err(), "{v:?}");
        }
        assert_eq!(
            single(G, 1, &Value::BulkString(b"0 5 10 20".to_vec())).unwrap(),
            [0, 5, 10, 20]
        );
        assert!(batch(G, [1, 1].into_iter(), &Value::Array(vec![Value::Int(1)])).is_err());
        let answers = batch(
            G,
            [1, 1].into_iter(),
            &Value::Array(vec![Value::Int(100); 2]),
        );
        assert_eq!(answers.unwrap().len(), 2);
        // A ban reads only as a ban.
        assert_eq!(banned(&Value::BulkString(b"ban 1500".to_vec())), Some(1500));
        for v in [&b"ban -1"[..], b"ban", b"ban 1 2", b"0 5 10 20"] {
            assert_eq!(banned(&Value::BulkString(v.to_vec())), None, "{v:?}");
            if v.starts_with(b"ban") {
                assert!(single(G, 1, &Value::BulkString(v.to_vec())).is_err());
            }
        }
        assert_eq!(banned(&Value::Int(5)), None);
        // The extreme is read without overflowing.
        assert!(single(G, 1, &Value::Int(i64::MIN)).is_ok());
        assert!(single(G, u64::MAX, &Value::Int(i64::MIN)).is_err());
    }
}
