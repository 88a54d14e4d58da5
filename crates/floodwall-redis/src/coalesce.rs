//! Coalescing: concurrent checks of one key from this process share one script call.
//!
//! With [`RedisStoreBuilder::coalesce`](crate::RedisStoreBuilder::coalesce) (on by
//! default), a check of a key with no call in flight is sent at once, alone, by its own
//! caller; checks of the same key that arrive while a call is in flight queue up here and
//! go together as the next *batch*, sent by a driver task (`flight.rs`). A batch is one
//! EVALSHA of the kind's batch script (its file driven by `src/lua/batch.lua`), which
//! decides the costs in arrival order at one instant, exactly as single calls one after
//! another at that instant would; the answers are shared out in arrival order. The
//! sliding window and log are never coalesced.
//!
//! A check whose caller is gone (its answer dropped, or its deadline passed) is never
//! sent, and the checks queued behind a call that timed out fail unsent, so a Redis stall
//! does not charge requests it refused. The queues are bounded ([`MAX_QUEUED_PER_KEY`],
//! [`MAX_QUEUED`]); past a bound a check fails with [`Error::Overloaded`].
//!
//! Why batches are exact, what coalescing costs, and how callers that give up are handled
//! during a stall: see docs/redis.md in the repository.

mod flight;

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use floodwall_core::Error;
use tokio::sync::oneshot;
use tokio::time::Instant;

use crate::reply::ScriptAnswer;

/// The most checks one batch carries; later arrivals wait for the next batch.
pub(crate) const MAX_BATCH: usize = 256;

/// The most checks of one key waiting behind its call in flight: four batches' worth, so a
/// queued check waits at most five calls.
pub(crate) const MAX_QUEUED_PER_KEY: usize = 4 * MAX_BATCH;

/// The most checks waiting behind calls in flight, over all keys: a stalled Redis holds
/// at most this many (a few MB) in the store.
pub(crate) const MAX_QUEUED: usize = 16 * 1024;

/// Which checks may share a call: the same Redis key at the same explicit time (or all on
/// the server's clock).
pub(crate) type BatchKey = (Vec<u8>, Option<u64>);

/// What a check queued behind a call in flight waits on.
pub(crate) type Pending = oneshot::Receiver<Result<ScriptAnswer, Error>>;

/// A check waiting for its batch.
pub(crate) struct Waiter {
    pub(crate) cost: u64,
    /// When its caller stops waiting (the store's timeout from when it queued).
    pub(crate) deadline: Instant,
    pub(crate) reply: oneshot::Sender<Result<ScriptAnswer, Error>>,
}

impl Waiter {
    /// Its caller is gone: it dropped its answer (timed out by its own means, or dropped
    /// the request), or its store timeout has passed. Such a check is never sent.
    fn gone(&self, now: Instant) -> bool {
        self.reply.is_closed() || now >= self.deadline
    }
}

/// Checks waiting to be sent, per key. A key is present while a call for it is in flight
/// (a leader's single check, then a driver task's batches); the last of them removes it
/// when no check is left waiting.
pub(crate) struct Coalescer {
    queues: Mutex<Queues>,
    max_per_key: usize,
    max_queued: usize,
}

#[derive(Default)]
struct Queues {
    by_key: HashMap<BatchKey, Vec<Waiter>>,
    /// The waiters in all of `by_key`'s queues.
    queued: usize,
}

impl Default for Coalescer {
    fn default() -> Self {
        Self::with_bounds(MAX_QUEUED_PER_KEY, MAX_QUEUED)
    }
}

impl Coalescer {
    fn with_bounds(max_per_key: usize, max_queued: usize) -> Self {
        Self {
            queues: Mutex::default(),
            max_per_key,
            max_queued,
        }
    }

