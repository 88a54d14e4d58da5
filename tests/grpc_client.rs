//! The tonic example as a standalone server, called by a gRPC client not written here:
//! Python's `grpcio` with `grpcio-health-checking` (`tests/grpc/health_client.py`). A refusal
//! must reach it as `RESOURCE_EXHAUSTED` with the retry metadata in its trailers.
//!
//! It runs the example binary that `cargo test` builds beside the tests (before a `--test
//! grpc_client` run alone, `cargo build --all-features --example tonic`). It needs only
//! `python3`: when that lacks the two packages, the test installs them from the package
//! index into a virtual environment of its own under cargo's target directory, once, and
//! reuses it after. A package that cannot be had is a failure that says why, never a skip.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

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

/// Whether `python` runs and imports both packages.
fn has_packages(python: &Path) -> bool {
    Command::new(python)
        .args(["-c", "import grpc, grpc_health.v1.health_pb2"])
        .output()
        .is_ok_and(|out| out.status.success())
}

/// A Python that has the client's packages: `python3` itself when it has them, else the
/// interpreter of a virtual environment under cargo's target directory, made and filled
/// from the package index on first use. It is built under a name of its own and renamed
/// into place once complete, so two test runs at once never share a half-made one.
fn python_with_grpc() -> PathBuf {
    let system = PathBuf::from("python3");
    if has_packages(&system) {
        return system;
    }
    let root = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let venv = root.join("grpc-venv");
    let python = venv.join("bin").join("python");
    if has_packages(&python) {
        return python;
    }
    let partial = root.join(format!("grpc-venv.partial-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&partial);
    let made = run(&system, &["-m", "venv", &partial.to_string_lossy()]);
    assert!(
        made.status.success(),
        "python3 lacks {PACKAGES:?} and cannot make a virtual environment to install them \
         into (python3 -m venv: {})",
        String::from_utf8_lossy(&made.stderr)
    );
    let partial_python = partial.join("bin").join("python");
    let mut install = vec![
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
    ];
    install.extend(PACKAGES);
    let installed = run(&partial_python, &install);
    assert!(
        installed.status.success(),
        "python3 lacks {PACKAGES:?}, and installing them into {} failed (is the package \
         index reachable?): {}",
        partial.display(),
        String::from_utf8_lossy(&installed.stderr)
    );
    // One left unusable (its Python upgraded or removed since) gives way to ours; one a
    // concurrent run has just finished stays, and ours is dropped.
    if venv.exists() && !has_packages(&python) {
        let _ = std::fs::remove_dir_all(&venv);
    }
    if std::fs::rename(&partial, &venv).is_err() {
        let _ = std::fs::remove_dir_all(&partial);
    }
    assert!(
        has_packages(&python),
        "{} lacks {PACKAGES:?} after installing them",
        python.display()
    );
    python
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
