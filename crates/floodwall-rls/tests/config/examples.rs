//! The README's examples, each config written from the documentation.

use std::time::Duration;

use floodwall_core::Algorithm;
use floodwall_rls::config::{RateLimit, Rule, Unit, drop_replaced};

use super::{load, rate};

#[test]
fn example_1_two_values_of_one_key() {
    let c = load(
        "domain: mongo_cps
descriptors:
  - key: database
    value: users
    rate_limit:
      unit: second
      requests_per_unit: 500

  - key: database
    value: default
    rate_limit:
      unit: second
      requests_per_unit: 500
",
    );
    assert_eq!(
        rate(&c, "mongo_cps", &[("database", "users")]),
        Some((500, Unit::Second))
    );
    assert_eq!(
        rate(&c, "mongo_cps", &[("database", "default")]),
        Some((500, Unit::Second))
    );
    assert_eq!(rate(&c, "mongo_cps", &[("database", "other")]), None);
    assert_eq!(rate(&c, "other_domain", &[("database", "users")]), None);
    // Two limits, two policies.
    let users = c.limit("mongo_cps", [("database", "users")]).unwrap();
    let default = c.limit("mongo_cps", [("database", "default")]).unwrap();
    assert_ne!(
        users.policy().unwrap().name(),
        default.policy().unwrap().name()
    );
}

pub(super) const EXAMPLE_2: &str = "domain: messaging
descriptors:
  # Only allow 5 marketing messages a day
  - key: message_type
    value: marketing
    descriptors:
      - key: to_number
        rate_limit:
          unit: day
          requests_per_unit: 5

  # Only allow 100 messages a day to any unique phone number
  - key: to_number
    rate_limit:
      unit: day
      requests_per_unit: 100
";

#[test]
fn example_2_nested_descriptors_and_any_value() {
    let c = load(EXAMPLE_2);
    let marketing = [("message_type", "marketing"), ("to_number", "2061111111")];
    assert_eq!(rate(&c, "messaging", &marketing), Some((5, Unit::Day)));
    let other_number = [("message_type", "marketing"), ("to_number", "2062222222")];
    assert_eq!(rate(&c, "messaging", &other_number), Some((5, Unit::Day)));
    assert_eq!(
        rate(&c, "messaging", &[("to_number", "2061111111")]),
        Some((100, Unit::Day))
    );
    // The placeholder has no limit of its own.
    assert_eq!(
        rate(&c, "messaging", &[("message_type", "marketing")]),
        None
    );
    // Another message type reaches nothing.
    let other = [
        ("message_type", "transactional"),
        ("to_number", "2061111111"),
    ];
    assert_eq!(rate(&c, "messaging", &other), None);
    let limit = c.limit("messaging", marketing).unwrap();
    assert_eq!(
        limit.full_key(),
        "messaging.message_type_marketing.to_number"
    );
    let policy = limit.policy().unwrap();
    assert_eq!(policy.algorithm(), Algorithm::Gcra);
    assert_eq!(policy.quota().count(), 5);
    assert_eq!(policy.quota().period(), Duration::from_secs(86_400));
    // The reference's behaviour: a burst of the whole quota at once, as its window allows.
    assert_eq!(policy.quota().burst(), 5);
}

#[test]
fn example_3_key_and_value_win_over_the_key_alone() {
    let c = load(
        "domain: edge_proxy_per_ip
descriptors:
  - key: remote_address
    rate_limit:
      unit: second
      requests_per_unit: 10

  # Black list IP
  - key: remote_address
    value: 50.0.0.5
    rate_limit:
      unit: second
      requests_per_unit: 0
",
    );
    let domain = "edge_proxy_per_ip";
    assert_eq!(
        rate(&c, domain, &[("remote_address", "50.0.0.1")]),
        Some((10, Unit::Second))
    );
    let blocked = c.limit(domain, [("remote_address", "50.0.0.5")]).unwrap();
    assert_eq!(blocked.rule(), &Rule::RefuseAll);
    assert_eq!(
        (blocked.requests_per_unit(), blocked.unit()),
        (0, Some(Unit::Second))
    );
    assert!(blocked.policy().is_none());
}

#[test]
fn example_4_the_request_must_be_as_deep_as_the_tree() {
    let flat = load(
        "domain: example4
descriptors:
  - key: key
    value: value
    rate_limit:
      requests_per_unit: 300
      unit: second
",
    );
    let request = [("key", "value"), ("subkey", "subvalue")];
    assert_eq!(rate(&flat, "example4", &request), None);
    assert_eq!(
        rate(&flat, "example4", &[("key", "value")]),
        Some((300, Unit::Second))
    );
    let nested = load(
        "domain: example4
descriptors:
  - key: key
    value: value
    descriptors:
      - key: subkey
        rate_limit:
          requests_per_unit: 300
          unit: second
",
    );
    assert_eq!(
        rate(&nested, "example4", &request),
        Some((300, Unit::Second))
    );
    assert_eq!(rate(&nested, "example4", &[("key", "value")]), None);
    // Deeper than the tree: nothing.
    let deeper = [("key", "value"), ("subkey", "subvalue"), ("more", "x")];
    assert_eq!(rate(&nested, "example4", &deeper), None);
    // No entries at all: nothing.
    assert_eq!(rate(&nested, "example4", &[]), None);
}

