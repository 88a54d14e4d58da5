//! What the tests that run an example binary share.

use std::path::{Path, PathBuf};
use std::process::Child;

/// An example server, killed when the test ends however it ends.
pub(crate) struct Server(pub(crate) Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `target/<profile>/examples/<name>`, built by `cargo test` beside the test binary
/// (`target/<profile>/deps/<test>-<hash>`); `test` names the test for the hint.
pub(crate) fn example_binary(name: &str, test: &str) -> PathBuf {
    let me = std::env::current_exe().expect("the test binary's own path");
    let profile_dir = me
        .parent()
        .and_then(Path::parent)
        .expect("the test binary lives in target/<profile>/deps");
    let binary = profile_dir
        .join("examples")
        .join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    assert!(
        binary.is_file(),
        "the {name} example is not built at {}: run the whole `cargo test --workspace \
         --all-features`, or add `--example {name}` to a `--test {test}` run",
        binary.display()
    );
    binary
}
