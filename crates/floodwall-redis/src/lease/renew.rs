//! The leases a store holds, and the one task that renews them.
//!
//! One renewer per store, not a task per permit: most requests end long before their
//! first renewal is due, and a task per permit would be spawned (and a timer armed) for
//! each of them all the same; one task sleeps until the earliest renewal is due, and sends
//! every renewal due within a quarter interval of it at once, one `EVALSHA` per key (all
//! of a key's leases in one call). It runs only while the store holds leases: it ends when
//! the last permit drops, and the next acquisition starts it again.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use floodwall_core::{ConcurrencyLimit, Error};
use redis::Script;
use tokio::runtime::Handle;
use tokio::sync::Notify;
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::RENEW;
use crate::connection::Op;
use crate::store::Inner;

/// Every lease a store's permits hold, by when each is next renewed.
#[derive(Default)]
pub(crate) struct Leases {
    registry: Mutex<Registry>,
    /// Wakes the renewer when a lease falls due before the one it sleeps for.
    wake: Notify,
}

#[derive(Default)]
struct Registry {
    /// Leases waiting for their next renewal, by (due, sequence number).
    due: BTreeMap<(Instant, u64), Held>,
    /// When each held lease is due, by sequence number; also those being renewed now
    /// (absent from `due` meanwhile). A lease released or lost leaves both.
    held: HashMap<u64, Instant>,
    next_seq: u64,
    /// Whether the renewer task runs.
    running: bool,
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
    pub(crate) fn hold(
        &self,
        store: &Arc<Inner>,
        runtime: &Handle,
        key: Arc<[u8]>,
        id: Arc<str>,
        limit: &ConcurrencyLimit,
    ) -> u64 {
        let held = Held {
            key,
            id,
            lease_us: super::micros(limit.lease()),
            every: limit.renew_every(),
        };
        let due = Instant::now() + held.every;
        let mut r = self.lock();
        let seq = r.next_seq;
        r.next_seq += 1;
        let sooner = r.due.first_key_value().is_none_or(|(&(d, _), _)| due < d);
        r.due.insert((due, seq), held);
        r.held.insert(seq, due);
        if !r.running {
            r.running = true;
            runtime.spawn(renewer(Arc::clone(store)));
        } else if sooner {
            self.wake.notify_one();
        }
        seq
    }

    /// Stops renewing a lease (its permit dropped).
    pub(crate) fn forget(&self, seq: u64) {
        let mut r = self.lock();
        if let Some(due) = r.held.remove(&seq) {
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
        let next = r.due.first_key_value().map(|(&(due, _), _)| due);
        if next.is_none() {
            r.running = false;
        }
        next
    }

    /// Takes the leases due by `now`, and those due within a quarter interval after it
    /// (renewed a little early, in the same wake).
    fn take_due(&self, now: Instant) -> Vec<(u64, Held)> {
        let mut r = self.lock();
        let Some((_, first)) = r.due.first_key_value() else {
            return Vec::new();
        };
        let until = now + first.every / 4;
        let mut taken = Vec::new();
        while let Some(entry) = r.due.first_entry() {
            if entry.key().0 > until {
                break;
            }
            let ((_, seq), held) = entry.remove_entry();
            taken.push((seq, held));
        }
        taken
    }

    /// Schedules a lease's next renewal `every` from `from`, unless it was released
    /// meanwhile.
    fn reschedule(&self, seq: u64, held: Held, from: Instant) {
        let mut r = self.lock();
        if let Some(due) = r.held.get_mut(&seq) {
            *due = from + held.every;
            let due = *due;
            r.due.insert((due, seq), held);
        }
    }

    /// Stops renewing a lease whose slot is gone.
    fn lost(&self, seq: u64) {
        self.lock().held.remove(&seq);
    }
}

/// Leases due for renewal, with their sequence numbers.
type Due = Vec<(u64, Held)>;

/// Renews the store's leases as they fall due, until it holds none.
async fn renewer(store: Arc<Inner>) {
    let leases = &store.leases;
    // Leases out for renewal are not in `due`, but only this task renews them, and it
    // puts each back (or drops it, lost) before it looks again.
    while let Some(due) = leases.next_due() {
        // A lease due sooner wakes it early; a spurious wake just looks again.
        let _ = tokio::time::timeout_at(due, leases.wake.notified()).await;
        let now = Instant::now();
        if now < due {
            continue;
        }
        renew(&store, leases.take_due(now), now).await;
    }
}

/// Sends one renewal per (key, lease time) for `due`, all at once, and reschedules each.
async fn renew(store: &Arc<Inner>, due: Vec<(u64, Held)>, sent: Instant) {
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
            let answer = renew_key(&store, &RENEW, &key, lease_us, &leases).await;
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
                        store.leases.lost(seq);
                    } else {
                        store.leases.reschedule(seq, held, sent);
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
                for (seq, held) in leases {
                    store.leases.reschedule(seq, held, sent);
                }
            }
        }
    }
}

/// One key's renewal: the ids whose leases were gone.
async fn renew_key(
    store: &Inner,
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
    store.bounded(Op::Script(&inv)).await
}
