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
//!
//! A single check's script has its policy's parameters written into its text ([`Scripts`]):
//! each argument costs Redis a string and the script a `tonumber`, together about a fifth
//! of an empty script call, so a check of cost 1 on the server's clock sends no argument.
//! A store writes scripts so for a bounded number of parameter sets
//! (`RedisStoreBuilder::written_scripts`); checks under any more run the algorithm's
//! generic script, which reads the parameters from `ARGV`, as batches always do.

use std::sync::{Arc, LazyLock};

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

/// The algorithms that are whole scripts after the prelude (scripts 3 and 4).
const WHOLE: [&str; 2] = [
    include_str!("lua/sliding_window.lua"),
    include_str!("lua/sliding_log.lua"),
];

/// Where a batch's explicit time sits: after the count and three (padded) parameters; the
/// costs follow it.
const BATCH_NOW: usize = 5;

/// `source` with the explicit time's index written where it says `{now}`, so that each
/// layout is stated once, here, rather than in Lua too.
fn at_now(source: &str, now: usize) -> String {
    source.replace("{now}", &now.to_string())
}

/// `source` with its parameter placeholders `{p1}`..`{p3}` written as numbers, or as reads
/// of `ARGV[2..4]` when `written` is `None`.
fn with_params(source: &str, written: Option<&[u64; 3]>) -> String {
    (0..3).fold(source.to_owned(), |text, i| {
        let value = match written {
            Some(params) => params[i].to_string(),
            None => format!("tonumber(ARGV[{}])", i + 2),
        };
        text.replace(&format!("{{p{}}}", i + 1), &value)
    })
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
    format!("{}{load}{body}", at_now(PRELUDE, now))
}

/// How many parameter arguments each generic script (in [`Layout::script`] order) takes.
const PARAMS: [usize; 5] = [2, 3, 2, 3, 2];

/// A single check's script: number `script` (see [`Layout`]), its parameters written in or,
/// with `None`, read after the cost; an explicit time follows what it reads.
fn single_source(script: usize, written: Option<&[u64; 3]>) -> String {
    let now = match written {
        Some(_) => 2,
        None => PARAMS[script] + 2,
    };
    let text = match STEPPED.get(script) {
        Some(algorithm) => assemble(algorithm, SINGLE, now),
        None => format!("{}{}", at_now(PRELUDE, now), WHOLE[script - STEPPED.len()]),
    };
    with_params(&text, written)
}

/// The generic single-check scripts, one per algorithm.
static SCRIPTS: LazyLock<[Script; 5]> =
    LazyLock::new(|| std::array::from_fn(|i| Script::new(&single_source(i, None))));

/// Batches (see `crate::coalesce`) of the algorithms that have a step.
static BATCH_SCRIPTS: LazyLock<[Script; 3]> = LazyLock::new(|| {
    STEPPED.map(|a| Script::new(&with_params(&assemble(a, BATCH, BATCH_NOW), None)))
});

