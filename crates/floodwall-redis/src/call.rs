//! The EVALSHA a check or a batch makes, and the scripts a store holds for them: with a
//! policy's parameters written in, for a bounded number of parameter sets
//! ([`crate::guide::redis`], "What a check costs Redis").

use std::collections::HashMap;
use std::sync::{Arc, LazyLock};

use floodwall_core::Penalty;
use redis::{Cmd, RedisWrite, Script, ScriptInvocation, ToRedisArgs};

use crate::kind::{Layout, ScriptKind};
use crate::script::{self, PenaltyParams, penalty_params};

mod all;

/// The generic single-check scripts, by [`ScriptKind`] (`kind as usize`).
static GENERIC: LazyLock<[Script; ScriptKind::ALL.len()]> =
    LazyLock::new(|| ScriptKind::ALL.map(|kind| Script::new(&script::single(kind, None))));

/// The generic single-check scripts of policies with a penalty, by [`ScriptKind`]: they
/// read the penalty's numbers after the parameters.
static GENERIC_PENALIZED: LazyLock<[Script; ScriptKind::ALL.len()]> =
    LazyLock::new(|| ScriptKind::ALL.map(|kind| Script::new(&script::penalized(kind, None))));

/// The batch scripts (see `crate::coalesce`), by [`ScriptKind`]; `None` for a kind that is
/// never coalesced.
static BATCHES: LazyLock<[Option<BatchScript>; ScriptKind::ALL.len()]> = LazyLock::new(|| {
    ScriptKind::ALL.map(|kind| {
        script::batch(kind).map(|text| BatchScript {
            script: Script::new(&text),
            text,
        })
    })
});

/// A batch script, and its text for the `SCRIPT LOAD` a cluster node's call makes itself
/// (see [`Batch::call`]).
pub(crate) struct BatchScript {
    script: Script,
    text: String,
}

/// The scripts of one store with the parameters written in, made and hashed once per
/// parameter set, up to a bound (nothing empties Redis's script cache).
pub(crate) struct Scripts {
    written: ScriptMap<(ScriptKind, [u64; 3])>,
    /// The same for policies with a penalty, by their parameters and the penalty's, up to
    /// the same bound.
    penalized: ScriptMap<(ScriptKind, [u64; 3], PenaltyParams)>,
    /// The scripts deciding one key under several policies at once (`crate::all`), by
    /// their policies' parameter sets, up to the same bound.
    all: ScriptMap<Vec<TextOf>>,
    /// Past the bound, the scripts of several policies that read their numbers from
    /// `ARGV`, by the policies' kinds and which have a penalty.
    all_read: ScriptMap<Vec<(ScriptKind, bool)>>,
    bound: usize,
}

/// Scripts by what their text is made of.
type ScriptMap<K> = papaya::HashMap<K, Arc<Script>, ahash::RandomState>;

/// What one policy's part of a script is made of: its kind, parameters and penalty.
type TextOf = (ScriptKind, [u64; 3], Option<PenaltyParams>);

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
    /// The penalty's numbers, for a policy with one (its script reads KEYS[2..4]).
    penalty: Option<PenaltyParams>,
}

impl Scripts {
    /// Scripts of their own for up to `bound` parameter sets.
    pub(crate) fn new(bound: usize) -> Self {
        Self {
            written: ScriptMap::default(),
            penalized: ScriptMap::default(),
            all: ScriptMap::default(),
            all_read: ScriptMap::default(),
            bound,
        }
    }

    /// The script for a check under `layout` (and `penalty`): with its numbers written in
    /// for up to the bound's parameter sets, else the kind's generic script.
    pub(crate) fn single(&self, layout: Layout, penalty: Option<&Penalty>) -> Single {
        let penalty = penalty.map(penalty_params);
        let (kind, args) = (layout.kind, &layout.args);
        let script = match penalty {
            None => self.cached(
                &self.written,
                (kind, *args),
                &GENERIC[kind as usize],
                || script::single(kind, Some(args)),
            ),
            Some(numbers) => self.cached(
                &self.penalized,
                (kind, *args, numbers),
                &GENERIC_PENALIZED[kind as usize],
                || script::penalized(kind, Some((args, &numbers))),
            ),
        };
        Single {
            script,
            layout,
            penalty,
        }
    }

