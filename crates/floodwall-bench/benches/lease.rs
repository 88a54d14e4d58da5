//! Redis CPU per in-flight slot taken and given back (`RedisStore` as a
//! `StoreExt::acquire`: one `EVALSHA` of the lease script, then one `ZREM`), against E1 =
//! EVALSHA of `return redis.call('INCR',KEYS[1])`, the cost of calling any script, in the
//! same run.
//!
//! Run: `cargo bench -p floodwall-bench --bench lease` (~1 min). It starts its own
//! `redis-server` (redis-harness; never 6379). Both sides are driven by the same client: 64
//! tokio tasks on a 2-worker runtime, one multiplexed connection, no pipelining; E1 on 10,000
//! keys in database 1, the leases in database 0. `LEASE_ROUNDS` rounds (default 4), each a
//! chunk of E1 before and after every workload chunk (`LEASE_CHUNK` operations, default
//! 20,000), each chunk after `CONFIG RESETSTAT` and read from `INFO commandstats`: usec per
//! call of `evalsha` and `zrem`. A workload chunk's ratio is its usec per operation over the
//! mean usec per call of the two E1 chunks around it; the table gives the median over the
//! rounds and the range. Also redis-server's main-thread CPU per operation
//! (`/proc/<pid>/schedstat`: commands plus socket I/O, which `usec` leaves out), over E1's
//! the same way.
//!
//! Workloads (the limit never refuses unless said):
//! - **10k keys**: each task takes a slot of key `i % 10000` and drops it at once: an
//!   acquisition (`EVALSHA`) and a release (`ZREM`, sent in the background) per operation.
//! - **hot key**: the same on one key: up to 128 leases in its sorted set (64 held, and
//!   up to 64 released whose `ZREM` has not landed yet).
//! - **hot key, full**: one key whose one slot is held all along: every acquisition is
//!   refused (`EVALSHA` that reads only; nothing to release).
//!
//! A chunk ends when every release has landed (the lease keys are gone), so its `zrem`
//! calls are all counted.

use std::sync::Arc;
use std::time::Duration;

use floodwall::core::Acquired;
use floodwall::redis::RedisStore;
use floodwall::redis::redis::{self, Script};
use floodwall::{ConcurrencyLimit, StoreExt};
use floodwall_bench as support;
use redis_harness::RedisServer;
use tokio::runtime::Runtime;

const TASKS: usize = 64;
const WORKERS: usize = 2;
const KEYS: u64 = 10_000;
const E1_LUA: &str = "return redis.call('INCR',KEYS[1])";

/// What one chunk measured.
#[derive(Debug, Default, Clone, Copy)]
struct Chunk {
    ops: u64,
    evalsha_calls: u64,
    evalsha_usec: u64,
    zrem_calls: u64,
    zrem_usec: u64,
    server_ns: u64,
}

impl Chunk {
    /// Redis `usec` (commandstats) per operation: an acquisition and its release.
    fn usec_per_op(&self) -> f64 {
        (self.evalsha_usec + self.zrem_usec) as f64 / self.ops as f64
    }

    fn server_us_per_op(&self) -> f64 {
        self.server_ns as f64 / self.ops as f64 / 1e3
    }
}

/// Reads `INFO commandstats` and the server's CPU since `server_before`.
fn measured(server: &RedisServer, ops: u64, server_before: u64) -> Chunk {
    let server_ns = server_cpu_ns(server).saturating_sub(server_before);
    let stats = support::commandstats(&server.cmd(&["INFO", "commandstats"]));
    let get = |cmd: &str, field: &str| {
        stats
            .get(cmd)
            .and_then(|f| f.get(field))
            .map_or(0, |v| v.parse::<f64>().map_or(0, |v| v as u64))
    };
    Chunk {
        ops,
        // A first call answered NOSCRIPT (then loaded and run again) is not an operation.
        evalsha_calls: get("evalsha", "calls") - get("evalsha", "failed_calls"),
        evalsha_usec: get("evalsha", "usec"),
        zrem_calls: get("zrem", "calls"),
        zrem_usec: get("zrem", "usec"),
        server_ns,
    }
}

