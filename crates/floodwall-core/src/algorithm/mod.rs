//! The six rate-limiting algorithms, as pure functions of `(state, now, cost)`.
//!
//! Nothing here reads a clock or touches I/O: a store passes `now` (µs since the Unix
//! epoch) and keeps the state.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use crate::{ConfigError, Quota};

pub(crate) mod adjust;
pub(crate) mod fixed_window;
pub(crate) mod gcra;
pub(crate) mod leaky_bucket;
pub(crate) mod reserve;
pub(crate) mod sliding_log;
pub(crate) mod sliding_window;
pub(crate) mod token_bucket;

mod engine;
mod state;

pub use adjust::Adjustment;
pub(crate) use engine::{Engine, clamp_now};
pub use state::State;

/// Which technique a [`Policy`](crate::Policy) limits with.
///
/// | algorithm | state per key | burst | trade-off |
/// |---|---|---|---|
/// | [`Gcra`](Self::Gcra) (default) | one timestamp | yes | smooth, exact, cheapest in Redis; redis-cell's `CL.THROTTLE` |
/// | [`TokenBucket`](Self::TokenBucket) | tokens owed + tick | yes | refills in whole ticks (juju/ratelimit) |
/// | [`LeakyBucket`](Self::LeakyBucket) | one timestamp | yes | the classic funnel (a leaky bucket with capacity and leak rate); GCRA underneath |
/// | [`FixedWindow`](Self::FixedWindow) | one counter | no | cheapest; lets `2 × count` through across a window edge |
/// | [`SlidingWindow`](Self::SlidingWindow) | a counter per bucket | no | bounded edge burst, weights (bytes) welcome |
/// | [`SlidingLog`](Self::SlidingLog) | an entry per request | no | exact over any window; memory grows with `count` |
///
/// Names for configuration files: `gcra`, `token_bucket`, `leaky_bucket`, `fixed_window`,
/// `sliding_window`, `sliding_log` (dashes work too), parsed by [`FromStr`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Algorithm {
    /// The generic cell rate algorithm (continuous leaky bucket).
    #[default]
    Gcra,
    /// A token bucket adding tokens every `tick`; `None` adds one token per `period / count`.
    /// A tick must add a whole number of tokens (`count × tick / period`).
    TokenBucket {
        /// How often tokens are added.
        tick: Option<Duration>,
    },
    /// The funnel: a bucket leaking one unit per `period / count`.
    LeakyBucket,
    /// A counter per period, aligned to the Unix epoch.
    FixedWindow,
    /// Counters per `precision`-wide bucket over the last period (`None`: `period / 10`),
    /// at most [`SLIDING_WINDOW_MAX_BUCKETS`](Self::SLIDING_WINDOW_MAX_BUCKETS) a period.
    SlidingWindow {
        /// The bucket width.
        precision: Option<Duration>,
    },
    /// One entry per admitted request over the last period.
    SlidingLog,
}

impl Algorithm {
    /// The largest count a sliding log accepts: its log holds up to about twice `count`
    /// entries per key.
    pub const SLIDING_LOG_MAX_ENTRIES: u64 = 10_000;

    /// The most buckets a sliding window may cut its period into.
    pub const SLIDING_WINDOW_MAX_BUCKETS: u64 = 1_000;

    /// A token bucket adding one token per `period / count`.
    pub const TOKEN_BUCKET: Self = Self::TokenBucket { tick: None };

    /// A sliding window of ten buckets.
    pub const SLIDING_WINDOW: Self = Self::SlidingWindow { precision: None };

