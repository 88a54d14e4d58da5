//! What the CLI's tests share: the binary run as a process, and files for it.

#![allow(dead_code, unreachable_pub)]

use std::path::PathBuf;
use std::process::{Command, Output};

/// `floodwall ARGS`, run to its end.
pub fn floodwall(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_floodwall"))
        .args(args)
        .env_remove("REDIS_URL")
        .env_remove("REDIS_CLUSTER_URLS")
        .env_remove("REDIS_SENTINEL_URLS")
        .env_remove("REDIS_SENTINEL_SERVICE")
        .env_remove("REDIS_PREFIX")
        .env_remove("REDIS_TIMEOUT_MS")
        .output()
        .expect("the floodwall binary runs")
}

/// `floodwall ARGS`, which must succeed: its stdout.
pub fn ok(args: &[&str]) -> String {
    let out = floodwall(args);
    assert!(
        out.status.success(),
        "floodwall {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// `floodwall ARGS`, which must fail with exit code 2 and one line on stderr: that line.
pub fn refused(args: &[&str]) -> String {
    let out = floodwall(args);
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(2), "floodwall {args:?}: {stderr}");
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr:?}");
    assert!(stderr.starts_with("floodwall: "), "{stderr}");
    assert!(out.stdout.is_empty(), "nothing on stdout");
    stderr.trim_end().to_owned()
}

/// A file named `name` holding `text`, in a folder of this test's own.
pub fn file(test: &str, name: &str, text: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("floodwall-cli")
        .join(test);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// `inspect`'s `name: value` line for `name`.
pub fn field<'a>(report: &'a str, name: &str) -> &'a str {
    report
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .unwrap_or_else(|| panic!("no {name} in {report}"))
        .trim()
}

/// A `1.234567s` duration in seconds.
pub fn seconds(text: &str) -> f64 {
    text.split_whitespace()
        .next()
        .and_then(|s| s.strip_suffix('s'))
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("not a duration: {text}"))
}

/// The status of a request to `path` from `ip`, with `headers`, through `layer`.
pub async fn status<St>(
    layer: &floodwall_tower::RateLimitLayer<St, floodwall_tower::file::FileKey>,
    ip: &str,
    path: &str,
    headers: &[(&'static str, &str)],
) -> http::StatusCode
where
    St: floodwall_core::Store + Clone + Send + Sync + 'static,
{
    use tower::{Layer, ServiceExt};
    let mut req = floodwall_test_support::from(ip);
    *req.uri_mut() = path.parse().unwrap();
    for (name, value) in headers {
        req.headers_mut().insert(*name, value.parse().unwrap());
    }
    let svc = layer.layer(floodwall_test_support::hello());
    svc.oneshot(req).await.unwrap().status()
}

/// Sends `admitted` requests to `path` from `ip` through `layer`, each admitted, then one
/// more, refused: the key exhausted through the layer as a client would.
pub async fn exhaust<St>(
    layer: &floodwall_tower::RateLimitLayer<St, floodwall_tower::file::FileKey>,
    ip: &str,
    path: &str,
    admitted: usize,
) where
    St: floodwall_core::Store + Clone + Send + Sync + 'static,
{
    for n in 0..admitted {
        let got = status(layer, ip, path, &[]).await;
        assert_eq!(got, http::StatusCode::OK, "request {n} from {ip}");
    }
    let refused = status(layer, ip, path, &[]).await;
    assert_eq!(refused, http::StatusCode::TOO_MANY_REQUESTS, "from {ip}");
}
