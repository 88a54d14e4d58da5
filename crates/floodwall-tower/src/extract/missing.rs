//! What a layer does with a request whose key is missing: shared by the rate and the
//! in-flight layers, so both refuse (or skip) and log alike.

use super::{KeyError, OnMissingKey};
use crate::mode::sealed::Refuse;

impl OnMissingKey {
    /// The refusal for a request without a key, in mode `M`; `None` lets it through
    /// (skipped, or in shadow mode). Logged either way.
    pub(crate) fn refusal<M: Refuse>(self, shadow: bool, error: KeyError) -> Option<M::Refusal> {
        let status = match self {
            _ if shadow => None,
            OnMissingKey::Skip => None,
            OnMissingKey::Reject => Some(error.status()),
            OnMissingKey::RejectWith(status) => Some(status),
        };
        let Some(status) = status else {
            tracing::debug!(target: "floodwall", %error, "not rate limited: no key");
            return None;
        };
        tracing::warn!(target: "floodwall", %error, %status, "request refused: no rate-limit key");
        Some(M::missing_key(error, status))
    }
}
