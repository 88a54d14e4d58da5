//! A descriptor's `rate_limit` once checked: [`RateLimit`], its [`Unit`], what it does
//! ([`Rule`]), and how its policy is named.

use std::fmt;
use std::time::Duration;

use floodwall_core::Policy;
use sha2::{Digest, Sha256};

/// A `rate_limit`'s `unit`. The reference accepts these seven names in any case
/// (`second`, `SECOND`, `Second`); `unknown`, Envoy's zero value, is refused.
///
/// A week is 7 days, a month 30 days and a year 365 days, as the reference counts them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Unit {
    /// One second.
    Second,
    /// 60 seconds.
    Minute,
    /// 3,600 seconds.
    Hour,
    /// 86,400 seconds.
    Day,
    /// 7 days.
    Week,
    /// 30 days.
    Month,
    /// 365 days.
    Year,
}

impl Unit {
    /// Every unit, shortest first.
    pub const ALL: [Unit; 7] = [
        Unit::Second,
        Unit::Minute,
        Unit::Hour,
        Unit::Day,
        Unit::Week,
        Unit::Month,
        Unit::Year,
    ];

    /// The unit's name in lower case, as in the file.
    pub fn name(self) -> &'static str {
        match self {
            Unit::Second => "second",
            Unit::Minute => "minute",
            Unit::Hour => "hour",
            Unit::Day => "day",
            Unit::Week => "week",
            Unit::Month => "month",
            Unit::Year => "year",
        }
    }

    /// The unit in seconds.
    pub fn seconds(self) -> u64 {
        match self {
            Unit::Second => 1,
            Unit::Minute => 60,
            Unit::Hour => 3_600,
            Unit::Day => 86_400,
            Unit::Week => 7 * 86_400,
            Unit::Month => 30 * 86_400,
            Unit::Year => 365 * 86_400,
        }
    }

    /// The unit as a duration.
    pub fn duration(self) -> Duration {
        Duration::from_secs(self.seconds())
    }

    /// The unit a name stands for, in any ASCII case.
    pub fn from_name(name: &str) -> Option<Unit> {
        Unit::ALL
            .into_iter()
            .find(|u| u.name().eq_ignore_ascii_case(name))
    }
}

impl fmt::Display for Unit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What a limit does to the requests it applies to.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Rule {
    /// Counted by this policy: `requests_per_unit` per `unit` with floodwall's `algorithm`
    /// (GCRA unless the file says otherwise), `burst` and `penalty`.
    Limited(Policy),
    /// `unlimited: true`: every request is allowed, without touching the store.
    Unlimited,
    /// `requests_per_unit: 0`: every request is over the limit (the reference's way to
    /// block a descriptor, its README's third example), without touching the store.
    RefuseAll,
}

/// A descriptor's checked `rate_limit`, with the descriptor's `shadow_mode` and
/// `detailed_metric`.
#[derive(Debug, Clone, PartialEq)]
pub struct RateLimit {
    pub(crate) rule: Rule,
    pub(crate) unit: Option<Unit>,
    pub(crate) requests_per_unit: u32,
    pub(crate) name: Option<String>,
    pub(crate) replaces: Vec<String>,
    pub(crate) shadow_mode: bool,
    pub(crate) detailed_metric: bool,
    pub(crate) full_key: String,
}

impl RateLimit {
    /// What the limit does.
    pub fn rule(&self) -> &Rule {
        &self.rule
    }

    /// The policy that counts the requests, when they are counted.
    ///
    /// Its name is the [`full_key`](Self::full_key) with every character outside
    /// `A-Z a-z 0-9 _ . -` made `_` and cut to 47 characters, then `:` and 16 hexadecimal
    /// digits of a SHA-256 of the domain and of each key and value on the descriptor path:
    /// `messaging.message_type_marketing.to_number:1f0c...`. It fits a policy name's 64
    /// characters, reads in logs, differs for every limit of a configuration (the loader
    /// checks), and stays the same across reloads, versions and machines: a limit keeps its
    /// state in Redis as long as its domain and path stay, whatever its quota. A request's
    /// store key is then the service's to form (from the request's own entries, so that
    /// each value of a key-only descriptor is counted apart).
    pub fn policy(&self) -> Option<&Policy> {
        match &self.rule {
            Rule::Limited(policy) => Some(policy),
            _ => None,
        }
    }

