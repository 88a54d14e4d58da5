//! Hostile input: a clear error, never a panic.

use floodwall_rls::config::{Config, ErrorKind};
use proptest::prelude::*;

use super::examples::EXAMPLE_2;
use super::{load, refuse};

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
            // YAML breaks lines at a lone `\r` too (`str::lines` does not): a bound on the
            // line count, counting `\r\n` twice.
            let lines = text.split(['\n', '\r']).count();
            prop_assert!(e.line().is_none_or(|l| l <= lines + 1), "{e}");
        }
    }

    /// Any request descriptor against a loaded config: an answer, never a panic.
    #[test]
    fn any_entries_are_looked_up(entries in proptest::collection::vec((".{0,12}", ".{0,12}"), 0..8)) {
        let c = load(EXAMPLE_2);
        let _ = c.limit("messaging", entries.iter().map(|(k, v)| (k, v)));
    }
}
