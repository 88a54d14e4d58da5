//! A named limit: algorithm + quota, with everything derived from them computed once.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::algorithm::{Engine, Parameters, Raw};
use crate::{Algorithm, ConfigError, Decision, Error, Penalty, Quota, State};

/// How a policy reports durations in its decisions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Rounding {
    /// Exact microseconds (the default). Headers round up to whole seconds themselves.
    Micros,
    /// Whole seconds as redis-cell's `CL.THROTTLE` reports them: rounded up when a
    /// millisecond or more remains; a denial's `retry_after` never rounds to zero.
    WholeSeconds,
}

/// A named limit: which [`Algorithm`], which [`Quota`].
///
/// The name namespaces keys: policies with different names never share state. Two with
/// the same name and algorithm are one limit whose quota changed, sharing each key's state
/// where it still means the same ([`crate::guide::quota_changes`]). Cloning is cheap.
///
/// # Examples
///
/// ```
/// use floodwall_core::{Algorithm, Policy, State};
///
/// let policy = Policy::new("api", Algorithm::Gcra, "2/s".parse()?)?;
/// let mut state = State::new();
/// let now = 1_700_000_000_000_000; // µs since the epoch
/// assert!(policy.decide(&mut state, now, 1)?.is_allowed());
/// assert!(policy.decide(&mut state, now, 1)?.is_allowed());
/// let denied = policy.decide(&mut state, now, 1)?;
/// assert!(!denied.is_allowed());
/// assert_eq!(denied.retry_after, Some(std::time::Duration::from_millis(500)));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct Policy {
    inner: Arc<Inner>,
}

#[derive(Clone, PartialEq, Eq)]
struct Inner {
    name: String,
    algorithm: Algorithm,
    quota: Quota,
    engine: Engine,
    rounding: Rounding,
    namespace: u64,
    state_namespace: u64,
    name_namespace: u64,
    penalty: Option<Penalty>,
}

impl Policy {
    /// The longest policy name accepted.
    pub const MAX_NAME_LEN: usize = 64;

    /// A policy, or the reason this algorithm cannot enforce this quota. Names are 1 to 64
    /// characters from `[A-Za-z0-9_.:-]` (they end up in store keys, logs and metrics).
    pub fn new(
        name: impl Into<String>,
        algorithm: Algorithm,
        quota: Quota,
    ) -> Result<Self, ConfigError> {
        Self::build(name.into(), algorithm, quota, Rounding::Micros)
    }

