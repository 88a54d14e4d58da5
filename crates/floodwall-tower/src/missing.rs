//! What a layer does with a request whose key is missing: shared by the rate and the
//! in-flight layers, so both refuse (or skip), answer through their responder and log
//! alike.

use crate::extract::{KeyError, OnMissingKey};
use crate::mode::sealed::Refuse;
use crate::options::Refusals;

impl Refusals {
    /// The refusal for a request without a key, in mode `M`, built by the responder's
    /// [`missing_key`](crate::respond::OnReject::missing_key); `None` lets it through
    /// (skipped, or in shadow mode). Logged either way.
    pub(crate) fn missing<M: Refuse>(&self, shadow: bool, error: KeyError) -> Option<M::Refusal> {
        let status = match self.on_missing {
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
        Some(M::missing_key(error.with_status(status), |error| {
            self.on_reject.missing_key(error)
        }))
    }
}
