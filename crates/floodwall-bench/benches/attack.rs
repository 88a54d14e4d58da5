//! Under attack: one key at 100× its quota alongside normal users, through `RedisStore`
//! with and without a `DenyCache` in front; Redis commands per request from
//! `INFO commandstats`.
//!
//! Run: `cargo bench -p floodwall-bench --bench attack` (about 10 s). It starts its own
//! `redis-server` on a free loopback port (redis-harness). The schedule, paced by tokio's
//! timer on a 2-worker runtime:
//!
//! - the attacker: one key, GCRA `20/s burst 1`, sends 2 checks every millisecond
//!   (2,000/s, 100× its quota) for 2 s;
//! - normal users: 50 keys under the same policy, each sending one check per 100 ms
//!   (half its quota, so never refused) for the same 2 s.
//!
//! Four windows, each opened by `CONFIG RESETSTAT`: normal users alone, then both without
//! the cache, with it, and with it over a coalescing store (the attacker's two checks of a
//! tick arrive together: when a cached refusal lapses the cache sends one of them to the
//! store and the other waits for its answer, so coalescing has little left to join). The
//! attacker's share of Redis's work is the second (or
//! third) window's minus the first's, over the attacker's requests. Two figures: commands
//! the client sent (`EVALSHA`), and every command Redis executed (the scripts' `TIME`,
//! `GET`, `SET` included). Target: below 0.02 client commands per attacker request with
//! the cache. The floor is one script call per admitted request (1/100 at 100×), since an
//! admission must be recorded in Redis.

use floodwall_bench as support;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use floodwall::core::{DenyCache, DynStore};
use floodwall::redis::RedisStore;
use floodwall::{Policy, StoreExt};
use redis_harness::RedisServer;
use tokio::time::{MissedTickBehavior, interval};

const ATTACK_TICKS: u64 = 2_000;
const PER_TICK: u64 = 2;
const USERS: u64 = 50;
const USER_TICKS: u64 = 20;
const QUOTA: &str = "20/s burst 1";

/// Calls per command from `INFO commandstats`, without the bench's own INFO/CONFIG.
fn command_calls(server: &RedisServer) -> HashMap<String, u64> {
    support::commandstats(&server.cmd(&["INFO", "commandstats"]))
        .into_iter()
        .filter(|(name, _)| !matches!(name.as_str(), "info" | "config"))
        .filter_map(|(name, fields)| Some((name, fields.get("calls")?.parse().ok()?)))
        .collect()
}

#[derive(Debug, Default, Clone, Copy)]
struct Window {
    attacker_requests: u64,
    attacker_admitted: u64,
    user_requests: u64,
    evalsha: u64,
    commands: u64,
}

impl Window {
    fn measure(server: &RedisServer, w: Window) -> Window {
        let calls = command_calls(server);
        Window {
            evalsha: calls.get("evalsha").copied().unwrap_or(0),
            commands: calls.values().sum(),
            ..w
        }
    }
}

async fn run(store: Arc<dyn DynStore>, policy: Arc<Policy>, attack: bool) -> Window {
    let mut users = Vec::new();
    for u in 0..USERS {
        let (store, policy) = (store.clone(), policy.clone());
        users.push(tokio::spawn(async move {
            let key = format!("user-{u}");
            let mut tick = interval(Duration::from_millis(100));
            tick.set_missed_tick_behavior(MissedTickBehavior::Burst);
            for _ in 0..USER_TICKS {
                tick.tick().await;
                let d = store
                    .check(key.as_bytes(), &policy, 1)
                    .await
                    .expect("check");
                assert!(d.is_allowed(), "a normal user was refused");
            }
        }));
    }
    let (mut requests, mut admitted) = (0, 0);
    if attack {
        let mut tick = interval(Duration::from_millis(1));
        tick.set_missed_tick_behavior(MissedTickBehavior::Burst);
        for _ in 0..ATTACK_TICKS {
            tick.tick().await;
            let (a, b) = tokio::join!(
                store.check(b"mallory", &policy, 1),
                store.check(b"mallory", &policy, 1)
            );
            requests += PER_TICK;
            admitted += u64::from(a.expect("check").is_allowed())
                + u64::from(b.expect("check").is_allowed());
        }
    }
    for u in users {
        u.await.expect("user task");
    }
    Window {
        attacker_requests: requests,
        attacker_admitted: admitted,
        user_requests: USERS * USER_TICKS,
        ..Window::default()
    }
}

