//! Charging by the response: a rule says what the request really cost, and the difference
//! from what its check charged is charged or refunded in the store before the response is
//! returned ([`floodwall_core::guide::charging`] says why). A failed change is logged.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

#[cfg(feature = "charge")]
use floodwall_core::{Adjustment, StoreExt};
use floodwall_core::{Policy, Store};
use http::Response;
#[cfg(feature = "charge")]
use http::response::Parts;

use crate::key::Key;

#[cfg(feature = "charge")]
/// What a request cost, decided from its response by the rule given to
/// [`RateLimitLayer::charge_by`](crate::RateLimitLayer::charge_by).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Settle {
    /// What the check charged stands: the response counts as the request did.
    Keep,
    /// Give back what the check charged: the response does not count.
    Refund,
    /// The request cost this much in all: the difference from what the check charged is
    /// charged (even past the limit) or refunded.
    Cost(u64),
}

#[cfg(feature = "charge")]
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

#[cfg(feature = "charge")]
/// The rule: the response's head (which it may change) to what the request cost.
pub(crate) type SettleFn = dyn Fn(&mut Parts) -> Settle + Send + Sync;

/// A layer's rule, if it has one: what it keeps for settling.
#[cfg(feature = "charge")]
#[derive(Clone, Default)]
pub(crate) struct Rule(pub(crate) Option<Arc<SettleFn>>);

/// Without the `charge` feature a layer has no rule.
#[cfg(not(feature = "charge"))]
#[derive(Clone, Default)]
pub(crate) struct Rule;

/// The store's change a response settles, made by the rule.
type Change = Pin<Box<dyn Future<Output = ()> + Send>>;

/// What an admitted request settles once its response is there: made at its check, only
/// when the layer has a rule.
#[cfg(feature = "charge")]
pub(crate) struct Settler(Box<RunRule>);

/// Without the `charge` feature no request settles anything.
#[cfg(not(feature = "charge"))]
pub(crate) enum Settler {}

/// A rule bound to one request: the response's head to the store's change, if any.
#[cfg(feature = "charge")]
type RunRule = dyn FnOnce(&mut Parts) -> Option<Change> + Send;

#[cfg(not(feature = "charge"))]
impl Settler {
    fn apply<B>(self, _: &mut Response<B>) -> Option<Change> {
        match self {}
    }
}

impl Settler {
    /// The settling of a request of `key`, checked against `policies` at `cost`, in the
    /// store `store` holds; `None` (one test, on every request) when the layer has no rule.
    #[inline(always)]
    pub(crate) fn new<St, C>(
        rule: &Rule,
        store: &Arc<C>,
        key: &Key,
        policies: &[Policy],
        cost: u64,
    ) -> Option<Self>
    where
        St: Store + 'static,
        C: AsRef<St> + Send + Sync + 'static,
    {
        #[cfg(feature = "charge")]
        return Some(Self::with::<St, C>(
            Arc::clone(rule.0.as_ref()?),
            store,
            key,
            policies,
            cost,
        ));
        #[cfg(not(feature = "charge"))]
        {
            let _ = (rule, store, key, policies, cost);
            None
        }
    }
}

#[cfg(feature = "charge")]
impl Settler {
    /// [`new`](Self::new) for a layer with a rule: out of line, off the usual path.
    #[inline(never)]
    fn with<St, C>(
        rule: Arc<SettleFn>,
        store: &Arc<C>,
        key: &Key,
        policies: &[Policy],
        cost: u64,
    ) -> Self
    where
        St: Store + 'static,
        C: AsRef<St> + Send + Sync + 'static,
    {
        let store = Arc::clone(store);
        let key = key.clone();
        let policies = policies.to_vec();
        Self(Box::new(move |head: &mut Parts| {
            let adjustment = rule(head).adjustment(cost)?;
            Some(change::<St, C>(store, key, policies, adjustment))
        }))
    }

    /// Runs the rule on `res`'s head; the store's change to wait for, if any.
    fn apply<B>(self, res: &mut Response<B>) -> Option<Change> {
        // The rule sees a `Parts`, moved out of the response and back (the body stays).
        let (mut head, ()) = Response::new(()).into_parts();
        head.status = res.status();
        head.version = res.version();
        head.headers = std::mem::take(res.headers_mut());
        head.extensions = std::mem::take(res.extensions_mut());
        let change = (self.0)(&mut head);
        *res.status_mut() = head.status;
        *res.headers_mut() = head.headers;
        *res.extensions_mut() = head.extensions;
        change
    }
}

/// Where a response future is with settling its cost: nothing to do, a rule to run, or
/// the store's change under way with the response held.
pub(crate) enum Settling<R> {
    Off,
    Rule(Settler),
    Applying(Box<(Change, Option<R>)>),
}

impl<R> Settling<R> {
    /// While the store's change is under way: the held response once it is done.
    pub(crate) fn poll_applying(&mut self, cx: &mut Context<'_>) -> Option<Poll<R>> {
        let Self::Applying(applying) = self else {
            return None;
        };
        let (change, res) = &mut **applying;
        Some(
            change
                .as_mut()
                .poll(cx)
                .map(|()| res.take().expect("ResponseFuture polled after completion")),
        )
    }
}

impl<B> Settling<Response<B>> {
    /// Settles `res`: runs the rule, then the store's change, holding the response until
    /// the change is done (at once on the memory store).
    pub(crate) fn settle(
        &mut self,
        mut res: Response<B>,
        cx: &mut Context<'_>,
    ) -> Poll<Response<B>> {
        let Self::Rule(settler) = std::mem::replace(self, Self::Off) else {
            return Poll::Ready(res);
        };
        let Some(mut change) = settler.apply(&mut res) else {
            return Poll::Ready(res);
        };
        if change.as_mut().poll(cx).is_ready() {
            return Poll::Ready(res);
        }
        *self = Self::Applying(Box::new((change, Some(res))));
        Poll::Pending
    }
}

/// Makes `adjustment` on every policy; a failure is logged, never the response's.
#[cfg(feature = "charge")]
fn change<St, C>(store: Arc<C>, key: Key, policies: Vec<Policy>, adjustment: Adjustment) -> Change
where
    St: Store + 'static,
    C: AsRef<St> + Send + Sync + 'static,
{
    Box::pin(async move {
        let store: &St = (*store).as_ref();
        for policy in &policies {
            if let Err(error) = store.adjust(key.as_bytes(), policy, adjustment).await {
                tracing::warn!(
                    target: "floodwall",
                    policy = policy.name(),
                    ?adjustment,
                    %error,
                    "could not settle a request's cost from its response"
                );
            }
        }
    })
}

#[cfg(all(test, feature = "charge"))]
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