    /// Queues a check of `cost` for `key` behind the call in flight for it, its caller
    /// waiting until `deadline`; or answers `None` when no call is in flight: the caller
    /// then sends its check alone and must call [`hand_over`](Self::hand_over) (or
    /// [`abandon`](Self::abandon)) when that call ends. A queue at its bound, per key or
    /// in all, refuses the check with [`Error::Overloaded`], once the checks of gone
    /// callers have left it.
    pub(crate) fn join(
        &self,
        key: &BatchKey,
        cost: u64,
        deadline: Instant,
        now: Instant,
    ) -> Result<Option<Pending>, Error> {
        let mut queues = self.lock();
        let Queues { by_key, queued } = &mut *queues;
        let Some(queue) = by_key.get_mut(key) else {
            by_key.insert(key.clone(), Vec::new());
            return Ok(None);
        };
        if queue.len() >= self.max_per_key || *queued >= self.max_queued {
            *queued -= drop_gone(queue, now);
            for (len, max) in [(queue.len(), self.max_per_key), (*queued, self.max_queued)] {
                if len >= max {
                    return Err(Error::Overloaded { max_in_flight: max });
                }
            }
        }
        let (reply, answer) = oneshot::channel();
        queue.push(Waiter {
            cost,
            deadline,
            reply,
        });
        *queued += 1;
        Ok(Some(answer))
    }

    /// A leader's call for `key` ended, answered or dropped: `true` if checks of callers
    /// still waiting queued behind it (the caller starts a driver for them), else the key
    /// is forgotten and `false`.
    pub(crate) fn hand_over(&self, key: &BatchKey, now: Instant) -> bool {
        self.next(key, now, 0).is_some()
    }

    /// The next batch for `key`, oldest first, without the checks of callers gone by
    /// `now`; or `None` (and the key forgotten) when no check is waiting: the driver then
    /// stops.
    pub(crate) fn next_batch(&self, key: &BatchKey, now: Instant) -> Option<Vec<Waiter>> {
        self.next(key, now, MAX_BATCH)
    }

    /// Drops `key`'s gone checks, then takes up to `n` of the rest; `None`, forgetting the
    /// key, when none is left.
    fn next(&self, key: &BatchKey, now: Instant, n: usize) -> Option<Vec<Waiter>> {
        let mut queues = self.lock();
        let Queues { by_key, queued } = &mut *queues;
        let queue = by_key.get_mut(key)?;
        *queued -= drop_gone(queue, now);
        if queue.is_empty() {
            by_key.remove(key);
            return None;
        }
        let n = queue.len().min(n);
        *queued -= n;
        Some(queue.drain(..n).collect())
    }

    /// Fails every check waiting for `key`, unsent, and forgets the key: when no driver
    /// could be started, or when the call ahead of them timed out.
    pub(crate) fn abandon(&self, key: &BatchKey, error: Error) {
        let queue = {
            let mut queues = self.lock();
            let queue = queues.by_key.remove(key).unwrap_or_default();
            queues.queued -= queue.len();
            queue
        };
        share_out(queue, Err(error));
    }

