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
//! run, never runs. The `floodwall-memory-noheaders` row (`.headers(HeaderStyle::None)`)
//! shows what the IETF `RateLimit` headers cost.
//!
//! The Redis row needs `redis-server` on the `PATH` (started on a free port by
//! `redis-harness`); without it the row is skipped with a note.

use floodwall_bench as support;

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use axum::Router;
use axum::routing::get;
use criterion::Criterion;
use floodwall::tower::{HeaderStyle, RateLimitLayer};
use floodwall::{MemoryStore, Policy, Quota};
use floodwall_redis::RedisStore;
use http::header::HOST;
use http::{HeaderValue, Request, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper::client::conn::http1::{self, SendRequest};
use hyper_util::rt::TokioIo;
use redis_harness::RedisServer;
use tokio::task::JoinSet;
use tower_governor::GovernorLayer;
use tower_governor::governor::GovernorConfigBuilder;

use support::{median, mmm, opt};

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

fn policy() -> Policy {
    let quota: Quota = QUOTA.parse().expect("the bench quota parses");
    Policy::gcra("bench", quota).expect("the bench quota is a valid GCRA policy")
}

fn hello() -> Router {
    Router::new().route("/", get(|| async { "hello" }))
}

/// A server running on its own thread and current-thread runtime.
struct Server {
    addr: SocketAddr,
    /// `/proc/<pid>/task/<tid>/schedstat` of the server's thread: its CPU time.
    schedstat: Option<PathBuf>,
}

impl Server {
    /// Starts `make()`'s router on a free loopback port; `Err` if `make` fails.
    fn start<F, Fut>(name: &'static str, make: F) -> Result<Server, String>
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = Result<Router, String>>,
    {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name(format!("server {name}"))
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("server runtime");
                runtime.block_on(async move {
                    let app = match make().await {
                        Ok(app) => app,
                        Err(e) => {
                            let _ = tx.send(Err(e));
                            return;
                        }
                    };
                    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                        .await
                        .expect("bind a loopback port");
                    let addr = listener.local_addr().expect("local address");
                    // This thread, which runs the whole server.
                    let schedstat = own_thread_schedstat();
                    let _ = tx.send(Ok((addr, schedstat)));
                    axum::serve(
                        listener,
                        app.into_make_service_with_connect_info::<SocketAddr>(),
                    )
                    .await
                    .expect("axum::serve");
                });
            })
            .expect("spawn the server thread");
        let (addr, schedstat) = rx
            .recv()
            .map_err(|_| format!("{name}: the server thread died while starting"))??;
        Ok(Server { addr, schedstat })
    }

    /// CPU time the server's thread has used so far, in nanoseconds.
    fn cpu_ns(&self) -> Option<u64> {
        support::schedstat_ns(self.schedstat.as_ref()?)
    }
}

/// One row of the table: a server, the client's connections to it, and what was measured.
struct Variant {
    name: &'static str,
    server: Server,
    host: HeaderValue,
    conns: Vec<SendRequest<Empty<Bytes>>>,
    /// One per round of the steady measurement.
    runs: Vec<Run>,
}

/// One variant's run in one round of the steady measurement.
#[derive(Debug, Clone, Copy)]
struct Run {
    requests: u64,
    wall_ns: u64,
    /// CPU of the server's thread and of the client's (`None` without `schedstat`).
    server_ns: Option<u64>,
    client_ns: Option<u64>,
}

impl Run {
    fn server_us(&self) -> Option<f64> {
        self.server_ns
            .map(|ns| ns as f64 / self.requests as f64 / 1e3)
    }

    fn client_us(&self) -> Option<f64> {
        self.client_ns
            .map(|ns| ns as f64 / self.requests as f64 / 1e3)
    }

    fn req_per_s(&self) -> f64 {
        self.requests as f64 * 1e9 / self.wall_ns.max(1) as f64
    }

    /// Server CPU over wall time.
    fn busy(&self) -> Option<f64> {
        self.server_ns
            .map(|ns| ns as f64 / self.wall_ns.max(1) as f64)
    }
}

impl Variant {
    fn connect(client: &tokio::runtime::Runtime, name: &'static str, server: Server) -> Self {
        let addr = server.addr;
        let conns = client.block_on(async move {
            let mut conns = Vec::with_capacity(CONCURRENCY);
            for _ in 0..CONCURRENCY {
                let stream = tokio::net::TcpStream::connect(addr)
                    .await
                    .unwrap_or_else(|e| panic!("{name}: connect to {addr}: {e}"));
                stream.set_nodelay(true).expect("TCP_NODELAY");
                let (sender, conn) = http1::handshake(TokioIo::new(stream))
                    .await
                    .unwrap_or_else(|e| panic!("{name}: HTTP/1 handshake: {e}"));
                tokio::spawn(async move {
                    let _ = conn.await;
                });
                conns.push(sender);
            }
            conns
        });
        let host = HeaderValue::from_str(&addr.to_string()).expect("a socket address is a host");
        Variant {
            name,
            server,
            host,
            conns,
            runs: Vec::new(),
        }
    }
}

