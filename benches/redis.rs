//! Decisions per second through `RedisStore` against the ceiling, side by side in one run:
//! the same GCRA script driven by `redis-benchmark` (EVALSHA) at the same concurrency.
//!
//! Run: `cargo bench --bench redis --features redis`. It starts its own `redis-server` on a
//! free loopback port (redis-harness; never 6379). Workloads: one hot key (allowed), 10,000
//! keys (allowed; key `i % 10000`, 12 digits as redis-benchmark's `__rand_int__` writes
//! them) and one hot key denied. For each:
//!
//! - the ceiling: `redis-benchmark -c 64 EVALSHA <sha> 1 <key> '' 1 <interval> <tolerance>`,
//!   exactly the script (`floodwall_redis::script_for`, checked by SHA against
//!   what the store loads) and the KEYS/ARGV the store sends; run in two halves, before and
//!   after the floodwall rows, so a drift in the machine's speed weighs on both alike;
//! - floodwall: 64 tokio tasks on a 2-worker runtime, each looping
//!   `store.check(key, &policy, 1).await`, through the multiplexed `ConnectionManager` and
//!   through bb8 pools of 16 and 64 connections (criterion `iter_custom`, flat sampling);
//! - for reference, redis-benchmark pipelined (`-P 16`): what Redis does when the round
//!   trip is out of the way.
//!
//! Redis CPU per call: `CONFIG RESETSTAT` before each row, `usec_per_call` of `evalsha`
//! from `INFO commandstats` after, next to E1 = EVALSHA of
//! `return redis.call('INCR',KEYS[1])` measured in the same run (the ratio to E1 is the
//! steady figure, see BASELINES.md). Also the redis-server main thread's CPU per decision
//! (`/proc/<pid>/schedstat`: command execution plus socket I/O, which `usec` leaves out),
//! how busy that thread was, and the client's CPU per decision (this process, or the
//! redis-benchmark process). Client and server share the machine's two cores.
//!
//! Without `redis-server` nothing runs; without `redis-benchmark` (Debian's `redis-tools`)
//! the ceiling and E1 rows are skipped with a note.

mod support;

use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, SamplingMode, Throughput};
use floodwall::redis::RedisStore;
use floodwall::redis::redis::Script;
use floodwall::{Parameters, Policy, Quota, Store};
use redis_harness::{RedisServer, Reply};
use tokio::runtime::Runtime;
use tokio::task::JoinSet;

/// Checks in flight: tokio tasks for floodwall, connections for redis-benchmark.
const TASKS: usize = 64;
/// Worker threads of the floodwall client's runtime.
const WORKERS: usize = 2;
/// Keys of the many-keys workload.
const KEYS: usize = 10_000;
/// bb8 pool sizes: 16 caps the checks in flight below the 64 tasks; 64 gives each task a
/// connection, so no task ever waits for a checkout.
const POOL_SIZES: [u32; 2] = [16, 64];
/// Requests per pipeline for the pipelined reference rows.
const PIPELINE: usize = 16;
/// Never refuses at the rates reached here (1 µs interval, a burst of 10^9).
const ALLOWED: &str = "1000000/s burst 1000000000";
/// Refuses everything after the first call.
const DENIED: &str = "1/hour";
const HOT_KEY: &str = "203.0.113.7";

/// The script `RedisStore` runs for GCRA, as the store assembles it.
fn gcra_lua() -> &'static str {
    let params = Policy::gcra("any", Quota::per_second(1).expect("a quota"))
        .expect("a policy")
        .parameters();
    floodwall_redis::script_for(params)
        .expect("GCRA has a script")
        .0
}
/// E1: the cost of calling any script.
const E1_LUA: &str = "return redis.call('INCR',KEYS[1])";

/// redis-benchmark requests per half of a ceiling row (~1 s each on this machine).
const CEILING_HALF_N: u64 = 100_000;
/// redis-benchmark requests for a pipelined row and for the E1 rows.
const PIPELINED_N: u64 = 300_000;
const E1_N: u64 = 150_000;
const E1_PIPELINED_N: u64 = 800_000;

