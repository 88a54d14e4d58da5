//! The metrics example's `/metrics`, read after a known sequence of requests: every metric
//! it serves described (`# HELP`) and of the kind the docs say (`# TYPE`: the store-call
//! histogram as buckets, not a summary), the exact counts by policy and result in
//! Prometheus text, and no client address among them.

#[path = "../examples/metrics.rs"]
mod example;

use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// GETs `path` from `addr` over HTTP/1.1: the status and the body.
async fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    let mut conn = tokio::net::TcpStream::connect(addr).await.unwrap();
    let req = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    conn.write_all(req.as_bytes()).await.unwrap();
    let mut raw = String::new();
    conn.read_to_string(&mut raw).await.unwrap();
    let status = raw.split(' ').nth(1).unwrap().parse().unwrap();
    let body = raw.split_once("\r\n\r\n").unwrap().1.to_owned();
    (status, body)
}

/// Every metric family in the text: its name, its `# HELP` text and its `# TYPE`, in order.
fn families(text: &str) -> Vec<(String, String, String)> {
    let mut help = std::collections::HashMap::new();
    let mut families = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, text) = rest.split_once(' ').unwrap_or((rest, ""));
            help.insert(name.to_owned(), text.to_owned());
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            let help = help.get(name).cloned().unwrap_or_default();
            families.push((name.to_owned(), help, kind.to_owned()));
        }
    }
    families
}

/// The value of the sample of `metric` whose labels include every one of `labels`.
fn sample(text: &str, metric: &str, labels: &[&str]) -> Option<f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find(|l| {
            l.split(['{', ' ']).next() == Some(metric) && labels.iter().all(|lb| l.contains(lb))
        })
        .map(|l| l.rsplit(' ').next().unwrap().parse().unwrap())
}

// The only test in this binary: it installs the process's recorder.
#[tokio::test]
async fn metrics_after_five_allowed_and_three_refused() {
    let prometheus = example::install().unwrap();
    let app = example::app(prometheus).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(
            listener,
            app.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .await
        .unwrap();
    });

    let mut statuses = Vec::new();
    for _ in 0..8 {
        statuses.push(get(addr, "/").await.0);
    }
    assert_eq!(statuses, [200, 200, 200, 200, 200, 429, 429, 429]);

    let (status, text) = get(addr, "/metrics").await;
    assert_eq!(status, 200);

    // Every metric served is described and of the kind the docs give it; the store-call
    // durations are a histogram because the example sets buckets (a summary otherwise).
    let mut served = families(&text);
    served.sort();
    let expected = [
        (
            "floodwall_rate_limiting_near_limit",
            "Admitted requests that left their rate-limit policy at least 80% used.",
            "counter",
        ),
        (
            "floodwall_rate_limiting_requests",
            "Requests checked against a rate-limit policy or in-flight limit, by its verdict: \
             allowed, refused, cache_refused, banned, shadow_refused, store_error, fallback.",
            "counter",
        ),
        (
            "floodwall_rate_limiting_store_duration",
            "Seconds the rate limiter waited for its store (a Redis round trip); answers \
             given at once are not timed.",
            "histogram",
        ),
    ];
    let expected: Vec<_> = expected
        .iter()
        .map(|(name, help, kind)| (name.to_string(), help.to_string(), kind.to_string()))
        .collect();
    assert_eq!(served, expected, "{text}");

    // Every result the docs list, each once, with its count after 5 allowed and 3 refused.
    let results: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("floodwall_rate_limiting_requests{"))
        .map(|l| {
            l.split("result=\"")
                .nth(1)
                .unwrap()
                .split('"')
                .next()
                .unwrap()
        })
        .collect();
    let mut sorted = results.clone();
    sorted.sort_unstable();
    assert_eq!(
        sorted,
        [
            "allowed",
            "banned",
            "cache_refused",
            "fallback",
            "refused",
            "shadow_refused",
            "store_error"
        ],
        "{text}"
    );
    let requests = |result: &str| {
        let result = format!("result=\"{result}\"");
        sample(
            &text,
            "floodwall_rate_limiting_requests",
            &["policy=\"api\"", &result],
        )
    };
    assert_eq!(requests("allowed"), Some(5.0), "{text}");
    assert_eq!(requests("refused"), Some(3.0), "{text}");
    for none in [
        "cache_refused",
        "banned",
        "shadow_refused",
        "store_error",
        "fallback",
    ] {
        assert_eq!(requests(none), Some(0.0), "{none}: {text}");
    }
    // The memory store answers at once: no call is timed, but the buckets are there.
    let duration = "floodwall_rate_limiting_store_duration";
    let count = sample(&text, &format!("{duration}_count"), &["policy=\"api\""]);
    assert_eq!(count, Some(0.0), "{text}");
    let inf = sample(
        &text,
        &format!("{duration}_bucket"),
        &["policy=\"api\"", "le=\"+Inf\""],
    );
    assert_eq!(inf, Some(0.0), "{text}");
    assert!(
        !text.contains("quantile="),
        "a histogram, not a summary: {text}"
    );
    // The 4th request left 1 of 5, the 5th none: two at 80 % used or more.
    let near = sample(
        &text,
        "floodwall_rate_limiting_near_limit",
        &["policy=\"api\""],
    );
    assert_eq!(near, Some(2.0), "{text}");
    // Labels name policies and results, never the client.
    assert!(!text.contains("127.0.0.1"), "{text}");
}
