//! The two error types: for configuration, and for checks that got no decision.

use std::fmt;
use std::time::Duration;

/// A boxed error from a store's backend, kept as the `source` of an [`Error`].
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Why a quota, an algorithm or a policy was refused at construction: every variant names
/// the offending value.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigError {
    /// A quota's count was 0: nothing could ever pass.
    ZeroCount,
    /// A quota's period was shorter than one microsecond, the resolution of every store.
    PeriodTooShort {
        /// The period given.
        period: Duration,
    },
    /// A quota's burst was 0: nothing could ever pass.
    ZeroBurst,
    /// A count or burst above [`Quota::MAX_COUNT`](crate::Quota::MAX_COUNT), past which the
    /// Redis scripts' arithmetic (Lua doubles) is no longer exact.
    CountTooLarge {
        /// `"count"` or `"burst"`.
        what: &'static str,
        /// The value given.
        value: u64,
    },
    /// A duration derived from the quota (the period, or burst × emission interval)
    /// exceeds [`MAX_SPAN`](crate::MAX_SPAN), so time arithmetic could overflow.
    SpanTooLong {
        /// What was too long, e.g. `"period"` or `"burst x interval"`.
        what: &'static str,
    },
    /// More than one unit per microsecond: the emission interval of a GCRA or bucket
    /// would round to zero.
    RateTooHigh {
        /// The count per period given.
        count: u64,
        /// The period given.
        period: Duration,
    },
    /// The algorithm has no notion of burst (windows and logs admit `count` per period),
    /// but the quota asked for a burst different from its count.
    BurstUnsupported {
        /// The algorithm's name.
        algorithm: &'static str,
    },
    /// A sliding window's precision does not divide its period into whole buckets,
    /// or would make too many of them.
    BadPrecision {
        /// Why the precision was refused.
        reason: String,
    },
    /// A token bucket's tick does not add a whole number (at least one) of tokens.
    BadTick {
        /// Why the tick was refused.
        reason: String,
    },
    /// A sliding log would hold more entries per key than
    /// [`SlidingLog::MAX_ENTRIES`](crate::Algorithm::SLIDING_LOG_MAX_ENTRIES) allows.
    LogTooLarge {
        /// The count per period asked for.
        count: u64,
        /// The largest count a sliding log accepts.
        max: u64,
    },
    /// A [`LocalVerdicts`](crate::LocalVerdicts) refresh interval under a microsecond or
    /// over [`LocalVerdicts::MAX_INTERVAL`](crate::LocalVerdicts::MAX_INTERVAL).
    BadRefreshInterval {
        /// The interval given.
        interval: Duration,
    },
    /// A [`ConcurrencyLimit`](crate::ConcurrencyLimit) of 0 (nothing could ever run) or
    /// above [`ConcurrencyLimit::MAX`](crate::ConcurrencyLimit::MAX).
    BadInFlightLimit {
        /// The limit given.
        max: u64,
    },
    /// A [`ConcurrencyLimit`](crate::ConcurrencyLimit)'s lease outside 1 ms ..=
    /// [`MAX_SPAN`](crate::MAX_SPAN), or a renewal under 1 ms or not shorter than the lease.
    BadLease {
        /// The lease time given.
        lease: Duration,
        /// The renewal interval given (a third of the lease unless set).
        renew_every: Duration,
    },
    /// Waiting for the next slot was asked of a window algorithm, which cannot book one.
    WaitUnsupported {
        /// The algorithm's name.
        algorithm: &'static str,
    },
    /// A wait for the next slot that could never happen (a bound of zero).
    BadWait {
        /// Why the wait was refused.
        reason: String,
    },
    /// A [`Penalty`](crate::Penalty) that could never work (see its constructors).
    BadPenalty {
        /// Why the penalty was refused.
        reason: String,
    },
    /// A policy name was empty, too long, or used characters outside `[A-Za-z0-9_.:-]`.
    InvalidName {
        /// The name given.
        name: String,
    },
    /// A quota or algorithm string could not be parsed.
    Parse {
        /// The text given.
        input: String,
        /// What was wrong with it.
        reason: String,
    },
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ZeroCount => f.write_str("quota count is 0: nothing could ever pass"),
            Self::PeriodTooShort { period } => {
                write!(f, "quota period {period:?} is shorter than 1 microsecond")
            }
            Self::ZeroBurst => f.write_str("quota burst is 0: nothing could ever pass"),
            Self::CountTooLarge { what, value } => write!(
                f,
                "quota {what} {value} is above {}, the largest every store counts exactly",
                crate::Quota::MAX_COUNT
            ),
            Self::SpanTooLong { what } => write!(
                f,
                "{what} is longer than {} years, the longest span floodwall computes with",
                crate::MAX_SPAN.as_secs() / (365 * 24 * 3600)
            ),
            Self::RateTooHigh { count, period } => write!(
                f,
                "{count} per {period:?} is more than one per microsecond; \
                 scale the cost unit (e.g. KiB instead of bytes) or use a window algorithm"
            ),
            Self::BurstUnsupported { algorithm } => write!(
                f,
                "{algorithm} admits `count` per period and has no burst; \
                 drop the burst or choose gcra, token_bucket or leaky_bucket"
            ),
            Self::BadPrecision { reason } => write!(f, "bad sliding window precision: {reason}"),
            Self::BadTick { reason } => write!(f, "bad token bucket tick: {reason}"),
            Self::LogTooLarge { count, max } => write!(
                f,
                "a sliding log of {count} entries per key is too large (at most {max}); \
                 use sliding_window, which costs a few counters per key"
            ),
            Self::BadRefreshInterval { interval } => write!(
                f,
                "refresh interval {interval:?} is outside 1 microsecond ..= 1 hour"
            ),
            Self::BadInFlightLimit { max } => write!(
                f,
                "in-flight limit {max} is outside 1 ..= {}",
                crate::ConcurrencyLimit::MAX
            ),
            Self::BadLease { lease, renew_every } => write!(
                f,
                "lease {lease:?} renewed every {renew_every:?}: a lease lasts 1 ms to 100 years \
                 and is renewed more often than that, at most once a millisecond"
            ),
            Self::WaitUnsupported { algorithm } => write!(
                f,
                "{algorithm} cannot book a future slot, so requests cannot wait under it; \
                 choose gcra, token_bucket or leaky_bucket, or refuse instead of waiting"
            ),
            Self::BadWait { reason } => write!(f, "bad wait: {reason}"),
            Self::BadPenalty { reason } => write!(f, "bad penalty: {reason}"),
            Self::InvalidName { name } => write!(
                f,
                "invalid policy name {name:?}: use 1 to 64 characters from [A-Za-z0-9_.:-]"
            ),
            Self::Parse { input, reason } => write!(f, "cannot parse {input:?}: {reason}"),
        }
    }
}