fn server_cpu_ns(server: &RedisServer) -> u64 {
    let stat = std::path::PathBuf::from(format!("/proc/{}/schedstat", server.pid()));
    support::schedstat_ns(&stat).unwrap_or(0)
}

/// One chunk of E1: `ops` EVALSHAs of the INCR script over 10,000 keys.
fn e1_chunk(
    rt: &Runtime,
    server: &RedisServer,
    conn: &redis::aio::ConnectionManager,
    ops: u64,
) -> Chunk {
    let script = Arc::new(Script::new(E1_LUA));
    server.cmd(&["CONFIG", "RESETSTAT"]);
    let before = server_cpu_ns(server);
    support::split_over_tasks(rt, TASKS, ops, |t, count| {
        let (mut conn, script) = (conn.clone(), Arc::clone(&script));
        async move {
            for j in 0..count {
                let key = format!("floodwall-bench:e1:{{{}}}", (t + j * TASKS as u64) % KEYS);
                let _: i64 = script
                    .key(key)
                    .invoke_async(&mut conn)
                    .await
                    .expect("E1 call");
            }
        }
    });
    let chunk = measured(server, ops, before);
    assert_eq!(chunk.evalsha_calls, ops, "every E1 call ran the script");
    chunk
}

/// A lease workload: which keys, under which limit.
struct Workload {
    label: &'static str,
    limit: ConcurrencyLimit,
    keys: u64,
    /// Whether a slot is held all along, so every acquisition is refused.
    full: bool,
}

/// One chunk of `w`: `ops` acquisitions, each dropped (released) at once.
fn lease_chunk(
    rt: &Runtime,
    server: &RedisServer,
    store: &RedisStore,
    w: &Workload,
    ops: u64,
) -> Chunk {
    let blocker = w.full.then(|| {
        rt.block_on(store.acquire(b"hot", &w.limit))
            .expect("the blocking slot")
            .permit()
            .expect("a free slot to block with")
    });
    server.cmd(&["CONFIG", "RESETSTAT"]);
    let before = server_cpu_ns(server);
    let (keys, full) = (w.keys, w.full);
    let (_, granted) = support::split_over_tasks(rt, TASKS, ops, |t, count| {
        let (store, limit) = (store.clone(), w.limit.clone());
        async move {
            let mut granted = 0u64;
            for j in 0..count {
                let key = if keys == 1 {
                    b"hot".to_vec()
                } else {
                    format!("{:012}", (t + j * TASKS as u64) % keys).into_bytes()
                };
                match store.acquire(&key, &limit).await.expect("an acquisition") {
                    Acquired::Granted(permit) => {
                        granted += 1;
                        drop(permit);
                    }
                    Acquired::Full(_) => {}
                }
            }
            granted
        }
    });
    let granted: u64 = granted.iter().sum();
    assert_eq!(granted, if full { 0 } else { ops }, "{}: granted", w.label);
    // Every release landed: only the blocker's key is left, if any.
    let left = u64::from(full);
    while server
        .cmd(&["DBSIZE"])
        .trim()
        .parse::<u64>()
        .unwrap_or(u64::MAX)
        > left
    {
        std::thread::sleep(Duration::from_millis(5));
    }
    let chunk = measured(server, ops, before);
    assert_eq!(
        chunk.evalsha_calls, ops,
        "{}: one EVALSHA per acquisition",
        w.label
    );
    assert_eq!(
        chunk.zrem_calls, granted,
        "{}: one ZREM per release",
        w.label
    );
    drop(blocker);
    while server.cmd(&["DBSIZE"]).trim() != "0" {
        std::thread::sleep(Duration::from_millis(5));
    }
    chunk
}

