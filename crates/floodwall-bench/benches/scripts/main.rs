//! Redis CPU per decision of each algorithm's Lua script, against E1 measured in the same run.
//!
//! Run: `cargo bench -p floodwall-bench --bench scripts`. It starts its own `redis-server` on a
//! free loopback port (redis-harness; never 6379) and needs `redis-benchmark` (Debian's
//! `redis-tools`). The method (BENCHMARKS.md §2): `CONFIG RESETSTAT`,
//! a fixed number of calls with `redis-benchmark -c 50 -P 16 -r 10000 -n N EVALSHA ...`
//! (10,000 keys through `__rand_int__` in the key), then `usec_per_call` of `evalsha` from
//! `INFO commandstats`. Each script's text is what `RedisStore` loads
//! (`floodwall_redis::script_for`, checked by SHA against what the store loaded for a real
//! check) and its KEYS/ARGV are the store's: the store's Redis key and no argument (cost 1
//! on the server's clock; a real `floodwall::Policy`'s parameters are written into the
//! script, see `floodwall-redis/src/script.rs`).
//!
//! Two cases: mostly allowed (a generous quota) and mostly denied (`1/hour`, after a warm-up
//! that exhausts the keys). Before each measured script: `FLUSHALL`, then a warm-up of
//! [`WARM_N`] calls so the keys hold state, and one uncounted chunk of E1 (whose keys the
//! `FLUSHALL` emptied too). References measured in each case of each run: E1 =
//! `return redis.call('INCR',KEYS[1])`, the cost of calling any script; and the **fair
//! reference** of the case, the bare commands of a decision done the way floodwall's scripts
//! do them, with no decision logic: allowed, `TIME` + `GET` + `SET` of a `%d`-formatted
//! integer with `KEEPTTL` (`PX` only when the key is new) and one integer back; denied,
//! `TIME` + `GET` of an existing key and one integer back (a refusal writes nothing).
//! `xref` is a script's cost over that reference's: what its decision logic adds to the
//! commands it cannot do without (1.0: nothing). The first report's reference (`SET .. PX`
//! on every call and a five-integer table back, costs floodwall's scripts avoid) is kept as
//! a row, for comparison with earlier reports only. These VMs drift within seconds, so
//! a script is measured in [`CHUNKS`] chunks of [`N`] calls, each between two chunks of
//! E1: a chunk's ratio is its usec over the mean of its two neighbours', and the script's
//! ratio the median of its chunks'. The whole set runs [`RUNS`] times so the noise is
//! visible; the last table holds each ratio's median over the runs, which is what
//! BENCHMARKS.md reports against the targets.
//!
//! `SCRIPTS_INSTRUCTIONS=1` counts instructions instead (`instructions.rs`): the same
//! scripts, keys and arguments on a `redis-server` run under callgrind, which does not
//! drift with the machine; then what a coalesced batch costs per check, against its floor
//! and redis-cell's `CL.THROTTLE` (`batch.rs`; `SCRIPTS_BATCH_ONLY=1` counts only those,
//! `SCRIPTS_KEEP=<dir>` keeps their scripts and callgrind dumps there).
//! `SCRIPTS_BATCH_CPU=1` (without `SCRIPTS_INSTRUCTIONS`) times those batch rows instead, in
//! Redis's CPU time per check on a plain server.

mod batch;
mod floors;
mod instructions;
// redis-cell's module, built as the cell bench builds it, for the batch rows' CL.THROTTLE.
#[path = "../cell/module.rs"]
mod module;
mod split;
mod store;
mod table;
mod variants;
use floodwall_bench as support;

use std::collections::HashMap;
use std::process::{Command, Stdio};

use floodwall::redis::RedisStore;
use floodwall::redis::redis::Script;
use floodwall::{Algorithm, Policy, Quota, StoreExt};
use redis_harness::RedisServer;

use table::{Row, medians, print_rows, with_xref};

