//! The script call a check or a batch makes, and the scripts a store holds for them.
//!
//! Every call runs through [`redis::Script`]: EVALSHA, with a `SCRIPT LOAD` and one retry
//! when the server answers `NOSCRIPT` (after `SCRIPT FLUSH`, a restart or a failover), on
//! every connection kind. Each script touches exactly one key, so it runs on Redis
//! Cluster.
//!
//! A single check's script has its policy's parameters written into its text
//! ([`Scripts`]): each argument costs Redis a string and the script a `tonumber`, so a
//! check of cost 1 on the server's clock sends no argument (BENCHMARKS.md §2 measures it).
//! A store writes scripts so for a bounded number of parameter sets
//! (`RedisStoreBuilder::written_scripts`); checks under any more run the kind's generic
//! script, which reads the parameters from `ARGV`, as batches always do.

use std::sync::{Arc, LazyLock};

use floodwall_core::Parameters;
use redis::{Script, ScriptInvocation};

use crate::kind::{Layout, ScriptKind};
use crate::script;

/// The generic single-check scripts, by [`ScriptKind`] (`kind as usize`).
static GENERIC: LazyLock<[Script; ScriptKind::ALL.len()]> =
    LazyLock::new(|| ScriptKind::ALL.map(|kind| Script::new(&script::single(kind, None))));

/// The batch scripts (see `crate::coalesce`), by [`ScriptKind`]; `None` for a kind that is
/// never coalesced.
static BATCHES: LazyLock<[Option<Script>; ScriptKind::ALL.len()]> = LazyLock::new(|| {
    ScriptKind::ALL.map(|kind| script::batch(kind).map(|text| Script::new(&text)))
});

/// The single-check scripts of one store: for each parameter set, up to a bound, a script
/// with the parameters written in, made and hashed once. Policies are usually a handful;
/// the bound keeps policies made on the fly (a quota per tenant) from filling Redis's
/// script cache, which nothing empties.
pub(crate) struct Scripts {
    written: papaya::HashMap<(ScriptKind, [u64; 3]), Arc<Script>, ahash::RandomState>,
    bound: usize,
}

/// A script one check runs: the generic one of its kind, or its parameters' own.
enum Chosen {
    Generic(&'static Script),
    Written(Arc<Script>),
}

/// What one check runs: its script, and the layout saying how to call it and read its
/// answer.
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
        let layout = Layout::of(params)?;
        let map = self.written.pin();
        let text_of = (layout.kind, layout.args);
        let script = match map.get(&text_of) {
            Some(script) => Chosen::Written(Arc::clone(script)),
            // Checked, then inserted, without a lock: first checks of new parameter sets
            // racing here can pass the bound by a few, never by more than they are.
            None if map.len() >= self.bound => Chosen::Generic(&GENERIC[layout.kind as usize]),
            None => Chosen::Written(Arc::clone(map.get_or_insert_with(text_of, || {
                Arc::new(Script::new(&script::single(
                    layout.kind,
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
    /// The kind and parameters its answer is read under (see `crate::reply`).
    pub(crate) fn layout(&self) -> Layout {
        self.layout
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
            Chosen::Generic(_) => {
                let n = self.layout.kind.spec().params;
                (Some(cost), &self.layout.args[..n])
            }
        };
        cost.into_iter().chain(params.iter().copied()).chain(now)
    }
}

/// A batch script and its parameter arguments. Only [`Batch::of`] makes one, so holding
/// one is the proof that the kind has a batch: nothing downstream checks again.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Batch {
    script: &'static Script,
    args: [u64; 3],
}

impl Batch {
    /// The batch for checks under these parameters, or `None` when they cannot be
    /// coalesced into one call (see `crate::coalesce`).
    pub(crate) fn of(params: Parameters) -> Option<Self> {
        let layout = Layout::of(params)?;
        let script = BATCHES[layout.kind as usize].as_ref()?;
        Some(Self {
            script,
            args: layout.args,
        })
    }

    /// The EVALSHA call deciding `costs` (in arrival order) on `key` at `now` in one batch.
    /// `ARGV`: the number of checks, the parameters padded to three, the time (`''` reads
    /// the server's clock), the costs.
    pub(crate) fn invocation(
        self,
        key: &[u8],
        now: Option<u64>,
        costs: &[u64],
    ) -> ScriptInvocation<'static> {
        let mut inv = self.script.prepare_invoke();
        inv.key(key).arg(costs.len());
        for a in self.args {
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
    fn each_script_has_a_hash_of_its_own() {
        let hashes: std::collections::HashSet<_> = GENERIC
            .iter()
            .chain(BATCHES.iter().flatten())
            .map(|s| s.get_hash())
            .collect();
        // Five single-check scripts and three batches: the leaky bucket runs GCRA's.
        assert_eq!(hashes.len(), 8);
        let coalesced = every_policy()
            .iter()
            .filter(|p| Batch::of(p.parameters()).is_some())
            .count();
        // GCRA, the token and leaky buckets, the fixed window.
        assert_eq!(coalesced, 4);
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
            script: Chosen::Generic(&GENERIC[ScriptKind::Gcra as usize]),
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
