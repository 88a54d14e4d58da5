//! floodwall-rls, Envoy's rate-limit service, against Kuadrant's limitador deciding the same
//! descriptors under the same limits on the same Redis, in one run: decisions per second,
//! Redis CPU per decision, the deciding process's CPU per decision, the share admitted.
//! Issue #25's Performance section.
//!
//! Run: `cd rls-bench && cargo bench --bench limitador` (about 2 minutes; the first build
//! compiles limitador's RocksDB, about 20 minutes on two cores). The floodwall-rls binary
//! is built first with `cargo build --release -p floodwall-rls` in the workspace
//! (`FLOODWALL_RLS_BIN=<path>` runs another build); one `redis-server` is started on a free
//! loopback port (redis-harness) and every row counts on it.
//!
//! Rows, 64 concurrent calls each, the client on a 2-worker tokio runtime:
//!
//! - floodwall-rls, the binary as a process of its own (`--redis <url>`), called over gRPC
//!   with envoy-types' generated client on one HTTP/2 connection and on four, with GCRA
//!   (floodwall's default) and with fixed windows (`algorithm: fixed_window`, what
//!   limitador counts);
//! - floodwall-rls, the same binary and client, on a domain whose limits are all
//!   `unlimited: true` (answered `OK`, the store never asked): the gRPC floor, what a call
//!   that decides nothing costs and how many such calls this client and this machine make
//!   a second;
//! - limitador 0.14's library in this process (`AsyncRateLimiter`), as limitador-server
//!   calls it for an Envoy request (a CEL context with the list `descriptors`), on its
//!   `AsyncRedisStorage`: every decision read from Redis and written back (two round
//!   trips: a script reading the counters, then a pipeline of increment scripts). The
//!   targets are against this row, "exact" in the words: it reads then writes
//!   without holding the counter in between, so concurrent calls can pass a quota by a
//!   few (its source says as much);
//! - limitador's `CachedRedisStorage` (batches of 100 written every second at most, its
//!   defaults; 100,000 counters cached, not its default 10,000: see [`CACHED_COUNTERS`]): it decides from this process's memory, a counter
//!   it has not cached counted as fresh, and writes the increments to Redis in the
//!   background. It trades accuracy for speed: each instance of a fleet admits up to the
//!   whole quota between two flushes, and a key it evicted starts over. Its cells' Redis
//!   figures are read one flush period after the calls, so that its deferred writes are
//!   counted in its own cell;
//! - floodwall's `RedisStore` (default: coalescing and the deny cache on) in this process
//!   under the service's GCRA policy, and floodwall-rls's service itself in this process
//!   (`RateLimitService::decide` on that store): what the binary costs without gRPC.
//!
//! Workloads: one hot key, 10,000 keys uniform (both under 10^9 an hour: all admitted), and
//! a flood: 10 keys called in turn under 100 a minute each (after the first 100 of a
//! minute, all refused).
//!
//! `RLS_BENCH_ROUNDS` rounds (default 5) after an uncounted warm-up; each round runs every
//! (workload, row) cell for `RLS_BENCH_DECISIONS` decisions (default 5,000), in an order
//! that alternates per round. The run ends with the targets for each floodwall-rls
//! row: at least 3× the decisions/s of limitador's AsyncRedisStorage and at most 0.35× its
//! Redis CPU per decision, printed met or missed (never asserted: timing); then the floor's
//! decisions/s over that row's: the most any decision logic behind this gRPC client could
//! reach here.

#[path = "limitador/drive.rs"]
mod drive;
#[path = "limitador/report.rs"]
mod report;
#[path = "limitador/rls.rs"]
mod rls;
#[path = "limitador/workload.rs"]
mod workload;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use floodwall_bench as support;
use floodwall_redis::RedisStore;
use floodwall_rls::RateLimitService;
use floodwall_rls::config::Config;
use limitador::AsyncRateLimiter;
use limitador::limit::Namespace;
use limitador::storage::redis::{AsyncRedisStorage, CachedRedisStorageBuilder};
use redis_harness::RedisServer;
use tokio::runtime::Runtime;