/// redis-benchmark's settings, as the peer baselines in BENCHMARKS.md were measured.
const CLIENTS: usize = 50;
const PIPELINE: usize = 16;
const KEYS: usize = 10_000;
/// Measured calls per chunk (of a script, and of E1 between two of its chunks).
const N: u64 = 25_000;
/// Chunks per script and case.
const CHUNKS: usize = 8;
/// Calls before each measurement (uncounted): ~10 per key, so nearly every key holds state.
const WARM_N: u64 = 100_000;
/// Repeats of the whole set.
const RUNS: usize = 3;

/// E1: the cost of calling any script.
const E1_LUA: &str = "return redis.call('INCR',KEYS[1])";
/// The first report's reference: TIME + GET + SET PX on every call, five integers back.
/// floodwall's scripts avoid both the PX and the table, so this flatters them; kept as a row
/// for comparison with earlier reports only.
const OLD_TGS_LUA: &str = "local t = redis.call('TIME')\n\
     local v = redis.call('GET', KEYS[1])\n\
     redis.call('SET', KEYS[1], t[1], 'PX', 60000)\n\
     return {1, 2, 3, 4, 5}";
/// The fair reference of an admission: the commands of a read-modify-write decision on the
/// server's clock, made as floodwall's scripts make them (the time in µs, the new state a
/// `%d`-formatted integer written with `KEEPTTL`, `PX` only when the key is new, one
/// integer back), with no decision logic.
const FAIR_WRITE_LUA: &str = "local t = redis.call('TIME')\n\
     local now = t[1] * 1000000 + t[2]\n\
     if redis.call('GET', KEYS[1]) then\n\
       redis.call('SET', KEYS[1], string.format('%d', now), 'KEEPTTL')\n\
     else\n\
       redis.call('SET', KEYS[1], string.format('%d', now), 'PX', '60000')\n\
     end\n\
     return now";
/// The fair reference of a refusal: the time and the state read, one integer back, no write.
const FAIR_READ_LUA: &str = "local t = redis.call('TIME')\n\
     local now = t[1] * 1000000 + t[2]\n\
     local v = redis.call('GET', KEYS[1])\n\
     return now";
/// Row names of the references.
const OLD_REF: &str = "old ref: TGS PX + table";
const FAIR_WRITE: &str = "fair ref: TIME+GET+SET";
const FAIR_READ: &str = "fair ref: TIME+GET";

/// The fair reference's name for a case (see [`FAIR_WRITE_LUA`], [`FAIR_READ_LUA`]).
fn fair_ref(case: Case) -> &'static str {
    match case {
        Case::Allowed => FAIR_WRITE,
        Case::Denied => FAIR_READ,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Case {
    Allowed,
    Denied,
}

impl Case {
    fn name(self) -> &'static str {
        match self {
            Case::Allowed => "allowed",
            Case::Denied => "denied",
        }
    }
}

/// A script's target.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Target {
    /// At most this many E1, allowed and denied (issue #6).
    E1(f64),
    /// At most this many times the fair reference of an admission (`TIME` + `GET` + `SET`
    /// done as the scripts do them): read on the allowed case, the one that writes.
    Ref(f64),
}

impl Target {
    /// "<= ..: met" or "MISSED" for a script's ratios to E1 and to its case's fair
    /// reference; empty where the target is not read (a `Ref` target on refusals).
    pub(crate) fn verdict(self, allowed: bool, x_e1: f64, x_ref: f64) -> String {
        let met = |ok: bool| if ok { "met" } else { "MISSED" };
        match self {
            Target::E1(t) => format!("<= {t:.1}x E1: {}", met(x_e1 <= t)),
            Target::Ref(t) if allowed => format!("<= {t:.2}x ref: {}", met(x_ref <= t)),
            Target::Ref(_) => String::new(),
        }
    }
}

/// One algorithm: its policies for both cases (each with its own script: the store writes
/// a policy's parameters into it).
struct Alg {
    name: &'static str,
    target: Target,
    allowed: Policy,
    denied: Policy,
}

impl Alg {
    fn new(name: &'static str, algorithm: Algorithm, target: Target, allowed: &str) -> Alg {
        let quota = |q: &str| q.parse::<Quota>().expect("the bench quota parses");
        let allowed = Policy::new(format!("{name}-allowed"), algorithm, quota(allowed))
            .expect("a valid policy");
        Alg {
            name,
            target,
            allowed,
            denied: Policy::new(format!("{name}-denied"), algorithm, quota("1/hour"))
                .expect("a valid policy"),
        }
    }

