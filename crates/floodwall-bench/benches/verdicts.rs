//! The async verdict mode (`LocalVerdicts`) over real Redis: script calls per request and
//! over-admission, against the exact mode (`RedisStore` alone) under the same traffic.
//!
//! Run: `cargo bench -p floodwall-bench --bench verdicts` (about 30 s). It starts its own
//! `redis-server` on a free loopback port (redis-harness). Four simulated nodes, each its
//! own store over its own multiplexed connection, all on one 2-worker tokio runtime and the
//! system clock. One hot key under GCRA `100/s burst 20`; each node receives
//! `PER_TICK` checks of it every millisecond (2,000/s per node, 80× the quota in all),
//! each check its own task, so arrivals do not wait for answers, for `TICKS` ms (5 s).
//!
//! One window per mode, each on a fresh policy name and opened by `CONFIG RESETSTAT`:
//! exact (every check a script call), then `LocalVerdicts` with the intervals in
//! `INTERVALS`. Per window:
//!
//! - script calls per request: the four `RedisStore`s' `script_calls`, and Redis's own
//!   count (`EVALSHA` in `INFO commandstats`), during the flood;
//! - over-admission: admitted − allowance(D), allowance = burst + D × rate, D the time
//!   between the first and the last check, and the worst over any prefix of the flood
//!   (admitted by t − allowance(t), t when an admitted check returned); next to the
//!   documented bound
//!   `N × min(⌈λ·T⌉ + ⌈λ·L⌉, limit)`, λ the busiest node's measured rate and L the p99 wall
//!   time of a call to Redis in that window;
//! - after the flood, `flush()` on every node (repeated while counts wait as a debt for
//!   room), then the units Redis admitted (the sum of the costs its scripts accepted)
//!   against the units the nodes admitted, and a peek of the key.

use floodwall_bench as support;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant};

use floodwall::core::Parameters;
use floodwall::core::store::{Op, Reply};
use floodwall::core::{DynStore, LocalVerdicts};
use floodwall::redis::RedisStore;
use floodwall::{Decision, Error, Policy, Store, StoreExt};
use redis_harness::RedisServer;
use tokio::time::{MissedTickBehavior, interval};

const NODES: usize = 4;
const TICKS: u64 = 5_000;
const PER_TICK: u64 = 2;
const QUOTA: &str = "100/s burst 20";
/// GCRA `QUOTA`'s emission interval (µs) and burst, as a policy of it computes with them.
static GCRA: LazyLock<(u64, u64)> = LazyLock::new(|| {
    let policy = Policy::gcra("rate", QUOTA.parse().expect("quota")).expect("policy");
    let Parameters::Gcra { interval, .. } = policy.parameters() else {
        unreachable!("a GCRA policy has GCRA parameters")
    };
    (interval, policy.limit())
});
const INTERVALS: [Duration; 3] = [
    Duration::from_millis(100),
    Duration::from_millis(10),
    Duration::from_millis(2),
];
const HOT: &[u8] = b"hot";

/// A node's `RedisStore`, timing its calls and summing the units Redis admitted.
struct Timed {
    redis: RedisStore,
    /// Wall time of each call, µs.
    times: Mutex<Vec<u64>>,
    /// Units Redis admitted (costs of allowed answers).
    recorded: AtomicU64,
}

impl Timed {
    fn new(redis: RedisStore) -> Self {
        Self {
            redis,
            times: Mutex::new(Vec::new()),
            recorded: AtomicU64::new(0),
        }
    }

    fn times(&self) -> Vec<u64> {
        std::mem::take(&mut *self.times.lock().expect("times"))
    }
}

impl Store for Timed {
    async fn call(&self, op: Op<'_>) -> Result<Reply, Error> {
        let Op::Check { key, policy, cost } = op else {
            return match op {
                Op::Reset { .. } => self.redis.call(op).await,
                other => Err(other.unsupported()),
            };
        };
        let start = Instant::now();
        let result = self.redis.check(key, policy, cost).await;
        let us = u64::try_from(start.elapsed().as_micros()).unwrap_or(u64::MAX);
        self.times.lock().expect("times").push(us);
        if let Ok(d) = &result
            && d.is_allowed()
        {
            self.recorded.fetch_add(cost, Ordering::Relaxed);
        }
        result.map(Reply::Decision)
    }
}

/// What a flood did.
#[derive(Debug, Clone, Copy)]
struct Flood {
    requests: u64,
    admitted: u64,
    /// µs between the first and the last check.
    span_us: u64,
    /// The busiest node's requests.
    node_max: u64,
    /// The most admitted over the allowance at any time: max over admissions `i` (by
    /// the time its check returned, µs from the first check) of `i + 1 − allowance(t_i)`.
    worst_over: i64,
}

