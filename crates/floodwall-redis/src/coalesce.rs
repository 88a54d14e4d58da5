//! Coalescing: concurrent checks of one key from this process share one script call.
//!
//! When a key is hot, every check pays a round trip and a script for the same few bytes of
//! state. With [`RedisStoreBuilder::coalesce`](crate::RedisStoreBuilder::coalesce) (on by
//! default), a check of a key with no call in flight is sent at once, alone, by its own
//! caller (no task, no channel: an uncontended key costs what it costs without
//! coalescing); checks of the same key that arrive while a call is in flight queue up and
//! go together as the next *batch*, sent by a driver task. A batch is one EVALSHA of a
//! batch script (the algorithm's file driven by `src/lua/batch.lua`) carrying the checks'
//! costs in arrival order; the script runs the algorithm's per-check logic once per cost,
//! at one instant (one `TIME`), carrying the state between them in Lua and writing it
//! once, and answers each check's four integers, which are shared out in arrival order.
//!
//! # Exactness
//!
//! A batch answers exactly what the same checks, sent one after another at the batch's
//! instant, would get from the single scripts: both paste the same `@step` section of the
//! algorithm's file (see `src/script.rs`), once or in a loop, and the state the loop
//! carries is the state the single script would have written and read back.
//! `tests/coalesce.rs` checks this against
//! [`Policy::decide`](floodwall_core::Policy::decide) on random states and batches, on a
//! real `redis-server`. That holds for GCRA, the token and leaky buckets and the fixed
//! window. What differs from uncoalesced calls is only *when* each check is decided: a
//! check that joins a batch is decided when the batch runs (at most one round trip later
//! than it would have been), with the batch's clock reading.
//!
//! The sliding window and the sliding log are **not coalesced**: their state is a hash or
//! a sorted set rewritten by several commands, and a batch script for them is not written.
//! Their checks go straight to their single scripts, as without coalescing.
//!
//! # Cost
//!
//! A check that joins a batch waits for the call in flight before its own is sent, so under
//! contention a check can take two round trips instead of one. In exchange a hot key costs
//! Redis one script call per round trip instead of one per check. A key with nothing in
//! flight costs nearly what it would without coalescing: its check goes out inline, after
//! a lookup in the process-wide table of keys in flight (a mutex, taken again when the
//! call ends, and the key hashed and copied); BENCHMARKS.md §2 measures 0.98–1.00× the
//! decisions per second on keys that are not shared. That is why
//! coalescing is on by default. [`RedisStats`](crate::RedisStats) counts the calls made and
//! the ones saved.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use floodwall_core::Error;
use tokio::sync::oneshot;

use crate::reply::Raw;

/// The most checks one batch carries; later arrivals wait for the next batch.
pub(crate) const MAX_BATCH: usize = 256;

/// Which checks may share a call: the same Redis key at the same explicit time (or all on
/// the server's clock).
pub(crate) type BatchKey = (Vec<u8>, Option<u64>);

/// A check waiting for its batch.
pub(crate) struct Waiter {
    pub(crate) cost: u64,
    pub(crate) reply: oneshot::Sender<Result<Raw, Error>>,
}

/// Checks waiting to be sent, per key. A key is present while a call for it is in flight
/// (a leader's single check, then a driver task's batches); the last of them removes it
/// when no check is left waiting.
#[derive(Default)]
pub(crate) struct Coalescer {
    waiting: Mutex<HashMap<BatchKey, Vec<Waiter>>>,
}

impl Coalescer {
    /// Queues a check of `cost` for `key` behind the call in flight for it, or returns
    /// `None` when there is none: the caller then sends its check alone and must call
    /// [`hand_over`](Self::hand_over) when that call ends.
    pub(crate) fn join(
        &self,
        key: &BatchKey,
        cost: u64,
    ) -> Option<oneshot::Receiver<Result<Raw, Error>>> {
        let mut waiting = self.lock();
        match waiting.get_mut(key) {
            Some(queue) => {
                let (reply, rx) = oneshot::channel();
                queue.push(Waiter { cost, reply });
                Some(rx)
            }
            None => {
                waiting.insert(key.clone(), Vec::new());
                None
            }
        }
    }

    /// A leader's call for `key` ended: `true` if checks queued behind it (the caller
    /// starts a driver for them), else the key is forgotten and `false`.
    pub(crate) fn hand_over(&self, key: &BatchKey) -> bool {
        let mut waiting = self.lock();
        if waiting.get(key).is_some_and(|q| !q.is_empty()) {
            return true;
        }
        waiting.remove(key);
        false
    }

    /// The next batch for `key`, oldest first, or `None` (and the key forgotten) when no
    /// check is waiting: the driver then stops.
    pub(crate) fn next_batch(&self, key: &BatchKey) -> Option<Vec<Waiter>> {
        let mut waiting = self.lock();
        let queue = waiting.get_mut(key)?;
        if queue.is_empty() {
            waiting.remove(key);
            return None;
        }
        let n = queue.len().min(MAX_BATCH);
        Some(queue.drain(..n).collect())
    }

    /// Fails every check waiting for `key` (when no driver could be started).
    pub(crate) fn abandon(&self, key: &BatchKey, error: Error) {
        let queue = self.lock().remove(key).unwrap_or_default();
        share_out(queue, Err(error));
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<BatchKey, Vec<Waiter>>> {
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Hands a batch's answers out in arrival order, or its error to every check in it.
pub(crate) fn share_out(batch: Vec<Waiter>, result: Result<Vec<Raw>, Error>) {
    match result {
        Ok(raws) => {
            for (w, raw) in batch.into_iter().zip(raws) {
                // A check whose caller gave up (timed out, dropped) was still decided.
                let _ = w.reply.send(Ok(raw));
            }
        }
        Err(e) => {
            for w in batch {
                let _ = w.reply.send(Err(share(&e)));
            }
        }
    }
}

/// A copy of a batch's error for each of its checks: the same kind (what a caller's
/// fail-open or fallback decision reads), with the source's message.
fn share(e: &Error) -> Error {
    match e {
        Error::Timeout => Error::Timeout,
        Error::Unavailable { source } => Error::unavailable(source.to_string()),
        Error::Backend { source } => Error::backend(source.to_string()),
        other => Error::backend(other.to_string()),
    }
}
