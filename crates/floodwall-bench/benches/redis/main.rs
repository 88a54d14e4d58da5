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
//! merges concurrent checks, of one key or of many, into one batch EVALSHA): GCRA on the
//! multiplexed connection, hot key and 10,000 keys (both allowed), and a hot key that is
//! rate-limited (1000/s: mostly refused) or refused outright (1/hour), at 1 task and at 64
//! tasks, coalescing off and on. `REDIS_ROUNDS` rounds (default 7), each running every
//! cell once, for a fixed number of decisions, in an order
//! that alternates per round. Per cell: decisions/s (median and range over the rounds),
//! latency per decision (median and p99 of the `check()` calls' wall times in each round,
//! median over the rounds), Redis CPU per
//! decision (evalsha `usec` over decisions, from `INFO commandstats` after `CONFIG
//! RESETSTAT`), EVALSHA calls per decision (what coalescing saves), redis-server and client
//! CPU per decision; and the on/off ratio of each (decisions/s: median of per-round ratios).
//!
//! Without `redis-server` nothing runs; without `redis-benchmark` (Debian's `redis-tools`)
//! the ceiling and E1 rows are skipped with a note.

mod ceiling;
mod coalescing;
mod measure;
mod table;
mod workload;
use floodwall_bench as support;

use std::time::Duration;

use criterion::{BenchmarkId, Criterion, SamplingMode, Throughput};
use floodwall::redis::RedisStore;
use redis_harness::RedisServer;
use tokio::runtime::Runtime;

use ceiling::{check_script, redis_benchmark};
use coalescing::{DEFAULT_COALESCE_ROUNDS, bench_coalescing, print_coalescing};
use measure::{Stats, own_cpu_ns, server_cpu_ns};
use table::{E1, Kind, Row, print_table, print_verdict};
use workload::{Workload, drive};

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

/// E1: the cost of calling any script.
const E1_LUA: &str = "return redis.call('INCR',KEYS[1])";

/// redis-benchmark requests per half of a ceiling row (~1 s each on this machine).
const CEILING_HALF_N: u64 = 100_000;
/// redis-benchmark requests for a pipelined row and for the E1 rows.
const PIPELINED_N: u64 = 300_000;
const E1_N: u64 = 150_000;
const E1_PIPELINED_N: u64 = 800_000;

// ---------------------------------------------------------------------------------------------
// The run

/// The stores the rows compare, connected once for the whole run.
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

/// The floodwall rows of workload `w`, one per connection kind, through criterion.
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
    let rt = support::runtime(WORKERS);
    let url = server.url();
    // Every check to Redis: the deny cache (on by default) would answer refusals locally,
    // and these rows measure what Redis does.
    let uncached = || RedisStore::builder().deny_cache(false);
    let stores = rt.block_on(async {
        // Each check alone: the rows compare connection kinds, not coalescing.
        let multiplexed = uncached()
            .coalesce(false)
            .multiplexed(&url)
            .await
            .expect("multiplexed store");
        let coalescing = uncached()
            .coalesce(true)
            .multiplexed(&url)
            .await
            .expect("coalescing store");
        let mut pools = Vec::new();
        for n in POOL_SIZES {
            let pool = uncached()
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
