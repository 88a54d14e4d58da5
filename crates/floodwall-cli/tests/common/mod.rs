//! What the CLI's tests share: the binary run as a process, and files for it.

#![allow(dead_code, unreachable_pub)]

use std::path::PathBuf;
use std::process::{Command, Output};

/// `floodwall ARGS`, run to its end.
pub fn floodwall(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_floodwall"))
        .args(args)
        .env_remove("REDIS_URL")
        .env_remove("REDIS_PREFIX")
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
