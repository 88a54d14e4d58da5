//! [`RedisStore`]: the core [`Store`] trait over Redis, and its builder.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use floodwall_core::{Decision, Error, Parameters, Policy, Store};
use redis::Value;
use tokio::time::Instant;

use crate::coalesce::{self, Answer, BatchKey, Coalescer};
use crate::connection::{Connection, Op};
use crate::error::{BuildError, UnexpectedReply};
use crate::key;
use crate::reply::{self, Raw};
use crate::script::{self, BatchLayout, Scripts};

/// Rate-limit state in Redis, shared by every server that points at it.
///
/// Each check runs one Lua script, atomically, on the server's clock (`TIME`), so a fleet
/// of servers with skewed clocks enforces one limit exactly. Cloning is cheap (an `Arc`):
/// clones share the connection.
///
/// Built by [`RedisStore::builder`] on one of three connection kinds:
/// [`multiplexed`](RedisStoreBuilder::multiplexed) (redis-rs's `ConnectionManager`: one
/// connection that pipelines concurrent calls and reconnects by itself; the leanest),
/// [`pool`](RedisStoreBuilder::pool) (a `bb8-redis` pool) or
/// [`cluster`](RedisStoreBuilder::cluster) (Redis Cluster).
///
/// # Failures
///
/// A check never panics and never allows silently. It answers:
/// - [`Error::CostTooHigh`] before any Redis call when the cost can never pass;
/// - [`Error::Timeout`] when no reply came within the [timeout](RedisStoreBuilder::timeout);
/// - [`Error::Unavailable`] when Redis refuses or drops connections (server down or
///   restarting, cluster down); the connection recovers by itself once Redis is back;
/// - [`Error::Backend`] when Redis answered with an error: a key of the wrong type written
///   by someone else (`WRONGTYPE`), a value the script cannot read, any other script error;
/// - [`Error::Overloaded`] when, with coalescing, too many checks already wait behind calls
///   in flight ([`MAX_QUEUED_PER_KEY`](Self::MAX_QUEUED_PER_KEY) for one key,
///   [`MAX_QUEUED`](Self::MAX_QUEUED) in all).
///
/// Scripts are sent by SHA1 (EVALSHA); after `SCRIPT FLUSH`, a restart or a failover the
/// server answers `NOSCRIPT` and the script is loaded and run again, transparently.
///
/// # Coalescing
///
/// With [`RedisStoreBuilder::coalesce`], a check of a key with no call in flight goes out
/// at once, alone; concurrent checks of that key arriving meanwhile share the next script
/// call, which decides them all, in arrival order, exactly as sequential calls at one
/// instant would (GCRA, buckets, fixed window; the sliding window and log are never
/// coalesced). [`stats`](Self::stats) counts the calls made and saved. A queued check whose
/// caller gave up (dropped the request, or its timeout passed) is never sent, and when a
/// call times out the checks queued behind it fail unsent: a Redis stall costs no quota
/// for requests it refused, except the checks already in flight when their callers gave
/// up, which Redis decides when it resumes.
///
/// ```no_run
/// # async fn f() -> Result<(), Box<dyn std::error::Error>> {
/// use floodwall_core::{Policy, Store};
/// use floodwall_redis::RedisStore;
///
/// // Coalescing is on by default.
/// let store = RedisStore::connect("redis://127.0.0.1/").await?;
/// let policy = Policy::gcra("api", "100/s".parse()?)?;
/// // Ten concurrent checks of one key: one EVALSHA for the first, one for the nine that
/// // arrived while it was in flight.
/// let mut checks = tokio::task::JoinSet::new();
/// for _ in 0..10 {
///     let (store, policy) = (store.clone(), policy.clone());
///     checks.spawn(async move { store.check(b"hot", &policy, 1).await });
/// }
/// let _decisions = checks.join_all().await;
/// println!("{:?}", store.stats());
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct RedisStore {
    inner: Arc<Inner>,
}

