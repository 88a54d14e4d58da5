//! Coalescing: each workload at one task and at [`TASKS`], coalescing off and on, in
//! alternating rounds; the cells and their table.

use redis_harness::RedisServer;
use tokio::runtime::Runtime;

use crate::measure::{Stats, own_cpu_ns, server_cpu_ns};
use crate::support::{self, mmm, opt};
use crate::workload::{Workload, drive_tasks};
use crate::{ALLOWED, DENIED, LIMITED, Stores, TASKS};

/// Tasks of the coalescing table: one caller alone, and [`TASKS`] at once.
pub(crate) const COALESCE_TASKS: [usize; 2] = [1, TASKS];
/// Rounds of the coalescing table (`REDIS_ROUNDS`); each runs every cell once.
pub(crate) const DEFAULT_COALESCE_ROUNDS: usize = 7;

/// Decisions per run of a cell: 0.3–1 s here at one task (a round trip each, 15–25 µs on
/// loopback) and at 64 tasks.
pub(crate) fn coalesce_n(tasks: usize) -> u64 {
    if tasks == 1 { 30_000 } else { 100_000 }
}

/// One cell of the coalescing table: a workload at a number of tasks, coalescing off or on.
pub(crate) struct Cell {
    /// Index into the workloads.
    pub(crate) workload: usize,
    pub(crate) tasks: usize,
    pub(crate) coalesce: bool,
    /// Decisions per second of each round.
    pub(crate) rates: Vec<f64>,
    /// Summed over the rounds.
    pub(crate) stats: Stats,
    /// Script calls the store counted (`RedisStore::stats`), summed over the rounds.
    pub(crate) script_calls: u64,
    /// Median and p99 (µs) of the calls' wall times, per round.
    pub(crate) latencies: Vec<(f64, f64)>,
}

impl Cell {
    /// Median over the rounds of each round's median (`p99: false`) or p99 latency, µs.
    pub(crate) fn latency_us(&self, p99: bool) -> Option<f64> {
        let mut xs: Vec<f64> = self
            .latencies
            .iter()
            .map(|&(p50, p99_)| if p99 { p99_ } else { p50 })
            .collect();
        support::median(&mut xs)
    }

    pub(crate) fn calls_per_decision(&self) -> Option<f64> {
        (self.stats.decisions > 0)
            .then(|| self.stats.evalsha_calls as f64 / self.stats.decisions as f64)
    }

    /// Time inside Redis per decision: `usec` of evalsha over the decisions.
    pub(crate) fn redis_us_per_decision(&self) -> Option<f64> {
        (self.stats.decisions > 0 && self.stats.evalsha_calls > 0)
            .then(|| self.stats.evalsha_usec as f64 / self.stats.decisions as f64)
    }
}

/// Measures the coalescing table: for each workload, at 1 and [`TASKS`] tasks, on
/// the multiplexed store with coalescing off and on; `rounds` rounds, each running every
/// cell once in an alternating order.
pub(crate) fn bench_coalescing(
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
pub(crate) fn rate_ratios(on: &Cell, off: &Cell) -> Vec<f64> {
    on.rates
        .iter()
        .zip(&off.rates)
        .map(|(a, b)| a / b)
        .collect()
}

/// Median of `on`'s decisions/s over `off`'s, round by round.
pub(crate) fn rate_ratio(on: &Cell, off: &Cell) -> Option<f64> {
    support::median(&mut rate_ratios(on, off))
}

/// Median of `on`'s median (or p99) latency over `off`'s, round by round.
pub(crate) fn latency_ratio(on: &Cell, off: &Cell, p99: bool) -> Option<f64> {
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
pub(crate) fn ratio(on: Option<f64>, off: Option<f64>) -> Option<f64> {
    on.zip(off).map(|(a, b)| a / b)
}

pub(crate) fn print_coalescing(cells: &[Cell], workloads: &[Workload], rounds: usize) {
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
