//! `floodwall simulate` as a process: what each algorithm admits, per request (from the
//! CSV) and in the summary, against models of the algorithms written here; the SVG as an
//! XML parser reads it.

mod common;

use std::collections::BTreeSet;

use common::{file, floodwall, ok};

const SECOND: u64 = 1_000_000;

/// The CSV: each request's instant (µs) and, per column, whether it was admitted.
fn parse_csv(text: &str) -> (Vec<String>, Vec<u64>, Vec<Vec<bool>>) {
    let mut lines = text.lines();
    let header: Vec<String> = lines
        .next()
        .unwrap()
        .split(',')
        .map(str::to_owned)
        .collect();
    assert_eq!(header[0], "time_s");
    let algorithms = header[1..].to_vec();
    let mut times = Vec::new();
    let mut admitted = vec![Vec::new(); algorithms.len()];
    for line in lines {
        let mut cells = line.split(',');
        let (s, us) = cells.next().unwrap().split_once('.').unwrap();
        assert_eq!(us.len(), 6, "to the µs: {line}");
        times.push(s.parse::<u64>().unwrap() * SECOND + us.parse::<u64>().unwrap());
        for (column, cell) in admitted.iter_mut().zip(cells) {
            column.push(match cell {
                "1" => true,
                "0" => false,
                other => panic!("{other} in {line}"),
            });
        }
    }
    (algorithms, times, admitted)
}

/// The summary's row for `algorithm`: admitted, refused, most admitted in any period.
fn summary_row(summary: &str, algorithm: &str) -> (usize, usize, usize) {
    let row = summary
        .lines()
        .find(|l| l.split_whitespace().next() == Some(algorithm))
        .unwrap_or_else(|| panic!("no {algorithm} in {summary}"));
    let n: Vec<usize> = row
        .split_whitespace()
        .skip(1)
        .map(|n| n.parse().unwrap())
        .collect();
    (n[0], n[1], n[2])
}

/// GCRA as its definition says: a request passes if the theoretical arrival time, pushed
/// by one interval, is at most `burst` intervals ahead of now.
fn gcra(times: &[u64], interval: u64, burst: u64) -> Vec<bool> {
    let mut tat = 0;
    times
        .iter()
        .map(|&t| {
            let next = tat.max(t) + interval;
            let pass = next - t <= burst * interval;
            if pass {
                tat = next;
            }
            pass
        })
        .collect()
}

/// A fixed window: at most `count` per `[k × period, (k + 1) × period)`.
fn fixed_window(times: &[u64], period: u64, count: usize) -> Vec<bool> {
    let mut seen = std::collections::HashMap::new();
    times
        .iter()
        .map(|&t| {
            let n = seen.entry(t / period).or_insert(0);
            *n += 1;
            *n <= count
        })
        .collect()
}

/// A sliding log: at most `count` admitted in `(t - period, t]`.
fn sliding_log(times: &[u64], period: u64, count: usize) -> Vec<bool> {
    let mut log: Vec<u64> = Vec::new();
    times
        .iter()
        .map(|&t| {
            let recent = log.iter().filter(|&&a| a + period > t).count();
            let pass = recent < count;
            if pass {
                log.push(t);
            }
            pass
        })
        .collect()
}

/// The most admitted within any `[t, t + period)`, counted the slow way.
fn most_in_period(times: &[u64], admitted: &[bool], period: u64) -> usize {
    let passed: Vec<u64> = times
        .iter()
        .zip(admitted)
        .filter(|(_, a)| **a)
        .map(|(t, _)| *t)
        .collect();
    passed
        .iter()
        .map(|&from| {
            passed
                .iter()
                .filter(|&&t| t >= from && t < from + period)
                .count()
        })
        .max()
        .unwrap_or(0)
}

/// Ten requests 10 ms apart just before a window's edge and ten just after, twice.
fn edge_traffic() -> String {
    let mut lines = String::from("# seconds\n");
    for start in [0.90, 4.90] {
        for i in 0..20 {
            lines.push_str(&format!("{:.2}\n", start + 0.01 * f64::from(i)));
        }
    }
    lines
}

