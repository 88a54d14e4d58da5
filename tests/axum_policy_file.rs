//! The axum example as a process, its limits from `POLICY_FILE` (a copy of
//! `examples/policies.toml`), reloaded by `kill -HUP`: a changed mode applies without a
//! restart, and a bad file changes nothing (not even the quota it also changes) and is
//! reported with its line.
//!
//! It runs the example binary that `cargo test` builds beside the tests. With `--test
//! axum_policy_file` alone, run `cargo build --example axum` (same features) first:
//! `cargo test --example axum` builds the example as a test harness, not that binary.
#![cfg(unix)]

use std::process::Command;

mod common;

use common::{Server, request, start_example, status};

/// POSTs to `path` over a fresh connection: the status.
fn post(addr: &str, path: &str) -> u16 {
    status(&request(
        addr,
        &format!("POST {path} HTTP/1.1\r\nContent-Length: 0\r\n"),
    ))
}

fn hang_up(server: &Server) {
    let sent = Command::new("kill")
        .args(["-HUP", &server.0.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
}

#[test]
fn the_example_serves_a_policy_file_and_reloads_it_on_sighup() {
    let example = include_str!("../examples/policies.toml");
    let dir = std::env::temp_dir().join(format!("floodwall-axum-policy-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("policies.toml");
    std::fs::write(&path, example).unwrap();

    let running = start_example(
        "axum",
        "axum_policy_file",
        &[("POLICY_FILE", path.as_os_str())],
    );
    let (server, addr, lines) = (running.server, running.addr, running.lines);
    let next_reload = || loop {
        let line = lines.recv().expect("the server printed a reload's outcome");
        if line.contains("reloaded") {
            return line;
        }
    };

    // The file's login policy: 5 per 10 minutes.
    for i in 0..5 {
        assert_eq!(post(&addr, "/login"), 200, "login {i}");
    }
    assert_eq!(post(&addr, "/login"), 429);

    // login turned off in the file: no restart.
    let off = example.replace("quota = \"5/10min\"", "quota = \"5/10min\"\nmode = \"off\"");
    assert_ne!(off, example);
    std::fs::write(&path, &off).unwrap();
    hang_up(&server);
    let outcome = next_reload();
    assert!(
        outcome.starts_with("reloaded") && outcome.contains("login"),
        "{outcome}"
    );
    assert_eq!(post(&addr, "/login"), 200);

    // A bad file, which also cuts per-ip to 1 a minute (the client has spent 6 of its
    // burst of 20): nothing of it applies, so the client goes on at 10 a second; and the
    // error is reported with its line.
    let cut = off.replace("quota = \"10/s burst 20\"", "quota = \"1/min\"");
    assert_ne!(cut, off);
    let bad = format!("{cut}oops = 1\n");
    std::fs::write(&path, &bad).unwrap();
    hang_up(&server);
    let outcome = next_reload();
    for i in 0..3 {
        assert_eq!(post(&addr, "/login"), 200, "after the bad file: {i}");
    }
    let line = bad.lines().count();
    assert!(outcome.starts_with("not reloaded"), "{outcome}");
    assert!(
        outcome.contains(&format!(":{line}:1: route[2].oops")),
        "{outcome}"
    );

    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}
