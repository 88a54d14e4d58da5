//! The Sentinel connection kind: one multiplexed connection to the primary that Redis
//! Sentinel names, replaced by a connection to the new primary after a failover.
//!
//! redis-rs's `ConnectionManager` reconnects to the address it was given (after a failover,
//! the old primary), so this kind keeps the connection it got from the sentinels and asks
//! them again when that connection fails (an I/O error, a timeout, `READONLY`) and every
//! [`REFRESH`] in the background; lookups run one at a time, and calls that waited for a
//! failed one share its error. [`crate::guide::redis`] ("Sentinel failover") says why.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use floodwall_core::Error;
use redis::aio::MultiplexedConnection;
use redis::sentinel::SentinelClient;
use redis::{
    AsyncConnectionConfig, ConnectionAddr, ErrorKind, FromRedisValue, RedisError, ServerErrorKind,
};

use crate::error::to_core;
use crate::op::{Op, exec};

/// How often the sentinels are asked whether the primary moved while its connection works.
pub(crate) const REFRESH: Duration = Duration::from_secs(1);

/// The primary of a service monitored by Redis Sentinel, found again after each failover.
pub(crate) struct SentinelConnection {
    /// Asks the sentinels (it needs `&mut`, so one lookup at a time).
    lookup: tokio::sync::Mutex<Lookup>,
    /// The connection to the primary the last lookup found, until it fails (shared, so a
    /// call takes it without copying its address).
    current: Mutex<Option<Arc<Primary>>>,
    /// How the primary's connection is opened (connection and response timeouts).
    config: AsyncConnectionConfig,
    /// The store's bound on a call.
    timeout: Duration,
    /// When the next background refresh is due, in ms since `born`.
    next_refresh_ms: AtomicU64,
    born: Instant,
}

/// One connection to one primary; `generation` tells a replaced one from its successor.
struct Primary {
    generation: u64,
    addr: ConnectionAddr,
    conn: MultiplexedConnection,
}

struct Lookup {
    client: SentinelClient,
    /// Generations handed out so far.
    generations: u64,
    /// When the last lookup for a missing connection ended, and why it failed if it did.
    last: Option<(Instant, Option<String>)>,
}

impl SentinelConnection {
    /// A connection that looks the primary up through `client` (which must be built for
    /// `SentinelServerType::Master`) on its first call.
    pub(crate) fn new(client: SentinelClient, timeout: Duration) -> Self {
        Self {
            lookup: tokio::sync::Mutex::new(Lookup {
                client,
                generations: 0,
                last: None,
            }),
            current: Mutex::new(None),
            config: AsyncConnectionConfig::new()
                .set_connection_timeout(Some(timeout))
                .set_response_timeout(Some(timeout)),
            timeout,
            next_refresh_ms: AtomicU64::new(0),
            born: Instant::now(),
        }
    }