    fn policy(&self, case: Case) -> &Policy {
        match case {
            Case::Allowed => &self.allowed,
            Case::Denied => &self.denied,
        }
    }
}

/// `usec_per_call` of `evalsha` after one redis-benchmark run of `EVALSHA <sha> <args>`,
/// and the writes the scripts made per call (SET, HINCRBY, ZADD, INCR and INCRBY calls: the
/// share admitted).
fn usec_per_call(server: &RedisServer, sha: &str, args: &[String], n: u64) -> (f64, f64) {
    server.cmd(&["CONFIG", "RESETSTAT"]);
    redis_benchmark(server, sha, args, n);
    let text = server.cmd(&["INFO", "commandstats"]);
    let all: HashMap<String, HashMap<String, f64>> = support::commandstats(&text)
        .into_iter()
        .map(|(cmd, fields)| {
            let fields = fields
                .into_iter()
                .filter_map(|(k, v)| Some((k, v.parse().ok()?)))
                .collect();
            (cmd, fields)
        })
        .collect();
    let stats = all.get("evalsha").expect("evalsha in INFO commandstats");
    let failed = stats.get("failed_calls").copied().unwrap_or(0.0)
        + stats.get("rejected_calls").copied().unwrap_or(0.0);
    // redis-benchmark does not look at replies: make sure every call ran the script.
    assert!(
        failed == 0.0,
        "EVALSHA calls failed; INFO errorstats: {}",
        server.cmd(&["INFO", "errorstats"])
    );
    assert!(
        stats["calls"] >= n as f64,
        "too few EVALSHA calls: {stats:?}"
    );
    let writes: f64 = ["set", "hincrby", "zadd", "incr", "incrby"]
        .iter()
        .filter_map(|c| all.get(*c)?.get("calls"))
        .fold(0.0, |a, b| a + b);
    (stats["usec_per_call"], writes / stats["calls"])
}

/// `redis-benchmark` with the settings above: `n` calls of `EVALSHA <sha> <args>`.
fn redis_benchmark(server: &RedisServer, sha: &str, args: &[String], n: u64) {
    redis_benchmark_with(server, [CLIENTS, PIPELINE, KEYS], sha, args, n);
}

