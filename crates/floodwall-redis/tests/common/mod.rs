//! Shared by the integration tests: a policy per algorithm, a store without the deny
//! cache, and the server's clock.

#![allow(dead_code, unreachable_pub)]

use std::time::Duration;

use floodwall_core::{Algorithm, Policy, Quota};
use floodwall_redis::RedisStore;
use redis_harness::{RedisServer, Reply};

/// A policy constructor (`Policy::gcra`, `Policy::fixed_window`, ...).
pub type Make = fn(String, Quota) -> Result<Policy, floodwall_core::ConfigError>;

/// `make(name, quota)`, the quota parsed from its text.
pub fn policy(make: Make, name: &str, quota: &str) -> Policy {
    make(name.to_owned(), quota.parse().unwrap()).unwrap()
}

/// One policy per algorithm, all on `quota` (no burst, so every algorithm accepts it).
pub fn every_algorithm(name: &str, quota: &str) -> Vec<Policy> {
    Algorithm::all()
        .into_iter()
        .map(|a| Policy::new(format!("{name}-{a}"), a, quota.parse().unwrap()).unwrap())
        .collect()
}

/// A small policy for random histories: `count` per `period_ms`, with `burst` where the
/// algorithm takes one, so short histories cross windows, buckets and refills.
pub fn small_policy(
    name: String,
    algorithm: Algorithm,
    count: u64,
    period_ms: u64,
    burst: u64,
) -> Policy {
    let mut quota = Quota::new(count, Duration::from_millis(period_ms)).unwrap();
    if algorithm.has_burst() {
        quota = quota.with_burst(burst).unwrap();
    }
    Policy::new(name, algorithm, quota).unwrap()
}

/// A default multiplexed store without the deny cache: every check is a script call.
pub async fn uncached_store(url: &str) -> RedisStore {
    RedisStore::builder()
        .deny_cache(false)
        .multiplexed(url)
        .await
        .unwrap()
}

/// A store without the deny cache whose checks all run the generic scripts, which read
/// the parameters from their arguments (`written_scripts(0)`), under `prefix`: beside an
/// [`uncached_store`] on the same server, the same checks through the other scripts.
pub async fn generic_store(url: &str, prefix: &str) -> RedisStore {
    RedisStore::builder()
        .deny_cache(false)
        .written_scripts(0)
        .prefix(prefix)
        .multiplexed(url)
        .await
        .unwrap()
}

/// The server's `TIME`, in µs since the epoch.
pub fn server_now(server: &RedisServer) -> u64 {
    match server.try_cmd(&["TIME"]).unwrap() {
        Reply::Array(parts) => {
            let n = |i: usize| parts[i].as_integer().unwrap() as u64;
            n(0) * 1_000_000 + n(1)
        }
        other => panic!("TIME answered {other:?}"),
    }
}

/// `INFO commandstats` as (command, calls) pairs, e.g. `("get", 1)`; scripts' inner
/// commands are counted too.
pub fn command_calls(server: &RedisServer) -> Vec<(String, u64)> {
    let info = server.cmd(&["INFO", "commandstats"]);
    let mut out: Vec<(String, u64)> = info
        .lines()
        .filter_map(|l| {
            let (name, rest) = l.strip_prefix("cmdstat_")?.split_once(':')?;
            let calls = rest
                .strip_prefix("calls=")?
                .split(',')
                .next()?
                .parse()
                .ok()?;
            Some((name.to_owned(), calls))
        })
        .collect();
    out.sort();
    out
}

/// The scripts in the server's script cache (`INFO memory`'s `number_of_cached_scripts`).
pub fn cached_scripts(server: &RedisServer) -> u64 {
    let info = server.cmd(&["INFO", "memory"]);
    info.lines()
        .find_map(|l| l.strip_prefix("number_of_cached_scripts:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no number_of_cached_scripts in INFO memory: {info}"))
}

/// `.now()` on a memory store's future: its answer (it never waits).
pub trait Now: std::future::Future + Sized {
    fn now(self) -> Self::Output {
        let mut f = std::pin::pin!(self);
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        match f.as_mut().poll(&mut cx) {
            std::task::Poll::Ready(v) => v,
            std::task::Poll::Pending => panic!("an in-memory store waited"),
        }
    }
}

impl<F: std::future::Future> Now for F {}
