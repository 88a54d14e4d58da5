//! What each cell measured, the table, the Redis commands behind each decision, and the
//! issue's targets against limitador's exact storage.

use std::collections::BTreeMap;

use floodwall_bench::{self as support, opt};

use crate::workload::Workload;
use crate::{Row, TASKS, WORKERS};

/// One (workload, row) cell, added up over the rounds.
#[derive(Debug, Default, Clone)]
pub(crate) struct Measured {
    pub(crate) decisions: u64,
    /// redis-server's CPU (`INFO cpu`, user + system), µs.
    pub(crate) redis_us: f64,
    /// Calls of each Redis command (`INFO commandstats`: those a script runs included),
    /// `INFO` and `CONFIG` left out.
    pub(crate) commands: BTreeMap<String, u64>,
    /// The deciding process's CPU, ns: floodwall-rls's for the gRPC rows, this one's for
    /// the in-process rows.
    pub(crate) service_ns: u64,
    /// This process's CPU where it only calls (the gRPC rows), ns.
    pub(crate) client_ns: Option<u64>,
    pub(crate) allowed: u64,
    /// Decisions/s of each round, in round order.
    pub(crate) rates: Vec<f64>,
}

impl std::ops::AddAssign for Measured {
    fn add_assign(&mut self, o: Self) {
        self.decisions += o.decisions;
        self.redis_us += o.redis_us;
        for (name, calls) in o.commands {
            *self.commands.entry(name).or_default() += calls;
        }
        self.service_ns += o.service_ns;
        self.client_ns = match (self.client_ns, o.client_ns) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
        };
        self.allowed += o.allowed;
        self.rates.extend(o.rates);
    }
}

impl Measured {
    fn per_decision(&self, x: f64) -> Option<f64> {
        (self.decisions > 0).then(|| x / self.decisions as f64)
    }

    fn redis_us_per_decision(&self) -> Option<f64> {
        self.per_decision(self.redis_us)
    }

    /// Script calls (`EVALSHA`, `EVAL`): the round trips that decide.
    fn scripts(&self) -> u64 {
        ["evalsha", "eval"]
            .iter()
            .filter_map(|name| self.commands.get(*name))
            .sum()
    }

    fn rate(&self) -> Option<f64> {
        support::median(&mut self.rates.clone())
    }

    /// The median over the rounds of this cell's decisions/s over `other`'s.
    pub(crate) fn rate_ratio(&self, other: &Measured) -> Option<f64> {
        let mut ratios: Vec<f64> = self
            .rates
            .iter()
            .zip(&other.rates)
            .map(|(a, b)| a / b)
            .collect();
        support::median(&mut ratios)
    }

    /// This cell's Redis CPU per decision over `other`'s (the totals over the rounds).
    pub(crate) fn cpu_ratio(&self, other: &Measured) -> Option<f64> {
        self.redis_us_per_decision()
            .zip(other.redis_us_per_decision())
            .map(|(a, b)| a / b)
    }
}

/// The width of the row column: the longest row name.
const ROW: usize = 45;

/// The cell of (workload, row), if measured.
pub(crate) type At<'a> = dyn Fn(usize, &Row) -> Option<&'a Measured> + 'a;

pub(crate) fn print_table(workloads: &[Workload], rows: &[Row], at: &At<'_>) {
    println!(
        "\n{:<9} {:<ROW$} {:>26} {:>8} {:>6} {:>9} {:>8} {:>8} {:>8} {:>7}",
        "workload",
        "row",
        "decisions/s (range)",
        "vs exact",
        "admit",
        "scripts/d",
        "Redis µs",
        "vs exact",
        "svc µs",
        "cli µs"
    );
    for (w, workload) in workloads.iter().enumerate() {
        let exact = at(w, &Row::Exact);
        for row in rows {
            let Some(m) = at(w, row) else { continue };
            let (lo, hi) = m
                .rates
                .iter()
                .fold((f64::MAX, 0f64), |(lo, hi), &r| (lo.min(r), hi.max(r)));
            println!(
                "{:<9} {:<ROW$} {} ({lo:>7.0}–{hi:<7.0}) {} {} {} {} {} {} {}",
                workload.label,
                row.name(),
                opt(m.rate(), 9, 0),
                opt(exact.and_then(|e| m.rate_ratio(e)), 8, 2),
                opt(m.per_decision(m.allowed as f64), 6, 3),
                opt(m.per_decision(m.scripts() as f64), 9, 3),
                opt(m.redis_us_per_decision(), 8, 2),
                opt(exact.and_then(|e| m.cpu_ratio(e)), 8, 3),
                opt(m.per_decision(m.service_ns as f64 / 1e3), 8, 2),
                opt(
                    m.client_ns.and_then(|c| m.per_decision(c as f64 / 1e3)),
                    7,
                    2
                ),
            );
        }
    }
    println!(
        "decisions/s: median over the rounds (range), {TASKS} concurrent calls, the client on \
         {WORKERS} tokio workers; vs exact: median of the per-round ratios to limitador's \
         AsyncRedisStorage (higher is better). admit: share of decisions admitted. scripts/d: \
         EVALSHA + EVAL calls per decision (INFO commandstats; the commands they run are \
         listed below). Redis µs: redis-server \
         CPU per decision (INFO cpu, used_cpu_user + used_cpu_sys deltas); vs exact: its \
         ratio to AsyncRedisStorage's (lower is better). svc µs: CPU per decision of the \
         process that decides (floodwall-rls's, /proc/<pid>/stat utime + stime, for the \
         gRPC rows; this process's, callers included, for the in-process rows). cli µs: \
         this process's CPU per decision where it only calls over gRPC."
    );
}

