//! [`RedisStoreBuilder`]: a store's options, and the connection it is built on.

use std::sync::Arc;
use std::time::Duration;

use floodwall_core::DenyCache;

use crate::RedisStore;
use crate::call::Scripts;
use crate::connection::Connection;
use crate::error::BuildError;
use crate::key;
use crate::sentinel::SentinelConnection;
use crate::stats::Counters;
use crate::store::{Direct, Inner};

/// Configures a [`RedisStore`] (key prefix, timeout, pool size, coalescing, deny cache),
/// then connects it.
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
    deny_cache: bool,
    max_refusal_hold: Duration,
    max_ban_hold: Duration,
    written_scripts: usize,
}

impl RedisStoreBuilder {
    /// The defaults (see [`RedisStore::builder`]).
    pub(crate) fn new() -> Self {
        Self {
            prefix: RedisStore::DEFAULT_PREFIX.to_owned(),
            timeout: RedisStore::DEFAULT_TIMEOUT,
            pool_size: RedisStore::DEFAULT_POOL_SIZE,
            coalesce: true,
            deny_cache: true,
            max_refusal_hold: DenyCache::DEFAULT_MAX_REFUSAL_HOLD,
            max_ban_hold: DenyCache::DEFAULT_MAX_BAN_HOLD,
            written_scripts: RedisStore::DEFAULT_WRITTEN_SCRIPTS,
        }
    }