// ---------------------------------------------------------------------------------------------
// Measurements

/// What one row measured; added up over the halves of a ceiling row.
#[derive(Debug, Default, Clone, Copy)]
struct Stats {
    /// Checks the client made (and, for floodwall, wall time spent making them).
    decisions: u64,
    wall_ns: u64,
    /// From `INFO commandstats`.
    evalsha_calls: u64,
    evalsha_usec: u64,
    evalsha_failed: u64,
    ping_calls: u64,
    set_calls: u64,
    /// CPU of redis-server's main thread and of the client, while checks ran.
    server_ns: u64,
    client_ns: u64,
    /// Decisions the store answered as allowed (floodwall rows only).
    allowed: u64,
}

impl std::ops::AddAssign for Stats {
    fn add_assign(&mut self, o: Self) {
        self.decisions += o.decisions;
        self.wall_ns += o.wall_ns;
        self.evalsha_calls += o.evalsha_calls;
        self.evalsha_usec += o.evalsha_usec;
        self.evalsha_failed += o.evalsha_failed;
        self.ping_calls += o.ping_calls;
        self.set_calls += o.set_calls;
        self.server_ns += o.server_ns;
        self.client_ns += o.client_ns;
        self.allowed += o.allowed;
    }
}

impl Stats {
    fn usec_per_call(&self) -> Option<f64> {
        (self.evalsha_calls > 0).then(|| self.evalsha_usec as f64 / self.evalsha_calls as f64)
    }

    fn per_decision_us(&self, ns: u64) -> Option<f64> {
        (ns > 0 && self.decisions > 0).then(|| ns as f64 / self.decisions as f64 / 1e3)
    }

    fn pings_per_decision(&self) -> Option<f64> {
        (self.evalsha_calls > 0).then(|| self.ping_calls as f64 / self.evalsha_calls as f64)
    }

    fn server_busy_pct(&self) -> Option<f64> {
        (self.wall_ns > 0 && self.server_ns > 0)
            .then(|| 100.0 * self.server_ns as f64 / self.wall_ns as f64)
    }

    /// Folds in `INFO commandstats` read at the end of a window opened by `CONFIG RESETSTAT`.
    fn add_commandstats(&mut self, server: &RedisServer) {
        let text = server.cmd(&["INFO", "commandstats"]);
        let stats = support::commandstats(&text);
        let get = |cmd: &str, field: &str| {
            stats
                .get(cmd)
                .and_then(|f| f.get(field))
                .map_or(0, |v| v.parse::<f64>().map_or(0, |v| v as u64))
        };
        self.evalsha_calls += get("evalsha", "calls");
        self.evalsha_usec += get("evalsha", "usec");
        self.evalsha_failed += get("evalsha", "failed_calls") + get("evalsha", "rejected_calls");
        self.ping_calls += get("ping", "calls");
        self.set_calls += get("set", "calls");
    }
}

/// CPU time of redis-server's main thread, which runs every command and does the socket I/O
/// (I/O threads are off by default).
fn server_cpu_ns(server: &RedisServer) -> u64 {
    support::schedstat_ns(&PathBuf::from(format!("/proc/{}/schedstat", server.pid()))).unwrap_or(0)
}

/// CPU time of every thread of this process.
fn own_cpu_ns() -> u64 {
    std::fs::read_dir("/proc/self/task")
        .map(|dir| {
            dir.filter_map(Result::ok)
                .filter_map(|t| support::schedstat_ns(&t.path().join("schedstat")))
                .sum()
        })
        .unwrap_or(0)
}

// ---------------------------------------------------------------------------------------------
// Workloads

struct Workload {
    /// Criterion group name.
    group: &'static str,
    label: &'static str,
    policy: Arc<Policy>,
    /// User keys: call `i` uses `keys[i % len]`.
    keys: Arc<Vec<Vec<u8>>>,
    allowed: bool,
}