/// `GET /` on one connection; panics unless the answer is 200 "hello".
async fn get_hello(name: &'static str, host: &HeaderValue, conn: &mut SendRequest<Empty<Bytes>>) {
    conn.ready()
        .await
        .unwrap_or_else(|e| panic!("{name}: connection lost: {e}"));
    let req = Request::get("/")
        .header(HOST, host.clone())
        .body(Empty::new())
        .expect("a valid request");
    let res = conn
        .send_request(req)
        .await
        .unwrap_or_else(|e| panic!("{name}: request failed: {e}"));
    let status = res.status();
    if status == StatusCode::TOO_MANY_REQUESTS {
        panic!(
            "{name}: 429 Too Many Requests: the limiter refused a request, so the bench quota \
             ({QUOTA}) is too small for this machine and the figures would be wrong"
        );
    }
    assert_eq!(status, StatusCode::OK, "{name}: GET / answered {status}");
    let body = res
        .into_body()
        .collect()
        .await
        .unwrap_or_else(|e| panic!("{name}: reading the body: {e}"))
        .to_bytes();
    assert_eq!(&body[..], b"hello", "{name}: unexpected body");
}

/// Sends `iters` requests spread over `conns.len()` connections, all in flight at once;
/// returns the wall time.
fn run_concurrent(
    client: &tokio::runtime::Runtime,
    name: &'static str,
    host: &HeaderValue,
    conns: &mut Vec<SendRequest<Empty<Bytes>>>,
    iters: u64,
) -> Duration {
    let n = conns.len() as u64;
    let start = Instant::now();
    client.block_on(async {
        let mut tasks = JoinSet::new();
        for (i, mut conn) in conns.drain(..).enumerate() {
            let count = iters / n + u64::from((i as u64) < iters % n);
            let host = host.clone();
            tasks.spawn(async move {
                for _ in 0..count {
                    get_hello(name, &host, &mut conn).await;
                }
                conn
            });
        }
        while let Some(done) = tasks.join_next().await {
            match done {
                Ok(conn) => conns.push(conn),
                Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                Err(e) => panic!("{name}: client task failed: {e}"),
            }
        }
    });
    start.elapsed()
}

/// Sends `iters` requests one after the other on one connection; returns the wall time.
fn run_sequential(
    client: &tokio::runtime::Runtime,
    name: &'static str,
    host: &HeaderValue,
    conn: &mut SendRequest<Empty<Bytes>>,
    iters: u64,
) -> Duration {
    let start = Instant::now();
    client.block_on(async {
        for _ in 0..iters {
            get_hello(name, host, conn).await;
        }
    });
    start.elapsed()
}

fn start_servers(redis: Option<&RedisServer>) -> Vec<(&'static str, Server)> {
    let mut servers = vec![
        (
            NONE,
            Server::start(NONE, || async { Ok(hello()) }).expect("no-limiter server"),
        ),
        (
            FLOODWALL,
            Server::start(FLOODWALL, || async {
                Ok(hello().layer(RateLimitLayer::new(MemoryStore::new(), policy())))
            })
            .expect("floodwall server"),
        ),
        (
            FLOODWALL_NO_HEADERS,
            Server::start(FLOODWALL_NO_HEADERS, || async {
                let layer =
                    RateLimitLayer::new(MemoryStore::new(), policy()).headers(HeaderStyle::None);
                Ok(hello().layer(layer))
            })
            .expect("floodwall (no headers) server"),
        ),
        (
            GOVERNOR,
            Server::start(GOVERNOR, || async {
                let config = GovernorConfigBuilder::default()
                    .per_nanosecond(GOVERNOR_PERIOD_NS)
                    .burst_size(GOVERNOR_BURST)
                    .finish()
                    .ok_or("tower_governor: zero period or burst")?;
                Ok(hello().layer(GovernorLayer::new(config)))
            })
            .expect("tower_governor server"),
        ),
    ];
    if let Some(redis) = redis {
        match redis_server(redis.url()) {
            Ok(server) => servers.push((FLOODWALL_REDIS, server)),
            Err(e) => println!("note: the {FLOODWALL_REDIS} row is skipped: {e}"),
        }
    }
    servers
}

/// floodwall on Redis: the store is built on the server's runtime, where its connection
/// lives (one multiplexed connection, the crate's default).
fn redis_server(url: String) -> Result<Server, String> {
    Server::start(FLOODWALL_REDIS, move || async move {
        let store = RedisStore::connect(&url)
            .await
            .map_err(|e| format!("connect to {url}: {e}"))?;
        Ok(hello().layer(RateLimitLayer::new(store, policy())))
    })
}

/// `/proc/<pid>/task/<tid>/schedstat` of the calling thread.
fn own_thread_schedstat() -> Option<PathBuf> {
    std::fs::read_link("/proc/thread-self")
        .ok()
        .map(|task| PathBuf::from("/proc").join(task).join("schedstat"))
}

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

/// `f` of each round where it is known.
fn per_round(v: &Variant, f: impl Fn(&Run) -> Option<f64>) -> Vec<f64> {
    v.runs.iter().filter_map(f).collect()
}

/// `a`'s figure over `b`'s, round by round (the same round's runs).
fn ratios(a: &Variant, b: &Variant, f: impl Fn(&Run) -> Option<f64>) -> Vec<f64> {
    a.runs
        .iter()
        .zip(&b.runs)
        .filter_map(|(x, y)| f(x).zip(f(y)).map(|(x, y)| x / y))
        .collect()
}

fn print_table(variants: &[Variant], rounds: usize, requests: u64) {
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