struct Inner {
    conn: Connection,
    prefix: String,
    timeout: Duration,
    /// `Some` when coalescing is on; shared with the driver tasks sending its batches.
    coalescer: Option<Arc<Coalescer>>,
    script_calls: AtomicU64,
    coalesced: AtomicU64,
    /// Single-check scripts with the parameters of this store's policies written in.
    scripts: Scripts,
}

/// Work a [`RedisStore`] sent to Redis, and work coalescing saved: read it to see whether
/// [`coalesce`](RedisStoreBuilder::coalesce) pays for a workload.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RedisStats {
    /// Script calls (EVALSHA round trips) made for checks, batches included.
    pub script_calls: u64,
    /// Checks answered by another check's call, which they joined: calls saved.
    pub coalesced: u64,
}

/// Configures a [`RedisStore`] (key prefix, timeout, pool size), then connects it.
///
/// ```no_run
/// # async fn f() -> Result<(), floodwall_redis::BuildError> {
/// use std::time::Duration;
/// use floodwall_redis::RedisStore;
///
/// let store = RedisStore::builder()
///     .prefix("myapp:rl:")
///     .timeout(Duration::from_millis(200))
///     .multiplexed("redis://127.0.0.1:6379/")
///     .await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct RedisStoreBuilder {
    prefix: String,
    timeout: Duration,
    pool_size: u32,
    coalesce: bool,
    written_scripts: usize,
}

impl RedisStore {
    /// The key prefix used unless [`RedisStoreBuilder::prefix`] says otherwise.
    pub const DEFAULT_PREFIX: &'static str = "floodwall:";

    /// How many policies' parameters get a script of their own unless
    /// [`RedisStoreBuilder::written_scripts`] says otherwise.
    pub const DEFAULT_WRITTEN_SCRIPTS: usize = 256;