    fn lock(&self) -> MutexGuard<'_, Queues> {
        self.queues.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Removes the checks of callers gone by `now` from `queue`, answering those whose
/// deadline passed [`Error::Timeout`] (their caller may not have noticed yet); returns
/// how many left.
fn drop_gone(queue: &mut Vec<Waiter>, now: Instant) -> usize {
    let before = queue.len();
    for w in queue.extract_if(.., |w| w.gone(now)) {
        let _ = w.reply.send(Err(Error::Timeout));
    }
    before - queue.len()
}

/// Hands a batch's answers out in arrival order, or its error to every check in it.
pub(crate) fn share_out(batch: Vec<Waiter>, result: Result<Vec<ScriptAnswer>, Error>) {
    match result {
        Ok(answers) => {
            for (w, answer) in batch.into_iter().zip(answers) {
                // A check whose caller gave up while its batch was in flight was still
                // decided (and charged, if admitted): it was sent while someone waited.
                let _ = w.reply.send(Ok(answer));
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    const SECOND: Duration = Duration::from_secs(1);

    fn key(name: &str) -> BatchKey {
        (name.as_bytes().to_vec(), None)
    }

    /// Queues a check that waits until `deadline`.
    fn queue(c: &Coalescer, k: &BatchKey, deadline: Instant, now: Instant) -> Pending {
        c.join(k, 1, deadline, now)
            .unwrap()
            .expect("a call is in flight")
    }

    fn timed_out(answer: &mut Pending) -> bool {
        matches!(answer.try_recv(), Ok(Err(Error::Timeout)))
    }

    #[test]
    fn checks_of_gone_callers_are_never_batched() {
        let c = Coalescer::default();
        let (k, t0) = (key("k"), Instant::now());
        assert!(
            c.join(&k, 1, t0 + SECOND, t0).unwrap().is_none(),
            "the leader"
        );
        let _waiting = queue(&c, &k, t0 + SECOND, t0);
        drop(queue(&c, &k, t0 + SECOND, t0));
        let mut expired = queue(&c, &k, t0 + SECOND / 10, t0);
        let batch = c.next_batch(&k, t0 + SECOND / 5).unwrap();
        assert_eq!(batch.len(), 1, "only the check whose caller still waits");
        assert_eq!(batch[0].deadline, t0 + SECOND);
        assert!(timed_out(&mut expired), "answered, not left hanging");
        assert_eq!(c.lock().queued, 0);
        assert!(c.next_batch(&k, t0 + SECOND / 5).is_none());
        assert!(c.lock().by_key.is_empty(), "the key is forgotten");
    }

    #[test]
    fn a_queue_of_gone_callers_is_not_handed_over() {
        let c = Coalescer::default();
        let (k, t0) = (key("k"), Instant::now());
        assert!(c.join(&k, 1, t0 + SECOND, t0).unwrap().is_none());
        drop(queue(&c, &k, t0 + SECOND, t0));
        let mut late = queue(&c, &k, t0 + SECOND, t0);
        assert!(!c.hand_over(&k, t0 + SECOND), "no driver for nobody");
        assert!(timed_out(&mut late));
        assert!(
            c.join(&k, 1, t0 + 2 * SECOND, t0).unwrap().is_none(),
            "a new leader"
        );
        assert_eq!(c.lock().queued, 0);
    }

    #[test]
    fn a_full_queue_refuses_until_a_gone_caller_frees_a_place() {
        let c = Coalescer::with_bounds(2, 3);
        let (a, b, t0) = (key("a"), key("b"), Instant::now());
        assert!(c.join(&a, 1, t0 + SECOND, t0).unwrap().is_none());
        let first = queue(&c, &a, t0 + SECOND, t0);
        let _second = queue(&c, &a, t0 + SECOND, t0);
        let full = c.join(&a, 1, t0 + SECOND, t0).unwrap_err();
        assert!(
            matches!(full, Error::Overloaded { max_in_flight: 2 }),
            "{full:?}"
        );
        drop(first);
        let _third = queue(&c, &a, t0 + SECOND, t0);
        // One more on another key reaches the bound over all keys.
        assert!(c.join(&b, 1, t0 + SECOND, t0).unwrap().is_none());
        let _fourth = queue(&c, &b, t0 + SECOND, t0);
        let full = c.join(&b, 1, t0 + SECOND, t0).unwrap_err();
        assert!(
            matches!(full, Error::Overloaded { max_in_flight: 3 }),
            "{full:?}"
        );
        // A deadline passing frees a place too: b's expired check leaves for this one.
        let _fifth = queue(&c, &b, t0 + 3 * SECOND, t0 + 2 * SECOND);
        assert_eq!(c.lock().by_key[&b].len(), 1);
        assert_eq!(c.lock().queued, 3);
    }

    #[test]
    fn abandoning_fails_every_waiting_check_and_frees_its_places() {
        let c = Coalescer::default();
        let (k, t0) = (key("k"), Instant::now());
        assert!(c.join(&k, 1, t0 + SECOND, t0).unwrap().is_none());
        let mut answers: Vec<_> = (0..3).map(|_| queue(&c, &k, t0 + SECOND, t0)).collect();
        c.abandon(&k, Error::Timeout);
        assert!(answers.iter_mut().all(timed_out));
        assert_eq!(c.lock().queued, 0);
        assert!(c.lock().by_key.is_empty());
    }
}