impl Workload {
    fn new(group: &'static str, label: &'static str, allowed: bool, many: bool) -> Self {
        let (name, quota) = if allowed {
            ("bench", ALLOWED)
        } else {
            ("bench-denied", DENIED)
        };
        let quota: Quota = quota.parse().expect("the bench quota parses");
        let policy = Policy::gcra(name, quota).expect("a valid GCRA policy");
        let keys = if many {
            (0..KEYS).map(|i| format!("{i:012}").into_bytes()).collect()
        } else {
            vec![HOT_KEY.as_bytes().to_vec()]
        };
        Workload {
            group,
            label,
            policy: Arc::new(policy),
            keys: Arc::new(keys),
            allowed,
        }
    }

    fn many(&self) -> bool {
        self.keys.len() > 1
    }

    /// The arguments after `EVALSHA <sha>` that the store sends (see `script::invocation`:
    /// key, '' for the server's clock, cost, interval, tolerance), with redis-benchmark's
    /// `__rand_int__` as the user key when there are many keys.
    fn evalsha_args(&self, store: &RedisStore) -> Vec<String> {
        let user_key: &[u8] = if self.many() {
            b"__rand_int__"
        } else {
            HOT_KEY.as_bytes()
        };
        let key = String::from_utf8(store.redis_key(user_key, &self.policy)).expect("UTF-8");
        let Parameters::Gcra {
            interval,
            tolerance,
        } = self.policy.parameters()
        else {
            unreachable!("a GCRA policy has GCRA parameters");
        };
        vec![
            "1".into(),
            key,
            String::new(),
            "1".into(),
            interval.to_string(),
            tolerance.to_string(),
        ]
    }
}

/// Runs `iters` checks split over [`TASKS`] tasks; call `i` (from `start`) uses key
/// `i % keys`. Returns the wall time and how many were allowed.
fn drive(
    rt: &Runtime,
    store: &RedisStore,
    w: &Workload,
    iters: u64,
    start: u64,
) -> (Duration, u64) {
    rt.block_on(async {
        let began = Instant::now();
        let mut tasks = JoinSet::new();
        for t in 0..TASKS as u64 {
            let count = iters / TASKS as u64 + u64::from(t < iters % TASKS as u64);
            let (store, policy, keys) = (store.clone(), w.policy.clone(), w.keys.clone());
            tasks.spawn(async move {
                let mut allowed = 0;
                for j in 0..count {
                    let i = start + t + j * TASKS as u64;
                    let key = &keys[(i % keys.len() as u64) as usize];
                    let d = store
                        .check(key, &policy, 1)
                        .await
                        .unwrap_or_else(|e| panic!("check failed: {e}"));
                    allowed += u64::from(d.allowed);
                }
                allowed
            });
        }
        let mut allowed = 0;
        while let Some(done) = tasks.join_next().await {
            match done {
                Ok(n) => allowed += n,
                Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                Err(e) => panic!("check task failed: {e}"),
            }
        }
        (began.elapsed(), allowed)
    })
}

// ---------------------------------------------------------------------------------------------
// redis-benchmark

