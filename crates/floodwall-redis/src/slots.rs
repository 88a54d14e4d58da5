//! Which node of a Redis Cluster serves a key, as far as this store knows: its own copy of
//! the cluster's slot map, so that checks of keys served by one node can share a batch.
//!
//! The copy is a hint, never a promise: a batch declares no key, so Redis refuses one its
//! node does not serve before anything is written, and a stale copy costs retries, never a
//! wrong decision ([`crate::guide::redis`], "On a cluster"). It is read from
//! `CLUSTER SLOTS` when the store is built (or when the first check needs it) and again
//! after a batch fails, at most once per [`REFRESH_EVERY`].

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, Instant};

use redis::Value;
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
use tokio::runtime::Handle;

/// Redis Cluster's slot count.
const SLOTS: usize = 16_384;

/// The least time between two reads of the slot map.
pub(crate) const REFRESH_EVERY: Duration = Duration::from_millis(100);

/// Set on a node number for a slot whose node is not known: checks of that slot share
/// batches among themselves only.
const BY_SLOT: u32 = 1 << 16;

/// The store's copy of a cluster's slot map.
#[derive(Default)]
pub(crate) struct Slots {
    /// For each slot, a number naming the master that serves it (its place in the map's
    /// list of masters), or `None` before the map was first read.
    map: RwLock<Option<Arc<[u16]>>>,
    /// A read of the map is under way: set when one is spawned, cleared when its task is
    /// dropped, however it ends (its runtime may shut down before it does).
    reading: AtomicBool,
    /// When the last read started.
    last: Mutex<Option<Instant>>,
}

impl Slots {
    /// A number naming the node `key` is served by, for grouping checks into batches: the
    /// master's number in the map, or [`BY_SLOT`] and the key's slot when the map is not
    /// known yet (then a read of it is started on `runtime`).
    pub(crate) fn node_of(
        self: &Arc<Self>,
        key: &[u8],
        conn: &ClusterConnection,
        runtime: &Handle,
    ) -> u32 {
        let slot = slot_of(key);
        let map = self.map.read().unwrap_or_else(PoisonError::into_inner);
        match map.as_deref() {
            Some(map) => match map[usize::from(slot)] {
                u16::MAX => BY_SLOT | u32::from(slot),
                node => u32::from(node),
            },
            None => {
                drop(map);
                self.refresh(conn, runtime);
                BY_SLOT | u32::from(slot)
            }
        }
    }

    /// Reads the slot map again, in the background, unless a read is under way or one
    /// started less than [`REFRESH_EVERY`] ago: after a batch that a node refused, the
    /// slots may have moved.
    pub(crate) fn refresh(self: &Arc<Self>, conn: &ClusterConnection, runtime: &Handle) {
        {
            let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
            if last.is_some_and(|at| at.elapsed() < REFRESH_EVERY)
                || self.reading.swap(true, Ordering::AcqRel)
            {
                return;
            }
            *last = Some(Instant::now());
        }
        // Made before it is spawned, so that it is dropped even if the task never runs.
        let reading = Reading(Arc::clone(self));
        let mut conn = conn.clone();
        runtime.spawn(async move {
            reading.0.read(&mut conn).await;
            drop(reading);
        });
    }

    /// Reads the slot map from `CLUSTER SLOTS` on any node. A failed read leaves the copy
    /// as it was: batches that fail are sent again check by check meanwhile, and the next
    /// failure reads it again.
    pub(crate) async fn read(&self, conn: &mut ClusterConnection) {
        let reply = conn
            .route_command(
                redis::cmd("CLUSTER").arg("SLOTS").clone(),
                RoutingInfo::SingleNode(SingleNodeRoutingInfo::Random),
            )
            .await;
        if let Some(map) = reply.ok().as_ref().and_then(parse) {
            *self.map.write().unwrap_or_else(PoisonError::into_inner) = Some(map);
        }
    }
}

/// Owned by the task reading the map: clears [`Slots::reading`] when dropped.
struct Reading(Arc<Slots>);

impl Drop for Reading {
    fn drop(&mut self) {
        self.0.reading.store(false, Ordering::Release);
    }
}

/// Redis Cluster's slot of `key`: CRC16 (XMODEM) of its [hash tag](hash_tag) or, without
/// one, of the whole key, mod 16384.
pub(crate) fn slot_of(key: &[u8]) -> u16 {
    crc16::State::<crc16::XMODEM>::calculate(hash_tag(key).unwrap_or(key)) % SLOTS as u16
}

