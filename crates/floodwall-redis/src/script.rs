//! The scripts' text, put together from `src/lua/`.
//!
//! Every script starts with `lua/prelude.lua` (the time, the cost, shared names). A
//! [stepped](Lua::Stepped) algorithm's script is the prelude, its parameters section, then
//! a driver (`lua/single.lua` for one check, `lua/batch.lua` for a batch of checks of one
//! key or several) with the algorithm's `@load`, `@step`, `@save` and `@reply` sections
//! pasted where the driver marks them. The `@load` marker names the variables that make up
//! a key's state (`-- @load tat old`): the batch driver keeps them per key between checks,
//! in one Lua table per variable, with the lines written here. A [whole](Lua::Whole) one is
//! its file after the prelude, with no batch. A single check's script either has its
//! policy's parameters written into its text as numbers or reads them from `ARGV` (see
//! `crate::call` for which).
//!
//! A policy with a penalty runs scripts of their own ([`penalized`], [`reserve`] with
//! `penalized`): `lua/penalty.lua`'s `@ban` section where the drivers mark `{ban}` (before
//! the rate key is read) and its `@strike` section where `lua/single.lua` marks `{strike}`
//! (after the step). Every other script has nothing there, so its text, hash and cost are
//! what they were before penalties existed.

use floodwall_core::{Parameters, Penalty};

use crate::kind::{Layout, Lua, ScriptKind};

pub(crate) mod all;

const PRELUDE: &str = include_str!("lua/prelude.lua");
const SINGLE: &str = include_str!("lua/single.lua");
const BATCH: &str = include_str!("lua/batch.lua");
const RESERVE: &str = include_str!("lua/reserve.lua");
const ADJUST: &str = include_str!("lua/adjust.lua");
const PENALTY: &str = include_str!("lua/penalty.lua");

/// How many numbers a penalty passes its script: after, within, ban, growth, max_ban and
/// remembered (durations in µs), in that order (`{q1}`..`{q6}` in `lua/penalty.lua`).
pub(crate) const PENALTY_PARAMS: usize = 6;

/// A penalty's numbers, as its script reads them.
pub(crate) type PenaltyParams = [u64; PENALTY_PARAMS];

/// `penalty`'s numbers as its script reads them (see [`PENALTY_PARAMS`]).
pub(crate) fn penalty_params(penalty: &Penalty) -> PenaltyParams {
    let us = |d: std::time::Duration| u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
    [
        u64::from(penalty.after()),
        us(penalty.within()),
        us(penalty.ban()),
        u64::from(penalty.growth()),
        us(penalty.max_ban()),
        us(penalty.remembered_for()),
    ]
}

/// `lua/penalty.lua`'s `@ban` and `@strike` sections.
fn penalty_sections() -> (&'static str, &'static str) {
    const CUT: &str = "lua/penalty.lua has `-- @ban` and `-- @strike` lines (unit-tested)";
    let (_, rest) = PENALTY.split_once("-- @ban\n").expect(CUT);
    rest.split_once("-- @strike\n").expect(CUT)
}

/// Where a batch's explicit time sits: after the count of checks and three (padded)
/// parameters; the count of keys follows it.
const BATCH_NOW: usize = 5;

/// `source` with the explicit time's index written where it says `{now}`, so that each
/// layout is stated once, here, rather than in Lua too.
fn at_now(source: &str, now: usize) -> String {
    source.replace("{now}", &now.to_string())
}

/// `source` with its placeholders `{<letter>1}`..`{<letter>N}` (`p`: the parameters, `q`: a
/// penalty's numbers) written as numbers, or as reads of `ARGV[first..]` when `written` is
/// `None` (a placeholder the text lacks is left alone).
fn fill<const N: usize>(
    source: &str,
    letter: char,
    written: Option<&[u64; N]>,
    first: usize,
) -> String {
    (0..N).fold(source.to_owned(), |text, i| {
        let value = match written {
            Some(numbers) => numbers[i].to_string(),
            None => format!("tonumber(ARGV[{}])", first + i),
        };
        text.replace(&format!("{{{letter}{}}}", i + 1), &value)
    })
}

