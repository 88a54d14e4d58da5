//! What a [`ConcurrencyLimitLayer`](super::ConcurrencyLimitLayer) was configured with, and
//! what an acquisition's answer means for its request.

use std::sync::Arc;

use floodwall_core::{Acquired, ConcurrencyLimit, Error, Permit};

use crate::headers::{HeaderStyle, InFlightHeaders};
use crate::mode::sealed::Refuse;
use crate::options::Refusals;
use crate::outage::Outage;
use crate::respond::Denial;

/// Everything an in-flight layer was configured with; its services share one `Arc` of it.
pub(crate) struct InFlightConfig<St, K> {
    pub(crate) store: St,
    pub(crate) key: Arc<K>,
    pub(crate) limit: ConcurrencyLimit,
    /// Its `headers` are built into `headers` below.
    pub(crate) refusals: Refusals,
    /// The headers of `limit` in the configured style, built once; `None` sends none.
    pub(crate) headers: Option<Arc<InFlightHeaders>>,
    pub(crate) shadow: bool,
    pub(crate) store_down: Outage,
    /// The limit's metrics handles (nothing without the `metrics` feature).
    pub(crate) metrics: crate::observe::InFlightCache,
}

// By hand: a derive would ask `K: Clone`, and the extractor is shared, not cloned.
impl<St: Clone, K> Clone for InFlightConfig<St, K> {
    fn clone(&self) -> Self {
        Self {
            store: self.store.clone(),
            key: Arc::clone(&self.key),
            limit: self.limit.clone(),
            refusals: self.refusals.clone(),
            headers: self.headers.clone(),
            shadow: self.shadow,
            store_down: self.store_down.clone(),
            metrics: self.metrics.clone(),
        }
    }
}

/// What the outage log lines call the store.
const WHAT: &str = "in-flight limit";

/// What follows an acquisition: call the inner service (holding this, if anything), or
/// answer with the mode's refusal.
pub(crate) enum Outcome<R> {
    Admit(Granted),
    Refuse(R),
}

/// What an admitted request carries to its response: the permit its body will hold, and
/// the headers to add.
#[derive(Default)]
pub(crate) struct Granted {
    pub(crate) permit: Option<Permit>,
    /// The layer's headers and the slots left on the key.
    pub(crate) headers: Option<(Arc<InFlightHeaders>, u64)>,
}

impl<St, K> InFlightConfig<St, K> {
    pub(crate) fn new(store: St, key: K, limit: ConcurrencyLimit) -> Self {
        Self {
            store,
            key: Arc::new(key),
            headers: Some(Arc::new(InFlightHeaders::new(HeaderStyle::Ietf, &limit))),
            limit,
            refusals: Refusals::new(),
            shadow: false,
            store_down: Outage::default(),
            metrics: Default::default(),
        }
    }

    /// The same configuration with another store and extractor.
    pub(crate) fn rebuild<St2, K2>(
        self,
        store: impl FnOnce(St) -> St2,
        key: impl FnOnce(Arc<K>) -> Arc<K2>,
    ) -> InFlightConfig<St2, K2> {
        InFlightConfig {
            store: store(self.store),
            key: key(self.key),
            limit: self.limit,
            refusals: self.refusals,
            headers: self.headers,
            shadow: self.shadow,
            store_down: self.store_down,
            metrics: self.metrics,
        }
    }

    /// Refusals and headers in another style.
    pub(crate) fn set_refusals(&mut self, refusals: Refusals) {
        let style = refusals.headers;
        self.headers = (style != HeaderStyle::None)
            .then(|| Arc::new(InFlightHeaders::new(style, &self.limit)));
        self.refusals = refusals;
    }

    fn headers_for(&self, remaining: u64) -> Option<(Arc<InFlightHeaders>, u64)> {
        self.headers.as_ref().map(|h| (Arc::clone(h), remaining))
    }

    /// What the store's answer means for the request.
    pub(crate) fn settle<M: Refuse>(&self, result: Result<Acquired, Error>) -> Outcome<M::Refusal> {
        crate::observe::in_flight(&self.metrics, &self.limit, self.shadow, &result);
        match result {
            Ok(Acquired::Granted(permit)) => {
                self.store_down.answered(WHAT);
                Outcome::Admit(Granted {
                    headers: self.headers_for(permit.remaining()),
                    permit: Some(permit),
                })
            }
            Ok(Acquired::Full(full)) => {
                self.store_down.answered(WHAT);
                let denial = Denial::in_flight(self.limit.clone(), full);
                let remaining = full.limit.saturating_sub(full.in_flight);
                if self.shadow {
                    tracing::info!(
                        target: "floodwall",
                        limit = self.limit.name(),
                        in_flight = full.in_flight,
                        "shadow mode: this request would have been refused (too many in flight)"
                    );
                    return Outcome::Admit(Granted {
                        permit: None,
                        headers: self.headers_for(remaining),
                    });
                }
                Outcome::Refuse(M::denied(&denial, |denial| {
                    let mut res = self.refusals.on_reject.respond(denial);
                    if let Some(headers) = &self.headers {
                        headers.write(remaining, res.headers_mut());
                    }
                    res
                }))
            }
            Err(error) => self.store_failed::<M>(error),
        }
    }

    fn store_failed<M: Refuse>(&self, error: Error) -> Outcome<M::Refusal> {
        let open = self.shadow;
        if self.store_down.failed(WHAT, &error) {
            let mode = if open { "shadow mode" } else { "fail closed" };
            tracing::error!(
                target: "floodwall",
                %error,
                mode,
                "in-flight limit store failing; answering per the fail mode until it answers"
            );
        }
        if open {
            return Outcome::Admit(Granted::default());
        }
        Outcome::Refuse(M::store_failed(error, |error| {
            self.refusals.on_failure.respond(error)
        }))
    }
}
