//! What a check answers.

use std::time::Duration;

/// The outcome of one check: the same five facts as redis-cell's `CL.THROTTLE` reply,
/// which are enough for every rate-limit header format.
///
/// A denial is a decision, not an error: `allowed` is false and `retry_after` says when the
/// same request would pass (never zero).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Decision {
    /// Whether the request may go ahead. A denied request consumed nothing.
    pub allowed: bool,
    /// The most that can pass at once (the burst, or the window's count).
    pub limit: u64,
    /// How much more could pass right now, after this decision.
    pub remaining: u64,
    /// When denied: how long until the same request would be allowed. `None` when allowed.
    pub retry_after: Option<Duration>,
    /// How long until the limit is back to full (`remaining == limit`) if nothing else comes.
    pub reset_after: Duration,
    /// Whether a [`Fallback`](crate::resilience::Fallback) decided this in the store's
    /// stead, because the store failed: fail-open, or this node's share of the quota. Such
    /// an answer says nothing of the shared state and holds only while the store fails, so
    /// a cache in front ([`DenyCache`](crate::DenyCache)) must not remember it. `false` for
    /// every store's own answers.
    pub fallback: bool,
}

impl Decision {
    /// Whether the request may go ahead.
    pub fn is_allowed(&self) -> bool {
        self.allowed
    }

    /// Builds a decision by hand, e.g. for a store that computes one elsewhere (a Redis
    /// reply). `retry_after` is forced to `None` when allowed and to at least one microsecond
    /// when denied, so the invariant "a denial never says retry after 0" holds for every store.
    pub fn new(
        allowed: bool,
        limit: u64,
        remaining: u64,
        retry_after: Duration,
        reset_after: Duration,
    ) -> Self {
        let retry_after = if allowed {
            None
        } else {
            Some(retry_after.max(Duration::from_micros(1)))
        };
        Self {
            allowed,
            limit,
            remaining,
            retry_after,
            reset_after,
            fallback: false,
        }
    }

    /// This decision, marked as made by a fallback in the store's stead (see
    /// [`fallback`](Self::fallback)): for a store combinator that answers when its store
    /// cannot.
    pub fn by_fallback(mut self) -> Self {
        self.fallback = true;
        self
    }
}
