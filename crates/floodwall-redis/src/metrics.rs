//! [`RedisStore::record_metrics`] (feature `metrics`): what the store sent to Redis and
//! what coalescing and the deny cache saved, as counters of the `metrics` facade.

use metrics::Unit;

use crate::{RedisStats, RedisStore};

/// Counter: script calls (round trips) a store made for checks, by `store`.
pub const STORE_CALLS: &str = "floodwall.store.calls";
/// Counter: checks decided without a round trip of their own, by `store` and `reason`:
/// `coalesced` (answered by a batch with other checks) or `deny_cache` (refused from the
/// deny cache).
pub const STORE_SAVED: &str = "floodwall.store.saved";

impl RedisStore {
    /// Sets [`STORE_CALLS`] and [`STORE_SAVED`] to this store's figures
    /// ([`stats`](Self::stats)), labelled `store`, and describes them (their `# HELP`
    /// lines): call it where the metrics are read (before rendering a scrape, say). The
    /// counters are the store's own, kept whether or not metrics are on, so recording them
    /// costs the requests nothing.
    pub fn record_metrics(&self, store: &'static str) {
        record(store, self.stats());
    }
}

/// Describes the store's metrics and sets them to `stats`.
fn record(store: &'static str, stats: RedisStats) {
    metrics::describe_counter!(
        STORE_CALLS,
        Unit::Count,
        "Script calls (round trips) the Redis store made for checks, by store."
    );
    metrics::describe_counter!(
        STORE_SAVED,
        Unit::Count,
        "Checks the Redis store decided without a round trip of their own, by store and \
         reason: coalesced (in a batch with others) or deny_cache (refused from the deny \
         cache)."
    );
    metrics::counter!(STORE_CALLS, "store" => store).absolute(stats.script_calls);
    metrics::counter!(STORE_SAVED, "store" => store, "reason" => "coalesced")
        .absolute(stats.coalesced);
    metrics::counter!(STORE_SAVED, "store" => store, "reason" => "deny_cache")
        .absolute(stats.denied_locally);
}

#[cfg(test)]
mod tests {
    use metrics_util::debugging::{DebugValue, DebuggingRecorder};

    use super::*;

    /// A recorded metric: name, labels, unit, whether it is described, value.
    type Seen = (String, Vec<String>, Option<Unit>, bool, DebugValue);

    #[test]
    fn each_figure_is_recorded_under_its_label_and_described() {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        let stats = RedisStats {
            script_calls: 7,
            coalesced: 3,
            denied_locally: 11,
        };
        metrics::with_local_recorder(&recorder, || record("redis", stats));
        let mut seen: Vec<Seen> = snapshotter
            .snapshot()
            .into_vec()
            .into_iter()
            .map(|(key, unit, description, value)| {
                let key = key.key();
                let labels = key.labels().map(|l| format!("{}={}", l.key(), l.value()));
                let described = description.is_some_and(|d| !d.is_empty());
                (
                    key.name().to_owned(),
                    labels.collect(),
                    unit,
                    described,
                    value,
                )
            })
            .collect();
        seen.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
        let row = |name: &str, labels: &[&str], n| {
            let labels = labels.iter().map(|l| (*l).to_owned()).collect();
            (
                name.to_owned(),
                labels,
                Some(Unit::Count),
                true,
                DebugValue::Counter(n),
            )
        };
        assert_eq!(
            seen,
            [
                row(STORE_CALLS, &["store=redis"], 7),
                row(STORE_SAVED, &["store=redis", "reason=coalesced"], 3),
                row(STORE_SAVED, &["store=redis", "reason=deny_cache"], 11),
            ]
        );
    }
}