/// `text` reading its parameters from `ARGV` after the cost (or signed amount).
fn reading_params(text: &str) -> String {
    fill::<3>(text, 'p', None, 2)
}

/// A stepped algorithm's file, cut at its markers.
struct Sections<'a> {
    /// The parameters and what follows from them and `now` alone, run once per call.
    params: &'a str,
    /// The names of a key's state, from the `@load` marker.
    state: Vec<&'a str>,
    load: &'a str,
    step: &'a str,
    save: &'a str,
    reply: &'a str,
}

impl<'a> Sections<'a> {
    fn of(algorithm: &'a str) -> Self {
        const CUT: &str = "every stepped script has `-- @load <state>`, `-- @step`, `-- @save` \
                           and `-- @reply` lines (unit-tested)";
        let (params, rest) = algorithm.split_once("-- @load ").expect(CUT);
        let (names, rest) = rest.split_once('\n').expect(CUT);
        let (load, rest) = rest.split_once("-- @step\n").expect(CUT);
        let (step, rest) = rest.split_once("-- @save\n").expect(CUT);
        let (save, reply) = rest.split_once("-- @reply\n").expect(CUT);
        Sections {
            params,
            state: names.split_whitespace().collect(),
            load,
            step,
            save,
            reply,
        }
    }

    /// The batch driver's lines that keep each key's state apart between reading and
    /// deciding: `s_<name>` tables, the state's locals, and copying key `j`'s state into
    /// the tables and back out.
    fn batch_lines(&self) -> [(&'static str, String); 4] {
        let names = self.state.join(", ");
        let tables = self.state.iter().map(|v| format!("s_{v}"));
        let slots = self
            .state
            .iter()
            .map(|v| format!("s_{v}[j]"))
            .collect::<Vec<_>>()
            .join(", ");
        let empty = vec!["{}"; self.state.len()].join(", ");
        [
            (
                "-- {state tables}\n",
                format!(
                    "local {} = {empty}\n",
                    tables.collect::<Vec<_>>().join(", ")
                ),
            ),
            ("-- {state locals}\n", format!("local {names}\n")),
            ("-- {keep}\n", format!("{slots} = {names}\n")),
            ("-- {restore}\n", format!("{names} = {slots}\n")),
        ]
    }
}

/// The prelude, the algorithm's parameters, and the driver with the algorithm's sections
/// pasted where it marks them (and its `{now}` written); with the penalty's sections when
/// `penalized`, else with nothing where the driver marks them.
fn assemble(algorithm: &str, driver: &str, now: usize, penalized: bool) -> String {
    let s = Sections::of(algorithm);
    let (ban, strike) = if penalized {
        penalty_sections()
    } else {
        ("", "")
    };
    let mut body = at_now(driver, now)
        .replace("-- {ban}\n", ban)
        .replace("-- {strike}\n", strike);
    if driver == BATCH {
        for (marker, lines) in s.batch_lines() {
            body = body.replace(marker, &lines);
        }
    }
    let body = body
        .replace("-- {params}\n", s.params)
        .replace("-- {load}\n", s.load)
        .replace("-- {step}\n", s.step)
        .replace("-- {save}\n", s.save)
        .replace("-- {reply}\n", s.reply);
    format!("{}{}{body}", at_now(PRELUDE, now), s.params)
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
        Lua::Stepped(algorithm) => assemble(algorithm, SINGLE, now, false),
        Lua::Whole(script) => format!("{}{script}", at_now(PRELUDE, now)),
    };
    fill(&text, 'p', written, 2)
}

