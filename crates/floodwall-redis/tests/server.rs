//! What a decision does inside Redis: server time, key names and TTLs, the commands one
//! decision runs (a denial writes nothing), and the memory one key costs.

mod common;

use std::time::Duration;

use floodwall_core::{Policy, StoreExt};
use floodwall_redis::RedisStore;
use redis_harness::RedisServer;

use common::{command_calls, every_algorithm, server_now};

#[tokio::test]
async fn decisions_follow_the_server_clock_not_the_client_clock() {
    let server = RedisServer::start();
    let store = RedisStore::connect(&server.url()).await.unwrap();
    let policy = Policy::gcra("hourly", "1/hour".parse().unwrap()).unwrap();
    let hour = 3_600_000_000u64;

    let before = server_now(&server);
    assert!(store.check(b"u", &policy, 1).await.unwrap().is_allowed());
    let after = server_now(&server);
    // The stored TAT is the server's time plus one interval: the script read TIME.
    let key = store.redis_key(b"u", &policy);
    let key = std::str::from_utf8(&key).unwrap();
    let tat: u64 = server.cmd(&["GET", key]).parse().unwrap();
    assert!(
        (before + hour..=after + hour).contains(&tat),
        "{before} <= {tat} - 1h <= {after}"
    );

    // A client whose clock is an hour ahead, deciding on its own clock, would see the
    // quota refilled already...
    let skewed = store
        .at(after + hour)
        .check(b"u", &policy, 0)
        .await
        .unwrap();
    assert_eq!(skewed.remaining, 1);
    // ...but the store's own path asks the server, whatever the client's clock says.
    let denied = store.check(b"u", &policy, 1).await.unwrap();
    assert!(!denied.is_allowed());
    let retry = denied.retry_after.unwrap();
    assert!(retry > Duration::from_secs(3500) && retry <= Duration::from_secs(3600));
    // The key expires when its state is worthless, one hour after the admission, rounded
    // up to its TTL grid (a quarter of the longest span: 15 min) plus 1 ms.
    let pttl: u64 = server.cmd(&["PTTL", key]).parse().unwrap();
    assert!(pttl > 3_500_000 && pttl <= 4_500_001, "PTTL {pttl}");
}

#[tokio::test]
async fn keys_are_named_as_documented_and_expire_with_their_state() {
    let server = RedisServer::start();
    let store = RedisStore::builder()
        .prefix("app:")
        .multiplexed(&server.url())
        .await
        .unwrap();
    let mut written = Vec::new();
    for policy in every_algorithm("ttl", "10/s") {
        let started = std::time::Instant::now();
        let d = store.check(b"203.0.113.7", &policy, 3).await.unwrap();
        assert!(d.is_allowed());
        let key = String::from_utf8(store.redis_key(b"203.0.113.7", &policy)).unwrap();
        assert!(key.starts_with(&format!("app:{}:", policy.name())), "{key}");
        assert!(key.ends_with(":{203.0.113.7}"), "{key}");
        let pttl: i64 = server.cmd(&["PTTL", &key]).parse().unwrap();
        let elapsed = started.elapsed().as_millis() as i64;
        let reset_ms = d.reset_after.as_micros().div_ceil(1000) as i64;
        if pttl == -2 {
            // Gone already: only a state that was worth nothing by now may be (a fixed
            // window checked a few milliseconds before its end).
            assert!(
                reset_ms <= elapsed + 1,
                "{key} gone {reset_ms} ms before its reset"
            );
        } else {
            // Never shorter than the state needs; longer by at most a quarter of the
            // longest span (1 s for every policy here) + 1 ms, the TTL grid.
            assert!(
                pttl + elapsed + 1 >= reset_ms && pttl <= reset_ms + 251,
                "{key}: PTTL {pttl} (after {elapsed} ms) vs reset {reset_ms} ms"
            );
        }
        written.push(key);

        // A short binary key is stored as its hex, a long one hashed to a fixed length;
        // reset deletes either.
        let long = [0xff; 40];
        for (binary, form, len) in [(&[0xff, 0x00, b'{'][..], ":x{", 7), (&long, ":#{", 65)] {
            store.check(binary, &policy, 1).await.unwrap();
            let key = String::from_utf8(store.redis_key(binary, &policy)).unwrap();
            assert_eq!(key.rsplit_once(form).unwrap().1.len(), len, "{key}");
            assert_eq!(server.cmd(&["EXISTS", &key]), "1");
            store.reset(binary, &policy).await.unwrap();
            assert_eq!(server.cmd(&["EXISTS", &key]), "0");
        }
    }
    // Nothing else was written, and nothing without a TTL (some of these keys may have
    // expired by now: a fixed window's can live a few milliseconds).
    let keys = server.cmd(&["KEYS", "*"]);
    assert!(!keys.trim().is_empty());
    for key in keys.lines() {
        assert!(written.iter().any(|w| w == key), "{key} was not expected");
        assert_ne!(server.cmd(&["PTTL", key]), "-1", "{key} has no TTL");
    }
}

