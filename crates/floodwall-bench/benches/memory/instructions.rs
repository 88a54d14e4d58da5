//! Instructions per check, counted by callgrind: the memory bench's rows (one thread) with a
//! figure that does not move with the machine's load
//! (`MEMORY_INSTRUCTIONS=1 cargo bench -p floodwall-bench --bench memory`; needs valgrind).
//!
//! Each (row, limiter) runs in a child process of this bench under
//! `valgrind --tool=callgrind`, counting only inside `run_floodwall` / `run_governor`:
//! [`COUNTED`] checks after the row's setup (the 100,000 keys filled, [`WARM`] uncounted
//! checks). The fresh-key row counts each limiter's eviction with its checks: floodwall's at
//! its cap, governor's `retain_recent` every 100,000 keys. Instructions are not time: a
//! cache miss counts as much as a hit, so the 100k-key row looks closer than it runs, and
//! nothing here sees two threads contend; the timed table is the one the targets are read on.

use std::hint::black_box;
use std::process::Command;

use floodwall::{MemoryStore, Policy, StoreExt};

use crate::{Governor, KEYS, governor, keys, quotas};

/// Checks counted per row and limiter.
const COUNTED: usize = 300_000;
/// Uncounted checks first (allocations warmed, a hot key's state created).
const WARM: usize = 1_000;
/// The rows, as the timed table names them.
const ROWS: [&str; 4] = [
    "hot_key_allowed",
    "hot_key_denied",
    "100k_keys",
    "fresh_key_every_call",
];
/// Passed to the child: which row and limiter it counts.
const CHILD: &str = "--count-child";

/// Keys of one row: what call `i` checks.
fn row_keys(row: &str) -> Vec<String> {
    match row {
        "100k_keys" => {
            let ks = keys();
            (0..COUNTED).map(|i| ks[(i * 7) % KEYS].clone()).collect()
        }
        // New keys, named before counting so neither limiter pays for the formatting.
        "fresh_key_every_call" => (0..COUNTED).map(|i| format!("k{i}")).collect(),
        _ => vec!["203.0.113.7".to_owned(); COUNTED],
    }
}

#[inline(never)]
fn run_floodwall(store: &MemoryStore, policy: &Policy, keys: &[String]) {
    for k in keys {
        black_box(store.check_now(k.as_bytes(), policy, 1).unwrap().is_ok());
    }
}

#[inline(never)]
fn run_governor(gov: &Governor, keys: &[String], evict_every: Option<usize>) {
    for (i, k) in keys.iter().enumerate() {
        if evict_every.is_some_and(|n| (i + 1) % n == 0) {
            gov.retain_recent();
        }
        black_box(gov.check_key(k).is_ok());
    }
}

/// In the child: sets the row up, then runs the counted checks.
fn child(row: &str, limiter: &str) {
    let (policy, gq) = quotas(row != "hot_key_denied");
    let store = MemoryStore::new();
    let gov = governor(gq);
    if row == "100k_keys" {
        for k in keys() {
            store
                .check_now(k.as_bytes(), &policy, 1)
                .unwrap()
                .expect("a check");
            let _ = gov.check_key(&k);
        }
    }
    let warm: Vec<String> = match row {
        "fresh_key_every_call" => (0..WARM).map(|i| format!("warm{i}")).collect(),
        _ => row_keys(row).into_iter().take(WARM).collect(),
    };
    let counted = row_keys(row);
    let evict_every = (row == "fresh_key_every_call").then_some(store.max_keys());
    match limiter {
        "floodwall" => {
            run_floodwall(&store, &policy, &warm);
            run_floodwall(&store, &policy, &counted);
        }
        _ => {
            run_governor(&gov, &warm, None);
            run_governor(&gov, &counted, evict_every);
        }
    }
}

/// Instructions per check of one row and limiter, from a child under callgrind. The warm-up
/// runs through the same functions, so it is counted in (a third of a percent of a row).
fn count(row: &str, limiter: &str) -> Result<f64, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let out = Command::new("valgrind")
        .args([
            "--tool=callgrind",
            "--toggle-collect=memory::instructions::run_*",
            "--callgrind-out-file=/dev/null",
        ])
        .arg(exe)
        .args([CHILD, row, limiter])
        .output()
        .map_err(|e| format!("valgrind: {e}"))?;
    let log = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        return Err(format!("{row} {limiter}: {log}"));
    }
    let collected: f64 = log
        .lines()
        .find_map(|l| l.split("Collected :").nth(1))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| format!("{row} {limiter}: no count in valgrind's output: {log}"))?;
    if collected == 0.0 {
        return Err(format!(
            "{row} {limiter}: callgrind collected nothing (no function \
             memory::instructions::run_*?)"
        ));
    }
    Ok(collected / (COUNTED + WARM) as f64)
}

/// `Some(())` if this process is a counting child (it has counted); else `None`.
pub(crate) fn as_child() -> Option<()> {
    let args: Vec<String> = std::env::args().collect();
    let at = args.iter().position(|a| a == CHILD)?;
    let (row, limiter) = (args.get(at + 1)?, args.get(at + 2)?);
    child(row, limiter);
    Some(())
}

/// Counts every row for both limiters and prints the table.
pub(crate) fn report() {
    if !crate::support::have("valgrind") {
        println!("note: valgrind not found (Debian package valgrind); nothing to count");
        return;
    }
    println!(
        "instructions per check (callgrind, one thread; {COUNTED} checks after {WARM}, the \
         warm-up counted in: at most {:.1} % of a row)",
        100.0 * WARM as f64 / (COUNTED + WARM) as f64
    );
    println!(
        "{:<24} {:>14} {:>14} {:>8}",
        "case", "floodwall Ir", "governor Ir", "ratio"
    );
    for row in ROWS {
        match (count(row, "floodwall"), count(row, "governor")) {
            (Ok(a), Ok(b)) => println!("{row:<24} {a:>14.0} {b:>14.0} {:>8.2}", a / b),
            (Err(e), _) | (_, Err(e)) => println!("{row:<24} failed: {e}"),
        }
    }
    println!(
        "(ratio = floodwall / governor, lower is better; governor on ahash, with retain_recent \
         every 100,000 keys in the fresh-key row, counted)"
    );
}