fn have_redis_benchmark() -> bool {
    Command::new("redis-benchmark")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// One redis-benchmark run of `args` (after `EVALSHA <sha>`), between `CONFIG RESETSTAT`
/// and `INFO commandstats`. Returns its requests per second and what was measured.
fn redis_benchmark(
    server: &RedisServer,
    sha: &str,
    args: &[String],
    n: u64,
    pipeline: usize,
    random: bool,
) -> (f64, Stats) {
    let mut cmd = Command::new("redis-benchmark");
    cmd.args(["-h", "127.0.0.1", "-p", &server.port().to_string()])
        .args(["-c", &TASKS.to_string(), "-n", &n.to_string(), "--csv"]);
    if pipeline > 1 {
        cmd.args(["-P", &pipeline.to_string()]);
    }
    if random {
        cmd.args(["-r", &KEYS.to_string()]);
    }
    cmd.args(["EVALSHA", sha])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());

    server.cmd(&["CONFIG", "RESETSTAT"]);
    let server_before = server_cpu_ns(server);
    let began = Instant::now();
    let mut child = cmd.spawn().expect("spawn redis-benchmark");
    // redis-benchmark is single-threaded: its CPU is its main thread's, read until it exits
    // (the last 10 ms, printing and exiting, are missed).
    let stat = PathBuf::from(format!("/proc/{}/schedstat", child.id()));
    let mut client_ns = 0;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for redis-benchmark") {
            break status;
        }
        client_ns = support::schedstat_ns(&stat).unwrap_or(client_ns);
        std::thread::sleep(Duration::from_millis(10));
    };
    let wall = began.elapsed();
    let server_ns = server_cpu_ns(server).saturating_sub(server_before);
    let (mut out, mut err) = (String::new(), String::new());
    if let Some(mut o) = child.stdout.take() {
        let _ = o.read_to_string(&mut out);
    }
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut err);
    }
    assert!(status.success(), "redis-benchmark failed ({status}): {err}");
    // "EVALSHA ... 1","35123.45","1.234",...
    let rps: f64 = out
        .lines()
        .rev()
        .find_map(|l| l.split("\",\"").nth(1)?.parse().ok())
        .unwrap_or_else(|| panic!("no requests per second in redis-benchmark's output: {out}"));
    let mut stats = Stats {
        decisions: n,
        wall_ns: wall.as_nanos() as u64,
        server_ns,
        client_ns,
        ..Stats::default()
    };
    stats.add_commandstats(server);
    // redis-benchmark does not look at replies: make sure every call ran the script.
    assert_eq!(
        stats.evalsha_failed,
        0,
        "redis-benchmark's EVALSHA calls failed; INFO errorstats: {}",
        server.cmd(&["INFO", "errorstats"])
    );
    assert!(
        stats.evalsha_calls >= n,
        "redis-benchmark made {} EVALSHA calls of {n}",
        stats.evalsha_calls
    );
    (rps, stats)
}

// ---------------------------------------------------------------------------------------------
// Rows and the table

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// redis-benchmark at the same concurrency, no pipelining.
    Ceiling,
    /// redis-benchmark, pipelined.
    Pipelined,
    Multiplexed,
    Pool(u32),
}

impl Kind {
    fn name(self) -> String {
        match self {
            Kind::Ceiling => format!("redis-benchmark -c {TASKS}"),
            Kind::Pipelined => format!("redis-benchmark -c {TASKS} -P {PIPELINE}"),
            Kind::Multiplexed => "floodwall, multiplexed".into(),
            Kind::Pool(n) => format!("floodwall, bb8 pool of {n}"),
        }
    }

    /// The criterion id of a floodwall row.
    fn id(self) -> Option<String> {
        match self {
            Kind::Multiplexed => Some("multiplexed".into()),
            Kind::Pool(n) => Some(format!("pool-{n}")),
            Kind::Ceiling | Kind::Pipelined => None,
        }
    }
}

struct Row {
    workload: &'static str,
    group: &'static str,
    kind: Kind,
    /// redis-benchmark's figure; floodwall rows take criterion's median.
    rps: Option<f64>,
    stats: Stats,
}

impl Row {
    fn decisions_per_s(&self) -> Option<f64> {
        if let Some(rps) = self.rps {
            return Some(rps);
        }
        let id = self.kind.id()?;
        support::estimate_ns(self.group, &id, "median")
            .map(|ns| 1e9 / ns)
            .or_else(|| {
                (self.stats.wall_ns > 0)
                    .then(|| self.stats.decisions as f64 * 1e9 / self.stats.wall_ns as f64)
            })
    }
}

fn opt(x: Option<f64>, width: usize, precision: usize) -> String {
    x.map_or_else(
        || format!("{:>width$}", "n/a"),
        |x| format!("{x:>width$.precision$}"),
    )
}