#[tokio::test]
async fn a_ttl_is_renewed_only_when_the_state_outlives_its_grid_cell() {
    let server = RedisServer::start();
    let store = RedisStore::connect(&server.url()).await.unwrap();
    // 10/s burst 10: TAT moves 100 ms per admission; the TTL grid is 1 s / 4 = 250 ms,
    // and this instant is on a cell's edge.
    let policy = Policy::gcra("grid", "10/s".parse().unwrap()).unwrap();
    let now = 1_700_000_000_000_000;
    let key = String::from_utf8(store.redis_key(b"k", &policy)).unwrap();
    let pttl = || -> i64 { server.cmd(&["PTTL", &key]).parse().unwrap() };
    // TAT now + 100 ms: a new key, PX to the cell's end (250 ms, + 1 ms, + the minute an
    // explicit time adds).
    assert!(
        store
            .at(now)
            .check(b"k", &policy, 1)
            .await
            .unwrap()
            .is_allowed()
    );
    let first = pttl();
    assert!(first > 60_000 && first <= 60_251, "{first}");
    // A marker TTL shows which writes set one.
    server.cmd(&["PEXPIRE", &key, "999999"]);
    // TAT + 200 ms: the same cell, an INCRBY (the TTL stays).
    assert!(
        store
            .at(now)
            .check(b"k", &policy, 1)
            .await
            .unwrap()
            .is_allowed()
    );
    assert!(pttl() > 990_000, "renewed within its cell: {}", pttl());
    // TAT + 300 ms: the next cell, renewed to its end (500 ms).
    assert!(
        store
            .at(now)
            .check(b"k", &policy, 1)
            .await
            .unwrap()
            .is_allowed()
    );
    let third = pttl();
    assert!(third > 60_251 && third <= 60_501, "not renewed: {third}");
}

#[tokio::test]
async fn one_decision_runs_the_documented_commands_and_a_denial_writes_nothing() {
    let server = RedisServer::start();
    let store = RedisStore::connect(&server.url()).await.unwrap();
    let now = 1_700_000_000_000_000;
    let expected_allowed: [&[&str]; 6] = [
        &["get", "set"],
        &["get", "set"],
        &["get", "set"],
        &["get", "set"],
        &["hgetall", "hincrby", "pexpire"],
        &["exists", "pexpire", "zadd", "zcount", "zscore"],
    ];
    let reads: [&[&str]; 6] = [
        &["get"],
        &["get"],
        &["get"],
        &["get"],
        &["hgetall"],
        &["zcount", "zrange"],
    ];
    // A refused sliding log also reads which entry must leave first, and the newest (the
    // calls are listed by name).
    let denial_reads: [&[&str]; 6] = [
        &["get"],
        &["get"],
        &["get"],
        &["get"],
        &["hgetall"],
        &["zcount", "zrange", "zrangebyscore"],
    ];
    for (i, policy) in every_algorithm("cmds", "2/s").iter().enumerate() {
        // Warm the script cache so SCRIPT LOAD does not show up.
        store.at(now).check(b"warm", policy, 0).await.unwrap();
        let (d, calls) = run(&server, &store, policy, 2, now).await;
        assert!(d.is_allowed());
        assert_eq!(calls, expected_allowed[i], "{policy:?}");
        let (d, calls) = run(&server, &store, policy, 1, now).await;
        assert!(!d.is_allowed());
        assert_eq!(calls, denial_reads[i], "{policy:?}: a denial only reads");
        let (d, calls) = run(&server, &store, policy, 0, now).await;
        assert!(d.is_allowed());
        assert_eq!(calls, reads[i], "{policy:?}: a peek only reads");
    }
    // GCRA's (and the funnel's) next admission in the same cell of its key's TTL grid
    // moves the TAT by an INCRBY, which keeps the TTL; a refusal still only reads.
    for policy in [
        Policy::gcra("incr-gcra", "10/s".parse().unwrap()).unwrap(),
        Policy::leaky_bucket("incr-leaky", "10/s".parse().unwrap()).unwrap(),
    ] {
        assert!(run(&server, &store, &policy, 1, now).await.0.is_allowed());
        let (d, calls) = run(&server, &store, &policy, 1, now).await;
        assert!(d.is_allowed());
        assert_eq!(calls, ["get", "incrby"], "{policy:?}");
    }
    // With server time, TIME is the only extra command.
    let policy = Policy::gcra("timed", "2/s".parse().unwrap()).unwrap();
    store.check(b"warm", &policy, 0).await.unwrap();
    server.cmd(&["CONFIG", "RESETSTAT"]);
    store.check(b"k", &policy, 1).await.unwrap();
    let calls: Vec<_> = command_calls(&server)
        .into_iter()
        .map(|(c, _)| c)
        .filter(|c| !(c.starts_with("config") || c == "info"))
        .collect();
    assert_eq!(calls, ["evalsha", "get", "set", "time"]);
}