    /// The bound on one check unless [`RedisStoreBuilder::timeout`] says otherwise.
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1);

    /// The pool size unless [`RedisStoreBuilder::pool_size`] says otherwise.
    pub const DEFAULT_POOL_SIZE: u32 = 8;

    /// With [coalescing](RedisStoreBuilder::coalesce), the most checks of one key that
    /// wait behind its call in flight (four batches' worth): the next is refused with
    /// [`Error::Overloaded`], which the tower layer answers as any store failure (503, or
    /// its fail mode), rather than piling up while Redis stalls.
    pub const MAX_QUEUED_PER_KEY: usize = coalesce::MAX_QUEUED_PER_KEY;

    /// With coalescing, the most checks waiting behind calls in flight over all keys of
    /// one store (clones share it); past it, checks are refused with [`Error::Overloaded`].
    pub const MAX_QUEUED: usize = coalesce::MAX_QUEUED;

    /// A builder with the defaults: prefix `floodwall:`, 1 s timeout, pools of 8,
    /// coalescing on.
    pub fn builder() -> RedisStoreBuilder {
        RedisStoreBuilder {
            prefix: Self::DEFAULT_PREFIX.to_owned(),
            timeout: Self::DEFAULT_TIMEOUT,
            pool_size: Self::DEFAULT_POOL_SIZE,
            coalesce: true,
            written_scripts: Self::DEFAULT_WRITTEN_SCRIPTS,
        }
    }

    /// A store on one multiplexed, self-reconnecting connection, with the defaults: the
    /// usual choice (see [`RedisStoreBuilder::multiplexed`]).
    pub async fn connect(url: &str) -> Result<Self, BuildError> {
        Self::builder().multiplexed(url).await
    }

    /// Decides at `now_us` (microseconds since the Unix epoch) instead of the server's clock.
    ///
    /// For tests and simulations only: it makes runs deterministic (the decision vectors
    /// run through it), but a fleet passing its own clocks loses what server time gives.
    /// Keys written this way live one minute longer than their state needs, since their
    /// time is not the clock Redis expires keys by. Times after the year 2155 are clamped
    /// to it, so that a time plus the longest span floodwall computes with (100 years) stays
    /// below 2^53 µs, where Lua's numbers are exact.
    pub async fn check_at(
        &self,
        key: &[u8],
        policy: &Policy,
        cost: u64,
        now_us: u64,
    ) -> Result<Decision, Error> {
        self.decide(key, policy, cost, Some(now_us.min(MAX_EXPLICIT_NOW)))
            .await
    }

    /// The Redis key holding `key`'s state under `policy` (see the crate docs for the
    /// layout), e.g. to inspect it with `redis-cli`.
    pub fn redis_key(&self, key: &[u8], policy: &Policy) -> Vec<u8> {
        key::redis_key(&self.inner.prefix, policy, key)
    }

    /// The prefix every key starts with.
    pub fn prefix(&self) -> &str {
        &self.inner.prefix
    }

    /// Counters since the store was built (shared by clones).
    pub fn stats(&self) -> RedisStats {
        RedisStats {
            script_calls: self.inner.script_calls.load(Ordering::Relaxed),
            coalesced: self.inner.coalesced.load(Ordering::Relaxed),
        }
    }

    async fn decide(
        &self,
        key: &[u8],
        policy: &Policy,
        cost: u64,
        now: Option<u64>,
    ) -> Result<Decision, Error> {
        policy.check_cost(cost)?;
        let params = policy.parameters();
        let redis_key = self.redis_key(key, policy);
        if let Some(coalescer) = &self.inner.coalescer
            && let Some(layout) = script::batch_layout(params)
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            let key = (redis_key, now);
            let at = Instant::now();
            let deadline = at + self.inner.timeout;
            let Some(answer) = coalescer.join(&key, cost, deadline, at)? else {
                // No call for the key in flight: this check goes out alone, inline, as an
                // uncoalesced one would (no task, no channel); whatever queues behind it is
                // handed to a driver when `lead` drops, or failed if this call timed out.
                let mut lead = Lead {
                    store: self,
                    coalescer,
                    key,
                    layout,
                    runtime,
                    timed_out: false,
                };
                let result = self
                    .single(&lead.key.0, params, policy, cost, lead.key.1)
                    .await;
                lead.timed_out = matches!(result, Err(Error::Timeout));
                return result;
            };
            return self.queued(answer, deadline, policy).await;
        }
        self.single(&redis_key, params, policy, cost, now).await
    }

    /// One check, one script call.
    async fn single(
        &self,
        redis_key: &[u8],
        params: Parameters,
        policy: &Policy,
        cost: u64,
        now: Option<u64>,
    ) -> Result<Decision, Error> {
        let single = self.inner.scripts.single(params).ok_or_else(|| {
            Error::backend(format!(
                "floodwall-redis has no script for the {} algorithm",
                policy.algorithm()
            ))
        })?;
        let inv = single.invocation(redis_key, now, cost);
        self.inner.script_calls.fetch_add(1, Ordering::Relaxed);
        let reply: Value = self.bounded(Op::Script(&inv)).await?;
        decision(policy, reply::single(single.reply(), cost, &reply)?)
    }

    /// The answer to a check queued behind a call in flight for its key, from the batch it
    /// joined, by `deadline` (the timeout from when it queued; the driver sends no check
    /// past it).
    async fn queued(
        &self,
        answer: Answer,
        deadline: Instant,
        policy: &Policy,
    ) -> Result<Decision, Error> {
        let raw = match tokio::time::timeout_at(deadline, answer).await {
            Ok(Ok(result)) => result?,
            Ok(Err(_)) => return Err(Error::backend("a coalesced check's batch was abandoned")),
            Err(_) => return Err(Error::Timeout),
        };
        decision(policy, raw)
    }

    /// One batch call: the script's answers to `costs`, in order, by `deadline` (when the
    /// last of their callers stops waiting). It is one script call for all of them, so
    /// every check but one counts as coalesced.
    async fn batch(
        &self,
        key: &BatchKey,
        layout: BatchLayout,
        costs: &[u64],
        deadline: Instant,
    ) -> Result<Vec<Raw>, Error> {
        let inv = script::batch_invocation(layout, &key.0, key.1, costs);
        self.inner.script_calls.fetch_add(1, Ordering::Relaxed);
        self.inner
            .coalesced
            .fetch_add(costs.len() as u64 - 1, Ordering::Relaxed);
        let call = self.inner.conn.query(Op::Script(&inv));
        let reply: Value = tokio::time::timeout_at(deadline, call)
            .await
            .unwrap_or(Err(Error::Timeout))?;
        reply::batch(&reply, costs.len())
    }

    async fn bounded<T: redis::FromRedisValue>(&self, op: Op<'_>) -> Result<T, Error> {
        tokio::time::timeout(self.inner.timeout, self.inner.conn.query(op))
            .await
            .unwrap_or(Err(Error::Timeout))
    }
}

