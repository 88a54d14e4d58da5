//! `inspect` and `reset` on every kind of Redis the store's builder takes (a cluster,
//! Sentinel), on a key read from a header, and a layer whose deny cache still holds a
//! refusal after the reset: admitted once its hold lapses, on a manual clock.

mod common;

use std::time::Duration;

use common::{exhaust, field, file, ok, status};
use floodwall_core::{DenyCache, ManualClock};
use floodwall_redis::RedisStore;
use floodwall_tower::file::PolicyFile;
use http::StatusCode;
use redis_harness::{RedisCluster, RedisSentinel, RedisServer};

const PER_IP: &str = r#"
[[policy]]
name = "per-ip"
quota = "3/hour"
default = true
"#;

/// Exhausts `ip` through a layer over `store`, then inspects and resets it with the CLI's
/// `store_args`, and the layer admits it again.
async fn exhaust_inspect_reset(store: RedisStore, store_args: &[&str], test: &str) {
    let policies = file(test, "policies.toml", PER_IP);
    let layer = PolicyFile::load(&policies).unwrap().layer(store).0;
    let ip = "203.0.113.50";
    exhaust(&layer, ip, "/", 3).await;
    let run = |command: &str| {
        let mut args = vec![command, ip, "--policy", "per-ip", "--policy-file"];
        args.push(policies.to_str().unwrap());
        args.extend_from_slice(store_args);
        ok(&args)
    };
    let report = run("inspect");
    assert_eq!(field(&report, "remaining"), "0", "{report}");
    run("reset");
    assert_eq!(field(&run("inspect"), "remaining"), "3");
}

#[tokio::test(flavor = "current_thread")]
async fn a_key_on_a_cluster() {
    let cluster = RedisCluster::start(3);
    let urls = cluster.urls();
    let store = RedisStore::builder()
        .deny_cache(false)
        .cluster(&urls)
        .await
        .unwrap();
    let joined = urls.join(",");
    exhaust_inspect_reset(store, &["--redis-cluster", &joined], "cluster").await;
}

#[tokio::test(flavor = "current_thread")]
async fn a_key_through_sentinel() {
    let deployment = RedisSentinel::start(1, 1);
    let urls = deployment.sentinel_urls();
    let store = RedisStore::builder()
        .deny_cache(false)
        .sentinel(&urls, RedisSentinel::SERVICE)
        .await
        .unwrap();
    let joined = urls.join(",");
    let args = ["--sentinel", &joined, "--service", RedisSentinel::SERVICE];
    exhaust_inspect_reset(store, &args, "sentinel").await;
}

#[tokio::test(flavor = "current_thread")]
async fn a_key_read_from_a_header_as_the_files_key_hashes_it() {
    let server = RedisServer::start();
    let url = server.url();
    let text =
        format!("[key]\nkind = \"header\"\nheader = \"x-api-key\"\nsalt = \"pepper\"\n{PER_IP}");
    let policies = file("header", "policies.toml", &text);
    let store = RedisStore::connect(&url).await.unwrap();
    let layer = PolicyFile::load(&policies).unwrap().layer(store).0;
    let api_key = [("x-api-key", "customer-x")];
    for _ in 0..3 {
        assert_eq!(
            status(&layer, "192.0.2.7", "/", &api_key).await,
            StatusCode::OK
        );
    }
    let inspect = |key: &str, extra: &[&str]| {
        let mut args = vec!["inspect", key, "--policy", "per-ip", "--policy-file"];
        args.extend([policies.to_str().unwrap(), "--redis", &url]);
        args.extend_from_slice(extra);
        ok(&args)
    };
    let report = inspect("customer-x", &["--header", "x-api-key"]);
    assert_eq!(field(&report, "remaining"), "0", "{report}");
    // The key is the salted value's SHA-256, never the value itself.
    assert!(
        !field(&report, "redis key").contains("customer-x"),
        "{report}"
    );
    let other = inspect("customer-y", &["--header", "x-api-key"]);
    assert_eq!(field(&other, "remaining"), "3");
    // Without the header the file's key finds nothing, and says so.
    let line = common::refused(&[
        "inspect",
        "customer-x",
        "--policy",
        "per-ip",
        "--policy-file",
        policies.to_str().unwrap(),
        "--redis",
        &url,
    ]);
    assert!(line.contains("x-api-key"), "{line}");
}

#[tokio::test(flavor = "current_thread")]
async fn after_a_reset_the_layer_admits_once_its_deny_cache_lets_go() {
    let server = RedisServer::start();
    let url = server.url();
    let policies = file("deny_cache", "policies.toml", PER_IP);
    // The layer's deny cache, on a clock of the test's: a refusal is held 1 s at most.
    let clock = ManualClock::new(1_000_000);
    let hold = Duration::from_secs(1);
    let redis = RedisStore::builder()
        .deny_cache(false)
        .multiplexed(&url)
        .await
        .unwrap();
    let store = DenyCache::builder()
        .max_refusal_hold(hold)
        .clock(clock.clone())
        .build(redis);
    let layer = PolicyFile::load(&policies).unwrap().layer(store).0;
    let ip = "203.0.113.60";
    exhaust(&layer, ip, "/", 3).await;

    ok(&[
        "reset",
        ip,
        "--policy",
        "per-ip",
        "--policy-file",
        policies.to_str().unwrap(),
        "--redis",
        &url,
    ]);
    // This node still holds the refusal it saw (Redis is not asked)...
    assert_eq!(
        status(&layer, ip, "/", &[]).await,
        StatusCode::TOO_MANY_REQUESTS
    );
    // ...for its bound at most: then Redis answers, and the key is admitted.
    clock.advance(hold);
    assert_eq!(status(&layer, ip, "/", &[]).await, StatusCode::OK);
}