/// A single check's script of `kind` under a penalty: as [`single`], with the penalty's
/// sections, and the penalty's numbers written in with the parameters or, with `None`, read
/// after them (`ARGV`: the cost, the parameters, the penalty's numbers, then an explicit
/// time). KEYS[2..4] are the penalty's keys (`crate::key::penalty_keys`). A whole script
/// (the sliding window and log) runs as a function whose answer says whether it refused.
pub(crate) fn penalized(kind: ScriptKind, written: Option<(&[u64; 3], &PenaltyParams)>) -> String {
    let spec = kind.spec();
    let now = match written {
        Some(_) => 2,
        None => spec.params + PENALTY_PARAMS + 2,
    };
    let text = match spec.lua {
        Lua::Stepped(algorithm) => assemble(algorithm, SINGLE, now, true),
        Lua::Whole(script) => {
            let (ban, strike) = penalty_sections();
            format!(
                "{prelude}{ban}local pen_reply = (function()\n{script}end)()\n\
                 if type(pen_reply) == 'table' then return pen_reply end\n\
                 local allowed = 1\n\
                 if (type(pen_reply) == 'number' and pen_reply < 0) or \
                 string.sub(tostring(pen_reply), 1, 2) == '0 ' then allowed = 0 end\n\
                 {strike}return pen_reply\n",
                prelude = at_now(PRELUDE, now),
            )
        }
    };
    let text = fill(&text, 'p', written.map(|w| w.0), 2);
    fill(&text, 'q', written.map(|w| w.1), spec.params + 2)
}

/// The batch script of `kind` (see `crate::coalesce`), which reads its parameters from
/// `ARGV`; `None` for a kind that is never batched.
pub(crate) fn batch(kind: ScriptKind) -> Option<String> {
    match kind.spec().lua {
        Lua::Stepped(algorithm) => Some(reading_params(&assemble(
            algorithm, BATCH, BATCH_NOW, false,
        ))),
        Lua::Whole(_) => None,
    }
}

/// The booking script of `kind` (see `crate::reserve`), which reads its parameters from
/// `ARGV` after the cost; the explicit time and the longest wait follow them. `None` for
/// the kinds that cannot book a slot (windows and logs, whose state has no future
/// position). With `penalized`, a banned key is answered as a check's ban (`lua/penalty.lua`'s
/// `@ban`, on KEYS[2]) and books nothing; a booking counts no strike.
pub(crate) fn reserve(kind: ScriptKind, penalized: bool) -> Option<String> {
    let bookable = matches!(
        kind,
        ScriptKind::Gcra | ScriptKind::LeakyBucket | ScriptKind::TokenBucket
    );
    match kind.spec().lua {
        Lua::Stepped(algorithm) if bookable => {
            let now = kind.spec().params + 2;
            Some(reading_params(&assemble(
                algorithm, RESERVE, now, penalized,
            )))
        }
        _ => None,
    }
}