/// Explicit times are clamped here: a time plus any span stays below 2^53, where every
/// script's arithmetic is exact.
const MAX_EXPLICIT_NOW: u64 = (1 << 53) - floodwall_core::MAX_SPAN.as_micros() as u64;

/// A leader's call in flight for a key. When it ends, answered or dropped, the checks that
/// queued behind it and whose callers still wait go to a driver (spawned, so they are sent
/// whatever happens to the leader's caller), or the key is forgotten when none did. When
/// the call timed out, they are failed with [`Error::Timeout`], unsent: Redis did not
/// answer within a whole timeout, and checks sent into a stall are charged when it ends,
/// after their callers were refused.
struct Lead<'a> {
    store: &'a RedisStore,
    coalescer: &'a Arc<Coalescer>,
    key: BatchKey,
    layout: BatchLayout,
    runtime: tokio::runtime::Handle,
    timed_out: bool,
}

impl Drop for Lead<'_> {
    fn drop(&mut self) {
        if self.timed_out {
            self.coalescer.abandon(&self.key, Error::Timeout);
        } else if self.coalescer.hand_over(&self.key, Instant::now()) {
            // The driver is moved into the task before it first runs, so even a task
            // dropped unpolled (runtime shutting down) fails the waiting checks.
            let driver = Driver {
                store: self.store.clone(),
                coalescer: Arc::clone(self.coalescer),
                key: std::mem::take(&mut self.key),
                layout: self.layout,
                done: false,
            };
            self.runtime.spawn(driver.run());
        }
    }
}

/// Sends a key's batches until no check of it is left waiting, or one batch timed out
/// (then those queued behind it are failed unsent, as behind a [`Lead`] that timed out).
struct Driver {
    store: RedisStore,
    coalescer: Arc<Coalescer>,
    key: BatchKey,
    layout: BatchLayout,
    done: bool,
}

impl Driver {
    async fn run(mut self) {
        while let Some(batch) = self.coalescer.next_batch(&self.key, Instant::now()) {
            let costs: Vec<u64> = batch.iter().map(|w| w.cost).collect();
            // A batch is never empty; no one waits for its answer past its last deadline.
            let deadline = batch
                .iter()
                .map(|w| w.deadline)
                .max()
                .unwrap_or_else(Instant::now);
            let result = self
                .store
                .batch(&self.key, self.layout, &costs, deadline)
                .await;
            let timed_out = matches!(result, Err(Error::Timeout));
            coalesce::share_out(batch, result);
            if timed_out {
                self.coalescer.abandon(&self.key, Error::Timeout);
                break;
            }
        }
        self.done = true;
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        if !self.done {
            self.coalescer.abandon(
                &self.key,
                Error::unavailable("the runtime stopped the batch"),
            );
        }
    }
}

/// The decision `raw` stands for under `policy`. A reply that cannot be one is the
/// server's fault, never a panic.
fn decision(policy: &Policy, [allowed, remaining, retry, reset]: Raw) -> Result<Decision, Error> {
    if allowed > 1 || remaining > policy.limit() {
        return Err(Error::backend(UnexpectedReply(format!(
            "allowed {allowed}, remaining {remaining} (limit {})",
            policy.limit()
        ))));
    }
    Ok(policy.decision_from_micros(allowed == 1, remaining, retry, reset))
}

