//! The Lua scripts, one per algorithm, and the arguments each takes.
//!
//! Each script is `lua/prelude.lua` (time, cost, TTL helper) followed by the algorithm's file,
//! and runs through [`redis::Script`]: EVALSHA, with a `SCRIPT LOAD` and one retry when the
//! server answers `NOSCRIPT` (after `SCRIPT FLUSH`, a restart or a failover), on every
//! connection kind. Each script touches exactly one key, so it runs on Redis Cluster.

use std::sync::LazyLock;

use floodwall_core::Parameters;
use redis::{Script, ScriptInvocation};

macro_rules! script {
    ($file:literal) => {
        LazyLock::new(|| {
            Script::new(concat!(
                include_str!("lua/prelude.lua"),
                include_str!(concat!("lua/", $file))
            ))
        })
    };
}

static GCRA: LazyLock<Script> = script!("gcra.lua");
static TOKEN_BUCKET: LazyLock<Script> = script!("token_bucket.lua");
static LEAKY_BUCKET: LazyLock<Script> = script!("leaky_bucket.lua");
static FIXED_WINDOW: LazyLock<Script> = script!("fixed_window.lua");
static SLIDING_WINDOW: LazyLock<Script> = script!("sliding_window.lua");
static SLIDING_LOG: LazyLock<Script> = script!("sliding_log.lua");

/// Batch scripts (see `crate::coalesce`): the prelude, `lua/batch.lua`, then the algorithm.
macro_rules! batch_script {
    ($file:literal) => {
        LazyLock::new(|| {
            Script::new(concat!(
                include_str!("lua/prelude.lua"),
                include_str!("lua/batch.lua"),
                include_str!(concat!("lua/", $file))
            ))
        })
    };
}

static GCRA_BATCH: LazyLock<Script> = batch_script!("gcra_batch.lua");
static TOKEN_BUCKET_BATCH: LazyLock<Script> = batch_script!("token_bucket_batch.lua");
static LEAKY_BUCKET_BATCH: LazyLock<Script> = batch_script!("leaky_bucket_batch.lua");
static FIXED_WINDOW_BATCH: LazyLock<Script> = batch_script!("fixed_window_batch.lua");

/// The script for these parameters and its parameter arguments (`ARGV[3..]`), or `None`
/// for an algorithm this crate has no script for (`Parameters` is non-exhaustive).
fn script_for(params: Parameters) -> Option<(&'static Script, [u64; 3], usize)> {
    Some(match params {
        Parameters::Gcra {
            interval,
            tolerance,
        } => (&GCRA, [interval, tolerance, 0], 2),
        Parameters::TokenBucket {
            capacity,
            tick,
            quantum,
        } => (&TOKEN_BUCKET, [capacity, tick, quantum], 3),
        Parameters::LeakyBucket { capacity, interval } => {
            (&LEAKY_BUCKET, [capacity, interval, 0], 2)
        }
        Parameters::FixedWindow { limit, period } => (&FIXED_WINDOW, [limit, period, 0], 2),
        Parameters::SlidingWindow {
            limit,
            precision,
            buckets,
        } => (&SLIDING_WINDOW, [limit, precision, buckets], 3),
        Parameters::SlidingLog { limit, period } => (&SLIDING_LOG, [limit, period, 0], 2),
        _ => return None,
    })
}

/// The EVALSHA call deciding `cost` on `key` at `now` (µs; `None` reads the server's clock),
/// or `None` for an algorithm without a script.
pub(crate) fn invocation(
    params: Parameters,
    key: &[u8],
    now: Option<u64>,
    cost: u64,
) -> Option<ScriptInvocation<'static>> {
    let (script, args, n) = script_for(params)?;
    let mut inv = script.prepare_invoke();
    inv.key(key);
    match now {
        Some(now) => inv.arg(now),
        None => inv.arg(""),
    };
    inv.arg(cost);
    for a in &args[..n] {
        inv.arg(a);
    }
    Some(inv)
}

/// The batch script for these parameters, or `None` where checks are not coalesced (the
/// sliding window and log, whose state is more than one value: see `crate::coalesce`).
fn batch_script_for(params: Parameters) -> Option<(&'static Script, [u64; 3])> {
    let (_, args, _) = script_for(params)?;
    let batch: &'static Script = match params {
        Parameters::Gcra { .. } => &GCRA_BATCH,
        Parameters::TokenBucket { .. } => &TOKEN_BUCKET_BATCH,
        Parameters::LeakyBucket { .. } => &LEAKY_BUCKET_BATCH,
        Parameters::FixedWindow { .. } => &FIXED_WINDOW_BATCH,
        _ => return None,
    };
    Some((batch, args))
}

/// Whether checks under these parameters can be coalesced into one batch call.
pub(crate) fn has_batch(params: Parameters) -> bool {
    batch_script_for(params).is_some()
}

/// The EVALSHA call deciding `costs` (in arrival order) on `key` at `now` in one batch,
/// or `None` for an algorithm without a batch script.
pub(crate) fn batch_invocation(
    params: Parameters,
    key: &[u8],
    now: Option<u64>,
    costs: &[u64],
) -> Option<ScriptInvocation<'static>> {
    let (script, args) = batch_script_for(params)?;
    let mut inv = script.prepare_invoke();
    inv.key(key);
    match now {
        Some(now) => inv.arg(now),
        None => inv.arg(""),
    };
    inv.arg(costs.len());
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
        let all = [
            &GCRA,
            &TOKEN_BUCKET,
            &LEAKY_BUCKET,
            &FIXED_WINDOW,
            &SLIDING_WINDOW,
            &SLIDING_LOG,
        ];
        let hashes: std::collections::HashSet<_> = all.iter().map(|s| s.get_hash()).collect();
        assert_eq!(hashes.len(), 6);
        for a in floodwall_core::Algorithm::all() {
            let p = floodwall_core::Policy::new("p", a, "10/s".parse().unwrap()).unwrap();
            assert!(invocation(p.parameters(), b"k", None, 1).is_some(), "{a}");
        }
    }
}
