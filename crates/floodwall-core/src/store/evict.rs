//! Bounding a map of expiring entries: the cap, and the eviction run at it.

use std::hash::{BuildHasher, Hash};
use std::sync::{Mutex, MutexGuard};

use super::lock;

/// A cap on a map's keys, and the lock that lets one caller at a time make room.
pub(crate) struct Cap {
    max_keys: usize,
    sweeping: Mutex<()>,
}

impl Cap {
    /// A cap of `max_keys`, at least 1.
    pub(crate) fn new(max_keys: usize) -> Self {
        Self {
            max_keys: max_keys.max(1),
            sweeping: Mutex::new(()),
        }
    }

    pub(crate) fn max_keys(&self) -> usize {
        self.max_keys
    }

    /// Before a new key goes in: at the cap, one caller runs `shrink(90% of the cap)`.
    pub(crate) fn make_room(&self, len: impl Fn() -> usize, shrink: impl FnOnce(usize)) {
        if len() < self.max_keys {
            return;
        }
        let _sweeping = lock(&self.sweeping);
        if len() < self.max_keys {
            return;
        }
        shrink(self.max_keys - self.max_keys / 10 - 1);
    }

    /// Keeps [`make_room`](Self::make_room) out while held (a sweep on request).
    pub(crate) fn exclusive(&self) -> MutexGuard<'_, ()> {
        lock(&self.sweeping)
    }
}

/// Evicts entries of `map` until at most `target` remain, those expiring soonest first;
/// `evict(entry, threshold)` may refuse one (renewed meanwhile). Returns how many went.
/// Ties are sampled across the table: removing a block of neighbours leaves tombstones
/// that new keys probe through, and under a flood of keys expiring at once that made the
/// table grow without end.
pub(crate) fn evict_soonest<K, V, S>(
    map: &papaya::HashMap<K, V, S>,
    target: usize,
    seed: u64,
    expires_at: impl Fn(&V) -> u64,
    evict: impl Fn(&V, u64) -> bool,
) -> usize
where
    K: Hash + Eq,
    S: BuildHasher,
{
    let map = map.pin();
    let mut expiries: Vec<u64> = map.values().map(&expires_at).collect();
    let excess = expiries.len().saturating_sub(target);
    if excess == 0 {
        return 0;
    }
    let threshold = *expiries.select_nth_unstable(excess - 1).1;
    let sooner = expiries.iter().filter(|&&e| e < threshold).count();
    let mut ties = expiries.iter().filter(|&&e| e == threshold).count();
    drop(expiries);
    let mut budget = excess;
    // Strictly sooner first: their order in the table owes nothing to their expiry.
    if sooner > 0 {
        map.retain(|_, v| {
            let go = budget > 0 && expires_at(v) < threshold && evict(v, threshold);
            budget -= usize::from(go);
            !go
        });
    }
    // Then ties, each with probability budget / ties left (selection sampling).
    let mut rng = Xorshift::new(seed);
    map.retain(|_, v| {
        if budget == 0 || expires_at(v) != threshold {
            return true;
        }
        let pick = rng.below(ties.max(1)) < budget;
        ties = ties.saturating_sub(1);
        let go = pick && evict(v, threshold);
        budget -= usize::from(go);
        !go
    });
    excess - budget
}

/// A tiny PRNG for spreading evictions; no need for quality or secrecy here.
struct Xorshift(u64);

impl Xorshift {
    fn new(seed: u64) -> Self {
        Self(seed | 1)
    }

    /// A number in `0..n` (`n > 0`), close enough to uniform for sampling.
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}
