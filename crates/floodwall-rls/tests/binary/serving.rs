//! What the process serves, and what it says when it cannot.

use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

use super::*;

#[tokio::test]
async fn serves_and_decides_the_exact_quota() {
    let dir = TempDir::new();
    dir.write("api.yaml", &quota_config(3));
    let rls = Rls::start(dir.path(), &[]);
    let mut client = rls.client().await;

    assert_eq!(admitted(&mut client, &[("user", "alice")], 5).await, 3);
    // Another key has its own quota; a descriptor without a limit is OK.
    assert_eq!(admitted(&mut client, &[("user", "bob")], 4).await, 3);
    let free = ask(&mut client, "api", &[("path", "/")]).await;
    assert_eq!(free.overall_code, OK);

    let over = ask(&mut client, "api", &[("user", "alice")]).await;
    let status = &over.statuses[0];
    assert_eq!((status.code, status.limit_remaining), (OVER, 0));
    assert_eq!(status.current_limit.as_ref().unwrap().requests_per_unit, 3);
    assert!(
        over.response_headers_to_add.is_empty(),
        "headers are off by default"
    );
}

#[tokio::test]
async fn response_headers_on_request() {
    let dir = TempDir::new();
    dir.write("api.yaml", &quota_config(1));
    let rls = Rls::start(dir.path(), &["--response-headers"]);
    let mut client = rls.client().await;

    let ok = ask(&mut client, "api", &[("user", "a")]).await;
    let names: Vec<&str> = ok
        .response_headers_to_add
        .iter()
        .map(|h| h.key.as_str())
        .collect();
    assert_eq!(names, ["RateLimit-Policy", "RateLimit"]);
    let over = ask(&mut client, "api", &[("user", "a")]).await;
    assert_eq!(over.overall_code, OVER);
    assert!(
        over.response_headers_to_add
            .iter()
            .any(|h| h.key == "Retry-After")
    );
}

#[tokio::test]
async fn health_is_serving() {
    let dir = TempDir::new();
    dir.write("api.yaml", &quota_config(3));
    let rls = Rls::start(dir.path(), &[]);
    let mut health = HealthClient::new(rls.channel().await);
    for service in ["", "envoy.service.ratelimit.v3.RateLimitService"] {
        let answer = health
            .check(HealthCheckRequest {
                service: service.to_owned(),
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(answer.status, ServingStatus::Serving as i32, "{service:?}");
    }
}

#[test]
fn a_bad_configuration_exits_2_naming_file_line_and_field() {
    let dir = TempDir::new();
    let file = dir.write(
        "api.yaml",
        "domain: api\ndescriptors:\n  - key: user\n    rate_limit: {unit: fortnight, requests_per_unit: 3}\n",
    );
    let output = command(&["--config", &file.display().to_string()])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "{}:4:24: descriptors[0].rate_limit.unit",
            file.display()
        )),
        "{stderr}"
    );
    assert!(stderr.contains("fortnight"), "{stderr}");
}

#[test]
fn a_missing_configuration_exits_2() {
    let dir = TempDir::new();
    let missing = dir.path().join("nothing-here.yaml");
    let output = command(&["--config", &missing.display().to_string()])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("nothing-here.yaml"), "{stderr}");
}

#[test]
fn the_redis_options_exclude_each_other() {
    let output = command(&[
        "--config",
        "x",
        "--redis",
        "redis://127.0.0.1:1/",
        "--redis-cluster",
        "redis://127.0.0.1:2/",
    ])
    .output()
    .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("cannot be used with"), "{stderr}");
}

#[test]
fn an_unreachable_redis_exits_1() {
    let dir = TempDir::new();
    dir.write("api.yaml", &quota_config(3));
    // A port nothing listens on: bound, then released.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let output = command(&[
        "--config",
        &dir.path().display().to_string(),
        "--redis",
        &format!("redis://127.0.0.1:{port}/"),
    ])
    .output()
    .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("could not connect to redis"), "{stderr}");
}
