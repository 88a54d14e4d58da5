//! A group's calls in flight: a check that finds a place goes out alone and leads; the
//! checks that queue behind the calls in flight are sent in batches by a driver task once a
//! call ends.

use std::future::{Future, poll_fn};
use std::pin::pin;
use std::sync::Arc;
use std::task::Poll;

use floodwall_core::{Decision, Error, Policy};
use redis::Value;
use tokio::runtime::Handle;
use tokio::time::Instant;

use super::{Coalescer, Group, Pending, Route, Turn, Waiter, share};
use crate::RedisStore;
use crate::call::{Batch, BatchCall, Plan};
use crate::error::answered_by_redis;
use crate::op::Op;
use crate::reply;
use crate::unpack::ScriptAnswer;

impl RedisStore {
    /// A check under coalescing: alone when its group has no call in flight, else queued
    /// behind that call and answered from the batch it joins.
    pub(crate) async fn coalesced(
        &self,
        route: Route<'_>,
        mut key: Vec<u8>,
        policy: &Policy,
        cost: u64,
    ) -> Result<Decision, Error> {
        let at = Instant::now();
        let deadline = at + self.inner.timeout;
        let Route {
            coalescer,
            group,
            batch,
            runtime,
        } = route;
        match coalescer.join(group, &mut key, cost, deadline, at)? {
            Turn::Alone => {
                // Sent alone, inline, as an uncoalesced check would be (no task, no
                // channel); whatever queues behind it is handed to a driver when `lead`
                // drops, or failed if this call timed out.
                let mut lead = Lead {
                    store: self,
                    coalescer,
                    group,
                    batch,
                    runtime,
                    timed_out: false,
                };
                let result = self.single(&key, policy, cost, group.now).await;
                lead.timed_out = matches!(result, Err(Error::Timeout));
                result
            }
            Turn::Queued(pending) => self.queued(pending, deadline, policy).await,
            Turn::Overlap(pending) => {
                let driver = Driver {
                    store: self.clone(),
                    coalescer: Arc::clone(coalescer),
                    group,
                    batch,
                    runtime: runtime.clone(),
                    done: false,
                };
                runtime.spawn(driver.run());
                self.queued(pending, deadline, policy).await
            }
        }
    }

    /// The answer to a check queued behind its group's calls in flight, from the batch it
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

    /// One batch call: the script's answers to `waiters`' checks, in their order, by
    /// `deadline` (when the last of their callers stops waiting). It is one script call
    /// for all of them, so every check but one counts as coalesced.
    async fn batch(
        &self,
        group: &Group,
        batch: Batch,
        waiters: &[Waiter],
        deadline: Instant,
    ) -> Result<Vec<Result<ScriptAnswer, Error>>, Error> {
        let plan = Plan::of(waiters.iter().map(|w| &w.key[..]));
        let declare = self.inner.conn.declares_batch_keys();
        let call = batch.call(&plan, |i| waiters[i].cost, group.now, declare);
        let op = match &call {
            BatchCall::Declared(inv) => Op::Script(inv),
            BatchCall::Keyless {
                evalsha,
                text,
                route,
            } => Op::Keyless {
                evalsha,
                text,
                route,
            },
        };
        self.inner.counters.batch(waiters.len());
        let reply: Value = tokio::time::timeout_at(deadline, self.inner.conn.query(op))
            .await
            .unwrap_or(Err(Error::Timeout))?;
        let costs = plan.order.iter().map(|&i| waiters[i].cost);
        let answers = reply::batch(batch.layout(), costs, &reply)?;
        // Back from the plan's order (a permutation, answered in full) to the waiters'.
        let mut placed: Vec<_> = plan.order.iter().copied().zip(answers).collect();
        placed.sort_unstable_by_key(|&(i, _)| i);
        Ok(placed.into_iter().map(|(_, answer)| answer).collect())
    }
}

/// A call sent alone and in flight. When it ends, answered or dropped, the checks that
/// queued behind its group's calls and whose callers still wait go to a driver (spawned,
/// so they are sent whatever happens to this call's caller), or its place is freed when
/// none did. When the call timed out, they are failed with [`Error::Timeout`], unsent:
/// Redis did not answer within a whole timeout, and checks sent into a stall are charged
/// when it ends, after their callers were refused.
struct Lead<'a> {
    store: &'a RedisStore,
    coalescer: &'a Arc<Coalescer>,
    group: Group,
    batch: Batch,
    runtime: Handle,
    timed_out: bool,
}

