//! MemoryStore (GCRA) against governor's keyed limiter, same quota, same keys, same run.
//!
//! Run: `cargo bench -p floodwall-bench --bench memory`. Rows: one hot key, 100,000 keys in random order,
//! a fresh key every call; each allowed and denied where it matters; one and two threads.
//! At the end it prints ns per check for both, their ratio, and resident bytes per key.
//!
//! Like for like: governor's keyed map (a `DashMap`) gets the hasher floodwall's map uses
//! (ahash) instead of its default SipHash, and in the fresh-key row, which is about a map
//! that must not grow without bound, governor runs its own eviction (`retain_recent`) each
//! time its map would pass floodwall's default cap. The ratios are read only from criterion
//! estimates this invocation wrote: a filtered run prints only the rows it ran.
//!
//! `MEMORY_INSTRUCTIONS=1` counts instructions per check instead (`memory/instructions.rs`,
//! needs valgrind): the same rows at one thread, steady whatever the machine is doing.

#[path = "memory/instructions.rs"]
mod instructions;
use floodwall_bench as support;

use std::hint::black_box;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion};
use floodwall::{MemoryStore, Policy, Quota, StoreExt};
use governor::RateLimiter;
use governor::clock::DefaultClock;
use governor::state::keyed::DashMapStateStore;

const KEYS: usize = 100_000;

/// governor's keyed limiter on its default `DashMap`, with floodwall's hasher (ahash).
type Governor = RateLimiter<String, DashMapStateStore<String, ahash::RandomState>, DefaultClock>;

fn governor(quota: governor::Quota) -> Governor {
    RateLimiter::dashmap_with_hasher(quota, ahash::RandomState::new())
}

/// Quotas that admit every call of a benchmark (allowed path) or none after the first.
fn quotas(allowed: bool) -> (Policy, governor::Quota) {
    if allowed {
        // 1M/s with a burst of 10^9: far above any call rate here, never denies.
        let q = Quota::per_second(1_000_000)
            .unwrap()
            .with_burst(1_000_000_000)
            .unwrap();
        let g = governor::Quota::per_second(NonZeroU32::new(1_000_000).unwrap())
            .allow_burst(NonZeroU32::new(1_000_000_000).unwrap());
        (Policy::gcra("bench", q).unwrap(), g)
    } else {
        let q = Quota::per_hour(1).unwrap();
        let g = governor::Quota::per_hour(NonZeroU32::new(1).unwrap());
        (Policy::gcra("bench", q).unwrap(), g)
    }
}

fn keys() -> Vec<String> {
    // A fixed pseudo-random order (xorshift), so both limiters see the same sequence.
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    (0..KEYS)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            format!("10.{}.{}.{}", (x >> 16) as u8, (x >> 8) as u8, x as u8)
                + &(x % KEYS as u64).to_string()
        })
        .collect()
}

/// Runs `f(thread, i)` `iters` times split over `threads` threads; returns the wall time.
fn threaded<F: Fn(usize, u64) + Sync>(threads: usize, iters: u64, f: F) -> Duration {
    let per = iters / threads as u64;
    let start = Instant::now();
    std::thread::scope(|s| {
        for t in 0..threads {
            let f = &f;
            s.spawn(move || (0..per).for_each(|i| f(t, i)));
        }
    });
    start.elapsed()
}

