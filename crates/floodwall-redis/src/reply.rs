//! Reading a script's answer.
//!
//! A Lua table costs Redis about a third of an empty script call to turn into a reply,
//! more than the arithmetic of a decision (`BENCHMARKS.md`, section 1), so a single check
//! answers with a scalar: GCRA with one integer from which the rest follows, the other
//! algorithms with one string of four integers. Batches (`crate::coalesce`) answer with a
//! table of four integers per check: one table for many decisions.

use floodwall_core::Error;
use redis::Value;

use crate::coalesce::Raw;
use crate::error::UnexpectedReply;

/// The shape of a single check's answer, which depends on the algorithm.
#[derive(Debug, Clone, Copy)]
pub(crate) enum ReplyKind {
    /// One integer: `reset_after` (µs) when allowed, `-1 - reset_after` when not. The
    /// policy's emission interval and tolerance give the rest (as in `algorithm/gcra.rs`).
    Gcra { interval: u64, tolerance: u64 },
    /// 'allowed remaining retry_after reset_after', as one string.
    Four,
}

fn unexpected(reply: &Value) -> Error {
    Error::backend(UnexpectedReply(format!("{reply:?}")))
}

/// `{allowed, remaining, retry_after_us, reset_after_us}` of a single check of `cost`.
pub(crate) fn single(kind: ReplyKind, cost: u64, reply: &Value) -> Result<Raw, Error> {
    match (kind, reply) {
        (
            ReplyKind::Gcra {
                interval,
                tolerance,
            },
            Value::Int(v),
        ) if interval > 0 => {
            let left = |ttl: u64| (tolerance - ttl.min(tolerance)) / interval;
            if let Ok(ahead) = u64::try_from(*v) {
                return Ok([1, left(ahead), 0, ahead]);
            }
            let ttl = u64::try_from(-(v + 1)).map_err(|_| unexpected(reply))?;
            let retry = ttl
                .checked_add(cost.saturating_mul(interval))
                .and_then(|ahead| ahead.checked_sub(tolerance))
                .filter(|&retry| retry > 0)
                .ok_or_else(|| unexpected(reply))?;
            Ok([0, left(ttl), retry, ttl])
        }
        (ReplyKind::Four, Value::BulkString(bytes)) => {
            let mut out = [0u64; 4];
            let mut fields = bytes.split(|&b| b == b' ');
            for slot in &mut out {
                *slot = fields
                    .next()
                    .and_then(|f| std::str::from_utf8(f).ok())
                    .and_then(|f| f.parse().ok())
                    .ok_or_else(|| unexpected(reply))?;
            }
            if fields.next().is_some() {
                return Err(unexpected(reply));
            }
            Ok(out)
        }
        _ => Err(unexpected(reply)),
    }
}

/// `n` checks' answers from a batch's table.
pub(crate) fn batch(reply: &Value, n: usize) -> Result<Vec<Raw>, Error> {
    let Value::Array(items) = reply else {
        return Err(unexpected(reply));
    };
    if items.len() != 4 * n {
        return Err(unexpected(reply));
    }
    let ints = items
        .iter()
        .map(|item| match item {
            Value::Int(i) => u64::try_from(*i).map_err(|_| unexpected(reply)),
            _ => Err(unexpected(reply)),
        })
        .collect::<Result<Vec<u64>, Error>>()?;
    Ok(ints
        .chunks_exact(4)
        .map(|c| [c[0], c[1], c[2], c[3]])
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    const G: ReplyKind = ReplyKind::Gcra {
        interval: 100,
        tolerance: 300,
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
    fn anything_else_is_an_unexpected_reply_not_a_panic() {
        let bad = [
            Value::Int(-1),
            Value::Nil,
            Value::BulkString(b"1 2 3".to_vec()),
            Value::BulkString(b"1 2 3 4 5".to_vec()),
            Value::BulkString(b"1 2 x 4".to_vec()),
            Value::BulkString(b"1 -2 3 4".to_vec()),
        ];
        for v in &bad {
            let kind = if matches!(v, Value::Int(_)) {
                G
            } else {
                ReplyKind::Four
            };
            assert!(single(kind, 1, v).is_err(), "{v:?}");
        }
        assert_eq!(
            single(
                ReplyKind::Four,
                1,
                &Value::BulkString(b"0 5 10 20".to_vec())
            )
            .unwrap(),
            [0, 5, 10, 20]
        );
        assert!(batch(&Value::Array(vec![Value::Int(1)]), 1).is_err());
        // The extreme is read without overflowing.
        assert!(single(G, 1, &Value::Int(i64::MIN)).is_ok());
        assert!(single(G, u64::MAX, &Value::Int(i64::MIN)).is_err());
    }
}
