//! One key checked under several policies at once, all or nothing
//! ([`StoreExt::check_all`](floodwall_core::StoreExt::check_all)): one script call over the
//! policies' keys (`lua/all.lua`), which share the user key's hash tag and so one slot;
//! with the keys of the penalized policies' bans after them (`lua/all_penalty.lua`).

use floodwall_core::{Decision, Error, Policy};
use redis::Value;

use crate::kind::Layout;
use crate::op::Op;
use crate::reply::{self, Answer};
use crate::script::penalty_params;
use crate::store::{RedisStore, decision};

impl RedisStore {
    /// Decides `key` under every one of `policies` at `now` (µs; `None` reads the
    /// server's clock) in one script call, never coalesced, writing only if all allowed.
    /// [`Error::Unsupported`] for a sliding window or log among several policies, or a
    /// policy listed twice: the tower layer then checks them one by one. Penalized policies'
    /// keys follow the rate keys ([`floodwall_core::guide::all_or_nothing`],
    /// [`crate::guide::redis`]).
    pub(crate) async fn decide_all(
        &self,
        key: &[u8],
        policies: &[Policy],
        cost: u64,
        now: Option<u64>,
    ) -> Result<Vec<Option<Decision>>, Error> {
        for policy in policies {
            policy.check_cost(cost)?;
        }
        if let [policy] = policies {
            return Ok(vec![Some(self.decide(key, policy, cost, now).await?)]);
        }
        let unsupported = Error::Unsupported {
            what: "checking a sliding window or log, or one policy (or policy name) twice, with other policies at once in Redis",
        };
        let layouts = policies
            .iter()
            .map(|p| Layout::of(p.parameters()))
            .collect::<Option<Vec<_>>>()
            .ok_or(Error::Unsupported {
                what: "an algorithm floodwall-redis has no script for",
            })?;
        let mut keys: Vec<Vec<u8>> = policies.iter().map(|p| self.redis_key(key, p)).collect();
        let penalties: Vec<_> = policies
            .iter()
            .map(|p| p.penalty().map(penalty_params))
            .collect();
        for p in policies.iter().filter(|p| p.penalty().is_some()) {
            keys.extend(self.penalty_keys(key, p));
        }
        let mut distinct: Vec<&Vec<u8>> = keys.iter().collect();
        distinct.sort_unstable();
        distinct.dedup();
        if distinct.len() != keys.len() {
            return Err(unsupported);
        }
        let Some(script) = self.inner.scripts.all(&layouts, &penalties) else {
            return Err(unsupported);
        };
        let inv = script.invocation(&keys, cost, now);
        self.inner.counters.single();
        let reply: Value = self.bounded(Op::Script(&inv)).await?;
        let answers = reply::all(&layouts, cost, &reply)?;
        policies
            .iter()
            .zip(answers)
            .map(|(p, a)| match a {
                Answer::Quota(a) => decision(p, a).map(Some),
                Answer::Banned(left) => Ok(Some(floodwall_core::store::ban_decision(p, left))),
            })
            .collect()
    }
}