impl Store for RedisStore {
    fn check(
        &self,
        key: &[u8],
        policy: &Policy,
        cost: u64,
    ) -> impl Future<Output = Result<Decision, Error>> + Send {
        self.decide(key, policy, cost, None)
    }

    /// Deletes the key (one `DEL`).
    async fn reset(&self, key: &[u8], policy: &Policy) -> Result<(), Error> {
        let mut del = redis::cmd("DEL");
        del.arg(self.redis_key(key, policy));
        self.bounded::<i64>(Op::Cmd(&del)).await.map(drop)
    }
}

impl fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisStore")
            .field("connection", &self.inner.conn.kind())
            .field("prefix", &self.inner.prefix)
            .field("timeout", &self.inner.timeout)
            .field("coalesce", &self.inner.coalescer.is_some())
            .field("stats", &self.stats())
            .finish()
    }
}

impl RedisStoreBuilder {
    /// Every key starts with this (default `floodwall:`), so several applications can
    /// share one Redis. At most 64 printable characters, without `{`, `}` or whitespace.
    ///
    /// ```
    /// let b = floodwall_redis::RedisStore::builder().prefix("shop:limits:");
    /// ```
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// The most one check may take, connecting and waiting for a pooled connection
    /// included (default 1 s); past it the check answers [`Error::Timeout`].
    ///
    /// ```
    /// let b = floodwall_redis::RedisStore::builder().timeout(std::time::Duration::from_millis(50));
    /// ```
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout.max(Duration::from_millis(1));
        self
    }

    /// The most connections a [`pool`](Self::pool) opens (default 8, at least 1).
    ///
    /// ```
    /// let b = floodwall_redis::RedisStore::builder().pool_size(4);
    /// ```
    pub fn pool_size(mut self, size: u32) -> Self {
        self.pool_size = size.max(1);
        self
    }

    /// Connects through redis-rs's multiplexed `ConnectionManager`: one connection that
    /// pipelines concurrent checks and reconnects by itself after a failure. The usual
    /// choice for a single node: no pool to size, and a check costs one round trip.
    ///
    /// `url` is `redis://[user:password@]host[:port][/db]`, `redis+unix:///path/to.sock`,
    /// or `rediss://` (which needs redis-rs's TLS support, not enabled by this crate).
    ///
    /// ```no_run
    /// # async fn f() -> Result<(), floodwall_redis::BuildError> {
    /// let store = floodwall_redis::RedisStore::builder().multiplexed("redis://127.0.0.1/").await?;
    /// # Ok(()) }
    /// ```
    pub async fn multiplexed(self, url: &str) -> Result<RedisStore, BuildError> {
        self.check_prefix()?;
        let conn = Connection::manager(url, self.timeout).await?;
        Ok(self.finish(conn))
    }

    /// Connects through a `bb8-redis` pool of up to [`pool_size`](Self::pool_size)
    /// multiplexed connections. Each checkout is tested with a PING (bb8's default), so a
    /// check costs two round trips, and a connection broken by a restart is replaced.
    ///
    /// ```no_run
    /// # async fn f() -> Result<(), floodwall_redis::BuildError> {
    /// let store = floodwall_redis::RedisStore::builder().pool("redis://127.0.0.1/").await?;
    /// # Ok(()) }
    /// ```
    pub async fn pool(self, url: &str) -> Result<RedisStore, BuildError> {
        self.check_prefix()?;
        let conn = Connection::pool(url, self.pool_size, self.timeout).await?;
        Ok(self.finish(conn))
    }

    /// Connects to a Redis Cluster through any of `urls` (seed nodes). Each check runs on
    /// the master owning its key's slot; MOVED and ASK redirects are followed.
    ///
    /// ```no_run
    /// # async fn f() -> Result<(), floodwall_redis::BuildError> {
    /// let store = floodwall_redis::RedisStore::builder()
    ///     .cluster(["redis://10.0.0.1:7000/", "redis://10.0.0.2:7000/"])
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub async fn cluster<I, S>(self, urls: I) -> Result<RedisStore, BuildError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        self.check_prefix()?;
        let urls: Vec<String> = urls.into_iter().map(|u| u.as_ref().to_owned()).collect();
        let conn = Connection::cluster(&urls, self.timeout).await?;
        Ok(self.finish(conn))
    }

    /// Uses a `ConnectionManager` configured by the caller (TLS, credentials, retries).
    pub fn from_connection_manager(
        self,
        manager: redis::aio::ConnectionManager,
    ) -> Result<RedisStore, BuildError> {
        self.check_prefix()?;
        Ok(self.finish(Connection::Manager(manager)))
    }

    /// Uses a cluster connection configured by the caller.
    pub fn from_cluster(
        self,
        conn: redis::cluster_async::ClusterConnection,
    ) -> Result<RedisStore, BuildError> {
        self.check_prefix()?;
        Ok(self.finish(Connection::Cluster(conn)))
    }

    /// Merges the checks of one key that arrive while a call for it is in flight into one
    /// script call (default on). Exact for GCRA, the buckets and the fixed window, which
    /// it applies to; the sliding window and log are never coalesced. A check of a key with
    /// nothing in flight is sent at once, as without coalescing, so a workload without hot
    /// keys pays next to nothing for it (BENCHMARKS.md: 0.98–1.00× the throughput, the same
    /// latency); under contention a check waits for the call in flight before its batch is
    /// sent (up to two round trips), and a hot key costs Redis one call per round trip
    /// instead of one per check (2.2× the decisions per second at 64 tasks).
    /// `coalesce(false)` sends every check alone.
    ///
    /// A queued check whose caller is gone (request dropped, or [timeout](Self::timeout)
    /// passed) is never sent, and the checks queued behind a call that timed out fail with
    /// [`Error::Timeout`] unsent, so a stalled Redis does not later charge requests it
    /// refused; a check already in a batch in flight when its caller gives up may still be
    /// charged, as any command already sent. At most
    /// [`MAX_QUEUED_PER_KEY`](RedisStore::MAX_QUEUED_PER_KEY) checks wait per key and
    /// [`MAX_QUEUED`](RedisStore::MAX_QUEUED) in all; past them a check fails with
    /// [`Error::Overloaded`].
    ///
    /// ```
    /// let b = floodwall_redis::RedisStore::builder().coalesce(true);
    /// ```
    pub fn coalesce(mut self, on: bool) -> Self {
        self.coalesce = on;
        self
    }

    /// For how many parameter sets (distinct quotas per algorithm; default
    /// [`DEFAULT_WRITTEN_SCRIPTS`](RedisStore::DEFAULT_WRITTEN_SCRIPTS)) the store loads a
    /// script of their own, with the parameters written in: a check of cost 1 then sends
    /// no argument, which costs Redis about a fifth less CPU per check for GCRA and the
    /// buckets (BENCHMARKS.md, section 2). Checks under further parameter sets send them
    /// as arguments to one generic script per algorithm. Each script stays in Redis's
    /// script cache (a few KB) until `SCRIPT FLUSH` or a restart, so policies made on the
    /// fly, a quota per tenant say, are what this bound is for; 0 always sends arguments.
    ///
    /// ```
    /// // At most 16 parameter sets get a script of their own; checks under more send
    /// // their parameters to the algorithm's generic script.
    /// let b = floodwall_redis::RedisStore::builder().written_scripts(16);
    /// ```
    pub fn written_scripts(mut self, n: usize) -> Self {
        self.written_scripts = n;
        self
    }

    fn check_prefix(&self) -> Result<(), BuildError> {
        if key::valid_prefix(&self.prefix) {
            Ok(())
        } else {
            Err(BuildError::InvalidPrefix {
                prefix: self.prefix.clone(),
            })
        }
    }

    fn finish(self, conn: Connection) -> RedisStore {
        RedisStore {
            inner: Arc::new(Inner {
                conn,
                prefix: self.prefix,
                timeout: self.timeout,
                coalescer: self.coalesce.then(Arc::default),
                script_calls: AtomicU64::new(0),
                coalesced: AtomicU64::new(0),
                scripts: Scripts::new(self.written_scripts),
            }),
        }
    }
}