fn main() {
    let rounds: usize = support::env_or("LEASE_ROUNDS", 4).max(1);
    let ops: u64 = support::env_or("LEASE_CHUNK", 20_000).max(TASKS as u64);
    let Some(server) = support::redis_or_note("nothing to measure") else {
        return;
    };
    let rt = support::runtime(WORKERS);
    let url = server.url();
    let (store, e1) = rt.block_on(async {
        let store = RedisStore::connect(&url).await.expect("store");
        let e1_url = format!("{}/1", url.trim_end_matches('/'));
        let client = redis::Client::open(e1_url).expect("E1 client");
        let e1 = redis::aio::ConnectionManager::new(client)
            .await
            .expect("E1 connection");
        (store, e1)
    });
    let lease = |name: &str, max: u64| ConcurrencyLimit::new(name, max).expect("a limit");
    let workloads = [
        Workload {
            label: "acquire+release, 10k keys",
            limit: lease("bench-keys", 1_000),
            keys: KEYS,
            full: false,
        },
        Workload {
            label: "acquire+release, hot key",
            // Releases land in the background, so a task may take its next slot before
            // its last is gone: up to 2 × 64 leases, never refused.
            limit: lease("bench-hot", 1_000),
            keys: 1,
            full: false,
        },
        Workload {
            label: "refused, hot key full",
            limit: lease("bench-full", 1),
            keys: 1,
            full: true,
        },
    ];
    // Warm-up: E1's keys created, the scripts loaded, the connections busy once.
    e1_chunk(&rt, &server, &e1, KEYS);
    for w in &workloads {
        lease_chunk(&rt, &server, &store, w, ops / 4);
    }
    let mut ratios = vec![Vec::new(); workloads.len()];
    let mut cpu_ratios = vec![Vec::new(); workloads.len()];
    let mut usec = vec![Vec::new(); workloads.len()];
    let mut parts = vec![(0.0, 0.0); workloads.len()];
    let mut e1_usec = Vec::new();
    for round in 0..rounds {
        let order = support::round_order(workloads.len(), round);
        let mut before = e1_chunk(&rt, &server, &e1, ops);
        e1_usec.push(before.usec_per_op());
        for i in order {
            let w = &workloads[i];
            let chunk = lease_chunk(&rt, &server, &store, w, ops);
            let after = e1_chunk(&rt, &server, &e1, ops);
            e1_usec.push(after.usec_per_op());
            let e1 = (before.usec_per_op() + after.usec_per_op()) / 2.0;
            let e1_cpu = (before.server_us_per_op() + after.server_us_per_op()) / 2.0;
            ratios[i].push(chunk.usec_per_op() / e1);
            cpu_ratios[i].push(chunk.server_us_per_op() / e1_cpu);
            usec[i].push(chunk.usec_per_op());
            parts[i].0 += chunk.evalsha_usec as f64 / chunk.ops as f64 / rounds as f64;
            parts[i].1 += chunk.zrem_usec as f64 / chunk.ops as f64 / rounds as f64;
            before = after;
        }
    }
    println!();
    println!(
        "Redis CPU per in-flight operation vs E1 (EVALSHA INCR), {rounds} rounds of {ops} operations, 64 tasks"
    );
    println!(
        "E1: {} usec per call (median, range)",
        support::mmm(e1_usec, 5, 2)
    );
    println!(
        "{:<28} {:>7} {:>7} {:>16} {:>22}",
        "workload", "acquire", "release", "usec per op", "xE1 (range)"
    );
    for (i, w) in workloads.iter().enumerate() {
        println!(
            "{:<28} {:>7.2} {:>7.2} {:>16} {:>22}",
            w.label,
            parts[i].0,
            parts[i].1,
            support::mmm(usec[i].clone(), 5, 2),
            support::mmm(ratios[i].clone(), 5, 2),
        );
    }
    println!("redis-server main-thread CPU per op (commands + socket I/O) over E1's:");
    for (i, w) in workloads.iter().enumerate() {
        println!(
            "{:<28} {:>22}",
            w.label,
            support::mmm(cpu_ratios[i].clone(), 5, 2)
        );
    }
    drop(server);
}
