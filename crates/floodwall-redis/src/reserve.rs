//! Reservations in Redis: booking the next slot of a request, and giving it back, each in
//! one script on the key.
//!
//! The booking script is `lua/reserve.lua` with the algorithm's sections pasted in
//! (`crate::script`), so a booking and the checks of a key stay one algorithm; it reads its
//! parameters from `ARGV` and is never coalesced. Cancelling gives the slot back only while
//! the key still holds what the booking stored (see [`Cancelled`]).

use std::sync::LazyLock;
use std::time::Duration;

use floodwall_core::{Cancelled, Error, Reservable, Reservation, Ticket};
use redis::{Script, Value};

use crate::kind::{Layout, ScriptKind};
use crate::op::Op;
use crate::reply;
use crate::store::{RedisStore, decision};

/// The booking scripts, by [`ScriptKind`]; `None` for a kind that cannot book.
static RESERVE: LazyLock<[Option<Script>; ScriptKind::ALL.len()]> = LazyLock::new(|| {
    ScriptKind::ALL.map(|kind| crate::script::reserve(kind, false).map(|t| Script::new(&t)))
});

/// The booking scripts of policies with a penalty: a banned key books nothing.
static RESERVE_PENALIZED: LazyLock<[Option<Script>; ScriptKind::ALL.len()]> = LazyLock::new(|| {
    ScriptKind::ALL.map(|kind| crate::script::reserve(kind, true).map(|t| Script::new(&t)))
});

static CANCEL_GCRA: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("lua/cancel_gcra.lua")));

static CANCEL_TOKEN_BUCKET: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("lua/cancel_token_bucket.lua")));

impl RedisStore {
    /// One booking, one script call, at `now` (µs; `None` reads the server's clock).
    pub(crate) async fn book(
        &self,
        key: &[u8],
        policy: &Reservable,
        cost: u64,
        max_wait: Duration,
        now: Option<u64>,
    ) -> Result<Reservation, Error> {
        let p = policy.policy();
        p.check_cost(cost)?;
        const UNSUPPORTED: Error = Error::Unsupported {
            what: "booking a slot under this algorithm",
        };
        let layout = Layout::of(p.parameters()).ok_or(UNSUPPORTED)?;
        let scripts = match p.penalty() {
            Some(_) => &RESERVE_PENALIZED,
            None => &RESERVE,
        };
        let script = scripts[layout.kind as usize].as_ref().ok_or(UNSUPPORTED)?;
        let max_wait = max_wait.min(Reservable::MAX_WAIT).as_micros() as u64;
        let mut inv = script.prepare_invoke();
        inv.key(self.redis_key(key, p));
        if p.penalty().is_some() {
            let [ban, _, _] = crate::key::penalty_keys(self.prefix(), p.name(), key);
            inv.key(ban);
        }
        inv.arg(cost);
        layout.push_args(&mut inv, now);
        inv.arg(max_wait);
        self.inner.counters.single();
        let reply: Value = self.bounded(Op::Script(&inv)).await?;
        if let Some(left) = reply::banned(&reply) {
            let banned = floodwall_core::store::ban_decision(p, left);
            return Ok(Reservation::refused(banned));
        }
        let bad = || reply::unexpected(&reply);
        let Value::Array(items) = &reply else {
            return Err(bad());
        };
        let int = |i: usize| match items.get(i) {
            Some(Value::Int(v)) => u64::try_from(*v).ok(),
            _ => None,
        };
        let (Some(allowed), Some(remaining), Some(retry), Some(reset), Some(wait)) =
            (int(0), int(1), int(2), int(3), int(4))
        else {
            return Err(bad());
        };
        let d = decision(p, [allowed, remaining, retry, reset])?;
        if !d.is_allowed() {
            return Ok(Reservation::refused(d));
        }
        let ticket = match items.get(5) {
            // A peek stores nothing: no ticket.
            Some(Value::BulkString(stored)) if stored.is_empty() => None,
            Some(Value::BulkString(stored)) => Some(ticket(cost, stored).ok_or_else(bad)?),
            _ => return Err(bad()),
        };
        Ok(Reservation::booked(d, Duration::from_micros(wait), ticket))
    }

