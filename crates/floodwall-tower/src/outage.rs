//! A store's outage, logged once at its start and once at its end rather than per request:
//! shared by the rate and the in-flight layers.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether the store's last answer was a failure. Shared by every clone, as the store is:
/// axum builds a service per route, and one outage is still one log line.
#[derive(Clone, Default)]
pub(crate) struct Outage(Arc<AtomicBool>);

impl Outage {
    /// Notes a failure of the store of `what` (a "rate-limit" or "in-flight limit" store);
    /// true at the start of an outage, which the caller then logs.
    pub(crate) fn failed(&self, what: &str, error: &floodwall_core::Error) -> bool {
        let down = &self.0;
        if !down.load(Ordering::Relaxed) && !down.swap(true, Ordering::Relaxed) {
            return true;
        }
        tracing::debug!(target: "floodwall", %error, "{what} store failed");
        false
    }

    /// Notes that the store answered, logging the end of an outage once.
    #[inline(always)]
    pub(crate) fn answered(&self, what: &str) {
        if self.0.load(Ordering::Relaxed) {
            self.back(what);
        }
    }

    /// The store answers again after failing: logged by whichever request sees it first.
    fn back(&self, what: &str) {
        if self.0.swap(false, Ordering::Relaxed) {
            tracing::info!(target: "floodwall", "{what} store answers again");
        }
    }
}