/// E1's `usec_per_call`, unpipelined and pipelined.
#[derive(Default)]
struct E1 {
    plain: Option<Row>,
    pipelined: Option<Row>,
}

impl E1 {
    fn usec_for(&self, kind: Kind) -> Option<f64> {
        let row = if kind == Kind::Pipelined {
            self.pipelined.as_ref()
        } else {
            self.plain.as_ref()
        };
        row?.stats.usec_per_call()
    }
}

fn rate_of(rows: &[Row], workload: &str, kind: Kind) -> Option<f64> {
    rows.iter()
        .find(|r| r.workload == workload && r.kind == kind)
        .and_then(Row::decisions_per_s)
}

fn print_table(rows: &[Row], e1: &E1) {
    println!(
        "\n{:<18} {:<32} {:>11} {:>7} {:>7} {:>8} {:>6} {:>6} {:>8} {:>5} {:>8}",
        "workload",
        "row",
        "decisions/s",
        "vs c64",
        "vs P16",
        "µs/call",
        "vs E1",
        "PING",
        "srv µs",
        "busy",
        "cli µs"
    );
    let e1_rows = e1.plain.iter().chain(e1.pipelined.iter());
    for r in rows.iter().chain(e1_rows) {
        let rate = r.decisions_per_s();
        let ceiling = rate_of(rows, r.workload, Kind::Ceiling);
        let pipelined = rate_of(rows, r.workload, Kind::Pipelined);
        let usec = r.stats.usec_per_call();
        println!(
            "{:<18} {:<32} {:>11} {:>7} {:>7} {:>8} {:>6} {:>6} {:>8} {:>4}% {:>8}",
            r.workload,
            r.kind.name(),
            opt(rate, 11, 0),
            opt(rate.zip(ceiling).map(|(a, c)| a / c), 7, 3),
            opt(rate.zip(pipelined).map(|(a, p)| a / p), 7, 3),
            opt(usec, 8, 2),
            opt(usec.zip(e1.usec_for(r.kind)).map(|(u, e)| u / e), 6, 2),
            opt(r.stats.pings_per_decision(), 6, 2),
            opt(r.stats.per_decision_us(r.stats.server_ns), 8, 2),
            opt(r.stats.server_busy_pct(), 4, 0),
            opt(r.stats.per_decision_us(r.stats.client_ns), 8, 2),
        );
    }
    println!(
        "decisions/s: floodwall rows criterion's median sample, {TASKS} tasks on {WORKERS} \
         workers; ceiling rows redis-benchmark's figure over both halves. vs c64: over \
         redis-benchmark -c {TASKS} of the same workload, vs P16: over redis-benchmark -c {TASKS} \
         -P {PIPELINE} (higher is better).\n\
         µs/call: usec_per_call of evalsha in INFO commandstats (time inside Redis, the \
         script's commands included); vs E1: over EVALSHA of `{E1_LUA}` (10,000 keys) in \
         this run, pipelined rows over pipelined E1.\n\
         PING: PINGs per decision (bb8 tests every checkout). srv µs: redis-server main \
         thread CPU per decision (execution + socket I/O); busy: that CPU over wall time. \
         cli µs: client CPU per decision (this process / redis-benchmark)."
    );
}