/// `n` calls of `EVALSHA <sha> <args>` by `redis-benchmark` with `[clients, pipeline,
/// keys]` (`-c`, `-P`, `-r`: keys through `__rand_int__`); it does not read the replies.
fn redis_benchmark_with(
    server: &RedisServer,
    [clients, pipeline, keys]: [usize; 3],
    sha: &str,
    args: &[String],
    n: u64,
) {
    let out = Command::new("redis-benchmark")
        .args(["-h", "127.0.0.1", "-p", &server.port().to_string()])
        .args(["-c", &clients.to_string(), "-P", &pipeline.to_string()])
        .args(["-r", &keys.to_string(), "-n", &n.to_string(), "-q"])
        .args(["EVALSHA", sha])
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .expect("spawn redis-benchmark");
    assert!(
        out.status.success(),
        "redis-benchmark failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn main() {
    if !support::have_redis_benchmark() {
        println!("note: redis-benchmark not found (Debian package redis-tools); nothing to do");
        return;
    }
    // Counting instructions: the server below runs under callgrind.
    let counting = match std::env::var_os("SCRIPTS_INSTRUCTIONS") {
        Some(_) => match instructions::Start::get() {
            Ok(instructions::Start::Count(wrapper)) => Some(wrapper),
            Ok(instructions::Start::Ran) => return,
            Err(note) => {
                println!("note: {note}; nothing to count");
                return;
            }
        },
        None => None,
    };
    // Kept until the end of main: dropping it stops the redis-server. A counting run, and a
    // timing of the batch rows, load redis-cell's module (the batch rows' CL.THROTTLE) when
    // it can be built.
    let batch_cpu = counting.is_none() && std::env::var_os("SCRIPTS_BATCH_CPU").is_some();
    let (server, no_cell) = match counting.is_some() || batch_cpu {
        true => match module::module().map(|m| m.display().to_string()) {
            Ok(path) => match RedisServer::try_start_with(&["--loadmodule", &path]) {
                Ok(server) => (server, None),
                Err(e) => match support::redis_or_note("nothing to measure") {
                    Some(server) => (server, Some(format!("--loadmodule {path} failed: {e}"))),
                    None => return,
                },
            },
            Err(e) => match support::redis_or_note("nothing to measure") {
                Some(server) => (server, Some(format!("no redis-cell module: {e}"))),
                None => return,
            },
        },
        false => match support::redis_or_note("nothing to measure") {
            Some(server) => (server, None),
            None => return,
        },
    };
    if batch_cpu {
        batch::report(&server, batch::Measure::Cpu, no_cell.as_deref());
        return;
    }
    let algs = [
        Alg::new("gcra", Algorithm::Gcra, Target::E1(3.5), "1000000/min"),
        Alg::new(
            "token_bucket",
            Algorithm::TokenBucket { tick: None },
            Target::E1(3.5),
            "1000000/min",
        ),
        Alg::new(
            "leaky_bucket",
            Algorithm::LeakyBucket,
            Target::E1(3.5),
            "1000000/min",
        ),
        // Its target was 2.0x E1; now at most 0.8x the fair TIME+GET+SET reference.
        Alg::new(
            "fixed_window",
            Algorithm::FixedWindow,
            Target::Ref(0.8),
            "1000000/min",
        ),
        Alg::new(
            "sliding_window",
            Algorithm::SLIDING_WINDOW,
            Target::E1(4.5),
            "1000000/min",
        ),
        // A log holds at most 10,000 entries; ~20 calls per key reach it in a run.
        Alg::new(
            "sliding_log",
            Algorithm::SlidingLog,
            Target::E1(5.0),
            "10000/min",
        ),
    ];

    // The store: its Redis keys, and a real check per policy to learn which script it loads.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("client runtime");
    let store: RedisStore = rt.block_on(async {
        RedisStore::builder()
            // Every check to Redis: the deny cache (on by default) would answer refusals
            // locally, and these rows measure what Redis does.
            .deny_cache(false)
            .multiplexed(&server.url())
            .await
            .expect("multiplexed store")
    });
    // Each algorithm's scripts, [allowed, denied]: (sha, text).
    let mut shas = Vec::new();
    for a in &algs {
        let script = |case| {
            let policy = a.policy(case);
            let text = floodwall_redis::script_for(policy.parameters()).expect("a script");
            let sha = Script::new(&text).get_hash().to_owned();
            server.cmd(&["SCRIPT", "FLUSH"]);
            rt.block_on(store.check(b"probe", policy, 1))
                .expect("a check through the store");
            assert_eq!(
                server.cmd(&["SCRIPT", "EXISTS", &sha]),
                "1",
                "{} {}: the store loaded another script",
                a.name,
                case.name()
            );
            (sha, text)
        };
        shas.push([script(Case::Allowed), script(Case::Denied)]);
    }
    let load = |text: &str| -> String { server.cmd(&["SCRIPT", "LOAD", text]) };
    let args_for = |a: &Alg, case: Case| -> Vec<String> {
        let policy = a.policy(case);
        let key = String::from_utf8(store.redis_key(b"__rand_int__", policy)).expect("UTF-8");
        // Cost 1 on the server's clock: the store sends no argument (the policy's
        // parameters are written into its script).
        vec!["1".to_owned(), key]
    };
    let e1_sha = load(E1_LUA);
    let old_sha = load(OLD_TGS_LUA);
    let write_sha = load(FAIR_WRITE_LUA);
    let read_sha = load(FAIR_READ_LUA);
    for (sha, text) in shas.iter().flatten() {
        assert_eq!(&load(text), sha, "SCRIPT LOAD answered another SHA");
    }
    let ref_args = |prefix: &str| vec!["1".to_owned(), format!("{prefix}:__rand_int__")];
    if let Some(wrapper) = &counting
        && std::env::var_os("SCRIPTS_BATCH_ONLY").is_some()
    {
        batch::report(
            &server,
            batch::Measure::Instructions(wrapper),
            no_cell.as_deref(),
        );
        return;
    }
    if let Some(wrapper) = &counting {
        let mut scripts = vec![
            instructions::Measured::reference("E1", &e1_sha, ref_args("e1")),
            instructions::Measured::reference(FAIR_WRITE, &write_sha, ref_args("fw")),
            instructions::Measured {
                // Its keys filled by the write reference first, as a refusal finds its key.
                warm: write_sha.clone(),
                ..instructions::Measured::reference(FAIR_READ, &read_sha, ref_args("fr"))
            },
            instructions::Measured::reference(OLD_REF, &old_sha, ref_args("old")),
        ];
        for (a, both) in algs.iter().zip(&shas) {
            for case in [Case::Allowed, Case::Denied] {
                let (sha, _) = &both[case as usize];
                scripts.push(instructions::Measured {
                    name: a.name,
                    case: Some(case.name()),
                    sha: sha.clone(),
                    warm: sha.clone(),
                    args: args_for(a, case),
                    target: Some(a.target),
                });
            }
        }
        instructions::report(&server, wrapper, &scripts);
        batch::report(
            &server,
            batch::Measure::Instructions(wrapper),
            no_cell.as_deref(),
        );
        return;
    }

    println!(
        "redis-benchmark -c {CLIENTS} -P {PIPELINE} -r {KEYS}: per script and case, {CHUNKS} \
         chunks of {N} calls between chunks of E1 (after FLUSHALL and {WARM_N} warm-up calls)"
    );
    let mut all_rows = Vec::new();
    for run in 1..=RUNS {
        let mut rows = Vec::new();
        for case in [Case::Allowed, Case::Denied] {
            // Chunks of the script between chunks of E1: each divided by its neighbours'
            // mean.
            let e1 = || usec_per_call(&server, &e1_sha, &ref_args("e1"), N).0;
            // `warm`: the script whose calls fill the keys first (the script itself, but for
            // the read-only reference, which must find its keys as a refusal does).
            let mut measured = |script: String, sha: &str, warm: &str, args: &[String], target| {
                server.cmd(&["FLUSHALL"]);
                redis_benchmark(&server, warm, args, WARM_N);
                // FLUSHALL emptied E1's keys too: its first chunk would create them all
                // while later ones only increment. One uncounted chunk creates them.
                e1();
                let mut before = e1();
                let (mut usecs, mut ratios, mut writes) = (Vec::new(), Vec::new(), 0.0);
                for _ in 0..CHUNKS {
                    let (usec, w) = usec_per_call(&server, sha, args, N);
                    let after = e1();
                    usecs.push(usec);
                    ratios.push(usec / ((before + after) / 2.0));
                    writes += w / CHUNKS as f64;
                    before = after;
                }
                rows.push(Row {
                    script,
                    case,
                    usec: support::median(&mut usecs).expect("CHUNKS > 0"),
                    ratio: support::median(&mut ratios).expect("CHUNKS > 0"),
                    writes,
                    target,
                    xref: Vec::new(),
                });
            };
            // The fair reference of the case, then the first report's (which writes with
            // PX and answers a table in both cases).
            let (fair_sha, prefix) = match case {
                Case::Allowed => (&write_sha, "fw"),
                Case::Denied => (&read_sha, "fr"),
            };
            measured(
                fair_ref(case).into(),
                fair_sha,
                &write_sha,
                &ref_args(prefix),
                None,
            );
            measured(OLD_REF.into(), &old_sha, &old_sha, &ref_args("old"), None);
            for (a, scripts) in algs.iter().zip(&shas) {
                let (sha, _) = &scripts[case as usize];
                measured(a.name.into(), sha, sha, &args_for(a, case), Some(a.target));
            }
        }
        let rows = with_xref(rows);
        print_rows(&format!("run {run}"), &rows);
        all_rows.push(rows);
    }
    print_rows(&format!("median of {RUNS} runs"), &medians(&all_rows));
}
