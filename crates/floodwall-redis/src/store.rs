//! [`RedisStore`]: the core [`Store`] trait over Redis, and the path of one check.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use floodwall_core::store::{Op as StoreOp, Reply};
use floodwall_core::{Decision, DenyCache, DenyCacheStats, Error, Penalty, Policy, Store};
use redis::{ScriptInvocation, Value};

use crate::builder::RedisStoreBuilder;
use crate::call::{Batch, Scripts};
use crate::coalesce::{self, Coalescer, Group, Route};
use crate::connection::Connection;
use crate::error::{BuildError, UnexpectedReply};
use crate::key;
use crate::kind::Layout;
use crate::op::Op;
use crate::renew::{Holder, Leases};
use crate::reply;
use crate::stats::{Counters, RedisStats};
use crate::unpack::ScriptAnswer;

/// Rate-limit state in Redis, shared by every server that points at it.
///
/// Each check runs one Lua script, atomically, on the server's clock (`TIME`), so a fleet
/// of servers with skewed clocks enforces one limit exactly. Clones share the connection;
/// [`RedisStore::builder`] chooses it. A check never panics and never allows silently
/// (its errors: the [Redis store guide](crate::guide::redis#failures)).
#[derive(Clone)]
pub struct RedisStore {
    pub(crate) inner: Arc<Inner>,
    /// `Some` when the [deny cache](RedisStoreBuilder::deny_cache) is on: checks and resets
    /// go through it, to the direct path of this store (the same connection, no cache).
    pub(crate) deny: Option<Arc<DenyCache<Direct>>>,
}

/// A [`RedisStore`] without its deny cache: what the cache wraps, and where its misses go.
#[derive(Clone)]
pub(crate) struct Direct(pub(crate) RedisStore);

impl Store for Direct {
    fn call(&self, op: StoreOp<'_>) -> impl Future<Output = Result<Reply, Error>> + Send {
        self.0.direct(op, None)
    }
}

impl fmt::Debug for Direct {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("RedisStore")
    }
}

/// What a store's clones share.
pub(crate) struct Inner {
    pub(crate) conn: Connection,
    pub(crate) prefix: String,
    pub(crate) timeout: Duration,
    /// `Some` when coalescing is on; shared with the driver tasks sending its batches.
    pub(crate) coalescer: Option<Arc<Coalescer>>,
    pub(crate) counters: Counters,
    /// Single-check scripts with the parameters of this store's policies written in.
    pub(crate) scripts: Scripts,
    /// The in-flight leases this store's permits hold (`crate::lease`), and their renewer
    /// (`crate::renew`).
    pub(crate) leases: Leases,
}

impl Inner {
    /// One call, bounded by the store's timeout.
    pub(crate) async fn bounded<T: redis::FromRedisValue>(&self, op: Op<'_>) -> Result<T, Error> {
        tokio::time::timeout(self.timeout, self.conn.query(op))
            .await
            .unwrap_or(Err(Error::Timeout))
    }
}

impl Holder for Inner {
    fn leases(&self) -> &Leases {
        &self.leases
    }

    fn renew(
        &self,
        call: &ScriptInvocation<'_>,
    ) -> impl Future<Output = Result<Vec<String>, Error>> + Send {
        self.bounded(Op::Script(call))
    }
}

impl RedisStore {
    /// The key prefix used unless [`RedisStoreBuilder::prefix`] says otherwise.
    pub const DEFAULT_PREFIX: &'static str = "floodwall:";

    /// How many policies' parameters get a script of their own unless
    /// [`RedisStoreBuilder::written_scripts`] says otherwise.
    pub const DEFAULT_WRITTEN_SCRIPTS: usize = 256;