    /// Whether the limit is `unlimited: true`.
    pub fn is_unlimited(&self) -> bool {
        self.rule == Rule::Unlimited
    }

    /// The `unit` as written; `None` for an unlimited limit.
    pub fn unit(&self) -> Option<Unit> {
        self.unit
    }

    /// The `requests_per_unit` as written (0 for an unlimited limit).
    pub fn requests_per_unit(&self) -> u32 {
        self.requests_per_unit
    }

    /// The limit's `name`, which other limits' `replaces` refer to.
    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    /// The names this limit replaces: when a request's descriptors reach both this limit
    /// and one named here, only this one applies (see [`drop_replaced`](super::drop_replaced)).
    pub fn replaces(&self) -> &[String] {
        &self.replaces
    }

    /// Whether the descriptor is in shadow mode: counted as usual, always answered OK.
    pub fn shadow_mode(&self) -> bool {
        self.shadow_mode
    }

    /// Whether the descriptor asks for the request's values in its metrics
    /// (`detailed_metric: true`); without it, metrics name the descriptor's keys only
    /// (see [`metrics`](crate::metrics)).
    pub fn detailed_metric(&self) -> bool {
        self.detailed_metric
    }

    /// The reference's statistics key for this limit: the domain, then each descriptor on
    /// the path as `key` or `key_value`, joined by dots (`messaging.message_type_marketing.to_number`).
    pub fn full_key(&self) -> &str {
        &self.full_key
    }
}

impl RateLimit {
    /// The limit a request descriptor's `limit` override asks for, in `domain`: as the
    /// reference applies one, without a name, `replaces` or shadow mode; counted with
    /// GCRA, `requests_per_unit` 0 refusing every request. Its policy is named after the
    /// domain and the unit only (`api.override_minute:` and 16 hexadecimal digits of a
    /// SHA-256 that no configured limit's name shares), so that a descriptor keeps its
    /// state while the override's quota changes, as the reference's counters do.
    pub(crate) fn from_override(
        domain: &str,
        requests_per_unit: u32,
        unit: Unit,
    ) -> Result<RateLimit, floodwall_core::ConfigError> {
        let full_key = format!("{domain}.override_{unit}");
        let rule = if requests_per_unit == 0 {
            Rule::RefuseAll
        } else {
            let mut hash = Sha256::new();
            hash.update(b"override\0");
            hash.update((domain.len() as u64).to_le_bytes());
            hash.update(domain.as_bytes());
            hash.update(unit.name().as_bytes());
            let name = readable_name(&full_key, &hash.finalize());
            let quota = floodwall_core::Quota::new(u64::from(requests_per_unit), unit.duration())?;
            Rule::Limited(Policy::gcra(name, quota)?)
        };
        Ok(RateLimit {
            rule,
            unit: Some(unit),
            requests_per_unit,
            name: None,
            replaces: Vec::new(),
            shadow_mode: false,
            detailed_metric: false,
            full_key,
        })
    }
}

/// A descriptor on the path to a limit: its key and optional value.
pub(crate) type Step<'a> = (&'a str, Option<&'a str>);

