//! An axum hello world behind each limiter, measured side by side in one run: no limiter,
//! floodwall in memory, tower_governor with the same quota, and floodwall on Redis.
//!
//! Run: `cargo bench --bench http`. Each variant is a real axum server (`GET /` → "hello",
//! served with `into_make_service_with_connect_info::<SocketAddr>()`) on a free loopback
//! port, on its own single-threaded tokio runtime in this process. A bare hyper client on
//! another runtime drives it over kept-alive HTTP/1 connections: 16 in flight for
//! throughput, one for latency. The quota (1,000,000/s, burst 10^9) never refuses; any
//! status but 200 stops the run.
//!
//! At the end it prints, per variant: wall time per request at concurrency 16 and the
//! requests per second that makes, the CPU time per request of the server's thread (the
//! steadier figure on a noisy machine, where the client shares the two cores) and of the
//! client's, latency at concurrency 1, and each against no limiter; then floodwall in memory
//! against tower_governor, and whether the target (at least 0.95 of no limiter's
//! throughput, ahead of tower_governor) is met.
//!
//! One more row, `floodwall-memory-noheaders` (`.headers(HeaderStyle::None)`), is there
//! to show what the IETF `RateLimit` headers cost. At concurrency 1 the latency is mostly
//! the two threads waking each other across cores; on a VM that alone varies from ~10 µs to
//! ~90 µs with the machine's load, so compare the rows of one run, never runs.
//!
//! The Redis row needs `redis-server` on the `PATH` (started on a free port by
//! `redis-harness`); without it the row is skipped with a note.

mod support;

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use axum::Router;
use axum::routing::get;
use criterion::{BenchmarkId, Criterion};
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

/// Requests in flight for the throughput figure (one per connection: HTTP/1).
const CONCURRENCY: usize = 16;
/// Rounds of the throughput group, alternating the variants' order (forward, reverse,
/// forward), so a drift in the machine's speed weighs on all of them alike; the table takes
/// the median round.
const ROUNDS: usize = 3;
/// Far above any rate reached here: nothing is ever refused. The memory store's finest
/// rate is one per microsecond.
const QUOTA: &str = "1000000/s burst 1000000000";
/// The same for tower_governor: one element per microsecond, the same burst.
const GOVERNOR_PERIOD_NS: u64 = 1_000;
const GOVERNOR_BURST: u32 = 1_000_000_000;

const THROUGHPUT: &str = "http_c16";
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
                    // "<pid>/task/<tid>": this thread, which runs the whole server.
                    let schedstat = std::fs::read_link("/proc/thread-self")
                        .ok()
                        .map(|task| PathBuf::from("/proc").join(task).join("schedstat"));
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
    /// Server and client CPU, wall time and requests over every throughput batch (warm-up
    /// included).
    cpu_ns: u64,
    client_cpu_ns: u64,
    wall_ns: u64,
    requests: u64,
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
            cpu_ns: 0,
            client_cpu_ns: 0,
            wall_ns: 0,
            requests: 0,
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

fn bench(c: &mut Criterion, client: &tokio::runtime::Runtime, variants: &mut [Variant]) {
    // The client runs on this thread (a current-thread runtime).
    let client_stat = std::fs::read_link("/proc/thread-self")
        .ok()
        .map(|task| PathBuf::from("/proc").join(task).join("schedstat"));
    let client_cpu = || support::schedstat_ns(client_stat.as_ref()?);
    let mut g = c.benchmark_group(THROUGHPUT);
    for round in 1..=ROUNDS {
        let order: Vec<usize> = if round % 2 == 1 {
            (0..variants.len()).collect()
        } else {
            (0..variants.len()).rev().collect()
        };
        for i in order {
            let v = &mut variants[i];
            g.bench_function(BenchmarkId::new(v.name, round), |b| {
                b.iter_custom(|iters| {
                    let (cpu_before, client_before) = (v.server.cpu_ns(), client_cpu());
                    let wall = run_concurrent(client, v.name, &v.host, &mut v.conns, iters);
                    if let (Some(before), Some(after)) = (cpu_before, v.server.cpu_ns()) {
                        v.cpu_ns += after - before;
                    }
                    if let (Some(before), Some(after)) = (client_before, client_cpu()) {
                        v.client_cpu_ns += after - before;
                    }
                    v.wall_ns += wall.as_nanos() as u64;
                    v.requests += iters;
                    wall
                })
            });
        }
    }
    g.finish();
    let mut g = c.benchmark_group(LATENCY);
    for v in variants.iter_mut() {
        g.bench_function(v.name, |b| {
            b.iter_custom(|iters| run_sequential(client, v.name, &v.host, &mut v.conns[0], iters))
        });
    }
    g.finish();
}

/// Wall ns per request at concurrency 16, one figure per round, sorted.
fn rounds_ns(name: &str) -> Vec<f64> {
    let mut rounds: Vec<f64> = (1..=ROUNDS)
        .filter_map(|r| support::estimate_ns(THROUGHPUT, &format!("{name}/{r}"), "median"))
        .collect();
    rounds.sort_by(f64::total_cmp);
    rounds
}

/// Wall ns per request at concurrency 16: the median round.
fn throughput_ns(name: &str) -> Option<f64> {
    let rounds = rounds_ns(name);
    rounds.get(rounds.len() / 2).copied()
}