    /// The bound on one check unless [`RedisStoreBuilder::timeout`] says otherwise.
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1);

    /// How often a [`sentinel`](RedisStoreBuilder::sentinel) store asks the sentinels, in
    /// the background, whether the primary moved while its connection still works.
    pub const SENTINEL_REFRESH: Duration = crate::sentinel::REFRESH;

    /// The pool size unless [`RedisStoreBuilder::pool_size`] says otherwise.
    pub const DEFAULT_POOL_SIZE: u32 = 8;

    /// With [coalescing](RedisStoreBuilder::coalesce), the most checks that could share a
    /// call waiting behind their calls in flight; the next fails with [`Error::Overloaded`].
    pub const MAX_QUEUED_PER_GROUP: usize = coalesce::MAX_QUEUED_PER_GROUP;

    /// With coalescing, the most checks waiting behind calls in flight over all keys of
    /// one store (clones share it); past it, checks are refused with [`Error::Overloaded`].
    pub const MAX_QUEUED: usize = coalesce::MAX_QUEUED;

    /// A builder with the defaults: prefix `floodwall:`, 1 s timeout, pools of 8,
    /// coalescing on, deny cache on.
    pub fn builder() -> RedisStoreBuilder {
        RedisStoreBuilder::new()
    }

    /// A store on one multiplexed, self-reconnecting connection, with the defaults: the
    /// usual choice (see [`RedisStoreBuilder::multiplexed`]).
    pub async fn connect(url: &str) -> Result<Self, BuildError> {
        Self::builder().multiplexed(url).await
    }

    /// The Redis key holding `key`'s state under `policy` (see the crate docs for the
    /// layout), e.g. to inspect it with `redis-cli`.
    pub fn redis_key(&self, key: &[u8], policy: &Policy) -> Vec<u8> {
        key::redis_key(&self.inner.prefix, policy, key)
    }

    /// The Redis keys of `key`'s ban, refusals counted (strikes) and bans remembered
    /// under `policy`'s penalty, in that order (see the crate docs for the layout): for
    /// an operator's `redis-cli`. They share the rate key's slot; none exists until the
    /// key is refused.
    pub fn penalty_keys(&self, key: &[u8], policy: &Policy) -> [Vec<u8>; 3] {
        key::penalty_keys(&self.inner.prefix, policy.name(), key)
    }

    /// The prefix every key starts with.
    pub fn prefix(&self) -> &str {
        &self.inner.prefix
    }

    /// Counters since the store was built (shared by clones).
    pub fn stats(&self) -> RedisStats {
        let mut stats = self.inner.counters.snapshot();
        if let Some(deny) = &self.deny {
            stats.denied_locally = deny.stats().denied_locally;
        }
        stats
    }

    /// The [deny cache](RedisStoreBuilder::deny_cache)'s counters since the store was built
    /// (shared by clones); `None` when it is off.
    pub fn deny_cache_stats(&self) -> Option<DenyCacheStats> {
        self.deny.as_deref().map(DenyCache::stats)
    }

    /// Deletes `keys` (one `DEL`; they share a slot), bypassing the deny cache.
    async fn delete(&self, keys: &[Vec<u8>]) -> Result<(), Error> {
        let mut del = redis::cmd("DEL");
        del.arg(keys);
        self.bounded::<i64>(Op::Cmd(&del)).await.map(drop)
    }

    /// One check at `now` (µs; `None` reads the server's clock): coalesced when the store
    /// coalesces and the algorithm can be, else alone.
    pub(crate) async fn decide(
        &self,
        key: &[u8],
        policy: &Policy,
        cost: u64,
        now: Option<u64>,
    ) -> Result<Decision, Error> {
        policy.check_cost(cost)?;
        let redis_key = self.redis_key(key, policy);
        if let Some(penalty) = policy.penalty() {
            return self
                .penalized(key, &redis_key, policy, penalty, cost, now)
                .await;
        }
        if let Some(coalescer) = &self.inner.coalescer
            && let Some(batch) = Layout::of(policy.parameters()).and_then(Batch::of)
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            let route = Route {
                coalescer,
                group: Group::of(
                    batch.layout(),
                    now,
                    self.inner.conn.node_of(&redis_key, &runtime),
                ),
                batch,
                runtime,
            };
            return self.coalesced(route, redis_key, policy, cost).await;
        }
        self.single(&redis_key, policy, cost, now).await
    }

    /// One check, one script call.
    pub(crate) async fn single(
        &self,
        redis_key: &[u8],
        policy: &Policy,
        cost: u64,
        now: Option<u64>,
    ) -> Result<Decision, Error> {
        let layout = script_layout(policy)?;
        decision(policy, self.answer(redis_key, layout, cost, now).await?)
    }

    /// One check under a policy with `penalty`, one script call of its own, never coalesced.
    async fn penalized(
        &self,
        key: &[u8],
        redis_key: &[u8],
        policy: &Policy,
        penalty: &Penalty,
        cost: u64,
        now: Option<u64>,
    ) -> Result<Decision, Error> {
        let layout = script_layout(policy)?;
        let single = self.inner.scripts.single(layout, Some(penalty));
        let keys = self.penalty_keys(key, policy);
        let inv = single.invocation(redis_key, &keys, now, cost);
        self.inner.counters.single();
        let reply: Value = self.bounded(Op::Script(&inv)).await?;
        if let Some(left) = reply::banned(&reply) {
            return Ok(floodwall_core::store::ban_decision(policy, left));
        }
        decision(policy, reply::single(layout, cost, &reply)?)
    }

    /// The script's answer to one check under `layout`, from one script call.
    pub(crate) async fn answer(
        &self,
        redis_key: &[u8],
        layout: Layout,
        cost: u64,
        now: Option<u64>,
    ) -> Result<ScriptAnswer, Error> {
        let single = self.inner.scripts.single(layout, None);
        let inv = single.invocation(redis_key, &[], now, cost);
        self.inner.counters.single();
        let reply: Value = self.bounded(Op::Script(&inv)).await?;
        reply::single(layout, cost, &reply)
    }

    pub(crate) async fn bounded<T: redis::FromRedisValue>(&self, op: Op<'_>) -> Result<T, Error> {
        self.inner.bounded(op).await
    }
}