/// Each cell's Redis commands per decision, by command.
pub(crate) fn print_commands(workloads: &[Workload], rows: &[Row], at: &At<'_>) {
    println!(
        "\nRedis commands per decision (INFO commandstats: a script's call and each command it \
         runs count), by command:"
    );
    for (w, workload) in workloads.iter().enumerate() {
        for row in rows {
            let Some(m) = at(w, row) else { continue };
            let parts: Vec<String> = m
                .commands
                .iter()
                .filter(|&(_, &c)| c > 0)
                .map(|(name, &c)| format!("{name} {:.3}", c as f64 / m.decisions.max(1) as f64))
                .collect();
            let parts = if parts.is_empty() {
                "none".to_owned()
            } else {
                parts.join(", ")
            };
            println!("  {:<9} {:<ROW$} {parts}", workload.label, row.name());
        }
    }
}

fn verdict(ratio: Option<f64>, ok: impl Fn(f64) -> bool) -> &'static str {
    match ratio {
        Some(r) if ok(r) => "met",
        Some(_) => "MISSED",
        None => "not measured",
    }
}

/// The targets for each floodwall-rls row on each workload (the floor's rows
/// decide nothing and are not held to them): at least 3× the decisions/s of limitador's
/// exact storage and at most 0.35× its Redis CPU per decision.
pub(crate) fn print_targets(workloads: &[Workload], rows: &[Row], at: &At<'_>) {
    println!(
        "\ntargets (floodwall-rls over gRPC against limitador's AsyncRedisStorage, same run): \
         decisions/s ≥ 3× and Redis CPU per decision ≤ 0.35×"
    );
    let (mut met, mut missed) = (0, 0);
    for (w, workload) in workloads.iter().enumerate() {
        let Some(exact) = at(w, &Row::Exact) else {
            println!(
                "  {:<9} limitador's exact storage not measured",
                workload.label
            );
            continue;
        };
        for row in rows.iter().filter(|r| r.is_rls() && !r.is_floor()) {
            let Some(m) = at(w, row) else { continue };
            let (rate, cpu) = (m.rate_ratio(exact), m.cpu_ratio(exact));
            let (r, c) = (verdict(rate, |r| r >= 3.0), verdict(cpu, |r| r <= 0.35));
            for v in [r, c] {
                if v == "met" {
                    met += 1;
                } else {
                    missed += 1;
                }
            }
            println!(
                "  {:<9} {:<ROW$} decisions/s {}× ({r}); Redis CPU {}× ({c})",
                workload.label,
                row.name(),
                opt(rate, 0, 2),
                opt(cpu, 0, 3),
            );
        }
    }
    println!("  {met} met, {missed} missed");
}

/// The gRPC floor against limitador's exact storage, per workload: the floor's decisions/s
/// over that row's (median of the per-round ratios), the ceiling of any decision logic
/// behind this client on this machine, beside the CPU a call costs the two processes and
/// the calls/s that CPU alone allows on this machine's cores (Redis and the rest left out).
pub(crate) fn print_floor(workloads: &[Workload], rows: &[Row], at: &At<'_>) {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    println!(
        "\ngRPC floor (every limit unlimited: nothing decided) over limitador's \
         AsyncRedisStorage, same run: the most decisions/s any logic could reach behind \
         this client here"
    );
    for (w, workload) in workloads.iter().enumerate() {
        let Some(exact) = at(w, &Row::Exact) else {
            continue;
        };
        for row in rows.iter().filter(|r| r.is_floor()) {
            let Some(m) = at(w, row) else { continue };
            let svc = m.per_decision(m.service_ns as f64 / 1e3);
            let cli = m.client_ns.and_then(|c| m.per_decision(c as f64 / 1e3));
            let call = svc.zip(cli).map(|(s, c)| s + c);
            println!(
                "  {:<9} {:<ROW$} {}/s = {}× exact (3× needs {}/s); CPU per call {} µs \
                 server + {} µs client = {} µs: {cores} cores allow at most {}/s",
                workload.label,
                row.name(),
                opt(m.rate(), 0, 0),
                opt(m.rate_ratio(exact), 0, 2),
                opt(exact.rate().map(|r| 3.0 * r), 0, 0),
                opt(svc, 0, 1),
                opt(cli, 0, 1),
                opt(call, 0, 1),
                opt(call.map(|c| cores as f64 * 1e6 / c), 0, 0),
            );
        }
    }
}
