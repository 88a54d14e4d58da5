//! The configuration module from outside: envoyproxy/ratelimit's documented examples
//! (README, "Examples" 1 to 9) load unchanged and decide as that documentation says;
//! floodwall's additions; every error names its file, line and field; hostile input.

use std::path::PathBuf;
use std::time::Duration;

use floodwall_core::Algorithm;
use floodwall_rls::config::{Config, ErrorKind, FileError, RateLimit, Rule, Unit, drop_replaced};
use proptest::prelude::*;

fn load(text: &str) -> Config {
    Config::from_yaml("test.yaml", text).unwrap_or_else(|e| panic!("{e}"))
}

fn refuse(text: &str) -> FileError {
    match Config::from_yaml("test.yaml", text) {
        Ok(_) => panic!("loaded:\n{text}"),
        Err(e) => e,
    }
}

/// `(requests_per_unit, unit)` of the limit one request descriptor reaches.
fn rate(config: &Config, domain: &str, entries: &[(&str, &str)]) -> Option<(u32, Unit)> {
    config
        .limit(domain, entries.iter().copied())
        .map(|l| (l.requests_per_unit(), l.unit().expect("a unit")))
}

// -- the README's examples, each config written from the documentation

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

const EXAMPLE_2: &str = "domain: messaging
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

// -- reading as the reference reads

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

// -- errors: each names its file, line, column and field

/// `(kind, line, column, field)` of an error.
type Place<F> = (ErrorKind, Option<usize>, Option<usize>, F);

/// The place of the error a text gets.
fn place(text: &str) -> Place<String> {
    let e = refuse(text);
    (e.kind(), e.line(), e.column(), e.field().to_owned())
}