    /// One cancellation, one script call: the slot goes back while the key still holds
    /// what the booking stored.
    pub(crate) async fn unbook(
        &self,
        key: &[u8],
        policy: &Reservable,
        reservation: &Reservation,
    ) -> Result<Cancelled, Error> {
        let Some(ticket) = reservation.ticket else {
            return Ok(Cancelled::Spent);
        };
        const UNSUPPORTED: Error = Error::Unsupported {
            what: "cancelling under this algorithm",
        };
        let p = policy.policy();
        let layout = Layout::of(p.parameters()).ok_or(UNSUPPORTED)?;
        let stored = match ticket.state() {
            [value, 0] if !pair(layout) => value.to_string(),
            [owed, tick] => format!("{owed} {tick}"),
        };
        let (script, parameter) = match layout.kind {
            ScriptKind::Gcra | ScriptKind::LeakyBucket => (&*CANCEL_GCRA, layout.args[0]),
            ScriptKind::TokenBucket => (&*CANCEL_TOKEN_BUCKET, layout.args[2]),
            _ => return Err(UNSUPPORTED),
        };
        let mut inv = script.prepare_invoke();
        inv.key(self.redis_key(key, p))
            .arg(ticket.cost())
            .arg(stored)
            .arg(parameter);
        self.inner.counters.single();
        let returned: i64 = self.bounded(Op::Script(&inv)).await?;
        Ok(Cancelled::from_returned(returned == 1))
    }
}

/// Whether a token bucket stores `'<owed> <tick>'` (more than a token per µs) rather than
/// one integer: as `lua/token_bucket.lua` chooses.
fn pair(layout: Layout) -> bool {
    layout.kind == ScriptKind::TokenBucket && layout.args[2] > layout.args[1]
}

/// The ticket of a booking of `cost` whose key now holds `stored`: one integer (GCRA's
/// TAT, the bucket's count when full) or two (`'<owed> <tick>'`).
fn ticket(cost: u64, stored: &[u8]) -> Option<Ticket> {
    let text = std::str::from_utf8(stored).ok()?;
    let mut numbers = text.split(' ').map(|n| n.parse::<u64>().ok());
    let first = numbers.next()??;
    let second = match numbers.next() {
        None => 0,
        Some(n) => n?,
    };
    numbers
        .next()
        .is_none()
        .then(|| floodwall_core::store::ticket(cost, [first, second]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_booking_kinds_have_a_script_with_no_placeholder_left() {
        for (kind, penalized) in ScriptKind::ALL
            .into_iter()
            .flat_map(|k| [(k, false), (k, true)])
        {
            let Some(t) = crate::script::reserve(kind, penalized) else {
                assert!(!matches!(
                    kind,
                    ScriptKind::Gcra | ScriptKind::LeakyBucket | ScriptKind::TokenBucket
                ));
                continue;
            };
            assert!(t.starts_with("-- floodwall: prepended"), "{kind:?}");
            // A penalized booking reads the ban first, and strikes nothing.
            assert_eq!(t.contains("KEYS[2]"), penalized, "{kind:?}");
            assert!(!t.contains("KEYS[3]") && !t.contains("{q1}"), "{kind:?}");
            for marker in ["{now}", "{p1}", "{p2}", "{p3}", "-- {", "{maxwait}"] {
                assert!(!t.contains(marker), "{kind:?}: {marker}");
            }
            // The step runs twice (at now, at the slot), the save (whose write in a new TTL
            // cell sets the TTL) on either path.
            assert_eq!(t.matches("'PX'").count(), 2, "{kind:?}");
        }
    }

    #[test]
    fn tickets_read_what_the_scripts_store() {
        let expected = floodwall_core::store::ticket;
        let tat = 1_700_000_000_123_456;
        assert_eq!(ticket(2, b"1700000000123456"), Some(expected(2, [tat, 0])));
        assert_eq!(ticket(1, b"12 34"), Some(expected(1, [12, 34])));
        for bad in [&b""[..], b"x", b"1 2 3", b"-1", b"1  2"] {
            assert_eq!(ticket(1, bad), None, "{bad:?}");
        }
    }
}