/// An explicit time, clamped so that it plus any span stays below 2^53, where every
/// script's arithmetic is exact.
pub(crate) fn explicit(now_us: u64) -> Option<u64> {
    Some(now_us.min((1 << 53) - floodwall_core::MAX_SPAN.as_micros() as u64))
}

/// The decision a script's answer stands for under `policy`. An answer that cannot be one
/// is the server's fault, never a panic.
pub(crate) fn decision(
    policy: &Policy,
    [allowed, remaining, retry, reset]: ScriptAnswer,
) -> Result<Decision, Error> {
    if allowed > 1 || remaining > policy.limit() {
        return Err(Error::backend(UnexpectedReply(format!(
            "allowed {allowed}, remaining {remaining} (limit {})",
            policy.limit()
        ))));
    }
    Ok(floodwall_core::store::decision_from_micros(
        policy,
        allowed == 1,
        remaining,
        retry,
        reset,
    ))
}

impl RedisStore {
    /// An operation without the deny cache, at `now` (µs; `None` reads the server's clock).
    pub(crate) async fn direct(&self, op: StoreOp<'_>, now: Option<u64>) -> Result<Reply, Error> {
        Ok(match op {
            StoreOp::Check { key, policy, cost } => {
                Reply::Decision(self.decide(key, policy, cost, now).await?)
            }
            StoreOp::CheckAll { checks } => Reply::Decisions(self.decide_all(checks, now).await?),
            StoreOp::Reserve {
                key,
                policy,
                cost,
                max_wait,
            } => Reply::Reservation(self.book(key, policy, cost, max_wait, now).await?),
            StoreOp::Cancel {
                key,
                policy,
                reservation,
            } => Reply::Cancelled(self.unbook(key, policy, &reservation).await?),
            StoreOp::Adjust {
                key,
                policy,
                adjustment,
            } => {
                self.settle(key, policy, adjustment, now).await?;
                Reply::Done
            }
            StoreOp::Unban { key, policy } => {
                self.delete(&self.penalty_keys(key, policy)).await?;
                Reply::Done
            }
            StoreOp::Reset { key, policy } => {
                self.delete(&[self.redis_key(key, policy)]).await?;
                Reply::Done
            }
            StoreOp::Acquire { key, limit } => Reply::Acquired(self.lease(key, limit).await?),
            StoreOp::PenaltyState { key, policy } => {
                Reply::PenaltyState(self.penalty_state(key, policy, now).await?)
            }
            other => return Err(other.unsupported()),
        })
    }
}

/// Every operation through the deny cache when it is on (see [`RedisStore::builder`]),
/// then one script call or command per operation, on the server's clock.
impl Store for RedisStore {
    async fn call(&self, op: StoreOp<'_>) -> Result<Reply, Error> {
        match &self.deny {
            Some(deny) => deny.call(op).await,
            None => self.direct(op, None).await,
        }
    }

    /// A refusal the deny cache holds, answered without a future (the tower layer asks
    /// this first); `None` otherwise: everything else needs Redis.
    fn call_now(&self, op: StoreOp<'_>) -> Option<Result<Reply, Error>> {
        self.deny.as_ref()?.call_now(op)
    }
}

impl fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisStore")
            .field("connection", &self.inner.conn.kind())
            .field("prefix", &self.inner.prefix)
            .field("timeout", &self.inner.timeout)
            .field("coalesce", &self.inner.coalescer.is_some())
            .field("deny_cache", &self.deny.is_some())
            .field("stats", &self.stats())
            .finish()
    }
}

/// The script layout of `policy`'s algorithm, or the error of an algorithm without one.
fn script_layout(policy: &Policy) -> Result<Layout, Error> {
    Layout::of(policy.parameters()).ok_or_else(|| {
        Error::backend(format!(
            "floodwall-redis has no script for the {} algorithm",
            policy.algorithm()
        ))
    })
}