/// The name of the policy of the limit at `path` in `domain`, as [`RateLimit::policy`]
/// says: the digest hashes each part length-prefixed, a value told apart from none.
pub(crate) fn policy_name(domain: &str, path: &[Step<'_>]) -> String {
    let mut hash = Sha256::new();
    let mut part = |bytes: &[u8]| {
        hash.update((bytes.len() as u64).to_le_bytes());
        hash.update(bytes);
    };
    part(domain.as_bytes());
    for (key, value) in path {
        part(key.as_bytes());
        match value {
            Some(value) => {
                part(b"=");
                part(value.as_bytes());
            }
            None => part(b""),
        }
    }
    readable_name(&full_key(domain, path), &hash.finalize())
}

/// `full_key` made a policy name: its characters outside `A-Z a-z 0-9 _ . -` made `_`,
/// cut to 47 characters, then `:` and the first 8 bytes of `digest` in hexadecimal.
fn readable_name(full_key: &str, digest: &[u8]) -> String {
    const READABLE: usize = Policy::MAX_NAME_LEN - 17;
    let mut name: String = full_key
        .chars()
        .take(READABLE)
        .map(|c| {
            if c.is_ascii_alphanumeric() || "_.-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    name.push(':');
    for byte in &digest[..8] {
        name.push_str(&format!("{byte:02x}"));
    }
    name
}

/// The reference's statistics key: `domain.key_value.key`.
pub(crate) fn full_key(domain: &str, path: &[Step<'_>]) -> String {
    let mut out = String::from(domain);
    for (key, value) in path {
        out.push('.');
        out.push_str(key);
        if let Some(value) = value {
            out.push('_');
            out.push_str(value);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_read_in_any_case_and_count_as_the_reference() {
        assert_eq!(Unit::from_name("SECOND"), Some(Unit::Second));
        assert_eq!(Unit::from_name("Minute"), Some(Unit::Minute));
        assert_eq!(Unit::from_name("week"), Some(Unit::Week));
        assert_eq!(Unit::from_name("unknown"), None);
        assert_eq!(Unit::from_name("seconds"), None);
        assert_eq!(Unit::Month.seconds(), 2_592_000);
        assert_eq!(Unit::Year.seconds(), 31_536_000);
    }

    #[test]
    fn policy_names_are_valid_stable_and_distinct() {
        let a = policy_name(
            "messaging",
            &[("message_type", Some("marketing")), ("to_number", None)],
        );
        assert!(
            a.starts_with("messaging.message_type_marketing.to_number:"),
            "{a}"
        );
        // A name Policy accepts, and the same one every time.
        assert!(Policy::gcra(a.as_str(), "1/s".parse().unwrap()).is_ok());
        assert_eq!(
            a,
            policy_name(
                "messaging",
                &[("message_type", Some("marketing")), ("to_number", None)]
            )
        );
        // The reference's key joins with `_`, ambiguously; the digest does not.
        let b = policy_name("d", &[("a_b", None)]);
        let c = policy_name("d", &[("a", Some("b"))]);
        assert_ne!(b, c);
        assert_ne!(
            policy_name("d", &[("a", Some(""))]),
            policy_name("d", &[("a", None)])
        );
        // Long and non-ASCII paths still make a valid name.
        let long = policy_name(&"é".repeat(300), &[("/api/v1/*", Some(&"x".repeat(500)))]);
        assert_eq!(long.chars().count(), Policy::MAX_NAME_LEN);
        assert!(Policy::gcra(long, "1/s".parse().unwrap()).is_ok());
    }

    #[test]
    fn overrides_are_named_by_domain_and_unit_apart_from_configured_limits() {
        let name = |domain: &str, rpu, unit| {
            let limit = RateLimit::from_override(domain, rpu, unit).unwrap();
            limit.policy().unwrap().name().to_owned()
        };
        let a = name("api", 5, Unit::Minute);
        assert!(a.starts_with("api.override_minute:"), "{a}");
        assert_eq!(a, name("api", 50, Unit::Minute));
        assert_ne!(a, name("api", 5, Unit::Hour));
        assert_ne!(a, policy_name("api", &[("override", Some("minute"))]));
        assert!(name(&"é".repeat(100), 1, Unit::Day).len() <= Policy::MAX_NAME_LEN);
        let refuse = RateLimit::from_override("api", 0, Unit::Second).unwrap();
        assert_eq!(refuse.rule(), &Rule::RefuseAll);
        assert!(RateLimit::from_override("api", u32::MAX, Unit::Second).is_err());
    }
}
