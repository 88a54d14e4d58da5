//! What each cell measured, the tables, and the targets against `CL.THROTTLE`.

use crate::drive::Workload;
use crate::support::{self, opt};
use crate::{ATTACK_SHARE, Row, TASKS, WORKERS};

/// One (workload, row) cell, added up over the rounds.
#[derive(Debug, Default, Clone)]
pub(crate) struct Measured {
    pub(crate) decisions: u64,
    pub(crate) wall_ns: u64,
    /// Redis's CPU (`INFO cpu`, user + system), µs.
    pub(crate) redis_us: f64,
    /// Scripts and `CL.THROTTLE` calls Redis ran.
    pub(crate) calls: u64,
    pub(crate) client_ns: u64,
    pub(crate) allowed: u64,
    pub(crate) attacker_checks: u64,
    pub(crate) attacker_allowed: u64,
    /// Decisions/s of each round, in round order.
    pub(crate) rates: Vec<f64>,
}

impl std::ops::AddAssign for Measured {
    fn add_assign(&mut self, o: Self) {
        self.decisions += o.decisions;
        self.wall_ns += o.wall_ns;
        self.redis_us += o.redis_us;
        self.calls += o.calls;
        self.client_ns += o.client_ns;
        self.allowed += o.allowed;
        self.attacker_checks += o.attacker_checks;
        self.attacker_allowed += o.attacker_allowed;
        self.rates.extend(o.rates);
    }
}

impl Measured {
    fn per_decision(&self, x: f64) -> Option<f64> {
        (self.decisions > 0).then(|| x / self.decisions as f64)
    }

    pub(crate) fn redis_us_per_decision(&self) -> Option<f64> {
        self.per_decision(self.redis_us)
    }

    fn rate(&self) -> Option<f64> {
        support::median(&mut self.rates.clone())
    }

    /// The median over the rounds of this cell's decisions/s over `other`'s.
    fn rate_ratio(&self, other: &Measured) -> Option<f64> {
        let mut ratios: Vec<f64> = self
            .rates
            .iter()
            .zip(&other.rates)
            .map(|(a, b)| a / b)
            .collect();
        support::median(&mut ratios)
    }

    fn cpu_ratio(&self, other: &Measured) -> Option<f64> {
        self.redis_us_per_decision()
            .zip(other.redis_us_per_decision())
            .map(|(a, b)| a / b)
    }
}

/// Latency at 1 task: each round's p50 and p99, µs.
#[derive(Debug, Default)]
pub(crate) struct Latency {
    p50: Vec<f64>,
    p99: Vec<f64>,
}

impl Latency {
    pub(crate) fn add_round(&mut self, times_ns: Vec<u32>) {
        let mut us: Vec<f64> = times_ns.into_iter().map(|t| f64::from(t) / 1e3).collect();
        if let Some(p) = support::quantile(&mut us, 0.5) {
            self.p50.push(p);
        }
        if let Some(p) = support::quantile(&mut us, 0.99) {
            self.p99.push(p);
        }
    }

    fn p50(&self) -> Option<f64> {
        support::median(&mut self.p50.clone())
    }

    fn p99(&self) -> Option<f64> {
        support::median(&mut self.p99.clone())
    }

    /// The median of the per-round p50 ratios to `other`'s.
    fn p50_ratio(&self, other: &Latency) -> Option<f64> {
        let mut r: Vec<f64> = self
            .p50
            .iter()
            .zip(&other.p50)
            .map(|(a, b)| a / b)
            .collect();
        support::median(&mut r)
    }
}

pub(crate) fn print_table<'a>(
    workloads: &[Workload],
    rows: &[Row],
    at: &dyn Fn(usize, Row) -> Option<&'a Measured>,
) {
    println!(
        "\n{:<11} {:<30} {:>26} {:>7} {:>6} {:>9} {:>9} {:>7} {:>7}",
        "workload",
        "row",
        "decisions/s (range)",
        "vs cell",
        "admit",
        "calls/dec",
        "Redis µs",
        "vs cell",
        "cli µs"
    );
    for (w, workload) in workloads.iter().enumerate() {
        let cell = at(w, Row::Cell);
        for &row in rows {
            let Some(m) = at(w, row) else { continue };
            let (lo, hi) = m
                .rates
                .iter()
                .fold((f64::MAX, 0f64), |(lo, hi), &r| (lo.min(r), hi.max(r)));
            println!(
                "{:<11} {:<30} {} ({lo:>7.0}–{hi:<7.0}) {} {} {} {} {} {}",
                workload.label,
                row.name(),
                opt(m.rate(), 9, 0),
                opt(cell.and_then(|c| m.rate_ratio(c)), 7, 3),
                opt(m.per_decision(m.allowed as f64), 6, 3),
                opt(m.per_decision(m.calls as f64), 9, 4),
                opt(m.redis_us_per_decision(), 9, 2),
                opt(cell.and_then(|c| m.cpu_ratio(c)), 7, 3),
                opt(m.per_decision(m.client_ns as f64 / 1e3), 7, 2),
            );
            if m.attacker_checks > 0 {
                let normal = m.decisions - m.attacker_checks;
                let normal_allowed = m.allowed - m.attacker_allowed;
                println!(
                    "{:<11}   attackers admitted {} of {}, normal keys {} of {}",
                    "", m.attacker_allowed, m.attacker_checks, normal_allowed, normal
                );
            }
        }
    }
    println!(
        "decisions/s: median over the rounds (range), {TASKS} tasks on {WORKERS} workers, one \
         multiplexed connection per row; vs cell: median of the per-round ratios to \
         CL.THROTTLE (higher is better). admit: share of checks admitted. calls/dec: \
         EVALSHA + CL.THROTTLE calls Redis ran per decision (INFO commandstats). Redis µs: \
         redis-server CPU per decision (INFO cpu, used_cpu_user + used_cpu_sys deltas over \
         the decisions); vs cell: its ratio to CL.THROTTLE's (lower is better). cli µs: this \
         process's CPU per decision. The attack mix sends {ATTACK_SHARE} of every 10 calls \
         to the attackers."
    );
}