    /// A GCRA policy, the default algorithm. Each algorithm has a constructor like it,
    /// with its default parameters; a tick or precision of its own goes through
    /// [`new`](Self::new), which also takes an [`Algorithm`] read from configuration.
    ///
    /// ```
    /// use floodwall_core::{Algorithm, Policy};
    ///
    /// let login = Policy::gcra("login", "5/min burst 10".parse()?)?;
    /// let uploads = Policy::token_bucket("uploads", "100/s burst 200".parse()?)?;
    /// let daily = Policy::fixed_window("daily", "1000/day".parse()?)?;
    /// let search = Policy::sliding_window("search", "600/min".parse()?)?;
    /// assert_eq!(daily.algorithm(), Algorithm::FixedWindow);
    /// assert_eq!(search, Policy::new("search", Algorithm::SLIDING_WINDOW, "600/min".parse()?)?);
    ///
    /// // A window algorithm has no burst: the error says so at construction.
    /// assert!(Policy::sliding_log("exact", "10/s burst 20".parse()?).is_err());
    /// # let _ = (login, uploads);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn gcra(name: impl Into<String>, quota: Quota) -> Result<Self, ConfigError> {
        Self::new(name, Algorithm::Gcra, quota)
    }

    /// A token bucket adding one token per `period / count`.
    pub fn token_bucket(name: impl Into<String>, quota: Quota) -> Result<Self, ConfigError> {
        Self::new(name, Algorithm::TOKEN_BUCKET, quota)
    }

    /// A leaky bucket (the funnel): capacity the burst, leaking one unit per `period / count`.
    pub fn leaky_bucket(name: impl Into<String>, quota: Quota) -> Result<Self, ConfigError> {
        Self::new(name, Algorithm::LeakyBucket, quota)
    }

    /// A fixed window: the cheapest state, at the price of `2 × count` across a window edge.
    pub fn fixed_window(name: impl Into<String>, quota: Quota) -> Result<Self, ConfigError> {
        Self::new(name, Algorithm::FixedWindow, quota)
    }

    /// A sliding window of ten buckets per period, bounding the fixed window's edge burst.
    pub fn sliding_window(name: impl Into<String>, quota: Quota) -> Result<Self, ConfigError> {
        Self::new(name, Algorithm::SLIDING_WINDOW, quota)
    }

    /// A sliding log: exact over any window, for counts up to
    /// [`SLIDING_LOG_MAX_ENTRIES`](Algorithm::SLIDING_LOG_MAX_ENTRIES).
    pub fn sliding_log(name: impl Into<String>, quota: Quota) -> Result<Self, ConfigError> {
        Self::new(name, Algorithm::SlidingLog, quota)
    }

    /// GCRA with redis-cell's `CL.THROTTLE key max_burst count period` arguments and its
    /// rounding: `limit = max_burst + 1`, durations in whole seconds. A `quantity` that can
    /// never pass is [`Error::CostTooHigh`] (redis-cell: "limited", `retry_after` -1).
    ///
    /// ```
    /// use floodwall_core::{Policy, State};
    /// use std::time::Duration;
    ///
    /// // CL.THROTTLE user123 15 30 60
    /// let cell = Policy::redis_cell("cell", 15, 30, Duration::from_secs(60))?;
    /// let d = cell.decide(&mut State::new(), 0, 1)?;
    /// assert_eq!((d.is_allowed(), d.limit, d.remaining), (true, 16, 15));
    /// assert_eq!(d.reset_after, Duration::from_secs(2));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn redis_cell(
        name: impl Into<String>,
        max_burst: u64,
        count: u64,
        period: Duration,
    ) -> Result<Self, ConfigError> {
        let burst = max_burst.checked_add(1).ok_or(ConfigError::SpanTooLong {
            what: "burst x interval",
        })?;
        let quota = Quota::new(count, period)?.with_burst(burst)?;
        Self::build(name.into(), Algorithm::Gcra, quota, Rounding::WholeSeconds)
    }

    fn build(
        name: String,
        algorithm: Algorithm,
        quota: Quota,
        rounding: Rounding,
    ) -> Result<Self, ConfigError> {
        let name = valid_name(name)?;
        let engine = Engine::new(algorithm, &quota)?;
        // 8-byte digests, hashed and compared on every check. The whole policy: caches of
        // its answers keep them apart from another quota's.
        let namespace = whole_namespace(&name, algorithm, &quota, rounding, None);
        // What a stored state means, and nothing more (guide::quota_changes).
        let [a, b] = engine.parameters().shape();
        let state_namespace = digest(&format!("{name}\0{}\0{a}\0{b}", algorithm.name()));
        // The name alone: a key's ban outlives any change of the policy (guide::penalties).
        let name_namespace = digest(&format!("{name}\0penalty"));
        Ok(Self {
            inner: Arc::new(Inner {
                name,
                algorithm,
                quota,
                engine,
                rounding,
                namespace,
                state_namespace,
                name_namespace,
                penalty: None,
            }),
        })
    }

    /// This policy's share for one of `nodes` servers deciding alone while the shared store
    /// is down ([`Fallback`](crate::resilience::Fallback)): count and burst divided by
    /// `nodes`, rounded down but at least 1; the rest kept. `share(1)` (or 0) is the policy.
    ///
    /// A token bucket whose tick no longer adds a whole token adds one per `period /
    /// count`. Fails when the share's burst span outgrows [`MAX_SPAN`](crate::MAX_SPAN).
    ///
    /// ```
    /// use floodwall_core::Policy;
    ///
    /// let fleet = Policy::gcra("per-ip", "100/s burst 300".parse()?)?;
    /// let local = fleet.share(4)?;
    /// assert_eq!((local.quota().count(), local.quota().burst()), (25, 75));
    /// assert_eq!(local.name(), "per-ip");
    /// # Ok::<(), floodwall_core::ConfigError>(())
    /// ```
    pub fn share(&self, nodes: u32) -> Result<Policy, ConfigError> {
        if nodes <= 1 {
            return Ok(self.clone());
        }
        let q = self.quota();
        let n = u64::from(nodes);
        let count = (q.count() / n).max(1);
        let burst = (q.burst() / n).max(1);
        let quota = Quota::new(count, q.period())?.with_burst(burst)?;
        let name = self.inner.name.clone();
        let share = match Self::build(name.clone(), self.algorithm(), quota, self.rounding()) {
            Err(ConfigError::BadTick { .. }) => {
                Self::build(name, Algorithm::TOKEN_BUCKET, quota, self.rounding())
            }
            other => other,
        }?;
        Ok(match self.penalty() {
            Some(penalty) => share.with_penalty(*penalty),
            None => share,
        })
    }

    /// This policy with `penalty`: keys refused too often are banned for a while. A key's
    /// quota state is the same with or without it.
    pub fn with_penalty(&self, penalty: Penalty) -> Policy {
        let mut inner = Inner::clone(&self.inner);
        inner.penalty = Some(penalty);
        // Caches must not carry a refusal across a penalty change (it would not be a strike).
        inner.namespace = whole_namespace(
            &inner.name,
            inner.algorithm,
            &inner.quota,
            inner.rounding,
            Some(&penalty),
        );
        Policy {
            inner: Arc::new(inner),
        }
    }

    /// The penalty of keys refused too often, if any ([`with_penalty`](Self::with_penalty)).
    pub fn penalty(&self) -> Option<&Penalty> {
        self.inner.penalty.as_ref()
    }

    /// The name given at construction.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The algorithm.
    pub fn algorithm(&self) -> Algorithm {
        self.inner.algorithm
    }

    /// The quota.
    pub fn quota(&self) -> &Quota {
        &self.inner.quota
    }

    /// How durations are reported.
    pub fn rounding(&self) -> Rounding {
        self.inner.rounding
    }

    /// The most that can pass at once, which is also the largest cost a check accepts:
    /// the burst for GCRA and the buckets, the count for windows and logs.
    pub fn limit(&self) -> u64 {
        self.inner.engine.limit()
    }

    /// The integers the algorithm computes with, for stores that run it elsewhere.
    pub fn parameters(&self) -> Parameters {
        self.inner.engine.parameters()
    }

    /// Decides a request of `cost` at `now` (µs since the Unix epoch) and updates `state`:
    /// the pure algorithm every store runs. A denial or a peek (cost 0) changes nothing.
    pub fn decide(&self, state: &mut State, now: u64, cost: u64) -> Result<Decision, Error> {
        let raw = self.inner.engine.decide(state, now, cost)?;
        Ok(self.to_decision(raw))
    }

    /// Applies a charge or a refund to `state` at `now`: the pure algorithm behind
    /// [`StoreExt::adjust`](crate::StoreExt::adjust) (see [`Adjustment`](crate::Adjustment)).
    pub fn adjust(
        &self,
        state: &mut State,
        now: u64,
        adjustment: crate::Adjustment,
    ) -> Result<(), Error> {
        self.inner.engine.adjust(state, now, adjustment).map(|_| ())
    }

    /// The refusal of a key banned for `remaining_micros` more ([`crate::store::ban_decision`]).
    pub(crate) fn ban_decision(&self, remaining_micros: u64) -> Decision {
        let mut decision = self.decision_from_micros(false, 0, remaining_micros, remaining_micros);
        decision.outcome = crate::Outcome::Banned;
        decision
    }

    /// Fails with [`Error::CostTooHigh`] when `cost` can never pass.
    #[inline]
    pub fn check_cost(&self, cost: u64) -> Result<(), Error> {
        self.inner.engine.check_cost(cost)
    }

    /// [`crate::store::decision_from_micros`].
    pub(crate) fn decision_from_micros(
        &self,
        allowed: bool,
        remaining: u64,
        retry_after_us: u64,
        reset_after_us: u64,
    ) -> Decision {
        self.to_decision(Raw {
            allowed,
            remaining,
            retry: retry_after_us,
            reset: reset_after_us,
        })
    }

    #[inline]
    pub(crate) fn to_decision(&self, raw: Raw) -> Decision {
        self.to_decision_with_limit(raw, self.limit())
    }

    /// [`to_decision`](Self::to_decision) with the limit already at hand. Builds what
    /// [`Decision::new`] would, without its `Duration` comparisons: this runs on every check.
    #[inline]
    pub(crate) fn to_decision_with_limit(&self, raw: Raw, limit: u64) -> Decision {
        let mut exact = None;
        let (retry, reset) = match self.inner.rounding {
            // At least one microsecond when denied, as `Decision::new` ensures.
            Rounding::Micros => (
                Duration::from_micros(raw.retry.max(u64::from(!raw.allowed))),
                Duration::from_micros(raw.reset),
            ),
            // The exact figures are kept beside the rounded ones, for a `DenyCache`.
            Rounding::WholeSeconds => {
                exact = Some((raw.retry.max(u64::from(!raw.allowed)), raw.reset));
                (
                    Duration::from_secs(cell_seconds(raw.retry).max(u64::from(!raw.allowed))),
                    Duration::from_secs(cell_seconds(raw.reset)),
                )
            }
        };
        Decision {
            outcome: if raw.allowed {
                crate::Outcome::Allowed
            } else {
                crate::Outcome::Refused
            },
            source: crate::Source::Store,
            limit,
            remaining: raw.remaining,
            retry_after: (!raw.allowed).then_some(retry),
            reset_after: reset,
            exact,
        }
    }

    pub(crate) fn engine(&self) -> &Engine {
        &self.inner.engine
    }

    /// A digest of the whole policy: caches of its answers key by it, so a new quota
    /// never reads them.
    pub(crate) fn namespace(&self) -> u64 {
        self.inner.namespace
    }

    /// A digest of the name, algorithm and [`Parameters::shape`](crate::Parameters::shape):
    /// stores key states by it ([`crate::guide::quota_changes`]).
    pub(crate) fn state_namespace(&self) -> u64 {
        self.inner.state_namespace
    }

    /// A digest of the name alone: strikes and bans are keyed by it, so they outlive a
    /// change of the policy.
    pub(crate) fn name_namespace(&self) -> u64 {
        self.inner.name_namespace
    }
}

