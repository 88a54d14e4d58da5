//! What a [`ConcurrencyLimitLayer`](super::ConcurrencyLimitLayer) was configured with, and
//! what an acquisition's answer means for its request.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use floodwall_core::{Acquired, ConcurrencyLimit, Error, Permit};

use crate::extract::OnMissingKey;
use crate::headers::{HeaderStyle, InFlightHeaders};
use crate::mode::sealed::Refuse;
use crate::respond::{Denial, OnReject, OnStoreFailure, ServiceUnavailable, TooManyRequests};

/// Everything an in-flight layer was configured with; its services share one `Arc` of it.
/// The extractor and the responders are the rate layer's own traits, held once.
pub(crate) struct InFlightConfig<St, K> {
    pub(crate) store: St,
    pub(crate) key: Arc<K>,
    pub(crate) limit: ConcurrencyLimit,
    pub(crate) on_reject: Arc<dyn OnReject>,
    pub(crate) on_failure: Arc<dyn OnStoreFailure>,
    pub(crate) on_missing: OnMissingKey,
    /// The headers of `limit` in the configured style, built once; `None` sends none.
    pub(crate) headers: Option<Arc<InFlightHeaders>>,
    pub(crate) shadow: bool,
    /// Whether the store's last answer was a failure: logged once per outage.
    pub(crate) store_down: Arc<AtomicBool>,
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
            on_reject: Arc::clone(&self.on_reject),
            on_failure: Arc::clone(&self.on_failure),
            on_missing: self.on_missing,
            headers: self.headers.clone(),
            shadow: self.shadow,
            store_down: Arc::clone(&self.store_down),
            metrics: self.metrics.clone(),
        }
    }
}

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
            on_reject: Arc::new(TooManyRequests),
            on_failure: Arc::new(ServiceUnavailable::default()),
            on_missing: OnMissingKey::Reject,
            shadow: false,
            store_down: Arc::new(AtomicBool::new(false)),
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
            on_reject: self.on_reject,
            on_failure: self.on_failure,
            on_missing: self.on_missing,
            headers: self.headers,
            shadow: self.shadow,
            store_down: self.store_down,
            metrics: self.metrics,
        }
    }

    /// Headers in another style.
    pub(crate) fn set_style(&mut self, style: HeaderStyle) {
        self.headers = (style != HeaderStyle::None)
            .then(|| Arc::new(InFlightHeaders::new(style, &self.limit)));
    }

    fn headers_for(&self, remaining: u64) -> Option<(Arc<InFlightHeaders>, u64)> {
        self.headers.as_ref().map(|h| (Arc::clone(h), remaining))
    }

    /// What the store's answer means for the request.
    pub(crate) fn settle<M: Refuse>(&self, result: Result<Acquired, Error>) -> Outcome<M::Refusal> {
        crate::observe::in_flight(&self.metrics, &self.limit, self.shadow, &result);
        match result {
            Ok(Acquired::Granted(permit)) => {
                self.store_answered();
                Outcome::Admit(Granted {
                    headers: self.headers_for(permit.remaining()),
                    permit: Some(permit),
                })
            }
            Ok(Acquired::Full(full)) => {
                self.store_answered();
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
                    let mut res = self.on_reject.respond(denial);
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
        if !self.store_down.load(Ordering::Relaxed)
            && !self.store_down.swap(true, Ordering::Relaxed)
        {
            let mode = if open { "shadow mode" } else { "fail closed" };
            tracing::error!(
                target: "floodwall",
                %error,
                mode,
                "in-flight limit store failing; answering per the fail mode until it answers"
            );
        } else {
            tracing::debug!(target: "floodwall", %error, "in-flight limit store failed");
        }
        if open {
            return Outcome::Admit(Granted::default());
        }
        Outcome::Refuse(M::store_failed(error, |error| {
            self.on_failure.respond(error)
        }))
    }

    fn store_answered(&self) {
        if self.store_down.load(Ordering::Relaxed) && self.store_down.swap(false, Ordering::Relaxed)
        {
            tracing::info!(target: "floodwall", "in-flight limit store answers again");
        }
    }
}
