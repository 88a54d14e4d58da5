//! In-flight counts in a [`MemoryStore`]: a counter per (limit, key) with a request in
//! flight, taken by compare-and-swap and removed when its last permit drops.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::{Acquired, ConcurrencyLimit, Full, Permit};
use crate::store::key::{KeyBuf, MapKey};
use crate::{Clock, Error, MemoryStore};

/// Marks a counter whose last permit dropped: whoever finds it looks the key up again.
const DEAD: u64 = u64::MAX;

/// Every key with a request in flight, and how many: shared by a memory store's clones
/// and the permits it granted.
pub(crate) struct Slots {
    map: papaya::HashMap<MapKey, AtomicU64, ahash::RandomState>,
    max_keys: usize,
}

/// One granted slot: the counter it was taken from, decremented on release.
pub(crate) struct Slot {
    slots: Arc<Slots>,
    key: MapKey,
}

impl Slots {
    /// At most `max_keys` keys (at least 1) with requests in flight at once.
    pub(crate) fn new(max_keys: usize) -> Arc<Self> {
        Arc::new(Self {
            map: crate::store::new_map(),
            max_keys: max_keys.max(1),
        })
    }

    /// A slot under `limit` for `key`, or how full it is. Exact: the count moves by
    /// compare-and-swap, and a counter leaves the map only once 0 and marked dead.
    fn acquire(self: &Arc<Self>, key: &[u8], limit: &ConcurrencyLimit) -> Result<Acquired, Error> {
        let buf = KeyBuf::new(key);
        let key = buf.as_ref(limit.namespace());
        let max = limit.max();
        let map = self.map.pin();
        loop {
            let count = match map.get(&key) {
                Some(count) => count,
                // Entries are only keys with a request in flight, so none can be evicted:
                // past the cap a new key is shed, as an overloaded store's call would be.
                None if map.len() >= self.max_keys => {
                    return Err(Error::Overloaded {
                        max_in_flight: self.max_keys,
                    });
                }
                None => match map.try_insert(key.to_owned(), AtomicU64::new(0)) {
                    Ok(count) => count,
                    Err(occupied) => occupied.current,
                },
            };
            let mut current = count.load(Ordering::Acquire);
            loop {
                if current == DEAD {
                    break;
                }
                if current >= max {
                    return Ok(Acquired::Full(Full::new(current, max)));
                }
                match count.compare_exchange_weak(
                    current,
                    current + 1,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                ) {
                    Ok(_) => {
                        let slot = Slot {
                            slots: Arc::clone(self),
                            key: key.to_owned(),
                        };
                        return Ok(Acquired::Granted(Permit::memory(current + 1, max, slot)));
                    }
                    Err(seen) => current = seen,
                }
            }
            // Its last permit dropped under our feet: help remove it, then look again.
            let _ = map.remove_if(&key, |_, c| c.load(Ordering::Acquire) == DEAD);
        }
    }

    fn len(&self) -> usize {
        self.map.len()
    }
}

impl Slot {
    /// Gives the slot back; the last one out removes the key.
    pub(super) fn release(self) {
        let map = self.slots.map.pin();
        // A held slot keeps its counter above 0, so it is still there.
        let Some(count) = map.get(&self.key) else {
            return;
        };
        if count.fetch_sub(1, Ordering::AcqRel) == 1
            && count
                .compare_exchange(0, DEAD, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        {
            let _ = map.remove_if(&self.key, |_, c| c.load(Ordering::Acquire) == DEAD);
        }
    }
}

impl<C: Clock> MemoryStore<C> {
    /// An acquisition without the future. Past [`max_keys`](crate::MemoryStoreBuilder::max_keys)
    /// keys in flight a new key is [`Error::Overloaded`]: none holding slots can be evicted.
    pub(crate) fn acquire_sync(
        &self,
        key: &[u8],
        limit: &ConcurrencyLimit,
    ) -> Result<Acquired, Error> {
        self.slots().acquire(key, limit)
    }
}

impl<C> MemoryStore<C> {
    /// Keys with at least one request in flight now (under any [`ConcurrencyLimit`]).
    pub fn in_flight_keys(&self) -> usize {
        self.slots().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn granted(store: &MemoryStore, key: &[u8], limit: &ConcurrencyLimit) -> Permit {
        match store.acquire_sync(key, limit).unwrap() {
            Acquired::Granted(p) => p,
            Acquired::Full(f) => panic!("refused: {f:?}"),
        }
    }

    #[test]
    fn keys_and_limits_count_apart_and_leave_when_their_last_permit_drops() {
        let store = MemoryStore::new();
        let two = ConcurrencyLimit::new("two", 2).unwrap();
        let one = ConcurrencyLimit::new("one", 1).unwrap();
        let a1 = granted(&store, b"a", &two);
        let a2 = granted(&store, b"a", &two);
        assert_eq!((a1.in_flight(), a2.in_flight(), a2.remaining()), (1, 2, 0));
        assert!(!store.acquire_sync(b"a", &two).unwrap().is_granted());
        // Another key, another limit: counted apart.
        let b = granted(&store, b"b", &two);
        let a_one = granted(&store, b"a", &one);
        // A long (digested) key too.
        let long = granted(&store, &[7; 300], &one);
        assert!(!store.acquire_sync(&[7; 300], &one).unwrap().is_granted());
        assert_eq!(store.in_flight_keys(), 4);
        drop(a1);
        assert_eq!(granted(&store, b"a", &two).in_flight(), 2);
        drop((a2, b, a_one, long));
        assert_eq!(store.in_flight_keys(), 0, "no key outlives its permits");
        // The rate-limit state is apart: nothing was stored there.
        assert!(store.is_empty());
    }

    #[test]
    fn past_the_cap_a_new_key_is_shed_and_held_keys_still_count() {
        let store = MemoryStore::builder().max_keys(2).build();
        let limit = ConcurrencyLimit::new("l", 5).unwrap();
        let _a = granted(&store, b"a", &limit);
        let _b = granted(&store, b"b", &limit);
        let err = store.acquire_sync(b"c", &limit).unwrap_err();
        assert!(err.is_overloaded() && err.is_store_failure(), "{err}");
        // Keys already held are not new.
        assert_eq!(granted(&store, b"a", &limit).in_flight(), 2);
        drop(_b);
        assert!(store.acquire_sync(b"c", &limit).unwrap().is_granted());
    }
}
