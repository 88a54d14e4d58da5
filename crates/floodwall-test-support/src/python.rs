//! A Python interpreter with the packages a test's client script imports, for the tests
//! that call a server from a client not written in Rust (tests/grpc_client.rs at the
//! repository's root, crates/floodwall-rls/tests/binary/python.rs).
//!
//! Such a test needs only `python3`: when that lacks the packages, they are installed from
//! the package index into a virtual environment of the test's own (under its
//! `CARGO_TARGET_TMPDIR`), once, and reused after. A package that cannot be had is a
//! failure that says why, never a skip.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU64, Ordering};

/// A Python that runs `import_check` (Python code: `"import grpc"`): `python3` itself when
/// it can, else the interpreter of the virtual environment at `venv_dir`, made and filled
/// with `packages` (as pip names them) from the package index on first use.
///
/// The environment is built under a name of its own beside `venv_dir` and renamed into
/// place once complete, so two runs at once (two test processes, or two threads of one)
/// never use a half-made one. One found at `venv_dir` that fails `import_check` (its
/// Python upgraded or removed since, or another package list) gives way to a new one.
///
/// Panics, saying why, when no environment can be made or the packages cannot be
/// installed (the package index unreachable, a name unknown).
pub fn python_with(packages: &[&str], import_check: &str, venv_dir: &Path) -> PathBuf {
    let system = PathBuf::from("python3");
    if imports(&system, import_check) {
        return system;
    }
    let python = venv_dir.join("bin").join("python");
    if imports(&python, import_check) {
        return python;
    }

    static BUILDS: AtomicU64 = AtomicU64::new(0);
    let name = venv_dir
        .file_name()
        .map_or_else(|| "venv".into(), |n| n.to_string_lossy().into_owned());
    let partial = venv_dir.with_file_name(format!(
        "{name}.partial-{}-{}",
        std::process::id(),
        BUILDS.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&partial);
    if let Some(parent) = partial.parent() {
        let _ = std::fs::create_dir_all(parent);
    }
    let made = run(&system, &["-m", "venv", &partial.to_string_lossy()]);
    assert!(
        made.status.success(),
        "python3 cannot run `{import_check}` and cannot make a virtual environment to install \
         {packages:?} into (python3 -m venv: {})",
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
    install.extend_from_slice(packages);
    let installed = run(&partial_python, &install);
    if !installed.status.success() {
        // Nothing half-made stays behind for a later run to trip over.
        let _ = std::fs::remove_dir_all(&partial);
    }
    assert!(
        installed.status.success(),
        "python3 cannot run `{import_check}`, and installing {packages:?} into a virtual \
         environment at {} failed (is the package index reachable?): {}",
        venv_dir.display(),
        String::from_utf8_lossy(&installed.stderr)
    );
    assert!(
        imports(&partial_python, import_check),
        "{} cannot run `{import_check}` after installing {packages:?}",
        partial.display()
    );
    // One left unusable gives way to ours; one a concurrent run has just finished stays,
    // and ours is dropped.
    if venv_dir.exists() && !imports(&python, import_check) {
        let _ = std::fs::remove_dir_all(venv_dir);
    }
    if std::fs::rename(&partial, venv_dir).is_err() {
        let _ = std::fs::remove_dir_all(&partial);
    }
    assert!(
        imports(&python, import_check),
        "{} cannot run `{import_check}` after installing {packages:?}",
        python.display()
    );
    python
}

/// Whether `python` runs and `import_check` succeeds in it.
fn imports(python: &Path, import_check: &str) -> bool {
    Command::new(python)
        .args(["-c", import_check])
        .output()
        .is_ok_and(|out| out.status.success())
}

/// Runs `program args`, or fails the test naming what could not be run.
fn run(program: &Path, args: &[&str]) -> Output {
    Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", program.display()))
}
