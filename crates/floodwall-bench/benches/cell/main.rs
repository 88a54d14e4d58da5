//! floodwall's `RedisStore` against redis-cell's native module (`CL.THROTTLE`), the same
//! GCRA with the same arguments, in one run: decisions per second and Redis CPU per
//! decision.
//!
//! Run: `cargo bench -p floodwall-bench --bench cell` (about 40 s, plus a few seconds
//! the first time to build the module). The module is redis-cell's published crate
//! ([`module::VERSION`]), built from source the first time and cached under the target dir
//! (`REDIS_CELL_MODULE=<path>` uses another build); the bench starts its own `redis-server
//! --loadmodule <it>` on a free loopback port (redis-harness). If the module cannot be
//! built or loaded, the `CL.THROTTLE` rows are skipped with the reason and floodwall's
//! rows still run.
//!
//! Rows, each through a redis-rs `ConnectionManager` (one multiplexed connection) from 64
//! tokio tasks on a 2-worker runtime, the same driver for all three but the call itself:
//!
//! - `CL.THROTTLE <key> <max_burst> <count> <period> 1`;
//! - floodwall's default store (`RedisStore::builder().multiplexed(url)`: coalescing and
//!   the deny cache on) under `Policy::redis_cell` with the same arguments;
//! - the same with `deny_cache(false)`.
//!
//! Workloads: one hot key, 100 keys and 10,000 keys uniform, 10,000 keys drawn from a
//! Zipf distribution (a quota that never refuses here: the admission path), and an attack mix: 100 keys far past a `10/s burst 10` quota
//! (9 calls in 10, each key a few hundred times its quota) among 10,000 normal keys under
//! the same quota (1 call in 10, never refused).
//!
//! `CELL_ROUNDS` rounds (default 7) after an uncounted warm-up; each round runs every
//! (workload, row) cell once for `CELL_DECISIONS` checks (default 100,000), in an order
//! that alternates per round. Per cell: decisions/s (median and range over the rounds; the
//! ratio to `CL.THROTTLE` is the median of the per-round ratios), Redis CPU per decision
//! (`INFO cpu` `used_cpu_user + used_cpu_sys` deltas over the decisions; the ratio is of the
//! totals), calls sent per decision (`INFO commandstats`: `evalsha` + `cl.throttle`), the
//! share admitted, and the client's CPU per decision. Then latency at 1 task on 10,000
//! keys (`CELL_LATENCY_CHECKS` checks per row and round, default 5,000): p50 and p99, the
//! median over the rounds. The run ends with the targets, met or not.

mod drive;
mod module;
mod report;
use floodwall_bench as support;

use floodwall::redis::RedisStore;
use floodwall::redis::redis::{self, aio::ConnectionManager, aio::ConnectionManagerConfig};
use redis_harness::RedisServer;
use tokio::runtime::Runtime;

use drive::{CellQuota, Target, Workload, drive};
use report::{Latency, Measured};

/// Checks in flight.
const TASKS: usize = 64;
/// Worker threads of the client's runtime.
const WORKERS: usize = 2;

/// The Zipf workload's exponent: the classic skew, key `i` drawn `1/i` as often as the first.
const ZIPF_EXPONENT: f64 = 1.0;
/// Calls in the Zipf workload's sequence (then it repeats).
const ZIPF_DRAWS: usize = 100_000;

/// Never refuses at the rates reached here: `CL.THROTTLE key 1000000000 1000000 1` (1 µs
/// apart, a burst of 10^9).
const ALLOWED: CellQuota = CellQuota {
    max_burst: 1_000_000_000,
    count: 1_000_000,
    period: 1,
};
/// The attack mix's quota: `CL.THROTTLE key 9 10 1`, 10/s with a burst of 10.
const ATTACK: CellQuota = CellQuota {
    max_burst: 9,
    count: 10,
    period: 1,
};
const ATTACKERS: usize = 100;
const NORMAL_KEYS: usize = 10_000;
/// Of every 10 calls of the attack mix, this many go to the attackers.
const ATTACK_SHARE: usize = 9;

/// The rows, in table order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Row {
    Cell,
    Floodwall,
    NoDenyCache,
}

impl Row {
    pub(crate) const ALL: [Row; 3] = [Row::Cell, Row::Floodwall, Row::NoDenyCache];

    pub(crate) fn name(self) -> String {
        match self {
            Row::Cell => format!("CL.THROTTLE (redis-cell {})", module::VERSION),
            Row::Floodwall => "floodwall, default".into(),
            Row::NoDenyCache => "floodwall, deny_cache(false)".into(),
        }
    }

    /// The floodwall policy name of this row (its own Redis keys).
    fn policy(self, w: &Workload) -> String {
        match self {
            Row::Cell => unreachable!("CL.THROTTLE has no policy"),
            Row::Floodwall => format!("cell-{}", w.id),
            Row::NoDenyCache => format!("cell-{}-nocache", w.id),
        }
    }
}