pub(crate) fn print_latency(rows: &[Row], latency: &[Latency], w: &Workload) {
    let find = |row: Row| rows.iter().position(|&r| r == row).map(|r| &latency[r]);
    println!(
        "\nlatency at 1 task, {}: median over the rounds of each round's p50 / p99",
        w.label
    );
    println!(
        "{:<30} {:>8} {:>8} {:>15} {:>9}",
        "row", "p50 µs", "p99 µs", "p50 vs nocache", "p50 vs cell"
    );
    for (r, &row) in rows.iter().enumerate() {
        let l = &latency[r];
        println!(
            "{:<30} {} {} {} {}",
            row.name(),
            opt(l.p50(), 8, 1),
            opt(l.p99(), 8, 1),
            opt(find(Row::NoDenyCache).and_then(|o| l.p50_ratio(o)), 15, 3),
            opt(find(Row::Cell).and_then(|o| l.p50_ratio(o)), 9, 3),
        );
    }
}

fn verdict(ratio: Option<f64>, ok: impl Fn(f64) -> bool) -> &'static str {
    match ratio {
        Some(r) if ok(r) => "met",
        Some(_) => "NOT met",
        None => "not measured",
    }
}

pub(crate) fn print_targets<'a>(
    workloads: &[Workload],
    at: &dyn Fn(usize, Row) -> Option<&'a Measured>,
    latency_at: &dyn Fn(Row) -> Option<&'a Latency>,
    missing: Option<&str>,
) {
    println!("\ntargets (floodwall's default store against CL.THROTTLE, same run):");
    if let Some(why) = missing {
        println!("  not measured against CL.THROTTLE: {why}");
    }
    for (w, workload) in workloads.iter().enumerate() {
        let ours = at(w, Row::Floodwall);
        let cell = at(w, Row::Cell);
        let cpu = ours.zip(cell).and_then(|(o, c)| o.cpu_ratio(c));
        let rate = ours.zip(cell).and_then(|(o, c)| o.rate_ratio(c));
        match workload.id {
            "k10k" => println!(
                "  {:<10} Redis CPU per decision {} (≤ 0.7: {}); decisions/s {} (≥ 1.8: {})",
                workload.label,
                opt(cpu, 0, 3),
                verdict(cpu, |r| r <= 0.7),
                opt(rate, 0, 3),
                verdict(rate, |r| r >= 1.8),
            ),
            "zipf" => println!(
                "  {:<10} Redis CPU per decision {} (≤ 0.7: {}); decisions/s {}",
                workload.label,
                opt(cpu, 0, 3),
                verdict(cpu, |r| r <= 0.7),
                opt(rate, 0, 3),
            ),
            "k100" => println!(
                "  {:<10} Redis CPU per decision {} (≤ 1.0: {}); decisions/s {} (≥ 1.0: {})",
                workload.label,
                opt(cpu, 0, 3),
                verdict(cpu, |r| r <= 1.0),
                opt(rate, 0, 3),
                verdict(rate, |r| r >= 1.0),
            ),
            "hot" => println!(
                "  {:<10} Redis CPU per decision {} (≤ 0.4: {}); decisions/s {}",
                workload.label,
                opt(cpu, 0, 3),
                verdict(cpu, |r| r <= 0.4),
                opt(rate, 0, 3),
            ),
            _ => println!(
                "  {:<10} Redis CPU per request {} (≤ 0.3: {}); decisions/s {}",
                workload.label,
                opt(cpu, 0, 3),
                verdict(cpu, |r| r <= 0.3),
                opt(rate, 0, 3),
            ),
        }
    }
    let ours = latency_at(Row::Floodwall);
    let single = ours
        .zip(latency_at(Row::NoDenyCache))
        .and_then(|(o, s)| o.p50_ratio(s));
    let cell = ours
        .zip(latency_at(Row::Cell))
        .and_then(|(o, c)| o.p50_ratio(c));
    println!(
        "  latency    p50 at 1 task {} of a single call's (deny_cache(false)) (≤ 1.05: {}); \
         {} of CL.THROTTLE's",
        opt(single, 0, 3),
        verdict(single, |r| r <= 1.05),
        opt(cell, 0, 3),
    );
}
