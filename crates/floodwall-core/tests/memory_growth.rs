//! Resident memory under floods of keys. Each test measures the whole process's RSS, so
//! they live in a binary of their own and run one at a time: another test allocating
//! meanwhile would be counted as their growth (it made them fail now and then when they
//! shared binaries with other tests). Memory an earlier test freed may stay resident and is
//! then part of the next one's baseline: the bounds catch growth without end (the
//! gigabytes these tests were written for), not a few megabytes.

use std::sync::{Mutex, MutexGuard};

use floodwall_core::{DenyCache, ManualClock, MemoryStore, Policy, Quota, StoreExt};

const T0: u64 = 1_700_000_000_000_000;

/// Resident memory of this process, in bytes (Linux): for bounds on memory, not timing.
fn rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kb = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .unwrap();
    kb * 1024
}

/// Held for a whole test: the tests of this binary never overlap.
fn alone() -> MutexGuard<'static, ()> {
    static ALONE: Mutex<()> = Mutex::new(());
    ALONE
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[test]
fn a_million_distinct_keys_stay_under_the_memory_stores_cap() {
    let _alone = alone();
    let store = MemoryStore::new();
    // Long-lived states (each admission holds its key 2.4 h): nothing expires during the
    // flood, however slow the machine, so the cap alone holds the line. (At 10/min a
    // state lived 6 s, and a flood slowed past that by a busy machine dropped expired
    // states instead of evicting live ones.)
    let policy = Policy::gcra("flood", "10/day".parse().unwrap()).unwrap();
    let before = rss_bytes();
    let most = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|s| {
        for half in 0..2u32 {
            let (store, policy, most) = (&store, &policy, &most);
            s.spawn(move || {
                for i in 0..500_000u32 {
                    let key = (half << 31 | i).to_be_bytes();
                    assert!(
                        store
                            .check_now(&key, policy, 1)
                            .unwrap()
                            .unwrap()
                            .is_allowed()
                    );
                    most.fetch_max(store.len(), std::sync::atomic::Ordering::Relaxed);
                }
            });
        }
    });
    let most = most.into_inner();
    let grown = rss_bytes().saturating_sub(before);
    eprintln!(
        "1,000,000 distinct keys: at most {most} held (cap {}), {} evicted, RSS grew {} MiB",
        MemoryStore::DEFAULT_MAX_KEYS,
        store.evicted(),
        grown >> 20
    );
    // At most one key per inserting thread above the cap.
    assert!(most <= MemoryStore::DEFAULT_MAX_KEYS + 2);
    assert!(store.evicted() >= 1_000_000 - MemoryStore::DEFAULT_MAX_KEYS as u64);
    // "Tens of megabytes" at the default cap (about 92 B per GCRA key plus the map's
    // spare capacity).
    assert!(grown < 96 << 20, "RSS grew {grown} bytes");
}

#[test]
fn a_flood_at_one_frozen_instant_stays_bounded_in_memory() {
    let _alone = alone();
    // Every state expires at the same instant, so every eviction is a tie. Evicting ties in
    // the map's own order once left blocks of tombstones that made the table grow without
    // end (gigabytes after 2.5 × the cap); they are now sampled across the table.
    let store = MemoryStore::builder()
        .max_keys(10_000)
        .clock(ManualClock::new(T0))
        .build();
    let policy = Policy::gcra("frozen", Quota::per_minute(10).unwrap()).unwrap();
    let before = rss_bytes();
    for i in 0..300_000u32 {
        store
            .check_now(&i.to_le_bytes(), &policy, 1)
            .unwrap()
            .unwrap();
    }
    assert!(store.len() <= 10_000);
    let grown = rss_bytes().saturating_sub(before);
    assert!(
        grown < 64 << 20,
        "resident memory grew by {} MiB",
        grown >> 20
    );
}

#[test]
fn a_deny_cache_flood_at_one_frozen_instant_stays_bounded() {
    let _alone = alone();
    // Every entry lapses at the same instant: evictions are all ties, which must be spread
    // over the table (as `a_flood_at_one_frozen_instant_stays_bounded_in_memory` shows for
    // the memory store).
    let clock = ManualClock::new(T0);
    let store = MemoryStore::builder()
        .max_keys(10_000)
        .clock(clock.clone())
        .build();
    let cache = DenyCache::builder()
        .max_keys(10_000)
        .clock(clock.clone())
        .build(store);
    let policy = Policy::gcra("frozen", "1/min burst 1".parse().unwrap()).unwrap();
    let before = rss_bytes();
    for i in 0..300_000u32 {
        cache
            .check_now(&i.to_le_bytes(), &policy, 1)
            .unwrap()
            .unwrap();
    }
    assert!(cache.len() <= 10_000);
    let grown = rss_bytes().saturating_sub(before);
    assert!(
        grown < 64 << 20,
        "resident memory grew by {} MiB",
        grown >> 20
    );
}
