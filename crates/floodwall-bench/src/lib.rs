//! Helpers the benches share: criterion's estimates, Linux CPU and memory counters, Redis's
//! `INFO commandstats` and `INFO cpu`, settings from the environment, medians and quantiles, the tables'
//! number formats, starting `redis-server` (or finding `redis-benchmark`, valgrind or
//! another tool), and the tokio runtime and tasks the client side runs on. Each bench uses
//! some of them.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tokio::runtime::Runtime;
use tokio::task::JoinSet;

use redis_harness::RedisServer;

/// Where criterion writes its estimates (`CRITERION_HOME`, else under the target dir).
fn criterion_dir() -> PathBuf {
    if let Some(home) = std::env::var_os("CRITERION_HOME") {
        PathBuf::from(home)
    } else if let Some(target) = std::env::var_os("CARGO_TARGET_DIR") {
        PathBuf::from(target).join("criterion")
    } else {
        PathBuf::from("target/criterion")
    }
}

/// When this bench's run began ([`mark_run_start`]): estimates written before are another
/// run's.
static RUN_START: std::sync::OnceLock<std::time::SystemTime> = std::sync::OnceLock::new();

/// Marks the start of this run; call first in `main` of a bench that reads [`estimate_ns`].
pub fn mark_run_start() {
    RUN_START.get_or_init(std::time::SystemTime::now);
}

/// Criterion's `stat` estimate (`"mean"` or `"median"`) of the ns per iteration of one
/// benchmark, from its `new/estimates.json`; `None` unless this run wrote it (after
/// [`mark_run_start`]): a filtered run leaves the other benchmarks' files from earlier runs.
pub fn estimate_ns(group: &str, id: &str, stat: &str) -> Option<f64> {
    let path = criterion_dir()
        .join(group)
        .join(id)
        .join("new/estimates.json");
    let written = std::fs::metadata(&path).ok()?.modified().ok()?;
    if written < *RUN_START.get()? {
        return None;
    }
    let text = std::fs::read_to_string(path).ok()?;
    let at = text.find(&format!("\"{stat}\""))?;
    let v = text[at..].split("\"point_estimate\":").nth(1)?;
    v.split([',', '}']).next()?.trim().parse().ok()
}

/// The first field of a `schedstat` file: nanoseconds the task has run on a CPU.
pub fn schedstat_ns(path: &Path) -> Option<u64> {
    let text = std::fs::read_to_string(path).ok()?;
    text.split_whitespace().next()?.parse().ok()
}

/// Resident memory of this process, in bytes (0 where `/proc` has none).
pub fn rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// `cmdstat_evalsha:calls=1,usec=2,...` lines of `INFO commandstats` as
/// command -> field -> value.
pub fn commandstats(text: &str) -> HashMap<String, HashMap<String, String>> {
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("cmdstat_"))
        .filter_map(|l| l.split_once(':'))
        .map(|(cmd, fields)| {
            let fields = fields
                .split(',')
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect();
            (cmd.to_owned(), fields)
        })
        .collect()
}

/// Redis's own CPU time, user plus system, in seconds, from `INFO cpu` (`used_cpu_user` +
/// `used_cpu_sys`: the whole process, every command and the socket I/O); `None` if absent.
pub fn used_cpu_s(info_cpu: &str) -> Option<f64> {
    let field = |name: &str| {
        info_cpu
            .lines()
            .find_map(|l| l.trim().strip_prefix(name)?.strip_prefix(':'))
            .and_then(|v| v.trim().parse::<f64>().ok())
    };
    Some(field("used_cpu_user")? + field("used_cpu_sys")?)
}

/// CPU time of every thread of this process, in nanoseconds.
pub fn own_cpu_ns() -> u64 {
    std::fs::read_dir("/proc/self/task")
        .map(|dir| {
            dir.filter_map(Result::ok)
                .filter_map(|t| schedstat_ns(&t.path().join("schedstat")))
                .sum()
        })
        .unwrap_or(0)
}

/// `name` from the environment, parsed; `default` when unset or unparsable (with a note).
pub fn env_or<T: std::str::FromStr + std::fmt::Display>(name: &str, default: T) -> T {
    match std::env::var(name) {
        Ok(v) => v.trim().parse().unwrap_or_else(|_| {
            println!("note: {name}={v:?} is not a valid value; using {default}");
            default
        }),
        Err(_) => default,
    }
}

