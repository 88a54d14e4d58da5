//! One algorithm bound to one quota: parameters precomputed once, at policy construction.

use super::fixed_window::{FixedWindow, Window};
use super::gcra::Gcra;
use super::reserve::Booked;
use super::sliding_log::{Log, SlidingLog};
use super::sliding_window::{Buckets, SlidingWindow};
use super::state::Inner;
use super::token_bucket::{Owed, TokenBucket};
use super::{Algorithm, Raw, State};
use crate::{ConfigError, Error, MAX_SPAN, Quota};

/// Times after this (about year 148,000) are clamped, so every `now + span` fits in a `u64`.
const MAX_NOW: u64 = 1 << 62;

fn span_us() -> u64 {
    MAX_SPAN.as_micros() as u64
}

/// An algorithm with its quota's numbers worked out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Engine {
    Gcra(Gcra),
    TokenBucket(TokenBucket),
    /// The funnel runs on GCRA (see `leaky_bucket.rs`); only its parameters differ.
    LeakyBucket(Gcra),
    FixedWindow(FixedWindow),
    SlidingWindow(SlidingWindow),
    SlidingLog(SlidingLog),
}

fn whole_micros(d: std::time::Duration) -> Option<u64> {
    (d.as_nanos().is_multiple_of(1000) && d <= crate::MAX_SPAN && !d.is_zero())
        .then_some(d.as_micros() as u64)
}

impl Engine {
    pub(crate) fn new(algorithm: Algorithm, quota: &Quota) -> Result<Self, ConfigError> {
        let (count, period, burst) = (quota.count(), quota.period_micros(), quota.burst());
        if !algorithm.has_burst() && burst != count {
            return Err(ConfigError::BurstUnsupported {
                algorithm: algorithm.name(),
            });
        }
        const TOO_LONG: ConfigError = ConfigError::SpanTooLong {
            what: "burst x interval",
        };
        let within_span = |us: Option<u64>| us.filter(|&us| us <= span_us()).ok_or(TOO_LONG);
        // GCRA, and the funnel, which is GCRA underneath (see `leaky_bucket.rs`).
        let gcra = || -> Result<Gcra, ConfigError> {
            Gcra::new(burst, quota.interval_micros()?)
                .filter(|g| g.tolerance <= span_us())
                .ok_or(TOO_LONG)
        };
        Ok(match algorithm {
            Algorithm::Gcra => Self::Gcra(gcra()?),
            Algorithm::LeakyBucket => Self::LeakyBucket(gcra()?),
            Algorithm::TokenBucket { tick } => {
                let (tick, quantum) = match tick {
                    None => (quota.interval_micros()?, 1),
                    Some(t) => {
                        let bad = |reason: String| ConfigError::BadTick { reason };
                        let t = whole_micros(t).ok_or_else(|| {
                            bad(format!("{t:?} is not a whole number of microseconds"))
                        })?;
                        let tokens = u128::from(count) * u128::from(t);
                        if tokens % u128::from(period) != 0 || tokens < u128::from(period) {
                            return Err(bad(format!(
                                "{count} per {period} µs over a {t} µs tick is not a whole \
                                 number of tokens (at least 1)"
                            )));
                        }
                        (t, (tokens / u128::from(period)) as u64)
                    }
                };
                within_span(burst.div_ceil(quantum).checked_mul(tick))?;
                Self::TokenBucket(TokenBucket {
                    capacity: burst,
                    tick,
                    quantum,
                })
            }
            Algorithm::FixedWindow => Self::FixedWindow(FixedWindow {
                limit: count,
                period,
            }),
            Algorithm::SlidingWindow { precision } => {
                let bad = |reason: String| ConfigError::BadPrecision { reason };
                let precision = match precision {
                    None if period % 10 == 0 => period / 10,
                    None => {
                        return Err(bad(format!(
                            "a period of {period} µs does not split into 10 buckets; \
                             give a precision"
                        )));
                    }
                    Some(p) => whole_micros(p)
                        .ok_or_else(|| bad(format!("{p:?} is not a whole number of µs")))?,
                };
                if period % precision != 0 {
                    return Err(bad(format!(
                        "the period ({period} µs) is not a whole number of {precision} µs buckets"
                    )));
                }
                let buckets = period / precision;
                if buckets > Algorithm::SLIDING_WINDOW_MAX_BUCKETS {
                    return Err(bad(format!(
                        "{buckets} buckets; at most {} per window",
                        Algorithm::SLIDING_WINDOW_MAX_BUCKETS
                    )));
                }
                Self::SlidingWindow(SlidingWindow {
                    limit: count,
                    precision,
                    buckets,
                })
            }
            Algorithm::SlidingLog => {
                if count > Algorithm::SLIDING_LOG_MAX_ENTRIES {
                    return Err(ConfigError::LogTooLarge {
                        count,
                        max: Algorithm::SLIDING_LOG_MAX_ENTRIES,
                    });
                }
                Self::SlidingLog(SlidingLog {
                    limit: count,
                    period,
                })
            }
        })
    }

