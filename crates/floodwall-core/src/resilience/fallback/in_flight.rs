//! A [`Fallback`](super::Fallback)'s answer to an acquisition: uncounted (open), refused
//! (closed), or counted here against this node's share of the limit (local).

use super::Backstop;
use crate::{Acquired, Clock, ConcurrencyLimit, Error, Permit};

impl<S, C: Clock> Backstop<S, C> {
    /// The store's answer, or the fallback's in its place.
    pub(super) fn settle_acquire(
        &self,
        key: &[u8],
        limit: &ConcurrencyLimit,
        result: Result<Acquired, Error>,
    ) -> Result<Acquired, Error> {
        let open = || Acquired::Granted(Permit::unheld(limit.max()));
        let local = |nodes| {
            Ok(match self.local.acquire_sync(key, &limit.share(nodes))? {
                Acquired::Granted(permit) => Acquired::Granted(permit.by_fallback()),
                full => full,
            })
        };
        self.settle(result, || Ok(()), open, local)
    }
}