    fn current(&self) -> Option<Arc<Primary>> {
        self.current
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Drops the connection of `generation`, if it is still the current one, so that the
    /// next call asks the sentinels.
    fn forget(&self, generation: u64) {
        let mut current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        if current.as_ref().is_some_and(|p| p.generation == generation) {
            *current = None;
        }
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.born.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Asks the sentinels for the primary and makes a connection to it the current one,
    /// unless it is `keep`'s node, which is kept.
    async fn look_up(
        &self,
        lookup: &mut Lookup,
        keep: Option<&Arc<Primary>>,
    ) -> Result<Arc<Primary>, RedisError> {
        let client = lookup.client.async_get_client().await?;
        let addr = client.get_connection_info().addr().clone();
        let next = self.now_ms() + REFRESH.as_millis() as u64;
        self.next_refresh_ms.store(next, Ordering::Relaxed);
        if let Some(keep) = keep
            && keep.addr == addr
        {
            return Ok(Arc::clone(keep));
        }
        let conn = client
            .get_multiplexed_async_connection_with_config(&self.config)
            .await?;
        lookup.generations += 1;
        let primary = Arc::new(Primary {
            generation: lookup.generations,
            addr,
            conn,
        });
        *self.current.lock().unwrap_or_else(PoisonError::into_inner) = Some(Arc::clone(&primary));
        Ok(primary)
    }

    /// Looks the primary up for a call that has no connection, unless another call did so
    /// (or failed to) while this one waited for its turn.
    async fn connect(&self) -> Result<Arc<Primary>, Error> {
        let asked = Instant::now();
        let mut lookup = self.lookup.lock().await;
        if let Some(primary) = self.current() {
            return Ok(primary);
        }
        if let Some((ended, Some(why))) = &lookup.last
            && *ended >= asked
        {
            return Err(Error::unavailable(why.clone()));
        }
        match self.look_up(&mut lookup, None).await {
            Ok(primary) => {
                lookup.last = Some((Instant::now(), None));
                Ok(primary)
            }
            Err(e) => {
                // A lookup during a failover finds the primary down, or a primary that
                // refuses connections: either way it is unavailable, for now.
                let why = format!("no primary from Redis Sentinel: {e}");
                lookup.last = Some((Instant::now(), Some(why.clone())));
                Err(Error::unavailable(why))
            }
        }
    }

    /// Starts a background refresh when one is due (at most one per [`REFRESH`]).
    fn refresh_if_due(self: &Arc<Self>) {
        let now = self.now_ms();
        let due = self.next_refresh_ms.load(Ordering::Relaxed);
        let next = now + REFRESH.as_millis() as u64;
        let (relaxed, refresh) = (Ordering::Relaxed, &self.next_refresh_ms);
        if now < due
            || refresh
                .compare_exchange(due, next, relaxed, relaxed)
                .is_err()
        {
            return;
        }
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(Arc::clone(self).refresh());
        }
    }

    /// Asks the sentinels whether the primary moved, and moves the connection if it did.
    /// A failed lookup changes nothing: the connection in use still works.
    async fn refresh(self: Arc<Self>) {
        let Some(current) = self.current() else {
            return;
        };
        let mut lookup = self.lookup.lock().await;
        if self.current().map(|p| p.generation) != Some(current.generation) {
            return;
        }
        let _ = tokio::time::timeout(self.timeout, self.look_up(&mut lookup, Some(&current))).await;
    }

    /// Runs `op` on the current primary, looking it up first if need be.
    pub(crate) async fn query<T: FromRedisValue>(self: &Arc<Self>, op: Op<'_>) -> Result<T, Error> {
        let primary = match self.current() {
            Some(primary) => {
                self.refresh_if_due();
                primary
            }
            // Boxed: the lookup's future (redis-rs's, deep) would otherwise be laid out
            // inside every check's, which runs into rustc's query depth limit in callers.
            None => Box::pin(self.connect()).await?,
        };
        // Forgets the connection if the caller's timeout passes before the reply.
        let mut in_flight = InFlight {
            conn: self,
            generation: primary.generation,
            sent: Instant::now(),
            done: false,
        };
        let result = exec(&mut primary.conn.clone(), op).await;
        in_flight.done = true;
        result.map_err(|e| {
            if matches!(e.kind(), ErrorKind::Server(ServerErrorKind::ReadOnly)) {
                self.forget(primary.generation);
                return Error::unavailable(e);
            }
            if moved_or_gone(&e) {
                self.forget(primary.generation);
            }
            to_core(e)
        })
    }
}

/// Whether `e` says the connection cannot be used again: the primary may have moved.
fn moved_or_gone(e: &RedisError) -> bool {
    e.is_io_error() || e.is_connection_dropped() || e.is_connection_refusal() || e.is_timeout()
}

/// A call on the primary's connection. Dropped before its reply after waiting for it at
/// least half the store's timeout (the rest may have gone to the lookup), the caller timed
/// out: it forgets that connection, since a primary that does not answer in time may have
/// been cut off and replaced. A caller that went away sooner (a request cancelled) leaves
/// it alone.
struct InFlight<'a> {
    conn: &'a SentinelConnection,
    generation: u64,
    sent: Instant,
    done: bool,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if !self.done && self.sent.elapsed() >= self.conn.timeout / 2 {
            self.conn.forget(self.generation);
        }
    }
}

impl fmt::Debug for SentinelConnection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SentinelConnection")
            .field("connected", &self.current().is_some())
            .finish_non_exhaustive()
    }
}
