//! `floodwall simulate`: the same requests through each algorithm, each on a
//! `MemoryStore` of its own whose `ManualClock` is set to every request's instant (no
//! sleeping: a day of traffic replays in moments), and what each admitted.

use std::fmt::Write as _;
use std::time::Duration;

use floodwall_core::{Algorithm, ManualClock, MemoryStore, Policy, Quota, StoreExt};

use crate::error::Failure;
use crate::traffic::Traffic;

/// The key every simulated request has: one client.
const KEY: &[u8] = b"simulated-client";

/// Around 2023-11-14 in µs since the epoch: a realistic clock, put on a multiple of the
/// period so that the simulation's 0 is a fixed window's edge.
const EPOCH_NEAR: u64 = 1_700_000_000_000_000;

/// One algorithm's run.
#[derive(Debug)]
pub(crate) struct Run {
    /// The policy that decided (the quota under this algorithm).
    pub(crate) policy: Policy,
    /// Per request, in the traffic's order: admitted or not.
    pub(crate) admitted: Vec<bool>,
    /// Its figures.
    pub(crate) summary: Summary,
}

/// What a run comes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Summary {
    /// Requests admitted.
    pub(crate) admitted: usize,
    /// Requests refused.
    pub(crate) refused: usize,
    /// The most admitted within any span of one period (`[t, t + period)`): a fixed
    /// window's edge burst shows here as up to twice its count.
    pub(crate) max_in_period: usize,
}

/// The quota under each algorithm (in the order given, each once); an algorithm that
/// cannot enforce it is an error naming it (a window has no burst).
pub(crate) fn policies(quota: Quota, algorithms: &[Algorithm]) -> Result<Vec<Policy>, Failure> {
    let mut policies: Vec<Policy> = Vec::new();
    for &algorithm in algorithms {
        if policies.iter().any(|p| p.algorithm() == algorithm) {
            continue;
        }
        // floodwall-core's own reason: a window has no burst, say.
        let policy = Policy::new(algorithm.name(), algorithm, quota)
            .map_err(|e| Failure::input(format!("--algorithm {}", algorithm.name()), e))?;
        policies.push(policy);
    }
    Ok(policies)
}

/// The quota's period as a quota writes it (`1s`, `10min`).
fn period(quota: Quota) -> String {
    let written = Quota::new(1, quota.period())
        .map(|q| q.to_string())
        .unwrap_or_default();
    written.trim_start_matches("1/").to_owned()
}

/// Replays `traffic` through `policy`, on a store and clock of its own.
pub(crate) fn run(policy: &Policy, traffic: &Traffic) -> Result<Run, Failure> {
    let period = policy.quota().period_micros();
    let start = EPOCH_NEAR - EPOCH_NEAR % period;
    let clock = ManualClock::new(start);
    let store = MemoryStore::builder().clock(clock.clone()).build();
    let mut admitted = Vec::with_capacity(traffic.times.len());
    for &t in &traffic.times {
        clock.set(start + t);
        let decision = store
            .check_now(KEY, policy, 1)
            .expect("the memory store answers at once")
            .map_err(|e| Failure::other(format!("simulating {}", policy.name()), e))?;
        admitted.push(decision.is_allowed());
    }
    let summary = summarize(&traffic.times, &admitted, period);
    Ok(Run {
        policy: policy.clone(),
        admitted,
        summary,
    })
}

/// Counts a run, and the most admitted within any `period` µs.
pub(crate) fn summarize(times: &[u64], admitted: &[bool], period: u64) -> Summary {
    let passed: Vec<u64> = times
        .iter()
        .zip(admitted)
        .filter(|&(_, &ok)| ok)
        .map(|(&t, _)| t)
        .collect();
    let mut max_in_period = 0;
    let mut from = 0;
    for (to, &t) in passed.iter().enumerate() {
        while t - passed[from] >= period {
            from += 1;
        }
        max_in_period = max_in_period.max(to + 1 - from);
    }
    Summary {
        admitted: passed.len(),
        refused: times.len() - passed.len(),
        max_in_period,
    }
}

/// The summary: a first line saying what was replayed, then a header and a row per
/// algorithm (name, admitted, refused, the most admitted in any period).
pub(crate) fn rows(quota: Quota, traffic: &Traffic, runs: &[Run]) -> (String, Vec<[String; 4]>) {
    let title = format!(
        "{} requests over {}; quota {quota}",
        traffic.times.len(),
        seconds(traffic.span)
    );
    let header = ["algorithm", "admitted", "refused"].map(str::to_owned);
    let [a, b, c] = header;
    let mut rows = vec![[a, b, c, format!("most admitted in any {}", period(quota))]];
    for run in runs {
        let s = run.summary;
        rows.push([
            run.policy.name().to_owned(),
            s.admitted.to_string(),
            s.refused.to_string(),
            s.max_in_period.to_string(),
        ]);
    }
    (title, rows)
}

/// The summary as text: [`rows`] in aligned columns.
pub(crate) fn table(quota: Quota, traffic: &Traffic, runs: &[Run]) -> String {
    let (title, rows) = rows(quota, traffic, runs);
    let mut out = format!("{title}\n");
    let last = rows[0][3].len();
    for [name, admitted, refused, most] in &rows {
        let _ = writeln!(out, "{name:<16}{admitted:>10}{refused:>10}  {most:>last$}");
    }
    out
}

/// µs as seconds for people (`10s`, `2.5s`).
pub(crate) fn seconds(us: u64) -> String {
    let d = Duration::from_micros(us);
    format!("{}s", d.as_secs_f64())
}

/// One row per request: its instant in seconds (to the µs) and, per algorithm, 1 if
/// admitted.
pub(crate) fn csv(traffic: &Traffic, runs: &[Run]) -> String {
    let mut out = String::from("time_s");
    for run in runs {
        out.push(',');
        out.push_str(run.policy.name());
    }
    out.push('\n');
    for (i, &t) in traffic.times.iter().enumerate() {
        let _ = write!(out, "{}.{:06}", t / 1_000_000, t % 1_000_000);
        for run in runs {
            out.push_str(if run.admitted[i] { ",1" } else { ",0" });
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_largest_count_in_a_period_slides() {
        let s = summarize(
            &[0, 900, 1000, 1100, 2500],
            &[true, true, true, false, true],
            1000,
        );
        assert_eq!(
            s,
            Summary {
                admitted: 4,
                refused: 1,
                max_in_period: 2
            }
        );
        let empty = summarize(&[], &[], 1000);
        assert_eq!(empty.max_in_period, 0);
    }

    #[test]
    fn a_window_with_a_burst_is_refused_by_name() {
        let quota: Quota = "10/s burst 20".parse().unwrap();
        let e = policies(quota, &[Algorithm::Gcra, Algorithm::FixedWindow]).unwrap_err();
        assert!(
            e.to_string().starts_with("--algorithm fixed_window: "),
            "{e}"
        );
        assert!(e.to_string().contains("burst"), "{e}");
        let ok = policies("10/s".parse().unwrap(), &[Algorithm::Gcra, Algorithm::Gcra]).unwrap();
        assert_eq!(ok.len(), 1);
    }
}