    /// The most one request may cost; also the `limit` every decision reports.
    pub(crate) fn limit(&self) -> u64 {
        match self {
            Self::Gcra(g) => g.burst,
            Self::TokenBucket(b) => b.capacity,
            Self::LeakyBucket(g) => g.burst,
            Self::FixedWindow(w) => w.limit,
            Self::SlidingWindow(w) => w.limit,
            Self::SlidingLog(l) => l.limit,
        }
    }

    pub(crate) fn check_cost(&self, cost: u64) -> Result<(), Error> {
        super::check_cost(cost, self.limit())
    }

    /// Decides and updates `state` in place. A denial or a peek leaves the state meaning
    /// what it meant (it may be tidied: expired parts dropped).
    pub(crate) fn decide(&self, state: &mut State, now: u64, cost: u64) -> Result<Raw, Error> {
        self.check_cost(cost)?;
        let now = now.min(MAX_NOW);
        self.on_state(
            state,
            |g, tat| g.decide(tat, now, cost),
            |b, s| b.decide(s, now, cost),
            |w, s| w.decide(s, now, cost),
            |w, s| w.decide(s, now, cost),
            |l, s| l.decide(s, now, cost),
        )
    }

    /// Runs this engine's algorithm's closure on `state` as it keeps it, writing back what
    /// changed; [`Error::StateMismatch`] for another algorithm's state.
    fn on_state<R>(
        &self,
        state: &mut State,
        gcra: impl FnOnce(&Gcra, u64) -> (R, Option<u64>),
        tokens: impl FnOnce(&TokenBucket, Option<Owed>) -> (R, Option<Owed>),
        window: impl FnOnce(&FixedWindow, Option<Window>) -> (R, Option<Window>),
        buckets: impl FnOnce(&SlidingWindow, &mut Option<Buckets>) -> R,
        log: impl FnOnce(&SlidingLog, &mut Log) -> R,
    ) -> Result<R, Error> {
        let st = &mut state.0;
        // A state kept by value: read it (`None` when empty), write back what `f` returns.
        macro_rules! by_value {
            ($variant:ident, $f:expr) => {{
                let prev = match st {
                    Inner::$variant(s) => Some(*s),
                    _ => None,
                };
                let (out, next) = $f(prev);
                if let Some(next) = next {
                    *st = Inner::$variant(next);
                }
                out
            }};
        }
        Ok(match (self, &*st) {
            (Self::Gcra(g) | Self::LeakyBucket(g), Inner::Empty | Inner::Gcra(_)) => {
                by_value!(Gcra, |tat: Option<u64>| gcra(g, tat.unwrap_or(0)))
            }
            (Self::TokenBucket(b), Inner::Empty | Inner::Tokens(_)) => {
                by_value!(Tokens, |s| tokens(b, s))
            }
            (Self::FixedWindow(w), Inner::Empty | Inner::Window(_)) => {
                by_value!(Window, |s| window(w, s))
            }
            (Self::SlidingWindow(w), Inner::Empty | Inner::Buckets(_)) => {
                let mut state = match std::mem::take(st) {
                    Inner::Buckets(b) => Some(b),
                    _ => None,
                };
                let out = buckets(w, &mut state);
                *st = state.map_or(Inner::Empty, Inner::Buckets);
                out
            }
            (Self::SlidingLog(l), Inner::Empty | Inner::Log(_)) => {
                let mut state = match std::mem::take(st) {
                    Inner::Log(log) => log,
                    _ => Log::default(),
                };
                let out = log(l, &mut state);
                if !state.entries.is_empty() {
                    *st = Inner::Log(state);
                }
                out
            }
            _ => return Err(Error::StateMismatch),
        })
    }

