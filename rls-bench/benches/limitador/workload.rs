//! What is decided: the three workloads, the floodwall-rls configuration that limits them,
//! and the same limits in limitador's terms.

use std::sync::Arc;

use limitador::limit::{Expression, Limit};

/// Never refuses at the rates reached here: 10^9 an hour (about 280,000 a second, far
/// past what one Redis decides on this machine).
pub(crate) const ADMITTED_PER_HOUR: u64 = 1_000_000_000;
/// The flood's quota: 100 a minute per key.
pub(crate) const FLOOD_PER_MINUTE: u64 = 100;
/// The keys the flood is spread over.
pub(crate) const FLOOD_KEYS: usize = 10;

/// The descriptor entry key of the admitted workloads' limit.
const ADMITTED_KEY: &str = "user";
/// The descriptor entry key of the flood's limit.
const FLOOD_KEY: &str = "client";

/// One workload: call `i` sends one descriptor `[(entry_key, values[i % len])]`.
pub(crate) struct Workload {
    pub(crate) label: &'static str,
    /// Short, for the targets' lines.
    pub(crate) id: &'static str,
    pub(crate) entry_key: &'static str,
    pub(crate) values: Arc<Vec<String>>,
}

impl Workload {
    /// Every call on one key, admitted.
    pub(crate) fn hot() -> Self {
        Workload {
            label: "hot key",
            id: "hot",
            entry_key: ADMITTED_KEY,
            values: Arc::new(vec!["203.0.113.7".to_owned()]),
        }
    }

    /// 10,000 keys in turn, admitted.
    pub(crate) fn uniform() -> Self {
        Workload {
            label: "10k keys",
            id: "k10k",
            entry_key: ADMITTED_KEY,
            values: Arc::new((0..10_000).map(|i| format!("user-{i:05}")).collect()),
        }
    }

    /// [`FLOOD_KEYS`] keys in turn, each called hundreds of times past its quota: after
    /// the first [`FLOOD_PER_MINUTE`] calls of a key in a minute, all refused.
    pub(crate) fn flood() -> Self {
        Workload {
            label: "flood",
            id: "flood",
            entry_key: FLOOD_KEY,
            values: Arc::new((0..FLOOD_KEYS).map(|i| format!("bot-{i}")).collect()),
        }
    }

    /// A workload of one fresh key of this one's limit, for the equivalence probe.
    pub(crate) fn probe(&self, value: String) -> Self {
        Workload {
            label: self.label,
            id: self.id,
            entry_key: self.entry_key,
            values: Arc::new(vec![value]),
        }
    }
}

/// The floodwall-rls domain of each algorithm compared: GCRA (floodwall's default) and
/// fixed windows (what limitador counts).
pub(crate) const GCRA_DOMAIN: &str = "gcra";
pub(crate) const FIXED_DOMAIN: &str = "fixed";
/// The gRPC floor's domain: the same descriptor keys, each limit `unlimited: true`, which
/// the service answers `OK` without asking the store. What a call costs that decides
/// nothing: no decision logic can make more decisions/s over this client on this machine.
pub(crate) const UNLIMITED_DOMAIN: &str = "unlimited";

/// The configuration file of `domain` (envoyproxy/ratelimit's format; floodwall's
/// `algorithm` where not GCRA): the admitted limit on `user`, the flood's on `client`;
/// both `unlimited: true` in [`UNLIMITED_DOMAIN`].
pub(crate) fn rls_yaml(domain: &str) -> String {
    if domain == UNLIMITED_DOMAIN {
        return format!(
            "domain: {domain}
descriptors:
  - key: {ADMITTED_KEY}
    rate_limit:
      unlimited: true
  - key: {FLOOD_KEY}
    rate_limit:
      unlimited: true
"
        );
    }
    let algorithm = if domain == FIXED_DOMAIN {
        "\n      algorithm: fixed_window"
    } else {
        ""
    };
    format!(
        "domain: {domain}
descriptors:
  - key: {ADMITTED_KEY}
    rate_limit:
      unit: hour
      requests_per_unit: {ADMITTED_PER_HOUR}{algorithm}
  - key: {FLOOD_KEY}
    rate_limit:
      unit: minute
      requests_per_unit: {FLOOD_PER_MINUTE}{algorithm}
"
    )
}

/// The same two limits in limitador's namespace `namespace`, as limitador-server reads an
/// Envoy request: each descriptor is a map in the list `descriptors`, and a limit's
/// variable names the entry it counts by (a request without that entry is not counted by
/// that limit).
pub(crate) fn limitador_limits(namespace: &str) -> Vec<Limit> {
    let limit = |max: u64, seconds: u64, key: &str| {
        let variable =
            Expression::parse(format!("descriptors[0].{key}")).expect("a CEL expression");
        Limit::new(namespace, max, seconds, [], [variable])
    };
    vec![
        limit(ADMITTED_PER_HOUR, 3600, ADMITTED_KEY),
        limit(FLOOD_PER_MINUTE, 60, FLOOD_KEY),
    ]
}
