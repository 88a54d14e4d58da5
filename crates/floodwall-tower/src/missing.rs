//! What a layer does with a request whose key is missing: shared by the rate and the
//! in-flight layers, so both refuse (or skip), answer through their responder and log
//! alike.

use crate::extract::{KeyError, OnMissingKey};
use crate::mode::sealed::Refuse;
use crate::respond::OnReject;

impl OnMissingKey {
    /// The refusal for a request without a key, in mode `M`, built by the layer's
    /// responder's [`OnReject::missing_key`]; `None`
    /// lets it through (skipped, or in shadow mode). Logged either way.
    pub(crate) fn refusal<M: Refuse>(
        self,
        shadow: bool,
        error: KeyError,
        on_reject: &dyn OnReject,
    ) -> Option<M::Refusal> {
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
        Some(M::missing_key(error.with_status(status), |error| {
            on_reject.missing_key(error)
        }))
    }
}
