//! The peer: redis-cell's loadable module, built from its published crate the first time and
//! kept under the target dir for the runs after.
//!
//! The crate is fetched as the dependency of a throwaway package in a temporary directory
//! (outside any workspace), its source copied out of cargo's registry and built with
//! `cargo build --release` into a target dir of its own, pinned to the versions the fetch
//! resolved.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The published version compared against.
pub(crate) const VERSION: &str = "0.2.2";

/// The loadable module (`libredis_cell.so`): `REDIS_CELL_MODULE` if set, else the cached
/// build under the target dir, else a fresh build (cached for the next run). The error says
/// why there is none.
pub(crate) fn module() -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os("REDIS_CELL_MODULE") {
        let path = PathBuf::from(path);
        return if path.is_file() {
            Ok(path)
        } else {
            Err(format!(
                "REDIS_CELL_MODULE={} is not a file",
                path.display()
            ))
        };
    }
    let cache = target_dir()
        .join(format!("redis-cell-{VERSION}"))
        .join("libredis_cell.so");
    if cache.is_file() {
        println!("redis-cell {VERSION}: cached module {}", cache.display());
        return Ok(cache);
    }
    let work = std::env::temp_dir().join(format!("floodwall-redis-cell-{}", std::process::id()));
    let built = build(&work);
    let result = built.and_then(|so| {
        let dir = cache.parent().expect("the cache has a parent");
        std::fs::create_dir_all(dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
        // Copied then renamed, so a run stopped half-way leaves no truncated module.
        let partial = dir.join(format!("libredis_cell.so.{}", std::process::id()));
        std::fs::copy(&so, &partial).map_err(|e| format!("copy the module: {e}"))?;
        std::fs::rename(&partial, &cache).map_err(|e| format!("cache the module: {e}"))?;
        println!("redis-cell {VERSION}: built and cached {}", cache.display());
        Ok(cache)
    });
    let _ = std::fs::remove_dir_all(&work);
    result
}

/// The target dir this bench runs from: its binary is `<target>/<profile>/deps/cell-<hash>`.
fn target_dir() -> PathBuf {
    let from_exe = std::env::current_exe().ok().and_then(|exe| {
        let deps = exe.parent()?;
        (deps.file_name()? == "deps").then(|| deps.parent()?.parent().map(Path::to_path_buf))?
    });
    from_exe
        .or_else(|| std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("target"))
}

/// Fetches, copies and builds the crate under `work`; returns the built module's path.
fn build(work: &Path) -> Result<PathBuf, String> {
    println!("redis-cell {VERSION}: building the module (once; cached under the target dir)");
    let fetcher = work.join("fetch");
    std::fs::create_dir_all(fetcher.join("src")).map_err(|e| format!("temp dir: {e}"))?;
    let manifest = format!(
        "[package]\nname = \"fetch-redis-cell\"\nversion = \"0.0.0\"\nedition = \"2021\"\n\
         publish = false\n\n[dependencies]\nredis-cell = \"={VERSION}\"\n"
    );
    std::fs::write(fetcher.join("Cargo.toml"), manifest).map_err(|e| format!("manifest: {e}"))?;
    std::fs::write(fetcher.join("src/lib.rs"), "").map_err(|e| format!("lib.rs: {e}"))?;
    run(cargo().arg("fetch").current_dir(&fetcher), "cargo fetch")?;

    let source = registry_source()?;
    let crate_dir = work.join(format!("redis-cell-{VERSION}"));
    run(
        Command::new("cp").arg("-r").arg(&source).arg(&crate_dir),
        "copy the source",
    )?;
    // The versions the fetch resolved, so the build needs nothing more from the registry.
    std::fs::copy(fetcher.join("Cargo.lock"), crate_dir.join("Cargo.lock"))
        .map_err(|e| format!("copy Cargo.lock: {e}"))?;
    let target = work.join("target");
    run(
        cargo()
            .args(["build", "--release"])
            .env("CARGO_TARGET_DIR", &target)
            .current_dir(&crate_dir),
        "cargo build --release",
    )?;
    let so = target.join("release/libredis_cell.so");
    if so.is_file() {
        Ok(so)
    } else {
        Err(format!("the build left no {}", so.display()))
    }
}

/// The cargo that runs this bench (`CARGO`), else the one on the `PATH`.
fn cargo() -> Command {
    Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
}

/// `$CARGO_HOME/registry/src/<index>/redis-cell-<VERSION>`, where `cargo fetch` unpacked it.
fn registry_source() -> Result<PathBuf, String> {
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
        .ok_or("neither CARGO_HOME nor HOME is set")?;
    let src = home.join("registry/src");
    let indexes = std::fs::read_dir(&src).map_err(|e| format!("{}: {e}", src.display()))?;
    indexes
        .filter_map(Result::ok)
        .map(|index| index.path().join(format!("redis-cell-{VERSION}")))
        .find(|dir| dir.join("Cargo.toml").is_file())
        .ok_or_else(|| format!("redis-cell-{VERSION} not found under {}", src.display()))
}

/// Runs `cmd`; the error carries the last lines of its output.
fn run(cmd: &mut Command, what: &str) -> Result<(), String> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{what}: {e}"))?;
    if out.status.success() {
        return Ok(());
    }
    let text = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = text.lines().collect();
    let tail = lines[lines.len().saturating_sub(12)..].join("\n");
    Err(format!("{what} failed ({}):\n{tail}", out.status))
}
