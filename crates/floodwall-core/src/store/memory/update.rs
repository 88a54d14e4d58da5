//! One read-modify-write of a key's state for bookings, charges and refunds, as a check
//! does it (the check keeps its own loop in `memory.rs`, tuned for the hot path).

use std::sync::atomic::Ordering;

use super::{BUSY, KeyState, MemoryStore, settled};
use crate::algorithm::gcra::Gcra;
use crate::store::key::KeyRef;
use crate::store::lock;
use crate::{Clock, Error, Policy, State};

impl<C: Clock> MemoryStore<C> {
    /// Applies `on_tat` to a GCRA TAT (its answer, and the TAT to write) or `on_state` to
    /// any other state (its answer, and µs until the state is fresh again). An unknown key
    /// is created when `create`, else the answer is `None`.
    pub(super) fn update<T>(
        &self,
        key: KeyRef<'_>,
        policy: &Policy,
        now: u64,
        create: bool,
        mut on_tat: impl FnMut(&Gcra, u64) -> (T, Option<u64>),
        mut on_state: impl FnMut(&mut State) -> Result<(T, u64), Error>,
    ) -> Result<Option<T>, Error> {
        let map = self.inner.map.pin();
        loop {
            let entry = match map.get(&key) {
                Some(entry) => entry,
                None if !create => return Ok(None),
                None => self.insert(&map, key, KeyState::fresh(policy), now),
            };
            let answer = match (entry, policy.engine().gcra()) {
                (KeyState::Gcra(tat), Some(gcra)) => {
                    let mut t = tat.load(Ordering::Acquire);
                    loop {
                        // Held by a check of several policies (`all.rs`): its write first.
                        if t >= BUSY {
                            let Some(settled) = settled(tat) else {
                                break None;
                            };
                            t = settled;
                        }
                        let (answer, next) = on_tat(gcra, t);
                        let Some(next) = next else {
                            break Some(answer);
                        };
                        match tat.compare_exchange_weak(
                            t,
                            next,
                            Ordering::AcqRel,
                            Ordering::Acquire,
                        ) {
                            Ok(_) => break Some(answer),
                            Err(seen) => t = seen,
                        }
                    }
                }
                (KeyState::Locked(l), None) => match lock(&l.state).as_mut() {
                    None => None,
                    Some(state) => {
                        let (answer, fresh_in) = on_state(state)?;
                        l.expires.fetch_max(now + fresh_in, Ordering::AcqRel);
                        Some(answer)
                    }
                },
                _ => return Err(Error::StateMismatch),
            };
            if let Some(answer) = answer {
                return Ok(Some(answer));
            }
            // Evicted under our feet: help remove it, then look again.
            let _ = map.remove_if(&key, |_, s| s.is_dead());
        }
    }
}
