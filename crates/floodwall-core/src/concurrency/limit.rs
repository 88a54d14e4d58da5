//! [`ConcurrencyLimit`]: a named "at most N in flight per key".

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::{ConfigError, MAX_SPAN, Quota};

/// A named limit on requests *in flight*: at most [`max`](Self::max) per key at any
/// instant, each holding a slot until its [`Permit`](super::Permit) drops. The name
/// namespaces keys as a policy's does.
///
/// A shared store (Redis) keeps each slot as a *lease*, expiring [`lease`](Self::lease)
/// after it was taken unless renewed every [`renew_every`](Self::renew_every), so a
/// process killed mid-request frees its slots; the memory store ignores both.
///
/// ```
/// use floodwall_core::ConcurrencyLimit;
/// use std::time::Duration;
///
/// let reports = ConcurrencyLimit::new("reports", 4)?.with_lease(Duration::from_secs(6))?;
/// assert_eq!((reports.max(), reports.renew_every()), (4, Duration::from_secs(2)));
///
/// // Nothing could ever run: refused at construction, not at the first request.
/// assert!(ConcurrencyLimit::new("reports", 0).is_err());
/// # Ok::<(), floodwall_core::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct ConcurrencyLimit {
    inner: Arc<Inner>,
}

#[derive(Clone, PartialEq, Eq)]
struct Inner {
    name: String,
    max: u64,
    lease: Duration,
    renew_every: Duration,
    namespace: u64,
}

impl ConcurrencyLimit {
    /// The largest `max` accepted: what every store counts exactly (as
    /// [`Quota::MAX_COUNT`]).
    pub const MAX: u64 = Quota::MAX_COUNT;

    /// The lease time unless [`with_lease`](Self::with_lease) says otherwise.
    pub const DEFAULT_LEASE: Duration = Duration::from_secs(10);

    /// The shortest lease accepted: Redis expires keys to the millisecond.
    pub const MIN_LEASE: Duration = Duration::from_millis(1);

    /// At most `max` requests in flight per key (1 ..= [`MAX`](Self::MAX)), under the
    /// [default lease](Self::DEFAULT_LEASE). Names follow
    /// [`Policy::new`](crate::Policy::new)'s rules.
    pub fn new(name: impl Into<String>, max: u64) -> Result<Self, ConfigError> {
        let name = crate::policy::valid_name(name.into())?;
        if max == 0 || max > Self::MAX {
            return Err(ConfigError::BadInFlightLimit { max });
        }
        // In-flight counts mean the same whatever `max`, so a limit reshaped on a rolling
        // deploy keeps counting the requests already running: only the name namespaces.
        let namespace = crate::policy::digest(&format!("in-flight\0{name}"));
        Self::build(Inner {
            name,
            max,
            lease: Self::DEFAULT_LEASE,
            renew_every: Self::DEFAULT_LEASE / 3,
            namespace,
        })
    }

    /// The same limit with another lease time ([`MIN_LEASE`](Self::MIN_LEASE) ..=
    /// [`MAX_SPAN`]), renewed every third of it.
    pub fn with_lease(self, lease: Duration) -> Result<Self, ConfigError> {
        self.reshaped(lease, lease / 3)
    }

    /// The same limit renewing its leases every `every` (at least 1 ms, shorter than the
    /// lease, leaving room for a failed attempt or two; a third of it by default).
    pub fn with_renewal(self, every: Duration) -> Result<Self, ConfigError> {
        let lease = self.inner.lease;
        self.reshaped(lease, every)
    }

    fn reshaped(self, lease: Duration, renew_every: Duration) -> Result<Self, ConfigError> {
        let mut inner = Arc::unwrap_or_clone(self.inner);
        inner.lease = lease;
        inner.renew_every = renew_every;
        Self::build(inner)
    }

    fn build(inner: Inner) -> Result<Self, ConfigError> {
        let (lease, renew_every) = (inner.lease, inner.renew_every);
        let lease_ok = (Self::MIN_LEASE..=MAX_SPAN).contains(&lease);
        if !lease_ok || renew_every < Self::MIN_LEASE || renew_every >= lease {
            return Err(ConfigError::BadLease { lease, renew_every });
        }
        Ok(Self {
            inner: Arc::new(inner),
        })
    }