use drive::{Limiter, Target, drive};
use report::Measured;
use rls::Rls;
use workload::{FIXED_DOMAIN, FLOOD_PER_MINUTE, GCRA_DOMAIN, UNLIMITED_DOMAIN, Workload};

/// Counters limitador's `CachedRedisStorage` caches, and holds pending writes for. Its
/// default, 10,000, deadlocks here: a call that finds no room for another pending counter
/// waits for a permit while holding the lock of a shard of its pending-writes map, and the
/// other calls and the flusher then block on that lock (both workers parked, for good;
/// limitador 0.14's `Batcher::add`). The 10,000-key workload and the others' keys exceed it.
const CACHED_COUNTERS: usize = 100_000;

/// Calls in flight.
const TASKS: usize = 64;
/// Worker threads of this process's runtime.
const WORKERS: usize = 2;
/// Connections of the several-connection rows.
const CONNECTIONS: usize = 4;
/// limitador's `CachedRedisStorage` writes its increments at least this often (its
/// default); its cells wait this much longer before reading Redis's counters.
const CACHED_FLUSH: Duration = Duration::from_millis(1_100);

/// The rows, in table order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Row {
    Rls {
        domain: &'static str,
        connections: usize,
    },
    Exact,
    Cached,
    Store,
    Service,
}

impl Row {
    pub(crate) fn name(&self) -> String {
        match self {
            Row::Rls {
                domain,
                connections,
            } => {
                let algorithm = match *domain {
                    FIXED_DOMAIN => "fixed window",
                    UNLIMITED_DOMAIN => "unlimited (gRPC floor)",
                    _ => "GCRA",
                };
                let s = if *connections == 1 { "" } else { "s" };
                format!("floodwall-rls {algorithm}, {connections} conn{s}")
            }
            Row::Exact => "limitador AsyncRedisStorage".into(),
            Row::Cached => "limitador CachedRedisStorage".into(),
            Row::Store => "floodwall RedisStore GCRA, no gRPC".into(),
            Row::Service => "floodwall-rls service GCRA, no gRPC".into(),
        }
    }

    pub(crate) fn is_rls(&self) -> bool {
        matches!(self, Row::Rls { .. })
    }

    /// The gRPC floor: floodwall-rls answering without deciding (not held to the targets).
    pub(crate) fn is_floor(&self) -> bool {
        matches!(self, Row::Rls { domain, .. } if *domain == UNLIMITED_DOMAIN)
    }
}

/// CPU seconds redis-server has used, from `INFO cpu`.
fn redis_cpu_s(server: &RedisServer) -> f64 {
    support::used_cpu_s(&server.cmd(&["INFO", "cpu"])).expect("INFO cpu has used_cpu_user/sys")
}

/// One drive of `target` with the counters read around it.
fn measure(
    server: &RedisServer,
    rt: &Runtime,
    row: &Row,
    rls: Option<&Rls>,
    target: &Target,
    iters: u64,
    start: u64,
) -> Measured {
    server.cmd(&["CONFIG", "RESETSTAT"]);
    let redis = redis_cpu_s(server);
    let own = support::own_cpu_ns();
    let service = rls.map_or(0, Rls::cpu_ns);
    let out = drive(rt, target, TASKS, iters, start);
    if *row == Row::Cached {
        std::thread::sleep(CACHED_FLUSH);
    }
    let redis_us = (redis_cpu_s(server) - redis) * 1e6;
    let own = support::own_cpu_ns().saturating_sub(own);
    let (service_ns, client_ns) = match (row.is_rls(), rls) {
        (true, Some(rls)) => (rls.cpu_ns().saturating_sub(service), Some(own)),
        _ => (own, None),
    };
    let commands = support::commandstats(&server.cmd(&["INFO", "commandstats"]))
        .into_iter()
        .filter(|(name, _)| !name.starts_with("info") && !name.starts_with("config"))
        .filter_map(|(name, fields)| Some((name, fields.get("calls")?.parse::<u64>().ok()?)))
        .collect();
    Measured {
        decisions: iters,
        redis_us,
        commands,
        service_ns,
        client_ns,
        allowed: out.allowed,
        rates: vec![iters as f64 / out.wall.as_secs_f64()],
    }
}

