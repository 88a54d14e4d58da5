//! The Sentinel connection kind: one multiplexed connection to the primary that Redis
//! Sentinel names, replaced by a connection to the new primary after a failover.
//!
//! redis-rs's `ConnectionManager` reconnects to the address it was given, which after a
//! failover is the old primary (dead, or back as a read-only replica), and its
//! `SentinelClient` finds the primary only when asked for a new connection. So this kind
//! keeps the connection it got from the sentinels and asks them again when that connection
//! fails: an I/O error, a dropped or refused connection, a timeout (a call whose caller
//! gave up counts too), or `READONLY` (the node was demoted). The call that failed answers
//! its error (it may have been applied, so it is not retried); the next call looks the
//! primary up. Lookups are one at a time; calls that waited for a lookup that failed share
//! its error rather than ask again.

use std::fmt;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use floodwall_core::Error;
use redis::aio::MultiplexedConnection;
use redis::sentinel::SentinelClient;
use redis::{AsyncConnectionConfig, ErrorKind, FromRedisValue, RedisError, ServerErrorKind};

use crate::connection::{Op, exec};
use crate::error::to_core;

/// The primary of a service monitored by Redis Sentinel, found again after each failover.
pub(crate) struct SentinelConnection {
    /// Asks the sentinels (it needs `&mut`, so one lookup at a time).
    lookup: tokio::sync::Mutex<Lookup>,
    /// The connection to the primary the last lookup found, until it fails.
    current: Mutex<Option<Primary>>,
    /// How the primary's connection is opened (connection and response timeouts).
    config: AsyncConnectionConfig,
}

/// One connection to one primary; `generation` tells a replaced one from its successor.
#[derive(Clone)]
struct Primary {
    generation: u64,
    conn: MultiplexedConnection,
}

struct Lookup {
    client: SentinelClient,
    /// Generations handed out so far.
    generations: u64,
    /// When the last lookup ended, and why it failed if it did.
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
        }
    }

    fn current(&self) -> Option<Primary> {
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

    /// Asks the sentinels for the primary and connects to it, unless another call did so
    /// (or failed to) while this one waited for its turn.
    async fn connect(&self) -> Result<Primary, Error> {
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
        let found = match lookup.client.async_get_client().await {
            Ok(client) => {
                client
                    .get_multiplexed_async_connection_with_config(&self.config)
                    .await
            }
            Err(e) => Err(e),
        };
        match found {
            Ok(conn) => {
                lookup.generations += 1;
                lookup.last = Some((Instant::now(), None));
                let primary = Primary {
                    generation: lookup.generations,
                    conn,
                };
                *self.current.lock().unwrap_or_else(PoisonError::into_inner) =
                    Some(primary.clone());
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

    /// Runs `op` on the current primary, looking it up first if need be.
    pub(crate) async fn query<T: FromRedisValue>(&self, op: Op<'_>) -> Result<T, Error> {
        let primary = match self.current() {
            Some(primary) => primary,
            // Boxed: the lookup's future (redis-rs's, deep) would otherwise be laid out
            // inside every check's, which runs into rustc's query depth limit in callers.
            None => Box::pin(self.connect()).await?,
        };
        // Forgets the connection if the caller gives up before the reply (its timeout).
        let mut in_flight = InFlight {
            conn: self,
            generation: primary.generation,
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

/// A call on the primary's connection; dropped before its reply, it forgets that
/// connection: a primary that does not answer in time may be cut off from a failover.
struct InFlight<'a> {
    conn: &'a SentinelConnection,
    generation: u64,
    done: bool,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if !self.done {
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
