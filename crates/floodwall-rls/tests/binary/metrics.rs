//! `--metrics`: Prometheus text on `/metrics`, read after known requests.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;

use super::*;

/// The address of `rls`'s `/metrics`, from its startup log.
pub(super) fn metrics_addr(rls: &mut Rls) -> SocketAddr {
    let line = rls.wait_for_log("serving");
    let addr = line
        .split_whitespace()
        .find_map(|field| field.strip_prefix("metrics="))
        .unwrap_or_else(|| panic!("no metrics= in {line:?}"));
    addr.parse()
        .unwrap_or_else(|e| panic!("metrics={addr}: {e}"))
}

/// `GET path` on `addr`, HTTP/1.1: the status line and the body.
fn get(addr: SocketAddr, path: &str) -> (String, String) {
    let mut stream = TcpStream::connect(addr).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    stream.read_to_string(&mut text).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.lines().next().unwrap_or_default().to_owned();
    (status, body.to_owned())
}

/// The text `rls` serves on `/metrics`.
pub(super) fn scrape(addr: SocketAddr) -> String {
    let (status, body) = get(addr, "/metrics");
    assert!(status.starts_with("HTTP/1.1 200"), "{status}\n{body}");
    body
}

/// Every `floodwall_rls_decisions` series: `(domain, key, result)` and its count.
pub(super) fn decisions(text: &str) -> BTreeMap<(String, String, String), u64> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("floodwall_rls_decisions{") else {
            continue;
        };
        let (labels, value) = rest.rsplit_once("} ").unwrap();
        let label = |name: &str| {
            labels
                .split("\",")
                .find_map(|l| l.strip_prefix(&format!("{name}=\"")))
                .map(|v| v.trim_end_matches('"').to_owned())
                .unwrap_or_else(|| panic!("no {name} in {line}"))
        };
        let key = (label("domain"), label("key"), label("result"));
        assert!(out.insert(key, value.parse().unwrap()).is_none(), "{line}");
    }
    out
}

/// The value of the sample named exactly `name` (no labels).
pub(super) fn sample(text: &str, name: &str) -> Option<u64> {
    text.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' '))
        .map(|v| v.parse().unwrap())
}

const API: &str = "\
domain: api
descriptors:
  - key: user
    rate_limit: {unit: hour, requests_per_unit: 3}
  - key: client_id
    descriptors:
      - key: path
        detailed_metric: true
        rate_limit: {unit: hour, requests_per_unit: 2}
  - key: shadow_user
    shadow_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: internal
    rate_limit: {unlimited: true}
  - key: blocked
    rate_limit: {unit: hour, requests_per_unit: 0}
";

#[tokio::test]
async fn metrics_count_each_decision_by_domain_key_and_result() {
    let dir = TempDir::new();
    dir.write("api.yaml", API);
    dir.write(
        "web.yaml",
        &quota_config(1).replace("domain: api", "domain: web"),
    );
    let mut rls = Rls::start(dir.path(), &["--metrics", "127.0.0.1:0"]);
    let addr = metrics_addr(&mut rls);
    let mut client = rls.client().await;
    let codes = |responses: Vec<RateLimitResponse>| -> Vec<i32> {
        responses.iter().map(|r| r.overall_code).collect()
    };

    let mut answers = Vec::new();
    for _ in 0..5 {
        answers.push(ask(&mut client, "api", &[("user", "alice")]).await);
    }
    answers.push(ask(&mut client, "api", &[("user", "bob")]).await);
    assert_eq!(codes(answers), [OK, OK, OK, OVER, OVER, OK]);
    let mut answers = Vec::new();
    for _ in 0..3 {
        answers.push(
            ask(
                &mut client,
                "api",
                &[("client_id", "acme"), ("path", "/v1")],
            )
            .await,
        );
    }
    assert_eq!(codes(answers), [OK, OK, OVER]);
    // Shadow mode: every answer OK, the last two would have been refused.
    let mut answers = Vec::new();
    for _ in 0..3 {
        answers.push(ask(&mut client, "api", &[("shadow_user", "sam")]).await);
    }
    assert_eq!(codes(answers), [OK, OK, OK]);
    for _ in 0..2 {
        assert_eq!(
            ask(&mut client, "api", &[("internal", "x")])
                .await
                .overall_code,
            OK
        );
    }
    assert_eq!(
        ask(&mut client, "api", &[("blocked", "y")])
            .await
            .overall_code,
        OVER
    );
    // No limit: not counted, whatever the domain.
    assert_eq!(
        ask(&mut client, "api", &[("path", "/")]).await.overall_code,
        OK
    );
    assert_eq!(
        ask(&mut client, "nope", &[("user", "zed")])
            .await
            .overall_code,
        OK
    );
    for code in [OK, OVER] {
        assert_eq!(
            ask(&mut client, "web", &[("user", "alice")])
                .await
                .overall_code,
            code
        );
    }
    // Refused by `blocked` before the store is asked: `user` fits (ok), and the shadow
    // limit, used up, would refuse (shadow_over_limit); each only read.
    for other in [("user", "carol"), ("shadow_user", "sam")] {
        let both = request(
            "api",
            vec![descriptor(&[other]), descriptor(&[("blocked", "y")])],
        );
        let answer = client.should_rate_limit(both).await.unwrap().into_inner();
        let statuses: Vec<i32> = answer.statuses.iter().map(|s| s.code).collect();
        assert_eq!(statuses, [OK, OVER], "{other:?}");
    }

    let text = scrape(addr);
    let expected: BTreeMap<(String, String, String), u64> = [
        ("api", "user", "ok", 5),
        ("api", "user", "over_limit", 2),
        ("api", "client_id_acme.path_/v1", "ok", 2),
        ("api", "client_id_acme.path_/v1", "over_limit", 1),
        ("api", "shadow_user", "ok", 1),
        ("api", "shadow_user", "shadow_over_limit", 3),
        ("api", "internal", "unlimited", 2),
        ("api", "blocked", "over_limit", 3),
        ("web", "user", "ok", 1),
        ("web", "user", "over_limit", 1),
    ]
    .into_iter()
    .map(|(d, k, r, n)| ((d.to_owned(), k.to_owned(), r.to_owned()), n))
    .collect();
    assert_eq!(decisions(&text), expected, "{text}");
    // Values appear only where detailed_metric asks for them.
    for value in ["alice", "bob", "carol", "sam", "zed", "nope"] {
        assert!(!text.contains(value), "{value} in\n{text}");
    }
    // Requests that asked the store: user 6, client 3, shadow 3, web 2, the two refused
    // by `blocked` (their other descriptor read); not unlimited, blocked alone, or free.
    assert_eq!(
        sample(&text, "floodwall_rls_store_duration_count"),
        Some(16),
        "{text}"
    );
    assert_eq!(
        sample(&text, "floodwall_rls_store_duration_bucket{le=\"+Inf\"}"),
        Some(16),
        "{text}"
    );
    assert!(
        text.contains("# TYPE floodwall_rls_store_duration histogram"),
        "{text}"
    );

    let (status, _) = get(addr, "/other");
    assert!(status.starts_with("HTTP/1.1 404"), "{status}");
}

#[tokio::test]
async fn without_the_flag_nothing_listens_for_metrics() {
    let dir = TempDir::new();
    dir.write("api.yaml", &quota_config(1));
    let mut rls = Rls::start(dir.path(), &[]);
    let line = rls.wait_for_log("serving");
    assert!(line.contains("metrics=off"), "{line}");
}