#[test]
fn errors_name_line_column_and_field() {
    use ErrorKind::*;
    let head = "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n";
    let cases: Vec<(String, Place<&str>)> = vec![
        (format!("{head}      unit: fortnight\n      requests_per_unit: 1\n"),
            (BadUnit, Some(5), Some(13), "descriptors[0].rate_limit.unit")),
        (format!("{head}      unit: unknown\n      requests_per_unit: 1\n"),
            (BadUnit, Some(5), Some(13), "descriptors[0].rate_limit.unit")),
        (format!("{head}      requests_per_unit: 1\n"),
            (BadUnit, Some(5), Some(7), "descriptors[0].rate_limit.unit")),
        (format!("{head}      unit: second\n      requests_per_unit: 4294967296\n"),
            (BadRequestsPerUnit, Some(6), Some(26), "descriptors[0].rate_limit.requests_per_unit")),
        (format!("{head}      unit: second\n      requests_per_unit: -1\n"),
            (BadRequestsPerUnit, Some(6), Some(26), "descriptors[0].rate_limit.requests_per_unit")),
        (format!("{head}      unit: second\n      requests_per_unit: \"10\"\n"),
            (BadRequestsPerUnit, Some(6), Some(26), "descriptors[0].rate_limit.requests_per_unit")),
        (format!("{head}      unit: second\n"),
            (BadRequestsPerUnit, Some(5), Some(7), "descriptors[0].rate_limit.requests_per_unit")),
        (format!("{head}      unlimited: true\n      unit: second\n"),
            (UnlimitedWithRate, Some(6), Some(13), "descriptors[0].rate_limit.unit")),
        (format!("{head}      unlimited: true\n      requests_per_unit: 5\n"),
            (UnlimitedWithRate, Some(6), Some(26), "descriptors[0].rate_limit.requests_per_unit")),
        (format!("{head}      unit: second\n      requests_per_unit: 1\n      replaces:\n        - name:\n"),
            (BadReplaces, Some(8), Some(15), "descriptors[0].rate_limit.replaces[0].name")),
        (format!("{head}      name: me\n      unit: second\n      requests_per_unit: 1\n      replaces: [{{name: me}}]\n"),
            (BadReplaces, Some(8), Some(25), "descriptors[0].rate_limit.replaces[0].name")),
        (format!("{head}      unit: second\n      requests_per_unit: 1\n      colour: red\n"),
            (UnknownField, Some(7), Some(7), "descriptors[0].rate_limit.colour")),
        (format!("{head}      unit: second\n      requests_per_unit: 1\n      algorithm: magic\n"),
            (BadLimit, Some(7), Some(18), "descriptors[0].rate_limit.algorithm")),
        (format!("{head}      unit: second\n      requests_per_unit: 1\n      algorithm: fixed_window\n      burst: 5\n"),
            (BadLimit, Some(8), Some(14), "descriptors[0].rate_limit.burst")),
        (format!("{head}      unit: second\n      requests_per_unit: 4000000000\n"),
            (BadLimit, Some(6), Some(26), "descriptors[0].rate_limit.requests_per_unit")),
        (format!("{head}      unit: second\n      requests_per_unit: 0\n      burst: 5\n"),
            (BadLimit, Some(7), Some(14), "descriptors[0].rate_limit.burst")),
        (format!("{head}      unit: second\n      requests_per_unit: 1\n      penalty: {{after: 5, within: 10 parsecs, ban: 1min}}\n"),
            (BadLimit, Some(7), Some(35), "descriptors[0].rate_limit.penalty.within")),
        (format!("{head}      unit: second\n      requests_per_unit: 1\n      penalty: {{after: 5, within: 1min}}\n"),
            (BadLimit, Some(7), Some(16), "descriptors[0].rate_limit.penalty.ban")),
        (format!("{head}      unit: second\n      requests_per_unit: 1\n      penalty: {{after: 5, within: 1min, ban: 1min, unit: second}}\n"),
            (UnknownField, Some(7), Some(52), "descriptors[0].rate_limit.penalty.unit")),
        ("domain: d\ndescriptors:\n  - value: x\n".into(),
            (MissingKey, Some(3), Some(5), "descriptors[0].key")),
        ("domain: d\ndescriptors:\n  - key: \"\"\n".into(),
            (MissingKey, Some(3), Some(10), "descriptors[0].key")),
        ("domain: d\ndescriptors:\n  - key: a\n    descriptors:\n      - key: b\n        value: v\n      - key: b\n        value: v\n".into(),
            (DuplicateDescriptor, Some(7), Some(14), "descriptors[0].descriptors[1]")),
        ("domain: d\ndescriptors:\n  - key: a\n  - key: a\n    value: \"\"\n".into(),
            (DuplicateDescriptor, Some(4), Some(10), "descriptors[1]")),
        ("domain: \"\"\ndescriptors: []\n".into(), (EmptyDomain, Some(1), Some(9), "domain")),
        ("descriptors: []\n".into(), (EmptyDomain, Some(1), Some(1), "domain")),
        ("".into(), (EmptyDomain, None, None, "domain")),
        ("domain: d\ndescriptors:\n  key: a\n".into(), (WrongType, Some(3), Some(3), "descriptors")),
        ("domain: d\ndescriptors:\n  - key: a\n    shadow_mode: \"true\"\n".into(),
            (WrongType, Some(4), Some(18), "descriptors[0].shadow_mode")),
        ("domain: d\ndescriptors:\n  - key: [a]\n".into(), (WrongType, Some(3), Some(10), "descriptors[0].key")),
        ("domain: d\nlimits: []\n".into(), (UnknownField, Some(2), Some(1), "limits")),
        ("domain: d\ndescriptors:\n  - key: a\n    key: b\n".into(), (Yaml, Some(4), Some(5), "")),
        ("domain: d\ndescriptors: [\n".into(), (Yaml, Some(3), Some(1), "")),
    ];
    let mut wrong = Vec::new();
    for (text, (kind, line, column, field)) in cases {
        let found = place(&text);
        if found != (kind, line, column, field.to_owned()) {
            wrong.push(format!(
                "{text}\n  expected {:?}\n  found    {found:?}",
                (kind, line, column, field)
            ));
        }
        // Every message is one line naming the file.
        let message = refuse(&text).to_string();
        assert!(
            message.starts_with("test.yaml") && !message.contains('\n'),
            "{message}"
        );
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n\n"));
}

#[test]
fn an_error_reads_as_a_sentence() {
    let e = refuse(
        "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n",
    );
    assert_eq!(
        e.to_string(),
        "test.yaml:4:24: descriptors[0].rate_limit.unit: expected one of second, minute, hour, \
         day, week, month, year (found \"fortnight\")"
    );
}

// -- files and directories

/// A fresh directory under the system's temporary one, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("floodwall-rls-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }

    fn write(&self, name: &str, bytes: impl AsRef<[u8]>) -> PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, bytes).unwrap();
        path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn a_directory_is_one_domain_per_yaml_file() {
    let dir = TempDir::new("dir");
    dir.write(
        "a.yaml",
        "domain: a\ndescriptors:\n  - {key: k, rate_limit: {unit: second, requests_per_unit: 1}}\n",
    );
    dir.write(
        "b.yml",
        "domain: b\ndescriptors:\n  - {key: k, rate_limit: {unit: second, requests_per_unit: 2}}\n",
    );
    dir.write("notes.txt", "not yaml: [");
    dir.write(".hidden.yaml", "not yaml: [");
    std::fs::create_dir(dir.0.join("..data")).unwrap();
    let c = Config::load(&dir.0).unwrap();
    let names: Vec<&str> = c.domains().map(|d| d.name()).collect();
    assert_eq!(names, ["a", "b"]);
    assert_eq!(rate(&c, "b", &[("k", "v")]), Some((2, Unit::Second)));
    // One file alone.
    let one = Config::load(dir.0.join("a.yaml")).unwrap();
    assert_eq!(one.domains().count(), 1);
    assert!(one.domain("a").unwrap().origin().ends_with("a.yaml"));

    // The same domain in two files.
    dir.write("c.yaml", "domain: a\n");
    let e = Config::load(&dir.0).unwrap_err();
    assert_eq!(
        (e.kind(), e.field()),
        (ErrorKind::DuplicateDomain, "domain")
    );
    assert!(
        e.origin().ends_with("c.yaml") && e.found().unwrap().contains("a.yaml"),
        "{e}"
    );
}