/// Every node receives `PER_TICK` checks of the hot key per ms for `TICKS` ms.
async fn flood(nodes: &[Arc<dyn DynStore>], policy: &Arc<Policy>) -> Flood {
    let base = Instant::now();
    let first = Arc::new(AtomicU64::new(u64::MAX));
    let last = Arc::new(AtomicU64::new(0));
    let mut pacers = Vec::new();
    for node in nodes {
        let (node, policy) = (node.clone(), policy.clone());
        let (first, last) = (first.clone(), last.clone());
        pacers.push(tokio::spawn(async move {
            let mut tick = interval(Duration::from_millis(1));
            tick.set_missed_tick_behavior(MissedTickBehavior::Burst);
            let mut checks = Vec::with_capacity((TICKS * PER_TICK) as usize);
            for _ in 0..TICKS {
                tick.tick().await;
                for _ in 0..PER_TICK {
                    let (node, policy) = (node.clone(), policy.clone());
                    let (first, last) = (first.clone(), last.clone());
                    checks.push(tokio::spawn(async move {
                        let at = u64::try_from(base.elapsed().as_micros()).unwrap_or(u64::MAX);
                        first.fetch_min(at, Ordering::Relaxed);
                        last.fetch_max(at, Ordering::Relaxed);
                        let allowed = node
                            .check(HOT, &policy, 1)
                            .await
                            .expect("check")
                            .is_allowed();
                        allowed.then(|| base.elapsed().as_micros() as u64)
                    }));
                }
            }
            let mut requests = 0;
            let mut admitted = Vec::new();
            for c in checks {
                requests += 1;
                admitted.extend(c.await.expect("check task"));
            }
            (requests, admitted)
        }));
    }
    let (mut requests, mut admitted, mut node_max) = (0, Vec::new(), 0);
    for p in pacers {
        let (r, a) = p.await.expect("node");
        requests += r;
        admitted.extend(a);
        node_max = node_max.max(r);
    }
    let first = first.load(Ordering::Relaxed);
    admitted.sort_unstable();
    let worst_over = admitted
        .iter()
        .enumerate()
        .map(|(i, &t)| (i + 1) as i64 - allowance(t.saturating_sub(first)) as i64)
        .max()
        .unwrap_or(0);
    Flood {
        requests,
        admitted: admitted.len() as u64,
        span_us: last.load(Ordering::Relaxed).saturating_sub(first),
        node_max,
        worst_over,
    }
}

/// What GCRA `QUOTA` admits over a span of `us`: burst + span × rate.
fn allowance(us: u64) -> u64 {
    let (emission_us, burst) = *GCRA;
    burst + us / emission_us
}

fn evalsha_calls(server: &RedisServer) -> u64 {
    support::commandstats(&server.cmd(&["INFO", "commandstats"]))
        .get("evalsha")
        .and_then(|f| f.get("calls")?.parse().ok())
        .unwrap_or(0)
}

struct Row {
    mode: String,
    flood: Flood,
    script_calls: u64,
    evalsha: u64,
    l_p99_us: u64,
    l_max_us: u64,
    /// `None` in the exact mode (nothing to bound).
    interval_us: Option<u64>,
    /// Units Redis admitted in all (after the flushes), flush rounds, peek.
    recorded: u64,
    flushes: u32,
    peek: Decision,
    locally: (u64, u64),
}

impl Row {
    fn allowance(&self) -> u64 {
        allowance(self.flood.span_us)
    }

    fn over(&self) -> i64 {
        self.flood.admitted as i64 - self.allowance() as i64
    }

    /// λ of the busiest node, per second.
    fn lambda(&self) -> f64 {
        self.flood.node_max as f64 / (self.flood.span_us.max(1) as f64 / 1e6)
    }

    /// `N × min(⌈λ·T⌉ + ⌈λ·L⌉, limit)`.
    fn bound(&self, limit: u64) -> Option<u64> {
        let t = self.interval_us? as f64 / 1e6;
        let l = self.l_p99_us as f64 / 1e6;
        let per_node = (self.lambda() * t).ceil() as u64 + (self.lambda() * l).ceil() as u64;
        Some(NODES as u64 * per_node.min(limit))
    }
}

