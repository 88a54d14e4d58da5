//! The Lua scripts, and the arguments each takes.
//!
//! Every script starts with `lua/prelude.lua` (the time, the cost, shared names). GCRA
//! (which the leaky bucket runs too), the token bucket and the fixed window are written as
//! sections, so that one definition serves both paths: their script is the prelude, the
//! algorithm's load section, then a driver (`lua/single.lua` for one check, `lua/batch.lua`
//! for a coalesced batch) with the algorithm's `@step`, `@save` and `@reply` sections pasted
//! in. The sliding window and log are whole files after the prelude, with no batch. Each
//! runs through [`redis::Script`]: EVALSHA, with a `SCRIPT LOAD` and one retry when the
//! server answers `NOSCRIPT` (after `SCRIPT FLUSH`, a restart or a failover), on every
//! connection kind. Each script touches exactly one key, so it runs on Redis Cluster.

use std::sync::LazyLock;

use floodwall_core::Parameters;
use redis::{Script, ScriptInvocation};

use crate::reply::ReplyKind;

const PRELUDE: &str = include_str!("lua/prelude.lua");
const SINGLE: &str = include_str!("lua/single.lua");
const BATCH: &str = include_str!("lua/batch.lua");

/// The algorithms written as sections (load, `-- @step`, `-- @save` and
/// `-- @reply`) for a driver to paste in: one definition serves single checks and batches,
/// and builds no Lua closure. The leaky bucket is GCRA underneath (floodwall-core's
/// `algorithm/leaky_bucket.rs`) and runs GCRA's script.
const STEPPED: [&str; 3] = [
    include_str!("lua/gcra.lua"),
    include_str!("lua/token_bucket.lua"),
    include_str!("lua/fixed_window.lua"),
];

/// Where a batch's explicit time sits: after the count and three (padded) parameters; the
/// costs follow it.
const BATCH_NOW: usize = 5;

/// `source` with the explicit time's index written where it says `{now}`, so that each
/// layout is stated once, here, rather than in Lua too.
fn at_now(source: &str, now: usize) -> String {
    source.replace("{now}", &now.to_string())
}

/// The prelude, reading an explicit time from `ARGV[now]`.
fn prelude(now: usize) -> String {
    at_now(PRELUDE, now)
}

/// The prelude, the algorithm's load section, and the driver with the algorithm's `@step`,
/// `@save` and `@reply` sections pasted where it marks them (and its `{now}` written).
fn assemble(algorithm: &str, driver: &str, now: usize) -> String {
    let (load, rest) = algorithm
        .split_once("-- @step\n")
        .expect("every stepped script has a `-- @step` section (unit-tested)");
    let (step, rest) = rest
        .split_once("-- @save\n")
        .expect("every stepped script has a `-- @save` section (unit-tested)");
    let (save, reply) = rest
        .split_once("-- @reply\n")
        .expect("every stepped script has a `-- @reply` section (unit-tested)");
    let body = at_now(driver, now)
        .replace("-- {step}\n", step)
        .replace("-- {save}\n", save)
        .replace("-- {reply}\n", reply);
    format!("{}{load}{body}", prelude(now))
}

/// How many parameter arguments each script (in [`SOURCES`] order) takes.
const PARAMS: [usize; 5] = [2, 3, 2, 3, 2];

/// Where a single check's explicit time sits: after the cost and the parameters.
const fn single_now(params: usize) -> usize {
    params + 2
}

/// One check per algorithm; the sliding window and log are whole scripts of their own.
static SOURCES: LazyLock<[String; 5]> = LazyLock::new(|| {
    let stepped = |i: usize| assemble(STEPPED[i], SINGLE, single_now(PARAMS[i]));
    let whole = |i: usize, source: &str| format!("{}{source}", prelude(single_now(PARAMS[i])));
    [
        stepped(0),
        stepped(1),
        stepped(2),
        whole(3, include_str!("lua/sliding_window.lua")),
        whole(4, include_str!("lua/sliding_log.lua")),
    ]
});

/// Batches (see `crate::coalesce`) of the algorithms that have a step.
static BATCH_SOURCES: LazyLock<[String; 3]> =
    LazyLock::new(|| STEPPED.map(|a| assemble(a, BATCH, BATCH_NOW)));

static SCRIPTS: LazyLock<[Script; 5]> =
    LazyLock::new(|| SOURCES.each_ref().map(|s| Script::new(s)));
static BATCH_SCRIPTS: LazyLock<[Script; 3]> =
    LazyLock::new(|| BATCH_SOURCES.each_ref().map(|s| Script::new(s)));

/// Where these parameters' scripts sit in [`SOURCES`] / [`BATCH_SOURCES`] (the batches are
/// the first three), their parameter arguments (padded with 0; [`PARAMS`] says how many
/// count), and how their single check's reply reads: built together, so the leaky bucket's
/// translation into GCRA is written once.
#[derive(Debug, Clone, Copy)]
struct Layout {
    script: usize,
    args: [u64; 3],
    reply: ReplyKind,
}

