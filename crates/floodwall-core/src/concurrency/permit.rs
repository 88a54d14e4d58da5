//! [`Permit`]: one slot of a [`ConcurrencyLimit`](super::ConcurrencyLimit).

use std::fmt;

use super::memory::Slot;

/// One request's slot under a [`ConcurrencyLimit`](super::ConcurrencyLimit), given back
/// when this drops, whatever ends the request. Dropping never blocks. A permit leaked with
/// [`std::mem::forget`] keeps its slot as long as its process lives: never forget one.
#[must_use = "the slot is given back as soon as the permit drops"]
pub struct Permit {
    in_flight: u64,
    limit: u64,
    fallback: bool,
    hold: Hold,
}

/// What gives the slot back.
enum Hold {
    /// Nothing to give back (a fail-open permit).
    Nothing,
    /// A memory store's counter.
    Memory(Slot),
    /// Any other store's release, run once on drop.
    Store(Box<dyn FnOnce() + Send + Sync>),
}

impl Permit {
    /// A permit for a store of your own: `in_flight` holders of `limit` counting this one;
    /// `release` gives the slot back on drop and must not block.
    pub fn new(in_flight: u64, limit: u64, release: impl FnOnce() + Send + Sync + 'static) -> Self {
        Self::holding(in_flight, limit, Hold::Store(Box::new(release)))
    }

    /// A permit that holds no slot: a fail-open [`Fallback`](crate::resilience::Fallback)'s.
    pub fn unheld(limit: u64) -> Self {
        Self::holding(0, limit, Hold::Nothing).by_fallback()
    }

    pub(super) fn memory(in_flight: u64, limit: u64, slot: Slot) -> Self {
        Self::holding(in_flight, limit, Hold::Memory(slot))
    }

    fn holding(in_flight: u64, limit: u64, hold: Hold) -> Self {
        Self {
            in_flight,
            limit,
            fallback: false,
            hold,
        }
    }

    /// This permit, marked as given by a fallback in the store's stead.
    pub fn by_fallback(mut self) -> Self {
        self.fallback = true;
        self
    }

    /// Requests in flight on this key when the slot was granted, this one included.
    pub fn in_flight(&self) -> u64 {
        self.in_flight
    }

    /// The limit it was granted under.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Slots left on the key when this one was granted.
    pub fn remaining(&self) -> u64 {
        self.limit.saturating_sub(self.in_flight)
    }

    /// Whether a [`Fallback`](crate::resilience::Fallback) granted it because the store failed.
    pub fn is_fallback(&self) -> bool {
        self.fallback
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        match std::mem::replace(&mut self.hold, Hold::Nothing) {
            Hold::Nothing => {}
            Hold::Memory(slot) => slot.release(),
            Hold::Store(release) => release(),
        }
    }
}

impl fmt::Debug for Permit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Permit")
            .field("in_flight", &self.in_flight)
            .field("limit", &self.limit)
            .field("fallback", &self.fallback)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn a_store_permit_releases_once_on_drop() {
        let released = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&released);
        let permit = Permit::new(2, 5, move || {
            counter.fetch_add(1, Ordering::SeqCst);
        });
        assert_eq!((permit.in_flight(), permit.remaining()), (2, 3));
        assert!(!permit.is_fallback());
        assert_eq!(released.load(Ordering::SeqCst), 0);
        drop(permit);
        assert_eq!(released.load(Ordering::SeqCst), 1);
        let unheld = Permit::unheld(5);
        assert!(unheld.is_fallback());
        assert_eq!(unheld.remaining(), 5);
    }
}
