//! The leases a store holds, and the one task that renews them (why one, and what a
//! runtime shutting down does to it: [`crate::guide::in_flight`], "One renewer per store").

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, LazyLock, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use floodwall_core::{ConcurrencyLimit, Error};
use redis::{Script, ScriptInvocation};
use tokio::runtime::Handle;
use tokio::sync::Notify;
use tokio::task::JoinSet;
use tokio::time::Instant;

/// Renews a key's leases.
static RENEW: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("lua/lease_renew.lua")));

/// `d` in whole microseconds (a lease is at most `MAX_SPAN`, which fits).
pub(crate) fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// What the renewer needs of the store it works for: the leases the store holds, and a
/// call bounded by its timeout. A store's shared state (`crate::store::Inner`) is the one
/// holder; the renewer names no more of it.
pub(crate) trait Holder: Send + Sync + 'static {
    /// The leases held, and renewed by this store's renewer.
    fn leases(&self) -> &Leases;

    /// One renewal call, bounded by the store's timeout: the ids whose leases were gone.
    fn renew(
        &self,
        call: &ScriptInvocation<'_>,
    ) -> impl Future<Output = Result<Vec<String>, Error>> + Send;
}

/// Every lease a store's permits hold, by when each is next renewed.
#[derive(Default)]
pub(crate) struct Leases {
    registry: Mutex<Registry>,
    /// Wakes the renewer when a lease falls due before the one it sleeps for.
    wake: Notify,
}

#[derive(Default)]
struct Registry {
    /// Leases waiting for their next renewal, as (due, sequence number).
    due: BTreeSet<(Instant, u64)>,
    /// Every held lease and when it is due, by sequence number; also those being renewed
    /// now, which are absent from `due` until put back. A lease released or lost leaves
    /// both.
    held: HashMap<u64, (Instant, Held)>,
    next_seq: u64,
    /// The number of the renewer task running, if one runs.
    renewer: Option<u64>,
    next_renewer: u64,
}

impl Registry {
    /// Marks a new renewer running and gives its number, unless one runs: each gets a
    /// number of its own, so that a renewer's guard dropped late never stops another.
    fn start_renewer(&mut self) -> Option<u64> {
        if self.renewer.is_some() {
            return None;
        }
        let id = self.next_renewer;
        self.next_renewer += 1;
        self.renewer = Some(id);
        Some(id)
    }
}

/// One lease: where it is, its id, how long it lasts and how often it is renewed.
#[derive(Clone)]
struct Held {
    key: Arc<[u8]>,
    id: Arc<str>,
    lease_us: u64,
    every: Duration,
}

impl Leases {
    fn lock(&self) -> MutexGuard<'_, Registry> {
        self.registry.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Starts renewing a lease just taken under `limit`, starting the renewer on `runtime`
    /// if it is not running; returns the number [`forget`](Self::forget) takes.
    pub(crate) fn hold<S: Holder>(
        &self,
        store: &Arc<S>,
        runtime: &Handle,
        key: Arc<[u8]>,
        id: Arc<str>,
        limit: &ConcurrencyLimit,
    ) -> u64 {
        let held = Held {
            key,
            id,
            lease_us: micros(limit.lease()),
            every: limit.renew_every(),
        };
        let due = Instant::now() + held.every;
        let mut r = self.lock();
        let seq = r.next_seq;
        r.next_seq += 1;
        let sooner = r.due.first().is_none_or(|&(d, _)| due < d);
        r.due.insert((due, seq));
        r.held.insert(seq, (due, held));
        if let Some(id) = r.start_renewer() {
            // Made before it is spawned, so that it is dropped even if the task never runs.
            let running = Running {
                store: Arc::clone(store),
                id,
            };
            runtime.spawn(renewer(running));
        } else if sooner {
            self.wake.notify_one();
        }
        seq
    }

    /// Stops renewing a lease (its permit dropped).
    pub(crate) fn forget(&self, seq: u64) {
        let mut r = self.lock();
        if let Some((due, _)) = r.held.remove(&seq) {
            r.due.remove(&(due, seq));
        }
    }