fn main() {
    let Some(server) = support::redis_or_note("nothing to measure") else {
        return;
    };
    let rt = support::runtime(2);
    let connect = || {
        rt.block_on(
            RedisStore::builder()
                // Every check to Redis: the deny cache (on by default) would answer refusals
                // locally, and these rows measure what Redis does.
                .deny_cache(false)
                .coalesce(false)
                .multiplexed(&server.url()),
        )
        .expect("store")
    };
    let peeker = connect();
    let mut rows = Vec::new();
    let modes = std::iter::once(None).chain(INTERVALS.map(Some));
    let mut limit = 0;
    for interval in modes {
        let name = match interval {
            None => "verdicts-exact".to_owned(),
            Some(t) => format!("verdicts-{}us", t.as_micros()),
        };
        let policy = Arc::new(Policy::gcra(name, QUOTA.parse().expect("quota")).expect("policy"));
        limit = policy.limit();
        let timed: Vec<Arc<Timed>> = (0..NODES)
            .map(|_| Arc::new(Timed::new(connect())))
            .collect();
        let verdicts: Vec<Arc<LocalVerdicts<Arc<Timed>>>> = match interval {
            None => Vec::new(),
            Some(t) => timed
                .iter()
                .map(|s| Arc::new(LocalVerdicts::new(s.clone(), t).expect("interval")))
                .collect(),
        };
        let nodes: Vec<Arc<dyn DynStore>> = match interval {
            None => timed
                .iter()
                .map(|s| s.clone() as Arc<dyn DynStore>)
                .collect(),
            Some(_) => verdicts
                .iter()
                .map(|v| v.clone() as Arc<dyn DynStore>)
                .collect(),
        };
        // Loads the script outside the window; no call on the hot key.
        for s in &timed {
            rt.block_on(s.redis.check(b"warm-up", &policy, 0))
                .expect("warm-up");
        }
        server.cmd(&["CONFIG", "RESETSTAT"]);
        let calls_before: u64 = timed.iter().map(|s| s.redis.stats().script_calls).sum();
        let flood = rt.block_on(flood(&nodes, &policy));
        let evalsha = evalsha_calls(&server);
        let script_calls = timed
            .iter()
            .map(|s| s.redis.stats().script_calls)
            .sum::<u64>()
            - calls_before;
        let mut times: Vec<f64> = timed
            .iter()
            .flat_map(|s| s.times())
            .map(|t| t as f64)
            .collect();
        let l_p99_us = support::quantile(&mut times, 0.99).unwrap_or(0.0) as u64;
        let l_max_us = times.iter().copied().fold(0.0, f64::max) as u64;
        // Flush until Redis took every unit (a debt waits for room).
        let recorded = || {
            timed
                .iter()
                .map(|s| s.recorded.load(Ordering::Relaxed))
                .sum()
        };
        let mut flushes = 0;
        while !verdicts.is_empty() && recorded() < flood.admitted && flushes < 50 {
            for v in &verdicts {
                rt.block_on(v.flush()).expect("flush");
            }
            flushes += 1;
            if recorded() < flood.admitted {
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        let peek = rt.block_on(peeker.check(HOT, &policy, 0)).expect("peek");
        let locally = verdicts.iter().fold((0, 0), |(a, d), v| {
            let s = v.stats();
            (a + s.allowed_locally, d + s.denied_locally)
        });
        rows.push(Row {
            mode: match interval {
                None => "exact (RedisStore)".to_owned(),
                Some(t) => format!("verdicts T={} ms", t.as_millis()),
            },
            flood,
            script_calls,
            evalsha,
            l_p99_us,
            l_max_us,
            interval_us: interval.map(|t| t.as_micros() as u64),
            recorded: recorded(),
            flushes,
            peek,
            locally,
        });
    }

    println!(
        "\n{NODES} nodes × {PER_TICK} checks/ms of one key for {TICKS} ms (GCRA {QUOTA}, \
         limit {limit}; {}× the quota in all), each node its own RedisStore connection",
        NODES as u64 * PER_TICK * 1_000 / (1_000_000 / GCRA.0)
    );
    println!(
        "{:<20} {:>8} {:>7} {:>8} {:>9} {:>5} {:>5} {:>6} {:>11} {:>8} {:>9} {:>8}",
        "mode",
        "requests",
        "D (s)",
        "admitted",
        "allowance",
        "over",
        "worst",
        "bound",
        "L p99/max",
        "calls",
        "calls/req",
        "EVALSHA",
    );
    for r in &rows {
        println!(
            "{:<20} {:>8} {:>7.3} {:>8} {:>9} {:>5} {:>5} {:>6} {:>11} {:>8} {:>9.5} {:>8}",
            r.mode,
            r.flood.requests,
            r.flood.span_us as f64 / 1e6,
            r.flood.admitted,
            r.allowance(),
            r.over(),
            r.flood.worst_over,
            r.bound(limit).map_or("-".to_owned(), |b| b.to_string()),
            format!("{}/{} µs", r.l_p99_us, r.l_max_us),
            r.script_calls,
            r.script_calls as f64 / r.flood.requests.max(1) as f64,
            r.evalsha,
        );
    }
    println!(
        "over: admitted − allowance(D), allowance = burst + D × rate; worst: the most over \
         allowance(t) at any t in the flood; bound: N × min(⌈λ·T⌉ + ⌈λ·L⌉, limit) with L \
         the p99 call time; calls: the RedisStores' script calls, EVALSHA: Redis's count"
    );
    println!("after the flood (flush() on every node, repeated while a debt waits for room):");
    for r in &rows {
        println!(
            "  {:<20} λ {:.0}/s per node; locally allowed {} denied {}; Redis admitted {} \
             units of {} admitted ({}) after {} flush round(s); peek: remaining {}, \
             reset_after {:?}",
            r.mode,
            r.lambda(),
            r.locally.0,
            r.locally.1,
            r.recorded,
            r.flood.admitted,
            if r.recorded == r.flood.admitted {
                "all recorded"
            } else {
                "MISSING"
            },
            r.flushes,
            r.peek.remaining,
            r.peek.reset_after,
        );
    }
}