fn print_verdict(rows: &[Row], workloads: &[Workload]) {
    let find = |w: &str, k: Kind| rows.iter().find(|r| r.workload == w && r.kind == k);
    let rate = |w: &str, k: Kind| find(w, k).and_then(Row::decisions_per_s);
    println!(
        "\ntarget: floodwall (multiplexed) at least 0.8 of redis-benchmark -c {TASKS}, same \
         script, same keys:"
    );
    for w in workloads {
        let ratio = rate(w.label, Kind::Multiplexed)
            .zip(rate(w.label, Kind::Ceiling))
            .map(|(a, c)| a / c);
        let verdict = match ratio {
            Some(r) if r >= 0.8 => "met",
            Some(_) => "NOT met",
            None => "not measured",
        };
        let pipelined = rate(w.label, Kind::Multiplexed)
            .zip(rate(w.label, Kind::Pipelined))
            .map(|(a, p)| a / p);
        println!(
            "  {:<18} {} ({verdict}); {} of the pipelined figure (-P {PIPELINE}), which a \
             multiplexed connection, pipelining by itself, can approach",
            w.label,
            opt(ratio, 0, 3),
            opt(pipelined, 0, 3)
        );
    }
    println!("\nmultiplexed vs the best bb8 pool (decisions/s ratio, > 1: multiplexed wins):");
    let mut mux_wins = 0;
    let mut compared = 0;
    for w in workloads {
        let best_pool = POOL_SIZES
            .iter()
            .filter_map(|&n| rate(w.label, Kind::Pool(n)).map(|r| (n, r)))
            .max_by(|a, b| a.1.total_cmp(&b.1));
        let Some(((n, pool), mux)) = best_pool.zip(rate(w.label, Kind::Multiplexed)) else {
            continue;
        };
        compared += 1;
        mux_wins += usize::from(mux > pool);
        let us =
            |k: Kind| find(w.label, k).and_then(|r| r.stats.per_decision_us(r.stats.server_ns));
        let cli =
            |k: Kind| find(w.label, k).and_then(|r| r.stats.per_decision_us(r.stats.client_ns));
        println!(
            "  {:<18} {:.2} (pool of {n}); redis-server CPU per decision {} vs {} µs, \
             client CPU {} vs {} µs",
            w.label,
            mux / pool,
            opt(us(Kind::Multiplexed), 0, 2),
            opt(us(Kind::Pool(n)), 0, 2),
            opt(cli(Kind::Multiplexed), 0, 2),
            opt(cli(Kind::Pool(n)), 0, 2),
        );
    }
    if compared == 0 {
        return;
    }
    if mux_wins == compared {
        println!(
            "winner: the multiplexed connection. Why: it writes the {TASKS} tasks' EVALSHAs \
             onto one socket as they come, so Redis reads and answers them in batches (an \
             automatic pipeline: fewer syscalls and wake-ups per call on both sides) at one \
             round trip per check; a pooled check holds a connection exclusively for a PING \
             (bb8's test_on_check_out) and then the EVALSHA: two round trips, twice the \
             commands for Redis to parse and answer, and no more checks in flight than \
             connections."
        );
    } else if mux_wins == 0 {
        println!(
            "winner: the bb8 pool, despite its PING per checkout: its several sockets spread \
             the client's I/O over both workers, while every check of the multiplexed \
             connection goes through one socket's driver task."
        );
    } else {
        println!(
            "winner: mixed ({mux_wins} of {compared} workloads to the multiplexed connection); \
             see the per-workload figures above."
        );
    }
}

// ---------------------------------------------------------------------------------------------
// The run

struct Stores {
    multiplexed: RedisStore,
    pools: Vec<(u32, RedisStore)>,
}

impl Stores {
    fn get(&self, kind: Kind) -> &RedisStore {
        match kind {
            Kind::Pool(n) => {
                &self
                    .pools
                    .iter()
                    .find(|(size, _)| *size == n)
                    .expect("a pool of that size")
                    .1
            }
            _ => &self.multiplexed,
        }
    }
}

