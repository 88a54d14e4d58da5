//! Fixed windows: a counter per period, aligned to the Unix epoch.
//!
//! Cheapest of all (one counter), but a client can pass `2 × count` across a window edge.

use super::Raw;

/// Precomputed parameters: the limit per window and the window length in microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FixedWindow {
    pub(crate) limit: u64,
    pub(crate) period: u64,
}

/// The window index (`time / period`) and what it has used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Window {
    pub(crate) index: u64,
    pub(crate) used: u64,
}

impl FixedWindow {
    pub(crate) fn decide(
        &self,
        state: Option<Window>,
        now: u64,
        cost: u64,
    ) -> (Raw, Option<Window>) {
        let mut index = now / self.period;
        let used = match state {
            // A clock behind the state counts against the newer window, never a fresh one.
            Some(s) if s.index >= index => {
                index = s.index;
                s.used
            }
            _ => 0,
        };
        let until_next = (index + 1) * self.period - now;
        let fits = used + cost <= self.limit;
        let used_after = if fits { used + cost } else { used };
        let raw = Raw {
            allowed: fits,
            // A window counted under a larger limit may hold more than this one.
            remaining: self.limit.saturating_sub(used_after),
            retry: if fits { 0 } else { until_next },
            reset: if used_after == 0 { 0 } else { until_next },
        };
        let write = fits && cost > 0;
        (
            raw,
            write.then_some(Window {
                index,
                used: used_after,
            }),
        )
    }
}