    /// The script of `text_of` in `map`, made from `text` while the map holds fewer than
    /// the bound; past it, `generic`.
    fn cached<K: Eq + std::hash::Hash + Send + Sync>(
        &self,
        map: &ScriptMap<K>,
        text_of: K,
        generic: &'static Script,
        text: impl FnOnce() -> String,
    ) -> Chosen {
        let map = map.pin();
        match map.get(&text_of) {
            Some(script) => Chosen::Written(Arc::clone(script)),
            // Checked, then inserted, without a lock: first checks of new parameter sets
            // racing here can pass the bound by a few, never by more than they are.
            None if map.len() >= self.bound => Chosen::Generic(generic),
            None => Chosen::Written(Arc::clone(
                map.get_or_insert_with(text_of, || Arc::new(Script::new(&text()))),
            )),
        }
    }

    /// How many parameter sets have a script of their own.
    #[cfg(test)]
    fn written(&self) -> usize {
        self.written.len()
    }
}

impl Single {
    /// The EVALSHA call deciding `cost` on `key` at `now` (µs; `None` reads the server's
    /// clock). `ARGV`: the cost, the parameters (and a penalty's numbers) unless written
    /// in, then the time if explicit; a written script on the server's clock is sent no
    /// cost of 1. A penalized script's `penalty_keys` follow `key`.
    pub(crate) fn invocation(
        &self,
        key: &[u8],
        penalty_keys: &[Vec<u8>],
        now: Option<u64>,
        cost: u64,
    ) -> ScriptInvocation<'_> {
        let script = match &self.script {
            Chosen::Generic(script) => script,
            Chosen::Written(script) => &**script,
        };
        let mut inv = script.prepare_invoke();
        inv.key(key);
        for k in penalty_keys {
            inv.key(k.as_slice());
        }
        for a in self.args(now, cost) {
            inv.arg(a);
        }
        inv
    }

    /// The `ARGV` of [`invocation`](Self::invocation).
    fn args(&self, now: Option<u64>, cost: u64) -> impl Iterator<Item = u64> + '_ {
        let (cost, params, penalty): (Option<u64>, &[u64], &[u64]) =
            match (&self.script, &self.penalty) {
                (Chosen::Written(_), _) => ((cost != 1 || now.is_some()).then_some(cost), &[], &[]),
                (Chosen::Generic(_), penalty) => (
                    Some(cost),
                    self.layout.params(),
                    penalty.as_ref().map_or(&[][..], |p| &p[..]),
                ),
            };
        cost.into_iter()
            .chain(params.iter().copied())
            .chain(penalty.iter().copied())
            .chain(now)
    }
}

/// A batch script and the layout of its checks. Only [`Batch::of`] makes one, so holding
/// one is the proof that the kind has a batch: nothing downstream checks again.
#[derive(Clone, Copy)]
pub(crate) struct Batch {
    script: &'static BatchScript,
    layout: Layout,
}

/// A batch's call, as the connection sends it.
pub(crate) enum BatchCall {
    /// Its keys declared: any connection but a cluster's.
    Declared(ScriptInvocation<'static>),
    /// No key declared: an `EVALSHA` (with its script's text for a `SCRIPT LOAD`) for the
    /// cluster node serving `route`'s slot.
    Keyless {
        evalsha: Cmd,
        text: &'static str,
        route: Vec<u8>,
    },
}

impl Batch {
    /// The batch for checks under `layout`, or `None` when they cannot be coalesced into
    /// one call (see `crate::coalesce`).
    pub(crate) fn of(layout: Layout) -> Option<Self> {
        let script = BATCHES[layout.kind as usize].as_ref()?;
        Some(Self { script, layout })
    }

    /// The kind and parameters its answers are read under.
    pub(crate) fn layout(self) -> Layout {
        self.layout
    }