    /// The name used in configuration and in store keys.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Gcra => "gcra",
            Self::TokenBucket { .. } => "token_bucket",
            Self::LeakyBucket => "leaky_bucket",
            Self::FixedWindow => "fixed_window",
            Self::SlidingWindow { .. } => "sliding_window",
            Self::SlidingLog => "sliding_log",
        }
    }

    /// Whether the quota's burst means anything to this algorithm.
    pub fn has_burst(&self) -> bool {
        matches!(
            self,
            Self::Gcra | Self::TokenBucket { .. } | Self::LeakyBucket
        )
    }

    /// Every algorithm with its default parameters, in the order of the table above.
    pub fn all() -> [Self; 6] {
        [
            Self::Gcra,
            Self::TOKEN_BUCKET,
            Self::LeakyBucket,
            Self::FixedWindow,
            Self::SLIDING_WINDOW,
            Self::SlidingLog,
        ]
    }

    /// Checks the algorithm against a quota; the error says what to change.
    pub fn validate(&self, quota: &Quota) -> Result<(), ConfigError> {
        Engine::new(*self, quota).map(|_| ())
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Algorithm {
    type Err = ConfigError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let name = s.trim().to_ascii_lowercase().replace('-', "_");
        Self::all()
            .into_iter()
            .find(|a| a.name() == name)
            .ok_or_else(|| ConfigError::Parse {
                input: s.to_owned(),
                reason: "unknown algorithm; expected one of gcra, token_bucket, leaky_bucket, \
                         fixed_window, sliding_window, sliding_log"
                    .to_owned(),
            })
    }
}

/// Fails with [`Error::CostTooHigh`](crate::Error::CostTooHigh) when `cost` is above `max`,
/// the most one request may cost: it could never pass.
#[inline]
pub(crate) fn check_cost(cost: u64, max: u64) -> Result<(), crate::Error> {
    if cost > max {
        return Err(crate::Error::CostTooHigh { cost, max });
    }
    Ok(())
}

/// A decision in microseconds, before it becomes a [`Decision`](crate::Decision).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Raw {
    pub(crate) allowed: bool,
    pub(crate) remaining: u64,
    /// When denied, µs until the same request passes (always > 0); 0 when allowed.
    pub(crate) retry: u64,
    /// µs until the state is back to fresh as this decision sees it. `now` can go back (a
    /// clock stepped back, threads locking in another order than they read the clock), so
    /// a store forgets a state once the latest `now + reset` of its decisions has passed.
    pub(crate) reset: u64,
}

/// The integers an algorithm computes with, worked out from a quota (times in µs), for
/// other implementations (the Redis scripts) to round exactly as this crate does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Parameters {
    /// GCRA: admit if `max(tat, now) + cost × interval - now <= tolerance`.
    Gcra {
        /// Emission interval: `ceil(period / count)`.
        interval: u64,
        /// `burst × interval`.
        tolerance: u64,
    },
    /// Token bucket: `quantum` tokens every `tick`, up to `capacity`.
    TokenBucket {
        /// The burst.
        capacity: u64,
        /// Tick length.
        tick: u64,
        /// Tokens per tick.
        quantum: u64,
    },
    /// Funnel: one unit leaks per `interval`, up to `capacity`.
    LeakyBucket {
        /// The burst.
        capacity: u64,
        /// `ceil(period / count)`.
        interval: u64,
    },
    /// `limit` per epoch-aligned `period`.
    FixedWindow {
        /// The count.
        limit: u64,
        /// Window length.
        period: u64,
    },
    /// `limit` over the last `buckets` buckets of `precision` each.
    SlidingWindow {
        /// The count.
        limit: u64,
        /// Bucket width.
        precision: u64,
        /// Buckets per period.
        buckets: u64,
    },
    /// `limit` over the last `period`, one entry per admitted request.
    SlidingLog {
        /// The count.
        limit: u64,
        /// Window length.
        period: u64,
    },
}

impl Parameters {
    /// The parameters that give a stored state its meaning (its shape), padded with 0:
    /// a quota change that keeps them keeps each key's state ([`crate::guide::quota_changes`]).
    pub fn shape(&self) -> [u64; 2] {
        match *self {
            Self::Gcra { .. } | Self::LeakyBucket { .. } => [0, 0],
            Self::TokenBucket { tick, quantum, .. } => [tick, quantum],
            Self::FixedWindow { period, .. } | Self::SlidingLog { period, .. } => [period, 0],
            Self::SlidingWindow {
                precision, buckets, ..
            } => [precision, buckets],
        }
    }
}
