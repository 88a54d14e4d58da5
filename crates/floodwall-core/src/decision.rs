//! What a check answers.

use std::time::Duration;

/// The outcome of one check: redis-cell's five facts (enough for every rate-limit header
/// format), what the request gets and who answered. A denial's `retry_after` is never zero.
#[derive(Clone, Copy)]
#[non_exhaustive]
pub struct Decision {
    /// What the request gets: admitted, refused by its quota, or refused by a ban.
    pub outcome: Outcome,
    /// Who answered: the store, a cache in front of it, or a fallback in its stead.
    pub source: Source,
    /// The most that can pass at once (the burst, or the window's count).
    pub limit: u64,
    /// How much more could pass right now, after this decision.
    pub remaining: u64,
    /// When denied: how long until the same request would be allowed. `None` when allowed.
    pub retry_after: Option<Duration>,
    /// How long until the limit is back to full (`remaining == limit`) if nothing else comes.
    pub reset_after: Duration,
    /// The exact µs (`retry`, `reset`) behind durations a policy rounded, for a
    /// [`DenyCache`](crate::DenyCache); equality, hashing and `Debug` ignore it.
    pub(crate) exact: Option<(u64, u64)>,
}

/// What a request gets from a [`Decision`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Outcome {
    /// It may go ahead: its cost was consumed.
    Allowed,
    /// Its quota has no room for it: refused, nothing consumed.
    Refused,
    /// Its key is banned ([`Penalty`](crate::Penalty)): refused for the ban's remainder.
    Banned,
}

/// Who answered a check.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Source {
    /// The store (or a [`LocalVerdicts`](crate::LocalVerdicts) on its behalf).
    Store,
    /// A [`DenyCache`](crate::DenyCache), saying what the store would without asking it:
    /// equality and hashing take it for [`Store`](Self::Store).
    Cache,
    /// A [`Fallback`](crate::resilience::Fallback) in the store's stead, because the store
    /// failed: it says nothing of the shared state, so a cache must not remember it.
    Fallback,
}

impl PartialEq for Decision {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}

impl Eq for Decision {}

impl std::hash::Hash for Decision {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.key().hash(state);
    }
}

impl std::fmt::Debug for Decision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Decision")
            .field("outcome", &self.outcome)
            .field("source", &self.source)
            .field("limit", &self.limit)
            .field("remaining", &self.remaining)
            .field("retry_after", &self.retry_after)
            .field("reset_after", &self.reset_after)
            .finish()
    }
}

impl Decision {
    /// What a decision says, for equality and hashing.
    #[allow(clippy::type_complexity)]
    fn key(&self) -> (Outcome, u64, u64, Option<Duration>, Duration, bool) {
        (
            self.outcome,
            self.limit,
            self.remaining,
            self.retry_after,
            self.reset_after,
            self.source == Source::Fallback,
        )
    }

    /// `retry_after` (when denied) and `reset_after` in exact µs, before any rounding.
    pub(crate) fn exact_micros(&self) -> (Option<u64>, u64) {
        match self.exact {
            Some((retry, reset)) => (self.retry_after.map(|_| retry), reset),
            None => (
                self.retry_after.map(crate::store::micros),
                crate::store::micros(self.reset_after),
            ),
        }
    }

    /// Whether the request may go ahead ([`Outcome::Allowed`]).
    #[inline]
    pub const fn is_allowed(&self) -> bool {
        matches!(self.outcome, Outcome::Allowed)
    }

    /// Whether the request was refused because its key is banned ([`Outcome::Banned`]).
    #[inline]
    pub const fn is_banned(&self) -> bool {
        matches!(self.outcome, Outcome::Banned)
    }

    /// Builds a decision by hand (a store of your own). `retry_after` is forced to `None`
    /// when allowed and to at least one microsecond when denied.
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
            outcome: if allowed {
                Outcome::Allowed
            } else {
                Outcome::Refused
            },
            source: Source::Store,
            limit,
            remaining,
            retry_after,
            reset_after,
            exact: None,
        }
    }

    /// This decision, marked as made by a fallback in the store's stead ([`Source::Fallback`]).
    pub fn by_fallback(mut self) -> Self {
        self.source = Source::Fallback;
        self
    }

    /// This decision, marked as answered by a cache in front of the store.
    pub(crate) fn by_cache(mut self) -> Self {
        self.source = Source::Cache;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hash(d: &Decision) -> u64 {
        use std::hash::{BuildHasher, RandomState};
        thread_local!(static STATE: RandomState = RandomState::new());
        STATE.with(|s| s.hash_one(d))
    }

    #[test]
    fn a_cache_says_what_the_store_said_a_fallback_does_not() {
        let store = Decision::new(false, 5, 0, Duration::from_secs(1), Duration::from_secs(2));
        let cache = store.by_cache();
        let fallback = store.by_fallback();
        assert_eq!(store, cache);
        assert_eq!(hash(&store), hash(&cache));
        assert_ne!(store, fallback);
        let mut banned = store;
        banned.outcome = Outcome::Banned;
        assert_ne!(store, banned);
        assert!(banned.is_banned() && !banned.is_allowed());
        assert!(Decision::new(true, 5, 4, Duration::ZERO, Duration::ZERO).is_allowed());
    }
}