/// Where these parameters' scripts sit in the script lists (0 GCRA, 1 token bucket, 2 fixed
/// window: these three have batches; 3 sliding window, 4 sliding log), their parameters
/// (padded with 0; [`PARAMS`] says how many count), and how their single check's reply
/// reads: built together, so the leaky bucket's translation into GCRA is written once.
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
            ReplyKind::SlidingWindow {
                limit,
                precision,
                buckets,
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

/// The script with `params` written in, as a store loads it for the first parameter sets
/// it meets: for measuring a script's cost in Redis directly (`benches/scripts/main.rs`)
/// or reviewing it. A check of cost 1 on the server's clock is `EVALSHA <sha> 1 <key>`, of
/// cost `c` `EVALSHA <sha> 1 <key> <c>` (an explicit time, in µs, would follow the cost).
/// `None` for an algorithm this crate has no script for.
pub fn script_for(params: Parameters) -> Option<String> {
    layout(params).map(|l| single_source(l.script, Some(&l.args)))
}

/// The single-check scripts of one store: for each parameter set, up to a bound, a script
/// with the parameters written in, made and hashed once. Policies are usually a handful;
/// the bound keeps policies made on the fly (a quota per tenant) from filling Redis's
/// script cache, which nothing empties.
pub(crate) struct Scripts {
    /// By what the text depends on: the script and its parameters (so the leaky bucket
    /// shares its GCRA twin's).
    written: papaya::HashMap<(usize, [u64; 3]), Arc<Script>, ahash::RandomState>,
    bound: usize,
}

/// A script one check runs: the generic one of its algorithm, or its parameters' own.
enum Chosen {
    Generic(&'static Script),
    Written(Arc<Script>),
}

/// What one check runs: its script, how to call it, and how to read the reply.
pub(crate) struct Single {
    script: Chosen,
    layout: Layout,
}

impl Scripts {
    /// Scripts of their own for up to `bound` parameter sets.
    pub(crate) fn new(bound: usize) -> Self {
        Self {
            written: papaya::HashMap::builder()
                .hasher(ahash::RandomState::new())
                .build(),
            bound,
        }
    }

    /// The script for a check under `params`, or `None` for an algorithm without one.
    pub(crate) fn single(&self, params: Parameters) -> Option<Single> {
        let layout = layout(params)?;
        let map = self.written.pin();
        let text_of = (layout.script, layout.args);
        let script = match map.get(&text_of) {
            Some(script) => Chosen::Written(Arc::clone(script)),
            // Checked, then inserted, without a lock: first checks of new parameter sets
            // racing here can pass the bound by a few, never by more than they are.
            None if map.len() >= self.bound => Chosen::Generic(&SCRIPTS[layout.script]),
            None => Chosen::Written(Arc::clone(map.get_or_insert_with(text_of, || {
                Arc::new(Script::new(&single_source(
                    layout.script,
                    Some(&layout.args),
                )))
            }))),
        };
        Some(Single { script, layout })
    }

    /// How many parameter sets have a script of their own.
    #[cfg(test)]
    fn written(&self) -> usize {
        self.written.len()
    }
}

impl Single {
    /// How the reply reads (see `crate::reply`).
    pub(crate) fn reply(&self) -> ReplyKind {
        self.layout.reply
    }

    /// The EVALSHA call deciding `cost` on `key` at `now` (µs; `None` reads the server's
    /// clock). `ARGV`: the cost, the parameters unless written in, then the time if
    /// explicit; a written script on the server's clock is sent no cost of 1.
    pub(crate) fn invocation(
        &self,
        key: &[u8],
        now: Option<u64>,
        cost: u64,
    ) -> ScriptInvocation<'_> {
        let script = match &self.script {
            Chosen::Generic(script) => script,
            Chosen::Written(script) => &**script,
        };
        let mut inv = script.prepare_invoke();
        inv.key(key);
        for a in self.args(now, cost) {
            inv.arg(a);
        }
        inv
    }

    /// The `ARGV` of [`invocation`](Self::invocation).
    fn args(&self, now: Option<u64>, cost: u64) -> impl Iterator<Item = u64> + '_ {
        let (cost, params): (Option<u64>, &[u64]) = match self.script {
            Chosen::Written(_) => ((cost != 1 || now.is_some()).then_some(cost), &[]),
            Chosen::Generic(_) => (Some(cost), &self.layout.args[..PARAMS[self.layout.script]]),
        };
        cost.into_iter().chain(params.iter().copied()).chain(now)
    }
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

    fn every_policy() -> Vec<floodwall_core::Policy> {
        floodwall_core::Algorithm::all()
            .into_iter()
            .map(|a| floodwall_core::Policy::new("p", a, "10/s".parse().unwrap()).unwrap())
            .collect()
    }

    #[test]
    fn each_algorithm_has_its_own_script_with_the_prelude() {
        let hashes: std::collections::HashSet<_> = SCRIPTS
            .iter()
            .chain(BATCH_SCRIPTS.iter())
            .map(|s| s.get_hash())
            .collect();
        assert_eq!(hashes.len(), 8);
        for p in every_policy() {
            let a = p.algorithm();
            let source = script_for(p.parameters()).unwrap();
            assert!(source.starts_with("-- floodwall: prepended"), "{a}");
            // A written script's explicit time is the argument after the cost.
            assert!(source.contains("ARGV[2]"), "{a}");
            let generic = single_source(layout(p.parameters()).unwrap().script, None);
            for text in [&source, &generic] {
                for marker in ["{now}", "{p1}", "{p2}", "{p3}", "-- {step}", "-- @save"] {
                    assert!(!text.contains(marker), "{a}: {marker}");
                }
                // No table is built for a single check's answer.
                assert!(!text.contains("return {"), "{a}");
            }
            assert!(
                !source.contains("tonumber(ARGV[3])"),
                "{a}: parameters written in"
            );
            assert!(
                generic.contains("tonumber(ARGV[3])"),
                "{a}: parameters read"
            );
        }
    }

    #[test]
    fn a_written_script_is_sent_only_the_arguments_it_needs() {
        let scripts = Scripts::new(4);
        let p = &every_policy()[0];
        let single = scripts.single(p.parameters()).unwrap();
        let args = |now, cost| single.args(now, cost).collect::<Vec<_>>();
        assert_eq!(args(None, 1), []);
        assert_eq!(args(None, 3), [3]);
        assert_eq!(args(Some(5), 1), [1, 5]);
        // The generic script is sent the cost and the parameters (GCRA: two).
        let generic = Single {
            script: Chosen::Generic(&SCRIPTS[0]),
            layout: single.layout,
        };
        let sent: Vec<u64> = generic.args(None, 1).collect();
        assert_eq!(sent, [1, single.layout.args[0], single.layout.args[1]]);
        assert_eq!(scripts.written(), 1);
        // The same parameters share the script.
        scripts.single(p.parameters()).unwrap();
        assert_eq!(scripts.written(), 1);
    }

    #[test]
    fn past_the_bound_checks_run_the_generic_script() {
        const BOUND: usize = 5;
        let scripts = Scripts::new(BOUND);
        for n in 1..=BOUND as u64 + 2 {
            let policy =
                floodwall_core::Policy::gcra("p", format!("{n}/s").parse().unwrap()).unwrap();
            let single = scripts.single(policy.parameters()).unwrap();
            let generic = matches!(single.script, Chosen::Generic(_));
            assert_eq!(generic, n as usize > BOUND, "{n}");
        }
        assert_eq!(scripts.written(), BOUND);
    }
}