/// CPU seconds redis-server has used, from `INFO cpu`.
fn redis_cpu_s(server: &RedisServer) -> f64 {
    support::used_cpu_s(&server.cmd(&["INFO", "cpu"])).expect("INFO cpu has used_cpu_user/sys")
}

/// Calls the client sent (scripts and `CL.THROTTLE`) since the last `CONFIG RESETSTAT`.
fn calls_sent(server: &RedisServer) -> u64 {
    support::commandstats(&server.cmd(&["INFO", "commandstats"]))
        .into_iter()
        .filter(|(name, _)| matches!(name.as_str(), "evalsha" | "eval" | "cl.throttle"))
        .filter_map(|(_, fields)| fields.get("calls")?.parse::<u64>().ok())
        .sum()
}

/// One drive of `target` with Redis's counters read around it.
fn measure(
    server: &RedisServer,
    rt: &Runtime,
    target: &Target,
    tasks: usize,
    iters: u64,
    start: u64,
    timed: bool,
) -> (drive::Outcome, Measured) {
    server.cmd(&["CONFIG", "RESETSTAT"]);
    let (cpu, client) = (redis_cpu_s(server), support::own_cpu_ns());
    let out = drive(rt, target, tasks, iters, start, timed);
    let client_ns = support::own_cpu_ns().saturating_sub(client);
    let redis_us = (redis_cpu_s(server) - cpu) * 1e6;
    let m = Measured {
        decisions: iters,
        wall_ns: out.wall.as_nanos() as u64,
        redis_us,
        calls: calls_sent(server),
        client_ns,
        allowed: out.allowed,
        attacker_checks: out.attacker_checks,
        attacker_allowed: out.attacker_allowed,
        rates: vec![iters as f64 / out.wall.as_secs_f64()],
    };
    (out, m)
}

/// The first calls on a fresh key through `CL.THROTTLE` and floodwall's default store,
/// interleaved: whether admitted, the limit and the remaining count must agree (a warning
/// if not: a quota boundary crossed between two calls can shift them). The reported
/// durations are compared apart: redis-cell 0.2.2 truncates them to whole seconds, and
/// `Policy::redis_cell` rounds them up.
fn check_equivalence(rt: &Runtime, cell: &ConnectionManager, store: &RedisStore, w: &Workload) {
    let probe = Workload {
        label: "probe",
        id: "probe",
        quota: w.quota,
        keys: vec![drive::Key {
            user: format!("probe-{}", w.id).into_bytes(),
            attacker: false,
        }],
    };
    let mut ours = Target::floodwall(store, &format!("probe-{}", w.id), &probe);
    let mut theirs = Target::cell(cell, &probe);
    let calls = w.quota.max_burst.min(10) + 2;
    let (mut refused, mut rounded) = (0, 0);
    for call in 0..calls {
        let (a, b) = rt.block_on(async { (theirs.check(0).await, ours.check(0).await) });
        if a[..3] != b[..3] {
            println!(
                "warning: {}: call {call} on a fresh key: CL.THROTTLE {a:?}, floodwall {b:?} \
                 (limited, limit, remaining, retry_after, reset_after)",
                w.label
            );
        } else if a[3..] != b[3..] {
            rounded += 1;
        }
        refused += a[0];
    }
    if w.quota.max_burst < calls {
        assert!(
            refused > 0,
            "{}: the probe never reached the quota",
            w.label
        );
    }
    println!(
        "{}: the first {calls} calls on a fresh key agree on admitted, limit and remaining; \
         retry_after/reset_after differ in {rounded} (whole seconds: CL.THROTTLE truncates, \
         floodwall rounds up)",
        w.label
    );
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "n/a".into())
}

/// A redis-server with redis-cell loaded, or a plain one and why `CL.THROTTLE` is missing.
fn start_server() -> Option<(RedisServer, Option<String>)> {
    let why = match module::module() {
        Ok(path) => {
            let path = path.to_string_lossy().into_owned();
            match RedisServer::try_start_with(&["--loadmodule", &path]) {
                Ok(server) => return Some((server, None)),
                Err(e) => format!("redis-server --loadmodule {path} failed: {e}"),
            }
        }
        Err(e) => format!("no redis-cell {} module: {e}", module::VERSION),
    };
    println!("note: {why}; the CL.THROTTLE rows are skipped");
    let server = support::redis_or_note("nothing to measure")?;
    Some((server, Some(why)))
}

