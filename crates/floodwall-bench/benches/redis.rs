//! Decisions per second through `RedisStore` against the ceiling, side by side in one run:
//! the same GCRA script driven by `redis-benchmark` (EVALSHA) at the same concurrency; then
//! what coalescing gains and costs, at 1 and 64 tasks.
//!
//! Run: `cargo bench -p floodwall-bench --bench redis`. It starts its own `redis-server` on a
//! free loopback port (redis-harness; never 6379). Workloads: one hot key (allowed), 10,000
//! keys (allowed; key `i % 10000`, 12 digits as redis-benchmark's `__rand_int__` writes
//! them) and one hot key denied. For each:
//!
//! - the ceiling: `redis-benchmark -c 64 EVALSHA <sha> 1 <key>`,
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
//! steady figure, see BENCHMARKS.md §2). Also the redis-server main thread's CPU per decision
//! (`/proc/<pid>/schedstat`: command execution plus socket I/O, which `usec` leaves out),
//! how busy that thread was, and the client's CPU per decision (this process, or the
//! redis-benchmark process). Client and server share the machine's two cores.
//!
//! Coalescing (on by default; `RedisStore::builder().coalesce(false)` turns it off; it
//! merges concurrent checks of one key into one batch EVALSHA): GCRA on the multiplexed
//! connection, hot key and 10,000 keys (both allowed), and a hot key that is rate-limited
//! (1000/s: mostly refused) or refused outright (1/hour), at 1 task and at 64 tasks,
//! coalescing off and on. `REDIS_ROUNDS` rounds
//! (default 7), each running every cell once, for a fixed number of decisions, in an order
//! that alternates per round. Per cell: decisions/s (median and range over the rounds),
//! latency per decision (median and p99 of the `check()` calls' wall times in each round,
//! median over the rounds), Redis CPU per
//! decision (evalsha `usec` over decisions, from `INFO commandstats` after `CONFIG
//! RESETSTAT`), EVALSHA calls per decision (what coalescing saves), redis-server and client
//! CPU per decision; and the on/off ratio of each (decisions/s: median of per-round ratios).
//!
//! Without `redis-server` nothing runs; without `redis-benchmark` (Debian's `redis-tools`)
//! the ceiling and E1 rows are skipped with a note.

use floodwall_bench as support;

use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, SamplingMode, Throughput};
use floodwall::redis::RedisStore;
use floodwall::redis::redis::Script;
use floodwall::{Policy, Quota, Store};
use redis_harness::RedisServer;
use tokio::runtime::Runtime;
use tokio::task::JoinSet;

use support::{mmm, opt};

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
/// A rate-limited hot key: admits 1,000 checks a second of the tens of thousands (1 task)
/// to hundreds of thousands (64 tasks) sent here, so it spends most of its time refused.
const LIMITED: &str = "1000/s";
const HOT_KEY: &str = "203.0.113.7";