    /// Leases held now.
    pub(crate) fn len(&self) -> usize {
        self.lock().held.len()
    }

    /// When the renewer should next wake; `None` stops it (nothing held).
    fn next_due(&self) -> Option<Instant> {
        let mut r = self.lock();
        let next = r.due.first().map(|&(due, _)| due);
        if next.is_none() {
            r.renewer = None;
        }
        next
    }

    /// The renewer `id` is gone without ending (its runtime shut down): none runs now, and
    /// the leases it had out for renewal are due again, at once.
    fn renewer_dropped(&self, id: u64) {
        let mut r = self.lock();
        if r.renewer != Some(id) {
            return;
        }
        r.renewer = None;
        // Those out for renewal are the held ones missing from `due`.
        let Registry { due, held, .. } = &mut *r;
        due.extend(held.iter().map(|(&seq, &(at, _))| (at, seq)));
    }

    /// Takes the leases due by `now`, and those due within a quarter interval after it
    /// (renewed a little early, in the same wake).
    fn take_due(&self, now: Instant) -> Vec<(u64, Held)> {
        let mut r = self.lock();
        let Registry { due, held, .. } = &mut *r;
        // Every lease in `due` is held (a release or loss leaves both).
        let Some((_, first)) = due.first().and_then(|(_, seq)| held.get(seq)) else {
            return Vec::new();
        };
        let until = now + first.every / 4;
        let mut taken = Vec::new();
        while let Some(&(at, seq)) = due.first() {
            if at > until {
                break;
            }
            due.pop_first();
            if let Some((_, lease)) = held.get(&seq) {
                taken.push((seq, lease.clone()));
            }
        }
        taken
    }

    /// Schedules a lease's next renewal `every` from `from`, unless it was released
    /// meanwhile.
    fn reschedule(&self, seq: u64, from: Instant) {
        let mut r = self.lock();
        if let Some((due, held)) = r.held.get_mut(&seq) {
            *due = from + held.every;
            let due = *due;
            r.due.insert((due, seq));
        }
    }

    /// Stops renewing a lease whose slot is gone.
    fn lost(&self, seq: u64) {
        self.lock().held.remove(&seq);
    }
}

/// Owned by the renewer task `id`: dropped with it, however it ends (see the module docs).
struct Running<S: Holder> {
    store: Arc<S>,
    id: u64,
}

impl<S: Holder> Drop for Running<S> {
    fn drop(&mut self) {
        self.store.leases().renewer_dropped(self.id);
    }
}

/// Leases due for renewal, with their sequence numbers.
type Due = Vec<(u64, Held)>;

/// Renews the store's leases as they fall due, until it holds none.
async fn renewer<S: Holder>(running: Running<S>) {
    let store = &running.store;
    let leases = store.leases();
    // Leases out for renewal are not in `due`, but only this task renews them, and it
    // puts each back (or drops it, lost) before it looks again.
    while let Some(due) = leases.next_due() {
        // A lease due sooner wakes it early; a spurious wake just looks again.
        let _ = tokio::time::timeout_at(due, leases.wake.notified()).await;
        let now = Instant::now();
        if now < due {
            continue;
        }
        renew(store, leases.take_due(now), now).await;
    }
}

/// Sends one renewal per (key, lease time) for `due`, all at once, and reschedules each.
async fn renew<S: Holder>(store: &Arc<S>, due: Vec<(u64, Held)>, sent: Instant) {
    let mut groups: HashMap<(Arc<[u8]>, u64), Due> = HashMap::new();
    for (seq, held) in due {
        groups
            .entry((Arc::clone(&held.key), held.lease_us))
            .or_default()
            .push((seq, held));
    }
    let mut calls = JoinSet::new();
    for ((key, lease_us), leases) in groups {
        let store = Arc::clone(store);
        calls.spawn(async move {
            let answer = renew_key(&*store, &RENEW, &key, lease_us, &leases).await;
            (leases, answer)
        });
    }
    while let Some(done) = calls.join_next().await {
        let Ok((leases, answer)) = done else { continue };
        match answer {
            Ok(lost) => {
                for (seq, held) in leases {
                    if lost.iter().any(|id| **id == *held.id) {
                        tracing::warn!(
                            target: "floodwall",
                            "an in-flight lease expired before it could be renewed and its \
                             slot was taken; the request goes on, uncounted"
                        );
                        store.leases().lost(seq);
                    } else {
                        store.leases().reschedule(seq, sent);
                    }
                }
            }
            Err(error) => {
                tracing::warn!(
                    target: "floodwall",
                    %error,
                    leases = leases.len(),
                    "cannot renew in-flight leases; trying again at the next renewal"
                );
                for (seq, _) in leases {
                    store.leases().reschedule(seq, sent);
                }
            }
        }
    }
}

