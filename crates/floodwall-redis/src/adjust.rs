//! Charges and refunds ([`StoreExt::adjust`](floodwall_core::StoreExt::adjust)): one script
//! call per policy, never coalesced: `lua/adjust.lua` with the algorithm's `@load` and
//! `@save` sections and its `lua/adjust_<algorithm>.lua`, so a key's state is read and
//! written as its checks do. The sliding window and log answer [`Error::Unsupported`].

use std::sync::LazyLock;

use floodwall_core::{Adjustment, Error, Policy};
use redis::Script;

use crate::kind::{Layout, ScriptKind};
use crate::op::Op;
use crate::store::RedisStore;

static ADJUST: LazyLock<[Option<Script>; ScriptKind::ALL.len()]> =
    LazyLock::new(|| ScriptKind::ALL.map(|kind| text(kind).map(|t| Script::new(&t))));

/// The adjust section of `kind`, if it has one.
fn section(kind: ScriptKind) -> Option<&'static str> {
    match kind {
        ScriptKind::Gcra | ScriptKind::LeakyBucket => Some(include_str!("lua/adjust_gcra.lua")),
        ScriptKind::TokenBucket => Some(include_str!("lua/adjust_token_bucket.lua")),
        ScriptKind::FixedWindow => Some(include_str!("lua/adjust_fixed_window.lua")),
        ScriptKind::SlidingWindow | ScriptKind::SlidingLog => None,
    }
}

/// The script of `kind`, as `crate::script` puts it together; `None` when the kind has
/// no adjust section.
fn text(kind: ScriptKind) -> Option<String> {
    crate::script::adjust(kind, section(kind)?)
}

impl RedisStore {
    /// One script call, without the deny cache.
    pub(crate) async fn settle(
        &self,
        key: &[u8],
        policy: &Policy,
        adjustment: Adjustment,
        now: Option<u64>,
    ) -> Result<(), Error> {
        const UNSUPPORTED: Error = Error::Unsupported {
            what: "charging or refunding under a sliding window or log in Redis",
        };
        let layout = Layout::of(policy.parameters()).ok_or(UNSUPPORTED)?;
        let script = ADJUST[layout.kind as usize].as_ref().ok_or(UNSUPPORTED)?;
        // Lua's doubles are exact below 2^53: a larger amount is cut to it, which every
        // algorithm caps far below anyway (debt is at most one more burst).
        const MAX: u64 = 1 << 53;
        let amount = match adjustment {
            Adjustment::Charge(0) | Adjustment::Refund(0) => return Ok(()),
            Adjustment::Charge(n) => n.min(MAX).to_string(),
            Adjustment::Refund(n) => format!("-{}", n.min(MAX)),
        };
        let mut inv = script.prepare_invoke();
        inv.key(self.redis_key(key, policy)).arg(amount);
        layout.push_args(&mut inv, now);
        self.inner.counters.single();
        let _changed: i64 = self.bounded(Op::Script(&inv)).await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stepped_kinds_have_an_adjust_script_with_no_placeholder_left() {
        for kind in ScriptKind::ALL {
            let Some(t) = text(kind) else {
                assert!(section(kind).is_none(), "{kind:?}");
                continue;
            };
            assert!(!t.contains("{p"), "{kind:?}");
            assert!(!t.contains("-- {"), "{kind:?}");
            assert!(!t.contains("{now}"), "{kind:?}");
        }
    }
}