fn main() {
    let rounds = support::env_or("CELL_ROUNDS", 7usize).max(1);
    let decisions = support::env_or("CELL_DECISIONS", 100_000u64).max(TASKS as u64);
    let latency_checks = support::env_or("CELL_LATENCY_CHECKS", 5_000u64).max(1);
    let Some((server, missing)) = start_server() else {
        return;
    };
    let rt = support::runtime(WORKERS);
    let url = server.url();
    let (cell_conn, floodwall, no_deny) = rt.block_on(async {
        let client = redis::Client::open(url.as_str()).expect("a Redis URL");
        // As the store configures its own `ConnectionManager` (the response timeout wraps
        // every call).
        let timeout = RedisStore::DEFAULT_TIMEOUT;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(timeout))
            .set_response_timeout(Some(timeout));
        let cell = ConnectionManager::new_with_config(client, config)
            .await
            .expect("a ConnectionManager");
        let floodwall = RedisStore::builder()
            .multiplexed(&url)
            .await
            .expect("default store");
        let no_deny = RedisStore::builder()
            .deny_cache(false)
            .multiplexed(&url)
            .await
            .expect("store without deny cache");
        (cell, floodwall, no_deny)
    });
    let workloads = [
        Workload::hot("hot key", "hot", ALLOWED),
        Workload::uniform("100 keys", "k100", ALLOWED, 100),
        Workload::uniform("10k keys", "k10k", ALLOWED, 10_000),
        Workload::zipf(
            "zipf 10k",
            "zipf",
            ALLOWED,
            10_000,
            ZIPF_EXPONENT,
            ZIPF_DRAWS,
        ),
        Workload::attack(
            "attack mix",
            "attack",
            ATTACK,
            ATTACKERS,
            NORMAL_KEYS,
            ATTACK_SHARE,
        ),
    ];
    let rows: Vec<Row> = Row::ALL
        .into_iter()
        .filter(|&r| r != Row::Cell || missing.is_none())
        .collect();
    let target = |w: &Workload, row: Row| match row {
        Row::Cell => Target::cell(&cell_conn, w),
        Row::Floodwall => Target::floodwall(&floodwall, &row.policy(w), w),
        Row::NoDenyCache => Target::floodwall(&no_deny, &row.policy(w), w),
    };
    let targets: Vec<Vec<Target>> = workloads
        .iter()
        .map(|w| rows.iter().map(|&r| target(w, r)).collect())
        .collect();
    if missing.is_none() {
        for w in &workloads {
            check_equivalence(&rt, &cell_conn, &floodwall, w);
        }
    }
    let load_before = load_average();
    println!(
        "{} rounds of {decisions} checks per cell at {TASKS} tasks, {latency_checks} at 1 task; \
         load average {load_before}",
        rounds
    );

    let cells: Vec<(usize, usize)> = (0..workloads.len())
        .flat_map(|w| (0..rows.len()).map(move |r| (w, r)))
        .collect();
    let mut next = vec![0u64; cells.len()];
    // Warm-up: scripts loaded, keys created, attackers past their quota.
    for (c, &(w, r)) in cells.iter().enumerate() {
        let n = decisions / 10;
        measure(&server, &rt, &targets[w][r], TASKS, n, next[c], false);
        next[c] += n;
    }
    let mut measured: Vec<Measured> = cells.iter().map(|_| Measured::default()).collect();
    let latency_of = workloads
        .iter()
        .position(|w| w.id == "k10k")
        .expect("the 10k workload");
    let mut latency: Vec<Latency> = rows.iter().map(|_| Latency::default()).collect();
    let mut latency_next = vec![0u64; rows.len()];
    for round in 0..rounds {
        for c in support::round_order(cells.len(), round) {
            let (w, r) = cells[c];
            let (_, m) = measure(
                &server,
                &rt,
                &targets[w][r],
                TASKS,
                decisions,
                next[c],
                false,
            );
            next[c] += decisions;
            measured[c] += m;
        }
        for r in support::round_order(rows.len(), round) {
            let (out, _) = measure(
                &server,
                &rt,
                &targets[latency_of][r],
                1,
                latency_checks,
                latency_next[r],
                true,
            );
            latency_next[r] += latency_checks;
            latency[r].add_round(out.times);
        }
    }
    let load_after = load_average();

    println!(
        "\nload average: {load_before} before, {load_after} after (1, 5, 15 min); \
         rustc, Redis and the machine as in BENCHMARKS.md"
    );
    let at = |w: usize, row: Row| {
        let r = rows.iter().position(|&x| x == row)?;
        let c = cells.iter().position(|&x| x == (w, r))?;
        Some(&measured[c])
    };
    report::print_table(&workloads, &rows, &at);
    report::print_latency(&rows, &latency, &workloads[latency_of]);
    let latency_at = |row: Row| rows.iter().position(|&x| x == row).map(|r| &latency[r]);
    report::print_targets(&workloads, &at, &latency_at, missing.as_deref());
    drop(server);
}
