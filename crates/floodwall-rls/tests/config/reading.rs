//! Reading as the reference reads; floodwall's fields; policy names.

use std::time::Duration;

use floodwall_core::Algorithm;
use floodwall_rls::config::{Config, Unit};

use super::examples::EXAMPLE_2;
use super::{load, rate};

#[test]
fn every_unit_in_any_case_and_yaml_1_1_scalars() {
    let c = load(
        "domain: units
descriptors:
  - {key: s, rate_limit: {unit: SECOND, requests_per_unit: 1}}
  - {key: m, rate_limit: {unit: Minute, requests_per_unit: 1}}
  - {key: h, rate_limit: {unit: hour, requests_per_unit: 1}}
  - {key: d, rate_limit: {unit: day, requests_per_unit: 1}}
  - {key: w, rate_limit: {unit: week, requests_per_unit: 1}}
  - {key: mo, rate_limit: {unit: month, requests_per_unit: 1}}
  - {key: y, rate_limit: {unit: year, requests_per_unit: 0x10}, shadow_mode: yes}
  - {key: number, value: 2061234567, rate_limit: {unit: day, requests_per_unit: 1_000}}
",
    );
    let units: Vec<Unit> = c
        .domain("units")
        .unwrap()
        .descriptors()
        .iter()
        .filter_map(|d| d.rate_limit()?.unit())
        .collect();
    assert_eq!(&units[..7], Unit::ALL);
    let y = c.limit("units", [("y", "v")]).unwrap();
    assert_eq!((y.requests_per_unit(), y.shadow_mode()), (16, true));
    assert_eq!(
        y.policy().unwrap().quota().period(),
        Duration::from_secs(365 * 86_400)
    );
    // A number written as a value is its text.
    assert_eq!(
        rate(&c, "units", &[("number", "2061234567")]),
        Some((1000, Unit::Day))
    );
}

#[test]
fn floodwall_fields_algorithm_burst_penalty() {
    let mut text = String::from("domain: fw\ndescriptors:\n");
    for a in Algorithm::all() {
        text.push_str(&format!(
            "  - {{key: {n}, rate_limit: {{unit: minute, requests_per_unit: 60, algorithm: {n}}}}}\n",
            n = a.name()
        ));
    }
    text.push_str(
        "  - key: burst
    rate_limit:
      unit: second
      requests_per_unit: 10
      burst: 25
      penalty:
        after: 5
        within: 10min
        ban: 15min
        growth: 2
        max_ban: 1day
",
    );
    let c = load(&text);
    for a in Algorithm::all() {
        let policy = c.limit("fw", [(a.name(), "x")]).unwrap().policy().unwrap();
        assert_eq!(policy.algorithm().name(), a.name());
    }
    let policy = c.limit("fw", [("burst", "x")]).unwrap().policy().unwrap();
    assert_eq!((policy.quota().count(), policy.quota().burst()), (10, 25));
    let penalty = policy.penalty().unwrap();
    assert_eq!(
        (penalty.after(), penalty.ban(), penalty.growth()),
        (5, Duration::from_secs(900), 2)
    );
    assert_eq!(penalty.max_ban(), Duration::from_secs(86_400));
}

#[test]
fn misplaced_reference_fields_load_with_a_warning() {
    let c = load(
        "domain: w
descriptors:
  - key: a
    unit: second
    rate_limit:
      unit: minute
      requests_per_unit: 5
      shadow_mode: true
",
    );
    let limit = c.limit("w", [("a", "x")]).unwrap();
    // Ignored, as the reference ignores them: not in shadow mode.
    assert!(!limit.shadow_mode());
    let w: Vec<String> = c.warnings().iter().map(ToString::to_string).collect();
    assert_eq!(w.len(), 2, "{w:?}");
    assert!(
        w[0].starts_with("test.yaml:4:5: descriptors[0].unit: ignored"),
        "{}",
        w[0]
    );
    assert_eq!(
        (c.warnings()[1].line(), c.warnings()[1].field()),
        (8, "descriptors[0].rate_limit.shadow_mode")
    );
}

#[test]
fn policy_names_are_distinct_and_stable() {
    let c = load(EXAMPLE_2);
    let again = load(EXAMPLE_2);
    let name = |c: &Config, e: &[(&str, &str)]| {
        c.limit("messaging", e.iter().copied())
            .unwrap()
            .policy()
            .unwrap()
            .name()
            .to_owned()
    };
    let nested = [("message_type", "marketing"), ("to_number", "1")];
    let top = [("to_number", "1")];
    assert_ne!(name(&c, &nested), name(&c, &top));
    assert_eq!(name(&c, &nested), name(&again, &nested));
    // The same path in another domain is another limit.
    let other = load(&EXAMPLE_2.replace("domain: messaging", "domain: sms"));
    let in_sms = other
        .limit("sms", top)
        .unwrap()
        .policy()
        .unwrap()
        .name()
        .to_owned();
    assert_ne!(in_sms, name(&c, &top));
}