#[test]
fn example_5_unlimited() {
    let c = load(
        "domain: internal
descriptors:
  - key: ldap
    rate_limit:
      unlimited: true

  - key: azure
    rate_limit:
      unit: minute
      requests_per_unit: 100
",
    );
    let ldap = c.limit("internal", [("ldap", "anything")]).unwrap();
    assert!(ldap.is_unlimited());
    assert_eq!((ldap.unit(), ldap.policy()), (None, None));
    assert_eq!(
        rate(&c, "internal", &[("azure", "x")]),
        Some((100, Unit::Minute))
    );
}

#[test]
fn example_6_shadow_mode() {
    let c = load(
        "domain: example6
descriptors:
  - key: service
    descriptors:
      - key: user
        value: user-a
        rate_limit:
          requests_per_unit: 10
          unit: second
        shadow_mode: true
      - key: user
        value: user-b
        rate_limit:
          requests_per_unit: 20
          unit: second
",
    );
    let a = c
        .limit(
            "example6",
            [("service", "auth-service"), ("user", "user-a")],
        )
        .unwrap();
    assert!(a.shadow_mode());
    assert_eq!(a.requests_per_unit(), 10);
    let b = c
        .limit(
            "example6",
            [("service", "auth-service"), ("user", "user-b")],
        )
        .unwrap();
    assert!(!b.shadow_mode());
    assert_eq!(b.requests_per_unit(), 20);
}

#[test]
fn example_7_replaces() {
    let c = load(
        "domain: example7
descriptors:
  - key: key_1
    value: value_1
    descriptors:
      - key: user
        value: bkthomps
        rate_limit:
          name: specific_limit
          requests_per_unit: 5
          unit: second
  - key: key_2
    value: value_2
    descriptors:
      - key: user
        value: bkthomps
        rate_limit:
          replaces:
            - name: specific_limit
          requests_per_unit: 10
          unit: second
",
    );
    let one = c.limit("example7", [("key_1", "value_1"), ("user", "bkthomps")]);
    let two = c.limit("example7", [("key_2", "value_2"), ("user", "bkthomps")]);
    assert_eq!(one.and_then(RateLimit::name), Some("specific_limit"));
    assert_eq!(two.unwrap().replaces(), ["specific_limit"]);
    let per_second = |limits: &[Option<&RateLimit>]| -> Vec<u32> {
        limits
            .iter()
            .flatten()
            .map(|l| l.requests_per_unit())
            .collect()
    };
    // Each alone applies as written.
    let mut alone = [one];
    drop_replaced(&mut alone);
    assert_eq!(per_second(&alone), [5]);
    let mut alone = [two];
    drop_replaced(&mut alone);
    assert_eq!(per_second(&alone), [10]);
    // Both in one request: only the replacing limit, 10/s.
    let mut both = [one, two];
    drop_replaced(&mut both);
    assert_eq!(per_second(&both), [10]);
    assert!(both[0].is_none());
}

#[test]
fn example_8_detailed_metric() {
    let c = load(
        "domain: example8
descriptors:
  - key: key1
    detailed_metric: true
    rate_limit:
      unit: minute
      requests_per_unit: 10
  - key: key1
    value: value1
    rate_limit:
      unit: minute
      requests_per_unit: 20
",
    );
    let any = c
        .limit("example8", [("key1", "unspecified_value")])
        .unwrap();
    assert!(any.detailed_metric());
    assert_eq!(
        (any.requests_per_unit(), any.full_key()),
        (10, "example8.key1")
    );
    let one = c.limit("example8", [("key1", "value1")]).unwrap();
    assert!(!one.detailed_metric());
    assert_eq!(
        (one.requests_per_unit(), one.full_key()),
        (20, "example8.key1_value1")
    );
}

#[test]
fn example_9_wildcard_values() {
    let c = load(
        "domain: example9
descriptors:
  - key: key1
    value: value*
    rate_limit:
      unit: minute
      requests_per_unit: 20
  - key: key1
    value: value_exact
    rate_limit:
      unit: minute
      requests_per_unit: 5
  - key: key1
    rate_limit:
      unit: minute
      requests_per_unit: 1
",
    );
    assert_eq!(
        rate(&c, "example9", &[("key1", "value_1")]),
        Some((20, Unit::Minute))
    );
    assert_eq!(
        rate(&c, "example9", &[("key1", "value_2")]),
        Some((20, Unit::Minute))
    );
    // Exact beats the wildcard, the wildcard beats the key alone.
    assert_eq!(
        rate(&c, "example9", &[("key1", "value_exact")]),
        Some((5, Unit::Minute))
    );
    assert_eq!(
        rate(&c, "example9", &[("key1", "other")]),
        Some((1, Unit::Minute))
    );
}

#[test]
fn the_most_specific_node_wins_without_backtracking() {
    // As the reference walks: the key-and-value node wins at level one even where only
    // the key-alone node has the nested descriptor the next entry needs.
    let c = load(
        "domain: d
descriptors:
  - key: a
    value: x
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: a
    descriptors:
      - key: b
        rate_limit: {unit: second, requests_per_unit: 2}
",
    );
    assert_eq!(
        rate(&c, "d", &[("a", "y"), ("b", "z")]),
        Some((2, Unit::Second))
    );
    assert_eq!(rate(&c, "d", &[("a", "x"), ("b", "z")]), None);
    assert_eq!(rate(&c, "d", &[("a", "x")]), Some((1, Unit::Second)));
}