    /// Every key starts with this (default `floodwall:`), so several applications can
    /// share one Redis. At most 64 printable characters, without `{`, `}` or whitespace.
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// The most one check may take, connecting and waiting for a pooled connection
    /// included (default 1 s); past it the check answers
    /// [`Error::Timeout`](floodwall_core::Error::Timeout).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout.max(Duration::from_millis(1));
        self
    }

    /// The most connections a [`pool`](Self::pool) opens (default 8, at least 1).
    pub fn pool_size(mut self, size: u32) -> Self {
        self.pool_size = size.max(1);
        self
    }

    /// Connects through redis-rs's multiplexed, self-reconnecting `ConnectionManager`: the
    /// usual choice for a single node.
    ///
    /// `url` is `redis://[user:password@]host[:port][/db]`, `redis+unix:///path/to.sock`,
    /// or `rediss://` (which needs redis-rs's TLS support, not enabled by this crate).
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

    /// Connects to a Redis Cluster through any of `urls` (its initial nodes). Each check runs on
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

    /// Connects, over one multiplexed connection, to the primary that the sentinels at
    /// `sentinel_urls` (`redis://host:26379/`; the first that answers will do) name for
    /// `service_name` (as in `sentinel monitor <name> ...`), and follows its failovers: the
    /// [Redis store guide](crate::guide::redis#sentinel-failover). For credentials, a
    /// database or TLS on the data nodes, see [`from_sentinel_client`](Self::from_sentinel_client).
    ///
    /// ```no_run
    /// # async fn f() -> Result<(), floodwall_redis::BuildError> {
    /// use floodwall_core::resilience::Fallback;
    ///
    /// let store = floodwall_redis::RedisStore::builder()
    ///     .timeout(std::time::Duration::from_millis(200))
    ///     .sentinel(
    ///         ["redis://10.0.0.1:26379/", "redis://10.0.0.2:26379/", "redis://10.0.0.3:26379/"],
    ///         "mymaster",
    ///     )
    ///     .await?;
    /// // During a failover, each node decides alone with a third of each quota.
    /// let store = Fallback::local(store, 3);
    /// # Ok(()) }
    /// ```
    pub async fn sentinel<I, S>(
        self,
        sentinel_urls: I,
        service_name: &str,
    ) -> Result<RedisStore, BuildError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        self.check_prefix()?;
        let urls: Vec<String> = sentinel_urls
            .into_iter()
            .map(|u| u.as_ref().to_owned())
            .collect();
        let conn = Connection::sentinel(&urls, service_name, self.timeout).await?;
        Ok(self.finish(conn))
    }

    /// Uses a `SentinelClient` configured by the caller (credentials, database or TLS of
    /// the data nodes), which must be built for `SentinelServerType::Master`. It connects on
    /// the first check, and fails over as [`sentinel`](Self::sentinel) does.
    ///
    /// ```no_run
    /// # fn f() -> Result<(), Box<dyn std::error::Error>> {
    /// use floodwall_redis::redis::RedisConnectionInfo;
    /// use floodwall_redis::redis::sentinel::{
    ///     SentinelClient, SentinelNodeConnectionInfo, SentinelServerType,
    /// };
    ///
    /// let data_nodes = SentinelNodeConnectionInfo::default()
    ///     .set_redis_connection_info(RedisConnectionInfo::default().set_password("secret"));
    /// let client = SentinelClient::build(
    ///     vec!["redis://10.0.0.1:26379/"],
    ///     "mymaster".to_owned(),
    ///     Some(data_nodes),
    ///     SentinelServerType::Master,
    /// )?;
    /// let store = floodwall_redis::RedisStore::builder().from_sentinel_client(client)?;
    /// # Ok(()) }
    /// ```
    pub fn from_sentinel_client(
        self,
        client: redis::sentinel::SentinelClient,
    ) -> Result<RedisStore, BuildError> {
        self.check_prefix()?;
        let conn = SentinelConnection::new(client, self.timeout);
        Ok(self.finish(Connection::Sentinel(Arc::new(conn))))
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
        Ok(self.finish(Connection::cluster_from(conn)))
    }

    /// Merges checks that arrive while a call of theirs is in flight into one exact script
    /// call (default on; not the sliding window and log), past
    /// [`MAX_QUEUED_PER_GROUP`](RedisStore::MAX_QUEUED_PER_GROUP) or
    /// [`MAX_QUEUED`](RedisStore::MAX_QUEUED) waiting failing with
    /// [`Error::Overloaded`](floodwall_core::Error::Overloaded): the
    /// [Redis store guide](crate::guide::redis#coalescing).
    pub fn coalesce(mut self, on: bool) -> Self {
        self.coalesce = on;
        self
    }

    /// Refuses locally, without a script call, what Redis is known to refuse (default on),
    /// through a [`DenyCache`](floodwall_core::DenyCache) whose holds are set below; the
    /// `_at` methods bypass it. What it assumes: the
    /// [Redis store guide](crate::guide::redis#the-deny-cache).
    pub fn deny_cache(mut self, on: bool) -> Self {
        self.deny_cache = on;
        self
    }

    /// How long the [deny cache](Self::deny_cache) answers a refusal without asking Redis
    /// again, and so how late a reset made elsewhere is seen here; as
    /// [`DenyCacheBuilder::max_refusal_hold`](floodwall_core::DenyCacheBuilder::max_refusal_hold).
    pub fn deny_cache_max_refusal_hold(mut self, hold: Duration) -> Self {
        self.max_refusal_hold = hold;
        self
    }

    /// How long the [deny cache](Self::deny_cache) answers a ban without asking Redis again,
    /// and so how late an unban made elsewhere is seen here; as
    /// [`DenyCacheBuilder::max_ban_hold`](floodwall_core::DenyCacheBuilder::max_ban_hold).
    pub fn deny_cache_max_ban_hold(mut self, hold: Duration) -> Self {
        self.max_ban_hold = hold;
        self
    }

    /// For how many parameter sets (default
    /// [`DEFAULT_WRITTEN_SCRIPTS`](RedisStore::DEFAULT_WRITTEN_SCRIPTS)) a script has them
    /// written in; past it (or with 0), checks send them (the
    /// [Redis store guide](crate::guide::redis#what-a-check-costs-redis)).
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
        let direct = RedisStore {
            inner: Arc::new(Inner {
                conn,
                prefix: self.prefix,
                timeout: self.timeout,
                coalescer: self.coalesce.then(Arc::default),
                counters: Counters::default(),
                scripts: Scripts::new(self.written_scripts),
                leases: Default::default(),
            }),
            deny: None,
        };
        // A check waits for another's answer at most as long as a check may take.
        let deny = self.deny_cache.then(|| {
            Arc::new(
                DenyCache::builder()
                    .max_wait(self.timeout.max(DenyCache::DEFAULT_MAX_WAIT))
                    .max_refusal_hold(self.max_refusal_hold)
                    .max_ban_hold(self.max_ban_hold)
                    .build(Direct(direct.clone())),
            )
        });
        RedisStore { deny, ..direct }
    }
}