#[test]
fn a_fixed_window_admits_twice_its_quota_across_an_edge_where_the_others_do_not() {
    let traffic = file("edge", "edge.txt", &edge_traffic());
    let out = floodwall(&[
        "simulate",
        "--policy",
        "10/s",
        "--algorithm",
        "fixed_window",
        "--algorithm",
        "sliding_log",
        "--algorithm",
        "gcra",
        "--traffic",
        traffic.to_str().unwrap(),
        "--format",
        "csv",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (algorithms, times, admitted) = parse_csv(&String::from_utf8(out.stdout).unwrap());
    assert_eq!(algorithms, ["fixed_window", "sliding_log", "gcra"]);
    assert_eq!(times.len(), 40);
    assert_eq!(
        times[0], 900_000,
        "the file's own instants, from the window edge at 0"
    );

    let expected = [
        fixed_window(&times, SECOND, 10),
        sliding_log(&times, SECOND, 10),
        gcra(&times, SECOND / 10, 10),
    ];
    let summary = String::from_utf8(out.stderr).unwrap();
    for ((name, got), want) in algorithms.iter().zip(&admitted).zip(&expected) {
        assert_eq!(got, want, "{name}, request by request");
        let passed = want.iter().filter(|a| **a).count();
        assert_eq!(
            summary_row(&summary, name),
            (passed, 40 - passed, most_in_period(&times, want, SECOND)),
            "{name}'s summary"
        );
    }
    // The edge burst: all 20 of each pair within 0.2 s through the fixed window, 2 × 10.
    assert_eq!(summary_row(&summary, "fixed_window"), (40, 0, 20));
    // The sliding log never more than 10 in any second.
    assert_eq!(summary_row(&summary, "sliding_log"), (20, 20, 10));
    // GCRA: its burst of 10, then one per 100 ms.
    assert_eq!(summary_row(&summary, "gcra"), (22, 18, 11));
}

#[test]
fn steady_traffic_gives_each_algorithm_its_exact_count() {
    // 25/s for 4 s: 100 requests 40 ms apart, against 10/s.
    let csv = ok(&[
        "simulate",
        "--policy",
        "10/s",
        "--algorithm",
        "gcra",
        "--algorithm",
        "fixed_window",
        "--algorithm",
        "sliding_log",
        "--traffic",
        "steady:25/s",
        "--duration",
        "4s",
        "--format",
        "csv",
    ]);
    let (_, times, admitted) = parse_csv(&csv);
    let want: Vec<u64> = (0..100).map(|k| k * 40_000).collect();
    assert_eq!(times, want);
    assert_eq!(admitted[0], gcra(&times, 100_000, 10));
    assert_eq!(admitted[1], fixed_window(&times, SECOND, 10));
    assert_eq!(admitted[2], sliding_log(&times, SECOND, 10));
    // 10 at once, then one per 100 ms: 10 + 3.96 s / 100 ms = 10 + 39 (every 2.5th request).
    assert_eq!(admitted[0].iter().filter(|a| **a).count(), 10 + 39);
    assert_eq!(admitted[1].iter().filter(|a| **a).count(), 40);
}

#[test]
fn gcra_never_admits_more_than_its_burst_plus_its_rate_over_any_span() {
    let args = |seed: &str| {
        ok(&[
            "simulate",
            "--policy",
            "10/s burst 20",
            "--algorithm",
            "gcra",
            "--traffic",
            "poisson:30/s",
            "--duration",
            "20s",
            "--seed",
            seed,
            "--format",
            "csv",
        ])
    };
    let csv = args("42");
    assert_eq!(csv, args("42"), "the same seed draws the same traffic");
    assert_ne!(csv, args("43"));
    let (_, times, admitted) = parse_csv(&csv);
    assert!(
        times.len() > 300,
        "Poisson at 30/s over 20 s: {}",
        times.len()
    );
    assert_eq!(admitted[0], gcra(&times, 100_000, 20));
    let passed: Vec<u64> = times
        .iter()
        .zip(&admitted[0])
        .filter(|(_, a)| **a)
        .map(|(t, _)| *t)
        .collect();
    // Admitted in [t_i, t_j] at most burst + rate × (t_j - t_i): n × 100 ms ≤ 20 × 100 ms + span.
    for i in 0..passed.len() {
        for j in i..passed.len() {
            let n = (j - i + 1) as u64;
            assert!(
                n * 100_000 <= 20 * 100_000 + (passed[j] - passed[i]),
                "{n} admitted within {} µs",
                passed[j] - passed[i]
            );
        }
    }
}

#[test]
fn the_svg_parses_as_xml_with_one_series_per_algorithm() {
    let algorithms = [
        "gcra",
        "token_bucket",
        "fixed_window",
        "sliding_window",
        "sliding_log",
    ];
    let out = file("svg", "chart.svg", "");
    let mut args = vec!["simulate", "--policy", "10/s", "--traffic", "poisson:14/s"];
    args.extend(["--duration", "10s", "--out", out.to_str().unwrap()]);
    for a in algorithms {
        args.extend(["--algorithm", a]);
    }
    let summary = ok(&args);
    let text = std::fs::read_to_string(&out).unwrap();
    let doc = roxmltree::Document::parse(&text).expect("the chart is XML");
    assert_eq!(doc.root_element().tag_name().name(), "svg");

    // Series are polylines: per algorithm one in its colour (admitted) and one grey
    // (offered); black ones are axes.
    let strokes: Vec<&str> = doc
        .descendants()
        .filter(|n| n.has_tag_name("polyline"))
        .filter_map(|n| n.attribute("stroke"))
        .filter(|&s| s != "#000000")
        .collect();
    let grey = strokes.iter().filter(|&&s| s == "#9E9E9E").count();
    let coloured: Vec<&str> = strokes
        .iter()
        .copied()
        .filter(|&s| s != "#9E9E9E")
        .collect();
    assert_eq!(grey, algorithms.len(), "one offered series per panel");
    assert_eq!(
        coloured.len(),
        algorithms.len(),
        "one admitted series per algorithm"
    );
    assert_eq!(
        coloured.iter().collect::<BTreeSet<_>>().len(),
        algorithms.len(),
        "each in a colour of its own: {coloured:?}"
    );

    // Each panel's caption says what the summary says.
    let texts: Vec<String> = doc
        .descendants()
        .filter(|n| n.has_tag_name("text"))
        .filter_map(|n| n.text())
        .map(|t| t.trim().to_owned())
        .collect();
    for a in algorithms {
        let (admitted, refused, most) = summary_row(&summary, a);
        let caption =
            format!("{a}: admitted {admitted}, refused {refused}, most in any 1s: {most}");
        assert!(texts.contains(&caption), "no {caption:?} in {texts:?}");
    }
}

/// The README's charts are what the tool draws today, with the commands the README gives.
#[test]
fn the_readme_charts_are_what_the_tool_draws() {
    let docs = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs");
    let readme = std::fs::read_to_string(docs.join("../README.md")).unwrap();
    let edge = docs.join("simulate-edge.txt");
    let edge = edge.to_str().unwrap();
    for (chart, traffic, extra) in [
        (
            "simulate-poisson.svg",
            "poisson:14/s",
            &["--duration", "20s"][..],
        ),
        ("simulate-edge.svg", edge, &[][..]),
    ] {
        let out = file("readme", chart, "");
        let mut args = vec!["simulate", "--policy", "10/s"];
        for a in [
            "gcra",
            "token_bucket",
            "fixed_window",
            "sliding_window",
            "sliding_log",
        ] {
            args.extend(["--algorithm", a]);
        }
        args.extend(["--traffic", traffic]);
        args.extend_from_slice(extra);
        args.extend(["--out", out.to_str().unwrap()]);
        ok(&args);
        let drawn = std::fs::read_to_string(&out).unwrap();
        let committed = std::fs::read_to_string(docs.join(chart)).unwrap();
        assert!(
            drawn == committed,
            "docs/{chart} is not what the tool draws now: redraw it with the README's command"
        );
        assert!(
            readme.contains(&format!("docs/{chart}")),
            "the README shows docs/{chart}"
        );
    }
}

#[test]
fn an_access_log_is_replayed_at_its_timestamps() {
    let mut log = String::new();
    for (second, n) in [("00", 12), ("01", 3)] {
        for i in 0..n {
            log.push_str(&format!(
                "203.0.113.{i} - - [01/May/2024:12:00:{second} +0000] \"GET / HTTP/1.1\" 200 5\n"
            ));
        }
    }
    let path = file("clf", "access.log", &log);
    let out = floodwall(&[
        "simulate",
        "--policy",
        "10/s",
        "--algorithm",
        "fixed_window",
        "--traffic",
        path.to_str().unwrap(),
        "--timestamps",
        "clf",
        "--format",
        "csv",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (_, times, admitted) = parse_csv(&String::from_utf8(out.stdout).unwrap());
    let want: Vec<u64> = [0; 12].into_iter().chain([SECOND; 3]).collect();
    assert_eq!(times, want, "whole seconds, from the log's first");
    assert_eq!(admitted[0], fixed_window(&times, SECOND, 10));
    let summary = String::from_utf8(out.stderr).unwrap();
    assert!(summary.starts_with("15 requests over 2s"), "{summary}");
    // A period is [t, t + 1 s): the second at 1 s is not within the first one.
    assert_eq!(summary_row(&summary, "fixed_window"), (13, 2, 10));
}