#[tokio::test]
async fn a_sliding_log_takes_costs_of_thousands_of_units_as_the_model_does() {
    // A sliding log keeps a member per unit and adds them 1,000 to a ZADD: a cost of 2,500
    // takes three, and the set then holds every unit (plus its newest-time marker).
    let server = RedisServer::start();
    let store = RedisStore::connect(&server.url()).await.unwrap();
    let policy = Policy::new(
        "big",
        floodwall_core::Algorithm::SlidingLog,
        "3000/1s".parse().unwrap(),
    )
    .unwrap();
    let key = String::from_utf8(store.redis_key(b"k", &policy)).unwrap();
    let mut state = floodwall_core::State::new();
    let t0 = 1_700_000_000_000_000u64;
    let steps = [
        (0, 2_500),
        (1, 501),
        (1, 500),
        (400_000, 1),
        (1_000_000, 2_999),
        (1_000_001, 3_000),
        (2_000_001, 3_000),
    ];
    for (i, (dt, cost)) in steps.into_iter().enumerate() {
        let got = store.at(t0 + dt).check(b"k", &policy, cost).await.unwrap();
        let want = policy.decide(&mut state, t0 + dt, cost).unwrap();
        assert_eq!(got, want, "step {i}: cost {cost} at +{dt} µs");
        if i == 0 {
            assert_eq!(server.cmd(&["ZCARD", &key]), "2501");
        }
    }
}

#[tokio::test]
async fn a_sliding_log_keeps_every_unit_when_the_clock_steps_back_onto_a_taken_place() {
    // 10 per 4 ms (a TTL grid of 1 ms). A unit's member is '<t>:<place>', its place one more
    // than the units counted then. Units counted at T that are dropped later let a check
    // back at T count fewer and reach a place already taken at T: the script must still
    // log the unit (under a name of its own), as the model counts it.
    let server = RedisServer::start();
    let store = RedisStore::connect(&server.url()).await.unwrap();
    let policy = Policy::new(
        "back",
        floodwall_core::Algorithm::SlidingLog,
        "10/4ms".parse().unwrap(),
    )
    .unwrap();
    let key = String::from_utf8(store.redis_key(b"k", &policy)).unwrap();
    let mut state = floodwall_core::State::new();
    let t = 1_700_000_000_000_000u64;
    let steps = [
        (t - 1_000, 5), // places 1..=5
        (t, 1),         // place 6
        (t + 3_500, 4), // a later cell: the five at t - 1 ms are dropped; places 2..=5
        (t, 1),         // back: 5 counted, place 6 again
        (t, 4),         // 6 counted: 4 more fit
        (t, 1),         // full
    ];
    for (i, (now, cost)) in steps.into_iter().enumerate() {
        let got = store.at(now).check(b"k", &policy, cost).await.unwrap();
        let want = policy.decide(&mut state, now, cost).unwrap();
        assert_eq!(got, want, "step {i}: cost {cost} at {now}");
        if i == 3 {
            // The marker, the unit at t, four at t + 3.5 ms and the new one.
            assert_eq!(server.cmd(&["ZCARD", &key]), "7");
        }
    }
}

