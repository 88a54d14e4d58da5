//! The tonic example as a standalone server, called by a gRPC client not written here:
//! Python's `grpcio` with `grpcio-health-checking` (`tests/grpc/health_client.py`). A refusal
//! must reach it as `RESOURCE_EXHAUSTED` with the retry metadata in its trailers.
//!
//! It runs the example binary that `cargo test` builds beside the tests (before a `--test
//! grpc_client` run alone, `cargo build --all-features --example tonic`). It needs only
//! `python3`: when that lacks the two packages, the test installs them from the package
//! index into a virtual environment of its own under cargo's target directory, once, and
//! reuses it after (floodwall-test-support's `python_with`). A package that cannot be had
//! is a failure that says why, never a skip.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use floodwall_test_support::python_with;

/// The client's Python packages, as pip names them.
const PACKAGES: [&str; 2] = ["grpcio", "grpcio-health-checking"];

mod common;

use common::start_example;

/// Runs `program args`, or fails the test naming what could not be run.
fn run(program: &Path, args: &[&str]) -> Output {
    Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", program.display()))
}

/// A Python that has the client's packages: `python3` itself when it has them, else a
/// virtual environment of this test's own under cargo's target directory, made on first use.
fn python_with_grpc() -> PathBuf {
    python_with(
        &PACKAGES,
        "import grpc, grpc_health.v1.health_pb2",
        &Path::new(env!("CARGO_TARGET_TMPDIR")).join("grpc-venv"),
    )
}

#[test]
fn python_grpcio_sees_resource_exhausted_with_retry_metadata() {
    let python = python_with_grpc();
    let example = start_example("tonic", "grpc_client", &[]);

    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/grpc/health_client.py");
    let output = run(&python, &[&script.to_string_lossy(), &example.addr]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "health_client.py failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
    drop(example);

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
