//! A key's calls in flight: the check that finds none goes out alone and leads; the checks
//! that queue behind it are sent in batches by a driver task once it ends.

use std::sync::Arc;

use floodwall_core::{Decision, Error, Policy};
use redis::Value;
use tokio::runtime::Handle;
use tokio::time::Instant;

use super::{BatchKey, Coalescer, Pending, share_out};
use crate::RedisStore;
use crate::call::Batch;
use crate::connection::Op;
use crate::reply::{self, ScriptAnswer};

impl RedisStore {
    /// A check under coalescing: alone when no call for its key is in flight, else queued
    /// behind that call and answered from the batch it joins.
    pub(crate) async fn coalesced(
        &self,
        coalescer: &Arc<Coalescer>,
        batch: Batch,
        runtime: Handle,
        key: BatchKey,
        policy: &Policy,
        cost: u64,
    ) -> Result<Decision, Error> {
        let at = Instant::now();
        let deadline = at + self.inner.timeout;
        let Some(pending) = coalescer.join(&key, cost, deadline, at)? else {
            // No call for the key in flight: this check goes out alone, inline, as an
            // uncoalesced one would (no task, no channel); whatever queues behind it is
            // handed to a driver when `lead` drops, or failed if this call timed out.
            let mut lead = Lead {
                store: self,
                coalescer,
                key,
                batch,
                runtime,
                timed_out: false,
            };
            let result = self.single(&lead.key.0, policy, cost, lead.key.1).await;
            lead.timed_out = matches!(result, Err(Error::Timeout));
            return result;
        };
        self.queued(pending, deadline, policy).await
    }

    /// The answer to a check queued behind a call in flight for its key, from the batch it
    /// joined, by `deadline` (the timeout from when it queued; the driver sends no check
    /// past it).
    async fn queued(
        &self,
        pending: Pending,
        deadline: Instant,
        policy: &Policy,
    ) -> Result<Decision, Error> {
        let answer = match tokio::time::timeout_at(deadline, pending).await {
            Ok(Ok(result)) => result?,
            Ok(Err(_)) => return Err(Error::backend("a coalesced check's batch was abandoned")),
            Err(_) => return Err(Error::Timeout),
        };
        crate::store::decision(policy, answer)
    }

    /// One batch call: the script's answers to `costs`, in order, by `deadline` (when the
    /// last of their callers stops waiting). It is one script call for all of them, so
    /// every check but one counts as coalesced.
    async fn batch(
        &self,
        key: &BatchKey,
        batch: Batch,
        costs: &[u64],
        deadline: Instant,
    ) -> Result<Vec<ScriptAnswer>, Error> {
        let inv = batch.invocation(&key.0, key.1, costs);
        self.inner.counters.batch(costs.len());
        let call = self.inner.conn.query(Op::Script(&inv));
        let reply: Value = tokio::time::timeout_at(deadline, call)
            .await
            .unwrap_or(Err(Error::Timeout))?;
        reply::batch(&reply, costs.len())
    }
}

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
    batch: Batch,
    runtime: Handle,
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
                batch: self.batch,
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
    batch: Batch,
    done: bool,
}

impl Driver {
    async fn run(mut self) {
        while let Some(waiters) = self.coalescer.next_batch(&self.key, Instant::now()) {
            let costs: Vec<u64> = waiters.iter().map(|w| w.cost).collect();
            // A batch is never empty; no one waits for its answer past its last deadline.
            let deadline = waiters
                .iter()
                .map(|w| w.deadline)
                .max()
                .unwrap_or_else(Instant::now);
            let result = self
                .store
                .batch(&self.key, self.batch, &costs, deadline)
                .await;
            let timed_out = matches!(result, Err(Error::Timeout));
            share_out(waiters, result);
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