#[tokio::test]
async fn a_fixed_window_counts_with_incrby_and_fast_windows_keep_a_pair() {
    let server = RedisServer::start();
    let store = RedisStore::connect(&server.url()).await.unwrap();
    let t0 = 1_700_000_000_000_000u64;
    let fixed = floodwall_core::Algorithm::FixedWindow;
    // The state packs as the window's start in µs + used while used is below the period
    // in µs: a new window is one SET, the next admission in it one INCRBY. 10,000,000/s
    // (10 units per µs) counting 2,000,003 in a 1 s window keeps '<index> <used>' (a SET,
    // keeping the TTL). Both decide as the model does. Each quota has a name of its own:
    // one name's windows of one period are one state, whatever the limit.
    for (name, quota, second, packed) in [
        ("fw", "100/s", 2, true),
        ("fw-bytes", "10000000/s", 2_000_000, false),
    ] {
        let policy = Policy::new(name, fixed, quota.parse().unwrap()).unwrap();
        let key = String::from_utf8(store.redis_key(b"k", &policy)).unwrap();
        let mut state = floodwall_core::State::new();
        store.at(t0).check(b"warm", &policy, 0).await.unwrap();
        let steps = [
            (0, 3, "set"),
            (5, second, if packed { "incrby" } else { "set" }),
        ];
        for (dt, cost, write) in steps {
            let (got, calls) = run(&server, &store, &policy, cost, t0 + dt).await;
            let want = policy.decide(&mut state, t0 + dt, cost).unwrap();
            assert_eq!(got, want, "{quota} at +{dt}");
            assert_eq!(calls, ["get", write], "{quota} at +{dt}");
        }
        let stored = server.cmd(&["GET", &key]);
        assert_eq!(stored.parse::<u64>().is_ok(), packed, "{quota}: {stored}");
        assert_eq!(stored.contains(' '), !packed, "{quota}: {stored}");
        // A refusal reads either form right, and writes nothing.
        let limit = policy.limit();
        let (got, calls) = run(&server, &store, &policy, limit, t0 + 9).await;
        assert_eq!(got, policy.decide(&mut state, t0 + 9, limit).unwrap());
        assert!(!got.is_allowed());
        assert_eq!(calls, ["get"], "{quota}");
    }
}

/// Decides once, and lists the commands the script ran, once per call.
async fn run(
    server: &RedisServer,
    store: &RedisStore,
    policy: &Policy,
    cost: u64,
    now: u64,
) -> (floodwall_core::Decision, Vec<String>) {
    server.cmd(&["CONFIG", "RESETSTAT"]);
    let d = store.at(now).check(b"k", policy, cost).await.unwrap();
    let calls = command_calls(server)
        .into_iter()
        .filter(|(c, _)| !(c.starts_with("config") || c == "evalsha" || c == "info"))
        .flat_map(|(c, n)| std::iter::repeat_n(c, n as usize))
        .collect();
    (d, calls)
}

/// `MEMORY USAGE` of `key`.
fn memory_usage(server: &RedisServer, key: &[u8]) -> u64 {
    let key = std::str::from_utf8(key).unwrap();
    server
        .cmd(&["MEMORY", "USAGE", key, "SAMPLES", "0"])
        .parse()
        .unwrap()
}

#[tokio::test]
async fn memory_one_key_costs() {
    let server = RedisServer::start();
    let store = RedisStore::connect(&server.url()).await.unwrap();
    let start = 1_700_000_000_000_000u64;
    let mut report = Vec::new();
    for algorithm in floodwall_core::Algorithm::all() {
        // 100/min: windows of ten 6 s buckets; a log of up to 100 entries.
        let policy = Policy::new("per-ip", algorithm, "100/min".parse().unwrap()).unwrap();
        let key = store.redis_key(b"203.0.113.7", &policy);
        store
            .at(start)
            .check(b"203.0.113.7", &policy, 1)
            .await
            .unwrap();
        let one = memory_usage(&server, &key);
        // Fill the shape: a request in each of the ten buckets, or 100 log entries.
        let (requests, step) = match algorithm {
            floodwall_core::Algorithm::SlidingLog => (99, 1_000),
            _ => (9, 6_000_000),
        };
        for i in 1..=requests {
            let d = store
                .at(start + i * step)
                .check(b"203.0.113.7", &policy, 1)
                .await
                .unwrap();
            assert!(d.is_allowed());
        }
        let full = memory_usage(&server, &key);
        report.push(format!(
            "{:<15} {:<48} first request {one:>4} B, after {} more {full:>5} B",
            algorithm.name(),
            String::from_utf8_lossy(&key),
            requests
        ));
        // Regression bounds, a little above what Redis 7.0 measured (see the crate docs).
        let (bound_one, bound_full) = match algorithm {
            floodwall_core::Algorithm::SlidingWindow { .. } => (160, 400),
            floodwall_core::Algorithm::SlidingLog => (160, 3_900),
            _ => (160, 160),
        };
        assert!(
            one <= bound_one && full <= bound_full,
            "{}",
            report.last().unwrap()
        );
    }
    println!("MEMORY USAGE per key:\n{}", report.join("\n"));
}
