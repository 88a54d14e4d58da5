//! Several checks at once, all or nothing
//! ([`StoreExt::check_all`](floodwall_core::StoreExt::check_all)): one script call over the
//! checks' keys (`lua/all.lua`), which share a slot on a cluster (one user key's share its hash tag);
//! with the keys of the penalized policies' bans after them (`lua/all_penalty.lua`).

use floodwall_core::store::Checks;
use floodwall_core::{Decision, Error};
use redis::Value;

use crate::kind::Layout;
use crate::op::Op;
use crate::reply::{self, Answer};
use crate::script::penalty_params;
use crate::slots::slot_of;
use crate::store::{RedisStore, decision};

impl RedisStore {
    /// Decides every one of `checks` at `now` (µs; `None` reads the server's clock) in one
    /// script call, never coalesced, writing only if all allowed. [`Error::Unsupported`],
    /// with nothing written, for what one script cannot hold together: a sliding window or
    /// log among several checks, a key of a policy listed twice, different costs, or keys
    /// in different slots of a cluster. The tower layer then checks one by one; a gateway
    /// decides otherwise. Penalized policies' keys follow the rate keys
    /// ([`floodwall_core::guide::all_or_nothing`], [`crate::guide::redis`]).
    pub(crate) async fn decide_all(
        &self,
        checks: Checks<'_>,
        now: Option<u64>,
    ) -> Result<Vec<Option<Decision>>, Error> {
        checks.check_costs()?;
        if checks.len() == 1 {
            let c = checks.get(0);
            return Ok(vec![Some(self.decide(c.key, c.policy, c.cost, now).await?)]);
        }
        let cost = checks.shared_cost().ok_or(Error::Unsupported {
            what: "checks of different costs at once in Redis",
        })?;
        let unsupported = Error::Unsupported {
            what: "checking a sliding window or log, or one policy (or policy name) twice for one key, with other policies at once in Redis",
        };
        let layouts = checks
            .iter()
            .map(|c| Layout::of(c.policy.parameters()))
            .collect::<Option<Vec<_>>>()
            .ok_or(Error::Unsupported {
                what: "an algorithm floodwall-redis has no script for",
            })?;
        let mut keys: Vec<Vec<u8>> = checks
            .iter()
            .map(|c| self.redis_key(c.key, c.policy))
            .collect();
        let penalties: Vec<_> = checks
            .iter()
            .map(|c| c.policy.penalty().map(penalty_params))
            .collect();
        for c in checks.iter().filter(|c| c.policy.penalty().is_some()) {
            keys.extend(self.penalty_keys(c.key, c.policy));
        }
        let mut distinct: Vec<&Vec<u8>> = keys.iter().collect();
        distinct.sort_unstable();
        distinct.dedup();
        if distinct.len() != keys.len() {
            return Err(unsupported);
        }
        if !self.inner.conn.declares_batch_keys() {
            // A cluster runs a script on one node: its keys must share a slot.
            let slot = slot_of(&keys[0]);
            if keys.iter().any(|k| slot_of(k) != slot) {
                return Err(Error::Unsupported {
                    what: "checking keys in different slots of a Redis Cluster at once",
                });
            }
        }
        let Some(script) = self.inner.scripts.all(&layouts, &penalties) else {
            return Err(unsupported);
        };
        let inv = script.invocation(&keys, cost, now);
        self.inner.counters.single();
        let reply: Value = self.bounded(Op::Script(&inv)).await?;
        let answers = reply::all(&layouts, cost, &reply)?;
        checks
            .iter()
            .zip(answers)
            .map(|(c, a)| match a {
                Answer::Quota(a) => decision(c.policy, a).map(Some),
                Answer::Banned(left) => {
                    Ok(Some(floodwall_core::store::ban_decision(c.policy, left)))
                }
            })
            .collect()
    }
}
