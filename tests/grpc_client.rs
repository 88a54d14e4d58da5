//! The tonic example as a standalone server, called by a gRPC client not written here:
//! Python's `grpcio` with `grpcio-health-checking` (`tests/grpc/health_client.py`). A refusal
//! must reach it as `RESOURCE_EXHAUSTED` with the retry metadata in its trailers.
//!
//! It runs the example binary that `cargo test` builds beside the tests (with `--test
//! grpc_client` alone, add `--example tonic` so that binary is built too), and needs
//! `python3` with those packages: `.ci/run` installs them when missing. Either missing is a
//! failure, not a skip.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

const INSTALL_HINT: &str = "this test needs python3 with the packages grpcio and \
    grpcio-health-checking; .ci/run installs them (pip install grpcio grpcio-health-checking)";

mod common;

use common::{Server, example_binary};

/// Starts the example on a port the OS picks and returns it with the address it printed:
/// it prints that line once its listener is bound, so connections are accepted from then on.
fn start_server() -> (Server, String) {
    let binary = example_binary("tonic", "grpc_client");
    let child = Command::new(&binary)
        .env("LISTEN", "127.0.0.1:0")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", binary.display()));
    let mut server = Server(child);
    let stdout = server.0.stdout.take().expect("piped stdout");
    let mut first_line = String::new();
    BufReader::new(stdout)
        .read_line(&mut first_line)
        .expect("the server's first line");
    let addr = first_line
        .split_whitespace()
        .find(|word| word.starts_with("127.0.0.1:"))
        .unwrap_or_else(|| panic!("no address in the server's first line: {first_line:?}"))
        .trim_end_matches(',')
        .to_owned();
    (server, addr)
}

#[test]
fn python_grpcio_sees_resource_exhausted_with_retry_metadata() {
    let (server, addr) = start_server();

    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/grpc/health_client.py");
    let output = Command::new("python3")
        .arg(&script)
        .arg(&addr)
        .output()
        .unwrap_or_else(|e| panic!("cannot run python3: {e}; {INSTALL_HINT}"));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.code() != Some(3), "{stderr}\n{INSTALL_HINT}");
    assert!(
        output.status.success(),
        "health_client.py failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
    drop(server);

    let lines: Vec<&str> = stdout.lines().collect();
    // 3 calls per minute per client IP: three answers, then the refusal.
    assert_eq!(
        lines[..4],
        [
            "ok SERVING",
            "ok SERVING",
            "ok SERVING",
            "status RESOURCE_EXHAUSTED"
        ],
        "{stdout}"
    );
    let trailer = |name: &str| -> u64 {
        let prefix = format!("trailer {name} ");
        let line = lines
            .iter()
            .find_map(|line| line.strip_prefix(&prefix))
            .unwrap_or_else(|| panic!("no {name} trailer in:\n{stdout}"));
        line.parse()
            .unwrap_or_else(|e| panic!("{name} = {line:?}: {e}"))
    };
    // The next call is admitted a third of a minute after the third: at most 20 s away.
    let retry_after = trailer("retry-after");
    let pushback_ms = trailer("grpc-retry-pushback-ms");
    assert!((1..=20).contains(&retry_after), "retry-after {retry_after}");
    assert!(
        (1..=20_000).contains(&pushback_ms),
        "grpc-retry-pushback-ms {pushback_ms}"
    );
    // The same wait: whole seconds rounded up, and milliseconds rounded down.
    assert!(
        (pushback_ms.div_ceil(1000)..=pushback_ms / 1000 + 1).contains(&retry_after),
        "retry-after {retry_after} against grpc-retry-pushback-ms {pushback_ms}"
    );
}