#[test]
fn unreadable_empty_and_non_utf8() {
    let dir = TempDir::new("bad");
    let e = Config::load(&dir.0).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NoFiles);
    let e = Config::load(dir.0.join("missing.yaml")).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unreadable);
    let path = dir.write(
        "latin1.yaml",
        b"domain: d\ndescriptors:\n  - key: caf\xe9\n",
    );
    let e = Config::load(path).unwrap_err();
    assert_eq!(
        (e.kind(), e.line(), e.column()),
        (ErrorKind::NotUtf8, Some(3), Some(13))
    );
}

// -- hostile input: a clear error, never a panic

#[test]
fn hostile_files_are_refused_cleanly() {
    use ErrorKind::*;
    let deep_descriptors = {
        let mut t = String::from("domain: d\ndescriptors:\n");
        for i in 0..200 {
            let pad = "  ".repeat(2 * i + 1);
            t.push_str(&format!("{pad}- key: k{i}\n{pad}  descriptors:\n"));
        }
        t
    };
    let cases: Vec<(String, ErrorKind)> = vec![
        ("[".repeat(100_000), TooComplex),
        ("{a: ".repeat(100_000), TooComplex),
        (deep_descriptors, TooComplex),
        (format!("domain: d\ndescriptors:\n  - key: a\n    rate_limit: {{unit: second, requests_per_unit: {}}}\n", "9".repeat(1000)), BadRequestsPerUnit),
        ("domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 1e9}\n".into(), BadRequestsPerUnit),
        ("\u{0}\u{1}\u{2}".into(), Yaml),
        ("domain: [a, b]\n".into(), WrongType),
        ("- a\n- b\n".into(), WrongType),
        ("just text\n".into(), WrongType),
        ("domain: d\n---\ndomain: e\n".into(), Yaml),
        ("domain: *nothing\n".into(), Yaml),
        ("? [a]\n: b\n".into(), WrongType),
    ];
    for (text, kind) in cases {
        let e = refuse(&text);
        assert_eq!(e.kind(), kind, "{e}");
    }
}

#[test]
fn huge_values_and_many_entries_are_looked_up() {
    let value = "v".repeat(100_000);
    let text = format!(
        "domain: d\ndescriptors:\n  - key: k\n    value: \"{value}\"\n    rate_limit: {{unit: second, requests_per_unit: 1}}\n"
    );
    let c = load(&text);
    assert!(c.limit("d", [("k", value.as_str())]).is_some());
    let many: Vec<(String, String)> = (0..1000)
        .map(|i| (format!("k{i}"), String::new()))
        .collect();
    assert!(c.limit("d", many.iter().map(|(k, v)| (k, v))).is_none());
    assert!(c.limit("", [("", "")]).is_none());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Any text, YAML-like or not: an answer, never a panic.
    #[test]
    fn any_text_loads_or_is_refused(text in "(domain|descriptors|key|value|rate_limit|unit|requests_per_unit|[-:{}\\[\\],&*!|>'\"#\n ]|[a-z0-9]{1,4}| {2}){0,80}") {
        let _ = Config::from_yaml("p.yaml", &text);
    }

    /// A valid file with bytes changed anywhere: an answer, never a panic; an error names
    /// a line within the file.
    #[test]
    fn mutated_files_load_or_are_refused(at in 0usize..400, with in proptest::char::any()) {
        let mut chars: Vec<char> = EXAMPLE_2.chars().collect();
        let i = at % chars.len();
        chars[i] = with;
        let text: String = chars.into_iter().collect();
        if let Err(e) = Config::from_yaml("m.yaml", &text) {
            prop_assert!(e.line().is_none_or(|l| l <= text.lines().count() + 1), "{e}");
        }
    }

    /// Any request descriptor against a loaded config: an answer, never a panic.
    #[test]
    fn any_entries_are_looked_up(entries in proptest::collection::vec((".{0,12}", ".{0,12}"), 0..8)) {
        let c = load(EXAMPLE_2);
        let _ = c.limit("messaging", entries.iter().map(|(k, v)| (k, v)));
    }
}