/// A directory of its own under the system's temporary one, removed on drop.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The service's configuration directory: one file per domain.
fn write_config() -> TempDir {
    let dir = std::env::temp_dir().join(format!("floodwall-rls-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    for domain in [GCRA_DOMAIN, FIXED_DOMAIN, UNLIMITED_DOMAIN] {
        std::fs::write(
            dir.join(format!("{domain}.yaml")),
            workload::rls_yaml(domain),
        )
        .expect("the configuration written");
    }
    TempDir(dir)
}

/// The floodwall-rls process, or why there is none (its rows are then skipped).
fn start_rls(config: &Path, url: &str) -> Result<Rls, String> {
    let bin = rls::binary()?;
    Rls::start(&bin, config, url)
}

/// The first calls on a fresh flood key through each row, one at a time: how many of
/// `FLOOD_PER_MINUTE + 20` each admits (the quota, unless a minute's boundary falls
/// between them or an algorithm lets more through).
fn probe(rt: &Runtime, rows: &[Row], limiter: &dyn Fn(&Row) -> Limiter, flood: &Workload) {
    let calls = FLOOD_PER_MINUTE + 20;
    let admitted: Vec<String> = rows
        .iter()
        .enumerate()
        .map(|(r, row)| {
            let w = flood.probe(format!("probe-{r}"));
            let out = drive(rt, &Target::new(&row.name(), limiter(row), &w), 1, calls, 0);
            format!("{} {}", row.name(), out.allowed)
        })
        .collect();
    println!(
        "probe: of {calls} calls one at a time on a fresh key under {FLOOD_PER_MINUTE} a \
         minute, admitted: {}",
        admitted.join("; ")
    );
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "n/a".into())
}

