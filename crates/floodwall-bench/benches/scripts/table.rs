//! The rows of the scripts bench and their tables: one per run, and the medians over the
//! runs that BENCHMARKS.md reports against the targets.

use crate::support;
use crate::{Case, FAIR_READ, FAIR_WRITE, Target, fair_ref};

pub(crate) struct Row {
    pub(crate) script: String,
    pub(crate) case: Case,
    /// The median of the chunks' usec per call.
    pub(crate) usec: f64,
    /// The median of the chunks' ratios to E1.
    pub(crate) ratio: f64,
    /// Writes per call: the share of calls admitted.
    pub(crate) writes: f64,
    /// The script's target; `None` for the references.
    pub(crate) target: Option<Target>,
    /// `ratio` over the same case's fair reference's in the same run ([`with_xref`]): one
    /// value per run.
    pub(crate) xref: Vec<f64>,
}

/// `rows` (one run's) with each row's ratio to its case's fair reference in that run.
pub(crate) fn with_xref(mut rows: Vec<Row>) -> Vec<Row> {
    for case in [Case::Allowed, Case::Denied] {
        let reference = rows
            .iter()
            .find(|r| r.case == case && r.script == fair_ref(case))
            .map_or(f64::NAN, |r| r.ratio);
        for r in rows.iter_mut().filter(|r| r.case == case) {
            r.xref = vec![r.ratio / reference];
        }
    }
    rows
}

/// Each (script, case)'s median ratio to E1 over the runs, as a row; the usec and the share
/// admitted are the median run's; `xref` holds every run's.
pub(crate) fn medians(runs: &[Vec<Row>]) -> Vec<Row> {
    runs[0]
        .iter()
        .map(|first| {
            let mut same: Vec<&Row> = runs
                .iter()
                .filter_map(|rows| {
                    rows.iter()
                        .find(|r| r.script == first.script && r.case == first.case)
                })
                .collect();
            same.sort_by(|a, b| a.ratio.total_cmp(&b.ratio));
            let mid = same[same.len() / 2];
            Row {
                script: first.script.clone(),
                case: first.case,
                usec: mid.usec,
                ratio: mid.ratio,
                writes: mid.writes,
                target: first.target,
                xref: same.iter().flat_map(|r| r.xref.iter().copied()).collect(),
            }
        })
        .collect()
}

pub(crate) fn print_rows(title: &str, rows: &[Row]) {
    println!();
    println!("{title}");
    println!(
        "{:<24} {:<8} {:>8} {:>7} {:>7} {:>12} {:>8} {:>7}  target",
        "script", "case", "usec", "xE1", "xref", "xref range", "/allowd", "writes"
    );
    for case in [Case::Allowed, Case::Denied] {
        for r in rows.iter().filter(|r| r.case == case) {
            let ratio = r.ratio;
            let mut xs = r.xref.clone();
            let (xref, lo, hi) = support::median_min_max(&mut xs).unwrap_or((f64::NAN, 0.0, 0.0));
            let range = if xs.len() > 1 {
                format!("{lo:.2}–{hi:.2}")
            } else {
                String::new()
            };
            let target = r.target.map_or(String::new(), |t| {
                t.verdict(case == Case::Allowed, ratio, xref)
            });
            // A script's refusal must cost less than its admission.
            let vs_allowed = match (case, r.target) {
                (Case::Denied, Some(_)) => rows
                    .iter()
                    .find(|a| a.case == Case::Allowed && a.script == r.script)
                    .map(|a| r.ratio / a.ratio),
                _ => None,
            };
            let (vs, cheaper) = match vs_allowed {
                Some(v) => (
                    format!("{v:.2}"),
                    if v < 1.0 {
                        "denied < allowed: met"
                    } else {
                        "denied < allowed: MISSED"
                    },
                ),
                None => (String::new(), ""),
            };
            let sep = if target.is_empty() || cheaper.is_empty() {
                ""
            } else {
                "; "
            };
            println!(
                "{:<24} {:<8} {:>8.2} {:>7.2} {:>7.2} {:>12} {:>8} {:>7.3}  {target}{sep}{cheaper}",
                r.script,
                case.name(),
                r.usec,
                ratio,
                xref,
                range,
                vs,
                r.writes
            );
        }
    }
    println!(
        "usec: usec_per_call of evalsha (INFO commandstats), the chunks' median; xE1: the \
         median of the chunks' usec over the mean of the E1 chunks around them; xref: xE1 \
         over the same case's fair reference's xE1 in the same run ({FAIR_WRITE} for \
         allowed, {FAIR_READ} for denied; over several runs the median of the runs', and \
         their range); /allowd: denied xE1 over the same script's \
         allowed xE1; writes: SET/HINCRBY/ZADD/INCR/INCRBY calls per script call (the share \
         admitted)"
    );
}
