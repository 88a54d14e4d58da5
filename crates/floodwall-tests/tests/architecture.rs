//! ARCHITECTURE.md stays true: every file or folder it names in backquotes exists. A path
//! with a folder is looked up from the repository root; a bare file name (`ip.rs`, named
//! right after its folder) must exist somewhere in the repository. Templates such as
//! `<name>.rs` are skipped.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every file name under `dir`, skipping build output and VCS folders.
fn file_names(dir: &Path, out: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if matches!(name.as_str(), "target" | ".git") {
            continue;
        }
        if entry.file_type().unwrap().is_dir() {
            file_names(&entry.path(), out);
        } else {
            out.push(name);
        }
    }
}

#[test]
fn every_path_architecture_md_names_exists() {
    let root = root();
    let text = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let mut names = Vec::new();
    file_names(&root, &mut names);
    let looks_like_path = |s: &str| {
        s.ends_with('/')
            || [".rs", ".md", ".lua", ".toml", ".sh", ".txt"]
                .iter()
                .any(|ext| s.ends_with(ext))
    };
    let mut checked = 0;
    let mut missing = Vec::new();
    for (i, quoted) in text.split('`').enumerate() {
        // Odd pieces are inside backquotes.
        if i % 2 == 0 || !looks_like_path(quoted) || quoted.contains('<') || quoted.contains(' ') {
            continue;
        }
        checked += 1;
        let found = if quoted.contains('/') {
            root.join(quoted).exists()
        } else {
            names.iter().any(|n| n == quoted)
        };
        if !found {
            missing.push(quoted.to_owned());
        }
    }
    assert!(
        checked > 50,
        "only {checked} paths found: is the parser broken?"
    );
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md names what is gone: {missing:?}"
    );
}