/// The charge-and-refund script of `kind` (see `crate::adjust`) with its adjust `section`,
/// which reads its parameters from `ARGV` after the signed amount; the explicit time
/// follows them. `None` for a whole script (no sections to reuse).
pub(crate) fn adjust(kind: ScriptKind, section: &str) -> Option<String> {
    match kind.spec().lua {
        Lua::Stepped(algorithm) => {
            let driver = ADJUST.replace("-- {adjust}\n", section);
            let now = kind.spec().params + 2;
            Some(reading_params(&assemble(algorithm, &driver, now, false)))
        }
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

/// The script a check under `params` with `penalty` runs, its numbers written in, as
/// [`script_for`] is for a policy without one: for measuring or reviewing it. A check of
/// cost 1 on the server's clock is `EVALSHA <sha> 4 <key> <ban> <strikes> <bans>` (the
/// keys of [`RedisStore::penalty_keys`](crate::RedisStore::penalty_keys)).
pub fn penalized_script_for(params: Parameters, penalty: &Penalty) -> Option<String> {
    let layout = Layout::of(params)?;
    let numbers = penalty_params(penalty);
    Some(penalized(layout.kind, Some((&layout.args, &numbers))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_algorithm_uses_a_name_of_the_batch_drivers() {
        let names = "IMPORTING n nkeys at keys counts costs values missing out sent answer changed";
        let driver_names: Vec<&str> = names.split_whitespace().collect();
        // The names in a Lua text's code, its comments left out.
        fn words(text: &str) -> impl Iterator<Item = &str> {
            text.lines()
                .map(|l| l.split("--").next().unwrap_or(""))
                .flat_map(|l| l.split(|c: char| !c.is_alphanumeric() && c != '_'))
        }
        let driver: Vec<&str> = words(BATCH).collect();
        assert!(driver_names.iter().all(|name| driver.contains(name)));
        // The penalty's sections and the several-policies driver's own names.
        const PENALTY_NAMES: [&str; 4] = ["ALL_KEYS", "banned", "strike", "allowed"];
        for kind in ScriptKind::ALL {
            let text = match kind.spec().lua {
                Lua::Stepped(text) | Lua::Whole(text) => text,
            };
            for word in words(text) {
                assert!(!word.starts_with("pen_"), "{kind:?} uses `{word}`");
                if matches!(kind.spec().lua, Lua::Stepped(_)) {
                    let own = driver_names.contains(&word) || PENALTY_NAMES[..3].contains(&word);
                    assert!(!own, "{kind:?} uses `{word}`");
                } else {
                    // A whole script runs in a function; the wrapper's `allowed` follows it.
                    assert!(!PENALTY_NAMES.contains(&word), "{kind:?} uses `{word}`");
                }
            }
        }
    }

    #[test]
    fn a_penalized_script_has_the_penalty_around_the_step_and_no_placeholder_left() {
        let (ban, strike) = penalty_sections();
        assert!(ban.contains("KEYS[2]") && strike.contains("KEYS[4]"));
        const S: u64 = 1_000_000;
        let numbers = [5, 60 * S, 600 * S, 2, 86_400 * S, 90_000 * S];
        for a in floodwall_core::Algorithm::all() {
            let p = floodwall_core::Policy::new("p", a, "10/s".parse().unwrap()).unwrap();
            let layout = Layout::of(p.parameters()).unwrap();
            let written = penalized(layout.kind, Some((&layout.args, &numbers)));
            let generic = penalized(layout.kind, None);
            for text in [&written, &generic] {
                assert!(text.starts_with("-- floodwall: prepended"), "{a}");
                for marker in ["{now}", "{p1}", "{q1}", "{q6}", "-- {", "-- @"] {
                    assert!(!text.contains(marker), "{a}: {marker}");
                }
                // The ban is read before the rate key, the strike after the step.
                let first = text
                    .match_indices("redis.call('")
                    .map(|(i, _)| &text[i..])
                    .find(|call| !call.starts_with("redis.call('TIME'"))
                    .unwrap();
                assert!(first.starts_with("redis.call('GET', KEYS[2])"), "{a}");
            }
            assert!(
                written.contains("local pen_after, pen_within, pen_ban = 5, 60000000, 600000000")
            );
            assert!(!written.contains("ARGV[3]"), "{a}: written in");
            // Generic: the cost, the parameters, then the penalty's six numbers, then now.
            let params = layout.kind.spec().params;
            let last = params + PENALTY_PARAMS + 1;
            assert!(generic.contains(&format!("tonumber(ARGV[{last}])")), "{a}");
            assert!(generic.contains(&format!("ARGV[{}]", last + 1)), "{a}: now");
            // A policy without a penalty runs the script it always ran.
            let plain = single(layout.kind, Some(&layout.args));
            assert!(!plain.contains("pen_") && !plain.contains("KEYS[2]"), "{a}");
        }
    }

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
                let markers = "{now}|{p1}|{p2}|{p3}|-- {|-- @load|-- @step|-- @save|-- @reply";
                for marker in markers.split('|') {
                    assert!(!text.contains(marker), "{a}: {marker}");
                }
            }
            for text in [&source, &generic] {
                // No table is built for a single check's answer.
                assert!(!text.contains("return {"), "{a}");
            }
            let read = "tonumber(ARGV[3])";
            assert!(!source.contains(read), "{a}: parameters written in");
            assert!(generic.contains(read), "{a}: parameters read");
        }
    }
}