    /// The call deciding `plan`'s checks (each costing `cost_of(i)`, `i` its place in
    /// the batch) at `now` in one batch, its keys `KEYS` when `declare`, else arguments (a
    /// cluster node's batch spans slots). `ARGV` is as `lua/batch.lua` reads it.
    pub(crate) fn call(
        self,
        plan: &Plan<'_>,
        cost_of: impl Fn(usize) -> u64,
        now: Option<u64>,
        declare: bool,
    ) -> BatchCall {
        let n = plan.order.len() as u64;
        let head = [n]
            .into_iter()
            .chain(self.layout.args)
            .map(Arg::Int)
            .chain([now.map_or(Arg::Bytes(b""), Arg::Int)])
            .chain([Arg::Int(plan.keys.len() as u64)]);
        let counts = plan.counts.iter().map(|&c| Arg::Int(c));
        let costs = plan
            .order
            .iter()
            .any(|&i| cost_of(i) != 1)
            .then(|| plan.order.iter().map(|&i| Arg::Int(cost_of(i))))
            .into_iter()
            .flatten();
        if declare {
            let mut inv = self.script.script.prepare_invoke();
            for key in &plan.keys {
                inv.key(*key);
            }
            for a in head.chain(counts).chain(costs) {
                inv.arg(a);
            }
            return BatchCall::Declared(inv);
        }
        let mut evalsha = redis::cmd("EVALSHA");
        evalsha.arg(self.script.script.get_hash()).arg(0);
        let keys = plan.keys.iter().map(|k| Arg::Bytes(k));
        for a in head.chain(keys).chain(counts).chain(costs) {
            evalsha.arg(a);
        }
        BatchCall::Keyless {
            evalsha,
            text: &self.script.text,
            route: plan.keys.first().map_or_else(Vec::new, |k| k.to_vec()),
        }
    }
}

/// A batch's checks in the order its script takes them: each key once, in the order keys
/// first arrived, with its checks in arrival order after one another (the checks of
/// different keys are independent, so only each key's own order matters).
pub(crate) struct Plan<'k> {
    keys: Vec<&'k [u8]>,
    /// How many checks each key has; empty when every key has one.
    counts: Vec<u64>,
    /// The checks in the order sent, as their places in the batch.
    pub(crate) order: Vec<usize>,
}

impl<'k> Plan<'k> {
    /// The plan of checks of `keys`, in arrival order.
    pub(crate) fn of(keys: impl ExactSizeIterator<Item = &'k [u8]>) -> Self {
        let n = keys.len();
        let mut place: HashMap<&[u8], usize, ahash::RandomState> =
            HashMap::with_capacity_and_hasher(n, ahash::RandomState::new());
        let (mut distinct, mut counts, mut of) = (Vec::new(), Vec::new(), Vec::with_capacity(n));
        for key in keys {
            let j = *place.entry(key).or_insert_with(|| {
                distinct.push(key);
                counts.push(0);
                distinct.len() - 1
            });
            counts[j] += 1;
            of.push(j);
        }
        if distinct.len() == n {
            return Plan {
                keys: distinct,
                counts: Vec::new(),
                order: (0..n).collect(),
            };
        }
        // Each key's first place in the order, then its checks one after another.
        let mut next: Vec<usize> = counts
            .iter()
            .scan(0, |at, &c| {
                let first = *at;
                *at += c as usize;
                Some(first)
            })
            .collect();
        let mut order = vec![0; n];
        for (i, j) in of.into_iter().enumerate() {
            order[next[j]] = i;
            next[j] += 1;
        }
        Plan {
            keys: distinct,
            counts,
            order,
        }
    }
}

/// One argument of a batch's call.
#[derive(Clone, Copy)]
enum Arg<'a> {
    Int(u64),
    Bytes(&'a [u8]),
}