    /// This limit's share for one of `nodes` servers deciding alone (as a policy's):
    /// `max / nodes`, at least 1. `share(1)` (or 0) is the limit.
    pub fn share(&self, nodes: u32) -> Self {
        if nodes <= 1 {
            return self.clone();
        }
        let mut inner = Inner {
            name: self.inner.name.clone(),
            ..*self.inner
        };
        inner.max = (inner.max / u64::from(nodes)).max(1);
        Self {
            inner: Arc::new(inner),
        }
    }

    /// The name given at construction.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The most requests in flight per key.
    pub fn max(&self) -> u64 {
        self.inner.max
    }

    /// How long a slot in a shared store outlives a holder that stopped renewing it.
    pub fn lease(&self) -> Duration {
        self.inner.lease
    }

    /// How often a shared store renews the lease of a request still running.
    pub fn renew_every(&self) -> Duration {
        self.inner.renew_every
    }

    /// The digest that namespaces this limit's keys in a store (its name's).
    pub(crate) fn namespace(&self) -> u64 {
        self.inner.namespace
    }
}

impl PartialEq for ConcurrencyLimit {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner) || self.inner == other.inner
    }
}

impl Eq for ConcurrencyLimit {}

impl fmt::Debug for ConcurrencyLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConcurrencyLimit")
            .field("name", &self.inner.name)
            .field("max", &self.inner.max)
            .field("lease", &self.inner.lease)
            .field("renew_every", &self.inner.renew_every)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The error, for a `matches!` on one line.
    fn err(r: Result<ConcurrencyLimit, ConfigError>) -> ConfigError {
        r.expect_err("refused")
    }

    #[test]
    fn zero_overflowing_and_badly_named_limits_are_refused() {
        let new = |max| err(ConcurrencyLimit::new("x", max));
        assert!(matches!(new(0), ConfigError::BadInFlightLimit { max: 0 }));
        for max in [ConcurrencyLimit::MAX + 1, u64::MAX] {
            assert!(matches!(new(max), ConfigError::BadInFlightLimit { .. }));
        }
        assert!(ConcurrencyLimit::new("x", ConcurrencyLimit::MAX).is_ok());
        for bad in ["", "a b", "{x}", &"n".repeat(65)] {
            let e = err(ConcurrencyLimit::new(bad, 1));
            assert!(matches!(e, ConfigError::InvalidName { .. }));
        }
    }

    #[test]
    fn leases_and_renewals_are_checked() {
        let l = ConcurrencyLimit::new("x", 3).unwrap();
        assert_eq!(l.lease(), ConcurrencyLimit::DEFAULT_LEASE);
        assert!(l.renew_every() < l.lease());
        let short = l.clone().with_lease(Duration::from_secs(1)).unwrap();
        assert_eq!(short.renew_every(), Duration::from_nanos(333_333_333));
        for bad in [Duration::ZERO, Duration::from_micros(999), MAX_SPAN * 2] {
            assert!(matches!(
                err(l.clone().with_lease(bad)),
                ConfigError::BadLease { .. }
            ));
        }
        // A lease too short to be renewed a third of the way: refused too.
        assert!(l.clone().with_lease(Duration::from_micros(2500)).is_err());
        assert!(short.clone().with_renewal(Duration::from_secs(1)).is_err());
        assert!(short.clone().with_renewal(Duration::ZERO).is_err());
        let every = short.with_renewal(Duration::from_millis(900)).unwrap();
        assert_eq!(every.renew_every(), Duration::from_millis(900));
        assert_eq!(every.max(), 3);
    }

    #[test]
    fn a_share_divides_max_and_never_goes_below_one() {
        let l = ConcurrencyLimit::new("x", 10).unwrap();
        assert_eq!(l.share(3).max(), 3);
        assert_eq!(l.share(100).max(), 1);
        assert_eq!(l.share(1), l);
        assert_eq!(l.share(3).name(), "x");
        assert_eq!(l.share(3).namespace(), l.namespace());
        // Different maxima under one name count the same requests.
        let other = ConcurrencyLimit::new("x", 4).unwrap();
        assert_eq!(other.namespace(), l.namespace());
        assert_ne!(
            ConcurrencyLimit::new("y", 10).unwrap().namespace(),
            l.namespace()
        );
    }
}