fn main() {
    let Some(server) = support::redis_or_note("nothing to measure") else {
        return;
    };
    let rt = support::runtime(2);
    // Without the store's own deny cache (on by default): the no-cache row measures Redis
    // alone, the cached rows wrap a `DenyCache` of their own.
    let connect = |coalesce: bool| {
        rt.block_on(
            RedisStore::builder()
                .deny_cache(false)
                .coalesce(coalesce)
                .multiplexed(&server.url()),
        )
        .expect("store")
    };
    let redis = connect(false);
    let window = |name: &str, store: Arc<dyn DynStore>, attack: bool| {
        // A fresh policy name per window: no state carried over.
        let policy = Arc::new(Policy::gcra(name, QUOTA.parse().expect("quota")).expect("policy"));
        // Loads the script outside the window.
        rt.block_on(store.check(b"warm-up", &policy, 1))
            .expect("warm-up");
        server.cmd(&["CONFIG", "RESETSTAT"]);
        let w = rt.block_on(run(store, policy, attack));
        Window::measure(&server, w)
    };
    let users = window("users-only", Arc::new(redis.clone()), false);
    let plain = window("no-cache", Arc::new(redis.clone()), true);
    let cache = Arc::new(DenyCache::new(redis.clone()));
    let cached = window("deny-cache", cache.clone(), true);
    let stats = cache.stats();
    // The attacker's two checks per tick arrive together: when a cached refusal lapses,
    // the cache sends one to Redis and the other waits for its answer; coalescing would
    // make two calls one, if both went.
    let coalescing = connect(true);
    let both = window(
        "deny-cache-coalesce",
        Arc::new(DenyCache::new(coalescing.clone())),
        true,
    );

    println!(
        "\nattacker: {ATTACK_TICKS} ms × {PER_TICK} checks (GCRA {QUOTA}: 100× its quota); \
         {USERS} users × {USER_TICKS} checks at half their quota"
    );
    println!(
        "{:<22} {:>9} {:>9} {:>9} {:>9} {:>14} {:>14} {:>12}",
        "window",
        "att. req",
        "admitted",
        "EVALSHA",
        "commands",
        "EVALSHA/att.",
        "commands/att.",
        "commands/req"
    );
    let per = |n: u64, d: u64| if d == 0 { 0.0 } else { n as f64 / d as f64 };
    for (name, w) in [
        ("normal users only", users),
        ("attack, no cache", plain),
        ("attack, deny cache", cached),
        ("attack, cache+coalesce", both),
    ] {
        let (att_evalsha, att_commands) = if w.attacker_requests > 0 {
            (
                per(w.evalsha.saturating_sub(users.evalsha), w.attacker_requests),
                per(
                    w.commands.saturating_sub(users.commands),
                    w.attacker_requests,
                ),
            )
        } else {
            (0.0, 0.0)
        };
        println!(
            "{name:<22} {:>9} {:>9} {:>9} {:>9} {:>14.4} {:>14.4} {:>12.4}",
            w.attacker_requests,
            w.attacker_admitted,
            w.evalsha,
            w.commands,
            att_evalsha,
            att_commands,
            per(w.commands, w.attacker_requests + w.user_requests),
        );
    }
    let with = per(
        cached.evalsha.saturating_sub(users.evalsha),
        cached.attacker_requests,
    );
    let with_both = per(
        both.evalsha.saturating_sub(users.evalsha),
        both.attacker_requests,
    );
    println!(
        "deny cache: {} store calls, {} refused locally, {} waited for a check in flight \
         after a lapse (the deny-cache window's checks through it)",
        stats.store_calls, stats.denied_locally, stats.waited
    );
    println!(
        "target: below 0.02 client commands (EVALSHA) per attacker request with the cache: \
         {with:.4} ({}); with coalescing too: {with_both:.4} ({}); coalescing saved {} calls",
        if with < 0.02 { "met" } else { "NOT met" },
        if with_both < 0.02 { "met" } else { "NOT met" },
        coalescing.stats().coalesced
    );
}
