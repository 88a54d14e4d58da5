//! The metrics example's `/metrics`, read after a known sequence of requests: the exact
//! counts by policy and result in Prometheus text, and no client address among them.

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
    assert_eq!(requests("store_error"), Some(0.0), "{text}");
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