/// The layout of checks under `params`; `None` for an algorithm this crate has no script for
/// (`Parameters` is non-exhaustive).
fn layout(params: Parameters) -> Option<Layout> {
    let (script, args, reply) = match params {
        Parameters::Gcra {
            interval,
            tolerance,
        } => (
            0,
            [interval, tolerance, 0],
            ReplyKind::Gcra {
                interval,
                tolerance,
            },
        ),
        Parameters::TokenBucket {
            capacity,
            tick,
            quantum,
        } => (
            1,
            [capacity, tick, quantum],
            ReplyKind::TokenBucket {
                capacity,
                tick,
                quantum,
            },
        ),
        Parameters::LeakyBucket { capacity, interval } => {
            let tolerance = capacity.saturating_mul(interval);
            (
                0,
                [interval, tolerance, 0],
                ReplyKind::Gcra {
                    interval,
                    tolerance,
                },
            )
        }
        Parameters::FixedWindow { limit, period } => (
            2,
            [limit, period, 0],
            ReplyKind::FixedWindow { limit, period },
        ),
        Parameters::SlidingWindow {
            limit,
            precision,
            buckets,
        } => (
            3,
            [limit, precision, buckets],
            ReplyKind::Sliding {
                limit,
                period: precision.saturating_mul(buckets),
            },
        ),
        Parameters::SlidingLog { limit, period } => {
            (4, [limit, period, 0], ReplyKind::Sliding { limit, period })
        }
        _ => return None,
    };
    Some(Layout {
        script,
        args,
        reply,
    })
}

/// The Lua source a single check under `params` runs, as the store loads it, and the
/// parameter arguments it takes after the cost: a check of cost `c` on the server's clock
/// is `EVALSHA <sha> 1 <key> <c> <parameters...>` (an explicit time, in µs, would follow
/// them). For measuring a script's cost in Redis directly (`benches/scripts.rs`) or
/// reviewing it. `None` for an algorithm this crate has no script for.
pub fn script_for(params: Parameters) -> Option<(&'static str, Vec<u64>)> {
    layout(params).map(|l| {
        (
            SOURCES[l.script].as_str(),
            l.args[..PARAMS[l.script]].to_vec(),
        )
    })
}

/// The EVALSHA call deciding `cost` on `key` at `now` (µs; `None` reads the server's clock),
/// and how to read its reply (see `crate::reply`), or `None` for an algorithm without a
/// script. `ARGV`: the cost, the parameters, then the time if explicit; on the server's
/// clock the call carries no argument it does not need.
pub(crate) fn invocation(
    params: Parameters,
    key: &[u8],
    now: Option<u64>,
    cost: u64,
) -> Option<(ScriptInvocation<'static>, ReplyKind)> {
    let Layout {
        script,
        args,
        reply,
    } = layout(params)?;
    let mut inv = SCRIPTS[script].prepare_invoke();
    inv.key(key).arg(cost);
    for a in &args[..PARAMS[script]] {
        inv.arg(a);
    }
    if let Some(now) = now {
        inv.arg(now);
    }
    Some((inv, reply))
}

/// A batch script and its parameter arguments. Only [`batch_layout`] makes one, so holding
/// one is the proof that the algorithm has a batch: nothing downstream checks again.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BatchLayout {
    script: usize,
    args: [u64; 3],
}

/// The batch for checks under these parameters, or `None` when they cannot be coalesced
/// into one call: the sliding window and log, whose state is more than one value (see
/// `crate::coalesce`).
pub(crate) fn batch_layout(params: Parameters) -> Option<BatchLayout> {
    layout(params)
        .filter(|l| l.script < STEPPED.len())
        .map(|l| BatchLayout {
            script: l.script,
            args: l.args,
        })
}

/// The EVALSHA call deciding `costs` (in arrival order) on `key` at `now` in one batch.
/// `ARGV`: the number of checks, the parameters padded to three, the time (`''` reads the
/// server's clock), the costs.
pub(crate) fn batch_invocation(
    layout: BatchLayout,
    key: &[u8],
    now: Option<u64>,
    costs: &[u64],
) -> ScriptInvocation<'static> {
    let mut inv = BATCH_SCRIPTS[layout.script].prepare_invoke();
    inv.key(key).arg(costs.len());
    for a in layout.args {
        inv.arg(a);
    }
    match now {
        Some(now) => inv.arg(now),
        None => inv.arg(""),
    };
    for c in costs {
        inv.arg(c);
    }
    inv
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
        assert_eq!(hashes.len(), 8);
        for a in floodwall_core::Algorithm::all() {
            let p = floodwall_core::Policy::new("p", a, "10/s".parse().unwrap()).unwrap();
            assert!(invocation(p.parameters(), b"k", None, 1).is_some(), "{a}");
            let (source, params) = script_for(p.parameters()).unwrap();
            assert!(source.starts_with("-- floodwall: prepended"), "{a}");
            // The explicit time is the argument after the parameters.
            let now = format!("ARGV[{}]", params.len() + 2);
            assert!(source.contains(&now), "{a}: {now}");
            for marker in ["{now}", "-- {step}", "-- @save", "-- {reply}", "-- @reply"] {
                assert!(!source.contains(marker), "{a}: {marker}");
            }
            // No table is built for a single check's answer.
            assert!(!source.contains("return {"), "{a}");
        }
    }
}
