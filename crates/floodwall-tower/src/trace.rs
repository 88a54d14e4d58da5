//! The `tracing` span around a store call the layer waits for, with the decision as
//! fields, and the keyed hash that names the request's key in it, never in clear.

use std::fmt;
use std::hash::BuildHasher;
use std::sync::OnceLock;

use floodwall_core::{Decision, Policy};
use tracing::Span;
use tracing::field::Empty;

/// A key's keyed hash, written as 16 hex digits: SipHash under the process's random keys,
/// the same within a process and not reversible by trying every IPv4 address.
pub(crate) struct HashedKey<'a>(pub(crate) &'a [u8]);

impl fmt::Display for HashedKey<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        static STATE: OnceLock<std::hash::RandomState> = OnceLock::new();
        let hash = STATE
            .get_or_init(std::hash::RandomState::new)
            .hash_one(self.0);
        write!(f, "{hash:016x}")
    }
}

/// A span for checking `key` against `policy` in the store: debug level, target
/// `floodwall`; the decision's fields are filled in by [`answered`].
pub(crate) fn store_check(policy: &Policy, key: &[u8], cost: u64) -> Span {
    tracing::debug_span!(
        target: "floodwall",
        "floodwall.store.check",
        policy = policy.name(),
        key = %HashedKey(key),
        cost,
        allowed = Empty,
        remaining = Empty,
        retry_after_ms = Empty,
        error = Empty,
    )
}

/// Records the store's answer on its span.
pub(crate) fn answered(span: &Span, result: &Result<Decision, floodwall_core::Error>) {
    if span.is_disabled() {
        return;
    }
    match result {
        Ok(d) => {
            span.record("allowed", d.is_allowed());
            span.record("remaining", d.remaining);
            if let Some(r) = d.retry_after {
                span.record(
                    "retry_after_ms",
                    u64::try_from(r.as_millis()).unwrap_or(u64::MAX),
                );
            }
        }
        Err(e) => {
            span.record("error", tracing::field::display(e));
        }
    }
}
