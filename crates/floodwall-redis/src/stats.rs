//! [`RedisStats`]: what a store sent to Redis, and what coalescing and the deny cache saved.

use std::sync::atomic::{AtomicU64, Ordering};

/// Work a [`RedisStore`](crate::RedisStore) sent to Redis, and work coalescing and the deny
/// cache saved: read it to see whether [`coalesce`](crate::RedisStoreBuilder::coalesce) or
/// [`deny_cache`](crate::RedisStoreBuilder::deny_cache) pays for a workload.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RedisStats {
    /// Script calls (EVALSHA round trips) made for checks, batches included.
    pub script_calls: u64,
    /// Checks answered by a batch they joined with other checks (of any keys): calls
    /// saved.
    pub coalesced: u64,
    /// Checks refused by the [deny cache](crate::RedisStoreBuilder::deny_cache) without a
    /// script call: calls saved (0 when it is off; its other counters are in
    /// [`RedisStore::deny_cache_stats`](crate::RedisStore::deny_cache_stats)).
    pub denied_locally: u64,
}

/// The counters behind [`RedisStats`], shared by a store's clones.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    script_calls: AtomicU64,
    coalesced: AtomicU64,
}

impl Counters {
    /// One check's own script call.
    pub(crate) fn single(&self) {
        self.script_calls.fetch_add(1, Ordering::Relaxed);
    }

    /// One batch call deciding `checks` checks: all but one are calls saved.
    pub(crate) fn batch(&self, checks: usize) {
        self.script_calls.fetch_add(1, Ordering::Relaxed);
        self.coalesced
            .fetch_add(checks as u64 - 1, Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> RedisStats {
        RedisStats {
            script_calls: self.script_calls.load(Ordering::Relaxed),
            coalesced: self.coalesced.load(Ordering::Relaxed),
            denied_locally: 0,
        }
    }
}
