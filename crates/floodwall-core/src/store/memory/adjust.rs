//! The memory store's charges and refunds, on the same key states (and under the same
//! compare-and-swap or lock) as its checks, so they are exact however many threads check
//! the key at once.

use std::sync::atomic::{AtomicU64, Ordering};

use super::{BUSY, DEAD, KeyState, MemoryStore, wait_while_busy};
use crate::algorithm::clamp_now;
use crate::store::key::KeyBuf;
use crate::store::lock;
use crate::{Adjustment, Clock, Error, Policy};

impl<C: Clock> MemoryStore<C> {
    /// [`Store::adjust`](crate::Store::adjust) without the future: charges or refunds
    /// `key` at once (see [`Adjustment`] for each algorithm).
    pub fn adjust_sync(
        &self,
        key: &[u8],
        policy: &Policy,
        adjustment: Adjustment,
    ) -> Result<(), Error> {
        let now = clamp_now(self.inner.clock.now_micros());
        let buf = KeyBuf::new(key);
        let key = buf.as_ref(policy.namespace());
        let map = self.inner.map.pin();
        loop {
            let entry = match (map.get(&key), adjustment) {
                (Some(entry), _) => entry,
                // A key never seen (or forgotten) has nothing to refund.
                (None, Adjustment::Refund(_) | Adjustment::Charge(0)) => return Ok(()),
                (None, Adjustment::Charge(_)) => {
                    let fresh = match policy.engine().gcra() {
                        Some(_) => KeyState::Gcra(AtomicU64::new(0)),
                        None => KeyState::locked(),
                    };
                    self.insert(&map, key, fresh, now)
                }
            };
            let done = match (entry, policy.engine().gcra()) {
                (KeyState::Gcra(tat), Some(gcra)) => {
                    let mut t = tat.load(Ordering::Acquire);
                    loop {
                        // Held by a check of several policies (`all.rs`): its write first.
                        if t == BUSY {
                            t = wait_while_busy(tat);
                            continue;
                        }
                        if t == DEAD {
                            break false;
                        }
                        let next = gcra.adjust(t, now, adjustment).unwrap_or(t);
                        match tat.compare_exchange_weak(
                            t,
                            next,
                            Ordering::AcqRel,
                            Ordering::Acquire,
                        ) {
                            Ok(_) => break true,
                            Err(seen) => t = seen,
                        }
                    }
                }
                (KeyState::Locked(l), None) => {
                    let mut guard = lock(&l.state);
                    match guard.as_mut() {
                        None => false,
                        Some(state) => {
                            let reset = policy.engine().adjust(state, now, adjustment)?;
                            l.expires.fetch_max(now + reset, Ordering::AcqRel);
                            true
                        }
                    }
                }
                _ => return Err(Error::StateMismatch),
            };
            if done {
                return Ok(());
            }
            // Evicted under our feet: help remove it, then look again.
            let _ = map.remove_if(&key, |_, s| s.is_dead());
        }
    }
}