    /// Books the earliest slot for `cost` if at most `max_wait` µs away (`reserve.rs`);
    /// returns the booking and what a cancellation compares the state with. Window
    /// algorithms cannot book: [`Error::Unsupported`].
    pub(crate) fn reserve(
        &self,
        state: &mut State,
        now: u64,
        cost: u64,
        max_wait: u64,
    ) -> Result<(Booked, Option<[u64; 2]>), Error> {
        self.check_cost(cost)?;
        let now = now.min(MAX_NOW);
        let st = &mut state.0;
        Ok(match self {
            Self::Gcra(g) | Self::LeakyBucket(g) => {
                let tat = match st {
                    Inner::Empty => 0,
                    Inner::Gcra(t) => *t,
                    _ => return Err(Error::StateMismatch),
                };
                let (booked, next) = g.reserve(tat, now, cost, max_wait);
                if let Some(next) = next {
                    *st = Inner::Gcra(next);
                }
                (booked, next.map(|t| [t, 0]))
            }
            Self::TokenBucket(b) => {
                let prev = match st {
                    Inner::Empty => None,
                    Inner::Tokens(s) => Some(*s),
                    _ => return Err(Error::StateMismatch),
                };
                let (booked, next) = b.reserve(prev, now, cost, max_wait);
                if let Some(next) = next {
                    *st = Inner::Tokens(next);
                }
                (booked, next.map(|s| [s.owed, s.tick]))
            }
            _ => {
                return Err(Error::Unsupported {
                    what: "booking a slot under a window algorithm",
                });
            }
        })
    }

    /// Gives back a booking of `cost` that left the state `booked` (what
    /// [`reserve`](Self::reserve) returned), if it is still the latest; whether it did.
    pub(crate) fn cancel(
        &self,
        state: &mut State,
        booked: [u64; 2],
        cost: u64,
    ) -> Result<bool, Error> {
        let st = &mut state.0;
        let back = match (self, &*st) {
            (_, Inner::Empty) => None,
            (Self::Gcra(g) | Self::LeakyBucket(g), Inner::Gcra(tat)) => {
                g.cancel(*tat, booked[0], cost).map(Inner::Gcra)
            }
            (Self::TokenBucket(b), Inner::Tokens(s)) => {
                let booked = Owed {
                    owed: booked[0],
                    tick: booked[1],
                };
                b.cancel(*s, booked, cost).map(Inner::Tokens)
            }
            (Self::Gcra(_) | Self::LeakyBucket(_) | Self::TokenBucket(_), _) => {
                return Err(Error::StateMismatch);
            }
            _ => {
                return Err(Error::Unsupported {
                    what: "booking a slot under a window algorithm",
                });
            }
        };
        Ok(match back {
            Some(back) => {
                *st = back;
                true
            }
            None => false,
        })
    }

    /// Applies `adjustment` at `now` to `state` (see `adjust.rs`); returns µs until the
    /// state is fresh again, as a check's `reset` (a store's expiry).
    pub(crate) fn adjust(
        &self,
        state: &mut State,
        now: u64,
        adjustment: super::Adjustment,
    ) -> Result<u64, Error> {
        let now = now.min(MAX_NOW);
        self.on_state(
            state,
            |g, tat| ((), g.adjust(tat, now, adjustment)),
            |b, s| ((), b.adjust(s, now, adjustment)),
            |w, s| ((), w.adjust(s, now, adjustment)),
            |w, s| {
                w.adjust(s, now, adjustment);
            },
            |l, s| {
                l.adjust(s, now, adjustment);
            },
        )?;
        // A peek reads the state as a check would, and writes nothing.
        Ok(self.decide(state, now, 0)?.reset)
    }

    /// GCRA's lock-free path: decide on a bare TAT. `None` for algorithms that are not
    /// GCRA underneath.
    pub(crate) fn gcra(&self) -> Option<&Gcra> {
        match self {
            Self::Gcra(g) | Self::LeakyBucket(g) => Some(g),
            _ => None,
        }
    }

    pub(crate) fn parameters(&self) -> super::Parameters {
        use super::Parameters as P;
        match *self {
            Self::Gcra(g) => P::Gcra {
                interval: g.interval,
                tolerance: g.tolerance,
            },
            Self::TokenBucket(b) => P::TokenBucket {
                capacity: b.capacity,
                tick: b.tick,
                quantum: b.quantum,
            },
            Self::LeakyBucket(g) => P::LeakyBucket {
                capacity: g.burst,
                interval: g.interval,
            },
            Self::FixedWindow(w) => P::FixedWindow {
                limit: w.limit,
                period: w.period,
            },
            Self::SlidingWindow(w) => P::SlidingWindow {
                limit: w.limit,
                precision: w.precision,
                buckets: w.buckets,
            },
            Self::SlidingLog(l) => P::SlidingLog {
                limit: l.limit,
                period: l.period,
            },
        }
    }
}

/// GCRA's clamp on `now`, shared with the lock-free path of the memory store.
pub(crate) fn clamp_now(now: u64) -> u64 {
    now.min(MAX_NOW)
}
