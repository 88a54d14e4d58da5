//! The memory store's charges and refunds, exact as its checks are (`update.rs`).

use super::MemoryStore;
use crate::algorithm::clamp_now;
use crate::store::key::KeyBuf;
use crate::{Adjustment, Clock, Error, Policy};

impl<C: Clock> MemoryStore<C> {
    /// [`StoreExt::adjust`](crate::StoreExt::adjust) without the future.
    pub(crate) fn adjust_sync(
        &self,
        key: &[u8],
        policy: &Policy,
        adjustment: Adjustment,
    ) -> Result<(), Error> {
        let now = clamp_now(self.inner.clock.now_micros());
        let buf = KeyBuf::new(key);
        let key = buf.as_ref(policy.state_namespace());
        let create = matches!(adjustment, Adjustment::Charge(n) if n > 0);
        // A key never seen (or forgotten) has nothing to refund.
        self.update(
            key,
            policy,
            now,
            create,
            |gcra, tat| ((), Some(gcra.adjust(tat, now, adjustment).unwrap_or(tat))),
            |state| Ok(((), policy.engine().adjust(state, now, adjustment)?)),
        )?;
        Ok(())
    }
}