fn main() {
    let rounds = support::env_or("RLS_BENCH_ROUNDS", 5usize).max(1);
    let decisions = support::env_or("RLS_BENCH_DECISIONS", 5_000u64).max(TASKS as u64);
    let Some(server) = support::redis_or_note("nothing to measure") else {
        return;
    };
    let url = server.url();
    let config_dir = write_config();
    let config = Config::load(&config_dir.0).expect("the bench's configuration loads");
    let rls = start_rls(&config_dir.0, &url)
        .inspect_err(|e| println!("note: no floodwall-rls ({e}); its rows are skipped"))
        .ok();
    let rt = support::runtime(WORKERS);

    let workloads = [Workload::hot(), Workload::uniform(), Workload::flood()];
    let mut rows: Vec<Row> = Vec::new();
    if rls.is_some() {
        for (domain, connections) in [
            (GCRA_DOMAIN, 1),
            (GCRA_DOMAIN, CONNECTIONS),
            (FIXED_DOMAIN, 1),
            (FIXED_DOMAIN, CONNECTIONS),
            (UNLIMITED_DOMAIN, 1),
            (UNLIMITED_DOMAIN, CONNECTIONS),
        ] {
            rows.push(Row::Rls {
                domain,
                connections,
            });
        }
    }
    rows.extend([Row::Exact, Row::Cached, Row::Store, Row::Service]);

    let (clients, exact, cached, store) = rt.block_on(async {
        let mut clients = Vec::new();
        for row in &rows {
            if let (Row::Rls { connections, .. }, Some(rls)) = (row, rls.as_ref()) {
                clients.push(rls.clients(*connections).await);
            }
        }
        let exact = AsyncRateLimiter::new_with_storage(Box::new(
            AsyncRedisStorage::new(&url)
                .await
                .expect("limitador's AsyncRedisStorage"),
        ));
        let cached = AsyncRateLimiter::new_with_storage(Box::new(
            CachedRedisStorageBuilder::new(&url)
                .max_cached_counters(CACHED_COUNTERS)
                .build()
                .await
                .expect("limitador's CachedRedisStorage"),
        ));
        let store = RedisStore::builder()
            .multiplexed(&url)
            .await
            .expect("floodwall's RedisStore");
        (clients, exact, cached, store)
    });
    for (limiter, namespace) in [(&exact, "exact"), (&cached, "cached")] {
        for limit in workload::limitador_limits(namespace) {
            limiter.add_limit(limit);
        }
    }
    let (exact, cached) = (Arc::new(exact), Arc::new(cached));
    let service = RateLimitService::new(
        Config::load(&config_dir.0).expect("the bench's configuration loads"),
        store.clone(),
    );
    let limiter = |row: &Row, w: &Workload| -> Limiter {
        match row {
            Row::Rls { domain, .. } => {
                let at = rows.iter().filter(|r| r.is_rls()).position(|r| r == row);
                Limiter::Rls {
                    clients: clients[at.expect("an rls row")].clone(),
                    domain,
                }
            }
            Row::Exact => Limiter::Limitador {
                limiter: Arc::clone(&exact),
                namespace: Namespace::from("exact"),
            },
            Row::Cached => Limiter::Limitador {
                limiter: Arc::clone(&cached),
                namespace: Namespace::from("cached"),
            },
            Row::Service => Limiter::Service {
                service: service.clone(),
                domain: GCRA_DOMAIN,
            },
            Row::Store => {
                let policy = config
                    .limit(GCRA_DOMAIN, [(w.entry_key, w.values[0].as_str())])
                    .and_then(|l| l.policy())
                    .expect("the service's GCRA policy");
                Limiter::Store {
                    store: store.clone(),
                    policy: Arc::new(policy.clone()),
                }
            }
        }
    };
    let flood = &workloads[2];
    probe(&rt, &rows, &|row| limiter(row, flood), flood);

    let cells: Vec<(usize, usize)> = (0..workloads.len())
        .flat_map(|w| (0..rows.len()).map(move |r| (w, r)))
        .collect();
    let targets: Vec<Target> = cells
        .iter()
        .map(|&(w, r)| {
            let (row, w) = (&rows[r], &workloads[w]);
            Target::new(&row.name(), limiter(row, w), w)
        })
        .collect();
    let load_before = load_average();
    println!(
        "{rounds} rounds of {decisions} decisions per cell at {TASKS} concurrent calls; \
         load average {load_before}"
    );
    let mut next = vec![0u64; cells.len()];
    // Warm-up: connections and scripts ready, keys created, the flood past its quota.
    for (c, &(_, r)) in cells.iter().enumerate() {
        let n = decisions / 10;
        measure(
            &server,
            &rt,
            &rows[r],
            rls.as_ref(),
            &targets[c],
            n,
            next[c],
        );
        next[c] += n;
    }
    let mut measured: Vec<Measured> = cells.iter().map(|_| Measured::default()).collect();
    for round in 0..rounds {
        for c in support::round_order(cells.len(), round) {
            let r = cells[c].1;
            let m = measure(
                &server,
                &rt,
                &rows[r],
                rls.as_ref(),
                &targets[c],
                decisions,
                next[c],
            );
            next[c] += decisions;
            measured[c] += m;
        }
    }
    let load_after = load_average();
    println!("\nload average: {load_before} before, {load_after} after (1, 5, 15 min)");

    let at = |w: usize, row: &Row| {
        let r = rows.iter().position(|x| x == row)?;
        let c = cells.iter().position(|&x| x == (w, r))?;
        Some(&measured[c])
    };
    report::print_table(&workloads, &rows, &at);
    report::print_commands(&workloads, &rows, &at);
    report::print_targets(&workloads, &rows, &at);
    report::print_floor(&workloads, &rows, &at);
    drop(rls);
    drop(server);
}