impl std::error::Error for ConfigError {}

/// Why a check returned no decision.
///
/// A denial is *not* an error but a [`Decision`](crate::Decision). The predicates let a
/// caller pick fail-open or fail-closed without matching on variants that may grow.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The cost can never pass: it is larger than the policy's limit (retrying won't help).
    CostTooHigh {
        /// The cost asked for.
        cost: u64,
        /// The largest cost the policy can ever admit.
        max: u64,
    },
    /// The store did not answer in time.
    Timeout,
    /// The store could not be reached (connection refused, dropped, no connection in the pool).
    Unavailable {
        /// The backend's error.
        source: BoxError,
    },
    /// The store answered with an error (a key of the wrong type, a script error, …).
    Backend {
        /// The backend's error.
        source: BoxError,
    },
    /// A [`State`](crate::State) built for one algorithm was given to a policy of another.
    StateMismatch,
    /// A [`Breaker`](crate::resilience::Breaker) saw the store fail repeatedly and is not
    /// calling it until its next probe.
    CircuitOpen {
        /// How long until the breaker lets a probe through (zero when one is due or running).
        retry_in: std::time::Duration,
    },
    /// The store cannot do what was asked (an operation it does not implement).
    Unsupported {
        /// What was asked.
        what: &'static str,
    },
    /// Too many calls to the store are already waiting for an answer (see
    /// [`BreakerBuilder::max_in_flight`](crate::resilience::BreakerBuilder::max_in_flight)).
    Overloaded {
        /// The bound that was reached.
        max_in_flight: usize,
    },
}

impl Error {
    /// True when the store did not answer in time.
    pub fn is_timeout(&self) -> bool {
        matches!(self, Self::Timeout)
    }

    /// True when the store could not be reached at all.
    pub fn is_unavailable(&self) -> bool {
        matches!(self, Self::Unavailable { .. })
    }

    /// True when the cost can never pass under this policy (not worth retrying).
    pub fn is_cost_too_high(&self) -> bool {
        matches!(self, Self::CostTooHigh { .. })
    }

    /// True when a circuit breaker refused to call a store that has been failing.
    pub fn is_circuit_open(&self) -> bool {
        matches!(self, Self::CircuitOpen { .. })
    }

    /// True when the bound on calls in flight to the store was reached.
    pub fn is_overloaded(&self) -> bool {
        matches!(self, Self::Overloaded { .. })
    }

    /// True for every failure of the store itself (timeout, unreachable, backend error,
    /// open breaker, overload): what a fail mode is for.
    pub fn is_store_failure(&self) -> bool {
        matches!(
            self,
            Self::Timeout
                | Self::Unavailable { .. }
                | Self::Backend { .. }
                | Self::CircuitOpen { .. }
                | Self::Overloaded { .. }
        )
    }

    /// Wraps a backend error that means "cannot reach the store".
    pub fn unavailable(source: impl Into<BoxError>) -> Self {
        Self::Unavailable {
            source: source.into(),
        }
    }

    /// Wraps a backend error that means "the store answered, but with an error".
    pub fn backend(source: impl Into<BoxError>) -> Self {
        Self::Backend {
            source: source.into(),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::CostTooHigh { cost, max } => write!(
                f,
                "cost {cost} can never pass: the policy admits at most {max} at once"
            ),
            Self::Timeout => f.write_str("rate-limit store timed out"),
            Self::Unavailable { source } => write!(f, "rate-limit store unavailable: {source}"),
            Self::Backend { source } => write!(f, "rate-limit store error: {source}"),
            Self::StateMismatch => f.write_str("state was built for a different algorithm"),
            Self::Unsupported { what } => {
                write!(f, "this rate-limit store does not support {what}")
            }
            Self::CircuitOpen { retry_in } => write!(
                f,
                "rate-limit store circuit open after repeated failures; next probe in {retry_in:?}"
            ),
            Self::Overloaded { max_in_flight } => write!(
                f,
                "rate-limit store overloaded: {max_in_flight} calls already in flight"
            ),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Unavailable { source } | Self::Backend { source } => Some(source.as_ref()),
            _ => None,
        }
    }
}