/// Checks that the script above is the one the store loads, with the arguments it sends:
/// after `SCRIPT FLUSH`, one check through the store must load exactly our SHA, and our
/// EVALSHA must answer on a fresh key as the store does.
fn check_script(server: &RedisServer, rt: &Runtime, store: &RedisStore, w: &Workload) -> String {
    let sha = Script::new(gcra_lua()).get_hash().to_owned();
    server.cmd(&["SCRIPT", "FLUSH"]);
    let d = rt
        .block_on(store.check(b"verify-store", &w.policy, 1))
        .expect("a first check through the store");
    assert_eq!(
        server.cmd(&["SCRIPT", "EXISTS", &sha]),
        "1",
        "the store did not load the GCRA script this bench reads from script_for"
    );
    let mut args = w.evalsha_args(store);
    args[1] = String::from_utf8(store.redis_key(b"verify-bench", &w.policy)).expect("UTF-8");
    let mut cmd = vec!["EVALSHA", sha.as_str()];
    cmd.extend(args.iter().map(String::as_str));
    let reply = server.try_cmd(&cmd).expect("EVALSHA");
    let ints: Vec<i64> = reply
        .as_array()
        .unwrap_or_else(|| panic!("EVALSHA answered {reply:?}"))
        .iter()
        .filter_map(Reply::as_integer)
        .collect();
    assert_eq!(
        ints.get(..2),
        Some(&[i64::from(d.allowed), d.remaining as i64][..]),
        "the bench's EVALSHA and the store disagree on a fresh key"
    );
    server.cmd(&["DEL", &args[1]]);
    server.cmd(&[
        "DEL",
        &String::from_utf8(store.redis_key(b"verify-store", &w.policy)).expect("UTF-8"),
    ]);
    sha
}

fn bench_floodwall(
    c: &mut Criterion,
    rt: &Runtime,
    server: &RedisServer,
    stores: &Stores,
    w: &Workload,
    kinds: &[Kind],
    rows: &mut Vec<Row>,
) {
    let mut g = c.benchmark_group(w.group);
    g.sampling_mode(SamplingMode::Flat)
        .throughput(Throughput::Elements(1));
    for &kind in kinds {
        let store = stores.get(kind);
        let mut stats = Stats::default();
        let mut next = 0u64;
        server.cmd(&["CONFIG", "RESETSTAT"]);
        g.bench_function(
            BenchmarkId::from_parameter(kind.id().expect("a floodwall row")),
            |b| {
                b.iter_custom(|iters| {
                    let (client_before, server_before) = (own_cpu_ns(), server_cpu_ns(server));
                    let (wall, allowed) = drive(rt, store, w, iters, next);
                    stats.server_ns += server_cpu_ns(server).saturating_sub(server_before);
                    stats.client_ns += own_cpu_ns().saturating_sub(client_before);
                    stats.wall_ns += wall.as_nanos() as u64;
                    stats.decisions += iters;
                    stats.allowed += allowed;
                    next += iters;
                    wall
                })
            },
        );
        stats.add_commandstats(server);
        if w.allowed {
            assert_eq!(
                stats.allowed, stats.decisions,
                "{}: a check was refused: the quota ({ALLOWED}) is too small here",
                w.label
            );
        }
        rows.push(Row {
            workload: w.label,
            group: w.group,
            kind,
            rps: None,
            stats,
        });
    }
    g.finish();
}

