//! The table of the steady measurement and the latency group, and the verdicts: the target
//! against no limiter, floodwall against tower_governor.

use crate::client::{Run, Variant};
use crate::support::{self, median, mmm, opt};
use crate::{CONCURRENCY, FLOODWALL, FLOODWALL_NO_HEADERS, GOVERNOR, LATENCY, NONE, TARGET_RATIO};

/// `f` of each round where it is known.
pub(crate) fn per_round(v: &Variant, f: impl Fn(&Run) -> Option<f64>) -> Vec<f64> {
    v.runs.iter().filter_map(f).collect()
}

/// `a`'s figure over `b`'s, round by round (the same round's runs).
pub(crate) fn ratios(a: &Variant, b: &Variant, f: impl Fn(&Run) -> Option<f64>) -> Vec<f64> {
    a.runs
        .iter()
        .zip(&b.runs)
        .filter_map(|(x, y)| f(x).zip(f(y)).map(|(x, y)| x / y))
        .collect()
}

pub(crate) fn print_table(variants: &[Variant], rounds: usize, requests: u64) {
    let Some(base) = variants.iter().find(|v| v.name == NONE) else {
        return;
    };
    let base_lat = support::estimate_ns(LATENCY, NONE, "median");
    println!(
        "\n{:<27} {:<22} {:<22} {:>7} {:>7} {:>9} {:>5} | {:>7} {:>7}",
        "variant",
        "server µs/req (range)",
        "vs none (range)",
        "req/s",
        "vs none",
        "client µs",
        "busy",
        "c=1 µs",
        "vs none"
    );
    for v in variants {
        let lat = support::estimate_ns(LATENCY, v.name, "median");
        println!(
            "{:<27} {:<22} {:<22} {:>7} {:>7} {:>9} {:>4}% | {:>7} {:>7}",
            v.name,
            mmm(per_round(v, Run::server_us), 6, 3),
            mmm(ratios(v, base, Run::server_us), 5, 3),
            opt(median(&mut per_round(v, |r| Some(r.req_per_s()))), 7, 0),
            opt(median(&mut ratios(v, base, |r| Some(r.req_per_s()))), 7, 3),
            opt(median(&mut per_round(v, Run::client_us)), 9, 2),
            opt(
                median(&mut per_round(v, Run::busy)).map(|b| 100.0 * b),
                4,
                0
            ),
            opt(lat.map(|l| l / 1e3), 7, 1),
            opt(lat.zip(base_lat).map(|(l, b)| l / b), 7, 3),
        );
    }
    println!(
        "{rounds} rounds of {requests} requests per variant, {CONCURRENCY} in flight, the \
         variants' order alternating per round. server µs/req: CPU time of the server's \
         thread per request, median (min–max) over the rounds; vs none: that over no \
         limiter's in the same round, median (min–max) of the per-round ratios (lower is \
         better).\n\
         req/s: median over the rounds; vs none: median per-round ratio (higher is better). \
         client µs: the client thread's CPU per request (median); busy: server CPU over wall \
         time (median).\n\
         c=1 µs: latency, one request at a time on one connection (criterion's median sample)."
    );

    let verdict = |ok: bool| if ok { "met" } else { "NOT met" };
    let fw = variants.iter().find(|v| v.name == FLOODWALL);
    if let Some(fw) = fw {
        let mut r = ratios(fw, base, Run::server_us);
        let stats = support::median_min_max(&mut r);
        println!(
            "\ntarget: floodwall-memory server CPU per request <= {TARGET_RATIO}x no limiter \
             (median per-round ratio): {} ({}; {} of {} rounds at or under)",
            verdict(stats.is_some_and(|(m, _, _)| m <= TARGET_RATIO)),
            mmm(r.clone(), 0, 3),
            r.iter().filter(|&&x| x <= TARGET_RATIO).count(),
            r.len()
        );
    }
    // floodwall with its default IETF headers, and without headers as tower_governor by
    // default: each over tower_governor, round by round.
    let gov = variants.iter().find(|v| v.name == GOVERNOR);
    for name in [FLOODWALL, FLOODWALL_NO_HEADERS] {
        let (Some(fw), Some(gov)) = (variants.iter().find(|v| v.name == name), gov) else {
            continue;
        };
        let lat = support::estimate_ns(LATENCY, name, "median")
            .zip(support::estimate_ns(LATENCY, GOVERNOR, "median"))
            .map(|(f, g)| f / g);
        println!(
            "{name} vs tower_governor (median (min–max) of per-round ratios): server CPU per \
             request {} (lower is better, < 1: floodwall cheaper); req/s {} (higher is \
             better); c=1 latency {}",
            mmm(ratios(fw, gov, Run::server_us), 0, 3),
            mmm(ratios(fw, gov, |r| Some(r.req_per_s())), 0, 3),
            opt(lat, 0, 3)
        );
    }
}
