//! A key's penalty read as `lua/penalty.lua` keeps it, changing nothing
//! ([`StoreExt::penalty_state`](floodwall_core::StoreExt::penalty_state)): the ban's end
//! (`'<end µs>'`), the strikes (`'<window end µs> <count>'`) and the remembered bans
//! (`'<forget at µs> <count>'`), read with the server's clock in one script call, so the
//! three keys and the time are of one instant.

use std::sync::LazyLock;

use floodwall_core::store::penalty_state_from_micros;
use floodwall_core::{Error, PenaltyState, Policy};
use redis::Script;

use crate::error::UnexpectedReply;
use crate::op::Op;
use crate::store::RedisStore;

/// Reads the three keys, and the server's time unless the caller gives one.
static READ: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        "local t = redis.call('TIME')\n\
         return {t[1] * 1000000 + t[2], redis.call('MGET', KEYS[1], KEYS[2], KEYS[3])}",
    )
});

impl RedisStore {
    /// `key`'s penalty under `policy` at `now` (µs; `None` reads the server's clock).
    pub(crate) async fn penalty_state(
        &self,
        key: &[u8],
        policy: &Policy,
        now: Option<u64>,
    ) -> Result<PenaltyState, Error> {
        let keys = self.penalty_keys(key, policy);
        let mut inv = READ.prepare_invoke();
        for k in &keys {
            inv.key(k);
        }
        let (server_now, [ban, strikes, bans]): (u64, [Option<String>; 3]) =
            self.bounded(Op::Script(&inv)).await?;
        let bad = |what: &str, v: &str| {
            Error::backend(UnexpectedReply(format!(
                "the penalty's {what} key holds {v:?}"
            )))
        };
        let pair = |what: &str, v: Option<String>| -> Result<(u64, u32), Error> {
            let Some(v) = v else { return Ok((0, 0)) };
            let mut parts = v.split(' ');
            match (
                parts.next().and_then(|p| p.parse().ok()),
                parts.next().and_then(|p| p.parse().ok()),
                parts.next(),
            ) {
                (Some(end), Some(count), None) => Ok((end, count)),
                _ => Err(bad(what, &v)),
            }
        };
        let ban_end = match ban {
            None => 0,
            Some(v) => v.parse().map_err(|_| bad("ban", &v))?,
        };
        let (strikes_until, strikes) = pair("strikes", strikes)?;
        let (bans_until, bans) = pair("bans", bans)?;
        Ok(penalty_state_from_micros(
            now.unwrap_or(server_now),
            strikes,
            strikes_until,
            ban_end,
            bans,
            bans_until,
        ))
    }
}
