//! The Lua scripts, one per algorithm, and the arguments each takes.
//!
//! Each script is `lua/prelude.lua` (time, cost, TTL helper) followed by the algorithm's file,
//! and runs through [`redis::Script`]: EVALSHA, with a `SCRIPT LOAD` and one retry when the
//! server answers `NOSCRIPT` (after `SCRIPT FLUSH`, a restart or a failover), on every
//! connection kind. Each script touches exactly one key, so it runs on Redis Cluster.

use std::sync::LazyLock;

use floodwall_core::Parameters;
use redis::{Script, ScriptInvocation};

const PRELUDE: &str = include_str!("lua/prelude.lua");
const SINGLE: &str = include_str!("lua/single.lua");
const BATCH: &str = include_str!("lua/batch.lua");

/// The algorithms written as sections (load, `-- @step`, `-- @save`) for a driver to paste
/// in: one definition serves single checks and batches, and builds no Lua closure.
const STEPPED: [&str; 4] = [
    include_str!("lua/gcra.lua"),
    include_str!("lua/token_bucket.lua"),
    include_str!("lua/leaky_bucket.lua"),
    include_str!("lua/fixed_window.lua"),
];

/// The prelude, the algorithm's load section, and the driver with the algorithm's `@step`
/// and `@save` sections pasted where it marks them.
fn assemble(algorithm: &str, driver: &str) -> String {
    let (load, rest) = algorithm
        .split_once("-- @step\n")
        .expect("every stepped script has a `-- @step` section (unit-tested)");
    let (step, save) = rest
        .split_once("-- @save\n")
        .expect("every stepped script has a `-- @save` section (unit-tested)");
    let body = driver
        .replace("-- {step}\n", step)
        .replace("-- {save}\n", save);
    format!("{PRELUDE}{load}{body}")
}

/// One check per algorithm; the sliding window and log are whole scripts of their own.
static SOURCES: LazyLock<[String; 6]> = LazyLock::new(|| {
    let [gcra, token, leaky, fixed] = STEPPED.map(|a| assemble(a, SINGLE));
    [
        gcra,
        token,
        leaky,
        fixed,
        format!("{PRELUDE}{}", include_str!("lua/sliding_window.lua")),
        format!("{PRELUDE}{}", include_str!("lua/sliding_log.lua")),
    ]
});

/// Batches (see `crate::coalesce`) of the algorithms that have a step.
static BATCH_SOURCES: LazyLock<[String; 4]> = LazyLock::new(|| STEPPED.map(|a| assemble(a, BATCH)));

static SCRIPTS: LazyLock<[Script; 6]> =
    LazyLock::new(|| SOURCES.each_ref().map(|s| Script::new(s)));
static BATCH_SCRIPTS: LazyLock<[Script; 4]> =
    LazyLock::new(|| BATCH_SOURCES.each_ref().map(|s| Script::new(s)));

/// Where these parameters' scripts sit in [`SOURCES`] / [`BATCH_SOURCES`] (the batches are
/// the first four), and their parameter arguments (`ARGV[3..]`, padded with 0, and how
/// many count); `None` for an algorithm this crate has no script for (`Parameters` is
/// non-exhaustive).
fn layout(params: Parameters) -> Option<(usize, [u64; 3], usize)> {
    Some(match params {
        Parameters::Gcra {
            interval,
            tolerance,
        } => (0, [interval, tolerance, 0], 2),
        Parameters::TokenBucket {
            capacity,
            tick,
            quantum,
        } => (1, [capacity, tick, quantum], 3),
        Parameters::LeakyBucket { capacity, interval } => (2, [capacity, interval, 0], 2),
        Parameters::FixedWindow { limit, period } => (3, [limit, period, 0], 2),
        Parameters::SlidingWindow {
            limit,
            precision,
            buckets,
        } => (4, [limit, precision, buckets], 3),
        Parameters::SlidingLog { limit, period } => (5, [limit, period, 0], 2),
        _ => return None,
    })
}

/// The Lua source a single check under `params` runs, as the store loads it, and the
/// parameter arguments it takes after the time and the cost (`ARGV[3..]`): for measuring a
/// script's cost in Redis directly (`benches/scripts.rs`) or reviewing it. `None` for an
/// algorithm this crate has no script for.
pub fn script_for(params: Parameters) -> Option<(&'static str, Vec<u64>)> {
    layout(params).map(|(i, args, n)| (SOURCES[i].as_str(), args[..n].to_vec()))
}

/// `KEYS[1]` and `ARGV[1..2]`: the key, the time (`''` reads the server's clock), the cost
/// (or a batch's length).
fn prepare(
    script: &'static Script,
    key: &[u8],
    now: Option<u64>,
    second: u64,
) -> ScriptInvocation<'static> {
    let mut inv = script.prepare_invoke();
    inv.key(key);
    match now {
        Some(now) => inv.arg(now),
        None => inv.arg(""),
    };
    inv.arg(second);
    inv
}

/// The EVALSHA call deciding `cost` on `key` at `now` (µs; `None` reads the server's clock),
/// or `None` for an algorithm without a script.
pub(crate) fn invocation(
    params: Parameters,
    key: &[u8],
    now: Option<u64>,
    cost: u64,
) -> Option<ScriptInvocation<'static>> {
    let (i, args, n) = layout(params)?;
    let mut inv = prepare(&SCRIPTS[i], key, now, cost);
    for a in &args[..n] {
        inv.arg(a);
    }
    Some(inv)
}

/// Whether checks under these parameters can be coalesced into one batch call: not for
/// the sliding window and log, whose state is more than one value (see `crate::coalesce`).
pub(crate) fn has_batch(params: Parameters) -> bool {
    layout(params).is_some_and(|(i, _, _)| i < STEPPED.len())
}

/// The EVALSHA call deciding `costs` (in arrival order) on `key` at `now` in one batch,
/// or `None` for an algorithm without a batch script.
pub(crate) fn batch_invocation(
    params: Parameters,
    key: &[u8],
    now: Option<u64>,
    costs: &[u64],
) -> Option<ScriptInvocation<'static>> {
    let (i, args, _) = layout(params).filter(|&(i, _, _)| i < STEPPED.len())?;
    let mut inv = prepare(&BATCH_SCRIPTS[i], key, now, costs.len() as u64);
    for a in args {
        inv.arg(a);
    }
    for c in costs {
        inv.arg(c);
    }
    Some(inv)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_algorithm_has_its_own_script_with_the_prelude() {
        let hashes: std::collections::HashSet<_> = SCRIPTS
            .iter()
            .chain(BATCH_SCRIPTS.iter())
            .map(|s| s.get_hash())
            .collect();
        assert_eq!(hashes.len(), 10);
        for a in floodwall_core::Algorithm::all() {
            let p = floodwall_core::Policy::new("p", a, "10/s".parse().unwrap()).unwrap();
            assert!(invocation(p.parameters(), b"k", None, 1).is_some(), "{a}");
            let (source, _) = script_for(p.parameters()).unwrap();
            assert!(source.starts_with(PRELUDE), "{a}");
            assert!(
                !source.contains("-- {step}") && !source.contains("-- @save"),
                "{a}"
            );
        }
    }
}