/// How far apart the rounds were: (slowest - fastest) / median, in percent.
fn spread_pct(name: &str) -> Option<f64> {
    let rounds = rounds_ns(name);
    let mid = rounds.get(rounds.len() / 2)?;
    Some(100.0 * (rounds.last()? - rounds.first()?) / mid)
}

/// `ns` spread over the variant's throughput requests, in µs per request.
fn per_request_us(ns: u64, v: &Variant) -> Option<f64> {
    (ns > 0 && v.requests > 0).then(|| ns as f64 / v.requests as f64 / 1e3)
}

fn server_us(v: &Variant) -> Option<f64> {
    per_request_us(v.cpu_ns, v)
}

fn opt(x: Option<f64>, width: usize, precision: usize) -> String {
    x.map_or_else(|| "n/a".to_owned(), |x| format!("{x:>width$.precision$}"))
}

fn print_table(variants: &[Variant]) {
    let base_ns = throughput_ns(NONE);
    let base_cpu = variants.iter().find(|v| v.name == NONE).and_then(server_us);
    let base_lat = support::estimate_ns(LATENCY, NONE, "median");
    println!(
        "\n{:<27} {:>7} {:>7} {:>7} {:>6} | {:>9} {:>7} {:>9} {:>5} | {:>7} {:>7}",
        "variant",
        "ns/req",
        "req/s",
        "vs none",
        "spread",
        "server µs",
        "vs none",
        "client µs",
        "busy",
        "c=1 µs",
        "vs none"
    );
    for v in variants {
        let ns = throughput_ns(v.name);
        let cpu = server_us(v);
        let lat = support::estimate_ns(LATENCY, v.name, "median");
        let busy =
            (v.wall_ns > 0 && v.cpu_ns > 0).then(|| 100.0 * v.cpu_ns as f64 / v.wall_ns as f64);
        println!(
            "{:<27} {:>7} {:>7} {:>7} {:>5}% | {:>9} {:>7} {:>9} {:>4}% | {:>7} {:>7}",
            v.name,
            opt(ns, 7, 0),
            opt(ns.map(|ns| 1e9 / ns), 7, 0),
            // req/s over no limiter's: higher is better.
            opt(ns.zip(base_ns).map(|(ns, b)| b / ns), 7, 3),
            opt(spread_pct(v.name), 5, 0),
            opt(cpu, 9, 2),
            // Server CPU per request over no limiter's: lower is better.
            opt(cpu.zip(base_cpu).map(|(c, b)| c / b), 7, 3),
            opt(per_request_us(v.client_cpu_ns, v), 9, 2),
            opt(busy, 4, 0),
            opt(lat.map(|l| l / 1e3), 7, 1),
            opt(lat.zip(base_lat).map(|(l, b)| l / b), 7, 3),
        );
    }
    println!(
        "ns/req: wall time per request, {CONCURRENCY} in flight (median sample, median of \
         {ROUNDS} rounds; spread: slowest - fastest round); req/s = 1e9 / ns/req, 'vs none' \
         higher is better.\n\
         server µs / client µs: CPU time of the server's / client's thread per request at \
         c={CONCURRENCY}, 'vs none' lower is better; busy: server CPU / wall time.\n\
         c=1 µs: latency, one request at a time on one connection (median sample)."
    );

    let fw = variants.iter().find(|v| v.name == FLOODWALL);
    let gov = variants.iter().find(|v| v.name == GOVERNOR);
    if let (Some(fw), Some(gov)) = (fw, gov) {
        let thr = throughput_ns(GOVERNOR)
            .zip(throughput_ns(FLOODWALL))
            .map(|(g, f)| g / f);
        let cpu = server_us(fw).zip(server_us(gov)).map(|(f, g)| f / g);
        let lat = support::estimate_ns(LATENCY, FLOODWALL, "median")
            .zip(support::estimate_ns(LATENCY, GOVERNOR, "median"))
            .map(|(f, g)| f / g);
        println!(
            "\nfloodwall-memory vs tower_governor: req/s ratio {} (higher is better); \
             server CPU ratio {}, latency ratio {} (lower is better)",
            opt(thr, 0, 3),
            opt(cpu, 0, 3),
            opt(lat, 0, 3)
        );
        let vs_none = base_ns.zip(throughput_ns(FLOODWALL)).map(|(b, f)| b / f);
        let verdict = |ok: bool| if ok { "met" } else { "NOT met" };
        println!(
            "target: floodwall-memory at least 0.95 of no-limiter req/s: {} ({}); \
             ahead of tower_governor: {} ({})",
            verdict(vs_none.is_some_and(|r| r >= 0.95)),
            opt(vs_none, 0, 3),
            verdict(thr.is_some_and(|r| r > 1.0)),
            opt(thr, 0, 3)
        );
    }
}

fn main() {
    // Kept until the end of main: dropping it stops the redis-server.
    let redis = match RedisServer::try_start_with(&[]) {
        Ok(redis) => Some(redis),
        Err(e) => {
            println!("note: no redis-server ({e}); the {FLOODWALL_REDIS} row is skipped");
            None
        }
    };
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
        run_concurrent(&client, v.name, &v.host, &mut v.conns, 2_000);
    }

    let mut c = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(20)
        // 20 benchmarks; the default 100,000 resamples would add ~20 s of analysis.
        .nresamples(10_000)
        .configure_from_args();
    bench(&mut c, &client, &mut variants);
    c.final_summary();
    print_table(&variants);
    drop(redis);
}
