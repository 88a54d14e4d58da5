//! What a layer was configured with: every service it builds shares one copy.

use std::sync::{Arc, OnceLock};

use floodwall_core::Policy;
use http::request::Parts;

use crate::choose::ChoosePolicy;
use crate::headers::{self, HeaderStyle, IetfConsts};
use crate::observe::{self, Meter};
use crate::options::Refusals;
use crate::outage::Outage;
use crate::settle;
#[cfg(feature = "wait")]
use crate::wait::Waiting;

/// Without the `wait` feature a refused request never waits.
#[cfg(not(feature = "wait"))]
#[derive(Clone, Default)]
pub(crate) struct Waiting;

#[cfg(not(feature = "wait"))]
impl Waiting {
    /// How long a refused request may wait: never.
    pub(crate) fn max_wait(&self) -> Option<std::time::Duration> {
        None
    }
}

pub(crate) type CostFn = dyn Fn(&Parts) -> u64 + Send + Sync;

/// Everything a [`RateLimitLayer`](crate::RateLimitLayer) was configured with, held by its
/// services behind one `Arc`. The key extractor, the chooser and the responders are held
/// once, behind `Arc`s, so none of them needs to be `Clone`.
pub(crate) struct Config<St, K> {
    pub(crate) store: St,
    pub(crate) key: Arc<K>,
    pub(crate) policies: Arc<[Policy]>,
    pub(crate) chooser: Option<Arc<dyn ChoosePolicy>>,
    pub(crate) cost: Option<Arc<CostFn>>,
    pub(crate) refusals: Refusals,
    /// Whether this configuration's policies are in shadow mode.
    pub(crate) shadow: bool,
    /// Whether the layer enforces none of its own policies (each in shadow or off): a
    /// request without a key is then let through, as in shadow mode.
    pub(crate) enforces_none: bool,
    /// The IETF header values of `policies`, found on first use (`None`: not interned,
    /// built per response).
    pub(crate) ietf_consts: OnceLock<Option<&'static IetfConsts>>,
    pub(crate) store_down: Outage,
    /// Waiting instead of refusing: off unless `RateLimitLayer::wait` turned it on.
    pub(crate) waiting: Waiting,
    /// The metrics handles of `policies` (nothing without the `metrics` feature).
    pub(crate) metrics: observe::Cache,
    /// Charging by the response: off unless `charge_by` turned it on.
    pub(crate) settle: settle::Rule,
}

// By hand: a derive would ask `K: Clone`, and the key extractor is shared, not cloned.
impl<St: Clone, K> Clone for Config<St, K> {
    fn clone(&self) -> Self {
        Self {
            store: self.store.clone(),
            key: Arc::clone(&self.key),
            policies: Arc::clone(&self.policies),
            chooser: self.chooser.clone(),
            cost: self.cost.clone(),
            refusals: self.refusals.clone(),
            shadow: self.shadow,
            enforces_none: self.enforces_none,
            ietf_consts: self.ietf_consts.clone(),
            store_down: self.store_down.clone(),
            waiting: self.waiting.clone(),
            metrics: self.metrics.clone(),
            settle: self.settle.clone(),
        }
    }
}

impl<St, K> Config<St, K> {
    pub(crate) fn new(store: St, key: K, policy: Policy) -> Self {
        Self {
            store,
            key: Arc::new(key),
            policies: Arc::from([policy]),
            chooser: None,
            cost: None,
            refusals: Refusals::new(),
            shadow: false,
            enforces_none: false,
            ietf_consts: OnceLock::new(),
            store_down: Outage::default(),
            waiting: Default::default(),
            metrics: Default::default(),
            settle: Default::default(),
        }
    }

    /// The same configuration with another store and key extractor.
    pub(crate) fn rebuild<St2, K2>(
        self,
        store: impl FnOnce(St) -> St2,
        key: impl FnOnce(Arc<K>) -> Arc<K2>,
    ) -> Config<St2, K2> {
        Config {
            store: store(self.store),
            key: key(self.key),
            policies: self.policies,
            chooser: self.chooser,
            cost: self.cost,
            refusals: self.refusals,
            shadow: self.shadow,
            enforces_none: self.enforces_none,
            ietf_consts: self.ietf_consts,
            store_down: self.store_down,
            waiting: self.waiting,
            metrics: self.metrics,
            settle: self.settle,
        }
    }

    /// What the metrics hooks read: the handles of this configuration's own policies.
    pub(crate) fn meter(&self) -> Meter<'_> {
        Meter {
            cache: &self.metrics,
            own: &self.policies,
            shadow: self.shadow,
        }
    }

    /// The IETF values of the layer's own policies, worked out once; `None` for any other
    /// list, another style, or past the interning bound.
    pub(crate) fn ietf_consts(&self, policies: &[Policy]) -> Option<&'static IetfConsts> {
        if self.refusals.headers != HeaderStyle::Ietf || !std::ptr::eq(policies, &*self.policies) {
            return None;
        }
        *self
            .ietf_consts
            .get_or_init(|| headers::ietf_consts(policies))
    }
}

/// What waiting and settling hold of a configuration shared by its services: its store.
impl<St, K> AsRef<St> for Config<St, K> {
    fn as_ref(&self) -> &St {
        &self.store
    }
}
