//! Errors: each names its file, line, column and field.

use floodwall_rls::config::ErrorKind;

use super::refuse;

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