/// The `q` quantile (0 ≤ q ≤ 1, nearest rank) of `xs`, which it sorts; `None` if empty.
pub fn quantile(xs: &mut [f64], q: f64) -> Option<f64> {
    if xs.is_empty() {
        return None;
    }
    xs.sort_by(f64::total_cmp);
    let rank = (q * (xs.len() - 1) as f64).round() as usize;
    Some(xs[rank.min(xs.len() - 1)])
}

/// Median, minimum and maximum of `xs` (which it sorts); `None` if empty. The median of an
/// even count is the mean of the two middle values.
pub fn median_min_max(xs: &mut [f64]) -> Option<(f64, f64, f64)> {
    if xs.is_empty() {
        return None;
    }
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    let median = if n % 2 == 1 {
        xs[n / 2]
    } else {
        (xs[n / 2 - 1] + xs[n / 2]) / 2.0
    };
    Some((median, xs[0], xs[n - 1]))
}

/// The order in which to run `n` variants in `round` (from 0) of an alternating
/// measurement: forward, reversed, then rotated by one and forward, reversed, and so on, so
/// that over the rounds each runs early and late, and after each of the others, and a drift
/// in the machine's speed weighs on all of them alike.
pub fn round_order(n: usize, round: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    if n > 0 {
        order.rotate_left((round / 2) % n);
    }
    if round % 2 == 1 {
        order.reverse();
    }
    order
}

/// The median of `xs` (which it sorts; the mean of the two middle values of an even count);
/// `None` if empty.
pub fn median(xs: &mut [f64]) -> Option<f64> {
    median_min_max(xs).map(|(median, _, _)| median)
}

/// `x` right-aligned in `width` with `precision` decimals, or "n/a".
pub fn opt(x: Option<f64>, width: usize, precision: usize) -> String {
    x.map_or_else(
        || format!("{:>width$}", "n/a"),
        |x| format!("{x:>width$.precision$}"),
    )
}

/// "median (min–max)" of `xs`, the median right-aligned in `width`, or "n/a".
pub fn mmm(mut xs: Vec<f64>, width: usize, precision: usize) -> String {
    match median_min_max(&mut xs) {
        Some((med, min, max)) => {
            format!("{med:>width$.precision$} ({min:.precision$}–{max:.precision$})")
        }
        None => format!("{:>width$}", "n/a"),
    }
}

/// Whether `tool --version` runs here and succeeds (its output discarded).
pub fn have(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Whether `redis-benchmark` (Debian's `redis-tools`) runs here.
pub fn have_redis_benchmark() -> bool {
    have("redis-benchmark")
}

/// A `redis-server` of its own on a free loopback port (redis-harness; dropping it stops
/// the server), or `None` after printing `"note: no redis-server (<error>); <then>"`.
pub fn redis_or_note(then: &str) -> Option<RedisServer> {
    match RedisServer::try_start_with(&[]) {
        Ok(server) => Some(server),
        Err(e) => {
            println!("note: no redis-server ({e}); {then}");
            None
        }
    }
}

/// A multi-threaded tokio runtime of `workers` threads for a bench's client side.
pub fn runtime(workers: usize) -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .expect("client runtime")
}

/// Runs `iters` calls split over `tasks` tokio tasks on `rt`, task `t` (from 0) spawned as
/// `task(t, count)` with its share `count` (the first `iters % tasks` tasks one more), and
/// waits for all of them. Returns the wall time and each task's result (in the order they
/// finished); a task's panic resumes here.
pub fn split_over_tasks<R, F>(
    rt: &Runtime,
    tasks: usize,
    iters: u64,
    task: impl Fn(u64, u64) -> F,
) -> (Duration, Vec<R>)
where
    F: Future<Output = R> + Send + 'static,
    R: Send + 'static,
{
    let n = tasks as u64;
    rt.block_on(async {
        let began = Instant::now();
        let mut set = JoinSet::new();
        for t in 0..n {
            set.spawn(task(t, iters / n + u64::from(t < iters % n)));
        }
        let mut results = Vec::with_capacity(tasks);
        while let Some(done) = set.join_next().await {
            match done {
                Ok(r) => results.push(r),
                Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                Err(e) => panic!("check task failed: {e}"),
            }
        }
        (began.elapsed(), results)
    })
}