impl Drop for Lead<'_> {
    fn drop(&mut self) {
        if self.timed_out {
            self.coalescer.abandon(&self.group, true, Error::Timeout);
        } else if self.coalescer.hand_over(&self.group, Instant::now()) {
            // The driver is moved into the task before it first runs, so even a task
            // dropped unpolled (runtime shutting down) fails the waiting checks.
            let driver = Driver {
                store: self.store.clone(),
                coalescer: Arc::clone(self.coalescer),
                group: self.group,
                batch: self.batch,
                runtime: self.runtime.clone(),
                done: false,
            };
            self.runtime.spawn(driver.run());
        }
    }
}

/// Sends a group's batches until no check of it is left waiting, or one call timed out
/// (then those queued behind it are failed unsent, as behind a [`Lead`] that timed out).
struct Driver {
    store: RedisStore,
    coalescer: Arc<Coalescer>,
    group: Group,
    batch: Batch,
    runtime: Handle,
    done: bool,
}

impl Driver {
    async fn run(mut self) {
        let mut current = self.next(|| ()).await;
        while let Some((waiters, result)) = current {
            current = match result {
                // The next batch goes out before these answers are handed out, so that
                // Redis decides it meanwhile. A check whose caller gave up while its batch
                // was in flight was still decided (and charged, if admitted): it was sent
                // while someone waited.
                Ok(answers) => {
                    self.next(|| {
                        for (w, answer) in waiters.into_iter().zip(answers) {
                            let _ = w.reply.send(answer);
                        }
                    })
                    .await
                }
                // Redis refused the batch, or its script failed on one of its keys (a key
                // of another type, or one this cluster node does not serve): it wrote
                // nothing, so each check is sent again alone, answered on its own.
                Err(e) if answered_by_redis(&e) => {
                    self.store.inner.conn.batch_refused(&self.runtime);
                    if self.one_by_one(waiters).await {
                        self.coalescer.abandon(&self.group, false, Error::Timeout);
                        break;
                    }
                    self.next(|| ()).await
                }
                Err(e) => {
                    for w in waiters {
                        let _ = w.reply.send(Err(share(&e)));
                    }
                    // Redis did not answer within a whole timeout: the checks queued
                    // behind this call fail unsent, and its place is freed.
                    if matches!(e, Error::Timeout) {
                        self.coalescer.abandon(&self.group, false, Error::Timeout);
                        break;
                    }
                    self.next(|| ()).await
                }
            };
        }
        self.done = true;
    }

    /// Takes the group's next batch and sends it, running `meanwhile` once it is sent;
    /// `None` (and the driver's place freed) when no check is waiting, after `meanwhile`.
    async fn next(
        &self,
        meanwhile: impl FnOnce(),
    ) -> Option<(Vec<Waiter>, Result<Vec<Result<ScriptAnswer, Error>>, Error>)> {
        let Some(waiters) = self.coalescer.next_batch(&self.group, Instant::now()) else {
            meanwhile();
            return None;
        };
        // A batch is never empty; no one waits for its answer past its last deadline.
        let deadline = waiters
            .iter()
            .map(|w| w.deadline)
            .max()
            .unwrap_or_else(Instant::now);
        let result = {
            let call = self
                .store
                .batch(&self.group, self.batch, &waiters, deadline);
            let mut call = pin!(call);
            // Polled once, which sends it; then `meanwhile` runs while it is in flight.
            let sent = poll_fn(|cx| Poll::Ready(call.as_mut().poll(cx))).await;
            meanwhile();
            match sent {
                Poll::Ready(result) => result,
                Poll::Pending => call.await,
            }
        };
        Some((waiters, result))
    }

    /// Sends a refused batch's checks alone, one after another in arrival order (so the
    /// checks of one key keep theirs), each by its caller's deadline; `true` if one timed
    /// out, and then the rest fail unsent.
    async fn one_by_one(&self, waiters: Vec<Waiter>) -> bool {
        let mut timed_out = false;
        for w in waiters {
            if timed_out || w.gone(Instant::now()) {
                let _ = w.reply.send(Err(Error::Timeout));
                continue;
            }
            let call = self
                .store
                .answer(&w.key, self.batch.layout(), w.cost, self.group.now);
            let answer = tokio::time::timeout_at(w.deadline, call)
                .await
                .unwrap_or(Err(Error::Timeout));
            timed_out = matches!(answer, Err(Error::Timeout));
            let _ = w.reply.send(answer);
        }
        timed_out
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        if !self.done {
            let stopped = Error::unavailable("the runtime stopped the batch");
            self.coalescer.abandon(&self.group, false, stopped);
        }
    }
}
