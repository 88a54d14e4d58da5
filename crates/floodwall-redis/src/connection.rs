//! The four connection kinds behind one store type, and how each is opened.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use bb8_redis::RedisConnectionManager;
use floodwall_core::Error;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::sentinel::{SentinelClient, SentinelServerType};
use redis::{FromRedisValue, RedisError};
use tokio::runtime::Handle;

use crate::error::{BuildError, build_error, to_core};
use crate::op::{Op, exec, exec_on_node};
use crate::sentinel::SentinelConnection;
use crate::slots::Slots;

/// How the store reaches Redis.
#[derive(Clone)]
pub(crate) enum Connection {
    /// A bb8 pool of multiplexed connections, each checked with a PING when taken out.
    Pool {
        pool: bb8::Pool<RedisConnectionManager>,
        /// The pool connects in the background; this keeps its last failure so a caller
        /// that timed out waiting can be told why (connection refused, say).
        last_error: Arc<LastError>,
    },
    /// One multiplexed connection that pipelines concurrent calls and reconnects by itself.
    Manager(ConnectionManager),
    /// Redis Cluster: routes each call to the master of its key's slot, follows redirects;
    /// the store's copy of the slot map groups checks into batches per node.
    Cluster(ClusterConnection, Arc<Slots>),
    /// The primary Redis Sentinel names, looked up again after its connection fails.
    Sentinel(Arc<SentinelConnection>),
}

impl Connection {
    /// A bb8 pool of up to `size` connections; connects one before returning.
    pub(crate) async fn pool(url: &str, size: u32, timeout: Duration) -> Result<Self, BuildError> {
        let manager = RedisConnectionManager::new(url).map_err(build_error)?;
        let last_error = Arc::new(LastError::default());
        let pool = bb8::Pool::builder()
            .max_size(size.max(1))
            .connection_timeout(timeout.max(Duration::from_millis(1)))
            .error_sink(Box::new(Sink(last_error.clone())))
            .build_unchecked(manager);
        let conn = Self::Pool { pool, last_error };
        conn.ping().await?;
        Ok(conn)
    }

    /// A `ConnectionManager`; connects before returning.
    pub(crate) async fn manager(url: &str, timeout: Duration) -> Result<Self, BuildError> {
        let client = redis::Client::open(url).map_err(build_error)?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(timeout))
            .set_response_timeout(Some(timeout))
            // Reconnect quickly and report a dead server as such, rather than retrying for
            // longer than a check may take.
            .set_number_of_retries(1)
            .set_min_delay(Duration::from_millis(20))
            .set_max_delay(timeout);
        let manager = ConnectionManager::new_with_config(client, config)
            .await
            .map_err(build_error)?;
        Ok(Self::Manager(manager))
    }

    /// An async cluster connection from any reachable one of its initial nodes.
    pub(crate) async fn cluster(urls: &[String], timeout: Duration) -> Result<Self, BuildError> {
        let client = ClusterClient::builder(urls.iter().map(String::as_str))
            .connection_timeout(timeout)
            .response_timeout(timeout)
            .retries(3)
            .build()
            .map_err(build_error)?;
        let mut conn = client.get_async_connection().await.map_err(build_error)?;
        let slots = Arc::new(Slots::default());
        slots.read(&mut conn).await;
        Ok(Self::Cluster(conn, slots))
    }

    /// A cluster connection made elsewhere, with no slot map read yet.
    pub(crate) fn cluster_from(conn: ClusterConnection) -> Self {
        Self::Cluster(conn, Arc::default())
    }

    /// The primary of `service` as the sentinels at `urls` name it; connects before
    /// returning.
    pub(crate) async fn sentinel(
        urls: &[String],
        service: &str,
        timeout: Duration,
    ) -> Result<Self, BuildError> {
        let client = SentinelClient::build(
            urls.iter().map(String::as_str).collect(),
            service.to_owned(),
            None,
            SentinelServerType::Master,
        )
        .map_err(build_error)?;
        let conn = Self::Sentinel(Arc::new(SentinelConnection::new(client, timeout)));
        conn.ping().await?;
        Ok(conn)
    }

    /// Fails unless the server answers PING.
    async fn ping(&self) -> Result<(), BuildError> {
        self.query::<String>(Op::Cmd(&redis::cmd("PING")))
            .await
            .map(drop)
            .map_err(|e| BuildError::Connect {
                source: Box::new(e),
            })
    }

    /// Runs one script or command, mapping every failure onto floodwall's [`Error`].
    pub(crate) async fn query<T: FromRedisValue>(&self, op: Op<'_>) -> Result<T, Error> {
        let result = match self {
            Self::Pool { pool, last_error } => {
                let mut con = pool.get().await.map_err(|e| match e {
                    bb8::RunError::User(e) => to_core(e),
                    bb8::RunError::TimedOut => last_error.explain_timeout(),
                })?;
                exec(&mut *con, op).await
            }
            Self::Manager(m) => exec(&mut m.clone(), op).await,
            Self::Cluster(c, _) => match op {
                Op::Keyless {
                    evalsha,
                    text,
                    route,
                } => exec_on_node(&mut c.clone(), evalsha, text, route).await,
                op => exec(&mut c.clone(), op).await,
            },
            Self::Sentinel(s) => return s.query(op).await,
        };
        result.map_err(to_core)
    }

    /// A number naming the Redis node serving `key`, as far as this store knows: checks of
    /// one node may share a batch. Always 0 but on a cluster.
    pub(crate) fn node_of(&self, key: &[u8], runtime: &Handle) -> u32 {
        match self {
            Self::Cluster(c, slots) => slots.node_of(key, c, runtime),
            _ => 0,
        }
    }

    /// Whether a batch declares its keys: everywhere but on a cluster, where a batch's keys
    /// span slots (see `crate::call::Batch::call`).
    pub(crate) fn declares_batch_keys(&self) -> bool {
        !matches!(self, Self::Cluster(..))
    }

    /// A batch was refused: on a cluster, the slots may have moved, so the store's copy of
    /// the slot map is read again (at most every `crate::slots::REFRESH_EVERY`).
    pub(crate) fn batch_refused(&self, runtime: &Handle) {
        if let Self::Cluster(c, slots) = self {
            slots.refresh(c, runtime);
        }
    }

    /// The kind's name, for `Debug`.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Self::Pool { .. } => "bb8 pool",
            Self::Manager(_) => "connection manager",
            Self::Cluster(..) => "cluster",
            Self::Sentinel(_) => "sentinel",
        }
    }
}

/// The pool's most recent connection failure and when it happened.
#[derive(Debug, Default)]
pub(crate) struct LastError(Mutex<Option<(Instant, String)>>);

impl LastError {
    /// A pool wait that timed out is [`Error::Unavailable`] when the pool failed to connect
    /// moments ago (the server refuses connections), and [`Error::Timeout`] otherwise.
    fn explain_timeout(&self) -> Error {
        let last = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        match &*last {
            Some((at, msg)) if at.elapsed() < Duration::from_secs(5) => {
                Error::unavailable(format!("no pooled connection: {msg}"))
            }
            _ => Error::Timeout,
        }
    }
}

#[derive(Debug, Clone)]
struct Sink(Arc<LastError>);

impl bb8::ErrorSink<RedisError> for Sink {
    fn sink(&self, error: RedisError) {
        let mut last = self.0.0.lock().unwrap_or_else(PoisonError::into_inner);
        *last = Some((Instant::now(), error.to_string()));
    }

    fn boxed_clone(&self) -> Box<dyn bb8::ErrorSink<RedisError>> {
        Box::new(self.clone())
    }
}
