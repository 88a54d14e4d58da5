//! Fixed windows: a counter per period, aligned to the Unix epoch.
//!
//! Cheapest of all (one counter), but a client can pass `2 × count` across a window boundary
//! (200 in 0.1 s at 100/s: 100 at the end of one window, 100 at the start of the next). Use
//! it where that edge burst is acceptable.

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

#[cfg(test)]
mod tests {
    use super::*;

    const W: FixedWindow = FixedWindow {
        limit: 2,
        period: 1_000,
    };

    #[test]
    fn counts_per_aligned_window_and_allows_the_edge_burst() {
        let (_, s) = W.decide(None, 5_900, 2);
        let (raw, _) = W.decide(s, 5_999, 1);
        assert_eq!((raw.allowed, raw.retry, raw.reset), (false, 1, 1));
        // The documented weakness: 2 more pass a microsecond later.
        let (raw, s) = W.decide(s, 6_000, 2);
        assert!(raw.allowed);
        assert_eq!(s, Some(Window { index: 6, used: 2 }));
    }

    #[test]
    fn a_clock_behind_counts_against_the_newer_window() {
        let s = Some(Window { index: 6, used: 2 });
        let (raw, _) = W.decide(s, 5_500, 1);
        assert_eq!((raw.allowed, raw.retry), (false, 1_500));
    }
}
