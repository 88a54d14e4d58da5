//! [`RedisStore::record_metrics`] (feature `metrics`): what the store sent to Redis and
//! what coalescing and the deny cache saved, as counters of the `metrics` facade.

use crate::RedisStore;

/// Counter: script calls (round trips) a store made for checks, by `store`.
pub const STORE_CALLS: &str = "floodwall.store.calls";
/// Counter: checks decided without a round trip of their own, by `store` and `reason`:
/// `coalesced` (answered by a batch with other checks) or `deny_cache` (refused from the
/// deny cache).
pub const STORE_SAVED: &str = "floodwall.store.saved";

impl RedisStore {
    /// Sets [`STORE_CALLS`] and [`STORE_SAVED`] to this store's figures
    /// ([`stats`](Self::stats)), labelled `store`: call it where the metrics are read
    /// (before rendering a scrape, say). The counters are the store's own, kept whether or
    /// not metrics are on, so recording them costs the requests nothing.
    pub fn record_metrics(&self, store: &'static str) {
        let stats = self.stats();
        metrics::counter!(STORE_CALLS, "store" => store).absolute(stats.script_calls);
        metrics::counter!(STORE_SAVED, "store" => store, "reason" => "coalesced")
            .absolute(stats.coalesced);
        metrics::counter!(STORE_SAVED, "store" => store, "reason" => "deny_cache")
            .absolute(stats.denied_locally);
    }
}