/// One key's renewal: the ids whose leases were gone.
async fn renew_key<S: Holder>(
    store: &S,
    script: &Script,
    key: &[u8],
    lease_us: u64,
    leases: &[(u64, Held)],
) -> Result<Vec<String>, Error> {
    let mut inv = script.prepare_invoke();
    inv.key(key).arg(lease_us);
    for (_, held) in leases {
        inv.arg(&*held.id);
    }
    store.renew(&inv).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(leases: &Leases, seq: u64, due: Instant) {
        let held = Held {
            key: Arc::from(&b"k"[..]),
            id: Arc::from(seq.to_string().as_str()),
            lease_us: 1_000_000,
            every: Duration::from_millis(100),
        };
        let mut r = leases.lock();
        r.due.insert((due, seq));
        r.held.insert(seq, (due, held));
    }

    #[test]
    fn a_renewer_dropped_mid_renewal_leaves_its_leases_due_and_no_renewer_running() {
        let leases = Leases::default();
        let now = Instant::now();
        for seq in 0..3 {
            lease(&leases, seq, now);
        }
        leases.lock().renewer = Some(7);
        let taken = leases.take_due(now);
        assert_eq!(taken.len(), 3);
        assert!(leases.lock().due.is_empty());
        // One renewed before the runtime shut down, one released meanwhile.
        leases.reschedule(taken[0].0, now);
        leases.forget(taken[1].0);
        // A renewer that ended and was replaced changes nothing when its task is dropped.
        leases.renewer_dropped(6);
        assert_eq!(leases.lock().renewer, Some(7));
        assert_eq!(leases.lock().due.len(), 1);
        leases.renewer_dropped(7);
        let r = leases.lock();
        assert_eq!(r.renewer, None);
        // None left out for renewal: every held lease is due.
        let due_again = |(&seq, &(at, _)): (&u64, &(Instant, Held))| r.due.contains(&(at, seq));
        assert!(r.held.iter().all(due_again));
        // The renewed one at its next time, the one still out for renewal due at once.
        let due: Vec<_> = r.due.iter().copied().collect();
        assert_eq!(due, [(now, 2), (now + Duration::from_millis(100), 0)]);
        assert_eq!(r.held.len(), 2);
    }

    #[test]
    fn each_renewer_has_a_number_of_its_own() {
        let leases = Leases::default();
        let first = leases.lock().start_renewer().unwrap();
        assert_eq!(leases.lock().start_renewer(), None, "one runs");
        // It ends (nothing held); another starts before the first one's guard is dropped.
        assert_eq!(leases.next_due(), None);
        let second = leases.lock().start_renewer().unwrap();
        assert_ne!(first, second);
        leases.renewer_dropped(first);
        assert_eq!(leases.lock().renewer, Some(second), "the second still runs");
    }

    #[test]
    fn a_lease_lost_or_released_mid_renewal_is_not_put_back() {
        let leases = Leases::default();
        let now = Instant::now();
        for seq in 0..2 {
            lease(&leases, seq, now);
        }
        leases.lock().renewer = Some(1);
        let taken = leases.take_due(now);
        leases.lost(taken[0].0);
        leases.forget(taken[1].0);
        leases.renewer_dropped(1);
        let r = leases.lock();
        // Neither due nor held, so not out for renewal either.
        assert!(r.due.is_empty() && r.held.is_empty());
    }
}
