//! The scripts' text, put together from `src/lua/`.
//!
//! Every script starts with `lua/prelude.lua` (the time, the cost, shared names). A
//! [stepped](Lua::Stepped) algorithm's script is the prelude, its load section, then a
//! driver (`lua/single.lua` for one check, `lua/batch.lua` for a coalesced batch) with the
//! algorithm's `@step`, `@save` and `@reply` sections pasted where the driver marks them. A
//! [whole](Lua::Whole) one is its file after the prelude, with no batch. A single check's
//! script either has its policy's parameters written into its text as numbers or reads
//! them from `ARGV` (see `crate::call` for which).

use floodwall_core::Parameters;

use crate::kind::{Layout, Lua, ScriptKind};

const PRELUDE: &str = include_str!("lua/prelude.lua");
const SINGLE: &str = include_str!("lua/single.lua");
const BATCH: &str = include_str!("lua/batch.lua");

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

/// A single check's script of `kind`, its parameters written in or, with `None`, read
/// after the cost; an explicit time follows what it reads.
pub(crate) fn single(kind: ScriptKind, written: Option<&[u64; 3]>) -> String {
    let spec = kind.spec();
    let now = match written {
        Some(_) => 2,
        None => spec.params + 2,
    };
    let text = match spec.lua {
        Lua::Stepped(algorithm) => assemble(algorithm, SINGLE, now),
        Lua::Whole(script) => format!("{}{script}", at_now(PRELUDE, now)),
    };
    with_params(&text, written)
}

/// The batch script of `kind` (see `crate::coalesce`), which reads its parameters from
/// `ARGV`; `None` for a kind that is never coalesced.
pub(crate) fn batch(kind: ScriptKind) -> Option<String> {
    match kind.spec().lua {
        Lua::Stepped(algorithm) => Some(with_params(&assemble(algorithm, BATCH, BATCH_NOW), None)),
        Lua::Whole(_) => None,
    }
}

/// The script with `params` written in, as a store loads it for the first parameter sets
/// it meets: for measuring a script's cost in Redis directly (`crates/floodwall-bench/benches/scripts/main.rs`)
/// or reviewing it. A check of cost 1 on the server's clock is `EVALSHA <sha> 1 <key>`, of
/// cost `c` `EVALSHA <sha> 1 <key> <c>` (an explicit time, in µs, would follow the cost).
/// `None` for an algorithm this crate has no script for.
pub fn script_for(params: Parameters) -> Option<String> {
    Layout::of(params).map(|l| single(l.kind, Some(&l.args)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_script_has_the_prelude_and_no_placeholder_left() {
        for a in floodwall_core::Algorithm::all() {
            let p = floodwall_core::Policy::new("p", a, "10/s".parse().unwrap()).unwrap();
            let source = script_for(p.parameters()).unwrap();
            assert!(source.starts_with("-- floodwall: prepended"), "{a}");
            // A written script's explicit time is the argument after the cost.
            assert!(source.contains("ARGV[2]"), "{a}");
            let kind = Layout::of(p.parameters()).unwrap().kind;
            let generic = single(kind, None);
            let batch = batch(kind);
            for text in [&source, &generic].into_iter().chain(&batch) {
                for marker in ["{now}", "{p1}", "{p2}", "{p3}", "-- {step}", "-- @save"] {
                    assert!(!text.contains(marker), "{a}: {marker}");
                }
            }
            for text in [&source, &generic] {
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
}
