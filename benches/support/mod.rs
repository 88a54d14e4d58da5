//! Helpers the benches share: criterion's estimates, Linux CPU and memory counters, Redis's
//! `INFO commandstats`. Each bench uses some of them.

#![allow(dead_code)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Where criterion writes its estimates (`CRITERION_HOME`, else under the target dir).
fn criterion_dir() -> PathBuf {
    if let Some(home) = std::env::var_os("CRITERION_HOME") {
        PathBuf::from(home)
    } else if let Some(target) = std::env::var_os("CARGO_TARGET_DIR") {
        PathBuf::from(target).join("criterion")
    } else {
        PathBuf::from("target/criterion")
    }
}

/// Criterion's `stat` estimate (`"mean"` or `"median"`) of the ns per iteration of one
/// benchmark, from its `new/estimates.json`.
pub(crate) fn estimate_ns(group: &str, id: &str, stat: &str) -> Option<f64> {
    let path = criterion_dir()
        .join(group)
        .join(id)
        .join("new/estimates.json");
    let text = std::fs::read_to_string(path).ok()?;
    let at = text.find(&format!("\"{stat}\""))?;
    let v = text[at..].split("\"point_estimate\":").nth(1)?;
    v.split([',', '}']).next()?.trim().parse().ok()
}

/// The first field of a `schedstat` file: nanoseconds the task has run on a CPU.
pub(crate) fn schedstat_ns(path: &Path) -> Option<u64> {
    let text = std::fs::read_to_string(path).ok()?;
    text.split_whitespace().next()?.parse().ok()
}

/// Resident memory of this process, in bytes (0 where `/proc` has none).
pub(crate) fn rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// `cmdstat_evalsha:calls=1,usec=2,...` lines of `INFO commandstats` as
/// command -> field -> value.
pub(crate) fn commandstats(text: &str) -> HashMap<String, HashMap<String, String>> {
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("cmdstat_"))
        .filter_map(|l| l.split_once(':'))
        .map(|(cmd, fields)| {
            let fields = fields
                .split(',')
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect();
            (cmd.to_owned(), fields)
        })
        .collect()
}