/// The script `RedisStore` runs for `policy` (GCRA), as the store assembles it: its
/// parameters are written in, so each policy has its own.
fn gcra_lua(policy: &Policy) -> String {
    floodwall_redis::script_for(policy.parameters()).expect("GCRA has a script")
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
        Workload::with_quota(group, label, name, quota, allowed, many)
    }

    /// A workload on `quota`; `allowed`: the quota never refuses here.
    fn with_quota(
        group: &'static str,
        label: &'static str,
        name: &str,
        quota: &str,
        allowed: bool,
        many: bool,
    ) -> Self {
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

    /// The arguments after `EVALSHA <sha>` that the store sends for a check of cost 1 on the
    /// server's clock (the key count and the key; see `Single::invocation` in
    /// floodwall-redis), with redis-benchmark's `__rand_int__` as the user key when there
    /// are many keys.
    fn evalsha_args(&self, store: &RedisStore) -> Vec<String> {
        let user_key: &[u8] = if self.many() {
            b"__rand_int__"
        } else {
            HOT_KEY.as_bytes()
        };
        let key = String::from_utf8(store.redis_key(user_key, &self.policy)).expect("UTF-8");
        // Cost 1 on the server's clock: no argument (the parameters are in the script).
        vec!["1".into(), key]
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
    let (wall, allowed, _) = drive_tasks(rt, store, w, TASKS, iters, start, false);
    (wall, allowed)
}

/// Runs `iters` checks split over `tasks` tasks; call `i` (from `start`) uses key
/// `i % keys`. Returns the wall time, how many were allowed and, if `timed`, each call's
/// wall time in nanoseconds.
fn drive_tasks(
    rt: &Runtime,
    store: &RedisStore,
    w: &Workload,
    tasks: usize,
    iters: u64,
    start: u64,
    timed: bool,
) -> (Duration, u64, Vec<u32>) {
    let n = tasks as u64;
    rt.block_on(async {
        let began = Instant::now();
        let mut set = JoinSet::new();
        for t in 0..n {
            let count = iters / n + u64::from(t < iters % n);
            let (store, policy, keys) = (store.clone(), w.policy.clone(), w.keys.clone());
            set.spawn(async move {
                let mut allowed = 0;
                let mut times = Vec::with_capacity(if timed { count as usize } else { 0 });
                for j in 0..count {
                    let i = start + t + j * n;
                    let key = &keys[(i % keys.len() as u64) as usize];
                    let call = timed.then(Instant::now);
                    let d = store
                        .check(key, &policy, 1)
                        .await
                        .unwrap_or_else(|e| panic!("check failed: {e}"));
                    if let Some(call) = call {
                        times.push(u32::try_from(call.elapsed().as_nanos()).unwrap_or(u32::MAX));
                    }
                    allowed += u64::from(d.allowed);
                }
                (allowed, times)
            });
        }
        let mut allowed = 0;
        let mut times = Vec::new();
        while let Some(done) = set.join_next().await {
            match done {
                Ok((n, t)) => {
                    allowed += n;
                    times.extend(t);
                }
                Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                Err(e) => panic!("check task failed: {e}"),
            }
        }
        (began.elapsed(), allowed, times)
    })
}

// ---------------------------------------------------------------------------------------------
// redis-benchmark

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
// Coalescing: one task and many, off and on

/// Tasks of the coalescing table: one caller alone, and [`TASKS`] at once.
const COALESCE_TASKS: [usize; 2] = [1, TASKS];
/// Rounds of the coalescing table (`REDIS_ROUNDS`); each runs every cell once.
const DEFAULT_COALESCE_ROUNDS: usize = 7;

/// Decisions per run of a cell: 0.3–1 s here at one task (a round trip each, 15–25 µs on
/// loopback) and at 64 tasks.
fn coalesce_n(tasks: usize) -> u64 {
    if tasks == 1 { 30_000 } else { 100_000 }
}

/// One cell of the coalescing table: a workload at a number of tasks, coalescing off or on.
struct Cell {
    /// Index into the workloads.
    workload: usize,
    tasks: usize,
    coalesce: bool,
    /// Decisions per second of each round.
    rates: Vec<f64>,
    /// Summed over the rounds.
    stats: Stats,
    /// Script calls the store counted (`RedisStore::stats`), summed over the rounds.
    script_calls: u64,
    /// Median and p99 (µs) of the calls' wall times, per round.
    latencies: Vec<(f64, f64)>,
}

impl Cell {
    /// Median over the rounds of each round's median (`p99: false`) or p99 latency, µs.
    fn latency_us(&self, p99: bool) -> Option<f64> {
        let mut xs: Vec<f64> = self
            .latencies
            .iter()
            .map(|&(p50, p99_)| if p99 { p99_ } else { p50 })
            .collect();
        support::median(&mut xs)
    }

    fn calls_per_decision(&self) -> Option<f64> {
        (self.stats.decisions > 0)
            .then(|| self.stats.evalsha_calls as f64 / self.stats.decisions as f64)
    }

    /// Time inside Redis per decision: `usec` of evalsha over the decisions.
    fn redis_us_per_decision(&self) -> Option<f64> {
        (self.stats.decisions > 0 && self.stats.evalsha_calls > 0)
            .then(|| self.stats.evalsha_usec as f64 / self.stats.decisions as f64)
    }
}

/// Measures the coalescing table: for each workload, at 1 and [`TASKS`] tasks, on
/// the multiplexed store with coalescing off and on; `rounds` rounds, each running every
/// cell once in an alternating order.
fn bench_coalescing(
    rt: &Runtime,
    server: &RedisServer,
    stores: &Stores,
    workloads: &[Workload],
    rounds: usize,
) -> Vec<Cell> {
    let mut cells = Vec::new();
    for workload in 0..workloads.len() {
        for tasks in COALESCE_TASKS {
            for coalesce in [false, true] {
                cells.push(Cell {
                    workload,
                    tasks,
                    coalesce,
                    rates: Vec::new(),
                    stats: Stats::default(),
                    script_calls: 0,
                    latencies: Vec::new(),
                });
            }
        }
    }
    let store = |coalesce: bool| {
        if coalesce {
            &stores.coalescing
        } else {
            &stores.multiplexed
        }
    };
    // Key offsets per workload, so the 10k-keys runs go on through the keys.
    let mut next = vec![0u64; workloads.len()];
    // Warm-up, unrecorded: loads the batch script, wakes the connections.
    for cell in &cells {
        let (w, n) = (&workloads[cell.workload], coalesce_n(cell.tasks) / 10);
        drive_tasks(
            rt,
            store(cell.coalesce),
            w,
            cell.tasks,
            n,
            next[cell.workload],
            false,
        );
        next[cell.workload] += n;
    }
    for round in 0..rounds {
        for i in support::round_order(cells.len(), round) {
            let cell = &mut cells[i];
            let (w, n, store) = (
                &workloads[cell.workload],
                coalesce_n(cell.tasks),
                store(cell.coalesce),
            );
            let calls_before = store.stats().script_calls;
            server.cmd(&["CONFIG", "RESETSTAT"]);
            let (client_before, server_before) = (own_cpu_ns(), server_cpu_ns(server));
            let start = next[cell.workload];
            let (wall, allowed, times) = drive_tasks(rt, store, w, cell.tasks, n, start, true);
            let mut stats = Stats {
                decisions: n,
                wall_ns: wall.as_nanos() as u64,
                server_ns: server_cpu_ns(server).saturating_sub(server_before),
                client_ns: own_cpu_ns().saturating_sub(client_before),
                allowed,
                ..Stats::default()
            };
            stats.add_commandstats(server);
            if w.allowed {
                assert_eq!(
                    allowed, n,
                    "{}: a check was refused: the quota ({ALLOWED}) is too small here",
                    w.label
                );
            }
            cell.stats += stats;
            cell.script_calls += store.stats().script_calls - calls_before;
            cell.rates
                .push(n as f64 * 1e9 / stats.wall_ns.max(1) as f64);
            let mut times: Vec<f64> = times.iter().map(|&ns| f64::from(ns) / 1e3).collect();
            let p50 = support::quantile(&mut times, 0.5).unwrap_or(f64::NAN);
            let p99 = support::quantile(&mut times, 0.99).unwrap_or(f64::NAN);
            cell.latencies.push((p50, p99));
            next[cell.workload] += n;
        }
        println!("coalescing: round {}/{rounds} done", round + 1);
    }
    cells
}

/// `on`'s decisions/s over `off`'s, round by round.
fn rate_ratios(on: &Cell, off: &Cell) -> Vec<f64> {
    on.rates
        .iter()
        .zip(&off.rates)
        .map(|(a, b)| a / b)
        .collect()
}

/// Median of `on`'s decisions/s over `off`'s, round by round.
fn rate_ratio(on: &Cell, off: &Cell) -> Option<f64> {
    support::median(&mut rate_ratios(on, off))
}

/// Median of `on`'s median (or p99) latency over `off`'s, round by round.
fn latency_ratio(on: &Cell, off: &Cell, p99: bool) -> Option<f64> {
    let pick = |l: &(f64, f64)| if p99 { l.1 } else { l.0 };
    let mut r: Vec<f64> = on
        .latencies
        .iter()
        .zip(&off.latencies)
        .map(|(a, b)| pick(a) / pick(b))
        .collect();
    support::median(&mut r)
}

/// `on`'s figure over `off`'s.
fn ratio(on: Option<f64>, off: Option<f64>) -> Option<f64> {
    on.zip(off).map(|(a, b)| a / b)
}

fn print_coalescing(cells: &[Cell], workloads: &[Workload], rounds: usize) {
    println!(
        "\n{:<22} {:>5} {:<8} {:<26} {:>6} {:>8} {:>8} {:>9} {:>9} {:>8} {:>8}",
        "workload",
        "tasks",
        "coalesce",
        "decisions/s (range)",
        "admit",
        "p50 µs",
        "p99 µs",
        "calls/dec",
        "Redis µs",
        "srv µs",
        "cli µs"
    );
    for pair in cells.chunks_exact(2) {
        let [off, on] = pair else { unreachable!() };
        let label = workloads[off.workload].label;
        for c in [off, on] {
            let admit =
                (c.stats.decisions > 0).then(|| c.stats.allowed as f64 / c.stats.decisions as f64);
            println!(
                "{:<22} {:>5} {:<8} {:<26} {:>6} {:>8} {:>8} {:>9} {:>9} {:>8} {:>8}",
                label,
                c.tasks,
                if c.coalesce { "on" } else { "off" },
                mmm(c.rates.clone(), 8, 0),
                opt(admit, 6, 3),
                opt(c.latency_us(false), 8, 1),
                opt(c.latency_us(true), 8, 1),
                opt(c.calls_per_decision(), 9, 3),
                opt(c.redis_us_per_decision(), 9, 2),
                opt(c.stats.per_decision_us(c.stats.server_ns), 8, 2),
                opt(c.stats.per_decision_us(c.stats.client_ns), 8, 2),
            );
            if c.script_calls != c.stats.evalsha_calls {
                println!(
                    "  (note: the store counted {} script calls, Redis {} EVALSHAs)",
                    c.script_calls, c.stats.evalsha_calls
                );
            }
        }
        let us = |c: &Cell, ns: u64| c.stats.per_decision_us(ns);
        println!(
            "{:<22} {:>5} {:<8} {:<26} {:>6} {:>8} {:>8} {:>9} {:>9} {:>8} {:>8}",
            "",
            "",
            "on/off",
            mmm(rate_ratios(on, off), 8, 3),
            "",
            opt(latency_ratio(on, off, false), 8, 3),
            opt(latency_ratio(on, off, true), 8, 3),
            opt(
                ratio(on.calls_per_decision(), off.calls_per_decision()),
                9,
                3
            ),
            opt(
                ratio(on.redis_us_per_decision(), off.redis_us_per_decision()),
                9,
                3
            ),
            opt(
                ratio(us(on, on.stats.server_ns), us(off, off.stats.server_ns)),
                8,
                3
            ),
            opt(
                ratio(us(on, on.stats.client_ns), us(off, off.stats.client_ns)),
                8,
                3
            ),
        );
    }
    println!(
        "GCRA on the multiplexed connection; allowed: quota {ALLOWED} (never refuses); \
         limited: {LIMITED} (mostly refused); denied: {DENIED} (always refused). {rounds} \
         rounds, each running every row once ({} decisions at 1 task, {} at {TASKS}) in an \
         alternating order. decisions/s: median (min–max) over the rounds; on/off: median \
         (min–max) of the per-round ratios. admit: the share of decisions admitted.\n\
         p50/p99 µs: median and p99 of the check() calls' wall times as their callers see \
         them, in each round, median over the rounds; on/off: median per-round ratio. \
         calls/dec: EVALSHA calls per decision (INFO commandstats); Redis µs: evalsha usec \
         per decision (usec_per_call x calls / decisions); srv µs: redis-server main thread \
         CPU per decision (execution + socket I/O); cli µs: this process's CPU per decision.",
        coalesce_n(1),
        coalesce_n(TASKS)
    );
    let find = |label: &str, tasks: usize, coalesce: bool| {
        cells.iter().find(|c| {
            workloads[c.workload].label == label && c.tasks == tasks && c.coalesce == coalesce
        })
    };
    println!("\ncoalescing on vs off:");
    for w in workloads {
        let (Some(off64), Some(on64), Some(off1), Some(on1)) = (
            find(w.label, TASKS, false),
            find(w.label, TASKS, true),
            find(w.label, 1, false),
            find(w.label, 1, true),
        ) else {
            continue;
        };
        println!(
            "  {:<22} at {TASKS} tasks: decisions/s x{} (median per-round ratio), EVALSHAs \
             per decision {} -> {}; at 1 task: p50 latency x{}, p99 x{}, decisions/s x{}",
            w.label,
            opt(rate_ratio(on64, off64), 0, 3),
            opt(off64.calls_per_decision(), 0, 3),
            opt(on64.calls_per_decision(), 0, 3),
            opt(latency_ratio(on1, off1, false), 0, 3),
            opt(latency_ratio(on1, off1, true), 0, 3),
            opt(rate_ratio(on1, off1), 0, 3),
        );
    }
}

// ---------------------------------------------------------------------------------------------
// The run

struct Stores {
    multiplexed: RedisStore,
    /// Multiplexed too, with `coalesce(true)`.
    coalescing: RedisStore,
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
    let sha = Script::new(&gcra_lua(&w.policy)).get_hash().to_owned();
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
    // A single check answers with one integer: reset_after (µs) when admitted.
    let reset = reply
        .as_integer()
        .unwrap_or_else(|| panic!("EVALSHA answered {reply:?}"));
    assert!(d.allowed, "a fresh key is admitted");
    assert_eq!(
        reset,
        d.reset_after.as_micros() as i64,
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
    support::mark_run_start();
    let rounds = support::env_or("REDIS_ROUNDS", DEFAULT_COALESCE_ROUNDS).max(1);
    // Kept until the end of main: dropping it stops the redis-server.
    let Some(server) = support::redis_or_note("nothing to measure") else {
        return;
    };
    let ceiling = support::have_redis_benchmark();
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
        // Each check alone: the rows compare connection kinds, not coalescing.
        let multiplexed = RedisStore::builder()
            .coalesce(false)
            .multiplexed(&url)
            .await
            .expect("multiplexed store");
        let coalescing = RedisStore::builder()
            .coalesce(true)
            .multiplexed(&url)
            .await
            .expect("coalescing store");
        let mut pools = Vec::new();
        for n in POOL_SIZES {
            let pool = RedisStore::builder()
                .coalesce(false)
                .pool_size(n)
                .pool(&url)
                .await
                .expect("pooled store");
            pools.push((n, pool));
        }
        Stores {
            multiplexed,
            coalescing,
            pools,
        }
    });
    let workloads = [
        Workload::new("redis_hot_allowed", "hot key, allowed", true, false),
        Workload::new("redis_10k_allowed", "10k keys, allowed", true, true),
        Workload::new("redis_hot_denied", "hot key, denied", false, false),
    ];
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
        let sha = check_script(&server, &rt, &stores.multiplexed, w);
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
    // Coalescing: the allowed workloads, and a hot key refused most or all of the time, as a
    // rate-limited key is.
    let coalescing = [
        Workload::new("redis_hot_allowed", "hot key, allowed", true, false),
        Workload::new("redis_10k_allowed", "10k keys, allowed", true, true),
        Workload::with_quota(
            "",
            "hot key, limited",
            "bench-limited",
            LIMITED,
            false,
            false,
        ),
        Workload::new("redis_hot_denied", "hot key, denied", false, false),
    ];
    let cells = bench_coalescing(&rt, &server, &stores, &coalescing, rounds);
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
    print_coalescing(&cells, &coalescing, rounds);
    drop(server);
}