fn bench(c: &mut Criterion) {
    let keys = Arc::new(keys());
    for (case, allowed) in [("hot_key_allowed", true), ("hot_key_denied", false)] {
        let mut g = c.benchmark_group(case);
        for threads in [1, 2] {
            let (policy, gq) = quotas(allowed);
            let store = MemoryStore::new();
            let gov = governor(gq);
            let key = "203.0.113.7".to_owned();
            g.bench_function(BenchmarkId::new("floodwall", threads), |b| {
                b.iter_custom(|n| {
                    threaded(threads, n, |_, _| {
                        black_box(
                            store
                                .check_now(key.as_bytes(), &policy, 1)
                                .unwrap()
                                .unwrap(),
                        );
                    })
                })
            });
            g.bench_function(BenchmarkId::new("governor", threads), |b| {
                b.iter_custom(|n| {
                    threaded(threads, n, |_, _| {
                        let _ = black_box(gov.check_key(&key));
                    })
                })
            });
        }
        g.finish();
    }
    let mut g = c.benchmark_group("100k_keys");
    for threads in [1, 2] {
        let (policy, gq) = quotas(true);
        let store = MemoryStore::new();
        let gov = governor(gq);
        for k in keys.iter() {
            store.check_now(k.as_bytes(), &policy, 1).unwrap().unwrap();
            let _ = gov.check_key(k);
        }
        let ks = &keys;
        g.bench_function(BenchmarkId::new("floodwall", threads), |b| {
            b.iter_custom(|n| {
                threaded(threads, n, |t, i| {
                    let k = &ks[(i as usize * 7 + t * 50_000) % KEYS];
                    black_box(store.check_now(k.as_bytes(), &policy, 1).unwrap().unwrap());
                })
            })
        });
        g.bench_function(BenchmarkId::new("governor", threads), |b| {
            b.iter_custom(|n| {
                threaded(threads, n, |t, i| {
                    let k = &ks[(i as usize * 7 + t * 50_000) % KEYS];
                    let _ = black_box(gov.check_key(k));
                })
            })
        });
    }
    g.finish();
    let mut g = c.benchmark_group("fresh_key_every_call");
    {
        let (policy, gq) = quotas(true);
        let store = MemoryStore::new();
        let gov = governor(gq);
        let mut n1 = 0u64;
        g.bench_function(BenchmarkId::new("floodwall", 1), |b| {
            b.iter(|| {
                n1 += 1;
                let k = format!("k{n1}");
                black_box(store.check_now(k.as_bytes(), &policy, 1).unwrap().unwrap())
            })
        });
        // governor's eviction: every `max_keys` new keys, drop the states that no longer
        // differ from a fresh one (all of them here, 1 µs after their check), so its map
        // never holds more keys than floodwall's cap.
        let cap = store.max_keys() as u64;
        let (mut n2, mut most) = (0u64, 0usize);
        g.bench_function(BenchmarkId::new("governor", 1), |b| {
            b.iter(|| {
                n2 += 1;
                if n2 % cap == 0 {
                    most = most.max(gov.len());
                    gov.retain_recent();
                }
                let k = format!("k{n2}");
                black_box(gov.check_key(&k).is_ok())
            })
        });
        println!(
            "fresh keys: floodwall holds {} keys (cap {}); governor holds {} after {n2} keys, \
             at most {most} before a retain_recent (every {cap} keys)",
            store.len(),
            store.max_keys(),
            gov.len()
        );
    }
    g.finish();
}

/// Resident bytes per key after inserting 100,000 keys into a fresh limiter.
fn bytes_per_key() {
    let keys = keys();
    let (policy, gq) = quotas(true);
    let before = support::rss_bytes();
    let store = MemoryStore::new();
    for k in &keys {
        store.check_now(k.as_bytes(), &policy, 1).unwrap().unwrap();
    }
    let ours = support::rss_bytes().saturating_sub(before) as f64 / KEYS as f64;
    let before = support::rss_bytes();
    let gov = governor(gq);
    for k in &keys {
        let _ = gov.check_key(k);
    }
    let theirs = support::rss_bytes().saturating_sub(before) as f64 / KEYS as f64;
    println!("\nresident bytes per key (100k keys): floodwall {ours:.0}, governor {theirs:.0}");
    drop((store, gov));
}

fn print_ratios() {
    println!(
        "\n{:<24} {:>7} {:>14} {:>14} {:>8}",
        "case", "threads", "floodwall ns", "governor ns", "ratio"
    );
    for group in [
        "hot_key_allowed",
        "hot_key_denied",
        "100k_keys",
        "fresh_key_every_call",
    ] {
        for threads in ["1", "2"] {
            let ours = support::estimate_ns(group, &format!("floodwall/{threads}"), "mean");
            let theirs = support::estimate_ns(group, &format!("governor/{threads}"), "mean");
            if let (Some(a), Some(b)) = (ours, theirs) {
                println!(
                    "{group:<24} {threads:>7} {a:>14.1} {b:>14.1} {:>8.2}",
                    a / b
                );
            }
        }
    }
    println!(
        "(ns per check, wall time over all threads; ratio = floodwall / governor, lower is \
         better; governor on ahash, with retain_recent in the fresh-key row; rows not run in \
         this invocation are left out)"
    );
}

fn main() {
    // A counting child of `MEMORY_INSTRUCTIONS=1` (before criterion reads the arguments).
    if instructions::as_child().is_some() {
        return;
    }
    if std::env::var_os("MEMORY_INSTRUCTIONS").is_some() {
        instructions::report();
        return;
    }
    support::mark_run_start();
    bytes_per_key();
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(20)
        .configure_from_args();
    bench(&mut c);
    c.final_summary();
    print_ratios();
}
