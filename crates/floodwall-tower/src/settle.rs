//! Charging by the response: after the inner service answered, a rule says what the
//! request really cost ([`Settle`]), and the difference from what its check charged is
//! charged or refunded in the store ([`Store::adjust`]). See
//! [`RateLimitLayer::charge_by`](crate::RateLimitLayer::charge_by) and `docs/charging.md`.
//!
//! The store's change is applied before the response is returned when the store answers
//! at once (the memory store, or a deny cache in front of it): the client's next request
//! sees it. Otherwise (Redis) it runs on a task of its own, so no response waits for a
//! round trip it does not need; the next request of the same client may then be decided
//! before the change lands (one round trip at most). A failed change is logged, never
//! turned into an error response: the handler has already run.

use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Waker};

use floodwall_core::{Adjustment, Policy, Store};
use http::Response;
use http::response::Parts;

use crate::Key;
use crate::config::Config;

/// What a request cost, decided from its response by the rule given to
/// [`RateLimitLayer::charge_by`](crate::RateLimitLayer::charge_by).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Settle {
    /// What the check charged stands: the response counts as the request did.
    Keep,
    /// Give back what the check charged: the response does not count (a successful
    /// login, a request the handler refused).
    Refund,
    /// The request cost this much in all (the tokens an LLM answer used, the bytes
    /// sent): the difference from what the check charged is charged (even past the
    /// limit: the next requests are refused until it is paid off) or refunded.
    Cost(u64),
}

impl Settle {
    /// The change to make after a check that charged `charged`; `None`: none.
    pub(crate) fn adjustment(self, charged: u64) -> Option<Adjustment> {
        match self {
            Self::Keep => None,
            Self::Refund | Self::Cost(0) if charged == 0 => None,
            Self::Refund => Some(Adjustment::Refund(charged)),
            Self::Cost(n) if n > charged => Some(Adjustment::Charge(n - charged)),
            Self::Cost(n) if n < charged => Some(Adjustment::Refund(charged - n)),
            Self::Cost(_) => None,
        }
    }
}

/// The rule: the response's head (which it may change: a cost header the handler set is
/// usually removed) to what the request cost.
pub(crate) type SettleFn = dyn Fn(&mut Parts) -> Settle + Send + Sync;

/// What an admitted request settles once its response is there: made at its check, only
/// when the layer has a rule.
pub(crate) struct Settler(Box<dyn FnOnce(&mut Parts) + Send>);

impl Settler {
    /// The settling of a request of `key`, checked against `policies` at `cost`.
    pub(crate) fn new<St, K>(
        config: &Arc<Config<St, K>>,
        key: &Key,
        policies: &[Policy],
        cost: u64,
    ) -> Option<Self>
    where
        St: Store + 'static,
        K: Send + Sync + 'static,
    {
        let rule = Arc::clone(config.settle.as_ref()?);
        let config = Arc::clone(config);
        let key = key.clone();
        let policies = policies.to_vec();
        Some(Self(Box::new(move |head: &mut Parts| {
            if let Some(adjustment) = rule(head).adjustment(cost) {
                apply(config, key, policies, adjustment);
            }
        })))
    }

    /// Runs the rule on `res`'s head and applies what it says.
    pub(crate) fn apply<B>(self, res: &mut Response<B>) {
        // The rule sees a `Parts`, moved out of the response and back (the body stays).
        let (mut head, ()) = Response::new(()).into_parts();
        head.status = res.status();
        head.version = res.version();
        head.headers = std::mem::take(res.headers_mut());
        head.extensions = std::mem::take(res.extensions_mut());
        (self.0)(&mut head);
        *res.status_mut() = head.status;
        *res.headers_mut() = head.headers;
        *res.extensions_mut() = head.extensions;
    }
}

/// Makes `adjustment` on every policy: at once when the store answers without waiting,
/// else on a task of its own (see the module's docs).
fn apply<St, K>(config: Arc<Config<St, K>>, key: Key, policies: Vec<Policy>, adjustment: Adjustment)
where
    St: Store + 'static,
    K: Send + Sync + 'static,
{
    let mut change = Box::pin(async move {
        for policy in &policies {
            if let Err(error) = config
                .store
                .adjust(key.as_bytes(), policy, adjustment)
                .await
            {
                tracing::warn!(
                    target: "floodwall",
                    policy = policy.name(),
                    ?adjustment,
                    %error,
                    "could not settle a request's cost from its response"
                );
            }
        }
    });
    let mut cx = Context::from_waker(Waker::noop());
    if change.as_mut().poll(&mut cx).is_ready() {
        return;
    }
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) => {
            runtime.spawn(change);
        }
        Err(_) => tracing::warn!(
            target: "floodwall",
            ?adjustment,
            "no tokio runtime to settle a request's cost on; the change is lost"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_settlement_is_the_difference_from_what_the_check_charged() {
        assert_eq!(Settle::Keep.adjustment(3), None);
        assert_eq!(Settle::Refund.adjustment(3), Some(Adjustment::Refund(3)));
        assert_eq!(Settle::Refund.adjustment(0), None);
        assert_eq!(Settle::Cost(10).adjustment(1), Some(Adjustment::Charge(9)));
        assert_eq!(Settle::Cost(1).adjustment(4), Some(Adjustment::Refund(3)));
        assert_eq!(Settle::Cost(4).adjustment(4), None);
        assert_eq!(Settle::Cost(0).adjustment(0), None);
    }
}