impl ToRedisArgs for Arg<'_> {
    fn write_redis_args<W: ?Sized + RedisWrite>(&self, out: &mut W) {
        match self {
            Arg::Int(v) => v.write_redis_args(out),
            Arg::Bytes(b) => b.write_redis_args(out),
        }
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
            .chain(BATCHES.iter().flatten().map(|b| &b.script))
            .map(|s| s.get_hash())
            .collect();
        // Five single-check scripts and three batches: the leaky bucket runs GCRA's.
        assert_eq!(hashes.len(), 8);
        let coalesced = every_policy()
            .iter()
            .filter(|p| Layout::of(p.parameters()).and_then(Batch::of).is_some())
            .count();
        // GCRA, the token and leaky buckets, the fixed window.
        assert_eq!(coalesced, 4);
    }

    #[test]
    fn a_written_script_is_sent_only_the_arguments_it_needs() {
        let scripts = Scripts::new(4);
        let p = &every_policy()[0];
        let single = scripts.single(Layout::of(p.parameters()).unwrap(), None);
        let args = |now, cost| single.args(now, cost).collect::<Vec<_>>();
        assert_eq!(args(None, 1), []);
        assert_eq!(args(None, 3), [3]);
        assert_eq!(args(Some(5), 1), [1, 5]);
        // The generic script is sent the cost and the parameters (GCRA: two).
        let generic = Single {
            script: Chosen::Generic(&GENERIC[ScriptKind::Gcra as usize]),
            layout: single.layout,
            penalty: None,
        };
        let sent: Vec<u64> = generic.args(None, 1).collect();
        assert_eq!(sent, [1, single.layout.args[0], single.layout.args[1]]);
        assert_eq!(scripts.written(), 1);
        // The same parameters share the script.
        scripts.single(Layout::of(p.parameters()).unwrap(), None);
        assert_eq!(scripts.written(), 1);
    }

    #[test]
    fn a_plan_sends_each_key_once_with_its_checks_in_arrival_order() {
        let keys: [&[u8]; 6] = [b"a", b"b", b"a", b"c", b"b", b"a"];
        let plan = Plan::of(keys.into_iter());
        assert_eq!(plan.keys, [b"a", b"b", b"c"]);
        assert_eq!(plan.counts, [3, 2, 1]);
        assert_eq!(plan.order, [0, 2, 5, 1, 4, 3]);
        // Every key once: no counts, arrival order.
        let plan = Plan::of([&b"x"[..], b"y"].into_iter());
        assert!(plan.counts.is_empty());
        assert_eq!(plan.order, [0, 1]);
    }

    /// Redis serves a key of a slot a node imports to a call that follows `ASKING`, and a
    /// keyless batch declares nothing Redis could check first: the script itself refuses
    /// a key missing on a node that imports a slot, before writing anything.
    #[tokio::test]
    async fn a_keyless_batch_after_asking_refuses_a_missing_key_on_an_importing_node() {
        const NOW: u64 = 1_700_000_000_000_000;
        let cluster = redis_harness::RedisCluster::start(3);
        let policy = floodwall_core::Policy::gcra("p", "10/s".parse().unwrap()).unwrap();
        let key = crate::key::redis_key("", &policy, b"k");
        let owner = cluster.node_for_key(&key);
        let target = (owner + 1) % 3;
        let id = |i: usize| cluster.node(i).cmd(&["CLUSTER", "MYID"]);
        let slot = crate::slots::slot_of(&key).to_string();
        let importing = ["CLUSTER", "SETSLOT", &slot, "IMPORTING", &id(owner)];
        assert_eq!(cluster.node(target).cmd(&importing), "OK");
        let batch = Batch::of(Layout::of(policy.parameters()).unwrap()).unwrap();
        let plan = Plan::of([&key[..]].into_iter());
        let BatchCall::Keyless { evalsha, text, .. } = batch.call(&plan, |_| 1, Some(NOW), false)
        else {
            panic!("a cluster's batch declares no key");
        };
        let client = redis::Client::open(cluster.node(target).url()).unwrap();
        let mut con = client.get_multiplexed_async_connection().await.unwrap();
        let loaded: redis::RedisResult<String> = redis::cmd("SCRIPT")
            .arg("LOAD")
            .arg(text)
            .query_async(&mut con)
            .await;
        assert!(loaded.is_ok(), "{loaded:?}");
        // ASKING, then the batch, on one connection: Redis would serve the key.
        let reply: redis::RedisResult<redis::Value> = redis::pipe()
            .cmd("ASKING")
            .ignore()
            .add_command(evalsha)
            .query_async(&mut con)
            .await;
        assert!(format!("{reply:?}").contains("imports"), "{reply:?}");
        let written = ["CLUSTER", "COUNTKEYSINSLOT", &slot];
        assert_eq!(cluster.node(target).cmd(&written), "0", "nothing written");
    }

    #[test]
    fn past_the_bound_checks_run_the_generic_script() {
        const BOUND: usize = 5;
        let scripts = Scripts::new(BOUND);
        for n in 1..=BOUND as u64 + 2 {
            let policy =
                floodwall_core::Policy::gcra("p", format!("{n}/s").parse().unwrap()).unwrap();
            let single = scripts.single(Layout::of(policy.parameters()).unwrap(), None);
            let generic = matches!(single.script, Chosen::Generic(_));
            assert_eq!(generic, n as usize > BOUND, "{n}");
        }
        assert_eq!(scripts.written(), BOUND);
    }
}
