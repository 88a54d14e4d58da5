//! Coalescing: concurrent checks from this process share script calls, whether they are
//! checks of one key or of many.
//!
//! Checks that could share a call form a [`Group`]; one with no call in flight is sent at
//! once by its own caller, the others queue here (bounded) and go as the next batch, sent
//! by a driver task (`flight.rs`). Why batches are exact, and the rest:
//! [`crate::guide::redis`] ("Coalescing").

mod flight;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use floodwall_core::Error;
use tokio::runtime::Handle;
use tokio::sync::oneshot;
use tokio::time::Instant;

use crate::call::Batch;
use crate::kind::{Layout, ScriptKind};
use crate::unpack::ScriptAnswer;

/// The most checks one batch carries; later arrivals wait for the next batch.
pub(crate) const MAX_BATCH: usize = 256;

/// The most calls of one group in flight: one, and a second for a batch of at least
/// [`OVERLAP_AT`] checks while a batch is in flight (why: [`crate::guide::redis`], "How many
/// calls in flight").
pub(crate) const CALLS_IN_FLIGHT: usize = 2;

/// How many checks must wait before a group's second call goes out (measured, as
/// [`CALLS_IN_FLIGHT`]).
pub(crate) const OVERLAP_AT: usize = 32;

/// The most checks of one group waiting behind its calls in flight: four batches' worth,
/// so a queued check waits at most for the calls in flight and four batches.
pub(crate) const MAX_QUEUED_PER_GROUP: usize = 4 * MAX_BATCH;

/// The most checks waiting behind calls in flight, over all groups: a stalled Redis holds
/// at most this many (a few MB) in the store.
pub(crate) const MAX_QUEUED: usize = 16 * 1024;

/// Which checks may share a call: the same script (kind) and parameters, the same explicit
/// time (or all on the server's clock), the same node (a cluster's, else 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Group {
    pub(crate) kind: ScriptKind,
    pub(crate) args: [u64; 3],
    pub(crate) now: Option<u64>,
    pub(crate) node: u32,
}

impl Group {
    /// The group of checks under `layout` that may share calls at `now` on `node`.
    pub(crate) fn of(layout: Layout, now: Option<u64>, node: u32) -> Self {
        Self {
            kind: layout.kind,
            args: layout.args,
            now,
            node,
        }
    }
}

/// Where a check under coalescing goes: its group's calls and queue, and the batch and
/// runtime its queue is sent with.
pub(crate) struct Route<'a> {
    pub(crate) coalescer: &'a Arc<Coalescer>,
    pub(crate) group: Group,
    pub(crate) batch: Batch,
    pub(crate) runtime: Handle,
}

/// What a check queued behind a call in flight waits on.
pub(crate) type Pending = oneshot::Receiver<Result<ScriptAnswer, Error>>;

/// Whether a check goes out alone or waits for a batch.
pub(crate) enum Turn {
    /// No call of its group is in flight: the caller sends it alone, then calls
    /// [`Coalescer::hand_over`] (or [`Coalescer::abandon`]).
    Alone,
    /// Queued: its answer comes from the batch it joins.
    Queued(Pending),
    /// Queued, the [`OVERLAP_AT`]-th behind a batch in flight: the caller starts a driver
    /// that sends the queue as a second call.
    Overlap(Pending),
}

/// A check waiting for its batch.
pub(crate) struct Waiter {
    /// Its Redis key.
    pub(crate) key: Vec<u8>,
    pub(crate) cost: u64,
    /// When its caller stops waiting (the store's timeout from when it queued).
    pub(crate) deadline: Instant,
    pub(crate) reply: oneshot::Sender<Result<ScriptAnswer, Error>>,
}

impl Waiter {
    /// Its caller is gone: it dropped its answer (timed out by its own means, or dropped
    /// the request), or its store timeout has passed. Such a check is never sent.
    pub(crate) fn gone(&self, now: Instant) -> bool {
        self.reply.is_closed() || now >= self.deadline
    }
}

/// The calls in flight and the checks waiting, per group. A group is present while a call
/// of it is in flight (a caller's single check, or a driver task's batches); the last of
/// them removes it when no check is left waiting.
pub(crate) struct Coalescer {
    queues: Mutex<Queues>,
    max_per_group: usize,
    max_queued: usize,
}

#[derive(Default)]
struct Queues {
    groups: HashMap<Group, Flights>,
    /// The waiters in all of `groups`' queues.
    queued: usize,
}

