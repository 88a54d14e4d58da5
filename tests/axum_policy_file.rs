//! The axum example as a process, its limits from `POLICY_FILE` (a copy of
//! `examples/policies.toml`), reloaded by `kill -HUP`: a changed mode applies without a
//! restart, and a bad file changes nothing (not even the quota it also changes) and is
//! reported with its line.
//!
//! It runs the example binary that `cargo test` builds beside the tests. With `--test
//! axum_policy_file` alone, run `cargo build --example axum` (same features) first:
//! `cargo test --example axum` builds the example as a test harness, not that binary.
#![cfg(unix)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::sync::mpsc;

mod common;

use common::{Server, example_binary};

/// POSTs to `path` over a fresh connection: the status.
fn post(addr: &str, path: &str) -> u16 {
    let mut stream = TcpStream::connect(addr).unwrap();
    write!(
        stream,
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
    )
    .unwrap();
    let mut raw = String::new();
    stream.read_to_string(&mut raw).unwrap();
    raw.split(' ').nth(1).unwrap().parse().unwrap()
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

    let mut child = Command::new(example_binary("axum", "axum_policy_file"))
        .env("LISTEN", "127.0.0.1:0")
        .env("POLICY_FILE", &path)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let server = Server(child);
    // The server's lines, as it prints them.
    let (lines_tx, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if lines_tx.send(line).is_err() {
                break;
            }
        }
    });
    // The first line names the address once the listener is bound.
    let first = lines.recv().expect("the server's first line");
    let addr = first
        .split_whitespace()
        .find_map(|w| w.strip_prefix("http://"))
        .unwrap_or_else(|| panic!("no address in {first:?}"))
        .trim_end_matches(',')
        .to_owned();
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