/// The hash tag Redis Cluster takes from `key`: the bytes between its first `{` and the
/// first `}` after it; `None` when there are none (then the whole key is hashed).
pub(crate) fn hash_tag(key: &[u8]) -> Option<&[u8]> {
    let open = key.iter().position(|&b| b == b'{')?;
    let rest = &key[open + 1..];
    let close = rest.iter().position(|&b| b == b'}')?;
    (close > 0).then(|| &rest[..close])
}

/// The slot map from a `CLUSTER SLOTS` reply: `[first, last, [host, port, ..], ..]` per
/// range; each master is numbered by its first appearance. `None` if the reply does not
/// read so.
fn parse(reply: &Value) -> Option<Arc<[u16]>> {
    let Value::Array(ranges) = reply else {
        return None;
    };
    let mut map = vec![u16::MAX; SLOTS];
    let mut masters: Vec<(&[u8], i64)> = Vec::new();
    for range in ranges {
        let Value::Array(fields) = range else {
            return None;
        };
        let [
            Value::Int(first),
            Value::Int(last),
            Value::Array(master),
            ..,
        ] = &fields[..]
        else {
            return None;
        };
        let [Value::BulkString(host), Value::Int(port), ..] = &master[..] else {
            return None;
        };
        let node = match masters.iter().position(|m| *m == (&host[..], *port)) {
            Some(i) => i,
            None => {
                masters.push((host, *port));
                masters.len() - 1
            }
        };
        let node = u16::try_from(node).ok()?;
        let first = usize::try_from(*first).ok()?;
        let last = usize::try_from(*last).ok()?;
        map.get_mut(first..=last)?.fill(node);
    }
    Some(map.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_redis_clusters() {
        // As `CLUSTER KEYSLOT` answers.
        assert_eq!(slot_of(b"a"), 15495);
        assert_eq!(slot_of(b"b"), 3300);
        assert_eq!(slot_of(b"floodwall:p:gcra.1:{b}"), 3300);
        // An empty tag, or none closed: the whole key.
        assert_eq!(slot_of(b"x{}{b}"), 10463);
        assert_eq!(slot_of(b"{b"), 6215);
    }

    /// A read of the map runs on the runtime of the check that asked for it. If that
    /// runtime shuts down before the read ends, a later check, on another runtime, still
    /// gets the map read.
    #[test]
    fn a_read_whose_runtime_shut_down_is_started_again() {
        let cluster = redis_harness::RedisCluster::start(3);
        // The connection is driven by `b`, which outlives `a`.
        let b = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let client = redis::cluster::ClusterClient::new(cluster.urls()).unwrap();
        let conn = b.block_on(client.get_async_connection()).unwrap();
        let slots = Arc::new(Slots::default());
        let a = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        // Asked for on `a`, which ends before the read is ever polled.
        a.block_on(async { slots.refresh(&conn, &Handle::current()) });
        drop(a);
        assert!(!slots.reading.load(Ordering::Acquire), "no read runs");
        assert!(slots.map.read().unwrap().is_none());
        // Past the least time between reads.
        *slots.last.lock().unwrap() = None;
        b.block_on(async {
            slots.refresh(&conn, &Handle::current());
            for _ in 0..500 {
                if slots.map.read().unwrap().is_some() {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            panic!("the map was never read");
        });
    }

    #[test]
    fn a_slots_reply_reads_as_a_map_of_masters() {
        let node = |port: i64| {
            Value::Array(vec![
                Value::BulkString(b"127.0.0.1".to_vec()),
                Value::Int(port),
                Value::BulkString(b"id".to_vec()),
            ])
        };
        let range =
            |first, last, port| Value::Array(vec![Value::Int(first), Value::Int(last), node(port)]);
        let reply = Value::Array(vec![
            range(0, 99, 7001),
            range(100, 16382, 7002),
            range(16383, 16383, 7001),
        ]);
        let map = parse(&reply).unwrap();
        assert_eq!((map[0], map[99], map[100], map[16382]), (0, 0, 1, 1));
        assert_eq!(map[16383], 0, "one master, one number");
        assert!(parse(&Value::Array(vec![range(0, 16384, 7001)])).is_none());
        assert!(parse(&Value::Nil).is_none());
        // Slots no master serves are told apart.
        let partial = parse(&Value::Array(vec![range(0, 9, 7001)])).unwrap();
        assert_eq!(partial[10], u16::MAX);
    }
}