/// One group's calls in flight and the checks waiting behind them, oldest first. A call
/// that ends with checks waiting passes its place to their batch, unless another call is
/// still in flight and fewer than [`OVERLAP_AT`] wait (that call's end takes them).
#[derive(Default)]
struct Flights {
    in_flight: usize,
    /// One of the calls in flight is a check sent alone: the group was idle when it went.
    /// No second call goes out behind it, so a Redis that stalls while nothing was in
    /// flight is sent one check, not a batch ([`crate::guide::redis`]).
    alone: bool,
    waiting: Vec<Waiter>,
}

impl Flights {
    /// Whether a call ending now passes its place to the waiting checks' batch.
    fn batch_next(&self) -> bool {
        !self.waiting.is_empty() && (self.in_flight == 1 || self.waiting.len() >= OVERLAP_AT)
    }
}

impl Default for Coalescer {
    fn default() -> Self {
        Self::with_bounds(MAX_QUEUED_PER_GROUP, MAX_QUEUED)
    }
}

impl Coalescer {
    fn with_bounds(max_per_group: usize, max_queued: usize) -> Self {
        Self {
            queues: Mutex::default(),
            max_per_group,
            max_queued,
        }
    }

    /// Whether a check of `cost` on `key` goes out alone or queues for `group`'s next
    /// batch, its caller waiting until `deadline` (then `key` is taken). A queue at its
    /// bound, per group or in all, refuses the check with [`Error::Overloaded`], once the
    /// checks of gone callers have left it.
    pub(crate) fn join(
        &self,
        group: Group,
        key: &mut Vec<u8>,
        cost: u64,
        deadline: Instant,
        now: Instant,
    ) -> Result<Turn, Error> {
        let mut queues = self.lock();
        let Queues { groups, queued } = &mut *queues;
        let flights = groups.entry(group).or_default();
        if flights.in_flight == 0 {
            flights.in_flight = 1;
            flights.alone = true;
            return Ok(Turn::Alone);
        }
        let waiting = &mut flights.waiting;
        if waiting.len() >= self.max_per_group || *queued >= self.max_queued {
            *queued -= drop_gone(waiting, now);
            for (len, max) in [
                (waiting.len(), self.max_per_group),
                (*queued, self.max_queued),
            ] {
                if len >= max {
                    return Err(Error::Overloaded { max_in_flight: max });
                }
            }
        }
        let (reply, answer) = oneshot::channel();
        waiting.push(Waiter {
            key: std::mem::take(key),
            cost,
            deadline,
            reply,
        });
        *queued += 1;
        if flights.in_flight < CALLS_IN_FLIGHT && !flights.alone && waiting.len() >= OVERLAP_AT {
            flights.in_flight += 1;
            return Ok(Turn::Overlap(answer));
        }
        Ok(Turn::Queued(answer))
    }

    /// A call of `group` sent alone ended, answered or dropped: `true` if checks of
    /// callers still waiting queued behind it (its place then passes to a driver the
    /// caller starts for them), else its place is freed and `false`.
    pub(crate) fn hand_over(&self, group: &Group, now: Instant) -> bool {
        let mut queues = self.lock();
        let Queues { groups, queued } = &mut *queues;
        let Some(flights) = groups.get_mut(group) else {
            return false;
        };
        flights.alone = false;
        *queued -= drop_gone(&mut flights.waiting, now);
        if flights.batch_next() {
            return true;
        }
        release(groups, group);
        false
    }

    /// The next batch of `group`, oldest first, without the checks of callers gone by
    /// `now`; or `None` (and the driver's place freed) when no check is waiting, or when
    /// too few wait for a second call while another is in flight: the driver then stops.
    pub(crate) fn next_batch(&self, group: &Group, now: Instant) -> Option<Vec<Waiter>> {
        let mut queues = self.lock();
        let Queues { groups, queued } = &mut *queues;
        let flights = groups.get_mut(group)?;
        *queued -= drop_gone(&mut flights.waiting, now);
        if !flights.batch_next() {
            release(groups, group);
            return None;
        }
        let n = flights.waiting.len().min(MAX_BATCH);
        *queued -= n;
        Some(flights.waiting.drain(..n).collect())
    }

    /// Fails every check waiting for `group`, unsent, and frees the place of the call that
    /// ended (`alone`: a check sent alone): when no driver could be started, or when that
    /// call timed out.
    pub(crate) fn abandon(&self, group: &Group, alone: bool, error: Error) {
        let waiting = {
            let mut queues = self.lock();
            let Queues { groups, queued } = &mut *queues;
            let waiting = match groups.get_mut(group) {
                Some(flights) => {
                    flights.alone &= !alone;
                    std::mem::take(&mut flights.waiting)
                }
                None => Vec::new(),
            };
            *queued -= waiting.len();
            release(groups, group);
            waiting
        };
        for w in waiting {
            let _ = w.reply.send(Err(share(&error)));
        }
    }