fn main() {
    // Kept until the end of main: dropping it stops the redis-server.
    let server = match RedisServer::try_start_with(&[]) {
        Ok(server) => server,
        Err(e) => {
            println!("note: no redis-server ({e}); nothing to measure");
            return;
        }
    };
    let ceiling = have_redis_benchmark();
    if !ceiling {
        println!(
            "note: redis-benchmark not found (Debian package redis-tools); the ceiling and E1 \
             rows are skipped"
        );
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(WORKERS)
        .enable_all()
        .build()
        .expect("client runtime");
    let url = server.url();
    let stores = rt.block_on(async {
        let multiplexed = RedisStore::builder()
            .multiplexed(&url)
            .await
            .expect("multiplexed store");
        let mut pools = Vec::new();
        for n in POOL_SIZES {
            let pool = RedisStore::builder()
                .pool_size(n)
                .pool(&url)
                .await
                .expect("pooled store");
            pools.push((n, pool));
        }
        Stores { multiplexed, pools }
    });
    let workloads = [
        Workload::new("redis_hot_allowed", "hot key, allowed", true, false),
        Workload::new("redis_10k_allowed", "10k keys, allowed", true, true),
        Workload::new("redis_hot_denied", "hot key, denied", false, false),
    ];
    let sha = check_script(&server, &rt, &stores.multiplexed, &workloads[0]);
    if ceiling {
        let loaded = server.cmd(&["SCRIPT", "LOAD", gcra_lua()]);
        assert_eq!(loaded, sha, "SCRIPT LOAD answered another SHA");
    }
    let mut kinds = vec![Kind::Multiplexed];
    kinds.extend(POOL_SIZES.map(Kind::Pool));

    let mut c = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(10)
        .nresamples(10_000)
        .configure_from_args();
    let mut rows = Vec::new();
    for w in &workloads {
        let args = w.evalsha_args(&stores.multiplexed);
        let run = |n, pipeline| redis_benchmark(&server, &sha, &args, n, pipeline, w.many());
        let mut before = None;
        if ceiling {
            let (rps, stats) = run(CEILING_HALF_N, 1);
            println!(
                "{}: redis-benchmark -c {TASKS} (before): {rps:.0}/s",
                w.label
            );
            before = Some((rps, stats));
        }
        bench_floodwall(&mut c, &rt, &server, &stores, w, &kinds, &mut rows);
        if let Some((rps1, mut stats)) = before {
            let (rps2, stats2) = run(CEILING_HALF_N, 1);
            println!(
                "{}: redis-benchmark -c {TASKS} (after): {rps2:.0}/s",
                w.label
            );
            stats += stats2;
            // Both halves are the same size: the rate over both is their harmonic mean.
            let rps = 2.0 / (1.0 / rps1 + 1.0 / rps2);
            rows.push(Row {
                workload: w.label,
                group: w.group,
                kind: Kind::Ceiling,
                rps: Some(rps),
                stats,
            });
            let (rps, stats) = run(PIPELINED_N, PIPELINE);
            println!(
                "{}: redis-benchmark -c {TASKS} -P {PIPELINE}: {rps:.0}/s",
                w.label
            );
            rows.push(Row {
                workload: w.label,
                group: w.group,
                kind: Kind::Pipelined,
                rps: Some(rps),
                stats,
            });
        }
    }
    let mut e1 = E1::default();
    if ceiling {
        let e1_sha = server.cmd(&["SCRIPT", "LOAD", E1_LUA]);
        let args = [
            "1".to_owned(),
            "floodwall-bench:e1:{__rand_int__}".to_owned(),
        ];
        for (n, pipeline) in [(E1_N, 1), (E1_PIPELINED_N, PIPELINE)] {
            let (rps, stats) = redis_benchmark(&server, &e1_sha, &args, n, pipeline, true);
            let row = Row {
                workload: "E1, 10k keys",
                group: "",
                kind: if pipeline > 1 {
                    Kind::Pipelined
                } else {
                    Kind::Ceiling
                },
                rps: Some(rps),
                stats,
            };
            if pipeline > 1 {
                e1.pipelined = Some(row);
            } else {
                e1.plain = Some(row);
            }
        }
    }
    c.final_summary();

    // Rows in the order of the table: per workload, the ceiling first.
    let order = |r: &Row| {
        let w = workloads.iter().position(|w| w.label == r.workload);
        let k = match r.kind {
            Kind::Ceiling => 0,
            Kind::Multiplexed => 1,
            Kind::Pool(n) => 2 + n as usize,
            Kind::Pipelined => usize::MAX,
        };
        (w, k)
    };
    rows.sort_by_key(order);
    print_table(&rows, &e1);
    print_verdict(&rows, &workloads);
    // Every row ran the path it is named for: the script SETs only when it admits.
    for r in &rows {
        let allowed = workloads.iter().any(|w| w.label == r.workload && w.allowed);
        let sets = r.stats.set_calls;
        let calls = r.stats.evalsha_calls;
        if (allowed && sets < calls) || (!allowed && sets > 1) {
            println!(
                "warning: {} / {}: {sets} scripted SETs for {calls} EVALSHAs",
                r.workload,
                r.kind.name()
            );
        }
    }
    drop(server);
}
