//! An axum hello world behind each limiter, measured side by side in one run: no limiter,
//! floodwall in memory (with and without the `RateLimit` headers), tower_governor with the
//! same quota, and floodwall on Redis.
//!
//! Run: `cargo bench -p floodwall-bench --bench http` (`HTTP_ROUNDS=n` and `HTTP_REQUESTS=n` change the rounds,
//! default 10, and the requests per run, default 40,000). Each variant is a real axum server
//! (`GET /` → "hello", served with `into_make_service_with_connect_info::<SocketAddr>()`)
//! on a free loopback port, on its own single-threaded tokio runtime in this process. A bare
//! hyper client on another runtime drives it over kept-alive HTTP/1 connections. The quota
//! (1,000,000/s, burst 10^9) never refuses; any status but 200 stops the run.
//!
//! The steady figure is the **server thread's CPU time per request** (`schedstat` of the
//! thread that runs the whole server, limiter and Redis client included): client and server
//! share the machine's two cores, and the VM loses CPU to its host at times, so wall time
//! and req/s swing far more than CPU per request does (BENCHMARKS.md, "Machine"). It
//! is measured over rounds: each round runs every variant once, for the same number of
//! requests with 16 in flight (one per connection), in an order that alternates from round
//! to round (forward, reversed, then rotated by one and so on), so a drift in the machine's
//! speed weighs on every variant alike. Each run is compared with the no-limiter run of the
//! same round; the table gives, per variant, the median and range over the rounds of the
//! server CPU per request, of that per-round ratio to no limiter, of req/s and of the
//! client's CPU per request. It then says whether the target holds (floodwall in memory at
//! most 1.03x no limiter's server CPU per request, median of the per-round ratios) and
//! compares floodwall in memory with tower_governor the same way, with its default IETF
//! headers and without headers (tower_governor writes none by default): the same-run
//! floodwall / tower_governor ratios are the figures to quote.
//!
//! A criterion group (`http_c1`) adds latency at concurrency 1, one request at a time on one
//! connection. That is mostly the two threads waking each other across cores; on a VM that
//! alone varies from ~10 µs to ~90 µs with the machine's load, so compare the rows of one
//! run, never runs. The `floodwall-memory-noheaders` row (`.refusals(Refusals::new().headers(HeaderStyle::None))`)
//! shows what the IETF `RateLimit` headers cost.
//!
//! The Redis row needs `redis-server` on the `PATH` (started on a free port by
//! `redis-harness`); without it the row is skipped with a note.

#[path = "http/client.rs"]
mod client;
#[path = "http/server.rs"]
mod server;
#[path = "http/table.rs"]
mod table;
use floodwall_bench as support;

use std::time::{Duration, Instant};

use criterion::Criterion;

use client::{Run, Variant, run_concurrent, run_sequential};
use server::{own_thread_schedstat, start_servers};
use support::opt;
use table::print_table;

/// Requests in flight for the throughput figure (one per connection: HTTP/1).
const CONCURRENCY: usize = 16;
/// Rounds of the steady measurement (`HTTP_ROUNDS`); each runs every variant once.
const DEFAULT_ROUNDS: usize = 10;
/// Requests per run (`HTTP_REQUESTS`): ~0.25 s in memory, ~0.8 s on Redis here.
const DEFAULT_REQUESTS: u64 = 40_000;
/// Requests each variant answers before anything is measured.
const WARM_UP_REQUESTS: u64 = 5_000;
/// The target: floodwall in memory's server CPU per request over no limiter's.
const TARGET_RATIO: f64 = 1.03;
/// Far above any rate reached here: nothing is ever refused. The memory store's finest
/// rate is one per microsecond.
const QUOTA: &str = "1000000/s burst 1000000000";
/// The same for tower_governor: one element per microsecond, the same burst.
const GOVERNOR_PERIOD_NS: u64 = 1_000;
const GOVERNOR_BURST: u32 = 1_000_000_000;

const LATENCY: &str = "http_c1";

const NONE: &str = "no-limiter";
const FLOODWALL: &str = "floodwall-memory";
const FLOODWALL_NO_HEADERS: &str = "floodwall-memory-noheaders";
const GOVERNOR: &str = "tower_governor";
const FLOODWALL_REDIS: &str = "floodwall-redis";

/// The steady measurement: `rounds` rounds, each running every variant once for `requests`
/// requests at concurrency [`CONCURRENCY`], recording each run's CPU and wall time.
fn steady(
    client: &tokio::runtime::Runtime,
    variants: &mut [Variant],
    rounds: usize,
    requests: u64,
) {
    // The client runs on this thread (a current-thread runtime).
    let client_stat = own_thread_schedstat();
    let client_cpu = || support::schedstat_ns(client_stat.as_ref()?);
    for round in 0..rounds {
        for i in support::round_order(variants.len(), round) {
            let v = &mut variants[i];
            let (server_before, client_before) = (v.server.cpu_ns(), client_cpu());
            let wall = run_concurrent(client, v.name, &v.host, &mut v.conns, requests);
            let (server_after, client_after) = (v.server.cpu_ns(), client_cpu());
            v.runs.push(Run {
                requests,
                wall_ns: wall.as_nanos() as u64,
                server_ns: server_before.zip(server_after).map(|(b, a)| a - b),
                client_ns: client_before.zip(client_after).map(|(b, a)| a - b),
            });
        }
        // Progress: server µs per request of each variant in this round.
        let line: Vec<String> = variants
            .iter()
            .map(|v| format!("{} {}", v.name, opt(v.runs[round].server_us(), 0, 2)))
            .collect();
        println!(
            "round {:>2}/{rounds}: server µs/req: {}",
            round + 1,
            line.join(", ")
        );
    }
}

/// Criterion's group: latency at concurrency 1.
fn bench_latency(c: &mut Criterion, client: &tokio::runtime::Runtime, variants: &mut [Variant]) {
    let mut g = c.benchmark_group(LATENCY);
    for v in variants.iter_mut() {
        g.bench_function(v.name, |b| {
            b.iter_custom(|iters| run_sequential(client, v.name, &v.host, &mut v.conns[0], iters))
        });
    }
    g.finish();
}

fn main() {
    support::mark_run_start();
    let rounds = support::env_or("HTTP_ROUNDS", DEFAULT_ROUNDS).max(1);
    let requests = support::env_or("HTTP_REQUESTS", DEFAULT_REQUESTS).max(CONCURRENCY as u64);
    // Kept until the end of main: dropping it stops the redis-server.
    let redis = support::redis_or_note(&format!("the {FLOODWALL_REDIS} row is skipped"));
    let client = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("client runtime");
    let mut variants: Vec<Variant> = start_servers(redis.as_ref())
        .into_iter()
        .map(|(name, server)| Variant::connect(&client, name, server))
        .collect();

    // Every variant answers 200 before anything is measured, and none is measured cold.
    for v in &mut variants {
        run_concurrent(&client, v.name, &v.host, &mut v.conns, WARM_UP_REQUESTS);
    }
    if variants.iter().any(|v| v.server.cpu_ns().is_none()) {
        println!("note: no /proc/<pid>/task/<tid>/schedstat here: CPU figures are n/a");
    }

    let began = Instant::now();
    steady(&client, &mut variants, rounds, requests);
    println!("steady measurement: {:.1} s", began.elapsed().as_secs_f64());

    let mut c = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(20)
        .nresamples(10_000)
        .configure_from_args();
    bench_latency(&mut c, &client, &mut variants);
    c.final_summary();
    print_table(&variants, rounds, requests);
    drop(redis);
}