    fn lock(&self) -> MutexGuard<'_, Queues> {
        self.queues.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// One call of `group` ended with no batch to pass its place to: frees it, and forgets
/// the group when it was the last.
fn release(groups: &mut HashMap<Group, Flights>, group: &Group) {
    if let Some(flights) = groups.get_mut(group) {
        flights.in_flight = flights.in_flight.saturating_sub(1);
        if flights.in_flight == 0 && flights.waiting.is_empty() {
            groups.remove(group);
        }
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

/// A copy of a batch's error for each of its checks: the same kind (what a caller's
/// fail-open or fallback decision reads), with the source's message.
pub(crate) fn share(e: &Error) -> Error {
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

    fn group(node: u32) -> Group {
        Group {
            kind: ScriptKind::Gcra,
            args: [1, 2, 0],
            now: None,
            node,
        }
    }

    /// Sends a check of `g` alone, so that later checks of `g` queue.
    fn fill(c: &Coalescer, g: Group, t0: Instant) {
        assert!(alone(c, g, "k", t0 + SECOND, t0), "goes out alone");
    }

    /// Queues a check of `key` that waits until `deadline`.
    fn queue(c: &Coalescer, g: Group, key: &str, deadline: Instant, now: Instant) -> Pending {
        match c.join(g, &mut key.as_bytes().to_vec(), 1, deadline, now) {
            Ok(Turn::Queued(answer)) => answer,
            _ => panic!("calls are in flight: the check queues"),
        }
    }

    /// Whether a check of `key` goes out alone.
    fn alone(c: &Coalescer, g: Group, key: &str, deadline: Instant, now: Instant) -> bool {
        let turn = c.join(g, &mut key.as_bytes().to_vec(), 1, deadline, now);
        matches!(turn, Ok(Turn::Alone))
    }

    fn timed_out(answer: &mut Pending) -> bool {
        matches!(answer.try_recv(), Ok(Err(Error::Timeout)))
    }

    #[test]
    fn checks_of_different_keys_queue_into_one_batch_in_arrival_order() {
        let c = Coalescer::default();
        let (g, t0) = (group(0), Instant::now());
        fill(&c, g, t0);
        let _answers: Vec<_> = ["a", "b", "a", "c"]
            .into_iter()
            .map(|k| queue(&c, g, k, t0 + SECOND, t0))
            .collect();
        // Another node's checks are another group: they go out alone.
        assert!(alone(&c, group(1), "d", t0 + SECOND, t0));
        assert!(c.hand_over(&g, t0), "a batch is waiting");
        let batch = c.next_batch(&g, t0).unwrap();
        let keys: Vec<&[u8]> = batch.iter().map(|w| &w.key[..]).collect();
        assert_eq!(keys, [b"a", b"b", b"a", b"c"]);
        // The driver finds nothing more and frees its place: a new check goes out alone.
        assert!(c.next_batch(&g, t0).is_none());
        assert!(alone(&c, g, "e", t0 + SECOND, t0));
    }

    #[test]
    fn a_second_call_goes_out_for_enough_checks_behind_a_batch_only() {
        let c = Coalescer::default();
        let (g, t0) = (group(0), Instant::now());
        let join = |key: &str| c.join(g, &mut key.as_bytes().to_vec(), 1, t0 + SECOND, t0);
        fill(&c, g, t0);
        // Behind a check sent alone, any number of checks wait for it.
        let _behind_alone: Vec<_> = (0..OVERLAP_AT + 1)
            .map(|i| match join(&i.to_string()) {
                Ok(Turn::Queued(answer)) => answer,
                _ => panic!("no second call behind a check alone"),
            })
            .collect();
        assert!(c.hand_over(&g, t0));
        assert_eq!(c.next_batch(&g, t0).unwrap().len(), OVERLAP_AT + 1);
        // Behind that batch, the OVERLAP_AT-th check starts a second call, and the next
        // waits: no third.
        let mut answers = Vec::new();
        for i in 1..=OVERLAP_AT + 1 {
            let answer = match join(&i.to_string()) {
                Ok(Turn::Queued(answer)) if i != OVERLAP_AT => answer,
                Ok(Turn::Overlap(answer)) if i == OVERLAP_AT => answer,
                _ => panic!("check {i}: a second call at the {OVERLAP_AT}th only"),
            };
            answers.push(answer);
        }
        assert_eq!(c.lock().groups[&g].in_flight, CALLS_IN_FLIGHT);
        // The second call's driver takes them all; a check that comes then waits for the
        // end of whichever call ends first, but not a call of its own.
        assert_eq!(c.next_batch(&g, t0).unwrap().len(), OVERLAP_AT + 1);
        let _last = join("last");
        assert!(c.next_batch(&g, t0).is_none(), "too few for a second call");
        let last = c.next_batch(&g, t0).unwrap();
        assert_eq!(last.len(), 1, "the only call left takes it");
    }

    #[test]
    fn a_batch_carries_at_most_max_batch_checks() {
        let c = Coalescer::default();
        let (g, t0) = (group(0), Instant::now());
        fill(&c, g, t0);
        let _answers: Vec<_> = (0..MAX_BATCH + 3)
            .map(|i| queue(&c, g, &i.to_string(), t0 + SECOND, t0))
            .collect();
        assert_eq!(c.next_batch(&g, t0).unwrap().len(), MAX_BATCH);
        assert_eq!(c.next_batch(&g, t0).unwrap().len(), 3);
        assert_eq!(c.lock().queued, 0);
    }

    #[test]
    fn checks_of_gone_callers_are_never_batched() {
        let c = Coalescer::default();
        let (g, t0) = (group(0), Instant::now());
        fill(&c, g, t0);
        let _waiting = queue(&c, g, "k", t0 + SECOND, t0);
        drop(queue(&c, g, "k", t0 + SECOND, t0));
        let mut expired = queue(&c, g, "k", t0 + SECOND / 10, t0);
        let batch = c.next_batch(&g, t0 + SECOND / 5).unwrap();
        assert_eq!(batch.len(), 1, "only the check whose caller still waits");
        assert_eq!(batch[0].deadline, t0 + SECOND);
        assert!(timed_out(&mut expired), "answered, not left hanging");
        assert_eq!(c.lock().queued, 0);
        assert!(c.next_batch(&g, t0 + SECOND / 5).is_none());
        assert!(c.lock().groups.is_empty(), "the group is forgotten");
    }

    #[test]
    fn a_queue_of_gone_callers_is_not_handed_over() {
        let c = Coalescer::default();
        let (g, t0) = (group(0), Instant::now());
        fill(&c, g, t0);
        drop(queue(&c, g, "k", t0 + SECOND, t0));
        let mut late = queue(&c, g, "k", t0 + SECOND, t0);
        assert!(!c.hand_over(&g, t0 + SECOND), "no driver for nobody");
        assert!(timed_out(&mut late));
        let freed = alone(&c, g, "k", t0 + 2 * SECOND, t0);
        assert!(freed, "the freed place goes to a new check");
        assert_eq!(c.lock().queued, 0);
    }

    #[test]
    fn a_full_queue_refuses_until_a_gone_caller_frees_a_place() {
        let c = Coalescer::with_bounds(2, 3);
        let (a, b, t0) = (group(0), group(1), Instant::now());
        fill(&c, a, t0);
        let first = queue(&c, a, "x", t0 + SECOND, t0);
        let _second = queue(&c, a, "y", t0 + SECOND, t0);
        let full = c.join(a, &mut b"z".to_vec(), 1, t0 + SECOND, t0);
        let group_bound = matches!(full, Err(Error::Overloaded { max_in_flight: 2 }));
        assert!(group_bound, "the group's bound");
        drop(first);
        let _third = queue(&c, a, "z", t0 + SECOND, t0);
        // One more in another group reaches the bound over all groups.
        fill(&c, b, t0);
        let _fourth = queue(&c, b, "x", t0 + SECOND, t0);
        let full = c.join(b, &mut b"y".to_vec(), 1, t0 + SECOND, t0);
        let bound = matches!(full, Err(Error::Overloaded { max_in_flight: 3 }));
        assert!(bound, "the bound over all groups");
        // A deadline passing frees a place too: b's expired check leaves for this one.
        let _fifth = queue(&c, b, "y", t0 + 3 * SECOND, t0 + 2 * SECOND);
        assert_eq!(c.lock().groups[&b].waiting.len(), 1);
        assert_eq!(c.lock().queued, 3);
    }

    #[test]
    fn abandoning_fails_every_waiting_check_and_frees_its_place() {
        let c = Coalescer::default();
        let (g, t0) = (group(0), Instant::now());
        fill(&c, g, t0);
        let mut answers: Vec<_> = (0..3).map(|_| queue(&c, g, "k", t0 + SECOND, t0)).collect();
        c.abandon(&g, true, Error::Timeout);
        assert!(answers.iter_mut().all(timed_out));
        assert_eq!(c.lock().queued, 0);
        assert!(c.lock().groups.is_empty(), "its place is freed");
        assert!(alone(&c, g, "k", t0 + SECOND, t0));
    }
}
