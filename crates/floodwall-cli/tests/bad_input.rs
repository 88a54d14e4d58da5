//! Input that is not valid, and a Redis that is not there: one line on stderr naming the
//! argument or the line, exit code 2, nothing on stdout.

mod common;

use common::{file, refused};
use redis_harness::RedisServer;

#[test]
fn an_unparseable_quota_names_its_argument() {
    let line = refused(&["simulate", "--policy", "ten/s", "--traffic", "steady:1/s"]);
    assert!(line.contains("--policy \"ten/s\""), "{line}");
    let line = refused(&[
        "inspect",
        "203.0.113.7",
        "--policy",
        "p",
        "--quota",
        "5/fortnight",
        "--redis",
        "redis://127.0.0.1:1/",
    ]);
    assert!(line.contains("--quota \"5/fortnight\""), "{line}");
}

#[test]
fn an_unknown_algorithm_names_its_argument() {
    let line = refused(&[
        "simulate",
        "--policy",
        "10/s",
        "--algorithm",
        "leaky_window",
        "--traffic",
        "steady:1/s",
    ]);
    assert!(line.contains("--algorithm"), "{line}");
    assert!(line.contains("leaky_window"), "{line}");
    assert!(line.contains("unknown algorithm"), "{line}");
    // An algorithm that cannot enforce the quota, too.
    let line = refused(&[
        "simulate",
        "--policy",
        "10/s burst 20",
        "--algorithm",
        "sliding_log",
        "--traffic",
        "steady:1/s",
    ]);
    assert!(
        line.starts_with("floodwall: --algorithm sliding_log: "),
        "{line}"
    );
}

#[test]
fn a_traffic_file_with_a_bad_line_names_the_line() {
    let path = file(
        "bad_line",
        "traffic.txt",
        "0.1\n\n# a comment\n0.2\nnot-a-time\n0.3\n",
    );
    let path = path.to_str().unwrap();
    let line = refused(&["simulate", "--policy", "10/s", "--traffic", path]);
    assert!(
        line.contains(&format!("--traffic {path}: line 5")),
        "{line}"
    );
    assert!(line.contains("\"not-a-time\""), "{line}");

    let clf = file(
        "bad_line",
        "access.log",
        "1.2.3.4 - - [01/May/2024:12:00:00 +0000] \"GET /\"\n1.2.3.4 - - [01/Mai/2024:12:00:01 +0000] \"GET /\"\n",
    );
    let clf = clf.to_str().unwrap();
    let line = refused(&[
        "simulate",
        "--policy",
        "10/s",
        "--traffic",
        clf,
        "--timestamps",
        "clf",
    ]);
    assert!(line.contains(&format!("--traffic {clf}: line 2")), "{line}");

    let line = refused(&["simulate", "--policy", "10/s", "--traffic", "nowhere.txt"]);
    assert!(line.contains("--traffic nowhere.txt"), "{line}");
    let line = refused(&["simulate", "--policy", "10/s", "--traffic", "bursts:ten/1s"]);
    assert!(line.contains("--traffic \"bursts:ten/1s\""), "{line}");
}

#[test]
fn a_redis_that_is_down_names_the_store() {
    let mut server = RedisServer::start();
    let url = server.url();
    server.kill();
    for command in ["inspect", "reset", "unban"] {
        let line = refused(&[
            command,
            "203.0.113.7",
            "--policy",
            "per-ip",
            "--quota",
            "10/s",
            "--redis",
            &url,
            "--redis-timeout",
            "500",
        ]);
        assert!(line.contains(&format!("--redis {url}")), "{line}");
        assert!(line.contains("cannot connect to Redis"), "{line}");
    }
    // Credentials in the URL are not repeated.
    let with_password = url.replace("redis://", "redis://admin:hunter2@");
    let line = refused(&[
        "inspect",
        "203.0.113.7",
        "--policy",
        "per-ip",
        "--quota",
        "10/s",
        "--redis",
        &with_password,
    ]);
    assert!(!line.contains("hunter2"), "{line}");
}

#[test]
fn a_command_line_error_is_one_line_too() {
    // clap's own errors: a missing argument, and a key that is not one.
    let line = refused(&["simulate", "--traffic", "steady:1/s"]);
    assert!(line.contains("--policy"), "{line}");
    let line = refused(&[
        "inspect",
        "not-an-ip",
        "--policy",
        "p",
        "--quota",
        "1/s",
        "--redis",
        "redis://127.0.0.1:1/",
    ]);
    assert!(line.contains("KEY \"not-an-ip\""), "{line}");
    let line = refused(&[
        "reset",
        "zz",
        "--raw-hex",
        "--policy",
        "p",
        "--quota",
        "1/s",
        "--redis",
        "redis://127.0.0.1:1/",
    ]);
    assert!(line.contains("--raw-hex"), "{line}");
}
