//! Shared by the core's integration tests.

/// Resident memory of this process, in bytes (Linux): for bounds on memory, not timing.
pub(crate) fn rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kb = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .unwrap();
    kb * 1024
}
