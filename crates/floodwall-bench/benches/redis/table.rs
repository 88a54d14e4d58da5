//! The main table's rows (floodwall through each connection kind, redis-benchmark plain and
//! pipelined, E1), the table and the verdict against the ceiling.

use crate::measure::Stats;
use crate::support::{self, opt};
use crate::workload::Workload;
use crate::{E1_LUA, PIPELINE, POOL_SIZES, TASKS, WORKERS};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// redis-benchmark at the same concurrency, no pipelining.
    Ceiling,
    /// redis-benchmark, pipelined.
    Pipelined,
    Multiplexed,
    Pool(u32),
}

impl Kind {
    pub(crate) fn name(self) -> String {
        match self {
            Kind::Ceiling => format!("redis-benchmark -c {TASKS}"),
            Kind::Pipelined => format!("redis-benchmark -c {TASKS} -P {PIPELINE}"),
            Kind::Multiplexed => "floodwall, multiplexed".into(),
            Kind::Pool(n) => format!("floodwall, bb8 pool of {n}"),
        }
    }

    /// The criterion id of a floodwall row.
    pub(crate) fn id(self) -> Option<String> {
        match self {
            Kind::Multiplexed => Some("multiplexed".into()),
            Kind::Pool(n) => Some(format!("pool-{n}")),
            Kind::Ceiling | Kind::Pipelined => None,
        }
    }
}

pub(crate) struct Row {
    pub(crate) workload: &'static str,
    pub(crate) group: &'static str,
    pub(crate) kind: Kind,
    /// redis-benchmark's figure; floodwall rows take criterion's median.
    pub(crate) rps: Option<f64>,
    pub(crate) stats: Stats,
}

impl Row {
    pub(crate) fn decisions_per_s(&self) -> Option<f64> {
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
pub(crate) struct E1 {
    pub(crate) plain: Option<Row>,
    pub(crate) pipelined: Option<Row>,
}

impl E1 {
    pub(crate) fn usec_for(&self, kind: Kind) -> Option<f64> {
        let row = if kind == Kind::Pipelined {
            self.pipelined.as_ref()
        } else {
            self.plain.as_ref()
        };
        row?.stats.usec_per_call()
    }
}

pub(crate) fn rate_of(rows: &[Row], workload: &str, kind: Kind) -> Option<f64> {
    rows.iter()
        .find(|r| r.workload == workload && r.kind == kind)
        .and_then(Row::decisions_per_s)
}

pub(crate) fn print_table(rows: &[Row], e1: &E1) {
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

pub(crate) fn print_verdict(rows: &[Row], workloads: &[Workload]) {
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
