//! A refresh: a key's pending counts to the inner store, its new verdict back.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::LocalVerdicts;
use super::verdict::{KeyVerdict, Refreshed, Verdict};
use crate::store::{Store, StoreExt, lock, micros};
use crate::{Clock, Decision, Error, Policy};

/// A refresh in flight: its counts go back to `pending` if it is dropped unfinished.
pub(super) struct Refreshing {
    pub(super) kv: Arc<KeyVerdict>,
    taken: u64,
    sent: u64,
    done: bool,
}

impl Drop for Refreshing {
    fn drop(&mut self) {
        if !self.done {
            let mut v = lock(&self.kv.verdict);
            v.in_flight = false;
            if !v.removed {
                v.pending = v.pending.saturating_add(self.taken);
            }
        }
    }
}

/// Marks `v` (the verdict of `kv`) as refreshing and takes its pending counts.
pub(super) fn begin(kv: &Arc<KeyVerdict>, v: &mut Verdict, now: u64) -> Refreshing {
    v.in_flight = true;
    Refreshing {
        kv: Arc::clone(kv),
        taken: std::mem::take(&mut v.pending),
        sent: now,
        done: false,
    }
}

impl<S: Store, C: Clock> LocalVerdicts<S, C> {
    /// Sends every key's pending counts to the inner store now, as refreshes: call it at
    /// shutdown. Keys with a refresh in flight are skipped. On errors, the first is
    /// returned after every key was tried, and the failed keys keep their counts.
    pub async fn flush(&self) -> Result<(), Error> {
        let all: Vec<Arc<KeyVerdict>> = self.verdicts.map.pin().values().cloned().collect();
        let mut first = None;
        for kv in all {
            let refreshing = {
                let mut v = lock(&kv.verdict);
                if v.removed || v.in_flight || v.pending == 0 {
                    continue;
                }
                begin(&kv, &mut v, self.verdicts.clock.now_micros())
            };
            if let Err(e) = self.refresh(refreshing).await {
                first.get_or_insert(e);
            }
        }
        first.map_or(Ok(()), Err)
    }

    pub(super) async fn refresh(&self, mut r: Refreshing) -> Result<(), Error> {
        self.verdicts.refreshes.fetch_add(1, Ordering::Relaxed);
        let answer = self.record(&r.kv, r.taken).await;
        r.done = true;
        let mut v = lock(&r.kv.verdict);
        v.in_flight = false;
        if v.removed {
            // Reset meanwhile: what was carried belongs to the forgotten state.
            return answer.map(drop);
        }
        match answer {
            Ok(a) => {
                v.apply(a, r.sent, r.kv.policy.limit(), self.verdicts.interval);
                Ok(())
            }
            Err(e) => {
                v.pending = v.pending.saturating_add(r.taken);
                Err(e)
            }
        }
    }

    /// Records `taken` units in the inner store, or as much of them as fits.
    async fn record(&self, kv: &KeyVerdict, taken: u64) -> Result<Refreshed, Error> {
        let (key, policy) = (&*kv.key, &kv.policy);
        // `taken ≤ limit` by the invariant; never send a cost the store must refuse.
        let send = taken.min(policy.limit());
        let d = self.check_through(key, policy, send).await?;
        let reset = micros(d.reset_after);
        if d.is_allowed() {
            let left = taken - send;
            let budget = if left == 0 { d.remaining } else { 0 };
            return Ok(Refreshed {
                left,
                budget,
                retry: 0,
                banned: false,
                reset,
            });
        }
        let retry = d.retry_after.map_or(1, micros).max(1);
        let mut left = taken;
        let fits = d.remaining.min(send);
        if fits > 0 && self.check_through(key, policy, fits).await?.is_allowed() {
            left -= fits;
        }
        Ok(Refreshed {
            left,
            budget: 0,
            retry,
            banned: d.is_banned(),
            reset,
        })
    }

    pub(super) async fn check_through(
        &self,
        key: &[u8],
        policy: &Policy,
        cost: u64,
    ) -> Result<Decision, Error> {
        self.verdicts.store_calls.fetch_add(1, Ordering::Relaxed);
        self.store.check(key, policy, cost).await
    }
}
