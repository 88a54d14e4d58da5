//! Files and directories.

use std::path::PathBuf;

use floodwall_rls::config::{Config, ErrorKind, Unit};

use super::rate;

/// A fresh directory under the system's temporary one, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("floodwall-rls-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }

    fn write(&self, name: &str, bytes: impl AsRef<[u8]>) -> PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, bytes).unwrap();
        path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn a_directory_is_one_domain_per_yaml_file() {
    let dir = TempDir::new("dir");
    dir.write(
        "a.yaml",
        "domain: a\ndescriptors:\n  - {key: k, rate_limit: {unit: second, requests_per_unit: 1}}\n",
    );
    dir.write(
        "b.yml",
        "domain: b\ndescriptors:\n  - {key: k, rate_limit: {unit: second, requests_per_unit: 2}}\n",
    );
    dir.write("notes.txt", "not yaml: [");
    dir.write(".hidden.yaml", "not yaml: [");
    std::fs::create_dir(dir.0.join("..data")).unwrap();
    let c = Config::load(&dir.0).unwrap();
    let names: Vec<&str> = c.domains().map(|d| d.name()).collect();
    assert_eq!(names, ["a", "b"]);
    assert_eq!(rate(&c, "b", &[("k", "v")]), Some((2, Unit::Second)));
    // One file alone.
    let one = Config::load(dir.0.join("a.yaml")).unwrap();
    assert_eq!(one.domains().count(), 1);
    assert!(one.domain("a").unwrap().origin().ends_with("a.yaml"));

    // The same domain in two files.
    dir.write("c.yaml", "domain: a\n");
    let e = Config::load(&dir.0).unwrap_err();
    assert_eq!(
        (e.kind(), e.field()),
        (ErrorKind::DuplicateDomain, "domain")
    );
    assert!(
        e.origin().ends_with("c.yaml") && e.found().unwrap().contains("a.yaml"),
        "{e}"
    );
}

#[test]
fn unreadable_empty_and_non_utf8() {
    let dir = TempDir::new("bad");
    let e = Config::load(&dir.0).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NoFiles);
    let e = Config::load(dir.0.join("missing.yaml")).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unreadable);
    let path = dir.write(
        "latin1.yaml",
        b"domain: d\ndescriptors:\n  - key: caf\xe9\n",
    );
    let e = Config::load(path).unwrap_err();
    assert_eq!(
        (e.kind(), e.line(), e.column()),
        (ErrorKind::NotUtf8, Some(3), Some(13))
    );
}

#[test]
fn the_shipped_example_configuration_loads_cleanly() {
    // examples/rls/ at the repository's root, which the README serves.
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/rls");
    let config = Config::load(&dir).unwrap_or_else(|e| panic!("{e}"));
    assert!(config.warnings().is_empty(), "{:?}", config.warnings());
    let domains: Vec<&str> = config.domains().map(|d| d.name()).collect();
    assert_eq!(domains, ["api", "messaging"]);
    let gold = [("api_key", "k"), ("plan", "gold")];
    assert_eq!(rate(&config, "api", &gold), Some((100, Unit::Second)));
    let silver = [("api_key", "k"), ("plan", "silver")];
    assert_eq!(rate(&config, "api", &silver), Some((10, Unit::Minute)));
    assert!(
        config
            .limit("api", [("path", "/healthz")])
            .unwrap()
            .is_unlimited()
    );
    assert!(
        config
            .limit("api", [("path", "/search")])
            .unwrap()
            .shadow_mode()
    );
    let marketing = [("message_type", "marketing"), ("to_number", "1")];
    assert_eq!(rate(&config, "messaging", &marketing), Some((5, Unit::Day)));
}