/// `name` if it is a valid policy (or in-flight limit) name.
pub(crate) fn valid_name(name: String) -> Result<String, ConfigError> {
    let valid = |b: u8| b.is_ascii_alphanumeric() || b"_.:-".contains(&b);
    if name.is_empty() || name.len() > Policy::MAX_NAME_LEN || !name.bytes().all(valid) {
        return Err(ConfigError::InvalidName { name });
    }
    Ok(name)
}

/// The first 8 bytes of `descriptor`'s SHA-256.
pub(crate) fn digest(descriptor: &str) -> u64 {
    let digest = <sha2::Sha256 as sha2::Digest>::digest(descriptor.as_bytes());
    u64::from_le_bytes(digest[..8].try_into().expect("8 of 32 bytes"))
}

/// The digest of everything a policy is, for caches of its answers (`Policy::namespace`).
fn whole_namespace(
    name: &str,
    algorithm: Algorithm,
    quota: &Quota,
    rounding: Rounding,
    penalty: Option<&Penalty>,
) -> u64 {
    let policy = format!("{name}\0{algorithm:?}\0{quota}\0{rounding:?}");
    match penalty {
        None => digest(&policy),
        Some(penalty) => digest(&format!("{policy}\0{penalty:?}")),
    }
}

/// redis-cell's rounding: whole seconds, plus one when a millisecond or more remains.
fn cell_seconds(us: u64) -> u64 {
    us / 1_000_000 + u64::from(us % 1_000_000 >= 1_000)
}

impl PartialEq for Policy {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner) || self.inner == other.inner
    }
}

impl Eq for Policy {}

impl fmt::Debug for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Policy")
            .field("name", &self.inner.name)
            .field("algorithm", &self.inner.algorithm)
            .field("quota", &format_args!("{}", self.inner.quota))
            .field("penalty", &self.inner.penalty)
            .finish()
    }
}

#[cfg(test)]
mod tests;
